// kvc_keys_*: building a request's cache keys. kvc_keys objects have no lock (one owner at a time,
// see kvc.h), so nothing here touches a pool.
#include "core/keys.hpp"

#include <new>

#include "error.hpp"

namespace kvc {

const KeySet &KeySet::empty() {
    static const KeySet k;
    return k;
}

}  // namespace kvc

extern "C" {

KVC_API kvc_status kvc_keys_create(kvc_keys **out) {
    KVC_GUARD({
        if (!out) return kvc::fail(KVC_ERR_NULL_ARG, "kvc_keys_create: out is NULL");
        kvc_keys *k = new (std::nothrow) kvc_keys();
        if (!k) return kvc::fail(KVC_ERR_NO_MEMORY, "kvc_keys_create: out of host memory");
        *out = k;
        return KVC_OK;
    })
}

KVC_API kvc_status kvc_keys_destroy(kvc_keys *keys) {
    delete keys;
    return KVC_OK;
}

KVC_API kvc_status kvc_keys_clear(kvc_keys *keys) {
    if (!keys) return kvc::fail(KVC_ERR_NULL_ARG, "kvc_keys_clear: keys is NULL");
    keys->set.clear();
    return KVC_OK;
}

KVC_API kvc_status kvc_keys_set_lora(kvc_keys *keys, uint64_t lora_id) {
    if (!keys) return kvc::fail(KVC_ERR_NULL_ARG, "kvc_keys_set_lora: keys is NULL");
    keys->set.lora_id = lora_id;
    return KVC_OK;
}

KVC_API kvc_status kvc_keys_set_salt(kvc_keys *keys, const char *salt) {
    if (!keys) return kvc::fail(KVC_ERR_NULL_ARG, "kvc_keys_set_salt: keys is NULL");
    size_t len = salt ? strnlen(salt, KVC_MAX_SALT_LEN + 1) : 0;
    if (len > KVC_MAX_SALT_LEN)
        return kvc::fail(KVC_ERR_INVALID_ARG, "kvc_keys_set_salt: salt longer than %d bytes", KVC_MAX_SALT_LEN);
    if (len > 0) std::memcpy(keys->set.salt, salt, len);
    keys->set.salt_len = int32_t(len);
    return KVC_OK;
}

KVC_API kvc_status kvc_keys_add_mm(kvc_keys *keys, uint64_t hash_hi, uint64_t hash_lo, int64_t offset,
                                   int64_t length) {
    KVC_GUARD({
        if (!keys) return kvc::fail(KVC_ERR_NULL_ARG, "kvc_keys_add_mm: keys is NULL");
        if (offset < 0)
            return kvc::fail(KVC_ERR_INVALID_ARG, "kvc_keys_add_mm: offset must be >= 0, got %lld",
                             (long long)offset);
        if (length <= 0)
            return kvc::fail(KVC_ERR_INVALID_ARG, "kvc_keys_add_mm: length must be >= 1, got %lld",
                             (long long)length);
        int64_t end;
        if (kvc::add_overflows(offset, length, &end))
            return kvc::fail(KVC_ERR_OVERFLOW, "kvc_keys_add_mm: offset %lld + length %lld overflows",
                             (long long)offset, (long long)length);
        auto &mm = keys->set.mm;
        if (!mm.empty() && offset < mm.back().offset + mm.back().length)
            return kvc::fail(KVC_ERR_INVALID_ARG,
                             "kvc_keys_add_mm: item at offset %lld overlaps or precedes the previous "
                             "item [%lld, %lld); add items in increasing, non-overlapping order",
                             (long long)offset, (long long)mm.back().offset,
                             (long long)(mm.back().offset + mm.back().length));
        mm.push_back(kvc::MmItem{hash_hi, hash_lo, offset, length});
        return KVC_OK;
    })
}

KVC_API kvc_status kvc_keys_set_priority(kvc_keys *keys, int32_t priority) {
    if (!keys) return kvc::fail(KVC_ERR_NULL_ARG, "kvc_keys_set_priority: keys is NULL");
    if (priority < KVC_PRIORITY_MIN || priority > KVC_PRIORITY_MAX)
        return kvc::fail(KVC_ERR_INVALID_ARG, "kvc_keys_set_priority: priority must be in [%d, %d], got %d",
                         KVC_PRIORITY_MIN, KVC_PRIORITY_MAX, priority);
    keys->set.priority = priority;
    return KVC_OK;
}

KVC_API kvc_status kvc_keys_set_max_cached_tokens(kvc_keys *keys, int64_t max_tokens) {
    if (!keys) return kvc::fail(KVC_ERR_NULL_ARG, "kvc_keys_set_max_cached_tokens: keys is NULL");
    if (max_tokens < -1)
        return kvc::fail(KVC_ERR_INVALID_ARG,
                         "kvc_keys_set_max_cached_tokens: max_tokens must be >= 0 or -1 (no cap), got %lld",
                         (long long)max_tokens);
    keys->set.max_cached_tokens = max_tokens;
    return KVC_OK;
}

}  // extern "C"
