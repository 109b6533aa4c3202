package dev.kvc;

import static dev.kvc.TestUtil.cpu;
import static dev.kvc.TestUtil.expectStatus;
import static dev.kvc.TestUtil.small;
import static dev.kvc.TestUtil.span;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import org.junit.jupiter.api.Test;

class StorageBatchAttentionTest {
    static float kvValue(int kv, int pos, int head, int d) {
        return kv * 1000 + pos * 10 + head + d / 16f;
    }

    static float[] tokenKV(int kv, int first, int n, int heads, int dim) {
        float[] out = new float[n * heads * dim];
        int i = 0;
        for (int pos = first; pos < first + n; pos++) {
            for (int h = 0; h < heads; h++) {
                for (int d = 0; d < dim; d++) {
                    out[i++] = kvValue(kv, pos, h, d);
                }
            }
        }
        return out;
    }

    static float f32At(byte[] b, long off) {
        return ByteBuffer.wrap(b).order(ByteOrder.nativeOrder()).getFloat(Math.toIntExact(off));
    }

    @Test
    void storageInfoAndBlockCopies() {
        try (Pool p = Pool.create(cpu())) {
            StorageInfo si = p.storageInfo();
            long tok = 8 * 4;
            assertEquals(new StorageInfo(Backend.CPU, DType.F32, 4, -1, si.baseAddress(), 16L * 2 * 2 * 2 * 4 * tok,
                    2L * 2 * 2 * 4 * tok, 2L * 2 * 4 * tok, 2L * 4 * tok, 4 * tok, tok), si);
            assertNotEquals(0, si.baseAddress());
            assertEquals(cpu().bytesPerBlock(), si.blockStride());
            byte[] pattern = new byte[Math.toIntExact(2 * si.blockStride())];
            for (int i = 0; i < pattern.length; i++) {
                pattern[i] = (byte) (i * 7 + 3);
            }
            p.writeBlocks(new int[] {3, 9}, pattern);
            byte[] back = new byte[pattern.length];
            p.readBlocks(new int[] {3, 9}, back);
            assertArrayEquals(pattern, back);
            byte[] one = new byte[Math.toIntExact(si.blockStride())];
            expectStatus(Status.BUFFER_TOO_SMALL, () -> p.readBlocks(new int[] {3, 9}, one));
            expectStatus(Status.INVALID_ARG, () -> p.readBlocks(new int[] {16}, one));
            expectStatus(Status.INVALID_ARG, () -> p.writeBlocks(new int[] {-1}, one));
        }
        try (Pool meta = Pool.create(small())) {
            expectStatus(Status.STATE, meta::storageInfo);
            expectStatus(Status.STATE, () -> meta.copyPending(0));
            expectStatus(Status.STATE,
                    () -> meta.cacheWrite(0, new long[] {0}, new byte[4096], new byte[4096], DType.F32, 1, 1));
        }
    }

    @Test
    void cacheWriteAndCopyPending() {
        try (Pool p = Pool.create(cpu())) {
            StorageInfo si = p.storageInfo();
            p.alloc(1, span(0, 6), null);
            long[] slots = p.slotMapping(1, 0, 6);
            float[] k = tokenKV(0, 0, 6, 2, 8);
            float[] v = tokenKV(1, 0, 6, 2, 8);
            p.cacheWrite(1, slots, k, v, 1, 1);
            int[] table = p.blockTable(1);
            byte[] host = new byte[Math.toIntExact(table.length * si.blockStride())];
            p.readBlocks(table, host);
            for (int pos = 0; pos < 6; pos++) {
                for (int kv = 0; kv < 2; kv++) {
                    for (int h = 0; h < 2; h++) {
                        for (int d = 0; d < 8; d++) {
                            long off = (pos / 4) * si.blockStride() + si.layerStride() + kv * si.kvStride()
                                    + h * si.headStride() + (pos % 4) * si.tokenStride() + d * 4L;
                            assertEquals(kvValue(kv, pos, h, d), f32At(host, off));
                        }
                    }
                }
            }
            expectStatus(Status.BUFFER_TOO_SMALL,
                    () -> p.cacheWrite(0, slots, new byte[10], Pool.toBytes(v), DType.F32, 1, 1));
            expectStatus(Status.INVALID_ARG, () -> p.cacheWrite(2, slots, k, v, 1, 1));
            expectStatus(Status.INVALID_ARG, () -> p.cacheWrite(0, slots, k, v, 0, 1));

            p.fork(1, 2);
            p.append(2, new int[] {6}, 0);
            assertEquals(1, p.pendingCopyCount());
            assertEquals(1, p.copyPending(0));
            assertEquals(0, p.pendingCopyCount());
            int[] child = p.blockTable(2);
            assertNotEquals(table[1], child[1]);
            byte[] a = new byte[Math.toIntExact(si.blockStride())];
            byte[] b = new byte[a.length];
            p.readBlocks(new int[] {table[1]}, a);
            p.readBlocks(new int[] {child[1]}, b);
            assertArrayEquals(a, b);

            // A storage access completes the pairs queued before it: reading the block copies it.
            p.fork(1, 3);
            p.append(3, new int[] {7}, 0);
            assertEquals(1, p.pendingCopyCount());
            p.readBlocks(new int[] {p.blockTable(3)[1]}, b);
            assertEquals(0, p.pendingCopyCount());
            assertArrayEquals(a, b);
            assertEquals(0, p.copyPending(0));
        }
    }

    @Test
    void batchBuild() {
        try (Pool p = Pool.create(cpu())) {
            p.alloc(1, span(0, 6), null);
            p.alloc(2, span(100, 110), null);
            try (Batch b = p.newBatch(4, 64, 8)) {
                expectStatus(Status.STATE, b::info);
                b.build(new long[] {1, 2}, new long[] {6, 10});
                BatchInfo i = b.info();
                assertEquals(2, i.numSeqs());
                assertEquals(16, i.numTokens());
                assertEquals(10, i.maxQLen());
                assertEquals(10, i.maxSeqLen());
                assertEquals(5, i.numIndices());
                assertFalse(i.isDecode());
                assertTrue(i.maxBlocksPerSeq() >= 3);
                long[] s1 = p.slotMapping(1, 0, 6);
                long[] s2 = p.slotMapping(2, 0, 10);
                long[] want = new long[16];
                System.arraycopy(s1, 0, want, 0, 6);
                System.arraycopy(s2, 0, want, 6, 10);
                assertArrayEquals(want, b.slotMapping());
                int w = i.maxBlocksPerSeq();
                int[] tables = b.blockTables();
                assertEquals(2 * w, tables.length);
                long[] ids = {1, 2};
                for (int row = 0; row < 2; row++) {
                    int[] t = p.blockTable(ids[row]);
                    for (int j = 0; j < w; j++) {
                        assertEquals(j < t.length ? t[j] : -1, tables[row * w + j]);
                    }
                }
                p.append(1, new int[] {6}, 0);
                p.append(2, new int[] {110}, 0);
                b.build(new long[] {1, 2}, new long[] {1, 1});
                BatchInfo d = b.info();
                assertTrue(d.isDecode());
                assertEquals(2, d.numTokens());
                assertArrayEquals(new long[] {p.slotMapping(1, 6, 1)[0], p.slotMapping(2, 10, 1)[0]}, b.slotMapping());
                expectStatus(Status.UNKNOWN_SEQ, () -> b.build(new long[] {1, 99}, new long[] {1, 1}));
                expectStatus(Status.INVALID_ARG, () -> b.build(new long[] {1, 1}, new long[] {1, 1}));
                expectStatus(Status.INVALID_ARG, () -> b.build(new long[] {1}, new long[] {0}));
                expectStatus(Status.INVALID_ARG, () -> b.build(new long[] {1, 2}, new long[] {1}));
                expectStatus(Status.INVALID_ARG, () -> b.build(null, null));
                assertEquals(d, b.info());
            }
            expectStatus(Status.INVALID_ARG, () -> p.newBatch(0, 64, 8));
            Batch narrow = p.newBatch(2, 64, 1);
            expectStatus(Status.BUFFER_TOO_SMALL, () -> narrow.build(new long[] {2}, new long[] {1}));
            narrow.close();
            narrow.close();
            expectStatus(Status.STATE, narrow::info);
        }
        Pool p = Pool.create(cpu());
        p.alloc(1, span(0, 5), null);
        Batch b = p.newBatch(2, 16, 4);
        b.build(new long[] {1}, new long[] {5});
        p.close();
        expectStatus(Status.STATE, b::info);
        b.close();
    }

    @Test
    void batchSetStreamIgnoredOnCpu() {
        try (Pool p = Pool.create(cpu())) {
            p.alloc(1, span(0, 9), null);
            p.alloc(2, span(50, 53), null);
            try (Batch plain = p.newBatch(2, 32, 8); Batch streamed = p.newBatch(2, 32, 8)) {
                streamed.setStream(0xdeadb000L); // never dereferenced off CUDA
                for (long[] q : new long[][] {{9, 3}, {1, 1}}) {
                    plain.build(new long[] {1, 2}, q);
                    streamed.build(new long[] {1, 2}, q);
                    assertArrayEquals(plain.slotMapping(), streamed.slotMapping());
                    assertArrayEquals(plain.blockTables(), streamed.blockTables());
                    assertEquals(plain.info().numIndices(), streamed.info().numIndices());
                }
                streamed.setStream(0);
                streamed.build(new long[] {2}, new long[] {1});
                assertArrayEquals(p.slotMapping(2, 2, 1), streamed.slotMapping());
            }
            Batch closed = p.newBatch(1, 8, 2);
            closed.close();
            expectStatus(Status.STATE, () -> closed.setStream(0));
        }
        // The public class never passes a NULL batch; the C check is reached through KvcNative.
        KvcException e = expectStatus(Status.NULL_ARG, () -> KvcNative.kvc_batch_set_stream(0, 0));
        assertTrue(e.libraryMessage().contains("kvc_batch_set_stream"), e.libraryMessage());
    }

    /** Causal GQA attention in double for one sequence whose K/V are kvValue rows. */
    static float[] reference(float[] q, int seqLen, int qLen, int qHeads, int kvHeads, int dim, float scale,
            float softcap, int window) {
        float[] out = new float[qLen * qHeads * dim];
        double sc = scale == 0 ? 1 / Math.sqrt(dim) : scale;
        for (int j = 0; j < qLen; j++) {
            int qpos = seqLen - qLen + j;
            for (int h = 0; h < qHeads; h++) {
                int kvh = h / (qHeads / kvHeads);
                int first = window > 0 ? Math.max(0, qpos - window + 1) : 0;
                double[] logits = new double[qpos + 1];
                double max = Double.NEGATIVE_INFINITY;
                for (int pos = first; pos <= qpos; pos++) {
                    double dot = 0;
                    for (int d = 0; d < dim; d++) {
                        dot += q[(j * qHeads + h) * dim + d] * (double) kvValue(0, pos, kvh, d);
                    }
                    double l = dot * sc;
                    if (softcap > 0) {
                        l = softcap * Math.tanh(l / softcap);
                    }
                    logits[pos] = l;
                    max = Math.max(max, l);
                }
                double sum = 0;
                double[] acc = new double[dim];
                for (int pos = first; pos <= qpos; pos++) {
                    double wgt = Math.exp(logits[pos] - max);
                    sum += wgt;
                    for (int d = 0; d < dim; d++) {
                        acc[d] += wgt * kvValue(1, pos, kvh, d);
                    }
                }
                for (int d = 0; d < dim; d++) {
                    out[(j * qHeads + h) * dim + d] = (float) (acc[d] / sum);
                }
            }
        }
        return out;
    }

    static void assertClose(float[] want, float[] got) {
        for (int i = 0; i < want.length; i++) {
            assertEquals(want[i], got[i], 1e-4 * Math.max(1, Math.abs(want[i])), "element " + i);
        }
    }

    static float[] queries(int n) {
        float[] q = new float[n];
        for (int i = 0; i < n; i++) {
            q[i] = (float) Math.sin(i * 0.7) * 0.05f;
        }
        return q;
    }

    static void writeSequence(Pool p, long seq, int first, int n) {
        long[] slots = p.slotMapping(seq, first, n);
        for (int layer = 0; layer < 2; layer++) {
            p.cacheWrite(layer, slots, tokenKV(0, first, n, 2, 8), tokenKV(1, first, n, 2, 8), 1, 1);
        }
    }

    @Test
    void attention() {
        try (Pool p = Pool.create(cpu()); Pool other = Pool.create(cpu())) {
            p.alloc(1, span(0, 7), null);
            writeSequence(p, 1, 0, 7);
            Batch b = p.newBatch(2, 32, 8);
            AttentionParams params = AttentionParams.defaults().qDType(DType.F32);
            b.build(new long[] {1}, new long[] {7});
            float[] q = queries(7 * 4 * 8);
            float[] out = new float[q.length];
            p.launchAttention(b, 1, q, out, params);
            assertClose(reference(q, 7, 7, 4, 2, 8, 0, 0, 0), out);

            p.append(1, new int[] {7}, 0);
            writeSequence(p, 1, 7, 1);
            b.build(new long[] {1}, new long[] {1});
            q = queries(4 * 8);
            out = new float[q.length];
            p.launchAttention(b, 0, q, out, params);
            float[] plain = reference(q, 8, 1, 4, 2, 8, 0, 0, 0);
            assertClose(plain, out);

            p.launchAttention(b, 0, q, out, params.clone().scale(0.5f).logitSoftcap(0.3f).slidingWindow(3));
            assertClose(reference(q, 8, 1, 4, 2, 8, 0.5f, 0.3f, 3), out);

            p.launchAttention(b, 0, q, out, params.clone().alibiSlopes(new float[] {4, 4, 4, 4}));
            boolean differs = false;
            for (int i = 0; i < out.length; i++) {
                differs |= Math.abs(out[i] - plain[i]) > 1e-3;
            }
            assertTrue(differs, "ALiBi slopes had no effect");
            float[] qq = q;
            float[] oo = out;
            expectStatus(Status.INVALID_ARG,
                    () -> p.launchAttention(b, 0, qq, oo, params.clone().alibiSlopes(new float[] {1})));
            expectStatus(Status.BUFFER_TOO_SMALL,
                    () -> p.launchAttention(b, 0, new byte[4], new byte[oo.length * 4], params));
            expectStatus(Status.INVALID_ARG, () -> p.launchAttention(b, 2, qq, oo, params));
            expectStatus(Status.INVALID_ARG, () -> p.launchAttention(b, 0, qq, oo, params.clone().numQHeads(3)));
            try (Batch fresh = p.newBatch(1, 8, 8)) {
                expectStatus(Status.STATE, () -> p.launchAttention(fresh, 0, qq, oo, params));
            }
            expectStatus(Status.STATE, () -> other.launchAttention(b, 0, qq, oo, params));
            b.close();
            expectStatus(Status.STATE, () -> p.launchAttention(b, 0, qq, oo, params));
        }
    }

    /**
     * The address forms, on the CPU backend with pure Java: scratch data is placed in unused pool
     * blocks (14, 15) with writeBlocks and addressed through the storage's base address.
     */
    @Test
    void addressForms() {
        try (Pool p = Pool.create(cpu())) {
            StorageInfo si = p.storageInfo();
            p.alloc(1, span(0, 6), null);
            long[] slots = p.slotMapping(1, 0, 6);
            ByteBuffer scratch = ByteBuffer.allocate(Math.toIntExact(si.blockStride())).order(ByteOrder.nativeOrder());
            for (long s : slots) {
                scratch.putLong(s);
            }
            scratch.position(64);
            for (float f : tokenKV(0, 0, 6, 2, 8)) {
                scratch.putFloat(f);
            }
            scratch.position(512);
            for (float f : tokenKV(1, 0, 6, 2, 8)) {
                scratch.putFloat(f);
            }
            p.writeBlocks(new int[] {15}, scratch.array());
            long base15 = si.baseAddress() + 15 * si.blockStride();
            p.cacheWriteAt(0, base15, 6, base15 + 64, base15 + 512, DType.F32, 1, 1, 0);
            p.cacheWriteAt(1, base15, 6, base15 + 64, base15 + 512, DType.F32, 1, 1, 0);
            int[] table = p.blockTable(1);
            byte[] host = new byte[Math.toIntExact(table.length * si.blockStride())];
            p.readBlocks(table, host);
            long off = si.blockStride() + si.kvStride() + si.headStride() + si.tokenStride() + 3 * 4;
            assertEquals(kvValue(1, 5, 1, 3), f32At(host, off));

            try (Batch b = p.newBatch(1, 8, 8)) {
                b.build(new long[] {1}, new long[] {1});
                float[] q = queries(4 * 8);
                ByteBuffer qb = ByteBuffer.allocate(Math.toIntExact(si.blockStride())).order(ByteOrder.nativeOrder());
                for (float f : q) {
                    qb.putFloat(f);
                }
                p.writeBlocks(new int[] {14}, qb.array());
                long base14 = si.baseAddress() + 14 * si.blockStride();
                AttentionParams params = AttentionParams.defaults().qDType(DType.F32);
                p.launchAttentionAt(b, 0, base14, base14 + 256, params, 0, 0);
                byte[] blk = new byte[Math.toIntExact(si.blockStride())];
                p.readBlocks(new int[] {14}, blk);
                float[] out = new float[q.length];
                ByteBuffer.wrap(blk, 256, q.length * 4).order(ByteOrder.nativeOrder()).asFloatBuffer().get(out);
                assertClose(reference(q, 6, 1, 4, 2, 8, 0, 0, 0), out);
            }
        }
    }
}
