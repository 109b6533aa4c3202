//! Sequence operations: admission, allocation, decode append, fork, free and the per-sequence
//! block table / slot mapping, plus the pending copy-on-write pairs.
use kvc_sys as sys;

use crate::error::{check, to_len, Error, Result, Status};
use crate::keys::{keys_ptr, Keys};
use crate::pool::Pool;
use crate::types::AllocVerdict;

/// One pending copy-on-write pair: copy block `src`'s KV into block `dst`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct CopyPair {
    pub src: i32,
    pub dst: i32,
}

impl Pool {
    /// Would [`Pool::alloc`] of this prompt succeed now, later, or never (`kvc_can_alloc`)?
    pub fn can_alloc(&self, tokens: &[i32], keys: Option<&Keys>) -> Result<AllocVerdict> {
        let mut verdict = -1;
        // SAFETY: live pool; tokens valid for tokens.len() reads; keys NULL or live.
        check(unsafe {
            sys::kvc_can_alloc(self.raw(), tokens.as_ptr(), tokens.len() as i64, keys_ptr(keys), &mut verdict)
        })?;
        Ok(AllocVerdict(verdict))
    }

    /// Creates sequence `seq_id` holding the prompt `tokens`; returns how many leading tokens were
    /// served from the prefix cache (`kvc_alloc`).
    pub fn alloc(&self, seq_id: u64, tokens: &[i32], keys: Option<&Keys>) -> Result<i64> {
        let mut cached = 0;
        // SAFETY: as can_alloc; cached is a valid out-pointer.
        check(unsafe {
            sys::kvc_alloc(
                self.raw(),
                seq_id,
                tokens.as_ptr(),
                tokens.len() as i64,
                keys_ptr(keys),
                &mut cached,
            )
        })?;
        Ok(cached)
    }

    /// [`Pool::can_alloc`] and, when the verdict is OK, [`Pool::alloc`], in one call that walks the
    /// prompt once (`kvc_admit`): how a scheduler admits a waiting request. Returns the verdict and
    /// the cached tokens; only with [`AllocVerdict::OK`] was `seq_id` created (cached tokens 0
    /// otherwise, and nothing changed).
    pub fn admit(&self, seq_id: u64, tokens: &[i32], keys: Option<&Keys>) -> Result<(AllocVerdict, i64)> {
        let (mut verdict, mut cached) = (-1, 0);
        // SAFETY: live pool; tokens valid for tokens.len() reads; keys NULL or live; valid out-pointers.
        check(unsafe {
            sys::kvc_admit(
                self.raw(),
                seq_id,
                tokens.as_ptr(),
                tokens.len() as i64,
                keys_ptr(keys),
                &mut verdict,
                &mut cached,
            )
        })?;
        Ok((AllocVerdict(verdict), cached))
    }

    /// A decode step for many sequences in one call (`kvc_append_batch`): entry `i` appends
    /// `tokens[offsets[i]..offsets[i + 1]]` to `seq_ids[i]` and reserves `lookahead_per_seq[i]`
    /// further slots (`None`: `lookahead` for every entry), exactly as the [`Pool::append`] calls it
    /// stands for, in order. `token_offsets` has `seq_ids.len() + 1` entries from 0; `None` means
    /// one token per entry, `tokens[i]`. `new_blocks` (`seq_ids.len()` entries) receives each
    /// appended entry's new blocks.
    ///
    /// Returns the number of entries appended and the outcome: the call stops at the first entry
    /// `append` would refuse (the ones before it appended, it and the later ones untouched, the
    /// error being that entry's, its message naming the entry); bad arguments in any entry change
    /// nothing (0 appended). A scheduler listing its sequences by priority preempts from the end on
    /// `OUT_OF_BLOCKS` and calls again with `&seq_ids[appended..]`.
    #[must_use = "the entries from the returned count on were not appended when the result is an error"]
    pub fn append_batch(
        &self,
        seq_ids: &[u64],
        token_offsets: Option<&[i64]>,
        tokens: &[i32],
        lookahead: i64,
        lookahead_per_seq: Option<&[i64]>,
        new_blocks: Option<&mut [i32]>,
    ) -> (usize, Result<()>) {
        let n = seq_ids.len();
        let refuse = |msg: String| (0, Err(Error::new(Status::INVALID_ARG, format!("kvc_append_batch: {}", msg))));
        // C reads these slices by the lengths the entries imply: check them here.
        if i32::try_from(n).is_err() {
            return refuse(format!("{} entries, more than i32::MAX", n));
        }
        match token_offsets {
            Some(o) if o.len() != n + 1 => return refuse(format!("token_offsets has {} entries, want {}", o.len(), n + 1)),
            Some(o) if o[n] > tokens.len() as i64 => {
                return refuse(format!("token_offsets end at {}, past the {} tokens", o[n], tokens.len()))
            }
            None if tokens.len() < n => return refuse(format!("{} tokens for {} entries of one token each", tokens.len(), n)),
            _ => {}
        }
        if let Some(l) = lookahead_per_seq {
            if l.len() != n {
                return refuse(format!("lookahead_per_seq has {} entries, want {}", l.len(), n));
            }
        }
        let new_blocks_ptr = match new_blocks {
            Some(b) if b.len() != n => return refuse(format!("new_blocks has {} entries, want {}", b.len(), n)),
            Some(b) => b.as_mut_ptr(),
            None => std::ptr::null_mut(),
        };
        let mut done = 0i32;
        // SAFETY: live pool; every slice is at least as long as the entries make C read (checked
        // above; C checks that the offsets start at 0 and never decrease before reading tokens);
        // done is a valid out-pointer.
        let status = unsafe {
            sys::kvc_append_batch(
                self.raw(),
                n as i32,
                seq_ids.as_ptr(),
                token_offsets.map_or(std::ptr::null(), |o| o.as_ptr()),
                tokens.as_ptr(),
                lookahead,
                lookahead_per_seq.map_or(std::ptr::null(), |l| l.as_ptr()),
                new_blocks_ptr,
                &mut done,
            )
        };
        (done.max(0) as usize, check(status))
    }

    /// Appends confirmed `tokens` and reserves `lookahead` further slots; returns the number of
    /// blocks taken, copy-on-write blocks included (`kvc_append`).
    pub fn append(&self, seq_id: u64, tokens: &[i32], lookahead: i64) -> Result<i32> {
        let mut new_blocks = 0;
        // SAFETY: live pool; tokens valid for tokens.len() reads.
        check(unsafe {
            sys::kvc_append(
                self.raw(),
                seq_id,
                tokens.as_ptr(),
                tokens.len() as i64,
                lookahead,
                &mut new_blocks,
            )
        })?;
        Ok(new_blocks)
    }

    /// Rolls `seq_id` back to its first `num_tokens` confirmed tokens and drops its lookahead: the
    /// rollback after speculative decoding rejects drafts (`kvc_truncate`). Returns the number of
    /// blocks that left the sequence's table; cached blocks stay cached.
    pub fn truncate(&self, seq_id: u64, num_tokens: i64) -> Result<i32> {
        let mut freed_blocks = 0;
        // SAFETY: live pool; freed_blocks is a valid out-pointer.
        check(unsafe { sys::kvc_truncate(self.raw(), seq_id, num_tokens, &mut freed_blocks) })?;
        Ok(freed_blocks)
    }

    /// Creates `child_id` sharing every block of `parent_id` (`kvc_fork`).
    pub fn fork(&self, parent_id: u64, child_id: u64) -> Result<()> {
        // SAFETY: live pool.
        check(unsafe { sys::kvc_fork(self.raw(), parent_id, child_id) })
    }

    /// Frees sequence `seq_id` (`kvc_free`); a second free is UNKNOWN_SEQ.
    pub fn free(&self, seq_id: u64) -> Result<()> {
        // SAFETY: live pool.
        check(unsafe { sys::kvc_free(self.raw(), seq_id) })
    }

    /// Frees a sequence whose KV may never have been computed (`kvc_abort`): the blocks it filled
    /// itself after its prompt's cache hit leave the prefix cache (unless shared or pinned), so a
    /// request cancelled before its prefill, or a multi-pool allocation rolled back, leaves no
    /// KV-less cache entries. Use [`Pool::free`] for sequences that ran.
    pub fn abort(&self, seq_id: u64) -> Result<()> {
        // SAFETY: live pool.
        check(unsafe { sys::kvc_abort(self.raw(), seq_id) })
    }

    /// The block table of `seq_id` (`kvc_seq_block_table`).
    pub fn block_table(&self, seq_id: u64) -> Result<Vec<i32>> {
        loop {
            let mut len = 0;
            // SAFETY: size query (NULL, 0) with a valid out_len.
            check(unsafe {
                sys::kvc_seq_block_table(self.raw(), seq_id, std::ptr::null_mut(), 0, &mut len)
            })?;
            let mut table = vec![0i32; to_len(len, "block table length")?];
            // SAFETY: table holds table.len() writable entries.
            let status = unsafe {
                sys::kvc_seq_block_table(self.raw(), seq_id, table.as_mut_ptr(), table.len() as i64, &mut len)
            };
            // Another thread may grow the sequence between the two calls: ask again.
            if status == sys::KVC_ERR_BUFFER_TOO_SMALL {
                continue;
            }
            check(status)?;
            table.truncate(to_len(len, "block table length")?);
            return Ok(table);
        }
    }

    /// Confirmed token count of `seq_id` (`kvc_seq_num_tokens`).
    pub fn num_tokens(&self, seq_id: u64) -> Result<i64> {
        let mut n = 0;
        // SAFETY: live pool, valid out-pointer.
        check(unsafe { sys::kvc_seq_num_tokens(self.raw(), seq_id, &mut n) })?;
        Ok(n)
    }

    /// Slots of positions `[first_pos, first_pos + count)` of `seq_id` (`kvc_seq_slot_mapping`).
    pub fn slot_mapping(&self, seq_id: u64, first_pos: i64, count: i64) -> Result<Vec<i64>> {
        // The buffer is sized from `count`, a caller value: a huge one must come back as the
        // library's error, not as an allocation failure (an abort). Positions can only lie in
        // the sequence's blocks, so a count beyond table length x block size is invalid anyway:
        // the library then gets an empty buffer and reports the bad range itself.
        let mut cap = usize::try_from(count).unwrap_or(0);
        if cap > 4096 {
            let mut len = 0;
            // SAFETY: size query (NULL, 0) with a valid out_len.
            check(unsafe {
                sys::kvc_seq_block_table(self.raw(), seq_id, std::ptr::null_mut(), 0, &mut len)
            })?;
            let most = len.saturating_mul(self.cached_config().block_size as i64);
            if count > most {
                cap = 0;
            }
        }
        let mut slots = vec![0i64; cap];
        // SAFETY: slots holds cap writable entries, the cap passed (a dangling but non-NULL
        // pointer when cap is 0: nothing is written then).
        check(unsafe {
            sys::kvc_seq_slot_mapping(self.raw(), seq_id, first_pos, count, slots.as_mut_ptr(), cap as i64)
        })?;
        Ok(slots)
    }

    /// Number of copy-on-write pairs queued and not yet taken (drains nothing).
    pub fn pending_copy_count(&self) -> Result<i64> {
        let mut count = 0;
        // SAFETY: the documented count query: NULL arrays, cap 0.
        check(unsafe {
            sys::kvc_take_pending_copies(
                self.raw(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                0,
                &mut count,
            )
        })?;
        Ok(count)
    }

    /// Drains the pending copy-on-write pairs, oldest first (`kvc_take_pending_copies`).
    /// Pairs queued by other threads after the count was read stay queued for the next call.
    pub fn take_pending_copies(&self) -> Result<Vec<CopyPair>> {
        let cap = to_len(self.pending_copy_count()?, "pending copy count")?;
        if cap == 0 {
            return Ok(Vec::new());
        }
        let (mut src, mut dst) = (vec![0i32; cap], vec![0i32; cap]);
        let mut count = 0;
        // SAFETY: src and dst hold cap writable entries each.
        check(unsafe {
            sys::kvc_take_pending_copies(
                self.raw(),
                src.as_mut_ptr(),
                dst.as_mut_ptr(),
                cap as i64,
                &mut count,
            )
        })?;
        let n = to_len(count, "pending copy count")?.min(cap);
        Ok(src[..n].iter().zip(&dst[..n]).map(|(&src, &dst)| CopyPair { src, dst }).collect())
    }
}
