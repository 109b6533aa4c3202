//! `Keys::set_max_cached_tokens` (`kvc_keys_set_max_cached_tokens`): the prefix hit of requests
//! using the keys is capped, rounded down to a block, in `prefix_lookup`, `prefix_lookup_tiers`,
//! `can_alloc` and `alloc`.
mod common;

use common::{meta_pool, range};
use kvc::{AllocVerdict, Keys, TierHits};

#[test]
fn caps_the_hit_and_clear_removes_it() {
    let pool = meta_pool(4, 16); // prefix caching on (the default)
    assert!(pool.cached_config().prefix_caching);
    let prompt = range(100, 125); // 25 tokens: a hit can cover the first 24
    pool.alloc(1, &prompt[..24], None).unwrap();
    let mut keys = Keys::new().unwrap();
    assert_eq!(pool.prefix_lookup(&prompt, Some(&keys)).unwrap(), 24, "no cap");

    keys.set_max_cached_tokens(10).unwrap(); // rounded down to 8
    assert_eq!(pool.prefix_lookup(&prompt, Some(&keys)).unwrap(), 8, "cap 10");
    assert_eq!(
        pool.prefix_lookup_tiers(&prompt, Some(&keys)).unwrap(),
        TierHits { device: 8, host: 0, disk: 0 }
    );
    keys.set_max_cached_tokens(0).unwrap();
    assert_eq!(pool.prefix_lookup(&prompt, Some(&keys)).unwrap(), 0, "cap 0");

    keys.set_max_cached_tokens(10).unwrap();
    assert_eq!(pool.can_alloc(&prompt, Some(&keys)).unwrap(), AllocVerdict::OK);
    let free_before = pool.stats().unwrap().free_blocks;
    assert_eq!(pool.alloc(2, &prompt, Some(&keys)).unwrap(), 8, "cached tokens under cap 10");
    // Blocks 0 and 1 are shared; blocks 2..6 are fresh (block 2 is recomputed, not shared).
    assert_eq!(pool.stats().unwrap().free_blocks, free_before - 5);
    let (t1, t2) = (pool.block_table(1).unwrap(), pool.block_table(2).unwrap());
    assert_eq!(t1[..2], t2[..2], "{:?} {:?}", t1, t2);
    assert_ne!(t1[2], t2[2], "{:?} {:?}", t1, t2);

    // A refused value leaves the cap as it was.
    let e = keys.set_max_cached_tokens(-2).unwrap_err();
    assert!(e.is_invalid_arg(), "{}", e);
    assert_eq!(pool.prefix_lookup(&prompt, Some(&keys)).unwrap(), 8, "after a refused -2");
    keys.set_max_cached_tokens(-1).unwrap();
    assert_eq!(pool.prefix_lookup(&prompt, Some(&keys)).unwrap(), 24, "-1 removes the cap");
    keys.set_max_cached_tokens(10).unwrap();
    keys.clear().unwrap();
    assert_eq!(pool.prefix_lookup(&prompt, Some(&keys)).unwrap(), 24, "clear removes the cap");
    pool.check().unwrap();
}

/// With a sliding window the capped hit is the largest valid one below the cap.
#[test]
fn with_a_window_takes_the_largest_valid_hit_below_the_cap() {
    let pool = meta_pool(4, 16);
    pool.set_sliding_window(6).unwrap();
    let prompt = range(100, 125);
    pool.alloc(1, &prompt[..4], None).unwrap();
    for pos in 4..24 {
        // Blocks 0..3 are released as the sequence grows, still cached.
        pool.append(1, &prompt[pos..pos + 1], 0).unwrap();
    }
    let mut keys = Keys::new().unwrap();
    assert_eq!(pool.prefix_lookup(&prompt, Some(&keys)).unwrap(), 24, "no cap");
    keys.set_max_cached_tokens(23).unwrap();
    // Window from 15: blocks 3 and 4.
    assert_eq!(pool.prefix_lookup(&prompt, Some(&keys)).unwrap(), 20, "cap 23");
    keys.set_max_cached_tokens(17).unwrap();
    // Window from 11: blocks 2 and 3.
    assert_eq!(pool.prefix_lookup(&prompt, Some(&keys)).unwrap(), 16, "cap 17");
    assert_eq!(pool.alloc(2, &prompt, Some(&keys)).unwrap(), 16);
    let table = pool.block_table(2).unwrap();
    assert_eq!(table.len(), 7, "{:?}", table);
    assert_eq!(table[..2], [-1, -1], "{:?}", table);
    assert!(table[2] >= 0, "{:?}", table);
    pool.check().unwrap();
}
