#include "workload.hpp"

#include <algorithm>
#include <random>

namespace serve {

Workload make_workload(int32_t num_requests, int32_t vocab, uint64_t seed, int64_t max_seq_len,
                       int64_t max_new_tokens) {
    std::mt19937_64 rng(seed ^ 0x5EEDF00Dull);
    auto uni = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
    auto tokens = [&](int64_t n) {
        std::vector<int32_t> t(static_cast<size_t>(n));
        for (int32_t &x : t) x = int32_t(uni(0, vocab - 1));
        return t;
    };
    Workload w;
    for (int64_t len : {96, 128, 160}) w.system_prompts.push_back(tokens(len));
    int64_t step = 0;
    for (int32_t i = 0; i < num_requests; i++) {
        Request r;
        r.index = i;
        r.user_turn = tokens(uni(8, 40));
        r.max_new_tokens = uni(std::min<int64_t>(12, max_new_tokens), max_new_tokens);
        r.arrival_step = step;
        step += uni(0, 3);
        // About a third continue an earlier conversation, if the result still fits max_seq_len.
        if (i >= 3 && uni(0, 99) < 35) {
            const Request &prev = w.requests[size_t(uni(0, i - 1))];
            int64_t len = prev.prompt_len + prev.max_new_tokens + int64_t(r.user_turn.size());
            if (len + r.max_new_tokens <= max_seq_len) {
                r.follows = prev.index;
                r.turn = prev.turn + 1;
                r.system_prompt = prev.system_prompt;
                r.prompt_len = len;
            }
        }
        if (r.follows < 0) {
            r.system_prompt = int32_t(uni(0, int64_t(w.system_prompts.size()) - 1));
            r.prompt_len = int64_t(w.system_prompts[size_t(r.system_prompt)].size() + r.user_turn.size());
        }
        if (uni(0, 99) < 15) r.n = int32_t(uni(2, 3));
        w.follow_ups += r.follows >= 0;
        w.multi_sample += r.n > 1;
        w.longest = std::max(w.longest, r.prompt_len + r.max_new_tokens);
        w.requests.push_back(std::move(r));
    }
    return w;
}

}  // namespace serve
