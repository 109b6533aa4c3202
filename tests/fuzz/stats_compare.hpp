// The pool counters (kvc_stats) that both differential fuzzers compare with their model after
// every operation, listed once: fuzz_pool.cpp and fuzz_hybrid.cpp each add what only they check
// (pins and dropped events; free + used adding up).
#pragma once

#include "kvc/kvc.h"
#include "model.hpp"

namespace fuzz {

struct CounterMismatch {
    const char *what = nullptr;  // nullptr: every counter agrees
    long long library = 0, model = 0;
};

// The first shared counter where the library's stats `st` differ from model `m`; num_seqs is the
// fuzzer's own count of live sequences (each keeps its sequences in its own structure).
inline CounterMismatch first_counter_mismatch(const kvc_stats &st, const model::Pool &m, size_t num_seqs) {
    const CounterMismatch rows[] = {
        {"stats.total_blocks", st.total_blocks, m.num_blocks},
        {"stats.free_blocks", st.free_blocks, m.num_free()},
        {"stats.used_blocks", st.used_blocks, m.num_used()},
        {"stats.cached_free_blocks", st.cached_free_blocks, m.num_cached_free()},
        {"stats.num_seqs", st.num_seqs, (long long)num_seqs},
        {"stats.allocs", st.allocs, m.c.allocs},
        {"stats.frees", st.frees, m.c.frees},
        {"stats.forks", st.forks, m.c.forks},
        {"stats.appends", st.appends, m.c.appends},
        {"stats.blocks_allocated", st.blocks_allocated, m.c.blocks_allocated},
        {"stats.blocks_freed", st.blocks_freed, m.c.blocks_freed},
        {"stats.cow_copies", st.cow_copies, m.c.cow_copies},
        {"stats.pending_copies", st.pending_copies, (long long)m.pending.size()},
        {"stats.prefix_query_tokens", st.prefix_query_tokens, m.c.prefix_query_tokens},
        {"stats.prefix_hit_tokens", st.prefix_hit_tokens, m.c.prefix_hit_tokens},
        {"stats.evictions", st.evictions, m.c.evictions},
        {"stats.verify_misses", st.verify_misses, 0},
    };
    for (const CounterMismatch &r : rows)
        if (r.library != r.model) return r;
    return {};
}

}  // namespace fuzz
