//! Every public function of the safe API against the real library, on its success path (error
//! paths: errors.rs; threads: threads.rs; the shared scenario: conformance.rs).
mod common;

use common::{meta_pool, range};
use kvc::{
    AllocVerdict, Backend, CopyPair, Dtype, EventType, Keys, Pool, PoolConfig, Status, PRIORITY_DEFAULT,
    PRIORITY_MAX,
};

#[test]
fn version_matches_header() {
    assert_eq!(kvc::version(), kvc::HEADER_VERSION);
    let want = format!(
        "{}.{}.{}",
        kvc::HEADER_VERSION / 10000,
        kvc::HEADER_VERSION / 100 % 100,
        kvc::HEADER_VERSION % 100
    );
    assert_eq!(kvc::version_string(), want);
}

#[test]
fn status_names_and_descriptions() {
    assert!(kvc::status_str(Status::OUT_OF_BLOCKS.0 as i32).contains("OUT_OF_BLOCKS"));
    assert!(Status::UNKNOWN_SEQ.description().contains("UNKNOWN_SEQ"));
    assert_eq!(Status::from_name("MAX_LEN"), Some(Status::MAX_LEN));
    assert_eq!(Status::MAX_LEN.name(), "MAX_LEN");
    assert_eq!(Status::from_name("NOPE"), None);
    // A value from a newer library stays representable and printable.
    assert_eq!(Status(9999).name(), "UNKNOWN");
    assert_eq!(format!("{:?}", Status(9999)), "Status(9999)");
    assert!(kvc::status_str(9999).contains("unknown"));
}

#[test]
fn config_defaults_and_sizing() {
    let d = PoolConfig::default();
    assert_eq!(d.block_size, 16);
    assert!((d.watermark - 0.01).abs() < 1e-12);
    assert!(d.prefix_caching);
    assert_eq!(d.backend, Backend::NONE);
    let cfg = PoolConfig { num_layers: 2, num_kv_heads: 4, head_dim: 8, kv_dtype: Dtype::F16, ..d };
    // 2 (K,V) x 16 tokens x 4 heads x 8 dims x 2 bytes x 2 layers
    assert_eq!(cfg.bytes_per_block().unwrap(), 2 * 16 * 4 * 8 * 2 * 2);
    assert_eq!(cfg.blocks_for_budget(1 << 20, 1.0).unwrap(), (1 << 20) / 4096);
    assert_eq!(cfg.blocks_for_budget(1 << 20, 0.5).unwrap(), (1 << 19) / 4096);
    assert_eq!(Dtype::F16.size(), Some(2));
    assert_eq!(Dtype(77).size(), None);
}

#[test]
fn cuda_device_count_is_reported() {
    let n = kvc::cuda_device_count().unwrap();
    assert!(n >= 0);
}

#[test]
fn pool_config_round_trip_and_budget_sizing() {
    let pool = meta_pool(8, 20);
    let cfg = pool.config().unwrap();
    assert_eq!(cfg.block_size, 8);
    assert_eq!(cfg.num_blocks, 20);
    assert_eq!(&cfg, pool.cached_config());
    pool.check().unwrap();
    let s = pool.stats().unwrap();
    assert_eq!((s.total_blocks, s.free_blocks, s.used_blocks, s.num_seqs), (20, 20, 0, 0));

    // num_blocks = 0: derived from the budget.
    let cfg = PoolConfig {
        num_blocks: 0,
        memory_budget_bytes: 1 << 20,
        memory_utilization: 0.5,
        num_layers: 1,
        num_kv_heads: 1,
        head_dim: 64,
        kv_dtype: Dtype::F16,
        block_size: 16,
        ..PoolConfig::default()
    };
    let want = cfg.blocks_for_budget(1 << 20, 0.5).unwrap();
    let pool = Pool::new(&cfg).unwrap();
    assert_eq!(pool.config().unwrap().num_blocks, want);
    assert_eq!(pool.stats().unwrap().total_blocks, want);
}

#[test]
fn sequences_alloc_append_fork_free() {
    let pool = meta_pool(4, 16);
    assert_eq!(pool.can_alloc(&range(0, 10), None).unwrap(), AllocVerdict::OK);
    assert_eq!(pool.alloc(1, &range(0, 10), None).unwrap(), 0);
    assert_eq!(pool.block_table(1).unwrap(), vec![0, 1, 2]);
    assert_eq!(pool.num_tokens(1).unwrap(), 10);
    assert_eq!(pool.slot_mapping(1, 8, 2).unwrap(), vec![8, 9]);
    assert_eq!(pool.slot_mapping(1, 0, 0).unwrap(), Vec::<i64>::new());
    // Shared prefix: two full blocks hit.
    assert_eq!(pool.alloc(2, &range(0, 9), None).unwrap(), 8);
    assert_eq!(pool.block_table(2).unwrap(), vec![0, 1, 3]);
    // Across a block boundary.
    assert_eq!(pool.append(1, &[10, 11, 12], 0).unwrap(), 1);
    assert_eq!(pool.block_table(1).unwrap(), vec![0, 1, 2, 4]);
    // Fork + copy-on-write.
    pool.fork(1, 3).unwrap();
    assert_eq!(pool.block_table(3).unwrap(), pool.block_table(1).unwrap());
    assert_eq!(pool.pending_copy_count().unwrap(), 0);
    assert_eq!(pool.append(3, &[13], 0).unwrap(), 1);
    assert_eq!(pool.pending_copy_count().unwrap(), 1);
    assert_eq!(pool.take_pending_copies().unwrap(), vec![CopyPair { src: 4, dst: 5 }]);
    assert_eq!(pool.take_pending_copies().unwrap(), vec![]);
    // Lookahead reserves slots beyond the confirmed length.
    assert_eq!(pool.append(1, &[13], 3).unwrap(), 1);
    assert_eq!(pool.num_tokens(1).unwrap(), 14);
    assert_eq!(pool.slot_mapping(1, 14, 3).unwrap().len(), 3);
    let s = pool.stats().unwrap();
    assert_eq!((s.num_seqs, s.allocs, s.forks, s.cow_copies), (3, 2, 1, 1));
    assert_eq!((s.prefix_query_tokens, s.prefix_hit_tokens), (19, 8));
    for id in [3, 2, 1] {
        pool.free(id).unwrap();
    }
    let s = pool.stats().unwrap();
    assert_eq!((s.num_seqs, s.used_blocks, s.frees), (0, 0, 3));
    pool.check().unwrap();
}

#[test]
fn prefix_caching_off_accepts_no_hits() {
    let pool = Pool::new(&PoolConfig {
        block_size: 4,
        num_blocks: 8,
        prefix_caching: false,
        ..PoolConfig::default()
    })
    .unwrap();
    pool.alloc(1, &range(0, 8), None).unwrap();
    assert_eq!(pool.alloc(2, &range(0, 8), None).unwrap(), 0);
    assert_eq!(pool.prefix_lookup(&range(0, 8), None).unwrap(), 0);
}

#[test]
fn keys_isolate_prefixes() {
    let pool = meta_pool(4, 32);
    let mut keys = Keys::new().unwrap();
    keys.set_lora(7).unwrap();
    keys.set_salt("tenant-a").unwrap();
    keys.set_priority(PRIORITY_MAX).unwrap();
    pool.alloc(1, &range(0, 9), Some(&keys)).unwrap();
    assert_eq!(pool.prefix_lookup(&range(0, 9), Some(&keys)).unwrap(), 8);
    assert_eq!(pool.prefix_lookup(&range(0, 9), None).unwrap(), 0);
    keys.clear().unwrap();
    keys.set_priority(PRIORITY_DEFAULT).unwrap();
    assert_eq!(pool.prefix_lookup(&range(0, 9), Some(&keys)).unwrap(), 0);
    // A multimodal item over tokens [4, 8) changes block 1's hash only.
    let mut mm = Keys::new().unwrap();
    mm.add_mm(0x0123_4567_89ab_cdef_fedc_ba98_7654_3210, 4, 4).unwrap();
    assert_eq!(pool.alloc(2, &range(0, 9), Some(&mm)).unwrap(), 0);
    assert_eq!(pool.prefix_lookup(&range(0, 9), Some(&mm)).unwrap(), 8);
    let mut other = Keys::new().unwrap();
    other.add_mm(1, 4, 4).unwrap();
    // Block 0 (tokens 0-3) carries no item: the plain prompt shares it, but not block 1.
    assert_eq!(pool.alloc(3, &range(0, 9), None).unwrap(), 4);
    assert_eq!(pool.prefix_lookup(&range(0, 9), Some(&other)).unwrap(), 4);
    assert_eq!(pool.prefix_lookup(&range(0, 9), None).unwrap(), 8);
}

#[test]
fn prefix_pin_unpin_and_reset() {
    let pool = meta_pool(4, 8);
    pool.alloc(1, &range(0, 9), None).unwrap();
    assert_eq!(pool.prefix_pin(&range(0, 9), None).unwrap(), 8);
    assert_eq!(pool.stats().unwrap().pinned_blocks, 2);
    pool.free(1).unwrap();
    // Pinned blocks make the reset busy even with no sequence left.
    assert_eq!(pool.prefix_cache_reset().unwrap_err().status(), Status::BUSY);
    assert_eq!(pool.prefix_unpin(&range(0, 9), None).unwrap(), 8);
    assert_eq!(pool.stats().unwrap().pinned_blocks, 0);
    pool.prefix_cache_reset().unwrap();
    assert_eq!(pool.prefix_lookup(&range(0, 9), None).unwrap(), 0);
    pool.check().unwrap();
}

#[test]
fn kv_events_stream() {
    let pool = Pool::new(&PoolConfig {
        block_size: 4,
        num_blocks: 4,
        watermark: 0.0,
        event_capacity: 64,
        ..PoolConfig::default()
    })
    .unwrap();
    assert_eq!(pool.pop_event().unwrap(), None);
    let mut keys = Keys::new().unwrap();
    keys.set_lora(9).unwrap();
    pool.alloc(1, &range(100, 109), Some(&keys)).unwrap();
    let a = pool.pop_event().unwrap().expect("first block stored");
    let b = pool.pop_event().unwrap().expect("second block stored");
    assert_eq!(pool.pop_event().unwrap(), None);
    assert_eq!((a.kind, b.kind), (EventType::BLOCK_STORED, EventType::BLOCK_STORED));
    assert_eq!(a.tokens, range(100, 104));
    assert_eq!(b.tokens, range(104, 108));
    assert_eq!(b.parent_hash, a.hash);
    assert_ne!(a.hash, b.hash);
    assert_eq!((a.lora_id, b.lora_id), (9, 9));
    assert_eq!(b.sequence_number, a.sequence_number + 1);
    assert_eq!((a.block_id, b.block_id), (0, 1));
    // Free, then a fresh prompt that needs every block evicts both cached blocks.
    pool.free(1).unwrap();
    pool.alloc(2, &range(0, 13), None).unwrap();
    let mut removed = Vec::new();
    while let Some(e) = pool.pop_event().unwrap() {
        if e.kind == EventType::BLOCK_REMOVED {
            assert!(e.tokens.is_empty());
            removed.push(e.hash);
        }
    }
    removed.sort();
    let mut want = vec![a.hash, b.hash];
    want.sort();
    assert_eq!(removed, want);
    pool.free(2).unwrap();
    pool.prefix_cache_reset().unwrap();
    let last = std::iter::from_fn(|| pool.pop_event().unwrap()).last().expect("reset event");
    assert_eq!(last.kind, EventType::ALL_BLOCKS_CLEARED);
    assert_eq!(pool.stats().unwrap().events_dropped, 0);
}

#[test]
fn abort_drops_unwritten_blocks() {
    let pool = meta_pool(4, 16);
    pool.alloc(1, &range(0, 9), None).unwrap(); // 2 full blocks, filled by this sequence
    pool.free(1).unwrap();
    assert_eq!(pool.prefix_lookup(&range(0, 9), None).unwrap(), 8);
    pool.alloc(2, &range(0, 17), None).unwrap(); // hits 8, fills 2 more full blocks
    pool.abort(2).unwrap();
    assert_eq!(pool.prefix_lookup(&range(0, 17), None).unwrap(), 8);
    assert!(pool.abort(2).unwrap_err().is_unknown_seq());
}
