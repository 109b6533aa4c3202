#include "flags.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace flags {

bool parse_int_flag(const std::string &flag, const char *text, int64_t lo, int64_t hi, int64_t *out, std::string *err) {
    if (!text) {
        *err = flag + " needs a value";
        return false;
    }
    errno = 0;
    char *end = nullptr;
    long long v = std::strtoll(text, &end, 10);
    if (*text == '\0' || *end != '\0' || errno == ERANGE) {
        *err = flag + ": '" + text + "' is not an integer";
        return false;
    }
    if (v < lo || v > hi) {
        *err = flag + ": " + text + " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
        return false;
    }
    *out = v;
    return true;
}

bool parse_double_flag(const std::string &flag, const char *text, double lo, double hi, double *out, std::string *err) {
    if (!text) {
        *err = flag + " needs a value";
        return false;
    }
    errno = 0;
    char *end = nullptr;
    double v = std::strtod(text, &end);
    if (*text == '\0' || *end != '\0' || errno == ERANGE || !std::isfinite(v)) {
        *err = flag + ": '" + text + "' is not a number";
        return false;
    }
    if (v < lo || v > hi) {
        *err = flag + ": " + text + " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
        return false;
    }
    *out = v;
    return true;
}

}  // namespace flags
