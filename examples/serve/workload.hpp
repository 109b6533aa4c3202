// The demo's requests: a few shared system prompts, multi-turn follow-ups (a later request re-sends
// an earlier conversation + its reply + a new user turn, so its prefix is cached), and some requests
// asking for several parallel samples (kvc_fork + copy-on-write).
#pragma once

#include <cstdint>
#include <vector>

namespace serve {

struct Request {
    int32_t index = 0;
    int32_t system_prompt = 0;       // which shared system prompt opens the conversation
    std::vector<int32_t> user_turn;  // the new user tokens
    int32_t follows = -1;            // earlier request this continues (multi-turn), or -1
    int32_t turn = 1;                // 1 for a new conversation
    int64_t max_new_tokens = 16;
    int32_t n = 1;                   // parallel samples
    int64_t arrival_step = 0;        // earliest engine step it may start (follow-ups also wait for
                                     // the request they continue to finish)
    int64_t prompt_len = 0;          // known up front: outputs always run to max_new_tokens
};

struct Workload {
    std::vector<std::vector<int32_t>> system_prompts;
    std::vector<Request> requests;
    int64_t longest = 0;  // tokens of the longest sequence (prompt + output)
    int32_t follow_ups = 0, multi_sample = 0;
};

// Each request generates between min(12, max_new_tokens) and max_new_tokens tokens.
Workload make_workload(int32_t num_requests, int32_t vocab, uint64_t seed, int64_t max_seq_len,
                       int64_t max_new_tokens = 40);

}  // namespace serve
