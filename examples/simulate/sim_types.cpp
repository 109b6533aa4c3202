#include "sim_types.hpp"

#include <unordered_map>

namespace sim {

ClassIndex index_classes(const std::vector<TraceRequest> &trace) {
    ClassIndex ci;
    std::unordered_map<std::string, int32_t> ids;
    ci.of_request.reserve(trace.size());
    for (const TraceRequest &r : trace) {
        auto it = ids.find(r.cls);
        if (it == ids.end()) {
            it = ids.emplace(r.cls, int32_t(ci.names.size())).first;
            ci.names.push_back(r.cls);
        }
        ci.of_request.push_back(it->second);
    }
    return ci;
}

uint64_t request_seed(uint64_t run_seed, size_t request_index) {
    uint64_t x = run_seed * 0x9E3779B97F4A7C15ull + uint64_t(request_index) + 1;
    x = (x ^ (x >> 33)) * 0xFF51AFD7ED558CCDull;
    x = (x ^ (x >> 33)) * 0xC4CEB9FE1A85EC53ull;
    return x ^ (x >> 33);
}

}  // namespace sim
