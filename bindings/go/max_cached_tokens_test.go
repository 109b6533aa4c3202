package kvc_test

// Keys.SetMaxCachedTokens (kvc_keys_set_max_cached_tokens): the prefix hit of requests using the
// keys is capped, rounded down to a block, in PrefixLookup, PrefixLookupTiers, CanAlloc and Alloc.

import (
	"testing"

	"kvc.dev/kvc"
)

func lookup(t *testing.T, p *kvc.Pool, tokens []int32, k *kvc.Keys) int64 {
	t.Helper()
	return mustV[int64](t)(p.PrefixLookup(tokens, k))
}

func TestKeysMaxCachedTokens(t *testing.T) {
	p := newPool(t, smallConfig()) // block size 4, prefix caching on
	prompt := span(100, 125)       // 25 tokens: a hit can cover the first 24
	mustV[int64](t)(p.Alloc(1, prompt[:24], nil))
	k := mustV[*kvc.Keys](t)(kvc.NewKeys())
	defer k.Close()
	if c := lookup(t, p, prompt, k); c != 24 {
		t.Fatalf("lookup without a cap = %d, want 24", c)
	}

	must(t, k.SetMaxCachedTokens(10)) // rounded down to 8
	if c := lookup(t, p, prompt, k); c != 8 {
		t.Fatalf("lookup under cap 10 = %d, want 8", c)
	}
	if h := mustV[kvc.TierHits](t)(p.PrefixLookupTiers(prompt, k)); h != (kvc.TierHits{Device: 8}) {
		t.Fatalf("tier lookup under cap 10 = %+v, want 8 on the device", h)
	}
	must(t, k.SetMaxCachedTokens(0))
	if c := lookup(t, p, prompt, k); c != 0 {
		t.Fatalf("lookup under cap 0 = %d, want 0", c)
	}

	must(t, k.SetMaxCachedTokens(10))
	if v := mustV[kvc.AllocVerdict](t)(p.CanAlloc(prompt, k)); v != kvc.AllocOK {
		t.Fatalf("CanAlloc under cap 10 = %v", v)
	}
	freeBefore := mustV[kvc.Stats](t)(p.Stats()).FreeBlocks
	if c := mustV[int64](t)(p.Alloc(2, prompt, k)); c != 8 {
		t.Fatalf("Alloc under cap 10 reported %d cached tokens, want 8", c)
	}
	// Blocks 0 and 1 are shared; blocks 2..6 are fresh (block 2 is recomputed, not shared).
	if free := mustV[kvc.Stats](t)(p.Stats()).FreeBlocks; free != freeBefore-5 {
		t.Fatalf("free blocks %d after Alloc, want %d", free, freeBefore-5)
	}
	t1 := mustV[[]int32](t)(p.BlockTable(1))
	t2 := mustV[[]int32](t)(p.BlockTable(2))
	if t2[0] != t1[0] || t2[1] != t1[1] || t2[2] == t1[2] {
		t.Fatalf("tables %v and %v: want the first two blocks shared and the third not", t1, t2)
	}

	// A refused value leaves the cap as it was.
	wantStatus(t, k.SetMaxCachedTokens(-2), kvc.ErrInvalidArg)
	if c := lookup(t, p, prompt, k); c != 8 {
		t.Fatalf("lookup after a refused SetMaxCachedTokens(-2) = %d, want 8", c)
	}
	must(t, k.SetMaxCachedTokens(-1))
	if c := lookup(t, p, prompt, k); c != 24 {
		t.Fatalf("lookup after SetMaxCachedTokens(-1) = %d, want 24", c)
	}
	must(t, k.SetMaxCachedTokens(10))
	must(t, k.Clear())
	if c := lookup(t, p, prompt, k); c != 24 {
		t.Fatalf("lookup after Clear = %d, want 24 (Clear removes the cap)", c)
	}

	must(t, k.Close())
	wantStatus(t, k.SetMaxCachedTokens(10), kvc.ErrState)
}

// With a sliding window the capped hit is the largest valid one below the cap: its first uncached
// token's window must find its blocks cached.
func TestKeysMaxCachedTokensWithWindow(t *testing.T) {
	p := newPool(t, smallConfig())
	must(t, p.SetSlidingWindow(window)) // 6
	prompt := span(100, 125)
	mustV[int64](t)(p.Alloc(1, prompt[:4], nil))
	for pos := 4; pos < 24; pos++ { // blocks 0..3 are released as it grows, still cached
		mustV[int32](t)(p.Append(1, prompt[pos:pos+1], 0))
	}
	k := mustV[*kvc.Keys](t)(kvc.NewKeys())
	defer k.Close()
	if c := lookup(t, p, prompt, k); c != 24 {
		t.Fatalf("windowed lookup without a cap = %d, want 24", c)
	}
	must(t, k.SetMaxCachedTokens(23))
	if c := lookup(t, p, prompt, k); c != 20 { // window from 15: blocks 3, 4
		t.Fatalf("windowed lookup under cap 23 = %d, want 20", c)
	}
	must(t, k.SetMaxCachedTokens(17))
	if c := lookup(t, p, prompt, k); c != 16 { // window from 11: blocks 2, 3
		t.Fatalf("windowed lookup under cap 17 = %d, want 16", c)
	}
	if c := mustV[int64](t)(p.Alloc(2, prompt, k)); c != 16 {
		t.Fatalf("windowed Alloc under cap 17 reported %d cached tokens, want 16", c)
	}
	table := mustV[[]int32](t)(p.BlockTable(2))
	if len(table) != 7 || table[0] != -1 || table[1] != -1 || table[2] < 0 {
		t.Fatalf("table %v: want 7 entries, blocks 0 and 1 released (-1), block 2 held", table)
	}
}
