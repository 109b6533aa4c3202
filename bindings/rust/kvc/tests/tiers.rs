//! Memory tiers through the safe API on the CPU backend: swap round trip with identical bytes,
//! operation ids, preemption helpers, prefix spill to the host and disk tiers and re-hit, tier
//! statistics, and the error paths of every tier function.
mod common;

use common::{cpu_config, meta_pool, range};
use kvc::{
    EventType, OpId, Pool, Tier, DISK_KEY_MAX_LEN, DISK_KEY_MIN_LEN, DISK_NO_DIRECT, DISK_PERSISTENT,
    MAX_DISK_IDENTITY_LEN,
};

/// 4-token blocks, 2 layers x 2 KV heads x head_dim 8 x F32 = 1024-byte blocks.
fn tier_pool(num_blocks: i64) -> Pool {
    let pool = Pool::new(&cpu_config(4, num_blocks, 2, 2, 8)).expect("cpu pool");
    assert_eq!(pool.cached_config().bytes_per_block().unwrap(), 1024);
    pool
}

fn pattern(seed: u8, blocks: usize) -> Vec<u8> {
    (0..blocks * 1024).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

/// Takes every block of the pool once with uncached one-block sequences, then frees them: cached
/// refcount-0 blocks are evicted (and spill one tier down).
fn churn(pool: &Pool, blocks: u64) {
    for i in 0..blocks {
        pool.alloc(1000 + i, &[-1 - i as i32, -2, -3], None).unwrap();
    }
    for i in 0..blocks {
        pool.free(1000 + i).unwrap();
    }
}

#[test]
fn swap_round_trip_restores_bytes() {
    let pool = tier_pool(8);
    pool.attach_host_tier(8).unwrap();
    pool.alloc(1, &range(0, 10), None).unwrap();
    let table = pool.block_table(1).unwrap();
    let bytes = pattern(7, 3);
    pool.copy_blocks_from_host(&table, &bytes).unwrap();

    let cost = pool.preemption_cost(1).unwrap();
    assert_eq!(cost.swap_bytes, 3 * 1024);
    assert_eq!(cost.recompute_tokens, 10);

    let op = pool.swap_out(1).unwrap();
    pool.op_wait(op).unwrap();
    assert!(pool.op_done(op).unwrap());
    assert_eq!(pool.block_table(1).unwrap(), vec![-1, -1, -1]);
    assert!(pool.append(1, &[1], 0).unwrap_err().is_state());
    let host = pool.tier_stats(Tier::Host).unwrap();
    assert_eq!(host.capacity_blocks, 8);
    assert_eq!(host.held_blocks, 3);
    assert_eq!(host.bytes_in, 3 * 1024);
    pool.check().unwrap();

    // Overwrite every device block, then swap back in.
    pool.alloc(2, &range(100, 132), None).unwrap();
    let all = pool.block_table(2).unwrap();
    pool.copy_blocks_from_host(&all, &pattern(99, 8)).unwrap();
    pool.free(2).unwrap();
    let op2 = pool.swap_in(1).unwrap();
    assert_ne!(op2, op);
    pool.op_wait(op2).unwrap();
    let table = pool.block_table(1).unwrap();
    assert_eq!(pool.copy_blocks_to_host(&table).unwrap(), bytes);
    assert_eq!(pool.tier_stats(Tier::Device).unwrap().blocks_in, 3);
    pool.append(1, &[10], 0).unwrap();
    pool.check().unwrap();
}

#[test]
fn preempt_recompute_frees_and_reports_tokens() {
    let pool = tier_pool(8);
    pool.alloc(5, &range(0, 9), None).unwrap();
    assert_eq!(pool.preempt_recompute(5).unwrap(), 9);
    assert!(pool.num_tokens(5).unwrap_err().is_unknown_seq());
    assert_eq!(pool.stats().unwrap().used_blocks, 0);
}

/// One allocation evicts more cached blocks than the host tier has slots to take: the chain's head
/// gets the slot (its child could never be reached without it), and the tier stats count what a
/// lookup can reach.
#[test]
fn spills_keep_chain_heads() {
    let pool = tier_pool(4);
    pool.attach_host_tier(1).unwrap();
    pool.alloc(1, &range(0, 9), None).unwrap(); // blocks 0, 1 cached + 1 partial
    pool.free(1).unwrap();
    pool.alloc(2, &range(100, 116), None).unwrap(); // all 4 device blocks: evicts both at once
    pool.free(2).unwrap();
    let hits = pool.prefix_lookup_tiers(&range(0, 9), None).unwrap();
    assert_eq!((hits.device, hits.host, hits.disk), (0, 4, 0));
    let host = pool.tier_stats(Tier::Host).unwrap();
    assert_eq!((host.cached_blocks, host.reachable_blocks), (1, 1));
    let device = pool.tier_stats(Tier::Device).unwrap();
    assert_eq!((device.cached_blocks, device.reachable_blocks), (4, 4));
    pool.check().unwrap();
}

#[test]
fn spill_and_rehit_from_host_and_disk() {
    let dir = std::env::temp_dir().join(format!("kvc_rust_tiers_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("tier.bin");
    let pool = tier_pool(8);
    pool.attach_host_tier(4).unwrap();
    pool.attach_disk_tier(&file, 16, DISK_NO_DIRECT).unwrap();
    let disk = pool.tier_stats(Tier::Disk).unwrap();
    assert_eq!(disk.capacity_blocks, 16);
    assert!(!disk.direct_io);

    let p = range(0, 17); // 4 full blocks
    pool.alloc(1, &p, None).unwrap();
    let bytes = pattern(3, 4);
    pool.copy_blocks_from_host(&pool.block_table(1).unwrap()[..4], &bytes).unwrap();
    pool.free(1).unwrap();
    churn(&pool, 8);
    let hits = pool.prefix_lookup_tiers(&p, None).unwrap();
    assert_eq!((hits.device, hits.host, hits.disk), (0, 16, 0));
    assert_eq!(pool.prefix_lookup(&p, None).unwrap(), 16);

    // Another prompt pushes p from the host to the disk.
    let r = range(500, 517);
    pool.alloc(2, &r, None).unwrap();
    pool.free(2).unwrap();
    churn(&pool, 8);
    let hits = pool.prefix_lookup_tiers(&p, None).unwrap();
    assert_eq!((hits.device, hits.host, hits.disk), (0, 0, 16));
    assert_eq!(hits.total(), 16);

    assert_eq!(pool.alloc(3, &p, None).unwrap(), 16);
    assert_eq!(pool.copy_blocks_to_host(&pool.block_table(3).unwrap()[..4]).unwrap(), bytes);
    let disk = pool.tier_stats(Tier::Disk).unwrap();
    assert_eq!(disk.hits, 4);
    assert_eq!(disk.failures, 0);
    assert!(!disk.persistent);
    pool.check().unwrap();
    drop(pool);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn tier_errors() {
    let pool = tier_pool(8);
    pool.alloc(1, &range(0, 6), None).unwrap();
    assert!(pool.swap_out(1).unwrap_err().is_state()); // no host tier
    assert!(pool.swap_in(1).unwrap_err().is_state());
    assert!(pool.op_done(OpId(1)).unwrap_err().is_invalid_arg());
    assert!(pool.op_wait(OpId(0)).unwrap_err().is_invalid_arg());
    assert!(pool.attach_disk_tier(std::path::Path::new("/tmp/kvc_never"), 4, 0).unwrap_err().is_state());
    assert!(pool.attach_host_tier(0).unwrap_err().is_invalid_arg());
    pool.attach_host_tier(4).unwrap();
    assert!(pool.attach_host_tier(4).unwrap_err().is_state());
    assert!(pool
        .attach_disk_tier(std::path::Path::new("/nonexistent_kvc_dir/x.bin"), 4, DISK_PERSISTENT)
        .unwrap_err()
        .is_io());
    assert!(pool.attach_disk_tier(std::path::Path::new("/tmp/a\0b"), 4, 0).unwrap_err().is_invalid_arg());
    assert!(pool.swap_out(99).unwrap_err().is_unknown_seq());
    assert!(pool.swap_in(1).unwrap_err().is_state()); // not swapped out
    let op = pool.swap_out(1).unwrap();
    assert!(pool.swap_out(1).unwrap_err().is_state());
    assert!(pool.op_done(OpId(op.0 + 100)).unwrap_err().is_invalid_arg());
    assert!(pool.preempt_recompute(99).unwrap_err().is_unknown_seq());
    assert!(pool.preemption_cost(99).unwrap_err().is_unknown_seq());
    assert!(pool.prefix_lookup_tiers(&[], None).unwrap_err().is_invalid_arg());
    pool.free(1).unwrap();
    pool.check().unwrap();

    let meta = meta_pool(4, 8);
    let err = meta.attach_host_tier(4).unwrap_err();
    assert!(err.is_state());
    assert!(err.message().contains("kvc_tier_attach_host"));
    assert_eq!(meta.tier_stats(Tier::Host).unwrap().capacity_blocks, 0);
    assert_eq!(meta.tier_stats(Tier::Device).unwrap().capacity_blocks, 8);
}

#[test]
fn tier_events_follow_a_spill() {
    let pool = tier_pool(4);
    pool.set_tier_events(true).unwrap();
    pool.attach_host_tier(8).unwrap();
    pool.alloc(1, &range(0, 9), None).unwrap(); // blocks 0, 1 cached + 1 partial
    pool.free(1).unwrap();
    pool.alloc(2, &range(100, 116), None).unwrap(); // evicts 0, 1 into the host tier
    pool.free(2).unwrap();
    let mut on_device = std::collections::HashSet::new();
    let (mut removed_from_device, mut stored_on_host) = (0, 0);
    while let Some(e) = pool.pop_event().unwrap() {
        match (e.kind, e.tier) {
            (EventType::BLOCK_STORED, Tier::Device) => {
                on_device.insert(e.hash);
            }
            (EventType::BLOCK_REMOVED, Tier::Device) => removed_from_device += 1,
            (EventType::BLOCK_STORED, Tier::Host) => {
                assert!(on_device.contains(&e.hash), "host tier stored a block the device never had: {e:?}");
                assert_eq!(e.tokens.len(), 4);
                stored_on_host += 1;
            }
            _ => {}
        }
    }
    assert_eq!((removed_from_device, stored_on_host), (2, 2));
    pool.set_tier_events(false).unwrap();

    let mut cfg = cpu_config(4, 4, 2, 2, 8);
    cfg.event_capacity = 0;
    let no_events = Pool::new(&cfg).unwrap();
    assert!(no_events.set_tier_events(true).unwrap_err().is_unsupported());
    no_events.set_tier_events(false).unwrap();
}

#[test]
fn flush_then_warm_restart() {
    let dir = std::env::temp_dir().join(format!("kvc-rust-flush-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("kv.bin");
    let open = || {
        let pool = tier_pool(8);
        pool.attach_host_tier(8).unwrap();
        pool.attach_disk_tier(&path, 16, DISK_PERSISTENT).unwrap();
        pool
    };
    assert!(tier_pool(8).tier_flush().unwrap_err().is_state()); // no disk tier
    let pool = open();
    pool.alloc(1, &range(0, 9), None).unwrap(); // blocks 0, 1 cached + 1 partial, on the device only
    pool.free(1).unwrap();
    assert_eq!(pool.tier_flush().unwrap(), 2);
    assert_eq!(pool.tier_flush().unwrap(), 0);
    drop(pool);

    let pool = open();
    assert_eq!(pool.tier_stats(Tier::Disk).unwrap().recovered_blocks, 2);
    let hits = pool.prefix_lookup_tiers(&range(0, 9), None).unwrap();
    assert_eq!((hits.device, hits.host, hits.disk), (0, 0, 8));
    // A prefetch reads them up into the host tier; the allocation then needs no disk read.
    assert_eq!(pool.tier_prefetch(&range(0, 9), None).unwrap(), 8);
    let hits = pool.prefix_lookup_tiers(&range(0, 9), None).unwrap();
    assert_eq!((hits.device, hits.host, hits.disk), (0, 8, 0));
    let read = pool.tier_stats(Tier::Disk).unwrap().blocks_out;
    assert_eq!(pool.alloc(1, &range(0, 9), None).unwrap(), 8);
    assert_eq!(pool.tier_stats(Tier::Disk).unwrap().blocks_out, read);
    assert!(pool.tier_prefetch(&[], None).unwrap_err().is_invalid_arg());
    assert!(tier_pool(8).tier_prefetch(&range(0, 9), None).unwrap_err().is_state());
    drop(pool);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Caches range(0, 9) (blocks 0, 1 + a partial one), writes the two full blocks to the disk tier
/// and drops the pool.
fn write_range_to_disk(pool: Pool) {
    pool.alloc(1, &range(0, 9), None).unwrap();
    pool.free(1).unwrap();
    assert_eq!(pool.tier_flush().unwrap(), 2);
}

/// What a persistent attach found of the blocks write_range_to_disk wrote.
fn expect_recovered(pool: Pool, what: &str, recovered: i64, foreign: i64) {
    let disk = pool.tier_stats(Tier::Disk).unwrap();
    assert_eq!((disk.recovered_blocks, disk.foreign_blocks), (recovered, foreign), "{what}");
    assert_eq!(pool.prefix_lookup_tiers(&range(0, 9), None).unwrap().disk, 4 * recovered, "{what}");
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("kvc-rust-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn disk_identity_guards_a_persistent_file() {
    let dir = temp_dir("identity");
    let path = dir.join("kv.bin");
    let open = |identity: &str| {
        let pool = tier_pool(8);
        pool.attach_host_tier(8).unwrap();
        pool.attach_disk_tier_with_identity(&path, 16, DISK_PERSISTENT, identity).unwrap();
        pool
    };
    write_range_to_disk(open("model-a;tp=0/2"));
    // Another rank's shard of the same layout: nothing recovered, both slots foreign.
    expect_recovered(open("model-a;tp=1/2"), "another rank", 0, 2);
    expect_recovered(open("model-a;tp=0/2"), "the same rank", 2, 0);

    // Bad input: NUL byte (refused here), too long (refused by the library); no tier attached.
    let pool = tier_pool(8);
    pool.attach_host_tier(8).unwrap();
    let err = pool.attach_disk_tier_with_identity(&path, 16, 0, "a\0b").unwrap_err();
    assert!(err.is_invalid_arg());
    let long = "x".repeat(MAX_DISK_IDENTITY_LEN + 1);
    let err = pool.attach_disk_tier_with_identity(&path, 16, 0, &long).unwrap_err();
    assert!(err.is_invalid_arg());
    assert!(err.message().contains("identity"));
    assert_eq!(pool.tier_stats(Tier::Disk).unwrap().capacity_blocks, 0);
    drop(pool);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Keyed slots: recovered with their key only (another key or none finds them foreign), the
/// caller's key may be wiped once attached, bad keys change nothing, not even the file.
#[test]
fn disk_key_guards_a_persistent_file() {
    let dir = temp_dir("keyed");
    let path = dir.join("kv.bin");
    let key_a = [0xa5u8; 32];
    let open = |key: Option<&[u8]>| {
        let pool = tier_pool(8);
        pool.attach_host_tier(8).unwrap();
        match key {
            Some(k) => pool.attach_disk_tier_keyed(&path, 16, DISK_PERSISTENT, "m", k).unwrap(),
            None => pool.attach_disk_tier_with_identity(&path, 16, DISK_PERSISTENT, "m").unwrap(),
        }
        pool
    };
    let mut key = key_a;
    let pool = open(Some(&key));
    key.fill(0); // the tier MACs with its own copy
    write_range_to_disk(pool);
    expect_recovered(open(Some(&[0x5a; 32])), "another key", 0, 2);
    expect_recovered(open(None), "no key", 0, 2);
    expect_recovered(open(Some(&key_a)), "the key", 2, 0);

    let other = dir.join("other.bin");
    let pool = tier_pool(8);
    pool.attach_host_tier(8).unwrap();
    for bad in [DISK_KEY_MIN_LEN - 1, DISK_KEY_MAX_LEN + 1, 0] {
        let err = pool.attach_disk_tier_keyed(&other, 16, 0, "m", &vec![1u8; bad]).unwrap_err();
        assert!(err.is_invalid_arg(), "{bad}-byte key: {err}");
        assert!(err.message().contains("key_len"), "{err}");
    }
    let err = pool.attach_disk_tier_keyed(&other, 16, 0, "a\0b", &key_a).unwrap_err();
    assert!(err.is_invalid_arg());
    assert_eq!(pool.tier_stats(Tier::Disk).unwrap().capacity_blocks, 0);
    assert!(!other.exists());
    pool.attach_disk_tier_keyed(&other, 16, 0, "", &[7u8; DISK_KEY_MAX_LEN]).unwrap(); // the limit itself
    assert_eq!(pool.tier_stats(Tier::Disk).unwrap().capacity_blocks, 16);
    drop(pool);
    std::fs::remove_dir_all(&dir).unwrap();
}
