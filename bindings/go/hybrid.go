package kvc

import (
	"kvc.dev/kvc/internal/raw"
)

// Hybrid models (kvc.h, "Hybrid models"): one pool whose layers form several KV-cache groups (full
// attention, sliding-window attention, SSM state) sharing one block pool. A sequence has one block
// table per group; Alloc, Append, Fork and Free act on all of them at once.

// GroupKind is a kvc_group_kind: the kind of a KV-cache group of a hybrid pool.
type GroupKind int32

const (
	GroupFull    GroupKind = 0 // full attention: every position's K and V
	GroupSliding GroupKind = 1 // sliding-window attention of SlidingWindow tokens
	GroupSSM     GroupKind = 2 // fixed-size per-sequence state (Mamba conv + SSM state)
)

func (k GroupKind) String() string {
	switch k {
	case GroupFull:
		return "FULL"
	case GroupSliding:
		return "SLIDING"
	case GroupSSM:
		return "SSM"
	}
	return "GroupKind(?)"
}

// MaxGroups is the most groups a hybrid pool may have (KVC_MAX_GROUPS).
const MaxGroups = 8

// GroupConfig mirrors kvc_group_config: one KV-cache group of a hybrid pool. Start from
// DefaultGroupConfig so that every field has the library's default.
type GroupConfig struct {
	Kind          GroupKind
	NumLayers     int32 // layers of this group, >= 1; CreateHybrid's layerToGroup names them
	NumKVHeads    int32 // FULL / SLIDING: KV heads, >= 1; SSM: ignored
	HeadDim       int32 // FULL / SLIDING: head dimension, >= 1; SSM: ignored
	SlidingWindow int32 // SLIDING: window in tokens, >= 1; must be 0 for the other kinds
	StateBytes    int64 // SSM: bytes of one layer's state for one sequence, >= 1; 0 otherwise
}

// DefaultGroupConfig returns the library's defaults (kvc_group_config_default): a FULL group of
// one layer, one KV head of dimension 128.
func DefaultGroupConfig() GroupConfig {
	c := raw.NewKvc_group_config()
	defer raw.DeleteKvc_group_config(c)
	raw.Kvc_group_config_default(c)
	return GroupConfig{
		Kind:          GroupKind(c.GetKind()),
		NumLayers:     int32(c.GetNum_layers()),
		NumKVHeads:    int32(c.GetNum_kv_heads()),
		HeadDim:       int32(c.GetHead_dim()),
		SlidingWindow: int32(c.GetSliding_window()),
		StateBytes:    c.GetState_bytes(),
	}
}

// GroupInfo mirrors kvc_group_info: one group of a pool as created.
type GroupInfo struct {
	NumGroups     int32 // groups of the pool (1 for a pool from NewPool)
	Kind          GroupKind
	NumLayers     int32 // layers of the group
	NumKVHeads    int32 // FULL / SLIDING; 0 for SSM
	HeadDim       int32 // FULL / SLIDING; 0 for SSM
	SlidingWindow int32 // SLIDING: the window; 0 otherwise
	StateBytes    int64 // SSM: one layer's state; 0 otherwise
	GroupBytes    int64 // bytes of a page this group uses (the rest is padding)
	PageBytes     int64 // bytes of every page of the pool (the storage's block stride)
	LayerStride   int64 // bytes between two layers of this group inside a page
}

// CreateHybrid creates a pool for a hybrid model (kvc_pool_create_hybrid): len(groups) KV-cache
// groups sharing one block pool; layerToGroup[l] is the group of model layer l. cfg's shape
// (NumLayers, NumKVHeads, HeadDim) is not read: it comes from the groups (Config then reports the
// model's layers and the first attention group's heads). Close the pool when done.
func CreateHybrid(cfg PoolConfig, groups []GroupConfig, layerToGroup []int32) (*Pool, error) {
	if len(groups) < 1 || len(groups) > MaxGroups {
		// The library would refuse the count too; checked here because the C array is sized by it.
		return nil, argError("CreateHybrid", ErrInvalidArg, "the number of groups must be in [1, MaxGroups]")
	}
	c := cfg.toC()
	defer raw.DeleteKvc_pool_config(c)
	arr := raw.Kvcgo_group_configs_new(len(groups))
	if arr.Swigcptr() == 0 {
		return nil, argError("CreateHybrid", ErrNoMemory, "out of memory for the group configurations")
	}
	defer raw.Kvcgo_group_configs_delete(arr)
	for i, g := range groups {
		e := raw.Kvcgo_group_configs_at(arr, i)
		raw.Kvc_group_config_default(e) // struct_size, and any field a newer header appends
		e.SetKind(int(g.Kind))
		e.SetNum_layers(int(g.NumLayers))
		e.SetNum_kv_heads(int(g.NumKVHeads))
		e.SetHead_dim(int(g.HeadDim))
		e.SetSliding_window(int(g.SlidingWindow))
		e.SetState_bytes(g.StateBytes)
	}
	var out [1]uintptr
	err := callC("CreateHybrid", func() raw.Enum_SS_kvc_status {
		return raw.Kvc_pool_create_hybrid(c, arr, len(groups), nonNil(layerToGroup), len(layerToGroup), out[:])
	})
	if err != nil {
		return nil, err
	}
	return adoptPool(out[0])
}

// GroupInfo describes group `group` of the pool (kvc_pool_get_group_info); a plain pool has one
// group. A group out of range is ErrInvalidArg.
func (p *Pool) GroupInfo(group int32) (GroupInfo, error) {
	c := raw.NewKvc_group_info()
	defer raw.DeleteKvc_group_info(c)
	err := p.do("GroupInfo", func(h raw.Struct_SS_kvc_pool) raw.Enum_SS_kvc_status {
		return raw.Kvc_pool_get_group_info(h, int(group), c)
	})
	if err != nil {
		return GroupInfo{}, err
	}
	return GroupInfo{
		NumGroups:     int32(c.GetNum_groups()),
		Kind:          GroupKind(c.GetKind()),
		NumLayers:     int32(c.GetNum_layers()),
		NumKVHeads:    int32(c.GetNum_kv_heads()),
		HeadDim:       int32(c.GetHead_dim()),
		SlidingWindow: int32(c.GetSliding_window()),
		StateBytes:    c.GetState_bytes(),
		GroupBytes:    c.GetGroup_bytes(),
		PageBytes:     c.GetPage_bytes(),
		LayerStride:   c.GetLayer_stride(),
	}, nil
}

// LayerGroup returns the group of model layer `layer` and the layer's index among that group's
// layers (kvc_pool_layer_group). A layer out of range is ErrInvalidArg.
func (p *Pool) LayerGroup(layer int32) (group, layerInGroup int32, err error) {
	var g, l [1]int32
	err = p.do("LayerGroup", func(h raw.Struct_SS_kvc_pool) raw.Enum_SS_kvc_status {
		return raw.Kvc_pool_layer_group(h, int(layer), g[:], l[:])
	})
	return g[0], l[0], err
}

// GroupBlockTable returns group `group`'s block table of seq (kvc_seq_group_block_table); released
// entries (a SLIDING group's window, an SSM group's older pages) read -1. Group 0 is BlockTable.
func (p *Pool) GroupBlockTable(seq uint64, group int32) ([]int32, error) {
	return p.readTable("GroupBlockTable", nil, func(h raw.Struct_SS_kvc_pool, buf []int32, n []int64) raw.Enum_SS_kvc_status {
		return raw.Kvc_seq_group_block_table(h, seq, int(group), buf, int64(len(buf)), n)
	})
}

// SetGroup chooses the KV-cache group whose block tables the next Build records
// (kvc_batch_set_group; hybrid pools, CreateHybrid; default group 0). A group out of range, or an
// SSM group (no block tables to launch over), is ErrInvalidArg.
func (b *Batch) SetGroup(group int32) error {
	return b.use("Batch.SetGroup", true, func(_ raw.Struct_SS_kvc_pool, bh raw.Struct_SS_kvc_batch) raw.Enum_SS_kvc_status {
		return raw.Kvc_batch_set_group(bh, int(group))
	})
}
