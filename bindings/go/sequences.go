package kvc

import (
	"errors"
	"fmt"
	"math"

	"kvc.dev/kvc/internal/raw"
)

// AllocVerdict is the answer of CanAlloc (vLLM's watermark rule).
type AllocVerdict int32

const (
	AllocOK    AllocVerdict = 0 // fits now and leaves the watermark free
	AllocLater AllocVerdict = 1 // fits once other sequences free blocks
	AllocNever AllocVerdict = 2 // can never fit in this pool
)

func (v AllocVerdict) String() string {
	switch v {
	case AllocOK:
		return "OK"
	case AllocLater:
		return "LATER"
	case AllocNever:
		return "NEVER"
	}
	return "AllocVerdict(?)"
}

// CanAlloc tells whether Alloc of this prompt would succeed now, later or never (kvc_can_alloc).
func (p *Pool) CanAlloc(tokens []int32, keys *Keys) (AllocVerdict, error) {
	var v [1]int32
	err := p.doKeys("CanAlloc", keys, func(h raw.Struct_SS_kvc_pool, k raw.Struct_SS_kvc_keys) raw.Enum_SS_kvc_status {
		return raw.Kvc_can_alloc(h, nonNil(tokens), int64(len(tokens)), k, v[:])
	})
	return AllocVerdict(v[0]), err
}

// Alloc creates sequence seq holding the prompt tokens, sharing the longest cached prefix
// (kvc_alloc). It returns the number of tokens whose KV is already present.
func (p *Pool) Alloc(seq uint64, tokens []int32, keys *Keys) (cachedTokens int64, err error) {
	var cached [1]int64
	err = p.doKeys("Alloc", keys, func(h raw.Struct_SS_kvc_pool, k raw.Struct_SS_kvc_keys) raw.Enum_SS_kvc_status {
		return raw.Kvc_alloc(h, seq, nonNil(tokens), int64(len(tokens)), k, cached[:])
	})
	return cached[0], err
}

// Admit is CanAlloc and, when the verdict is AllocOK, Alloc, in one call that walks the prompt
// once (kvc_admit): how a scheduler admits a waiting request. Only with AllocOK was seq created;
// cachedTokens is then what Alloc returns, else 0. AllocLater and AllocNever change nothing.
func (p *Pool) Admit(seq uint64, tokens []int32, keys *Keys) (verdict AllocVerdict, cachedTokens int64, err error) {
	var v [1]int32
	var cached [1]int64
	err = p.doKeys("Admit", keys, func(h raw.Struct_SS_kvc_pool, k raw.Struct_SS_kvc_keys) raw.Enum_SS_kvc_status {
		return raw.Kvc_admit(h, seq, nonNil(tokens), int64(len(tokens)), k, v[:], cached[:])
	})
	return AllocVerdict(v[0]), cached[0], err
}

// AllocN creates sequence seq of numTokens tokens without token ids, for pools with prefix
// caching off (schedulers, simulators) (kvc_alloc with NULL tokens).
func (p *Pool) AllocN(seq uint64, numTokens int64, keys *Keys) error {
	return p.doKeys("AllocN", keys, func(h raw.Struct_SS_kvc_pool, k raw.Struct_SS_kvc_keys) raw.Enum_SS_kvc_status {
		return raw.Kvc_alloc(h, seq, nil, numTokens, k, nil)
	})
}

// Append confirms tokens for seq and reserves lookahead further slots (kvc_append). Writing into a
// shared block queues a copy-on-write pair (see TakePendingCopies). It returns the number of blocks
// taken, copy-on-write blocks included.
func (p *Pool) Append(seq uint64, tokens []int32, lookahead int64) (newBlocks int32, err error) {
	var n [1]int32
	err = p.do("Append", func(h raw.Struct_SS_kvc_pool) raw.Enum_SS_kvc_status {
		return raw.Kvc_append(h, seq, nonNil(tokens), int64(len(tokens)), lookahead, n[:])
	})
	return n[0], err
}

// AppendN is Append without token ids, for pools with prefix caching off.
func (p *Pool) AppendN(seq uint64, numTokens, lookahead int64) (newBlocks int32, err error) {
	var n [1]int32
	err = p.do("AppendN", func(h raw.Struct_SS_kvc_pool) raw.Enum_SS_kvc_status {
		return raw.Kvc_append(h, seq, nil, numTokens, lookahead, n[:])
	})
	return n[0], err
}

// AppendBatch is a decode step for many sequences in one call (kvc_append_batch): entry i appends
// tokens[offsets[i]:offsets[i+1]] to seqs[i] and reserves lookaheadPerSeq[i] further slots
// (lookaheadPerSeq nil: lookahead for every entry), exactly as the Append calls it stands for,
// in order. offsets has len(seqs)+1 entries from 0 (CSR); nil means one token per entry,
// tokens[i]. newBlocks (nil, or len(seqs)) receives each appended entry's new blocks.
// The call stops at the first entry Append would refuse: done entries before it are appended, it
// and the later ones are untouched, and err is that entry's error (its message names the entry). A
// scheduler listing its sequences by priority preempts from the end on ErrOutOfBlocks and calls
// again with seqs[done:]. Bad arguments in any entry change nothing (done = 0).
func (p *Pool) AppendBatch(seqs []uint64, offsets []int64, tokens []int32, lookahead int64, lookaheadPerSeq []int64,
	newBlocks []int32) (done int, err error) {
	const op = "AppendBatch"
	n := len(seqs)
	if int64(n) > math.MaxInt32 {
		return 0, argError(op, ErrInvalidArg, "more than 2^31-1 entries")
	}
	// The C call reads these arrays by the lengths the entries imply: check them here.
	if offsets != nil {
		if len(offsets) != n+1 {
			return 0, argError(op, ErrInvalidArg, fmt.Sprintf("offsets has %d entries, want len(seqs)+1 = %d", len(offsets), n+1))
		}
		if offsets[n] > int64(len(tokens)) {
			return 0, argError(op, ErrInvalidArg, fmt.Sprintf("offsets end at %d, past the %d tokens", offsets[n], len(tokens)))
		}
	} else if len(tokens) < n {
		return 0, argError(op, ErrInvalidArg, fmt.Sprintf("%d tokens for %d entries of one token each", len(tokens), n))
	}
	if lookaheadPerSeq != nil && len(lookaheadPerSeq) != n {
		return 0, argError(op, ErrInvalidArg, fmt.Sprintf("lookaheadPerSeq has %d entries, want %d", len(lookaheadPerSeq), n))
	}
	if newBlocks != nil && len(newBlocks) != n {
		return 0, argError(op, ErrInvalidArg, fmt.Sprintf("newBlocks has %d entries, want %d", len(newBlocks), n))
	}
	var d [1]int32
	err = p.do(op, func(h raw.Struct_SS_kvc_pool) raw.Enum_SS_kvc_status {
		return raw.Kvc_append_batch(h, n, nonNil(seqs), offsets, nonNil(tokens), lookahead, lookaheadPerSeq, newBlocks, d[:])
	})
	return int(d[0]), err
}

// Truncate rolls seq back to its first numTokens confirmed tokens and drops its lookahead
// (kvc_truncate): the rollback after speculative decoding rejects drafts. Blocks past the new end
// leave the table (cached ones stay cached); it returns how many left.
func (p *Pool) Truncate(seq uint64, numTokens int64) (freedBlocks int32, err error) {
	var n [1]int32
	err = p.do("Truncate", func(h raw.Struct_SS_kvc_pool) raw.Enum_SS_kvc_status {
		return raw.Kvc_truncate(h, seq, numTokens, n[:])
	})
	return n[0], err
}

// Fork creates child sharing every block of parent (kvc_fork).
func (p *Pool) Fork(parent, child uint64) error {
	return p.do("Fork", func(h raw.Struct_SS_kvc_pool) raw.Enum_SS_kvc_status { return raw.Kvc_fork(h, parent, child) })
}

// Free releases sequence seq (kvc_free). Freeing twice gives ErrUnknownSeq.
func (p *Pool) Free(seq uint64) error {
	return p.do("Free", func(h raw.Struct_SS_kvc_pool) raw.Enum_SS_kvc_status { return raw.Kvc_free(h, seq) })
}

// Abort frees a sequence whose KV may never have been computed (kvc_abort): the blocks it filled
// itself after its prompt's cache hit leave the prefix cache (unless shared or pinned), so a request
// cancelled before its prefill, or a multi-pool allocation rolled back, leaves no KV-less cache
// entries. Use Free for sequences that ran.
func (p *Pool) Abort(seq uint64) error {
	return p.do("Abort", func(h raw.Struct_SS_kvc_pool) raw.Enum_SS_kvc_status { return raw.Kvc_abort(h, seq) })
}

// BlockTable returns seq's block table (kvc_seq_block_table).
func (p *Pool) BlockTable(seq uint64) ([]int32, error) {
	return p.BlockTableInto(nil, seq)
}

// BlockTableInto is BlockTable reusing dst's capacity when it is large enough.
func (p *Pool) BlockTableInto(dst []int32, seq uint64) ([]int32, error) {
	return p.readTable("BlockTable", dst[:cap(dst)], func(h raw.Struct_SS_kvc_pool, buf []int32, n []int64) raw.Enum_SS_kvc_status {
		return raw.Kvc_seq_block_table(h, seq, buf, int64(len(buf)), n)
	})
}

// readTable runs a call that fills buf with a table and reports its length in n[0] (the block-table
// calls): a table longer than buf (a size query with an empty buf, or one that grew on another
// goroutine since) is read again at the reported size.
func (p *Pool) readTable(op string, buf []int32,
	call func(h raw.Struct_SS_kvc_pool, buf []int32, n []int64) raw.Enum_SS_kvc_status) ([]int32, error) {
	for {
		var n [1]int64
		err := p.do(op, func(h raw.Struct_SS_kvc_pool) raw.Enum_SS_kvc_status { return call(h, buf, n[:]) })
		switch {
		case err == nil && n[0] <= int64(len(buf)):
			return buf[:n[0]], nil
		case err == nil, errors.Is(err, ErrBufferTooSmall):
			buf = make([]int32, n[0])
		default:
			return nil, err
		}
	}
}

// NumTokens is seq's confirmed token count, lookahead excluded (kvc_seq_num_tokens).
func (p *Pool) NumTokens(seq uint64) (int64, error) {
	var n [1]int64
	err := p.do("NumTokens", func(h raw.Struct_SS_kvc_pool) raw.Enum_SS_kvc_status { return raw.Kvc_seq_num_tokens(h, seq, n[:]) })
	return n[0], err
}

// SlotMapping returns the cache slots of positions [firstPos, firstPos+count) of seq
// (kvc_seq_slot_mapping); slot = block*block_size + pos%block_size.
func (p *Pool) SlotMapping(seq uint64, firstPos, count int64) ([]int64, error) {
	if count < 0 || count > p.cfg.NumBlocks*int64(p.cfg.BlockSize) {
		// Let the library report the bad count without allocating for it.
		err := p.do("SlotMapping", func(h raw.Struct_SS_kvc_pool) raw.Enum_SS_kvc_status {
			return raw.Kvc_seq_slot_mapping(h, seq, firstPos, count, nil, 0)
		})
		if err == nil || errors.Is(err, ErrBufferTooSmall) {
			err = argError("SlotMapping", ErrInvalidArg, "count exceeds the pool's capacity in slots")
		}
		return nil, err
	}
	out := make([]int64, count)
	if err := p.SlotMappingInto(out, seq, firstPos); err != nil {
		return nil, err
	}
	return out, nil
}

// SlotMappingInto fills dst with the slots of positions [firstPos, firstPos+len(dst)) of seq.
func (p *Pool) SlotMappingInto(dst []int64, seq uint64, firstPos int64) error {
	return p.do("SlotMapping", func(h raw.Struct_SS_kvc_pool) raw.Enum_SS_kvc_status {
		return raw.Kvc_seq_slot_mapping(h, seq, firstPos, int64(len(dst)), nonNil(dst), int64(len(dst)))
	})
}

// PendingCopyCount is the number of queued copy-on-write pairs; nothing is drained.
func (p *Pool) PendingCopyCount() (int64, error) {
	var n [1]int64
	err := p.do("PendingCopyCount", func(h raw.Struct_SS_kvc_pool) raw.Enum_SS_kvc_status {
		return raw.Kvc_take_pending_copies(h, nil, nil, 0, n[:])
	})
	return n[0], err
}

// TakePendingCopies drains the queued copy-on-write pairs, oldest first (kvc_take_pending_copies):
// src[i]'s KV must be copied to dst[i] before the next forward pass (or use CopyPending).
func (p *Pool) TakePendingCopies() (src, dst []int32, err error) {
	pending, err := p.PendingCopyCount()
	if err != nil || pending == 0 {
		return []int32{}, []int32{}, err
	}
	src = make([]int32, pending)
	dst = make([]int32, pending)
	var n [1]int64
	err = p.do("TakePendingCopies", func(h raw.Struct_SS_kvc_pool) raw.Enum_SS_kvc_status {
		return raw.Kvc_take_pending_copies(h, src, dst, pending, n[:])
	})
	if err != nil {
		return nil, nil, err
	}
	// Another goroutine may have drained some in between; more may have been queued (they stay).
	return src[:n[0]], dst[:n[0]], nil
}
