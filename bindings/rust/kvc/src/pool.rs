//! The pool: creation, destruction, configuration, invariant check and statistics. Sequence,
//! prefix-cache, storage and batch operations live in their own files as further `impl Pool`.
use std::ptr::NonNull;

use kvc_sys as sys;

use crate::config::PoolConfig;
use crate::error::{check, Error, Result, Status};
use crate::stats::Stats;

/// An owned libkvc pool, destroyed on drop.
///
/// Every method takes `&self`: the C contract makes every function taking a `kvc_pool*` safe to
/// call from many threads at once, so a `Pool` is shared by reference (or in an `Arc`).
pub struct Pool {
    raw: NonNull<sys::kvc_pool>,
    /// The resolved configuration (immutable after creation); used to size buffers and to check
    /// host slices against the pool's shape before C reads them.
    config: PoolConfig,
}

// SAFETY (Send): a kvc_pool has no thread affinity; it may be created on one thread, used and
// destroyed on another.
unsafe impl Send for Pool {}
// SAFETY (Sync): "every function taking a kvc_pool* may be called from many threads at once"
// (kvc.h, thread safety). The one exception, kvc_pool_destroy, is only reachable through Drop,
// which Rust runs when no reference to the Pool remains.
unsafe impl Sync for Pool {}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool").field("raw", &self.raw).field("config", &self.config).finish()
    }
}

impl Pool {
    /// Creates a pool (`kvc_pool_create`).
    pub fn new(config: &PoolConfig) -> Result<Pool> {
        let raw_config = config.to_raw();
        let mut raw = std::ptr::null_mut();
        // SAFETY: valid config and out-pointer.
        check(unsafe { sys::kvc_pool_create(&raw_config, &mut raw) })?;
        let raw = NonNull::new(raw)
            .ok_or_else(|| Error::new(Status::INTERNAL, "kvc_pool_create returned OK and NULL"))?;
        Pool::from_created(raw, config)
    }

    /// Takes ownership of a pool the library just created from `config`.
    pub(crate) fn from_created(raw: NonNull<sys::kvc_pool>, config: &PoolConfig) -> Result<Pool> {
        // Read the resolved configuration (num_blocks derived, defaults applied). If that fails
        // the pool is dropped here, so destroyed rather than leaked.
        let mut pool = Pool { raw, config: config.clone() };
        pool.config = pool.read_config()?;
        Ok(pool)
    }

    fn read_config(&self) -> Result<PoolConfig> {
        // SAFETY: plain data; zero is valid, struct_size set below.
        let mut raw: sys::kvc_pool_config = unsafe { std::mem::zeroed() };
        raw.struct_size = std::mem::size_of::<sys::kvc_pool_config>() as u32;
        // SAFETY: live pool, valid out-pointer.
        check(unsafe { sys::kvc_pool_get_config(self.raw.as_ptr(), &mut raw) })?;
        Ok(PoolConfig::from_raw(&raw))
    }

    /// The resolved configuration (`kvc_pool_get_config`: num_blocks filled in).
    pub fn config(&self) -> Result<PoolConfig> {
        self.read_config()
    }

    /// The resolved configuration as read at creation (no C call).
    pub fn cached_config(&self) -> &PoolConfig {
        &self.config
    }

    /// Turns on sliding-window attention for every sequence (`kvc_pool_set_sliding_window`): from
    /// then on `append` releases a sequence's blocks that lie wholly before the window of the first
    /// token its previous call added (for the first `append` after `alloc`: the prompt's first
    /// uncached position), so a step may append its pending token and its drafts in two calls
    /// before one launch; their `block_table` entries read -1. 0 turns it off. Allowed only while
    /// the pool has no sequences (`Status::STATE` otherwise); a negative window is
    /// `Status::INVALID_ARG`.
    pub fn set_sliding_window(&self, window: i32) -> Result<()> {
        // SAFETY: live pool.
        check(unsafe { sys::kvc_pool_set_sliding_window(self.raw.as_ptr(), window) })
    }

    /// The pool's sliding window, 0 when off (`kvc_pool_get_sliding_window`).
    pub fn sliding_window(&self) -> Result<i32> {
        let mut window = 0;
        // SAFETY: live pool, valid out-pointer.
        check(unsafe { sys::kvc_pool_get_sliding_window(self.raw.as_ptr(), &mut window) })?;
        Ok(window)
    }

    /// Runs the internal invariant checker (`kvc_pool_check`).
    pub fn check(&self) -> Result<()> {
        // SAFETY: live pool.
        check(unsafe { sys::kvc_pool_check(self.raw.as_ptr()) })
    }

    /// A snapshot of the counters (`kvc_pool_stats`).
    pub fn stats(&self) -> Result<Stats> {
        // SAFETY: plain data; zero is valid, struct_size set below.
        let mut raw: sys::kvc_stats = unsafe { std::mem::zeroed() };
        raw.struct_size = std::mem::size_of::<sys::kvc_stats>() as u32;
        // SAFETY: live pool, valid out-pointer of the declared size.
        check(unsafe { sys::kvc_pool_stats(self.raw.as_ptr(), &mut raw) })?;
        Ok(Stats::from_raw(&raw))
    }

    pub(crate) fn raw(&self) -> *mut sys::kvc_pool {
        self.raw.as_ptr()
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // SAFETY: self owns the pool and no borrow of it is alive (Batch<'p> borrows the Pool,
        // so every batch is gone); it is never used again.
        unsafe { sys::kvc_pool_destroy(self.raw.as_ptr()) };
    }
}
