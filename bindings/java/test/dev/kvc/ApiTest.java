package dev.kvc;

import static dev.kvc.TestUtil.expectStatus;
import static dev.kvc.TestUtil.small;
import static dev.kvc.TestUtil.span;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

class ApiTest {
    @Test
    void abortDropsUnwrittenBlocks() {
        try (Pool p = Pool.create(TestUtil.small())) {
            p.alloc(1, TestUtil.span(0, 9), null); // 2 full blocks, filled by this sequence
            p.free(1);
            assertEquals(8, p.prefixLookup(TestUtil.span(0, 9), null));
            p.alloc(2, TestUtil.span(0, 17), null); // hits 8, fills 2 more full blocks
            p.abort(2);
            assertEquals(8, p.prefixLookup(TestUtil.span(0, 17), null));
            TestUtil.expectStatus(Status.UNKNOWN_SEQ, () -> p.abort(2));
        }
    }

    @Test
    void versions() {
        int v = Kvc.version();
        assertEquals(Kvc.headerVersion(), v);
        assertEquals((v / 10000) + "." + (v / 100 % 100) + "." + (v % 100), Kvc.versionString());
    }

    @Test
    void statusValuesMatchTheLibrary() {
        for (Status s : Status.values()) {
            String name = s == Status.OK ? "KVC_OK" : "KVC_ERR_" + s.name();
            assertTrue(s.description().startsWith(name), s + " -> " + s.description());
            assertEquals(s, Status.of(s.code()));
        }
        assertNull(Status.of(9999));
        assertFalse(KvcNative.kvc_status_str(9999).isEmpty());
    }

    @Test
    void lastErrorFunctions() {
        KvcException e = expectStatus(Status.NULL_ARG, () -> KvcNative.kvc_keys_set_priority(0, 50));
        // The thread's message is the one the exception carries (same thread, nothing in between).
        String msg = KvcNative.kvc_last_error();
        assertEquals(e.libraryMessage(), msg);
        byte[] buf = new byte[msg.length() + 1];
        long[] len = new long[1];
        KvcNative.kvc_last_error_copy(buf, buf.length, len);
        assertEquals(msg.length(), len[0]);
        assertEquals(msg, new String(buf, 0, msg.length(), StandardCharsets.UTF_8));
        assertEquals(0, buf[msg.length()]);
        byte[] small = new byte[4];
        KvcNative.kvc_last_error_copy(small, 4, len);
        assertEquals(msg.length(), len[0]);
        assertEquals(msg.substring(0, 3), new String(small, 0, 3, StandardCharsets.UTF_8));
        assertEquals(0, small[3]);
        expectStatus(Status.NULL_ARG, () -> KvcNative.kvc_last_error_copy(null, 8, len));
    }

    @Test
    void defaultsAndSizing() {
        PoolConfig c = PoolConfig.defaults();
        assertEquals(16, c.blockSize());
        assertEquals(1, c.numLayers());
        assertEquals(1, c.numKvHeads());
        assertEquals(128, c.headDim());
        assertEquals(DType.F16, c.kvDType());
        assertEquals(0.9, c.memoryUtilization(), 1e-12);
        assertEquals(0.01, c.watermark(), 1e-12);
        assertTrue(c.prefixCaching());
        assertEquals(Backend.NONE, c.backend());
        assertEquals(4096, c.eventCapacity());
        assertEquals(0, c.maxSeqLen());
        assertEquals(2L * 16 * 128 * 2, c.bytesPerBlock());
        c.numLayers(4).numKvHeads(8).kvDType(DType.F32);
        long bpb = c.bytesPerBlock();
        assertEquals(2L * 16 * 8 * 128 * 4 * 4, bpb);
        assertEquals(50, c.blocksForBudget(100 * bpb + 7, 0.5));
        expectStatus(Status.INVALID_ARG, () -> c.blocksForBudget(-1, 0.5));
        expectStatus(Status.INVALID_ARG, () -> c.blocksForBudget(1000, 0));
        expectStatus(Status.INVALID_ARG, () -> c.blocksForBudget(1000, 1.5));
        expectStatus(Status.INVALID_ARG, () -> c.clone().blockSize(0).bytesPerBlock());
        expectStatus(Status.OVERFLOW,
                () -> c.clone().headDim(1 << 30).numKvHeads(1 << 30).numLayers(1 << 30).blockSize(1 << 30).bytesPerBlock());
        assertTrue(Kvc.cudaDeviceCount() >= 0);
    }

    @Test
    void exceptionMessageNamesTheFunctionOnce() {
        try (Pool p = Pool.create(small())) {
            KvcException e = expectStatus(Status.UNKNOWN_SEQ, () -> p.free(7));
            String m = e.getMessage();
            // kvc_last_error() itself starts with "kvc_free: "; getMessage() must not say it twice.
            assertTrue(e.libraryMessage().startsWith("kvc_free: "), e.libraryMessage());
            assertTrue(m.startsWith("kvc_free: UNKNOWN_SEQ: "), m);
            assertEquals(m.indexOf("kvc_free"), m.lastIndexOf("kvc_free"), m);
            assertEquals("kvc_free: UNKNOWN_SEQ: " + e.libraryMessage().substring("kvc_free: ".length()), m);
        }
    }

    @Test
    void poolLifecycleAndUseAfterClose() {
        Pool p = Pool.create(small());
        PoolConfig cfg = p.config();
        assertEquals(16, cfg.numBlocks());
        assertEquals(4, cfg.blockSize());
        p.check();
        p.close();
        p.close(); // idempotent
        KvcException e = expectStatus(Status.STATE, () -> p.alloc(1, span(0, 4), null));
        assertTrue(e.getMessage().contains("closed"), e.getMessage());
        expectStatus(Status.STATE, p::check);
        expectStatus(Status.STATE, p::stats);
        expectStatus(Status.STATE, () -> p.free(1));
        expectStatus(Status.STATE, () -> p.blockTable(1));
        expectStatus(Status.STATE, () -> p.newBatch(1, 1, 1));
        expectStatus(Status.STATE, p::popEvent);
        expectStatus(Status.STATE, p::resetPrefixCache);
    }

    @Test
    void poolCreationErrors() {
        expectStatus(Status.INVALID_ARG, () -> Pool.create(small().blockSize(0)));
        expectStatus(Status.INVALID_ARG, () -> Pool.create(small().watermark(1.5)));
        expectStatus(Status.INVALID_ARG, () -> Pool.create(small().numBlocks(-1)));
    }

    @Test
    void poolFromBudget() {
        PoolConfig c = PoolConfig.defaults();
        long bpb = c.bytesPerBlock();
        try (Pool p = Pool.create(c.numBlocks(0).memoryBudgetBytes(100 * bpb).memoryUtilization(0.5))) {
            assertEquals(50, p.config().numBlocks());
            assertEquals(50, p.stats().freeBlocks());
        }
    }

    @Test
    @SuppressWarnings("try") // closes a try-with-resources variable on purpose (idempotence)
    void keys() {
        try (Pool p = Pool.create(small()); Keys k = Keys.create(); Keys other = Keys.create()) {
            k.setLora(7);
            k.setSalt("tenant-a");
            k.setPriority(80);
            k.addMultimodal(1, 2, 0, 4);
            assertEquals(0, p.alloc(1, span(0, 9), k));
            assertEquals(8, p.prefixLookup(span(0, 9), k));
            assertEquals(0, p.prefixLookup(span(0, 9), null));
            other.setLora(7);
            other.setSalt("tenant-a");
            assertEquals(0, p.prefixLookup(span(0, 9), other));
            other.addMultimodal(1, 2, 0, 4);
            other.setPriority(10);
            assertEquals(8, p.prefixLookup(span(0, 9), other));
            other.clear();
            assertEquals(0, p.prefixLookup(span(0, 9), other));

            expectStatus(Status.INVALID_ARG, () -> k.setPriority(Keys.PRIORITY_MAX + 1));
            expectStatus(Status.INVALID_ARG, () -> k.setPriority(Keys.PRIORITY_MIN - 1));
            expectStatus(Status.INVALID_ARG, () -> k.setSalt("x".repeat(Keys.MAX_SALT_LEN + 1)));
            expectStatus(Status.INVALID_ARG, () -> k.setSalt("a\0b"));
            expectStatus(Status.INVALID_ARG, () -> k.addMultimodal(0, 0, -1, 4));
            expectStatus(Status.INVALID_ARG, () -> k.addMultimodal(0, 0, 2, 4));

            // A non-ASCII salt is passed as UTF-8: equal salts share, different ones do not.
            Keys emoji = Keys.create();
            emoji.setSalt("t\u00e9nant-\uD83D\uDE00");
            p.alloc(2, span(100, 109), emoji);
            Keys same = Keys.create();
            same.setSalt("t\u00e9nant-\uD83D\uDE00");
            assertEquals(8, p.prefixLookup(span(100, 109), same));
            same.setSalt("t\u00e9nant-\uD83D\uDE01");
            assertEquals(0, p.prefixLookup(span(100, 109), same));
            emoji.close();
            same.close();

            k.close();
            k.close();
            expectStatus(Status.STATE, () -> p.alloc(3, span(0, 9), k));
            expectStatus(Status.STATE, () -> k.setLora(1));
            expectStatus(Status.STATE, k::clear);
        }
    }

    @Test
    void sequences() {
        try (Pool p = Pool.create(small())) {
            assertEquals(0, p.alloc(1, span(0, 10), null));
            assertArrayEquals(new int[] {0, 1, 2}, p.blockTable(1));
            assertEquals(10, p.numTokens(1));
            assertArrayEquals(new long[] {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, p.slotMapping(1, 0, 10));
            int[] prompt = {0, 1, 2, 3, 4, 5, 6, 7, 100, 101, 102};
            assertEquals(8, p.alloc(2, prompt, null));
            assertArrayEquals(new int[] {0, 1, 3}, p.blockTable(2));
            assertEquals(1, p.append(1, new int[] {10, 11, 12}, 0));
            assertArrayEquals(new int[] {0, 1, 2, 4}, p.blockTable(1));
            p.fork(1, 3);
            assertArrayEquals(new int[] {0, 1, 2, 4}, p.blockTable(3));
            assertEquals(1, p.append(3, new int[] {13}, 0));
            assertEquals(1, p.pendingCopyCount());
            BlockCopies c = p.takePendingCopies();
            assertArrayEquals(new int[] {4}, c.src());
            assertArrayEquals(new int[] {5}, c.dst());
            assertEquals(0, p.takePendingCopies().count());

            Stats s = p.stats();
            assertEquals(2, s.allocs());
            assertEquals(1, s.forks());
            assertEquals(1, s.cowCopies());
            assertEquals(3, s.numSeqs());
            assertEquals(6, s.usedBlocks());
            assertEquals(10, s.freeBlocks());
            assertEquals(16, s.totalBlocks());
            assertEquals(8, s.prefixHitTokens());
            assertEquals(21, s.prefixQueryTokens());
            assertEquals(6.0 / 16, s.utilization(), 1e-9);

            assertEquals(AllocVerdict.OK, p.canAlloc(span(1000, 1040), null));
            assertEquals(AllocVerdict.LATER, p.canAlloc(span(1000, 1044), null));
            assertEquals(AllocVerdict.NEVER, p.canAlloc(span(1000, 1068), null));
            expectStatus(Status.OUT_OF_BLOCKS, () -> p.alloc(9, span(1000, 1044), null));

            expectStatus(Status.INVALID_ARG, () -> p.alloc(20, null, null));
            expectStatus(Status.INVALID_ARG, () -> p.alloc(20, new int[0], null));
            expectStatus(Status.SEQ_EXISTS, () -> p.alloc(1, span(0, 3), null));
            expectStatus(Status.UNKNOWN_SEQ, () -> p.append(99, new int[] {1}, 0));
            expectStatus(Status.INVALID_ARG, () -> p.append(1, null, 0));
            expectStatus(Status.INVALID_ARG, () -> p.append(1, new int[] {1}, -1));
            expectStatus(Status.INVALID_ARG, () -> p.fork(1, 1));
            expectStatus(Status.UNKNOWN_SEQ, () -> p.fork(99, 100));
            expectStatus(Status.UNKNOWN_SEQ, () -> p.blockTable(99));
            expectStatus(Status.UNKNOWN_SEQ, () -> p.numTokens(99));
            expectStatus(Status.INVALID_ARG, () -> p.slotMapping(1, -1, 1));
            expectStatus(Status.INVALID_ARG, () -> p.slotMapping(1, 0, 17));
            expectStatus(Status.INVALID_ARG, () -> p.slotMapping(1, 0, -1));
            expectStatus(Status.INVALID_ARG, () -> p.slotMapping(1, 0, Integer.MAX_VALUE));
            expectStatus(Status.UNKNOWN_SEQ, () -> p.slotMapping(99, 0, Integer.MAX_VALUE));

            p.free(2);
            expectStatus(Status.UNKNOWN_SEQ, () -> p.free(2));
            p.free(3);
            p.free(1);
            s = p.stats();
            assertEquals(0, s.numSeqs());
            assertEquals(0, s.usedBlocks());
            assertEquals(3, s.frees());
            p.check();
        }
    }

    @Test
    void longBlockTable() {
        try (Pool p = Pool.create(small().numBlocks(64))) {
            p.alloc(1, span(0, 80), null); // 20 blocks: more than the first buffer guess
            assertArrayEquals(span(0, 20), p.blockTable(1));
            assertEquals(80, p.slotMapping(1, 0, 80).length);
        }
    }

    @Test
    void lookaheadMaxLenAndTokenless() {
        try (Pool p = Pool.create(small().maxSeqLen(12))) {
            p.alloc(1, span(0, 6), null);
            assertEquals(1, p.append(1, null, 3));
            assertEquals(6, p.numTokens(1));
            assertArrayEquals(new long[] {6, 7, 8}, p.slotMapping(1, 6, 3));
            assertEquals(0, p.append(1, new int[] {6, 7}, 0));
            expectStatus(Status.MAX_LEN, () -> p.append(1, span(8, 13), 0));
            expectStatus(Status.MAX_LEN, () -> p.alloc(2, span(0, 13), null));
        }
        try (Pool p = Pool.create(small().prefixCaching(false))) {
            p.allocN(1, 10, null);
            assertArrayEquals(new int[] {0, 1, 2}, p.blockTable(1));
            assertEquals(0, p.appendN(1, 2, 0));
            assertEquals(1, p.appendN(1, 1, 0));
            assertEquals(13, p.numTokens(1));
            expectStatus(Status.INVALID_ARG, () -> p.allocN(2, 0, null));
        }
        try (Pool p = Pool.create(small())) {
            expectStatus(Status.NULL_ARG, () -> p.allocN(1, 4, null));
        }
    }
}
