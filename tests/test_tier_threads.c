/* Memory tiers under concurrency: threads allocate prompts that share a system prefix, re-hit
 * their own earlier prompts, swap out and in, and free, on a pool small enough that cached blocks
 * keep spilling to the host and disk tiers and coming back. Every block's bytes are a function of
 * its token ids, so any thread can verify any block it holds: nothing read may differ. The
 * invariant checker runs throughout and at the end. Run under TSan with KVC_SANITIZE=thread. */
#include <pthread.h>

#include "test_tier_helpers.h"

enum { THREADS = 4, ITERS = 400, NT = 17, SHARED = 8 };

static kvc_pool *g_pool;
static int g_failures;
static pthread_mutex_t g_fail_mu = PTHREAD_MUTEX_INITIALIZER;

static void report(const char *what, uint64_t seq, kvc_status st) {
    pthread_mutex_lock(&g_fail_mu);
    if (g_failures++ < 10) fprintf(stderr, "%s (seq %llu): %s %s\n", what, (unsigned long long)seq,
                                   kvc_status_str(st), kvc_last_error());
    pthread_mutex_unlock(&g_fail_mu);
}

/* Bytes of a block whose token ids are toks[0..TBS). */
static void block_bytes(const int32_t *toks, unsigned char *out) {
    uint32_t seed = 2166136261u;
    for (int i = 0; i < TBS; ++i) seed = (seed ^ (uint32_t)toks[i]) * 16777619u;
    pattern(out, seed, 0);
}

static int verify(uint64_t seq, const int32_t *prompt, int64_t blocks) {
    int32_t table[64];
    int64_t n = 0;
    if (kvc_seq_block_table(g_pool, seq, table, 64, &n) != KVC_OK) return 0;
    unsigned char want[TBLOCK_BYTES], got[TBLOCK_BYTES];
    for (int64_t i = 0; i < blocks; ++i) {
        block_bytes(prompt + i * TBS, want);
        if (kvc_storage_copy_blocks(g_pool, &table[i], 1, got, 1) != KVC_OK) return 0;
        if (memcmp(want, got, TBLOCK_BYTES) != 0) {
            report("bytes differ", seq, KVC_OK);
            return 0;
        }
    }
    return 1;
}

static void *worker(void *arg) {
    const int t = (int)(intptr_t)arg;
    int32_t toks[NT];
    for (int it = 0; it < ITERS; ++it) {
        const uint64_t seq = (uint64_t)(t * 100000 + it + 1);
        prompt(toks, NT, 0);                         /* shared system prefix: blocks 0..1 */
        for (int i = SHARED; i < NT; ++i) toks[i] = 1000000 * (t + 1) + 100 * (it % 3) + i;
        int64_t cached = 0;
        kvc_status st = kvc_alloc(g_pool, seq, toks, NT, NULL, &cached);
        if (st == KVC_ERR_OUT_OF_BLOCKS) continue;
        if (st != KVC_OK) { report("alloc", seq, st); continue; }
        const int64_t full = NT / TBS;
        int32_t table[64];
        int64_t n = 0;
        if (kvc_seq_block_table(g_pool, seq, table, 64, &n) != KVC_OK) report("table", seq, KVC_OK);
        if (!verify(seq, toks, cached / TBS)) report("cached blocks", seq, KVC_OK);
        unsigned char buf[TBLOCK_BYTES];
        for (int64_t i = cached / TBS; i < full; ++i) {  /* "compute" the rest */
            block_bytes(toks + i * TBS, buf);
            if (kvc_storage_copy_blocks(g_pool, &table[i], 1, buf, 0) != KVC_OK) report("write", seq, KVC_OK);
        }
        uint64_t op = 0;
        st = kvc_swap_out(g_pool, seq, &op);
        if (st == KVC_OK) {
            if ((st = kvc_op_wait(g_pool, op)) != KVC_OK) report("wait out", seq, st);
            st = kvc_swap_in(g_pool, seq, &op);
            if (st == KVC_OK) {
                if ((st = kvc_op_wait(g_pool, op)) != KVC_OK) report("wait in", seq, st);
                if (!verify(seq, toks, full)) report("after swap", seq, KVC_OK);
            } else if (st != KVC_ERR_OUT_OF_BLOCKS) {
                report("swap in", seq, st);
            }
        } else if (st != KVC_ERR_OUT_OF_BLOCKS) {
            report("swap out", seq, st);
        } else if (!verify(seq, toks, full)) {
            report("resident", seq, KVC_OK);
        }
        if ((st = kvc_free(g_pool, seq)) != KVC_OK) report("free", seq, st);
        if (it % 25 == 0 && (st = kvc_pool_check(g_pool)) != KVC_OK) report("check", seq, st);
    }
    return NULL;
}

static void run(int with_disk) {
    char dir[128], path[256];
    temp_path(dir, sizeof dir, path, sizeof path, "tier.bin");
    g_pool = tier_pool(24, 1);
    OK(kvc_tier_attach_host(g_pool, 20));
    if (with_disk) OK(kvc_tier_attach_disk(g_pool, path, 48, 0));
    /* The shared prefix is computed once, before anyone can hit it. */
    int32_t toks[NT];
    prompt(toks, NT, 0);
    OK(kvc_alloc(g_pool, 1, toks, SHARED + 1, NULL, NULL));
    int32_t table[64];
    tier_table(g_pool, 1, table);
    unsigned char buf[TBLOCK_BYTES];
    for (int i = 0; i < SHARED / TBS; ++i) {
        block_bytes(toks + i * TBS, buf);
        OK(kvc_storage_copy_blocks(g_pool, &table[i], 1, buf, 0));
    }
    OK(kvc_free(g_pool, 1));
    g_failures = 0;
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; ++t) assert_int_equal(pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t), 0);
    for (int t = 0; t < THREADS; ++t) pthread_join(th[t], NULL);
    assert_int_equal(g_failures, 0);
    CHECK_POOL(g_pool);
    kvc_tier_stats h = tier_stats(g_pool, KVC_TIER_HOST);
    print_message("host: in %lld out %lld hits %lld evictions %lld; disk: in %lld hits %lld\n",
                  (long long)h.blocks_in, (long long)h.blocks_out, (long long)h.hits, (long long)h.evictions,
                  (long long)tier_stats(g_pool, KVC_TIER_DISK).blocks_in,
                  (long long)tier_stats(g_pool, KVC_TIER_DISK).hits);
    assert_true(h.blocks_in > 0);  /* the tiers were exercised (hits depend on the interleaving) */
    assert_int_equal(h.failures, 0);
    OK(kvc_pool_destroy(g_pool));
    unlink(path);
    rmdir(dir);
}

static void test_threads_host_tier(void **state) { (void)state; run(0); }
static void test_threads_host_and_disk(void **state) { (void)state; run(1); }

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threads_host_tier),
        cmocka_unit_test(test_threads_host_and_disk),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
