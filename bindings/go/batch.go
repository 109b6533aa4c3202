package kvc

import (
	"runtime"
	"sync"

	"kvc.dev/kvc/internal/raw"
)

// Batch is a kvc_batch: the metadata of one forward step (block tables, sequence lengths, slot
// mapping, CSR indices) in buffers allocated once. Closing its Pool closes it too.
type Batch struct {
	pool *Pool
	st   *batchState
}

// batchState is what the Pool tracks to destroy open batches first; it holds no reference back to
// the Pool or Batch, so an unreachable Batch's finalizer can run.
type batchState struct {
	// mu serialises Build (a writer) against readers; h itself is only touched while holding the
	// pool's lock (read, or write in Pool.Close).
	mu sync.RWMutex
	h  raw.Struct_SS_kvc_batch // nil once closed
}

func (st *batchState) destroy() {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.h != nil {
		raw.Kvc_batch_destroy(st.h)
		st.h = nil
	}
}

// NewBatch creates a batch for this pool with fixed capacities (kvc_batch_create).
func (p *Pool) NewBatch(maxSeqs int32, maxTokens int64, maxBlocksPerSeq int32) (*Batch, error) {
	var out [1]uintptr
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.h == nil {
		return nil, closedError("NewBatch")
	}
	err := callC("NewBatch", func() raw.Enum_SS_kvc_status {
		return raw.Kvc_batch_create(p.h, int(maxSeqs), maxTokens, int(maxBlocksPerSeq), out[:])
	})
	if err != nil {
		return nil, err
	}
	st := &batchState{h: raw.SwigcptrStruct_SS_kvc_batch(out[0])}
	p.batchMu.Lock()
	p.batches[st] = struct{}{}
	p.batchMu.Unlock()
	b := &Batch{pool: p, st: st}
	runtime.SetFinalizer(b, (*Batch).Close)
	return b, nil
}

// Close destroys the batch (kvc_batch_destroy). Calling it again, or after the pool was closed,
// does nothing.
func (b *Batch) Close() error {
	p := b.pool
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.h == nil {
		return nil // the pool's Close destroyed it
	}
	b.st.destroy()
	p.batchMu.Lock()
	delete(p.batches, b.st)
	p.batchMu.Unlock()
	runtime.SetFinalizer(b, nil)
	return nil
}

// locked runs f with the pool and batch handles, holding the batch exclusively when write is set
// (Build) and shared otherwise, so a check made inside f still holds for the C call f makes.
func (b *Batch) locked(op string, write bool, f func(ph raw.Struct_SS_kvc_pool, bh raw.Struct_SS_kvc_batch) error) error {
	p := b.pool
	p.mu.RLock()
	defer p.mu.RUnlock()
	if write {
		b.st.mu.Lock()
		defer b.st.mu.Unlock()
	} else {
		b.st.mu.RLock()
		defer b.st.mu.RUnlock()
	}
	if p.h == nil || b.st.h == nil {
		return closedError(op)
	}
	return f(p.h, b.st.h)
}

// use is locked for a single C call.
func (b *Batch) use(op string, write bool, f func(ph raw.Struct_SS_kvc_pool, bh raw.Struct_SS_kvc_batch) raw.Enum_SS_kvc_status) error {
	return b.locked(op, write, func(ph raw.Struct_SS_kvc_pool, bh raw.Struct_SS_kvc_batch) error {
		return callC(op, func() raw.Enum_SS_kvc_status { return f(ph, bh) })
	})
}

// Build fills the step's metadata for sequences seqIDs with query lengths qLens (1 for decode)
// (kvc_batch_build). On failure the previous step's metadata stays intact.
func (b *Batch) Build(seqIDs []uint64, qLens []int64) error {
	if len(seqIDs) != len(qLens) {
		return argError("Batch.Build", ErrInvalidArg, "seqIDs and qLens differ in length")
	}
	return b.use("Batch.Build", true, func(_ raw.Struct_SS_kvc_pool, bh raw.Struct_SS_kvc_batch) raw.Enum_SS_kvc_status {
		return raw.Kvc_batch_build(bh, nonNil(seqIDs), nonNil(qLens), len(seqIDs))
	})
}

// SetStream sets the CUDA stream later Builds upload on (kvc_batch_set_stream); 0 is the default
// stream, the initial setting. A Build enqueues its upload there and returns without waiting for
// the stream: later work on the same stream sees the new arrays, work on another stream must be
// ordered after it by the caller (kvc_batch_set_stream in kvc.h). The caller keeps the stream
// alive while Builds use it and never builds while it is capturing a CUDA graph. Ignored on the
// CPU backend.
func (b *Batch) SetStream(stream Stream) error {
	return b.use("Batch.SetStream", true, func(_ raw.Struct_SS_kvc_pool, bh raw.Struct_SS_kvc_batch) raw.Enum_SS_kvc_status {
		return raw.Kvc_batch_set_stream(bh, uintptr(stream))
	})
}

// BatchInfo mirrors kvc_batch_info: sizes of the last build and the backend-memory addresses of its
// arrays (valid until Close).
type BatchInfo struct {
	NumSeqs         int32
	NumTokens       int64
	MaxBlocksPerSeq int32
	MaxQLen         int32
	MaxSeqLen       int64
	NumIndices      int64
	IsDecode        bool
	RowsUploaded    int32
	BlockTables     DevicePtr // int32 [NumSeqs][MaxBlocksPerSeq]
	SeqLens         DevicePtr // int32 [NumSeqs]
	QueryStartLoc   DevicePtr // int32 [NumSeqs+1]
	SlotMapping     DevicePtr // int64 [NumTokens]
	KVIndptr        DevicePtr // int32 [NumSeqs+1]
	KVIndices       DevicePtr // int32 [NumIndices]
	KVLastPageLen   DevicePtr // int32 [NumSeqs]
}

// Info returns the last build's sizes and array addresses (kvc_batch_get_info); ErrState before
// the first Build.
func (b *Batch) Info() (info BatchInfo, err error) {
	err = b.locked("Batch.Info", false, func(_ raw.Struct_SS_kvc_pool, bh raw.Struct_SS_kvc_batch) error {
		info, err = batchInfo("Batch.Info", bh)
		return err
	})
	return info, err
}

func batchInfo(op string, bh raw.Struct_SS_kvc_batch) (BatchInfo, error) {
	i := raw.NewKvc_batch_info()
	defer raw.DeleteKvc_batch_info(i)
	if err := callC(op, func() raw.Enum_SS_kvc_status { return raw.Kvc_batch_get_info(bh, i) }); err != nil {
		return BatchInfo{}, err
	}
	return BatchInfo{
		NumSeqs:         int32(i.GetNum_seqs()),
		NumTokens:       i.GetNum_tokens(),
		MaxBlocksPerSeq: int32(i.GetMax_blocks_per_seq()),
		MaxQLen:         int32(i.GetMax_q_len()),
		MaxSeqLen:       i.GetMax_seq_len(),
		NumIndices:      i.GetNum_indices(),
		IsDecode:        i.GetIs_decode() != 0,
		RowsUploaded:    int32(i.GetRows_uploaded()),
		BlockTables:     DevicePtr(i.GetBlock_tables()),
		SeqLens:         DevicePtr(i.GetSeq_lens()),
		QueryStartLoc:   DevicePtr(i.GetQuery_start_loc()),
		SlotMapping:     DevicePtr(i.GetSlot_mapping()),
		KVIndptr:        DevicePtr(i.GetKv_indptr()),
		KVIndices:       DevicePtr(i.GetKv_indices()),
		KVLastPageLen:   DevicePtr(i.GetKv_last_page_len()),
	}, nil
}

// SlotMapping copies the last build's slot mapping to host memory (kvc_batch_copy_slot_mapping).
func (b *Batch) SlotMapping() (out []int64, err error) {
	const op = "Batch.SlotMapping"
	err = b.locked(op, false, func(_ raw.Struct_SS_kvc_pool, bh raw.Struct_SS_kvc_batch) error {
		info, err := batchInfo(op, bh)
		if err != nil {
			return err
		}
		out = make([]int64, info.NumTokens)
		return callC(op, func() raw.Enum_SS_kvc_status { return raw.Kvc_batch_copy_slot_mapping(bh, out, int64(len(out))) })
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// BlockTables copies the last build's padded block tables (NumSeqs rows of MaxBlocksPerSeq, -1
// padding) to host memory (kvc_batch_copy_block_tables).
func (b *Batch) BlockTables() (out []int32, err error) {
	const op = "Batch.BlockTables"
	err = b.locked(op, false, func(_ raw.Struct_SS_kvc_pool, bh raw.Struct_SS_kvc_batch) error {
		info, err := batchInfo(op, bh)
		if err != nil {
			return err
		}
		out = make([]int32, int64(info.NumSeqs)*int64(info.MaxBlocksPerSeq))
		return callC(op, func() raw.Enum_SS_kvc_status { return raw.Kvc_batch_copy_block_tables(bh, out, int64(len(out))) })
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
