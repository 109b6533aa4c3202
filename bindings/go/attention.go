package kvc

import (
	"unsafe"

	"kvc.dev/kvc/internal/raw"
)

// AttentionParams mirrors kvc_attention_params. Start from DefaultAttentionParams.
type AttentionParams struct {
	NumQHeads     int32   // multiple of the pool's NumKVHeads; 0 = the pool's NumQHeads
	QDType        DType   // dtype of q and out: F32, F16 or BF16
	Scale         float32 // softmax scale; 0 = 1/sqrt(HeadDim)
	KScale        float32 // FP8 KV dequantization scales
	VScale        float32
	LogitSoftcap  float32 // > 0: softcap * tanh(logits / softcap)
	SlidingWindow int32   // > 0: attend only to the last SlidingWindow positions
	PartitionSize int32   // decode split-K partition: 0 = auto, -1 = never split
	// AlibiSlopes (host form only): nil or NumQHeads slopes. The ...At form takes an address.
	AlibiSlopes []float32
}

// DefaultAttentionParams returns the library's defaults (kvc_attention_params_default).
func DefaultAttentionParams() AttentionParams {
	c := raw.NewKvc_attention_params()
	defer raw.DeleteKvc_attention_params(c)
	_ = callC("DefaultAttentionParams", func() raw.Enum_SS_kvc_status { return raw.Kvc_attention_params_default(c) })
	return AttentionParams{
		NumQHeads:     int32(c.GetNum_q_heads()),
		QDType:        DType(c.GetQ_dtype()),
		Scale:         c.GetScale(),
		KScale:        c.GetK_scale(),
		VScale:        c.GetV_scale(),
		LogitSoftcap:  c.GetLogit_softcap(),
		SlidingWindow: int32(c.GetSliding_window()),
		PartitionSize: int32(c.GetPartition_size()),
	}
}

func (a AttentionParams) toC() raw.Kvc_attention_params {
	c := raw.NewKvc_attention_params()
	_ = raw.Kvc_attention_params_default(c)
	c.SetNum_q_heads(int(a.NumQHeads))
	c.SetQ_dtype(int(a.QDType))
	c.SetScale(a.Scale)
	c.SetK_scale(a.KScale)
	c.SetV_scale(a.VScale)
	c.SetLogit_softcap(a.LogitSoftcap)
	c.SetSliding_window(int(a.SlidingWindow))
	c.SetPartition_size(int(a.PartitionSize))
	return c
}

// LaunchAttention runs paged attention for one layer over b's last build (kvc_launch_attention),
// CPU backend: q and out are [NumTokens, heads, HeadDim] in params.QDType, as bytes. Their lengths
// are checked against the batch's last build.
func (p *Pool) LaunchAttention(b *Batch, layer int32, q, out []byte, params AttentionParams) error {
	const op = "LaunchAttention"
	if err := p.hostBuffersOK(op); err != nil {
		return err
	}
	if b.pool != p {
		return argError(op, ErrState, "the batch belongs to another pool")
	}
	if params.AlibiSlopes != nil && int64(len(params.AlibiSlopes)) < int64(p.qHeads(params)) {
		return argError(op, ErrInvalidArg, "AlibiSlopes has fewer entries than query heads")
	}
	c := params.toC()
	defer raw.DeleteKvc_attention_params(c)
	// The size check and the launch happen under the batch's read lock: no Build can change the
	// token count in between.
	return b.locked(op, false, func(ph raw.Struct_SS_kvc_pool, bh raw.Struct_SS_kvc_batch) error {
		if es := params.QDType.Size(); es > 0 {
			info, err := batchInfo(op, bh)
			if err != nil {
				return err
			}
			need := info.NumTokens * int64(p.qHeads(params)) * int64(p.cfg.HeadDim) * es
			if err := checkLen(op, "q", len(q), need); err != nil {
				return err
			}
			if err := checkLen(op, "out", len(out), need); err != nil {
				return err
			}
		}
		return callC(op, func() raw.Enum_SS_kvc_status {
			if len(params.AlibiSlopes) == 0 {
				return raw.Kvc_launch_attention(ph, bh, int(layer), q, out, c, 0)
			}
			return raw.Kvcgo_launch_attention_host(ph, bh, int(layer), q, out, c, params.AlibiSlopes)
		})
	})
}

// qHeads is the number of query heads a launch with params uses.
func (p *Pool) qHeads(params AttentionParams) int32 {
	switch {
	case params.NumQHeads > 0:
		return params.NumQHeads
	case p.cfg.NumQHeads > 0:
		return p.cfg.NumQHeads
	}
	return p.cfg.NumKVHeads
}

// LaunchAttentionAt is LaunchAttention with backend-memory addresses (device memory on CUDA),
// asynchronous on stream; alibi is 0 or the address of NumQHeads slopes. params.AlibiSlopes is
// ignored.
func (p *Pool) LaunchAttentionAt(b *Batch, layer int32, q, out DevicePtr, params AttentionParams, alibi DevicePtr, stream Stream) error {
	const op = "LaunchAttentionAt"
	if b.pool != p {
		return argError(op, ErrState, "the batch belongs to another pool")
	}
	c := params.toC()
	defer raw.DeleteKvc_attention_params(c)
	return b.use(op, false, func(ph raw.Struct_SS_kvc_pool, bh raw.Struct_SS_kvc_batch) raw.Enum_SS_kvc_status {
		return raw.Kvcgo_launch_attention_addr(ph, bh, int(layer), uint64(q), uint64(out), c, uint64(alibi), uint64(stream))
	})
}

// Float32Bytes views a []float32 as bytes (no copy), for the host-buffer forms of CacheWrite and
// LaunchAttention with DTypeF32 data.
func Float32Bytes(f []float32) []byte {
	if len(f) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), len(f)*4)
}

// Uint16Bytes views a []uint16 (F16 or BF16 bit patterns) as bytes (no copy).
func Uint16Bytes(u []uint16) []byte {
	if len(u) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&u[0])), len(u)*2)
}
