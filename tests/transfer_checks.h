/* What the KV transfer suites (test_transfer.c: CPU pools; test_transfer_cuda.c: CUDA pools)
 * check alike: the importer's hit bytes against the byte oracle (tests/kv_oracle.h), the pool and
 * agent statistics, and that a failed import left nothing behind. Included by those two files
 * only, after cmocka.h, kv_oracle.h and kvc/kvc.h. */
#ifndef KVC_TESTS_TRANSFER_CHECKS_H
#define KVC_TESTS_TRANSFER_CHECKS_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define OK(x) assert_int_equal((x), KVC_OK)
#define BS 4        /* block size of every pool in the suites */
#define NBLK 64     /* blocks per pool */
#define MAXTOK 256  /* the longest prompt a suite holds in a stack buffer */

/* Allocates tokens[0, n + 1) in the importing pool and checks that the first `want` tokens hit and
 * that every hit byte is the oracle's. */
static void expect_hit_bytes(kvc_pool *p, uint64_t seq, const int32_t *tokens, int64_t n, int64_t want) {
    kvo_shape s;
    memset(&s, 0, sizeof s);
    OK(kvo_shape_of(p, &s));
    int32_t t[MAXTOK + 1];
    memcpy(t, tokens, sizeof(int32_t) * (size_t)n);
    t[n] = 4242;
    int64_t cached = -1;
    OK(kvc_alloc(p, seq, t, n + 1, NULL, &cached));
    assert_int_equal(cached, want);
    uint64_t ids[MAXTOK];
    kvo_ids(0, t, n, ids);
    int32_t table[MAXTOK];
    int64_t nb = 0;
    OK(kvc_seq_block_table(p, seq, table, MAXTOK, &nb));
    unsigned char *buf = malloc((size_t)s.block_stride);
    for (int64_t b = 0; b * BS < want; ++b) {
        int32_t bad_tok = -1;
        OK(kvo_read_block(p, table[b], buf));
        const int64_t bad = kvo_check_block(&s, buf, 0, ids + b * BS, BS, &bad_tok);
        if (bad) fail_msg("imported block %lld (id %d): %lld wrong elements, first at token %d", (long long)b, table[b],
                          (long long)bad, bad_tok);
    }
    free(buf);
    OK(kvc_free(p, seq));
    OK(kvc_pool_check(p));
}

static kvc_stats pool_stats(kvc_pool *p) {
    kvc_stats s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    OK(kvc_pool_stats(p, &s));
    return s;
}

static kvc_xfer_stats xstats(kvc_xfer_agent *a) {
    kvc_xfer_stats s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    OK(kvc_xfer_get_stats(a, &s));
    return s;
}

/* A failed import left nothing behind: no block used, nothing new cached. */
static void expect_clean(kvc_pool *p, int64_t cached_before) {
    OK(kvc_pool_check(p));
    kvc_stats s = pool_stats(p);
    assert_int_equal(s.used_blocks, 0);
    assert_int_equal(s.cached_blocks_total, cached_before);
}

#endif
