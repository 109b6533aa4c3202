package dev.kvc;

/** Levels of KV memory (kvc_tier). */
public enum Tier {
    DEVICE(0),
    HOST(1),
    DISK(2);

    /** Disk tier flag: keep the file's blocks, found again (verified) when re-attached. */
    public static final int DISK_PERSISTENT = 1;
    /** Disk tier flag: never try O_DIRECT. */
    public static final int DISK_NO_DIRECT = 2;
    /** The longest identity {@link Tiers#attachDisk(String, long, int, String)} takes, in UTF-8 bytes. */
    public static final int MAX_DISK_IDENTITY_LEN = 1024;
    /** The shortest key {@link Tiers#attachDisk(String, long, int, String, byte[])} takes, in bytes. */
    public static final int DISK_KEY_MIN_LEN = 16;
    /** The longest key {@link Tiers#attachDisk(String, long, int, String, byte[])} takes, in bytes. */
    public static final int DISK_KEY_MAX_LEN = 64;

    private final int code;

    Tier(int code) {
        this.code = code;
    }

    public int code() {
        return code;
    }

    static Tier of(int code) {
        for (Tier t : values()) {
            if (t.code == code) {
                return t;
            }
        }
        throw new KvcException(Status.INTERNAL, "kvc_tier_get_stats", "unknown tier " + code);
    }
}
