package dev.kvc;

/**
 * A KV event for KV-aware routers (kvc_event), one per block and tier. Hashes are 128-bit (hi, lo);
 * 64-bit unsigned values are carried bit for bit in Java longs. {@code tier} is the tier the block
 * entered or left: the device unless {@link Pool#setTierEvents} turned on host and disk events (whose
 * {@code blockId} is the slot in that tier).
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
        long sequenceNumber,
        Tier tier) {}
