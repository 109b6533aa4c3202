/* SWIG interface for the Go binding's low layer. bindings/go/regen.sh runs
 * `swig -go -cgo -intgosize 64 -module raw` on it into raw.go and raw_wrap.c, which are checked in
 * (a consumer needs cgo and pkg-config, not SWIG) and never edited: check_swig_drift.sh (ctest
 * go_swig_drift) fails when they differ from a fresh run. The file is named .i, not .swig, so that
 * the go tool does not run SWIG on it again. Package raw is internal: the public package
 * kvc.dev/kvc wraps it and exposes no SWIG type. *
 * Mapping rules (every pointer in kvc.h is an array, an out-param or backend memory):
 *  - int32_t* / int64_t* / uint64_t* / float* -> Go slices, passed as their data pointer: a nil
 *    slice is NULL, an empty non-nil slice is not. The caller passes counts and capacities that
 *    match the slice lengths (the public package does). Single out-params are one-element slices.
 *  - kvc_pool** / kvc_keys** / kvc_batch** -> []uintptr with one element.
 *  - host buffers (k, v, q, out, host, buf) and the disk tier's key -> []byte; device memory
 *    and streams -> uintptr/uint64 through the *_addr helpers below (addresses the Go runtime
 *    must not see as Go pointers).
 */
%module raw

%{
#include <stdlib.h>
#include "kvc/kvc.h"
%}

/* LP64 (linux/amd64, linux/arm64): int64_t is long, as in <stdint.h>. */
#define SWIGWORDSIZE64
%include <stdint.i>

/* `type` is a Go keyword. */
%rename(event_type) kvc_event::type;

%define KVC_SLICE(CTYPE, GOTYPE)
%typemap(gotype) CTYPE *, const CTYPE * "[]GOTYPE"
%typemap(in) CTYPE *, const CTYPE * %{ $1 = ($1_ltype)$input.array; %}
%enddef
KVC_SLICE(int32_t, int32)
KVC_SLICE(int64_t, int64)
KVC_SLICE(uint64_t, uint64)
KVC_SLICE(float, float32)

%typemap(gotype) kvc_pool **, kvc_keys **, kvc_batch **, kvc_xfer_agent ** "[]uintptr"
%typemap(in) kvc_pool **, kvc_keys **, kvc_batch **, kvc_xfer_agent ** %{ $1 = ($1_ltype)$input.array; %}
/* Transfer descriptors: bytes in ([]byte desc) and out ([]byte buf). */
%typemap(gotype) const uint8_t *desc, uint8_t *buf "[]byte"
%typemap(in) const uint8_t *desc, uint8_t *buf %{ $1 = ($1_ltype)$input.array; %}

%typemap(gotype) const void *k, const void *v, const void *q, void *out, void *host "[]byte"
%typemap(in) const void *k, const void *v, const void *q, void *out, void *host
%{ $1 = ($1_ltype)$input.array; %}
/* The disk tier's MAC key: the slice's bytes, not a string (it may hold NULs); nil is NULL. */
%typemap(gotype) const uint8_t *key "[]byte"
%typemap(in) const uint8_t *key %{ $1 = ($1_ltype)$input.array; %}
%typemap(gotype) char *buf "[]byte"
%typemap(in) char *buf %{ $1 = ($1_ltype)$input.array; %}
/* Not a string: no copy back, nothing to free (SWIG's char* typemaps would do both). */
%typemap(argout) char *buf ""
%typemap(freearg) char *buf ""

/* A C struct reachable from Go must never hold a Go pointer (cgo rule), so the ALiBi slope pointer
 * is set only inside the C helpers below, on a stack copy of the parameters. */
%ignore kvc_attention_params::alibi_slopes;

/* Info structs are created with struct_size already set to this library's sizeof, so the Go side
 * never needs sizeof. Freed with free(), as SWIG's default destructor for C structs does. */
%define KVC_SIZED_STRUCT(T)
%extend T {
    T() {
        T *s = (T *)calloc(1, sizeof(T));
        if (s) s->struct_size = (uint32_t)sizeof(T);
        return s;
    }
    ~T() { free($self); }
}
%enddef
KVC_SIZED_STRUCT(kvc_pool_config)
KVC_SIZED_STRUCT(kvc_stats)
KVC_SIZED_STRUCT(kvc_event)
KVC_SIZED_STRUCT(kvc_storage_info)
KVC_SIZED_STRUCT(kvc_batch_info)
KVC_SIZED_STRUCT(kvc_attention_params)
KVC_SIZED_STRUCT(kvc_tier_stats)
KVC_SIZED_STRUCT(kvc_xfer_import_result)
KVC_SIZED_STRUCT(kvc_xfer_stats)
KVC_SIZED_STRUCT(kvc_group_config)
KVC_SIZED_STRUCT(kvc_group_info)
/* Its strings would be Go memory held by a C struct: built in C by kvcgo_xfer_agent_create. */
%ignore kvc_xfer_config;
%ignore kvc_xfer_config_default;
%ignore kvc_xfer_stats::failures;

#define KVC_API
%include "kvc/kvc.h"

%inline %{
/* kvc_cache_write with backend-memory arguments given as addresses (CUDA device memory, or host
 * memory the caller allocated outside Go). */
static kvc_status kvcgo_cache_write_addr(kvc_pool *pool, int32_t layer, uint64_t slot_mapping,
                                         int64_t num_tokens, uint64_t k_addr, uint64_t v_addr,
                                         int32_t src_dtype, float k_scale, float v_scale,
                                         uint64_t stream) {
    return kvc_cache_write(pool, layer, (const int64_t *)(uintptr_t)slot_mapping, num_tokens,
                           (const void *)(uintptr_t)k_addr, (const void *)(uintptr_t)v_addr,
                           src_dtype, k_scale, v_scale, (void *)(uintptr_t)stream);
}

/* kvc_launch_attention on host buffers with optional host ALiBi slopes (NULL when empty). */
static kvc_status kvcgo_launch_attention_host(kvc_pool *pool, const kvc_batch *batch, int32_t layer,
                                              const void *q, void *out,
                                              const kvc_attention_params *params,
                                              const float *alibi_slopes) {
    kvc_attention_params p;
    if (params == NULL) return kvc_launch_attention(pool, batch, layer, q, out, NULL, NULL);
    p = *params;
    p.alibi_slopes = alibi_slopes;
    return kvc_launch_attention(pool, batch, layer, q, out, &p, NULL);
}

/* kvc_launch_attention with q, out, ALiBi slopes (0 = none) and stream given as addresses. */
static kvc_status kvcgo_launch_attention_addr(kvc_pool *pool, const kvc_batch *batch, int32_t layer,
                                              uint64_t q_addr, uint64_t out_addr,
                                              const kvc_attention_params *params,
                                              uint64_t alibi_addr, uint64_t stream) {
    kvc_attention_params p;
    if (params == NULL)
        return kvc_launch_attention(pool, batch, layer, (const void *)(uintptr_t)q_addr,
                                    (void *)(uintptr_t)out_addr, NULL, (void *)(uintptr_t)stream);
    p = *params;
    p.alibi_slopes = (const float *)(uintptr_t)alibi_addr;
    return kvc_launch_attention(pool, batch, layer, (const void *)(uintptr_t)q_addr,
                                (void *)(uintptr_t)out_addr, &p, (void *)(uintptr_t)stream);
}

/* kvc_xfer_agent_create with the config's fields as arguments ("" = NULL, 0 = the default), so no C
 * struct ever holds a Go string. */
static kvc_status kvcgo_xfer_agent_create(kvc_pool *pool, const char *identity, const char *transports,
                                          const char *net_devices, int64_t lease_ms, int64_t timeout_ms,
                                          kvc_xfer_agent **out) {
    kvc_xfer_config c;
    kvc_status st = kvc_xfer_config_default(&c);
    if (st != KVC_OK) return st;
    c.model_identity = identity && *identity ? identity : NULL;
    c.transports = transports && *transports ? transports : NULL;
    c.net_devices = net_devices && *net_devices ? net_devices : NULL;
    if (lease_ms != 0) c.lease_ms = lease_ms;
    if (timeout_ms != 0) c.timeout_ms = timeout_ms;
    return kvc_xfer_agent_create(pool, &c, out);
}

/* Imports failed with kvc_xfer_failure i: kvc_xfer_stats.failures[i], or failures_device for
 * KVC_XFER_FAIL_DEVICE (0 for any other i). */
static int64_t kvcgo_xfer_stats_failures(const kvc_xfer_stats *s, int32_t i) {
    if (i == KVC_XFER_FAIL_DEVICE) return s->failures_device;
    return i >= 0 && i < 9 ? s->failures[i] : 0;
}

/* An array of n group configurations for kvc_pool_create_hybrid, in C memory (all zero; the
 * caller fills each entry with kvc_group_config_default first); NULL when n is out of
 * [1, KVC_MAX_GROUPS] (the library then reports the bad count) or calloc fails. */
static kvc_group_config *kvcgo_group_configs_new(int32_t n) {
    if (n < 1 || n > KVC_MAX_GROUPS) return NULL;
    return (kvc_group_config *)calloc((size_t)n, sizeof(kvc_group_config));
}

/* Entry i of an array from kvcgo_group_configs_new (the caller keeps i in range). */
static kvc_group_config *kvcgo_group_configs_at(kvc_group_config *a, int32_t i) { return a + i; }

static void kvcgo_group_configs_delete(kvc_group_config *a) { free(a); }
%}
