package dev.kvc;

import java.nio.charset.StandardCharsets;

/** Java strings as the C API takes them: NUL-terminated UTF-8 (salt, disk path, disk identity). */
final class CStrings {
    private CStrings() {}

    /**
     * The NUL-terminated UTF-8 bytes of s. A string containing U+0000 is refused with INVALID_ARG
     * naming fn and what: C would silently truncate it.
     */
    static byte[] utf8z(String fn, String what, String s) {
        if (s.indexOf('\0') >= 0) {
            throw new KvcException(Status.INVALID_ARG, fn, what + " contains U+0000");
        }
        byte[] utf8 = s.getBytes(StandardCharsets.UTF_8);
        byte[] c = new byte[utf8.length + 1];
        System.arraycopy(utf8, 0, c, 0, utf8.length);
        return c;
    }
}
