package dev.kvc;

/** A 128-bit block hash: hi and lo are the unsigned 64-bit halves (kvc_event.hash_hi / hash_lo). */
public record Hash128(long hi, long lo) {
    @Override
    public String toString() {
        return String.format("%016x%016x", hi, lo);
    }
}
