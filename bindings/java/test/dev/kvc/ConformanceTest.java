package dev.kvc;

import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * Interpreter of the shared conformance scenario (tests/conformance/scenario.kvc, format in
 * tests/conformance/README.md), run by the C, Go, Java, Rust and Python tests alike.
 */
class ConformanceTest {
    private static final Map<String, Set<String>> OP_KEYS = Map.ofEntries(
            Map.entry("pool", Set.of("block_size", "num_blocks", "watermark", "prefix_caching", "max_seq_len")),
            Map.entry("alloc", Set.of("seq", "tokens", "lora", "salt", "priority", "max_cached", "cached")),
            Map.entry("can_alloc", Set.of("tokens", "lora", "salt", "priority", "max_cached", "verdict")),
            Map.entry("lookup", Set.of("tokens", "lora", "salt", "max_cached", "cached")),
            Map.entry("append", Set.of("seq", "tokens", "lookahead", "new_blocks")),
            Map.entry("truncate", Set.of("seq", "num_tokens", "freed_blocks")),
            Map.entry("set_window", Set.of("window")),
            Map.entry("get_window", Set.of("window")),
            Map.entry("fork", Set.of("parent", "child")),
            Map.entry("free", Set.of("seq")),
            Map.entry("table", Set.of("seq", "len", "blocks")),
            Map.entry("num_tokens", Set.of("seq", "value")),
            Map.entry("slots", Set.of("seq", "first", "count", "values")),
            Map.entry("pending_copies", Set.of("count", "src", "dst")),
            Map.entry("stats", Set.of("free_blocks", "used_blocks", "num_seqs", "cow_copies", "prefix_hit_tokens",
                    "prefix_query_tokens", "cached_free_blocks", "evictions", "allocs", "frees")),
            Map.entry("check", Set.of()),
            Map.entry("reset", Set.of()),
            Map.entry("destroy", Set.of()));

    static final class Line {
        final int num;
        final String op;
        final Map<String, String> args = new HashMap<>();

        Line(int num, String op) {
            this.num = num;
            this.op = op;
        }

        boolean has(String k) {
            return args.containsKey(k);
        }

        long i64(String k) {
            return Long.parseLong(args.get(k));
        }

        long u64(String k) {
            return Long.parseUnsignedLong(args.get(k));
        }

        long[] list(String k) {
            String s = args.get(k);
            if (s.startsWith("range:")) {
                String[] parts = s.split(":");
                if (parts.length != 3) {
                    throw new IllegalArgumentException(k + "=" + s + ": want range:A:B");
                }
                long a = Long.parseLong(parts[1]);
                long b = Long.parseLong(parts[2]);
                if (b < a) {
                    throw new IllegalArgumentException(k + "=" + s + ": bad range");
                }
                long[] out = new long[Math.toIntExact(b - a)];
                for (int i = 0; i < out.length; i++) {
                    out[i] = a + i;
                }
                return out;
            }
            return Arrays.stream(s.split(",", -1)).mapToLong(Long::parseLong).toArray();
        }

        int[] tokens() {
            return Arrays.stream(list("tokens")).mapToInt(Math::toIntExact).toArray();
        }
    }

    static Path scenarioPath() {
        String env = System.getenv("KVC_CONFORMANCE_SCENARIO");
        return env != null ? Paths.get(env) : Paths.get("tests", "conformance", "scenario.kvc");
    }

    static List<Line> parse(Path path) throws IOException {
        return parse(path, OP_KEYS);
    }

    /** Reads a file in the scenario's line format whose ops and their keys are `ops`. */
    static List<Line> parse(Path path, Map<String, Set<String>> ops) throws IOException {
        List<Line> lines = new ArrayList<>();
        List<String> text = Files.readAllLines(path, StandardCharsets.UTF_8);
        for (int n = 1; n <= text.size(); n++) {
            String t = text.get(n - 1);
            int hash = t.indexOf('#');
            if (hash >= 0) {
                t = t.substring(0, hash);
            }
            String[] fields = t.trim().split("[ \\t]+");
            if (fields.length == 0 || fields[0].isEmpty()) {
                continue;
            }
            Line l = new Line(n, fields[0]);
            Set<String> allowed = ops.get(l.op);
            if (allowed == null) {
                fail("line " + n + ": unknown op " + l.op);
            }
            for (int i = 1; i < fields.length; i++) {
                int eq = fields[i].indexOf('=');
                String k = eq < 0 ? fields[i] : fields[i].substring(0, eq);
                if (eq < 0 || (!k.equals("expect") && !allowed.contains(k))) {
                    fail("line " + n + ": unknown or malformed argument " + fields[i] + " for " + l.op);
                }
                l.args.put(k, fields[i].substring(eq + 1));
            }
            lines.add(l);
        }
        return lines;
    }

    private Pool pool;
    private final List<String> mismatches = new ArrayList<>();

    private void want(Line l, String key, long got) {
        if (l.has(key) && l.i64(key) != got) {
            mismatches.add("line " + l.num + " (" + l.op + "): " + key + ": got " + got + ", want " + l.i64(key));
        }
    }

    private void wantList(Line l, String key, long[] got) {
        if (l.has(key) && !Arrays.equals(l.list(key), got)) {
            mismatches.add("line " + l.num + " (" + l.op + "): " + key + ": got " + Arrays.toString(got)
                    + ", want " + Arrays.toString(l.list(key)));
        }
    }

    private static long[] widen(int[] a) {
        return Arrays.stream(a).asLongStream().toArray();
    }

    private static Keys keysFor(Line l) {
        if (!l.has("lora") && !l.has("salt") && !l.has("priority") && !l.has("max_cached")) {
            return null;
        }
        Keys k = Keys.create();
        try {
            if (l.has("lora")) {
                k.setLora(l.u64("lora"));
            }
            if (l.has("salt")) {
                k.setSalt(l.args.get("salt"));
            }
            if (l.has("priority")) {
                k.setPriority(Math.toIntExact(l.i64("priority")));
            }
            if (l.has("max_cached")) {
                k.setMaxCachedTokens(l.i64("max_cached"));
            }
            return k;
        } catch (RuntimeException e) {
            k.close();
            throw e;
        }
    }

    private void closePool() {
        if (pool != null) {
            pool.close();
            pool = null;
        }
    }

    private void exec(Line l) {
        if (!l.op.equals("pool") && pool == null) {
            fail("line " + l.num + ": no pool (a pool line must come first)");
        }
        switch (l.op) {
            case "pool": {
                PoolConfig cfg = PoolConfig.defaults().blockSize(Math.toIntExact(l.i64("block_size")))
                        .numBlocks(l.i64("num_blocks")).watermark(Double.parseDouble(l.args.get("watermark")))
                        .prefixCaching(l.i64("prefix_caching") != 0).backend(Backend.NONE);
                if (l.has("max_seq_len")) {
                    cfg.maxSeqLen(l.i64("max_seq_len"));
                }
                Pool p = Pool.create(cfg);
                closePool();
                pool = p;
                break;
            }
            case "alloc": {
                Keys k = keysFor(l);
                try {
                    want(l, "cached", pool.alloc(l.u64("seq"), l.tokens(), k));
                } finally {
                    if (k != null) {
                        k.close();
                    }
                }
                break;
            }
            case "can_alloc": {
                Keys k = keysFor(l);
                try {
                    AllocVerdict v = pool.canAlloc(l.tokens(), k);
                    if (l.has("verdict") && !v.name().equals(l.args.get("verdict"))) {
                        mismatches.add("line " + l.num + ": verdict " + v + ", want " + l.args.get("verdict"));
                    }
                } finally {
                    if (k != null) {
                        k.close();
                    }
                }
                break;
            }
            case "lookup": {
                Keys k = keysFor(l);
                try {
                    want(l, "cached", pool.prefixLookup(l.tokens(), k));
                } finally {
                    if (k != null) {
                        k.close();
                    }
                }
                break;
            }
            case "append":
                want(l, "new_blocks", pool.append(l.u64("seq"), l.tokens(), l.has("lookahead") ? l.i64("lookahead") : 0));
                break;
            case "truncate":
                want(l, "freed_blocks", pool.truncate(l.u64("seq"), l.i64("num_tokens")));
                break;
            case "set_window":
                pool.setSlidingWindow(Math.toIntExact(l.i64("window")));
                break;
            case "get_window":
                want(l, "window", pool.slidingWindow());
                break;
            case "fork":
                pool.fork(l.u64("parent"), l.u64("child"));
                break;
            case "free":
                pool.free(l.u64("seq"));
                break;
            case "table": {
                int[] t = pool.blockTable(l.u64("seq"));
                want(l, "len", t.length);
                wantList(l, "blocks", widen(t));
                break;
            }
            case "num_tokens":
                want(l, "value", pool.numTokens(l.u64("seq")));
                break;
            case "slots":
                wantList(l, "values", pool.slotMapping(l.u64("seq"), l.i64("first"), Math.toIntExact(l.i64("count"))));
                break;
            case "pending_copies": {
                BlockCopies c = pool.takePendingCopies();
                want(l, "count", c.count());
                wantList(l, "src", widen(c.src()));
                wantList(l, "dst", widen(c.dst()));
                break;
            }
            case "stats": {
                Stats s = pool.stats();
                want(l, "free_blocks", s.freeBlocks());
                want(l, "used_blocks", s.usedBlocks());
                want(l, "num_seqs", s.numSeqs());
                want(l, "cow_copies", s.cowCopies());
                want(l, "prefix_hit_tokens", s.prefixHitTokens());
                want(l, "prefix_query_tokens", s.prefixQueryTokens());
                want(l, "cached_free_blocks", s.cachedFreeBlocks());
                want(l, "evictions", s.evictions());
                want(l, "allocs", s.allocs());
                want(l, "frees", s.frees());
                break;
            }
            case "check":
                pool.check();
                break;
            case "reset":
                pool.resetPrefixCache();
                break;
            case "destroy":
                closePool();
                break;
            default:
                fail("line " + l.num + ": unknown op " + l.op);
        }
    }

    @Test
    void scenario() throws IOException {
        List<Line> lines = parse(scenarioPath());
        assertTrue(lines.size() >= 50, "scenario has only " + lines.size() + " operations");
        try {
            for (Line l : lines) {
                Status expect = Status.OK;
                if (l.has("expect")) {
                    expect = Arrays.stream(Status.values()).filter(s -> s.name().equals(l.args.get("expect")))
                            .findFirst().orElse(null);
                    if (expect == null) {
                        fail("line " + l.num + ": unknown status " + l.args.get("expect"));
                    }
                }
                Status got = Status.OK;
                String detail = "";
                int before = mismatches.size();
                try {
                    exec(l);
                } catch (KvcException e) {
                    got = e.status();
                    detail = e.getMessage();
                }
                if (got != expect) {
                    fail("line " + l.num + " (" + l.op + "): status " + got + ", want " + expect + " " + detail);
                }
                if (got != Status.OK) {
                    // outputs are compared only on success
                    mismatches.subList(before, mismatches.size()).clear();
                }
            }
        } finally {
            closePool();
        }
        assertTrue(mismatches.isEmpty(), String.join("\n", mismatches));
    }
}
