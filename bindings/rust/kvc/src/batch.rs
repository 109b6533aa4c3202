//! Batch metadata for one forward step: block tables, sequence lengths, slot mapping and the
//! CSR page table, built once per step and reused by every layer.
use std::ffi::c_void;
use std::marker::PhantomData;
use std::ptr::NonNull;

use kvc_sys as sys;

use crate::error::{check, to_len, Error, Result, Status};
use crate::pool::Pool;

/// An owned `kvc_batch`, destroyed on drop. It borrows its pool: the C API forbids destroying a
/// batch after its pool, and the lifetime makes that a compile error:
///
/// ```compile_fail
/// let batch = {
///     let pool = kvc::Pool::new(&kvc::PoolConfig { num_blocks: 8, ..Default::default() }).unwrap();
///     kvc::Batch::new(&pool, 1, 8, 4).unwrap()
/// }; // error[E0597]: `pool` does not live long enough
/// ```
pub struct Batch<'p> {
    raw: NonNull<sys::kvc_batch>,
    pool: &'p Pool,
    // Not Sync (see below): a marker that is Send but not Sync.
    _not_sync: PhantomData<std::cell::Cell<()>>,
}

// SAFETY (Send): a kvc_batch has no thread affinity, and the &Pool it carries is Send because
// Pool is Sync. Deliberately not Sync: the C contract makes a batch a single-owner mutable object
// with no internal locking (one step, built and consumed by one thread); attention launches read
// it while the caller may rebuild it for the next step, and the stricter reading of the contract
// keeps a const entry point that touches batch-owned scratch memory sound.
unsafe impl Send for Batch<'_> {}

impl std::fmt::Debug for Batch<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batch").field("raw", &self.raw).field("pool", &self.pool.raw()).finish()
    }
}

/// Sizes and array addresses of the last build (`kvc_batch_info`). The addresses are in backend
/// memory (device memory on CUDA) and stay valid until the batch is dropped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchInfo {
    pub num_seqs: i32,
    /// Total new (query) tokens.
    pub num_tokens: i64,
    /// Table row width.
    pub max_blocks_per_seq: i32,
    pub max_q_len: i32,
    pub max_seq_len: i64,
    /// Entries of kv_indices.
    pub num_indices: i64,
    /// Every q_len == 1.
    pub is_decode: bool,
    /// Table rows sent in the last build (incremental upload).
    pub rows_uploaded: i32,
    pub block_tables: u64,
    pub seq_lens: u64,
    pub query_start_loc: u64,
    pub slot_mapping: u64,
    pub kv_indptr: u64,
    pub kv_indices: u64,
    pub kv_last_page_len: u64,
}

impl<'p> Batch<'p> {
    /// Creates a batch with fixed capacity (`kvc_batch_create`): every buffer is allocated here.
    pub fn new(pool: &'p Pool, max_seqs: i32, max_tokens: i64, max_blocks_per_seq: i32) -> Result<Batch<'p>> {
        let mut raw = std::ptr::null_mut();
        // SAFETY: live pool, valid out-pointer.
        check(unsafe {
            sys::kvc_batch_create(pool.raw(), max_seqs, max_tokens, max_blocks_per_seq, &mut raw)
        })?;
        let raw = NonNull::new(raw)
            .ok_or_else(|| Error::new(Status::INTERNAL, "kvc_batch_create returned OK and NULL"))?;
        Ok(Batch { raw, pool, _not_sync: PhantomData })
    }

    /// The pool this batch belongs to.
    pub fn pool(&self) -> &'p Pool {
        self.pool
    }

    /// Builds the step's metadata for `seq_ids[i]` with query length `q_lens[i]`
    /// (`kvc_batch_build`). On failure the previous step's metadata stays intact.
    pub fn build(&mut self, seq_ids: &[u64], q_lens: &[i64]) -> Result<()> {
        if seq_ids.len() != q_lens.len() {
            return Err(Error::new(
                Status::INVALID_ARG,
                format!(
                    "kvc::Batch::build: {} sequence ids but {} query lengths",
                    seq_ids.len(),
                    q_lens.len()
                ),
            ));
        }
        let num_seqs = i32::try_from(seq_ids.len()).map_err(|_| {
            Error::new(Status::INVALID_ARG, format!("kvc::Batch::build: {} sequences", seq_ids.len()))
        })?;
        // SAFETY: live batch owned exclusively (&mut self); both arrays hold num_seqs entries.
        check(unsafe { sys::kvc_batch_build(self.raw.as_ptr(), seq_ids.as_ptr(), q_lens.as_ptr(), num_seqs) })
    }

    /// Sets the CUDA stream later builds upload on (`kvc_batch_set_stream`); 0 is the default
    /// stream, the initial setting. A build enqueues its upload there and returns without waiting
    /// for the stream: later work on the same stream sees the new arrays, work on another stream
    /// must be ordered after it by the caller (`kvc_batch_set_stream` in kvc.h); ignored on the CPU
    /// backend and for metadata-only pools.
    ///
    /// # Safety
    /// `stream` must be 0 or a live `cudaStream_t` of the pool's device that stays alive while
    /// [`Batch::build`] uses it (until it is replaced here or the batch is dropped), and must not
    /// be capturing a CUDA graph during a build.
    pub unsafe fn set_stream(&mut self, stream: u64) -> Result<()> {
        check(sys::kvc_batch_set_stream(self.raw.as_ptr(), stream as usize as *mut c_void))
    }

    /// Chooses the KV-cache group whose block tables the next [`Batch::build`] records
    /// (`kvc_batch_set_group`; hybrid pools, [`Pool::create_hybrid`]; default group 0). A group
    /// out of range, or an SSM group (no block tables to launch over), is `Status::INVALID_ARG`.
    pub fn set_group(&mut self, group: i32) -> Result<()> {
        // SAFETY: live batch owned exclusively (&mut self).
        check(unsafe { sys::kvc_batch_set_group(self.raw.as_ptr(), group) })
    }

    /// Sizes and addresses of the last build (`kvc_batch_get_info`); STATE if never built.
    pub fn info(&self) -> Result<BatchInfo> {
        // SAFETY: plain data; zero is valid, struct_size set below.
        let mut raw: sys::kvc_batch_info = unsafe { std::mem::zeroed() };
        raw.struct_size = std::mem::size_of::<sys::kvc_batch_info>() as u32;
        // SAFETY: live batch, valid out-pointer of the declared size.
        check(unsafe { sys::kvc_batch_get_info(self.raw.as_ptr(), &mut raw) })?;
        Ok(BatchInfo {
            num_seqs: raw.num_seqs,
            num_tokens: raw.num_tokens,
            max_blocks_per_seq: raw.max_blocks_per_seq,
            max_q_len: raw.max_q_len,
            max_seq_len: raw.max_seq_len,
            num_indices: raw.num_indices,
            is_decode: raw.is_decode != 0,
            rows_uploaded: raw.rows_uploaded,
            block_tables: raw.block_tables,
            seq_lens: raw.seq_lens,
            query_start_loc: raw.query_start_loc,
            slot_mapping: raw.slot_mapping,
            kv_indptr: raw.kv_indptr,
            kv_indices: raw.kv_indices,
            kv_last_page_len: raw.kv_last_page_len,
        })
    }

    /// The last build's slot mapping, copied to host memory (`kvc_batch_copy_slot_mapping`).
    pub fn slot_mapping(&self) -> Result<Vec<i64>> {
        let n = to_len(self.info()?.num_tokens, "batch token count")?;
        let mut out = vec![0i64; n];
        // SAFETY: out holds n writable entries, the cap passed.
        check(unsafe { sys::kvc_batch_copy_slot_mapping(self.raw.as_ptr(), out.as_mut_ptr(), n as i64) })?;
        Ok(out)
    }

    /// The last build's padded block tables, row-major `[num_seqs][max_blocks_per_seq]`, -1
    /// padding (`kvc_batch_copy_block_tables`).
    pub fn block_tables(&self) -> Result<Vec<i32>> {
        let info = self.info()?;
        let n = to_len(info.num_seqs as i64, "batch sequence count")?
            .checked_mul(to_len(info.max_blocks_per_seq as i64, "table width")?)
            .ok_or_else(|| Error::new(Status::OVERFLOW, "kvc::Batch::block_tables: size overflows"))?;
        let mut out = vec![0i32; n];
        // SAFETY: out holds n writable entries, the cap passed.
        check(unsafe { sys::kvc_batch_copy_block_tables(self.raw.as_ptr(), out.as_mut_ptr(), n as i64) })?;
        Ok(out)
    }

    pub(crate) fn as_ptr(&self) -> *const sys::kvc_batch {
        self.raw.as_ptr()
    }
}

impl Drop for Batch<'_> {
    fn drop(&mut self) {
        // SAFETY: self owns the batch, and its pool is still alive (borrowed for 'p).
        unsafe { sys::kvc_batch_destroy(self.raw.as_ptr()) };
    }
}

impl Pool {
    /// Shorthand for [`Batch::new`].
    pub fn batch(&self, max_seqs: i32, max_tokens: i64, max_blocks_per_seq: i32) -> Result<Batch<'_>> {
        Batch::new(self, max_seqs, max_tokens, max_blocks_per_seq)
    }
}
