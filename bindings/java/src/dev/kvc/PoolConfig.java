package dev.kvc;

/**
 * Pool configuration (kvc_pool_config). {@link #defaults()} gives the library's defaults; the
 * setters return this for chaining.
 */
public final class PoolConfig implements Cloneable {
    private int blockSize;
    private int numLayers;
    private int numKvHeads;
    private int numQHeads;
    private int headDim;
    private DType kvDType;
    private long numBlocks;
    private long memoryBudgetBytes;
    private double memoryUtilization;
    private double watermark;
    private long maxSeqLen;
    private boolean prefixCaching;
    private Backend backend;
    private int device;
    private int eventCapacity;
    private double gpuMemoryUtilization;

    private PoolConfig() {}

    /** The library's defaults (kvc_pool_config_default). */
    public static PoolConfig defaults() {
        kvc_pool_config c = new kvc_pool_config();
        try {
            KvcNative.kvc_pool_config_default(c);
            return fromNative(c);
        } finally {
            c.delete();
        }
    }

    /** Bytes one block occupies across all layers (kvc_bytes_per_block). */
    public long bytesPerBlock() {
        kvc_pool_config c = toNative();
        try {
            long[] out = new long[1];
            KvcNative.kvc_bytes_per_block(c, out);
            return out[0];
        } finally {
            c.delete();
        }
    }

    /** Blocks that fit in budgetBytes at this utilization (kvc_blocks_for_budget). */
    public long blocksForBudget(long budgetBytes, double utilization) {
        kvc_pool_config c = toNative();
        try {
            long[] out = new long[1];
            KvcNative.kvc_blocks_for_budget(c, budgetBytes, utilization, out);
            return out[0];
        } finally {
            c.delete();
        }
    }

    kvc_pool_config toNative() {
        kvc_pool_config c = new kvc_pool_config();
        KvcNative.kvc_pool_config_default(c);
        c.setBlock_size(blockSize);
        c.setNum_layers(numLayers);
        c.setNum_kv_heads(numKvHeads);
        c.setNum_q_heads(numQHeads);
        c.setHead_dim(headDim);
        c.setKv_dtype(kvDType.code());
        c.setNum_blocks(numBlocks);
        c.setMemory_budget_bytes(memoryBudgetBytes);
        c.setMemory_utilization(memoryUtilization);
        c.setWatermark(watermark);
        c.setMax_seq_len(maxSeqLen);
        c.setPrefix_caching(prefixCaching ? 1 : 0);
        c.setBackend(backend.code());
        c.setDevice(device);
        c.setEvent_capacity(eventCapacity);
        c.setGpu_memory_utilization(gpuMemoryUtilization);
        return c;
    }

    static PoolConfig fromNative(kvc_pool_config c) {
        PoolConfig p = new PoolConfig();
        p.blockSize = c.getBlock_size();
        p.numLayers = c.getNum_layers();
        p.numKvHeads = c.getNum_kv_heads();
        p.numQHeads = c.getNum_q_heads();
        p.headDim = c.getHead_dim();
        p.kvDType = DType.of(c.getKv_dtype());
        p.numBlocks = c.getNum_blocks();
        p.memoryBudgetBytes = c.getMemory_budget_bytes();
        p.memoryUtilization = c.getMemory_utilization();
        p.watermark = c.getWatermark();
        p.maxSeqLen = c.getMax_seq_len();
        p.prefixCaching = c.getPrefix_caching() != 0;
        p.backend = Backend.of(c.getBackend());
        p.device = c.getDevice();
        p.eventCapacity = c.getEvent_capacity();
        p.gpuMemoryUtilization = c.getGpu_memory_utilization();
        return p;
    }

    @Override
    public PoolConfig clone() {
        try {
            return (PoolConfig) super.clone();
        } catch (CloneNotSupportedException e) {
            throw new AssertionError(e);
        }
    }

    @Override
    public String toString() {
        return "PoolConfig{blockSize=" + blockSize + ", numLayers=" + numLayers + ", numKvHeads=" + numKvHeads
                + ", numQHeads=" + numQHeads + ", headDim=" + headDim + ", kvDType=" + kvDType
                + ", numBlocks=" + numBlocks + ", memoryBudgetBytes=" + memoryBudgetBytes
                + ", memoryUtilization=" + memoryUtilization + ", watermark=" + watermark
                + ", maxSeqLen=" + maxSeqLen + ", prefixCaching=" + prefixCaching + ", backend=" + backend
                + ", device=" + device + ", eventCapacity=" + eventCapacity
                + ", gpuMemoryUtilization=" + gpuMemoryUtilization + "}";
    }

    /** Tokens per block. */
    public int blockSize() { return blockSize; }
    public PoolConfig blockSize(int v) { blockSize = v; return this; }
    public int numLayers() { return numLayers; }
    public PoolConfig numLayers(int v) { numLayers = v; return this; }
    public int numKvHeads() { return numKvHeads; }
    public PoolConfig numKvHeads(int v) { numKvHeads = v; return this; }
    /** Query heads, a multiple of numKvHeads; 0 = numKvHeads. */
    public int numQHeads() { return numQHeads; }
    public PoolConfig numQHeads(int v) { numQHeads = v; return this; }
    public int headDim() { return headDim; }
    public PoolConfig headDim(int v) { headDim = v; return this; }
    public DType kvDType() { return kvDType; }
    public PoolConfig kvDType(DType v) { kvDType = v; return this; }
    /** Blocks in the pool; 0 = derive from the memory budget. */
    public long numBlocks() { return numBlocks; }
    public PoolConfig numBlocks(long v) { numBlocks = v; return this; }
    public long memoryBudgetBytes() { return memoryBudgetBytes; }
    public PoolConfig memoryBudgetBytes(long v) { memoryBudgetBytes = v; return this; }
    public double memoryUtilization() { return memoryUtilization; }
    public PoolConfig memoryUtilization(double v) { memoryUtilization = v; return this; }
    /** Fraction of blocks canAlloc keeps free, [0,1). */
    public double watermark() { return watermark; }
    public PoolConfig watermark(double v) { watermark = v; return this; }
    /** Longest sequence in tokens; 0 = unlimited. */
    public long maxSeqLen() { return maxSeqLen; }
    public PoolConfig maxSeqLen(long v) { maxSeqLen = v; return this; }
    public boolean prefixCaching() { return prefixCaching; }
    public PoolConfig prefixCaching(boolean v) { prefixCaching = v; return this; }
    public Backend backend() { return backend; }
    public PoolConfig backend(Backend v) { backend = v; return this; }
    public int device() { return device; }
    public PoolConfig device(int v) { device = v; return this; }
    /** KV event ring size; 0 disables events. */
    public int eventCapacity() { return eventCapacity; }
    public PoolConfig eventCapacity(int v) { eventCapacity = v; return this; }
    public double gpuMemoryUtilization() { return gpuMemoryUtilization; }
    public PoolConfig gpuMemoryUtilization(double v) { gpuMemoryUtilization = v; return this; }
}
