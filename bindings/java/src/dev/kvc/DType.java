package dev.kvc;

/** Element types (kvc_dtype). */
public enum DType {
    F32(0, 4),
    F16(1, 2),
    BF16(2, 2),
    /** KV cache only. */
    FP8_E4M3(3, 1);

    private final int code;
    private final int size;

    DType(int code, int size) {
        this.code = code;
        this.size = size;
    }

    public int code() {
        return code;
    }

    /** Bytes per element. */
    public int size() {
        return size;
    }

    static DType of(int code) {
        for (DType d : values()) {
            if (d.code == code) {
                return d;
            }
        }
        throw new KvcException(Status.INVALID_ARG, "DType.of", "unknown dtype " + code);
    }
}
