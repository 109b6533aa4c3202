// One request of a workload trace (a JSON line, see README.md "Trace format") and the rules that
// turn it into token ids.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace sim {

// A piece of a prompt.
//  - Stream: the first `len` tokens of the named, deterministic token stream `id`. Two segments with
//    the same id share their common leading tokens, which is how traces express shared prefixes
//    (system prompts, documents, earlier conversation turns).
//  - Random: `len` tokens unique to this request.
//  - Tokens: literal token ids.
struct Segment {
    enum class Kind { Stream, Random, Tokens };
    Kind kind = Kind::Random;
    std::string id;
    int64_t len = 0;
    std::vector<int32_t> tokens;
};

struct TraceRequest {
    double t = 0.0;            // arrival time in seconds
    std::string cls = "trace"; // workload class, for the per-class report
    std::vector<Segment> segments;
    int64_t output_len = 1;    // tokens generated per sample
    int32_t n = 1;             // parallel samples sharing the prompt (fork + copy-on-write)
    std::string salt;          // cache salt (tenant isolation)
    uint64_t lora = 0;         // LoRA adapter id, 0 = none
    int32_t priority = 50;     // cache retention priority 0..100
    int64_t line = 0;          // source line (1-based) when read from a file; 0 when generated

    int64_t prompt_len() const;
};

constexpr int32_t kVocab = 32000;  // token ids of generated streams lie in [0, kVocab)

// Remembers the stream tokens already generated, so a 2048-token system prompt shared by a hundred
// thousand requests is hashed once, not per request. Bounded: it starts over past max_tokens.
class StreamCache {
public:
    explicit StreamCache(size_t max_tokens = size_t(1) << 22) : max_tokens_(max_tokens) {}
    // The first len tokens of stream `id` (valid until the next call).
    const int32_t *tokens(const std::string &id, int64_t len);

private:
    std::unordered_map<std::string, std::vector<int32_t>> streams_;
    size_t held_ = 0, max_tokens_;
};

// Materializes the prompt's token ids. `request_seed` makes Random segments differ between
// requests (it is derived from the run seed and the request's index).
void build_prompt(const TraceRequest &r, uint64_t request_seed, StreamCache *cache, std::vector<int32_t> *out);

// Token `index` (0-based) of the output of sample `sample`. Output continues the prompt's last
// segment when that is a Stream segment (output token j is token len + j of that stream), so a later
// request using a longer segment of the same stream re-reads this reply: that is how a multi-turn
// follow-up shares the earlier answer. Sample 0 follows the stream; other samples of an n > 1 request
// are random (they diverge, as parallel samples do). Otherwise outputs are random per request.
int32_t output_token(const TraceRequest &r, uint64_t request_seed, int32_t sample, int64_t index);

// Parses one JSON line. Returns false and sets *err (without the file/line prefix) when the line is
// not a valid request.
bool parse_trace_line(const std::string &line, TraceRequest *out, std::string *err);

// Serializes a request as one JSON line (no newline) that parse_trace_line reads back identically.
std::string format_trace_line(const TraceRequest &r);

// Reads a whole trace file. Blank lines are skipped. On the first bad line returns false with
// *err = "FILE:LINE: message" (or "FILE: cannot open ..."). Requests are returned sorted by arrival
// time (stable, so equal times keep file order).
bool read_trace_file(const std::string &path, std::vector<TraceRequest> *out, std::string *err);

bool write_trace_file(const std::string &path, const std::vector<TraceRequest> &reqs, std::string *err);

}  // namespace sim
