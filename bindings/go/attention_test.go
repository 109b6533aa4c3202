package kvc_test

import (
	"math"
	"runtime"
	"testing"

	"kvc.dev/kvc"
)

// refAttention computes causal GQA attention in float64 for one sequence whose K/V rows are
// kvValue(...) at positions 0..seqLen-1: query row j (of qLen) sits at position seqLen-qLen+j.
func refAttention(q []float32, seqLen, qLen, qHeads, kvHeads, dim int, p kvc.AttentionParams) []float32 {
	out := make([]float32, qLen*qHeads*dim)
	scale := float64(p.Scale)
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(dim))
	}
	for j := 0; j < qLen; j++ {
		qpos := seqLen - qLen + j
		for h := 0; h < qHeads; h++ {
			kvh := h / (qHeads / kvHeads)
			first := 0
			if p.SlidingWindow > 0 && qpos-int(p.SlidingWindow)+1 > 0 {
				first = qpos - int(p.SlidingWindow) + 1
			}
			logits := make([]float64, qpos+1)
			maxLogit := math.Inf(-1)
			for pos := first; pos <= qpos; pos++ {
				var dot float64
				for d := 0; d < dim; d++ {
					dot += float64(q[(j*qHeads+h)*dim+d]) * float64(kvValue(0, pos, kvh, d))
				}
				l := dot * scale
				if p.LogitSoftcap > 0 {
					c := float64(p.LogitSoftcap)
					l = c * math.Tanh(l/c)
				}
				logits[pos] = l
				maxLogit = math.Max(maxLogit, l)
			}
			var sum float64
			acc := make([]float64, dim)
			for pos := first; pos <= qpos; pos++ {
				w := math.Exp(logits[pos] - maxLogit)
				sum += w
				for d := 0; d < dim; d++ {
					acc[d] += w * float64(kvValue(1, pos, kvh, d))
				}
			}
			for d := 0; d < dim; d++ {
				out[(j*qHeads+h)*dim+d] = float32(acc[d] / sum)
			}
		}
	}
	return out
}

func queryRows(n, heads, dim int) []float32 {
	q := make([]float32, n*heads*dim)
	for i := range q {
		q[i] = float32(math.Sin(float64(i)*0.7)) * 0.05
	}
	return q
}

func assertClose(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		tol := 1e-4 * math.Max(1, math.Abs(float64(want[i])))
		if math.Abs(float64(got[i]-want[i])) > tol {
			t.Fatalf("%s: element %d = %v, want %v", what, i, got[i], want[i])
		}
	}
}

// writeSequence stores kvValue K/V rows for positions [first, first+n) of seq in every layer.
func writeSequence(t *testing.T, p *kvc.Pool, seq uint64, first, n int) {
	t.Helper()
	slots := mustV[[]int64](t)(p.SlotMapping(seq, int64(first), int64(n)))
	for layer := int32(0); layer < 2; layer++ {
		must(t, p.CacheWrite(layer, slots, kvc.Float32Bytes(tokenKV(0, first, n, 2, 8)),
			kvc.Float32Bytes(tokenKV(1, first, n, 2, 8)), kvc.DTypeF32, 1, 1))
	}
}

func TestAttentionCPU(t *testing.T) {
	p := newPool(t, cpuConfig())
	const qHeads, kvHeads, dim = 4, 2, 8
	mustV[int64](t)(p.Alloc(1, span(0, 7), nil))
	writeSequence(t, p, 1, 0, 7)
	b := mustV[*kvc.Batch](t)(p.NewBatch(2, 32, 8))
	defer b.Close()
	params := kvc.DefaultAttentionParams()
	params.QDType = kvc.DTypeF32

	// Prefill of all 7 tokens (causal).
	must(t, b.Build([]uint64{1}, []int64{7}))
	q := queryRows(7, qHeads, dim)
	out := make([]float32, len(q))
	must(t, p.LaunchAttention(b, 1, kvc.Float32Bytes(q), kvc.Float32Bytes(out), params))
	assertClose(t, "prefill", out, refAttention(q, 7, 7, qHeads, kvHeads, dim, params))

	// Decode of one new token.
	mustV[int32](t)(p.Append(1, []int32{7}, 0))
	writeSequence(t, p, 1, 7, 1)
	must(t, b.Build([]uint64{1}, []int64{1}))
	q = queryRows(1, qHeads, dim)
	out = make([]float32, len(q))
	must(t, p.LaunchAttention(b, 0, kvc.Float32Bytes(q), kvc.Float32Bytes(out), params))
	assertClose(t, "decode", out, refAttention(q, 8, 1, qHeads, kvHeads, dim, params))

	// Softcap, sliding window and an explicit scale.
	tuned := params
	tuned.Scale, tuned.LogitSoftcap, tuned.SlidingWindow = 0.5, 0.3, 3
	must(t, p.LaunchAttention(b, 0, kvc.Float32Bytes(q), kvc.Float32Bytes(out), tuned))
	assertClose(t, "softcap+window", out, refAttention(q, 8, 1, qHeads, kvHeads, dim, tuned))

	// ALiBi slopes change the result (the host slopes reach the kernel).
	plain := refAttention(q, 8, 1, qHeads, kvHeads, dim, params)
	alibi := params
	alibi.AlibiSlopes = []float32{4, 4, 4, 4}
	must(t, p.LaunchAttention(b, 0, kvc.Float32Bytes(q), kvc.Float32Bytes(out), alibi))
	differs := false
	for i := range out {
		differs = differs || math.Abs(float64(out[i]-plain[i])) > 1e-3
	}
	if !differs {
		t.Fatal("ALiBi slopes had no effect")
	}
	alibi.AlibiSlopes = []float32{1}
	wantStatus(t, p.LaunchAttention(b, 0, kvc.Float32Bytes(q), kvc.Float32Bytes(out), alibi), kvc.ErrInvalidArg)

	// The address form gives the same result as the host form.
	qHeap := append([]float32(nil), q...)
	outHeap := make([]float32, len(q))
	must(t, p.LaunchAttentionAt(b, 0, addr(qHeap), addr(outHeap), params, 0, 0))
	runtime.KeepAlive(qHeap)
	runtime.KeepAlive(outHeap)
	assertClose(t, "address form", outHeap, plain)

	// Errors.
	wantStatus(t, p.LaunchAttention(b, 0, kvc.Float32Bytes(q[:4]), kvc.Float32Bytes(out), params), kvc.ErrBufferTooSmall)
	wantStatus(t, p.LaunchAttention(b, 2, kvc.Float32Bytes(q), kvc.Float32Bytes(out), params), kvc.ErrInvalidArg)
	bad := params
	bad.NumQHeads = 3 // not a multiple of the 2 KV heads
	wantStatus(t, p.LaunchAttention(b, 0, kvc.Float32Bytes(q), kvc.Float32Bytes(out), bad), kvc.ErrInvalidArg)
	fresh := mustV[*kvc.Batch](t)(p.NewBatch(1, 8, 8))
	defer fresh.Close()
	wantStatus(t, p.LaunchAttention(fresh, 0, kvc.Float32Bytes(q), kvc.Float32Bytes(out), params), kvc.ErrState)
	other := newPool(t, cpuConfig())
	wantStatus(t, other.LaunchAttention(b, 0, kvc.Float32Bytes(q), kvc.Float32Bytes(out), params), kvc.ErrState)
}
