package dev.kvc;

/**
 * The memory tiers of a pool (device, host, disk): attaching them, swap preemption, recomputation
 * preemption and per-tier statistics. A view of its Pool ({@link Pool#tiers()}); closing the pool
 * closes it.
 */
public final class Tiers {
    private final Pool pool;

    Tiers(Pool pool) {
        this.pool = pool;
    }

    /** Attaches a host tier of numBlocks block slots, once (kvc_tier_attach_host). */
    public void attachHost(long numBlocks) {
        pool.with("kvc_tier_attach_host", h -> KvcNative.kvc_tier_attach_host(h, numBlocks));
    }

    /**
     * Attaches a disk tier of numBlocks slots in the file at path (UTF-8), below the host tier,
     * once (kvc_tier_attach_disk). flags: {@link Tier#DISK_PERSISTENT}, {@link Tier#DISK_NO_DIRECT}.
     */
    public void attachDisk(String path, long numBlocks, int flags) {
        byte[] cpath = CStrings.utf8z("kvc_tier_attach_disk", "path", path);
        pool.with("kvc_tier_attach_disk", h -> KvcNative.kvc_tier_attach_disk(h, cpath, numBlocks, flags));
    }

    /**
     * As {@link #attachDisk(String, long, int)}, for KV computed by identity — model and revision, KV
     * dtype, and under tensor parallelism rank and world size (kvc_tier_attach_disk_with_identity). A
     * {@link Tier#DISK_PERSISTENT} re-attach recovers only the blocks written under the same identity;
     * the others count in {@link TierStats#foreignBlocks()}. "" is no identity. A path or identity
     * with U+0000 is refused with INVALID_ARG here; an identity longer than
     * {@link Tier#MAX_DISK_IDENTITY_LEN} UTF-8 bytes by the library.
     */
    public void attachDisk(String path, long numBlocks, int flags, String identity) {
        final String fn = "kvc_tier_attach_disk_with_identity";
        byte[] cpath = CStrings.utf8z(fn, "path", path);
        byte[] cid = CStrings.utf8z(fn, "identity", identity);
        pool.with(fn, h -> KvcNative.kvc_tier_attach_disk_with_identity(h, cpath, numBlocks, flags, cid));
    }

    /**
     * As {@link #attachDisk(String, long, int, String)}, with every slot authenticated by a keyed MAC
     * (kvc_tier_attach_disk_keyed), so that whoever can write the file but lacks the key cannot make
     * it serve chosen KV: a slot whose MAC does not verify is a miss counted in
     * {@link TierStats#checksumFailures()}, and a {@link Tier#DISK_PERSISTENT} re-attach with another
     * key, or none, recovers none of the keyed slots (they count in {@link TierStats#foreignBlocks()}).
     * key: {@link Tier#DISK_KEY_MIN_LEN}..{@link Tier#DISK_KEY_MAX_LEN} bytes, a secret from the
     * service's secret store; the library keeps its own copy (the copy made for the call is wiped), so
     * the caller may zero its array on return. Throws UNSUPPORTED when libsodium (Debian libsodium23)
     * cannot be loaded — no tier is attached then, authenticated or not —, NULL_ARG for a null key,
     * INVALID_ARG for a length out of range.
     */
    public void attachDisk(String path, long numBlocks, int flags, String identity, byte[] key) {
        final String fn = "kvc_tier_attach_disk_keyed";
        byte[] cpath = CStrings.utf8z(fn, "path", path);
        byte[] cid = CStrings.utf8z(fn, "identity", identity);
        long keyLen = key == null ? 0 : key.length;
        pool.with(fn, h -> KvcNative.kvc_tier_attach_disk_keyed(h, cpath, numBlocks, flags, cid, key, keyLen));
    }

    /**
     * Writes every cached block the disk tier lacks to it — the host tier's, then the device's that no
     * sequence uses — and returns the blocks queued (kvc_tier_flush). For a shutdown before a restart
     * with {@link Tier#DISK_PERSISTENT}. STATE without a disk tier.
     */
    public long flush() {
        long[] n = new long[1];
        pool.with("kvc_tier_flush", h -> KvcNative.kvc_tier_flush(h, n));
        return n[0];
    }

    /**
     * Moves seqId's exclusively owned blocks to the host tier (kvc_swap_out); returns the operation
     * id. Until swapIn the sequence is refused by append, fork, batch builds and slotMapping.
     */
    public long swapOut(long seqId) {
        long[] op = new long[1];
        pool.with("kvc_swap_out", h -> KvcNative.kvc_swap_out(h, seqId, op));
        return op[0];
    }

    /** Brings a swapped-out sequence back into fresh device blocks (kvc_swap_in); returns the op id. */
    public long swapIn(long seqId) {
        long[] op = new long[1];
        pool.with("kvc_swap_in", h -> KvcNative.kvc_swap_in(h, seqId, op));
        return op[0];
    }

    /** Whether the copies of op have completed (kvc_op_query). */
    public boolean opDone(long op) {
        int[] done = new int[1];
        pool.with("kvc_op_query", h -> KvcNative.kvc_op_query(h, op, done));
        return done[0] != 0;
    }

    /** Blocks until the copies of op have completed (kvc_op_wait). */
    public void opWait(long op) {
        pool.with("kvc_op_wait", h -> KvcNative.kvc_op_wait(h, op));
    }

    /** Frees seqId and returns its confirmed tokens, to be prefilled again (kvc_preempt_recompute). */
    public long preemptRecompute(long seqId) {
        long[] n = new long[1];
        pool.with("kvc_preempt_recompute", h -> KvcNative.kvc_preempt_recompute(h, seqId, n));
        return n[0];
    }

    /** Cost of swapping seqId versus recomputing it (kvc_preemption_cost). */
    public PreemptionCost preemptionCost(long seqId) {
        long[] swap = new long[1];
        long[] rec = new long[1];
        pool.with("kvc_preemption_cost", h -> KvcNative.kvc_preemption_cost(h, seqId, swap, rec));
        return new PreemptionCost(swap[0], rec[0]);
    }

    /**
     * Reads the prompt's disk-tier prefix hits up into the host tier (verified), so that a later
     * alloc of it restores them from host memory instead of waiting for the disk (kvc_tier_prefetch).
     * Call it from a thread of your own for a queued request. Returns the tokens alloc would now
     * find on the device and in the host tier. STATE without a disk tier.
     */
    public long prefetch(int[] tokens, Keys keys) {
        return pool.prefetchTiers(tokens, keys);
    }

    /** Pool.prefixLookup split by tier; read-only (kvc_prefix_lookup_tiers). */
    public TierHits prefixLookup(int[] tokens, Keys keys) {
        return pool.prefixLookupTiers(tokens, keys);
    }

    /** Statistics of one tier (kvc_tier_get_stats). */
    public TierStats stats(Tier tier) {
        return pool.with("kvc_tier_get_stats", h -> {
            kvc_tier_stats s = new kvc_tier_stats();
            try {
                KvcNative.kvc_tier_get_stats(h, tier.code(), s);
                return TierStats.fromNative(s);
            } finally {
                s.delete();
            }
        });
    }
}
