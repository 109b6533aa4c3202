//! KV storage: its description, cache writes, copy-on-write copies and raw block copies.
//!
//! Functions taking Rust slices are safe: they check the slice lengths against the pool's shape
//! and require the CPU backend (host memory). The `*_raw` functions take device addresses and
//! stream handles as opaque `u64` integers and are `unsafe`: the caller vouches for them.
use std::ffi::c_void;

use kvc_sys as sys;

use crate::error::{check, to_len, Error, Result, Status};
use crate::pool::Pool;
use crate::types::{Backend, Dtype, HostElement};

/// Description of the pool's KV storage (`kvc_storage_info`). Byte offset of element
/// (block, layer, kv, head, token, d) = block * block_stride + layer * layer_stride
/// + kv * kv_stride + head * head_stride + token * token_stride + d * elem_bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StorageInfo {
    pub backend: Backend,
    pub kv_dtype: Dtype,
    pub elem_bytes: i32,
    /// CUDA ordinal, -1 on CPU.
    pub device: i32,
    /// Address of the storage (a device address on CUDA).
    pub base_address: u64,
    pub total_bytes: i64,
    pub block_stride: i64,
    pub layer_stride: i64,
    pub kv_stride: i64,
    pub head_stride: i64,
    pub token_stride: i64,
}

fn as_void<T>(p: *const T) -> *const c_void {
    p as *const c_void
}

impl Pool {
    /// Describes the KV storage (`kvc_storage_get_info`); STATE for a metadata-only pool.
    pub fn storage_info(&self) -> Result<StorageInfo> {
        // SAFETY: plain data; zero is valid, struct_size set below.
        let mut raw: sys::kvc_storage_info = unsafe { std::mem::zeroed() };
        raw.struct_size = std::mem::size_of::<sys::kvc_storage_info>() as u32;
        // SAFETY: live pool, valid out-pointer of the declared size.
        check(unsafe { sys::kvc_storage_get_info(self.raw(), &mut raw) })?;
        Ok(StorageInfo {
            backend: Backend(raw.backend),
            kv_dtype: Dtype(raw.kv_dtype),
            elem_bytes: raw.elem_bytes,
            device: raw.device,
            base_address: raw.base_address,
            total_bytes: raw.total_bytes,
            block_stride: raw.block_stride,
            layer_stride: raw.layer_stride,
            kv_stride: raw.kv_stride,
            head_stride: raw.head_stride,
            token_stride: raw.token_stride,
        })
    }

    /// Host slices may only be handed to a pool whose storage (and kernels) live in host memory.
    pub(crate) fn require_host_backend(&self, what: &str) -> Result<()> {
        let info = self.storage_info()?;
        if info.backend != Backend::CPU {
            return Err(Error::new(
                Status::UNSUPPORTED,
                format!("kvc::Pool::{}: host slices need the CPU backend (this pool: {}); use the *_raw variant with device addresses", what, info.backend.name()),
            ));
        }
        Ok(())
    }

    /// Writes the step's new K and V of `layer` into their slots (`kvc_cache_write`, CPU
    /// backend). `k` and `v` are `[slot_mapping.len(), num_kv_heads, head_dim]`; a slot < 0 is
    /// padding. FP8 caches store value / scale.
    pub fn cache_write<T: HostElement>(
        &self,
        layer: i32,
        slot_mapping: &[i64],
        k: &[T],
        v: &[T],
        k_scale: f32,
        v_scale: f32,
    ) -> Result<()> {
        self.require_host_backend("cache_write")?;
        let cfg = self.cached_config();
        let want = slot_mapping
            .len()
            .checked_mul(to_len(cfg.num_kv_heads as i64, "num_kv_heads")?)
            .and_then(|n| n.checked_mul(cfg.head_dim.max(0) as usize));
        if want != Some(k.len()) || want != Some(v.len()) {
            return Err(Error::new(
                Status::INVALID_ARG,
                format!(
                    "kvc::Pool::cache_write: k and v must hold tokens x num_kv_heads x head_dim = {} x {} x {} elements (k {}, v {})",
                    slot_mapping.len(), cfg.num_kv_heads, cfg.head_dim, k.len(), v.len()
                ),
            ));
        }
        // SAFETY: CPU backend, so the library reads host memory; every slice holds exactly what
        // the library reads for slot_mapping.len() tokens of this pool's shape.
        check(unsafe {
            sys::kvc_cache_write(
                self.raw(),
                layer,
                slot_mapping.as_ptr(),
                slot_mapping.len() as i64,
                as_void(k.as_ptr()),
                as_void(v.as_ptr()),
                T::DTYPE.0,
                k_scale,
                v_scale,
                std::ptr::null_mut(),
            )
        })
    }

    /// `kvc_cache_write` with backend-memory addresses (device addresses on CUDA).
    ///
    /// # Safety
    /// `slot_mapping` must address `num_tokens` int64 values and `k`, `v` each
    /// `num_tokens x num_kv_heads x head_dim` elements of `src_dtype`, all in the pool's backend
    /// memory and alive until the write completes (on CUDA: until `stream` reaches it);
    /// `stream` must be 0 or a live `cudaStream_t` of the pool's device.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn cache_write_raw(
        &self,
        layer: i32,
        slot_mapping: u64,
        num_tokens: i64,
        k: u64,
        v: u64,
        src_dtype: Dtype,
        k_scale: f32,
        v_scale: f32,
        stream: u64,
    ) -> Result<()> {
        check(sys::kvc_cache_write(
            self.raw(),
            layer,
            slot_mapping as usize as *const i64,
            num_tokens,
            k as usize as *const c_void,
            v as usize as *const c_void,
            src_dtype.0,
            k_scale,
            v_scale,
            stream as usize as *mut c_void,
        ))
    }

    /// Drains the pending copy-on-write pairs and copies those blocks (`kvc_copy_pending`, on
    /// the default stream on CUDA); returns the pairs this call copied. Safe from many threads:
    /// when it returns, every pair queued before the call has been copied (on CUDA: is ordered
    /// before later work on the stream), whichever thread's call drained it.
    pub fn copy_pending(&self) -> Result<i64> {
        let mut copied = 0;
        // SAFETY: live pool; a NULL stream is the default stream (ignored on CPU).
        check(unsafe { sys::kvc_copy_pending(self.raw(), std::ptr::null_mut(), &mut copied) })?;
        Ok(copied)
    }

    /// `kvc_copy_pending` ordered on a CUDA stream.
    ///
    /// # Safety
    /// `stream` must be 0 or a live `cudaStream_t` of the pool's device.
    pub unsafe fn copy_pending_on_stream(&self, stream: u64) -> Result<i64> {
        let mut copied = 0;
        check(sys::kvc_copy_pending(self.raw(), stream as usize as *mut c_void, &mut copied))?;
        Ok(copied)
    }

    fn host_bytes_for(&self, count: usize) -> Result<usize> {
        let stride = to_len(self.storage_info()?.block_stride, "block stride")?;
        count
            .checked_mul(stride)
            .ok_or_else(|| Error::new(Status::OVERFLOW, "kvc::Pool: block count x block_stride overflows"))
    }

    /// Copies whole blocks to host memory (any backend; synchronous): block i of `block_ids`
    /// at offset i x block_stride of the result (`kvc_storage_copy_blocks`, to_host = 1).
    pub fn copy_blocks_to_host(&self, block_ids: &[i32]) -> Result<Vec<u8>> {
        let mut host = vec![0u8; self.host_bytes_for(block_ids.len())?];
        // SAFETY: host holds block_ids.len() x block_stride writable bytes.
        check(unsafe {
            sys::kvc_storage_copy_blocks(
                self.raw(),
                block_ids.as_ptr(),
                block_ids.len() as i64,
                host.as_mut_ptr() as *mut c_void,
                1,
            )
        })?;
        Ok(host)
    }

    /// Copies whole blocks from host memory into the storage (any backend; synchronous).
    /// `data` must hold exactly block_ids.len() x block_stride bytes.
    pub fn copy_blocks_from_host(&self, block_ids: &[i32], data: &[u8]) -> Result<()> {
        let want = self.host_bytes_for(block_ids.len())?;
        if data.len() != want {
            return Err(Error::new(
                Status::INVALID_ARG,
                format!(
                    "kvc::Pool::copy_blocks_from_host: {} blocks need {} bytes, got {}",
                    block_ids.len(),
                    want,
                    data.len()
                ),
            ));
        }
        // SAFETY: data holds exactly what the library reads; with to_host = 0 the library only
        // reads from `host`, so casting away const is sound.
        check(unsafe {
            sys::kvc_storage_copy_blocks(
                self.raw(),
                block_ids.as_ptr(),
                block_ids.len() as i64,
                data.as_ptr() as *mut c_void,
                0,
            )
        })
    }
}
