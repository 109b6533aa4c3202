package kvc

import (
	"runtime"
	"sync"

	"kvc.dev/kvc/internal/raw"
)

// XferAvailable reports whether KV transfer works here: UCX (libucp.so.0) can be loaded
// (kvc_xfer_available). Without it NewXferAgent fails with ErrUnsupported; the rest of the library
// works as usual.
func XferAvailable() bool {
	var a [1]int32
	if err := callC("XferAvailable", func() raw.Enum_SS_kvc_status { return raw.Kvc_xfer_available(a[:]) }); err != nil {
		return false
	}
	return a[0] != 0
}

// MaxXferIdentityLen is the longest model identity an XferConfig takes, in bytes.
const MaxXferIdentityLen = 1024

// XferConfig configures a transfer agent (kvc_xfer_config). Zero values take the defaults.
type XferConfig struct {
	ModelIdentity string // what computed the KV (model@revision, dtype, TP rank): both ends must agree
	Transports    string // UCX_TLS syntax ("tcp", "sm,self"); "" = UCX's choice
	NetDevices    string // UCX_NET_DEVICES ("lo", "eth0"); "" = UCX's choice
	LeaseMs       int64  // default lease of an export (0 = 30000)
	TimeoutMs     int64  // an import fails with XferFailTimeout after this (0 = 30000)
}

// XferFailure says why a transfer failed (kvc_xfer_failure).
type XferFailure int32

const (
	XferOK             XferFailure = 0
	XferFailDescriptor XferFailure = 1 // truncated, damaged, malformed or another version
	XferFailLayout     XferFailure = 2 // block size, shape, dtype or model identity differ
	XferFailHash       XferFailure = 3 // the hash chain is not that of the tokens under these keys
	XferFailPoolFull   XferFailure = 4 // the importing pool cannot take the blocks now
	XferFailPeer       XferFailure = 5 // the exporter is unreachable or went away
	XferFailTimeout    XferFailure = 6
	XferFailLease      XferFailure = 7 // the exporter no longer held the blocks
	XferFailCancelled  XferFailure = 8 // the agent was closed first
	XferFailDevice     XferFailure = 9 // a CUDA pool: a device copy of the import failed
)

// XferOp identifies an import (for Done / Wait).
type XferOp uint64

// XferAgent moves cached prefixes between pools in different processes or machines over UCX
// (kvc_xfer_agent): one per pool and process. Safe for concurrent use. Close it before its pool
// (Pool.Close closes the pool's agents first).
type XferAgent struct {
	mu   sync.RWMutex
	h    raw.Struct_SS_kvc_xfer_agent // nil once closed
	pool *Pool
}

// NewXferAgent creates a transfer agent for p (kvc_xfer_agent_create): the pool's storage is
// registered with UCX and a progress thread serves importers. ErrUnsupported without UCX, for a
// metadata-only or CUDA pool, or with prefix caching off.
func NewXferAgent(p *Pool, cfg XferConfig) (*XferAgent, error) {
	const op = "NewXferAgent"
	for _, s := range [][2]string{{"ModelIdentity", cfg.ModelIdentity}, {"Transports", cfg.Transports}, {"NetDevices", cfg.NetDevices}} {
		if err := nulError(op, s[0], s[1]); err != nil {
			return nil, err
		}
	}
	var out [1]uintptr
	err := p.do(op, func(h raw.Struct_SS_kvc_pool) raw.Enum_SS_kvc_status {
		return raw.Kvcgo_xfer_agent_create(h, cfg.ModelIdentity, cfg.Transports, cfg.NetDevices, cfg.LeaseMs, cfg.TimeoutMs, out[:])
	})
	if err != nil {
		return nil, err
	}
	a := &XferAgent{h: raw.SwigcptrStruct_SS_kvc_xfer_agent(out[0]), pool: p}
	p.batchMu.Lock()
	if p.agents == nil {
		p.agents = map[*XferAgent]struct{}{}
	}
	p.agents[a] = struct{}{}
	p.batchMu.Unlock()
	runtime.SetFinalizer(a, (*XferAgent).Close)
	return a, nil
}

// Close destroys the agent (kvc_xfer_agent_destroy): running imports fail with XferFailCancelled,
// every export's lease ends. Calling it again does nothing.
func (a *XferAgent) Close() error {
	a.close(true)
	return nil
}

func (a *XferAgent) close(unregister bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.h == nil {
		return
	}
	raw.Kvc_xfer_agent_destroy(a.h)
	a.h = nil
	runtime.SetFinalizer(a, nil)
	if unregister {
		a.pool.batchMu.Lock()
		delete(a.pool.agents, a)
		a.pool.batchMu.Unlock()
	}
}

func (a *XferAgent) do(op string, f func(h raw.Struct_SS_kvc_xfer_agent) raw.Enum_SS_kvc_status) error {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.h == nil {
		return closedError(op)
	}
	return callC(op, func() raw.Enum_SS_kvc_status { return f(a.h) })
}

// ExportPrompt leases the prompt's leading full blocks cached on the device (kvc_xfer_export_prompt)
// until ReleaseExport or the lease ends (leaseMs, 0 = the agent's default). Returns the export id
// and the tokens exported. ErrState when the prompt's first block is not cached.
func (a *XferAgent) ExportPrompt(tokens []int32, keys *Keys, leaseMs int64) (uint64, int64, error) {
	const op = "ExportPrompt"
	var id [1]uint64
	var n [1]int64
	err := keys.read(op, func(k raw.Struct_SS_kvc_keys) error {
		return a.do(op, func(h raw.Struct_SS_kvc_xfer_agent) raw.Enum_SS_kvc_status {
			return raw.Kvc_xfer_export_prompt(h, nonNil(tokens), int64(len(tokens)), k, leaseMs, id[:], n[:])
		})
	})
	return id[0], n[0], err
}

// ExportSeq is ExportPrompt for sequence seq's leading cached full blocks (kvc_xfer_export_seq).
func (a *XferAgent) ExportSeq(seq uint64, leaseMs int64) (uint64, int64, error) {
	var id [1]uint64
	var n [1]int64
	err := a.do("ExportSeq", func(h raw.Struct_SS_kvc_xfer_agent) raw.Enum_SS_kvc_status {
		return raw.Kvc_xfer_export_seq(h, seq, leaseMs, id[:], n[:])
	})
	return id[0], n[0], err
}

// Descriptor returns export id's serialized descriptor (kvc_xfer_export_descriptor): opaque,
// versioned bytes for the importer, moved through the caller's own channel.
func (a *XferAgent) Descriptor(id uint64) ([]byte, error) {
	const op = "Descriptor"
	var n [1]int64
	if err := a.do(op, func(h raw.Struct_SS_kvc_xfer_agent) raw.Enum_SS_kvc_status {
		return raw.Kvc_xfer_export_descriptor(h, id, nil, 0, n[:])
	}); err != nil {
		return nil, err
	}
	buf := make([]byte, n[0])
	err := a.do(op, func(h raw.Struct_SS_kvc_xfer_agent) raw.Enum_SS_kvc_status {
		return raw.Kvc_xfer_export_descriptor(h, id, buf, int64(len(buf)), n[:])
	})
	if err != nil {
		return nil, err
	}
	return buf[:n[0]], nil
}

// ReleaseExport ends export id's lease now (kvc_xfer_export_release).
func (a *XferAgent) ReleaseExport(id uint64) error {
	return a.do("ReleaseExport", func(h raw.Struct_SS_kvc_xfer_agent) raw.Enum_SS_kvc_status {
		return raw.Kvc_xfer_export_release(h, id)
	})
}

// Import starts pulling the descriptor's blocks into the agent's pool for the request's keys (nil =
// none) (kvc_xfer_import); Wait for it. The descriptor, layout, identity and hash chain are checked
// first (ErrInvalidArg / ErrVersion), capacity next (ErrOutOfBlocks), nothing changed on a refusal.
func (a *XferAgent) Import(desc []byte, keys *Keys) (XferOp, error) {
	const op = "Import"
	if len(desc) == 0 {
		return 0, argError(op, ErrInvalidArg, "empty descriptor")
	}
	var id [1]uint64
	err := keys.read(op, func(k raw.Struct_SS_kvc_keys) error {
		return a.do(op, func(h raw.Struct_SS_kvc_xfer_agent) raw.Enum_SS_kvc_status {
			return raw.Kvc_xfer_import(h, desc, int64(len(desc)), k, id[:])
		})
	})
	return XferOp(id[0]), err
}

// Done reports whether import op has finished, successfully or not (kvc_xfer_op_query).
func (a *XferAgent) Done(op XferOp) (bool, error) {
	var d [1]int32
	err := a.do("Done", func(h raw.Struct_SS_kvc_xfer_agent) raw.Enum_SS_kvc_status {
		return raw.Kvc_xfer_op_query(h, uint64(op), d[:])
	})
	return d[0] != 0, err
}

// ImportResult mirrors kvc_xfer_import_result.
type ImportResult struct {
	Failure       XferFailure
	Blocks        int64 // full blocks in the descriptor
	BlocksPulled  int64
	BlocksCached  int64 // pulled blocks entered in the prefix cache
	BlocksSkipped int64 // leading blocks already cached here
	BytesPulled   int64
	CachedTokens  int64
	Seconds       float64
}

// Wait waits up to timeoutMs (< 0: no limit) for import op and retires it (kvc_xfer_op_wait). The
// result is filled whenever the import finished, also when it failed (the error then carries its
// status: ErrIO for a peer gone or a timeout, ErrState for a lease over, ...). ErrBusy when it is
// still running after timeoutMs (it is kept).
func (a *XferAgent) Wait(op XferOp, timeoutMs int64) (ImportResult, error) {
	r := raw.NewKvc_xfer_import_result()
	defer raw.DeleteKvc_xfer_import_result(r)
	err := a.do("Wait", func(h raw.Struct_SS_kvc_xfer_agent) raw.Enum_SS_kvc_status {
		return raw.Kvc_xfer_op_wait(h, uint64(op), timeoutMs, r)
	})
	return ImportResult{
		Failure:       XferFailure(r.GetFailure()),
		Blocks:        r.GetBlocks(),
		BlocksPulled:  r.GetBlocks_pulled(),
		BlocksCached:  r.GetBlocks_cached(),
		BlocksSkipped: r.GetBlocks_skipped(),
		BytesPulled:   r.GetBytes_pulled(),
		CachedTokens:  r.GetCached_tokens(),
		Seconds:       r.GetSeconds(),
	}, err
}

// XferStats mirrors kvc_xfer_stats.
type XferStats struct {
	ExportsActive, ExportsTotal, ExportsExpired, ExportBlocksHeld, LeaseChecks int64
	ImportsStarted, ImportsOK, ImportsFailed                                   int64
	BlocksPulled, BlocksCached, BlocksSkipped, BytesPulled                     int64
	ImportSeconds                                                              float64
	Failures                                                                   [10]int64 // per XferFailure (index 0 unused)
}

// Stats returns the agent's counters (kvc_xfer_get_stats).
func (a *XferAgent) Stats() (XferStats, error) {
	s := raw.NewKvc_xfer_stats()
	defer raw.DeleteKvc_xfer_stats(s)
	err := a.do("Stats", func(h raw.Struct_SS_kvc_xfer_agent) raw.Enum_SS_kvc_status { return raw.Kvc_xfer_get_stats(h, s) })
	if err != nil {
		return XferStats{}, err
	}
	out := XferStats{
		ExportsActive: s.GetExports_active(), ExportsTotal: s.GetExports_total(), ExportsExpired: s.GetExports_expired(),
		ExportBlocksHeld: s.GetExport_blocks_held(), LeaseChecks: s.GetLease_checks(),
		ImportsStarted: s.GetImports_started(), ImportsOK: s.GetImports_ok(), ImportsFailed: s.GetImports_failed(),
		BlocksPulled: s.GetBlocks_pulled(), BlocksCached: s.GetBlocks_cached(), BlocksSkipped: s.GetBlocks_skipped(),
		BytesPulled: s.GetBytes_pulled(), ImportSeconds: s.GetImport_seconds(),
	}
	for i := range out.Failures {
		out.Failures[i] = raw.Kvcgo_xfer_stats_failures(s, i)
	}
	return out, nil
}
