package kvc_test

import (
	"errors"
	"testing"

	"kvc.dev/kvc"
)

func TestBatchBuild(t *testing.T) {
	p := newPool(t, cpuConfig())
	mustV[int64](t)(p.Alloc(1, span(0, 6), nil))     // 2 blocks
	mustV[int64](t)(p.Alloc(2, span(100, 110), nil)) // 3 blocks
	b := mustV[*kvc.Batch](t)(p.NewBatch(4, 64, 8))
	defer b.Close()
	_, err := b.Info()
	wantStatus(t, err, kvc.ErrState)

	// Prefill of both prompts.
	must(t, b.Build([]uint64{1, 2}, []int64{6, 10}))
	info := mustV[kvc.BatchInfo](t)(b.Info())
	if info.NumSeqs != 2 || info.NumTokens != 16 || info.MaxQLen != 10 || info.MaxSeqLen != 10 ||
		info.NumIndices != 5 || info.IsDecode || info.MaxBlocksPerSeq < 3 || info.BlockTables == 0 ||
		info.SlotMapping == 0 || info.KVIndices == 0 {
		t.Fatalf("prefill info %+v", info)
	}
	want := append(mustV[[]int64](t)(p.SlotMapping(1, 0, 6)), mustV[[]int64](t)(p.SlotMapping(2, 0, 10))...)
	if got := mustV[[]int64](t)(b.SlotMapping()); !equalInts(got, want) {
		t.Fatalf("batch slots %v, want %v", got, want)
	}
	tables := mustV[[]int32](t)(b.BlockTables())
	w := int(info.MaxBlocksPerSeq)
	if len(tables) != 2*w {
		t.Fatalf("block tables length %d, want %d", len(tables), 2*w)
	}
	for row, seq := range []uint64{1, 2} {
		tbl := mustV[[]int32](t)(p.BlockTable(seq))
		for j := 0; j < w; j++ {
			want := int32(-1)
			if j < len(tbl) {
				want = tbl[j]
			}
			if tables[row*w+j] != want {
				t.Fatalf("row %d: %v, table %v", row, tables[row*w:(row+1)*w], tbl)
			}
		}
	}

	// Decode step.
	mustV[int32](t)(p.Append(1, []int32{6}, 0))
	mustV[int32](t)(p.Append(2, []int32{110}, 0))
	must(t, b.Build([]uint64{1, 2}, []int64{1, 1}))
	info = mustV[kvc.BatchInfo](t)(b.Info())
	if !info.IsDecode || info.NumTokens != 2 || info.MaxSeqLen != 11 {
		t.Fatalf("decode info %+v", info)
	}
	want = append(mustV[[]int64](t)(p.SlotMapping(1, 6, 1)), mustV[[]int64](t)(p.SlotMapping(2, 10, 1))...)
	if got := mustV[[]int64](t)(b.SlotMapping()); !equalInts(got, want) {
		t.Fatalf("decode slots %v, want %v", got, want)
	}

	// Errors leave the previous step intact.
	wantStatus(t, b.Build([]uint64{1, 99}, []int64{1, 1}), kvc.ErrUnknownSeq)
	wantStatus(t, b.Build([]uint64{1, 1}, []int64{1, 1}), kvc.ErrInvalidArg)
	wantStatus(t, b.Build([]uint64{1}, []int64{0}), kvc.ErrInvalidArg)
	wantStatus(t, b.Build([]uint64{1}, []int64{8}), kvc.ErrInvalidArg) // more than its tokens
	wantStatus(t, b.Build([]uint64{1, 2}, []int64{1}), kvc.ErrInvalidArg)
	wantStatus(t, b.Build(nil, nil), kvc.ErrInvalidArg)
	wantStatus(t, b.Build([]uint64{1, 2, 3, 4, 5}, []int64{1, 1, 1, 1, 1}), kvc.ErrInvalidArg)
	if again := mustV[kvc.BatchInfo](t)(b.Info()); again != info {
		t.Fatalf("info changed by failed builds: %+v vs %+v", again, info)
	}

	_, err = p.NewBatch(0, 64, 8)
	wantStatus(t, err, kvc.ErrInvalidArg)
	narrow := mustV[*kvc.Batch](t)(p.NewBatch(2, 64, 1))
	wantStatus(t, narrow.Build([]uint64{2}, []int64{1}), kvc.ErrBufferTooSmall)
	must(t, narrow.Close())
	must(t, narrow.Close())
	if _, err := narrow.Info(); !errors.Is(err, kvc.ErrClosed) {
		t.Fatalf("Info after Close: %v", err)
	}
}

func TestPoolCloseClosesBatches(t *testing.T) {
	p, err := kvc.NewPool(cpuConfig())
	must(t, err)
	mustV[int64](t)(p.Alloc(1, span(0, 5), nil))
	b := mustV[*kvc.Batch](t)(p.NewBatch(2, 16, 4))
	must(t, b.Build([]uint64{1}, []int64{5}))
	must(t, p.Close())
	if _, err := b.Info(); !errors.Is(err, kvc.ErrClosed) {
		t.Fatalf("batch Info after pool Close: %v", err)
	}
	if err := b.Build([]uint64{1}, []int64{1}); !errors.Is(err, kvc.ErrClosed) {
		t.Fatalf("batch Build after pool Close: %v", err)
	}
	must(t, b.Close())
}

// SetStream is accepted on the CPU backend and changes nothing about what a build produces.
func TestBatchSetStreamIgnoredOnCPU(t *testing.T) {
	p := newPool(t, cpuConfig())
	mustV[int64](t)(p.Alloc(1, span(0, 9), nil))
	mustV[int64](t)(p.Alloc(2, span(50, 53), nil))
	plain := mustV[*kvc.Batch](t)(p.NewBatch(2, 32, 8))
	defer plain.Close()
	streamed := mustV[*kvc.Batch](t)(p.NewBatch(2, 32, 8))
	defer streamed.Close()
	must(t, streamed.SetStream(kvc.Stream(0xdeadb000))) // never dereferenced off CUDA
	for _, q := range [][]int64{{9, 3}, {1, 1}} {
		must(t, plain.Build([]uint64{1, 2}, q))
		must(t, streamed.Build([]uint64{1, 2}, q))
		if a, b := mustV[[]int64](t)(plain.SlotMapping()), mustV[[]int64](t)(streamed.SlotMapping()); !equalInts(a, b) {
			t.Fatalf("q %v: slots %v with a stream, %v without", q, b, a)
		}
		if a, b := mustV[[]int32](t)(plain.BlockTables()), mustV[[]int32](t)(streamed.BlockTables()); !equalInts(a, b) {
			t.Fatalf("q %v: block tables %v with a stream, %v without", q, b, a)
		}
	}
	must(t, streamed.SetStream(0))
	must(t, streamed.Build([]uint64{2}, []int64{1}))
	want := mustV[[]int64](t)(p.SlotMapping(2, 2, 1))
	if got := mustV[[]int64](t)(streamed.SlotMapping()); !equalInts(got, want) {
		t.Fatalf("slots %v after resetting the stream, want %v", got, want)
	}
	must(t, streamed.Close())
	if err := streamed.SetStream(0); !errors.Is(err, kvc.ErrClosed) {
		t.Fatalf("SetStream after Close: %v", err)
	}
}
