package dev.kvc;

import static dev.kvc.TestUtil.small;
import static dev.kvc.TestUtil.span;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

class ConcurrencyTest {
    /** Many threads alloc/append/fork/free on one pool while others read; invariants hold after. */
    @Test
    void manyThreadsOnOnePool() throws Exception {
        final int workers = 8;
        final int iters = 300;
        try (Pool p = Pool.create(small().numBlocks(512)); Keys keys = Keys.create()) {
            keys.setSalt("shared");
            ConcurrentLinkedQueue<Throwable> errors = new ConcurrentLinkedQueue<>();
            AtomicLong outOfBlocks = new AtomicLong();
            AtomicBoolean stop = new AtomicBoolean();
            List<Thread> threads = new ArrayList<>();
            for (int g = 0; g < workers; g++) {
                final int gid = g;
                threads.add(new Thread(() -> {
                    try {
                        for (int i = 0; i < iters; i++) {
                            long seq = ((long) gid << 32) | i;
                            long child = seq | (1L << 31);
                            int[] prompt = java.util.Arrays.copyOf(span(0, 4 + i % 9), 4 + i % 9 + 2);
                            prompt[prompt.length - 2] = 1000 + gid;
                            prompt[prompt.length - 1] = i;
                            try {
                                p.alloc(seq, prompt, i % 3 == 0 ? keys : null);
                            } catch (KvcException e) {
                                if (e.status() != Status.OUT_OF_BLOCKS) {
                                    throw e;
                                }
                                outOfBlocks.incrementAndGet();
                                continue;
                            }
                            try {
                                p.append(seq, new int[] {1, 2, 3, 4, 5}, i % 2);
                            } catch (KvcException e) {
                                if (e.status() != Status.OUT_OF_BLOCKS) {
                                    throw e;
                                }
                            }
                            if (i % 4 == 0) {
                                p.fork(seq, child);
                                try {
                                    p.append(child, new int[] {9}, 0);
                                } catch (KvcException e) {
                                    if (e.status() != Status.OUT_OF_BLOCKS) {
                                        throw e;
                                    }
                                }
                                p.blockTable(child);
                                p.free(child);
                            }
                            p.slotMapping(seq, 0, 4);
                            p.free(seq);
                        }
                    } catch (Throwable t) {
                        errors.add(t);
                    }
                }));
            }
            for (int r = 0; r < 3; r++) {
                final int role = r;
                threads.add(new Thread(() -> {
                    try {
                        for (int i = 0; !stop.get(); i++) {
                            switch (role) {
                                case 0: p.stats(); break;
                                case 1: p.prefixLookup(span(0, 12), null); break;
                                default: keys.setPriority(i % 101); p.popEvent(); p.takePendingCopies(); break;
                            }
                        }
                    } catch (Throwable t) {
                        errors.add(t);
                    }
                }));
            }
            for (Thread t : threads) {
                t.start();
            }
            for (int i = 0; i < workers; i++) {
                threads.get(i).join();
            }
            stop.set(true);
            for (Thread t : threads) {
                t.join();
            }
            if (!errors.isEmpty()) {
                AssertionError e = new AssertionError(errors.size() + " thread(s) failed");
                errors.forEach(e::addSuppressed);
                throw e;
            }
            p.check();
            Stats s = p.stats();
            assertEquals(0, s.numSeqs());
            assertEquals(0, s.usedBlocks());
            assertEquals(512, s.freeBlocks());
            assertEquals((long) workers * iters, s.allocs() + outOfBlocks.get());
            assertTrue(s.prefixHitTokens() > 0);
        }
    }

    /** close() racing with calls on other threads: each call works or throws STATE, never crashes. */
    @Test
    void closeWhileInUse() throws Exception {
        for (int round = 0; round < 5; round++) {
            Pool p = Pool.create(small());
            ConcurrentLinkedQueue<Throwable> errors = new ConcurrentLinkedQueue<>();
            List<Thread> threads = new ArrayList<>();
            for (int g = 0; g < 4; g++) {
                final int gid = g;
                threads.add(new Thread(() -> {
                    for (int i = 0; i < 5000; i++) {
                        long seq = gid * 100000L + i;
                        try {
                            p.alloc(seq, span(0, 5), null);
                            p.free(seq);
                        } catch (KvcException e) {
                            if (e.status() == Status.STATE) {
                                return; // closed
                            }
                            if (e.status() != Status.OUT_OF_BLOCKS) {
                                errors.add(e);
                                return;
                            }
                        }
                    }
                }));
            }
            threads.forEach(Thread::start);
            Thread.sleep(2);
            p.close();
            for (Thread t : threads) {
                t.join();
            }
            p.close();
            assertTrue(errors.isEmpty(), errors.toString());
        }
    }

    /** The exception's message is that of the failing call on each thread. */
    @Test
    void messagesPerThread() throws Exception {
        try (Pool p = Pool.create(small())) {
            ConcurrentLinkedQueue<String> problems = new ConcurrentLinkedQueue<>();
            List<Thread> threads = new ArrayList<>();
            for (int g = 0; g < 6; g++) {
                final long missing = 1000 + g;
                threads.add(new Thread(() -> {
                    for (int i = 0; i < 500; i++) {
                        try {
                            p.free(missing);
                            problems.add("free of an unknown sequence succeeded");
                        } catch (KvcException e) {
                            if (!e.libraryMessage().contains(Long.toString(missing))) {
                                problems.add("thread for " + missing + " got: " + e.libraryMessage());
                            }
                        }
                    }
                }));
            }
            threads.forEach(Thread::start);
            for (Thread t : threads) {
                t.join();
            }
            assertTrue(problems.isEmpty(), problems.toString());
        }
    }
}
