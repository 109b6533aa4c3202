// Software prefetches, for the host core's metadata and the CPU kernels' K/V rows
// (cpu/attention_tiles.hpp, RowPointers::prefetch_next). A volatile asm statement: GCC may drop a __builtin_prefetch whose address it
// considers dead (e.g. a function doing nothing else -- the in-place decode path lost every
// prefetch that way once); an asm statement is kept wherever it is written. Other targets fall
// back to the builtin.
#pragma once

namespace kvc {

// Asks for the cache line holding p, to be read (into L1).
inline void prefetch_read(const void *p) {
#if defined(__x86_64__) && defined(__GNUC__)
    asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char *>(p)));
#else
    __builtin_prefetch(p, 0, 3);
#endif
}

// Asks for the cache line holding p, to be written: the line comes exclusive, so the store does not
// wait for it again (prefetchw: every x86-64 CPU this library targets has it).
inline void prefetch_write(const void *p) {
#if defined(__x86_64__) && defined(__GNUC__)
    asm volatile("prefetchw %0" : : "m"(*static_cast<const char *>(p)));
#else
    __builtin_prefetch(p, 1, 3);
#endif
}

}  // namespace kvc
