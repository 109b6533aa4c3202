package dev.kvc;

/** libkvc status codes (kvc_status), with the values of kvc.h. */
public enum Status {
    OK(0),
    NULL_ARG(1),
    INVALID_ARG(2),
    OVERFLOW(3),
    NO_MEMORY(4),
    OUT_OF_BLOCKS(5),
    UNKNOWN_SEQ(6),
    SEQ_EXISTS(7),
    BUFFER_TOO_SMALL(8),
    MAX_LEN(9),
    BUSY(10),
    UNSUPPORTED(11),
    DEVICE(12),
    IO(13),
    VERSION(14),
    STATE(15),
    INTERNAL(16);

    private final int code;

    Status(int code) {
        this.code = code;
    }

    /** The numeric kvc_status. */
    public int code() {
        return code;
    }

    /** The status with this code, or null for a code this binding does not know. */
    public static Status of(int code) {
        for (Status s : values()) {
            if (s.code == code) {
                return s;
            }
        }
        return null;
    }

    /** The library's description (kvc_status_str). */
    public String description() {
        return KvcNative.kvc_status_str(code);
    }
}
