/* Thread stress for one shared pool, meant to run under ThreadSanitizer (KVC_SANITIZE=thread).
 *
 * Threads on one CPU-backend pool with prefix caching:
 *   - workers: mixed alloc / append (with lookahead) / fork / free / lookup / can_alloc / prefetch
 *     (kvc_tier_prefetch) / pin / unpin
 *     / swap out + in (the pool has a host tier, so evicted cached blocks also spill and re-hit)
 *     / block-table and slot-mapping reads on their own id range (so each can check exact results:
 *     token counts, table lengths, the thread-local error message), plus racing operations on a
 *     shared id range (any documented status is fine there; the checker decides at the end);
 *   - batchers: each owns a kvc_batch and its own sequences; writes KV, builds batches (also over
 *     shared ids), launches CPU attention;
 *   - a drainer: kvc_take_pending_copies / kvc_copy_pending / kvc_event_pop (host and disk tier
 *     events on: the pool has a disk tier below the host tier);
 *   - a reader: kvc_pool_stats and kvc_pool_check, which must pass at every instant.
 * KV bytes are ordered by the test as a device stream would order them (g_stream), except the tier
 * copies, which the library must order itself (its tier barrier) — TSan checks that.
 * At the end every sequence is freed and every pin undone: the pool must be exactly empty and pass
 * kvc_pool_check. Exit status 0 = pass. */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kvc/kvc.h"

enum { BS = 4, NUM_BLOCKS = 512, NUM_WORKERS = 6, NUM_BATCHERS = 2, OWN_IDS = 24, SHARED_IDS = 12,
       MAX_TOKENS = 64, MAX_PINS = 16, HEAD_DIM = 8, HEADS = 2 };

static int g_iters = 3000;
static kvc_pool *g_pool;
static atomic_int g_failures;
static atomic_int g_stop;
static const uint64_t SHARED_BASE = 1000000;
/* KV bytes are synchronized by the caller, as a device stream orders kernels: every call that reads
 * or writes KV storage (cache write, attention, copy of pending blocks) holds this lock, like a
 * single stream. Metadata calls (everything else, batch building included) run fully concurrently. */
static pthread_mutex_t g_stream = PTHREAD_MUTEX_INITIALIZER;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                   \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, " (last error: %s)\n", kvc_last_error());                              \
            atomic_fetch_add(&g_failures, 1);                                                      \
        }                                                                                          \
    } while (0)

/* A failing call must leave *this thread's* message, naming the function. */
#define CHECK_MSG(fn)                                                                              \
    CHECK(strstr(kvc_last_error(), fn) != NULL, "%s failed but this thread's message is \"%s\"", fn, kvc_last_error())

static uint64_t rng_next(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}
static int64_t rnd(uint64_t *s, int64_t n) { return (int64_t)(rng_next(s) % (uint64_t)n); }

/* Prompts from a few shared "system prompts" plus a random tail, so threads hit each other's
 * cached blocks. */
static int g_families = 4; /* argv[3] */
static void make_prompt(uint64_t *s, int32_t *t, int64_t n) {
    int32_t family = (int32_t)rnd(s, g_families);
    int64_t shared = rnd(s, n + 1);
    for (int64_t i = 0; i < n; ++i) t[i] = i < shared ? family * 1000 + (int32_t)i : (int32_t)rnd(s, 3);
}

typedef struct own_seq {
    int live;
    int swapped;      /* swapped out to the host tier */
    int64_t tokens;   /* confirmed */
    int64_t reserved; /* confirmed + lookahead */
} own_seq;

typedef struct pin_rec {
    int32_t tokens[MAX_TOKENS];
    int64_t n;
} pin_rec;

static int64_t blocks_for(int64_t tokens) { return tokens <= 0 ? 0 : (tokens - 1) / BS + 1; }

static void check_own(uint64_t id, const own_seq *q) {
    int64_t n = -1, len = -1;
    if (!q->live) {
        CHECK(kvc_seq_num_tokens(g_pool, id, &n) == KVC_ERR_UNKNOWN_SEQ, "sequence %" PRIu64 " should not exist", id);
        return;
    }
    CHECK(kvc_seq_num_tokens(g_pool, id, &n) == KVC_OK && n == q->tokens, "sequence %" PRIu64 ": %" PRId64
          " tokens, expected %" PRId64, id, n, q->tokens);
    int32_t table[MAX_TOKENS * 2];
    CHECK(kvc_seq_block_table(g_pool, id, table, MAX_TOKENS * 2, &len) == KVC_OK && len == blocks_for(q->reserved),
          "sequence %" PRIu64 ": %" PRId64 " blocks, expected %" PRId64, id, len, blocks_for(q->reserved));
    for (int64_t i = 0; i < len; ++i)  /* -1: a block held by the host tier while swapped out */
        CHECK((table[i] >= 0 || (q->swapped && table[i] == -1)) && table[i] < NUM_BLOCKS,
              "sequence %" PRIu64 " block %" PRId64 " = %d", id, i, table[i]);
    int64_t slots[MAX_TOKENS * 2];
    if (q->swapped) {
        CHECK(kvc_seq_slot_mapping(g_pool, id, 0, 1, slots, 1) == KVC_ERR_STATE, "slot mapping of swapped %" PRIu64, id);
        return;
    }
    if (q->reserved > 0 && q->reserved <= MAX_TOKENS * 2) {
        CHECK(kvc_seq_slot_mapping(g_pool, id, 0, q->reserved, slots, MAX_TOKENS * 2) == KVC_OK, "slot mapping of %" PRIu64, id);
        for (int64_t p = 0; p < q->reserved; ++p)
            CHECK(slots[p] == (int64_t)table[p / BS] * BS + p % BS, "slot %" PRId64 " of %" PRIu64, p, id);
    }
}

static kvc_status racing_op(uint64_t *s, int32_t *toks) {
    uint64_t id = SHARED_BASE + (uint64_t)rnd(s, SHARED_IDS);
    int64_t n = 1 + rnd(s, MAX_TOKENS / 2);
    make_prompt(s, toks, n);
    switch (rnd(s, 7)) {
        case 5: return kvc_truncate(g_pool, id, 1 + rnd(s, MAX_TOKENS), NULL);
        case 0: return kvc_alloc(g_pool, id, toks, n, NULL, NULL);
        case 1: return kvc_append(g_pool, id, toks, 1 + rnd(s, 3), rnd(s, 2), NULL);
        case 2: return kvc_fork(g_pool, id, SHARED_BASE + (uint64_t)rnd(s, SHARED_IDS));
        case 3: return kvc_swap_out(g_pool, id, NULL);
        case 4: return kvc_swap_in(g_pool, id, NULL);
        default: return kvc_free(g_pool, id);
    }
}

static void *worker(void *arg) {
    const int w = (int)(intptr_t)arg;
    uint64_t s = 0x9E3779B97F4A7C15ull * (uint64_t)(w + 1);
    const uint64_t base = (uint64_t)(w + 1) * 10000;
    own_seq own[OWN_IDS];
    memset(own, 0, sizeof own);
    pin_rec *pins = calloc(MAX_PINS, sizeof *pins);
    int num_pins = 0;
    kvc_keys *keys = NULL;
    CHECK(kvc_keys_create(&keys) == KVC_OK, "keys_create");
    int32_t toks[MAX_TOKENS];

    for (int it = 0; it < g_iters; ++it) {
        const int k = (int)rnd(&s, OWN_IDS);
        const uint64_t id = base + (uint64_t)k;
        own_seq *q = &own[k];
        int64_t n = 1 + rnd(&s, MAX_TOKENS / 2);
        kvc_status st;
        switch (rnd(&s, 14)) {
            case 0:
            case 1: { /* alloc, sometimes with keys (priority / LoRA) */
                make_prompt(&s, toks, n);
                kvc_keys_clear(keys);
                if (rnd(&s, 2)) kvc_keys_set_priority(keys, (int32_t)rnd(&s, 101));
                if (rnd(&s, 4) == 0) kvc_keys_set_lora(keys, (uint64_t)rnd(&s, 2));
                int64_t cached = -1;
                st = kvc_alloc(g_pool, id, toks, n, rnd(&s, 2) ? keys : NULL, &cached);
                if (q->live) {
                    CHECK(st == KVC_ERR_SEQ_EXISTS, "alloc of live %" PRIu64 " -> %d", id, st);
                    if (st != KVC_OK) CHECK_MSG("kvc_alloc");
                } else if (st == KVC_OK) {
                    CHECK(cached >= 0 && cached < n && cached % BS == 0, "cached %" PRId64 " of %" PRId64, cached, n);
                    q->live = 1;
                    q->tokens = q->reserved = n;
                } else {
                    CHECK(st == KVC_ERR_OUT_OF_BLOCKS, "alloc %" PRIu64 " -> %d", id, st);
                    CHECK_MSG("kvc_alloc");
                }
                break;
            }
            case 2:
            case 3: { /* append with lookahead */
                int64_t add = rnd(&s, 3), look = rnd(&s, 3);
                if (add == 0 && look == 0) add = 1;
                make_prompt(&s, toks, add > 0 ? add : 1);
                int32_t fresh = -1;
                st = kvc_append(g_pool, id, toks, add, look, &fresh);
                if (!q->live) {
                    CHECK(st == KVC_ERR_UNKNOWN_SEQ, "append to dead %" PRIu64 " -> %d", id, st);
                    CHECK_MSG("kvc_append");
                } else if (q->swapped) {
                    CHECK(st == KVC_ERR_STATE, "append to swapped %" PRIu64 " -> %d", id, st);
                    CHECK_MSG("kvc_append");
                } else if (q->tokens + add + look > MAX_TOKENS * 2) {
                    /* fine either way; keep sequences short */
                    if (st == KVC_OK) {
                        q->tokens += add;
                        if (q->tokens + look > q->reserved) q->reserved = q->tokens + look;
                    }
                } else if (st == KVC_OK) {
                    q->tokens += add;
                    if (q->tokens + look > q->reserved) q->reserved = q->tokens + look;
                    CHECK(fresh >= 0, "append reported %d new blocks", fresh);
                } else {
                    CHECK(st == KVC_ERR_OUT_OF_BLOCKS, "append %" PRIu64 " -> %d", id, st);
                    CHECK_MSG("kvc_append");
                }
                break;
            }
            case 4: { /* fork into another own id */
                const int c = (int)rnd(&s, OWN_IDS);
                st = kvc_fork(g_pool, id, base + (uint64_t)c);
                if (c == k) CHECK(st == KVC_ERR_INVALID_ARG, "self fork -> %d", st);
                else if (!q->live) CHECK(st == KVC_ERR_UNKNOWN_SEQ, "fork of dead -> %d", st);
                else if (own[c].live) CHECK(st == KVC_ERR_SEQ_EXISTS, "fork onto live -> %d", st);
                else if (q->swapped) CHECK(st == KVC_ERR_STATE, "fork of swapped -> %d", st);
                else {
                    CHECK(st == KVC_OK, "fork %" PRIu64 " -> %d", id, st);
                    if (st == KVC_OK) own[c] = *q;
                }
                if (st != KVC_OK) CHECK_MSG("kvc_fork");
                if (c != k) check_own(base + (uint64_t)c, &own[c]);
                break;
            }
            case 5:
            case 6: /* free */
                st = kvc_free(g_pool, id);
                CHECK(st == (q->live ? KVC_OK : KVC_ERR_UNKNOWN_SEQ), "free %" PRIu64 " -> %d", id, st);
                if (st != KVC_OK) CHECK_MSG("kvc_free");
                q->live = q->swapped = 0;
                break;
            case 7: { /* lookup / can_alloc (read-only), or a prefetch of the disk tier's hits */
                make_prompt(&s, toks, n);
                int64_t c = -1;
                int32_t verdict = -1;
                if (rnd(&s, 3) == 0) {
                    /* Its reads race other threads' allocations of the same prompts (shared words). */
                    CHECK(kvc_tier_prefetch(g_pool, toks, n, NULL, &c) == KVC_OK && c >= 0 && c < n, "prefetch");
                    break;
                }
                CHECK(kvc_prefix_lookup(g_pool, toks, n, NULL, &c) == KVC_OK && c >= 0 && c < n, "lookup");
                CHECK(kvc_can_alloc(g_pool, toks, n, NULL, &verdict) == KVC_OK && verdict >= 0 && verdict <= 2, "can_alloc");
                break;
            }
            case 8: { /* pin a prefix, or undo one of this thread's pins */
                if (num_pins < MAX_PINS && rnd(&s, 2)) {
                    make_prompt(&s, toks, n);
                    int64_t pinned = -1;
                    CHECK(kvc_prefix_pin(g_pool, toks, n, NULL, &pinned) == KVC_OK, "pin");
                    if (pinned > 0) { /* remember only pins that took a block, to undo them */
                        memcpy(pins[num_pins].tokens, toks, sizeof toks);
                        pins[num_pins++].n = pinned;
                    }
                } else if (num_pins > 0) {
                    --num_pins;
                    int64_t un = -1;
                    st = kvc_prefix_unpin(g_pool, pins[num_pins].tokens, pins[num_pins].n, NULL, &un);
                    CHECK(st == KVC_OK && un > 0, "unpin of a pinned prefix -> %d (%" PRId64 ")", st, un);
                }
                break;
            }
            case 9: /* races on the shared ids: any documented status */
                st = racing_op(&s, toks);
                CHECK(st == KVC_OK || st == KVC_ERR_SEQ_EXISTS || st == KVC_ERR_UNKNOWN_SEQ ||
                      st == KVC_ERR_OUT_OF_BLOCKS || st == KVC_ERR_INVALID_ARG || st == KVC_ERR_STATE ||
                      st == KVC_ERR_BUSY, "shared op -> %d", st);
                break;
            case 12: { /* swap out to the host tier */
                uint64_t op = 0;
                st = kvc_swap_out(g_pool, id, &op);
                if (!q->live) CHECK(st == KVC_ERR_UNKNOWN_SEQ, "swap_out of dead -> %d", st);
                else if (q->swapped) CHECK(st == KVC_ERR_STATE, "swap_out of swapped -> %d", st);
                else if (st == KVC_OK) {
                    q->swapped = 1;
                    int32_t done = -1;
                    CHECK(kvc_op_wait(g_pool, op) == KVC_OK, "op_wait");
                    CHECK(kvc_op_query(g_pool, op, &done) == KVC_OK && done == 1, "op_query after wait");
                } else {
                    /* BUSY: a copy-on-write pair of ours is queued; OUT_OF_BLOCKS: host tier full */
                    CHECK(st == KVC_ERR_BUSY || st == KVC_ERR_OUT_OF_BLOCKS, "swap_out -> %d", st);
                }
                if (st != KVC_OK) CHECK_MSG("kvc_swap_out");
                break;
            }
            case 13: { /* swap back in */
                st = kvc_swap_in(g_pool, id, NULL);
                if (!q->live) CHECK(st == KVC_ERR_UNKNOWN_SEQ, "swap_in of dead -> %d", st);
                else if (!q->swapped) CHECK(st == KVC_ERR_STATE, "swap_in of resident -> %d", st);
                else if (st == KVC_OK) q->swapped = 0;
                else CHECK(st == KVC_ERR_OUT_OF_BLOCKS, "swap_in -> %d", st);
                if (st != KVC_OK) CHECK_MSG("kvc_swap_in");
                break;
            }
            case 10: { /* drain a few pending copies ourselves */
                int32_t src[4], dst[4];
                int64_t got = -1;
                CHECK(kvc_take_pending_copies(g_pool, src, dst, 4, &got) == KVC_OK && got >= 0 && got <= 4, "take");
                for (int64_t i = 0; i < got; ++i) CHECK(src[i] != dst[i], "pending pair %d -> %d", src[i], dst[i]);
                break;
            }
            default: /* exact state of our own sequence */
                break;
        }
        check_own(id, q);
    }
    /* Clean up: our sequences, our pins, and the shared ids (whoever gets there first). */
    for (int k = 0; k < OWN_IDS; ++k)
        if (own[k].live) CHECK(kvc_free(g_pool, base + (uint64_t)k) == KVC_OK, "final free");
    while (num_pins > 0) {
        --num_pins;
        CHECK(kvc_prefix_unpin(g_pool, pins[num_pins].tokens, pins[num_pins].n, NULL, NULL) == KVC_OK, "final unpin");
    }
    for (int k = 0; k < SHARED_IDS; ++k) (void)kvc_free(g_pool, SHARED_BASE + (uint64_t)k);
    kvc_keys_destroy(keys);
    free(pins);
    return NULL;
}

/* Owns a batch and a few sequences: writes their KV, builds, launches attention. */
static void *batcher(void *arg) {
    const int b = (int)(intptr_t)arg;
    uint64_t s = 0xD1B54A32D192ED03ull * (uint64_t)(b + 7);
    const uint64_t base = (uint64_t)(b + 1) * 100000;
    enum { SEQS = 4 };
    kvc_batch *batch = NULL;
    CHECK(kvc_batch_create(g_pool, SEQS + 1, SEQS * MAX_TOKENS, 2 * MAX_TOKENS / BS, &batch) == KVC_OK, "batch_create");
    if (!batch) return NULL;
    int32_t toks[MAX_TOKENS];
    int64_t len[SEQS] = {0};
    float *kv = calloc((size_t)MAX_TOKENS * HEADS * HEAD_DIM, sizeof(float));
    float *q = calloc((size_t)SEQS * MAX_TOKENS * HEADS * HEAD_DIM, sizeof(float));
    float *out = calloc((size_t)SEQS * MAX_TOKENS * HEADS * HEAD_DIM, sizeof(float));
    for (int i = 0; i < MAX_TOKENS * HEADS * HEAD_DIM; ++i) kv[i] = (float)(i % 5) * 0.25f;
    kvc_attention_params params;
    kvc_attention_params_default(&params);
    params.q_dtype = KVC_DTYPE_F32;

    for (int it = 0; it < g_iters / 4; ++it) {
        uint64_t ids[SEQS + 1];
        int64_t qlens[SEQS + 1];
        int n = 0;
        for (int k = 0; k < SEQS; ++k) {
            const uint64_t id = base + (uint64_t)k;
            if (len[k] == 0 || len[k] >= MAX_TOKENS) { /* (re)start this sequence with a prompt */
                if (len[k] > 0) CHECK(kvc_free(g_pool, id) == KVC_OK, "batcher free");
                int64_t plen = 1 + rnd(&s, MAX_TOKENS / 2);
                make_prompt(&s, toks, plen);
                int64_t cached = 0;
                len[k] = kvc_alloc(g_pool, id, toks, plen, NULL, &cached) == KVC_OK ? plen : 0;
                if (len[k] == 0) continue;
                qlens[n] = plen - cached; /* prefill computes only the uncached part */
            } else { /* decode step */
                toks[0] = (int32_t)rnd(&s, 3);
                if (kvc_append(g_pool, id, toks, 1, 0, NULL) != KVC_OK) continue;
                len[k] += 1;
                qlens[n] = 1;
            }
            int64_t slots[MAX_TOKENS];
            CHECK(kvc_seq_slot_mapping(g_pool, id, len[k] - qlens[n], qlens[n], slots, MAX_TOKENS) == KVC_OK, "slots");
            pthread_mutex_lock(&g_stream);
            CHECK(kvc_cache_write(g_pool, 0, slots, qlens[n], kv, kv, KVC_DTYPE_F32, 1.0f, 1.0f, NULL) == KVC_OK,
                  "cache_write");
            pthread_mutex_unlock(&g_stream);
            ids[n++] = id;
        }
        if (n == 0) continue;
        /* Sometimes add a racing shared id: it may vanish at any time. */
        int racing = rnd(&s, 3) == 0;
        if (racing) {
            ids[n] = SHARED_BASE + (uint64_t)rnd(&s, SHARED_IDS);
            qlens[n] = 1;
        }
        kvc_status st = kvc_batch_build(batch, ids, qlens, n + racing);
        if (racing) {
            CHECK(st == KVC_OK || st == KVC_ERR_UNKNOWN_SEQ || st == KVC_ERR_BUFFER_TOO_SMALL || st == KVC_ERR_STATE,
                  "racing build -> %d", st);
            /* The launch reads only our own sequences: another thread may free or swap a shared one
             * while the attention runs, and freeing a sequence under an in-flight kernel is the
             * caller's error (its blocks may be refilled by a swap-in at that very moment). */
            st = kvc_batch_build(batch, ids, qlens, n);
        }
        CHECK(st == KVC_OK, "build -> %d", st);
        if (st != KVC_OK) continue;
        kvc_batch_info info;
        memset(&info, 0, sizeof info);
        info.struct_size = sizeof info;
        CHECK(kvc_batch_get_info(batch, &info) == KVC_OK && info.num_seqs == n, "batch info");
        pthread_mutex_lock(&g_stream);
        st = kvc_launch_attention(g_pool, batch, 0, q, out, &params, NULL);
        pthread_mutex_unlock(&g_stream);
        CHECK(st == KVC_OK, "launch -> %d", st);
    }
    for (int k = 0; k < SEQS; ++k)
        if (len[k] > 0) CHECK(kvc_free(g_pool, base + (uint64_t)k) == KVC_OK, "batcher final free");
    kvc_batch_destroy(batch);
    free(kv);
    free(q);
    free(out);
    return NULL;
}

static void *drainer(void *arg) {
    (void)arg;
    int32_t toks[BS];
    while (!atomic_load(&g_stop)) {
        int64_t copied = -1;
        pthread_mutex_lock(&g_stream);
        CHECK(kvc_copy_pending(g_pool, NULL, &copied) == KVC_OK && copied >= 0, "copy_pending");
        pthread_mutex_unlock(&g_stream);
        for (int i = 0; i < 8; ++i) {
            kvc_event e;
            memset(&e, 0, sizeof e);
            e.struct_size = sizeof e;
            int32_t has = -1;
            CHECK(kvc_event_pop(g_pool, &e, toks, BS, &has) == KVC_OK, "event_pop");
            if (!has) break;
            CHECK(e.type >= KVC_EVENT_BLOCK_STORED && e.type <= KVC_EVENT_ALL_BLOCKS_CLEARED, "event type %d", e.type);
            CHECK(e.tier >= KVC_TIER_DEVICE && e.tier <= KVC_TIER_DISK, "event tier %d", e.tier);
        }
    }
    return NULL;
}

static void *reader(void *arg) {
    (void)arg;
    while (!atomic_load(&g_stop)) {
        kvc_stats st;
        memset(&st, 0, sizeof st);
        st.struct_size = sizeof st;
        CHECK(kvc_pool_stats(g_pool, &st) == KVC_OK, "stats");
        CHECK(st.free_blocks + st.used_blocks + st.pinned_blocks >= NUM_BLOCKS &&
              st.free_blocks + st.used_blocks <= NUM_BLOCKS && st.cached_free_blocks <= st.free_blocks,
              "inconsistent snapshot: free %" PRId64 " used %" PRId64 " pinned %" PRId64, st.free_blocks,
              st.used_blocks, st.pinned_blocks);
        CHECK(kvc_pool_check(g_pool) == KVC_OK, "pool check mid-run");
        kvc_storage_info si;
        memset(&si, 0, sizeof si);
        si.struct_size = sizeof si;
        CHECK(kvc_storage_get_info(g_pool, &si) == KVC_OK, "storage info");
        /* kvc_pool_check holds the pool mutex for O(blocks) work (slow under TSan) and std::mutex is
         * not fair: without a pause this loop re-takes the lock at once and starves the workers,
         * which made the run take minutes instead of seconds. */
        usleep(200);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1) g_iters = atoi(argv[1]);
    /* A small host tier (argv[2]) makes kvc_alloc promote its disk hits in rounds, among the other
     * threads' calls; the default one rarely runs short of slots. */
    const int64_t host_slots = argc > 2 ? atoll(argv[2]) : NUM_BLOCKS / 4;
    /* More prompt families (argv[3]) cool each family's prefix, so that it reaches the disk tier
     * between hits: more disk hits, and with a small host tier more promotion rounds. */
    if (argc > 3) g_families = atoi(argv[3]);
    if (g_iters < 1 || host_slots < 1 || g_families < 1) {
        fprintf(stderr, "usage: stress_threads [iterations [host_slots [families]]]\n");
        return 2;
    }
    kvc_pool_config cfg;
    kvc_pool_config_default(&cfg);
    cfg.block_size = BS;
    cfg.num_blocks = NUM_BLOCKS;
    cfg.head_dim = HEAD_DIM;
    cfg.num_kv_heads = HEADS;
    cfg.kv_dtype = KVC_DTYPE_F32;
    cfg.backend = KVC_BACKEND_CPU;
    cfg.watermark = 0.0;
    cfg.event_capacity = 64;
    char disk_path[64];
    snprintf(disk_path, sizeof disk_path, "/tmp/kvc_stress_%d.bin", (int)getpid());
    if (kvc_pool_create(&cfg, &g_pool) != KVC_OK || kvc_pool_set_tier_events(g_pool, 1) != KVC_OK ||
        kvc_tier_attach_host(g_pool, host_slots) != KVC_OK ||
        kvc_tier_attach_disk(g_pool, disk_path, NUM_BLOCKS / 2, 0) != KVC_OK) {
        fprintf(stderr, "pool_create / tier attach: %s\n", kvc_last_error());
        unlink(disk_path);
        return 2;
    }
    unlink(disk_path); /* the open file lives on; nothing is left behind */
    pthread_t w[NUM_WORKERS], b[NUM_BATCHERS], d, r;
    for (int i = 0; i < NUM_WORKERS; ++i) pthread_create(&w[i], NULL, worker, (void *)(intptr_t)i);
    for (int i = 0; i < NUM_BATCHERS; ++i) pthread_create(&b[i], NULL, batcher, (void *)(intptr_t)i);
    pthread_create(&d, NULL, drainer, NULL);
    pthread_create(&r, NULL, reader, NULL);
    for (int i = 0; i < NUM_WORKERS; ++i) pthread_join(w[i], NULL);
    for (int i = 0; i < NUM_BATCHERS; ++i) pthread_join(b[i], NULL);
    atomic_store(&g_stop, 1);
    pthread_join(d, NULL);
    pthread_join(r, NULL);

    /* Everything was freed and unpinned: the pool must be exactly empty. */
    for (int k = 0; k < SHARED_IDS; ++k) (void)kvc_free(g_pool, SHARED_BASE + (uint64_t)k);
    kvc_stats st;
    memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    CHECK(kvc_pool_stats(g_pool, &st) == KVC_OK, "final stats");
    CHECK(kvc_pool_check(g_pool) == KVC_OK, "final pool check");
    CHECK(st.num_seqs == 0 && st.used_blocks == 0 && st.pinned_blocks == 0 && st.free_blocks == NUM_BLOCKS,
          "pool not empty at the end: seqs %" PRId64 " used %" PRId64 " pinned %" PRId64 " free %" PRId64, st.num_seqs,
          st.used_blocks, st.pinned_blocks, st.free_blocks);
    kvc_tier_stats ts;
    memset(&ts, 0, sizeof ts);
    ts.struct_size = sizeof ts;
    CHECK(kvc_tier_get_stats(g_pool, KVC_TIER_HOST, &ts) == KVC_OK && ts.held_blocks == 0,
          "host tier still holds %" PRId64 " blocks of swapped-out sequences", ts.held_blocks);
    kvc_tier_stats ds;
    memset(&ds, 0, sizeof ds);
    ds.struct_size = sizeof ds;
    CHECK(kvc_tier_get_stats(g_pool, KVC_TIER_DISK, &ds) == KVC_OK && ds.blocks_in > 0 && ds.failures == 0,
          "disk tier: %" PRId64 " blocks in, %" PRId64 " failures", ds.blocks_in, ds.failures);
    CHECK(kvc_prefix_cache_reset(g_pool) == KVC_OK, "cache reset of the idle pool");
    CHECK(kvc_pool_check(g_pool) == KVC_OK, "pool check after the reset");
    printf("stress_threads: host tier of %" PRId64 " slots; %d workers x %d iterations, %d batchers; allocs %" PRId64 " appends %" PRId64
           " forks %" PRId64 " frees %" PRId64 " cow %" PRId64 " hits %" PRId64 "/%" PRId64 " tokens, evictions %" PRId64
           "; host tier: %" PRId64 " blocks in, %" PRId64 " out, %" PRId64 " re-hits; disk tier: %" PRId64
           " blocks in, %" PRId64 " re-hits; failures %d\n",
           host_slots, NUM_WORKERS, g_iters, NUM_BATCHERS, st.allocs, st.appends, st.forks, st.frees, st.cow_copies,
           st.prefix_hit_tokens, st.prefix_query_tokens, st.evictions, ts.blocks_in, ts.blocks_out, ts.hits,
           ds.blocks_in, ds.hits, atomic_load(&g_failures));
    kvc_pool_destroy(g_pool);
    return atomic_load(&g_failures) == 0 ? 0 : 1;
}
