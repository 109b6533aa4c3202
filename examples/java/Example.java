import dev.kvc.AllocVerdict;
import dev.kvc.BlockCopies;
import dev.kvc.Kvc;
import dev.kvc.KvcException;
import dev.kvc.Pool;
import dev.kvc.PoolConfig;
import dev.kvc.Stats;
import dev.kvc.Status;
import java.util.Arrays;

/**
 * A small scheduler loop on libkvc through the Java binding: admit prompts sharing a system
 * prompt, decode a few steps, fork a beam, get refused for lack of blocks, print the counters.
 * Run: java -Djava.library.path=<dir of libkvcjni.so> -cp kvc.jar:. Example
 */
public final class Example {
    private Example() {}

    public static void main(String[] args) {
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
    }
}
