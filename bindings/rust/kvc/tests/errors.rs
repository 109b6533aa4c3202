//! Error paths: each failure comes back as `Err` with its specific status and the library's
//! message for that very call, and leaves the pool exactly as it was.
mod common;

use common::{meta_pool, range};
use kvc::{Backend, Dtype, Error, Keys, Pool, PoolConfig, Status, MAX_SALT_LEN, PRIORITY_MAX, PRIORITY_MIN};

fn err<T: std::fmt::Debug>(r: kvc::Result<T>) -> Error {
    r.expect_err("expected an error")
}

#[test]
fn invalid_configurations() {
    for cfg in [
        PoolConfig { block_size: 0, num_blocks: 8, ..PoolConfig::default() },
        PoolConfig { num_blocks: 8, watermark: 1.0, ..PoolConfig::default() },
        PoolConfig { num_blocks: 8, watermark: -0.1, ..PoolConfig::default() },
        PoolConfig { num_blocks: -1, ..PoolConfig::default() },
        PoolConfig { num_blocks: 8, num_kv_heads: 0, ..PoolConfig::default() },
        PoolConfig { num_blocks: 8, kv_dtype: Dtype(42), ..PoolConfig::default() },
        PoolConfig { num_blocks: 8, num_kv_heads: 4, num_q_heads: 6, ..PoolConfig::default() },
        PoolConfig { num_blocks: 8, backend: Backend(9), ..PoolConfig::default() },
    ] {
        let e = err(Pool::new(&cfg));
        assert!(e.is_invalid_arg(), "{:?}: {}", cfg, e);
        assert!(e.message().starts_with("kvc_"), "message names the function: {}", e);
    }
    let cfg = PoolConfig { head_dim: 0, ..PoolConfig::default() };
    assert!(err(cfg.bytes_per_block()).is_invalid_arg());
    assert!(err(PoolConfig::default().blocks_for_budget(-1, 0.9)).is_invalid_arg());
    assert!(err(PoolConfig::default().blocks_for_budget(1 << 30, 0.0)).is_invalid_arg());
    assert!(err(PoolConfig::default().blocks_for_budget(1 << 30, 1.5)).is_invalid_arg());
    let huge = PoolConfig {
        num_layers: i32::MAX,
        num_kv_heads: i32::MAX,
        head_dim: i32::MAX,
        ..PoolConfig::default()
    };
    assert!(err(huge.bytes_per_block()).is_overflow());
}

#[test]
fn error_carries_status_and_message() {
    let pool = meta_pool(4, 8);
    let e = err(pool.free(4242));
    assert_eq!(e.status(), Status::UNKNOWN_SEQ);
    assert!(e.is_unknown_seq() && !e.is_out_of_blocks());
    assert!(e.message().contains("4242"), "{}", e);
    assert_eq!(e.to_string(), format!("UNKNOWN_SEQ: {}", e.message()));
    assert!(format!("{:?}", e).contains("UNKNOWN_SEQ"));
    // The thread's last error is that same message (kvc_last_error_copy).
    assert_eq!(kvc::last_error().unwrap(), e.message());
    // Successful calls do not clear it; the Error keeps its own copy either way.
    pool.alloc(1, &[1], None).unwrap();
    assert_eq!(kvc::last_error().unwrap(), e.message());
    let e2 = err(pool.alloc(1, &[1], None));
    assert!(e2.is_seq_exists());
    assert_ne!(e2.message(), e.message());
    let boxed: Box<dyn std::error::Error> = Box::new(e2);
    assert!(boxed.to_string().starts_with("SEQ_EXISTS"));
}

#[test]
fn sequence_errors_change_nothing() {
    let pool = Pool::new(&PoolConfig {
        block_size: 4,
        num_blocks: 4,
        watermark: 0.0,
        max_seq_len: 12,
        ..PoolConfig::default()
    })
    .unwrap();
    pool.alloc(1, &range(0, 6), None).unwrap();
    let before = pool.stats().unwrap();
    let table = pool.block_table(1).unwrap();

    assert!(err(pool.alloc(2, &[], None)).is_invalid_arg());
    assert!(err(pool.alloc(1, &[5], None)).is_seq_exists());
    assert!(err(pool.alloc(2, &range(0, 13), None)).is_max_len());
    assert!(err(pool.alloc(2, &range(100, 112), None)).is_out_of_blocks());
    assert!(err(pool.can_alloc(&[], None)).is_invalid_arg());
    assert!(err(pool.can_alloc(&range(0, 13), None)).is_max_len());
    assert!(err(pool.append(9, &[1], 0)).is_unknown_seq());
    assert!(err(pool.append(1, &[], 0)).is_invalid_arg());
    assert!(err(pool.append(1, &[1], -1)).is_invalid_arg());
    assert!(err(pool.append(1, &range(0, 7), 0)).is_max_len());
    assert!(err(pool.truncate(9, 1)).is_unknown_seq());
    assert!(err(pool.truncate(1, 0)).is_invalid_arg());
    assert!(err(pool.truncate(1, 7)).is_invalid_arg(), "more than the 6 confirmed tokens");
    assert!(err(pool.truncate(1, -3)).is_invalid_arg());
    assert!(err(pool.set_sliding_window(4)).is_state(), "the pool has a sequence");
    assert_eq!(pool.sliding_window().unwrap(), 0);
    assert!(err(pool.fork(9, 10)).is_unknown_seq());
    assert!(err(pool.fork(1, 1)).is_invalid_arg());
    assert!(err(pool.free(9)).is_unknown_seq());
    assert!(err(pool.block_table(9)).is_unknown_seq());
    assert!(err(pool.num_tokens(9)).is_unknown_seq());
    assert!(err(pool.slot_mapping(9, 0, 1)).is_unknown_seq());
    assert!(err(pool.slot_mapping(1, -1, 1)).is_invalid_arg());
    assert!(err(pool.slot_mapping(1, 0, -1)).is_invalid_arg());
    assert!(err(pool.slot_mapping(1, 0, 9)).is_invalid_arg());
    // A huge count is the library's error, not an allocation failure in the binding.
    let e = err(pool.slot_mapping(1, 0, i64::MAX));
    assert!(e.is_invalid_arg() || e.is_buffer_too_small(), "{}", e);
    assert!(err(pool.prefix_lookup(&[], None)).is_invalid_arg());
    assert!(err(pool.prefix_unpin(&range(0, 5), None)).is_state());
    assert!(err(pool.prefix_cache_reset()).is_busy());

    assert_eq!(pool.stats().unwrap(), before);
    assert_eq!(pool.block_table(1).unwrap(), table);
    assert_eq!(pool.num_tokens(1).unwrap(), 6);
    pool.check().unwrap();
}

#[test]
fn pinning_needs_prefix_caching() {
    let pool =
        Pool::new(&PoolConfig { num_blocks: 8, prefix_caching: false, ..PoolConfig::default() }).unwrap();
    assert!(err(pool.prefix_pin(&range(0, 40), None)).is_unsupported());
    assert!(err(pool.prefix_unpin(&range(0, 40), None)).is_unsupported());
}

#[test]
fn key_errors() {
    let mut keys = Keys::new().unwrap();
    assert!(err(keys.set_salt(&"x".repeat(MAX_SALT_LEN + 1))).is_invalid_arg());
    keys.set_salt(&"x".repeat(MAX_SALT_LEN)).unwrap();
    let e = err(keys.set_salt("a\0b"));
    assert!(e.is_invalid_arg() && e.message().contains("NUL"), "{}", e);
    assert!(err(keys.set_priority(PRIORITY_MAX + 1)).is_invalid_arg());
    assert!(err(keys.set_priority(PRIORITY_MIN - 1)).is_invalid_arg());
    assert!(err(keys.add_mm(1, -1, 4)).is_invalid_arg());
    assert!(err(keys.add_mm(1, 0, 0)).is_invalid_arg());
    keys.add_mm(1, 8, 4).unwrap();
    assert!(err(keys.add_mm(2, 10, 4)).is_invalid_arg(), "overlap");
    assert!(err(keys.add_mm(2, 0, 4)).is_invalid_arg(), "out of order");
    assert!(err(keys.add_mm(2, i64::MAX, 2)).is_overflow());
    keys.clear().unwrap();
    keys.add_mm(2, 0, 4).unwrap();
}
