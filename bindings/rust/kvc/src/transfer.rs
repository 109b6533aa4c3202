//! KV transfer between pools in different processes or machines over UCX (`kvc_xfer_*`): an
//! exporter leases a cached prefix and hands out a descriptor that the caller moves to the
//! importer through its own channel; the importer pulls the blocks (UCX active messages, or RMA gets), checks
//! layout, model identity and hash chain, and enters them in its prefix cache.
use std::ffi::CString;
use std::ptr;

use crate::error::{check, Error, Result, Status};
use crate::keys::{keys_ptr, Keys};
use crate::pool::Pool;
use crate::sys;

/// Longest model identity an [`XferConfig`] takes, in bytes.
pub const MAX_XFER_IDENTITY_LEN: usize = sys::KVC_MAX_XFER_IDENTITY_LEN as usize;

/// Whether KV transfer works here: UCX (`libucp.so.0`) can be loaded (`kvc_xfer_available`).
pub fn xfer_available() -> bool {
    let mut a = 0i32;
    // SAFETY: valid out-pointer.
    unsafe { sys::kvc_xfer_available(&mut a) == sys::KVC_OK && a != 0 }
}

/// A transfer agent's configuration (`kvc_xfer_config`); empty strings and zeros take the defaults.
#[derive(Clone, Debug, Default)]
pub struct XferConfig {
    /// What computed the KV (model@revision, dtype, TP rank): exporter and importer must agree.
    pub model_identity: String,
    /// UCX transports in `UCX_TLS` syntax (`"tcp"`, `"sm,self"`); `""` = UCX's choice.
    pub transports: String,
    /// `UCX_NET_DEVICES` (`"lo"`, `"eth0"`); `""` = UCX's choice.
    pub net_devices: String,
    /// Default lease of an export in ms (0 = 30000).
    pub lease_ms: i64,
    /// An import fails with [`XferFailure::Timeout`] after this many ms (0 = 30000).
    pub timeout_ms: i64,
}

/// Why a transfer failed (`kvc_xfer_failure`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XferFailure {
    None,
    Descriptor,
    Layout,
    Hash,
    PoolFull,
    Peer,
    Timeout,
    Lease,
    Cancelled,
    /// A CUDA pool: a device copy of the import failed.
    Device,
    Unknown(i32),
}

impl XferFailure {
    fn from_raw(v: i32) -> XferFailure {
        match v as u32 {
            sys::KVC_XFER_OK => XferFailure::None,
            sys::KVC_XFER_FAIL_DESCRIPTOR => XferFailure::Descriptor,
            sys::KVC_XFER_FAIL_LAYOUT => XferFailure::Layout,
            sys::KVC_XFER_FAIL_HASH => XferFailure::Hash,
            sys::KVC_XFER_FAIL_POOL_FULL => XferFailure::PoolFull,
            sys::KVC_XFER_FAIL_PEER => XferFailure::Peer,
            sys::KVC_XFER_FAIL_TIMEOUT => XferFailure::Timeout,
            sys::KVC_XFER_FAIL_LEASE => XferFailure::Lease,
            sys::KVC_XFER_FAIL_CANCELLED => XferFailure::Cancelled,
            sys::KVC_XFER_FAIL_DEVICE => XferFailure::Device,
            _ => XferFailure::Unknown(v),
        }
    }
}

/// Identifies an import (for [`XferAgent::done`] / [`XferAgent::wait`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct XferOp(pub u64);

/// What an import did (`kvc_xfer_import_result`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ImportResult {
    pub failure: XferFailure,
    pub blocks: i64,
    pub blocks_pulled: i64,
    pub blocks_cached: i64,
    pub blocks_skipped: i64,
    pub bytes_pulled: i64,
    pub cached_tokens: i64,
    pub seconds: f64,
}

/// An agent's counters (`kvc_xfer_stats`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct XferStats {
    pub exports_active: i64,
    pub exports_total: i64,
    pub exports_expired: i64,
    pub export_blocks_held: i64,
    pub lease_checks: i64,
    pub imports_started: i64,
    pub imports_ok: i64,
    pub imports_failed: i64,
    pub blocks_pulled: i64,
    pub blocks_cached: i64,
    pub blocks_skipped: i64,
    pub bytes_pulled: i64,
    pub import_seconds: f64,
    /// Imports failed per `kvc_xfer_failure` value (index 0 unused; index
    /// `KVC_XFER_FAIL_DEVICE` from `kvc_xfer_stats.failures_device`).
    pub failures: [i64; 10],
}

/// A transfer agent for one pool (`kvc_xfer_agent`); borrows the pool, so it is dropped first
/// (the C API forbids destroying an agent after its pool, which would leave it serving freed
/// blocks; the lifetime makes that a compile error):
///
/// ```compile_fail
/// let agent = {
///     let pool = kvc::Pool::new(&kvc::PoolConfig { num_blocks: 8, ..Default::default() }).unwrap();
///     kvc::XferAgent::new(&pool, &kvc::XferConfig::default()).unwrap()
/// }; // error[E0597]: `pool` does not live long enough
/// ```
///
/// Safe to share between threads.
pub struct XferAgent<'p> {
    raw: *mut sys::kvc_xfer_agent,
    pool: &'p Pool,
}

impl std::fmt::Debug for XferAgent<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XferAgent").field("raw", &self.raw).field("pool", &self.pool.raw()).finish()
    }
}

// SAFETY: every kvc_xfer_* call on an agent may be made from many threads (kvc.h); destroy happens
// in Drop, with no other reference left.
unsafe impl Send for XferAgent<'_> {}
// SAFETY: as above.
unsafe impl Sync for XferAgent<'_> {}

fn c_string(func: &str, what: &str, s: &str) -> Result<CString> {
    CString::new(s)
        .map_err(|_| Error::new(Status::INVALID_ARG, format!("{func}: {what} contains a NUL byte")))
}

fn opt_ptr(s: &Option<CString>) -> *const std::os::raw::c_char {
    s.as_ref().map_or(ptr::null(), |c| c.as_ptr())
}

impl<'p> XferAgent<'p> {
    /// Creates an agent for `pool` (`kvc_xfer_agent_create`). `UNSUPPORTED` without UCX, for a
    /// metadata-only or CUDA pool, or with prefix caching off.
    pub fn new(pool: &'p Pool, cfg: &XferConfig) -> Result<XferAgent<'p>> {
        const F: &str = "XferAgent::new";
        let nonempty = |what: &str, s: &str| -> Result<Option<CString>> {
            if s.is_empty() {
                Ok(None)
            } else {
                c_string(F, what, s).map(Some)
            }
        };
        let identity = nonempty("model_identity", &cfg.model_identity)?;
        let transports = nonempty("transports", &cfg.transports)?;
        let devices = nonempty("net_devices", &cfg.net_devices)?;
        // SAFETY: an all-zero kvc_xfer_config is a valid value for kvc_xfer_config_default to fill.
        let mut c: sys::kvc_xfer_config = unsafe { std::mem::zeroed() };
        // SAFETY: valid out-pointer.
        check(unsafe { sys::kvc_xfer_config_default(&mut c) })?;
        c.model_identity = opt_ptr(&identity);
        c.transports = opt_ptr(&transports);
        c.net_devices = opt_ptr(&devices);
        if cfg.lease_ms != 0 {
            c.lease_ms = cfg.lease_ms;
        }
        if cfg.timeout_ms != 0 {
            c.timeout_ms = cfg.timeout_ms;
        }
        let mut raw = ptr::null_mut();
        // SAFETY: live pool; the config's strings outlive the call (the library copies them).
        check(unsafe { sys::kvc_xfer_agent_create(pool.raw(), &c, &mut raw) })?;
        Ok(XferAgent { raw, pool })
    }

    /// The pool this agent serves.
    pub fn pool(&self) -> &'p Pool {
        self.pool
    }

    /// Leases the prompt's leading full blocks cached on the device (`kvc_xfer_export_prompt`)
    /// until [`XferAgent::release_export`] or the lease ends (`lease_ms`, 0 = the agent's default).
    /// Returns the export id and the tokens exported.
    pub fn export_prompt(&self, tokens: &[i32], keys: Option<&Keys>, lease_ms: i64) -> Result<(u64, i64)> {
        let (mut id, mut n) = (0u64, 0i64);
        // SAFETY: live agent; tokens readable for its length; valid out-pointers.
        check(unsafe {
            sys::kvc_xfer_export_prompt(
                self.raw,
                tokens.as_ptr(),
                tokens.len() as i64,
                keys_ptr(keys),
                lease_ms,
                &mut id,
                &mut n,
            )
        })?;
        Ok((id, n))
    }

    /// As [`XferAgent::export_prompt`] for sequence `seq_id`'s leading cached full blocks
    /// (`kvc_xfer_export_seq`).
    pub fn export_seq(&self, seq_id: u64, lease_ms: i64) -> Result<(u64, i64)> {
        let (mut id, mut n) = (0u64, 0i64);
        // SAFETY: live agent, valid out-pointers.
        check(unsafe { sys::kvc_xfer_export_seq(self.raw, seq_id, lease_ms, &mut id, &mut n) })?;
        Ok((id, n))
    }

    /// Export `id`'s serialized descriptor (`kvc_xfer_export_descriptor`).
    pub fn descriptor(&self, id: u64) -> Result<Vec<u8>> {
        let mut n = 0i64;
        // SAFETY: live agent; size query (NULL buffer, cap 0).
        check(unsafe { sys::kvc_xfer_export_descriptor(self.raw, id, ptr::null_mut(), 0, &mut n) })?;
        let mut buf = vec![0u8; crate::error::to_len(n, "descriptor length")?];
        // SAFETY: live agent; buf writable for its length.
        check(unsafe {
            sys::kvc_xfer_export_descriptor(self.raw, id, buf.as_mut_ptr(), buf.len() as i64, &mut n)
        })?;
        buf.truncate(crate::error::to_len(n, "descriptor length")?);
        Ok(buf)
    }

    /// Ends export `id`'s lease now (`kvc_xfer_export_release`).
    pub fn release_export(&self, id: u64) -> Result<()> {
        // SAFETY: live agent.
        check(unsafe { sys::kvc_xfer_export_release(self.raw, id) })
    }

    /// Starts importing `desc` for the request's keys (`kvc_xfer_import`); refusals change nothing.
    pub fn import(&self, desc: &[u8], keys: Option<&Keys>) -> Result<XferOp> {
        let mut op = 0u64;
        // SAFETY: live agent; desc readable for its length; valid out-pointer.
        check(unsafe {
            sys::kvc_xfer_import(self.raw, desc.as_ptr(), desc.len() as i64, keys_ptr(keys), &mut op)
        })?;
        Ok(XferOp(op))
    }

    /// Whether import `op` has finished (`kvc_xfer_op_query`).
    pub fn done(&self, op: XferOp) -> Result<bool> {
        let mut d = 0i32;
        // SAFETY: live agent, valid out-pointer.
        check(unsafe { sys::kvc_xfer_op_query(self.raw, op.0, &mut d) })?;
        Ok(d != 0)
    }

    /// Waits up to `timeout_ms` (< 0: no limit) for import `op` and retires it
    /// (`kvc_xfer_op_wait`). On a finished import the result comes back also when it failed:
    /// `(Ok or Err(status), Some(result))`; `BUSY` (still running) gives no result.
    pub fn wait(&self, op: XferOp, timeout_ms: i64) -> (Result<()>, Option<ImportResult>) {
        // SAFETY: an all-zero kvc_xfer_import_result is valid; struct_size is set below.
        let mut r: sys::kvc_xfer_import_result = unsafe { std::mem::zeroed() };
        r.struct_size = std::mem::size_of::<sys::kvc_xfer_import_result>() as u32;
        r.status = -1;
        // SAFETY: live agent, valid out-pointer.
        let res = check(unsafe { sys::kvc_xfer_op_wait(self.raw, op.0, timeout_ms, &mut r) });
        let result = (r.status != -1).then(|| ImportResult {
            failure: XferFailure::from_raw(r.failure),
            blocks: r.blocks,
            blocks_pulled: r.blocks_pulled,
            blocks_cached: r.blocks_cached,
            blocks_skipped: r.blocks_skipped,
            bytes_pulled: r.bytes_pulled,
            cached_tokens: r.cached_tokens,
            seconds: r.seconds,
        });
        (res, result)
    }

    /// The agent's counters (`kvc_xfer_get_stats`).
    pub fn stats(&self) -> Result<XferStats> {
        // SAFETY: an all-zero kvc_xfer_stats is valid; struct_size is set below.
        let mut s: sys::kvc_xfer_stats = unsafe { std::mem::zeroed() };
        s.struct_size = std::mem::size_of::<sys::kvc_xfer_stats>() as u32;
        // SAFETY: live agent, valid out-pointer.
        check(unsafe { sys::kvc_xfer_get_stats(self.raw, &mut s) })?;
        Ok(XferStats {
            exports_active: s.exports_active,
            exports_total: s.exports_total,
            exports_expired: s.exports_expired,
            export_blocks_held: s.export_blocks_held,
            lease_checks: s.lease_checks,
            imports_started: s.imports_started,
            imports_ok: s.imports_ok,
            imports_failed: s.imports_failed,
            blocks_pulled: s.blocks_pulled,
            blocks_cached: s.blocks_cached,
            blocks_skipped: s.blocks_skipped,
            bytes_pulled: s.bytes_pulled,
            import_seconds: s.import_seconds,
            failures: {
                let mut f = [0i64; 10];
                f[..9].copy_from_slice(&s.failures);
                f[sys::KVC_XFER_FAIL_DEVICE as usize] = s.failures_device;
                f
            },
        })
    }
}

impl Drop for XferAgent<'_> {
    fn drop(&mut self) {
        // SAFETY: the handle came from kvc_xfer_agent_create and is destroyed once.
        unsafe {
            sys::kvc_xfer_agent_destroy(self.raw);
        }
    }
}
