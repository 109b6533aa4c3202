package dev.kvc;

import java.io.IOException;
import java.io.InputStream;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.security.CodeSource;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Loads the JNI library once (from KvcNative's static initializer). Where from, in this order:
 *
 * <ol>
 *   <li>{@code java.library.path} ({@code System.loadLibrary("kvcjni")}), the usual place;
 *   <li>the directory of kvc.jar itself, for applications that ship the jar and the two libraries
 *       (libkvcjni.so, libkvc.so.0) side by side;
 *   <li>inside the jar ({@code dev/kvc/native/<os>-<arch>/}, put there by the build): both libraries
 *       are copied to a new private temporary directory (owner-only permissions), loaded, and
 *       deleted again (a loaded library stays mapped), as zstd-jni and netty do.
 * </ol>
 *
 * libkvcjni.so finds libkvc.so.0 through its RUNPATH ($ORIGIN: the same directory), else through
 * the dynamic loader's own search (LD_LIBRARY_PATH, the ldconfig cache). A failure names the
 * library that is actually missing, and every place that was tried.
 */
final class Native {
    static final String JNI_LIB = "libkvcjni.so";
    static final String KVC_LIB = "libkvc.so.0";
    private static final Pattern MISSING =
            Pattern.compile("(lib[A-Za-z0-9_+.-]+\\.so[.0-9]*): cannot open shared object file");
    private static boolean loaded;

    private Native() {}

    static synchronized void load() {
        if (loaded) {
            return;
        }
        List<String> tried = new ArrayList<>();
        String libraryPath = System.getProperty("java.library.path");
        try {
            System.loadLibrary("kvcjni");
            loaded = true;
            return;
        } catch (UnsatisfiedLinkError e) {
            if (!isNotFound(e)) {
                throw loadFailure("found on java.library.path (" + libraryPath + ")", e);
            }
            tried.add("java.library.path (" + libraryPath + ")");
        }

        Path jarDir = jarDirectory();
        if (jarDir != null) {
            Path beside = jarDir.resolve(JNI_LIB);
            if (Files.isRegularFile(beside)) {
                try {
                    loadFile(jarDir, beside);
                    loaded = true;
                    return;
                } catch (UnsatisfiedLinkError e) {
                    throw loadFailure("next to the jar (" + beside + ")", e);
                }
            }
            tried.add("next to the jar (" + jarDir + ")");
        }

        String resourceDir = "/dev/kvc/native/" + platform() + "/";
        if (Native.class.getResource(resourceDir + JNI_LIB) != null) {
            Path dir = null;
            try {
                dir = Files.createTempDirectory("kvc-jni-");  // rwx------ on POSIX
                Path jni = extract(resourceDir, JNI_LIB, dir);
                extract(resourceDir, KVC_LIB, dir);
                loadFile(dir, jni);
                loaded = true;
                return;
            } catch (IOException e) {
                UnsatisfiedLinkError err = new UnsatisfiedLinkError(
                        "libkvc: could not extract " + JNI_LIB + " from the jar to " + dir + ": " + e);
                err.initCause(e);
                throw err;
            } catch (UnsatisfiedLinkError e) {
                throw loadFailure("extracted from the jar to " + dir, e);
            } finally {
                deleteQuietly(dir);
            }
        }
        tried.add("inside the jar (" + resourceDir.substring(1) + ": not packaged for this platform)");

        throw new UnsatisfiedLinkError("libkvc's JNI library " + JNI_LIB + " was not found on "
                + tried.get(0) + (tried.size() > 1 ? "; nor " + String.join("; nor ", tried.subList(1, tried.size())) : "")
                + ". Run with -Djava.library.path=<directory of " + JNI_LIB + "> (an install prefix's lib/),"
                + " or use the installed kvc jar, which carries the libraries for " + platform() + ".");
    }

    /** loadLibrary's own "no kvcjni in java.library.path" as opposed to a file that failed to load. */
    private static boolean isNotFound(UnsatisfiedLinkError e) {
        String m = e.getMessage();
        return m != null && m.startsWith("no kvcjni in ");
    }

    /**
     * libkvcjni.so was there but did not load: nearly always because libkvc.so.0 (its dependency) was
     * not found, which the loader reports inside a message that starts with libkvcjni.so's path.
     */
    private static UnsatisfiedLinkError loadFailure(String where, UnsatisfiedLinkError e) {
        String m = String.valueOf(e.getMessage());
        Matcher missing = MISSING.matcher(m);
        String text;
        if (missing.find()) {
            String lib = missing.group(1);
            text = "libkvc: " + JNI_LIB + " was " + where + " but its dependency " + lib + " was not found"
                    + (lib.startsWith("libkvc.") ? " (libkvc itself is not installed where the loader looks:"
                            + " put it next to " + JNI_LIB + ", which finds it through its RUNPATH $ORIGIN,"
                            + " or add its directory to LD_LIBRARY_PATH or the ldconfig cache)" : "")
                    + ": " + m;
        } else {
            text = "libkvc: " + JNI_LIB + " was " + where + " but could not be loaded: " + m;
        }
        UnsatisfiedLinkError err = new UnsatisfiedLinkError(text);
        err.initCause(e);
        return err;
    }

    /** Loads libkvc.so.0 from the same directory first when it is there, then the JNI library. */
    private static void loadFile(Path dir, Path jni) {
        Path kvc = dir.resolve(KVC_LIB);
        if (Files.isRegularFile(kvc)) {
            System.load(kvc.toAbsolutePath().toString());
        }
        System.load(jni.toAbsolutePath().toString());
    }

    private static Path jarDirectory() {
        try {
            CodeSource cs = Native.class.getProtectionDomain().getCodeSource();
            if (cs == null || cs.getLocation() == null) {
                return null;
            }
            Path p = Paths.get(cs.getLocation().toURI());
            return Files.isRegularFile(p) ? p.toAbsolutePath().getParent() : null;
        } catch (URISyntaxException | RuntimeException e) {
            return null;  // not a plain file (a module image, a custom class loader): skip this place
        }
    }

    private static Path extract(String resourceDir, String name, Path dir) throws IOException {
        Path out = dir.resolve(name);
        try (InputStream in = Native.class.getResourceAsStream(resourceDir + name)) {
            if (in == null) {
                throw new IOException(resourceDir + name + " is missing from the jar");
            }
            Files.copy(in, out, StandardCopyOption.REPLACE_EXISTING);
        }
        return out;
    }

    private static void deleteQuietly(Path dir) {
        if (dir == null) {
            return;
        }
        for (String name : new String[] {JNI_LIB, KVC_LIB}) {
            try {
                Files.deleteIfExists(dir.resolve(name));
            } catch (IOException ignored) {
                // a leftover file in a private temp directory is harmless
            }
        }
        try {
            Files.deleteIfExists(dir);
        } catch (IOException ignored) {
            // as above
        }
    }

    /** The directory name inside the jar: os.name and os.arch as the JDK reports them, e.g. linux-amd64. */
    static String platform() {
        String os = System.getProperty("os.name", "unknown").toLowerCase(Locale.ROOT).replace(' ', '_');
        String arch = System.getProperty("os.arch", "unknown").toLowerCase(Locale.ROOT);
        return os + "-" + arch;
    }
}
