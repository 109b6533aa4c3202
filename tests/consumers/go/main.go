// The smallest useful program against the Go module kvc.dev/kvc, outside the libkvc tree: a prefix
// hit between two requests that share a 32-token prompt, checked exactly, and the library's
// version against the header's. Built by tests/consumers/go.sh with no swig on PATH.
package main

import (
	"fmt"
	"os"

	"kvc.dev/kvc"
)

func main() {
	cfg := kvc.DefaultPoolConfig()
	cfg.BlockSize = 16
	cfg.NumBlocks = 8
	pool, err := kvc.NewPool(cfg)
	if err != nil {
		fail(err)
	}
	defer pool.Close()
	prompt := make([]int32, 40)
	for i := range prompt {
		prompt[i] = int32(i + 1)
	}
	if c, err := pool.Alloc(1, prompt, nil); err != nil || c != 0 {
		fail(fmt.Errorf("alloc 1: cached %d, %v", c, err))
	}
	// Two full blocks of the shared prompt are reused; the partial third block never is.
	if c, err := pool.Alloc(2, prompt, nil); err != nil || c != 32 {
		fail(fmt.Errorf("alloc 2: cached %d (want 32), %v", c, err))
	}
	if kvc.Version() != kvc.HeaderVersion {
		fail(fmt.Errorf("library version %d, header %d", kvc.Version(), kvc.HeaderVersion))
	}
	fmt.Printf("kvc-consumer ok: libkvc %s, 32 of 40 prompt tokens cached\n", kvc.VersionString())
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "kvc-consumer:", err)
	os.Exit(1)
}
