package dev.kvc;

/**
 * State and traffic of one memory tier (kvc_tier_stats); an unattached tier has capacity 0.
 * {@code reachableBlocks}: of {@code cachedBlocks}, those a prefix lookup can reach (every block
 * before it in its prompt is cached in some tier), counted by the call that made this record.
 */
public record TierStats(
        Tier tier,
        boolean directIo,
        boolean persistent,
        boolean ioUring,
        long capacityBlocks,
        long usedBlocks,
        long cachedBlocks,
        long heldBlocks,
        long bytesUsed,
        long blocksIn,
        long blocksOut,
        long bytesIn,
        long bytesOut,
        long transfers,
        double transferSeconds,
        double bandwidthBytesPerS,
        long hits,
        long evictions,
        long failures,
        long checksumFailures,
        long ioErrors,
        long recoveredBlocks,
        long foreignBlocks,
        long reachableBlocks) {

    static TierStats fromNative(kvc_tier_stats s) {
        return new TierStats(Tier.of(s.getTier()), s.getDirect_io() != 0, s.getPersistent() != 0,
                s.getIo_uring() != 0, s.getCapacity_blocks(), s.getUsed_blocks(), s.getCached_blocks(),
                s.getHeld_blocks(), s.getBytes_used(), s.getBlocks_in(), s.getBlocks_out(), s.getBytes_in(),
                s.getBytes_out(), s.getTransfers(), s.getTransfer_seconds(), s.getBandwidth_bytes_per_s(),
                s.getHits(), s.getEvictions(), s.getFailures(), s.getChecksum_failures(), s.getIo_errors(),
                s.getRecovered_blocks(), s.getForeign_blocks(), s.getReachable_blocks());
    }
}
