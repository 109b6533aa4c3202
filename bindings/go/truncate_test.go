package kvc_test

// Pool.Truncate (kvc_truncate): the speculative-decoding rollback.

import (
	"bytes"
	"strings"
	"testing"

	"kvc.dev/kvc"
)

func TestTruncateSpeculativeRollback(t *testing.T) {
	p := newPool(t, smallConfig())
	// Prompt of 6 tokens (blocks 0, 1), then 7 drafts at positions 6..12 (blocks 2, 3).
	mustV[int64](t)(p.Alloc(1, span(0, 6), nil))
	drafts := span(600, 607)
	if n := mustV[int32](t)(p.Append(1, drafts, 0)); n != 2 {
		t.Fatalf("drafts took %d blocks, want 2", n)
	}
	slotsBefore := mustV[[]int64](t)(p.SlotMapping(1, 0, 9))
	withDrafts := append(span(0, 6), drafts...)
	if c := mustV[int64](t)(p.PrefixLookup(withDrafts, nil)); c != 12 {
		t.Fatalf("drafts cached %d tokens, want 12", c)
	}

	// Three drafts accepted: 9 tokens stay, block 3 (position 12 only) leaves the table.
	if freed := mustV[int32](t)(p.Truncate(1, 9)); freed != 1 {
		t.Fatalf("Truncate freed %d blocks, want 1", freed)
	}
	if n := mustV[int64](t)(p.NumTokens(1)); n != 9 {
		t.Fatalf("NumTokens after Truncate = %d, want 9", n)
	}
	if got := mustV[[]int32](t)(p.BlockTable(1)); !equalInts(got, []int32{0, 1, 2}) {
		t.Fatalf("table after Truncate = %v", got)
	}
	if got := mustV[[]int64](t)(p.SlotMapping(1, 0, 9)); !equalInts(got, slotsBefore) {
		t.Fatalf("kept slots moved: %v, was %v", got, slotsBefore)
	}
	_, err := p.SlotMapping(1, 9, 1)
	wantStatus(t, err, kvc.ErrInvalidArg)
	if s := mustV[kvc.Stats](t)(p.Stats()); s.FreeBlocks != 13 || s.UsedBlocks != 3 {
		t.Fatalf("stats after Truncate %+v", s)
	}
	// Block 2 still holds exactly the rejected drafts' KV: it stays cached.
	if c := mustV[int64](t)(p.PrefixLookup(withDrafts, nil)); c != 12 {
		t.Fatalf("rejected drafts' block no longer hits: cached %d, want 12", c)
	}
	must(t, p.Check())

	// The corrected token goes into block 2: sole holder, so it leaves the cache without a copy.
	if n := mustV[int32](t)(p.Append(1, []int32{700}, 0)); n != 0 {
		t.Fatalf("corrected token took %d blocks", n)
	}
	if s := mustV[kvc.Stats](t)(p.Stats()); s.CowCopies != 0 || s.PendingCopies != 0 {
		t.Fatalf("corrected token copied a block: %+v", s)
	}
	if c := mustV[int64](t)(p.PrefixLookup(withDrafts, nil)); c != 8 {
		t.Fatalf("rewritten block still cached: %d, want 8", c)
	}
	mustV[int32](t)(p.Append(1, []int32{701, 702}, 0))
	corrected := append(span(0, 6), 600, 601, 602, 700, 701, 702, 9)
	if c := mustV[int64](t)(p.PrefixLookup(corrected, nil)); c != 12 {
		t.Fatalf("refilled block not cached under its new tokens: %d, want 12", c)
	}
}

func TestTruncateDropsLookahead(t *testing.T) {
	p := newPool(t, smallConfig())
	mustV[int64](t)(p.Alloc(1, span(0, 6), nil))
	if n := mustV[int32](t)(p.Append(1, []int32{6}, 5)); n != 1 {
		t.Fatalf("slots 7..11 took %d blocks, want 1", n)
	}
	if freed := mustV[int32](t)(p.Truncate(1, 7)); freed != 1 {
		t.Fatalf("dropping the lookahead freed %d blocks, want 1 (block 2 held only reserved slots)", freed)
	}
	if n := mustV[int64](t)(p.NumTokens(1)); n != 7 {
		t.Fatalf("NumTokens = %d, want 7", n)
	}
	_, err := p.SlotMapping(1, 7, 1)
	wantStatus(t, err, kvc.ErrInvalidArg)
	if freed := mustV[int32](t)(p.Truncate(1, 7)); freed != 0 {
		t.Fatalf("a no-op Truncate freed %d", freed)
	}
	if freed := mustV[int32](t)(p.Truncate(1, 4)); freed != 1 {
		t.Fatalf("Truncate to a block boundary freed %d, want 1", freed)
	}
	if n := mustV[int32](t)(p.Append(1, []int32{40}, 0)); n != 1 {
		t.Fatalf("append after the boundary took %d blocks, want 1", n)
	}
}

func TestTruncateCancelsCopyIntoReleasedBlock(t *testing.T) {
	p := newPool(t, smallConfig())
	mustV[int64](t)(p.Alloc(1, span(0, 6), nil))
	must(t, p.Fork(1, 2))
	if n := mustV[int32](t)(p.Append(2, []int32{60}, 0)); n != 1 {
		t.Fatalf("copy-on-write took %d blocks", n)
	}
	if n := mustV[int64](t)(p.PendingCopyCount()); n != 1 {
		t.Fatalf("PendingCopyCount = %d, want 1", n)
	}
	if freed := mustV[int32](t)(p.Truncate(2, 4)); freed != 1 {
		t.Fatalf("Truncate freed %d, want 1", freed)
	}
	if src, _, _ := p.TakePendingCopies(); len(src) != 0 {
		t.Fatalf("pair into a released block survived: %v", src)
	}
	if got := mustV[[]int32](t)(p.BlockTable(1)); !equalInts(got, []int32{0, 1}) {
		t.Fatalf("parent table = %v", got)
	}
	if s := mustV[kvc.Stats](t)(p.Stats()); s.UsedBlocks != 2 {
		t.Fatalf("used blocks %d, want 2 (the parent's)", s.UsedBlocks)
	}
}

func TestTruncateErrors(t *testing.T) {
	p := newPool(t, smallConfig())
	mustV[int64](t)(p.Alloc(1, span(0, 6), nil))
	mustV[int32](t)(p.Append(1, []int32{6}, 2))
	before := mustV[kvc.Stats](t)(p.Stats())
	_, err := p.Truncate(1, 8)
	wantStatus(t, err, kvc.ErrInvalidArg)
	if !strings.Contains(err.Error(), "kvc_truncate") {
		t.Fatalf("message does not name the function: %v", err)
	}
	_, err = p.Truncate(1, 0)
	wantStatus(t, err, kvc.ErrInvalidArg)
	_, err = p.Truncate(42, 1)
	wantStatus(t, err, kvc.ErrUnknownSeq)
	if after := mustV[kvc.Stats](t)(p.Stats()); after != before {
		t.Fatalf("a failed Truncate changed the pool: %+v -> %+v", before, after)
	}
	if n := mustV[int64](t)(p.NumTokens(1)); n != 7 {
		t.Fatalf("NumTokens = %d, want 7", n)
	}
	if got := mustV[[]int64](t)(p.SlotMapping(1, 7, 2)); len(got) != 2 {
		t.Fatalf("lookahead lost after failed Truncate: %v", got)
	}

	// A swapped-out sequence is refused; once back, it truncates.
	c := newPool(t, cpuConfig())
	must(t, c.AttachHostTier(8))
	mustV[int64](t)(c.Alloc(1, span(0, 10), nil))
	writeSequence(t, c, 1, 0, 10)
	table := mustV[[]int32](t)(c.BlockTable(1))
	si := mustV[kvc.StorageInfo](t)(c.StorageInfo())
	kept := make([]byte, 2*si.BlockStride)
	must(t, c.ReadBlocks(table[:2], kept))
	must(t, c.OpWait(mustV[kvc.OpID](t)(c.SwapOut(1))))
	_, err = c.Truncate(1, 5)
	wantStatus(t, err, kvc.ErrState)
	must(t, c.OpWait(mustV[kvc.OpID](t)(c.SwapIn(1))))
	if freed := mustV[int32](t)(c.Truncate(1, 5)); freed != 1 {
		t.Fatalf("Truncate after swap-in freed %d, want 1", freed)
	}
	table = mustV[[]int32](t)(c.BlockTable(1))
	got := make([]byte, 2*si.BlockStride)
	must(t, c.ReadBlocks(table, got))
	if len(table) != 2 || !bytes.Equal(got, kept) {
		t.Fatalf("kept blocks' KV changed by Truncate (table %v)", table)
	}
}
