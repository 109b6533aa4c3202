package dev.kvc;

import static dev.kvc.TestUtil.expectStatus;
import static dev.kvc.TestUtil.small;
import static dev.kvc.TestUtil.span;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Pool.createHybrid, Pool.groupInfo, Pool.layerGroup, Pool.groupBlockTable, Batch.setGroup (kvc.h
 * "Hybrid models"): a FULL, a SLIDING and an SSM group sharing one block pool. Block ids are
 * deterministic; the expected tables are those a C run of the same steps prints.
 */
class HybridTest {
    private static final int[] LAYER_TO_GROUP = {0, 1, 2, 1, 0};

    private static List<GroupConfig> groups() {
        List<GroupConfig> g = new ArrayList<>();
        g.add(GroupConfig.defaults().kind(GroupKind.FULL).numLayers(2).numKvHeads(2).headDim(8));
        g.add(GroupConfig.defaults().kind(GroupKind.SLIDING).numLayers(2).numKvHeads(2).headDim(8).slidingWindow(6));
        g.add(GroupConfig.defaults().kind(GroupKind.SSM).numLayers(1).stateBytes(1000));
        return g;
    }

    private static PoolConfig config() {
        return PoolConfig.defaults().blockSize(4).numBlocks(64).watermark(0).backend(Backend.NONE);
    }

    private static Pool hybrid() {
        return Pool.createHybrid(config(), groups(), LAYER_TO_GROUP);
    }

    private static void expectInvalidArg(String cFunction, org.junit.jupiter.api.function.Executable f) {
        KvcException e = expectStatus(Status.INVALID_ARG, f);
        assertTrue(e.libraryMessage().contains(cFunction), e.getMessage());
    }

    @Test
    void groupConfigDefaults() {
        GroupConfig g = GroupConfig.defaults();
        assertEquals(GroupKind.FULL, g.kind());
        assertEquals(1, g.numLayers());
        assertEquals(1, g.numKvHeads());
        assertEquals(128, g.headDim());
        assertEquals(0, g.slidingWindow());
        assertEquals(0, g.stateBytes());
        assertEquals(KvcNative.kvcjni_max_groups(), Pool.MAX_GROUPS);
    }

    @Test
    void groupInfoAndLayerGroup() {
        try (Pool p = hybrid()) {
            GroupInfo full = p.groupInfo(0);
            GroupInfo sliding = p.groupInfo(1);
            GroupInfo ssm = p.groupInfo(2);
            assertEquals(new GroupInfo(3, GroupKind.FULL, 2, 2, 8, 0, 0, 512, 1024, full.layerStride()), full);
            assertEquals(new GroupInfo(3, GroupKind.SLIDING, 2, 2, 8, 6, 0, 512, 1024, sliding.layerStride()), sliding);
            assertEquals(new GroupInfo(3, GroupKind.SSM, 1, 0, 0, 0, 1000, 1000, 1024, ssm.layerStride()), ssm);
            for (GroupInfo i : List.of(full, sliding, ssm)) {
                assertTrue(i.layerStride() > 0 && i.layerStride() * i.numLayers() <= i.pageBytes(), i.toString());
            }
            PoolConfig c = p.config();
            assertEquals(5, c.numLayers());
            assertEquals(2, c.numKvHeads());
            assertEquals(8, c.headDim());
            assertEquals(new LayerGroup(1, 1), p.layerGroup(3));
            assertEquals(new LayerGroup(0, 1), p.layerGroup(4));
            assertEquals(new LayerGroup(2, 0), p.layerGroup(2));

            expectInvalidArg("kvc_pool_get_group_info", () -> p.groupInfo(3));
            expectInvalidArg("kvc_pool_get_group_info", () -> p.groupInfo(-1));
            expectInvalidArg("kvc_pool_layer_group", () -> p.layerGroup(5));
        }
        try (Pool plain = Pool.create(small())) {
            GroupInfo i = plain.groupInfo(0);
            assertEquals(1, i.numGroups());
            assertEquals(GroupKind.FULL, i.kind());
            expectInvalidArg("kvc_pool_get_group_info", () -> plain.groupInfo(1));
        }
    }

    @Test
    void badHybridConfigsAreInvalidArg() {
        List<GroupConfig> noWindow = groups();
        noWindow.get(1).slidingWindow(0);
        expectInvalidArg("kvc_pool_create_hybrid", () -> Pool.createHybrid(config(), noWindow, LAYER_TO_GROUP).close());
        List<GroupConfig> noState = groups();
        noState.get(2).stateBytes(0);
        expectInvalidArg("kvc_pool_create_hybrid", () -> Pool.createHybrid(config(), noState, LAYER_TO_GROUP).close());
        expectInvalidArg("kvc_pool_create_hybrid",
                () -> Pool.createHybrid(config(), groups(), new int[] {0, 1, 3, 1, 0}).close());
        expectInvalidArg("kvc_pool_create_hybrid",
                () -> Pool.createHybrid(config(), groups(), new int[] {0, 1, 2, 1}).close());
        expectInvalidArg("kvc_pool_create_hybrid", () -> Pool.createHybrid(config(), List.of(), new int[0]).close());
        List<GroupConfig> tooMany = Collections.nCopies(Pool.MAX_GROUPS + 1, GroupConfig.defaults());
        expectInvalidArg("kvc_pool_create_hybrid",
                () -> Pool.createHybrid(config(), tooMany, new int[Pool.MAX_GROUPS + 1]).close());
    }

    @Test
    void groupBlockTablesAndCoordinatedPrefixHit() {
        try (Pool p = hybrid()) {
            assertEquals(0, p.alloc(1, span(1, 19), null));
            assertArrayEquals(new int[] {0, 1, 2, 3, 4}, p.groupBlockTable(1, 0));
            assertArrayEquals(new int[] {5, 6, 7, 8, 9}, p.groupBlockTable(1, 1));
            assertArrayEquals(new int[] {10, 11, 12, 13, 14}, p.groupBlockTable(1, 2));
            assertArrayEquals(p.blockTable(1), p.groupBlockTable(1, 0));

            for (int t = 19; t <= 26; t++) {
                p.append(1, new int[] {t}, 0);
            }
            assertEquals(26, p.numTokens(1));
            assertArrayEquals(new int[] {0, 1, 2, 3, 4, 15, 18}, p.groupBlockTable(1, 0));
            assertArrayEquals(new int[] {-1, -1, -1, -1, 9, 16, 19}, p.groupBlockTable(1, 1));
            assertArrayEquals(new int[] {-1, -1, -1, -1, -1, -1, 20}, p.groupBlockTable(1, 2));

            // Every group can resume after 24 tokens (6 blocks).
            assertEquals(24, p.alloc(2, span(1, 31), null));
            assertArrayEquals(new int[] {0, 1, 2, 3, 4, 15, 21, 22}, p.groupBlockTable(2, 0));
            assertArrayEquals(new int[] {-1, -1, -1, -1, 9, 16, 23, 24}, p.groupBlockTable(2, 1));
            assertArrayEquals(new int[] {-1, -1, -1, -1, -1, 17, 25, 26}, p.groupBlockTable(2, 2));
            p.check();

            expectInvalidArg("kvc_seq_group_block_table", () -> p.groupBlockTable(1, 3));
            expectStatus(Status.UNKNOWN_SEQ, () -> p.groupBlockTable(99, 0));
            p.free(1);
            p.free(2);
            p.check();
        }
    }

    @Test
    void batchSetGroup() {
        try (Pool p = hybrid()) {
            p.alloc(1, span(1, 19), null);
            try (Batch b = p.newBatch(4, 64, 16)) {
                b.setGroup(0);
                b.build(new long[] {1}, new long[] {18});
                assertEquals(1, b.info().numSeqs());
                // Group 2 is the SSM group (no block tables to launch over); 3 is out of range.
                expectStatus(Status.INVALID_ARG, () -> b.setGroup(2));
                expectStatus(Status.INVALID_ARG, () -> b.setGroup(3));
                expectStatus(Status.INVALID_ARG, () -> b.setGroup(-1));
            }
        }
    }
}
