#include "json.hpp"

#include <cmath>
#include <cstdlib>
#include <cstring>

namespace sim {

const JsonValue *JsonValue::find(const std::string &key) const {
    if (kind != Kind::Object) return nullptr;
    auto it = members.find(key);
    return it == members.end() ? nullptr : &it->second;
}

namespace {

constexpr int kMaxDepth = 64;

class Parser {
public:
    explicit Parser(const std::string &text) : s_(text) {}

    bool parse(JsonValue *out, JsonError *err) {
        skip_ws();
        if (!value(out, 0)) {
            *err = {msg_, int64_t(pos_) + 1};
            return false;
        }
        skip_ws();
        if (pos_ != s_.size()) {
            *err = {"unexpected text after the JSON value", int64_t(pos_) + 1};
            return false;
        }
        return true;
    }

private:
    const std::string &s_;
    size_t pos_ = 0;
    std::string msg_;

    bool fail(const std::string &m) {
        msg_ = m;
        return false;
    }
    void skip_ws() {
        while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\r' || s_[pos_] == '\n')) pos_++;
    }
    bool literal(const char *word) {
        size_t n = std::strlen(word);
        if (s_.compare(pos_, n, word) != 0) return fail(std::string("invalid literal (expected '") + word + "')");
        pos_ += n;
        return true;
    }

    bool value(JsonValue *out, int depth) {
        if (depth > kMaxDepth) return fail("nesting deeper than 64 levels");
        if (pos_ >= s_.size()) return fail("unexpected end of line (a value was expected)");
        char c = s_[pos_];
        switch (c) {
            case '{': return object(out, depth);
            case '[': return array(out, depth);
            case '"': out->kind = JsonValue::Kind::String; return string(&out->text);
            case 't': out->kind = JsonValue::Kind::Bool; out->boolean = true; return literal("true");
            case 'f': out->kind = JsonValue::Kind::Bool; out->boolean = false; return literal("false");
            case 'n': out->kind = JsonValue::Kind::Null; return literal("null");
            default:
                if (c == '-' || (c >= '0' && c <= '9')) return number(out);
                return fail(std::string("unexpected character '") + c + "'");
        }
    }

    bool object(JsonValue *out, int depth) {
        out->kind = JsonValue::Kind::Object;
        pos_++;  // '{'
        skip_ws();
        if (pos_ < s_.size() && s_[pos_] == '}') { pos_++; return true; }
        for (;;) {
            skip_ws();
            if (pos_ >= s_.size() || s_[pos_] != '"') return fail("expected a quoted member name");
            std::string key;
            if (!string(&key)) return false;
            skip_ws();
            if (pos_ >= s_.size() || s_[pos_] != ':') return fail("expected ':' after member name");
            pos_++;
            skip_ws();
            JsonValue v;
            if (!value(&v, depth + 1)) return false;
            out->members[key] = std::move(v);
            skip_ws();
            if (pos_ < s_.size() && s_[pos_] == ',') { pos_++; continue; }
            if (pos_ < s_.size() && s_[pos_] == '}') { pos_++; return true; }
            return fail("expected ',' or '}' in object");
        }
    }

    bool array(JsonValue *out, int depth) {
        out->kind = JsonValue::Kind::Array;
        pos_++;  // '['
        skip_ws();
        if (pos_ < s_.size() && s_[pos_] == ']') { pos_++; return true; }
        for (;;) {
            skip_ws();
            out->items.emplace_back();
            if (!value(&out->items.back(), depth + 1)) return false;
            skip_ws();
            if (pos_ < s_.size() && s_[pos_] == ',') { pos_++; continue; }
            if (pos_ < s_.size() && s_[pos_] == ']') { pos_++; return true; }
            return fail("expected ',' or ']' in array");
        }
    }

    static void append_utf8(std::string *o, uint32_t cp) {
        if (cp < 0x80) {
            o->push_back(char(cp));
        } else if (cp < 0x800) {
            o->push_back(char(0xC0 | (cp >> 6)));
            o->push_back(char(0x80 | (cp & 0x3F)));
        } else if (cp < 0x10000) {
            o->push_back(char(0xE0 | (cp >> 12)));
            o->push_back(char(0x80 | ((cp >> 6) & 0x3F)));
            o->push_back(char(0x80 | (cp & 0x3F)));
        } else {
            o->push_back(char(0xF0 | (cp >> 18)));
            o->push_back(char(0x80 | ((cp >> 12) & 0x3F)));
            o->push_back(char(0x80 | ((cp >> 6) & 0x3F)));
            o->push_back(char(0x80 | (cp & 0x3F)));
        }
    }

    bool hex4(uint32_t *out) {
        if (pos_ + 4 > s_.size()) return fail("truncated \\u escape");
        uint32_t v = 0;
        for (int i = 0; i < 4; i++) {
            char c = s_[pos_++];
            v <<= 4;
            if (c >= '0' && c <= '9') v |= uint32_t(c - '0');
            else if (c >= 'a' && c <= 'f') v |= uint32_t(c - 'a' + 10);
            else if (c >= 'A' && c <= 'F') v |= uint32_t(c - 'A' + 10);
            else return fail("invalid hex digit in \\u escape");
        }
        *out = v;
        return true;
    }

    bool string(std::string *out) {
        pos_++;  // opening quote
        for (;;) {
            if (pos_ >= s_.size()) return fail("unterminated string");
            char c = s_[pos_++];
            if (c == '"') return true;
            if (static_cast<unsigned char>(c) < 0x20) return fail("control character inside a string");
            if (c != '\\') { out->push_back(c); continue; }
            if (pos_ >= s_.size()) return fail("unterminated escape");
            char e = s_[pos_++];
            switch (e) {
                case '"': out->push_back('"'); break;
                case '\\': out->push_back('\\'); break;
                case '/': out->push_back('/'); break;
                case 'b': out->push_back('\b'); break;
                case 'f': out->push_back('\f'); break;
                case 'n': out->push_back('\n'); break;
                case 'r': out->push_back('\r'); break;
                case 't': out->push_back('\t'); break;
                case 'u': {
                    uint32_t cp = 0;
                    if (!hex4(&cp)) return false;
                    if (cp >= 0xD800 && cp < 0xDC00) {  // surrogate pair
                        if (pos_ + 2 > s_.size() || s_[pos_] != '\\' || s_[pos_ + 1] != 'u')
                            return fail("unpaired surrogate in \\u escape");
                        pos_ += 2;
                        uint32_t lo = 0;
                        if (!hex4(&lo)) return false;
                        if (lo < 0xDC00 || lo > 0xDFFF) return fail("invalid low surrogate in \\u escape");
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    }
                    append_utf8(out, cp);
                    break;
                }
                default: return fail(std::string("invalid escape '\\") + e + "'");
            }
        }
    }

    bool number(JsonValue *out) {
        // Validate the JSON number grammar, then convert with strtod.
        size_t start = pos_;
        if (s_[pos_] == '-') pos_++;
        if (pos_ >= s_.size() || s_[pos_] < '0' || s_[pos_] > '9') return fail("invalid number");
        if (s_[pos_] == '0') pos_++;
        else while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') pos_++;
        if (pos_ < s_.size() && s_[pos_] == '.') {
            pos_++;
            if (pos_ >= s_.size() || s_[pos_] < '0' || s_[pos_] > '9') return fail("invalid number (digit expected after '.')");
            while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') pos_++;
        }
        if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
            pos_++;
            if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) pos_++;
            if (pos_ >= s_.size() || s_[pos_] < '0' || s_[pos_] > '9') return fail("invalid number (exponent digits expected)");
            while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') pos_++;
        }
        std::string digits = s_.substr(start, pos_ - start);
        out->kind = JsonValue::Kind::Number;
        out->number = std::strtod(digits.c_str(), nullptr);
        if (!std::isfinite(out->number)) {
            pos_ = start;
            return fail("number out of range");
        }
        return true;
    }
};

}  // namespace

bool json_parse(const std::string &text, JsonValue *out, JsonError *err) {
    *out = JsonValue();
    *err = JsonError();
    Parser p(text);
    return p.parse(out, err);
}

void json_append_string(std::string *out, const std::string &s) {
    static const char *hex = "0123456789abcdef";
    out->push_back('"');
    for (unsigned char c : s) {
        switch (c) {
            case '"': *out += "\\\""; break;
            case '\\': *out += "\\\\"; break;
            case '\n': *out += "\\n"; break;
            case '\r': *out += "\\r"; break;
            case '\t': *out += "\\t"; break;
            default:
                if (c < 0x20) {
                    *out += "\\u00";
                    out->push_back(hex[c >> 4]);
                    out->push_back(hex[c & 15]);
                } else {
                    out->push_back(char(c));
                }
        }
    }
    out->push_back('"');
}

}  // namespace sim
