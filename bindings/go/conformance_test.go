package kvc_test

// Interpreter of the shared conformance scenario (tests/conformance/scenario.kvc, format in
// tests/conformance/README.md). The same file is run by the C, Java, Rust and Python tests.

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"kvc.dev/kvc"
)

func scenarioPath() string {
	if p := os.Getenv("KVC_CONFORMANCE_SCENARIO"); p != "" {
		return p
	}
	return filepath.Join("..", "..", "tests", "conformance", "scenario.kvc")
}

var statusNames = map[string]kvc.Status{
	"OK": kvc.OK, "NULL_ARG": kvc.ErrNullArg, "INVALID_ARG": kvc.ErrInvalidArg,
	"OVERFLOW": kvc.ErrOverflow, "NO_MEMORY": kvc.ErrNoMemory, "OUT_OF_BLOCKS": kvc.ErrOutOfBlocks,
	"UNKNOWN_SEQ": kvc.ErrUnknownSeq, "SEQ_EXISTS": kvc.ErrSeqExists,
	"BUFFER_TOO_SMALL": kvc.ErrBufferTooSmall, "MAX_LEN": kvc.ErrMaxLen, "BUSY": kvc.ErrBusy,
	"UNSUPPORTED": kvc.ErrUnsupported, "DEVICE": kvc.ErrDevice, "IO": kvc.ErrIO,
	"VERSION": kvc.ErrVersion, "STATE": kvc.ErrState, "INTERNAL": kvc.ErrInternal,
}

// Keys each op accepts besides expect=.
var opKeys = map[string][]string{
	"pool":           {"block_size", "num_blocks", "watermark", "prefix_caching", "max_seq_len"},
	"alloc":          {"seq", "tokens", "lora", "salt", "priority", "max_cached", "cached"},
	"can_alloc":      {"tokens", "lora", "salt", "priority", "max_cached", "verdict"},
	"lookup":         {"tokens", "lora", "salt", "max_cached", "cached"},
	"append":         {"seq", "tokens", "lookahead", "new_blocks"},
	"truncate":       {"seq", "num_tokens", "freed_blocks"},
	"set_window":     {"window"},
	"get_window":     {"window"},
	"fork":           {"parent", "child"},
	"free":           {"seq"},
	"table":          {"seq", "len", "blocks"},
	"num_tokens":     {"seq", "value"},
	"slots":          {"seq", "first", "count", "values"},
	"pending_copies": {"count", "src", "dst"},
	"stats": {"free_blocks", "used_blocks", "num_seqs", "cow_copies", "prefix_hit_tokens",
		"prefix_query_tokens", "cached_free_blocks", "evictions", "allocs", "frees"},
	"check":   {},
	"reset":   {},
	"destroy": {},
}

// scenarioLine is one parsed operation; accessors panic with a message on malformed values, which
// the runner turns into a test failure naming the line.
type scenarioLine struct {
	num  int
	op   string
	args map[string]string
}

func (l scenarioLine) has(k string) bool { _, ok := l.args[k]; return ok }

func (l scenarioLine) i64(k string) int64 {
	v, err := strconv.ParseInt(l.args[k], 10, 64)
	if err != nil {
		panic(fmt.Sprintf("%s=%q: %v", k, l.args[k], err))
	}
	return v
}

func (l scenarioLine) u64(k string) uint64 {
	v, err := strconv.ParseUint(l.args[k], 10, 64)
	if err != nil {
		panic(fmt.Sprintf("%s=%q: %v", k, l.args[k], err))
	}
	return v
}

func (l scenarioLine) f64(k string) float64 {
	v, err := strconv.ParseFloat(l.args[k], 64)
	if err != nil {
		panic(fmt.Sprintf("%s=%q: %v", k, l.args[k], err))
	}
	return v
}

func (l scenarioLine) list(k string) []int64 {
	s := l.args[k]
	if strings.HasPrefix(s, "range:") {
		parts := strings.Split(s, ":")
		if len(parts) != 3 {
			panic(fmt.Sprintf("%s=%q: want range:A:B", k, s))
		}
		a, err1 := strconv.ParseInt(parts[1], 10, 64)
		b, err2 := strconv.ParseInt(parts[2], 10, 64)
		if err1 != nil || err2 != nil || b < a {
			panic(fmt.Sprintf("%s=%q: bad range", k, s))
		}
		out := make([]int64, 0, b-a)
		for v := a; v < b; v++ {
			out = append(out, v)
		}
		return out
	}
	var out []int64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			panic(fmt.Sprintf("%s=%q: %v", k, s, err))
		}
		out = append(out, v)
	}
	return out
}

func (l scenarioLine) tokens() []int32 {
	vals := l.list("tokens")
	out := make([]int32, len(vals))
	for i, v := range vals {
		out[i] = int32(v)
	}
	return out
}

func parseScenario(t *testing.T, path string) []scenarioLine { return parseLines(t, path, opKeys) }

// parseLines reads a file in the scenario's line format whose ops and their keys are `ops`
// (the scenario's, or the hash vectors' in hash_test.go).
func parseLines(t *testing.T, path string, ops map[string][]string) []scenarioLine {
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("open scenario: %v", err)
	}
	defer f.Close()
	var lines []scenarioLine
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		text := sc.Text()
		if i := strings.IndexByte(text, '#'); i >= 0 {
			text = text[:i]
		}
		fields := strings.Fields(text)
		if len(fields) == 0 {
			continue
		}
		l := scenarioLine{num: n, op: fields[0], args: map[string]string{}}
		allowed, ok := ops[l.op]
		if !ok {
			t.Fatalf("line %d: unknown op %q", n, l.op)
		}
		for _, kv := range fields[1:] {
			k, v, found := strings.Cut(kv, "=")
			if !found || (k != "expect" && !contains(allowed, k)) {
				t.Fatalf("line %d: unknown or malformed argument %q for %s", n, kv, l.op)
			}
			l.args[k] = v
		}
		lines = append(lines, l)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read scenario: %v", err)
	}
	return lines
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// conformanceRun holds the interpreter's state: the pool of the last pool line.
type conformanceRun struct {
	pool *kvc.Pool
}

func (r *conformanceRun) close() {
	if r.pool != nil {
		r.pool.Close()
		r.pool = nil
	}
}

func keysFor(l scenarioLine) (*kvc.Keys, error) {
	if !l.has("lora") && !l.has("salt") && !l.has("priority") && !l.has("max_cached") {
		return nil, nil
	}
	k, err := kvc.NewKeys()
	if err != nil {
		return nil, err
	}
	if l.has("lora") {
		err = k.SetLoRA(l.u64("lora"))
	}
	if err == nil && l.has("salt") {
		err = k.SetSalt(l.args["salt"])
	}
	if err == nil && l.has("priority") {
		err = k.SetPriority(int32(l.i64("priority")))
	}
	if err == nil && l.has("max_cached") {
		err = k.SetMaxCachedTokens(l.i64("max_cached"))
	}
	if err != nil {
		k.Close()
		return nil, err
	}
	return k, nil
}

// exec runs one line and returns the call's error plus a list of output mismatches (only checked
// when the call succeeded).
func (r *conformanceRun) exec(l scenarioLine) (callErr error, mismatches []string) {
	want := func(key string, got int64) {
		if l.has(key) && l.i64(key) != got {
			mismatches = append(mismatches, fmt.Sprintf("%s: got %d, want %d", key, got, l.i64(key)))
		}
	}
	wantList := func(key string, got []int64) {
		if l.has(key) && fmt.Sprint(l.list(key)) != fmt.Sprint(got) {
			mismatches = append(mismatches, fmt.Sprintf("%s: got %v, want %v", key, got, l.list(key)))
		}
	}
	widen := func(v []int32) []int64 {
		out := make([]int64, len(v))
		for i, x := range v {
			out[i] = int64(x)
		}
		return out
	}
	if l.op != "pool" && r.pool == nil {
		panic("no pool: a pool line must come first")
	}
	switch l.op {
	case "pool":
		cfg := kvc.DefaultPoolConfig()
		cfg.BlockSize = int32(l.i64("block_size"))
		cfg.NumBlocks = l.i64("num_blocks")
		cfg.Watermark = l.f64("watermark")
		cfg.PrefixCaching = l.i64("prefix_caching") != 0
		if l.has("max_seq_len") {
			cfg.MaxSeqLen = l.i64("max_seq_len")
		}
		cfg.Backend = kvc.BackendNone
		p, err := kvc.NewPool(cfg)
		if err != nil {
			return err, nil
		}
		r.close()
		r.pool = p
	case "alloc":
		keys, err := keysFor(l)
		if err != nil {
			return err, nil
		}
		cached, err := r.pool.Alloc(l.u64("seq"), l.tokens(), keys)
		if keys != nil {
			keys.Close()
		}
		if err != nil {
			return err, nil
		}
		want("cached", cached)
	case "can_alloc":
		keys, err := keysFor(l)
		if err != nil {
			return err, nil
		}
		v, err := r.pool.CanAlloc(l.tokens(), keys)
		if keys != nil {
			keys.Close()
		}
		if err != nil {
			return err, nil
		}
		if l.has("verdict") && v.String() != l.args["verdict"] {
			mismatches = append(mismatches, fmt.Sprintf("verdict: got %v, want %s", v, l.args["verdict"]))
		}
	case "lookup":
		keys, err := keysFor(l)
		if err != nil {
			return err, nil
		}
		cached, err := r.pool.PrefixLookup(l.tokens(), keys)
		if keys != nil {
			keys.Close()
		}
		if err != nil {
			return err, nil
		}
		want("cached", cached)
	case "append":
		var lookahead int64
		if l.has("lookahead") {
			lookahead = l.i64("lookahead")
		}
		n, err := r.pool.Append(l.u64("seq"), l.tokens(), lookahead)
		if err != nil {
			return err, nil
		}
		want("new_blocks", int64(n))
	case "truncate":
		n, err := r.pool.Truncate(l.u64("seq"), l.i64("num_tokens"))
		if err != nil {
			return err, nil
		}
		want("freed_blocks", int64(n))
	case "set_window":
		return r.pool.SetSlidingWindow(int32(l.i64("window"))), nil
	case "get_window":
		w, err := r.pool.SlidingWindow()
		if err != nil {
			return err, nil
		}
		want("window", int64(w))
	case "fork":
		return r.pool.Fork(l.u64("parent"), l.u64("child")), nil
	case "free":
		return r.pool.Free(l.u64("seq")), nil
	case "table":
		table, err := r.pool.BlockTable(l.u64("seq"))
		if err != nil {
			return err, nil
		}
		want("len", int64(len(table)))
		wantList("blocks", widen(table))
	case "num_tokens":
		n, err := r.pool.NumTokens(l.u64("seq"))
		if err != nil {
			return err, nil
		}
		want("value", n)
	case "slots":
		slots, err := r.pool.SlotMapping(l.u64("seq"), l.i64("first"), l.i64("count"))
		if err != nil {
			return err, nil
		}
		wantList("values", slots)
	case "pending_copies":
		src, dst, err := r.pool.TakePendingCopies()
		if err != nil {
			return err, nil
		}
		want("count", int64(len(src)))
		wantList("src", widen(src))
		wantList("dst", widen(dst))
	case "stats":
		s, err := r.pool.Stats()
		if err != nil {
			return err, nil
		}
		want("free_blocks", s.FreeBlocks)
		want("used_blocks", s.UsedBlocks)
		want("num_seqs", s.NumSeqs)
		want("cow_copies", s.CowCopies)
		want("prefix_hit_tokens", s.PrefixHitTokens)
		want("prefix_query_tokens", s.PrefixQueryTokens)
		want("cached_free_blocks", s.CachedFreeBlocks)
		want("evictions", s.Evictions)
		want("allocs", s.Allocs)
		want("frees", s.Frees)
	case "check":
		return r.pool.Check(), nil
	case "reset":
		return r.pool.ResetPrefixCache(), nil
	case "destroy":
		r.close()
	}
	return nil, mismatches
}

func TestConformanceScenario(t *testing.T) {
	lines := parseScenario(t, scenarioPath())
	if len(lines) < 50 {
		t.Fatalf("scenario has only %d operations", len(lines))
	}
	r := &conformanceRun{}
	defer r.close()
	for _, l := range lines {
		expect := kvc.OK
		if e, ok := l.args["expect"]; ok {
			s, known := statusNames[e]
			if !known {
				t.Fatalf("line %d: unknown status %q", l.num, e)
			}
			expect = s
		}
		callErr, mismatches, panicMsg := runLine(r, l)
		if panicMsg != "" {
			t.Fatalf("line %d (%s): %s", l.num, l.op, panicMsg)
		}
		got := kvc.OK
		if callErr != nil {
			var e *kvc.Error
			if !errors.As(callErr, &e) {
				t.Fatalf("line %d (%s): error is not a *kvc.Error: %v", l.num, l.op, callErr)
			}
			got = e.Status
			if !errors.Is(callErr, expect) && expect != kvc.OK {
				t.Errorf("line %d (%s): errors.Is(err, %v) is false for %v", l.num, l.op, expect, callErr)
			}
		}
		if got != expect {
			t.Fatalf("line %d (%s): status %v, want %v (err: %v)", l.num, l.op, got, expect, callErr)
		}
		for _, m := range mismatches {
			t.Errorf("line %d (%s): %s", l.num, l.op, m)
		}
	}
}

func runLine(r *conformanceRun, l scenarioLine) (err error, mismatches []string, panicMsg string) {
	defer func() {
		if p := recover(); p != nil {
			panicMsg = fmt.Sprint(p)
		}
	}()
	err, mismatches = r.exec(l)
	return err, mismatches, ""
}
