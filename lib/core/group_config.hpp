// Validation and layout of a hybrid pool's groups (kvc_pool_create_hybrid): the page size rule and
// each group's place inside a page.
#pragma once

#include <cstdint>
#include <vector>

#include "core/groups.hpp"
#include "kvc/kvc.h"

namespace kvc {

// Pages are rounded up to this many bytes, so that every group's rows keep the alignment the
// kernels' vector loads need whatever the other groups' sizes.
constexpr int64_t kPageAlign = 256;

struct HybridShape {
    kvc_pool_config config{};       // cfg with the shape fields resolved from the groups
    std::vector<PoolGroup> groups;  // kind, windows, state bytes, group_bytes; layouts with 0 blocks
    std::vector<int32_t> layer_group, layer_in_group;
    int64_t page_bytes = 0;
};

// Checks the groups and the layer map against cfg (struct sizes, kinds, windows, state sizes,
// heads, layer counts) and lays the groups out in a page. KVC_OK and *out filled, or the refusal.
kvc_status hybrid_shape(const kvc_pool_config *cfg, const kvc_group_config *groups, int32_t num_groups,
                        const int32_t *layer_to_group, int32_t num_layers, HybridShape *out);

// A group's layout in a pool of num_blocks pages of page_bytes (block_stride = page_bytes).
void group_layout_resize(KvLayout *l, int64_t num_blocks, int64_t page_bytes);

}  // namespace kvc
