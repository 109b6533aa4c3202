/* Spills under host-slot pressure keep only blocks a prefix lookup can reach (issue [tier-hardening]
 * 6, README "Tiers"). A lower-tier block is reachable only when every block before it in its chain
 * is cached somewhere (device, host or disk): a lookup walks the chain from its head.
 *   - The issue's setup: device 16 blocks, host 4 slots, disk 64; six prompts of 8 full blocks in
 *     a row, each allocated, written and freed. Each allocation evicts 8 device blocks while the
 *     host has 4 slots to take, so the spill must keep the chain heads: before the fix it kept the
 *     deepest blocks and dropped the heads (17 blocks stored in the host and disk tiers, none
 *     reachable). What is restored from the lower tiers afterwards is checked byte for byte with
 *     the content-addressed oracle (tests/kv_oracle.h).
 *   - A block whose parent is cached nowhere is not spilled (it could never be reached).
 *   - kvc_tier_stats.reachable_blocks counts, per tier, the cached blocks whose whole chain is
 *     cached somewhere; retention priorities can cut a chain in the host tier, and it says so. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "test_oracle_helpers.h"

enum { DEVICE = 16, HOST = 4, DISK = 64, PROMPTS = 6, FULL = 8, PROMPT_TOKENS = FULL * TBS + 1 };

static void issue_prompt(int32_t *tokens, int i) { prompt(tokens, PROMPT_TOKENS, 40 + i); }

/* What the lower tiers hold and what the prompts' lookups reach of it, in blocks. */
typedef struct reach {
    int64_t stored;   /* cached host + disk slots */
    int64_t reached;  /* sum over the prompts of the host + disk blocks their lookups count */
} reach;

static reach lower_tier_reach(kvc_pool *p) {
    reach r = {tier_stats(p, KVC_TIER_HOST).cached_blocks + tier_stats(p, KVC_TIER_DISK).cached_blocks, 0};
    int32_t tokens[PROMPT_TOKENS];
    for (int i = 0; i < PROMPTS; ++i) {
        issue_prompt(tokens, i);
        int64_t host = 0, disk = 0;
        lookup_tiers(p, tokens, PROMPT_TOKENS, NULL, &host, &disk);
        r.reached += (host + disk) / TBS;
    }
    return r;
}

/* The issue's pool, after its six prompts: each allocated, its KV written by the oracle, freed. */
static kvc_pool *issue_pool(const disk_fixture *f, oracle_pool *o) {
    kvc_pool *p = tier_pool(DEVICE, 1);
    OK(kvc_tier_attach_host(p, HOST));
    OK(kvc_tier_attach_disk(p, f->path, DISK, KVC_DISK_NO_DIRECT));
    oracle_init(o, p);
    int32_t tokens[PROMPT_TOKENS];
    for (int i = 0; i < PROMPTS; ++i) {
        issue_prompt(tokens, i);
        OK(kvc_alloc(p, 1 + (uint64_t)i, tokens, PROMPT_TOKENS, NULL, NULL));
        oracle_write(o, 1 + (uint64_t)i, tokens, 0, PROMPT_TOKENS);
        OK(kvc_free(p, 1 + (uint64_t)i));
        CHECK_POOL(p);
    }
    return p;
}

static void test_slot_pressure_spills_stay_reachable(void **state) {
    const disk_fixture *f = *state;
    oracle_pool o;
    kvc_pool *p = issue_pool(f, &o);
    const reach r = lower_tier_reach(p);
    const kvc_tier_stats h = tier_stats(p, KVC_TIER_HOST), d = tier_stats(p, KVC_TIER_DISK);
    print_message("lower tiers: %lld blocks stored (host %lld, disk %lld), %lld reachable by the prompts' lookups\n",
                  (long long)r.stored, (long long)h.cached_blocks, (long long)d.cached_blocks, (long long)r.reached);
    assert_true(r.stored > 0);
    assert_int_equal(r.reached, r.stored);
    assert_int_equal(h.reachable_blocks, h.cached_blocks);
    assert_int_equal(d.reachable_blocks, d.cached_blocks);
    assert_int_equal(tier_stats(p, KVC_TIER_DEVICE).reachable_blocks, tier_stats(p, KVC_TIER_DEVICE).cached_blocks);
    OK(kvc_pool_destroy(p));
}

/* Every prompt of the issue's setup allocated again: its hit (device, host and disk blocks, the
 * lower ones restored) holds the KV the oracle wrote for it. */
static void test_restored_prefixes_hold_their_bytes(void **state) {
    const disk_fixture *f = *state;
    oracle_pool o;
    kvc_pool *p = issue_pool(f, &o);
    int32_t tokens[PROMPT_TOKENS];
    int64_t restored = 0;
    for (int i = 0; i < PROMPTS; ++i) {
        issue_prompt(tokens, i);
        int64_t dev = 0, host = 0, disk = 0, cached = -1;
        lookup_tiers(p, tokens, PROMPT_TOKENS, &dev, &host, &disk);
        OK(kvc_alloc(p, 100 + (uint64_t)i, tokens, PROMPT_TOKENS, NULL, &cached));
        assert_int_equal(cached, dev + host + disk);
        oracle_expect(&o, 100 + (uint64_t)i, tokens, cached);
        OK(kvc_free(p, 100 + (uint64_t)i));
        CHECK_POOL(p);
        restored += (host + disk) / TBS;
    }
    assert_true(restored >= HOST);
    OK(kvc_pool_destroy(p));
}

/* Device 4 blocks, host 1 slot held by a swapped-out sequence: prompt A's head, evicted first (a
 * lower retention priority), finds no slot and is dropped. Once the slot is free again, A's second
 * block is evicted: its parent is cached nowhere, so it stays out of the host tier. */
static void test_block_without_parent_is_not_spilled(void **state) {
    (void)state;
    kvc_pool *p = tier_pool(4, 1);
    OK(kvc_tier_attach_host(p, 1));
    int32_t s[TBS - 1], A[2 * TBS + 1];
    prompt(s, TBS - 1, 70);
    prompt(A, 2 * TBS + 1, 71);
    OK(kvc_alloc(p, 1, s, TBS - 1, NULL, NULL));
    OK(kvc_swap_out(p, 1, NULL));
    alloc_free(p, 2, A, 2 * TBS + 1, 50, 7);
    alloc_free(p, 3, A, TBS + 1, 10, 7); /* A's head now at priority 10: evicted before its child */
    churn(p, 3, 100);                    /* 2 unhashed blocks, then A's head: no host slot */
    assert_int_equal(tier_stats(p, KVC_TIER_HOST).cached_blocks, 0);
    const kvc_tier_stats dev = tier_stats(p, KVC_TIER_DEVICE); /* A's second block, behind a hole */
    assert_int_equal(dev.cached_blocks, 1);
    assert_int_equal(dev.reachable_blocks, 0);
    OK(kvc_swap_in(p, 1, NULL));
    OK(kvc_free(p, 1));
    churn(p, 4, 100); /* 3 unhashed blocks, then A's second block, whose parent is gone */
    CHECK_POOL(p);
    const kvc_tier_stats h = tier_stats(p, KVC_TIER_HOST);
    assert_int_equal(h.cached_blocks, 0);
    assert_int_equal(h.blocks_in, 1); /* the swap-out only */
    OK(kvc_pool_destroy(p));
}

/* Device 8 blocks, host 4 slots, no disk. Prompt A (4 full blocks) spills whole, its first two
 * blocks at priority 10 after a hit at that priority. Then prompt B's head spills into the full
 * host tier, whose victim is the lowest priority's LRU block: A's second. A's first block and B's
 * stay reachable; A's third and fourth are still cached but behind a hole. */
static void test_reachable_blocks_counts_whole_chains(void **state) {
    (void)state;
    kvc_pool *p = tier_pool(8, 1);
    OK(kvc_tier_attach_host(p, 4));
    int32_t A[4 * TBS + 1], B[TBS + 1];
    prompt(A, 4 * TBS + 1, 80);
    prompt(B, TBS + 1, 81);
    alloc_free(p, 1, A, 4 * TBS + 1, 50, 8);
    alloc_free(p, 2, A, 2 * TBS + 1, 10, 8);
    churn(p, 6, 100); /* 4 unhashed blocks, then A's second and first (priority 10) */
    churn(p, 8, 100); /* 6 unhashed blocks, then A's fourth and third */
    kvc_tier_stats h = tier_stats(p, KVC_TIER_HOST);
    assert_int_equal(h.cached_blocks, 4);
    assert_int_equal(h.reachable_blocks, 4);
    alloc_free(p, 3, B, TBS + 1, 50, 9);
    churn(p, 8, 100); /* 7 unhashed blocks, then B's head: the host drops A's second block */
    CHECK_POOL(p);
    h = tier_stats(p, KVC_TIER_HOST);
    assert_int_equal(h.cached_blocks, 4);
    assert_int_equal(h.reachable_blocks, 2);
    int64_t host = 0;
    lookup_tiers(p, A, 4 * TBS + 1, NULL, &host, NULL);
    assert_int_equal(host, TBS);
    lookup_tiers(p, B, TBS + 1, NULL, &host, NULL);
    assert_int_equal(host, TBS);
    OK(kvc_pool_destroy(p));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_slot_pressure_spills_stay_reachable, disk_fixture_setup,
                                        disk_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_restored_prefixes_hold_their_bytes, disk_fixture_setup,
                                        disk_fixture_teardown),
        cmocka_unit_test(test_block_without_parent_is_not_spilled),
        cmocka_unit_test(test_reachable_blocks_counts_whole_chains),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
