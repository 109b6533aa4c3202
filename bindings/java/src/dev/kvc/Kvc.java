package dev.kvc;

/** Library-wide functions: versions and CUDA devices. */
public final class Kvc {
    private Kvc() {}

    /** The loaded library's version as major*10000 + minor*100 + patch (kvc_version). */
    public static int version() {
        return KvcNative.kvc_version();
    }

    /** The loaded library's version as "major.minor.patch" (kvc_version_string). */
    public static String versionString() {
        return KvcNative.kvc_version_string();
    }

    /** KVC_VERSION_NUMBER of the kvc.h this binding was generated from. */
    public static int headerVersion() {
        return KvcNative.kvcjni_header_version();
    }

    /**
     * The chained hashes of the prompt's full blocks, block 0 first, exactly as a pool with this
     * block size and these keys computes them and reports them in its events (kvc_hash_blocks); the
     * partial last block has none. Needs no pool: a KV-aware router predicts hits with it. keys may
     * be null; only its LoRA id, salt and multimodal items count. The bytes hashed are specified in
     * the libkvc README ("Block hash specification").
     */
    public static Hash128[] hashBlocks(int blockSize, int[] tokens, Keys keys) {
        int[] t = tokens == null ? new int[0] : tokens;
        int full = blockSize > 0 ? t.length / blockSize : 0;
        long[] hi = new long[full];
        long[] lo = new long[full];
        long[] n = new long[1];
        Keys.read("kvc_hash_blocks", keys, k -> KvcNative.kvc_hash_blocks(blockSize, k, t, t.length, hi, lo, full, n));
        Hash128[] out = new Hash128[Math.toIntExact(n[0])];
        for (int i = 0; i < out.length; i++) {
            out[i] = new Hash128(hi[i], lo[i]);
        }
        return out;
    }

    /** CUDA devices usable by the library; 0 without CUDA support, driver or GPU. */
    public static int cudaDeviceCount() {
        int[] n = new int[1];
        KvcNative.kvc_cuda_device_count(n);
        return n[0];
    }
}
