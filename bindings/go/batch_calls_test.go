package kvc_test

import (
	"errors"
	"strings"
	"testing"

	"kvc.dev/kvc"
)

// AppendBatch does what the Append calls it stands for do, and stops at the first refusal.
func TestAppendBatch(t *testing.T) {
	single, batch := newPool(t, smallConfig()), newPool(t, smallConfig()) // 16 blocks of 4
	for _, p := range []*kvc.Pool{single, batch} {
		mustV[int64](t)(p.Alloc(1, span(0, 3), nil))
		mustV[int64](t)(p.Alloc(2, span(10, 13), nil))
		must(t, p.Fork(2, 3)) // 3 shares 2's partial block: its first append copies it
	}
	seqs := []uint64{1, 2, 3, 1}
	offsets := []int64{0, 2, 3, 4, 5}
	tokens := []int32{50, 51, 60, 70, 52}
	wantBlocks := make([]int32, len(seqs))
	for i, s := range seqs {
		wantBlocks[i] = mustV[int32](t)(single.Append(s, tokens[offsets[i]:offsets[i+1]], 1))
	}
	newBlocks := make([]int32, len(seqs))
	done, err := batch.AppendBatch(seqs, offsets, tokens, 1, nil, newBlocks)
	must(t, err)
	if done != 4 {
		t.Fatalf("done = %d, want 4", done)
	}
	for _, s := range []uint64{1, 2, 3} {
		a := mustV[[]int32](t)(single.BlockTable(s))
		b := mustV[[]int32](t)(batch.BlockTable(s))
		if !equalInts(a, b) {
			t.Fatalf("seq %d: table %v after Append, %v after AppendBatch", s, a, b)
		}
	}
	if !equalInts(newBlocks, wantBlocks) || newBlocks[1] != 2 { // 2 copies the shared block and takes one
		t.Fatalf("newBlocks = %v, Append gave %v", newBlocks, wantBlocks)
	}
	srcA, dstA, err := single.TakePendingCopies()
	must(t, err)
	srcB, dstB, err := batch.TakePendingCopies()
	must(t, err)
	if len(srcA) != 1 || !equalInts(srcA, srcB) || !equalInts(dstA, dstB) {
		t.Fatalf("pending copies %v->%v vs %v->%v", srcA, dstA, srcB, dstB)
	}

	// One token per entry (offsets nil), the second entry unknown: the first is appended only.
	done, err = batch.AppendBatch([]uint64{1, 99, 2}, nil, []int32{53, 0, 61}, 0, nil, nil)
	wantStatus(t, err, kvc.ErrUnknownSeq)
	if done != 1 || !strings.Contains(err.Error(), "entry 1 of 3") {
		t.Fatalf("done = %d, err = %v", done, err)
	}
	if n := mustV[int64](t)(batch.NumTokens(1)); n != 7 {
		t.Fatalf("seq 1 has %d tokens, want 7", n)
	}
	if n := mustV[int64](t)(batch.NumTokens(2)); n != 4 {
		t.Fatalf("seq 2 has %d tokens, want 4 (untouched)", n)
	}

	// Arrays shorter than the entries imply are refused here, before C reads them.
	for _, c := range []struct {
		name string
		call func() (int, error)
	}{
		{"offsets", func() (int, error) {
			return batch.AppendBatch([]uint64{1, 2}, []int64{0, 1}, []int32{1, 2}, 0, nil, nil)
		}},
		{"tokens", func() (int, error) {
			return batch.AppendBatch([]uint64{1, 2}, []int64{0, 1, 3}, []int32{1, 2}, 0, nil, nil)
		}},
		{"one each", func() (int, error) { return batch.AppendBatch([]uint64{1, 2}, nil, []int32{1}, 0, nil, nil) }},
		{"lookahead", func() (int, error) { return batch.AppendBatch([]uint64{1}, nil, []int32{1}, 0, []int64{}, nil) }},
		{"newBlocks", func() (int, error) { return batch.AppendBatch([]uint64{1}, nil, []int32{1}, 0, nil, make([]int32, 2)) }},
		{"C: negative lookahead", func() (int, error) { return batch.AppendBatch([]uint64{1}, nil, []int32{1}, 0, []int64{-1}, nil) }},
	} {
		d, err := c.call()
		if !errors.Is(err, kvc.ErrInvalidArg) || d != 0 {
			t.Fatalf("%s: done %d, err %v, want ErrInvalidArg", c.name, d, err)
		}
	}
	if n := mustV[int64](t)(batch.NumTokens(1)); n != 7 {
		t.Fatalf("refused calls changed seq 1: %d tokens", n)
	}
}

// Admit's verdict is CanAlloc's; only an admitted prompt creates its sequence.
func TestAdmit(t *testing.T) {
	cfg := smallConfig()
	cfg.Watermark = 0.25 // 4 of 16 blocks kept free
	p := newPool(t, cfg)
	v, cached, err := p.Admit(1, span(0, 20), nil) // 5 blocks
	must(t, err)
	if v != kvc.AllocOK || cached != 0 {
		t.Fatalf("first admit: %v, cached %d", v, cached)
	}
	v, cached, err = p.Admit(2, append(span(0, 16), 99), nil) // 4 cached blocks + 1
	must(t, err)
	if v != kvc.AllocOK || cached != 16 {
		t.Fatalf("second admit: %v, cached %d, want OK and 16", v, cached)
	}
	if want := mustV[kvc.AllocVerdict](t)(p.CanAlloc(span(100, 132), nil)); want != kvc.AllocLater {
		t.Fatalf("CanAlloc = %v, want LATER for this check", want)
	}
	v, cached, err = p.Admit(3, span(100, 132), nil) // 8 blocks: 10 free, 4 kept
	must(t, err)
	if v != kvc.AllocLater || cached != 0 {
		t.Fatalf("third admit: %v, cached %d, want LATER", v, cached)
	}
	if _, err := p.NumTokens(3); !errors.Is(err, kvc.ErrUnknownSeq) {
		t.Fatalf("a LATER admit created the sequence: %v", err)
	}
	if v, _, _ := p.Admit(4, span(500, 568), nil); v != kvc.AllocNever {
		t.Fatalf("a prompt larger than the pool: %v", v)
	}
	_, _, err = p.Admit(1, span(0, 4), nil)
	wantStatus(t, err, kvc.ErrSeqExists)
}
