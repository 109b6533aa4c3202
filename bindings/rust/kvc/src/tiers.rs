//! Memory tiers: a host tier and a disk tier below the device, whole-sequence swap (preemption by
//! swapping), preemption by recomputation, tiered prefix lookup and per-tier statistics.
use std::ffi::CString;
use std::path::Path;

use kvc_sys as sys;

use crate::error::{check, Error, Result, Status};
use crate::keys::{keys_ptr, Keys};
use crate::pool::Pool;

/// A level of KV memory (`kvc_tier`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tier {
    Device,
    Host,
    Disk,
}

impl Tier {
    /// The library reports only these three; anything else would be a newer library's tier, shown
    /// as the device's rather than failing an event pop.
    pub(crate) fn from_raw(t: i32) -> Tier {
        match t as u32 {
            sys::KVC_TIER_HOST => Tier::Host,
            sys::KVC_TIER_DISK => Tier::Disk,
            _ => Tier::Device,
        }
    }

    fn raw(self) -> i32 {
        (match self {
            Tier::Device => sys::KVC_TIER_DEVICE,
            Tier::Host => sys::KVC_TIER_HOST,
            Tier::Disk => sys::KVC_TIER_DISK,
        }) as i32
    }
}

/// `kvc_tier_attach_disk` flag: keep the file's blocks so that re-attaching it finds them again.
pub const DISK_PERSISTENT: i32 = sys::KVC_DISK_PERSISTENT as i32;
/// `kvc_tier_attach_disk` flag: never try O_DIRECT.
pub const DISK_NO_DIRECT: i32 = sys::KVC_DISK_NO_DIRECT as i32;

/// The longest identity [`Pool::attach_disk_tier_with_identity`] takes, in bytes.
pub const MAX_DISK_IDENTITY_LEN: usize = sys::KVC_MAX_DISK_IDENTITY_LEN as usize;
/// The shortest key [`Pool::attach_disk_tier_keyed`] takes, in bytes.
pub const DISK_KEY_MIN_LEN: usize = sys::KVC_DISK_KEY_MIN_LEN as usize;
/// The longest key [`Pool::attach_disk_tier_keyed`] takes, in bytes.
pub const DISK_KEY_MAX_LEN: usize = sys::KVC_DISK_KEY_MAX_LEN as usize;

// A path as the C calls take it: UTF-8 without NUL bytes, else INVALID_ARG naming `func`.
fn disk_path(func: &str, path: &Path) -> Result<CString> {
    let text = path
        .to_str()
        .ok_or_else(|| Error::new(Status::INVALID_ARG, format!("{func}: path is not valid UTF-8")))?;
    CString::new(text)
        .map_err(|_| Error::new(Status::INVALID_ARG, format!("{func}: path contains a NUL byte")))
}

// An identity as the C calls take it: without NUL bytes, else INVALID_ARG naming `func`.
fn disk_identity(func: &str, identity: &str) -> Result<CString> {
    CString::new(identity)
        .map_err(|_| Error::new(Status::INVALID_ARG, format!("{func}: identity contains a NUL byte")))
}

/// Identifies the copies of a swap (`kvc_swap_out` / `kvc_swap_in`) for [`Pool::op_done`] and
/// [`Pool::op_wait`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OpId(pub u64);

/// What each way of preempting a sequence costs (`kvc_preemption_cost`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PreemptionCost {
    /// Bytes a swap-out (or, for a swapped-out sequence, a swap-in) would move.
    pub swap_bytes: i64,
    /// Confirmed tokens a recomputation would prefill again.
    pub recompute_tokens: i64,
}

/// Leading cached tokens of a prompt per tier (`kvc_prefix_lookup_tiers`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TierHits {
    pub device: i64,
    pub host: i64,
    pub disk: i64,
}

impl TierHits {
    /// Tokens found in any tier.
    pub fn total(&self) -> i64 {
        self.device + self.host + self.disk
    }
}

/// Counters of one tier (`kvc_tier_stats`); see the C header for each field's meaning.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TierStats {
    pub direct_io: bool,
    pub persistent: bool,
    pub io_uring: bool,
    pub capacity_blocks: i64,
    pub used_blocks: i64,
    pub cached_blocks: i64,
    pub held_blocks: i64,
    pub bytes_used: i64,
    pub blocks_in: i64,
    pub blocks_out: i64,
    pub bytes_in: i64,
    pub bytes_out: i64,
    pub transfers: i64,
    pub transfer_seconds: f64,
    pub bandwidth_bytes_per_s: f64,
    pub hits: i64,
    pub evictions: i64,
    pub failures: i64,
    pub checksum_failures: i64,
    pub io_errors: i64,
    pub recovered_blocks: i64,
    pub foreign_blocks: i64,
    /// Of `cached_blocks`, those a prefix lookup can reach: every block before it in its prompt is
    /// cached in some tier (device, host or disk). Counted by the call, walking every chain once.
    pub reachable_blocks: i64,
}

impl TierStats {
    fn from_raw(s: &sys::kvc_tier_stats) -> TierStats {
        TierStats {
            direct_io: s.direct_io != 0,
            persistent: s.persistent != 0,
            io_uring: s.io_uring != 0,
            capacity_blocks: s.capacity_blocks,
            used_blocks: s.used_blocks,
            cached_blocks: s.cached_blocks,
            held_blocks: s.held_blocks,
            bytes_used: s.bytes_used,
            blocks_in: s.blocks_in,
            blocks_out: s.blocks_out,
            bytes_in: s.bytes_in,
            bytes_out: s.bytes_out,
            transfers: s.transfers,
            transfer_seconds: s.transfer_seconds,
            bandwidth_bytes_per_s: s.bandwidth_bytes_per_s,
            hits: s.hits,
            evictions: s.evictions,
            failures: s.failures,
            checksum_failures: s.checksum_failures,
            io_errors: s.io_errors,
            recovered_blocks: s.recovered_blocks,
            foreign_blocks: s.foreign_blocks,
            reachable_blocks: s.reachable_blocks,
        }
    }
}

impl Pool {
    /// Attaches a host tier of `num_blocks` block slots, once (`kvc_tier_attach_host`).
    pub fn attach_host_tier(&self, num_blocks: i64) -> Result<()> {
        // SAFETY: live pool.
        check(unsafe { sys::kvc_tier_attach_host(self.raw(), num_blocks) })
    }

    /// Attaches a disk tier of `num_blocks` slots in the file at `path`, below the host tier, once
    /// (`kvc_tier_attach_disk`). `flags`: 0 or [`DISK_PERSISTENT`] | [`DISK_NO_DIRECT`]. A path
    /// that is not valid UTF-8 or holds a NUL byte is refused with `INVALID_ARG` before any C call.
    pub fn attach_disk_tier(&self, path: &Path, num_blocks: i64, flags: i32) -> Result<()> {
        let c_path = disk_path("attach_disk_tier", path)?;
        // SAFETY: live pool; NUL-terminated path valid for the call.
        check(unsafe { sys::kvc_tier_attach_disk(self.raw(), c_path.as_ptr(), num_blocks, flags) })
    }

    /// As [`Pool::attach_disk_tier`], for KV computed by `identity` — model and revision, KV dtype,
    /// and under tensor parallelism rank and world size (`kvc_tier_attach_disk_with_identity`). A
    /// [`DISK_PERSISTENT`] re-attach recovers only the blocks written under the same identity;
    /// the others count in [`TierStats::foreign_blocks`]. `""` is no identity. An identity with a
    /// NUL byte is refused with `INVALID_ARG` before any C call; one longer than
    /// [`MAX_DISK_IDENTITY_LEN`] bytes by the library.
    pub fn attach_disk_tier_with_identity(
        &self,
        path: &Path,
        num_blocks: i64,
        flags: i32,
        identity: &str,
    ) -> Result<()> {
        let c_path = disk_path("attach_disk_tier_with_identity", path)?;
        let c_identity = disk_identity("attach_disk_tier_with_identity", identity)?;
        // SAFETY: live pool; NUL-terminated path and identity valid for the call.
        check(unsafe {
            sys::kvc_tier_attach_disk_with_identity(
                self.raw(),
                c_path.as_ptr(),
                num_blocks,
                flags,
                c_identity.as_ptr(),
            )
        })
    }

    /// As [`Pool::attach_disk_tier_with_identity`], with every slot authenticated by a keyed MAC
    /// (`kvc_tier_attach_disk_keyed`), so that whoever can write the file but lacks the key cannot
    /// make it serve chosen KV: a slot whose MAC does not verify is a miss counted in
    /// [`TierStats::checksum_failures`], and a [`DISK_PERSISTENT`] re-attach with another key, or
    /// none, recovers none of the keyed slots (they count in [`TierStats::foreign_blocks`]). `key`:
    /// [`DISK_KEY_MIN_LEN`]..=[`DISK_KEY_MAX_LEN`] bytes, a secret from the service's secret store;
    /// the library keeps its own copy, so the caller may wipe `key` on return. `UNSUPPORTED` when
    /// libsodium (Debian `libsodium23`) cannot be loaded: no tier is attached then, authenticated or
    /// not. A key length out of range is `INVALID_ARG` (from the library).
    pub fn attach_disk_tier_keyed(
        &self,
        path: &Path,
        num_blocks: i64,
        flags: i32,
        identity: &str,
        key: &[u8],
    ) -> Result<()> {
        let c_path = disk_path("attach_disk_tier_keyed", path)?;
        let c_identity = disk_identity("attach_disk_tier_keyed", identity)?;
        // A slice is never longer than isize::MAX bytes, so the length fits an i64.
        let key_len = key.len() as i64;
        // SAFETY: live pool; NUL-terminated path and identity and key_len readable key bytes, all
        // valid for the call (the library copies the key).
        check(unsafe {
            sys::kvc_tier_attach_disk_keyed(
                self.raw(),
                c_path.as_ptr(),
                num_blocks,
                flags,
                c_identity.as_ptr(),
                key.as_ptr(),
                key_len,
            )
        })
    }

    /// Writes every cached block the disk tier lacks to it — the host tier's, then the device's that
    /// no sequence uses — and returns the blocks queued (`kvc_tier_flush`). For a shutdown before a
    /// restart with [`DISK_PERSISTENT`]. `STATE` without a disk tier.
    pub fn tier_flush(&self) -> Result<i64> {
        let mut n = 0i64;
        // SAFETY: live pool, valid out-pointer.
        check(unsafe { sys::kvc_tier_flush(self.raw(), &mut n) })?;
        Ok(n)
    }

    /// Swaps a sequence's exclusively owned blocks out to the host tier (`kvc_swap_out`).
    pub fn swap_out(&self, seq_id: u64) -> Result<OpId> {
        let mut op = 0u64;
        // SAFETY: live pool, valid out-pointer.
        check(unsafe { sys::kvc_swap_out(self.raw(), seq_id, &mut op) })?;
        Ok(OpId(op))
    }

    /// Swaps a swapped-out sequence back into fresh device blocks (`kvc_swap_in`).
    pub fn swap_in(&self, seq_id: u64) -> Result<OpId> {
        let mut op = 0u64;
        // SAFETY: live pool, valid out-pointer.
        check(unsafe { sys::kvc_swap_in(self.raw(), seq_id, &mut op) })?;
        Ok(OpId(op))
    }

    /// True once the copies of `op` have completed (`kvc_op_query`).
    pub fn op_done(&self, op: OpId) -> Result<bool> {
        let mut done = 0i32;
        // SAFETY: live pool, valid out-pointer.
        check(unsafe { sys::kvc_op_query(self.raw(), op.0, &mut done) })?;
        Ok(done != 0)
    }

    /// Blocks until the copies of `op` have completed (`kvc_op_wait`).
    pub fn op_wait(&self, op: OpId) -> Result<()> {
        // SAFETY: live pool.
        check(unsafe { sys::kvc_op_wait(self.raw(), op.0) })
    }

    /// Frees a sequence and returns the confirmed tokens to prefill again
    /// (`kvc_preempt_recompute`).
    pub fn preempt_recompute(&self, seq_id: u64) -> Result<i64> {
        let mut tokens = 0i64;
        // SAFETY: live pool, valid out-pointer.
        check(unsafe { sys::kvc_preempt_recompute(self.raw(), seq_id, &mut tokens) })?;
        Ok(tokens)
    }

    /// Bytes a swap would move vs tokens a recomputation would prefill (`kvc_preemption_cost`).
    pub fn preemption_cost(&self, seq_id: u64) -> Result<PreemptionCost> {
        let (mut bytes, mut tokens) = (0i64, 0i64);
        // SAFETY: live pool, valid out-pointers.
        check(unsafe { sys::kvc_preemption_cost(self.raw(), seq_id, &mut bytes, &mut tokens) })?;
        Ok(PreemptionCost { swap_bytes: bytes, recompute_tokens: tokens })
    }

    /// Reads the prompt's disk-tier prefix hits up into the host tier (verified), so that a later
    /// [`Pool::alloc`] of it restores them from host memory instead of waiting for the disk
    /// (`kvc_tier_prefetch`). Call it from a thread of your own for a queued request. Returns the
    /// tokens `alloc` would now find on the device and in the host tier. `STATE` without a disk tier.
    pub fn tier_prefetch(&self, tokens: &[i32], keys: Option<&Keys>) -> Result<i64> {
        self.prompt_count(sys::kvc_tier_prefetch, tokens, keys)
    }

    /// Leading cached tokens of a prompt, split by tier (`kvc_prefix_lookup_tiers`).
    pub fn prefix_lookup_tiers(&self, tokens: &[i32], keys: Option<&Keys>) -> Result<TierHits> {
        let mut hits = TierHits::default();
        // SAFETY: live pool; tokens valid for tokens.len() reads; keys NULL or live; valid outs.
        check(unsafe {
            sys::kvc_prefix_lookup_tiers(
                self.raw(),
                tokens.as_ptr(),
                tokens.len() as i64,
                keys_ptr(keys),
                &mut hits.device,
                &mut hits.host,
                &mut hits.disk,
            )
        })?;
        Ok(hits)
    }

    /// Counters of one tier (`kvc_tier_get_stats`); an unattached tier has capacity 0.
    pub fn tier_stats(&self, tier: Tier) -> Result<TierStats> {
        // SAFETY: plain data; zero is valid, struct_size set below.
        let mut raw: sys::kvc_tier_stats = unsafe { std::mem::zeroed() };
        raw.struct_size = std::mem::size_of::<sys::kvc_tier_stats>() as u32;
        // SAFETY: live pool, valid out-pointer of the declared size.
        check(unsafe { sys::kvc_tier_get_stats(self.raw(), tier.raw(), &mut raw) })?;
        Ok(TierStats::from_raw(&raw))
    }
}
