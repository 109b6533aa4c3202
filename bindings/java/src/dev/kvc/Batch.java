package dev.kvc;

import java.lang.ref.Cleaner;

/**
 * Metadata of one forward step (kvc_batch): block tables, sequence lengths, slot mapping and CSR
 * indices in buffers allocated once. Created by {@link Pool#newBatch}; closing the pool closes it.
 * Safe for use from several threads (builds are serialised against readers).
 */
public final class Batch implements AutoCloseable {
    final Pool pool;
    final PoolChild state;
    private final Cleaner.Cleanable cleanable;

    Batch(Pool pool, long handle) {
        this.pool = pool;
        this.state = new PoolChild(pool.state, handle, KvcNative::kvc_batch_destroy);
        this.cleanable = Cleaners.CLEANER.register(this, PoolChild.closer(pool.state, state));
    }

    /** Destroys the batch (kvc_batch_destroy). Idempotent; a no-op after the pool was closed. */
    @Override
    public void close() {
        cleanable.clean();
    }

    interface BatchCall<T> {
        T call(long pool, long batch);
    }

    private <T> T with(String op, boolean write, BatchCall<T> f) {
        return pool.with(op, h -> state.with(op, write, b -> f.call(h, b)));
    }

    <T> T withRead(String op, BatchCall<T> f) {
        return with(op, false, f);
    }

    /**
     * Builds the step's metadata for seqIds with query lengths qLens (1 for decode)
     * (kvc_batch_build). On failure the previous step's metadata stays intact.
     */
    public void build(long[] seqIds, long[] qLens) {
        long[] ids = seqIds == null ? new long[0] : seqIds;
        long[] lens = qLens == null ? new long[0] : qLens;
        if (ids.length != lens.length) {
            throw new KvcException(Status.INVALID_ARG, "kvc_batch_build", "seqIds and qLens differ in length");
        }
        with("kvc_batch_build", true, (h, b) -> KvcNative.kvc_batch_build(b, ids, lens, ids.length));
    }

    /**
     * Sets the CUDA stream (a cudaStream_t as a long; 0 = the default stream, the initial setting)
     * later builds upload on (kvc_batch_set_stream). A build enqueues its upload there and returns
     * without waiting for the stream: later work on the same stream sees the new arrays, work on
     * another stream must be ordered after it by the caller (kvc_batch_set_stream in kvc.h). The
     * caller keeps the stream alive while builds use it and never builds while it is capturing a
     * CUDA graph. Ignored on the CPU backend.
     */
    public void setStream(long stream) {
        with("kvc_batch_set_stream", true, (h, b) -> KvcNative.kvc_batch_set_stream(b, stream));
    }

    /**
     * Chooses the KV-cache group whose block tables the next {@link #build} records
     * (kvc_batch_set_group; hybrid pools, {@link Pool#createHybrid}; default group 0). A group out
     * of range, or an SSM group (no block tables to launch over), is {@link Status#INVALID_ARG}.
     */
    public void setGroup(int group) {
        with("kvc_batch_set_group", true, (h, b) -> KvcNative.kvc_batch_set_group(b, group));
    }

    private static BatchInfo info(long b) {
        kvc_batch_info i = new kvc_batch_info();
        try {
            KvcNative.kvc_batch_get_info(b, i);
            return BatchInfo.fromNative(i);
        } finally {
            i.delete();
        }
    }

    /** Sizes and array addresses of the last build (kvc_batch_get_info); STATE before any build. */
    public BatchInfo info() {
        return withRead("kvc_batch_get_info", (h, b) -> info(b));
    }

    /** The last build's slot mapping (kvc_batch_copy_slot_mapping). */
    public long[] slotMapping() {
        return withRead("kvc_batch_copy_slot_mapping", (h, b) -> {
            long[] out = new long[Math.toIntExact(info(b).numTokens())];
            KvcNative.kvc_batch_copy_slot_mapping(b, out, out.length);
            return out;
        });
    }

    /** The last build's padded block tables, numSeqs rows of maxBlocksPerSeq (kvc_batch_copy_block_tables). */
    public int[] blockTables() {
        return withRead("kvc_batch_copy_block_tables", (h, b) -> {
            BatchInfo i = info(b);
            int[] out = new int[Math.toIntExact((long) i.numSeqs() * i.maxBlocksPerSeq())];
            KvcNative.kvc_batch_copy_block_tables(b, out, out.length);
            return out;
        });
    }
}
