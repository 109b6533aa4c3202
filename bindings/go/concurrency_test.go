package kvc_test

import (
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"kvc.dev/kvc"
)

// Many goroutines alloc/append/fork/free on one pool (with shared prefixes, so the prefix cache is
// shared too) while others read stats, look prefixes up and drain events; afterwards the pool's
// invariant checker passes and every block is free. Run with -race.
func TestConcurrentUse(t *testing.T) {
	cfg := smallConfig()
	cfg.NumBlocks = 512
	p := newPool(t, cfg)
	keys := mustV[*kvc.Keys](t)(kvc.NewKeys())
	defer keys.Close()
	must(t, keys.SetSalt("shared"))

	const workers, iters = 16, 150
	var wg sync.WaitGroup
	var outOfBlocks atomic.Int64
	errs := make(chan error, workers*4)
	stop := make(chan struct{})
	for g := 0; g < workers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < iters; i++ {
				seq := uint64(g)<<32 | uint64(i)
				child := seq | 1<<31
				var k *kvc.Keys
				if i%3 == 0 {
					k = keys
				}
				prompt := append(span(0, int32(4+i%9)), int32(1000+g), int32(i))
				if _, err := p.Alloc(seq, prompt, k); err != nil {
					if errors.Is(err, kvc.ErrOutOfBlocks) {
						outOfBlocks.Add(1)
						continue
					}
					errs <- err
					return
				}
				if _, err := p.Append(seq, []int32{1, 2, 3, 4, 5}, int64(i%2)); err != nil && !errors.Is(err, kvc.ErrOutOfBlocks) {
					errs <- err
					return
				}
				if i%4 == 0 {
					if err := p.Fork(seq, child); err != nil {
						errs <- err
						return
					}
					if _, err := p.Append(child, []int32{9}, 0); err != nil && !errors.Is(err, kvc.ErrOutOfBlocks) {
						errs <- err
						return
					}
					if _, err := p.BlockTable(child); err != nil {
						errs <- err
						return
					}
					if err := p.Free(child); err != nil {
						errs <- err
						return
					}
				}
				if _, err := p.SlotMapping(seq, 0, 4); err != nil {
					errs <- err
					return
				}
				if err := p.Free(seq); err != nil {
					errs <- err
					return
				}
			}
		}(g)
	}
	var readers sync.WaitGroup
	for r := 0; r < 3; r++ {
		readers.Add(1)
		go func(r int) {
			defer readers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				var err error
				switch r {
				case 0:
					_, err = p.Stats()
				case 1:
					_, err = p.PrefixLookup(span(0, 12), nil)
				case 2:
					_, _, err = p.PopEvent()
					if err == nil {
						_, _, err = p.TakePendingCopies()
					}
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}(r)
	}
	// Keys change while pool calls read them (the binding serialises the two).
	readers.Add(1)
	go func() {
		defer readers.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := keys.SetPriority(int32(i % 101)); err != nil {
				errs <- err
				return
			}
		}
	}()
	wg.Wait()
	close(stop)
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	must(t, p.Check())
	s := mustV[kvc.Stats](t)(p.Stats())
	if s.NumSeqs != 0 || s.UsedBlocks != 0 || s.FreeBlocks != 512 {
		t.Fatalf("after all frees: %+v", s)
	}
	if s.Allocs+outOfBlocks.Load() != workers*iters {
		t.Fatalf("allocs %d + out-of-blocks %d != %d", s.Allocs, outOfBlocks.Load(), workers*iters)
	}
	if s.PrefixHitTokens == 0 {
		t.Fatal("no prefix hits across goroutines")
	}
}

// Close racing with calls on other goroutines: every call either works or reports ErrClosed.
func TestCloseWhileInUse(t *testing.T) {
	for round := 0; round < 5; round++ {
		p := mustV[*kvc.Pool](t)(kvc.NewPool(smallConfig()))
		var wg sync.WaitGroup
		var closedSeen atomic.Int64
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for i := 0; i < 2000; i++ {
					seq := uint64(g*100000 + i)
					_, err := p.Alloc(seq, span(0, 5), nil)
					if err == nil {
						err = p.Free(seq)
					}
					switch {
					case err == nil, errors.Is(err, kvc.ErrOutOfBlocks):
					case errors.Is(err, kvc.ErrClosed):
						closedSeen.Add(1)
						return
					default:
						t.Errorf("unexpected error: %v", err)
						return
					}
				}
			}(g)
		}
		time.Sleep(time.Millisecond)
		must(t, p.Close())
		wg.Wait()
		must(t, p.Close())
		if _, err := p.Stats(); !errors.Is(err, kvc.ErrClosed) {
			t.Fatalf("Stats after Close: %v", err)
		}
	}
}

// Each goroutine's error carries the message of its own failing call, although libkvc keeps the
// message per OS thread and goroutines move between threads (the binding pins them per call).
func TestErrorMessagePerGoroutine(t *testing.T) {
	p := newPool(t, smallConfig())
	var wg sync.WaitGroup
	problems := make(chan string, 64)
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func(missing uint64) {
			defer wg.Done()
			for i := 0; i < 300; i++ {
				err := p.Free(missing)
				var e *kvc.Error
				if !errors.As(err, &e) || !strings.Contains(e.Message, strconv.FormatUint(missing, 10)) {
					select {
					case problems <- fmt.Sprintf("goroutine for seq %d got %v", missing, err):
					default:
					}
					return
				}
				if i%50 == 0 {
					runtime.Gosched()
				}
			}
		}(uint64(1000 + g))
	}
	wg.Wait()
	close(problems)
	for p := range problems {
		t.Error(p)
	}
}

// Objects dropped without Close are released by their finalizers without crashing, batches
// after or before their pool.
func TestFinalizersRun(t *testing.T) {
	for i := 0; i < 20; i++ {
		p := mustV[*kvc.Pool](t)(kvc.NewPool(cpuConfig()))
		mustV[int64](t)(p.Alloc(1, span(0, 5), nil))
		b := mustV[*kvc.Batch](t)(p.NewBatch(1, 8, 4))
		must(t, b.Build([]uint64{1}, []int64{5}))
		k := mustV[*kvc.Keys](t)(kvc.NewKeys())
		must(t, k.SetLoRA(uint64(i)))
	}
	for i := 0; i < 5; i++ {
		runtime.GC()
	}
}
