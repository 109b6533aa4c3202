package dev.kvc;

import static dev.kvc.StorageBatchAttentionTest.assertClose;
import static dev.kvc.StorageBatchAttentionTest.queries;
import static dev.kvc.StorageBatchAttentionTest.reference;
import static dev.kvc.StorageBatchAttentionTest.writeSequence;
import static dev.kvc.TestUtil.cpu;
import static dev.kvc.TestUtil.expectStatus;
import static dev.kvc.TestUtil.small;
import static dev.kvc.TestUtil.span;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import java.util.function.IntConsumer;
import org.junit.jupiter.api.Test;

/**
 * Pool.setSlidingWindow / Pool.slidingWindow (kvc_pool_set_sliding_window,
 * kvc_pool_get_sliding_window): blocks before the window leave the sequence as it grows.
 */
class SlidingWindowTest {
    private static final int BLOCK_SIZE = 4; // small() / cpu()
    private static final int POOL_BLOCKS = 16;
    private static final int WINDOW = 6;

    /**
     * The rule of kvc_append: an append releases the blocks whose tokens all lie before
     * f - window + 1, where f is the first position the sequence's previous call added (the
     * previous append's, or for the first append after kvc_alloc the alloc's first uncached
     * position). No query of that call's tokens or of later ones sees those keys.
     */
    private static int releasedBy(int f) {
        int first = f - WINDOW + 1;
        return first > 0 ? first / BLOCK_SIZE : 0;
    }

    /**
     * Appends tokens 1..n-1 to a 1-token sequence one at a time, checking after each append the
     * table's released (-1) prefix and the blocks that came back to the pool.
     */
    private static void growOneByOne(Pool p, long seq, int n, IntConsumer onAppend) {
        for (int pos = 1; pos < n; pos++) {
            assertEquals(pos % BLOCK_SIZE == 0 ? 1 : 0, p.append(seq, new int[] {pos}, 0), "blocks taken at " + pos);
            onAppend.accept(pos);
            // The previous call added position pos-1 first: the append of pos-1, or for pos 1
            // the alloc of the 1-token prompt (no prefix hit: first uncached position 0).
            int released = releasedBy(pos - 1);
            int total = pos / BLOCK_SIZE + 1;
            int[] table = p.blockTable(seq);
            assertEquals(total, table.length, "table after position " + pos);
            for (int i = 0; i < table.length; i++) {
                assertEquals(i < released, table[i] == -1,
                        "after position " + pos + ": table " + Arrays.toString(table) + ", released " + released);
            }
            Stats s = p.stats();
            assertEquals(total - released, s.usedBlocks(), "used blocks after position " + pos);
            assertEquals(POOL_BLOCKS - (total - released), s.freeBlocks(), "free blocks after position " + pos);
        }
    }

    @Test
    void setAndGet() {
        Pool p = Pool.create(small());
        try {
            assertEquals(0, p.slidingWindow(), "off by default");
            p.setSlidingWindow(WINDOW);
            assertEquals(WINDOW, p.slidingWindow());
            expectStatus(Status.INVALID_ARG, () -> p.setSlidingWindow(-1));
            assertEquals(WINDOW, p.slidingWindow(), "a refused call changed the window");

            // Only while the pool has no sequences.
            p.alloc(1, span(0, 3), null);
            KvcException e = expectStatus(Status.STATE, () -> p.setSlidingWindow(8));
            assertTrue(e.libraryMessage().contains("kvc_pool_set_sliding_window"), e.libraryMessage());
            expectStatus(Status.STATE, () -> p.setSlidingWindow(0));
            assertEquals(WINDOW, p.slidingWindow(), "a refused call changed the window");
            p.free(1);
            p.setSlidingWindow(0);
            assertEquals(0, p.slidingWindow());
            p.check();
        } finally {
            p.close();
        }
        expectStatus(Status.STATE, p::slidingWindow);
        expectStatus(Status.STATE, () -> p.setSlidingWindow(WINDOW));
    }

    @Test
    void appendReleasesBlocksBeforeTheWindow() {
        try (Pool p = Pool.create(small())) {
            p.setSlidingWindow(WINDOW);
            p.alloc(1, new int[] {0}, null);
            growOneByOne(p, 1, 20, pos -> {});

            // 20 tokens in 5 blocks (0..4); the append of position 19, after the one of 18, released
            // the blocks wholly before 18 - 6 + 1 = 13: blocks 0, 1, 2. Full, so they stay cached
            // while free.
            assertArrayEquals(new int[] {-1, -1, -1, 3, 4}, p.blockTable(1));
            Stats s = p.stats();
            assertEquals(2, s.usedBlocks());
            assertEquals(14, s.freeBlocks());
            assertEquals(3, s.cachedFreeBlocks());
            assertEquals(20, p.numTokens(1));
            expectStatus(Status.INVALID_ARG, () -> p.slotMapping(1, 11, 1));
            assertArrayEquals(new long[] {12, 13, 14, 15, 16, 17, 18, 19}, p.slotMapping(1, 12, 8));

            // Truncating to n, the next token sees n - 5 ..; positions below 12 are gone: n >= 17.
            KvcException e = expectStatus(Status.STATE, () -> p.truncate(1, 16));
            assertTrue(e.libraryMessage().contains("kvc_truncate"), e.libraryMessage());
            assertEquals(s, p.stats(), "a refused truncate changed the pool");
            assertEquals(20, p.numTokens(1));
            assertEquals(0, p.truncate(1, 17), "block 4 keeps position 16");
            assertEquals(17, p.numTokens(1));
            assertArrayEquals(new int[] {-1, -1, -1, 3, 4}, p.blockTable(1));
            p.check();

            p.free(1);
            assertEquals(0, p.stats().usedBlocks());
            assertEquals(POOL_BLOCKS, p.stats().freeBlocks());
        }
    }

    @Test
    void windowedAttention() {
        try (Pool p = Pool.create(cpu())) {
            p.setSlidingWindow(WINDOW);
            p.alloc(1, new int[] {0}, null);
            writeSequence(p, 1, 0, 1);
            // Each token's K/V is written right after its append, before its block can be released.
            growOneByOne(p, 1, 20, pos -> writeSequence(p, 1, pos, 1));
            try (Batch b = p.newBatch(2, 32, 8)) {
                // Decode of position 19 sees 14..19, all still held.
                b.build(new long[] {1}, new long[] {1});
                assertArrayEquals(new int[] {-1, -1, -1, 3, 4}, Arrays.copyOf(b.blockTables(), 5));
                AttentionParams params = AttentionParams.defaults().qDType(DType.F32);
                float[] q = queries(4 * 8);
                float[] out = new float[q.length];
                for (int w : new int[] {WINDOW, 3}) {
                    p.launchAttention(b, 1, q, out, params.clone().slidingWindow(w));
                    assertClose(reference(q, 20, 1, 4, 2, 8, 0, 0, w), out);
                }
                // A windowed pool needs 1 <= params.slidingWindow <= its window.
                float[] qq = q;
                float[] oo = out;
                expectStatus(Status.INVALID_ARG, () -> p.launchAttention(b, 1, qq, oo, params));
                expectStatus(Status.INVALID_ARG,
                        () -> p.launchAttention(b, 1, qq, oo, params.clone().slidingWindow(WINDOW + 1)));

                // A query at position 11 (q_len 9) would sit in released block 2.
                expectStatus(Status.INVALID_ARG, () -> b.build(new long[] {1}, new long[] {9}));
                // Queries at 12..19 are held, but the one at 12 may see only itself.
                b.build(new long[] {1}, new long[] {8});
                float[] q8 = queries(8 * 4 * 8);
                float[] out8 = new float[q8.length];
                expectStatus(Status.INVALID_ARG,
                        () -> p.launchAttention(b, 0, q8, out8, params.clone().slidingWindow(2)));
                p.launchAttention(b, 0, q8, out8, params.clone().slidingWindow(1));
                assertClose(reference(q8, 20, 8, 4, 2, 8, 0, 0, 1), out8);
            }
        }
    }

    /**
     * A speculative step appends its pending token and its drafts in two calls, then builds one
     * batch with q_len 1 + drafts and launches with the pool's window. The drafts' append releases
     * only what the pending token's query no longer sees, so the launch goes through even at a
     * block boundary.
     */
    @Test
    void twoAppendsInOneStep() {
        try (Pool p = Pool.create(cpu())) {
            p.setSlidingWindow(WINDOW);
            p.alloc(1, new int[] {0}, null);
            writeSequence(p, 1, 0, 1);
            growOneByOne(p, 1, 20, pos -> writeSequence(p, 1, pos, 1));

            // Pending token 20: the previous call added 19, so blocks before 19 - 5 = 14 go (0..2,
            // as already); position 20 opens a block, the first uncached free one (5).
            assertEquals(1, p.append(1, new int[] {20}, 0), "pending append");
            // Drafts 21..23: the previous call added 20, whose query sees 15..20, so only blocks
            // before 15 go: nothing new. (By this call's own first position, 21, block 3 =
            // positions 12..15 would go, and the pending token's key 15 with it.)
            assertEquals(0, p.append(1, new int[] {21, 22, 23}, 0), "draft append");
            assertArrayEquals(new int[] {-1, -1, -1, 3, 4, 5}, p.blockTable(1));
            assertEquals(3, p.stats().usedBlocks());
            assertEquals(13, p.stats().freeBlocks());
            writeSequence(p, 1, 20, 4);
            try (Batch b = p.newBatch(2, 32, 8)) {
                b.build(new long[] {1}, new long[] {4});
                float[] q = queries(4 * 4 * 8);
                float[] out = new float[q.length];
                p.launchAttention(b, 1, q, out, AttentionParams.defaults().qDType(DType.F32).slidingWindow(WINDOW));
                assertClose(reference(q, 24, 4, 4, 2, 8, 0, 0, WINDOW), out);
            }

            // Verification keeps the pending token and one draft: truncate to 22 (f stays 21, the
            // drafts' first position). The next pending token (22) releases the blocks before
            // 21 - 5 = 16: block 3 as well.
            assertEquals(0, p.truncate(1, 22));
            assertEquals(0, p.append(1, new int[] {22}, 0), "next pending append");
            assertArrayEquals(new int[] {-1, -1, -1, -1, 4, 5}, p.blockTable(1));
            assertEquals(2, p.stats().usedBlocks());
            assertEquals(14, p.stats().freeBlocks());
            p.check();
        }
    }
}
