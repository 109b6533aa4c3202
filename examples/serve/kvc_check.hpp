// Turns a failing libkvc status into an exception carrying the call and libkvc's own message.
#pragma once

#include <kvc/kvc.h>

#include <stdexcept>
#include <string>

namespace serve {

inline void kvc_check(kvc_status st, const char *what) {
    if (st != KVC_OK)
        throw std::runtime_error(std::string(what) + " failed: " + kvc_status_str(st) + " (" + kvc_last_error() + ")");
}

}  // namespace serve
