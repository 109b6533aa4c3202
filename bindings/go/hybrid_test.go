package kvc_test

// CreateHybrid, Pool.GroupInfo, Pool.LayerGroup, Pool.GroupBlockTable, Batch.SetGroup (kvc.h
// "Hybrid models"): a FULL, a SLIDING and an SSM group sharing one block pool. Block ids are
// deterministic; the expected tables are those a C run of the same steps prints.

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"kvc.dev/kvc"
)

var hybridLayerToGroup = []int32{0, 1, 2, 1, 0}

func hybridGroups() []kvc.GroupConfig {
	full := kvc.DefaultGroupConfig()
	full.NumLayers, full.NumKVHeads, full.HeadDim = 2, 2, 8
	sliding := full
	sliding.Kind, sliding.SlidingWindow = kvc.GroupSliding, 6
	ssm := kvc.DefaultGroupConfig()
	ssm.Kind, ssm.NumLayers, ssm.StateBytes = kvc.GroupSSM, 1, 1000
	return []kvc.GroupConfig{full, sliding, ssm}
}

func hybridConfig() kvc.PoolConfig {
	cfg := kvc.DefaultPoolConfig()
	cfg.BlockSize = 4
	cfg.NumBlocks = 64
	cfg.Watermark = 0
	cfg.Backend = kvc.BackendNone
	return cfg
}

func newHybridPool(t *testing.T) *kvc.Pool {
	t.Helper()
	p, err := kvc.CreateHybrid(hybridConfig(), hybridGroups(), hybridLayerToGroup)
	if err != nil {
		t.Fatalf("CreateHybrid: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Check(); err != nil {
			t.Errorf("pool invariants at the end of the test: %v", err)
		}
		p.Close()
	})
	return p
}

// wantInvalidArg fails unless err is ErrInvalidArg with a message naming cFunc.
func wantInvalidArg(t *testing.T, what string, err error, cFunc string) {
	t.Helper()
	var e *kvc.Error
	if !errors.Is(err, kvc.ErrInvalidArg) || !errors.As(err, &e) {
		t.Fatalf("%s: got %v, want ErrInvalidArg", what, err)
	}
	if cFunc != "" && !strings.Contains(e.Message, cFunc) {
		t.Errorf("%s: message %q does not name %s", what, e.Message, cFunc)
	}
}

func TestDefaultGroupConfig(t *testing.T) {
	g := kvc.DefaultGroupConfig()
	want := kvc.GroupConfig{Kind: kvc.GroupFull, NumLayers: 1, NumKVHeads: 1, HeadDim: 128}
	if g != want {
		t.Fatalf("DefaultGroupConfig = %+v, want %+v", g, want)
	}
	if kvc.GroupSSM.String() != "SSM" || kvc.GroupSliding.String() != "SLIDING" {
		t.Errorf("GroupKind names: %v %v", kvc.GroupSSM, kvc.GroupSliding)
	}
}

func TestHybridGroupInfoAndLayerGroup(t *testing.T) {
	p := newHybridPool(t)
	want := []kvc.GroupInfo{
		{NumGroups: 3, Kind: kvc.GroupFull, NumLayers: 2, NumKVHeads: 2, HeadDim: 8, GroupBytes: 512, PageBytes: 1024},
		{NumGroups: 3, Kind: kvc.GroupSliding, NumLayers: 2, NumKVHeads: 2, HeadDim: 8, SlidingWindow: 6, GroupBytes: 512, PageBytes: 1024},
		{NumGroups: 3, Kind: kvc.GroupSSM, NumLayers: 1, StateBytes: 1000, GroupBytes: 1000, PageBytes: 1024},
	}
	for g, w := range want {
		info := mustV[kvc.GroupInfo](t)(p.GroupInfo(int32(g)))
		w.LayerStride = info.LayerStride // layout detail, checked below
		if info != w {
			t.Errorf("group %d: %+v, want %+v", g, info, w)
		}
		if info.LayerStride <= 0 || info.LayerStride*int64(info.NumLayers) > info.PageBytes {
			t.Errorf("group %d: layer stride %d does not fit %d layers in a page", g, info.LayerStride, info.NumLayers)
		}
	}
	cfg := mustV[kvc.PoolConfig](t)(p.Config())
	if cfg.NumLayers != 5 || cfg.NumKVHeads != 2 || cfg.HeadDim != 8 {
		t.Errorf("Config: layers %d heads %d dim %d, want 5 2 8", cfg.NumLayers, cfg.NumKVHeads, cfg.HeadDim)
	}
	for _, c := range []struct{ layer, group, index int32 }{{3, 1, 1}, {4, 0, 1}, {2, 2, 0}, {0, 0, 0}} {
		g, i, err := p.LayerGroup(c.layer)
		if err != nil || g != c.group || i != c.index {
			t.Errorf("LayerGroup(%d) = %d, %d, %v; want %d, %d", c.layer, g, i, err, c.group, c.index)
		}
	}

	_, err := p.GroupInfo(3)
	wantInvalidArg(t, "GroupInfo(3)", err, "kvc_pool_get_group_info")
	_, err = p.GroupInfo(-1)
	wantInvalidArg(t, "GroupInfo(-1)", err, "kvc_pool_get_group_info")
	_, _, err = p.LayerGroup(5)
	wantInvalidArg(t, "LayerGroup(5)", err, "kvc_pool_layer_group")

	// A plain pool has one group.
	plain := newPool(t, smallConfig())
	info := mustV[kvc.GroupInfo](t)(plain.GroupInfo(0))
	if info.NumGroups != 1 || info.Kind != kvc.GroupFull {
		t.Errorf("plain pool group 0: %+v", info)
	}
	_, err = plain.GroupInfo(1)
	wantInvalidArg(t, "plain GroupInfo(1)", err, "kvc_pool_get_group_info")
}

func TestCreateHybridBadConfigs(t *testing.T) {
	noWindow := hybridGroups()
	noWindow[1].SlidingWindow = 0
	_, err := kvc.CreateHybrid(hybridConfig(), noWindow, hybridLayerToGroup)
	wantInvalidArg(t, "SLIDING without window", err, "kvc_pool_create_hybrid")
	noState := hybridGroups()
	noState[2].StateBytes = 0
	_, err = kvc.CreateHybrid(hybridConfig(), noState, hybridLayerToGroup)
	wantInvalidArg(t, "SSM without state", err, "kvc_pool_create_hybrid")
	_, err = kvc.CreateHybrid(hybridConfig(), hybridGroups(), []int32{0, 1, 3, 1, 0})
	wantInvalidArg(t, "layer naming no group", err, "kvc_pool_create_hybrid")
	_, err = kvc.CreateHybrid(hybridConfig(), hybridGroups(), []int32{0, 1, 2, 1})
	wantInvalidArg(t, "too few layers", err, "kvc_pool_create_hybrid")
	_, err = kvc.CreateHybrid(hybridConfig(), nil, nil)
	wantInvalidArg(t, "no groups", err, "")
	_, err = kvc.CreateHybrid(hybridConfig(), make([]kvc.GroupConfig, kvc.MaxGroups+1), make([]int32, kvc.MaxGroups+1))
	wantInvalidArg(t, "too many groups", err, "")
}

func TestHybridGroupBlockTables(t *testing.T) {
	p := newHybridPool(t)
	table := func(seq uint64, group int32) []int32 {
		t.Helper()
		return mustV[[]int32](t)(p.GroupBlockTable(seq, group))
	}
	expect := func(what string, seq uint64, want [3][]int32) {
		t.Helper()
		for g, w := range want {
			if got := table(seq, int32(g)); !reflect.DeepEqual(got, w) {
				t.Errorf("%s: seq %d group %d table %v, want %v", what, seq, g, got, w)
			}
		}
	}

	if hit := mustV[int64](t)(p.Alloc(1, span(1, 19), nil)); hit != 0 {
		t.Fatalf("alloc 1: cached %d, want 0", hit)
	}
	expect("after alloc 1", 1, [3][]int32{{0, 1, 2, 3, 4}, {5, 6, 7, 8, 9}, {10, 11, 12, 13, 14}})
	if bt := mustV[[]int32](t)(p.BlockTable(1)); !reflect.DeepEqual(bt, table(1, 0)) {
		t.Errorf("BlockTable %v differs from group 0's table", bt)
	}
	for tok := int32(19); tok <= 26; tok++ {
		mustV[int32](t)(p.Append(1, []int32{tok}, 0))
	}
	expect("after appends", 1, [3][]int32{
		{0, 1, 2, 3, 4, 15, 18}, {-1, -1, -1, -1, 9, 16, 19}, {-1, -1, -1, -1, -1, -1, 20}})

	// Every group can resume after 24 tokens (6 blocks).
	if hit := mustV[int64](t)(p.Alloc(2, span(1, 31), nil)); hit != 24 {
		t.Fatalf("alloc 2: cached %d, want 24", hit)
	}
	expect("after alloc 2", 2, [3][]int32{
		{0, 1, 2, 3, 4, 15, 21, 22}, {-1, -1, -1, -1, 9, 16, 23, 24}, {-1, -1, -1, -1, -1, 17, 25, 26}})
	must(t, p.Check())

	_, err := p.GroupBlockTable(1, 3)
	wantInvalidArg(t, "GroupBlockTable(1, 3)", err, "kvc_seq_group_block_table")
	if _, err := p.GroupBlockTable(99, 0); !errors.Is(err, kvc.ErrUnknownSeq) {
		t.Errorf("GroupBlockTable(99, 0): %v, want ErrUnknownSeq", err)
	}
	must(t, p.Free(1))
	must(t, p.Free(2))
}

func TestBatchSetGroup(t *testing.T) {
	p := newHybridPool(t)
	mustV[int64](t)(p.Alloc(1, span(1, 19), nil))
	b := mustV[*kvc.Batch](t)(p.NewBatch(4, 64, 16))
	defer b.Close()
	must(t, b.SetGroup(0))
	must(t, b.Build([]uint64{1}, []int64{18}))
	if info := mustV[kvc.BatchInfo](t)(b.Info()); info.NumSeqs != 1 {
		t.Errorf("batch info: %+v", info)
	}
	// Group 2 is the SSM group (no block tables to launch over); 3 is out of range.
	wantInvalidArg(t, "SetGroup(2)", b.SetGroup(2), "")
	wantInvalidArg(t, "SetGroup(3)", b.SetGroup(3), "")
	wantInvalidArg(t, "SetGroup(-1)", b.SetGroup(-1), "")
}
