package kvc_test

import (
	"strings"
	"testing"

	"kvc.dev/kvc"
)

func TestKeys(t *testing.T) {
	p := newPool(t, smallConfig())
	k := mustV[*kvc.Keys](t)(kvc.NewKeys())
	defer k.Close()
	must(t, k.SetLoRA(7))
	must(t, k.SetSalt("tenant-a"))
	must(t, k.SetPriority(80))
	must(t, k.AddMultimodal(kvc.Hash128{Hi: 1, Lo: 2}, 0, 4))
	mustV[int64](t)(p.Alloc(1, span(0, 9), k))
	if c := mustV[int64](t)(p.PrefixLookup(span(0, 9), k)); c != 8 {
		t.Fatalf("lookup with the same keys = %d, want 8", c)
	}
	if c := mustV[int64](t)(p.PrefixLookup(span(0, 9), nil)); c != 0 {
		t.Fatalf("lookup without keys = %d, want 0", c)
	}
	other := mustV[*kvc.Keys](t)(kvc.NewKeys())
	defer other.Close()
	must(t, other.SetLoRA(7))
	must(t, other.SetSalt("tenant-a"))
	if c := mustV[int64](t)(p.PrefixLookup(span(0, 9), other)); c != 0 {
		t.Fatalf("lookup without the multimodal item = %d, want 0", c)
	}
	must(t, other.AddMultimodal(kvc.Hash128{Hi: 1, Lo: 2}, 0, 4))
	must(t, other.SetPriority(10)) // priority is not part of the identity
	if c := mustV[int64](t)(p.PrefixLookup(span(0, 9), other)); c != 8 {
		t.Fatalf("lookup with equal keys = %d, want 8", c)
	}
	must(t, other.Clear())
	if c := mustV[int64](t)(p.PrefixLookup(span(0, 9), other)); c != 0 {
		t.Fatalf("lookup with cleared keys = %d, want 0", c)
	}

	wantStatus(t, k.SetPriority(kvc.PriorityMax+1), kvc.ErrInvalidArg)
	wantStatus(t, k.SetPriority(kvc.PriorityMin-1), kvc.ErrInvalidArg)
	wantStatus(t, k.SetSalt(strings.Repeat("x", kvc.MaxSaltLen+1)), kvc.ErrInvalidArg)
	wantStatus(t, k.SetSalt("a\x00b"), kvc.ErrInvalidArg)
	wantStatus(t, k.AddMultimodal(kvc.Hash128{}, -1, 4), kvc.ErrInvalidArg)
	wantStatus(t, k.AddMultimodal(kvc.Hash128{}, 8, 0), kvc.ErrInvalidArg)
	wantStatus(t, k.AddMultimodal(kvc.Hash128{}, 2, 4), kvc.ErrInvalidArg) // overlaps [0,4)

	// Closed keys: an error, never a crash.
	must(t, k.Close())
	must(t, k.Close())
	_, err := p.Alloc(2, span(0, 9), k)
	wantStatus(t, err, kvc.ErrState)
	for _, err := range []error{k.SetLoRA(1), k.SetSalt("x"), k.SetPriority(1), k.Clear(), k.AddMultimodal(kvc.Hash128{}, 0, 1)} {
		wantStatus(t, err, kvc.ErrState)
	}
	if _, err := p.PrefixLookup(span(0, 9), k); err == nil {
		t.Fatal("lookup with closed keys succeeded")
	}
}

func TestPrefixPinUnpinReset(t *testing.T) {
	cfg := smallConfig()
	cfg.NumBlocks = 8
	p := newPool(t, cfg)
	mustV[int64](t)(p.Alloc(1, span(0, 9), nil)) // blocks 0, 1 cached
	wantStatus(t, p.ResetPrefixCache(), kvc.ErrBusy)
	must(t, p.Free(1))
	if n := mustV[int64](t)(p.PrefixPin(span(0, 9), nil)); n != 8 {
		t.Fatalf("pinned %d tokens, want 8", n)
	}
	if s := mustV[kvc.Stats](t)(p.Stats()); s.PinnedBlocks != 2 {
		t.Fatalf("PinnedBlocks = %d", s.PinnedBlocks)
	}
	wantStatus(t, p.ResetPrefixCache(), kvc.ErrBusy)
	// Pinned blocks are never evicted: only the 6 other blocks can serve a new prompt.
	_, err := p.Alloc(2, span(100, 132), nil)
	wantStatus(t, err, kvc.ErrOutOfBlocks)
	mustV[int64](t)(p.Alloc(2, span(100, 124), nil))
	if c := mustV[int64](t)(p.PrefixLookup(span(0, 9), nil)); c != 8 {
		t.Fatalf("pinned prefix lookup = %d", c)
	}
	must(t, p.Free(2))
	if n := mustV[int64](t)(p.PrefixUnpin(span(0, 9), nil)); n != 8 {
		t.Fatalf("unpinned %d tokens", n)
	}
	_, err = p.PrefixUnpin(span(0, 9), nil)
	wantStatus(t, err, kvc.ErrState)
	_, err = p.PrefixLookup(nil, nil)
	wantStatus(t, err, kvc.ErrInvalidArg)
	must(t, p.ResetPrefixCache())
	if c := mustV[int64](t)(p.PrefixLookup(span(0, 9), nil)); c != 0 {
		t.Fatalf("lookup after reset = %d", c)
	}

	cfg.PrefixCaching = false
	off := newPool(t, cfg)
	_, err = off.PrefixPin(span(0, 9), nil)
	wantStatus(t, err, kvc.ErrUnsupported)
	if c := mustV[int64](t)(off.PrefixLookup(span(0, 9), nil)); c != 0 {
		t.Fatalf("lookup with caching off = %d", c)
	}
}

func popAll(t *testing.T, p *kvc.Pool) []kvc.Event {
	t.Helper()
	var evs []kvc.Event
	for {
		ev, ok, err := p.PopEvent()
		must(t, err)
		if !ok {
			return evs
		}
		evs = append(evs, ev)
	}
}

func TestEvents(t *testing.T) {
	cfg := smallConfig()
	cfg.NumBlocks = 4
	p := newPool(t, cfg)
	k := mustV[*kvc.Keys](t)(kvc.NewKeys())
	defer k.Close()
	must(t, k.SetLoRA(7))
	mustV[int64](t)(p.Alloc(1, span(0, 8), k)) // two full blocks: 0, 1
	evs := popAll(t, p)
	if len(evs) != 2 {
		t.Fatalf("events after alloc: %+v", evs)
	}
	for i, ev := range evs {
		if ev.Type != kvc.EventBlockStored || ev.BlockID != int32(i) || ev.LoRAID != 7 ||
			!equalInts(ev.Tokens, span(int32(4*i), int32(4*i+4))) {
			t.Errorf("event %d = %+v", i, ev)
		}
	}
	if evs[1].ParentHash != evs[0].Hash || evs[0].Hash == evs[1].Hash {
		t.Errorf("hash chain: %+v", evs)
	}
	if evs[1].SequenceNumber != evs[0].SequenceNumber+1 {
		t.Errorf("sequence numbers %d, %d", evs[0].SequenceNumber, evs[1].SequenceNumber)
	}
	stored := map[kvc.Hash128]bool{evs[0].Hash: true, evs[1].Hash: true}

	// Evict both: a 16-token prompt needs all 4 blocks.
	must(t, p.Free(1))
	mustV[int64](t)(p.Alloc(2, span(100, 116), nil))
	removed := 0
	for _, ev := range popAll(t, p) {
		if ev.Type == kvc.EventBlockRemoved {
			removed++
			if !stored[ev.Hash] {
				t.Errorf("removed an unknown block: %+v", ev)
			}
		}
	}
	if removed != 2 {
		t.Fatalf("%d BlockRemoved events, want 2", removed)
	}
	must(t, p.Free(2))
	must(t, p.ResetPrefixCache())
	cleared := 0
	for _, ev := range popAll(t, p) {
		if ev.Type == kvc.EventAllBlocksCleared {
			cleared++
		}
	}
	if cleared != 1 {
		t.Fatalf("%d AllBlocksCleared events after reset, want 1", cleared)
	}

	cfg.EventCapacity = 0
	quiet := newPool(t, cfg)
	mustV[int64](t)(quiet.Alloc(1, span(0, 8), nil))
	if evs := popAll(t, quiet); len(evs) != 0 {
		t.Fatalf("events with capacity 0: %+v", evs)
	}
}
