package dev.kvc;

import java.lang.ref.Cleaner;
import java.util.concurrent.locks.ReentrantReadWriteLock;

/**
 * Cache keys (kvc_keys): what besides token ids identifies a block's KV content (LoRA adapter, cache
 * salt, multimodal items) plus the retention priority and the prefix hit cap. Pass null where none are needed. Safe for
 * use from several threads: setters are serialised against the pool calls that read the keys.
 */
public final class Keys implements AutoCloseable {
    public static final int PRIORITY_MIN = 0;
    public static final int PRIORITY_MAX = 100;
    public static final int PRIORITY_DEFAULT = 50;
    public static final int MAX_SALT_LEN = 256;

    /** Handle and lock; the Cleaner's action, so it must not reference the Keys object. */
    static final class State implements Runnable {
        final ReentrantReadWriteLock lock = new ReentrantReadWriteLock();
        long handle;

        State(long handle) {
            this.handle = handle;
        }

        @Override
        public void run() {
            lock.writeLock().lock();
            try {
                if (handle != 0) {
                    KvcNative.kvc_keys_destroy(handle);
                    handle = 0;
                }
            } finally {
                lock.writeLock().unlock();
            }
        }
    }

    final State state;
    private final Cleaner.Cleanable cleanable;

    private Keys(long handle) {
        state = new State(handle);
        cleanable = Cleaners.CLEANER.register(this, state);
    }

    /** An empty key set (kvc_keys_create). */
    public static Keys create() {
        long[] out = new long[1];
        KvcNative.kvc_keys_create(out);
        return new Keys(out[0]);
    }

    /** Destroys the key set (kvc_keys_destroy); waits for calls in flight; idempotent. */
    @Override
    public void close() {
        cleanable.clean();
    }

    /** A call reading the keys' handle (0 for no keys). */
    interface Reader<T> {
        T call(long keys);
    }

    /** Runs f with the keys' handle under their read lock, so setters wait; null keys pass 0. */
    static <T> T read(String op, Keys keys, Reader<T> f) {
        if (keys == null) {
            return f.call(0L);
        }
        keys.state.lock.readLock().lock();
        try {
            if (keys.state.handle == 0) {
                throw KvcException.closed(op);
            }
            return f.call(keys.state.handle);
        } finally {
            keys.state.lock.readLock().unlock();
        }
    }

    private interface Setter {
        void call(long handle);
    }

    private void set(String op, Setter f) {
        state.lock.writeLock().lock();
        try {
            if (state.handle == 0) {
                throw KvcException.closed(op);
            }
            f.call(state.handle);
        } finally {
            state.lock.writeLock().unlock();
        }
    }

    /** Resets to empty for reuse (kvc_keys_clear). */
    public void clear() {
        set("Keys.clear", KvcNative::kvc_keys_clear);
    }

    /** LoRA adapter id, 0 = none (kvc_keys_set_lora); an unsigned 64-bit value. */
    public void setLora(long loraId) {
        set("Keys.setLora", h -> KvcNative.kvc_keys_set_lora(h, loraId));
    }

    /**
     * Cache salt for tenant isolation, null or "" = none (kvc_keys_set_salt). Passed as UTF-8; a salt
     * containing U+0000 is rejected (C would truncate it).
     */
    public void setSalt(String salt) {
        final byte[] bytes = salt == null ? null : CStrings.utf8z("Keys.setSalt", "salt", salt);
        set("Keys.setSalt", h -> KvcNative.kvc_keys_set_salt(h, bytes));
    }

    /** Adds a multimodal item covering prompt tokens [offset, offset+length) (kvc_keys_add_mm). */
    public void addMultimodal(long hashHi, long hashLo, long offset, long length) {
        set("Keys.addMultimodal", h -> KvcNative.kvc_keys_add_mm(h, hashHi, hashLo, offset, length));
    }

    /** Retention priority in [PRIORITY_MIN, PRIORITY_MAX] (kvc_keys_set_priority). */
    public void setPriority(int priority) {
        set("Keys.setPriority", h -> KvcNative.kvc_keys_set_priority(h, priority));
    }

    /**
     * Caps the prefix hit of requests using these keys at maxTokens tokens, rounded down to a block
     * boundary (kvc_keys_set_max_cached_tokens): canAlloc, alloc, prefixLookup and the per-tier
     * lookup take the longest hit of at most that many tokens (with a sliding window, the largest
     * valid one below the cap) and the rest of the prompt is computed. For a model served from
     * several pools, whose prefill must start at one position in all of them: look up each pool
     * under the cap, lower the cap to the result until it stops changing, then allocate in every
     * pool under it. -1 removes the cap (the default; {@link #clear} resets it). prefixPin and
     * prefixUnpin ignore it. Values below -1 throw INVALID_ARG.
     */
    public void setMaxCachedTokens(long maxTokens) {
        set("Keys.setMaxCachedTokens", h -> KvcNative.kvc_keys_set_max_cached_tokens(h, maxTokens));
    }
}
