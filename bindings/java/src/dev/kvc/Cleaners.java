package dev.kvc;

import java.lang.ref.Cleaner;

/** The one Cleaner that releases Pool, Keys and Batch objects that became unreachable unclosed. */
final class Cleaners {
    static final Cleaner CLEANER = Cleaner.create();

    private Cleaners() {}
}
