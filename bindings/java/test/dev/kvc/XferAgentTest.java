package dev.kvc;

import static dev.kvc.TestUtil.cpu;
import static dev.kvc.TestUtil.expectStatus;
import static dev.kvc.TestUtil.span;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import org.junit.jupiter.api.Test;

/** KV transfer over UCX (XferAgent): a round trip with every imported byte compared, and refusals. */
class XferAgentTest {
    @Test
    void roundTripOverTcpCopiesEveryByte() {
        assumeTrue(XferAgent.available(), "UCX (libucp.so.0) not available");
        try (Pool src = Pool.create(cpu().numBlocks(32)); Pool dst = Pool.create(cpu().numBlocks(32));
                XferAgent ae = XferAgent.create(src, "java-test@1", "tcp", "", 0, 10000);
                XferAgent ai = XferAgent.create(dst, "java-test@1", "tcp", "", 0, 10000)) {
            int[] prompt = span(100, 117); // 4 full blocks of 4 and one token
            src.alloc(1, prompt, null);
            StorageBatchAttentionTest.writeSequence(src, 1, 0, prompt.length);
            long id = ae.exportSeq(1, 0);
            byte[] desc = ae.descriptor(id);
            long op = ai.importDescriptor(desc, null);
            XferAgent.ImportResult r = ai.waitFor(op, -1);
            assertEquals(XferAgent.OK, r.failure());
            assertEquals(4, r.blocksPulled());
            assertEquals(4, r.blocksCached());
            assertEquals(16, r.cachedTokens());
            expectStatus(Status.INVALID_ARG, () -> ai.done(op)); // retired by waitFor

            assertEquals(16, dst.alloc(2, prompt, null));
            long stride = src.storageInfo().blockStride();
            byte[] want = new byte[(int) (4 * stride)];
            byte[] got = new byte[(int) (4 * stride)];
            src.readBlocks(java.util.Arrays.copyOf(src.blockTable(1), 4), want);
            dst.readBlocks(java.util.Arrays.copyOf(dst.blockTable(2), 4), got);
            assertArrayEquals(want, got, "imported bytes differ from the exporter's");
            assertEquals(1, ai.stats().importsOk());
            assertEquals(4 * stride, ai.stats().bytesPulled());
            ae.releaseExport(id);
            expectStatus(Status.INVALID_ARG, () -> ae.releaseExport(id));
            dst.check();
            src.check();
        }
    }

    @Test
    void refusalsChangeNothing() {
        assumeTrue(XferAgent.available(), "UCX (libucp.so.0) not available");
        try (Pool meta = Pool.create(TestUtil.small())) {
            expectStatus(Status.UNSUPPORTED, () -> XferAgent.create(meta, "", "", "", 0, 0));
        }
        try (Pool src = Pool.create(cpu().numBlocks(32)); Pool dst = Pool.create(cpu().numBlocks(32));
                XferAgent ae = XferAgent.create(src, "m", "tcp", "", 0, 0);
                XferAgent ai = XferAgent.create(dst, "m", "tcp", "", 0, 0);
                Keys salted = Keys.create()) {
            int[] prompt = span(0, 12);
            src.alloc(1, prompt, null);
            StorageBatchAttentionTest.writeSequence(src, 1, 0, 12);
            byte[] desc = ae.descriptor(ae.exportPrompt(prompt, null, 0));
            byte[] bad = desc.clone();
            bad[bad.length / 2] ^= 1;
            expectStatus(Status.INVALID_ARG, () -> ai.importDescriptor(bad, null));
            expectStatus(Status.INVALID_ARG,
                    () -> ai.importDescriptor(java.util.Arrays.copyOf(desc, desc.length - 3), null));
            salted.setSalt("tenant-b");
            expectStatus(Status.INVALID_ARG, () -> ai.importDescriptor(desc, salted));
            XferAgent.XferStats s = ai.stats();
            assertEquals(3, s.importsFailed());
            assertEquals(2, s.failures()[XferAgent.FAIL_DESCRIPTOR]);
            assertEquals(1, s.failures()[XferAgent.FAIL_HASH]);
            // Every reason has its counter, the device-copy one (failures_device) included.
            assertEquals(XferAgent.FAIL_DEVICE + 1, s.failures().length);
            assertEquals(0, s.failures()[XferAgent.FAIL_DEVICE]);
            assertEquals(0, dst.stats().usedBlocks());
            assertEquals(0, dst.stats().cachedBlocksTotal());
        }
    }

    @Test
    void closingThePoolClosesItsAgent() {
        assumeTrue(XferAgent.available(), "UCX (libucp.so.0) not available");
        try (Pool p = Pool.create(cpu().numBlocks(8))) {
            XferAgent a = XferAgent.create(p, "m", "tcp", "", 0, 0);
            a.close();
            a.close();
            expectStatus(Status.STATE, a::stats);
        }
        // Closing the exporter's pool destroys its agent first (kvc_pool_destroy's rule): its exports
        // end and its endpoint closes, so an import of its descriptor fails cleanly with nothing
        // cached. Were the agent left alive, it would go on serving the freed pool's blocks.
        try (Pool dst = Pool.create(cpu().numBlocks(32));
                XferAgent ai = XferAgent.create(dst, "m", "tcp", "", 0, 5000)) {
            Pool src = Pool.create(cpu().numBlocks(32));
            XferAgent ae = XferAgent.create(src, "m", "tcp", "", 0, 5000);
            int[] prompt = span(100, 117);
            src.alloc(1, prompt, null);
            StorageBatchAttentionTest.writeSequence(src, 1, 0, prompt.length);
            byte[] desc = ae.descriptor(ae.exportSeq(1, 0));
            src.close();
            expectStatus(Status.STATE, ae::stats);
            ae.close(); // a no-op now
            // Refused at the import (no endpoint to reach) or failed by its wait, per transport timing.
            expectStatus(Status.IO, () -> ai.waitFor(ai.importDescriptor(desc, null), -1));
            assertEquals(1, ai.stats().importsFailed());
            assertEquals(0, dst.stats().usedBlocks());
            assertEquals(0, dst.stats().cachedBlocksTotal());
            dst.check();
        }
    }
}
