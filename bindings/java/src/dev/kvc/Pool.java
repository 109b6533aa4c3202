package dev.kvc;

import java.lang.ref.Cleaner;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.HashSet;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.locks.ReentrantReadWriteLock;

/**
 * A libkvc block pool (kvc_pool): sequences and their block tables, the prefix cache and, for the
 * CPU and CUDA backends, the KV storage. Safe for use from many threads. {@link #close()} is
 * idempotent and waits for calls in flight; any call after it throws a {@link KvcException} with
 * status {@link Status#STATE}. Closing a pool also closes its batches.
 *
 * <p>Sequence ids and other unsigned 64-bit values are carried bit for bit in Java longs. Host
 * buffers (CPU backend) are byte arrays in native byte order; their lengths are checked against
 * the shape before the call. Device memory and CUDA streams (CUDA backend) are addresses as longs.
 */
public final class Pool implements AutoCloseable {
    /** Handle, lock, open batches and agents; the Cleaner's action, so it must not reference the Pool. */
    static final class State implements Runnable {
        final ReentrantReadWriteLock lock = new ReentrantReadWriteLock();
        long handle;
        final Set<PoolChild> children = new HashSet<>(); // batches and transfer agents; guarded by itself

        State(long handle) {
            this.handle = handle;
        }

        @Override
        public void run() {
            lock.writeLock().lock();
            try {
                if (handle == 0) {
                    return;
                }
                synchronized (children) {
                    for (PoolChild c : children) {
                        c.destroy(); // a C batch or agent must not outlive its pool
                    }
                    children.clear();
                }
                KvcNative.kvc_pool_destroy(handle);
                handle = 0;
            } finally {
                lock.writeLock().unlock();
            }
        }
    }

    final State state;
    private final Cleaner.Cleanable cleanable;
    private final PoolConfig config; // resolved at creation
    private final StorageInfo storage; // null for a metadata-only pool

    private Pool(long handle) {
        state = new State(handle);
        cleanable = Cleaners.CLEANER.register(this, state);
        PoolConfig resolved;
        StorageInfo info;
        try {
            resolved = config();
            info = resolved.backend() == Backend.NONE ? null : storageInfo();
        } catch (RuntimeException e) {
            close();
            throw e;
        }
        config = resolved;
        storage = info;
    }

    /** Creates a pool (kvc_pool_create). Close it when done. */
    public static Pool create(PoolConfig cfg) {
        kvc_pool_config c = cfg.toNative();
        try {
            long[] out = new long[1];
            KvcNative.kvc_pool_create(c, out);
            return new Pool(out[0]);
        } finally {
            c.delete();
        }
    }

    /** Most groups a hybrid pool may have (KVC_MAX_GROUPS). */
    public static final int MAX_GROUPS = 8;

    /**
     * Creates a pool for a hybrid model (kvc_pool_create_hybrid; kvc.h "Hybrid models"):
     * groups.size() KV-cache groups (full attention, sliding window, SSM state) sharing one block
     * pool; layerToGroup[l] is the group of model layer l. cfg's shape (numLayers, numKvHeads,
     * headDim) is not read: it comes from the groups ({@link #config()} then reports the model's
     * layers and the first attention group's heads). A sequence has one block table per group
     * ({@link #groupBlockTable}); alloc, append, fork and free act on all of them at once. Close
     * the pool when done.
     */
    public static Pool createHybrid(PoolConfig cfg, java.util.List<GroupConfig> groups, int[] layerToGroup) {
        int n = groups.size();
        if (n < 1 || n > MAX_GROUPS) {
            // The library would refuse the count too; checked here because the C array is sized by it.
            throw new KvcException(Status.INVALID_ARG, "kvc_pool_create_hybrid",
                    "kvc_pool_create_hybrid: " + n + " groups, outside [1, " + MAX_GROUPS + "]");
        }
        int[] layers = orEmpty(layerToGroup);
        kvc_group_config arr = KvcNative.kvcjni_group_configs_new(n);
        if (arr == null) {
            throw new OutOfMemoryError("kvc_pool_create_hybrid: group configurations");
        }
        try {
            for (int i = 0; i < n; i++) {
                groups.get(i).toNative(KvcNative.kvcjni_group_configs_at(arr, i));
            }
            kvc_pool_config c = cfg.toNative();
            try {
                long[] out = new long[1];
                KvcNative.kvc_pool_create_hybrid(c, arr, n, layers, layers.length, out);
                return new Pool(out[0]);
            } finally {
                c.delete();
            }
        } finally {
            KvcNative.kvcjni_group_configs_delete(arr);
        }
    }

    /** Destroys the pool, its sequences, storage and batches (kvc_pool_destroy). Idempotent. */
    @Override
    public void close() {
        cleanable.clean();
    }

    // ---- plumbing --------------------------------------------------------------------------------

    interface PoolCall<T> {
        T call(long pool);
    }

    interface PoolKeysCall<T> {
        T call(long pool, long keys);
    }

    /** Runs f with the open pool's handle under the read lock. */
    <T> T with(String op, PoolCall<T> f) {
        state.lock.readLock().lock();
        try {
            if (state.handle == 0) {
                throw KvcException.closed(op);
            }
            return f.call(state.handle);
        } finally {
            state.lock.readLock().unlock();
        }
    }

    private <T> T withKeys(String op, Keys keys, PoolKeysCall<T> f) {
        return Keys.read(op, keys, k -> with(op, h -> f.call(h, k)));
    }

    private static int[] orEmpty(int[] a) {
        return a == null ? new int[0] : a;
    }

    // ---- configuration, checks, statistics ----------------------------------------------------------

    /** The resolved configuration, numBlocks filled in (kvc_pool_get_config). */
    public PoolConfig config() {
        return with("kvc_pool_get_config", h -> {
            kvc_pool_config c = new kvc_pool_config();
            try {
                KvcNative.kvc_pool_get_config(h, c);
                return PoolConfig.fromNative(c);
            } finally {
                c.delete();
            }
        });
    }

    /**
     * Turns on sliding-window attention for every sequence (kvc_pool_set_sliding_window): from then
     * on append releases a sequence's blocks that lie wholly before the window of the first token
     * its previous call added (for the first append after alloc: the prompt's first uncached
     * position), so a step may append its pending token and its drafts in two calls before one
     * launch; their blockTable entries read -1. 0 turns it off. Allowed only while the pool has no
     * sequences (status STATE otherwise); a negative window is INVALID_ARG.
     */
    public void setSlidingWindow(int window) {
        with("kvc_pool_set_sliding_window", h -> KvcNative.kvc_pool_set_sliding_window(h, window));
    }

    /** The pool's sliding window, 0 when off (kvc_pool_get_sliding_window). */
    public int slidingWindow() {
        int[] w = new int[1];
        with("kvc_pool_get_sliding_window", h -> KvcNative.kvc_pool_get_sliding_window(h, w));
        return w[0];
    }

    /** Runs the invariant checker (kvc_pool_check); throws with status INTERNAL on a violation. */
    public void check() {
        with("kvc_pool_check", KvcNative::kvc_pool_check);
    }

    /** A snapshot of the counters (kvc_pool_stats). */
    public Stats stats() {
        return with("kvc_pool_stats", h -> {
            kvc_stats s = new kvc_stats();
            try {
                KvcNative.kvc_pool_stats(h, s);
                return Stats.fromNative(s);
            } finally {
                s.delete();
            }
        });
    }

    // ---- sequences ------------------------------------------------------------------------------------

    /** Would alloc of this prompt succeed now, later or never? (kvc_can_alloc) */
    public AllocVerdict canAlloc(int[] tokens, Keys keys) {
        int[] t = orEmpty(tokens);
        int[] v = new int[1];
        withKeys("kvc_can_alloc", keys, (h, k) -> KvcNative.kvc_can_alloc(h, t, t.length, k, v));
        return AllocVerdict.of(v[0]);
    }

    /**
     * Creates sequence seqId holding the prompt, sharing the longest cached prefix (kvc_alloc).
     * Returns the number of tokens whose KV is already present.
     */
    public long alloc(long seqId, int[] tokens, Keys keys) {
        int[] t = orEmpty(tokens);
        long[] cached = new long[1];
        withKeys("kvc_alloc", keys, (h, k) -> KvcNative.kvc_alloc(h, seqId, t, t.length, k, cached));
        return cached[0];
    }

    /**
     * canAlloc and, when the verdict is OK, alloc, in one call that walks the prompt once
     * (kvc_admit): how a scheduler admits a waiting request. Only with verdict OK was seqId created;
     * LATER and NEVER change nothing.
     */
    public Admission admit(long seqId, int[] tokens, Keys keys) {
        int[] t = orEmpty(tokens);
        int[] v = new int[1];
        long[] cached = new long[1];
        withKeys("kvc_admit", keys, (h, k) -> KvcNative.kvc_admit(h, seqId, t, t.length, k, v, cached));
        return new Admission(AllocVerdict.of(v[0]), cached[0]);
    }

    /** Creates seqId with numTokens tokens and no token ids (prefix caching off). */
    public void allocN(long seqId, long numTokens, Keys keys) {
        withKeys("kvc_alloc", keys, (h, k) -> KvcNative.kvc_alloc(h, seqId, null, numTokens, k, null));
    }

    /**
     * Confirms tokens for seqId and reserves lookahead further slots (kvc_append). Returns the blocks
     * taken, copy-on-write blocks included.
     */
    public int append(long seqId, int[] tokens, long lookahead) {
        int[] t = orEmpty(tokens);
        int[] n = new int[1];
        with("kvc_append", h -> KvcNative.kvc_append(h, seqId, t, t.length, lookahead, n));
        return n[0];
    }

    /**
     * A decode step for many sequences in one call (kvc_append_batch): entry i appends
     * tokens[tokenOffsets[i] .. tokenOffsets[i+1]) to seqIds[i] and reserves lookaheadPerSeq[i]
     * further slots (lookaheadPerSeq null: lookahead for every entry), exactly as the append calls
     * it stands for, in order. tokenOffsets has seqIds.length + 1 entries from 0; null means one
     * token per entry, tokens[i]. newBlocks (null, or seqIds.length entries) receives each appended
     * entry's new blocks. Returns seqIds.length. Throws {@link AppendBatchException} when libkvc
     * refuses: at the first entry append would refuse, the entries before it appended (appended()),
     * or for bad arguments in any entry, nothing changed (appended() 0). Arrays shorter than the
     * entries imply throw KvcException (INVALID_ARG) before libkvc is called.
     */
    public int appendBatch(long[] seqIds, long[] tokenOffsets, int[] tokens, long lookahead, long[] lookaheadPerSeq,
                           int[] newBlocks) {
        final String op = "kvc_append_batch";
        long[] ids = seqIds == null ? new long[0] : seqIds;
        int n = ids.length;
        int[] t = orEmpty(tokens);
        // The C call reads these arrays by the lengths the entries imply: check them here.
        if (tokenOffsets != null) {
            if (tokenOffsets.length != n + 1)
                throw new KvcException(Status.INVALID_ARG, op, "tokenOffsets has " + tokenOffsets.length
                        + " entries, want seqIds.length + 1 = " + (n + 1));
            if (tokenOffsets[n] > t.length)
                throw new KvcException(Status.INVALID_ARG, op, "tokenOffsets end at " + tokenOffsets[n]
                        + ", past the " + t.length + " tokens");
        } else if (t.length < n) {
            throw new KvcException(Status.INVALID_ARG, op, t.length + " tokens for " + n + " entries of one token each");
        }
        if (lookaheadPerSeq != null && lookaheadPerSeq.length != n)
            throw new KvcException(Status.INVALID_ARG, op, "lookaheadPerSeq has " + lookaheadPerSeq.length
                    + " entries, want " + n);
        if (newBlocks != null && newBlocks.length != n)
            throw new KvcException(Status.INVALID_ARG, op, "newBlocks has " + newBlocks.length + " entries, want " + n);
        int[] done = new int[1];
        try {
            with(op, h -> KvcNative.kvc_append_batch(h, n, ids, tokenOffsets, t, lookahead, lookaheadPerSeq,
                    newBlocks, done));
        } catch (KvcException e) {
            throw new AppendBatchException(e, done[0]);
        }
        return done[0];
    }

    /** append without token ids (prefix caching off). */
    public int appendN(long seqId, long numTokens, long lookahead) {
        int[] n = new int[1];
        with("kvc_append", h -> KvcNative.kvc_append(h, seqId, null, numTokens, lookahead, n));
        return n[0];
    }

    /**
     * Rolls seqId back to its first numTokens confirmed tokens and drops its lookahead (kvc_truncate):
     * the rollback after speculative decoding rejects drafts. Blocks past the new end leave the table
     * (cached ones stay cached); returns how many left.
     */
    public int truncate(long seqId, long numTokens) {
        int[] freed = new int[1];
        with("kvc_truncate", h -> KvcNative.kvc_truncate(h, seqId, numTokens, freed));
        return freed[0];
    }

    /** Creates child sharing every block of parent (kvc_fork). */
    public void fork(long parentId, long childId) {
        with("kvc_fork", h -> KvcNative.kvc_fork(h, parentId, childId));
    }

    /** Frees seqId (kvc_free). */
    public void free(long seqId) {
        with("kvc_free", h -> KvcNative.kvc_free(h, seqId));
    }

    /**
     * Frees a sequence whose KV may never have been computed (kvc_abort): the blocks it filled itself
     * after its prompt's cache hit leave the prefix cache (unless shared or pinned), so a request
     * cancelled before its prefill, or a multi-pool allocation rolled back, leaves no KV-less cache
     * entries. Use {@link #free} for sequences that ran.
     */
    public void abort(long seqId) {
        with("kvc_abort", h -> KvcNative.kvc_abort(h, seqId));
    }

    /** seqId's block table (kvc_seq_block_table). */
    public int[] blockTable(long seqId) {
        return with("kvc_seq_block_table", h -> {
            long[] len = new long[1];
            int[] buf = new int[16];
            while (true) {
                try {
                    KvcNative.kvc_seq_block_table(h, seqId, buf, buf.length, len);
                } catch (KvcException e) {
                    if (e.status() != Status.BUFFER_TOO_SMALL) {
                        throw e;
                    }
                    // Only this pool's other threads could grow the table in between: retry.
                    buf = new int[Math.toIntExact(len[0])];
                    continue;
                }
                return java.util.Arrays.copyOf(buf, Math.toIntExact(len[0]));
            }
        });
    }

    /**
     * Group {@code group}'s block table of seqId (kvc_seq_group_block_table); released entries (a
     * SLIDING group's window, an SSM group's older pages) read -1. Group 0 is {@link #blockTable}.
     * A group out of range is {@link Status#INVALID_ARG}.
     */
    public int[] groupBlockTable(long seqId, int group) {
        return with("kvc_seq_group_block_table", h -> {
            long[] len = new long[1];
            int[] buf = new int[16];
            while (true) {
                try {
                    KvcNative.kvc_seq_group_block_table(h, seqId, group, buf, buf.length, len);
                } catch (KvcException e) {
                    if (e.status() != Status.BUFFER_TOO_SMALL) {
                        throw e;
                    }
                    // Only this pool's other threads could grow the table in between: retry.
                    buf = new int[Math.toIntExact(len[0])];
                    continue;
                }
                return java.util.Arrays.copyOf(buf, Math.toIntExact(len[0]));
            }
        });
    }

    /**
     * Describes group {@code group} of the pool (kvc_pool_get_group_info); a plain pool has one
     * group. A group out of range is {@link Status#INVALID_ARG}.
     */
    public GroupInfo groupInfo(int group) {
        return with("kvc_pool_get_group_info", h -> {
            kvc_group_info i = new kvc_group_info();
            try {
                KvcNative.kvc_pool_get_group_info(h, group, i);
                return new GroupInfo(i.getNum_groups(), GroupKind.of(i.getKind()), i.getNum_layers(),
                        i.getNum_kv_heads(), i.getHead_dim(), i.getSliding_window(), i.getState_bytes(),
                        i.getGroup_bytes(), i.getPage_bytes(), i.getLayer_stride());
            } finally {
                i.delete();
            }
        });
    }

    /**
     * The group of model layer {@code layer} and its index among that group's layers
     * (kvc_pool_layer_group). A layer out of range is {@link Status#INVALID_ARG}.
     */
    public LayerGroup layerGroup(int layer) {
        int[] g = new int[1];
        int[] l = new int[1];
        with("kvc_pool_layer_group", h -> KvcNative.kvc_pool_layer_group(h, layer, g, l));
        return new LayerGroup(g[0], l[0]);
    }

    /** Confirmed token count of seqId (kvc_seq_num_tokens). */
    public long numTokens(long seqId) {
        long[] n = new long[1];
        with("kvc_seq_num_tokens", h -> KvcNative.kvc_seq_num_tokens(h, seqId, n));
        return n[0];
    }

    /** Slots of positions [firstPos, firstPos+count) of seqId (kvc_seq_slot_mapping). */
    public long[] slotMapping(long seqId, long firstPos, int count) {
        if (count > config.numBlocks() * config.blockSize()) {
            // Beyond any sequence's reach: let the library name the error without allocating for it.
            try {
                with("kvc_seq_slot_mapping", h -> KvcNative.kvc_seq_slot_mapping(h, seqId, firstPos, count, null, 0));
            } catch (KvcException e) {
                if (e.status() != Status.BUFFER_TOO_SMALL) {
                    throw e;
                }
            }
            throw new KvcException(Status.INVALID_ARG, "kvc_seq_slot_mapping",
                    "count " + count + " exceeds the pool's capacity in slots");
        }
        long[] out = new long[Math.max(count, 0)];
        with("kvc_seq_slot_mapping", h -> KvcNative.kvc_seq_slot_mapping(h, seqId, firstPos, count, out, out.length));
        return out;
    }

    /** Number of queued copy-on-write pairs; nothing is drained. */
    public long pendingCopyCount() {
        long[] n = new long[1];
        with("kvc_take_pending_copies", h -> KvcNative.kvc_take_pending_copies(h, null, null, 0, n));
        return n[0];
    }

    /** Drains the queued copy-on-write pairs, oldest first (kvc_take_pending_copies). */
    public BlockCopies takePendingCopies() {
        return with("kvc_take_pending_copies", h -> {
            long[] n = new long[1];
            KvcNative.kvc_take_pending_copies(h, null, null, 0, n);
            int cap = Math.toIntExact(n[0]);
            int[] src = new int[cap];
            int[] dst = new int[cap];
            KvcNative.kvc_take_pending_copies(h, src, dst, cap, n);
            int got = Math.toIntExact(n[0]); // another thread may have drained some in between
            return new BlockCopies(java.util.Arrays.copyOf(src, got), java.util.Arrays.copyOf(dst, got));
        });
    }

    // ---- prefix cache and events -----------------------------------------------------------------------

    /** Leading tokens of this prompt cached now; no side effects (kvc_prefix_lookup). */
    public long prefixLookup(int[] tokens, Keys keys) {
        int[] t = orEmpty(tokens);
        long[] n = new long[1];
        withKeys("kvc_prefix_lookup", keys, (h, k) -> KvcNative.kvc_prefix_lookup(h, t, t.length, k, n));
        return n[0];
    }

    /**
     * Pins the cached full blocks of this prefix; returns the tokens covered (kvc_prefix_pin). Pins
     * nest. With a sliding window only the blocks a hit at the prefix's end reads are pinned (kvc.h).
     */
    public long prefixPin(int[] tokens, Keys keys) {
        int[] t = orEmpty(tokens);
        long[] n = new long[1];
        withKeys("kvc_prefix_pin", keys, (h, k) -> KvcNative.kvc_prefix_pin(h, t, t.length, k, n));
        return n[0];
    }

    /**
     * Undoes one prefixPin of the same prefix; returns the tokens covered (kvc_prefix_unpin). With
     * overlapping prefixes pinned, pass the tokens prefixPin covered.
     */
    public long prefixUnpin(int[] tokens, Keys keys) {
        int[] t = orEmpty(tokens);
        long[] n = new long[1];
        withKeys("kvc_prefix_unpin", keys, (h, k) -> KvcNative.kvc_prefix_unpin(h, t, t.length, k, n));
        return n[0];
    }

    /** Drops every cached block (kvc_prefix_cache_reset); BUSY while blocks are in use or pinned. */
    public void resetPrefixCache() {
        with("kvc_prefix_cache_reset", KvcNative::kvc_prefix_cache_reset);
    }

    /**
     * Makes KV events report the host and disk tiers too (kvc_pool_set_tier_events): a block spilled
     * from the device is BLOCK_REMOVED (device) then BLOCK_STORED (host) once copied, and so on down
     * to disk. Off by default; UNSUPPORTED when the pool has no event ring (eventCapacity 0).
     */
    public void setTierEvents(boolean on) {
        with("kvc_pool_set_tier_events", h -> KvcNative.kvc_pool_set_tier_events(h, on ? 1 : 0));
    }

    /** Pops the oldest pending KV event, or empty when none is pending (kvc_event_pop). */
    public Optional<Event> popEvent() {
        return with("kvc_event_pop", h -> {
            kvc_event e = new kvc_event();
            try {
                int[] tokens = new int[config.blockSize()];
                int[] has = new int[1];
                KvcNative.kvc_event_pop(h, e, tokens, tokens.length, has);
                if (has[0] == 0) {
                    return Optional.<Event>empty();
                }
                int n = Math.max(0, Math.min(e.getNum_tokens(), tokens.length));
                return Optional.of(new Event(EventType.of(e.getEvent_type()), e.getHash_hi(), e.getHash_lo(),
                        e.getParent_hash_hi(), e.getParent_hash_lo(), e.getLora_id(), e.getExtra_keys_digest(),
                        e.getBlock_id(), java.util.Arrays.copyOf(tokens, n), e.getSequence_number(),
                        Tier.of(e.getTier())));
            } finally {
                e.delete();
            }
        });
    }

    /** The pool's memory tiers: host and disk tiers, swap and recompute preemption. */
    public Tiers tiers() {
        return new Tiers(this);
    }

    long prefetchTiers(int[] tokens, Keys keys) {
        int[] t = orEmpty(tokens);
        long[] n = new long[1];
        withKeys("kvc_tier_prefetch", keys, (h, k) -> KvcNative.kvc_tier_prefetch(h, t, t.length, k, n));
        return n[0];
    }

    TierHits prefixLookupTiers(int[] tokens, Keys keys) {
        int[] t = orEmpty(tokens);
        long[] d = new long[1];
        long[] host = new long[1];
        long[] disk = new long[1];
        withKeys("kvc_prefix_lookup_tiers", keys,
                (h, k) -> KvcNative.kvc_prefix_lookup_tiers(h, t, t.length, k, d, host, disk));
        return new TierHits(d[0], host[0], disk[0]);
    }

    // ---- KV storage ---------------------------------------------------------------------------------------

    /** Describes the KV storage (kvc_storage_get_info); STATE for a metadata-only pool. */
    public StorageInfo storageInfo() {
        return with("kvc_storage_get_info", h -> {
            kvc_storage_info s = new kvc_storage_info();
            try {
                KvcNative.kvc_storage_get_info(h, s);
                return new StorageInfo(Backend.of(s.getBackend()), DType.of(s.getKv_dtype()), s.getElem_bytes(),
                        s.getDevice(), s.getBase_address(), s.getTotal_bytes(), s.getBlock_stride(),
                        s.getLayer_stride(), s.getKv_stride(), s.getHead_stride(), s.getToken_stride());
            } finally {
                s.delete();
            }
        });
    }

    private void requireHostStorage(String op) {
        if (storage != null && storage.backend() == Backend.CUDA) {
            throw new KvcException(Status.INVALID_ARG, op,
                    "the pool's storage is in device memory; use the ...At form with device addresses");
        }
    }

    private static void requireBytes(String op, String what, byte[] buf, long need) {
        long have = buf == null ? 0 : buf.length;
        if (have < need) {
            throw new KvcException(Status.BUFFER_TOO_SMALL, op,
                    what + " has " + have + " bytes, the shape needs " + need);
        }
    }

    /**
     * Writes one step's new K and V of one layer into their slots (kvc_cache_write), CPU backend:
     * k and v are [slots.length, numKvHeads, headDim] in src, native byte order; slot &lt; 0 = padding.
     */
    public void cacheWrite(int layer, long[] slots, byte[] k, byte[] v, DType src, float kScale, float vScale) {
        String op = "kvc_cache_write";
        requireHostStorage(op);
        long[] s = slots == null ? new long[0] : slots;
        long need = (long) s.length * config.numKvHeads() * config.headDim() * src.size();
        requireBytes(op, "k", k, need);
        requireBytes(op, "v", v, need);
        with(op, h -> KvcNative.kvc_cache_write(h, layer, s, s.length, k, v, src.code(), kScale, vScale, 0L));
    }

    /** cacheWrite with float32 rows (src = F32). */
    public void cacheWrite(int layer, long[] slots, float[] k, float[] v, float kScale, float vScale) {
        cacheWrite(layer, slots, toBytes(k), toBytes(v), DType.F32, kScale, vScale);
    }

    /** cacheWrite with backend-memory addresses (device memory on CUDA), ordered on stream. */
    public void cacheWriteAt(int layer, long slotMappingAddr, long numTokens, long kAddr, long vAddr, DType src,
            float kScale, float vScale, long stream) {
        with("kvc_cache_write", h -> KvcNative.kvcjni_cache_write_addr(h, layer, slotMappingAddr, numTokens, kAddr,
                vAddr, src.code(), kScale, vScale, stream));
    }

    /** Drains the pending copy-on-write pairs and copies those blocks (kvc_copy_pending); returns the
     *  pairs this call copied. Safe from many threads: when it returns, every pair queued before the
     *  call has been copied (on CUDA: is ordered before later work on the stream), whichever
     *  thread's call drained it. */
    public long copyPending(long stream) {
        long[] n = new long[1];
        with("kvc_copy_pending", h -> KvcNative.kvc_copy_pending(h, stream, n));
        return n[0];
    }

    /** Copies whole blocks to dst, block i at i*blockStride (kvc_storage_copy_blocks to host). */
    public void readBlocks(int[] blockIds, byte[] dst) {
        copyBlocks("kvc_storage_copy_blocks", blockIds, dst, 1);
    }

    /** Copies whole blocks from src, block i at i*blockStride (kvc_storage_copy_blocks from host). */
    public void writeBlocks(int[] blockIds, byte[] src) {
        copyBlocks("kvc_storage_copy_blocks", blockIds, src, 0);
    }

    private void copyBlocks(String op, int[] blockIds, byte[] host, int toHost) {
        int[] ids = orEmpty(blockIds);
        byte[] buf = host == null ? new byte[0] : host;
        if (storage != null) {
            requireBytes(op, "host buffer", buf, ids.length * storage.blockStride());
        }
        with(op, h -> KvcNative.kvc_storage_copy_blocks(h, ids, ids.length, buf, toHost));
    }

    // ---- batches and attention ---------------------------------------------------------------------------

    /** A batch with fixed capacities for this pool (kvc_batch_create). */
    public Batch newBatch(int maxSeqs, long maxTokens, int maxBlocksPerSeq) {
        return with("kvc_batch_create", h -> {
            long[] out = new long[1];
            KvcNative.kvc_batch_create(h, maxSeqs, maxTokens, maxBlocksPerSeq, out);
            return new Batch(this, out[0]);
        });
    }

    private int qHeads(AttentionParams p) {
        if (p.numQHeads() > 0) {
            return p.numQHeads();
        }
        return config.numQHeads() > 0 ? config.numQHeads() : config.numKvHeads();
    }

    /**
     * Paged attention for one layer over the batch's last build (kvc_launch_attention), CPU backend:
     * q and out are [numTokens, heads, headDim] in params.qDType(), native byte order.
     */
    public void launchAttention(Batch batch, int layer, byte[] q, byte[] out, AttentionParams params) {
        String op = "kvc_launch_attention";
        requireHostStorage(op);
        if (batch.pool != this) {
            throw new KvcException(Status.STATE, op, "the batch belongs to another pool");
        }
        float[] alibi = params.alibiSlopes();
        if (alibi != null && alibi.length < qHeads(params)) {
            throw new KvcException(Status.INVALID_ARG, op, "alibiSlopes has fewer entries than query heads");
        }
        kvc_attention_params c = params.toNative();
        try {
            batch.withRead(op, (h, b) -> {
                // Checked under the batch's read lock: no build can change the size before the call.
                long need = batchTokens(b) * qHeads(params) * config.headDim() * params.qDType().size();
                requireBytes(op, "q", q, need);
                requireBytes(op, "out", out, need);
                if (alibi == null) {
                    return KvcNative.kvc_launch_attention(h, b, layer, q, out, c, 0L);
                }
                return KvcNative.kvcjni_launch_attention_host(h, b, layer, q, out, c, alibi);
            });
        } finally {
            c.delete();
        }
    }

    /** launchAttention with float32 q and out. */
    public void launchAttention(Batch batch, int layer, float[] q, float[] out, AttentionParams params) {
        byte[] o = new byte[out.length * 4];
        launchAttention(batch, layer, toBytes(q), o, params.clone().qDType(DType.F32));
        ByteBuffer.wrap(o).order(ByteOrder.nativeOrder()).asFloatBuffer().get(out);
    }

    /**
     * launchAttention with backend-memory addresses (device memory on CUDA), asynchronous on stream;
     * alibiAddr is 0 or the address of numQHeads slopes (params.alibiSlopes() is ignored).
     */
    public void launchAttentionAt(Batch batch, int layer, long qAddr, long outAddr, AttentionParams params,
            long alibiAddr, long stream) {
        String op = "kvc_launch_attention";
        if (batch.pool != this) {
            throw new KvcException(Status.STATE, op, "the batch belongs to another pool");
        }
        kvc_attention_params c = params.toNative();
        try {
            batch.withRead(op, (h, b) -> KvcNative.kvcjni_launch_attention_addr(h, b, layer, qAddr, outAddr, c,
                    alibiAddr, stream));
        } finally {
            c.delete();
        }
    }

    private static long batchTokens(long batchHandle) {
        kvc_batch_info i = new kvc_batch_info();
        try {
            KvcNative.kvc_batch_get_info(batchHandle, i);
            return i.getNum_tokens();
        } finally {
            i.delete();
        }
    }

    static byte[] toBytes(float[] f) {
        if (f == null) {
            return null;
        }
        ByteBuffer b = ByteBuffer.allocate(f.length * 4).order(ByteOrder.nativeOrder());
        b.asFloatBuffer().put(f);
        return b.array();
    }
}
