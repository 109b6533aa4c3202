// Planning helpers shared by the tier sources (pool mutex held).
#pragma once

#include "tier/tiers.hpp"

namespace kvc {

// Appends a job to Tiers::pending (never allocates; see Tiers::pending).
void tier_push_job(Tiers *t, uint8_t kind, int32_t block, int32_t host, int32_t disk);

// Claims a host slot for new content: a free one, else the LRU victim (which spills to the disk
// tier if there is one). -1 when every slot is held or busy.
int32_t tier_take_host_slot(kvc_pool *p, Tiers *t);

}  // namespace kvc
