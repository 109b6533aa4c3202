//! Helpers shared by the integration tests.
#![allow(dead_code)]

use kvc::{Backend, Dtype, Pool, PoolConfig};

/// A metadata-only pool with `num_blocks` blocks of `block_size` tokens, no watermark.
pub fn meta_pool(block_size: i32, num_blocks: i64) -> Pool {
    Pool::new(&PoolConfig {
        block_size,
        num_blocks,
        watermark: 0.0,
        backend: Backend::NONE,
        ..PoolConfig::default()
    })
    .expect("create metadata pool")
}

/// A CPU-backend pool with F32 storage: 2 layers, `kv_heads` KV heads, `q_heads` query heads.
pub fn cpu_config(
    block_size: i32,
    num_blocks: i64,
    kv_heads: i32,
    q_heads: i32,
    head_dim: i32,
) -> PoolConfig {
    PoolConfig {
        block_size,
        num_blocks,
        num_layers: 2,
        num_kv_heads: kv_heads,
        num_q_heads: q_heads,
        head_dim,
        kv_dtype: Dtype::F32,
        watermark: 0.0,
        backend: Backend::CPU,
        ..PoolConfig::default()
    }
}

pub fn range(a: i32, b: i32) -> Vec<i32> {
    (a..b).collect()
}

/// Element-wise |got - want| < 1e-4 (attention outputs against the tests' f64 references).
pub fn assert_close(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() < 1e-4, "{}: element {}: got {}, want {}", what, i, g, w);
    }
}
