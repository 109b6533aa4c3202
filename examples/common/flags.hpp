// Shared by the example programs (kvc_serve, kvc_simulate). Strict command-line value parsing: the whole string must be a number in range, or the flag is
// rejected with a message that names it.
#pragma once

#include <cstdint>
#include <string>

namespace flags {

bool parse_int_flag(const std::string &flag, const char *text, int64_t lo, int64_t hi, int64_t *out, std::string *err);
bool parse_double_flag(const std::string &flag, const char *text, double lo, double hi, double *out, std::string *err);

}  // namespace flags
