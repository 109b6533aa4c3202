/* A manual check (session 19; run.sh, not part of the ctest suite: it needs gdb and offsets into
 * Debian 12's UCX 1.13.1 libuct.so): an exporter whose shared-memory receive FIFO has a real hole
 * (an element reserved, never published, by a sender SIGKILLed between the two steps: the hang of
 * lib/transfer/README.md, "Open") receives no message again, yet serves staged imports, whose
 * lease check is the importer's read of the lease word.
 *   wedge export FILE   prefill, export (staged), write the descriptor to FILE, serve for ever;
 *                       SIGUSR1 releases the export (its lease word cleared; no message involved)
 *   wedge import FILE   import it (WEDGE_TIMES=1: print how long the steps took)
 *   wedge probe FILE    a push import (needs the exporter's answers), 1 s timeout: "answers" or
 *                       "wedged"; when wedged, a staged import (lease word) with every byte
 *                       checked against the oracle (tests/kv_oracle.h)
 *   wedge released FILE a staged import after the release: must fail with KVC_XFER_FAIL_LEASE */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>
static double now_ms(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e3 + t.tv_nsec / 1e6; }
#include "kv_oracle.h"
#include "kvc/kvc.h"
static volatile sig_atomic_t g_release = 0;
static void on_usr1(int sig) { (void)sig; g_release = 1; }
#define BS 4
#define NBLK 300
#define N (256 * BS)
#define CK(x) do { kvc_status s_ = (x); if (s_ != KVC_OK) { fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, kvc_last_error()); exit(2); } } while (0)
static kvc_pool *pool(void) {
    kvc_pool_config c; CK(kvc_pool_config_default(&c));
    c.block_size = BS; c.num_layers = 2; c.num_kv_heads = 2; c.head_dim = 1024; c.kv_dtype = KVC_DTYPE_F32;
    c.num_blocks = NBLK; c.backend = KVC_BACKEND_CPU; c.watermark = 0;
    kvc_pool *p = NULL; CK(kvc_pool_create(&c, &p)); return p;
}
static kvc_xfer_agent *agent(kvc_pool *p, int64_t timeout) {
    kvc_xfer_config c; CK(kvc_xfer_config_default(&c));
    c.transports = "sm,self"; c.model_identity = "m"; c.lease_ms = 3600000; if (timeout) c.timeout_ms = timeout;
    kvc_xfer_agent *a = NULL; CK(kvc_xfer_agent_create(p, &c, &a)); return a;
}
static int32_t tok[N + 1];
static void prompt(void) { for (int64_t i = 0; i < N; ++i) tok[i] = (int32_t)(1000 + 7 * 7919 + i * 31 % 977); }
static uint8_t *readdesc(const char *f, int64_t *len) {
    FILE *fp = fopen(f, "rb"); if (!fp) exit(3);
    static uint8_t buf[1 << 20]; *len = (int64_t)fread(buf, 1, sizeof buf, fp); fclose(fp); return buf;
}
static kvc_status imp(kvc_xfer_agent *a, const uint8_t *d, int64_t len) {
    uint64_t op = 0; kvc_status st = kvc_xfer_import(a, d, len, NULL, &op); if (st != KVC_OK) return st;
    kvc_xfer_import_result r; memset(&r, 0, sizeof r); r.struct_size = sizeof r;
    return kvc_xfer_op_wait(a, op, -1, &r);
}
int main(int argc, char **argv) {
    if (argc < 3) return 1;
    prompt();
    if (!strcmp(argv[1], "export")) {
        kvc_pool *p = pool(); kvc_xfer_agent *a = agent(p, 0);
        kvo_shape s; memset(&s, 0, sizeof s); CK(kvo_shape_of(p, &s));
        static uint64_t ids[N]; static int64_t slots[N]; kvo_ids(0, tok, N, ids);
        CK(kvc_alloc(p, 1, tok, N, NULL, NULL)); CK(kvc_seq_slot_mapping(p, 1, 0, N, slots, N));
        float *scratch = malloc(sizeof(float) * (size_t)kvo_scratch_floats(&s, N));
        CK(kvo_write(p, &s, slots, ids, N, scratch, NULL));
        uint64_t ex = 0; CK(kvc_xfer_export_seq(a, 1, 0, &ex, NULL));
        int64_t len = 0; CK(kvc_xfer_export_descriptor(a, ex, NULL, 0, &len));
        uint8_t *d = malloc((size_t)len); CK(kvc_xfer_export_descriptor(a, ex, d, len, &len));
        char tmp[4096]; snprintf(tmp, sizeof tmp, "%s.tmp", argv[2]);
        FILE *f = fopen(tmp, "wb"); fwrite(d, 1, (size_t)len, f); fclose(f); rename(tmp, argv[2]);
        signal(SIGUSR1, on_usr1);
        printf("exporter pid %d, descriptor version %d\n", getpid(), d[4]); fflush(stdout);
        while (!g_release) pause();
        CK(kvc_xfer_export_release(a, ex));
        printf("exporter: export released\n"); fflush(stdout);
        for (;;) pause();
    }
    int64_t len = 0; const uint8_t *d = readdesc(argv[2], &len);
    if (!strcmp(argv[1], "import")) {
        double t0 = now_ms();
        kvc_pool *p = pool(); kvc_xfer_agent *a = agent(p, 0);
        double t1 = now_ms();
        uint64_t op = 0; kvc_xfer_import(a, d, len, NULL, &op);
        double t2 = now_ms();
        kvc_xfer_import_result r; memset(&r, 0, sizeof r); r.struct_size = sizeof r; kvc_xfer_op_wait(a, op, -1, &r);
        double t3 = now_ms();
        if (getenv("WEDGE_TIMES")) fprintf(stderr, "agent %.2f ms, import call %.2f ms, wait %.2f ms\n", t1 - t0, t2 - t1, t3 - t2);
        for (;;) pause();
    }
    if (!strcmp(argv[1], "released")) {
        kvc_pool *q = pool(); kvc_xfer_agent *b = agent(q, 10000);
        uint64_t op = 0; kvc_status st = kvc_xfer_import(b, d, len, NULL, &op);
        kvc_xfer_import_result r; memset(&r, 0, sizeof r); r.struct_size = sizeof r;
        if (st == KVC_OK) st = kvc_xfer_op_wait(b, op, -1, &r);
        kvc_stats ps; memset(&ps, 0, sizeof ps); ps.struct_size = sizeof ps; CK(kvc_pool_stats(q, &ps));
        const int ok = st == KVC_ERR_STATE && r.failure == KVC_XFER_FAIL_LEASE && ps.used_blocks == 0 && ps.cached_blocks_total == 0;
        printf("staged import after the release: %s (%s)\n", ok ? "refused, nothing cached" : "NOT REFUSED AS IT SHOULD BE", st == KVC_OK ? "ok" : kvc_last_error());
        return ok ? 0 : 7;
    }
    /* probe */
    setenv("KVC_XFER_DATA_PATH", "push", 1);
    kvc_pool *p = pool(); kvc_xfer_agent *a = agent(p, 1000);
    unsetenv("KVC_XFER_DATA_PATH");
    kvc_status st = imp(a, d, len);
    if (st == KVC_OK) { printf("answers\n"); return 0; }
    printf("wedged (%s)\n", kvc_last_error());
    kvc_pool *q = pool(); kvc_xfer_agent *b = agent(q, 10000);
    st = imp(b, d, len);
    if (st != KVC_OK) { printf("staged import FAILED: %s\n", kvc_last_error()); return 5; }
    /* every byte */
    kvo_shape s; memset(&s, 0, sizeof s); CK(kvo_shape_of(q, &s));
    tok[N] = 4242; int64_t cached = -1; CK(kvc_alloc(q, 9, tok, N + 1, NULL, &cached));
    static uint64_t ids[N]; kvo_ids(0, tok, N, ids);
    static int32_t table[N / BS + 2]; int64_t nb = 0; CK(kvc_seq_block_table(q, 9, table, N / BS + 2, &nb));
    unsigned char *buf = malloc((size_t)s.block_stride); int64_t badt = 0;
    for (int64_t b = 0; b * BS < cached; ++b) { int32_t bt = -1; CK(kvo_read_block(q, table[b], buf)); badt += kvo_check_block(&s, buf, 0, ids + b * BS, BS, &bt); }
    printf("staged import ok through the wedge: %lld tokens cached, %lld wrong elements\n", (long long)cached, (long long)badt);
    return badt ? 6 : 0;
}
