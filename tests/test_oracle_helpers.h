/* The byte oracle (tests/kv_oracle.h) on the tier suites' pool shape (test_tier_helpers.h):
 * writes a sequence's KV as a function of its prefix, and checks what a sequence's blocks hold
 * against what its positions must hold. Header-only. */
#ifndef KVC_TEST_ORACLE_HELPERS_H
#define KVC_TEST_ORACLE_HELPERS_H

#include "kv_oracle.h"
#include "test_tier_helpers.h"

enum { MAX_POS = 64 };

typedef struct oracle_pool {
    kvc_pool *pool;
    kvo_shape shape;
    float scratch[2 * 2 * MAX_POS * 2 * 8];  /* kvo_write's: 2 layers x K,V x MAX_POS tokens x 2 heads x dim 8 */
    unsigned char block[TBLOCK_BYTES];
} oracle_pool;

static inline void oracle_init(oracle_pool *o, kvc_pool *p) {
    o->pool = p;
    OK(kvo_shape_of(p, &o->shape));
    assert_int_equal(o->shape.block_stride, TBLOCK_BYTES);
    assert_true(kvo_scratch_floats(&o->shape, MAX_POS) <= (int64_t)(sizeof o->scratch / sizeof(float)));
}

/* Writes the oracle's KV of positions [first, first + n) of seq (tokens: the whole sequence). */
static inline void oracle_write(oracle_pool *o, uint64_t seq, const int32_t *tokens, int64_t first, int64_t n) {
    uint64_t ids[MAX_POS];
    int64_t slots[MAX_POS];
    assert_true(first + n <= MAX_POS);
    kvo_ids(0, tokens, first + n, ids);
    OK(kvc_seq_slot_mapping(o->pool, seq, first, n, slots, MAX_POS));
    OK(kvo_write(o->pool, &o->shape, slots, ids + first, n, o->scratch, NULL));
}

/* Asserts positions [0, n) of seq hold the oracle's KV of tokens[0..n). */
static inline void oracle_expect(oracle_pool *o, uint64_t seq, const int32_t *tokens, int64_t n) {
    uint64_t ids[MAX_POS];
    int32_t table[64];
    assert_true(n <= MAX_POS);
    kvo_ids(0, tokens, n, ids);
    assert_true(tier_table(o->pool, seq, table) * TBS >= n);
    for (int64_t b = 0; b * TBS < n; ++b) {
        const int32_t count = (int32_t)(n - b * TBS < TBS ? n - b * TBS : TBS);
        int32_t bad_tok = -1;
        OK(kvo_read_block(o->pool, table[b], o->block));
        const int64_t bad = kvo_check_block(&o->shape, o->block, 0, ids + b * TBS, count, &bad_tok);
        if (bad != 0)
            fail_msg("sequence %llu block %lld (id %d): %lld wrong elements, first at token %d",
                     (unsigned long long)seq, (long long)b, table[b], (long long)bad, bad_tok);
    }
}

#endif
