package dev.kvc;

/** Attention launch parameters (kvc_attention_params). {@link #defaults()} gives the library's. */
public final class AttentionParams implements Cloneable {
    private int numQHeads;
    private DType qDType;
    private float scale;
    private float kScale;
    private float vScale;
    private float logitSoftcap;
    private int slidingWindow;
    private int partitionSize;
    private float[] alibiSlopes;

    private AttentionParams() {}

    /** The library's defaults (kvc_attention_params_default). */
    public static AttentionParams defaults() {
        kvc_attention_params c = new kvc_attention_params();
        try {
            KvcNative.kvc_attention_params_default(c);
            AttentionParams p = new AttentionParams();
            p.numQHeads = c.getNum_q_heads();
            p.qDType = DType.of(c.getQ_dtype());
            p.scale = c.getScale();
            p.kScale = c.getK_scale();
            p.vScale = c.getV_scale();
            p.logitSoftcap = c.getLogit_softcap();
            p.slidingWindow = c.getSliding_window();
            p.partitionSize = c.getPartition_size();
            return p;
        } finally {
            c.delete();
        }
    }

    kvc_attention_params toNative() {
        kvc_attention_params c = new kvc_attention_params();
        KvcNative.kvc_attention_params_default(c);
        c.setNum_q_heads(numQHeads);
        c.setQ_dtype(qDType.code());
        c.setScale(scale);
        c.setK_scale(kScale);
        c.setV_scale(vScale);
        c.setLogit_softcap(logitSoftcap);
        c.setSliding_window(slidingWindow);
        c.setPartition_size(partitionSize);
        return c;
    }

    @Override
    public AttentionParams clone() {
        try {
            AttentionParams p = (AttentionParams) super.clone();
            p.alibiSlopes = alibiSlopes == null ? null : alibiSlopes.clone();
            return p;
        } catch (CloneNotSupportedException e) {
            throw new AssertionError(e);
        }
    }

    /** Query heads; 0 = the pool's. */
    public int numQHeads() { return numQHeads; }
    public AttentionParams numQHeads(int v) { numQHeads = v; return this; }
    /** dtype of q and out: F32, F16 or BF16. */
    public DType qDType() { return qDType; }
    public AttentionParams qDType(DType v) { qDType = v; return this; }
    /** Softmax scale; 0 = 1/sqrt(headDim). */
    public float scale() { return scale; }
    public AttentionParams scale(float v) { scale = v; return this; }
    public float kScale() { return kScale; }
    public AttentionParams kScale(float v) { kScale = v; return this; }
    public float vScale() { return vScale; }
    public AttentionParams vScale(float v) { vScale = v; return this; }
    /** &gt; 0: logits = softcap * tanh(logits / softcap). */
    public float logitSoftcap() { return logitSoftcap; }
    public AttentionParams logitSoftcap(float v) { logitSoftcap = v; return this; }
    /** &gt; 0: attend only to the last slidingWindow positions. */
    public int slidingWindow() { return slidingWindow; }
    public AttentionParams slidingWindow(int v) { slidingWindow = v; return this; }
    /** Decode split-K partition in tokens: 0 = auto, -1 = never split. */
    public int partitionSize() { return partitionSize; }
    public AttentionParams partitionSize(int v) { partitionSize = v; return this; }
    /** Host ALiBi slopes (one per query head) for the host-array launch; null = none. */
    public float[] alibiSlopes() { return alibiSlopes; }
    public AttentionParams alibiSlopes(float[] v) { alibiSlopes = v; return this; }
}
