package kvc

import (
	"fmt"

	"kvc.dev/kvc/internal/raw"
)

// DevicePtr is an address in backend memory (CUDA device memory) that Go never dereferences.
type DevicePtr uint64

// Stream is a cudaStream_t as an opaque integer; 0 is the default stream. Ignored on CPU.
type Stream uint64

// StorageInfo mirrors kvc_storage_info: where the KV storage is and its byte strides.
//
//	offset(block, layer, kv, head, token, d) = block*BlockStride + layer*LayerStride + kv*KVStride
//	                                         + head*HeadStride + token*TokenStride + d*ElemBytes
type StorageInfo struct {
	Backend     Backend
	KVDType     DType
	ElemBytes   int32
	Device      int32 // CUDA ordinal, -1 on CPU
	BaseAddress DevicePtr
	TotalBytes  int64
	BlockStride int64
	LayerStride int64
	KVStride    int64
	HeadStride  int64
	TokenStride int64
}

// StorageInfo describes the pool's KV storage (kvc_storage_get_info); ErrState for a
// metadata-only pool.
func (p *Pool) StorageInfo() (StorageInfo, error) {
	s := raw.NewKvc_storage_info()
	defer raw.DeleteKvc_storage_info(s)
	if err := p.do("StorageInfo", func(h raw.Struct_SS_kvc_pool) raw.Enum_SS_kvc_status { return raw.Kvc_storage_get_info(h, s) }); err != nil {
		return StorageInfo{}, err
	}
	return StorageInfo{
		Backend:     Backend(s.GetBackend()),
		KVDType:     DType(s.GetKv_dtype()),
		ElemBytes:   int32(s.GetElem_bytes()),
		Device:      int32(s.GetDevice()),
		BaseAddress: DevicePtr(s.GetBase_address()),
		TotalBytes:  s.GetTotal_bytes(),
		BlockStride: s.GetBlock_stride(),
		LayerStride: s.GetLayer_stride(),
		KVStride:    s.GetKv_stride(),
		HeadStride:  s.GetHead_stride(),
		TokenStride: s.GetToken_stride(),
	}, nil
}

// hostBuffersOK refuses host slices for a pool whose storage is on a GPU (the library would
// dereference them as device pointers). Metadata-only pools pass, so the library reports ErrState.
func (p *Pool) hostBuffersOK(op string) error {
	if p.storage != nil && p.storage.Backend == BackendCUDA {
		return argError(op, ErrInvalidArg, "the pool's storage is in device memory; use the ...At form with device addresses")
	}
	return nil
}

func checkLen(op, what string, have int, need int64) error {
	if int64(have) < need {
		return argError(op, ErrBufferTooSmall, fmt.Sprintf("%s has %d bytes, the shape needs %d", what, have, need))
	}
	return nil
}

// CacheWrite writes one step's new K and V of one layer into their slots (kvc_cache_write), CPU
// backend: k and v are [len(slots), NumKVHeads, HeadDim] in src, as bytes (see Float32Bytes);
// a slot < 0 is padding. FP8 caches store value / scale.
func (p *Pool) CacheWrite(layer int32, slots []int64, k, v []byte, src DType, kScale, vScale float32) error {
	const op = "CacheWrite"
	if err := p.hostBuffersOK(op); err != nil {
		return err
	}
	if es := src.Size(); es > 0 {
		need := int64(len(slots)) * int64(p.cfg.NumKVHeads) * int64(p.cfg.HeadDim) * es
		if err := checkLen(op, "k", len(k), need); err != nil {
			return err
		}
		if err := checkLen(op, "v", len(v), need); err != nil {
			return err
		}
	}
	return p.do(op, func(h raw.Struct_SS_kvc_pool) raw.Enum_SS_kvc_status {
		return raw.Kvc_cache_write(h, int(layer), nonNil(slots), int64(len(slots)), nonNil(k), nonNil(v), int(src), kScale, vScale, 0)
	})
}

// CacheWriteAt is CacheWrite with backend-memory addresses (device memory on CUDA), ordered on
// stream. The caller vouches for the buffers' sizes.
func (p *Pool) CacheWriteAt(layer int32, slotMapping DevicePtr, numTokens int64, k, v DevicePtr, src DType, kScale, vScale float32, stream Stream) error {
	return p.do("CacheWriteAt", func(h raw.Struct_SS_kvc_pool) raw.Enum_SS_kvc_status {
		return raw.Kvcgo_cache_write_addr(h, int(layer), uint64(slotMapping), numTokens, uint64(k), uint64(v), int(src), kScale, vScale, uint64(stream))
	})
}

// CopyPending drains the pending copy-on-write pairs and copies those blocks (kvc_copy_pending),
// returning the number of pairs this call copied. On CUDA the copy is ordered on stream. Safe from
// many goroutines: when it returns, every pair queued before the call has been copied (on CUDA:
// is ordered before later work on stream), whichever goroutine's call drained it.
func (p *Pool) CopyPending(stream Stream) (int64, error) {
	var n [1]int64
	err := p.do("CopyPending", func(h raw.Struct_SS_kvc_pool) raw.Enum_SS_kvc_status {
		return raw.Kvc_copy_pending(h, uintptr(stream), n[:])
	})
	return n[0], err
}

// ReadBlocks copies whole blocks from the pool storage into dst, block i at i*BlockStride
// (kvc_storage_copy_blocks to host).
func (p *Pool) ReadBlocks(blockIDs []int32, dst []byte) error {
	return p.copyBlocks("ReadBlocks", blockIDs, dst, 1)
}

// WriteBlocks copies whole blocks from src (block i at i*BlockStride) into the pool storage
// (kvc_storage_copy_blocks from host).
func (p *Pool) WriteBlocks(blockIDs []int32, src []byte) error {
	return p.copyBlocks("WriteBlocks", blockIDs, src, 0)
}

func (p *Pool) copyBlocks(op string, blockIDs []int32, host []byte, toHost int) error {
	if p.storage != nil {
		if err := checkLen(op, "host buffer", len(host), int64(len(blockIDs))*p.storage.BlockStride); err != nil {
			return err
		}
	}
	return p.do(op, func(h raw.Struct_SS_kvc_pool) raw.Enum_SS_kvc_status {
		return raw.Kvc_storage_copy_blocks(h, nonNil(blockIDs), int64(len(blockIDs)), nonNil(host), toHost)
	})
}
