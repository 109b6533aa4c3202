package dev.kvc;

/** Where a pool keeps its KV storage (kvc_backend). */
public enum Backend {
    /** Metadata only: block tables, no KV storage. */
    NONE(0),
    CPU(1),
    CUDA(2),
    /** CUDA if a usable device exists, else CPU. */
    AUTO(3);

    private final int code;

    Backend(int code) {
        this.code = code;
    }

    public int code() {
        return code;
    }

    static Backend of(int code) {
        for (Backend b : values()) {
            if (b.code == code) {
                return b;
            }
        }
        throw new KvcException(Status.INVALID_ARG, "Backend.of", "unknown backend " + code);
    }
}
