package kvc_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"kvc.dev/kvc"
)

func TestVersion(t *testing.T) {
	v := kvc.Version()
	if v != kvc.HeaderVersion {
		t.Fatalf("library version %d, header version %d", v, kvc.HeaderVersion)
	}
	want := fmt.Sprintf("%d.%d.%d", v/10000, v/100%100, v%100)
	if got := kvc.VersionString(); got != want {
		t.Fatalf("VersionString %q, want %q", got, want)
	}
}

func TestStatusStrings(t *testing.T) {
	if s := kvc.ErrOutOfBlocks.String(); !strings.Contains(s, "OUT_OF_BLOCKS") {
		t.Errorf("ErrOutOfBlocks.String() = %q", s)
	}
	if s := kvc.OK.String(); s == "" || s == kvc.ErrInternal.String() {
		t.Errorf("OK.String() = %q", s)
	}
	if s := kvc.Status(9999).String(); s == "" {
		t.Error("unknown status has an empty description")
	}
}

func TestErrorValues(t *testing.T) {
	p := newPool(t, smallConfig())
	err := p.Free(99)
	wantStatus(t, err, kvc.ErrUnknownSeq)
	if errors.Is(err, kvc.ErrSeqExists) || errors.Is(err, kvc.ErrClosed) {
		t.Errorf("%v matches the wrong sentinel", err)
	}
	var e *kvc.Error
	errors.As(err, &e)
	if e.Op != "Free" || !strings.Contains(err.Error(), "Free") || !strings.Contains(err.Error(), e.Message) {
		t.Errorf("error %q: op %q message %q", err.Error(), e.Op, e.Message)
	}
	wrapped := fmt.Errorf("scheduler: %w", err)
	if !errors.Is(wrapped, kvc.ErrUnknownSeq) {
		t.Error("errors.Is does not see through wrapping")
	}
}

func TestDefaultPoolConfig(t *testing.T) {
	c := kvc.DefaultPoolConfig()
	want := kvc.PoolConfig{
		BlockSize: 16, NumLayers: 1, NumKVHeads: 1, NumQHeads: c.NumQHeads, HeadDim: 128,
		KVDType: kvc.DTypeF16, NumBlocks: c.NumBlocks, MemoryBudgetBytes: c.MemoryBudgetBytes, MemoryUtilization: 0.9, Watermark: 0.01, PrefixCaching: true,
		Backend: kvc.BackendNone, EventCapacity: 4096,
	}
	if c != want {
		t.Fatalf("DefaultPoolConfig = %+v, want %+v", c, want)
	}
}

func TestSizing(t *testing.T) {
	c := kvc.DefaultPoolConfig()
	bpb := mustV[int64](t)(c.BytesPerBlock())
	if bpb != 2*16*1*128*2*1 {
		t.Fatalf("BytesPerBlock = %d", bpb)
	}
	c.NumLayers, c.NumKVHeads, c.KVDType = 4, 8, kvc.DTypeF32
	bpb = mustV[int64](t)(c.BytesPerBlock())
	if bpb != 2*16*8*128*4*4 {
		t.Fatalf("BytesPerBlock(4 layers, 8 heads, F32) = %d", bpb)
	}
	n := mustV[int64](t)(c.BlocksForBudget(100*bpb+7, 0.5))
	if n != 50 {
		t.Fatalf("BlocksForBudget = %d, want 50", n)
	}
	_, err := c.BlocksForBudget(-1, 0.5)
	wantStatus(t, err, kvc.ErrInvalidArg)
	_, err = c.BlocksForBudget(1000, 0)
	wantStatus(t, err, kvc.ErrInvalidArg)
	_, err = c.BlocksForBudget(1000, 1.5)
	wantStatus(t, err, kvc.ErrInvalidArg)
	bad := c
	bad.BlockSize = 0
	_, err = bad.BytesPerBlock()
	wantStatus(t, err, kvc.ErrInvalidArg)
	bad = c
	bad.KVDType = 99
	_, err = bad.BytesPerBlock()
	wantStatus(t, err, kvc.ErrInvalidArg)
	bad = c
	bad.HeadDim, bad.NumKVHeads, bad.NumLayers, bad.BlockSize = 1<<30, 1<<30, 1<<30, 1<<30
	_, err = bad.BytesPerBlock()
	wantStatus(t, err, kvc.ErrOverflow)
}

func TestCUDADeviceCount(t *testing.T) {
	n, err := kvc.CUDADeviceCount()
	if err != nil || n < 0 {
		t.Fatalf("CUDADeviceCount = %d, %v", n, err)
	}
}

func TestPoolLifecycle(t *testing.T) {
	p, err := kvc.NewPool(smallConfig())
	must(t, err)
	cfg := mustV[kvc.PoolConfig](t)(p.Config())
	if cfg.NumBlocks != 16 || cfg.BlockSize != 4 || !cfg.PrefixCaching {
		t.Fatalf("Config = %+v", cfg)
	}
	must(t, p.Check())
	must(t, p.Close())
	must(t, p.Close()) // idempotent
	_, err = p.Alloc(1, span(0, 4), nil)
	wantStatus(t, err, kvc.ErrState)
	if !errors.Is(err, kvc.ErrClosed) {
		t.Fatalf("use after Close: %v does not match ErrClosed", err)
	}
	for name, err := range map[string]error{
		"Check": p.Check(), "Free": p.Free(1), "Fork": p.Fork(1, 2), "ResetPrefixCache": p.ResetPrefixCache(),
	} {
		if !errors.Is(err, kvc.ErrClosed) {
			t.Errorf("%s after Close: %v", name, err)
		}
	}
	if _, err := p.Stats(); !errors.Is(err, kvc.ErrClosed) {
		t.Errorf("Stats after Close: %v", err)
	}
	if _, err := p.BlockTable(1); !errors.Is(err, kvc.ErrClosed) {
		t.Errorf("BlockTable after Close: %v", err)
	}
	if _, err := p.NewBatch(1, 1, 1); !errors.Is(err, kvc.ErrClosed) {
		t.Errorf("NewBatch after Close: %v", err)
	}
	if _, _, err := p.PopEvent(); !errors.Is(err, kvc.ErrClosed) {
		t.Errorf("PopEvent after Close: %v", err)
	}
}

func TestNewPoolErrors(t *testing.T) {
	for name, mutate := range map[string]func(*kvc.PoolConfig){
		"block size 0":   func(c *kvc.PoolConfig) { c.BlockSize = 0 },
		"watermark 1.5":  func(c *kvc.PoolConfig) { c.Watermark = 1.5 },
		"negative count": func(c *kvc.PoolConfig) { c.NumBlocks = -1 },
	} {
		cfg := smallConfig()
		mutate(&cfg)
		p, err := kvc.NewPool(cfg)
		if p != nil {
			t.Errorf("%s: got a pool", name)
		}
		wantStatus(t, err, kvc.ErrInvalidArg)
	}
}

func TestPoolFromBudget(t *testing.T) {
	cfg := kvc.DefaultPoolConfig()
	bpb := mustV[int64](t)(cfg.BytesPerBlock())
	cfg.NumBlocks = 0
	cfg.MemoryBudgetBytes = 100 * bpb
	cfg.MemoryUtilization = 0.5
	p := newPool(t, cfg)
	if got := mustV[kvc.PoolConfig](t)(p.Config()).NumBlocks; got != 50 {
		t.Fatalf("NumBlocks from budget = %d, want 50", got)
	}
	if s := mustV[kvc.Stats](t)(p.Stats()); s.TotalBlocks != 50 || s.FreeBlocks != 50 {
		t.Fatalf("stats %+v", s)
	}
}
