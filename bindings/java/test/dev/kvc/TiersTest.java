package dev.kvc;

import static dev.kvc.TestUtil.cpu;
import static dev.kvc.TestUtil.expectStatus;
import static dev.kvc.TestUtil.small;
import static dev.kvc.TestUtil.span;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class TiersTest {
    @Test
    void attach(@TempDir Path dir) {
        try (Pool meta = Pool.create(small())) {
            expectStatus(Status.STATE, () -> meta.tiers().attachHost(8));
        }
        try (Pool p = Pool.create(cpu())) {
            Tiers t = p.tiers();
            assertEquals(0, t.stats(Tier.HOST).capacityBlocks());
            String file = dir.resolve("kv.bin").toString();
            expectStatus(Status.STATE, () -> t.attachDisk(file, 8, 0));
            expectStatus(Status.INVALID_ARG, () -> t.attachHost(0));
            t.attachHost(8);
            expectStatus(Status.STATE, () -> t.attachHost(8));
            TierStats host = t.stats(Tier.HOST);
            assertEquals(Tier.HOST, host.tier());
            assertEquals(8, host.capacityBlocks());
            assertEquals(0, host.usedBlocks());
            expectStatus(Status.INVALID_ARG, () -> t.attachDisk(file, 8, 99));
            expectStatus(Status.IO, () -> t.attachDisk(dir.toString(), 8, 0));
            expectStatus(Status.INVALID_ARG, () -> t.attachDisk("a\0b", 8, 0));
            t.attachDisk(file, 8, Tier.DISK_NO_DIRECT);
            TierStats disk = t.stats(Tier.DISK);
            assertEquals(Tier.DISK, disk.tier());
            assertEquals(8, disk.capacityBlocks());
            assertFalse(disk.directIo());
            assertTrue(Files.exists(dir.resolve("kv.bin")));
            kvc_tier_stats s = new kvc_tier_stats();
            try {
                expectStatus(Status.INVALID_ARG, () -> p.with("test", h -> KvcNative.kvc_tier_get_stats(h, 7, s)));
            } finally {
                s.delete();
            }
        }
    }

    @Test
    void swapOutIn() {
        try (Pool p = Pool.create(cpu())) {
            Tiers t = p.tiers();
            StorageInfo si = p.storageInfo();
            t.attachHost(8);
            p.alloc(1, span(0, 6), null);
            StorageBatchAttentionTest.writeSequence(p, 1, 0, 6);
            int[] table = p.blockTable(1);
            byte[] before = new byte[Math.toIntExact(table.length * si.blockStride())];
            p.readBlocks(table, before);
            assertEquals(new PreemptionCost(2 * si.blockStride(), 6), t.preemptionCost(1));

            long op = t.swapOut(1);
            assertTrue(t.opDone(op), "a CPU swap is complete when the call returns");
            t.opWait(op);
            assertArrayEquals(new int[] {-1, -1}, p.blockTable(1));
            assertEquals(0, p.stats().usedBlocks());
            TierStats host = t.stats(Tier.HOST);
            assertEquals(2, host.heldBlocks());
            assertEquals(2, host.blocksIn());
            expectStatus(Status.STATE, () -> p.append(1, new int[] {6}, 0));
            expectStatus(Status.STATE, () -> p.slotMapping(1, 0, 1));
            expectStatus(Status.STATE, () -> p.fork(1, 2));
            expectStatus(Status.STATE, () -> t.swapOut(1));
            assertEquals(2 * si.blockStride(), t.preemptionCost(1).swapBytes());

            long in = t.swapIn(1);
            t.opWait(in);
            table = p.blockTable(1);
            byte[] after = new byte[before.length];
            p.readBlocks(table, after);
            assertArrayEquals(before, after);
            expectStatus(Status.STATE, () -> t.swapIn(1));
            expectStatus(Status.INVALID_ARG, () -> t.opDone(in + 1000));
            expectStatus(Status.UNKNOWN_SEQ, () -> t.swapOut(99));
            p.append(1, new int[] {6}, 0);

            assertEquals(7, t.preemptRecompute(1));
            expectStatus(Status.UNKNOWN_SEQ, () -> p.numTokens(1));
            expectStatus(Status.UNKNOWN_SEQ, () -> t.preemptRecompute(1));
        }
        try (Pool noHost = Pool.create(cpu())) {
            noHost.alloc(1, span(0, 6), null);
            expectStatus(Status.STATE, () -> noHost.tiers().swapOut(1));
        }
    }

    @Test
    void flushThenWarmRestart(@TempDir Path dir) {
        String file = dir.resolve("kv.bin").toString();
        try (Pool noDisk = Pool.create(cpu())) {
            expectStatus(Status.STATE, () -> noDisk.tiers().flush());
        }
        try (Pool p = Pool.create(cpu())) {
            p.tiers().attachHost(8);
            p.tiers().attachDisk(file, 16, Tier.DISK_PERSISTENT);
            p.alloc(1, span(0, 9), null); // blocks 0, 1 cached + 1 partial, on the device only
            p.free(1);
            assertEquals(2, p.tiers().flush());
            assertEquals(0, p.tiers().flush());
        }
        try (Pool q = Pool.create(cpu())) {
            q.tiers().attachHost(8);
            q.tiers().attachDisk(file, 16, Tier.DISK_PERSISTENT);
            assertEquals(2, q.tiers().stats(Tier.DISK).recoveredBlocks());
            assertEquals(new TierHits(0, 0, 8), q.tiers().prefixLookup(span(0, 9), null));
            // A prefetch reads them up into the host tier; the allocation then needs no disk read.
            assertEquals(8, q.tiers().prefetch(span(0, 9), null));
            assertEquals(new TierHits(0, 8, 0), q.tiers().prefixLookup(span(0, 9), null));
            long read = q.tiers().stats(Tier.DISK).blocksOut();
            assertEquals(8, q.alloc(1, span(0, 9), null));
            assertEquals(read, q.tiers().stats(Tier.DISK).blocksOut());
            expectStatus(Status.INVALID_ARG, () -> q.tiers().prefetch(new int[0], null));
        }
        try (Pool noDisk = Pool.create(cpu())) {
            expectStatus(Status.STATE, () -> noDisk.tiers().prefetch(span(0, 9), null));
        }
    }

    /** Caches span(0, 9) in a pool whose disk tier `attach` attaches; writes its 2 full blocks to disk. */
    private static void writeSpanToDisk(Consumer<Tiers> attach) {
        try (Pool p = Pool.create(cpu())) {
            p.tiers().attachHost(8);
            attach.accept(p.tiers());
            p.alloc(1, span(0, 9), null); // blocks 0, 1 cached + 1 partial
            p.free(1);
            assertEquals(2, p.tiers().flush());
        }
    }

    /** A pool whose disk tier `attach` attaches recovers `recovered` of those 2 blocks; the rest are foreign. */
    private static void expectRecovered(Consumer<Tiers> attach, String what, long recovered) {
        try (Pool q = Pool.create(cpu())) {
            q.tiers().attachHost(8);
            attach.accept(q.tiers());
            TierStats s = q.tiers().stats(Tier.DISK);
            assertEquals(recovered, s.recoveredBlocks(), what);
            assertEquals(2 - recovered, s.foreignBlocks(), what);
            assertEquals(new TierHits(0, 0, 4 * recovered), q.tiers().prefixLookup(span(0, 9), null), what);
        }
    }

    /** A persistent file recovers only its identity's blocks; another rank's shard finds them foreign. */
    @Test
    void diskIdentity(@TempDir Path dir) {
        String file = dir.resolve("kv.bin").toString();
        writeSpanToDisk(t -> t.attachDisk(file, 16, Tier.DISK_PERSISTENT, "model-a;tp=0/2"));
        String[] identities = {"model-a;tp=1/2", "", "model-a;tp=0/2"};
        long[] recovered = {0, 0, 2};
        for (int i = 0; i < identities.length; i++) {
            String identity = identities[i];
            expectRecovered(t -> t.attachDisk(file, 16, Tier.DISK_PERSISTENT, identity), identity, recovered[i]);
        }
        try (Pool q = Pool.create(cpu())) {
            q.tiers().attachHost(8);
            expectStatus(Status.INVALID_ARG, () -> q.tiers().attachDisk(file, 16, 0, "a\0b"));
            expectStatus(Status.INVALID_ARG,
                    () -> q.tiers().attachDisk(file, 16, 0, "x".repeat(Tier.MAX_DISK_IDENTITY_LEN + 1)));
            assertEquals(0, q.tiers().stats(Tier.DISK).capacityBlocks());
            q.tiers().attachDisk(file, 16, 0, "x".repeat(Tier.MAX_DISK_IDENTITY_LEN)); // the limit itself
            assertEquals(16, q.tiers().stats(Tier.DISK).capacityBlocks());
        }
    }

    /**
     * Keyed slots are recovered with their key only (another key or none finds them foreign); the
     * caller may zero its key once attached; bad keys change nothing, not even the file.
     */
    @Test
    void diskKeyed(@TempDir Path dir) {
        String file = dir.resolve("kv.bin").toString();
        byte[] keyA = new byte[32];
        Arrays.fill(keyA, (byte) 0xa5);
        byte[] keyB = new byte[32];
        Arrays.fill(keyB, (byte) 0x5a);
        byte[] key = keyA.clone();
        writeSpanToDisk(t -> {
            t.attachDisk(file, 16, Tier.DISK_PERSISTENT, "m", key);
            Arrays.fill(key, (byte) 0); // the tier MACs with its own copy
        });
        expectRecovered(t -> t.attachDisk(file, 16, Tier.DISK_PERSISTENT, "m", keyB), "another key", 0);
        expectRecovered(t -> t.attachDisk(file, 16, Tier.DISK_PERSISTENT, "m"), "no key", 0);
        expectRecovered(t -> t.attachDisk(file, 16, Tier.DISK_PERSISTENT, "m", keyA), "the key", 2);
        Path other = dir.resolve("other.bin");
        String o = other.toString();
        try (Pool q = Pool.create(cpu())) {
            Tiers t = q.tiers();
            t.attachHost(8);
            expectStatus(Status.NULL_ARG, () -> t.attachDisk(o, 16, 0, "m", null));
            expectStatus(Status.INVALID_ARG, () -> t.attachDisk(o, 16, 0, "m", new byte[Tier.DISK_KEY_MIN_LEN - 1]));
            expectStatus(Status.INVALID_ARG, () -> t.attachDisk(o, 16, 0, "m", new byte[Tier.DISK_KEY_MAX_LEN + 1]));
            expectStatus(Status.INVALID_ARG, () -> t.attachDisk(o, 16, 0, "a\0b", keyA));
            assertEquals(0, t.stats(Tier.DISK).capacityBlocks());
            assertFalse(Files.exists(other));
            t.attachDisk(o, 16, 0, "", new byte[Tier.DISK_KEY_MAX_LEN]); // the limit itself
            assertEquals(16, t.stats(Tier.DISK).capacityBlocks());
        }
    }

    @Test
    void tierEvents() {
        try (Pool p = Pool.create(cpu().numBlocks(4))) {
            p.setTierEvents(true);
            p.tiers().attachHost(8);
            p.alloc(1, span(0, 9), null);
            p.free(1);
            p.alloc(2, span(100, 116), null); // evicts the two cached blocks into the host tier
            p.free(2);
            java.util.Set<Long> onDevice = new java.util.HashSet<>();
            int removedFromDevice = 0;
            int storedOnHost = 0;
            for (java.util.Optional<Event> o = p.popEvent(); o.isPresent(); o = p.popEvent()) {
                Event e = o.get();
                if (e.type() == EventType.BLOCK_STORED && e.tier() == Tier.DEVICE) {
                    onDevice.add(e.hashLo());
                } else if (e.type() == EventType.BLOCK_REMOVED && e.tier() == Tier.DEVICE) {
                    removedFromDevice++;
                } else if (e.type() == EventType.BLOCK_STORED && e.tier() == Tier.HOST) {
                    assertTrue(onDevice.contains(e.hashLo()), "host tier stored a block the device never had");
                    assertEquals(4, e.tokens().length);
                    storedOnHost++;
                }
            }
            assertEquals(2, removedFromDevice);
            assertEquals(2, storedOnHost);
            p.setTierEvents(false);
        }
        try (Pool noEvents = Pool.create(cpu().numBlocks(4).eventCapacity(0))) {
            expectStatus(Status.UNSUPPORTED, () -> noEvents.setTierEvents(true));
            noEvents.setTierEvents(false);
        }
    }

    @Test
    void spillAndRehit() {
        try (Pool p = Pool.create(cpu().numBlocks(4))) {
            Tiers t = p.tiers();
            t.attachHost(8);
            p.alloc(1, span(0, 9), null);
            p.free(1);
            assertEquals(new TierHits(8, 0, 0), t.prefixLookup(span(0, 9), null));
            p.alloc(2, span(100, 116), null);
            p.free(2);
            TierHits hits = t.prefixLookup(span(0, 9), null);
            assertEquals(8, hits.host());
            assertEquals(0, hits.device());
            assertEquals(8, p.alloc(3, span(0, 9), null));
            TierStats host = t.stats(Tier.HOST);
            assertTrue(host.hits() > 0 && host.blocksOut() > 0, host.toString());
            expectStatus(Status.INVALID_ARG, () -> t.prefixLookup(null, null));
        }
    }

    /**
     * One allocation evicts more cached blocks than the host tier has slots to take: the chain's
     * head gets the slot (its child could never be reached without it), and the tier stats count
     * what a lookup can reach.
     */
    @Test
    void spillsKeepChainHeads() {
        try (Pool p = Pool.create(cpu().numBlocks(4))) {
            Tiers t = p.tiers();
            t.attachHost(1);
            p.alloc(1, span(0, 9), null);  // blocks 0, 1 cached + 1 partial
            p.free(1);
            p.alloc(2, span(100, 116), null);  // all 4 device blocks: evicts both at once
            p.free(2);
            assertEquals(new TierHits(0, 4, 0), t.prefixLookup(span(0, 9), null));
            TierStats host = t.stats(Tier.HOST);
            assertEquals(1, host.cachedBlocks(), host.toString());
            assertEquals(1, host.reachableBlocks(), host.toString());
            TierStats device = t.stats(Tier.DEVICE);
            assertEquals(4, device.cachedBlocks(), device.toString());
            assertEquals(4, device.reachableBlocks(), device.toString());
        }
    }
}
