package dev.kvc;

/**
 * A KV event for KV-aware routers (kvc_event), one per block. Hashes are 128-bit (hi, lo); 64-bit
 * unsigned values are carried bit for bit in Java longs.
 */
public record Event(
        EventType type,
        long hashHi,
        long hashLo,
        long parentHashHi,
        long parentHashLo,
        long loraId,
        long extraKeysDigest,
        int blockId,
        int[] tokens,
        long sequenceNumber) {}
