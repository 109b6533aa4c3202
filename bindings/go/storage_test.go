package kvc_test

import (
	"bytes"
	"encoding/binary"
	"math"
	"runtime"
	"testing"
	"unsafe"

	"kvc.dev/kvc"
)

// cpuConfig is a CPU-backend pool with F32 KV: 2 layers, 2 KV heads, 4 query heads, head dim 8,
// 16 blocks of 4 tokens.
func cpuConfig() kvc.PoolConfig {
	cfg := smallConfig()
	cfg.Backend = kvc.BackendCPU
	cfg.KVDType = kvc.DTypeF32
	cfg.NumLayers = 2
	cfg.NumKVHeads = 2
	cfg.NumQHeads = 4
	cfg.HeadDim = 8
	return cfg
}

func f32At(b []byte, off int64) float32 {
	return math.Float32frombits(binary.LittleEndian.Uint32(b[off:]))
}

// addr is the address of a heap slice for the ...At forms; callers keep the slice alive with
// runtime.KeepAlive (Go's heap objects do not move).
func addr[T any](s []T) kvc.DevicePtr { return kvc.DevicePtr(uintptr(unsafe.Pointer(&s[0]))) }

func TestStorageInfo(t *testing.T) {
	p := newPool(t, cpuConfig())
	si := mustV[kvc.StorageInfo](t)(p.StorageInfo())
	tok := int64(8 * 4)
	want := kvc.StorageInfo{
		Backend: kvc.BackendCPU, KVDType: kvc.DTypeF32, ElemBytes: 4, Device: -1,
		BaseAddress: si.BaseAddress, TotalBytes: 16 * 2 * 2 * 2 * 4 * tok,
		BlockStride: 2 * 2 * 2 * 4 * tok, LayerStride: 2 * 2 * 4 * tok, KVStride: 2 * 4 * tok,
		HeadStride: 4 * tok, TokenStride: tok,
	}
	if si != want || si.BaseAddress == 0 {
		t.Fatalf("StorageInfo = %+v, want %+v", si, want)
	}
	if bpb := mustV[int64](t)(cpuConfig().BytesPerBlock()); bpb != si.BlockStride {
		t.Fatalf("BytesPerBlock %d != BlockStride %d", bpb, si.BlockStride)
	}
	meta := newPool(t, smallConfig())
	_, err := meta.StorageInfo()
	wantStatus(t, err, kvc.ErrState)
	_, err = meta.CopyPending(0)
	wantStatus(t, err, kvc.ErrState)
	wantStatus(t, meta.CacheWrite(0, []int64{0}, make([]byte, 4096), make([]byte, 4096), kvc.DTypeF32, 1, 1), kvc.ErrState)
}

func TestBlockCopies(t *testing.T) {
	p := newPool(t, cpuConfig())
	si := mustV[kvc.StorageInfo](t)(p.StorageInfo())
	pattern := make([]byte, 2*si.BlockStride)
	for i := range pattern {
		pattern[i] = byte(i*7 + 3)
	}
	must(t, p.WriteBlocks([]int32{3, 9}, pattern))
	back := make([]byte, 2*si.BlockStride)
	must(t, p.ReadBlocks([]int32{3, 9}, back))
	if !bytes.Equal(pattern, back) {
		t.Fatal("blocks read back differ from those written")
	}
	one := make([]byte, si.BlockStride)
	must(t, p.ReadBlocks([]int32{9}, one))
	if !bytes.Equal(one, pattern[si.BlockStride:]) {
		t.Fatal("block 9 read alone differs")
	}
	wantStatus(t, p.ReadBlocks([]int32{3, 9}, one), kvc.ErrBufferTooSmall)
	wantStatus(t, p.ReadBlocks([]int32{16}, one), kvc.ErrInvalidArg)
	wantStatus(t, p.WriteBlocks([]int32{-1}, one), kvc.ErrInvalidArg)
	must(t, p.ReadBlocks(nil, nil)) // zero blocks: nothing to do
}

// kvValue is the test's K (kv=0) or V (kv=1) element for a token position, head and dim.
func kvValue(kv, pos, head, d int) float32 {
	return float32(kv*1000+pos*10+head) + float32(d)/16
}

// tokenKV builds [n, heads, dim] K or V rows for positions first..first+n-1.
func tokenKV(kv, first, n, heads, dim int) []float32 {
	out := make([]float32, 0, n*heads*dim)
	for pos := first; pos < first+n; pos++ {
		for h := 0; h < heads; h++ {
			for d := 0; d < dim; d++ {
				out = append(out, kvValue(kv, pos, h, d))
			}
		}
	}
	return out
}

func TestCacheWriteAndCopyPending(t *testing.T) {
	cfg := cpuConfig()
	p := newPool(t, cfg)
	si := mustV[kvc.StorageInfo](t)(p.StorageInfo())
	mustV[int64](t)(p.Alloc(1, span(0, 6), nil)) // blocks 0, 1
	slots := mustV[[]int64](t)(p.SlotMapping(1, 0, 6))
	k := tokenKV(0, 0, 6, 2, 8)
	v := tokenKV(1, 0, 6, 2, 8)
	// A padding slot (-1) is skipped: its row is garbage that must not land anywhere.
	padSlots := append(append([]int64{}, slots[:3]...), -1)
	padSlots = append(padSlots, slots[3:]...)
	garbage := make([]float32, 2*8)
	for i := range garbage {
		garbage[i] = -777
	}
	padK := append(append(append([]float32{}, k[:3*16]...), garbage...), k[3*16:]...)
	padV := append(append(append([]float32{}, v[:3*16]...), garbage...), v[3*16:]...)
	must(t, p.CacheWrite(1, padSlots, kvc.Float32Bytes(padK), kvc.Float32Bytes(padV), kvc.DTypeF32, 1, 1))

	table := mustV[[]int32](t)(p.BlockTable(1))
	host := make([]byte, int64(len(table))*si.BlockStride)
	must(t, p.ReadBlocks(table, host))
	for pos := 0; pos < 6; pos++ {
		for kv := 0; kv < 2; kv++ {
			for h := 0; h < 2; h++ {
				for d := 0; d < 8; d++ {
					off := int64(pos/4)*si.BlockStride + 1*si.LayerStride + int64(kv)*si.KVStride +
						int64(h)*si.HeadStride + int64(pos%4)*si.TokenStride + int64(d)*4
					if got, want := f32At(host, off), kvValue(kv, pos, h, d); got != want {
						t.Fatalf("pos %d kv %d head %d dim %d: %v, want %v", pos, kv, h, d, got, want)
					}
				}
			}
		}
	}
	for off := int64(0); off+4 <= int64(len(host)); off += 4 {
		if f32At(host, off) == -777 {
			t.Fatalf("padding row written at byte %d", off)
		}
	}

	// Errors: short buffers (caught by the binding), bad layer, bad scale.
	wantStatus(t, p.CacheWrite(0, slots, kvc.Float32Bytes(k[:10]), kvc.Float32Bytes(v), kvc.DTypeF32, 1, 1), kvc.ErrBufferTooSmall)
	wantStatus(t, p.CacheWrite(2, slots, kvc.Float32Bytes(k), kvc.Float32Bytes(v), kvc.DTypeF32, 1, 1), kvc.ErrInvalidArg)
	wantStatus(t, p.CacheWrite(0, slots, kvc.Float32Bytes(k), kvc.Float32Bytes(v), kvc.DTypeF32, 0, 1), kvc.ErrInvalidArg)
	wantStatus(t, p.CacheWrite(0, []int64{16 * 4}, kvc.Float32Bytes(k), kvc.Float32Bytes(v), kvc.DTypeF32, 1, 1), kvc.ErrInvalidArg)

	// The address form writes the same way (layer 0 here).
	slotsHeap := make([]int64, len(slots))
	copy(slotsHeap, slots)
	must(t, p.CacheWriteAt(0, addr(slotsHeap), int64(len(slotsHeap)), addr(k), addr(v), kvc.DTypeF32, 1, 1, 0))
	runtime.KeepAlive(slotsHeap)
	runtime.KeepAlive(k)
	runtime.KeepAlive(v)
	must(t, p.ReadBlocks(table, host))
	if got := f32At(host, si.BlockStride+0*si.LayerStride+si.KVStride+1*si.HeadStride+1*si.TokenStride+3*4); got != kvValue(1, 5, 1, 3) {
		t.Fatalf("CacheWriteAt: V(pos 5, head 1, dim 3) = %v", got)
	}

	// Copy-on-write: fork, the child writes into the shared partial block -> a pair; CopyPending
	// copies the whole block.
	must(t, p.Fork(1, 2))
	mustV[int32](t)(p.Append(2, []int32{6}, 0))
	if n := mustV[int64](t)(p.PendingCopyCount()); n != 1 {
		t.Fatalf("pending copies = %d", n)
	}
	if n := mustV[int64](t)(p.CopyPending(0)); n != 1 {
		t.Fatalf("CopyPending copied %d pairs", n)
	}
	if n := mustV[int64](t)(p.PendingCopyCount()); n != 0 {
		t.Fatalf("pending copies after CopyPending = %d", n)
	}
	childTable := mustV[[]int32](t)(p.BlockTable(2))
	a := make([]byte, si.BlockStride)
	b := make([]byte, si.BlockStride)
	must(t, p.ReadBlocks(table[1:2], a))
	must(t, p.ReadBlocks(childTable[1:2], b))
	if childTable[1] == table[1] || !bytes.Equal(a, b) {
		t.Fatalf("COW copy: parent block %d, child block %d, equal=%v", table[1], childTable[1], bytes.Equal(a, b))
	}

	// A storage access completes the pairs queued before it: reading the child's block copies it.
	must(t, p.Fork(1, 3))
	mustV[int32](t)(p.Append(3, []int32{7}, 0))
	third := mustV[[]int32](t)(p.BlockTable(3))
	must(t, p.ReadBlocks(third[1:2], b))
	if n := mustV[int64](t)(p.PendingCopyCount()); n != 0 || !bytes.Equal(a, b) {
		t.Fatalf("read before CopyPending: %d pairs left, copy equal=%v", n, bytes.Equal(a, b))
	}
	if n := mustV[int64](t)(p.CopyPending(0)); n != 0 {
		t.Fatalf("CopyPending after the read copied %d pairs", n)
	}
}
