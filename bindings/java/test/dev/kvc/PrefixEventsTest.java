package dev.kvc;

import static dev.kvc.TestUtil.expectStatus;
import static dev.kvc.TestUtil.small;
import static dev.kvc.TestUtil.span;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import org.junit.jupiter.api.Test;

class PrefixEventsTest {
    @Test
    void pinUnpinReset() {
        try (Pool p = Pool.create(small().numBlocks(8))) {
            p.alloc(1, span(0, 9), null);
            expectStatus(Status.BUSY, p::resetPrefixCache);
            p.free(1);
            assertEquals(8, p.prefixPin(span(0, 9), null));
            assertEquals(2, p.stats().pinnedBlocks());
            expectStatus(Status.BUSY, p::resetPrefixCache);
            expectStatus(Status.OUT_OF_BLOCKS, () -> p.alloc(2, span(100, 132), null));
            p.alloc(2, span(100, 124), null);
            assertEquals(8, p.prefixLookup(span(0, 9), null));
            p.free(2);
            assertEquals(8, p.prefixUnpin(span(0, 9), null));
            expectStatus(Status.STATE, () -> p.prefixUnpin(span(0, 9), null));
            expectStatus(Status.INVALID_ARG, () -> p.prefixLookup(null, null));
            p.resetPrefixCache();
            assertEquals(0, p.prefixLookup(span(0, 9), null));
            p.check();
        }
        try (Pool p = Pool.create(small().prefixCaching(false))) {
            expectStatus(Status.UNSUPPORTED, () -> p.prefixPin(span(0, 9), null));
            assertEquals(0, p.prefixLookup(span(0, 9), null));
        }
    }

    private static List<Event> popAll(Pool p) {
        List<Event> out = new ArrayList<>();
        for (Optional<Event> e = p.popEvent(); e.isPresent(); e = p.popEvent()) {
            out.add(e.get());
        }
        return out;
    }

    @Test
    void events() {
        try (Pool p = Pool.create(small().numBlocks(4)); Keys k = Keys.create()) {
            k.setLora(7);
            p.alloc(1, span(0, 8), k);
            List<Event> evs = popAll(p);
            assertEquals(2, evs.size(), evs.toString());
            for (int i = 0; i < 2; i++) {
                Event e = evs.get(i);
                assertEquals(EventType.BLOCK_STORED, e.type());
                assertEquals(i, e.blockId());
                assertEquals(7, e.loraId());
                assertArrayEquals(span(4 * i, 4 * i + 4), e.tokens());
            }
            assertEquals(evs.get(0).hashHi(), evs.get(1).parentHashHi());
            assertEquals(evs.get(0).hashLo(), evs.get(1).parentHashLo());
            assertNotEquals(evs.get(0).hashLo(), evs.get(1).hashLo());
            assertEquals(evs.get(0).sequenceNumber() + 1, evs.get(1).sequenceNumber());
            Set<Long> stored = new HashSet<>(List.of(evs.get(0).hashLo(), evs.get(1).hashLo()));

            p.free(1);
            p.alloc(2, span(100, 116), null);
            int removed = 0;
            for (Event e : popAll(p)) {
                if (e.type() == EventType.BLOCK_REMOVED) {
                    removed++;
                    assertTrue(stored.contains(e.hashLo()), e.toString());
                }
            }
            assertEquals(2, removed);
            p.free(2);
            p.resetPrefixCache();
            assertEquals(1, popAll(p).stream().filter(e -> e.type() == EventType.ALL_BLOCKS_CLEARED).count());
        }
        try (Pool p = Pool.create(small().eventCapacity(0))) {
            p.alloc(1, span(0, 8), null);
            assertTrue(p.popEvent().isEmpty());
        }
    }
}
