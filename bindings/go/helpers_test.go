package kvc_test

import (
	"errors"
	"testing"

	"kvc.dev/kvc"
)

// smallConfig is a metadata-only pool of 16 blocks of 4 tokens with prefix caching and no
// watermark: block ids are predictable (the free queue starts as 0..N-1).
func smallConfig() kvc.PoolConfig {
	cfg := kvc.DefaultPoolConfig()
	cfg.BlockSize = 4
	cfg.NumBlocks = 16
	cfg.Watermark = 0
	cfg.PrefixCaching = true
	cfg.Backend = kvc.BackendNone
	return cfg
}

func newPool(t *testing.T, cfg kvc.PoolConfig) *kvc.Pool {
	t.Helper()
	p, err := kvc.NewPool(cfg)
	if err != nil {
		t.Fatalf("NewPool: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Check(); err != nil && !errors.Is(err, kvc.ErrClosed) {
			t.Errorf("pool invariants at the end of the test: %v", err)
		}
		p.Close()
	})
	return p
}

func span(a, b int32) []int32 {
	out := make([]int32, 0, b-a)
	for v := a; v < b; v++ {
		out = append(out, v)
	}
	return out
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func mustV[T any](t *testing.T) func(v T, err error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// wantStatus fails unless err carries status s (errors.Is) and errors.As reaches a *kvc.Error with
// that status and a non-empty message.
func wantStatus(t *testing.T, err error, s kvc.Status) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %v", s)
	}
	if !errors.Is(err, s) {
		t.Fatalf("got %v, want status %v", err, s)
	}
	var e *kvc.Error
	if !errors.As(err, &e) || e.Status != s || e.Message == "" || e.Op == "" {
		t.Fatalf("error %#v: want a *kvc.Error with status %v, a message and an op", err, s)
	}
}

func equalInts[T int32 | int64](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
