/* SWIG interface for the Java binding's JNI layer, generated at build time by CMake:
 *   swig -java -package dev.kvc -module KvcNative -outdir <build>/gen/dev/kvc kvc.i
 * Everything SWIG generates is package-private in dev.kvc; the public classes in src/dev/kvc wrap
 * it, so no SWIG type is part of the API.
 *
 * Mapping rules (every pointer in kvc.h is an array, an out-param, a handle or backend memory):
 *  - kvc_pool* / kvc_keys* / kvc_batch* -> long handles; kvc_X** -> long[1].
 *  - int32_t* -> int[], int64_t* and uint64_t* -> long[], float* -> float[]; a null Java array is
 *    NULL. Single out-params are one-element arrays. Arrays are copied in and (for non-const
 *    pointers) back out by JNI; callers pass counts that match the array lengths (the public
 *    classes do).
 *  - host buffers (k, v, q, out, host, buf) -> byte[]; the salt, the disk tier's path and identity ->
 *    NUL-terminated UTF-8 byte[]; the disk tier's key -> byte[] (a wiped copy);
 *    device memory, ALiBi addresses and streams -> long, through the *_addr helpers.
 *  - kvc_status results: a failing status throws dev.kvc.KvcException from C, built from
 *    kvc_last_error() inside the same JNI call (so the message is that of the failing call, whatever
 *    OS thread a virtual thread runs on next). A method that returns normally returns 0 (KVC_OK).
 */
%module KvcNative

%{
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "kvc/kvc.h"

/* Zeroes a secret before its memory is freed (volatile: the stores cannot be optimized away). */
static void kvcjni_wipe(void *p, size_t n) {
    volatile unsigned char *c = (volatile unsigned char *)p;
    while (n--) *c++ = 0;
}

/* Throws dev.kvc.KvcException(status, op, message bytes). The message is passed as bytes and
 * decoded as UTF-8 in Java: it may quote caller data that is not valid modified UTF-8. */
static void kvcjni_throw(JNIEnv *jenv, int status, const char *op) {
    const char *msg = kvc_last_error();
    jsize len = (jsize)strlen(msg);
    jclass cls;
    jmethodID ctor;
    jbyteArray bytes;
    jstring jop;
    jobject ex;
    if ((*jenv)->ExceptionCheck(jenv)) return; /* keep the first exception */
    cls = (*jenv)->FindClass(jenv, "dev/kvc/KvcException");
    if (cls == NULL) return; /* NoClassDefFoundError is pending */
    ctor = (*jenv)->GetMethodID(jenv, cls, "<init>", "(ILjava/lang/String;[B)V");
    if (ctor == NULL) return;
    bytes = (*jenv)->NewByteArray(jenv, len);
    if (bytes == NULL) return;
    (*jenv)->SetByteArrayRegion(jenv, bytes, 0, len, (const jbyte *)msg);
    jop = (*jenv)->NewStringUTF(jenv, op);
    if (jop == NULL) return;
    ex = (*jenv)->NewObject(jenv, cls, ctor, (jint)status, jop, bytes);
    if (ex != NULL) (*jenv)->Throw(jenv, (jthrowable)ex);
}
%}

/* LP64 (linux/amd64, linux/arm64): int64_t is long, as in <stdint.h>. SWIG maps C long to Java
 * int, so the 64-bit typedefs get their own typemaps: Java long, unsigned values bit-for-bit. */
#define SWIGWORDSIZE64
%include <stdint.i>
%typemap(jni) int64_t, uint64_t "jlong"
%typemap(jtype) int64_t, uint64_t "long"
%typemap(jstype) int64_t, uint64_t "long"
%typemap(javain) int64_t, uint64_t "$javainput"
%typemap(javaout) int64_t, uint64_t { return $jnicall; }
%typemap(in) int64_t, uint64_t %{ $1 = ($1_ltype)$input; %}
%typemap(out) int64_t, uint64_t %{ $result = (jlong)$1; %}

/* Enumerations and macros are not wrapped: SWIG would put them in a public constants interface.
 * The public classes carry their own values, checked against the library by the tests. */
%rename("$ignore", regextarget=1) "^KVC_";
%ignore kvc_status;
%ignore kvc_dtype;
%ignore kvc_backend;
%ignore kvc_alloc_verdict;
%ignore kvc_event_type;
%ignore kvc_tier;
%ignore kvc_xfer_failure;
%ignore kvc_group_kind;
/* Its strings would point into Java arrays: built in C by kvcjni_xfer_agent_create. */
%ignore kvc_xfer_config;
%ignore kvc_xfer_config_default;
%ignore kvc_xfer_agent_create;
%ignore kvc_xfer_stats::failures;

/* Package-private generated classes; no finalizers (the public classes free explicitly). */
%pragma(java) moduleclassmodifiers="final class"
%pragma(java) jniclassclassmodifiers="final class"
%typemap(javaclassmodifiers) SWIGTYPE "final class"
%typemap(javafinalize) SWIGTYPE ""
%pragma(java) jniclasscode=%{
  static {
    Native.load();
  }
%}

/* ---- kvc_status: throw on failure, return nothing --------------------------------------------- */
%typemap(jni) kvc_status "jint"
%typemap(jtype) kvc_status "int"
%typemap(jstype) kvc_status "int"
%typemap(out) kvc_status %{ $result = (jint)$1; %}
%typemap(javaout) kvc_status { return $jnicall; }
%typemap(ret) kvc_status %{
  if ($1 != KVC_OK) kvcjni_throw(jenv, (int)$1, "$symname");
%}

/* ---- handles ----------------------------------------------------------------------------------- */
%define KVC_HANDLE(T)
%typemap(jni) T *, const T * "jlong"
%typemap(jtype) T *, const T * "long"
%typemap(jstype) T *, const T * "long"
%typemap(javain) T *, const T * "$javainput"
%typemap(in) T *, const T * %{ $1 = ($1_ltype)(intptr_t)$input; %}
%typemap(jni) T ** "jlongArray"
%typemap(jtype) T ** "long[]"
%typemap(jstype) T ** "long[]"
%typemap(javain) T ** "$javainput"
%typemap(in) T ** ($*1_ltype temp = NULL) %{
  if ($input == NULL || (*jenv)->GetArrayLength(jenv, $input) < 1) {
    SWIG_JavaThrowException(jenv, SWIG_JavaIllegalArgumentException, "handle out-array must have one element");
    return $null;
  }
  $1 = &temp;
%}
%typemap(argout) T ** %{
  { jlong h = (jlong)(intptr_t)temp$argnum; (*jenv)->SetLongArrayRegion(jenv, $input, 0, 1, &h); }
%}
%enddef
KVC_HANDLE(kvc_pool)
KVC_HANDLE(kvc_keys)
KVC_HANDLE(kvc_batch)
KVC_HANDLE(kvc_xfer_agent)

/* ---- primitive arrays -------------------------------------------------------------------------- */
%define KVC_ARRAY(CTYPE, JNITYPE, JTYPE, JARRAY, GET, RELEASE)
%typemap(jni) CTYPE *, const CTYPE * "JARRAY"
%typemap(jtype) CTYPE *, const CTYPE * "JTYPE[]"
%typemap(jstype) CTYPE *, const CTYPE * "JTYPE[]"
%typemap(javain) CTYPE *, const CTYPE * "$javainput"
%typemap(in) CTYPE *, const CTYPE * %{
  $1 = NULL;
  if ($input != NULL) {
    $1 = ($1_ltype)(*jenv)->GET(jenv, $input, NULL);
    if ($1 == NULL) return $null; /* OutOfMemoryError pending */
  }
%}
%typemap(argout) CTYPE * %{ if ($input != NULL) (*jenv)->RELEASE(jenv, $input, (JNITYPE *)$1, 0); %}
%typemap(argout) const CTYPE * %{ if ($input != NULL) (*jenv)->RELEASE(jenv, $input, (JNITYPE *)$1, JNI_ABORT); %}
%enddef
KVC_ARRAY(int32_t, jint, int, jintArray, GetIntArrayElements, ReleaseIntArrayElements)
KVC_ARRAY(int64_t, jlong, long, jlongArray, GetLongArrayElements, ReleaseLongArrayElements)
KVC_ARRAY(uint64_t, jlong, long, jlongArray, GetLongArrayElements, ReleaseLongArrayElements)
KVC_ARRAY(float, jfloat, float, jfloatArray, GetFloatArrayElements, ReleaseFloatArrayElements)

/* Host buffers and the salt as byte[]: written buffers are copied back, read ones are not. */
%define KVC_BYTES(DECL, MODE)
%typemap(jni) DECL "jbyteArray"
%typemap(jtype) DECL "byte[]"
%typemap(jstype) DECL "byte[]"
%typemap(javain) DECL "$javainput"
%typemap(in) DECL %{
  $1 = NULL;
  if ($input != NULL) {
    $1 = ($1_ltype)(*jenv)->GetByteArrayElements(jenv, $input, NULL);
    if ($1 == NULL) return $null;
  }
%}
%typemap(argout) DECL %{ if ($input != NULL) (*jenv)->ReleaseByteArrayElements(jenv, $input, (jbyte *)$1, MODE); %}
%typemap(freearg) DECL ""
%enddef
KVC_BYTES(const void *k, JNI_ABORT)
KVC_BYTES(const void *v, JNI_ABORT)
KVC_BYTES(const void *q, JNI_ABORT)
KVC_BYTES(const char *salt, JNI_ABORT)
KVC_BYTES(const char *path, JNI_ABORT)
KVC_BYTES(const char *identity, JNI_ABORT)
KVC_BYTES(void *out, 0)
KVC_BYTES(void *host, 0)
KVC_BYTES(char *buf, 0)
/* KV transfer: descriptors in and out, and the agent's strings (kvcjni_xfer_agent_create). */
KVC_BYTES(const uint8_t *desc, JNI_ABORT)
KVC_BYTES(uint8_t *buf, 0)
KVC_BYTES(const char *transports, JNI_ABORT)
KVC_BYTES(const char *net_devices, JNI_ABORT)

/* The disk tier's MAC key: byte[] copied into C memory that is wiped and freed after the call
 * (GetByteArrayElements' copy would be freed unwiped); null is NULL. */
%typemap(jni) const uint8_t *key "jbyteArray"
%typemap(jtype) const uint8_t *key "byte[]"
%typemap(jstype) const uint8_t *key "byte[]"
%typemap(javain) const uint8_t *key "$javainput"
%typemap(in) const uint8_t *key (jsize keylen = 0) %{
  $1 = NULL;
  if ($input != NULL) {
    keylen = (*jenv)->GetArrayLength(jenv, $input);
    $1 = ($1_ltype)malloc(keylen > 0 ? (size_t)keylen : 1);
    if ($1 == NULL) {
      SWIG_JavaThrowException(jenv, SWIG_JavaOutOfMemoryError, "copy of the disk tier key");
      return $null;
    }
    (*jenv)->GetByteArrayRegion(jenv, $input, 0, keylen, (jbyte *)$1);
  }
%}
%typemap(freearg) const uint8_t *key %{
  if ($1 != NULL) {
    kvcjni_wipe((void *)$1, (size_t)keylen$argnum);
    free((void *)$1);
  }
%}

/* Streams are opaque integers. */
%typemap(jni) void *stream "jlong"
%typemap(jtype) void *stream "long"
%typemap(jstype) void *stream "long"
%typemap(javain) void *stream "$javainput"
%typemap(in) void *stream %{ $1 = (void *)(intptr_t)$input; %}

/* A C struct must not point into a Java array (it may move), so the ALiBi slope pointer is set
 * only inside the helpers below, on a stack copy of the parameters. */
%ignore kvc_attention_params::alibi_slopes;

/* Info structs are created with struct_size set to this library's sizeof. */
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

/* Read by the test that checks the hand-written constants against the header. */
%rename(event_type) kvc_event::type;

#define KVC_API
%include "kvc/kvc.h"

%inline %{
/* KVC_VERSION_NUMBER of the header this layer was generated from. */
static int32_t kvcjni_header_version(void) { return KVC_VERSION_NUMBER; }

/* kvc_cache_write with backend-memory arguments given as addresses. */
static kvc_status kvcjni_cache_write_addr(kvc_pool *pool, int32_t layer, int64_t slot_mapping_addr,
                                          int64_t num_tokens, int64_t k_addr, int64_t v_addr,
                                          int32_t src_dtype, float k_scale, float v_scale,
                                          int64_t stream_addr) {
    return kvc_cache_write(pool, layer, (const int64_t *)(intptr_t)slot_mapping_addr, num_tokens,
                           (const void *)(intptr_t)k_addr, (const void *)(intptr_t)v_addr,
                           src_dtype, k_scale, v_scale, (void *)(intptr_t)stream_addr);
}

/* kvc_launch_attention on host arrays with optional host ALiBi slopes (null = none). */
static kvc_status kvcjni_launch_attention_host(kvc_pool *pool, const kvc_batch *batch, int32_t layer,
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
static kvc_status kvcjni_launch_attention_addr(kvc_pool *pool, const kvc_batch *batch, int32_t layer,
                                               int64_t q_addr, int64_t out_addr,
                                               const kvc_attention_params *params,
                                               int64_t alibi_addr, int64_t stream_addr) {
    kvc_attention_params p;
    if (params == NULL)
        return kvc_launch_attention(pool, batch, layer, (const void *)(intptr_t)q_addr,
                                    (void *)(intptr_t)out_addr, NULL, (void *)(intptr_t)stream_addr);
    p = *params;
    p.alibi_slopes = (const float *)(intptr_t)alibi_addr;
    return kvc_launch_attention(pool, batch, layer, (const void *)(intptr_t)q_addr,
                                (void *)(intptr_t)out_addr, &p, (void *)(intptr_t)stream_addr);
}

/* kvc_xfer_agent_create with the config's fields as arguments (null or "" = NULL, 0 = default). */
static kvc_status kvcjni_xfer_agent_create(kvc_pool *pool, const char *identity, const char *transports,
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
static int64_t kvcjni_xfer_stats_failures(const kvc_xfer_stats *s, int32_t i) {
    if (i == KVC_XFER_FAIL_DEVICE) return s->failures_device;
    return i >= 0 && i < 9 ? s->failures[i] : 0;
}

/* An array of n group configurations for kvc_pool_create_hybrid, in C memory (all zero; the
 * caller fills each entry with kvc_group_config_default first); NULL when n is out of
 * [1, KVC_MAX_GROUPS] or calloc fails. */
static kvc_group_config *kvcjni_group_configs_new(int32_t n) {
    if (n < 1 || n > KVC_MAX_GROUPS) return NULL;
    return (kvc_group_config *)calloc((size_t)n, sizeof(kvc_group_config));
}

/* Entry i of an array from kvcjni_group_configs_new (the caller keeps i in range). */
static kvc_group_config *kvcjni_group_configs_at(kvc_group_config *a, int32_t i) { return a + i; }

static void kvcjni_group_configs_delete(kvc_group_config *a) { free(a); }

/* KVC_MAX_GROUPS of the header this layer was generated from. */
static int32_t kvcjni_max_groups(void) { return KVC_MAX_GROUPS; }
%}
