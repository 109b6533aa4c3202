// Validation and sizing of kvc_pool_config (shared by the sizing helpers and kvc_pool_create).
#pragma once

#include "storage/kv_layout.hpp"

namespace kvc {

// Checks struct_size and the model shape / dtype, and fills a layout with num_blocks = 0.
// `fn` names the calling API function in messages.
kvc_status config_layout(const kvc_pool_config *cfg, const char *fn, KvLayout *out);

// floor(budget x utilization / bytes_per_block), exact for every int64 budget.
int64_t blocks_in_budget(int64_t budget, double utilization, int64_t bytes_per_block);

}  // namespace kvc
