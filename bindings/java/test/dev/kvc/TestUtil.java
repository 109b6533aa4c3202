package dev.kvc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.function.Executable;

final class TestUtil {
    private TestUtil() {}

    /** A metadata-only pool of 16 blocks of 4 tokens, prefix caching on, no watermark. */
    static PoolConfig small() {
        return PoolConfig.defaults().blockSize(4).numBlocks(16).watermark(0).prefixCaching(true)
                .backend(Backend.NONE);
    }

    /** A CPU pool with F32 KV: 2 layers, 2 KV heads, 4 query heads, head dim 8. */
    static PoolConfig cpu() {
        return small().backend(Backend.CPU).kvDType(DType.F32).numLayers(2).numKvHeads(2).numQHeads(4).headDim(8);
    }

    static int[] span(int a, int b) {
        int[] out = new int[b - a];
        for (int i = 0; i < out.length; i++) {
            out[i] = a + i;
        }
        return out;
    }

    /** Asserts that f throws a KvcException with this status and a message; returns it. */
    static KvcException expectStatus(Status s, Executable f) {
        KvcException e = assertThrows(KvcException.class, f);
        assertEquals(s, e.status(), e.getMessage());
        assertEquals(s.code(), e.statusCode());
        assertFalse(e.libraryMessage().isEmpty(), "empty message");
        assertFalse(e.op().isEmpty(), "empty op");
        return e;
    }
}
