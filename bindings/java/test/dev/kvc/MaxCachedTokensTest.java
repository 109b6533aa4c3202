package dev.kvc;

import static dev.kvc.TestUtil.expectStatus;
import static dev.kvc.TestUtil.small;
import static dev.kvc.TestUtil.span;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import org.junit.jupiter.api.Test;

/**
 * Keys.setMaxCachedTokens (kvc_keys_set_max_cached_tokens): the prefix hit of requests using the
 * keys is capped, rounded down to a block, in prefixLookup, the per-tier lookup, canAlloc and alloc.
 */
class MaxCachedTokensTest {
    @Test
    void capsTheHitAndClearRemovesIt() {
        try (Pool p = Pool.create(small()); Keys k = Keys.create()) { // block size 4, caching on
            int[] prompt = span(100, 125); // 25 tokens: a hit can cover the first 24
            p.alloc(1, Arrays.copyOf(prompt, 24), null);
            assertEquals(24, p.prefixLookup(prompt, k), "no cap");

            k.setMaxCachedTokens(10); // rounded down to 8
            assertEquals(8, p.prefixLookup(prompt, k), "cap 10");
            assertEquals(new TierHits(8, 0, 0), p.tiers().prefixLookup(prompt, k));
            k.setMaxCachedTokens(0);
            assertEquals(0, p.prefixLookup(prompt, k), "cap 0");

            k.setMaxCachedTokens(10);
            assertEquals(AllocVerdict.OK, p.canAlloc(prompt, k));
            long freeBefore = p.stats().freeBlocks();
            assertEquals(8, p.alloc(2, prompt, k), "cached tokens reported by alloc under cap 10");
            // Blocks 0 and 1 are shared; blocks 2..6 are fresh (block 2 is recomputed, not shared).
            assertEquals(freeBefore - 5, p.stats().freeBlocks());
            int[] t1 = p.blockTable(1);
            int[] t2 = p.blockTable(2);
            assertEquals(t1[0], t2[0]);
            assertEquals(t1[1], t2[1]);
            assertNotEquals(t1[2], t2[2]);

            // A refused value leaves the cap as it was.
            expectStatus(Status.INVALID_ARG, () -> k.setMaxCachedTokens(-2));
            assertEquals(8, p.prefixLookup(prompt, k), "after a refused -2");
            k.setMaxCachedTokens(-1);
            assertEquals(24, p.prefixLookup(prompt, k), "after -1");
            k.setMaxCachedTokens(10);
            k.clear();
            assertEquals(24, p.prefixLookup(prompt, k), "clear removes the cap");
            p.check();
        }
        Keys closed = Keys.create();
        closed.close();
        expectStatus(Status.STATE, () -> closed.setMaxCachedTokens(10));
    }

    /** With a sliding window the capped hit is the largest valid one below the cap. */
    @Test
    void withSlidingWindowTakesTheLargestValidHitBelowTheCap() {
        try (Pool p = Pool.create(small()); Keys k = Keys.create()) {
            p.setSlidingWindow(6);
            int[] prompt = span(100, 125);
            p.alloc(1, Arrays.copyOf(prompt, 4), null);
            for (int pos = 4; pos < 24; pos++) { // blocks 0..3 are released as it grows, still cached
                p.append(1, new int[] {prompt[pos]}, 0);
            }
            assertEquals(24, p.prefixLookup(prompt, k), "no cap");
            k.setMaxCachedTokens(23);
            assertEquals(20, p.prefixLookup(prompt, k), "cap 23: window from 15, blocks 3 and 4");
            k.setMaxCachedTokens(17);
            assertEquals(16, p.prefixLookup(prompt, k), "cap 17: window from 11, blocks 2 and 3");
            assertEquals(16, p.alloc(2, prompt, k));
            int[] table = p.blockTable(2);
            assertEquals(7, table.length, Arrays.toString(table));
            assertEquals(-1, table[0]);
            assertEquals(-1, table[1]);
            assertTrue(table[2] >= 0, Arrays.toString(table));
            p.check();
        }
    }
}
