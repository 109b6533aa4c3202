package dev.kvc;

import static dev.kvc.TestUtil.cpu;
import static dev.kvc.TestUtil.expectStatus;
import static dev.kvc.TestUtil.small;
import static dev.kvc.TestUtil.span;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

/** Pool.truncate (kvc_truncate): the speculative-decoding rollback. */
class TruncateTest {
    private static int[] concat(int[] a, int... b) {
        return IntStream.concat(Arrays.stream(a), Arrays.stream(b)).toArray();
    }

    @Test
    void speculativeRollbackKeepsAcceptedTokens() {
        try (Pool p = Pool.create(small())) {
            // Prompt of 6 tokens (blocks 0, 1), then 7 drafts at positions 6..12 (blocks 2, 3).
            p.alloc(1, span(0, 6), null);
            int[] drafts = span(600, 607);
            assertEquals(2, p.append(1, drafts, 0));
            long[] slotsBefore = p.slotMapping(1, 0, 9);
            int[] withDrafts = concat(span(0, 6), drafts);
            assertEquals(12, p.prefixLookup(withDrafts, null));

            // Three drafts accepted: 9 tokens stay, block 3 (position 12 only) leaves the table.
            assertEquals(1, p.truncate(1, 9));
            assertEquals(9, p.numTokens(1));
            assertArrayEquals(new int[] {0, 1, 2}, p.blockTable(1));
            assertArrayEquals(slotsBefore, p.slotMapping(1, 0, 9), "kept tokens' slots moved");
            expectStatus(Status.INVALID_ARG, () -> p.slotMapping(1, 9, 1));
            Stats s = p.stats();
            assertEquals(13, s.freeBlocks());
            assertEquals(3, s.usedBlocks());
            // Block 2 still holds exactly the rejected drafts' KV: it stays cached.
            assertEquals(12, p.prefixLookup(withDrafts, null));
            p.check();

            // The corrected token goes into block 2: sole holder, so it leaves the cache, no copy.
            assertEquals(0, p.append(1, new int[] {700}, 0));
            assertEquals(0, p.stats().cowCopies());
            assertEquals(0, p.pendingCopyCount());
            assertEquals(8, p.prefixLookup(withDrafts, null));
            p.append(1, new int[] {701, 702}, 0);
            assertEquals(12, p.prefixLookup(concat(span(0, 6), 600, 601, 602, 700, 701, 702, 9), null));
            p.check();
        }
    }

    @Test
    void equalCountDropsOnlyTheLookahead() {
        try (Pool p = Pool.create(small())) {
            p.alloc(1, span(0, 6), null);
            assertEquals(1, p.append(1, new int[] {6}, 5), "slots 7..11 reach block 2");
            assertEquals(1, p.truncate(1, 7), "block 2 held only reserved slots");
            assertEquals(7, p.numTokens(1));
            assertArrayEquals(new int[] {0, 1}, p.blockTable(1));
            expectStatus(Status.INVALID_ARG, () -> p.slotMapping(1, 7, 1));
            assertEquals(0, p.truncate(1, 7), "nothing left to drop");
            assertEquals(1, p.truncate(1, 4), "down to a block boundary");
            assertEquals(1, p.append(1, new int[] {40}, 0));
            assertEquals(5, p.numTokens(1));
        }
    }

    @Test
    void rollbackPastACopyCancelsIt() {
        try (Pool p = Pool.create(small())) {
            p.alloc(1, span(0, 6), null);
            p.fork(1, 2);
            assertEquals(1, p.append(2, new int[] {60}, 0), "copy-on-write of shared block 1");
            assertEquals(1, p.pendingCopyCount());
            assertEquals(1, p.truncate(2, 4));
            assertEquals(0, p.takePendingCopies().count(), "pair into a released block survived");
            assertArrayEquals(new int[] {0}, p.blockTable(2));
            assertArrayEquals(new int[] {0, 1}, p.blockTable(1));
            assertEquals(2, p.stats().usedBlocks());
            p.check();
        }
    }

    @Test
    void errorsChangeNothing() {
        try (Pool p = Pool.create(small())) {
            p.alloc(1, span(0, 6), null);
            p.append(1, new int[] {6}, 2);
            Stats before = p.stats();
            KvcException e = expectStatus(Status.INVALID_ARG, () -> p.truncate(1, 8));
            assertTrue(e.libraryMessage().contains("kvc_truncate"), e.getMessage());
            expectStatus(Status.INVALID_ARG, () -> p.truncate(1, 0));
            expectStatus(Status.UNKNOWN_SEQ, () -> p.truncate(42, 1));
            assertEquals(before, p.stats());
            assertEquals(7, p.numTokens(1));
            assertEquals(2, p.slotMapping(1, 7, 2).length, "lookahead kept after the errors");
            p.check();
        }
    }

    @Test
    void swappedOutSequenceIsRefused() {
        try (Pool p = Pool.create(cpu())) {
            Tiers t = p.tiers();
            StorageInfo si = p.storageInfo();
            t.attachHost(8);
            p.alloc(1, span(0, 10), null);
            StorageBatchAttentionTest.writeSequence(p, 1, 0, 10);
            byte[] kept = new byte[Math.toIntExact(2 * si.blockStride())];
            p.readBlocks(Arrays.copyOf(p.blockTable(1), 2), kept);
            t.opWait(t.swapOut(1));
            expectStatus(Status.STATE, () -> p.truncate(1, 5));
            assertEquals(10, p.numTokens(1));
            t.opWait(t.swapIn(1));
            assertEquals(1, p.truncate(1, 5));
            int[] table = p.blockTable(1);
            assertEquals(2, table.length);
            byte[] after = new byte[kept.length];
            p.readBlocks(table, after);
            assertArrayEquals(kept, after, "kept blocks' KV changed");
            p.check();
        }
    }
}
