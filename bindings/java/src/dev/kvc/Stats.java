package dev.kvc;

/** A snapshot of a pool's counters (kvc_stats). */
public record Stats(
        long totalBlocks,
        long freeBlocks,
        long usedBlocks,
        long cachedFreeBlocks,
        long pinnedBlocks,
        long numSeqs,
        double utilization,
        long allocs,
        long frees,
        long forks,
        long appends,
        long blocksAllocated,
        long blocksFreed,
        long cowCopies,
        long pendingCopies,
        long prefixQueryTokens,
        long prefixHitTokens,
        double prefixHitRate,
        long evictions,
        long verifyMisses,
        long eventsDropped,
        /** Blocks in the prefix cache, held or free: what a router fed by the pool's events holds. */
        long cachedBlocksTotal) {

    static Stats fromNative(kvc_stats s) {
        return new Stats(s.getTotal_blocks(), s.getFree_blocks(), s.getUsed_blocks(), s.getCached_free_blocks(),
                s.getPinned_blocks(), s.getNum_seqs(), s.getUtilization(), s.getAllocs(), s.getFrees(),
                s.getForks(), s.getAppends(), s.getBlocks_allocated(), s.getBlocks_freed(), s.getCow_copies(),
                s.getPending_copies(), s.getPrefix_query_tokens(), s.getPrefix_hit_tokens(),
                s.getPrefix_hit_rate(), s.getEvictions(), s.getVerify_misses(), s.getEvents_dropped(),
                s.getCached_blocks_total());
    }
}
