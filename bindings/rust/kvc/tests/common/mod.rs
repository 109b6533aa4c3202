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

/// Dense softmax attention of one query row (`q_heads` x `d`, scale 1/sqrt(d)) over the key
/// positions `keys`, GQA (query head h reads KV head h / (q_heads / kv_heads)); `kv(pos, kv_head,
/// dim, sign)` gives K (sign +1) and V (sign -1). The bindings' tests' reference.
pub fn dense_attention(
    q: &[f32],
    q_heads: usize,
    kv_heads: usize,
    d: usize,
    keys: std::ops::RangeInclusive<i64>,
    kv: impl Fn(i64, usize, usize, f32) -> f32,
) -> Vec<f32> {
    let scale = 1.0 / (d as f32).sqrt();
    let mut out = vec![0.0; q_heads * d];
    for h in 0..q_heads {
        let kvh = h / (q_heads / kv_heads);
        let qh = &q[h * d..(h + 1) * d];
        let scores: Vec<f32> =
            keys.clone().map(|p| (0..d).map(|i| qh[i] * kv(p, kvh, i, 1.0)).sum::<f32>() * scale).collect();
        let max = scores.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
        let w: Vec<f32> = scores.iter().map(|s| (s - max).exp()).collect();
        let sum: f32 = w.iter().sum();
        for i in 0..d {
            out[h * d + i] = keys.clone().zip(&w).map(|(p, wp)| wp * kv(p, kvh, i, -1.0)).sum::<f32>() / sum;
        }
    }
    out
}
