// Per-tier transfer counters behind kvc_tier_get_stats. Guarded by the pool mutex.
#pragma once

#include <cstdint>

namespace kvc {

struct TierCounters {
    int64_t blocks_in = 0;   // blocks copied into this tier
    int64_t blocks_out = 0;  // blocks copied out of this tier (towards the device)
    int64_t bytes_in = 0;
    int64_t bytes_out = 0;
    int64_t transfers = 0;  // batches of copies (one executor pass per direction)
    double seconds = 0.0;   // wall time of those copies (issue time for asynchronous GPU copies)
    int64_t hits = 0;       // prefix blocks found in this tier by kvc_alloc
    int64_t evictions = 0;  // cached blocks dropped from this tier to make room
    int64_t failures = 0;   // blocks whose transfer failed (dropped or left where they were)
    int64_t checksum_failures = 0;
    int64_t io_errors = 0;
};

}  // namespace kvc
