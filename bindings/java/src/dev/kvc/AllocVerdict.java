package dev.kvc;

/** Answer of {@link Pool#canAlloc} (vLLM's watermark rule). */
public enum AllocVerdict {
    /** Fits now and leaves the watermark free. */
    OK,
    /** Fits once other sequences free blocks. */
    LATER,
    /** Can never fit in this pool. */
    NEVER;

    static AllocVerdict of(int code) {
        switch (code) {
            case 0: return OK;
            case 1: return LATER;
            case 2: return NEVER;
            default: throw new KvcException(Status.INTERNAL, "kvc_can_alloc", "unknown verdict " + code);
        }
    }
}
