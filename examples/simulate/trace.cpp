#include "trace.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "json.hpp"

namespace sim {

namespace {

uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

uint64_t fnv1a(const std::string &s) {
    uint64_t h = 1469598103934665603ull;
    for (unsigned char c : s) {
        h ^= c;
        h *= 1099511628211ull;
    }
    return h;
}

int32_t stream_token(uint64_t stream_hash, int64_t index) {
    return int32_t(splitmix64(stream_hash ^ splitmix64(uint64_t(index))) % kVocab);
}

int32_t random_token(uint64_t request_seed, uint64_t salt, int64_t index) {
    return int32_t(splitmix64(request_seed * 0x100000001B3ull ^ splitmix64(salt * 1315423911ull + uint64_t(index))) % kVocab);
}

// ---- field readers with messages that name the field ----------------------------------------

bool read_int(const JsonValue &v, const char *name, int64_t lo, int64_t hi, int64_t *out, std::string *err) {
    if (v.kind != JsonValue::Kind::Number || v.number != std::floor(v.number)) {
        *err = std::string("\"") + name + "\" must be an integer";
        return false;
    }
    if (v.number < double(lo) || v.number > double(hi)) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "\"%s\" is %.17g, outside [%lld, %lld]", name, v.number, (long long)lo, (long long)hi);
        *err = buf;
        return false;
    }
    *out = int64_t(v.number);
    return true;
}

bool read_tokens(const JsonValue &v, const char *name, std::vector<int32_t> *out, std::string *err) {
    if (v.kind != JsonValue::Kind::Array || v.items.empty()) {
        *err = std::string("\"") + name + "\" must be a non-empty array of token ids";
        return false;
    }
    out->reserve(v.items.size());
    for (size_t i = 0; i < v.items.size(); i++) {
        int64_t tok = 0;
        std::string field = std::string(name) + "[" + std::to_string(i) + "]";
        if (!read_int(v.items[i], field.c_str(), 0, INT32_MAX, &tok, err)) return false;
        out->push_back(int32_t(tok));
    }
    return true;
}

bool read_segment(const JsonValue &v, size_t index, Segment *seg, std::string *err) {
    std::string where = "prompt_segments[" + std::to_string(index) + "]";
    if (!v.is_object()) {
        *err = where + " must be an object like {\"id\":\"sys\",\"len\":2048} or {\"rand\":37}";
        return false;
    }
    const JsonValue *id = v.find("id"), *len = v.find("len"), *rnd = v.find("rand"), *toks = v.find("tokens");
    for (const auto &m : v.members) {
        if (m.first != "id" && m.first != "len" && m.first != "rand" && m.first != "tokens") {
            *err = where + ": unknown key \"" + m.first + "\" (expected id+len, rand or tokens)";
            return false;
        }
    }
    int kinds = (id || len ? 1 : 0) + (rnd ? 1 : 0) + (toks ? 1 : 0);
    if (kinds != 1) {
        *err = where + " must have exactly one of: \"id\" with \"len\", \"rand\", \"tokens\"";
        return false;
    }
    if (id || len) {
        if (!id || id->kind != JsonValue::Kind::String || id->text.empty()) {
            *err = where + ": \"id\" must be a non-empty string";
            return false;
        }
        if (!len) {
            *err = where + ": \"len\" is missing";
            return false;
        }
        seg->kind = Segment::Kind::Stream;
        seg->id = id->text;
        return read_int(*len, (where + ".len").c_str(), 1, int64_t(1) << 30, &seg->len, err);
    }
    if (rnd) {
        seg->kind = Segment::Kind::Random;
        return read_int(*rnd, (where + ".rand").c_str(), 1, int64_t(1) << 30, &seg->len, err);
    }
    seg->kind = Segment::Kind::Tokens;
    if (!read_tokens(*toks, (where + ".tokens").c_str(), &seg->tokens, err)) return false;
    seg->len = int64_t(seg->tokens.size());
    return true;
}

}  // namespace

int64_t TraceRequest::prompt_len() const {
    int64_t total = 0;
    for (const Segment &s : segments) total += s.len;
    return total;
}

const int32_t *StreamCache::tokens(const std::string &id, int64_t len) {
    std::vector<int32_t> &v = streams_[id];
    if (int64_t(v.size()) < len) {
        if (held_ + size_t(len) - v.size() > max_tokens_) {
            streams_.clear();  // start over rather than grow without bound
            held_ = 0;
            return tokens(id, len);
        }
        const uint64_t h = fnv1a(id);
        held_ += size_t(len) - v.size();
        for (int64_t i = int64_t(v.size()); i < len; i++) v.push_back(stream_token(h, i));
    }
    return v.data();
}

void build_prompt(const TraceRequest &r, uint64_t request_seed, StreamCache *cache, std::vector<int32_t> *out) {
    out->clear();
    out->reserve(size_t(r.prompt_len()) + size_t(r.output_len));
    for (size_t si = 0; si < r.segments.size(); si++) {
        const Segment &s = r.segments[si];
        switch (s.kind) {
            case Segment::Kind::Stream: {
                const int32_t *t = cache->tokens(s.id, s.len);
                out->insert(out->end(), t, t + s.len);
                break;
            }
            case Segment::Kind::Random:
                for (int64_t i = 0; i < s.len; i++) out->push_back(random_token(request_seed, si + 1, i));
                break;
            case Segment::Kind::Tokens:
                out->insert(out->end(), s.tokens.begin(), s.tokens.end());
                break;
        }
    }
}

int32_t output_token(const TraceRequest &r, uint64_t request_seed, int32_t sample, int64_t index) {
    if (sample == 0 && !r.segments.empty() && r.segments.back().kind == Segment::Kind::Stream) {
        const Segment &last = r.segments.back();
        return stream_token(fnv1a(last.id), last.len + index);
    }
    return random_token(request_seed, 0x5EED0000ull + uint64_t(sample), index);
}

bool parse_trace_line(const std::string &line, TraceRequest *out, std::string *err) {
    JsonValue v;
    JsonError jerr;
    if (!json_parse(line, &v, &jerr)) {
        *err = "invalid JSON at column " + std::to_string(jerr.column) + ": " + jerr.message;
        return false;
    }
    if (!v.is_object()) {
        *err = "a trace line must be a JSON object";
        return false;
    }
    static const char *known[] = {"t", "class", "prompt", "prompt_segments", "output_len", "n", "salt", "lora", "priority"};
    for (const auto &m : v.members) {
        if (std::find_if(std::begin(known), std::end(known), [&](const char *k) { return m.first == k; }) == std::end(known)) {
            *err = "unknown key \"" + m.first +
                   "\" (known: t, class, prompt, prompt_segments, output_len, n, salt, lora, priority)";
            return false;
        }
    }
    TraceRequest r;
    if (const JsonValue *t = v.find("t")) {
        if (t->kind != JsonValue::Kind::Number || t->number < 0) {
            *err = "\"t\" must be a number >= 0 (arrival time in seconds)";
            return false;
        }
        r.t = t->number;
    }
    if (const JsonValue *c = v.find("class")) {
        if (c->kind != JsonValue::Kind::String || c->text.empty()) {
            *err = "\"class\" must be a non-empty string";
            return false;
        }
        r.cls = c->text;
    }
    const JsonValue *prompt = v.find("prompt"), *segs = v.find("prompt_segments");
    if ((prompt != nullptr) == (segs != nullptr)) {
        *err = "exactly one of \"prompt\" (token ids) or \"prompt_segments\" is required";
        return false;
    }
    if (prompt) {
        Segment s;
        s.kind = Segment::Kind::Tokens;
        if (!read_tokens(*prompt, "prompt", &s.tokens, err)) return false;
        s.len = int64_t(s.tokens.size());
        r.segments.push_back(std::move(s));
    } else {
        if (segs->kind != JsonValue::Kind::Array || segs->items.empty()) {
            *err = "\"prompt_segments\" must be a non-empty array";
            return false;
        }
        for (size_t i = 0; i < segs->items.size(); i++) {
            Segment s;
            if (!read_segment(segs->items[i], i, &s, err)) return false;
            r.segments.push_back(std::move(s));
        }
    }
    const JsonValue *olen = v.find("output_len");
    if (!olen) {
        *err = "\"output_len\" is missing";
        return false;
    }
    if (!read_int(*olen, "output_len", 1, int64_t(1) << 30, &r.output_len, err)) return false;
    int64_t tmp = 0;
    if (const JsonValue *n = v.find("n")) {
        if (!read_int(*n, "n", 1, 64, &tmp, err)) return false;
        r.n = int32_t(tmp);
    }
    if (const JsonValue *s = v.find("salt")) {
        if (s->kind != JsonValue::Kind::String || s->text.size() > 256) {
            *err = "\"salt\" must be a string of at most 256 bytes";
            return false;
        }
        r.salt = s->text;
    }
    if (const JsonValue *l = v.find("lora")) {
        if (!read_int(*l, "lora", 0, int64_t(1) << 53, &tmp, err)) return false;
        r.lora = uint64_t(tmp);
    }
    if (const JsonValue *p = v.find("priority")) {
        if (!read_int(*p, "priority", 0, 100, &tmp, err)) return false;
        r.priority = int32_t(tmp);
    }
    *out = std::move(r);
    return true;
}

std::string format_trace_line(const TraceRequest &r) {
    std::string o = "{\"t\":";
    char num[64];
    std::snprintf(num, sizeof num, "%.6f", r.t);
    o += num;
    o += ",\"class\":";
    json_append_string(&o, r.cls);
    o += ",\"prompt_segments\":[";
    for (size_t i = 0; i < r.segments.size(); i++) {
        const Segment &s = r.segments[i];
        if (i) o += ',';
        switch (s.kind) {
            case Segment::Kind::Stream:
                o += "{\"id\":";
                json_append_string(&o, s.id);
                o += ",\"len\":" + std::to_string(s.len) + "}";
                break;
            case Segment::Kind::Random: o += "{\"rand\":" + std::to_string(s.len) + "}"; break;
            case Segment::Kind::Tokens:
                o += "{\"tokens\":[";
                for (size_t k = 0; k < s.tokens.size(); k++) {
                    if (k) o += ',';
                    o += std::to_string(s.tokens[k]);
                }
                o += "]}";
                break;
        }
    }
    o += "],\"output_len\":" + std::to_string(r.output_len);
    if (r.n != 1) o += ",\"n\":" + std::to_string(r.n);
    if (!r.salt.empty()) {
        o += ",\"salt\":";
        json_append_string(&o, r.salt);
    }
    if (r.lora) o += ",\"lora\":" + std::to_string(r.lora);
    if (r.priority != 50) o += ",\"priority\":" + std::to_string(r.priority);
    o += '}';
    return o;
}

bool read_trace_file(const std::string &path, std::vector<TraceRequest> *out, std::string *err) {
    std::ifstream in(path);
    if (!in) {
        *err = path + ": cannot open trace file (" + std::strerror(errno) + ")";
        return false;
    }
    out->clear();
    std::string line, why;
    int64_t lineno = 0;
    while (std::getline(in, line)) {
        lineno++;
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        TraceRequest r;
        if (!parse_trace_line(line, &r, &why)) {
            *err = path + ":" + std::to_string(lineno) + ": " + why;
            return false;
        }
        r.line = lineno;
        out->push_back(std::move(r));
    }
    if (in.bad()) {
        *err = path + ":" + std::to_string(lineno + 1) + ": read error (" + std::strerror(errno) + ")";
        return false;
    }
    if (out->empty()) {
        *err = path + ": the trace holds no requests";
        return false;
    }
    std::stable_sort(out->begin(), out->end(), [](const TraceRequest &a, const TraceRequest &b) { return a.t < b.t; });
    return true;
}

bool write_trace_file(const std::string &path, const std::vector<TraceRequest> &reqs, std::string *err) {
    std::string tmp = path + ".tmp";
    FILE *f = std::fopen(tmp.c_str(), "w");
    if (!f) {
        *err = tmp + ": cannot create (" + std::strerror(errno) + ")";
        return false;
    }
    bool ok = true;
    for (const TraceRequest &r : reqs) {
        std::string line = format_trace_line(r);
        line += '\n';
        if (std::fwrite(line.data(), 1, line.size(), f) != line.size()) ok = false;
    }
    if (std::fclose(f) != 0) ok = false;
    if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
        *err = path + ": write failed (" + std::strerror(errno) + ")";
        std::remove(tmp.c_str());
        return false;
    }
    return true;
}

}  // namespace sim
