package kvc_test

// Pool.SetSlidingWindow / Pool.SlidingWindow (kvc_pool_set_sliding_window,
// kvc_pool_get_sliding_window): blocks before the window leave the sequence as it grows.

import (
	"errors"
	"strings"
	"testing"

	"kvc.dev/kvc"
)

const (
	windowBlockSize = 4 // smallConfig / cpuConfig
	windowPoolSize  = 16
	window          = 6
)

// releasedBy is the rule of kvc_append: an append releases the blocks whose tokens all lie before
// f - window + 1, where f is the first position the sequence's previous call added (the previous
// append's, or for the first append after kvc_alloc the alloc's first uncached position). No query
// of that call's tokens or of later ones sees those keys.
func releasedBy(f int64) int64 {
	if first := f - window + 1; first > 0 {
		return first / windowBlockSize
	}
	return 0
}

// growOneByOne appends tokens 1..n-1 to a 1-token sequence one at a time, checking after each
// append the table's released (-1) prefix and the blocks that came back to the pool; onAppend
// (may be nil) runs after each append with the new token's position.
func growOneByOne(t *testing.T, p *kvc.Pool, seq uint64, n int64, onAppend func(pos int64)) {
	t.Helper()
	for pos := int64(1); pos < n; pos++ {
		wantNew := int32(0)
		if pos%windowBlockSize == 0 {
			wantNew = 1
		}
		if got := mustV[int32](t)(p.Append(seq, []int32{int32(pos)}, 0)); got != wantNew {
			t.Fatalf("append at position %d took %d blocks, want %d", pos, got, wantNew)
		}
		if onAppend != nil {
			onAppend(pos)
		}
		// The previous call added position pos-1 first: the append of pos-1, or for pos 1 the
		// alloc of the 1-token prompt (no prefix hit: first uncached position 0).
		released := releasedBy(pos - 1)
		total := pos/windowBlockSize + 1
		table := mustV[[]int32](t)(p.BlockTable(seq))
		if int64(len(table)) != total {
			t.Fatalf("after position %d: table %v, want %d entries", pos, table, total)
		}
		for i, b := range table {
			if (int64(i) < released) != (b == -1) {
				t.Fatalf("after position %d: table %v, want the first %d entries released (-1)", pos, table, released)
			}
		}
		s := mustV[kvc.Stats](t)(p.Stats())
		if held := total - released; s.UsedBlocks != held || s.FreeBlocks != windowPoolSize-held {
			t.Fatalf("after position %d: used %d free %d, want used %d free %d", pos, s.UsedBlocks, s.FreeBlocks, held, windowPoolSize-held)
		}
	}
}

func TestSlidingWindowSetAndGet(t *testing.T) {
	p := newPool(t, smallConfig())
	if w := mustV[int32](t)(p.SlidingWindow()); w != 0 {
		t.Fatalf("default sliding window %d, want 0 (off)", w)
	}
	must(t, p.SetSlidingWindow(window))
	if w := mustV[int32](t)(p.SlidingWindow()); w != window {
		t.Fatalf("SlidingWindow = %d after SetSlidingWindow(%d)", w, window)
	}
	err := p.SetSlidingWindow(-1)
	wantStatus(t, err, kvc.ErrInvalidArg)
	if w := mustV[int32](t)(p.SlidingWindow()); w != window {
		t.Fatalf("a refused SetSlidingWindow(-1) changed the window to %d", w)
	}

	// Only while the pool has no sequences.
	mustV[int64](t)(p.Alloc(1, span(0, 3), nil))
	err = p.SetSlidingWindow(8)
	wantStatus(t, err, kvc.ErrState)
	if !strings.Contains(err.Error(), "kvc_pool_set_sliding_window") {
		t.Fatalf("message does not name the function: %v", err)
	}
	err = p.SetSlidingWindow(0)
	wantStatus(t, err, kvc.ErrState)
	if w := mustV[int32](t)(p.SlidingWindow()); w != window {
		t.Fatalf("a refused SetSlidingWindow changed the window to %d", w)
	}
	must(t, p.Free(1))
	must(t, p.SetSlidingWindow(0))
	if w := mustV[int32](t)(p.SlidingWindow()); w != 0 {
		t.Fatalf("SlidingWindow = %d after turning it off", w)
	}

	p.Close()
	if _, err := p.SlidingWindow(); !errors.Is(err, kvc.ErrClosed) {
		t.Fatalf("SlidingWindow after Close: %v, want ErrClosed", err)
	}
	if err := p.SetSlidingWindow(window); !errors.Is(err, kvc.ErrClosed) {
		t.Fatalf("SetSlidingWindow after Close: %v, want ErrClosed", err)
	}
}

func TestSlidingWindowReleasesBlocks(t *testing.T) {
	p := newPool(t, smallConfig())
	must(t, p.SetSlidingWindow(window))
	mustV[int64](t)(p.Alloc(1, []int32{0}, nil))
	growOneByOne(t, p, 1, 20, nil)

	// 20 tokens in 5 blocks (0..4); the last append (of position 19, after the one of 18) released
	// the blocks wholly before 18 - 6 + 1 = 13: blocks 0, 1, 2 (positions 0..11). They were full,
	// so they stay in the prefix cache while back in the free queue.
	if got := mustV[[]int32](t)(p.BlockTable(1)); !equalInts(got, []int32{-1, -1, -1, 3, 4}) {
		t.Fatalf("table %v, want [-1 -1 -1 3 4]", got)
	}
	s := mustV[kvc.Stats](t)(p.Stats())
	if s.UsedBlocks != 2 || s.FreeBlocks != 14 || s.CachedFreeBlocks != 3 {
		t.Fatalf("stats %+v, want used 2, free 14, cached free 3", s)
	}
	if n := mustV[int64](t)(p.NumTokens(1)); n != 20 {
		t.Fatalf("NumTokens = %d, want 20", n)
	}
	_, err := p.SlotMapping(1, 11, 1)
	wantStatus(t, err, kvc.ErrInvalidArg)
	if got := mustV[[]int64](t)(p.SlotMapping(1, 12, 8)); !equalInts(got, []int64{12, 13, 14, 15, 16, 17, 18, 19}) {
		t.Fatalf("slots of positions 12..19 = %v", got)
	}

	// Truncate may not cut below what the next token attends to: to n the next token sees
	// n - 5 .., and positions below 12 are gone, so n >= 17.
	before := mustV[kvc.Stats](t)(p.Stats())
	_, err = p.Truncate(1, 16)
	wantStatus(t, err, kvc.ErrState)
	if after := mustV[kvc.Stats](t)(p.Stats()); after != before {
		t.Fatalf("a refused Truncate changed the pool: %+v -> %+v", before, after)
	}
	if n := mustV[int64](t)(p.NumTokens(1)); n != 20 {
		t.Fatalf("a refused Truncate changed NumTokens to %d", n)
	}
	if freed := mustV[int32](t)(p.Truncate(1, 17)); freed != 0 {
		t.Fatalf("Truncate to 17 freed %d blocks, want 0 (block 4 keeps position 16)", freed)
	}
	if got := mustV[[]int32](t)(p.BlockTable(1)); !equalInts(got, []int32{-1, -1, -1, 3, 4}) {
		t.Fatalf("table after Truncate %v", got)
	}

	must(t, p.Free(1))
	if s := mustV[kvc.Stats](t)(p.Stats()); s.UsedBlocks != 0 || s.FreeBlocks != windowPoolSize {
		t.Fatalf("after Free: %+v", s)
	}
}

// A CPU pool with the window set and sequence 1 grown token by token to 20 tokens, each token's
// K/V written right after its append (before its block can be released).
func windowedSequence(t *testing.T) *kvc.Pool {
	p := newPool(t, cpuConfig())
	must(t, p.SetSlidingWindow(window))
	mustV[int64](t)(p.Alloc(1, []int32{0}, nil))
	writeSequence(t, p, 1, 0, 1)
	growOneByOne(t, p, 1, 20, func(pos int64) { writeSequence(t, p, 1, int(pos), 1) })
	return p
}

func TestSlidingWindowAttentionCPU(t *testing.T) {
	p := windowedSequence(t)
	const qHeads, kvHeads, dim = 4, 2, 8
	b := mustV[*kvc.Batch](t)(p.NewBatch(2, 32, 8))
	defer b.Close()

	// Decode of position 19 sees 14..19, all still held.
	must(t, b.Build([]uint64{1}, []int64{1}))
	tables := mustV[[]int32](t)(b.BlockTables())
	if !equalInts(tables[:5], []int32{-1, -1, -1, 3, 4}) {
		t.Fatalf("batch block table %v, want the released entries -1", tables)
	}
	params := kvc.DefaultAttentionParams()
	params.QDType = kvc.DTypeF32
	q := queryRows(1, qHeads, dim)
	out := make([]float32, len(q))
	for _, w := range []int32{window, 3} {
		params.SlidingWindow = w
		must(t, p.LaunchAttention(b, 1, kvc.Float32Bytes(q), kvc.Float32Bytes(out), params))
		assertClose(t, "windowed decode", out, refAttention(q, 20, 1, qHeads, kvHeads, dim, params))
	}
	// A windowed pool needs 1 <= params.SlidingWindow <= its window.
	for _, w := range []int32{0, window + 1} {
		params.SlidingWindow = w
		wantStatus(t, p.LaunchAttention(b, 1, kvc.Float32Bytes(q), kvc.Float32Bytes(out), params), kvc.ErrInvalidArg)
	}

	// A query at position 11 (q_len 9) would sit in released block 2.
	wantStatus(t, b.Build([]uint64{1}, []int64{9}), kvc.ErrInvalidArg)
	// Queries at 12..19 are held, but the one at 12 sees only itself through the window: a wider
	// window would read released positions.
	must(t, b.Build([]uint64{1}, []int64{8}))
	q = queryRows(8, qHeads, dim)
	out = make([]float32, len(q))
	params.SlidingWindow = 2
	wantStatus(t, p.LaunchAttention(b, 0, kvc.Float32Bytes(q), kvc.Float32Bytes(out), params), kvc.ErrInvalidArg)
	params.SlidingWindow = 1
	must(t, p.LaunchAttention(b, 0, kvc.Float32Bytes(q), kvc.Float32Bytes(out), params))
	assertClose(t, "window 1 over 8 queries", out, refAttention(q, 20, 8, qHeads, kvHeads, dim, params))
}

// A speculative step appends its pending token and its drafts in two calls, then builds one batch
// with q_len 1 + drafts and launches with the pool's window. The drafts' append releases only what
// the pending token's query no longer sees, so the launch goes through even at a block boundary.
func TestSlidingWindowTwoAppendsInOneStep(t *testing.T) {
	p := windowedSequence(t)
	const qHeads, kvHeads, dim = 4, 2, 8

	// Pending token 20: the previous call added 19, so blocks before 19 - 5 = 14 go (0..2, as
	// already); position 20 opens a block, the first uncached free one (5: 0..2 are cached).
	if got := mustV[int32](t)(p.Append(1, []int32{20}, 0)); got != 1 {
		t.Fatalf("pending append took %d blocks, want 1", got)
	}
	// Drafts 21..23: the previous call added 20, whose query sees 15..20, so only blocks before
	// 15 go: nothing new. (By this call's own first position, 21, block 3 = positions 12..15 would
	// go, and the pending token's key 15 with it.)
	if got := mustV[int32](t)(p.Append(1, []int32{21, 22, 23}, 0)); got != 0 {
		t.Fatalf("draft append took %d blocks, want 0", got)
	}
	if got := mustV[[]int32](t)(p.BlockTable(1)); !equalInts(got, []int32{-1, -1, -1, 3, 4, 5}) {
		t.Fatalf("table %v, want [-1 -1 -1 3 4 5]", got)
	}
	if s := mustV[kvc.Stats](t)(p.Stats()); s.UsedBlocks != 3 || s.FreeBlocks != 13 {
		t.Fatalf("stats %+v, want used 3, free 13", s)
	}
	writeSequence(t, p, 1, 20, 4)

	b := mustV[*kvc.Batch](t)(p.NewBatch(2, 32, 8))
	defer b.Close()
	must(t, b.Build([]uint64{1}, []int64{4}))
	params := kvc.DefaultAttentionParams()
	params.QDType = kvc.DTypeF32
	params.SlidingWindow = window
	q := queryRows(4, qHeads, dim)
	out := make([]float32, len(q))
	must(t, p.LaunchAttention(b, 1, kvc.Float32Bytes(q), kvc.Float32Bytes(out), params))
	assertClose(t, "pending token + 3 drafts, window 6", out, refAttention(q, 24, 4, qHeads, kvHeads, dim, params))

	// Verification keeps the pending token and one draft: truncate to 22 (f stays 21, the drafts'
	// first position). The next step's pending token (22) then releases the blocks before
	// 21 - 5 = 16: block 3 as well.
	if freed := mustV[int32](t)(p.Truncate(1, 22)); freed != 0 {
		t.Fatalf("Truncate to 22 freed %d blocks, want 0", freed)
	}
	if got := mustV[int32](t)(p.Append(1, []int32{22}, 0)); got != 0 {
		t.Fatalf("next pending append took %d blocks, want 0", got)
	}
	if got := mustV[[]int32](t)(p.BlockTable(1)); !equalInts(got, []int32{-1, -1, -1, -1, 4, 5}) {
		t.Fatalf("table %v, want [-1 -1 -1 -1 4 5]", got)
	}
	if s := mustV[kvc.Stats](t)(p.Stats()); s.UsedBlocks != 2 || s.FreeBlocks != 14 {
		t.Fatalf("stats %+v, want used 2, free 14", s)
	}
}
