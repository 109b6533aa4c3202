package kvc_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kvc.dev/kvc"
)

func TestTierAttach(t *testing.T) {
	meta := newPool(t, smallConfig())
	wantStatus(t, meta.AttachHostTier(8), kvc.ErrState)

	p := newPool(t, cpuConfig())
	if s := mustV[kvc.TierStats](t)(p.TierStats(kvc.TierHost)); s.CapacityBlocks != 0 {
		t.Fatalf("unattached host tier: %+v", s)
	}
	dir := t.TempDir()
	wantStatus(t, p.AttachDiskTier(filepath.Join(dir, "kv.bin"), 8, 0), kvc.ErrState) // no host tier yet
	wantStatus(t, p.AttachHostTier(0), kvc.ErrInvalidArg)
	must(t, p.AttachHostTier(8))
	wantStatus(t, p.AttachHostTier(8), kvc.ErrState)
	host := mustV[kvc.TierStats](t)(p.TierStats(kvc.TierHost))
	if host.Tier != kvc.TierHost || host.CapacityBlocks != 8 || host.UsedBlocks != 0 {
		t.Fatalf("host tier stats %+v", host)
	}
	wantStatus(t, p.AttachDiskTier(filepath.Join(dir, "kv.bin"), 8, 99), kvc.ErrInvalidArg)
	wantStatus(t, p.AttachDiskTier(dir, 8, 0), kvc.ErrIO) // a directory, not a regular file
	wantStatus(t, p.AttachDiskTier("a\x00b", 8, 0), kvc.ErrInvalidArg)
	must(t, p.AttachDiskTier(filepath.Join(dir, "kv.bin"), 8, kvc.DiskNoDirect))
	disk := mustV[kvc.TierStats](t)(p.TierStats(kvc.TierDisk))
	if disk.Tier != kvc.TierDisk || disk.CapacityBlocks != 8 || disk.DirectIO {
		t.Fatalf("disk tier stats %+v", disk)
	}
	if _, err := os.Stat(filepath.Join(dir, "kv.bin")); err != nil {
		t.Fatalf("disk tier file: %v", err)
	}
	_, err := p.TierStats(7)
	wantStatus(t, err, kvc.ErrInvalidArg)
}

func TestSwapOutIn(t *testing.T) {
	p := newPool(t, cpuConfig())
	si := mustV[kvc.StorageInfo](t)(p.StorageInfo())
	must(t, p.AttachHostTier(8))
	mustV[int64](t)(p.Alloc(1, span(0, 6), nil)) // 2 blocks, both exclusively owned
	writeSequence(t, p, 1, 0, 6)
	table := mustV[[]int32](t)(p.BlockTable(1))
	before := make([]byte, int64(len(table))*si.BlockStride)
	must(t, p.ReadBlocks(table, before))
	cost := mustV[kvc.PreemptionCost](t)(p.PreemptionCost(1))
	if cost.SwapBytes != 2*si.BlockStride || cost.RecomputeTokens != 6 {
		t.Fatalf("preemption cost %+v", cost)
	}

	op := mustV[kvc.OpID](t)(p.SwapOut(1))
	if done := mustV[bool](t)(p.OpDone(op)); !done {
		t.Fatal("a CPU swap is complete when the call returns")
	}
	must(t, p.OpWait(op))
	swapped := mustV[[]int32](t)(p.BlockTable(1))
	if !equalInts(swapped, []int32{-1, -1}) {
		t.Fatalf("table of a swapped-out sequence = %v", swapped)
	}
	if s := mustV[kvc.Stats](t)(p.Stats()); s.UsedBlocks != 0 {
		t.Fatalf("device blocks still used after swap-out: %+v", s)
	}
	if h := mustV[kvc.TierStats](t)(p.TierStats(kvc.TierHost)); h.HeldBlocks != 2 || h.BlocksIn != 2 {
		t.Fatalf("host tier after swap-out %+v", h)
	}
	_, err := p.Append(1, []int32{6}, 0)
	wantStatus(t, err, kvc.ErrState)
	_, err = p.SlotMapping(1, 0, 1)
	wantStatus(t, err, kvc.ErrState)
	wantStatus(t, p.Fork(1, 2), kvc.ErrState)
	_, err = p.SwapOut(1)
	wantStatus(t, err, kvc.ErrState)
	if c := mustV[kvc.PreemptionCost](t)(p.PreemptionCost(1)); c.SwapBytes != 2*si.BlockStride {
		t.Fatalf("swap-in cost %+v", c)
	}

	op = mustV[kvc.OpID](t)(p.SwapIn(1))
	must(t, p.OpWait(op))
	table = mustV[[]int32](t)(p.BlockTable(1))
	after := make([]byte, int64(len(table))*si.BlockStride)
	must(t, p.ReadBlocks(table, after))
	if !bytes.Equal(before, after) {
		t.Fatal("KV differs after a swap round trip")
	}
	_, err = p.SwapIn(1)
	wantStatus(t, err, kvc.ErrState)
	_, err = p.OpDone(op + 1000)
	wantStatus(t, err, kvc.ErrInvalidArg)
	_, err = p.SwapOut(99)
	wantStatus(t, err, kvc.ErrUnknownSeq)
	mustV[int32](t)(p.Append(1, []int32{6}, 0))

	n := mustV[int64](t)(p.PreemptRecompute(1))
	if n != 7 {
		t.Fatalf("tokens to recompute = %d, want 7", n)
	}
	_, err = p.NumTokens(1)
	wantStatus(t, err, kvc.ErrUnknownSeq)
	_, err = p.PreemptRecompute(1)
	wantStatus(t, err, kvc.ErrUnknownSeq)

	noHost := newPool(t, cpuConfig())
	mustV[int64](t)(noHost.Alloc(1, span(0, 6), nil))
	_, err = noHost.SwapOut(1)
	wantStatus(t, err, kvc.ErrState)
}

// Cached blocks evicted from the device spill to the host tier, stay findable there, and come back
// as cached tokens.
func TestFlushTiersThenWarmRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kv.bin")
	open := func() *kvc.Pool {
		p := newPool(t, cpuConfig())
		must(t, p.AttachHostTier(8))
		must(t, p.AttachDiskTier(path, 16, kvc.DiskPersistent))
		return p
	}
	p := open()
	_, err := newPool(t, cpuConfig()).FlushTiers()
	wantStatus(t, err, kvc.ErrState)             // no disk tier
	mustV[int64](t)(p.Alloc(1, span(0, 9), nil)) // blocks 0, 1 cached + 1 partial, on the device only
	must(t, p.Free(1))
	if n := mustV[int64](t)(p.FlushTiers()); n != 2 {
		t.Fatalf("flush queued %d blocks, want 2", n)
	}
	if n := mustV[int64](t)(p.FlushTiers()); n != 0 {
		t.Fatalf("second flush queued %d blocks, want 0", n)
	}
	must(t, p.Close())

	q := open()
	if s := mustV[kvc.TierStats](t)(q.TierStats(kvc.TierDisk)); s.RecoveredBlocks != 2 {
		t.Fatalf("recovered %d blocks after the flush, want 2", s.RecoveredBlocks)
	}
	if h := mustV[kvc.TierHits](t)(q.PrefixLookupTiers(span(0, 9), nil)); h != (kvc.TierHits{Disk: 8}) {
		t.Fatalf("after the restart: %+v", h)
	}
	// A prefetch reads them up into the host tier; the allocation then needs no disk read.
	if n := mustV[int64](t)(q.PrefetchTiers(span(0, 9), nil)); n != 8 {
		t.Fatalf("prefetch: %d tokens above the disk, want 8", n)
	}
	if h := mustV[kvc.TierHits](t)(q.PrefixLookupTiers(span(0, 9), nil)); h != (kvc.TierHits{Host: 8}) {
		t.Fatalf("after the prefetch: %+v", h)
	}
	read := mustV[kvc.TierStats](t)(q.TierStats(kvc.TierDisk)).BlocksOut
	if n := mustV[int64](t)(q.Alloc(1, span(0, 9), nil)); n != 8 {
		t.Fatalf("alloc after the prefetch: %d cached tokens, want 8", n)
	}
	if s := mustV[kvc.TierStats](t)(q.TierStats(kvc.TierDisk)); s.BlocksOut != read {
		t.Fatalf("the allocation read the disk: %d blocks out, %d before", s.BlocksOut, read)
	}
	_, err = q.PrefetchTiers(nil, nil)
	wantStatus(t, err, kvc.ErrInvalidArg)
	_, err = newPool(t, cpuConfig()).PrefetchTiers(span(0, 9), nil)
	wantStatus(t, err, kvc.ErrState) // no disk tier
}

// writeSpanToDisk caches span(0, 9) (blocks 0, 1 + a partial one), writes the two full blocks to
// the disk tier and closes the pool.
func writeSpanToDisk(t *testing.T, p *kvc.Pool) {
	t.Helper()
	mustV[int64](t)(p.Alloc(1, span(0, 9), nil))
	must(t, p.Free(1))
	if n := mustV[int64](t)(p.FlushTiers()); n != 2 {
		t.Fatalf("flush queued %d blocks, want 2", n)
	}
	must(t, p.Close())
}

// expectRecovered checks what a persistent attach found of the blocks writeSpanToDisk wrote.
func expectRecovered(t *testing.T, q *kvc.Pool, what string, recovered, foreign int64) {
	t.Helper()
	s := mustV[kvc.TierStats](t)(q.TierStats(kvc.TierDisk))
	if s.RecoveredBlocks != recovered || s.ForeignBlocks != foreign {
		t.Fatalf("%s: recovered %d, foreign %d; want %d, %d", what, s.RecoveredBlocks, s.ForeignBlocks, recovered,
			foreign)
	}
	if h := mustV[kvc.TierHits](t)(q.PrefixLookupTiers(span(0, 9), nil)); h.Disk != 4*recovered {
		t.Fatalf("%s: hits %+v", what, h)
	}
}

// A persistent file recovers only the blocks of the identity that wrote them: another rank's
// shard of the same layout finds none and counts them as foreign.
func TestDiskIdentity(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kv.bin")
	open := func(identity string) *kvc.Pool {
		p := newPool(t, cpuConfig())
		must(t, p.AttachHostTier(8))
		must(t, p.AttachDiskTierWithIdentity(path, 16, kvc.DiskPersistent, identity))
		return p
	}
	writeSpanToDisk(t, open("model-a;tp=0/2"))
	for _, c := range []struct {
		identity           string
		recovered, foreign int64
	}{{"model-a;tp=1/2", 0, 2}, {"", 0, 2}, {"model-a;tp=0/2", 2, 0}} {
		q := open(c.identity)
		expectRecovered(t, q, "identity "+c.identity, c.recovered, c.foreign)
		must(t, q.Close())
	}
	q := newPool(t, cpuConfig())
	must(t, q.AttachHostTier(8))
	wantStatus(t, q.AttachDiskTierWithIdentity(path, 16, 0, "a\x00b"), kvc.ErrInvalidArg)
	wantStatus(t, q.AttachDiskTierWithIdentity(path, 16, 0, strings.Repeat("x", kvc.MaxDiskIdentityLen+1)), kvc.ErrInvalidArg)
	wantStatus(t, q.AttachDiskTierWithIdentity("a\x00b", 16, 0, "m"), kvc.ErrInvalidArg)
	if s := mustV[kvc.TierStats](t)(q.TierStats(kvc.TierDisk)); s.CapacityBlocks != 0 {
		t.Fatalf("a refused attach left a disk tier: %+v", s)
	}
}

// Keyed slots (AttachDiskTierKeyed): recovered with their key only — another key or none finds
// them foreign —, the caller's key may be wiped once attached, bad keys change nothing.
func TestDiskKeyed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kv.bin")
	keyA := bytes.Repeat([]byte{0xa5}, 32)
	open := func(key []byte) *kvc.Pool {
		p := newPool(t, cpuConfig())
		must(t, p.AttachHostTier(8))
		if key == nil {
			must(t, p.AttachDiskTierWithIdentity(path, 16, kvc.DiskPersistent, "m"))
		} else {
			must(t, p.AttachDiskTierKeyed(path, 16, kvc.DiskPersistent, "m", key))
		}
		return p
	}
	key := append([]byte(nil), keyA...)
	p := open(key)
	for i := range key {
		key[i] = 0 // the tier MACs with its own copy
	}
	writeSpanToDisk(t, p)
	for _, c := range []struct {
		what               string
		key                []byte
		recovered, foreign int64
	}{{"another key", bytes.Repeat([]byte{0x5a}, 32), 0, 2}, {"no key", nil, 0, 2}, {"the key", keyA, 2, 0}} {
		q := open(c.key)
		expectRecovered(t, q, c.what, c.recovered, c.foreign)
		must(t, q.Close())
	}
	q := newPool(t, cpuConfig())
	must(t, q.AttachHostTier(8))
	other := filepath.Join(t.TempDir(), "other.bin")
	wantStatus(t, q.AttachDiskTierKeyed(other, 16, 0, "m", nil), kvc.ErrNullArg)
	wantStatus(t, q.AttachDiskTierKeyed(other, 16, 0, "m", make([]byte, kvc.DiskKeyMinLen-1)), kvc.ErrInvalidArg)
	wantStatus(t, q.AttachDiskTierKeyed(other, 16, 0, "m", make([]byte, kvc.DiskKeyMaxLen+1)), kvc.ErrInvalidArg)
	wantStatus(t, q.AttachDiskTierKeyed(other, 16, 0, "m", []byte{}), kvc.ErrInvalidArg)
	wantStatus(t, q.AttachDiskTierKeyed(other, 16, 0, "a\x00b", keyA), kvc.ErrInvalidArg)
	if s := mustV[kvc.TierStats](t)(q.TierStats(kvc.TierDisk)); s.CapacityBlocks != 0 {
		t.Fatalf("a refused attach left a disk tier: %+v", s)
	}
	if _, err := os.Stat(other); !os.IsNotExist(err) {
		t.Fatalf("a refused attach touched the file: %v", err)
	}
	must(t, q.AttachDiskTierKeyed(other, 16, 0, "", make([]byte, kvc.DiskKeyMaxLen)))
}

func TestTierEvents(t *testing.T) {
	cfg := cpuConfig()
	cfg.NumBlocks = 4
	p := newPool(t, cfg)
	must(t, p.SetTierEvents(true))
	must(t, p.AttachHostTier(8))
	mustV[int64](t)(p.Alloc(1, span(0, 9), nil)) // blocks 0, 1 cached + 1 partial
	must(t, p.Free(1))
	mustV[int64](t)(p.Alloc(2, span(100, 116), nil)) // evicts 0, 1 into the host tier
	must(t, p.Free(2))
	storedOnDevice := map[kvc.Hash128]bool{}
	removedFromDevice, storedOnHost := 0, 0
	for _, ev := range popAll(t, p) {
		switch {
		case ev.Type == kvc.EventBlockStored && ev.Tier == kvc.TierDevice:
			storedOnDevice[ev.Hash] = true
		case ev.Type == kvc.EventBlockRemoved && ev.Tier == kvc.TierDevice:
			removedFromDevice++
		case ev.Type == kvc.EventBlockStored && ev.Tier == kvc.TierHost:
			if !storedOnDevice[ev.Hash] || len(ev.Tokens) != int(cfg.BlockSize) {
				t.Errorf("host tier stored a block the device never had: %+v", ev)
			}
			storedOnHost++
		}
	}
	if removedFromDevice != 2 || storedOnHost != 2 {
		t.Fatalf("%d removed from the device, %d stored on the host; want 2, 2", removedFromDevice, storedOnHost)
	}
	must(t, p.SetTierEvents(false))

	cfg.EventCapacity = 0
	noEvents := newPool(t, cfg)
	wantStatus(t, noEvents.SetTierEvents(true), kvc.ErrUnsupported)
	must(t, noEvents.SetTierEvents(false))
}

func TestSpillAndRehit(t *testing.T) {
	cfg := cpuConfig()
	cfg.NumBlocks = 4
	p := newPool(t, cfg)
	must(t, p.AttachHostTier(8))
	mustV[int64](t)(p.Alloc(1, span(0, 9), nil)) // blocks 0, 1 cached + 1 partial
	must(t, p.Free(1))
	if h := mustV[kvc.TierHits](t)(p.PrefixLookupTiers(span(0, 9), nil)); h != (kvc.TierHits{Device: 8}) {
		t.Fatalf("before eviction: %+v", h)
	}
	mustV[int64](t)(p.Alloc(2, span(100, 116), nil)) // needs all 4 device blocks: evicts 0, 1
	must(t, p.Free(2))
	hits := mustV[kvc.TierHits](t)(p.PrefixLookupTiers(span(0, 9), nil))
	if hits.Host != 8 || hits.Device != 0 {
		t.Fatalf("after eviction: %+v", hits)
	}
	if c := mustV[int64](t)(p.Alloc(3, span(0, 9), nil)); c != 8 {
		t.Fatalf("re-hit from the host tier cached %d tokens, want 8", c)
	}
	if h := mustV[kvc.TierStats](t)(p.TierStats(kvc.TierHost)); h.Hits == 0 || h.BlocksOut == 0 {
		t.Fatalf("host tier after re-hit %+v", h)
	}
	_, err := p.PrefixLookupTiers(nil, nil)
	wantStatus(t, err, kvc.ErrInvalidArg)
}

// One allocation evicts more cached blocks than the host tier has slots to take: the chain's head
// gets the slot (its child could never be reached without it), and the tier stats count what a
// lookup can reach.
func TestSpillsKeepChainHeads(t *testing.T) {
	cfg := cpuConfig()
	cfg.NumBlocks = 4
	p := newPool(t, cfg)
	must(t, p.AttachHostTier(1))
	mustV[int64](t)(p.Alloc(1, span(0, 9), nil)) // blocks 0, 1 cached + 1 partial
	must(t, p.Free(1))
	mustV[int64](t)(p.Alloc(2, span(100, 116), nil)) // all 4 device blocks: evicts both at once
	must(t, p.Free(2))
	if h := mustV[kvc.TierHits](t)(p.PrefixLookupTiers(span(0, 9), nil)); h != (kvc.TierHits{Host: 4}) {
		t.Fatalf("lookup after the spill: %+v, want the first block from the host tier", h)
	}
	host := mustV[kvc.TierStats](t)(p.TierStats(kvc.TierHost))
	dev := mustV[kvc.TierStats](t)(p.TierStats(kvc.TierDevice))
	if host.CachedBlocks != 1 || host.ReachableBlocks != 1 || dev.CachedBlocks != 4 || dev.ReachableBlocks != 4 {
		t.Fatalf("host %+v, device %+v", host, dev)
	}
}
