package dev.kvc;

/** Copy-on-write pairs drained from a pool: src[i]'s KV must be copied to dst[i]. */
public record BlockCopies(int[] src, int[] dst) {
    public int count() {
        return src.length;
    }
}
