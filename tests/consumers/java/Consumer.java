// The smallest useful program against the installed kvc jar, outside the libkvc tree: a prefix hit
// between two requests sharing a 32-token prompt, checked exactly; the library's version against the
// header's and the jar manifest's; and one error's message (the function named once). Compiled and
// run by tests/consumers/java.sh with each way of finding the native libraries.
import dev.kvc.Kvc;
import dev.kvc.KvcException;
import dev.kvc.Pool;
import dev.kvc.PoolConfig;
import dev.kvc.Status;

public final class Consumer {
    public static void main(String[] args) {
        int[] prompt = new int[40];
        for (int i = 0; i < prompt.length; i++) {
            prompt[i] = i + 1;
        }
        try (Pool pool = Pool.create(PoolConfig.defaults().blockSize(16).numBlocks(8))) {
            check(pool.alloc(1, prompt, null) == 0, "first request cached nothing");
            // Two full blocks of the shared prompt are reused; the partial third block never is.
            check(pool.alloc(2, prompt, null) == 32, "second request cached 32 tokens");
            try {
                pool.free(7);
                check(false, "free of an unknown sequence threw");
            } catch (KvcException e) {
                String m = e.getMessage();
                check(e.status() == Status.UNKNOWN_SEQ, "status UNKNOWN_SEQ: " + m);
                check(m.startsWith("kvc_free: UNKNOWN_SEQ: ") && m.indexOf("kvc_free") == m.lastIndexOf("kvc_free"),
                        "message names kvc_free once: " + m);
            }
        }
        check(Kvc.version() == Kvc.headerVersion(), "library and header versions agree");
        String jarVersion = Kvc.class.getPackage().getImplementationVersion();
        check(Kvc.versionString().equals(jarVersion),
                "jar manifest version " + jarVersion + " is the library's " + Kvc.versionString());
        System.out.println("kvc-consumer ok: libkvc " + Kvc.versionString() + ", 32 of 40 prompt tokens cached");
    }

    private static void check(boolean ok, String what) {
        if (!ok) {
            System.err.println("kvc-consumer: FAILED: " + what);
            System.exit(1);
        }
    }
}
