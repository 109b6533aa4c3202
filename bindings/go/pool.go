package kvc

import (
	"runtime"
	"sync"

	"kvc.dev/kvc/internal/raw"
)

// Pool is a libkvc block pool (kvc_pool): sequences, their block tables, the prefix cache and, for
// the CPU and CUDA backends, the KV storage. Safe for concurrent use by many goroutines.
type Pool struct {
	// mu guards h: every call holds it for reading, Close for writing, so a handle is never
	// destroyed under a call in flight.
	mu sync.RWMutex
	h  raw.Struct_SS_kvc_pool // nil once closed

	cfg     PoolConfig   // resolved configuration (NumBlocks filled in)
	storage *StorageInfo // nil for a metadata-only pool

	batchMu sync.Mutex
	batches map[*batchState]struct{} // open batches, destroyed before the pool
	agents  map[*XferAgent]struct{}  // open transfer agents, destroyed before the pool
}

// NewPool creates a pool (kvc_pool_create). Close it when done.
func NewPool(cfg PoolConfig) (*Pool, error) {
	c := cfg.toC()
	defer raw.DeleteKvc_pool_config(c)
	var out [1]uintptr
	if err := callC("NewPool", func() raw.Enum_SS_kvc_status { return raw.Kvc_pool_create(c, out[:]) }); err != nil {
		return nil, err
	}
	return adoptPool(out[0])
}

// adoptPool takes ownership of a pool the library just created: reads its resolved configuration
// and storage, and sets the finalizer.
func adoptPool(h uintptr) (*Pool, error) {
	p := &Pool{h: raw.SwigcptrStruct_SS_kvc_pool(h), batches: map[*batchState]struct{}{}}
	resolved, err := p.Config()
	if err != nil {
		p.Close()
		return nil, err
	}
	p.cfg = resolved
	if info, err := p.StorageInfo(); err == nil {
		p.storage = &info
	}
	runtime.SetFinalizer(p, (*Pool).Close)
	return p, nil
}

// Close destroys the pool, its sequences, its storage and its open batches (kvc_pool_destroy). It
// waits for calls in flight on other goroutines. Calling it again does nothing.
func (p *Pool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.h == nil {
		return nil
	}
	p.batchMu.Lock()
	for st := range p.batches {
		st.destroy()
	}
	p.batches = nil
	agents := p.agents
	p.agents = nil
	p.batchMu.Unlock()
	for a := range agents {
		a.close(false)
	}
	raw.Kvc_pool_destroy(p.h)
	p.h = nil
	runtime.SetFinalizer(p, nil)
	return nil
}

// do runs one C call on the open pool's handle.
func (p *Pool) do(op string, f func(h raw.Struct_SS_kvc_pool) raw.Enum_SS_kvc_status) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.h == nil {
		return closedError(op)
	}
	return callC(op, func() raw.Enum_SS_kvc_status { return f(p.h) })
}

// doKeys is do for calls that also read a Keys (nil = no keys).
func (p *Pool) doKeys(op string, keys *Keys, f func(h raw.Struct_SS_kvc_pool, k raw.Struct_SS_kvc_keys) raw.Enum_SS_kvc_status) error {
	return keys.read(op, func(k raw.Struct_SS_kvc_keys) error {
		return p.do(op, func(h raw.Struct_SS_kvc_pool) raw.Enum_SS_kvc_status { return f(h, k) })
	})
}

// Config returns the resolved configuration, NumBlocks filled in (kvc_pool_get_config).
func (p *Pool) Config() (PoolConfig, error) {
	c := raw.NewKvc_pool_config()
	defer raw.DeleteKvc_pool_config(c)
	err := p.do("Config", func(h raw.Struct_SS_kvc_pool) raw.Enum_SS_kvc_status { return raw.Kvc_pool_get_config(h, c) })
	if err != nil {
		return PoolConfig{}, err
	}
	return configFromC(c), nil
}

// SetSlidingWindow turns on sliding-window attention for every sequence of the pool
// (kvc_pool_set_sliding_window): from then on Append releases a sequence's blocks that lie wholly
// before the window of the first token its previous call added (for the first Append after Alloc:
// the prompt's first uncached position), so a step may append its pending token and its drafts in
// two calls before one launch; their BlockTable entries read -1. 0 turns it off. Allowed only
// while the pool has no sequences (ErrState otherwise); window < 0 is ErrInvalidArg.
func (p *Pool) SetSlidingWindow(window int32) error {
	return p.do("SetSlidingWindow", func(h raw.Struct_SS_kvc_pool) raw.Enum_SS_kvc_status {
		return raw.Kvc_pool_set_sliding_window(h, int(window))
	})
}

// SlidingWindow returns the pool's sliding window, 0 when off (kvc_pool_get_sliding_window).
func (p *Pool) SlidingWindow() (int32, error) {
	var w [1]int32
	err := p.do("SlidingWindow", func(h raw.Struct_SS_kvc_pool) raw.Enum_SS_kvc_status {
		return raw.Kvc_pool_get_sliding_window(h, w[:])
	})
	return w[0], err
}

// Check runs the library's invariant checker (kvc_pool_check); an error with status ErrInternal
// names the first violation.
func (p *Pool) Check() error {
	return p.do("Check", raw.Kvc_pool_check)
}

// Stats mirrors kvc_stats: a snapshot of the pool's counters.
type Stats struct {
	TotalBlocks       int64
	FreeBlocks        int64 // refcount 0, including cached-but-unused blocks
	UsedBlocks        int64 // refcount > 0
	CachedFreeBlocks  int64 // refcount 0 and still in the prefix cache
	PinnedBlocks      int64
	NumSeqs           int64
	Utilization       float64
	Allocs            int64
	Frees             int64
	Forks             int64
	Appends           int64
	BlocksAllocated   int64
	BlocksFreed       int64
	CowCopies         int64
	PendingCopies     int64
	PrefixQueryTokens int64
	PrefixHitTokens   int64
	PrefixHitRate     float64
	Evictions         int64
	VerifyMisses      int64
	EventsDropped     int64
	CachedBlocksTotal int64 // blocks (every copy of a hash) in the prefix cache, held or free: what an event-fed router holds
}

// Stats returns a snapshot of the pool's counters (kvc_pool_stats).
func (p *Pool) Stats() (Stats, error) {
	s := raw.NewKvc_stats()
	defer raw.DeleteKvc_stats(s)
	if err := p.do("Stats", func(h raw.Struct_SS_kvc_pool) raw.Enum_SS_kvc_status { return raw.Kvc_pool_stats(h, s) }); err != nil {
		return Stats{}, err
	}
	return Stats{
		TotalBlocks:       s.GetTotal_blocks(),
		FreeBlocks:        s.GetFree_blocks(),
		UsedBlocks:        s.GetUsed_blocks(),
		CachedFreeBlocks:  s.GetCached_free_blocks(),
		PinnedBlocks:      s.GetPinned_blocks(),
		NumSeqs:           s.GetNum_seqs(),
		Utilization:       s.GetUtilization(),
		Allocs:            s.GetAllocs(),
		Frees:             s.GetFrees(),
		Forks:             s.GetForks(),
		Appends:           s.GetAppends(),
		BlocksAllocated:   s.GetBlocks_allocated(),
		BlocksFreed:       s.GetBlocks_freed(),
		CowCopies:         s.GetCow_copies(),
		PendingCopies:     s.GetPending_copies(),
		PrefixQueryTokens: s.GetPrefix_query_tokens(),
		PrefixHitTokens:   s.GetPrefix_hit_tokens(),
		PrefixHitRate:     s.GetPrefix_hit_rate(),
		Evictions:         s.GetEvictions(),
		VerifyMisses:      s.GetVerify_misses(),
		EventsDropped:     s.GetEvents_dropped(),
		CachedBlocksTotal: s.GetCached_blocks_total(),
	}, nil
}
