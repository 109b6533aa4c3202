package dev.kvc;

import static dev.kvc.TestUtil.expectStatus;
import static dev.kvc.TestUtil.small;
import static dev.kvc.TestUtil.span;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** Pool.appendBatch (kvc_append_batch) and Pool.admit (kvc_admit): the scheduler's batched calls. */
class BatchCallsTest {
    @Test
    void appendBatchDoesWhatTheAppendsDo() {
        try (Pool single = Pool.create(small()); Pool batch = Pool.create(small())) {
            for (Pool p : new Pool[] {single, batch}) {
                p.alloc(1, span(0, 3), null);
                p.alloc(2, span(10, 13), null);
                p.fork(2, 3); // 3 shares 2's partial block: the first append into it copies it
            }
            long[] ids = {1, 2, 3, 1};
            long[] offsets = {0, 2, 3, 4, 5};
            int[] tokens = {50, 51, 60, 70, 52};
            int[] want = new int[ids.length];
            for (int i = 0; i < ids.length; i++)
                want[i] = single.append(ids[i], java.util.Arrays.copyOfRange(tokens, (int) offsets[i], (int) offsets[i + 1]), 1);
            int[] got = new int[ids.length];
            assertEquals(4, batch.appendBatch(ids, offsets, tokens, 1, null, got));
            assertArrayEquals(want, got);
            assertEquals(2, got[1], "entry 1 copies the shared block and takes one more");
            for (long s = 1; s <= 3; s++) assertArrayEquals(single.blockTable(s), batch.blockTable(s), "seq " + s);
            BlockCopies a = single.takePendingCopies(), b = batch.takePendingCopies();
            assertEquals(1, b.count());
            assertArrayEquals(a.src(), b.src());
            assertArrayEquals(a.dst(), b.dst());
            single.check();
            batch.check();
        }
    }

    @Test
    void appendBatchStopsAtTheFirstRefusal() {
        try (Pool p = Pool.create(small())) {
            p.alloc(1, span(0, 3), null);
            p.alloc(2, span(10, 13), null);
            AppendBatchException e = assertThrows(AppendBatchException.class,
                    () -> p.appendBatch(new long[] {1, 99, 2}, null, new int[] {5, 6, 7}, 0, null, null));
            assertEquals(Status.UNKNOWN_SEQ, e.status());
            assertEquals(1, e.appended());
            assertTrue(e.libraryMessage().contains("entry 1 of 3"), e.getMessage());
            assertEquals(4, p.numTokens(1));
            assertEquals(3, p.numTokens(2));
            // Bad arguments in any entry: nothing changed.
            AppendBatchException bad = assertThrows(AppendBatchException.class,
                    () -> p.appendBatch(new long[] {1, 2}, null, new int[] {5, 6}, 0, new long[] {0, -1}, null));
            assertEquals(Status.INVALID_ARG, bad.status());
            assertEquals(0, bad.appended());
            assertEquals(4, p.numTokens(1));
            // Arrays shorter than the entries imply: refused by the binding.
            expectStatus(Status.INVALID_ARG, () -> p.appendBatch(new long[] {1, 2}, new long[] {0, 1}, new int[] {5}, 0, null, null));
            expectStatus(Status.INVALID_ARG, () -> p.appendBatch(new long[] {1, 2}, new long[] {0, 1, 3}, new int[] {5, 6}, 0, null, null));
            expectStatus(Status.INVALID_ARG, () -> p.appendBatch(new long[] {1, 2}, null, new int[] {5}, 0, null, null));
            expectStatus(Status.INVALID_ARG, () -> p.appendBatch(new long[] {1}, null, new int[] {5}, 0, null, new int[2]));
            assertEquals(4, p.numTokens(1));
            p.check();
        }
    }

    @Test
    void admitIsCanAllocThenAlloc() {
        try (Pool p = Pool.create(small().watermark(0.25))) { // 4 of 16 blocks kept free
            Admission a = p.admit(1, span(0, 20), null);
            assertEquals(new Admission(AllocVerdict.OK, 0), a);
            int[] hit = new int[17];
            System.arraycopy(span(0, 16), 0, hit, 0, 16);
            hit[16] = 99;
            assertEquals(new Admission(AllocVerdict.OK, 16), p.admit(2, hit, null));
            assertEquals(AllocVerdict.LATER, p.canAlloc(span(100, 132), null));
            assertEquals(new Admission(AllocVerdict.LATER, 0), p.admit(3, span(100, 132), null));
            expectStatus(Status.UNKNOWN_SEQ, () -> p.numTokens(3));
            assertEquals(AllocVerdict.NEVER, p.admit(4, span(500, 568), null).verdict());
            expectStatus(Status.SEQ_EXISTS, () -> p.admit(1, span(0, 4), null));
            p.check();
        }
    }
}
