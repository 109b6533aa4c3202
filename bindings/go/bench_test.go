package kvc_test

import (
	"testing"

	"kvc.dev/kvc"
)

// Per-call cost of the binding (cgo + thread pinning + handle lock) on top of the C call:
//
//	go test -run '^$' -bench . -benchtime 200000x
func BenchmarkAllocAppendFree(b *testing.B) {
	cfg := smallConfig()
	cfg.NumBlocks = 1024
	p, err := kvc.NewPool(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	prompt := span(0, 40)
	next := []int32{41}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		seq := uint64(i)
		if _, err := p.Alloc(seq, prompt, nil); err != nil {
			b.Fatal(err)
		}
		if _, err := p.Append(seq, next, 0); err != nil {
			b.Fatal(err)
		}
		if err := p.Free(seq); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNumTokens(b *testing.B) {
	p, err := kvc.NewPool(smallConfig())
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	if _, err := p.Alloc(1, span(0, 10), nil); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := p.NumTokens(1); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkErrorPath(b *testing.B) {
	p, err := kvc.NewPool(smallConfig())
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := p.Free(99); err == nil {
			b.Fatal("free of an unknown sequence succeeded")
		}
	}
}
