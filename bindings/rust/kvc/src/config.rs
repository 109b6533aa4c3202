//! Pool configuration and sizing.
use kvc_sys as sys;

use crate::error::{check, Result};
use crate::types::{Backend, Dtype};

/// Configuration of a [`crate::Pool`]. `PoolConfig::default()` holds the library's defaults
/// (`kvc_pool_config_default`); change the fields you need.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolConfig {
    /// Tokens per block (>= 1).
    pub block_size: i32,
    /// Model layers.
    pub num_layers: i32,
    /// KV heads.
    pub num_kv_heads: i32,
    /// Query heads, a multiple of `num_kv_heads`; 0 = `num_kv_heads`.
    pub num_q_heads: i32,
    /// Head dimension.
    pub head_dim: i32,
    /// Dtype of the KV cache.
    pub kv_dtype: Dtype,
    /// Blocks in the pool; 0 = derive from `memory_budget_bytes`.
    pub num_blocks: i64,
    /// Budget used when `num_blocks == 0`.
    pub memory_budget_bytes: i64,
    /// Fraction of the budget used for KV, (0, 1].
    pub memory_utilization: f64,
    /// Fraction of blocks kept free by `can_alloc`, [0, 1).
    pub watermark: f64,
    /// Longest sequence in tokens; 0 = unlimited.
    pub max_seq_len: i64,
    /// Prefix caching on or off.
    pub prefix_caching: bool,
    /// Where the KV storage lives.
    pub backend: Backend,
    /// CUDA device ordinal.
    pub device: i32,
    /// KV event ring size; 0 disables events.
    pub event_capacity: i32,
    /// CUDA: size the pool from this fraction of free device memory (when > 0 and
    /// `num_blocks == 0`).
    pub gpu_memory_utilization: f64,
}

fn raw_defaults() -> sys::kvc_pool_config {
    // SAFETY: kvc_pool_config is plain data (integers and doubles): all-zero is a valid value.
    let mut raw: sys::kvc_pool_config = unsafe { std::mem::zeroed() };
    // SAFETY: raw is a valid, writable kvc_pool_config. Only a NULL pointer can make it fail.
    let status = unsafe { sys::kvc_pool_config_default(&mut raw) };
    debug_assert_eq!(status, sys::KVC_OK);
    raw
}

impl Default for PoolConfig {
    fn default() -> PoolConfig {
        PoolConfig::from_raw(&raw_defaults())
    }
}

impl PoolConfig {
    pub(crate) fn from_raw(raw: &sys::kvc_pool_config) -> PoolConfig {
        PoolConfig {
            block_size: raw.block_size,
            num_layers: raw.num_layers,
            num_kv_heads: raw.num_kv_heads,
            num_q_heads: raw.num_q_heads,
            head_dim: raw.head_dim,
            kv_dtype: Dtype(raw.kv_dtype),
            num_blocks: raw.num_blocks,
            memory_budget_bytes: raw.memory_budget_bytes,
            memory_utilization: raw.memory_utilization,
            watermark: raw.watermark,
            max_seq_len: raw.max_seq_len,
            prefix_caching: raw.prefix_caching != 0,
            backend: Backend(raw.backend),
            device: raw.device,
            event_capacity: raw.event_capacity,
            gpu_memory_utilization: raw.gpu_memory_utilization,
        }
    }

    /// The C struct, starting from the library's defaults so `struct_size` (and any field a
    /// newer header appends) is set by the library itself.
    pub(crate) fn to_raw(&self) -> sys::kvc_pool_config {
        let mut raw = raw_defaults();
        raw.block_size = self.block_size;
        raw.num_layers = self.num_layers;
        raw.num_kv_heads = self.num_kv_heads;
        raw.num_q_heads = self.num_q_heads;
        raw.head_dim = self.head_dim;
        raw.kv_dtype = self.kv_dtype.0;
        raw.num_blocks = self.num_blocks;
        raw.memory_budget_bytes = self.memory_budget_bytes;
        raw.memory_utilization = self.memory_utilization;
        raw.watermark = self.watermark;
        raw.max_seq_len = self.max_seq_len;
        raw.prefix_caching = self.prefix_caching as i32;
        raw.backend = self.backend.0;
        raw.device = self.device;
        raw.event_capacity = self.event_capacity;
        raw.gpu_memory_utilization = self.gpu_memory_utilization;
        raw
    }

    /// Bytes one block occupies across all layers with this shape and dtype.
    pub fn bytes_per_block(&self) -> Result<i64> {
        let raw = self.to_raw();
        let mut out = 0;
        // SAFETY: valid config and out-pointer.
        check(unsafe { sys::kvc_bytes_per_block(&raw, &mut out) })?;
        Ok(out)
    }

    /// Blocks that fit in `budget_bytes` at `utilization`.
    pub fn blocks_for_budget(&self, budget_bytes: i64, utilization: f64) -> Result<i64> {
        let raw = self.to_raw();
        let mut out = 0;
        // SAFETY: valid config and out-pointer.
        check(unsafe { sys::kvc_blocks_for_budget(&raw, budget_bytes, utilization, &mut out) })?;
        Ok(out)
    }
}
