package kvc_test

import (
	"testing"

	"kvc.dev/kvc"
)

func TestSequenceLifecycle(t *testing.T) {
	p := newPool(t, smallConfig())
	table := func(seq uint64) []int32 { return mustV[[]int32](t)(p.BlockTable(seq)) }

	if c := mustV[int64](t)(p.Alloc(1, span(0, 10), nil)); c != 0 {
		t.Fatalf("first alloc cached %d", c)
	}
	if got := table(1); !equalInts(got, []int32{0, 1, 2}) {
		t.Fatalf("table(1) = %v", got)
	}
	if n := mustV[int64](t)(p.NumTokens(1)); n != 10 {
		t.Fatalf("NumTokens = %d", n)
	}
	slots := mustV[[]int64](t)(p.SlotMapping(1, 0, 10))
	if !equalInts(slots, []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}) {
		t.Fatalf("slots = %v", slots)
	}

	// Shared prefix: the two full blocks are hits.
	prompt := append(span(0, 8), 100, 101, 102)
	if c := mustV[int64](t)(p.Alloc(2, prompt, nil)); c != 8 {
		t.Fatalf("shared-prefix alloc cached %d, want 8", c)
	}
	if got := table(2); !equalInts(got, []int32{0, 1, 3}) {
		t.Fatalf("table(2) = %v", got)
	}

	// Append across a block boundary.
	if n := mustV[int32](t)(p.Append(1, []int32{10, 11, 12}, 0)); n != 1 {
		t.Fatalf("append took %d blocks, want 1", n)
	}
	if got := table(1); !equalInts(got, []int32{0, 1, 2, 4}) {
		t.Fatalf("table(1) after append = %v", got)
	}

	// Fork + copy-on-write.
	must(t, p.Fork(1, 3))
	if got := table(3); !equalInts(got, []int32{0, 1, 2, 4}) {
		t.Fatalf("child table = %v", got)
	}
	if n := mustV[int32](t)(p.Append(3, []int32{13}, 0)); n != 1 {
		t.Fatalf("COW append took %d blocks, want 1", n)
	}
	if n := mustV[int64](t)(p.PendingCopyCount()); n != 1 {
		t.Fatalf("PendingCopyCount = %d", n)
	}
	src, dst, err := p.TakePendingCopies()
	must(t, err)
	if !equalInts(src, []int32{4}) || !equalInts(dst, []int32{5}) {
		t.Fatalf("pending copies %v -> %v, want [4] -> [5]", src, dst)
	}
	if src, _, _ := p.TakePendingCopies(); len(src) != 0 {
		t.Fatalf("second drain returned %v", src)
	}

	s := mustV[kvc.Stats](t)(p.Stats())
	if s.Allocs != 2 || s.Forks != 1 || s.CowCopies != 1 || s.NumSeqs != 3 || s.UsedBlocks != 6 ||
		s.FreeBlocks != 10 || s.TotalBlocks != 16 || s.PrefixHitTokens != 8 || s.PrefixQueryTokens != 21 ||
		s.PendingCopies != 0 || s.Appends != 2 {
		t.Fatalf("stats %+v", s)
	}
	if s.Utilization < 0.374 || s.Utilization > 0.376 {
		t.Fatalf("utilization %v, want 6/16", s.Utilization)
	}

	// Admission: 10 free blocks.
	for _, c := range []struct {
		n    int32
		want kvc.AllocVerdict
	}{{40, kvc.AllocOK}, {44, kvc.AllocLater}, {68, kvc.AllocNever}} {
		if v := mustV[kvc.AllocVerdict](t)(p.CanAlloc(span(1000, 1000+c.n), nil)); v != c.want {
			t.Errorf("CanAlloc(%d tokens) = %v, want %v", c.n, v, c.want)
		}
	}
	_, err = p.Alloc(9, span(1000, 1044), nil)
	wantStatus(t, err, kvc.ErrOutOfBlocks)

	must(t, p.Free(2))
	wantStatus(t, p.Free(2), kvc.ErrUnknownSeq)
	must(t, p.Free(3))
	must(t, p.Free(1))
	s = mustV[kvc.Stats](t)(p.Stats())
	if s.NumSeqs != 0 || s.UsedBlocks != 0 || s.Frees != 3 {
		t.Fatalf("stats after frees %+v", s)
	}
}

func TestSequenceErrors(t *testing.T) {
	p := newPool(t, smallConfig())
	_, err := p.Alloc(1, nil, nil) // no tokens
	wantStatus(t, err, kvc.ErrInvalidArg)
	_, err = p.Alloc(1, []int32{}, nil)
	wantStatus(t, err, kvc.ErrInvalidArg)
	mustV[int64](t)(p.Alloc(1, span(0, 5), nil))
	_, err = p.Alloc(1, span(0, 5), nil)
	wantStatus(t, err, kvc.ErrSeqExists)
	_, err = p.Append(99, []int32{1}, 0)
	wantStatus(t, err, kvc.ErrUnknownSeq)
	_, err = p.Append(1, nil, 0) // nothing to append
	wantStatus(t, err, kvc.ErrInvalidArg)
	_, err = p.Append(1, []int32{1}, -1)
	wantStatus(t, err, kvc.ErrInvalidArg)
	wantStatus(t, p.Fork(1, 1), kvc.ErrInvalidArg)
	wantStatus(t, p.Fork(99, 2), kvc.ErrUnknownSeq)
	_, err = p.BlockTable(99)
	wantStatus(t, err, kvc.ErrUnknownSeq)
	_, err = p.NumTokens(99)
	wantStatus(t, err, kvc.ErrUnknownSeq)
	_, err = p.SlotMapping(1, -1, 1)
	wantStatus(t, err, kvc.ErrInvalidArg)
	_, err = p.SlotMapping(1, 0, 9)
	wantStatus(t, err, kvc.ErrInvalidArg)
	_, err = p.SlotMapping(1, 0, -1)
	wantStatus(t, err, kvc.ErrInvalidArg)
	_, err = p.SlotMapping(1, 0, 1<<40)
	wantStatus(t, err, kvc.ErrInvalidArg)
	if got := mustV[[]int64](t)(p.SlotMapping(1, 0, 0)); len(got) != 0 {
		t.Fatalf("empty slot range gave %v", got)
	}
	// A failed call changed nothing.
	if got := mustV[[]int32](t)(p.BlockTable(1)); !equalInts(got, []int32{0, 1}) {
		t.Fatalf("table after errors = %v", got)
	}
}

func TestAbortDropsUnwrittenBlocks(t *testing.T) {
	p := newPool(t, smallConfig())
	mustV[int64](t)(p.Alloc(1, span(0, 9), nil)) // 2 full blocks, filled by this sequence
	must(t, p.Free(1))
	if c := mustV[int64](t)(p.PrefixLookup(span(0, 9), nil)); c != 8 {
		t.Fatalf("after Free: %d cached tokens, want 8", c)
	}
	mustV[int64](t)(p.Alloc(2, span(0, 17), nil)) // hits 8, fills 2 more full blocks
	must(t, p.Abort(2))
	if c := mustV[int64](t)(p.PrefixLookup(span(0, 17), nil)); c != 8 {
		t.Fatalf("after Abort: %d cached tokens, want 8 (the hits only)", c)
	}
	wantStatus(t, p.Abort(2), kvc.ErrUnknownSeq)
}

func TestBlockTableInto(t *testing.T) {
	p := newPool(t, smallConfig())
	mustV[int64](t)(p.Alloc(1, span(0, 20), nil)) // 5 blocks
	small := make([]int32, 0, 2)
	got := mustV[[]int32](t)(p.BlockTableInto(small, 1))
	if !equalInts(got, []int32{0, 1, 2, 3, 4}) {
		t.Fatalf("grown table = %v", got)
	}
	big := make([]int32, 0, 8)
	got = mustV[[]int32](t)(p.BlockTableInto(big, 1))
	if !equalInts(got, []int32{0, 1, 2, 3, 4}) || &got[0] != &big[:1][0] {
		t.Fatalf("table %v did not reuse the buffer", got)
	}
	dst := make([]int64, 3)
	must(t, p.SlotMappingInto(dst, 1, 17))
	if !equalInts(dst, []int64{17, 18, 19}) {
		t.Fatalf("SlotMappingInto = %v", dst)
	}
}

func TestLookaheadAndMaxLen(t *testing.T) {
	cfg := smallConfig()
	cfg.MaxSeqLen = 12
	p := newPool(t, cfg)
	mustV[int64](t)(p.Alloc(1, span(0, 6), nil)) // blocks 0, 1
	// Reserve 3 slots (positions 6..8) without confirming tokens: block 2 for position 8.
	if n := mustV[int32](t)(p.Append(1, nil, 3)); n != 1 {
		t.Fatalf("reserve took %d blocks", n)
	}
	if n := mustV[int64](t)(p.NumTokens(1)); n != 6 {
		t.Fatalf("NumTokens after reserve = %d", n)
	}
	if got := mustV[[]int64](t)(p.SlotMapping(1, 6, 3)); !equalInts(got, []int64{6, 7, 8}) {
		t.Fatalf("lookahead slots = %v", got)
	}
	if n := mustV[int32](t)(p.Append(1, []int32{6, 7}, 0)); n != 0 {
		t.Fatalf("confirming reserved slots took %d blocks", n)
	}
	_, err := p.Append(1, span(8, 13), 0)
	wantStatus(t, err, kvc.ErrMaxLen)
	_, err = p.Alloc(2, span(0, 13), nil)
	wantStatus(t, err, kvc.ErrMaxLen)
}

func TestTokenlessSequences(t *testing.T) {
	cfg := smallConfig()
	cfg.PrefixCaching = false
	p := newPool(t, cfg)
	must(t, p.AllocN(1, 10, nil))
	if got := mustV[[]int32](t)(p.BlockTable(1)); !equalInts(got, []int32{0, 1, 2}) {
		t.Fatalf("table = %v", got)
	}
	if n := mustV[int32](t)(p.AppendN(1, 2, 0)); n != 0 {
		t.Fatalf("AppendN within the block took %d", n)
	}
	if n := mustV[int32](t)(p.AppendN(1, 1, 0)); n != 1 {
		t.Fatalf("AppendN across the boundary took %d", n)
	}
	if n := mustV[int64](t)(p.NumTokens(1)); n != 13 {
		t.Fatalf("NumTokens = %d", n)
	}
	wantStatus(t, p.AllocN(2, 0, nil), kvc.ErrInvalidArg)
	// With caching on, token ids are required.
	q := newPool(t, smallConfig())
	wantStatus(t, q.AllocN(1, 4, nil), kvc.ErrNullArg)
}
