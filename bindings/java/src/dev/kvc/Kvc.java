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

    /** CUDA devices usable by the library; 0 without CUDA support, driver or GPU. */
    public static int cudaDeviceCount() {
        int[] n = new int[1];
        KvcNative.kvc_cuda_device_count(n);
        return n[0];
    }
}
