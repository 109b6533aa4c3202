/* KV events of the host and disk tiers (kvc_pool_set_tier_events), as a KV-aware router sees them:
 * a "router" replays every event into one table per tier (slot or block id -> hash) and must never
 * see a block stored twice in one place or removed from where it is not; at every quiet point (no
 * sequences) its tables must hold exactly as many blocks as each tier caches. Driven by a seeded mix
 * of prompts, evictions, promotions from disk, swaps, resets, an injected bad read and a persistent
 * restart. A threaded test checks the events' provenance while resets race swap-outs. Also: off by
 * default, the first release's smaller kvc_event, and the refusals. */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_tier_helpers.h"

enum { DEV_BLOCKS = 12, HOST_SLOTS = 6, DISK_SLOTS = 24, ID_CAP = 64, MAXP = 29, FAMILIES = 7 };

typedef struct entry {
    int used;
    uint64_t hi, lo;
} entry;

typedef struct router {
    entry where[3][ID_CAP];  /* [tier][block id or slot] */
    int64_t stored[3], removed[3], clears;
    uint64_t next_seq;
} router;

static void router_clear(router *r) {
    memset(r->where, 0, sizeof r->where);
    ++r->clears;
}

/* Pops and applies every pending event; checks each against the router's tables. */
static void drain(kvc_pool *p, router *r) {
    for (;;) {
        kvc_event e;
        memset(&e, 0, sizeof e);
        e.struct_size = sizeof e;
        int32_t toks[TBS];
        int32_t has = 0;
        OK(kvc_event_pop(p, &e, toks, TBS, &has));
        if (!has) return;
        assert_int_equal(e.sequence_number, r->next_seq); /* nothing dropped */
        ++r->next_seq;
        if (e.type == KVC_EVENT_ALL_BLOCKS_CLEARED) {
            router_clear(r);
            continue;
        }
        assert_true(e.tier >= KVC_TIER_DEVICE && e.tier <= KVC_TIER_DISK);
        assert_true(e.block_id >= 0 && e.block_id < ID_CAP);
        entry *x = &r->where[e.tier][e.block_id];
        if (e.type == KVC_EVENT_BLOCK_STORED) {
            if (x->used)
                fail_msg("tier %d id %d stored twice (seq %llu)", e.tier, e.block_id,
                         (unsigned long long)e.sequence_number);
            assert_int_equal(e.num_tokens, TBS);
            x->used = 1;
            x->hi = e.hash_hi;
            x->lo = e.hash_lo;
            ++r->stored[e.tier];
        } else {
            assert_int_equal(e.type, KVC_EVENT_BLOCK_REMOVED);
            if (!x->used || x->hi != e.hash_hi || x->lo != e.hash_lo)
                fail_msg("tier %d id %d removed but the router has %s there (seq %llu)", e.tier, e.block_id,
                         x->used ? "another block" : "nothing", (unsigned long long)e.sequence_number);
            x->used = 0;
            ++r->removed[e.tier];
        }
    }
}

static int64_t router_count(const router *r, int tier) {
    int64_t n = 0;
    for (int i = 0; i < ID_CAP; ++i) n += r->where[tier][i].used;
    return n;
}

/* A quiet point: no sequence holds a block, so the device's cached blocks are the free cached ones. */
static void expect_router_matches(kvc_pool *p, router *r) {
    drain(p, r);
    kvc_stats s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    OK(kvc_pool_stats(p, &s));
    assert_int_equal(s.used_blocks, 0);
    assert_int_equal(s.events_dropped, 0);
    assert_int_equal(router_count(r, KVC_TIER_DEVICE), s.cached_free_blocks);
    assert_int_equal(router_count(r, KVC_TIER_HOST), tier_stats(p, KVC_TIER_HOST).cached_blocks);
    assert_int_equal(router_count(r, KVC_TIER_DISK), tier_stats(p, KVC_TIER_DISK).cached_blocks);
}

/* Prompts share a family prefix, so later prompts hit (in some tier) what earlier ones left. */
static int64_t family_prompt(int32_t *t, uint64_t *rng) {
    *rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
    const int32_t fam = (int32_t)((*rng >> 33) % FAMILIES);
    const int64_t n = 5 + (int64_t)((*rng >> 40) % (MAXP - 5));
    for (int64_t i = 0; i < n; ++i) t[i] = fam * 1000 + (int32_t)i;
    return n;
}

static int setup(void **state) { return disk_fixture_setup(state); }
static int teardown(void **state) { return disk_fixture_teardown(state); }

static kvc_pool *events_pool(const char *path, int tier_events) {
    kvc_pool *p = tier_pool(DEV_BLOCKS, 1);
    if (tier_events) OK(kvc_pool_set_tier_events(p, 1));
    OK(kvc_tier_attach_host(p, HOST_SLOTS));
    OK(kvc_tier_attach_disk(p, path, DISK_SLOTS, KVC_DISK_PERSISTENT));
    return p;
}

/* One round of the mix; returns with no sequence alive. */
static void round_of_calls(kvc_pool *p, router *r, uint64_t *rng, int round) {
    int32_t t[MAXP];
    const int64_t n = family_prompt(t, rng);
    const uint64_t id = 100 + (uint64_t)round;
    int64_t cached = 0;
    OK(kvc_alloc(p, id, t, n, NULL, &cached));
    write_blocks(p, id, n / TBS, (uint32_t)(t[0] / 1000));
    drain(p, r);
    switch ((*rng >> 20) % 6) {
        case 4: { /* a checkpoint: every cached block not on disk is written there */
            OK(kvc_free(p, id));
            int64_t queued = -1;
            OK(kvc_tier_flush(p, &queued));
            assert_true(queued >= 0);
            return;
        }
        case 0: { /* preempted by swap, then resumed */
            if (kvc_swap_out(p, id, NULL) == KVC_OK) {
                churn(p, DEV_BLOCKS - 1, 5000);
                drain(p, r);
                if (kvc_swap_in(p, id, NULL) != KVC_OK) {  /* no room: give up the sequence */
                    OK(kvc_free(p, id));
                    return;
                }
            }
            break;
        }
        case 1: /* a burst of unrelated work evicts it down the tiers */
            OK(kvc_free(p, id));
            churn(p, DEV_BLOCKS, 5000);
            return;
        case 2: { /* the next prompt's first disk read (if any) is bad */
            OK(kvc_free(p, id));
            int32_t u[MAXP];
            const int64_t m = family_prompt(u, rng);
            kvct_disk_fault(KVCT_FAULT_READ_BITFLIP, 1);
            OK(kvc_alloc(p, id, u, m, NULL, &cached));
            kvct_disk_fault(KVCT_FAULT_NONE, 0);
            write_blocks(p, id, m / TBS, (uint32_t)(u[0] / 1000));
            break;
        }
        case 5: { /* a queued prompt's disk hits prefetched (one bad read now and then) */
            OK(kvc_free(p, id));
            int32_t u[MAXP];
            const int64_t m = family_prompt(u, rng);
            const int bad = (*rng >> 40) % 4 == 0;
            if (bad) kvct_disk_fault(KVCT_FAULT_READ_BITFLIP, 1);
            int64_t above_disk = -1;
            OK(kvc_tier_prefetch(p, u, m, NULL, &above_disk));
            kvct_disk_fault(KVCT_FAULT_NONE, 0);
            int64_t dev = -1, host = -1, disk = -1;
            lookup_tiers(p, u, m, &dev, &host, &disk);
            assert_int_equal(above_disk, dev + host);
            return;
        }
        default:
            break;
    }
    OK(kvc_free(p, id));
}

static void test_router_view_matches_tiers(void **state) {
    disk_fixture *f = *state;
    kvc_pool *p = events_pool(f->path, 1);
    router r;
    memset(&r, 0, sizeof r);
    /* KVC_TIER_EVENTS_SEED: another mix, for soaks (the default one is what CI runs). */
    const char *seed_env = getenv("KVC_TIER_EVENTS_SEED");
    uint64_t rng = seed_env ? strtoull(seed_env, NULL, 0) : 0x5eed;
    for (int round = 0; round < 300; ++round) {
        round_of_calls(p, &r, &rng, round);
        kvct_disk_fault(KVCT_FAULT_NONE, 0);
        if (round % 97 == 96) OK(kvc_prefix_cache_reset(p));
        expect_router_matches(p, &r);
        CHECK_POOL(p);
    }
    /* The mix reached every kind of tier event. */
    assert_true(r.stored[KVC_TIER_HOST] > 50 && r.removed[KVC_TIER_HOST] > 20);
    assert_true(r.stored[KVC_TIER_DISK] > 20 && r.removed[KVC_TIER_DISK] > 5);
    assert_true(r.clears >= 3);
    assert_true(tier_stats(p, KVC_TIER_DISK).hits > 0);
    assert_true(tier_stats(p, KVC_TIER_DISK).checksum_failures > 0);
    const int64_t on_disk = tier_stats(p, KVC_TIER_DISK).cached_blocks;
    assert_true(on_disk > 0);
    OK(kvc_pool_destroy(p));

    /* A restart: the recovered blocks are announced as stored on disk, slot by slot. */
    p = events_pool(f->path, 1);
    router r2;
    memset(&r2, 0, sizeof r2);
    drain(p, &r2);
    assert_int_equal(tier_stats(p, KVC_TIER_DISK).recovered_blocks, on_disk);
    assert_int_equal(router_count(&r2, KVC_TIER_DISK), on_disk);
    assert_int_equal(r2.stored[KVC_TIER_DISK], on_disk);
    int last = -1;
    for (int i = 0; i < ID_CAP; ++i)
        if (r2.where[KVC_TIER_DISK][i].used) {
            assert_true(i > last);
            last = i;
        }
    expect_router_matches(p, &r2);
    OK(kvc_pool_destroy(p));
}

/* A promotion planned before a reset whose read then fails: the block is gone with the reset's
 * ALL_BLOCKS_CLEARED, so no REMOVED (disk) may follow for it; a promotion that succeeds after the
 * reset stores nothing either. */
static void test_no_events_for_copies_planned_before_a_reset(void **state) {
    disk_fixture *f = *state;
    for (int bad_read = 0; bad_read < 2; ++bad_read) {
        kvc_pool *p = events_pool(f->path, 1);
        router r;
        memset(&r, 0, sizeof r);
        int32_t P[MAXP];
        prompt(P, 17, 21);
        OK(kvc_alloc(p, 1, P, 17, NULL, NULL));
        write_blocks(p, 1, 4, 7);
        OK(kvc_free(p, 1));
        churn(p, DEV_BLOCKS, 5000);  /* P: device -> host */
        churn(p, HOST_SLOTS + 2, 6000);
        int32_t Q[MAXP];
        prompt(Q, 25, 22);  /* 6 blocks through the host tier push P's blocks to disk */
        OK(kvc_alloc(p, 2, Q, 25, NULL, NULL));
        OK(kvc_free(p, 2));
        churn(p, DEV_BLOCKS, 5000);
        int64_t dev = -1, host = -1, disk = -1;
        lookup_tiers(p, P, 17, &dev, &host, &disk);
        assert_true(disk > 0);
        drain(p, &r);
        kvct_tier_hold_jobs(p, 1);
        if (bad_read) kvct_disk_fault(KVCT_FAULT_READ_BITFLIP, 1);
        OK(kvc_alloc(p, 3, P, 17, NULL, NULL));  /* promotions planned, not run */
        OK(kvc_free(p, 3));
        OK(kvc_prefix_cache_reset(p));
        kvct_tier_hold_jobs(p, 0);  /* the promotions run now, after the reset */
        kvct_disk_fault(KVCT_FAULT_NONE, 0);
        if (bad_read) assert_true(tier_stats(p, KVC_TIER_DISK).checksum_failures > 0);
        expect_router_matches(p, &r);
        assert_int_equal(router_count(&r, KVC_TIER_HOST) + router_count(&r, KVC_TIER_DISK), 0);
        CHECK_POOL(p);
        OK(kvc_pool_destroy(p));
    }
}

/* Without kvc_pool_set_tier_events only device events come, as before tiers reported any. */
static void test_off_by_default(void **state) {
    disk_fixture *f = *state;
    kvc_pool *p = events_pool(f->path, 0);
    router r;
    memset(&r, 0, sizeof r);
    uint64_t rng = 0x5eed;
    for (int round = 0; round < 60; ++round) {
        round_of_calls(p, &r, &rng, round);
        kvct_disk_fault(KVCT_FAULT_NONE, 0);
        drain(p, &r);
    }
    assert_true(r.stored[KVC_TIER_DEVICE] > 0 && r.removed[KVC_TIER_DEVICE] > 0);
    assert_int_equal(r.stored[KVC_TIER_HOST] + r.removed[KVC_TIER_HOST], 0);
    assert_int_equal(r.stored[KVC_TIER_DISK] + r.removed[KVC_TIER_DISK], 0);
    assert_true(tier_stats(p, KVC_TIER_HOST).blocks_in > 0); /* the tiers did work */
    /* Turned on later: events from then on (a router joining now learns of blocks it never saw
     * stored only as they leave, so only count them here). */
    OK(kvc_pool_set_tier_events(p, 1));
    churn(p, DEV_BLOCKS, 5000);
    int64_t host_events = 0;
    for (;;) {
        kvc_event e;
        memset(&e, 0, sizeof e);
        e.struct_size = sizeof e;
        int32_t toks[TBS], has = 0;
        OK(kvc_event_pop(p, &e, toks, TBS, &has));
        if (!has) break;
        host_events += e.tier == KVC_TIER_HOST;
    }
    assert_true(host_events > 0);
    OK(kvc_pool_set_tier_events(p, 0));
    OK(kvc_pool_destroy(p));
}

/* A caller built against the first release passes offsetof(kvc_event, tier): it gets every field
 * but tier, and nothing past its struct is written. */
static void test_first_release_event_size(void **state) {
    (void)state;
    kvc_pool *p = tier_pool(DEV_BLOCKS, 1);
    int32_t t[9];
    prompt(t, 9, 3);
    OK(kvc_alloc(p, 1, t, 9, NULL, NULL));
    union {
        kvc_event e;
        unsigned char bytes[sizeof(kvc_event)];
    } u;
    memset(u.bytes, 0xAB, sizeof u.bytes);
    u.e.struct_size = (uint32_t)offsetof(kvc_event, tier);
    int32_t toks[TBS], has = 0;
    OK(kvc_event_pop(p, &u.e, toks, TBS, &has));
    assert_int_equal(has, 1);
    assert_int_equal(u.e.type, KVC_EVENT_BLOCK_STORED);
    assert_int_equal(u.e.sequence_number, 0);
    assert_int_equal(toks[0], t[0]);
    for (size_t i = offsetof(kvc_event, tier); i < sizeof u.bytes; ++i) assert_int_equal(u.bytes[i], 0xAB);
    u.e.struct_size = (uint32_t)offsetof(kvc_event, tier) - 8;
    EXPECT_ERR(kvc_event_pop(p, &u.e, toks, TBS, &has), KVC_ERR_VERSION);
    OK(kvc_free(p, 1));
    OK(kvc_pool_destroy(p));
}

/* ---- resets racing another thread's tier copies ----------------------------------------------
 * Provenance: after ALL_BLOCKS_CLEARED, a block can enter the host tier only from the device or the
 * disk, and the disk only from the host, so it must have been stored there since the clear. A copy
 * planned before a reset and committed after it would break this (its block comes from before). */

enum { SEEN_CAP = 4096 };

typedef struct seen_set {
    uint64_t lo[SEEN_CAP];
    int n;
} seen_set;

static int seen_has(const seen_set *s, uint64_t lo) {
    for (int i = 0; i < s->n; ++i)
        if (s->lo[i] == lo) return 1;
    return 0;
}

static void seen_add(seen_set *s, uint64_t lo) {
    if (!seen_has(s, lo) && s->n < SEEN_CAP) s->lo[s->n++] = lo;
}

typedef struct race {
    kvc_pool *p;
    atomic_int stop;
    atomic_int swaps;
    atomic_llong clears, from_lower; /* the checker's progress: the swapper goes on until both are > 10 */
} race;

/* One sequence at a time, swapped out and back in: while it is out the pool has no block in use,
 * so a reset can land while the swap-out's copies (and its host victims' disk spills) are queued. */
static void *swapper(void *arg) {
    race *r = arg;
    int32_t t[MAXP];
    uint64_t rng = 0xabcdef;
    /* 1500 rounds, and more while the checking thread has yet to see enough (a slow or contended
     * machine, valgrind's one-thread-at-a-time scheduling), up to a hundred times that — each of
     * those extra rounds first sleeping a little, so that the checker gets the CPU. */
    for (int it = 0; it < 1500 || (it < 150000 && (atomic_load(&r->clears) <= 10 || atomic_load(&r->from_lower) <= 10));
         ++it) {
        if (it >= 1500) usleep(500);
        const int64_t n = family_prompt(t, &rng);
        const uint64_t id = 1 + (uint64_t)it;
        if (kvc_alloc(r->p, id, t, n, NULL, NULL) != KVC_OK) continue;
        if (kvc_swap_out(r->p, id, NULL) == KVC_OK) {
            atomic_fetch_add(&r->swaps, 1);
            (void)kvc_swap_in(r->p, id, NULL);
        }
        OK(kvc_free(r->p, id));
    }
    atomic_store(&r->stop, 1);
    return NULL;
}

static void test_reset_races_copies(void **state) {
    disk_fixture *f = *state;
    race r;
    memset(&r, 0, sizeof r);
    r.p = tier_pool(DEV_BLOCKS, 1);
    OK(kvc_pool_set_tier_events(r.p, 1));
    OK(kvc_tier_attach_host(r.p, 3)); /* small: swap-outs evict host blocks to disk */
    OK(kvc_tier_attach_disk(r.p, f->path, DISK_SLOTS, 0));
    seen_set *seen = calloc(3, sizeof *seen); /* per tier, since the last clear */
    int64_t clears = 0, from_lower = 0;
    pthread_t th;
    pthread_create(&th, NULL, swapper, &r);
    for (int done = 0; !done;) {
        done = atomic_load(&r.stop);
        if (kvc_prefix_cache_reset(r.p) == KVC_OK) atomic_store(&r.clears, ++clears);
        for (;;) {
            kvc_event e;
            memset(&e, 0, sizeof e);
            e.struct_size = sizeof e;
            int32_t toks[TBS], has = 0;
            OK(kvc_event_pop(r.p, &e, toks, TBS, &has));
            if (!has) break;
            if (e.type == KVC_EVENT_ALL_BLOCKS_CLEARED) {
                for (int k = 0; k < 3; ++k) seen[k].n = 0;
                continue;
            }
            if (e.type != KVC_EVENT_BLOCK_STORED) continue;
            if (e.tier == KVC_TIER_HOST) {
                if (!seen_has(&seen[KVC_TIER_DEVICE], e.hash_lo) && !seen_has(&seen[KVC_TIER_DISK], e.hash_lo))
                    fail_msg("host tier stored a block not cached since the last reset (seq %llu)",
                             (unsigned long long)e.sequence_number);
                ++from_lower;
            } else if (e.tier == KVC_TIER_DISK) {
                if (!seen_has(&seen[KVC_TIER_HOST], e.hash_lo))
                    fail_msg("disk tier stored a block not in the host tier since the last reset (seq %llu)",
                             (unsigned long long)e.sequence_number);
                ++from_lower;
            }
            seen_add(&seen[e.tier], e.hash_lo);
        }
        atomic_store(&r.from_lower, from_lower);
        usleep(20);  /* leave the swapper the CPU now and then (valgrind runs one thread at a time) */
    }
    pthread_join(th, NULL);
    print_message("%lld resets landed, %d swap-outs, %lld host/disk stores checked\n", (long long)clears,
                  atomic_load(&r.swaps), (long long)from_lower);
    assert_true(clears > 10);
    assert_true(from_lower > 10);
    CHECK_POOL(r.p);
    free(seen);
    OK(kvc_pool_destroy(r.p));
}

static void test_refusals(void **state) {
    (void)state;
    kvc_pool_config cfg;
    OK(kvc_pool_config_default(&cfg));
    cfg.num_blocks = 4;
    cfg.event_capacity = 0;
    kvc_pool *p = NULL;
    OK(kvc_pool_create(&cfg, &p));
    EXPECT_ERR(kvc_pool_set_tier_events(p, 1), KVC_ERR_UNSUPPORTED);
    OK(kvc_pool_set_tier_events(p, 0));
    EXPECT_ERR(kvc_pool_set_tier_events(p, 2), KVC_ERR_INVALID_ARG);
    EXPECT_ERR(kvc_pool_set_tier_events(NULL, 1), KVC_ERR_NULL_ARG);
    OK(kvc_pool_destroy(p));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_router_view_matches_tiers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_events_for_copies_planned_before_a_reset, setup, teardown),
        cmocka_unit_test_setup_teardown(test_off_by_default, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reset_races_copies, setup, teardown),
        cmocka_unit_test(test_first_release_event_size),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
