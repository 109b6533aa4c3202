package dev.kvc;

import java.nio.charset.StandardCharsets;

/**
 * A failing libkvc call: the status, the operation and the library's message for that call. The
 * message is read from kvc_last_error() inside the JNI call that failed, so it belongs to that call
 * whatever thread (or carrier thread) runs next. Also thrown, with status {@link Status#STATE}, when a
 * closed Pool, Keys or Batch is used, and with the library's statuses for input the binding rejects
 * before calling C (for example a host buffer shorter than the shape needs).
 */
public class KvcException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final int statusCode;
    private final String op;
    private final String libraryMessage;

    /** Called from C (kvc.i) with the failing function's name and kvc_last_error()'s bytes. */
    KvcException(int statusCode, String op, byte[] utf8Message) {
        this(statusCode, op, new String(utf8Message, StandardCharsets.UTF_8));
    }

    KvcException(int statusCode, String op, String message) {
        super(op + ": " + statusName(statusCode) + ": " + withoutOp(op, message));
        this.statusCode = statusCode;
        this.op = op;
        this.libraryMessage = message;
    }

    KvcException(Status status, String op, String message) {
        this(status.code(), op, message);
    }

    /**
     * The library's messages start with the function's name ("kvc_free: unknown sequence 7"): said
     * once in getMessage(), "kvc_free: UNKNOWN_SEQ: unknown sequence 7", not twice.
     */
    private static String withoutOp(String op, String message) {
        String prefix = op + ": ";
        return message.startsWith(prefix) ? message.substring(prefix.length()) : message;
    }

    private static String statusName(int code) {
        Status s = Status.of(code);
        return s != null ? s.name() : "status " + code;
    }

    /** The status, or null for a code newer than this binding (see {@link #statusCode()}). */
    public Status status() {
        return Status.of(statusCode);
    }

    /** The numeric kvc_status. */
    public int statusCode() {
        return statusCode;
    }

    /** The C function (kvc_...) or binding operation that failed. */
    public String op() {
        return op;
    }

    /** The library's message alone, without op and status. */
    public String libraryMessage() {
        return libraryMessage;
    }

    static KvcException closed(String op) {
        return new KvcException(Status.STATE, op, "object is closed");
    }
}
