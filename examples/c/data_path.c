/* The data path of one model step, as an inference server wires it, on a CPU pool (the same calls
 * drive the CUDA backend with device pointers and a stream):
 *
 *   kvc_alloc / kvc_append   the scheduler's bookkeeping: which blocks hold which tokens
 *   kvc_batch_build          once per step: block tables, sequence lengths, slot mapping
 *   per layer:
 *     kvc_cache_write        the step's new K and V into their slots (reshape_and_cache)
 *     kvc_launch_attention   paged attention of the step's queries over each sequence's KV
 *
 * A prefill step of two prompts (6 and 3 tokens, so sequence 1 spans two blocks) and then two
 * decode steps; every attention output is compared with a dense computation over the same K/V kept
 * in plain arrays here. Exits non-zero on any difference above 1e-4.
 * Built against the installed library by build_and_run.sh. */
#include <kvc/kvc.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                                                \
    do {                                                                                           \
        kvc_status st_ = (call);                                                                   \
        if (st_ != KVC_OK) {                                                                       \
            fprintf(stderr, "%s failed: %s (%s)\n", #call, kvc_status_str(st_), kvc_last_error()); \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

enum { LAYERS = 2, KV_HEADS = 2, Q_HEADS = 4, DIM = 8, BLOCK = 4, MAX_LEN = 16, SEQS = 2 };

/* What the model would compute: deterministic K, V, Q values per (layer, seq, position, head, d). */
static float value(int what, int layer, int seq, int pos, int head, int d) {
    unsigned x = (unsigned)(what * 7919 + layer * 104729 + seq * 1299709 + pos * 15485863 + head * 179 + d * 31);
    x ^= x >> 13; x *= 0x5bd1e995u; x ^= x >> 15;
    return (float)(x % 2001) / 1000.0f - 1.0f;
}

/* The dense reference keeps every K and V written so far: [layer][seq][pos][kv head][d]. */
static float ref_k[LAYERS][SEQS][MAX_LEN][KV_HEADS][DIM], ref_v[LAYERS][SEQS][MAX_LEN][KV_HEADS][DIM];

static double max_diff;

/* One step: seqs[i] has lens[i] tokens in total, the newest q_lens[i] of them are this step's. */
static void step(kvc_pool *pool, kvc_batch *batch, const uint64_t *ids, const int64_t *lens, const int64_t *q_lens) {
    CHECK(kvc_batch_build(batch, ids, q_lens, SEQS));
    kvc_batch_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    CHECK(kvc_batch_get_info(batch, &info));
    /* On the CPU backend the batch's arrays are host memory; on CUDA pass info.slot_mapping (a
     * device address) to kvc_cache_write the same way. */
    const int64_t *slots = (const int64_t *)(uintptr_t)info.slot_mapping;
    int64_t n = info.num_tokens;

    float *k = malloc(sizeof(float) * n * KV_HEADS * DIM), *v = malloc(sizeof(float) * n * KV_HEADS * DIM);
    float *q = malloc(sizeof(float) * n * Q_HEADS * DIM), *out = malloc(sizeof(float) * n * Q_HEADS * DIM);
    kvc_attention_params params;
    CHECK(kvc_attention_params_default(&params));
    params.q_dtype = KVC_DTYPE_F32;

    for (int layer = 0; layer < LAYERS; layer++) {
        /* The model's projections for the step's tokens, in batch order. */
        int64_t t = 0;
        for (int s = 0; s < SEQS; s++)
            for (int64_t pos = lens[s] - q_lens[s]; pos < lens[s]; pos++, t++) {
                for (int h = 0; h < KV_HEADS; h++)
                    for (int d = 0; d < DIM; d++) {
                        k[(t * KV_HEADS + h) * DIM + d] = ref_k[layer][s][pos][h][d] = value(0, layer, s, (int)pos, h, d);
                        v[(t * KV_HEADS + h) * DIM + d] = ref_v[layer][s][pos][h][d] = value(1, layer, s, (int)pos, h, d);
                    }
                for (int h = 0; h < Q_HEADS; h++)
                    for (int d = 0; d < DIM; d++) q[(t * Q_HEADS + h) * DIM + d] = value(2, layer, s, (int)pos, h, d);
            }
        CHECK(kvc_cache_write(pool, layer, slots, n, k, v, KVC_DTYPE_F32, 1.0f, 1.0f, NULL));
        CHECK(kvc_launch_attention(pool, batch, layer, q, out, &params, NULL));

        /* Dense causal attention: query at position p of sequence s sees positions 0..p. */
        t = 0;
        for (int s = 0; s < SEQS; s++)
            for (int64_t pos = lens[s] - q_lens[s]; pos < lens[s]; pos++, t++)
                for (int h = 0; h < Q_HEADS; h++) {
                    int kvh = h / (Q_HEADS / KV_HEADS);
                    double scores[MAX_LEN], mx = -1e30, sum = 0;
                    for (int64_t j = 0; j <= pos; j++) {
                        double dot = 0;
                        for (int d = 0; d < DIM; d++) dot += q[(t * Q_HEADS + h) * DIM + d] * ref_k[layer][s][j][kvh][d];
                        scores[j] = dot / sqrt((double)DIM);
                        if (scores[j] > mx) mx = scores[j];
                    }
                    for (int64_t j = 0; j <= pos; j++) sum += (scores[j] = exp(scores[j] - mx));
                    for (int d = 0; d < DIM; d++) {
                        double want = 0;
                        for (int64_t j = 0; j <= pos; j++) want += scores[j] / sum * ref_v[layer][s][j][kvh][d];
                        double diff = fabs(want - out[(t * Q_HEADS + h) * DIM + d]);
                        if (diff > max_diff) max_diff = diff;
                    }
                }
    }
    free(k); free(v); free(q); free(out);
}

int main(void) {
    kvc_pool_config cfg;
    CHECK(kvc_pool_config_default(&cfg));
    cfg.backend = KVC_BACKEND_CPU;
    cfg.kv_dtype = KVC_DTYPE_F32;
    cfg.block_size = BLOCK;
    cfg.num_layers = LAYERS;
    cfg.num_kv_heads = KV_HEADS;
    cfg.num_q_heads = Q_HEADS;
    cfg.head_dim = DIM;
    cfg.num_blocks = 16;
    kvc_pool *pool = NULL;
    CHECK(kvc_pool_create(&cfg, &pool));
    kvc_batch *batch = NULL;
    CHECK(kvc_batch_create(pool, SEQS, 32, MAX_LEN / BLOCK, &batch));

    /* Prefill: two prompts, nothing cached (different tokens), every prompt token is a query. */
    uint64_t ids[SEQS] = {1, 2};
    int32_t prompt1[6] = {11, 12, 13, 14, 15, 16}, prompt2[3] = {21, 22, 23};
    int64_t cached = -1;
    CHECK(kvc_alloc(pool, ids[0], prompt1, 6, NULL, &cached));
    CHECK(kvc_alloc(pool, ids[1], prompt2, 3, NULL, &cached));
    int64_t lens[SEQS] = {6, 3}, q_lens[SEQS] = {6, 3};
    step(pool, batch, ids, lens, q_lens);

    /* Two decode steps: the sampled token is appended (it may open a block), then one query each. */
    for (int i = 0; i < 2; i++) {
        for (int s = 0; s < SEQS; s++) {
            int32_t token = 100 + i, new_blocks = 0;
            CHECK(kvc_append(pool, ids[s], &token, 1, 0, &new_blocks));
            lens[s]++;
            q_lens[s] = 1;
        }
        step(pool, batch, ids, lens, q_lens);
    }

    printf("data path: prefill (6 + 3 tokens) + 2 decode steps, %d layers, GQA %d/%d heads: max |out - dense| %.2e\n",
           LAYERS, Q_HEADS, KV_HEADS, max_diff);
    CHECK(kvc_batch_destroy(batch));
    CHECK(kvc_pool_destroy(pool));
    if (!(max_diff < 1e-4)) {
        fprintf(stderr, "data path: attention differs from the dense computation\n");
        return 1;
    }
    printf("ok\n");
    return 0;
}
