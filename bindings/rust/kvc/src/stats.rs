//! A snapshot of a pool's counters.
use kvc_sys as sys;

/// Counters of a pool (`kvc_stats`); see the C header for each field's meaning.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stats {
    pub total_blocks: i64,
    /// Refcount 0 (including cached-but-unused blocks).
    pub free_blocks: i64,
    /// Refcount > 0.
    pub used_blocks: i64,
    /// Refcount 0 and still in the prefix cache.
    pub cached_free_blocks: i64,
    pub pinned_blocks: i64,
    pub num_seqs: i64,
    pub utilization: f64,
    pub allocs: i64,
    pub frees: i64,
    pub forks: i64,
    pub appends: i64,
    pub blocks_allocated: i64,
    pub blocks_freed: i64,
    pub cow_copies: i64,
    pub pending_copies: i64,
    pub prefix_query_tokens: i64,
    pub prefix_hit_tokens: i64,
    pub prefix_hit_rate: f64,
    pub evictions: i64,
    pub verify_misses: i64,
    pub events_dropped: i64,
    /// Blocks in the prefix cache (every copy of a hash counted), held or free: what a router fed
    /// by the pool's events holds.
    pub cached_blocks_total: i64,
}

impl Stats {
    pub(crate) fn from_raw(s: &sys::kvc_stats) -> Stats {
        Stats {
            total_blocks: s.total_blocks,
            free_blocks: s.free_blocks,
            used_blocks: s.used_blocks,
            cached_free_blocks: s.cached_free_blocks,
            pinned_blocks: s.pinned_blocks,
            num_seqs: s.num_seqs,
            utilization: s.utilization,
            allocs: s.allocs,
            frees: s.frees,
            forks: s.forks,
            appends: s.appends,
            blocks_allocated: s.blocks_allocated,
            blocks_freed: s.blocks_freed,
            cow_copies: s.cow_copies,
            pending_copies: s.pending_copies,
            prefix_query_tokens: s.prefix_query_tokens,
            prefix_hit_tokens: s.prefix_hit_tokens,
            prefix_hit_rate: s.prefix_hit_rate,
            evictions: s.evictions,
            verify_misses: s.verify_misses,
            events_dropped: s.events_dropped,
            cached_blocks_total: s.cached_blocks_total,
        }
    }
}
