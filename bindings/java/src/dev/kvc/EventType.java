package dev.kvc;

/** KV event types (kvc_event_type). */
public enum EventType {
    /** A full block entered the prefix cache (also another copy of a cached hash: each copy has its own). */
    BLOCK_STORED(1),
    /** A cached block left the prefix cache; other copies of its hash stay cached. */
    BLOCK_REMOVED(2),
    /** {@link Pool#resetPrefixCache}. */
    ALL_BLOCKS_CLEARED(3);

    private final int code;

    EventType(int code) {
        this.code = code;
    }

    public int code() {
        return code;
    }

    static EventType of(int code) {
        for (EventType t : values()) {
            if (t.code == code) {
                return t;
            }
        }
        throw new KvcException(Status.INTERNAL, "kvc_event_pop", "unknown event type " + code);
    }
}
