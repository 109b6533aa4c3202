/* Hybrid pools (kvc_pool_create_hybrid, lib/core/HYBRID.md): groups and their page geometry, the
 * refusals of bad group configurations, one block table per group with each group's window rule
 * (FULL none, SLIDING W, SSM 1), the coordinated prefix hit (the longest prefix every group can
 * resume from) with mixed groups, all-or-nothing admission and growth counted over all groups, fork
 * with copy-on-write in every group checked on the bytes, spill to the host tier and restore of
 * every group's pages checked on the bytes, and the functions hybrid pools refuse. */
#include "test_pool_helpers.h"

#define BS 4
#define W 6
#define MAXT 64

/* FULL (2 layers) + SLIDING W (2 layers) + SSM (1 layer of 1000 bytes); layers 0,4 full, 1,3
 * sliding, 2 state. f16: attention pages 2 x 4 x 2 x 8 x 2 x 2 = 512 bytes; state 1000; page 1024. */
static kvc_pool *make_hybrid(int64_t num_blocks, int32_t backend, int with_ssm, double watermark) {
    kvc_pool_config c;
    OK(kvc_pool_config_default(&c));
    c.block_size = BS;
    c.num_blocks = num_blocks;
    c.watermark = watermark;
    c.backend = backend;
    c.event_capacity = 0;
    kvc_group_config g[3];
    for (int i = 0; i < 3; ++i) {
        OK(kvc_group_config_default(&g[i]));
        g[i].num_kv_heads = 2;
        g[i].head_dim = 8;
        g[i].num_layers = 2;
    }
    g[1].kind = KVC_GROUP_SLIDING;
    g[1].sliding_window = W;
    g[2].kind = KVC_GROUP_SSM;
    g[2].num_layers = 1;
    g[2].state_bytes = 1000;
    const int32_t l2g[5] = {0, 1, 2, 1, 0}, l2g_no_ssm[4] = {0, 1, 1, 0};
    kvc_pool *p = NULL;
    if (with_ssm)
        OK(kvc_pool_create_hybrid(&c, g, 3, l2g, 5, &p));
    else
        OK(kvc_pool_create_hybrid(&c, g, 2, l2g_no_ssm, 4, &p));
    return p;
}

static int64_t gtable(kvc_pool *p, uint64_t seq, int32_t g, int32_t *out) {
    int64_t n = 0;
    OK(kvc_seq_group_block_table(p, seq, g, out, MAXT, &n));
    return n;
}

/* Leading released (-1) entries of group g's table; the rest must be real blocks. */
static int64_t released_in(kvc_pool *p, uint64_t seq, int32_t g) {
    int32_t t[MAXT];
    const int64_t n = gtable(p, seq, g, t);
    int64_t r = 0;
    while (r < n && t[r] < 0) ++r;
    for (int64_t i = r; i < n; ++i) assert_true(t[i] >= 0);
    return r;
}

static void toks(int32_t *t, int64_t n, int32_t base) {
    for (int64_t i = 0; i < n; ++i) t[i] = base + (int32_t)i;
}

static void test_groups_and_geometry(void **state) {
    (void)state;
    kvc_pool *p = make_hybrid(64, KVC_BACKEND_NONE, 1, 0.0);
    const int32_t kinds[3] = {KVC_GROUP_FULL, KVC_GROUP_SLIDING, KVC_GROUP_SSM};
    const int64_t bytes[3] = {512, 512, 1000}, stride[3] = {256, 256, 1000};
    for (int32_t g = 0; g < 3; ++g) {
        kvc_group_info i = {.struct_size = sizeof(kvc_group_info)};
        OK(kvc_pool_get_group_info(p, g, &i));
        assert_int_equal(i.num_groups, 3);
        assert_int_equal(i.kind, kinds[g]);
        assert_int_equal(i.group_bytes, bytes[g]);
        assert_int_equal(i.page_bytes, 1024); /* 1000 rounded up to 256 */
        assert_int_equal(i.layer_stride, stride[g]);
        assert_int_equal(i.sliding_window, g == 1 ? W : 0);
        assert_int_equal(i.state_bytes, g == 2 ? 1000 : 0);
    }
    kvc_group_info bad = {.struct_size = sizeof(kvc_group_info)};
    EXPECT_ERR(kvc_pool_get_group_info(p, 3, &bad), KVC_ERR_INVALID_ARG);
    EXPECT_ERR(kvc_pool_get_group_info(p, -1, &bad), KVC_ERR_INVALID_ARG);
    const int32_t want_group[5] = {0, 1, 2, 1, 0}, want_index[5] = {0, 0, 0, 1, 1};
    for (int32_t l = 0; l < 5; ++l) {
        int32_t g = -1, li = -1;
        OK(kvc_pool_layer_group(p, l, &g, &li));
        assert_int_equal(g, want_group[l]);
        assert_int_equal(li, want_index[l]);
    }
    int32_t g = -1;
    EXPECT_ERR(kvc_pool_layer_group(p, 5, &g, NULL), KVC_ERR_INVALID_ARG);
    kvc_pool_config got;
    OK(kvc_pool_get_config(p, &got));
    assert_int_equal(got.num_layers, 5);
    assert_int_equal(got.num_kv_heads, 2);
    assert_int_equal(got.head_dim, 8);
    OK(kvc_pool_destroy(p));

    /* A plain pool is one group: FULL, or SLIDING once it has a window. */
    p = make_pool(BS, 16, 1);
    kvc_group_info i = {.struct_size = sizeof(kvc_group_info)};
    OK(kvc_pool_get_group_info(p, 0, &i));
    assert_int_equal(i.num_groups, 1);
    assert_int_equal(i.kind, KVC_GROUP_FULL);
    OK(kvc_pool_set_sliding_window(p, 5));
    OK(kvc_pool_get_group_info(p, 0, &i));
    assert_int_equal(i.kind, KVC_GROUP_SLIDING);
    assert_int_equal(i.sliding_window, 5);
    EXPECT_ERR(kvc_pool_get_group_info(p, 1, &i), KVC_ERR_INVALID_ARG);
    int32_t t[8];
    toks(t, 8, 1);
    OK(kvc_alloc(p, 1, t, 8, NULL, NULL));
    int64_t n = 0;
    EXPECT_ERR(kvc_seq_group_block_table(p, 1, 1, NULL, 0, &n), KVC_ERR_INVALID_ARG);
    OK(kvc_seq_group_block_table(p, 1, 0, NULL, 0, &n));
    assert_int_equal(n, 2);
    OK(kvc_pool_destroy(p));
}

/* Every malformed group configuration is refused with INVALID_ARG and creates nothing. */
static void test_bad_group_configs(void **state) {
    (void)state;
    kvc_pool_config c;
    OK(kvc_pool_config_default(&c));
    c.num_blocks = 16;
    kvc_group_config base[2];
    OK(kvc_group_config_default(&base[0]));
    OK(kvc_group_config_default(&base[1]));
    base[1].kind = KVC_GROUP_SLIDING;
    base[1].sliding_window = 8;
    const int32_t l2g[2] = {0, 1};
    kvc_pool *p = NULL;
    OK(kvc_pool_create_hybrid(&c, base, 2, l2g, 2, &p));
    OK(kvc_pool_destroy(p));
    p = NULL;
    kvc_group_config g[2];
#define BAD(mutate, call)                                                   \
    do {                                                                    \
        memcpy(g, base, sizeof g);                                          \
        mutate;                                                             \
        EXPECT_ERR(call, KVC_ERR_INVALID_ARG);                              \
        assert_null(p);                                                     \
    } while (0)
    BAD(g[0].kind = 7, kvc_pool_create_hybrid(&c, g, 2, l2g, 2, &p));
    BAD(g[0].num_layers = 0, kvc_pool_create_hybrid(&c, g, 2, l2g, 2, &p));
    BAD(g[0].sliding_window = 4, kvc_pool_create_hybrid(&c, g, 2, l2g, 2, &p));      /* window on FULL */
    BAD(g[1].sliding_window = 0, kvc_pool_create_hybrid(&c, g, 2, l2g, 2, &p));      /* SLIDING without */
    BAD((g[1].kind = KVC_GROUP_SSM, g[1].sliding_window = 0, g[1].state_bytes = 0),
        kvc_pool_create_hybrid(&c, g, 2, l2g, 2, &p));                                /* state size 0 */
    BAD(g[0].state_bytes = 64, kvc_pool_create_hybrid(&c, g, 2, l2g, 2, &p));        /* state on FULL */
    BAD(g[0].num_kv_heads = 0, kvc_pool_create_hybrid(&c, g, 2, l2g, 2, &p));
    BAD((void)0, kvc_pool_create_hybrid(&c, g, 0, l2g, 2, &p));                        /* no group */
    BAD((void)0, kvc_pool_create_hybrid(&c, g, KVC_MAX_GROUPS + 1, l2g, 2, &p));
    BAD((void)0, kvc_pool_create_hybrid(&c, g, 2, l2g, 3, &p));                        /* layer count */
    const int32_t unknown[2] = {0, 2}, twice[2] = {1, 1};
    BAD((void)0, kvc_pool_create_hybrid(&c, g, 2, unknown, 2, &p));                    /* no such group */
    BAD((void)0, kvc_pool_create_hybrid(&c, g, 2, twice, 2, &p));                      /* group 0 empty */
    c.num_q_heads = 3;
    BAD(g[1].num_kv_heads = 2, kvc_pool_create_hybrid(&c, g, 2, l2g, 2, &p));        /* 3 % 2 */
    c.num_q_heads = 0;
#undef BAD
    memcpy(g, base, sizeof g);
    g[1].struct_size = 3;
    EXPECT_ERR(kvc_pool_create_hybrid(&c, g, 2, l2g, 2, &p), KVC_ERR_VERSION);
    EXPECT_ERR(kvc_pool_create_hybrid(&c, NULL, 2, l2g, 2, &p), KVC_ERR_NULL_ARG);
    EXPECT_ERR(kvc_pool_create_hybrid(&c, base, 2, NULL, 2, &p), KVC_ERR_NULL_ARG);
    EXPECT_ERR(kvc_pool_create_hybrid(&c, base, 2, l2g, 2, NULL), KVC_ERR_NULL_ARG);
    assert_null(p);
}

/* Decode one token at a time: each group releases exactly what its window rule says. The first
 * position the previous call added is f; SLIDING releases the blocks before (f - W + 1) / BS,
 * SSM (window 1) those before f / BS, FULL none. */
static void test_window_release_per_group(void **state) {
    (void)state;
    kvc_pool *p = make_hybrid(64, KVC_BACKEND_NONE, 1, 0.0);
    int32_t t[MAXT];
    toks(t, MAXT, 100);
    OK(kvc_alloc(p, 1, t, 9, NULL, NULL));
    for (int32_t g = 0; g < 3; ++g) {
        assert_int_equal(released_in(p, 1, g), 0); /* an alloc holds the whole prompt in every group */
        assert_int_equal(gtable(p, 1, g, (int32_t[MAXT]){0}), 3);
    }
    int64_t prev_first = 0; /* the alloc's first uncached position */
    for (int64_t pos = 9; pos < 40; ++pos) {
        int32_t taken = -1;
        OK(kvc_append(p, 1, &t[pos], 1, 0, &taken));
        const int64_t slide_key = prev_first - W + 1;
        assert_int_equal(released_in(p, 1, 0), 0);
        assert_int_equal(released_in(p, 1, 1), slide_key > 0 ? slide_key / BS : 0);
        assert_int_equal(released_in(p, 1, 2), prev_first / BS);
        /* A new block in every group when pos starts one. */
        assert_int_equal(taken, pos % BS == 0 ? 3 : 0);
        prev_first = pos;
        CHECK_POOL(p);
    }
    /* Held: FULL 10 blocks; SLIDING blocks from (38 - 5) / 4 = 8 on: 2; SSM block 38 / 4 = 9 on: 1. */
    assert_int_equal(stats_of(p).used_blocks, 10 + 2 + 1);
    OK(kvc_free(p, 1));
    assert_int_equal(stats_of(p).used_blocks, 0);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

/* kvc_append_batch on a hybrid pool is the same kvc_append calls: two pools driven the two ways
 * end with equal tables in every group. */
static void test_append_batch_matches_appends(void **state) {
    (void)state;
    kvc_pool *a = make_hybrid(64, KVC_BACKEND_NONE, 1, 0.0), *b = make_hybrid(64, KVC_BACKEND_NONE, 1, 0.0);
    int32_t t[MAXT];
    toks(t, MAXT, 9000);
    for (uint64_t id = 1; id <= 3; ++id) {
        OK(kvc_alloc(a, id, &t[id * 10], 5, NULL, NULL));
        OK(kvc_alloc(b, id, &t[id * 10], 5, NULL, NULL));
    }
    const uint64_t ids[3] = {1, 2, 3};
    for (int step = 0; step < 12; ++step) {
        int32_t tk[3] = {step, step + 100, step + 200};
        int32_t done = -1;
        OK(kvc_append_batch(a, 3, ids, NULL, tk, 0, NULL, NULL, &done));
        assert_int_equal(done, 3);
        for (int i = 0; i < 3; ++i) OK(kvc_append(b, ids[i], &tk[i], 1, 0, NULL));
    }
    for (uint64_t id = 1; id <= 3; ++id)
        for (int32_t g = 0; g < 3; ++g) {
            int32_t ta[MAXT], tb[MAXT];
            const int64_t na = gtable(a, id, g, ta), nb = gtable(b, id, g, tb);
            assert_int_equal(na, nb);
            assert_memory_equal(ta, tb, (size_t)na * sizeof(int32_t));
        }
    CHECK_POOL(a);
    OK(kvc_pool_destroy(a));
    OK(kvc_pool_destroy(b));
}

/* A block id belongs to one group at a time: within a sequence no id appears in two groups'
 * tables, and the group caches are disjoint (each group's prompt blocks are new entries). */
static void test_groups_own_their_blocks(void **state) {
    (void)state;
    kvc_pool *p = make_hybrid(64, KVC_BACKEND_NONE, 1, 0.0);
    int32_t t[MAXT];
    toks(t, MAXT, 7);
    int64_t hit = -1;
    OK(kvc_alloc(p, 1, t, 17, NULL, &hit));
    assert_int_equal(hit, 0);
    unsigned char seen[64] = {0};
    for (int32_t g = 0; g < 3; ++g) {
        int32_t tab[MAXT];
        const int64_t n = gtable(p, 1, g, tab);
        assert_int_equal(n, 5);
        for (int64_t i = 0; i < n; ++i) {
            assert_int_equal(seen[tab[i]], 0);
            seen[tab[i]] = 1;
        }
    }
    kvc_stats s = stats_of(p);
    assert_int_equal(s.used_blocks, 15);
    assert_int_equal(s.cached_blocks_total, 12); /* 4 full blocks per group, each group its own entry */
    OK(kvc_pool_destroy(p));
}

/* The coordinated hit with FULL + SLIDING: a prompt whose FULL blocks are all cached but whose
 * SLIDING blocks near the end were evicted resumes where the sliding window's blocks are still
 * cached, and the other way round a FULL miss caps the sliding group. */
static void test_coordinated_hit_full_and_sliding(void **state) {
    (void)state;
    kvc_pool *p = make_hybrid(40, KVC_BACKEND_NONE, 0, 0.0);
    int32_t a[MAXT];
    toks(a, MAXT, 1000);
    OK(kvc_alloc(p, 1, a, 30, NULL, NULL)); /* 8 blocks per group, full blocks 0..6 cached */
    int64_t cached = -1;
    OK(kvc_prefix_lookup(p, a, 30, NULL, &cached));
    assert_int_equal(cached, 28);
    /* A second request for the same prompt shares FULL blocks 0..6 and, in the sliding group, only
     * the blocks the window of position 28 reads: 23.. -> blocks 5 and 6; 0..4 start released. */
    OK(kvc_alloc(p, 2, a, 30, NULL, &cached));
    assert_int_equal(cached, 28);
    int32_t t1[MAXT], t2[MAXT];
    gtable(p, 1, 0, t1);
    gtable(p, 2, 0, t2);
    assert_memory_equal(t1, t2, 7 * sizeof(int32_t));
    gtable(p, 1, 1, t1);
    gtable(p, 2, 1, t2);
    assert_int_equal(released_in(p, 2, 1), 5);
    assert_int_equal(t2[5], t1[5]);
    assert_int_equal(t2[6], t1[6]);
    assert_int_not_equal(t2[7], t1[7]);
    OK(kvc_free(p, 2));
    /* Sequence 1 decodes on: its sliding group releases blocks 0..3 (window), which stay cached. */
    for (int64_t pos = 30; pos < 36; ++pos) OK(kvc_append(p, 1, &a[pos], 1, 0, NULL));
    assert_int_equal(released_in(p, 1, 1), 7);
    CHECK_POOL(p);
    /* Prompt b = a's first 24 tokens + others: FULL hits 6 blocks; SLIDING needs, for a hit of 6
     * blocks (c = 24), the blocks from position 19 on: 4 and 5, released by sequence 1's window
     * but still cached. */
    int32_t b[MAXT];
    memcpy(b, a, sizeof b);
    for (int i = 24; i < MAXT; ++i) b[i] = 5000 + i;
    OK(kvc_prefix_lookup(p, b, 30, NULL, &cached));
    assert_int_equal(cached, 24);
    OK(kvc_alloc(p, 3, b, 30, NULL, &cached));
    assert_int_equal(cached, 24);
    assert_int_equal(released_in(p, 3, 1), 4);
    gtable(p, 3, 1, t2);
    /* Its sliding blocks 4 and 5 are the ones sequence 1 held there (t1: its table before). */
    assert_int_equal(t2[4], t1[4]);
    assert_int_equal(t2[5], t1[5]);
    OK(kvc_free(p, 3));
    CHECK_POOL(p);
    OK(kvc_free(p, 1));
    OK(kvc_pool_destroy(p));
}

/* FULL + SSM: the state snapshot page of the hit's last block must be cached. Snapshots of the
 * blocks the SSM group released first are evicted first under pressure; a prompt whose hit would
 * end on an evicted snapshot resumes at the last boundary whose snapshot survived, or from 0. */
static void test_coordinated_hit_with_ssm_snapshots(void **state) {
    (void)state;
    /* 3 groups; 40 pages. */
    kvc_pool *p = make_hybrid(40, KVC_BACKEND_NONE, 1, 0.0);
    int32_t a[MAXT];
    toks(a, MAXT, 2000);
    OK(kvc_alloc(p, 1, a, 6, NULL, NULL)); /* 2 blocks per group */
    for (int64_t pos = 6; pos < 30; ++pos) OK(kvc_append(p, 1, &a[pos], 1, 0, NULL));
    /* SSM released blocks 0..6 one per block boundary, oldest first; SLIDING blocks 0..4. */
    assert_int_equal(released_in(p, 1, 2), 7);
    assert_int_equal(released_in(p, 1, 1), 5);
    kvc_stats s = stats_of(p);
    assert_int_equal(s.used_blocks, 8 + 3 + 1);
    /* Take every never-used page and two more (6 one-block prompts x 3 groups = 18 pages): the
     * two evicted are the oldest released cached pages, SSM blocks 0 and 1 (released at the
     * appends after positions 4 and 8; the sliding group's first release comes after position 9). */
    assert_int_equal(s.free_blocks - s.cached_free_blocks, 16);
    int32_t f[4];
    for (uint64_t id = 100; id < 106; ++id) {
        toks(f, 3, (int32_t)(90000 + id * 10));
        OK(kvc_alloc(p, id, f, 3, NULL, NULL));
    }
    assert_int_equal(stats_of(p).evictions, 2);
    CHECK_POOL(p);
    int64_t cached = -1;
    /* A 10-token prompt may hit 2 blocks: FULL and SLIDING could, SSM lacks block 1's snapshot;
     * at 1 block it lacks block 0's: no hit. */
    OK(kvc_prefix_lookup(p, a, 10, NULL, &cached));
    assert_int_equal(cached, 0);
    /* 14 tokens: 3 blocks; block 2's snapshot is cached, SLIDING needs blocks 1, 2 (from 7 on). */
    OK(kvc_prefix_lookup(p, a, 14, NULL, &cached));
    assert_int_equal(cached, 12);
    OK(kvc_alloc(p, 2, a, 14, NULL, &cached));
    assert_int_equal(cached, 12);
    assert_int_equal(released_in(p, 2, 0), 0);
    assert_int_equal(released_in(p, 2, 1), 1);
    assert_int_equal(released_in(p, 2, 2), 2);
    OK(kvc_free(p, 2));
    OK(kvc_prefix_lookup(p, a, 30, NULL, &cached));
    assert_int_equal(cached, 28); /* block 6's snapshot is the newest released one: still cached */
    OK(kvc_pool_destroy(p));
}

/* Admission counts every group: a prompt needing more pages over all groups than are free is
 * refused with nothing changed, the watermark verdict sees the total, and an append that needs a
 * page in each group fails as a whole when only some fit. */
static void test_all_or_nothing_over_groups(void **state) {
    (void)state;
    kvc_pool *p = make_hybrid(12, KVC_BACKEND_NONE, 1, 0.0);
    int32_t t[MAXT];
    toks(t, MAXT, 3000);
    int32_t verdict = -1;
    OK(kvc_can_alloc(p, t, 17, NULL, &verdict)); /* 5 blocks x 3 groups = 15 > 12 */
    assert_int_equal(verdict, KVC_ALLOC_NEVER);
    EXPECT_ERR_UNCHANGED(p, kvc_alloc(p, 1, t, 17, NULL, NULL), KVC_ERR_OUT_OF_BLOCKS);
    OK(kvc_can_alloc(p, t, 16, NULL, &verdict)); /* 4 x 3 = 12 */
    assert_int_equal(verdict, KVC_ALLOC_OK);
    OK(kvc_alloc(p, 1, t, 12, NULL, NULL)); /* 3 x 3 = 9 pages; 3 free */
    OK(kvc_can_alloc(p, &t[20], 8, NULL, &verdict)); /* 2 x 3 = 6 > 3 free: later */
    assert_int_equal(verdict, KVC_ALLOC_LATER);
    int32_t verdict2 = -1;
    int64_t ct = -1;
    OK(kvc_admit(p, 2, &t[20], 8, NULL, &verdict2, &ct));
    assert_int_equal(verdict2, KVC_ALLOC_LATER);
    OK(kvc_alloc(p, 2, &t[20], 4, NULL, NULL)); /* 3 pages: none free now */
    assert_int_equal(stats_of(p).free_blocks, 0);
    /* Position 12 starts block 3 in every group. SLIDING: the previous call's first position was
     * 0 (the alloc), nothing to release; SSM releases block 0... only when f >= 4: f = 0. */
    EXPECT_ERR_UNCHANGED(p, kvc_append(p, 1, &t[12], 1, 0, NULL), KVC_ERR_OUT_OF_BLOCKS);
    OK(kvc_free(p, 2)); /* 3 free again */
    int32_t taken = -1;
    OK(kvc_append(p, 1, &t[12], 1, 0, &taken));
    assert_int_equal(taken, 3);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

/* An append whose later group's window frees the pages an earlier group needs fits, whatever the
 * groups' order (found by the hybrid fuzzer: the check once counted a group's own window only). */
static void test_append_counts_every_groups_window(void **state) {
    (void)state;
    for (int order = 0; order < 2; ++order) {
        kvc_pool_config c;
        OK(kvc_pool_config_default(&c));
        c.block_size = 4;
        c.num_blocks = 10;
        c.watermark = 0;
        kvc_group_config g[2];
        OK(kvc_group_config_default(&g[0]));
        OK(kvc_group_config_default(&g[1]));
        g[order].kind = KVC_GROUP_SLIDING;
        g[order].sliding_window = 4;
        const int32_t l2g[2] = {0, 1};
        kvc_pool *p = NULL;
        OK(kvc_pool_create_hybrid(&c, g, 2, l2g, 2, &p));
        int32_t a[13], b[5];
        toks(a, 13, 0);
        toks(b, 5, 100);
        OK(kvc_alloc(p, 1, a, 11, NULL, NULL)); /* 3 pages per group */
        OK(kvc_alloc(p, 2, b, 5, NULL, NULL));  /* 2 per group: the pool is full */
        OK(kvc_append(p, 1, &a[11], 1, 0, NULL));
        assert_int_equal(stats_of(p).free_blocks, 0);
        int32_t taken = -1;
        /* Position 12 starts a block in both groups; the sliding group releases blocks 0 and 1. */
        OK(kvc_append(p, 1, &a[12], 1, 0, &taken));
        assert_int_equal(taken, 2);
        assert_int_equal(released_in(p, 1, order), 2);
        CHECK_POOL(p);
        OK(kvc_pool_destroy(p));
    }
}

/* Fork shares every group's pages; the child's first write into the shared tail block copies it
 * in every group (three copy-on-write pairs), and kvc_copy_pending copies the whole page. */
static void test_fork_copy_on_write_bytes(void **state) {
    (void)state;
    kvc_pool *p = make_hybrid(32, KVC_BACKEND_CPU, 1, 0.0);
    int32_t t[MAXT];
    toks(t, MAXT, 4000);
    OK(kvc_alloc(p, 1, t, 10, NULL, NULL));
    int32_t tails[3];
    unsigned char page[1024], got[1024];
    for (int32_t g = 0; g < 3; ++g) {
        int32_t tab[MAXT];
        assert_int_equal(gtable(p, 1, g, tab), 3);
        tails[g] = tab[2];
        for (int i = 0; i < 1024; ++i) page[i] = (unsigned char)(g * 31 + i * 7);
        OK(kvc_storage_copy_blocks(p, &tails[g], 1, page, 0));
    }
    OK(kvc_fork(p, 1, 2));
    int32_t taken = -1;
    OK(kvc_append(p, 2, &t[10], 1, 0, &taken));
    assert_int_equal(taken, 3);
    int64_t n = 0;
    OK(kvc_take_pending_copies(p, NULL, NULL, 0, &n));
    assert_int_equal(n, 3);
    OK(kvc_copy_pending(p, NULL, &n));
    assert_int_equal(n, 3);
    for (int32_t g = 0; g < 3; ++g) {
        int32_t tab[MAXT];
        gtable(p, 2, g, tab);
        assert_int_not_equal(tab[2], tails[g]);
        for (int i = 0; i < 1024; ++i) page[i] = (unsigned char)(g * 31 + i * 7);
        OK(kvc_storage_copy_blocks(p, &tab[2], 1, got, 1));
        assert_memory_equal(page, got, sizeof got);
        gtable(p, 1, g, tab);
        assert_int_equal(tab[2], tails[g]); /* the parent keeps its pages */
    }
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

/* Cached pages of every group spill to the host tier when evicted and come back byte for byte
 * when a later prompt hits them (including the SSM snapshot page). */
static void test_host_tier_spill_and_restore_bytes(void **state) {
    (void)state;
    kvc_pool *p = make_hybrid(24, KVC_BACKEND_CPU, 1, 0.0);
    OK(kvc_tier_attach_host(p, 32));
    int32_t t[MAXT];
    toks(t, MAXT, 5000);
    OK(kvc_alloc(p, 1, t, 13, NULL, NULL)); /* 4 blocks per group, 3 full ones cached */
    unsigned char page[1024], got[1024];
    for (int32_t g = 0; g < 3; ++g) {
        int32_t tab[MAXT];
        gtable(p, 1, g, tab);
        for (int32_t i = 0; i < 3; ++i) {
            for (int k = 0; k < 1024; ++k) page[k] = (unsigned char)(g * 97 + i * 13 + k * 3);
            OK(kvc_storage_copy_blocks(p, &tab[i], 1, page, 0));
        }
    }
    OK(kvc_free(p, 1));
    /* Take every page: the cached ones are evicted to the host tier. */
    int32_t f[4];
    for (uint64_t id = 100; id < 108; ++id) {
        toks(f, 3, (int32_t)(90000 + id * 10));
        OK(kvc_alloc(p, id, f, 3, NULL, NULL));
    }
    assert_int_equal(stats_of(p).free_blocks, 0);
    for (uint64_t id = 100; id < 108; ++id) OK(kvc_free(p, id));
    CHECK_POOL(p);
    int64_t cached = -1;
    OK(kvc_alloc(p, 2, t, 13, NULL, &cached));
    assert_int_equal(cached, 12);
    /* FULL: blocks 0..2 restored; SLIDING (W 6, c = 12): blocks from 7 on: 1, 2; SSM: block 2. */
    const int32_t first[3] = {0, 1, 2};
    for (int32_t g = 0; g < 3; ++g) {
        int32_t tab[MAXT];
        gtable(p, 2, g, tab);
        assert_int_equal(released_in(p, 2, g), first[g]);
        for (int32_t i = first[g]; i < 3; ++i) {
            for (int k = 0; k < 1024; ++k) page[k] = (unsigned char)(g * 97 + i * 13 + k * 3);
            OK(kvc_storage_copy_blocks(p, &tab[i], 1, got, 1));
            assert_memory_equal(page, got, sizeof got);
        }
    }
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

/* kvc_swap_out moves every group's pages of a sequence to the host tier (released entries stay
 * -1, shared pages stay), kvc_swap_in brings them back byte for byte into new pages. */
static void test_swap_every_group_bytes(void **state) {
    (void)state;
    kvc_pool *p = make_hybrid(40, KVC_BACKEND_CPU, 1, 0.0);
    OK(kvc_tier_attach_host(p, 40));
    int32_t t[MAXT];
    toks(t, MAXT, 8000);
    OK(kvc_alloc(p, 1, t, 9, NULL, NULL));
    for (int64_t pos = 9; pos < 18; ++pos) OK(kvc_append(p, 1, &t[pos], 1, 0, NULL));
    /* 18 tokens, 5 blocks; the last append released by the previous call's first position, 16:
     * FULL holds 5, SLIDING the blocks from position 11 on (2..4), SSM from 16 on (4). */
    const int32_t held[3] = {5, 3, 1};
    unsigned char page[1024], got[1024];
    for (int32_t g = 0; g < 3; ++g) {
        int32_t tab[MAXT];
        assert_int_equal(gtable(p, 1, g, tab), 5);
        assert_int_equal(5 - released_in(p, 1, g), held[g]);
        for (int32_t i = 5 - held[g]; i < 5; ++i) {
            for (int k = 0; k < 1024; ++k) page[k] = (unsigned char)(g * 59 + i * 17 + k * 5);
            OK(kvc_storage_copy_blocks(p, &tab[i], 1, page, 0));
        }
    }
    int64_t swap_bytes = -1, redo = -1;
    OK(kvc_preemption_cost(p, 1, &swap_bytes, &redo));
    assert_int_equal(swap_bytes, 9 * 1024);
    assert_int_equal(redo, 18);
    uint64_t op = 0;
    OK(kvc_swap_out(p, 1, &op));
    OK(kvc_op_wait(p, op));
    assert_int_equal(stats_of(p).used_blocks, 0);
    CHECK_POOL(p);
    int32_t taken = -1;
    EXPECT_ERR_UNCHANGED(p, kvc_append(p, 1, &t[18], 1, 0, &taken), KVC_ERR_STATE);
    /* Churn the device: the pages the swap freed are reused. */
    for (uint64_t id = 100; id < 104; ++id) {
        int32_t f[3] = {(int32_t)id, 1, 2};
        OK(kvc_alloc(p, id, f, 3, NULL, NULL));
    }
    OK(kvc_swap_in(p, 1, &op));
    OK(kvc_op_wait(p, op));
    for (int32_t g = 0; g < 3; ++g) {
        int32_t tab[MAXT];
        gtable(p, 1, g, tab);
        assert_int_equal(5 - released_in(p, 1, g), held[g]);
        for (int32_t i = 5 - held[g]; i < 5; ++i) {
            for (int k = 0; k < 1024; ++k) page[k] = (unsigned char)(g * 59 + i * 17 + k * 5);
            OK(kvc_storage_copy_blocks(p, &tab[i], 1, got, 1));
            assert_memory_equal(page, got, sizeof got);
        }
    }
    OK(kvc_append(p, 1, &t[18], 1, 0, &taken));
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

/* kvc_prefix_pin pins, in every group, what a hit at the end of the prefix needs (FULL: every
 * block; SLIDING: its window's blocks there plus the one the aligned prefix's own admission
 * needs; SSM: the last snapshot, plus the one before for that admission): under pressure that
 * evicts everything else the prompt still hits, and kvc_prefix_unpin undoes exactly the pins. */
static void test_prefix_pin_every_group(void **state) {
    (void)state;
    kvc_pool *p = make_hybrid(30, KVC_BACKEND_NONE, 1, 0.0);
    int32_t sys[20], t[MAXT];
    toks(sys, 20, 11000);
    OK(kvc_alloc(p, 1, sys, 16, NULL, NULL)); /* 4 full blocks per group, cached at once */
    OK(kvc_free(p, 1));
    int64_t pinned = -1;
    OK(kvc_prefix_pin(p, sys, 16, NULL, &pinned));
    assert_int_equal(pinned, 16);
    /* FULL 4 + SLIDING (window of position 16: blocks 2, 3; the 16-token prompt's own admission,
     * hit 12 with window from 7: block 1) 3 + SSM (block 3; block 2 for that admission) 2. */
    assert_int_equal(stats_of(p).pinned_blocks, 9);
    CHECK_POOL(p);
    /* Take every other page: the unpinned cached ones are evicted. */
    const int64_t avail = stats_of(p).free_blocks; /* pinned pages are not free */
    for (int64_t i = 0; i < avail / 3; ++i) {
        toks(t, 3, (int32_t)(50000 + i * 10));
        OK(kvc_alloc(p, 100 + (uint64_t)i, t, 3, NULL, NULL));
    }
    for (int64_t i = 0; i < avail / 3; ++i) OK(kvc_free(p, 100 + (uint64_t)i));
    int64_t cached = -1;
    assert_true(stats_of(p).evictions > 0);
    OK(kvc_prefix_lookup(p, sys, 16, NULL, &cached)); /* the prefix itself: cap 3 blocks */
    assert_int_equal(cached, 12);
    OK(kvc_prefix_lookup(p, sys, 20, NULL, &cached)); /* an extension: all 4 blocks */
    assert_int_equal(cached, 16);
    /* Shorter prefixes are not protected (as with a plain pool's window): at 12 tokens the
     * sliding group would need its evicted block 0. */
    OK(kvc_prefix_lookup(p, sys, 12, NULL, &cached));
    assert_int_equal(cached, 0);
    int64_t unpinned = -1;
    OK(kvc_prefix_unpin(p, sys, 16, NULL, &unpinned));
    assert_int_equal(unpinned, 16);
    assert_int_equal(stats_of(p).pinned_blocks, 0);
    EXPECT_ERR_UNCHANGED(p, kvc_prefix_unpin(p, sys, 16, NULL, &unpinned), KVC_ERR_STATE);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

/* kvc_truncate cuts every group; with an SSM group only a cut that keeps every token is allowed. */
static void test_truncate(void **state) {
    (void)state;
    kvc_pool *p = make_hybrid(64, KVC_BACKEND_NONE, 0, 0.0);
    int32_t t[MAXT];
    toks(t, MAXT, 6000);
    OK(kvc_alloc(p, 1, t, 20, NULL, NULL));
    int32_t freed = -1;
    OK(kvc_truncate(p, 1, 9, &freed));
    assert_int_equal(freed, 4); /* 5 -> 3 blocks in each of 2 groups */
    assert_int_equal(gtable(p, 1, 1, (int32_t[MAXT]){0}), 3);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));

    p = make_hybrid(64, KVC_BACKEND_NONE, 1, 0.0);
    OK(kvc_alloc(p, 1, t, 20, NULL, NULL));
    OK(kvc_append(p, 1, &t[20], 0, 3, NULL)); /* lookahead: 23 reserved */
    EXPECT_ERR_UNCHANGED(p, kvc_truncate(p, 1, 12, NULL), KVC_ERR_UNSUPPORTED);
    OK(kvc_truncate(p, 1, 20, &freed)); /* drops the lookahead only: block 5 in each group */
    assert_int_equal(freed, 3);
    CHECK_POOL(p);
    OK(kvc_pool_destroy(p));
}

/* What hybrid pools do not offer yet is refused with KVC_ERR_UNSUPPORTED and changes nothing. */
static void test_unsupported_on_hybrid(void **state) {
    (void)state;
    kvc_pool *p = make_hybrid(64, KVC_BACKEND_CPU, 1, 0.0);
    int32_t t[MAXT];
    toks(t, MAXT, 7000);
    OK(kvc_alloc(p, 1, t, 9, NULL, NULL));
    int64_t n = 0;
    EXPECT_ERR_UNCHANGED(p, kvc_pool_set_sliding_window(p, 4), KVC_ERR_UNSUPPORTED);
    EXPECT_ERR_UNCHANGED(p, kvc_prefix_lookup_tiers(p, t, 9, NULL, &n, &n, &n), KVC_ERR_UNSUPPORTED);
    EXPECT_ERR_UNCHANGED(p, kvc_tier_attach_disk(p, "/tmp/kvc_hybrid_never", 16, 0), KVC_ERR_UNSUPPORTED);
    kvc_xfer_agent *a = NULL;
    EXPECT_ERR_UNCHANGED(p, kvc_xfer_agent_create(p, NULL, &a), KVC_ERR_UNSUPPORTED);
    assert_null(a);
    /* Preemption by recompute works: the sequence is freed in every group. */
    int64_t redo = -1;
    OK(kvc_preempt_recompute(p, 1, &redo));
    assert_int_equal(redo, 9);
    assert_int_equal(stats_of(p).used_blocks, 0);
    OK(kvc_pool_destroy(p));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_groups_and_geometry),
        cmocka_unit_test(test_bad_group_configs),
        cmocka_unit_test(test_window_release_per_group),
        cmocka_unit_test(test_append_batch_matches_appends),
        cmocka_unit_test(test_groups_own_their_blocks),
        cmocka_unit_test(test_coordinated_hit_full_and_sliding),
        cmocka_unit_test(test_coordinated_hit_with_ssm_snapshots),
        cmocka_unit_test(test_all_or_nothing_over_groups),
        cmocka_unit_test(test_append_counts_every_groups_window),
        cmocka_unit_test(test_fork_copy_on_write_bytes),
        cmocka_unit_test(test_host_tier_spill_and_restore_bytes),
        cmocka_unit_test(test_swap_every_group_bytes),
        cmocka_unit_test(test_prefix_pin_every_group),
        cmocka_unit_test(test_truncate),
        cmocka_unit_test(test_unsupported_on_hybrid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
