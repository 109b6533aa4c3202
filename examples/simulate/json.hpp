// A minimal JSON reader for trace lines (no dependencies). It parses one complete JSON text into a
// small tree; errors carry the 1-based column so the caller can name "file:line:column".
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace sim {

struct JsonValue {
    enum class Kind { Null, Bool, Number, String, Array, Object };
    Kind kind = Kind::Null;
    bool boolean = false;
    double number = 0.0;
    std::string text;
    std::vector<JsonValue> items;               // Array
    std::map<std::string, JsonValue> members;   // Object (duplicate keys: the last one wins)

    bool is_object() const { return kind == Kind::Object; }
    // Member lookup on an object; nullptr when absent.
    const JsonValue *find(const std::string &key) const;
};

struct JsonError {
    std::string message;  // empty on success
    int64_t column = 0;   // 1-based position of the offending character
};

// Parses `text` as exactly one JSON value (surrounding whitespace allowed). Returns false and fills
// *err on malformed input. Nesting is limited to 64 levels so hostile input cannot exhaust the stack.
bool json_parse(const std::string &text, JsonValue *out, JsonError *err);

// Appends `s` to *out as a JSON string literal (quotes and escapes included).
void json_append_string(std::string *out, const std::string &s);

}  // namespace sim
