//! Prefix cache: side-effect-free lookup, pinning, reset, and the KV event stream for
//! KV-aware routers.
use kvc_sys as sys;

use crate::error::{check, to_len, Result};
use crate::keys::{keys_ptr, Keys};
use crate::pool::Pool;
use crate::tiers::Tier;
use crate::types::EventType;

/// One KV event (`kvc_event`): a block entered or left the prefix cache of one tier, or the cache
/// was reset (every tier).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub kind: EventType,
    /// The block's 128-bit chained hash.
    pub hash: u128,
    /// The previous block's hash (a fixed seed for a prompt's first block).
    pub parent_hash: u128,
    /// BLOCK_STORED: the block's LoRA adapter (0 = none).
    pub lora_id: u64,
    /// BLOCK_STORED: digest of salt / multimodal keys (0 = none).
    pub extra_keys_digest: u64,
    pub block_id: i32,
    /// BLOCK_STORED: the block's token ids.
    pub tokens: Vec<i32>,
    /// Increases by one per event produced; a gap means events were dropped.
    pub sequence_number: u64,
    /// The tier the block entered or left: the device unless [`Pool::set_tier_events`] turned on
    /// host and disk events (whose `block_id` is the slot in that tier).
    pub tier: Tier,
}

/// The C calls that take a prompt and its keys and answer a token count: `kvc_prefix_lookup`,
/// `kvc_prefix_pin`, `kvc_prefix_unpin`, `kvc_tier_prefetch`.
pub(crate) type PromptCountFn = unsafe extern "C" fn(
    *mut sys::kvc_pool,
    *const i32,
    i64,
    *const sys::kvc_keys,
    *mut i64,
) -> sys::kvc_status;

impl Pool {
    pub(crate) fn prompt_count(&self, f: PromptCountFn, tokens: &[i32], keys: Option<&Keys>) -> Result<i64> {
        let mut count = 0i64;
        // SAFETY: live pool; tokens valid for tokens.len() reads; keys NULL or live; count a valid
        // out-pointer; f is one of the functions above, all of this signature and contract.
        check(unsafe { f(self.raw(), tokens.as_ptr(), tokens.len() as i64, keys_ptr(keys), &mut count) })?;
        Ok(count)
    }
}

/// The chained hashes of the prompt's full blocks, block 0 first, exactly as a pool with this block
/// size and these keys computes them and reports them in its events (`kvc_hash_blocks`; the same
/// `u128` as [`Event::hash`]); the partial last block has none. Needs no pool: a KV-aware router
/// predicts hits with it. Only the keys' LoRA id, salt and multimodal items count. The bytes
/// hashed are specified in the libkvc README ("Block hash specification").
pub fn hash_blocks(block_size: i32, tokens: &[i32], keys: Option<&Keys>) -> Result<Vec<u128>> {
    let full = if block_size > 0 { tokens.len() / block_size as usize } else { 0 };
    let (mut hi, mut lo) = (vec![0u64; full], vec![0u64; full]);
    let mut n = 0i64;
    // SAFETY: tokens valid for tokens.len() reads; keys NULL or live (borrowed, so not changed
    // meanwhile); hi and lo valid for `full` writes; n a valid out-pointer.
    check(unsafe {
        sys::kvc_hash_blocks(
            block_size,
            keys_ptr(keys),
            tokens.as_ptr(),
            tokens.len() as i64,
            hi.as_mut_ptr(),
            lo.as_mut_ptr(),
            full as i64,
            &mut n,
        )
    })?;
    Ok((0..to_len(n, "block count")?).map(|i| join(hi[i], lo[i])).collect())
}

fn join(hi: u64, lo: u64) -> u128 {
    ((hi as u128) << 64) | lo as u128
}

impl Pool {
    /// Leading tokens of this prompt cached right now, with no side effects
    /// (`kvc_prefix_lookup`).
    pub fn prefix_lookup(&self, tokens: &[i32], keys: Option<&Keys>) -> Result<i64> {
        self.prompt_count(sys::kvc_prefix_lookup, tokens, keys)
    }

    /// Pins the cached full blocks of this prefix; returns the tokens covered
    /// (`kvc_prefix_pin`). Pins nest. With a sliding window only the blocks a hit
    /// at the prefix's end reads are pinned (kvc.h).
    pub fn prefix_pin(&self, tokens: &[i32], keys: Option<&Keys>) -> Result<i64> {
        self.prompt_count(sys::kvc_prefix_pin, tokens, keys)
    }

    /// Undoes one pin of the same prefix; returns the tokens covered (`kvc_prefix_unpin`).
    /// With overlapping prefixes pinned, pass the tokens the pin covered.
    pub fn prefix_unpin(&self, tokens: &[i32], keys: Option<&Keys>) -> Result<i64> {
        self.prompt_count(sys::kvc_prefix_unpin, tokens, keys)
    }

    /// Drops every cached block (`kvc_prefix_cache_reset`); BUSY while blocks are in use.
    pub fn prefix_cache_reset(&self) -> Result<()> {
        // SAFETY: live pool.
        check(unsafe { sys::kvc_prefix_cache_reset(self.raw()) })
    }

    /// Makes KV events report the host and disk tiers too (`kvc_pool_set_tier_events`): a block
    /// spilled from the device is BLOCK_REMOVED (device) then BLOCK_STORED (host) once copied, and
    /// so on down to disk. Off by default; UNSUPPORTED when the pool has no event ring.
    pub fn set_tier_events(&self, on: bool) -> Result<()> {
        // SAFETY: live pool.
        check(unsafe { sys::kvc_pool_set_tier_events(self.raw(), i32::from(on)) })
    }

    /// Pops the oldest pending KV event, or None when none is pending (`kvc_event_pop`).
    pub fn pop_event(&self) -> Result<Option<Event>> {
        // A BLOCK_STORED event carries block_size token ids.
        let mut tokens = vec![0i32; to_len(self.cached_config().block_size as i64, "block size")?];
        // SAFETY: plain data; zero is valid, struct_size set below.
        let mut raw: sys::kvc_event = unsafe { std::mem::zeroed() };
        raw.struct_size = std::mem::size_of::<sys::kvc_event>() as u32;
        let mut has_event = 0;
        // SAFETY: live pool; raw and has_event valid out-pointers; tokens holds tokens.len()
        // writable entries, the cap passed.
        check(unsafe {
            sys::kvc_event_pop(self.raw(), &mut raw, tokens.as_mut_ptr(), tokens.len() as i64, &mut has_event)
        })?;
        if has_event == 0 {
            return Ok(None);
        }
        let kind = EventType(raw.type_);
        let n = if kind == EventType::BLOCK_STORED {
            (raw.num_tokens.max(0) as usize).min(tokens.len())
        } else {
            0
        };
        tokens.truncate(n);
        Ok(Some(Event {
            kind,
            hash: join(raw.hash_hi, raw.hash_lo),
            parent_hash: join(raw.parent_hash_hi, raw.parent_hash_lo),
            lora_id: raw.lora_id,
            extra_keys_digest: raw.extra_keys_digest,
            block_id: raw.block_id,
            tokens,
            sequence_number: raw.sequence_number,
            tier: Tier::from_raw(raw.tier),
        }))
    }
}
