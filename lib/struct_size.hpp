// The C API's one rule for versioned structs (kvc.h, "struct_size"). Every struct the API reads or
// fills starts with struct_size, and the library accepts the size of any release of that struct —
// `released`, oldest first, the last being this library's sizeof — and, for a struct it fills, any
// larger size too (a caller built against a newer kvc.h: it gets the fields this library knows).
// A struct the library reads must have a released size: a larger one would carry fields whose
// meaning this library cannot honour. Anything else is KVC_ERR_VERSION naming the accepted sizes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <initializer_list>

#include "error.hpp"

namespace kvc {

enum class StructUse { kRead, kFill };

inline kvc_status check_struct_size(uint32_t got, std::initializer_list<size_t> released, StructUse use, const char *fn,
                                    const char *what) {
    for (size_t s : released)
        if (got == s) return KVC_OK;
    const size_t current = *(released.end() - 1);
    if (use == StructUse::kFill && got > current) return KVC_OK;
    char sizes[96] = "";
    size_t n = 0;
    for (size_t s : released)
        if (n < sizeof sizes) n += size_t(std::snprintf(sizes + n, sizeof sizes - n, "%s%zu", n ? ", " : "", s));
    return fail(KVC_ERR_VERSION, "%s: %s->struct_size is %u, this library takes %s%s", fn, what, got, sizes,
                use == StructUse::kFill ? " or more" : "");
}

}  // namespace kvc
