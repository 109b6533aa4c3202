package kvc_test

// kvc.HashBlocks against the shared block hash vectors (tests/conformance/hash_vectors.txt, also
// checked by the C suite, the Java and Rust bindings and the Python re-implementation of the spec),
// and against the hashes a pool's events report.

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"kvc.dev/kvc"
)

var vectorKeys = map[string][]string{"vector": {"block_size", "tokens", "lora", "salt", "mm", "count", "hashes"}}

func parseHash(t *testing.T, s string) kvc.Hash128 {
	hi, err1 := strconv.ParseUint(s[:16], 16, 64)
	lo, err2 := strconv.ParseUint(s[16:], 16, 64)
	if len(s) != 32 || err1 != nil || err2 != nil {
		t.Fatalf("bad hash %q", s)
	}
	return kvc.Hash128{Hi: hi, Lo: lo}
}

// vectorKeysFor builds the line's kvc.Keys: LoRA id, salt, multimodal items HASH:OFFSET:LENGTH.
func vectorKeysFor(t *testing.T, l scenarioLine) *kvc.Keys {
	k := mustV[*kvc.Keys](t)(kvc.NewKeys())
	t.Cleanup(func() { k.Close() })
	if l.has("lora") {
		must(t, k.SetLoRA(l.u64("lora")))
	}
	must(t, k.SetSalt(l.args["salt"]))
	if l.has("mm") {
		for _, item := range strings.Split(l.args["mm"], ",") {
			parts := strings.Split(item, ":")
			off, err1 := strconv.ParseInt(parts[1], 10, 64)
			length, err2 := strconv.ParseInt(parts[2], 10, 64)
			if len(parts) != 3 || err1 != nil || err2 != nil {
				t.Fatalf("line %d: bad mm item %q", l.num, item)
			}
			must(t, k.AddMultimodal(parseHash(t, parts[0]), off, length))
		}
	}
	return k
}

func wantHashes(t *testing.T, l scenarioLine) []kvc.Hash128 {
	out := []kvc.Hash128{}
	if l.has("hashes") {
		for _, h := range strings.Split(l.args["hashes"], ",") {
			out = append(out, parseHash(t, h))
		}
	}
	if int64(len(out)) != l.i64("count") {
		t.Fatalf("line %d: count=%d but %d hashes", l.num, l.i64("count"), len(out))
	}
	return out
}

func TestHashBlocksVectors(t *testing.T) {
	path := filepath.Join("..", "..", "tests", "conformance", "hash_vectors.txt")
	lines := parseLines(t, path, vectorKeys)
	if len(lines) == 0 {
		t.Fatal("no vectors")
	}
	for _, l := range lines {
		got, err := kvc.HashBlocks(int32(l.i64("block_size")), l.tokens(), vectorKeysFor(t, l))
		must(t, err)
		if want := wantHashes(t, l); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("line %d: HashBlocks = %x, want %x", l.num, got, want)
		}
	}
}

// The hashes a pool's BLOCK_STORED events report for a prompt are HashBlocks' (nil keys too).
func TestHashBlocksEqualPoolEvents(t *testing.T) {
	cfg := smallConfig()
	p := newPool(t, cfg)
	prompt := span(0, 3*cfg.BlockSize+1)
	want := mustV[[]kvc.Hash128](t)(kvc.HashBlocks(cfg.BlockSize, prompt, nil))
	if len(want) != 3 {
		t.Fatalf("%d hashes, want 3", len(want))
	}
	_, err := p.Alloc(1, prompt, nil)
	must(t, err)
	for i, h := range want {
		ev, ok, err := p.PopEvent()
		must(t, err)
		if !ok || ev.Type != kvc.EventBlockStored || ev.Hash != h {
			t.Fatalf("event %d: %+v, want stored %x", i, ev, h)
		}
	}
	s := mustV[kvc.Stats](t)(p.Stats())
	if s.CachedBlocksTotal != 3 || s.CachedFreeBlocks != 0 {
		t.Fatalf("CachedBlocksTotal %d, CachedFreeBlocks %d; want 3, 0", s.CachedBlocksTotal, s.CachedFreeBlocks)
	}
}

func TestHashBlocksErrors(t *testing.T) {
	_, err := kvc.HashBlocks(0, span(0, 4), nil)
	wantStatus(t, err, kvc.ErrInvalidArg)
	got := mustV[[]kvc.Hash128](t)(kvc.HashBlocks(4, nil, nil))
	if len(got) != 0 {
		t.Fatalf("empty prompt: %d hashes", len(got))
	}
}
