//! Cache keys: what besides token ids identifies a block's KV content (LoRA, salt, multimodal
//! items), the retention priority of a request's blocks and the cap on a request's prefix hit.
use std::ffi::CString;
use std::ptr::NonNull;

use kvc_sys as sys;

use crate::error::{check, Error, Result, Status};

/// An owned `kvc_keys` object, destroyed on drop.
pub struct Keys {
    raw: NonNull<sys::kvc_keys>,
}

// SAFETY: a kvc_keys has no thread affinity (no thread-local state, no locks); handing the owner
// to another thread is fine.
unsafe impl Send for Keys {}
// Deliberately not Sync: the C contract makes a kvc_keys a single-owner mutable object with no
// internal locking. Rust's &/&mut rules would let several threads read one safely, but the crate
// keeps the stricter reading of the contract; share keys across threads by cloning the settings
// into one Keys per thread (they are tiny).

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keys").field("raw", &self.raw).finish()
    }
}

impl Keys {
    /// An empty key set: no LoRA, no salt, no multimodal items, default priority, no hit cap.
    pub fn new() -> Result<Keys> {
        let mut raw = std::ptr::null_mut();
        // SAFETY: raw is a valid out-pointer.
        check(unsafe { sys::kvc_keys_create(&mut raw) })?;
        NonNull::new(raw)
            .map(|raw| Keys { raw })
            .ok_or_else(|| Error::new(Status::INTERNAL, "kvc_keys_create returned OK and NULL"))
    }

    /// Resets to empty, for reuse by another request.
    pub fn clear(&mut self) -> Result<()> {
        // SAFETY: self.raw is a live kvc_keys owned by self.
        check(unsafe { sys::kvc_keys_clear(self.raw.as_ptr()) })
    }

    /// LoRA adapter id; 0 = none.
    pub fn set_lora(&mut self, lora_id: u64) -> Result<()> {
        // SAFETY: live object owned by self.
        check(unsafe { sys::kvc_keys_set_lora(self.raw.as_ptr(), lora_id) })
    }

    /// Cache salt (tenant isolation), at most [`crate::MAX_SALT_LEN`] bytes; "" = none.
    /// A salt containing a NUL byte is refused with INVALID_ARG (C strings end at NUL).
    pub fn set_salt(&mut self, salt: &str) -> Result<()> {
        let c = CString::new(salt).map_err(|_| {
            Error::new(Status::INVALID_ARG, "kvc::Keys::set_salt: the salt contains a NUL byte")
        })?;
        // SAFETY: live object; c is a NUL-terminated string that outlives the call.
        check(unsafe { sys::kvc_keys_set_salt(self.raw.as_ptr(), c.as_ptr()) })
    }

    /// Adds a multimodal item: its 128-bit content hash covering prompt tokens
    /// `[offset, offset + length)`. Items go in increasing, non-overlapping order.
    pub fn add_mm(&mut self, hash: u128, offset: i64, length: i64) -> Result<()> {
        let (hi, lo) = ((hash >> 64) as u64, hash as u64);
        // SAFETY: live object.
        check(unsafe { sys::kvc_keys_add_mm(self.raw.as_ptr(), hi, lo, offset, length) })
    }

    /// Retention priority in [`crate::PRIORITY_MIN`, `crate::PRIORITY_MAX`].
    pub fn set_priority(&mut self, priority: i32) -> Result<()> {
        // SAFETY: live object.
        check(unsafe { sys::kvc_keys_set_priority(self.raw.as_ptr(), priority) })
    }

    /// Caps the prefix hit of requests using these keys at `max_tokens` tokens, rounded down to a
    /// block boundary: [`Pool::can_alloc`], [`Pool::alloc`], [`Pool::prefix_lookup`] and
    /// [`Pool::prefix_lookup_tiers`] take the longest hit of at most that many tokens (with a
    /// sliding window, the largest valid one below the cap) and the rest of the prompt is
    /// computed. For a model served from several pools, whose prefill must start at one position
    /// in all of them: look up each pool under the cap, lower the cap to the result until it stops
    /// changing, then allocate in every pool under it. -1 removes the cap (the default;
    /// [`Keys::clear`] resets it). [`Pool::prefix_pin`] and [`Pool::prefix_unpin`] ignore it.
    /// Values below -1 give INVALID_ARG.
    ///
    /// [`Pool::can_alloc`]: crate::Pool::can_alloc
    /// [`Pool::alloc`]: crate::Pool::alloc
    /// [`Pool::prefix_lookup`]: crate::Pool::prefix_lookup
    /// [`Pool::prefix_lookup_tiers`]: crate::Pool::prefix_lookup_tiers
    /// [`Pool::prefix_pin`]: crate::Pool::prefix_pin
    /// [`Pool::prefix_unpin`]: crate::Pool::prefix_unpin
    pub fn set_max_cached_tokens(&mut self, max_tokens: i64) -> Result<()> {
        // SAFETY: live object.
        check(unsafe { sys::kvc_keys_set_max_cached_tokens(self.raw.as_ptr(), max_tokens) })
    }

    pub(crate) fn as_ptr(&self) -> *const sys::kvc_keys {
        self.raw.as_ptr()
    }
}

impl Drop for Keys {
    fn drop(&mut self) {
        // SAFETY: self owns the object; it is never used again.
        unsafe { sys::kvc_keys_destroy(self.raw.as_ptr()) };
    }
}

/// The C pointer of optional keys (NULL = no keys).
pub(crate) fn keys_ptr(keys: Option<&Keys>) -> *const sys::kvc_keys {
    keys.map_or(std::ptr::null(), Keys::as_ptr)
}
