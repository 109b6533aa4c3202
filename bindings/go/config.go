package kvc

import "kvc.dev/kvc/internal/raw"

// DType is a kvc_dtype: the element type of the KV cache or of kernel inputs.
type DType int32

const (
	DTypeF32     DType = 0
	DTypeF16     DType = 1
	DTypeBF16    DType = 2
	DTypeFP8E4M3 DType = 3 // KV cache only
)

// Size is the element size in bytes, 0 for an unknown dtype.
func (d DType) Size() int64 {
	switch d {
	case DTypeF32:
		return 4
	case DTypeF16, DTypeBF16:
		return 2
	case DTypeFP8E4M3:
		return 1
	}
	return 0
}

// Backend is a kvc_backend: where the pool keeps its KV storage.
type Backend int32

const (
	BackendNone Backend = 0 // metadata only: block tables, no KV storage
	BackendCPU  Backend = 1
	BackendCUDA Backend = 2
	BackendAuto Backend = 3 // CUDA if a usable device exists, else CPU
)

// PoolConfig mirrors kvc_pool_config. Start from DefaultPoolConfig so that every field has the
// library's default.
type PoolConfig struct {
	BlockSize            int32   // tokens per block
	NumLayers            int32   // model layers
	NumKVHeads           int32   // KV heads
	NumQHeads            int32   // query heads (multiple of NumKVHeads); 0 = NumKVHeads
	HeadDim              int32   // head dimension
	KVDType              DType   // dtype of the KV cache
	NumBlocks            int64   // blocks in the pool; 0 = derive from MemoryBudgetBytes
	MemoryBudgetBytes    int64   // used when NumBlocks == 0
	MemoryUtilization    float64 // fraction of the budget used for KV, (0,1]
	Watermark            float64 // fraction of blocks CanAlloc keeps free, [0,1)
	MaxSeqLen            int64   // longest sequence in tokens; 0 = unlimited
	PrefixCaching        bool
	Backend              Backend
	Device               int32   // CUDA device ordinal
	EventCapacity        int32   // KV event ring size; 0 disables events
	GPUMemoryUtilization float64 // CUDA: size from this fraction of free device memory when > 0
}

// DefaultPoolConfig returns the library's defaults (kvc_pool_config_default).
func DefaultPoolConfig() PoolConfig {
	c := raw.NewKvc_pool_config()
	defer raw.DeleteKvc_pool_config(c)
	// Only fails for a NULL argument, which cannot happen here.
	_ = callC("DefaultPoolConfig", func() raw.Enum_SS_kvc_status { return raw.Kvc_pool_config_default(c) })
	return configFromC(c)
}

// BytesPerBlock is the size of one block across all layers (kvc_bytes_per_block).
func (cfg PoolConfig) BytesPerBlock() (int64, error) {
	c := cfg.toC()
	defer raw.DeleteKvc_pool_config(c)
	var out [1]int64
	err := callC("BytesPerBlock", func() raw.Enum_SS_kvc_status { return raw.Kvc_bytes_per_block(c, out[:]) })
	return out[0], err
}

// BlocksForBudget is the number of blocks that fit in budgetBytes at the given utilization
// (kvc_blocks_for_budget).
func (cfg PoolConfig) BlocksForBudget(budgetBytes int64, utilization float64) (int64, error) {
	c := cfg.toC()
	defer raw.DeleteKvc_pool_config(c)
	var out [1]int64
	err := callC("BlocksForBudget", func() raw.Enum_SS_kvc_status {
		return raw.Kvc_blocks_for_budget(c, budgetBytes, utilization, out[:])
	})
	return out[0], err
}

// toC returns a C kvc_pool_config (struct_size set by the library's defaults) to delete after use.
func (cfg PoolConfig) toC() raw.Kvc_pool_config {
	c := raw.NewKvc_pool_config()
	_ = raw.Kvc_pool_config_default(c)
	c.SetBlock_size(int(cfg.BlockSize))
	c.SetNum_layers(int(cfg.NumLayers))
	c.SetNum_kv_heads(int(cfg.NumKVHeads))
	c.SetNum_q_heads(int(cfg.NumQHeads))
	c.SetHead_dim(int(cfg.HeadDim))
	c.SetKv_dtype(int(cfg.KVDType))
	c.SetNum_blocks(cfg.NumBlocks)
	c.SetMemory_budget_bytes(cfg.MemoryBudgetBytes)
	c.SetMemory_utilization(cfg.MemoryUtilization)
	c.SetWatermark(cfg.Watermark)
	c.SetMax_seq_len(cfg.MaxSeqLen)
	c.SetPrefix_caching(boolToInt(cfg.PrefixCaching))
	c.SetBackend(int(cfg.Backend))
	c.SetDevice(int(cfg.Device))
	c.SetEvent_capacity(int(cfg.EventCapacity))
	c.SetGpu_memory_utilization(cfg.GPUMemoryUtilization)
	return c
}

func configFromC(c raw.Kvc_pool_config) PoolConfig {
	return PoolConfig{
		BlockSize:            int32(c.GetBlock_size()),
		NumLayers:            int32(c.GetNum_layers()),
		NumKVHeads:           int32(c.GetNum_kv_heads()),
		NumQHeads:            int32(c.GetNum_q_heads()),
		HeadDim:              int32(c.GetHead_dim()),
		KVDType:              DType(c.GetKv_dtype()),
		NumBlocks:            c.GetNum_blocks(),
		MemoryBudgetBytes:    c.GetMemory_budget_bytes(),
		MemoryUtilization:    c.GetMemory_utilization(),
		Watermark:            c.GetWatermark(),
		MaxSeqLen:            c.GetMax_seq_len(),
		PrefixCaching:        c.GetPrefix_caching() != 0,
		Backend:              Backend(c.GetBackend()),
		Device:               int32(c.GetDevice()),
		EventCapacity:        int32(c.GetEvent_capacity()),
		GPUMemoryUtilization: c.GetGpu_memory_utilization(),
	}
}

func boolToInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
