//! Paged attention over the batch built last (`kvc_launch_attention`).
use std::ffi::c_void;

use kvc_sys as sys;

use crate::batch::Batch;
use crate::error::{check, to_len, Error, Result, Status};
use crate::types::{Dtype, HostElement};

/// Attention parameters (`kvc_attention_params`); `default()` holds the library's defaults.
/// ALiBi slopes are passed to the launch functions, not stored here.
#[derive(Clone, Debug, PartialEq)]
pub struct AttentionParams {
    /// Query heads (GQA multiple of the KV heads); 0 = the pool's num_q_heads.
    pub num_q_heads: i32,
    /// Dtype of q and out (the host-slice launch sets it from the slice type).
    pub q_dtype: Dtype,
    /// Softmax scale; 0 = 1/sqrt(head_dim).
    pub scale: f32,
    /// FP8 KV dequantization scales.
    pub k_scale: f32,
    pub v_scale: f32,
    /// > 0: logits = softcap * tanh(logits / softcap).
    pub logit_softcap: f32,
    /// > 0: attend only to the last sliding_window positions.
    pub sliding_window: i32,
    /// Decode split-K partition in tokens: 0 = auto, -1 = never split.
    pub partition_size: i32,
}

fn raw_defaults() -> sys::kvc_attention_params {
    // SAFETY: plain data (the one pointer, alibi_slopes, may be NULL): all-zero is valid.
    let mut raw: sys::kvc_attention_params = unsafe { std::mem::zeroed() };
    // SAFETY: raw is a valid, writable struct; only NULL makes this fail.
    let status = unsafe { sys::kvc_attention_params_default(&mut raw) };
    debug_assert_eq!(status, sys::KVC_OK);
    raw
}

impl Default for AttentionParams {
    fn default() -> AttentionParams {
        let raw = raw_defaults();
        AttentionParams {
            num_q_heads: raw.num_q_heads,
            q_dtype: Dtype(raw.q_dtype),
            scale: raw.scale,
            k_scale: raw.k_scale,
            v_scale: raw.v_scale,
            logit_softcap: raw.logit_softcap,
            sliding_window: raw.sliding_window,
            partition_size: raw.partition_size,
        }
    }
}

impl AttentionParams {
    fn to_raw(&self, q_dtype: Dtype, alibi_slopes: *const f32) -> sys::kvc_attention_params {
        let mut raw = raw_defaults();
        raw.num_q_heads = self.num_q_heads;
        raw.q_dtype = q_dtype.0;
        raw.scale = self.scale;
        raw.k_scale = self.k_scale;
        raw.v_scale = self.v_scale;
        raw.logit_softcap = self.logit_softcap;
        raw.sliding_window = self.sliding_window;
        raw.alibi_slopes = alibi_slopes;
        raw.partition_size = self.partition_size;
        raw
    }
}

impl Batch<'_> {
    /// Paged attention for `layer` over this batch with host slices (CPU backend). `q` and `out`
    /// are `[num_tokens, num_q_heads, head_dim]` of this batch's new tokens in batch order; their
    /// element type sets the query dtype. `alibi_slopes`: one slope per query head.
    pub fn attention<T: HostElement>(
        &self,
        layer: i32,
        q: &[T],
        out: &mut [T],
        params: &AttentionParams,
        alibi_slopes: Option<&[f32]>,
    ) -> Result<()> {
        let pool = self.pool();
        pool.require_host_backend("attention")?;
        let cfg = pool.cached_config();
        let heads = if params.num_q_heads > 0 {
            params.num_q_heads
        } else if cfg.num_q_heads > 0 {
            cfg.num_q_heads
        } else {
            cfg.num_kv_heads
        };
        let tokens = to_len(self.info()?.num_tokens, "batch token count")?;
        let want = tokens
            .checked_mul(to_len(heads as i64, "num_q_heads")?)
            .and_then(|n| n.checked_mul(cfg.head_dim.max(0) as usize));
        if want != Some(q.len()) || want != Some(out.len()) {
            return Err(Error::new(
                Status::INVALID_ARG,
                format!(
                    "kvc::Batch::attention: q and out must hold num_tokens x num_q_heads x head_dim = {} x {} x {} elements (q {}, out {})",
                    tokens, heads, cfg.head_dim, q.len(), out.len()
                ),
            ));
        }
        if let Some(slopes) = alibi_slopes {
            if slopes.len() != heads.max(0) as usize {
                return Err(Error::new(
                    Status::INVALID_ARG,
                    format!("kvc::Batch::attention: {} ALiBi slopes for {} query heads", slopes.len(), heads),
                ));
            }
        }
        let raw = params.to_raw(T::DTYPE, alibi_slopes.map_or(std::ptr::null(), <[f32]>::as_ptr));
        // SAFETY: CPU backend (host memory); q/out hold exactly what the kernel reads/writes for
        // this batch and the head count it uses; the slopes hold one value per query head; the
        // batch belongs to `pool` by construction.
        check(unsafe {
            sys::kvc_launch_attention(
                pool.raw(),
                self.as_ptr(),
                layer,
                q.as_ptr() as *const c_void,
                out.as_mut_ptr() as *mut c_void,
                &raw,
                std::ptr::null_mut(),
            )
        })
    }

    /// `kvc_launch_attention` with backend-memory addresses (device addresses on CUDA; the
    /// launch is asynchronous on `stream`).
    ///
    /// # Safety
    /// `q` and `out` must address `num_tokens x num_q_heads x head_dim` elements of
    /// `params.q_dtype` in the pool's backend memory, `alibi_slopes` 0 or one f32 per query head
    /// there, all alive until the kernel completes; `stream` must be 0 or a live `cudaStream_t`
    /// of the pool's device.
    pub unsafe fn attention_raw(
        &self,
        layer: i32,
        q: u64,
        out: u64,
        params: &AttentionParams,
        alibi_slopes: u64,
        stream: u64,
    ) -> Result<()> {
        let raw = params.to_raw(params.q_dtype, alibi_slopes as usize as *const f32);
        check(sys::kvc_launch_attention(
            self.pool().raw(),
            self.as_ptr(),
            layer,
            q as usize as *const c_void,
            out as usize as *mut c_void,
            &raw,
            stream as usize as *mut c_void,
        ))
    }
}
