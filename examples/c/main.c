/* A tour of libkvc's block manager from C: two requests share a system prompt (prefix cache hit),
 * decode across a block boundary, fork for parallel sampling (copy-on-write), and a readable error.
 * Built against the installed library via pkg-config and via find_package(kvc). */
#include <kvc/kvc.h>

#include <stdio.h>
#include <stdlib.h>

#define CHECK(call)                                                                         \
    do {                                                                                    \
        kvc_status st_ = (call);                                                            \
        if (st_ != KVC_OK) {                                                                \
            fprintf(stderr, "%s failed: %s (%s)\n", #call, kvc_status_str(st_), kvc_last_error()); \
            exit(1);                                                                        \
        }                                                                                   \
    } while (0)

static void print_table(kvc_pool *pool, uint64_t seq) {
    int32_t table[64];
    int64_t len = 0, ntok = 0;
    CHECK(kvc_seq_block_table(pool, seq, table, 64, &len));
    CHECK(kvc_seq_num_tokens(pool, seq, &ntok));
    printf("  seq %llu: %lld tokens, blocks [", (unsigned long long)seq, (long long)ntok);
    for (int64_t i = 0; i < len; i++) printf("%s%d", i ? " " : "", table[i]);
    printf("]\n");
}

int main(void) {
    printf("libkvc %s (header %d, library %d)\n", kvc_version_string(), KVC_VERSION_NUMBER, kvc_version());

    kvc_pool_config cfg;
    CHECK(kvc_pool_config_default(&cfg));
    cfg.block_size = 4;
    cfg.num_blocks = 16;
    cfg.num_layers = 32;
    cfg.num_kv_heads = 8;
    cfg.head_dim = 128;
    int64_t bytes = 0;
    CHECK(kvc_bytes_per_block(&cfg, &bytes));
    printf("bytes per block (32 layers, 8 kv heads, d=128, fp16, 4 tokens): %lld\n", (long long)bytes);

    kvc_pool *pool = NULL;
    CHECK(kvc_pool_create(&cfg, &pool));

    /* A 10-token prompt: 8 tokens of "system prompt" + 2 of user text. */
    int32_t prompt_a[10] = {101, 102, 103, 104, 105, 106, 107, 108, 1, 2};
    int32_t prompt_b[10] = {101, 102, 103, 104, 105, 106, 107, 108, 3, 4};
    int64_t cached = -1;
    CHECK(kvc_alloc(pool, 1, prompt_a, 10, NULL, &cached));
    printf("request 1: %lld of 10 prompt tokens cached\n", (long long)cached);
    CHECK(kvc_alloc(pool, 2, prompt_b, 10, NULL, &cached));
    printf("request 2: %lld of 10 prompt tokens cached (shared system prompt)\n", (long long)cached);
    if (cached != 8) { fprintf(stderr, "expected 8 cached tokens\n"); return 1; }

    /* Decode two tokens into request 1: the second fills its third block. */
    int32_t new_blocks = 0;
    int32_t t1 = 7;
    CHECK(kvc_append(pool, 1, &t1, 1, 0, &new_blocks));
    CHECK(kvc_append(pool, 1, &t1, 1, 0, &new_blocks));
    int32_t t2 = 9;
    CHECK(kvc_append(pool, 1, &t2, 1, 0, &new_blocks));
    printf("decode step crossing a block boundary took %d new block(s)\n", new_blocks);

    /* Parallel sampling: fork request 2, then both branches write their own next token. */
    CHECK(kvc_fork(pool, 2, 3));
    CHECK(kvc_append(pool, 3, &t2, 1, 0, &new_blocks));
    int32_t src[4], dst[4];
    int64_t ncopies = 0;
    CHECK(kvc_take_pending_copies(pool, src, dst, 4, &ncopies));
    printf("fork + append: %lld copy-on-write pair(s)", (long long)ncopies);
    for (int64_t i = 0; i < ncopies; i++) printf(" %d->%d", src[i], dst[i]);
    printf("\n");
    print_table(pool, 1);
    print_table(pool, 2);
    print_table(pool, 3);

    /* Errors come back as statuses with a message; the pool is unchanged. */
    kvc_status st = kvc_alloc(pool, 1, prompt_a, 10, NULL, NULL);
    printf("allocating id 1 again -> %s: %s\n", kvc_status_str(st), kvc_last_error());
    if (st != KVC_ERR_SEQ_EXISTS) return 1;

    kvc_stats stats = {0};
    stats.struct_size = sizeof stats;
    CHECK(kvc_pool_stats(pool, &stats));
    printf("stats: %lld/%lld blocks used, %lld seqs, %lld COW copies, prefix hit rate %.2f\n",
           (long long)stats.used_blocks, (long long)stats.total_blocks, (long long)stats.num_seqs,
           (long long)stats.cow_copies, stats.prefix_hit_rate);
    CHECK(kvc_pool_check(pool));

    CHECK(kvc_free(pool, 1));
    CHECK(kvc_free(pool, 2));
    CHECK(kvc_free(pool, 3));
    CHECK(kvc_pool_destroy(pool));
    printf("ok\n");
    return 0;
}
