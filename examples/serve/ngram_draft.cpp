#include "ngram_draft.hpp"

#include <algorithm>

namespace serve {

void propose_ngram_drafts(const std::vector<int32_t> &history, int64_t max_drafts, std::vector<int32_t> *drafts) {
    drafts->clear();
    if (max_drafts < 1) return;
    const int64_t len = int64_t(history.size());
    // Longer n-grams first: a 3-token match predicts better than a lone repeated token.
    for (int64_t n = 3; n >= 1; n--) {
        if (len <= n) continue;
        const int32_t *suffix = history.data() + (len - n);
        // Newest occurrence first (the recent context predicts best); start < len - n keeps at
        // least one following token.
        for (int64_t start = len - n - 1; start >= 0; start--) {
            if (!std::equal(suffix, suffix + n, history.data() + start)) continue;
            const int64_t from = start + n;
            const int64_t count = std::min(max_drafts, len - from);
            drafts->assign(history.begin() + from, history.begin() + from + count);
            return;
        }
    }
}

}  // namespace serve
