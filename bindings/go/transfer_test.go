package kvc_test

import (
	"bytes"
	"testing"

	"kvc.dev/kvc"
)

func xferPool(t *testing.T) *kvc.Pool {
	cfg := cpuConfig()
	cfg.NumBlocks = 32
	return newPool(t, cfg)
}

// TestXferRoundTrip exports a prefilled prompt from one pool and imports it into another over
// UCX's TCP transport: the importer's later Alloc hits it and every imported byte equals the
// exporter's.
func TestXferRoundTrip(t *testing.T) {
	if !kvc.XferAvailable() {
		t.Skip("UCX (libucp.so.0) not available")
	}
	src, dst := xferPool(t), xferPool(t)
	cfg := kvc.XferConfig{ModelIdentity: "go-test@1", Transports: "tcp", TimeoutMs: 10000}
	ae := mustV[*kvc.XferAgent](t)(kvc.NewXferAgent(src, cfg))
	defer ae.Close()
	ai := mustV[*kvc.XferAgent](t)(kvc.NewXferAgent(dst, cfg))
	defer ai.Close()

	prompt := span(100, 117) // 4 full blocks of 4 and one token
	mustV[int64](t)(src.Alloc(1, prompt, nil))
	writeSequence(t, src, 1, 0, len(prompt))
	srcTable := mustV[[]int32](t)(src.BlockTable(1))

	id, n, err := ae.ExportSeq(1, 0)
	must(t, err)
	if n != 16 {
		t.Fatalf("exported %d tokens, want 16", n)
	}
	desc := mustV[[]byte](t)(ae.Descriptor(id))
	op := mustV[kvc.XferOp](t)(ai.Import(desc, nil))
	res, err := ai.Wait(op, -1)
	must(t, err)
	if res.Failure != kvc.XferOK || res.BlocksPulled != 4 || res.BlocksCached != 4 || res.CachedTokens != 16 {
		t.Fatalf("import result %+v", res)
	}
	_, err = ai.Done(op)
	wantStatus(t, err, kvc.ErrInvalidArg) // retired by Wait

	if cached := mustV[int64](t)(dst.Alloc(2, prompt, nil)); cached != 16 {
		t.Fatalf("importer hit %d tokens, want 16", cached)
	}
	dstTable := mustV[[]int32](t)(dst.BlockTable(2))
	si := mustV[kvc.StorageInfo](t)(src.StorageInfo())
	want := make([]byte, 4*si.BlockStride)
	got := make([]byte, 4*si.BlockStride)
	must(t, src.ReadBlocks(srcTable[:4], want))
	must(t, dst.ReadBlocks(dstTable[:4], got))
	if !bytes.Equal(want, got) {
		t.Fatal("imported bytes differ from the exporter's")
	}
	st := mustV[kvc.XferStats](t)(ai.Stats())
	if st.ImportsOK != 1 || st.BlocksPulled != 4 || st.BytesPulled != 4*si.BlockStride {
		t.Fatalf("importer stats %+v", st)
	}
	must(t, ae.ReleaseExport(id))
	wantStatus(t, ae.ReleaseExport(id), kvc.ErrInvalidArg)
}

// TestXferPoolCloseEndsAgent: closing the exporter's pool closes its agent first (a C agent must
// not outlive its pool), so its exports end and an import of its descriptor fails cleanly, nothing
// cached. An agent left alive would go on serving the freed pool's blocks.
func TestXferPoolCloseEndsAgent(t *testing.T) {
	if !kvc.XferAvailable() {
		t.Skip("UCX (libucp.so.0) not available")
	}
	dst := xferPool(t)
	cfg := kvc.XferConfig{ModelIdentity: "m", Transports: "tcp", TimeoutMs: 5000}
	ai := mustV[*kvc.XferAgent](t)(kvc.NewXferAgent(dst, cfg))
	defer ai.Close()
	src := xferPool(t)
	ae := mustV[*kvc.XferAgent](t)(kvc.NewXferAgent(src, cfg))
	prompt := span(100, 117)
	mustV[int64](t)(src.Alloc(1, prompt, nil))
	writeSequence(t, src, 1, 0, len(prompt))
	id, _, err := ae.ExportSeq(1, 0)
	must(t, err)
	desc := mustV[[]byte](t)(ae.Descriptor(id))
	src.Close()
	_, err = ae.Stats()
	wantStatus(t, err, kvc.ErrState)
	ae.Close() // a no-op now
	// Refused at the import (no endpoint to reach) or failed by its wait, per transport timing.
	op, err := ai.Import(desc, nil)
	if err == nil {
		_, err = ai.Wait(op, -1)
	}
	wantStatus(t, err, kvc.ErrIO)
	st := mustV[kvc.Stats](t)(dst.Stats())
	if st.UsedBlocks != 0 || st.CachedBlocksTotal != 0 {
		t.Fatalf("importer pool after the failed import: %+v", st)
	}
}

// TestXferRefusals: a damaged descriptor, another model identity, another salt and a full pool
// are clean refusals; nothing is cached.
func TestXferRefusals(t *testing.T) {
	if !kvc.XferAvailable() {
		t.Skip("UCX (libucp.so.0) not available")
	}
	meta := newPool(t, smallConfig())
	_, err := kvc.NewXferAgent(meta, kvc.XferConfig{})
	wantStatus(t, err, kvc.ErrUnsupported)
	_, err = kvc.NewXferAgent(xferPool(t), kvc.XferConfig{ModelIdentity: "a\x00b"})
	wantStatus(t, err, kvc.ErrInvalidArg)

	src, dst := xferPool(t), xferPool(t)
	ae := mustV[*kvc.XferAgent](t)(kvc.NewXferAgent(src, kvc.XferConfig{ModelIdentity: "m", Transports: "tcp"}))
	defer ae.Close()
	ai := mustV[*kvc.XferAgent](t)(kvc.NewXferAgent(dst, kvc.XferConfig{ModelIdentity: "m", Transports: "tcp"}))
	defer ai.Close()
	other := mustV[*kvc.XferAgent](t)(kvc.NewXferAgent(xferPool(t), kvc.XferConfig{ModelIdentity: "other", Transports: "tcp"}))
	defer other.Close()
	prompt := span(0, 12)
	mustV[int64](t)(src.Alloc(1, prompt, nil))
	writeSequence(t, src, 1, 0, 12)
	id, _, err := ae.ExportPrompt(prompt, nil, 0)
	must(t, err)
	desc := mustV[[]byte](t)(ae.Descriptor(id))

	bad := append([]byte(nil), desc...)
	bad[len(bad)/2] ^= 1
	_, err = ai.Import(bad, nil)
	wantStatus(t, err, kvc.ErrInvalidArg)
	_, err = ai.Import(desc[:len(desc)-3], nil)
	wantStatus(t, err, kvc.ErrInvalidArg)
	_, err = other.Import(desc, nil)
	wantStatus(t, err, kvc.ErrInvalidArg)
	keys := mustV[*kvc.Keys](t)(kvc.NewKeys())
	defer keys.Close()
	must(t, keys.SetSalt("tenant-b"))
	_, err = ai.Import(desc, keys)
	wantStatus(t, err, kvc.ErrInvalidArg)
	st := mustV[kvc.XferStats](t)(ai.Stats())
	if st.ImportsFailed != 3 || st.Failures[kvc.XferFailDescriptor] != 2 || st.Failures[kvc.XferFailHash] != 1 {
		t.Fatalf("importer stats %+v", st)
	}
	// Every reason has its counter, the device-copy one (kvc_xfer_stats.failures_device) included.
	if len(st.Failures) != int(kvc.XferFailDevice)+1 || st.Failures[kvc.XferFailDevice] != 0 {
		t.Fatalf("failures per reason %v", st.Failures)
	}
	s := mustV[kvc.Stats](t)(dst.Stats())
	if s.UsedBlocks != 0 || s.CachedBlocksTotal != 0 {
		t.Fatalf("a refused import left blocks behind: %+v", s)
	}
}
