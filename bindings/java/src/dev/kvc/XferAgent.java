package dev.kvc;

import java.lang.ref.Cleaner;

/**
 * Moves cached prefixes between pools in different processes or machines over UCX
 * (kvc_xfer_agent): one per pool and process. The exporter leases a prompt's cached blocks and
 * hands out a descriptor ({@link #descriptor}) that the caller moves to the importer through its
 * own channel; the importer's {@link #importDescriptor} pulls the blocks (UCX active messages, or RMA gets),
 * checks the layout, the model identity and the hash chain, and enters them in its prefix cache,
 * so a later alloc of the prompt hits them. Safe for concurrent use; closing the pool closes it.
 */
public final class XferAgent implements AutoCloseable {
    /** Failure reasons (kvc_xfer_failure), index of {@link XferStats#failures()}. */
    public static final int OK = 0, FAIL_DESCRIPTOR = 1, FAIL_LAYOUT = 2, FAIL_HASH = 3, FAIL_POOL_FULL = 4,
            FAIL_PEER = 5, FAIL_TIMEOUT = 6, FAIL_LEASE = 7, FAIL_CANCELLED = 8, FAIL_DEVICE = 9;

    /** What {@link #importDescriptor}'s wait reports (kvc_xfer_import_result). */
    public record ImportResult(int failure, long blocks, long blocksPulled, long blocksCached, long blocksSkipped,
            long bytesPulled, long cachedTokens, double seconds) {}

    /** The agent's counters (kvc_xfer_stats). */
    public record XferStats(long exportsActive, long exportsTotal, long exportsExpired, long exportBlocksHeld,
            long leaseChecks, long importsStarted, long importsOk, long importsFailed, long blocksPulled,
            long blocksCached, long blocksSkipped, long bytesPulled, double importSeconds, long[] failures) {}

    private final Pool pool;
    private final PoolChild state;
    private final Cleaner.Cleanable cleanable;

    private XferAgent(Pool pool, long handle) {
        this.pool = pool;
        this.state = new PoolChild(pool.state, handle, KvcNative::kvc_xfer_agent_destroy);
        this.cleanable = Cleaners.CLEANER.register(this, PoolChild.closer(pool.state, state));
    }

    /** True when UCX can be loaded here (kvc_xfer_available); without it create() throws UNSUPPORTED. */
    public static boolean available() {
        int[] a = new int[1];
        KvcNative.kvc_xfer_available(a);
        return a[0] != 0;
    }

    /**
     * Creates an agent for pool (kvc_xfer_agent_create). modelIdentity: what computed the KV (both
     * ends must agree; "" none); transports: UCX_TLS syntax ("tcp", "sm,self"; "" = UCX's choice);
     * netDevices: UCX_NET_DEVICES ("" = UCX's choice); leaseMs / timeoutMs: 0 = 30000. Throws
     * UNSUPPORTED without UCX, for a metadata-only or CUDA pool, or with prefix caching off.
     */
    public static XferAgent create(Pool pool, String modelIdentity, String transports, String netDevices, long leaseMs,
            long timeoutMs) {
        final String fn = "kvc_xfer_agent_create";
        byte[] id = CStrings.utf8z(fn, "modelIdentity", modelIdentity == null ? "" : modelIdentity);
        byte[] tls = CStrings.utf8z(fn, "transports", transports == null ? "" : transports);
        byte[] dev = CStrings.utf8z(fn, "netDevices", netDevices == null ? "" : netDevices);
        long[] out = new long[1];
        pool.with(fn, h -> KvcNative.kvcjni_xfer_agent_create(h, id, tls, dev, leaseMs, timeoutMs, out));
        return new XferAgent(pool, out[0]);
    }

    /** Destroys the agent (kvc_xfer_agent_destroy): running imports fail, every lease ends. */
    @Override
    public void close() {
        cleanable.clean();
    }

    interface Call<T> {
        T call(long agent);
    }

    private <T> T with(String op, Call<T> f) {
        return pool.with(op, h -> state.with(op, false, f::call));
    }

    /**
     * Leases the prompt's leading full blocks cached on the device (kvc_xfer_export_prompt) until
     * {@link #releaseExport} or the lease ends (leaseMs, 0 = the agent's default). Returns the export
     * id. STATE when the prompt's first block is not cached.
     */
    public long exportPrompt(int[] tokens, Keys keys, long leaseMs) {
        final String fn = "kvc_xfer_export_prompt";
        long[] id = new long[1];
        long[] n = new long[1];
        int[] t = tokens == null ? null : tokens;
        Keys.read(fn, keys, k -> with(fn, a -> KvcNative.kvc_xfer_export_prompt(a, t, t == null ? 0 : t.length, k,
                leaseMs, id, n)));
        return id[0];
    }

    /** As exportPrompt for sequence seqId's leading cached full blocks (kvc_xfer_export_seq). */
    public long exportSeq(long seqId, long leaseMs) {
        long[] id = new long[1];
        with("kvc_xfer_export_seq", a -> KvcNative.kvc_xfer_export_seq(a, seqId, leaseMs, id, null));
        return id[0];
    }

    /** Export id's serialized descriptor (kvc_xfer_export_descriptor): opaque bytes for the importer. */
    public byte[] descriptor(long exportId) {
        final String fn = "kvc_xfer_export_descriptor";
        long[] n = new long[1];
        with(fn, a -> KvcNative.kvc_xfer_export_descriptor(a, exportId, null, 0, n));
        byte[] buf = new byte[(int) n[0]];
        with(fn, a -> KvcNative.kvc_xfer_export_descriptor(a, exportId, buf, buf.length, n));
        return buf;
    }

    /** Ends export id's lease now (kvc_xfer_export_release). */
    public void releaseExport(long exportId) {
        with("kvc_xfer_export_release", a -> KvcNative.kvc_xfer_export_release(a, exportId));
    }

    /**
     * Starts importing desc into the agent's pool for the request's keys (null = none) and returns the
     * operation id (kvc_xfer_import); wait for it with {@link #waitFor}. Refused (nothing changed) with
     * INVALID_ARG or VERSION for a damaged descriptor, another layout, identity or hash chain, and
     * OUT_OF_BLOCKS when the pool cannot take the blocks.
     */
    public long importDescriptor(byte[] desc, Keys keys) {
        final String fn = "kvc_xfer_import";
        long[] op = new long[1];
        long len = desc == null ? 0 : desc.length;
        Keys.read(fn, keys, k -> with(fn, a -> KvcNative.kvc_xfer_import(a, desc, len, k, op)));
        return op[0];
    }

    /** True when import op has finished, successfully or not (kvc_xfer_op_query). */
    public boolean done(long op) {
        int[] d = new int[1];
        with("kvc_xfer_op_query", a -> KvcNative.kvc_xfer_op_query(a, op, d));
        return d[0] != 0;
    }

    /**
     * Waits up to timeoutMs (< 0: no limit) for import op and retires it (kvc_xfer_op_wait). Throws
     * the import's failure (IO: peer gone or timeout; STATE: the lease was over; ...), or BUSY when it
     * is still running after timeoutMs.
     */
    public ImportResult waitFor(long op, long timeoutMs) {
        kvc_xfer_import_result r = new kvc_xfer_import_result();
        try {
            with("kvc_xfer_op_wait", a -> KvcNative.kvc_xfer_op_wait(a, op, timeoutMs, r));
            return new ImportResult(r.getFailure(), r.getBlocks(), r.getBlocks_pulled(), r.getBlocks_cached(),
                    r.getBlocks_skipped(), r.getBytes_pulled(), r.getCached_tokens(), r.getSeconds());
        } finally {
            r.delete();
        }
    }

    /** The agent's counters (kvc_xfer_get_stats). */
    public XferStats stats() {
        kvc_xfer_stats s = new kvc_xfer_stats();
        try {
            with("kvc_xfer_get_stats", a -> KvcNative.kvc_xfer_get_stats(a, s));
            long[] f = new long[FAIL_DEVICE + 1];
            for (int i = 0; i < f.length; i++) {
                f[i] = KvcNative.kvcjni_xfer_stats_failures(s, i);
            }
            return new XferStats(s.getExports_active(), s.getExports_total(), s.getExports_expired(),
                    s.getExport_blocks_held(), s.getLease_checks(), s.getImports_started(), s.getImports_ok(),
                    s.getImports_failed(), s.getBlocks_pulled(), s.getBlocks_cached(), s.getBlocks_skipped(),
                    s.getBytes_pulled(), s.getImport_seconds(), f);
        } finally {
            s.delete();
        }
    }
}
