/* The bad-input matrix: every public function of include/kvc/kvc.h called with each class of
 * invalid argument that applies to it (NULL handle, NULL out-param, negative / zero / overflowing
 * sizes, unknown ids, freed sequences, buffers too small, wrong struct_size, wrong state).
 *
 * For every row, on a fresh fixture (two pools, keys, batches, pending copies, events, written KV):
 *   - the exact status;
 *   - a fresh, non-empty kvc_last_error() that names the function;
 *   - no out-param written (except a documented required size);
 *   - the fixture's whole observable state equals a pristine twin's: stats field by field,
 *     kvc_pool_check, every block table / token count / slot mapping, pending copies, KV events,
 *     prefix lookups (which also proves the keys object unchanged), KV storage bytes, and the
 *     batches' last build.
 *
 * "A new public function without rows fails it": test_every_function_has_rows parses kvc.h and
 * demands rows for every KVC_API function, and per parameter the classes that apply (NULL handle,
 * unknown + freed id, negative count/cap, wrong struct_size, NULL required out-param). */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kvc/kvc.h"

/* ---- fixture ---------------------------------------------------------------------------------- */

enum { BS = 4, P_BLOCKS = 20, C_BLOCKS = 16, C_LAYERS = 2, C_KV_HEADS = 2, C_Q_HEADS = 4, C_HEAD_DIM = 8 };
enum { TOK_CAP = 64, MAX_IDS = 8 };

/* Sequence ids. P: metadata-only pool with prefix caching; C: CPU-storage pool without caching. */
#define SEQ_A 1u      /* P: prompt A, 10 tokens */
#define SEQ_FORK 2u   /* P: fork of SEQ_A + 1 token (copy-on-write pending) */
#define SEQ_FREED 3u  /* P: allocated then freed */
#define SEQ_B 4u      /* P: prompt B with keys K */
#define SEQ_C1 11u    /* C: 6 tokens, KV written */
#define SEQ_C2 12u    /* C: 5 tokens + 4 lookahead */
#define SEQ_CFREED 13u /* C: freed after batch `stale` was built with it */
#define SEQ_CFORK 14u /* C: fork of SEQ_C1 + 1 token (copy-on-write pending) */
#define SEQ_NONE 999u /* never allocated anywhere */
/* T: CPU storage, prefix caching, a 2-slot host tier, a full device tier. */
#define SEQ_SWAPPED 21u /* T: 6 tokens, swapped out (both host slots held) */
#define SEQ_TCOW 22u    /* T: 5 tokens; its fork SEQ_TFORK appended, so a copy-on-write pair is pending */
#define SEQ_TFORK 23u
#define SEQ_TBIG 24u    /* T: 12 tokens, fills the device */
#define SEQ_X1 31u      /* X: 9 tokens, KV written, exported */
#define SEQ_XFREED 32u  /* X: allocated then freed */
enum { T_BLOCKS = 6, T_HOST_SLOTS = 2 };

static const uint64_t k_probe_ids[] = {SEQ_A, SEQ_FORK, SEQ_FREED, SEQ_B, SEQ_C1, SEQ_C2, SEQ_CFREED, SEQ_CFORK,
                                       SEQ_SWAPPED, SEQ_TCOW, SEQ_TFORK, SEQ_TBIG};
/* kvc_append_batch's rows: entries naming SEQ_A (twice), an unknown, a freed and the C pool's
 * sequence, and CSR offsets that start past 0, decrease, or append 50 tokens. */
static const uint64_t k_batch_a[2] = {SEQ_A, SEQ_A};
static const uint64_t k_batch_none[1] = {SEQ_NONE};
static const uint64_t k_batch_freed[1] = {SEQ_FREED};
static const uint64_t k_batch_c1[1] = {SEQ_C1};
static const int64_t k_batch_neg_lookahead[2] = {0, -1};
static const int64_t k_batch_offsets_from_1[2] = {1, 2};
static const int64_t k_batch_offsets_down[3] = {0, 2, 1};
static const int64_t k_batch_offsets_50[2] = {0, 50};


typedef struct fixture {
    kvc_pool *P, *C, *T;
    kvc_keys *K;
    kvc_batch *built;   /* on C, built with [C1, C2] */
    kvc_batch *unbuilt; /* on C, capacity 2 seqs / 4 tokens / 1 block per row, never built */
    kvc_batch *stale;   /* on C, built with [CFREED] which was freed afterwards */
    kvc_batch *meta;    /* on P, built with [A, B] */
    kvc_batch *tbatch;  /* on T, built with [TCOW] */
    int32_t tok_a[TOK_CAP], tok_b[TOK_CAP], tok_c[TOK_CAP], tok_x[TOK_CAP];
    float q[16 * C_Q_HEADS * C_HEAD_DIM];
    float kv[16 * C_KV_HEADS * C_HEAD_DIM];
    int64_t slots[16];
    char long_identity[KVC_MAX_DISK_IDENTITY_LEN + 2]; /* one byte over the limit */
    /* X: CPU storage, prefix caching, a transfer agent XA (needs UCX), SEQ_X1's two full blocks
     * exported as XEX; SEQ_XFREED freed. */
    kvc_pool *XP;
    kvc_xfer_agent *XA;
    uint64_t XEX;
} fixture;

/* Out-params a row may (wrongly) write; reset to a pattern before each row, compared after. */
typedef struct outs {
    int64_t i64;
    int32_t i32;
    kvc_pool *pool;
    kvc_keys *keys;
    kvc_batch *batch;
    kvc_pool_config cfg;
    kvc_stats stats, stats_old; /* stats_old: struct_size too small */
    kvc_event event, event_old;
    kvc_storage_info sinfo, sinfo_old;
    kvc_group_info ginfo, ginfo_old;
    kvc_batch_info binfo, binfo_old;
    int32_t i32buf[64], i32buf2[64];
    int64_t i64buf[64];
    uint64_t u64buf[64], u64buf2[64];
    char chars[64];
    float attn_out[16 * C_Q_HEADS * C_HEAD_DIM];
    kvc_tier_stats tstats, tstats_old; /* tstats_old: struct_size too small */
    kvc_xfer_agent *agent;
    kvc_xfer_config xcfg, xcfg_old;   /* xcfg_old: struct_size too small */
    kvc_xfer_import_result xres, xres_old;
    kvc_xfer_stats xstats, xstats_old;
    uint8_t bytes[512];
} outs;

static fixture F;  /* the fixture a row runs on */
static outs O;     /* its out-params */
static outs O_pattern;

#define SETUP(call)                                                                                \
    do {                                                                                           \
        kvc_status st_ = (call);                                                                   \
        if (st_ != KVC_OK) fail_msg("fixture: %s -> %s: %s", #call, kvc_status_str(st_), kvc_last_error()); \
    } while (0)

static kvc_pool *make_pool(int32_t backend, int64_t blocks, int caching, int64_t max_len) {
    kvc_pool_config c;
    SETUP(kvc_pool_config_default(&c));
    c.block_size = BS;
    c.num_blocks = blocks;
    c.prefix_caching = caching;
    c.watermark = 0.0;
    c.max_seq_len = max_len;
    c.event_capacity = 64;
    c.backend = backend;
    if (backend == KVC_BACKEND_CPU) {
        c.num_layers = C_LAYERS;
        c.num_kv_heads = C_KV_HEADS;
        c.num_q_heads = C_Q_HEADS;
        c.head_dim = C_HEAD_DIM;
        c.kv_dtype = KVC_DTYPE_F32;
    }
    kvc_pool *p = NULL;
    SETUP(kvc_pool_create(&c, &p));
    return p;
}

static void fixture_build(fixture *f) {
    memset(f, 0, sizeof *f);
    memset(f->long_identity, 'm', sizeof f->long_identity - 1);
    f->long_identity[sizeof f->long_identity - 1] = '\0';
    for (int i = 0; i < TOK_CAP; ++i) {
        f->tok_a[i] = 100 + i;
        f->tok_b[i] = 400 + i;
        f->tok_c[i] = 300 + i;
        f->tok_x[i] = 7000 + i;
    }
    for (size_t i = 0; i < sizeof f->q / sizeof f->q[0]; ++i) f->q[i] = (float)(i % 13) * 0.125f;
    for (size_t i = 0; i < sizeof f->kv / sizeof f->kv[0]; ++i) f->kv[i] = (float)(i % 7) * 0.5f - 1.0f;

    /* P: metadata-only, prefix caching, max_seq_len 64. */
    f->P = make_pool(KVC_BACKEND_NONE, P_BLOCKS, 1, 64);
    SETUP(kvc_keys_create(&f->K));
    SETUP(kvc_keys_set_lora(f->K, 7));
    SETUP(kvc_keys_set_salt(f->K, "tenant"));
    SETUP(kvc_keys_add_mm(f->K, 1, 2, 0, 3));
    SETUP(kvc_keys_set_priority(f->K, 60));
    SETUP(kvc_alloc(f->P, SEQ_A, f->tok_a, 10, NULL, NULL));
    SETUP(kvc_fork(f->P, SEQ_A, SEQ_FORK));
    SETUP(kvc_append(f->P, SEQ_FORK, f->tok_x, 1, 0, NULL));
    SETUP(kvc_alloc(f->P, SEQ_FREED, f->tok_c, 6, NULL, NULL));
    SETUP(kvc_free(f->P, SEQ_FREED));
    SETUP(kvc_alloc(f->P, SEQ_B, f->tok_b, 12, f->K, NULL));
    SETUP(kvc_prefix_pin(f->P, f->tok_a, 8, NULL, NULL));

    /* C: CPU storage, no caching, no length limit. */
    f->C = make_pool(KVC_BACKEND_CPU, C_BLOCKS, 0, 0);
    SETUP(kvc_alloc(f->C, SEQ_C1, NULL, 6, NULL, NULL));
    SETUP(kvc_alloc(f->C, SEQ_C2, NULL, 5, NULL, NULL));
    SETUP(kvc_append(f->C, SEQ_C2, NULL, 0, 4, NULL));
    SETUP(kvc_alloc(f->C, SEQ_CFREED, NULL, 3, NULL, NULL));
    SETUP(kvc_seq_slot_mapping(f->C, SEQ_C1, 0, 6, f->slots, 16));
    for (int32_t layer = 0; layer < C_LAYERS; ++layer)
        SETUP(kvc_cache_write(f->C, layer, f->slots, 6, f->kv, f->kv + 4, KVC_DTYPE_F32, 1.0f, 1.0f, NULL));
    SETUP(kvc_batch_create(f->C, 4, 16, 4, &f->built));
    SETUP(kvc_batch_create(f->C, 2, 4, 1, &f->unbuilt));
    SETUP(kvc_batch_create(f->C, 2, 8, 4, &f->stale));
    SETUP(kvc_batch_create(f->P, 2, 16, 4, &f->meta));
    {
        const uint64_t ids[] = {SEQ_C1, SEQ_C2};
        const int64_t q[] = {6, 5};
        SETUP(kvc_batch_build(f->built, ids, q, 2));
        const uint64_t sid[] = {SEQ_CFREED};
        const int64_t sq[] = {1};
        SETUP(kvc_batch_build(f->stale, sid, sq, 1));
        const uint64_t mid[] = {SEQ_A, SEQ_B};
        const int64_t mq[] = {1, 1};
        SETUP(kvc_batch_build(f->meta, mid, mq, 2));
    }
    SETUP(kvc_free(f->C, SEQ_CFREED));
    SETUP(kvc_fork(f->C, SEQ_C1, SEQ_CFORK));
    SETUP(kvc_append(f->C, SEQ_CFORK, NULL, 1, 0, NULL));

    /* X: a transfer agent with one export (the transfer rows; UCX must be installed). */
    f->XP = make_pool(KVC_BACKEND_CPU, 8, 1, 0);
    SETUP(kvc_alloc(f->XP, SEQ_X1, f->tok_a, 9, NULL, NULL));
    SETUP(kvc_alloc(f->XP, SEQ_XFREED, f->tok_c, 5, NULL, NULL));
    SETUP(kvc_free(f->XP, SEQ_XFREED));
    SETUP(kvc_xfer_agent_create(f->XP, NULL, &f->XA));
    SETUP(kvc_xfer_export_seq(f->XA, SEQ_X1, 0, &f->XEX, NULL));

    /* T: a swapped-out sequence, a pending copy-on-write pair, no free device block. */
    f->T = make_pool(KVC_BACKEND_CPU, T_BLOCKS, 1, 0);
    SETUP(kvc_tier_attach_host(f->T, T_HOST_SLOTS));
    SETUP(kvc_alloc(f->T, SEQ_SWAPPED, f->tok_x, 6, NULL, NULL));
    SETUP(kvc_swap_out(f->T, SEQ_SWAPPED, NULL));
    SETUP(kvc_alloc(f->T, SEQ_TCOW, f->tok_c, 5, NULL, NULL));
    SETUP(kvc_fork(f->T, SEQ_TCOW, SEQ_TFORK));
    SETUP(kvc_append(f->T, SEQ_TFORK, f->tok_x, 1, 0, NULL));
    SETUP(kvc_alloc(f->T, SEQ_TBIG, f->tok_b, 12, NULL, NULL));
    SETUP(kvc_batch_create(f->T, 2, 8, 4, &f->tbatch));
    {
        const uint64_t tid[] = {SEQ_TCOW};
        const int64_t tq[] = {1};
        SETUP(kvc_batch_build(f->tbatch, tid, tq, 1));
    }
}

static void fixture_destroy(fixture *f) {
    kvc_xfer_agent_destroy(f->XA);
    kvc_pool_destroy(f->XP);
    kvc_batch_destroy(f->built);
    kvc_batch_destroy(f->unbuilt);
    kvc_batch_destroy(f->stale);
    kvc_batch_destroy(f->meta);
    kvc_batch_destroy(f->tbatch);
    kvc_keys_destroy(f->K);
    kvc_pool_destroy(f->P);
    kvc_pool_destroy(f->C);
    kvc_pool_destroy(f->T);
    memset(f, 0, sizeof *f);
}

static void outs_reset(void) {
    memset(&O_pattern, 0xA5, sizeof O_pattern);
    O_pattern.stats.struct_size = sizeof(kvc_stats);
    O_pattern.stats_old.struct_size = 4;
    O_pattern.event.struct_size = sizeof(kvc_event);
    O_pattern.event_old.struct_size = 4;
    O_pattern.sinfo.struct_size = sizeof(kvc_storage_info);
    O_pattern.sinfo_old.struct_size = 4;
    O_pattern.ginfo.struct_size = sizeof(kvc_group_info);
    O_pattern.ginfo_old.struct_size = 4;
    O_pattern.binfo.struct_size = sizeof(kvc_batch_info);
    O_pattern.binfo_old.struct_size = 4;
    O_pattern.tstats.struct_size = sizeof(kvc_tier_stats);
    O_pattern.tstats_old.struct_size = 4;
    O_pattern.xcfg_old.struct_size = 4;
    O_pattern.xres.struct_size = sizeof(kvc_xfer_import_result);
    O_pattern.xres_old.struct_size = 4;
    O_pattern.xstats.struct_size = sizeof(kvc_xfer_stats);
    O_pattern.xstats_old.struct_size = 4;
    memcpy(&O, &O_pattern, sizeof O);
}

/* ---- argument builders used by the rows ------------------------------------------------------- */

enum cfg_kind {
    CFG_VERSION, CFG_BS0, CFG_LAYERS0, CFG_KV_HEADS_NEG, CFG_HEAD_DIM0, CFG_DTYPE, CFG_SHAPE_OVERFLOW,
    CFG_Q_HEADS, CFG_BLOCKS_NEG, CFG_BUDGET_NEG, CFG_UTIL0, CFG_UTIL_NAN, CFG_WATERMARK1, CFG_WATERMARK_NEG,
    CFG_GPU_UTIL, CFG_MAX_LEN_NEG, CFG_CACHING2, CFG_BACKEND, CFG_DEVICE_NEG, CFG_EVENTS_NEG, CFG_NO_BLOCKS,
    CFG_BUDGET_TOO_SMALL, CFG_TOO_MANY_BLOCKS, CFG_TOTAL_OVERFLOW, CFG_NO_DEVICE
};

static kvc_pool_config g_cfg;

/* A valid 8-block config with one defect. */
static const kvc_pool_config *cfg_with(enum cfg_kind kind) {
    kvc_pool_config_default(&g_cfg);
    g_cfg.num_blocks = 8;
    g_cfg.head_dim = 8;
    switch (kind) {
        case CFG_VERSION: g_cfg.struct_size = 4; break;
        case CFG_BS0: g_cfg.block_size = 0; break;
        case CFG_LAYERS0: g_cfg.num_layers = 0; break;
        case CFG_KV_HEADS_NEG: g_cfg.num_kv_heads = -2; break;
        case CFG_HEAD_DIM0: g_cfg.head_dim = 0; break;
        case CFG_DTYPE: g_cfg.kv_dtype = 99; break;
        case CFG_SHAPE_OVERFLOW: g_cfg.head_dim = INT32_MAX; g_cfg.block_size = INT32_MAX; break;
        case CFG_Q_HEADS: g_cfg.num_kv_heads = 2; g_cfg.num_q_heads = 3; break;
        case CFG_BLOCKS_NEG: g_cfg.num_blocks = -1; break;
        case CFG_BUDGET_NEG: g_cfg.memory_budget_bytes = -1; break;
        case CFG_UTIL0: g_cfg.memory_utilization = 0.0; break;
        case CFG_UTIL_NAN: g_cfg.memory_utilization = NAN; break;
        case CFG_WATERMARK1: g_cfg.watermark = 1.0; break;
        case CFG_WATERMARK_NEG: g_cfg.watermark = -0.5; break;
        case CFG_GPU_UTIL: g_cfg.gpu_memory_utilization = 1.5; break;
        case CFG_MAX_LEN_NEG: g_cfg.max_seq_len = -1; break;
        case CFG_CACHING2: g_cfg.prefix_caching = 2; break;
        case CFG_BACKEND: g_cfg.backend = 7; break;
        case CFG_DEVICE_NEG: g_cfg.device = -1; break;
        case CFG_EVENTS_NEG: g_cfg.event_capacity = -1; break;
        case CFG_NO_BLOCKS: g_cfg.num_blocks = 0; g_cfg.memory_budget_bytes = 0; break;
        case CFG_BUDGET_TOO_SMALL: g_cfg.num_blocks = 0; g_cfg.memory_budget_bytes = 100; break;
        case CFG_TOO_MANY_BLOCKS: g_cfg.num_blocks = (int64_t)INT32_MAX + 1; break;
        case CFG_TOTAL_OVERFLOW:
            /* 2^33-byte blocks x 2^31 - 1 blocks overflows int64. */
            g_cfg.num_blocks = INT32_MAX; g_cfg.kv_dtype = KVC_DTYPE_F32; g_cfg.head_dim = 1024;
            g_cfg.block_size = 1024; g_cfg.num_layers = 1024; break;
        case CFG_NO_DEVICE: g_cfg.backend = KVC_BACKEND_CUDA; g_cfg.device = 1000; break;
    }
    return &g_cfg;
}

/* kvc_pool_create_hybrid's groups: FULL + SLIDING(8) over layers {0, 1}, or one thing wrong. */
enum grp_kind { GRP_OK, GRP_VERSION, GRP_KIND, GRP_LAYERS0, GRP_WINDOW_ON_FULL, GRP_NO_WINDOW, GRP_STATE0 };
static kvc_group_config g_grp[2];
static const int32_t k_l2g[2] = {0, 1}, k_l2g_unknown[2] = {0, 5};
static const kvc_group_config *grp_with(enum grp_kind kind) {
    kvc_group_config_default(&g_grp[0]);
    kvc_group_config_default(&g_grp[1]);
    g_grp[1].kind = KVC_GROUP_SLIDING;
    g_grp[1].sliding_window = 8;
    switch (kind) {
        case GRP_OK: break;
        case GRP_VERSION: g_grp[1].struct_size = 4; break;
        case GRP_KIND: g_grp[0].kind = 9; break;
        case GRP_LAYERS0: g_grp[0].num_layers = 0; break;
        case GRP_WINDOW_ON_FULL: g_grp[0].sliding_window = 4; break;
        case GRP_NO_WINDOW: g_grp[1].sliding_window = 0; break;
        case GRP_STATE0:
            g_grp[1].kind = KVC_GROUP_SSM;
            g_grp[1].sliding_window = 0;
            g_grp[1].state_bytes = 0;
            break;
    }
    return g_grp;
}

static kvc_attention_params g_params;

enum par_kind { PAR_OK, PAR_VERSION, PAR_HEADS3, PAR_HEADS_OVER, PAR_QDTYPE_FP8, PAR_QDTYPE_99, PAR_SCALE_NEG,
                PAR_SCALE_NAN, PAR_KSCALE0, PAR_SOFTCAP_NEG, PAR_WINDOW_NEG, PAR_PARTITION };

static const kvc_attention_params *params_with(enum par_kind kind) {
    kvc_attention_params_default(&g_params);
    g_params.q_dtype = KVC_DTYPE_F32;
    switch (kind) {
        case PAR_OK: break;
        case PAR_VERSION: g_params.struct_size = 4; break;
        case PAR_HEADS3: g_params.num_q_heads = 3; break;
        case PAR_HEADS_OVER: g_params.num_q_heads = 2 * C_Q_HEADS; break;
        case PAR_QDTYPE_FP8: g_params.q_dtype = KVC_DTYPE_FP8_E4M3; break;
        case PAR_QDTYPE_99: g_params.q_dtype = 99; break;
        case PAR_SCALE_NEG: g_params.scale = -1.0f; break;
        case PAR_SCALE_NAN: g_params.scale = NAN; break;
        case PAR_KSCALE0: g_params.k_scale = 0.0f; break;
        case PAR_SOFTCAP_NEG: g_params.logit_softcap = -1.0f; break;
        case PAR_WINDOW_NEG: g_params.sliding_window = -1; break;
        case PAR_PARTITION: g_params.partition_size = -2; break;
    }
    return &g_params;
}

static uint64_t g_ids[4];
static int64_t g_qlens[4];
static const uint64_t *ids2(uint64_t a, uint64_t b) { g_ids[0] = a; g_ids[1] = b; return g_ids; }
static const int64_t *q2(int64_t a, int64_t b) { g_qlens[0] = a; g_qlens[1] = b; return g_qlens; }

static int32_t g_block_ids[4];
static const int32_t *blocks2(int32_t a, int32_t b) { g_block_ids[0] = a; g_block_ids[1] = b; return g_block_ids; }

static int64_t g_slots[4];
static const int64_t *slots2(int64_t a, int64_t b) { g_slots[0] = a; g_slots[1] = b; return g_slots; }

/* ---- the matrix ------------------------------------------------------------------------------- */

/* Classes of invalid argument. */
enum cls { NULL_HANDLE, NULL_OUT, NULL_IN, NEGATIVE, ZERO, OVERFLOW, RANGE, UNKNOWN_ID, FREED_ID, EXISTS,
           TOO_SMALL, VERSION, STATE, CAPACITY, UNSUPPORTED, NUM_CLASSES };
static const char *const k_class_names[] = {"NULL handle", "NULL out-param", "NULL input", "negative size",
    "zero size", "overflow", "out of range", "unknown id", "freed id", "id exists", "buffer too small",
    "wrong struct_size", "wrong state", "over capacity", "unsupported"};

/* A slot-MAC key one byte longer than the longest taken (its contents do not matter). */
static const uint8_t k_disk_key[KVC_DISK_KEY_MAX_LEN + 1];

/* Row flags. */
#define F_NONE 0
#define F_KEEP_MSG 1 /* the function documents that it keeps the previous message */
#define F_OUT_LEN 2  /* O.i64 receives the documented required size */
#define F_OUT_DONE 4 /* O.i32 receives the entries done (kvc_append_batch); the row checks it is 0 */

/* X(function, class, expected status, flags, call, extra check after the call) */
#define BAD_INPUT_ROWS(X)                                                                                              \
    X(kvc_last_error_copy, NULL_IN, KVC_ERR_NULL_ARG, F_KEEP_MSG, kvc_last_error_copy(NULL, 8, &O.i64), 1)            \
    X(kvc_last_error_copy, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE, kvc_last_error_copy(O.chars, -1, &O.i64), 1)        \
                                                                                                                       \
    X(kvc_pool_config_default, NULL_OUT, KVC_ERR_NULL_ARG, F_NONE, kvc_pool_config_default(NULL), 1)                   \
                                                                                                                       \
    X(kvc_bytes_per_block, NULL_IN, KVC_ERR_NULL_ARG, F_NONE, kvc_bytes_per_block(NULL, &O.i64), 1)                    \
    X(kvc_bytes_per_block, NULL_OUT, KVC_ERR_NULL_ARG, F_NONE, kvc_bytes_per_block(cfg_with(CFG_BS0), NULL), 1)         \
    X(kvc_bytes_per_block, VERSION, KVC_ERR_VERSION, F_NONE, kvc_bytes_per_block(cfg_with(CFG_VERSION), &O.i64), 1)    \
    X(kvc_bytes_per_block, ZERO, KVC_ERR_INVALID_ARG, F_NONE, kvc_bytes_per_block(cfg_with(CFG_BS0), &O.i64), 1)       \
    X(kvc_bytes_per_block, ZERO, KVC_ERR_INVALID_ARG, F_NONE, kvc_bytes_per_block(cfg_with(CFG_LAYERS0), &O.i64), 1)   \
    X(kvc_bytes_per_block, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE,                                                     \
      kvc_bytes_per_block(cfg_with(CFG_KV_HEADS_NEG), &O.i64), 1)                                                      \
    X(kvc_bytes_per_block, ZERO, KVC_ERR_INVALID_ARG, F_NONE, kvc_bytes_per_block(cfg_with(CFG_HEAD_DIM0), &O.i64), 1) \
    X(kvc_bytes_per_block, RANGE, KVC_ERR_INVALID_ARG, F_NONE, kvc_bytes_per_block(cfg_with(CFG_DTYPE), &O.i64), 1)    \
    X(kvc_bytes_per_block, OVERFLOW, KVC_ERR_OVERFLOW, F_NONE,                                                        \
      kvc_bytes_per_block(cfg_with(CFG_SHAPE_OVERFLOW), &O.i64), 1)                                                    \
                                                                                                                       \
    X(kvc_blocks_for_budget, NULL_IN, KVC_ERR_NULL_ARG, F_NONE, kvc_blocks_for_budget(NULL, 100, 0.5, &O.i64), 1)      \
    X(kvc_blocks_for_budget, NULL_OUT, KVC_ERR_NULL_ARG, F_NONE,                                                      \
      kvc_blocks_for_budget(cfg_with(CFG_BLOCKS_NEG), 100, 0.5, NULL), 1)                                              \
    X(kvc_blocks_for_budget, VERSION, KVC_ERR_VERSION, F_NONE,                                                        \
      kvc_blocks_for_budget(cfg_with(CFG_VERSION), 100, 0.5, &O.i64), 1)                                               \
    X(kvc_blocks_for_budget, ZERO, KVC_ERR_INVALID_ARG, F_NONE,                                                       \
      kvc_blocks_for_budget(cfg_with(CFG_BS0), 100, 0.5, &O.i64), 1)                                                   \
    X(kvc_blocks_for_budget, OVERFLOW, KVC_ERR_OVERFLOW, F_NONE,                                                      \
      kvc_blocks_for_budget(cfg_with(CFG_SHAPE_OVERFLOW), 100, 0.5, &O.i64), 1)                                        \
    X(kvc_blocks_for_budget, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE,                                                   \
      kvc_blocks_for_budget(cfg_with(CFG_BLOCKS_NEG), -1, 0.5, &O.i64), 1)                                             \
    X(kvc_blocks_for_budget, ZERO, KVC_ERR_INVALID_ARG, F_NONE,                                                       \
      kvc_blocks_for_budget(cfg_with(CFG_BLOCKS_NEG), 100, 0.0, &O.i64), 1)                                            \
    X(kvc_blocks_for_budget, RANGE, KVC_ERR_INVALID_ARG, F_NONE,                                                      \
      kvc_blocks_for_budget(cfg_with(CFG_BLOCKS_NEG), 100, 1.5, &O.i64), 1)                                            \
    X(kvc_blocks_for_budget, RANGE, KVC_ERR_INVALID_ARG, F_NONE,                                                      \
      kvc_blocks_for_budget(cfg_with(CFG_BLOCKS_NEG), 100, NAN, &O.i64), 1)                                            \
                                                                                                                       \
    X(kvc_cuda_device_count, NULL_OUT, KVC_ERR_NULL_ARG, F_NONE, kvc_cuda_device_count(NULL), 1)                       \
                                                                                                                       \
    X(kvc_pool_create, NULL_IN, KVC_ERR_NULL_ARG, F_NONE, kvc_pool_create(NULL, &O.pool), 1)                           \
    X(kvc_pool_create, NULL_OUT, KVC_ERR_NULL_ARG, F_NONE, kvc_pool_create(cfg_with(CFG_BLOCKS_NEG), NULL), 1)          \
    X(kvc_pool_create, VERSION, KVC_ERR_VERSION, F_NONE, kvc_pool_create(cfg_with(CFG_VERSION), &O.pool), 1)           \
    X(kvc_pool_create, ZERO, KVC_ERR_INVALID_ARG, F_NONE, kvc_pool_create(cfg_with(CFG_BS0), &O.pool), 1)              \
    X(kvc_pool_create, ZERO, KVC_ERR_INVALID_ARG, F_NONE, kvc_pool_create(cfg_with(CFG_LAYERS0), &O.pool), 1)          \
    X(kvc_pool_create, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE, kvc_pool_create(cfg_with(CFG_KV_HEADS_NEG), &O.pool), 1) \
    X(kvc_pool_create, ZERO, KVC_ERR_INVALID_ARG, F_NONE, kvc_pool_create(cfg_with(CFG_HEAD_DIM0), &O.pool), 1)        \
    X(kvc_pool_create, RANGE, KVC_ERR_INVALID_ARG, F_NONE, kvc_pool_create(cfg_with(CFG_DTYPE), &O.pool), 1)           \
    X(kvc_pool_create, OVERFLOW, KVC_ERR_OVERFLOW, F_NONE, kvc_pool_create(cfg_with(CFG_SHAPE_OVERFLOW), &O.pool), 1)  \
    X(kvc_pool_create, RANGE, KVC_ERR_INVALID_ARG, F_NONE, kvc_pool_create(cfg_with(CFG_Q_HEADS), &O.pool), 1)         \
    X(kvc_pool_create, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE, kvc_pool_create(cfg_with(CFG_BLOCKS_NEG), &O.pool), 1)   \
    X(kvc_pool_create, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE, kvc_pool_create(cfg_with(CFG_BUDGET_NEG), &O.pool), 1)   \
    X(kvc_pool_create, ZERO, KVC_ERR_INVALID_ARG, F_NONE, kvc_pool_create(cfg_with(CFG_UTIL0), &O.pool), 1)            \
    X(kvc_pool_create, RANGE, KVC_ERR_INVALID_ARG, F_NONE, kvc_pool_create(cfg_with(CFG_UTIL_NAN), &O.pool), 1)        \
    X(kvc_pool_create, RANGE, KVC_ERR_INVALID_ARG, F_NONE, kvc_pool_create(cfg_with(CFG_WATERMARK1), &O.pool), 1)      \
    X(kvc_pool_create, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE, kvc_pool_create(cfg_with(CFG_WATERMARK_NEG), &O.pool), 1)\
    X(kvc_pool_create, RANGE, KVC_ERR_INVALID_ARG, F_NONE, kvc_pool_create(cfg_with(CFG_GPU_UTIL), &O.pool), 1)        \
    X(kvc_pool_create, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE, kvc_pool_create(cfg_with(CFG_MAX_LEN_NEG), &O.pool), 1)  \
    X(kvc_pool_create, RANGE, KVC_ERR_INVALID_ARG, F_NONE, kvc_pool_create(cfg_with(CFG_CACHING2), &O.pool), 1)        \
    X(kvc_pool_create, RANGE, KVC_ERR_INVALID_ARG, F_NONE, kvc_pool_create(cfg_with(CFG_BACKEND), &O.pool), 1)         \
    X(kvc_pool_create, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE, kvc_pool_create(cfg_with(CFG_DEVICE_NEG), &O.pool), 1)   \
    X(kvc_pool_create, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE, kvc_pool_create(cfg_with(CFG_EVENTS_NEG), &O.pool), 1)   \
    X(kvc_pool_create, ZERO, KVC_ERR_INVALID_ARG, F_NONE, kvc_pool_create(cfg_with(CFG_NO_BLOCKS), &O.pool), 1)        \
    X(kvc_pool_create, TOO_SMALL, KVC_ERR_INVALID_ARG, F_NONE,                                                        \
      kvc_pool_create(cfg_with(CFG_BUDGET_TOO_SMALL), &O.pool), 1)                                                     \
    X(kvc_pool_create, RANGE, KVC_ERR_INVALID_ARG, F_NONE, kvc_pool_create(cfg_with(CFG_TOO_MANY_BLOCKS), &O.pool), 1) \
    X(kvc_pool_create, OVERFLOW, KVC_ERR_OVERFLOW, F_NONE, kvc_pool_create(cfg_with(CFG_TOTAL_OVERFLOW), &O.pool), 1)  \
    X(kvc_pool_create, UNSUPPORTED, KVC_ERR_DEVICE, F_NONE, kvc_pool_create(cfg_with(CFG_NO_DEVICE), &O.pool), 1)      \
                                                                                                                       \
    X(kvc_pool_create_hybrid, NULL_IN, KVC_ERR_NULL_ARG, F_NONE, kvc_pool_create_hybrid(NULL, grp_with(GRP_OK), 2, k_l2g, 2, &O.pool), 1) \
    X(kvc_pool_create_hybrid, NULL_IN, KVC_ERR_NULL_ARG, F_NONE, kvc_pool_create_hybrid(cfg_with(CFG_BLOCKS_NEG), NULL, 2, k_l2g, 2, &O.pool), 1) \
    X(kvc_pool_create_hybrid, NULL_IN, KVC_ERR_NULL_ARG, F_NONE, kvc_pool_create_hybrid(cfg_with(CFG_BLOCKS_NEG), grp_with(GRP_OK), 2, NULL, 2, &O.pool), 1) \
    X(kvc_pool_create_hybrid, NULL_OUT, KVC_ERR_NULL_ARG, F_NONE, kvc_pool_create_hybrid(cfg_with(CFG_BLOCKS_NEG), grp_with(GRP_OK), 2, k_l2g, 2, NULL), 1) \
    X(kvc_pool_create_hybrid, VERSION, KVC_ERR_VERSION, F_NONE, kvc_pool_create_hybrid(cfg_with(CFG_VERSION), grp_with(GRP_OK), 2, k_l2g, 2, &O.pool), 1) \
    X(kvc_pool_create_hybrid, VERSION, KVC_ERR_VERSION, F_NONE, kvc_pool_create_hybrid(cfg_with(CFG_BLOCKS_NEG), grp_with(GRP_VERSION), 2, k_l2g, 2, &O.pool), 1) \
    X(kvc_pool_create_hybrid, ZERO, KVC_ERR_INVALID_ARG, F_NONE, kvc_pool_create_hybrid(cfg_with(CFG_BLOCKS_NEG), grp_with(GRP_OK), 0, k_l2g, 2, &O.pool), 1) \
    X(kvc_pool_create_hybrid, RANGE, KVC_ERR_INVALID_ARG, F_NONE, kvc_pool_create_hybrid(cfg_with(CFG_BLOCKS_NEG), grp_with(GRP_OK), KVC_MAX_GROUPS + 1, k_l2g, 2, &O.pool), 1) \
    X(kvc_pool_create_hybrid, RANGE, KVC_ERR_INVALID_ARG, F_NONE, kvc_pool_create_hybrid(cfg_with(CFG_BLOCKS_NEG), grp_with(GRP_KIND), 2, k_l2g, 2, &O.pool), 1) \
    X(kvc_pool_create_hybrid, ZERO, KVC_ERR_INVALID_ARG, F_NONE, kvc_pool_create_hybrid(cfg_with(CFG_BLOCKS_NEG), grp_with(GRP_LAYERS0), 2, k_l2g, 2, &O.pool), 1) \
    X(kvc_pool_create_hybrid, RANGE, KVC_ERR_INVALID_ARG, F_NONE, kvc_pool_create_hybrid(cfg_with(CFG_BLOCKS_NEG), grp_with(GRP_WINDOW_ON_FULL), 2, k_l2g, 2, &O.pool), 1) \
    X(kvc_pool_create_hybrid, ZERO, KVC_ERR_INVALID_ARG, F_NONE, kvc_pool_create_hybrid(cfg_with(CFG_BLOCKS_NEG), grp_with(GRP_NO_WINDOW), 2, k_l2g, 2, &O.pool), 1) \
    X(kvc_pool_create_hybrid, ZERO, KVC_ERR_INVALID_ARG, F_NONE, kvc_pool_create_hybrid(cfg_with(CFG_BLOCKS_NEG), grp_with(GRP_STATE0), 2, k_l2g, 2, &O.pool), 1) \
    X(kvc_pool_create_hybrid, RANGE, KVC_ERR_INVALID_ARG, F_NONE, kvc_pool_create_hybrid(cfg_with(CFG_BLOCKS_NEG), grp_with(GRP_OK), 2, k_l2g, 3, &O.pool), 1) \
    X(kvc_pool_create_hybrid, RANGE, KVC_ERR_INVALID_ARG, F_NONE, kvc_pool_create_hybrid(cfg_with(CFG_BLOCKS_NEG), grp_with(GRP_OK), 2, k_l2g_unknown, 2, &O.pool), 1) \
    X(kvc_group_config_default, NULL_OUT, KVC_ERR_NULL_ARG, F_NONE, kvc_group_config_default(NULL), 1) \
    X(kvc_pool_get_group_info, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_pool_get_group_info(NULL, 0, &O.ginfo), 1) \
    X(kvc_pool_get_group_info, NULL_OUT, KVC_ERR_NULL_ARG, F_NONE, kvc_pool_get_group_info(F.P, 0, NULL), 1) \
    X(kvc_pool_get_group_info, VERSION, KVC_ERR_VERSION, F_NONE, kvc_pool_get_group_info(F.P, 0, &O.ginfo_old), 1) \
    X(kvc_pool_get_group_info, RANGE, KVC_ERR_INVALID_ARG, F_NONE, kvc_pool_get_group_info(F.P, 1, &O.ginfo), 1) \
    X(kvc_pool_get_group_info, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE, kvc_pool_get_group_info(F.P, -1, &O.ginfo), 1) \
    X(kvc_pool_layer_group, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_pool_layer_group(NULL, 0, &O.i32, NULL), 1) \
    X(kvc_pool_layer_group, NULL_OUT, KVC_ERR_NULL_ARG, F_NONE, kvc_pool_layer_group(F.P, 0, NULL, NULL), 1) \
    X(kvc_pool_layer_group, RANGE, KVC_ERR_INVALID_ARG, F_NONE, kvc_pool_layer_group(F.P, 1, &O.i32, NULL), 1) \
    X(kvc_pool_layer_group, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE, kvc_pool_layer_group(F.P, -1, &O.i32, NULL), 1) \
    X(kvc_pool_get_config, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_pool_get_config(NULL, &O.cfg), 1)                \
    X(kvc_pool_get_config, NULL_OUT, KVC_ERR_NULL_ARG, F_NONE, kvc_pool_get_config(F.P, NULL), 1)                      \
    X(kvc_pool_check, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_pool_check(NULL), 1)                                  \
    X(kvc_pool_set_sliding_window, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_pool_set_sliding_window(NULL, 8), 1)     \
    X(kvc_pool_set_sliding_window, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE, kvc_pool_set_sliding_window(F.P, -1), 1)     \
    X(kvc_pool_set_sliding_window, STATE, KVC_ERR_STATE, F_NONE, kvc_pool_set_sliding_window(F.P, 8), 1)               \
    X(kvc_pool_get_sliding_window, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_pool_get_sliding_window(NULL, &O.i32), 1) \
    X(kvc_pool_get_sliding_window, NULL_OUT, KVC_ERR_NULL_ARG, F_NONE, kvc_pool_get_sliding_window(F.P, NULL), 1)      \
                                                                                                                       \
    X(kvc_keys_create, NULL_OUT, KVC_ERR_NULL_ARG, F_NONE, kvc_keys_create(NULL), 1)                                   \
    X(kvc_keys_clear, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_keys_clear(NULL), 1)                                  \
    X(kvc_keys_set_lora, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_keys_set_lora(NULL, 3), 1)                         \
    X(kvc_keys_set_salt, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_keys_set_salt(NULL, "x"), 1)                       \
    X(kvc_keys_set_salt, TOO_SMALL, KVC_ERR_INVALID_ARG, F_NONE, kvc_keys_set_salt(F.K, long_salt()), 1)               \
    X(kvc_keys_add_mm, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_keys_add_mm(NULL, 1, 2, 8, 1), 1)                    \
    X(kvc_keys_add_mm, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE, kvc_keys_add_mm(F.K, 1, 2, -1, 1), 1)                    \
    X(kvc_keys_add_mm, ZERO, KVC_ERR_INVALID_ARG, F_NONE, kvc_keys_add_mm(F.K, 1, 2, 8, 0), 1)                         \
    X(kvc_keys_add_mm, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE, kvc_keys_add_mm(F.K, 1, 2, 8, -4), 1)                    \
    X(kvc_keys_add_mm, OVERFLOW, KVC_ERR_OVERFLOW, F_NONE, kvc_keys_add_mm(F.K, 1, 2, INT64_MAX, 1), 1)                \
    X(kvc_keys_add_mm, RANGE, KVC_ERR_INVALID_ARG, F_NONE, kvc_keys_add_mm(F.K, 1, 2, 2, 4), 1)                        \
    X(kvc_keys_set_priority, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_keys_set_priority(NULL, 10), 1)                \
    X(kvc_keys_set_priority, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE, kvc_keys_set_priority(F.K, -1), 1)                 \
    X(kvc_keys_set_priority, RANGE, KVC_ERR_INVALID_ARG, F_NONE, kvc_keys_set_priority(F.K, KVC_PRIORITY_MAX + 1), 1)  \
    X(kvc_keys_set_max_cached_tokens, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_keys_set_max_cached_tokens(NULL, 8), 1) \
    X(kvc_keys_set_max_cached_tokens, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE, kvc_keys_set_max_cached_tokens(F.K, -2), 1) \
                                                                                                                       \
    X(kvc_can_alloc, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_can_alloc(NULL, F.tok_x, 8, NULL, &O.i32), 1)          \
    X(kvc_can_alloc, NULL_IN, KVC_ERR_NULL_ARG, F_NONE, kvc_can_alloc(F.P, NULL, 8, NULL, &O.i32), 1)                  \
    X(kvc_can_alloc, ZERO, KVC_ERR_INVALID_ARG, F_NONE, kvc_can_alloc(F.P, F.tok_x, 0, NULL, &O.i32), 1)               \
    X(kvc_can_alloc, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE, kvc_can_alloc(F.P, F.tok_x, -3, NULL, &O.i32), 1)          \
    X(kvc_can_alloc, CAPACITY, KVC_ERR_MAX_LEN, F_NONE, kvc_can_alloc(F.P, F.tok_x, 65, NULL, &O.i32), 1)              \
    X(kvc_can_alloc, NULL_OUT, KVC_ERR_NULL_ARG, F_NONE, kvc_can_alloc(F.P, F.tok_x, 8, NULL, NULL), 1)                \
                                                                                                                       \
    X(kvc_alloc, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_alloc(NULL, 50, F.tok_x, 8, NULL, &O.i64), 1)              \
    X(kvc_alloc, NULL_IN, KVC_ERR_NULL_ARG, F_NONE, kvc_alloc(F.P, 50, NULL, 8, NULL, &O.i64), 1)                      \
    X(kvc_alloc, ZERO, KVC_ERR_INVALID_ARG, F_NONE, kvc_alloc(F.P, 50, F.tok_x, 0, NULL, &O.i64), 1)                   \
    X(kvc_alloc, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE, kvc_alloc(F.P, 50, F.tok_x, -1, NULL, &O.i64), 1)              \
    X(kvc_alloc, OVERFLOW, KVC_ERR_MAX_LEN, F_NONE, kvc_alloc(F.P, 50, F.tok_x, INT64_MAX, NULL, &O.i64), 1)           \
    X(kvc_alloc, EXISTS, KVC_ERR_SEQ_EXISTS, F_NONE, kvc_alloc(F.P, SEQ_A, F.tok_x, 8, NULL, &O.i64), 1)               \
    X(kvc_alloc, EXISTS, KVC_ERR_SEQ_EXISTS, F_NONE, kvc_alloc(F.C, SEQ_C2, NULL, 8, NULL, &O.i64), 1)                 \
    X(kvc_alloc, CAPACITY, KVC_ERR_MAX_LEN, F_NONE, kvc_alloc(F.P, 50, F.tok_x, 65, NULL, &O.i64), 1)                  \
    X(kvc_alloc, CAPACITY, KVC_ERR_OUT_OF_BLOCKS, F_NONE, kvc_alloc(F.P, 50, F.tok_x, 64, NULL, &O.i64), 1)            \
    X(kvc_alloc, CAPACITY, KVC_ERR_OUT_OF_BLOCKS, F_NONE, kvc_alloc(F.C, 50, NULL, 17 * BS, NULL, &O.i64), 1)          \
    X(kvc_alloc, CAPACITY, KVC_ERR_OUT_OF_BLOCKS, F_NONE, kvc_alloc(F.C, 50, NULL, 11 * BS, NULL, &O.i64), 1)          \
    X(kvc_admit, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_admit(NULL, 50, F.tok_x, 8, NULL, &O.i32, &O.i64), 1)     \
    X(kvc_admit, NULL_IN, KVC_ERR_NULL_ARG, F_NONE, kvc_admit(F.P, 50, NULL, 8, NULL, &O.i32, &O.i64), 1)             \
    X(kvc_admit, ZERO, KVC_ERR_INVALID_ARG, F_NONE, kvc_admit(F.P, 50, F.tok_x, 0, NULL, &O.i32, &O.i64), 1)          \
    X(kvc_admit, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE, kvc_admit(F.P, 50, F.tok_x, -1, NULL, &O.i32, &O.i64), 1)     \
    X(kvc_admit, OVERFLOW, KVC_ERR_MAX_LEN, F_NONE, kvc_admit(F.P, 50, F.tok_x, INT64_MAX, NULL, &O.i32, &O.i64), 1)  \
    X(kvc_admit, EXISTS, KVC_ERR_SEQ_EXISTS, F_NONE, kvc_admit(F.P, SEQ_A, F.tok_x, 8, NULL, &O.i32, &O.i64), 1)      \
    X(kvc_admit, NULL_OUT, KVC_ERR_NULL_ARG, F_NONE, kvc_admit(F.P, 50, F.tok_x, 8, NULL, NULL, &O.i64), 1)           \
    X(kvc_admit, CAPACITY, KVC_ERR_MAX_LEN, F_NONE, kvc_admit(F.P, 50, F.tok_x, 65, NULL, &O.i32, &O.i64), 1)         \
                                                                                                                       \
    X(kvc_append, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_append(NULL, SEQ_A, F.tok_x, 1, 0, &O.i32), 1)            \
    X(kvc_append, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE, kvc_append(F.P, SEQ_A, F.tok_x, -1, 0, &O.i32), 1)            \
    X(kvc_append, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE, kvc_append(F.P, SEQ_A, F.tok_x, 1, -1, &O.i32), 1)            \
    X(kvc_append, ZERO, KVC_ERR_INVALID_ARG, F_NONE, kvc_append(F.P, SEQ_A, F.tok_x, 0, 0, &O.i32), 1)                 \
    X(kvc_append, NULL_IN, KVC_ERR_NULL_ARG, F_NONE, kvc_append(F.P, SEQ_A, NULL, 2, 0, &O.i32), 1)                    \
    X(kvc_append, UNKNOWN_ID, KVC_ERR_UNKNOWN_SEQ, F_NONE, kvc_append(F.P, SEQ_NONE, F.tok_x, 1, 0, &O.i32), 1)         \
    X(kvc_append, FREED_ID, KVC_ERR_UNKNOWN_SEQ, F_NONE, kvc_append(F.P, SEQ_FREED, F.tok_x, 1, 0, &O.i32), 1)         \
    X(kvc_append, FREED_ID, KVC_ERR_UNKNOWN_SEQ, F_NONE, kvc_append(F.C, SEQ_CFREED, NULL, 1, 0, &O.i32), 1)           \
    X(kvc_append, OVERFLOW, KVC_ERR_OVERFLOW, F_NONE, kvc_append(F.P, SEQ_A, F.tok_x, INT64_MAX, 0, &O.i32), 1)        \
    X(kvc_append, OVERFLOW, KVC_ERR_OVERFLOW, F_NONE, kvc_append(F.C, SEQ_C1, NULL, 1, INT64_MAX, &O.i32), 1)          \
    X(kvc_append, CAPACITY, KVC_ERR_MAX_LEN, F_NONE, kvc_append(F.P, SEQ_A, F.tok_x, 50, 5, &O.i32), 1)                \
    X(kvc_append, CAPACITY, KVC_ERR_OUT_OF_BLOCKS, F_NONE, kvc_append(F.C, SEQ_C1, NULL, 50, 0, &O.i32), 1)            \
    X(kvc_append, CAPACITY, KVC_ERR_OUT_OF_BLOCKS, F_NONE, kvc_append(F.C, SEQ_C1, NULL, 0, 17 * BS, &O.i32), 1)       \
    X(kvc_append_batch, NULL_HANDLE, KVC_ERR_NULL_ARG, F_OUT_DONE,                                                       \
      kvc_append_batch(NULL, 1, k_batch_a, NULL, F.tok_x, 0, NULL, NULL, &O.i32), O.i32 == 0)                         \
    X(kvc_append_batch, NULL_IN, KVC_ERR_NULL_ARG, F_OUT_DONE,                                                           \
      kvc_append_batch(F.P, 1, NULL, NULL, F.tok_x, 0, NULL, NULL, &O.i32), O.i32 == 0)                               \
    X(kvc_append_batch, NULL_IN, KVC_ERR_NULL_ARG, F_OUT_DONE,                                                           \
      kvc_append_batch(F.P, 1, k_batch_a, NULL, NULL, 0, NULL, NULL, &O.i32), O.i32 == 0)                             \
    X(kvc_append_batch, NEGATIVE, KVC_ERR_INVALID_ARG, F_OUT_DONE,                                                       \
      kvc_append_batch(F.P, -1, k_batch_a, NULL, F.tok_x, 0, NULL, NULL, &O.i32), O.i32 == 0)                         \
    X(kvc_append_batch, NEGATIVE, KVC_ERR_INVALID_ARG, F_OUT_DONE,                                                       \
      kvc_append_batch(F.P, 1, k_batch_a, NULL, F.tok_x, -1, NULL, NULL, &O.i32), O.i32 == 0)                         \
    X(kvc_append_batch, NEGATIVE, KVC_ERR_INVALID_ARG, F_OUT_DONE,                                                       \
      kvc_append_batch(F.P, 2, k_batch_a, NULL, F.tok_x, 0, k_batch_neg_lookahead, NULL, &O.i32), O.i32 == 0)         \
    X(kvc_append_batch, RANGE, KVC_ERR_INVALID_ARG, F_OUT_DONE,                                                          \
      kvc_append_batch(F.P, 1, k_batch_a, k_batch_offsets_from_1, F.tok_x, 0, NULL, NULL, &O.i32), O.i32 == 0)        \
    X(kvc_append_batch, RANGE, KVC_ERR_INVALID_ARG, F_OUT_DONE,                                                          \
      kvc_append_batch(F.P, 2, k_batch_a, k_batch_offsets_down, F.tok_x, 0, NULL, NULL, &O.i32), O.i32 == 0)          \
    X(kvc_append_batch, UNKNOWN_ID, KVC_ERR_UNKNOWN_SEQ, F_OUT_DONE,                                                     \
      kvc_append_batch(F.P, 1, k_batch_none, NULL, F.tok_x, 0, NULL, NULL, &O.i32), O.i32 == 0)                       \
    X(kvc_append_batch, FREED_ID, KVC_ERR_UNKNOWN_SEQ, F_OUT_DONE,                                                       \
      kvc_append_batch(F.P, 1, k_batch_freed, NULL, F.tok_x, 0, NULL, NULL, &O.i32), O.i32 == 0)                      \
    X(kvc_append_batch, CAPACITY, KVC_ERR_MAX_LEN, F_OUT_DONE,                                                           \
      kvc_append_batch(F.P, 1, k_batch_a, k_batch_offsets_50, F.tok_x, 5, NULL, NULL, &O.i32), O.i32 == 0)            \
    X(kvc_append_batch, CAPACITY, KVC_ERR_OUT_OF_BLOCKS, F_OUT_DONE,                                                     \
      kvc_append_batch(F.C, 1, k_batch_c1, NULL, NULL, 17 * BS, NULL, NULL, &O.i32), O.i32 == 0)                      \
                                                                                                                       \
    X(kvc_truncate, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_truncate(NULL, SEQ_A, 4, &O.i32), 1)                    \
    X(kvc_truncate, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE, kvc_truncate(F.P, SEQ_A, -1, &O.i32), 1)                    \
    X(kvc_truncate, ZERO, KVC_ERR_INVALID_ARG, F_NONE, kvc_truncate(F.P, SEQ_A, 0, &O.i32), 1)                         \
    X(kvc_truncate, RANGE, KVC_ERR_INVALID_ARG, F_NONE, kvc_truncate(F.P, SEQ_A, 11, &O.i32), 1)                       \
    X(kvc_truncate, RANGE, KVC_ERR_INVALID_ARG, F_NONE, kvc_truncate(F.C, SEQ_C2, 6, &O.i32), 1)                       \
    X(kvc_truncate, OVERFLOW, KVC_ERR_INVALID_ARG, F_NONE, kvc_truncate(F.C, SEQ_C1, INT64_MAX, &O.i32), 1)            \
    X(kvc_truncate, UNKNOWN_ID, KVC_ERR_UNKNOWN_SEQ, F_NONE, kvc_truncate(F.P, SEQ_NONE, 1, &O.i32), 1)                \
    X(kvc_truncate, FREED_ID, KVC_ERR_UNKNOWN_SEQ, F_NONE, kvc_truncate(F.P, SEQ_FREED, 1, &O.i32), 1)                 \
    X(kvc_truncate, FREED_ID, KVC_ERR_UNKNOWN_SEQ, F_NONE, kvc_truncate(F.C, SEQ_CFREED, 1, &O.i32), 1)                \
                                                                                                                       \
    X(kvc_fork, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_fork(NULL, SEQ_A, 50), 1)                                   \
    X(kvc_fork, RANGE, KVC_ERR_INVALID_ARG, F_NONE, kvc_fork(F.P, SEQ_A, SEQ_A), 1)                                    \
    X(kvc_fork, UNKNOWN_ID, KVC_ERR_UNKNOWN_SEQ, F_NONE, kvc_fork(F.P, SEQ_NONE, 50), 1)                               \
    X(kvc_fork, FREED_ID, KVC_ERR_UNKNOWN_SEQ, F_NONE, kvc_fork(F.P, SEQ_FREED, 50), 1)                                \
    X(kvc_fork, EXISTS, KVC_ERR_SEQ_EXISTS, F_NONE, kvc_fork(F.P, SEQ_A, SEQ_B), 1)                                    \
    X(kvc_fork, EXISTS, KVC_ERR_SEQ_EXISTS, F_NONE, kvc_fork(F.C, SEQ_C1, SEQ_CFORK), 1)                               \
                                                                                                                       \
    X(kvc_abort, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_abort(NULL, SEQ_A), 1)                                     \
    X(kvc_abort, UNKNOWN_ID, KVC_ERR_UNKNOWN_SEQ, F_NONE, kvc_abort(F.P, SEQ_NONE), 1)                                 \
    X(kvc_abort, FREED_ID, KVC_ERR_UNKNOWN_SEQ, F_NONE, kvc_abort(F.P, SEQ_FREED), 1)                                  \
    X(kvc_free, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_free(NULL, SEQ_A), 1)                                       \
    X(kvc_free, UNKNOWN_ID, KVC_ERR_UNKNOWN_SEQ, F_NONE, kvc_free(F.P, SEQ_NONE), 1)                                   \
    X(kvc_free, FREED_ID, KVC_ERR_UNKNOWN_SEQ, F_NONE, kvc_free(F.P, SEQ_FREED), 1)                                    \
    X(kvc_free, FREED_ID, KVC_ERR_UNKNOWN_SEQ, F_NONE, kvc_free(F.C, SEQ_CFREED), 1)                                   \
    X(kvc_free, UNKNOWN_ID, KVC_ERR_UNKNOWN_SEQ, F_NONE, kvc_free(F.C, SEQ_A), 1)                                      \
                                                                                                                       \
    X(kvc_seq_group_block_table, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_seq_group_block_table(NULL, SEQ_A, 0, O.i32buf, 64, &O.i64), 1) \
    X(kvc_seq_group_block_table, NULL_OUT, KVC_ERR_NULL_ARG, F_NONE, kvc_seq_group_block_table(F.P, SEQ_A, 0, O.i32buf, 64, NULL), 1) \
    X(kvc_seq_group_block_table, NULL_OUT, KVC_ERR_NULL_ARG, F_NONE, kvc_seq_group_block_table(F.P, SEQ_A, 0, NULL, 4, &O.i64), 1) \
    X(kvc_seq_group_block_table, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE, kvc_seq_group_block_table(F.P, SEQ_A, 0, O.i32buf, -1, &O.i64), 1) \
    X(kvc_seq_group_block_table, RANGE, KVC_ERR_INVALID_ARG, F_NONE, kvc_seq_group_block_table(F.P, SEQ_A, 1, O.i32buf, 64, &O.i64), 1) \
    X(kvc_seq_group_block_table, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE, kvc_seq_group_block_table(F.P, SEQ_A, -1, O.i32buf, 64, &O.i64), 1) \
    X(kvc_seq_group_block_table, UNKNOWN_ID, KVC_ERR_UNKNOWN_SEQ, F_NONE, kvc_seq_group_block_table(F.P, SEQ_NONE, 0, O.i32buf, 64, &O.i64), 1) \
    X(kvc_seq_group_block_table, FREED_ID, KVC_ERR_UNKNOWN_SEQ, F_NONE, kvc_seq_group_block_table(F.P, SEQ_FREED, 0, O.i32buf, 64, &O.i64), 1) \
    X(kvc_seq_group_block_table, TOO_SMALL, KVC_ERR_BUFFER_TOO_SMALL, F_OUT_LEN, kvc_seq_group_block_table(F.P, SEQ_A, 0, O.i32buf, 2, &O.i64), O.i64 == 3) \
    X(kvc_seq_block_table, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_seq_block_table(NULL, SEQ_A, O.i32buf, 64, &O.i64), 1) \
    X(kvc_seq_block_table, NULL_OUT, KVC_ERR_NULL_ARG, F_NONE, kvc_seq_block_table(F.P, SEQ_A, O.i32buf, 64, NULL), 1) \
    X(kvc_seq_block_table, NULL_OUT, KVC_ERR_NULL_ARG, F_NONE, kvc_seq_block_table(F.P, SEQ_A, NULL, 4, &O.i64), 1)    \
    X(kvc_seq_block_table, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE, kvc_seq_block_table(F.P, SEQ_A, O.i32buf, -1, &O.i64), 1) \
    X(kvc_seq_block_table, UNKNOWN_ID, KVC_ERR_UNKNOWN_SEQ, F_NONE,                                                   \
      kvc_seq_block_table(F.P, SEQ_NONE, O.i32buf, 64, &O.i64), 1)                                                     \
    X(kvc_seq_block_table, FREED_ID, KVC_ERR_UNKNOWN_SEQ, F_NONE,                                                     \
      kvc_seq_block_table(F.P, SEQ_FREED, O.i32buf, 64, &O.i64), 1)                                                    \
    X(kvc_seq_block_table, TOO_SMALL, KVC_ERR_BUFFER_TOO_SMALL, F_OUT_LEN,                                            \
      kvc_seq_block_table(F.P, SEQ_A, O.i32buf, 2, &O.i64), O.i64 == 3)                                                \
    X(kvc_seq_block_table, TOO_SMALL, KVC_ERR_BUFFER_TOO_SMALL, F_OUT_LEN,                                            \
      kvc_seq_block_table(F.C, SEQ_C2, O.i32buf, 1, &O.i64), O.i64 == 3)                                               \
                                                                                                                       \
    X(kvc_seq_num_tokens, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_seq_num_tokens(NULL, SEQ_A, &O.i64), 1)           \
    X(kvc_seq_num_tokens, NULL_OUT, KVC_ERR_NULL_ARG, F_NONE, kvc_seq_num_tokens(F.P, SEQ_A, NULL), 1)                 \
    X(kvc_seq_num_tokens, UNKNOWN_ID, KVC_ERR_UNKNOWN_SEQ, F_NONE, kvc_seq_num_tokens(F.P, SEQ_NONE, &O.i64), 1)       \
    X(kvc_seq_num_tokens, FREED_ID, KVC_ERR_UNKNOWN_SEQ, F_NONE, kvc_seq_num_tokens(F.C, SEQ_CFREED, &O.i64), 1)       \
                                                                                                                       \
    X(kvc_seq_slot_mapping, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_seq_slot_mapping(NULL, SEQ_A, 0, 2, O.i64buf, 64), 1) \
    X(kvc_seq_slot_mapping, NULL_OUT, KVC_ERR_NULL_ARG, F_NONE, kvc_seq_slot_mapping(F.P, SEQ_A, 0, 2, NULL, 64), 1)   \
    X(kvc_seq_slot_mapping, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE,                                                    \
      kvc_seq_slot_mapping(F.P, SEQ_A, -1, 2, O.i64buf, 64), 1)                                                        \
    X(kvc_seq_slot_mapping, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE,                                                    \
      kvc_seq_slot_mapping(F.P, SEQ_A, 0, -2, O.i64buf, 64), 1)                                                        \
    X(kvc_seq_slot_mapping, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE,                                                    \
      kvc_seq_slot_mapping(F.P, SEQ_A, 0, 2, O.i64buf, -1), 1)                                                         \
    X(kvc_seq_slot_mapping, UNKNOWN_ID, KVC_ERR_UNKNOWN_SEQ, F_NONE,                                                  \
      kvc_seq_slot_mapping(F.P, SEQ_NONE, 0, 2, O.i64buf, 64), 1)                                                      \
    X(kvc_seq_slot_mapping, FREED_ID, KVC_ERR_UNKNOWN_SEQ, F_NONE,                                                    \
      kvc_seq_slot_mapping(F.P, SEQ_FREED, 0, 2, O.i64buf, 64), 1)                                                     \
    X(kvc_seq_slot_mapping, RANGE, KVC_ERR_INVALID_ARG, F_NONE,                                                       \
      kvc_seq_slot_mapping(F.P, SEQ_A, 8, 3, O.i64buf, 64), 1)                                                         \
    X(kvc_seq_slot_mapping, RANGE, KVC_ERR_INVALID_ARG, F_NONE,                                                       \
      kvc_seq_slot_mapping(F.C, SEQ_C2, 10, 0, O.i64buf, 64), 1)                                                       \
    X(kvc_seq_slot_mapping, OVERFLOW, KVC_ERR_INVALID_ARG, F_NONE,                                                    \
      kvc_seq_slot_mapping(F.P, SEQ_A, INT64_MAX, INT64_MAX, O.i64buf, 64), 1)                                         \
    X(kvc_seq_slot_mapping, TOO_SMALL, KVC_ERR_BUFFER_TOO_SMALL, F_NONE,                                              \
      kvc_seq_slot_mapping(F.C, SEQ_C2, 0, 9, O.i64buf, 8), 1)                                                         \
                                                                                                                       \
    X(kvc_take_pending_copies, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE,                                                 \
      kvc_take_pending_copies(NULL, O.i32buf, O.i32buf2, 64, &O.i64), 1)                                               \
    X(kvc_take_pending_copies, NULL_OUT, KVC_ERR_NULL_ARG, F_NONE,                                                    \
      kvc_take_pending_copies(F.P, O.i32buf, O.i32buf2, 64, NULL), 1)                                                  \
    X(kvc_take_pending_copies, NULL_OUT, KVC_ERR_NULL_ARG, F_NONE, kvc_take_pending_copies(F.P, NULL, O.i32buf2, 4, &O.i64), 1) \
    X(kvc_take_pending_copies, NULL_OUT, KVC_ERR_NULL_ARG, F_NONE, kvc_take_pending_copies(F.C, O.i32buf, NULL, 4, &O.i64), 1) \
    X(kvc_take_pending_copies, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE,                                                 \
      kvc_take_pending_copies(F.P, O.i32buf, O.i32buf2, -1, &O.i64), 1)                                                \
                                                                                                                       \
    X(kvc_pool_stats, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_pool_stats(NULL, &O.stats), 1)                        \
    X(kvc_pool_stats, NULL_OUT, KVC_ERR_NULL_ARG, F_NONE, kvc_pool_stats(F.P, NULL), 1)                                \
    X(kvc_pool_stats, VERSION, KVC_ERR_VERSION, F_NONE, kvc_pool_stats(F.P, &O.stats_old), 1)                          \
                                                                                                                       \
    X(kvc_prefix_lookup, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_prefix_lookup(NULL, F.tok_a, 10, NULL, &O.i64), 1) \
    X(kvc_prefix_lookup, NULL_IN, KVC_ERR_NULL_ARG, F_NONE, kvc_prefix_lookup(F.P, NULL, 10, NULL, &O.i64), 1)         \
    X(kvc_prefix_lookup, ZERO, KVC_ERR_INVALID_ARG, F_NONE, kvc_prefix_lookup(F.P, F.tok_a, 0, NULL, &O.i64), 1)       \
    X(kvc_prefix_lookup, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE, kvc_prefix_lookup(F.P, F.tok_a, -5, NULL, &O.i64), 1)  \
    X(kvc_prefix_lookup, NULL_OUT, KVC_ERR_NULL_ARG, F_NONE, kvc_prefix_lookup(F.P, F.tok_a, 10, NULL, NULL), 1)       \
    X(kvc_prefix_lookup, NULL_OUT, KVC_ERR_NULL_ARG, F_NONE, kvc_prefix_lookup(F.C, F.tok_a, 10, NULL, NULL), 1)       \
                                                                                                                       \
    X(kvc_hash_blocks, NULL_OUT, KVC_ERR_NULL_ARG, F_NONE, kvc_hash_blocks(BS, F.K, F.tok_a, 10, HASH_OUTS(64), NULL), 1) \
    X(kvc_hash_blocks, NULL_OUT, KVC_ERR_NULL_ARG, F_NONE,                                                            \
      kvc_hash_blocks(BS, F.K, F.tok_a, 10, NULL, O.u64buf2, 4, &O.i64), 1)                                           \
    X(kvc_hash_blocks, NULL_OUT, KVC_ERR_NULL_ARG, F_NONE,                                                            \
      kvc_hash_blocks(BS, F.K, F.tok_a, 10, O.u64buf, NULL, 4, &O.i64), 1)                                            \
    X(kvc_hash_blocks, NULL_IN, KVC_ERR_NULL_ARG, F_NONE, kvc_hash_blocks(BS, F.K, NULL, 10, HASH_OUTS(64), &O.i64), 1) \
    X(kvc_hash_blocks, ZERO, KVC_ERR_INVALID_ARG, F_NONE, kvc_hash_blocks(0, NULL, F.tok_a, 10, HASH_OUTS(64), &O.i64), 1) \
    X(kvc_hash_blocks, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE,                                                         \
      kvc_hash_blocks(-4, NULL, F.tok_a, 10, HASH_OUTS(64), &O.i64), 1)                                               \
    X(kvc_hash_blocks, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE,                                                         \
      kvc_hash_blocks(BS, NULL, F.tok_a, -1, HASH_OUTS(64), &O.i64), 1)                                               \
    X(kvc_hash_blocks, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE, kvc_hash_blocks(BS, NULL, F.tok_a, 10, HASH_OUTS(-1), &O.i64), 1) \
    X(kvc_hash_blocks, TOO_SMALL, KVC_ERR_BUFFER_TOO_SMALL, F_OUT_LEN,                                                \
      kvc_hash_blocks(BS, F.K, F.tok_a, 10, HASH_OUTS(1), &O.i64), O.i64 == 2)                                        \
    X(kvc_hash_blocks, TOO_SMALL, KVC_ERR_BUFFER_TOO_SMALL, F_OUT_LEN,                                                \
      kvc_hash_blocks(BS, NULL, F.tok_a, 10, HASH_OUTS(0), &O.i64), O.i64 == 2)                                       \
                                                                                                                       \
    X(kvc_prefix_pin, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_prefix_pin(NULL, F.tok_a, 8, NULL, &O.i64), 1)        \
    X(kvc_prefix_pin, NULL_IN, KVC_ERR_NULL_ARG, F_NONE, kvc_prefix_pin(F.P, NULL, 8, NULL, &O.i64), 1)                \
    X(kvc_prefix_pin, ZERO, KVC_ERR_INVALID_ARG, F_NONE, kvc_prefix_pin(F.P, F.tok_a, 0, NULL, &O.i64), 1)             \
    X(kvc_prefix_pin, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE, kvc_prefix_pin(F.P, F.tok_a, -8, NULL, &O.i64), 1)        \
    X(kvc_prefix_pin, UNSUPPORTED, KVC_ERR_UNSUPPORTED, F_NONE, kvc_prefix_pin(F.C, F.tok_a, 8, NULL, &O.i64), 1)      \
                                                                                                                       \
    X(kvc_prefix_unpin, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_prefix_unpin(NULL, F.tok_a, 8, NULL, &O.i64), 1)    \
    X(kvc_prefix_unpin, NULL_IN, KVC_ERR_NULL_ARG, F_NONE, kvc_prefix_unpin(F.P, NULL, 8, NULL, &O.i64), 1)            \
    X(kvc_prefix_unpin, ZERO, KVC_ERR_INVALID_ARG, F_NONE, kvc_prefix_unpin(F.P, F.tok_a, 0, NULL, &O.i64), 1)         \
    X(kvc_prefix_unpin, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE, kvc_prefix_unpin(F.P, F.tok_a, -8, NULL, &O.i64), 1)    \
    X(kvc_prefix_unpin, UNSUPPORTED, KVC_ERR_UNSUPPORTED, F_NONE, kvc_prefix_unpin(F.C, F.tok_a, 8, NULL, &O.i64), 1)  \
    X(kvc_prefix_unpin, STATE, KVC_ERR_STATE, F_NONE, kvc_prefix_unpin(F.P, F.tok_b, 12, F.K, &O.i64), 1)              \
    X(kvc_prefix_unpin, STATE, KVC_ERR_STATE, F_NONE, kvc_prefix_unpin(F.P, F.tok_x, 8, NULL, &O.i64), 1)              \
                                                                                                                       \
    X(kvc_prefix_cache_reset, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_prefix_cache_reset(NULL), 1)                  \
    X(kvc_prefix_cache_reset, STATE, KVC_ERR_BUSY, F_NONE, kvc_prefix_cache_reset(F.P), 1)                             \
    X(kvc_prefix_cache_reset, STATE, KVC_ERR_BUSY, F_NONE, kvc_prefix_cache_reset(F.C), 1)                             \
                                                                                                                       \
    X(kvc_tier_prefetch, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_tier_prefetch(NULL, F.tok_a, 10, NULL, &O.i64), 1) \
    X(kvc_tier_prefetch, NULL_IN, KVC_ERR_NULL_ARG, F_NONE, kvc_tier_prefetch(F.T, NULL, 10, NULL, &O.i64), 1)         \
    X(kvc_tier_prefetch, ZERO, KVC_ERR_INVALID_ARG, F_NONE, kvc_tier_prefetch(F.T, F.tok_a, 0, NULL, &O.i64), 1)       \
    X(kvc_tier_prefetch, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE, kvc_tier_prefetch(F.T, F.tok_a, -3, NULL, &O.i64), 1)  \
    X(kvc_tier_prefetch, CAPACITY, KVC_ERR_MAX_LEN, F_NONE, kvc_tier_prefetch(F.P, F.tok_x, 65, NULL, &O.i64), 1)      \
    X(kvc_tier_prefetch, STATE, KVC_ERR_STATE, F_NONE, kvc_tier_prefetch(F.T, F.tok_a, 10, NULL, &O.i64), 1)           \
    X(kvc_tier_prefetch, STATE, KVC_ERR_STATE, F_NONE, kvc_tier_prefetch(F.P, F.tok_a, 10, NULL, NULL), 1)             \
    X(kvc_tier_flush, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_tier_flush(NULL, &O.i64), 1)                        \
    X(kvc_tier_flush, STATE, KVC_ERR_STATE, F_NONE, kvc_tier_flush(F.T, &O.i64), 1)                                   \
    X(kvc_tier_flush, STATE, KVC_ERR_STATE, F_NONE, kvc_tier_flush(F.P, NULL), 1)                                     \
    X(kvc_pool_set_tier_events, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_pool_set_tier_events(NULL, 1), 1)         \
    X(kvc_pool_set_tier_events, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE, kvc_pool_set_tier_events(F.T, 2), 1)           \
    X(kvc_pool_set_tier_events, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE, kvc_pool_set_tier_events(F.T, -1), 1)          \
    X(kvc_event_pop, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_event_pop(NULL, &O.event, O.i32buf, 64, &O.i32), 1)    \
    X(kvc_event_pop, NULL_OUT, KVC_ERR_NULL_ARG, F_NONE, kvc_event_pop(F.P, NULL, O.i32buf, 64, &O.i32), 1)            \
    X(kvc_event_pop, NULL_OUT, KVC_ERR_NULL_ARG, F_NONE, kvc_event_pop(F.P, &O.event, O.i32buf, 64, NULL), 1)          \
    X(kvc_event_pop, NULL_OUT, KVC_ERR_NULL_ARG, F_NONE, kvc_event_pop(F.P, &O.event, NULL, 64, &O.i32), 1)            \
    X(kvc_event_pop, VERSION, KVC_ERR_VERSION, F_NONE, kvc_event_pop(F.P, &O.event_old, O.i32buf, 64, &O.i32), 1)      \
    X(kvc_event_pop, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE, kvc_event_pop(F.P, &O.event, O.i32buf, -1, &O.i32), 1)     \
    X(kvc_event_pop, TOO_SMALL, KVC_ERR_BUFFER_TOO_SMALL, F_NONE, kvc_event_pop(F.P, &O.event, O.i32buf, BS - 1, &O.i32), 1) \
    X(kvc_event_pop, TOO_SMALL, KVC_ERR_BUFFER_TOO_SMALL, F_NONE, kvc_event_pop(F.P, &O.event, NULL, 0, &O.i32), 1)    \
                                                                                                                       \
    X(kvc_storage_get_info, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_storage_get_info(NULL, &O.sinfo), 1)            \
    X(kvc_storage_get_info, NULL_OUT, KVC_ERR_NULL_ARG, F_NONE, kvc_storage_get_info(F.C, NULL), 1)                    \
    X(kvc_storage_get_info, VERSION, KVC_ERR_VERSION, F_NONE, kvc_storage_get_info(F.C, &O.sinfo_old), 1)              \
    X(kvc_storage_get_info, STATE, KVC_ERR_STATE, F_NONE, kvc_storage_get_info(F.P, &O.sinfo), 1)                      \
                                                                                                                       \
    X(kvc_cache_write, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE,                                                         \
      kvc_cache_write(NULL, 0, F.slots, 2, F.kv, F.kv, KVC_DTYPE_F32, 1, 1, NULL), 1)                                  \
    X(kvc_cache_write, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE,                                                         \
      kvc_cache_write(F.C, 0, F.slots, -1, F.kv, F.kv, KVC_DTYPE_F32, 1, 1, NULL), 1)                                  \
    X(kvc_cache_write, NULL_IN, KVC_ERR_NULL_ARG, F_NONE,                                                             \
      kvc_cache_write(F.C, 0, NULL, 2, F.kv, F.kv, KVC_DTYPE_F32, 1, 1, NULL), 1)                                      \
    X(kvc_cache_write, NULL_IN, KVC_ERR_NULL_ARG, F_NONE,                                                             \
      kvc_cache_write(F.C, 0, F.slots, 2, NULL, F.kv, KVC_DTYPE_F32, 1, 1, NULL), 1)                                   \
    X(kvc_cache_write, NULL_IN, KVC_ERR_NULL_ARG, F_NONE,                                                             \
      kvc_cache_write(F.C, 0, F.slots, 2, F.kv, NULL, KVC_DTYPE_F32, 1, 1, NULL), 1)                                   \
    X(kvc_cache_write, STATE, KVC_ERR_STATE, F_NONE,                                                                  \
      kvc_cache_write(F.P, 0, F.slots, 2, F.kv, F.kv, KVC_DTYPE_F32, 1, 1, NULL), 1)                                   \
    X(kvc_cache_write, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE,                                                         \
      kvc_cache_write(F.C, -1, F.slots, 2, F.kv, F.kv, KVC_DTYPE_F32, 1, 1, NULL), 1)                                  \
    X(kvc_cache_write, RANGE, KVC_ERR_INVALID_ARG, F_NONE,                                                            \
      kvc_cache_write(F.C, C_LAYERS, F.slots, 2, F.kv, F.kv, KVC_DTYPE_F32, 1, 1, NULL), 1)                            \
    X(kvc_cache_write, RANGE, KVC_ERR_INVALID_ARG, F_NONE,                                                            \
      kvc_cache_write(F.C, 0, F.slots, 2, F.kv, F.kv, 99, 1, 1, NULL), 1)                                              \
    X(kvc_cache_write, UNSUPPORTED, KVC_ERR_UNSUPPORTED, F_NONE,                                                      \
      kvc_cache_write(F.C, 0, F.slots, 2, F.kv, F.kv, KVC_DTYPE_FP8_E4M3, 1, 1, NULL), 1)                              \
    X(kvc_cache_write, ZERO, KVC_ERR_INVALID_ARG, F_NONE,                                                             \
      kvc_cache_write(F.C, 0, F.slots, 2, F.kv, F.kv, KVC_DTYPE_F32, 0.0f, 1, NULL), 1)                                \
    X(kvc_cache_write, RANGE, KVC_ERR_INVALID_ARG, F_NONE,                                                            \
      kvc_cache_write(F.C, 0, F.slots, 2, F.kv, F.kv, KVC_DTYPE_F32, 1, NAN, NULL), 1)                                 \
    X(kvc_cache_write, RANGE, KVC_ERR_INVALID_ARG, F_NONE,                                                            \
      kvc_cache_write(F.C, 0, slots2(3, C_BLOCKS * BS), 2, F.kv, F.kv, KVC_DTYPE_F32, 1, 1, NULL), 1)                 \
                                                                                                                       \
    X(kvc_copy_pending, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_copy_pending(NULL, NULL, &O.i64), 1)                \
    X(kvc_copy_pending, STATE, KVC_ERR_STATE, F_NONE, kvc_copy_pending(F.P, NULL, &O.i64), 1)                          \
                                                                                                                       \
    X(kvc_storage_copy_blocks, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE,                                                 \
      kvc_storage_copy_blocks(NULL, blocks2(0, 1), 2, scratch_host(), 1), 1)                                           \
    X(kvc_storage_copy_blocks, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE,                                                 \
      kvc_storage_copy_blocks(F.C, blocks2(0, 1), -1, scratch_host(), 1), 1)                                           \
    X(kvc_storage_copy_blocks, NULL_IN, KVC_ERR_NULL_ARG, F_NONE, kvc_storage_copy_blocks(F.C, NULL, 2, scratch_host(), 1), 1) \
    X(kvc_storage_copy_blocks, NULL_OUT, KVC_ERR_NULL_ARG, F_NONE, kvc_storage_copy_blocks(F.C, blocks2(0, 1), 2, NULL, 1), 1) \
    X(kvc_storage_copy_blocks, STATE, KVC_ERR_STATE, F_NONE,                                                          \
      kvc_storage_copy_blocks(F.P, blocks2(0, 1), 2, scratch_host(), 1), 1)                                            \
    X(kvc_storage_copy_blocks, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE,                                                 \
      kvc_storage_copy_blocks(F.C, blocks2(0, -1), 2, scratch_host(), 0), 1)                                           \
    X(kvc_storage_copy_blocks, RANGE, KVC_ERR_INVALID_ARG, F_NONE,                                                    \
      kvc_storage_copy_blocks(F.C, blocks2(0, C_BLOCKS), 2, scratch_host(), 0), 1)                                     \
                                                                                                                       \
    X(kvc_batch_create, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_batch_create(NULL, 2, 8, 4, &O.batch), 1)           \
    X(kvc_batch_create, NULL_OUT, KVC_ERR_NULL_ARG, F_NONE, kvc_batch_create(F.C, 2, 8, 4, NULL), 1)                   \
    X(kvc_batch_create, ZERO, KVC_ERR_INVALID_ARG, F_NONE, kvc_batch_create(F.C, 0, 8, 4, &O.batch), 1)                \
    X(kvc_batch_create, ZERO, KVC_ERR_INVALID_ARG, F_NONE, kvc_batch_create(F.C, 2, 0, 4, &O.batch), 1)                \
    X(kvc_batch_create, ZERO, KVC_ERR_INVALID_ARG, F_NONE, kvc_batch_create(F.C, 2, 8, 0, &O.batch), 1)                \
    X(kvc_batch_create, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE, kvc_batch_create(F.C, -2, 8, 4, &O.batch), 1)           \
    X(kvc_batch_create, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE, kvc_batch_create(F.P, 2, -8, 4, &O.batch), 1)           \
    X(kvc_batch_create, OVERFLOW, KVC_ERR_OVERFLOW, F_NONE, kvc_batch_create(F.C, INT32_MAX, 8, INT32_MAX, &O.batch), 1) \
    X(kvc_batch_create, OVERFLOW, KVC_ERR_OVERFLOW, F_NONE, kvc_batch_create(F.C, 2, INT64_MAX, 4, &O.batch), 1)       \
    X(kvc_batch_create, OVERFLOW, KVC_ERR_OVERFLOW, F_NONE, kvc_batch_create(F.P, 2, 8, INT32_MAX, &O.batch), 1)       \
                                                                                                                       \
    X(kvc_batch_build, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_batch_build(NULL, ids2(SEQ_C1, 0), q2(1, 0), 1), 1)  \
    X(kvc_batch_build, NULL_IN, KVC_ERR_NULL_ARG, F_NONE, kvc_batch_build(F.built, NULL, q2(1, 0), 1), 1)              \
    X(kvc_batch_build, NULL_IN, KVC_ERR_NULL_ARG, F_NONE, kvc_batch_build(F.built, ids2(SEQ_C1, 0), NULL, 1), 1)       \
    X(kvc_batch_build, ZERO, KVC_ERR_INVALID_ARG, F_NONE, kvc_batch_build(F.built, ids2(SEQ_C1, 0), q2(1, 0), 0), 1)   \
    X(kvc_batch_build, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE, kvc_batch_build(F.built, ids2(SEQ_C1, 0), q2(1, 0), -1), 1) \
    X(kvc_batch_build, TOO_SMALL, KVC_ERR_INVALID_ARG, F_NONE,                                                        \
      kvc_batch_build(F.unbuilt, ids3(SEQ_C1, SEQ_C2, SEQ_CFORK), q3(1, 1, 1), 3), 1)                                  \
    X(kvc_batch_build, ZERO, KVC_ERR_INVALID_ARG, F_NONE, kvc_batch_build(F.built, ids2(SEQ_C1, SEQ_C2), q2(1, 0), 2), 1) \
    X(kvc_batch_build, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE, kvc_batch_build(F.built, ids2(SEQ_C1, SEQ_C2), q2(-1, 1), 2), 1) \
    X(kvc_batch_build, RANGE, KVC_ERR_INVALID_ARG, F_NONE, kvc_batch_build(F.built, ids2(SEQ_C1, SEQ_C2), q2(1, 6), 2), 1) \
    X(kvc_batch_build, RANGE, KVC_ERR_INVALID_ARG, F_NONE, kvc_batch_build(F.built, ids2(SEQ_C1, SEQ_C1), q2(1, 1), 2), 1) \
    X(kvc_batch_build, UNKNOWN_ID, KVC_ERR_UNKNOWN_SEQ, F_NONE,                                                       \
      kvc_batch_build(F.built, ids2(SEQ_C1, SEQ_NONE), q2(1, 1), 2), 1)                                                \
    X(kvc_batch_build, FREED_ID, KVC_ERR_UNKNOWN_SEQ, F_NONE,                                                         \
      kvc_batch_build(F.built, ids2(SEQ_CFREED, SEQ_C1), q2(1, 1), 2), 1)                                              \
    X(kvc_batch_build, UNKNOWN_ID, KVC_ERR_UNKNOWN_SEQ, F_NONE, kvc_batch_build(F.meta, ids2(SEQ_A, SEQ_C1), q2(1, 1), 2), 1) \
    X(kvc_batch_build, TOO_SMALL, KVC_ERR_BUFFER_TOO_SMALL, F_NONE,                                                   \
      kvc_batch_build(F.unbuilt, ids2(SEQ_C1, 0), q2(6, 0), 1), 1)                                                     \
    X(kvc_batch_build, TOO_SMALL, KVC_ERR_BUFFER_TOO_SMALL, F_NONE,                                                   \
      kvc_batch_build(F.unbuilt, ids2(SEQ_C1, 0), q2(1, 0), 1), 1)                                                     \
    X(kvc_batch_build, OVERFLOW, KVC_ERR_OVERFLOW, F_NONE,                                                            \
      kvc_batch_build(F.built, ids2(SEQ_C1, SEQ_C2), q2(INT64_MAX, INT64_MAX), 2), 1)                                  \
                                                                                                                       \
    X(kvc_batch_set_stream, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_batch_set_stream(NULL, NULL), 1)                \
    X(kvc_batch_set_stream, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_batch_set_stream(NULL, &O.i64), 1)              \
                                                                                                                       \
    X(kvc_batch_set_group, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_batch_set_group(NULL, 0), 1)                     \
    X(kvc_batch_set_group, RANGE, KVC_ERR_INVALID_ARG, F_NONE, kvc_batch_set_group(F.built, 1), 1)                     \
    X(kvc_batch_set_group, RANGE, KVC_ERR_INVALID_ARG, F_NONE, kvc_batch_set_group(F.built, -1), 1)                    \
    X(kvc_batch_set_group, RANGE, KVC_ERR_INVALID_ARG, F_NONE, kvc_batch_set_group(F.meta, INT32_MAX), 1)              \
                                                                                                                       \
    X(kvc_batch_get_info, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_batch_get_info(NULL, &O.binfo), 1)                \
    X(kvc_batch_get_info, NULL_OUT, KVC_ERR_NULL_ARG, F_NONE, kvc_batch_get_info(F.built, NULL), 1)                    \
    X(kvc_batch_get_info, VERSION, KVC_ERR_VERSION, F_NONE, kvc_batch_get_info(F.built, &O.binfo_old), 1)              \
    X(kvc_batch_get_info, STATE, KVC_ERR_STATE, F_NONE, kvc_batch_get_info(F.unbuilt, &O.binfo), 1)                    \
                                                                                                                       \
    X(kvc_batch_copy_slot_mapping, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_batch_copy_slot_mapping(NULL, O.i64buf, 64), 1) \
    X(kvc_batch_copy_slot_mapping, NULL_OUT, KVC_ERR_NULL_ARG, F_NONE, kvc_batch_copy_slot_mapping(F.built, NULL, 64), 1) \
    X(kvc_batch_copy_slot_mapping, STATE, KVC_ERR_STATE, F_NONE, kvc_batch_copy_slot_mapping(F.unbuilt, O.i64buf, 64), 1) \
    X(kvc_batch_copy_slot_mapping, TOO_SMALL, KVC_ERR_BUFFER_TOO_SMALL, F_NONE,                                       \
      kvc_batch_copy_slot_mapping(F.built, O.i64buf, 10), 1)                                                           \
    X(kvc_batch_copy_slot_mapping, NEGATIVE, KVC_ERR_BUFFER_TOO_SMALL, F_NONE,                                        \
      kvc_batch_copy_slot_mapping(F.built, O.i64buf, -1), 1)                                                           \
                                                                                                                       \
    X(kvc_batch_copy_block_tables, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_batch_copy_block_tables(NULL, O.i32buf, 64), 1) \
    X(kvc_batch_copy_block_tables, NULL_OUT, KVC_ERR_NULL_ARG, F_NONE, kvc_batch_copy_block_tables(F.built, NULL, 64), 1) \
    X(kvc_batch_copy_block_tables, STATE, KVC_ERR_STATE, F_NONE, kvc_batch_copy_block_tables(F.unbuilt, O.i32buf, 64), 1) \
    X(kvc_batch_copy_block_tables, TOO_SMALL, KVC_ERR_BUFFER_TOO_SMALL, F_NONE,                                       \
      kvc_batch_copy_block_tables(F.built, O.i32buf, 7), 1)                                                            \
    X(kvc_batch_copy_block_tables, NEGATIVE, KVC_ERR_BUFFER_TOO_SMALL, F_NONE,                                        \
      kvc_batch_copy_block_tables(F.meta, O.i32buf, -3), 1)                                                            \
                                                                                                                       \
    X(kvc_attention_params_default, NULL_OUT, KVC_ERR_NULL_ARG, F_NONE, kvc_attention_params_default(NULL), 1)         \
                                                                                                                       \
    X(kvc_launch_attention, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE,                                                    \
      kvc_launch_attention(NULL, F.built, 0, F.q, O.attn_out, params_with(PAR_OK), NULL), 1)                           \
    X(kvc_launch_attention, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE,                                                    \
      kvc_launch_attention(F.C, NULL, 0, F.q, O.attn_out, params_with(PAR_OK), NULL), 1)                               \
    X(kvc_launch_attention, NULL_IN, KVC_ERR_NULL_ARG, F_NONE,                                                        \
      kvc_launch_attention(F.C, F.built, 0, NULL, O.attn_out, params_with(PAR_OK), NULL), 1)                           \
    X(kvc_launch_attention, NULL_OUT, KVC_ERR_NULL_ARG, F_NONE,                                                       \
      kvc_launch_attention(F.C, F.built, 0, F.q, NULL, params_with(PAR_OK), NULL), 1)                                  \
    X(kvc_launch_attention, NULL_IN, KVC_ERR_NULL_ARG, F_NONE, kvc_launch_attention(F.C, F.built, 0, F.q, O.attn_out, NULL, NULL), 1) \
    X(kvc_launch_attention, VERSION, KVC_ERR_VERSION, F_NONE,                                                         \
      kvc_launch_attention(F.C, F.built, 0, F.q, O.attn_out, params_with(PAR_VERSION), NULL), 1)                       \
    X(kvc_launch_attention, STATE, KVC_ERR_STATE, F_NONE,                                                             \
      kvc_launch_attention(F.P, F.meta, 0, F.q, O.attn_out, params_with(PAR_OK), NULL), 1)                             \
    X(kvc_launch_attention, STATE, KVC_ERR_STATE, F_NONE,                                                             \
      kvc_launch_attention(F.C, F.meta, 0, F.q, O.attn_out, params_with(PAR_OK), NULL), 1)                             \
    X(kvc_launch_attention, STATE, KVC_ERR_STATE, F_NONE,                                                             \
      kvc_launch_attention(F.C, F.unbuilt, 0, F.q, O.attn_out, params_with(PAR_OK), NULL), 1)                          \
    X(kvc_launch_attention, FREED_ID, KVC_ERR_STATE, F_NONE,                                                          \
      kvc_launch_attention(F.C, F.stale, 0, F.q, O.attn_out, params_with(PAR_OK), NULL), 1)                            \
    X(kvc_launch_attention, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE,                                                    \
      kvc_launch_attention(F.C, F.built, -1, F.q, O.attn_out, params_with(PAR_OK), NULL), 1)                           \
    X(kvc_launch_attention, RANGE, KVC_ERR_INVALID_ARG, F_NONE,                                                       \
      kvc_launch_attention(F.C, F.built, C_LAYERS, F.q, O.attn_out, params_with(PAR_OK), NULL), 1)                     \
    X(kvc_launch_attention, RANGE, KVC_ERR_INVALID_ARG, F_NONE,                                                       \
      kvc_launch_attention(F.C, F.built, 0, F.q, O.attn_out, params_with(PAR_HEADS3), NULL), 1)                        \
    X(kvc_launch_attention, RANGE, KVC_ERR_INVALID_ARG, F_NONE,                                                       \
      kvc_launch_attention(F.C, F.built, 0, F.q, O.attn_out, params_with(PAR_HEADS_OVER), NULL), 1)                    \
    X(kvc_launch_attention, UNSUPPORTED, KVC_ERR_UNSUPPORTED, F_NONE,                                                 \
      kvc_launch_attention(F.C, F.built, 0, F.q, O.attn_out, params_with(PAR_QDTYPE_FP8), NULL), 1)                    \
    X(kvc_launch_attention, RANGE, KVC_ERR_INVALID_ARG, F_NONE,                                                       \
      kvc_launch_attention(F.C, F.built, 0, F.q, O.attn_out, params_with(PAR_QDTYPE_99), NULL), 1)                     \
    X(kvc_launch_attention, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE,                                                    \
      kvc_launch_attention(F.C, F.built, 0, F.q, O.attn_out, params_with(PAR_SCALE_NEG), NULL), 1)                     \
    X(kvc_launch_attention, RANGE, KVC_ERR_INVALID_ARG, F_NONE,                                                       \
      kvc_launch_attention(F.C, F.built, 0, F.q, O.attn_out, params_with(PAR_SCALE_NAN), NULL), 1)                     \
    X(kvc_launch_attention, ZERO, KVC_ERR_INVALID_ARG, F_NONE,                                                        \
      kvc_launch_attention(F.C, F.built, 0, F.q, O.attn_out, params_with(PAR_KSCALE0), NULL), 1)                       \
    X(kvc_launch_attention, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE,                                                    \
      kvc_launch_attention(F.C, F.built, 0, F.q, O.attn_out, params_with(PAR_SOFTCAP_NEG), NULL), 1)                   \
    X(kvc_launch_attention, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE,                                                    \
      kvc_launch_attention(F.C, F.built, 0, F.q, O.attn_out, params_with(PAR_WINDOW_NEG), NULL), 1)                    \
    X(kvc_launch_attention, RANGE, KVC_ERR_INVALID_ARG, F_NONE,                                                       \
      kvc_launch_attention(F.C, F.built, 0, F.q, O.attn_out, params_with(PAR_PARTITION), NULL), 1)                    \
                                                                                                                       \
    X(kvc_tier_attach_host, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_tier_attach_host(NULL, 4), 1) \
    X(kvc_tier_attach_host, ZERO, KVC_ERR_INVALID_ARG, F_NONE, kvc_tier_attach_host(F.C, 0), 1) \
    X(kvc_tier_attach_host, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE, kvc_tier_attach_host(F.C, -4), 1) \
    X(kvc_tier_attach_host, RANGE, KVC_ERR_INVALID_ARG, F_NONE, kvc_tier_attach_host(F.C, (int64_t)INT32_MAX + 1), 1) \
    X(kvc_tier_attach_host, STATE, KVC_ERR_STATE, F_NONE, kvc_tier_attach_host(F.P, 4), 1) \
    X(kvc_tier_attach_disk, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_tier_attach_disk(NULL, TIER_PATH, 4, 0), 1) \
    X(kvc_tier_attach_disk, NULL_IN, KVC_ERR_NULL_ARG, F_NONE, kvc_tier_attach_disk(F.C, NULL, 4, 0), 1) \
    X(kvc_tier_attach_disk, ZERO, KVC_ERR_INVALID_ARG, F_NONE, kvc_tier_attach_disk(F.C, TIER_PATH, 0, 0), 1) \
    X(kvc_tier_attach_disk, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE, kvc_tier_attach_disk(F.C, TIER_PATH, -1, 0), 1) \
    X(kvc_tier_attach_disk, RANGE, KVC_ERR_INVALID_ARG, F_NONE, kvc_tier_attach_disk(F.C, TIER_PATH, 4, 0x40), 1) \
    X(kvc_tier_attach_disk, STATE, KVC_ERR_STATE, F_NONE, kvc_tier_attach_disk(F.C, TIER_PATH, 4, 0), 1) \
    X(kvc_tier_attach_disk_with_identity, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_tier_attach_disk_with_identity(NULL, TIER_PATH, 4, 0, "m"), 1) \
    X(kvc_tier_attach_disk_with_identity, NULL_IN, KVC_ERR_NULL_ARG, F_NONE, kvc_tier_attach_disk_with_identity(F.C, NULL, 4, 0, "m"), 1) \
    X(kvc_tier_attach_disk_with_identity, ZERO, KVC_ERR_INVALID_ARG, F_NONE, kvc_tier_attach_disk_with_identity(F.C, TIER_PATH, 0, 0, "m"), 1) \
    X(kvc_tier_attach_disk_with_identity, RANGE, KVC_ERR_INVALID_ARG, F_NONE, kvc_tier_attach_disk_with_identity(F.C, TIER_PATH, 4, 0x40, "m"), 1) \
    X(kvc_tier_attach_disk_with_identity, RANGE, KVC_ERR_INVALID_ARG, F_NONE, kvc_tier_attach_disk_with_identity(F.C, TIER_PATH, 4, 0, F.long_identity), 1) \
    X(kvc_tier_attach_disk_with_identity, STATE, KVC_ERR_STATE, F_NONE, kvc_tier_attach_disk_with_identity(F.C, TIER_PATH, 4, 0, "m"), 1) \
    X(kvc_tier_attach_disk_keyed, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_tier_attach_disk_keyed(NULL, TIER_PATH, 4, 0, "m", k_disk_key, 32), 1) \
    X(kvc_tier_attach_disk_keyed, NULL_IN, KVC_ERR_NULL_ARG, F_NONE, kvc_tier_attach_disk_keyed(F.C, NULL, 4, 0, "m", k_disk_key, 32), 1) \
    X(kvc_tier_attach_disk_keyed, NULL_IN, KVC_ERR_NULL_ARG, F_NONE, kvc_tier_attach_disk_keyed(F.C, TIER_PATH, 4, 0, "m", NULL, 32), 1) \
    X(kvc_tier_attach_disk_keyed, ZERO, KVC_ERR_INVALID_ARG, F_NONE, kvc_tier_attach_disk_keyed(F.C, TIER_PATH, 0, 0, "m", k_disk_key, 32), 1) \
    X(kvc_tier_attach_disk_keyed, RANGE, KVC_ERR_INVALID_ARG, F_NONE, kvc_tier_attach_disk_keyed(F.C, TIER_PATH, 4, 0x40, "m", k_disk_key, 32), 1) \
    X(kvc_tier_attach_disk_keyed, RANGE, KVC_ERR_INVALID_ARG, F_NONE, kvc_tier_attach_disk_keyed(F.C, TIER_PATH, 4, 0, F.long_identity, k_disk_key, 32), 1) \
    X(kvc_tier_attach_disk_keyed, ZERO, KVC_ERR_INVALID_ARG, F_NONE, kvc_tier_attach_disk_keyed(F.C, TIER_PATH, 4, 0, "m", k_disk_key, 0), 1) \
    X(kvc_tier_attach_disk_keyed, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE, kvc_tier_attach_disk_keyed(F.C, TIER_PATH, 4, 0, "m", k_disk_key, -1), 1) \
    X(kvc_tier_attach_disk_keyed, RANGE, KVC_ERR_INVALID_ARG, F_NONE, kvc_tier_attach_disk_keyed(F.C, TIER_PATH, 4, 0, "m", k_disk_key, KVC_DISK_KEY_MIN_LEN - 1), 1) \
    X(kvc_tier_attach_disk_keyed, RANGE, KVC_ERR_INVALID_ARG, F_NONE, kvc_tier_attach_disk_keyed(F.C, TIER_PATH, 4, 0, "m", k_disk_key, KVC_DISK_KEY_MAX_LEN + 1), 1) \
    X(kvc_tier_attach_disk_keyed, STATE, KVC_ERR_STATE, F_NONE, kvc_tier_attach_disk_keyed(F.C, TIER_PATH, 4, 0, "m", k_disk_key, 32), 1) \
    X(kvc_swap_out, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_swap_out(NULL, SEQ_C1, OP_OUT), 1) \
    X(kvc_swap_out, UNKNOWN_ID, KVC_ERR_UNKNOWN_SEQ, F_NONE, kvc_swap_out(F.C, SEQ_NONE, OP_OUT), 1) \
    X(kvc_swap_out, FREED_ID, KVC_ERR_UNKNOWN_SEQ, F_NONE, kvc_swap_out(F.C, SEQ_CFREED, OP_OUT), 1) \
    X(kvc_swap_out, STATE, KVC_ERR_STATE, F_NONE, kvc_swap_out(F.C, SEQ_C1, OP_OUT), 1) \
    X(kvc_swap_out, STATE, KVC_ERR_STATE, F_NONE, kvc_swap_out(F.P, SEQ_A, OP_OUT), 1) \
    X(kvc_swap_in, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_swap_in(NULL, SEQ_C1, OP_OUT), 1) \
    X(kvc_swap_in, UNKNOWN_ID, KVC_ERR_UNKNOWN_SEQ, F_NONE, kvc_swap_in(F.C, SEQ_NONE, OP_OUT), 1) \
    X(kvc_swap_in, FREED_ID, KVC_ERR_UNKNOWN_SEQ, F_NONE, kvc_swap_in(F.C, SEQ_CFREED, OP_OUT), 1) \
    X(kvc_swap_in, STATE, KVC_ERR_STATE, F_NONE, kvc_swap_in(F.C, SEQ_C1, OP_OUT), 1) \
    X(kvc_op_query, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_op_query(NULL, 1, &O.i32), 1) \
    X(kvc_op_query, NULL_OUT, KVC_ERR_NULL_ARG, F_NONE, kvc_op_query(F.C, 1, NULL), 1) \
    X(kvc_op_query, UNKNOWN_ID, KVC_ERR_INVALID_ARG, F_NONE, kvc_op_query(F.C, 1, &O.i32), 1) \
    X(kvc_op_query, ZERO, KVC_ERR_INVALID_ARG, F_NONE, kvc_op_query(F.C, 0, &O.i32), 1) \
    X(kvc_op_wait, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_op_wait(NULL, 1), 1) \
    X(kvc_op_wait, UNKNOWN_ID, KVC_ERR_INVALID_ARG, F_NONE, kvc_op_wait(F.C, 7), 1) \
    X(kvc_op_wait, ZERO, KVC_ERR_INVALID_ARG, F_NONE, kvc_op_wait(F.P, 0), 1) \
    X(kvc_preempt_recompute, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_preempt_recompute(NULL, SEQ_C1, &O.i64), 1) \
    X(kvc_preempt_recompute, UNKNOWN_ID, KVC_ERR_UNKNOWN_SEQ, F_NONE, kvc_preempt_recompute(F.C, SEQ_NONE, &O.i64), 1) \
    X(kvc_preempt_recompute, FREED_ID, KVC_ERR_UNKNOWN_SEQ, F_NONE, kvc_preempt_recompute(F.C, SEQ_CFREED, &O.i64), 1) \
    X(kvc_preemption_cost, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_preemption_cost(NULL, SEQ_C1, &O.i64, &O.i64), 1) \
    X(kvc_preemption_cost, UNKNOWN_ID, KVC_ERR_UNKNOWN_SEQ, F_NONE, kvc_preemption_cost(F.C, SEQ_NONE, &O.i64, &O.i64), 1) \
    X(kvc_preemption_cost, FREED_ID, KVC_ERR_UNKNOWN_SEQ, F_NONE, kvc_preemption_cost(F.P, SEQ_FREED, &O.i64, &O.i64), 1) \
    X(kvc_prefix_lookup_tiers, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_prefix_lookup_tiers(NULL, F.tok_a, 10, NULL, TIER_OUTS), 1) \
    X(kvc_prefix_lookup_tiers, NULL_IN, KVC_ERR_NULL_ARG, F_NONE, kvc_prefix_lookup_tiers(F.P, NULL, 10, NULL, TIER_OUTS), 1) \
    X(kvc_prefix_lookup_tiers, ZERO, KVC_ERR_INVALID_ARG, F_NONE, kvc_prefix_lookup_tiers(F.P, F.tok_a, 0, NULL, TIER_OUTS), 1) \
    X(kvc_prefix_lookup_tiers, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE, kvc_prefix_lookup_tiers(F.P, F.tok_a, -5, NULL, TIER_OUTS), 1) \
    X(kvc_tier_get_stats, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_tier_get_stats(NULL, KVC_TIER_HOST, &O.tstats), 1) \
    X(kvc_tier_get_stats, NULL_OUT, KVC_ERR_NULL_ARG, F_NONE, kvc_tier_get_stats(F.C, KVC_TIER_HOST, NULL), 1) \
    X(kvc_tier_get_stats, VERSION, KVC_ERR_VERSION, F_NONE, kvc_tier_get_stats(F.C, KVC_TIER_HOST, &O.tstats_old), 1) \
    X(kvc_tier_get_stats, RANGE, KVC_ERR_INVALID_ARG, F_NONE, kvc_tier_get_stats(F.C, 3, &O.tstats), 1) \
    X(kvc_tier_get_stats, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE, kvc_tier_get_stats(F.C, -1, &O.tstats), 1)        \
                                                                                                                       \
    /* KV transfer (pool X, agent XA, export XEX). */                                                                  \
    X(kvc_xfer_config_default, NULL_OUT, KVC_ERR_NULL_ARG, F_NONE, kvc_xfer_config_default(NULL), 1)                   \
    X(kvc_xfer_available, NULL_OUT, KVC_ERR_NULL_ARG, F_NONE, kvc_xfer_available(NULL), 1)                             \
    X(kvc_xfer_agent_create, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_xfer_agent_create(NULL, NULL, &O.agent), 1)   \
    X(kvc_xfer_agent_create, NULL_OUT, KVC_ERR_NULL_ARG, F_NONE, kvc_xfer_agent_create(F.XP, NULL, NULL), 1)            \
    X(kvc_xfer_agent_create, VERSION, KVC_ERR_VERSION, F_NONE, kvc_xfer_agent_create(F.XP, &O.xcfg_old, &O.agent), 1)  \
    X(kvc_xfer_agent_create, RANGE, KVC_ERR_INVALID_ARG, F_NONE, kvc_xfer_agent_create(F.XP, xcfg_lease0(), &O.agent), 1) \
    X(kvc_xfer_agent_create, UNSUPPORTED, KVC_ERR_UNSUPPORTED, F_NONE, kvc_xfer_agent_create(F.P, NULL, &O.agent), 1) \
    X(kvc_xfer_agent_create, UNSUPPORTED, KVC_ERR_UNSUPPORTED, F_NONE, kvc_xfer_agent_create(F.C, NULL, &O.agent), 1) \
    X(kvc_xfer_export_prompt, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE,                                                  \
      kvc_xfer_export_prompt(NULL, F.tok_a, 8, NULL, 0, OP_OUT, &O.i64), 1)                                            \
    X(kvc_xfer_export_prompt, NULL_IN, KVC_ERR_NULL_ARG, F_NONE, kvc_xfer_export_prompt(F.XA, NULL, 8, NULL, 0, OP_OUT, &O.i64), 1) \
    X(kvc_xfer_export_prompt, NULL_OUT, KVC_ERR_NULL_ARG, F_NONE, kvc_xfer_export_prompt(F.XA, F.tok_a, 8, NULL, 0, NULL, &O.i64), 1) \
    X(kvc_xfer_export_prompt, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE,                                                  \
      kvc_xfer_export_prompt(F.XA, F.tok_a, -8, NULL, 0, OP_OUT, &O.i64), 1)                                           \
    X(kvc_xfer_export_prompt, ZERO, KVC_ERR_INVALID_ARG, F_NONE, kvc_xfer_export_prompt(F.XA, F.tok_a, 0, NULL, 0, OP_OUT, &O.i64), 1) \
    X(kvc_xfer_export_prompt, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE,                                                  \
      kvc_xfer_export_prompt(F.XA, F.tok_a, 8, NULL, -1, OP_OUT, &O.i64), 1)                                           \
    X(kvc_xfer_export_prompt, STATE, KVC_ERR_STATE, F_NONE, kvc_xfer_export_prompt(F.XA, F.tok_b, 8, NULL, 0, OP_OUT, &O.i64), 1) \
    X(kvc_xfer_export_seq, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_xfer_export_seq(NULL, SEQ_X1, 0, OP_OUT, &O.i64), 1) \
    X(kvc_xfer_export_seq, NULL_OUT, KVC_ERR_NULL_ARG, F_NONE, kvc_xfer_export_seq(F.XA, SEQ_X1, 0, NULL, &O.i64), 1) \
    X(kvc_xfer_export_seq, UNKNOWN_ID, KVC_ERR_UNKNOWN_SEQ, F_NONE, kvc_xfer_export_seq(F.XA, SEQ_NONE, 0, OP_OUT, &O.i64), 1) \
    X(kvc_xfer_export_seq, FREED_ID, KVC_ERR_UNKNOWN_SEQ, F_NONE, kvc_xfer_export_seq(F.XA, SEQ_XFREED, 0, OP_OUT, &O.i64), 1) \
    X(kvc_xfer_export_seq, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE, kvc_xfer_export_seq(F.XA, SEQ_X1, -1, OP_OUT, &O.i64), 1) \
    X(kvc_xfer_export_descriptor, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE,                                              \
      kvc_xfer_export_descriptor(NULL, F.XEX, O.bytes, 512, &O.i64), 1)                                                \
    X(kvc_xfer_export_descriptor, NULL_OUT, KVC_ERR_NULL_ARG, F_NONE, kvc_xfer_export_descriptor(F.XA, F.XEX, O.bytes, 512, NULL), 1) \
    X(kvc_xfer_export_descriptor, NULL_OUT, KVC_ERR_NULL_ARG, F_NONE, kvc_xfer_export_descriptor(F.XA, F.XEX, NULL, 512, &O.i64), 1) \
    X(kvc_xfer_export_descriptor, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE,                                              \
      kvc_xfer_export_descriptor(F.XA, F.XEX, O.bytes, -1, &O.i64), 1)                                                 \
    X(kvc_xfer_export_descriptor, UNKNOWN_ID, KVC_ERR_INVALID_ARG, F_NONE,                                            \
      kvc_xfer_export_descriptor(F.XA, F.XEX + 100, O.bytes, 512, &O.i64), 1)                                          \
    X(kvc_xfer_export_descriptor, TOO_SMALL, KVC_ERR_BUFFER_TOO_SMALL, F_OUT_LEN,                                     \
      kvc_xfer_export_descriptor(F.XA, F.XEX, O.bytes, 8, &O.i64), O.i64 > 96)                                         \
    X(kvc_xfer_export_release, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_xfer_export_release(NULL, F.XEX), 1)       \
    X(kvc_xfer_export_release, UNKNOWN_ID, KVC_ERR_INVALID_ARG, F_NONE, kvc_xfer_export_release(F.XA, F.XEX + 100), 1) \
    X(kvc_xfer_import, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_xfer_import(NULL, O.bytes, 200, NULL, OP_OUT), 1)   \
    X(kvc_xfer_import, NULL_IN, KVC_ERR_NULL_ARG, F_NONE, kvc_xfer_import(F.XA, NULL, 200, NULL, OP_OUT), 1)          \
    X(kvc_xfer_import, NULL_OUT, KVC_ERR_NULL_ARG, F_NONE, kvc_xfer_import(F.XA, O.bytes, 200, NULL, NULL), 1)        \
    X(kvc_xfer_import, ZERO, KVC_ERR_INVALID_ARG, F_NONE, kvc_xfer_import(F.XA, O.bytes, 0, NULL, OP_OUT), 1)         \
    X(kvc_xfer_import, NEGATIVE, KVC_ERR_INVALID_ARG, F_NONE, kvc_xfer_import(F.XA, O.bytes, -1, NULL, OP_OUT), 1)    \
    X(kvc_xfer_import, RANGE, KVC_ERR_INVALID_ARG, F_NONE, kvc_xfer_import(F.XA, g_junk, 200, NULL, OP_OUT), 1)       \
    X(kvc_xfer_op_query, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_xfer_op_query(NULL, 1, &O.i32), 1)               \
    X(kvc_xfer_op_query, NULL_OUT, KVC_ERR_NULL_ARG, F_NONE, kvc_xfer_op_query(F.XA, 1, NULL), 1)                     \
    X(kvc_xfer_op_query, UNKNOWN_ID, KVC_ERR_INVALID_ARG, F_NONE, kvc_xfer_op_query(F.XA, 77, &O.i32), 1)            \
    X(kvc_xfer_op_wait, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_xfer_op_wait(NULL, 1, -1, &O.xres), 1)            \
    X(kvc_xfer_op_wait, UNKNOWN_ID, KVC_ERR_INVALID_ARG, F_NONE, kvc_xfer_op_wait(F.XA, 77, -1, &O.xres), 1)         \
    X(kvc_xfer_op_wait, VERSION, KVC_ERR_VERSION, F_NONE, kvc_xfer_op_wait(F.XA, 77, -1, &O.xres_old), 1)           \
    X(kvc_xfer_get_stats, NULL_HANDLE, KVC_ERR_NULL_ARG, F_NONE, kvc_xfer_get_stats(NULL, &O.xstats), 1)             \
    X(kvc_xfer_get_stats, NULL_OUT, KVC_ERR_NULL_ARG, F_NONE, kvc_xfer_get_stats(F.XA, NULL), 1)                     \
    X(kvc_xfer_get_stats, VERSION, KVC_ERR_VERSION, F_NONE, kvc_xfer_get_stats(F.XA, &O.xstats_old), 1)              \
                                                                                                                       \
    /* A swapped-out sequence, a pending copy-on-write pair, a full device tier (pool T). */                           \
    X(kvc_append, STATE, KVC_ERR_STATE, F_NONE, kvc_append(F.T, SEQ_SWAPPED, F.tok_x, 1, 0, &O.i32), 1)                 \
    X(kvc_fork, STATE, KVC_ERR_STATE, F_NONE, kvc_fork(F.T, SEQ_SWAPPED, 50), 1)                                       \
    X(kvc_truncate, STATE, KVC_ERR_STATE, F_NONE, kvc_truncate(F.T, SEQ_SWAPPED, 1, &O.i32), 1)                        \
    X(kvc_seq_slot_mapping, STATE, KVC_ERR_STATE, F_NONE, kvc_seq_slot_mapping(F.T, SEQ_SWAPPED, 0, 1, O.i64buf, 64), 1) \
    X(kvc_batch_build, STATE, KVC_ERR_STATE, F_NONE, kvc_batch_build(F.tbatch, ids2(SEQ_TCOW, SEQ_SWAPPED), q2(1, 1), 2), 1) \
    X(kvc_swap_out, STATE, KVC_ERR_STATE, F_NONE, kvc_swap_out(F.T, SEQ_SWAPPED, OP_OUT), 1)                           \
    X(kvc_swap_out, STATE, KVC_ERR_BUSY, F_NONE, kvc_swap_out(F.T, SEQ_TFORK, OP_OUT), 1)                              \
    X(kvc_swap_out, CAPACITY, KVC_ERR_OUT_OF_BLOCKS, F_NONE, kvc_swap_out(F.T, SEQ_TBIG, OP_OUT), 1)                    \
    X(kvc_swap_in, STATE, KVC_ERR_STATE, F_NONE, kvc_swap_in(F.T, SEQ_TBIG, OP_OUT), 1)                                \
    X(kvc_swap_in, CAPACITY, KVC_ERR_OUT_OF_BLOCKS, F_NONE, kvc_swap_in(F.T, SEQ_SWAPPED, OP_OUT), 1)                  \
    X(kvc_tier_attach_host, STATE, KVC_ERR_STATE, F_NONE, kvc_tier_attach_host(F.T, 4), 1)                             \
    X(kvc_alloc, CAPACITY, KVC_ERR_OUT_OF_BLOCKS, F_NONE, kvc_alloc(F.T, 50, F.tok_a, 3, NULL, &O.i64), 1)

/* Functions that cannot fail, or for which NULL is a documented no-op: no rows. */
static const struct { const char *fn, *reason; } k_exempt[] = {
    {"kvc_version", "returns a number, never fails"},
    {"kvc_version_string", "returns a static string, never fails"},
    {"kvc_status_str", "any int maps to a static string (unknown values to a generic one)"},
    {"kvc_last_error", "returns this thread's message, never fails"},
    {"kvc_pool_destroy", "NULL is a documented no-op returning KVC_OK"},
    {"kvc_keys_destroy", "NULL is a documented no-op returning KVC_OK"},
    {"kvc_batch_destroy", "NULL is a documented no-op returning KVC_OK"},
    {"kvc_xfer_agent_destroy", "NULL is a documented no-op returning KVC_OK"},
};

/* Out-params documented "may be NULL" (or that only report an optional figure): no NULL_OUT row. */
static const struct { const char *fn, *param; } k_nullable_out[] = {
    {"kvc_last_error_copy", "out_len"},       {"kvc_alloc", "out_cached_tokens"},
    {"kvc_append", "out_new_blocks"},         {"kvc_truncate", "out_freed_blocks"},
    {"kvc_append_batch", "out_new_blocks"},   {"kvc_append_batch", "out_done"},
    {"kvc_admit", "out_cached_tokens"},
    {"kvc_prefix_pin", "out_pinned_tokens"},
    {"kvc_prefix_unpin", "out_unpinned_tokens"}, {"kvc_copy_pending", "out_copied"},
    {"kvc_swap_out", "out_op"},                {"kvc_swap_in", "out_op"},
    {"kvc_tier_flush", "out_blocks"},         {"kvc_tier_prefetch", "out_cached_tokens"},
    {"kvc_preempt_recompute", "out_tokens_to_recompute"},
    {"kvc_preemption_cost", "out_swap_bytes"}, {"kvc_preemption_cost", "out_recompute_tokens"},
    {"kvc_prefix_lookup_tiers", "out_device_tokens"}, {"kvc_prefix_lookup_tiers", "out_host_tokens"},
    {"kvc_prefix_lookup_tiers", "out_disk_tokens"},
    {"kvc_xfer_export_prompt", "out_tokens"}, {"kvc_xfer_export_seq", "out_tokens"},
    {"kvc_xfer_op_wait", "out"},
};

/* ---- helpers the rows use that need the fixture ----------------------------------------------- */

static char g_long_salt[KVC_MAX_SALT_LEN + 2];
static const char *long_salt(void) {
    memset(g_long_salt, 's', KVC_MAX_SALT_LEN + 1);
    g_long_salt[KVC_MAX_SALT_LEN + 1] = '\0';
    return g_long_salt;
}

static unsigned char g_host[2 * 4096];

/* Tier rows: a path no row gets to open, the op-id out-param, and the three per-tier counts. */
#define TIER_PATH "/tmp/kvc_bad_input_tier_never_created.bin"
#define OP_OUT ((uint64_t *)&O.i64)
#define TIER_OUTS &O.i64, &O.i64buf[0], &O.i64buf[1]
/* kvc_hash_blocks: the hi and lo arrays and their capacity. */
#define HASH_OUTS(cap) O.u64buf, O.u64buf2, (cap)
static void *scratch_host(void) { return g_host; }
/* kvc_xfer_import: 200 bytes that are no descriptor; an agent config with lease_ms 0. */
static const uint8_t g_junk[200] = {'K', 'V', 'C', 'X', 1};
static kvc_xfer_config g_xcfg;
static const kvc_xfer_config *xcfg_lease0(void) {
    kvc_xfer_config_default(&g_xcfg);
    g_xcfg.lease_ms = 0;
    return &g_xcfg;
}

static uint64_t g_ids3[3];
static int64_t g_q3[3];
static const uint64_t *ids3(uint64_t a, uint64_t b, uint64_t c) { g_ids3[0] = a; g_ids3[1] = b; g_ids3[2] = c; return g_ids3; }
static const int64_t *q3(int64_t a, int64_t b, int64_t c) { g_q3[0] = a; g_q3[1] = b; g_q3[2] = c; return g_q3; }

/* ---- generated table -------------------------------------------------------------------------- */

typedef struct row {
    const char *fn;
    int cls;
    kvc_status expected;
    int flags;
    const char *call;
} row;

#define AS_ROW(fn_, cls_, st_, fl_, call_, post_) {#fn_, cls_, st_, fl_, #call_},
static const row k_rows[] = {BAD_INPUT_ROWS(AS_ROW)};
enum { NUM_ROWS = sizeof k_rows / sizeof k_rows[0] };

/* Runs row i on the current fixture; *post receives the row's extra check. Referencing the function
 * name (fn_) proves at compile time that it is a declared function. */
static kvc_status run_row(int i, int *post) {
    int n = 0;
#define AS_CASE(fn_, cls_, st_, fl_, call_, post_)                                                  \
    if (i == n++) {                                                                                 \
        (void)&fn_;                                                                                 \
        kvc_status st = (call_);                                                                    \
        *post = (post_);                                                                            \
        return st;                                                                                  \
    }
    BAD_INPUT_ROWS(AS_CASE)
#undef AS_CASE
    fail_msg("no row %d", i);
    return KVC_ERR_INTERNAL;
}

/* ---- observable state of a fixture ------------------------------------------------------------ */

#define STATS_FIELDS(X)                                                                            \
    X(total_blocks) X(free_blocks) X(used_blocks) X(cached_free_blocks) X(pinned_blocks) X(num_seqs)  \
    X(allocs) X(frees) X(forks) X(appends) X(blocks_allocated) X(blocks_freed) X(cow_copies)          \
    X(pending_copies) X(prefix_query_tokens) X(prefix_hit_tokens) X(evictions) X(verify_misses)       \
    X(events_dropped)

static void compare_stats(const char *row_desc, const char *pool, kvc_pool *a, kvc_pool *b) {
    kvc_stats sa, sb;
    memset(&sa, 0, sizeof sa);
    memset(&sb, 0, sizeof sb);
    sa.struct_size = sb.struct_size = sizeof sa;
    SETUP(kvc_pool_stats(a, &sa));
    SETUP(kvc_pool_stats(b, &sb));
#define CMP_FIELD(f)                                                                               \
    if (sa.f != sb.f) fail_msg("%s: pool %s stats.%s is %lld, expected %lld", row_desc, pool, #f,   \
                               (long long)sa.f, (long long)sb.f);
    STATS_FIELDS(CMP_FIELD)
#undef CMP_FIELD
    if (sa.utilization != sb.utilization || sa.prefix_hit_rate != sb.prefix_hit_rate)
        fail_msg("%s: pool %s utilization / hit rate changed", row_desc, pool);
    int32_t wa = -1, wb = -1;
    SETUP(kvc_pool_get_sliding_window(a, &wa));
    SETUP(kvc_pool_get_sliding_window(b, &wb));
    if (wa != wb) fail_msg("%s: pool %s sliding window is %d, expected %d", row_desc, pool, wa, wb);
}

/* Everything one can read about the sequences of a pool. */
static void compare_seqs(const char *row_desc, const char *pool, kvc_pool *a, kvc_pool *b) {
    for (size_t k = 0; k < sizeof k_probe_ids / sizeof k_probe_ids[0]; ++k) {
        uint64_t id = k_probe_ids[k];
        int32_t ta[64], tb[64];
        int64_t la = -1, lb = -1, na = -1, nb = -1;
        kvc_status sa = kvc_seq_block_table(a, id, ta, 64, &la), sb = kvc_seq_block_table(b, id, tb, 64, &lb);
        if (sa != sb || la != lb || (sa == KVC_OK && memcmp(ta, tb, (size_t)la * sizeof ta[0]) != 0))
            fail_msg("%s: pool %s block table of sequence %llu changed", row_desc, pool, (unsigned long long)id);
        sa = kvc_seq_num_tokens(a, id, &na);
        sb = kvc_seq_num_tokens(b, id, &nb);
        if (sa != sb || na != nb)
            fail_msg("%s: pool %s token count of sequence %llu changed (%lld vs %lld)", row_desc, pool,
                     (unsigned long long)id, (long long)na, (long long)nb);
        int64_t probe[1];
        kvc_status ma = kvc_seq_slot_mapping(a, id, 0, 0, probe, 1), mb = kvc_seq_slot_mapping(b, id, 0, 0, probe, 1);
        if (ma != mb)
            fail_msg("%s: pool %s slot mapping status of sequence %llu changed", row_desc, pool, (unsigned long long)id);
        if (sa == KVC_OK && ma == KVC_OK) {
            /* Reserved slots: the largest range the slot mapping accepts. */
            int64_t sla[256], slb[256];
            int64_t n = la * BS;
            while (n > 0 && kvc_seq_slot_mapping(b, id, 0, n, slb, 256) != KVC_OK) --n;
            if (kvc_seq_slot_mapping(a, id, 0, n, sla, 256) != KVC_OK ||
                kvc_seq_slot_mapping(a, id, 0, n + 1, sla, 256) == KVC_OK ||
                memcmp(sla, slb, (size_t)n * sizeof sla[0]) != 0)
                fail_msg("%s: pool %s slot mapping / reserved slots of sequence %llu changed", row_desc, pool,
                         (unsigned long long)id);
        }
    }
}

static void compare_pending(const char *row_desc, const char *pool, kvc_pool *a, kvc_pool *b) {
    int32_t sa[64], da[64], sb[64], db[64];
    int64_t na = -1, nb = -1;
    SETUP(kvc_take_pending_copies(a, sa, da, 64, &na));
    SETUP(kvc_take_pending_copies(b, sb, db, 64, &nb));
    if (na != nb || memcmp(sa, sb, (size_t)na * 4) != 0 || memcmp(da, db, (size_t)na * 4) != 0)
        fail_msg("%s: pool %s pending copies changed (%lld vs %lld pairs)", row_desc, pool, (long long)na, (long long)nb);
}

static void compare_events(const char *row_desc, const char *pool, kvc_pool *a, kvc_pool *b) {
    for (int n = 0;; ++n) {
        kvc_event ea, eb;
        int32_t ta[BS], tb[BS], ha = -1, hb = -1;
        memset(&ea, 0, sizeof ea);
        memset(&eb, 0, sizeof eb);
        memset(ta, 0, sizeof ta);
        memset(tb, 0, sizeof tb);
        ea.struct_size = eb.struct_size = sizeof ea;
        SETUP(kvc_event_pop(a, &ea, ta, BS, &ha));
        SETUP(kvc_event_pop(b, &eb, tb, BS, &hb));
        if (ha != hb || memcmp(&ea, &eb, sizeof ea) != 0 || memcmp(ta, tb, sizeof ta) != 0)
            fail_msg("%s: pool %s event %d differs", row_desc, pool, n);
        if (!ha) break;
    }
}

/* Prefix lookups with and without the fixture's keys (these also prove the keys unchanged). */
static void compare_lookups(const char *row_desc, fixture *a, fixture *b) {
    const int32_t *prompts[] = {a->tok_a, a->tok_b, a->tok_c};
    for (int k = 0; k < 3; ++k) {
        for (int with_keys = 0; with_keys < 2; ++with_keys) {
            int64_t ca = -1, cb = -1;
            SETUP(kvc_prefix_lookup(a->P, prompts[k], 13, with_keys ? a->K : NULL, &ca));
            SETUP(kvc_prefix_lookup(b->P, prompts[k], 13, with_keys ? b->K : NULL, &cb));
            if (ca != cb)
                fail_msg("%s: prefix lookup %d (keys %d) gives %lld, expected %lld", row_desc, k, with_keys,
                         (long long)ca, (long long)cb);
        }
    }
}

static void compare_storage(const char *row_desc, kvc_pool *a, kvc_pool *b) {
    kvc_storage_info ia, ib;
    memset(&ia, 0, sizeof ia);
    memset(&ib, 0, sizeof ib);
    ia.struct_size = ib.struct_size = sizeof ia;
    SETUP(kvc_storage_get_info(a, &ia));
    SETUP(kvc_storage_get_info(b, &ib));
    int32_t ids[C_BLOCKS];
    for (int i = 0; i < C_BLOCKS; ++i) ids[i] = i;
    size_t bytes = (size_t)ia.total_bytes;
    unsigned char *ha = malloc(bytes), *hb = malloc(bytes);
    assert_non_null(ha);
    assert_non_null(hb);
    SETUP(kvc_storage_copy_blocks(a, ids, C_BLOCKS, ha, 1));
    SETUP(kvc_storage_copy_blocks(b, ids, C_BLOCKS, hb, 1));
    int same = memcmp(ha, hb, bytes) == 0;
    free(ha);
    free(hb);
    if (!same) fail_msg("%s: KV storage bytes of pool C changed", row_desc);
}

static void compare_batch(const char *row_desc, const char *name, const kvc_batch *a, const kvc_batch *b) {
    kvc_batch_info ia, ib;
    memset(&ia, 0, sizeof ia);
    memset(&ib, 0, sizeof ib);
    ia.struct_size = ib.struct_size = sizeof ia;
    kvc_status sa = kvc_batch_get_info(a, &ia), sb = kvc_batch_get_info(b, &ib);
    if (sa != sb) fail_msg("%s: batch %s: get_info %d vs %d", row_desc, name, sa, sb);
    if (sa != KVC_OK) return;
    if (ia.num_seqs != ib.num_seqs || ia.num_tokens != ib.num_tokens || ia.max_blocks_per_seq != ib.max_blocks_per_seq ||
        ia.max_q_len != ib.max_q_len || ia.max_seq_len != ib.max_seq_len || ia.num_indices != ib.num_indices ||
        ia.is_decode != ib.is_decode || ia.rows_uploaded != ib.rows_uploaded)
        fail_msg("%s: batch %s: last build's info changed", row_desc, name);
    int64_t sma[64], smb[64];
    int32_t bta[64], btb[64];
    SETUP(kvc_batch_copy_slot_mapping(a, sma, 64));
    SETUP(kvc_batch_copy_slot_mapping(b, smb, 64));
    SETUP(kvc_batch_copy_block_tables(a, bta, 64));
    SETUP(kvc_batch_copy_block_tables(b, btb, 64));
    if (memcmp(sma, smb, (size_t)ia.num_tokens * 8) != 0 ||
        memcmp(bta, btb, (size_t)(ia.num_seqs * ia.max_blocks_per_seq) * 4) != 0)
        fail_msg("%s: batch %s: last build's slot mapping / block tables changed", row_desc, name);
    /* The backend arrays themselves (host memory for CPU and metadata-only pools). */
    const int32_t *dev_a = (const int32_t *)(uintptr_t)ia.kv_indices, *dev_b = (const int32_t *)(uintptr_t)ib.kv_indices;
    if (memcmp(dev_a, dev_b, (size_t)ia.num_indices * 4) != 0)
        fail_msg("%s: batch %s: kv_indices in backend memory changed", row_desc, name);
}

/* Host-tier slot counts and traffic (not the timings). */
static void compare_host_tier(const char *row_desc, kvc_pool *a, kvc_pool *b) {
    kvc_tier_stats ta, tb;
    memset(&ta, 0, sizeof ta);
    memset(&tb, 0, sizeof tb);
    ta.struct_size = tb.struct_size = sizeof ta;
    SETUP(kvc_tier_get_stats(a, KVC_TIER_HOST, &ta));
    SETUP(kvc_tier_get_stats(b, KVC_TIER_HOST, &tb));
    if (ta.capacity_blocks != tb.capacity_blocks || ta.used_blocks != tb.used_blocks ||
        ta.cached_blocks != tb.cached_blocks || ta.held_blocks != tb.held_blocks || ta.blocks_in != tb.blocks_in ||
        ta.blocks_out != tb.blocks_out || ta.hits != tb.hits || ta.evictions != tb.evictions)
        fail_msg("%s: pool T host tier changed (used %lld/%lld, held %lld/%lld, in %lld/%lld)", row_desc,
                 (long long)ta.used_blocks, (long long)tb.used_blocks, (long long)ta.held_blocks,
                 (long long)tb.held_blocks, (long long)ta.blocks_in, (long long)tb.blocks_in);
}

static void compare_fixtures(const char *row_desc, fixture *a, fixture *b) {
    if (kvc_pool_check(a->P) != KVC_OK) fail_msg("%s: pool P fails the checker: %s", row_desc, kvc_last_error());
    if (kvc_pool_check(a->C) != KVC_OK) fail_msg("%s: pool C fails the checker: %s", row_desc, kvc_last_error());
    if (kvc_pool_check(a->T) != KVC_OK) fail_msg("%s: pool T fails the checker: %s", row_desc, kvc_last_error());
    compare_stats(row_desc, "P", a->P, b->P);
    compare_stats(row_desc, "C", a->C, b->C);
    compare_stats(row_desc, "T", a->T, b->T);
    compare_host_tier(row_desc, a->T, b->T);
    compare_seqs(row_desc, "P", a->P, b->P);
    compare_seqs(row_desc, "C", a->C, b->C);
    compare_seqs(row_desc, "T", a->T, b->T);
    compare_lookups(row_desc, a, b);
    compare_storage(row_desc, a->C, b->C);
    compare_batch(row_desc, "built", a->built, b->built);
    compare_batch(row_desc, "unbuilt", a->unbuilt, b->unbuilt);
    compare_batch(row_desc, "stale", a->stale, b->stale);
    compare_batch(row_desc, "meta", a->meta, b->meta);
    compare_batch(row_desc, "tbatch", a->tbatch, b->tbatch);
    /* Destructive reads last. */
    compare_pending(row_desc, "P", a->P, b->P);
    compare_pending(row_desc, "C", a->C, b->C);
    compare_pending(row_desc, "T", a->T, b->T);
    compare_events(row_desc, "P", a->P, b->P);
    compare_events(row_desc, "C", a->C, b->C);
    compare_events(row_desc, "T", a->T, b->T);
}

/* ---- tests ------------------------------------------------------------------------------------ */

static const char k_sentinel_text[] = "kvc_last_error_copy: cap must be >= 0, got -777";
static void plant_sentinel(void) { (void)kvc_last_error_copy(NULL, -777, NULL); }

static void test_matrix(void **state) {
    (void)state;
    int failures = 0;
    for (int i = 0; i < NUM_ROWS; ++i) {
        const row *r = &k_rows[i];
        char desc[600];
        snprintf(desc, sizeof desc, "row %d [%s, %s]: %s", i, r->fn, k_class_names[r->cls], r->call);
        fixture pristine;
        fixture_build(&F);
        fixture_build(&pristine);
        outs_reset();
        plant_sentinel();
        assert_string_equal(kvc_last_error(), k_sentinel_text);
        int post = 0;
        kvc_status st = run_row(i, &post);
        const char *msg = kvc_last_error();
        if (st != r->expected) {
            print_error("%s\n  -> %s, expected %s (message: %s)\n", desc, kvc_status_str(st),
                        kvc_status_str(r->expected), msg);
            ++failures;
        } else if (r->flags & F_KEEP_MSG) {
            if (strcmp(msg, k_sentinel_text) != 0) {
                print_error("%s\n  -> replaced the previous message with \"%s\"\n", desc, msg);
                ++failures;
            }
        } else if (msg[0] == '\0' || strcmp(msg, k_sentinel_text) == 0) {
            print_error("%s\n  -> left no message of its own\n", desc);
            ++failures;
        } else if (strstr(msg, r->fn) == NULL) {
            print_error("%s\n  -> message does not name the function: \"%s\"\n", desc, msg);
            ++failures;
        }
        if (!post) {
            print_error("%s\n  -> the row's extra check failed\n", desc);
            ++failures;
        }
        if (r->flags & F_OUT_LEN) O.i64 = O_pattern.i64;
        if (r->flags & F_OUT_DONE) O.i32 = O_pattern.i32;
        if (memcmp(&O, &O_pattern, sizeof O) != 0) {
            print_error("%s\n  -> wrote an out-param although it failed\n", desc);
            ++failures;
        }
        if (st == KVC_OK) {
            /* An unexpected success may have created objects; they are not ours to compare. */
            if (O.pool != O_pattern.pool) kvc_pool_destroy(O.pool);
            if (O.batch != O_pattern.batch) kvc_batch_destroy(O.batch);
            if (O.keys != O_pattern.keys) kvc_keys_destroy(O.keys);
        } else {
            compare_fixtures(desc, &F, &pristine);
        }
        fixture_destroy(&F);
        fixture_destroy(&pristine);
    }
    if (failures) fail_msg("%d of %d rows failed", failures, (int)NUM_ROWS);
    print_message("%d rows passed\n", (int)NUM_ROWS);
}

/* The fixture itself is what the rows assume (so that an expectation cannot pass by accident). */
static void test_fixture_is_as_described(void **state) {
    (void)state;
    fixture_build(&F);
    int64_t n = -1;
    SETUP(kvc_seq_num_tokens(F.P, SEQ_A, &n));
    assert_int_equal(n, 10);
    SETUP(kvc_seq_num_tokens(F.P, SEQ_FORK, &n));
    assert_int_equal(n, 11);
    assert_int_equal(kvc_seq_num_tokens(F.P, SEQ_FREED, &n), KVC_ERR_UNKNOWN_SEQ);
    assert_int_equal(kvc_seq_num_tokens(F.C, SEQ_CFREED, &n), KVC_ERR_UNKNOWN_SEQ);
    int32_t t[8];
    SETUP(kvc_seq_block_table(F.C, SEQ_C2, t, 8, &n));
    assert_int_equal(n, 3); /* 5 tokens + 4 lookahead */
    SETUP(kvc_prefix_lookup(F.P, F.tok_a, 10, NULL, &n));
    assert_int_equal(n, 8);
    SETUP(kvc_prefix_lookup(F.P, F.tok_b, 13, F.K, &n));
    assert_int_equal(n, 12);
    SETUP(kvc_prefix_lookup(F.P, F.tok_b, 13, NULL, &n));
    assert_int_equal(n, 0);
    kvc_stats s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    SETUP(kvc_pool_stats(F.P, &s));
    assert_int_equal(s.pending_copies, 1);
    assert_int_equal(s.pinned_blocks, 2);
    SETUP(kvc_pool_stats(F.C, &s));
    assert_int_equal(s.pending_copies, 1);
    /* A launch with valid arguments works on this fixture, so the attention rows fail for their
     * own reason. */
    SETUP(kvc_launch_attention(F.C, F.built, 0, F.q, O.attn_out, params_with(PAR_OK), NULL));
    fixture_destroy(&F);
}

/* ---- header coverage -------------------------------------------------------------------------- */

typedef struct decl {
    char name[64];
    char params[512];
} decl;

static int parse_header(decl *out, int cap) {
    char path[1024];
    snprintf(path, sizeof path, "%s/include/kvc/kvc.h", KVC_SOURCE_DIR);
    FILE *fp = fopen(path, "rb");
    if (!fp) fail_msg("cannot open %s", path);
    static char text[1 << 19];
    size_t len = fread(text, 1, sizeof text - 1, fp);
    fclose(fp);
    if (len == sizeof text - 1) fail_msg("%s does not fit the %zu-byte parse buffer: enlarge it", path, sizeof text - 1);
    text[len] = '\0';
    int n = 0;
    for (char *p = strstr(text, "KVC_API "); p; p = strstr(p + 1, "KVC_API ")) {
        /* Skip the macro's own definition lines. */
        char *semi = strchr(p, ';');
        char *paren = strchr(p, '(');
        if (!semi || !paren || paren > semi) continue;
        char *end = paren;
        while (end > p && (end[-1] == ' ')) --end;
        char *start = end;
        while (start > p && (start[-1] == '_' || (start[-1] >= 'a' && start[-1] <= 'z') ||
                             (start[-1] >= 'A' && start[-1] <= 'Z') || (start[-1] >= '0' && start[-1] <= '9')))
            --start;
        if (end - start <= 0 || end - start >= 63 || strncmp(start, "kvc_", 4) != 0) continue;
        if (n == cap) fail_msg("more than %d declarations", cap);
        memcpy(out[n].name, start, (size_t)(end - start));
        out[n].name[end - start] = '\0';
        size_t plen = (size_t)(semi - paren);
        if (plen >= sizeof out[n].params) plen = sizeof out[n].params - 1;
        memcpy(out[n].params, paren, plen);
        out[n].params[plen] = '\0';
        for (char *c = out[n].params; *c; ++c)
            if (*c == '\n' || *c == '\t') *c = ' ';
        ++n;
    }
    return n;
}

static int has_row(const char *fn, int cls) {
    for (int i = 0; i < NUM_ROWS; ++i)
        if (strcmp(k_rows[i].fn, fn) == 0 && (cls < 0 || k_rows[i].cls == cls)) return 1;
    return 0;
}

static int is_exempt(const char *fn) {
    for (size_t i = 0; i < sizeof k_exempt / sizeof k_exempt[0]; ++i)
        if (strcmp(k_exempt[i].fn, fn) == 0) return 1;
    return 0;
}

static int is_nullable_out(const char *fn, const char *param) {
    for (size_t i = 0; i < sizeof k_nullable_out / sizeof k_nullable_out[0]; ++i)
        if (strcmp(k_nullable_out[i].fn, fn) == 0 && strcmp(k_nullable_out[i].param, param) == 0) return 1;
    return 0;
}

/* Calls fn(decl, type, name) for every parameter "type name" of a declaration. */
static int for_each_param(const decl *d, int (*fn)(const decl *, const char *, const char *)) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", d->params + 1);
    char *close = strrchr(buf, ')');
    if (close) *close = '\0';
    int missing = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ') ++tok;
        char *e = tok + strlen(tok);
        while (e > tok && e[-1] == ' ') *--e = '\0';
        if (strcmp(tok, "void") == 0 || *tok == '\0') continue;
        char *name = e;
        while (name > tok && (name[-1] == '_' || (name[-1] >= 'a' && name[-1] <= 'z') || (name[-1] >= '0' && name[-1] <= '9')))
            --name;
        char type[256];
        snprintf(type, sizeof type, "%.*s", (int)(name - tok), tok);
        missing += fn(d, type, name);
    }
    return missing;
}

static int require(const decl *d, int cls, const char *why) {
    if (has_row(d->name, cls)) return 0;
    print_error("%s: no row of class \"%s\" (%s)\n", d->name, k_class_names[cls], why);
    return 1;
}

/* The classes each kind of parameter calls for. */
static int param_requirements(const decl *d, const char *type, const char *name) {
    int missing = 0;
    int pointer = strchr(type, '*') != NULL;
    if (pointer && (strstr(type, "kvc_pool *") || strstr(type, "kvc_batch *")) && !strstr(type, "**") &&
        (strcmp(name, "pool") == 0 || strcmp(name, "batch") == 0))
        missing += require(d, NULL_HANDLE, name);
    if (pointer && strstr(type, "kvc_keys *") && !strstr(type, "const") && !strstr(type, "**"))
        missing += require(d, NULL_HANDLE, name);
    /* kvc_alloc and kvc_admit name a new sequence: its id can only clash with an existing one. */
    if (strcmp(name, "seq_id") == 0 && (strcmp(d->name, "kvc_alloc") == 0 || strcmp(d->name, "kvc_admit") == 0)) {
        missing += require(d, EXISTS, name);
    } else if (strcmp(name, "seq_id") == 0 || strcmp(name, "parent_id") == 0) {
        missing += require(d, UNKNOWN_ID, name);
        missing += require(d, FREED_ID, name);
    }
    if (strcmp(name, "child_id") == 0) missing += require(d, EXISTS, name);
    if (strstr(type, "int64_t") && !pointer &&
        (strcmp(name, "num_tokens") == 0 || strcmp(name, "count") == 0 || strcmp(name, "num_lookahead") == 0 ||
         strcmp(name, "cap") == 0 || strcmp(name, "token_cap") == 0 || strcmp(name, "budget_bytes") == 0))
        missing += require(d, NEGATIVE, name);
    if ((strcmp(name, "cap") == 0 || strcmp(name, "token_cap") == 0) && strcmp(d->name, "kvc_take_pending_copies") != 0 &&
        strcmp(d->name, "kvc_last_error_copy") != 0)
        missing += require(d, TOO_SMALL, name);
    if (pointer && (strstr(type, "kvc_stats") || strstr(type, "kvc_event") || strstr(type, "kvc_storage_info") ||
                    strstr(type, "kvc_batch_info") || strstr(type, "kvc_attention_params") ||
                    strstr(type, "kvc_pool_config")) &&
        strcmp(d->name, "kvc_pool_config_default") != 0 && strcmp(d->name, "kvc_attention_params_default") != 0 &&
        strcmp(d->name, "kvc_pool_get_config") != 0)
        missing += require(d, VERSION, name);
    if (pointer && strncmp(name, "out", 3) == 0 && !strstr(type, "const") && !is_nullable_out(d->name, name))
        missing += require(d, NULL_OUT, name);
    return missing;
}

static void test_every_function_has_rows(void **state) {
    (void)state;
    static decl decls[256];
    int n = parse_header(decls, 256);
    assert_true(n >= 40); /* the parser found the API */
    int missing = 0, covered = 0;
    for (int i = 0; i < n; ++i) {
        if (is_exempt(decls[i].name)) continue;
        if (!has_row(decls[i].name, -1)) {
            print_error("%s: public function without rows in the bad-input matrix\n", decls[i].name);
            ++missing;
            continue;
        }
        missing += for_each_param(&decls[i], param_requirements);
        ++covered;
    }
    /* Every row and exemption names a real declaration (no stale rows after a rename). */
    for (int r = 0; r < NUM_ROWS; ++r) {
        int found = 0;
        for (int i = 0; i < n && !found; ++i) found = strcmp(decls[i].name, k_rows[r].fn) == 0;
        if (!found) { print_error("row %d names %s, which kvc.h does not declare\n", r, k_rows[r].fn); ++missing; }
    }
    for (size_t e = 0; e < sizeof k_exempt / sizeof k_exempt[0]; ++e) {
        int found = 0;
        for (int i = 0; i < n && !found; ++i) found = strcmp(decls[i].name, k_exempt[e].fn) == 0;
        if (!found) { print_error("exemption %s names no declaration\n", k_exempt[e].fn); ++missing; }
    }
    if (missing) fail_msg("%d coverage gaps in the bad-input matrix", missing);
    print_message("%d functions declared, %d covered by %d rows, %d exempt\n", n, covered, (int)NUM_ROWS,
                  (int)(sizeof k_exempt / sizeof k_exempt[0]));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_is_as_described),
        cmocka_unit_test(test_every_function_has_rows),
        cmocka_unit_test(test_matrix),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
