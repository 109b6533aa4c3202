// Prompt-lookup drafting for speculative decoding (no draft model): the tokens that followed the most
// recent earlier occurrence of the sequence's last n tokens (n = 3, then 2, then 1) in its own history.
// Repetitive text (quoted conversation, code, lists) makes such guesses right often, and a wrong
// guess costs only the verifier's work on it: the verify step samples every position anyway.
#pragma once

#include <cstdint>
#include <vector>

namespace serve {

// Writes up to max_drafts proposed next tokens of `history` to *drafts (cleared first); none when no
// earlier occurrence of its last 1..3 tokens exists or max_drafts < 1.
void propose_ngram_drafts(const std::vector<int32_t> &history, int64_t max_drafts, std::vector<int32_t> *drafts);

}  // namespace serve
