package dev.kvc;

/**
 * libkvc refused a {@link Pool#appendBatch}: either at an entry kvc_append would refuse, the entries
 * before it appended ({@link #appended()} of them), it and the later ones not; or for bad arguments
 * in some entry, nothing appended (appended() 0). The status and message are the refused entry's (the
 * message names the entry). A scheduler listing its sequences by priority preempts from the end on
 * {@link Status#OUT_OF_BLOCKS} and calls again from entry appended().
 */
public final class AppendBatchException extends KvcException {
    private static final long serialVersionUID = 1L;

    private final int appended;

    AppendBatchException(KvcException cause, int appended) {
        super(cause.statusCode(), cause.op(), cause.libraryMessage());
        this.appended = appended;
    }

    /** The number of entries appended before the refused one. */
    public int appended() {
        return appended;
    }
}
