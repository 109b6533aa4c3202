package dev.kvc;

/** Kind of a KV-cache group of a hybrid pool (kvc_group_kind; {@link Pool#createHybrid}). */
public enum GroupKind {
    /** Full attention: every position's K and V. */
    FULL(0),
    /** Sliding-window attention of {@link GroupConfig#slidingWindow()} tokens. */
    SLIDING(1),
    /** Fixed-size per-sequence state (Mamba conv + SSM state). */
    SSM(2);

    private final int code;

    GroupKind(int code) {
        this.code = code;
    }

    public int code() {
        return code;
    }

    static GroupKind of(int code) {
        for (GroupKind k : values()) {
            if (k.code == code) {
                return k;
            }
        }
        throw new KvcException(Status.INVALID_ARG, "GroupKind.of", "unknown group kind " + code);
    }
}
