package dev.kvc;

import static dev.kvc.TestUtil.expectStatus;
import static dev.kvc.TestUtil.small;
import static dev.kvc.TestUtil.span;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Paths;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * Kvc.hashBlocks against the shared block hash vectors (tests/conformance/hash_vectors.txt, also
 * checked by the C suite, the Go and Rust bindings and the Python re-implementation of the spec),
 * and against the hashes a pool's events report.
 */
class HashBlocksTest {
    private static final Map<String, Set<String>> VECTOR_KEYS =
            Map.of("vector", Set.of("block_size", "tokens", "lora", "salt", "mm", "count", "hashes"));

    private static Hash128 parseHash(String s) {
        assertEquals(32, s.length(), "hash " + s);
        return new Hash128(Long.parseUnsignedLong(s.substring(0, 16), 16), Long.parseUnsignedLong(s.substring(16), 16));
    }

    /** The line's keys: LoRA id, salt, multimodal items HASH:OFFSET:LENGTH. */
    private static Keys keysFor(ConformanceTest.Line l) {
        Keys k = Keys.create();
        if (l.has("lora")) {
            k.setLora(l.u64("lora"));
        }
        k.setSalt(l.args.get("salt"));
        if (l.has("mm")) {
            for (String item : l.args.get("mm").split(",")) {
                String[] parts = item.split(":");
                Hash128 h = parseHash(parts[0]);
                k.addMultimodal(h.hi(), h.lo(), Long.parseLong(parts[1]), Long.parseLong(parts[2]));
            }
        }
        return k;
    }

    private static Hash128[] expected(ConformanceTest.Line l) {
        Hash128[] want = l.has("hashes")
                ? java.util.Arrays.stream(l.args.get("hashes").split(",")).map(HashBlocksTest::parseHash)
                        .toArray(Hash128[]::new)
                : new Hash128[0];
        assertEquals(l.i64("count"), want.length, "line " + l.num + ": count vs hashes");
        return want;
    }

    @Test
    void sharedVectors() throws IOException {
        String root = System.getenv("KVC_SOURCE_DIR");
        assertNotNull(root, "KVC_SOURCE_DIR (the source tree) is not set");
        List<ConformanceTest.Line> lines =
                ConformanceTest.parse(Paths.get(root, "tests", "conformance", "hash_vectors.txt"), VECTOR_KEYS);
        assertTrue(lines.size() > 0, "no vectors");
        for (ConformanceTest.Line l : lines) {
            try (Keys k = keysFor(l)) {
                Hash128[] got = Kvc.hashBlocks(Math.toIntExact(l.i64("block_size")), l.tokens(), k);
                assertArrayEquals(expected(l), got, "line " + l.num);
            }
        }
    }

    /** The hashes a pool's BLOCK_STORED events report for a prompt are hashBlocks' (null keys too). */
    @Test
    void equalsPoolEvents() {
        try (Pool p = Pool.create(small())) {
            int[] prompt = span(0, 13);
            Hash128[] want = Kvc.hashBlocks(4, prompt, null);
            assertEquals(3, want.length);
            p.alloc(1, prompt, null);
            for (Hash128 h : want) {
                Event e = p.popEvent().orElseThrow();
                assertEquals(EventType.BLOCK_STORED, e.type());
                assertEquals(h, new Hash128(e.hashHi(), e.hashLo()));
            }
            Stats s = p.stats();
            assertEquals(3, s.cachedBlocksTotal());
            assertEquals(0, s.cachedFreeBlocks());
            p.free(1);
            assertEquals(3, p.stats().cachedBlocksTotal());
        }
    }

    @Test
    void errors() {
        expectStatus(Status.INVALID_ARG, () -> Kvc.hashBlocks(0, span(0, 4), null));
        assertEquals(0, Kvc.hashBlocks(4, null, null).length);
    }
}
