// A small scheduler loop on libkvc through the Go binding: admit prompts that share a system
// prompt, decode a few steps, fork a beam, handle running out of blocks, and print the pool's
// counters; then a warm restart from a persistent disk tier, prefetched from a goroutine. Build and run (PKG_CONFIG_PATH names a directory with kvc.pc, see bindings/go):
//
//	go run .
package main

import (
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"kvc.dev/kvc"
)

func main() {
	cfg := kvc.DefaultPoolConfig()
	cfg.BlockSize = 16
	cfg.NumBlocks = 64
	cfg.Watermark = 0
	pool, err := kvc.NewPool(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	fmt.Printf("libkvc %s: %d blocks of %d tokens\n", kvc.VersionString(), cfg.NumBlocks, cfg.BlockSize)

	system := make([]int32, 64) // a 64-token system prompt shared by every request
	for i := range system {
		system[i] = int32(i)
	}
	for id := uint64(1); id <= 4; id++ {
		prompt := append(append([]int32{}, system...), int32(1000*id), int32(1000*id+1))
		cached, err := pool.Alloc(id, prompt, nil)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("request %d: %d prompt tokens, %d served from the prefix cache\n", id, len(prompt), cached)
	}

	for step := 0; step < 20; step++ {
		for id := uint64(1); id <= 4; id++ {
			if _, err := pool.Append(id, []int32{int32(step)}, 0); err != nil {
				log.Fatal(err)
			}
		}
	}
	if err := pool.Fork(1, 100); err != nil { // a second beam of request 1
		log.Fatal(err)
	}
	if _, err := pool.Append(100, []int32{7}, 0); err != nil {
		log.Fatal(err)
	}
	src, dst, err := pool.TakePendingCopies()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("copy-on-write pairs to apply before the next step: %v -> %v\n", src, dst)

	table, err := pool.BlockTable(100)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("beam block table: %v\n", table)

	long := make([]int32, 2000)
	if _, err := pool.Alloc(200, long, nil); errors.Is(err, kvc.ErrOutOfBlocks) {
		var e *kvc.Error
		errors.As(err, &e)
		fmt.Printf("admission refused as expected: %s\n", e.Message)
	} else {
		log.Fatalf("expected ErrOutOfBlocks, got %v", err)
	}

	for _, id := range []uint64{1, 2, 3, 4, 100} {
		if err := pool.Free(id); err != nil {
			log.Fatal(err)
		}
	}
	if err := pool.Check(); err != nil {
		log.Fatal(err)
	}
	s, err := pool.Stats()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("prefix hit rate %.2f, %d cached blocks kept for reuse, %d blocks in use\n",
		s.PrefixHitRate, s.CachedFreeBlocks, s.UsedBlocks)
	if s.UsedBlocks != 0 || s.PrefixHitTokens == 0 {
		log.Fatalf("unexpected stats %+v", s)
	}

	warmRestart()
}

// warmRestart keeps the prefix cache across a server restart: a disk tier in a persistent file,
// attached with the identity of the model that computes the KV (another model's blocks are never
// recovered as hits), flushed before shutdown; after the restart a goroutine prefetches a queued
// request's prefix from disk while the scheduler goes on, and the admission restores it from host
// memory.
func warmRestart() {
	dir, err := os.MkdirTemp("", "kvc-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	const identity = "example-model@rev1;kv=f16;tp=0/1"
	open := func() *kvc.Pool {
		cfg := kvc.DefaultPoolConfig()
		cfg.Backend = kvc.BackendCPU // storage: the tiers move KV bytes
		cfg.BlockSize, cfg.NumBlocks = 16, 64
		cfg.NumLayers, cfg.NumKVHeads, cfg.NumQHeads, cfg.HeadDim = 2, 2, 4, 64
		p, err := kvc.NewPool(cfg)
		if err != nil {
			log.Fatal(err)
		}
		must(p.AttachHostTier(16))
		must(p.AttachDiskTierWithIdentity(filepath.Join(dir, "kv.bin"), 256, kvc.DiskPersistent, identity))
		return p
	}
	system := make([]int32, 100)
	for i := range system {
		system[i] = int32(7 + i)
	}
	p := open()
	if _, err := p.Alloc(1, system, nil); err != nil {
		log.Fatal(err)
	}
	// ... the forward pass writes the prompt's KV (kvc_cache_write / WriteBlocks) ...
	must(p.Free(1))
	written, err := p.FlushTiers()
	must(err)
	must(p.Close())

	p = open() // the restart
	defer p.Close()
	s0, err := p.TierStats(kvc.TierDisk)
	must(err)
	prefetched := make(chan int64)
	go func() { // an I/O goroutine: disk reads off the scheduler's path
		n, err := p.PrefetchTiers(system, nil)
		must(err)
		prefetched <- n
	}()
	n := <-prefetched
	cached, err := p.Alloc(2, system, nil)
	must(err)
	fmt.Printf("restart: %d blocks flushed, %d recovered from disk; prefetched %d tokens, admission found %d cached\n",
		written, s0.RecoveredBlocks, n, cached)
	if s0.RecoveredBlocks != written || cached != 96 || n != 96 {
		log.Fatalf("unexpected warm restart: recovered %d, prefetched %d, cached %d", s0.RecoveredBlocks, n, cached)
	}
	must(p.Free(2))
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
