//! Safe Rust API of libkvc, a paged KV-cache manager for LLM inference (block tables, refcounted
//! sharing, fork with copy-on-write, prefix caching, paged attention, host and disk memory tiers).
//!
//! - [`Pool`] owns a `kvc_pool` and destroys it on drop; it is `Send + Sync` because every C
//!   function taking a pool is thread-safe. [`Keys`] and [`Batch`] are single-owner objects:
//!   `Send`, not `Sync`. A [`Batch`] borrows its pool, so it cannot outlive it.
//! - Every fallible call returns [`Result<T>`](Result) with an [`Error`] carrying the status and
//!   the library's message for that call (read on the same OS thread right after the call).
//! - Slices in, `Vec` out. Device addresses (CUDA) are opaque `u64` values accepted only by
//!   `unsafe fn *_raw` variants; the safe variants take host slices on the CPU backend and check
//!   their lengths against the pool's shape first.
//! - No Rust code is ever called from C (the API has no callbacks), so a panic can never unwind
//!   through C frames; and no C error aborts: every failure is a status.
//!
//! ```
//! use kvc::{Pool, PoolConfig};
//!
//! let pool = Pool::new(&PoolConfig { block_size: 4, num_blocks: 8, ..PoolConfig::default() })?;
//! let system_prompt: Vec<i32> = (0..8).collect();
//! pool.alloc(1, &[&system_prompt[..], &[100, 101]].concat(), None)?;
//! // A second request with the same system prompt reuses its two full blocks.
//! let cached = pool.alloc(2, &[&system_prompt[..], &[200]].concat(), None)?;
//! assert_eq!(cached, 8);
//! pool.append(1, &[102], 0)?; // decode step
//! let err = pool.free(99).unwrap_err();
//! assert!(err.is_unknown_seq());
//! println!("{}", err); // UNKNOWN_SEQ: kvc_free: no sequence 99 ...
//! # Ok::<(), kvc::Error>(())
//! ```
#![deny(missing_debug_implementations)]
#![warn(rust_2018_idioms)]

mod attention;
mod batch;
mod config;
mod error;
mod hybrid;
mod keys;
mod pool;
mod prefix;
mod sequences;
mod stats;
mod storage;
mod tiers;
mod transfer;
mod types;
mod version;

pub use attention::AttentionParams;
pub use batch::{Batch, BatchInfo};
pub use config::PoolConfig;
pub use error::{Error, Result, Status};
pub use hybrid::{GroupConfig, GroupInfo, MAX_GROUPS};
pub use keys::Keys;
pub use pool::Pool;
pub use prefix::{hash_blocks, Event};
pub use sequences::CopyPair;
pub use stats::Stats;
pub use storage::StorageInfo;
pub use tiers::{
    OpId, PreemptionCost, Tier, TierHits, TierStats, DISK_KEY_MAX_LEN, DISK_KEY_MIN_LEN, DISK_NO_DIRECT,
    DISK_PERSISTENT, MAX_DISK_IDENTITY_LEN,
};
pub use transfer::{
    xfer_available, ImportResult, XferAgent, XferConfig, XferFailure, XferOp, XferStats,
    MAX_XFER_IDENTITY_LEN,
};
pub use types::{
    AllocVerdict, Backend, Bf16, Dtype, EventType, GroupKind, HostElement, F16, MAX_SALT_LEN,
    PRIORITY_DEFAULT, PRIORITY_MAX, PRIORITY_MIN,
};
pub use version::{cuda_device_count, last_error, status_str, version, version_string, HEADER_VERSION};

/// The raw declarations, for what this crate does not wrap the way you need.
pub use kvc_sys as sys;
