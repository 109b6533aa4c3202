// A small scheduler loop on libkvc through the Go binding: admit prompts that share a system
// prompt, decode a few steps, fork a beam, handle running out of blocks, and print the pool's
// counters. Build and run (PKG_CONFIG_PATH names a directory with kvc.pc, see bindings/go):
//
//	go run .
package main

import (
	"errors"
	"fmt"
	"log"

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
}
