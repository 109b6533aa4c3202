import dev.kvc.AllocVerdict;
import dev.kvc.Backend;
import dev.kvc.BlockCopies;
import dev.kvc.Kvc;
import dev.kvc.KvcException;
import dev.kvc.Pool;
import dev.kvc.PoolConfig;
import dev.kvc.Stats;
import dev.kvc.Status;
import dev.kvc.Tier;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

/**
 * A small scheduler loop on libkvc through the Java binding: admit prompts sharing a system
 * prompt, decode a few steps, fork a beam, get refused for lack of blocks, print the counters; then
 * a warm restart from a persistent disk tier, prefetched from an I/O thread.
 * Run: java -Djava.library.path=<dir of libkvcjni.so> -cp kvc.jar:. Example
 */
public final class Example {
    private Example() {}

    public static void main(String[] args) throws Exception {
        PoolConfig cfg = PoolConfig.defaults().blockSize(16).numBlocks(64).watermark(0);
        try (Pool pool = Pool.create(cfg)) {
            System.out.printf("libkvc %s: %d blocks of %d tokens%n", Kvc.versionString(), cfg.numBlocks(),
                    cfg.blockSize());
            int[] system = new int[64];
            for (int i = 0; i < system.length; i++) {
                system[i] = i;
            }
            for (long id = 1; id <= 4; id++) {
                int[] prompt = Arrays.copyOf(system, system.length + 2);
                prompt[64] = (int) (1000 * id);
                prompt[65] = (int) (1000 * id + 1);
                long cached = pool.alloc(id, prompt, null);
                System.out.printf("request %d: %d prompt tokens, %d served from the prefix cache%n", id,
                        prompt.length, cached);
            }
            for (int step = 0; step < 20; step++) {
                for (long id = 1; id <= 4; id++) {
                    pool.append(id, new int[] {step}, 0);
                }
            }
            pool.fork(1, 100);
            pool.append(100, new int[] {7}, 0);
            BlockCopies copies = pool.takePendingCopies();
            System.out.printf("copy-on-write pairs: %s -> %s%n", Arrays.toString(copies.src()),
                    Arrays.toString(copies.dst()));
            System.out.printf("beam block table: %s%n", Arrays.toString(pool.blockTable(100)));

            int[] longPrompt = new int[2000];
            AllocVerdict verdict = pool.canAlloc(longPrompt, null);
            try {
                pool.alloc(200, longPrompt, null);
                throw new IllegalStateException("a 2000-token prompt fit in 64 blocks of 16");
            } catch (KvcException e) {
                if (e.status() != Status.OUT_OF_BLOCKS) {
                    throw e;
                }
                System.out.printf("admission refused (%s): %s%n", verdict, e.libraryMessage());
            }
            for (long id : new long[] {1, 2, 3, 4, 100}) {
                pool.free(id);
            }
            pool.check();
            Stats s = pool.stats();
            System.out.printf("prefix hit rate %.2f, %d cached blocks kept, %d blocks in use%n", s.prefixHitRate(),
                    s.cachedFreeBlocks(), s.usedBlocks());
            if (s.usedBlocks() != 0 || s.prefixHitTokens() == 0) {
                throw new IllegalStateException("unexpected stats " + s);
            }
        }
        warmRestart();
    }

    /**
     * The prefix cache kept across a server restart: a disk tier in a persistent file attached with
     * the identity of the model computing the KV (another model's blocks are never recovered as
     * hits), flushed before the shutdown; after the restart an I/O thread prefetches a queued
     * request's prefix from disk off the scheduler's path, and the admission restores it from host
     * memory.
     */
    static void warmRestart() throws Exception {
        Path dir = Files.createTempDirectory("kvc-java-example");
        String file = dir.resolve("kv.bin").toString();
        String identity = "example-model@rev1;kv=f16;tp=0/1";
        PoolConfig cfg = PoolConfig.defaults().backend(Backend.CPU).blockSize(16).numBlocks(64).numLayers(2)
                .numKvHeads(2).numQHeads(4).headDim(64);
        int[] system = new int[100]; // 6 full blocks
        for (int i = 0; i < system.length; i++) {
            system[i] = 7 + i;
        }
        long written;
        try (Pool pool = Pool.create(cfg)) {
            pool.tiers().attachHost(16);
            pool.tiers().attachDisk(file, 256, Tier.DISK_PERSISTENT, identity);
            pool.alloc(1, system, null);
            // ... the forward pass writes the prompt's KV (kvc_cache_write) ...
            pool.free(1);
            written = pool.tiers().flush();
        }
        try (Pool pool = Pool.create(cfg)) { // the restart
            pool.tiers().attachHost(16);
            pool.tiers().attachDisk(file, 256, Tier.DISK_PERSISTENT, identity);
            long recovered = pool.tiers().stats(Tier.DISK).recoveredBlocks();
            ExecutorService io = Executors.newSingleThreadExecutor(); // disk reads off the scheduler's path
            long prefetched = io.submit(() -> pool.tiers().prefetch(system, null)).get();
            io.shutdown();
            long cached = pool.alloc(2, system, null);
            System.out.printf("restart: %d blocks flushed, %d recovered from disk; prefetched %d tokens, "
                    + "admission found %d cached%n", written, recovered, prefetched, cached);
            if (recovered != written || prefetched != 96 || cached != 96) {
                throw new IllegalStateException("unexpected warm restart");
            }
            pool.free(2);
        } finally {
            Files.deleteIfExists(Path.of(file));
            Files.deleteIfExists(dir);
        }
    }
}
