package dev.kvc;

/** Loads the JNI library once (from KvcNativeJNI's static initializer). */
final class Native {
    private static boolean loaded;

    private Native() {}

    static synchronized void load() {
        if (loaded) {
            return;
        }
        try {
            System.loadLibrary("kvcjni");
        } catch (UnsatisfiedLinkError e) {
            UnsatisfiedLinkError clear = new UnsatisfiedLinkError(
                    "libkvc's JNI library libkvcjni.so was not found on java.library.path ("
                            + System.getProperty("java.library.path")
                            + "); build bindings/java with CMake and run with"
                            + " -Djava.library.path=<directory of libkvcjni.so>: " + e.getMessage());
            clear.initCause(e);
            throw clear;
        }
        loaded = true;
    }
}
