/* Prefill/decode disaggregation with libkvc's KV transfer (kvc_xfer_*, lib/transfer/README.md).
 *
 *   transfer_pair --role prefill --desc FILE   computes a prompt's KV, exports it, writes the
 *                                               descriptor to FILE, serves until FILE.done appears
 *   transfer_pair --role decode  --desc FILE   imports the descriptor, allocates the prompt (which
 *                                               hits the imported blocks), prefills only the rest,
 *                                               decodes --steps tokens, and checks every step's
 *                                               logits against a dense reference
 *   transfer_pair --role both                   both, the prefill side in a child process
 *
 * Options: --transports tcp|sm,self|...  --net-devices DEV  --tokens N  --steps G  --corrupt
 * (--corrupt: the prefill side overwrites one exported block after exporting it; the decode side's
 * check must then fail: exit 1.)
 *
 * The "model" is a toy with the shape of one: 2 layers, 4 query heads over 2 KV heads (GQA), head
 * dim 16; each position's K, V and Q are pseudo-random functions of (layer, head, token, position),
 * attention is libkvc's paged CPU attention, the next token is the argmax of logits that mix every
 * layer's attention output. The dense reference recomputes K/V for the whole history from the
 * formula and attends in double over contiguous arrays, so a wrong imported byte shows up as a
 * logit difference. Output: one line per phase, "ok" at the end. */
#include <kvc/kvc.h>

#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHECK(call)                                                                                 \
    do {                                                                                            \
        kvc_status st_ = (call);                                                                    \
        if (st_ != KVC_OK) {                                                                        \
            fprintf(stderr, "%s failed: %s (%s)\n", #call, kvc_status_str(st_), kvc_last_error()); \
            exit(2);                                                                                \
        }                                                                                           \
    } while (0)

enum { BS = 16, LAYERS = 2, KVH = 2, QH = 4, D = 16, VOCAB = 97, MAXT = 2048 };

static uint64_t mix(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}
/* A value in [-1, 1) of (what, layer, head, token, position, d). */
static float val(int what, int l, int h, int32_t t, int64_t p, int d) {
    uint64_t x = mix(((uint64_t)what << 56) ^ ((uint64_t)l << 48) ^ ((uint64_t)h << 40) ^ ((uint64_t)(uint32_t)t << 8) ^ (uint64_t)d);
    x = mix(x ^ (uint64_t)p * 0x100000001B3ull);
    return (float)((int)(x & 1023) - 512) / 512.0f;
}

static kvc_pool *make_pool(void) {
    kvc_pool_config c;
    CHECK(kvc_pool_config_default(&c));
    c.block_size = BS;
    c.num_layers = LAYERS;
    c.num_kv_heads = KVH;
    c.num_q_heads = QH;
    c.head_dim = D;
    c.kv_dtype = KVC_DTYPE_F32;
    c.num_blocks = 256;
    c.backend = KVC_BACKEND_CPU;
    kvc_pool *p = NULL;
    CHECK(kvc_pool_create(&c, &p));
    return p;
}

static kvc_xfer_agent *make_agent(kvc_pool *p, const char *tls, const char *dev) {
    kvc_xfer_config xc;
    CHECK(kvc_xfer_config_default(&xc));
    xc.model_identity = "transfer_pair toy model v1;f32;tp=0/1";
    xc.transports = tls;
    xc.net_devices = dev;
    xc.timeout_ms = 20000;
    kvc_xfer_agent *a = NULL;
    CHECK(kvc_xfer_agent_create(p, &xc, &a));
    return a;
}

/* Writes the K/V of positions [first, first + n) of seq (tokens: the whole sequence). */
static void write_kv(kvc_pool *p, uint64_t seq, const int32_t *tokens, int64_t first, int64_t n) {
    int64_t *slots = malloc(sizeof(int64_t) * (size_t)n);
    float *k = malloc(sizeof(float) * (size_t)(n * KVH * D)), *v = malloc(sizeof(float) * (size_t)(n * KVH * D));
    CHECK(kvc_seq_slot_mapping(p, seq, first, n, slots, n));
    for (int l = 0; l < LAYERS; ++l) {
        for (int64_t i = 0; i < n; ++i)
            for (int h = 0; h < KVH; ++h)
                for (int d = 0; d < D; ++d) {
                    k[(i * KVH + h) * D + d] = val(1, l, h, tokens[first + i], first + i, d);
                    v[(i * KVH + h) * D + d] = val(2, l, h, tokens[first + i], first + i, d);
                }
        CHECK(kvc_cache_write(p, l, slots, n, k, v, KVC_DTYPE_F32, 1.0f, 1.0f, NULL));
    }
    free(slots);
    free(k);
    free(v);
}

static void make_prompt(int32_t *t, int64_t n) {
    for (int64_t i = 0; i < n; ++i) t[i] = (int32_t)(mix((uint64_t)i * 7 + 3) % VOCAB);
}

static int file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int run_prefill(const char *desc_path, int64_t n, const char *tls, const char *dev, int corrupt) {
    kvc_pool *p = make_pool();
    kvc_xfer_agent *a = make_agent(p, tls, dev);
    int32_t *t = malloc(sizeof(int32_t) * (size_t)n);
    make_prompt(t, n);
    CHECK(kvc_alloc(p, 1, t, n, NULL, NULL));
    write_kv(p, 1, t, 0, n); /* the "forward pass" of the prompt */
    uint64_t ex = 0;
    int64_t ex_tokens = 0;
    CHECK(kvc_xfer_export_seq(a, 1, 120000, &ex, &ex_tokens));
    CHECK(kvc_free(p, 1)); /* the lease holds the blocks */
    if (corrupt) {
        /* Behind the library's back: block 1 of the exported prefix gets other bytes. */
        kvc_storage_info si = {0};
        si.struct_size = sizeof si;
        CHECK(kvc_storage_get_info(p, &si));
        int32_t table[1];
        int64_t cached = 0;
        CHECK(kvc_alloc(p, 2, t, BS * 2 + 1, NULL, &cached)); /* hits blocks 0 and 1 */
        int64_t nb = 0;
        int32_t tab[4];
        CHECK(kvc_seq_block_table(p, 2, tab, 4, &nb));
        table[0] = tab[1];
        unsigned char *junk = calloc(1, (size_t)si.block_stride);
        memset(junk, 0x3f, (size_t)si.block_stride);
        CHECK(kvc_storage_copy_blocks(p, table, 1, junk, 0));
        free(junk);
        CHECK(kvc_free(p, 2));
        printf("prefill: corrupted exported block 1 (id %d)\n", table[0]);
    }
    int64_t len = 0;
    CHECK(kvc_xfer_export_descriptor(a, ex, NULL, 0, &len));
    uint8_t *d = malloc((size_t)len);
    CHECK(kvc_xfer_export_descriptor(a, ex, d, len, &len));
    char tmp[4096], done[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", desc_path);
    snprintf(done, sizeof done, "%s.done", desc_path);
    FILE *f = fopen(tmp, "wb");
    if (!f || fwrite(d, 1, (size_t)len, f) != (size_t)len || fclose(f) != 0 || rename(tmp, desc_path) != 0) {
        perror("writing the descriptor");
        return 2;
    }
    printf("prefill: %lld-token prompt, exported %lld tokens (%lld-byte descriptor in %s)\n", (long long)n,
           (long long)ex_tokens, (long long)len, desc_path);
    fflush(stdout);
    for (int i = 0; i < 120000 / 20 && !file_exists(done); ++i) sleep_ms(20); /* serve the gets */
    kvc_xfer_stats s = {0};
    s.struct_size = sizeof s;
    CHECK(kvc_xfer_get_stats(a, &s));
    printf("prefill: %lld lease check(s) answered by message (an importer of a staged export reads its lease word "
           "instead); releasing\n",
           (long long)s.lease_checks);
    CHECK(kvc_xfer_export_release(a, ex));
    CHECK(kvc_xfer_agent_destroy(a));
    CHECK(kvc_pool_check(p));
    CHECK(kvc_pool_destroy(p));
    free(d);
    free(t);
    fflush(stdout);
    return 0;
}

/* Dense reference: logits of the query at position pos over tokens[0..pos], in double. */
static void dense_logits(const int32_t *tokens, int64_t pos, double *logits) {
    double out[LAYERS][QH][D];
    const double scale = 1.0 / sqrt((double)D);
    double *w = malloc(sizeof(double) * (size_t)(pos + 1));
    for (int l = 0; l < LAYERS; ++l)
        for (int qh = 0; qh < QH; ++qh) {
            const int h = qh / (QH / KVH);
            double m = -INFINITY, sum = 0;
            for (int64_t j = 0; j <= pos; ++j) {
                double s = 0;
                for (int d = 0; d < D; ++d) s += (double)val(3, l, qh, tokens[pos], pos, d) * val(1, l, h, tokens[j], j, d);
                w[j] = s * scale;
                if (w[j] > m) m = w[j];
            }
            for (int64_t j = 0; j <= pos; ++j) sum += (w[j] = exp(w[j] - m));
            for (int d = 0; d < D; ++d) {
                double o = 0;
                for (int64_t j = 0; j <= pos; ++j) o += w[j] * val(2, l, h, tokens[j], j, d);
                out[l][qh][d] = o / sum;
            }
        }
    free(w);
    for (int v = 0; v < VOCAB; ++v) {
        double s = 0;
        for (int l = 0; l < LAYERS; ++l)
            for (int qh = 0; qh < QH; ++qh)
                for (int d = 0; d < D; ++d) s += out[l][qh][d] * val(4, l, qh, v, 0, d);
        logits[v] = s;
    }
}

static int run_decode(const char *desc_path, int64_t n, int64_t steps, const char *tls, const char *dev) {
    kvc_pool *p = make_pool();
    kvc_xfer_agent *a = make_agent(p, tls, dev);
    for (int i = 0; i < 60000 / 20 && !file_exists(desc_path); ++i) sleep_ms(20);
    FILE *f = fopen(desc_path, "rb");
    if (!f) {
        perror(desc_path);
        return 2;
    }
    uint8_t *d = malloc(1 << 20);
    const int64_t len = (int64_t)fread(d, 1, 1 << 20, f);
    fclose(f);
    uint64_t op = 0;
    CHECK(kvc_xfer_import(a, d, len, NULL, &op));
    kvc_xfer_import_result r = {0};
    r.struct_size = sizeof r;
    kvc_status st = kvc_xfer_op_wait(a, op, -1, &r);
    char done[4096];
    snprintf(done, sizeof done, "%s.done", desc_path);
    if (st != KVC_OK) {
        fprintf(stderr, "decode: import failed (%s, reason %d): %s\n", kvc_status_str(st), r.failure, kvc_last_error());
        fclose(fopen(done, "w"));
        return 2;
    }
    printf("decode: imported %lld blocks (%lld bytes) in %.3f ms\n", (long long)r.blocks_pulled,
           (long long)r.bytes_pulled, r.seconds * 1e3);

    int32_t *t = malloc(sizeof(int32_t) * (size_t)(n + steps + 1));
    make_prompt(t, n);
    int64_t cached = 0;
    CHECK(kvc_alloc(p, 1, t, n, NULL, &cached));
    write_kv(p, 1, t, cached, n - cached); /* prefill only what was not imported */
    printf("decode: prompt of %lld tokens, %lld cached (imported), %lld prefilled here\n", (long long)n,
           (long long)cached, (long long)(n - cached));
    fclose(fopen(done, "w")); /* the prefill side may release now: the blocks are ours */

    kvc_batch *b = NULL;
    CHECK(kvc_batch_create(p, 1, 1, (int32_t)((n + steps) / BS + 2), &b));
    kvc_attention_params prm;
    CHECK(kvc_attention_params_default(&prm));
    prm.q_dtype = KVC_DTYPE_F32;
    double max_diff = 0, dense[VOCAB];
    int bad = 0;
    int64_t len_now = n;
    for (int64_t s = 0; s < steps; ++s) {
        const int64_t pos = len_now - 1;
        const uint64_t ids[1] = {1};
        const int64_t ql[1] = {1};
        CHECK(kvc_batch_build(b, ids, ql, 1));
        float q[QH * D], out[LAYERS][QH * D];
        for (int l = 0; l < LAYERS; ++l) {
            for (int qh = 0; qh < QH; ++qh)
                for (int dd = 0; dd < D; ++dd) q[qh * D + dd] = val(3, l, qh, t[pos], pos, dd);
            CHECK(kvc_launch_attention(p, b, l, q, out[l], &prm, NULL));
        }
        double logits[VOCAB];
        int best = 0;
        for (int v = 0; v < VOCAB; ++v) {
            double acc = 0;
            for (int l = 0; l < LAYERS; ++l)
                for (int qh = 0; qh < QH; ++qh)
                    for (int dd = 0; dd < D; ++dd) acc += (double)out[l][qh * D + dd] * val(4, l, qh, v, 0, dd);
            logits[v] = acc;
            if (acc > logits[best]) best = v;
        }
        dense_logits(t, pos, dense);
        for (int v = 0; v < VOCAB; ++v) {
            const double diff = fabs(logits[v] - dense[v]);
            if (diff > max_diff) max_diff = diff;
        }
        if (max_diff > 1e-3) {
            fprintf(stderr, "decode: step %lld (position %lld): logits differ from the dense reference by %g\n",
                    (long long)s, (long long)pos, max_diff);
            bad = 1;
            break;
        }
        t[len_now] = best;
        CHECK(kvc_append(p, 1, &t[len_now], 1, 0, NULL));
        write_kv(p, 1, t, len_now, 1);
        ++len_now;
    }
    if (!bad)
        printf("decode: %lld tokens generated, every step's logits within %.2g of the dense reference\n",
               (long long)steps, max_diff);
    CHECK(kvc_batch_destroy(b));
    CHECK(kvc_free(p, 1));
    CHECK(kvc_xfer_agent_destroy(a));
    CHECK(kvc_pool_check(p));
    CHECK(kvc_pool_destroy(p));
    free(t);
    free(d);
    return bad;
}

int main(int argc, char **argv) {
    const char *role = "both", *desc = NULL, *tls = NULL, *dev = NULL;
    int64_t n = 16 * 12 + 5, steps = 24;
    int corrupt = 0;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--role") && i + 1 < argc) role = argv[++i];
        else if (!strcmp(argv[i], "--desc") && i + 1 < argc) desc = argv[++i];
        else if (!strcmp(argv[i], "--transports") && i + 1 < argc) tls = argv[++i];
        else if (!strcmp(argv[i], "--net-devices") && i + 1 < argc) dev = argv[++i];
        else if (!strcmp(argv[i], "--tokens") && i + 1 < argc) n = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--corrupt")) corrupt = 1;
        else {
            fprintf(stderr, "usage: %s [--role prefill|decode|both] [--desc FILE] [--transports TLS] "
                            "[--net-devices DEV] [--tokens N] [--steps G] [--corrupt]\n", argv[0]);
            return 2;
        }
    }
    if (n < BS + 1 || n + steps > MAXT) {
        fprintf(stderr, "--tokens must be in [%d, %d - steps]\n", BS + 1, MAXT);
        return 2;
    }
    int32_t avail = 0;
    CHECK(kvc_xfer_available(&avail));
    if (!avail) {
        printf("skipped: UCX is not available (%s)\n", kvc_last_error());
        return 77;
    }
    char tmpdesc[64];
    if (!desc) {
        snprintf(tmpdesc, sizeof tmpdesc, "/tmp/kvc_transfer_pair_%ld.desc", (long)getpid());
        desc = tmpdesc;
    }
    if (!strcmp(role, "prefill")) return run_prefill(desc, n, tls, dev, corrupt);
    if (!strcmp(role, "decode")) return run_decode(desc, n, steps, tls, dev);
    if (strcmp(role, "both") != 0) {
        fprintf(stderr, "unknown role %s\n", role);
        return 2;
    }
    unlink(desc);
    pid_t pid = fork();
    if (pid == 0) _exit(run_prefill(desc, n, tls, dev, corrupt));
    const int rc = run_decode(desc, n, steps, tls, dev);
    int ws = 0;
    waitpid(pid, &ws, 0);
    char extra[4096];
    unlink(desc);
    snprintf(extra, sizeof extra, "%s.done", desc);
    unlink(extra);
    if (rc != 0) return rc;
    if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
        fprintf(stderr, "prefill process failed\n");
        return 2;
    }
    printf("ok\n");
    return 0;
}
