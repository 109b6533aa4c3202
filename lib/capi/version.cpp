// C API: the library's version (kvc.h: KVC_VERSION_*), for callers that check at run time which
// libkvc.so.0 they loaded.
#include "kvc/kvc.h"

extern "C" {

KVC_API int32_t kvc_version(void) { return KVC_VERSION_NUMBER; }

#define KVC_STR2(x) #x
#define KVC_STR(x) KVC_STR2(x)
KVC_API const char *kvc_version_string(void) {
    return KVC_STR(KVC_VERSION_MAJOR) "." KVC_STR(KVC_VERSION_MINOR) "." KVC_STR(KVC_VERSION_PATCH);
}

}  // extern "C"
