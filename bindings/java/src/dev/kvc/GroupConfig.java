package dev.kvc;

/**
 * One KV-cache group of a hybrid pool (kvc_group_config; {@link Pool#createHybrid}). Start from
 * {@link #defaults()} (kvc_group_config_default: a FULL group of one layer, one KV head of
 * dimension 128) and set what differs; setters return this.
 */
public final class GroupConfig implements Cloneable {
    private GroupKind kind;
    private int numLayers;
    private int numKvHeads;
    private int headDim;
    private int slidingWindow;
    private long stateBytes;

    private GroupConfig() {}

    /** The library's defaults (kvc_group_config_default). */
    public static GroupConfig defaults() {
        kvc_group_config c = new kvc_group_config();
        try {
            KvcNative.kvc_group_config_default(c);
            GroupConfig g = new GroupConfig();
            g.kind = GroupKind.of(c.getKind());
            g.numLayers = c.getNum_layers();
            g.numKvHeads = c.getNum_kv_heads();
            g.headDim = c.getHead_dim();
            g.slidingWindow = c.getSliding_window();
            g.stateBytes = c.getState_bytes();
            return g;
        } finally {
            c.delete();
        }
    }

    /** Fills c (an entry of a C array) with the library's defaults, then this configuration. */
    void toNative(kvc_group_config c) {
        KvcNative.kvc_group_config_default(c); // struct_size, and any field a newer header appends
        c.setKind(kind.code());
        c.setNum_layers(numLayers);
        c.setNum_kv_heads(numKvHeads);
        c.setHead_dim(headDim);
        c.setSliding_window(slidingWindow);
        c.setState_bytes(stateBytes);
    }

    @Override
    public GroupConfig clone() {
        try {
            return (GroupConfig) super.clone();
        } catch (CloneNotSupportedException e) {
            throw new AssertionError(e);
        }
    }

    @Override
    public String toString() {
        return "GroupConfig{kind=" + kind + ", numLayers=" + numLayers + ", numKvHeads=" + numKvHeads
                + ", headDim=" + headDim + ", slidingWindow=" + slidingWindow + ", stateBytes=" + stateBytes + "}";
    }

    /** The group's kind. */
    public GroupKind kind() { return kind; }
    public GroupConfig kind(GroupKind v) { kind = v; return this; }
    /** Layers of this group, >= 1; createHybrid's layerToGroup names them. */
    public int numLayers() { return numLayers; }
    public GroupConfig numLayers(int v) { numLayers = v; return this; }
    /** FULL / SLIDING: KV heads, >= 1; SSM: ignored. */
    public int numKvHeads() { return numKvHeads; }
    public GroupConfig numKvHeads(int v) { numKvHeads = v; return this; }
    /** FULL / SLIDING: head dimension, >= 1; SSM: ignored. */
    public int headDim() { return headDim; }
    public GroupConfig headDim(int v) { headDim = v; return this; }
    /** SLIDING: window in tokens, >= 1; must be 0 for the other kinds. */
    public int slidingWindow() { return slidingWindow; }
    public GroupConfig slidingWindow(int v) { slidingWindow = v; return this; }
    /** SSM: bytes of one layer's state for one sequence, >= 1; 0 otherwise. */
    public long stateBytes() { return stateBytes; }
    public GroupConfig stateBytes(long v) { stateBytes = v; return this; }
}
