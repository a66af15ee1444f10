/*
 * bench_overhead.c: what the shim costs per intercepted call (a benchmark, not a test;
 * scripts/bench-shim runs it; shim.bench_smoke checks that it runs).
 *
 *   bench_overhead [--calls N] [--rounds R] [--json] [--smoke]
 *
 * N (default 512) stays under the vgpu's launch queue depth (1024), so that no block
 * includes the device simulation that a full queue forces into the calling thread.
 *
 * Run with the shim and the vgpu preloaded (scripts/bench-shim does it, in passthrough and
 * in a deferring mode). In ONE process it times, for each measured entry point, blocks of
 * N calls made
 *   direct:  through the vgpu's own definition (dlsym on the already loaded
 *            libcudart.so.13 / libcublas.so.13 handle, which the shim cannot interpose),
 *   via shim: through the program's normal reference, which the preloaded shim interposes,
 * in rounds of four blocks (direct, shim, shim, direct) so that drift and the position of a
 * block cancel out, and reports medians over the rounds: ns per call each way, and the
 * median of the per-round differences (ns added) and ratios. Synchronisation between
 * blocks (through the shim, so that a deferring mode drains) is not timed. In a deferring
 * mode the "via shim" time is the framework thread's capture cost; the dispatcher's own
 * cost per operation is (wall time of N launches plus the draining synchronize) minus
 * (the same made directly), divided by N, and its throughput the inverse.
 * Output: an aligned table, or one JSON object with --json (the same rows).
 * --smoke: few calls, then checks that the shim was interposed and every number is finite
 * and positive; exit 1 otherwise.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "common/table.h"
#include "vgpu.h"

#define MAX_BLOCKS 64

typedef cudaError_t (*launch_fn)(const void *, dim3, dim3, void **, size_t, cudaStream_t);
typedef cudaError_t (*record_fn)(cudaEvent_t, cudaStream_t);
typedef cudaError_t (*query_fn)(cudaEvent_t);
typedef cublasStatus_t (*sgemm_fn)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int,
                                   int, int, const float *, const float *, int, const float *,
                                   int, const float *, float *, int);

static struct {
    launch_fn launch;
    record_fn record;
    query_fn query;
    sgemm_fn sgemm;
    cudaStream_t s;
    cudaEvent_t done, ev;
    cublasHandle_t h;
    float *a, *b, *c;
    int arg_i;
    float *arg_p;
    void *args[2];
    cudaGraphExec_t exec;    /* one captured kernel (setup) */
    cudaError_t (*graph)(cudaGraphExec_t, cudaStream_t);
} B;

static void noop_stub(void) { abort(); }

static void die(const char *what, int rc)
{
    fprintf(stderr, "bench_overhead: %s failed (%d)\n", what, rc);
    exit(1);
}
#define CK(call)                                   \
    do {                                           \
        int rc_ = (int)(call);                     \
        if (rc_ != 0)                              \
            die(#call, rc_);                       \
    } while (0)

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e9 * (double)ts.tv_sec + (double)ts.tv_nsec;
}

/* The vgpu's own definition of name. The shim interposes dlsym, so the C library's dlsym
 * is fetched by version (dlvsym is not interposed) and asked on the library's handle. */
static void *direct(const char *soname, const char *name)
{
    void *(*libc_dlsym)(void *, const char *) = NULL;
    static const char *const versions[] = {"GLIBC_2.34", "GLIBC_2.2.5"};
    for (size_t i = 0; i < 2 && libc_dlsym == NULL; i++)
        *(void **)&libc_dlsym = dlvsym(RTLD_DEFAULT, "dlsym", versions[i]);
    void *h = dlopen(soname, RTLD_NOW | RTLD_NOLOAD);
    void *f = h && libc_dlsym ? libc_dlsym(h, name) : NULL;
    if (f == NULL) {
        fprintf(stderr, "bench_overhead: %s in %s: %s (run it on the vgpu: scripts/bench-shim)\n",
                name, soname, dlerror());
        exit(1);
    }
    return f;
}

static void setup(void)
{
    int (*reg)(const void *, const vgpu_kernel_desc_t *) = NULL;
    *(void **)&reg = dlsym(RTLD_DEFAULT, "vgpu_register_kernel");
    if (reg == NULL) {
        fprintf(stderr, "bench_overhead: not running on the vgpu (scripts/bench-shim)\n");
        exit(1);
    }
    vgpu_kernel_desc_t d;
    memset(&d, 0, sizeof(d));
    d.name = "bench_noop";
    d.nparams = 2;
    d.param_sizes[0] = sizeof(int);
    d.param_sizes[1] = sizeof(float *);
    CK(reg((const void *)noop_stub, &d));
    *(void **)&B.launch = direct("libcudart.so.13", "cudaLaunchKernel");
    *(void **)&B.record = direct("libcudart.so.13", "cudaEventRecord");
    *(void **)&B.query = direct("libcudart.so.13", "cudaEventQuery");
    *(void **)&B.sgemm = direct("libcublas.so.13", "cublasSgemm_v2");
    CK(cudaStreamCreate(&B.s));
    CK(cudaEventCreateWithFlags(&B.done, cudaEventDisableTiming));
    CK(cudaEventCreateWithFlags(&B.ev, cudaEventDisableTiming));
    CK(cudaEventRecord(B.done, B.s));
    CK(cudaStreamSynchronize(B.s));
    CK(cublasCreate(&B.h));
    CK(cublasSetStream(B.h, B.s));
    CK(cudaMalloc((void **)&B.a, 64 * sizeof(float)));
    CK(cudaMalloc((void **)&B.b, 64 * sizeof(float)));
    CK(cudaMalloc((void **)&B.c, 64 * sizeof(float)));
    CK(cudaMemset(B.a, 0, 64 * sizeof(float)));
    CK(cudaMemset(B.b, 0, 64 * sizeof(float)));
    B.args[0] = &B.arg_i;
    B.args[1] = &B.arg_p;
    /* A graph of one kernel, captured on a stream of its own: replays are what PyTorch's
     * CUDAGraph.replay() issues. */
    static const dim3 g = {1, 1, 1};
    cudaStream_t cs;
    cudaGraph_t graph;
    *(void **)&B.graph = direct("libcudart.so.13", "cudaGraphLaunch");
    CK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
    CK(cudaStreamBeginCapture(cs, cudaStreamCaptureModeThreadLocal));
    CK(cudaLaunchKernel((const void *)noop_stub, g, g, B.args, 0, cs));
    CK(cudaStreamEndCapture(cs, &graph));
    CK(cudaGraphInstantiate(&B.exec, graph, 0));
    CK(cudaGraphDestroy(graph));
    CK(cudaStreamDestroy(cs));
}

/* The measured calls; via_shim selects the interposed reference or the vgpu's own. */
typedef enum call { C_LAUNCH, C_RECORD, C_QUERY, C_SGEMM, C_GRAPH, C_COUNT } call_t;
static const char *const call_names[C_COUNT] = {"cudaLaunchKernel", "cudaEventRecord",
                                                "cudaEventQuery", "cublasSgemm_v2",
                                                "cudaGraphLaunch"};

static void one_call(call_t c, int via_shim)
{
    static const dim3 g = {1, 1, 1};
    static const float one = 1.0f, zero = 0.0f;
    switch (c) {
    case C_LAUNCH:
        CK(via_shim ? cudaLaunchKernel((const void *)noop_stub, g, g, B.args, 0, B.s)
                    : B.launch((const void *)noop_stub, g, g, B.args, 0, B.s));
        break;
    case C_RECORD:
        CK(via_shim ? cudaEventRecord(B.ev, B.s) : B.record(B.ev, B.s));
        break;
    case C_QUERY:
        CK(via_shim ? cudaEventQuery(B.done) : B.query(B.done));
        break;
    case C_SGEMM:
        CK(via_shim ? cublasSgemm(B.h, CUBLAS_OP_N, CUBLAS_OP_N, 8, 8, 8, &one, B.a, 8, B.b, 8,
                                  &zero, B.c, 8)
                    : B.sgemm(B.h, CUBLAS_OP_N, CUBLAS_OP_N, 8, 8, 8, &one, B.a, 8, B.b, 8,
                              &zero, B.c, 8));
        break;
    case C_GRAPH:
        CK(via_shim ? cudaGraphLaunch(B.exec, B.s) : B.graph(B.exec, B.s));
        break;
    default:
        break;
    }
}

/* ns per call of one block of n calls; the synchronize after it is not timed. */
static double block_ns(call_t c, int via_shim, int n)
{
    double t0 = now_ns();
    for (int i = 0; i < n; i++)
        one_call(c, via_shim);
    double t = now_ns() - t0;
    CK(cudaDeviceSynchronize());
    return t / n;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

typedef struct result {
    double direct, shim, added, ratio;
} result_t;

/* Medians of the per-round values, differences and ratios. */
static result_t summarize(double *d, double *s, int rounds)
{
    double diff[MAX_BLOCKS], ratio[MAX_BLOCKS];
    for (int b = 0; b < rounds; b++) {
        diff[b] = s[b] - d[b];
        ratio[b] = d[b] > 0 ? s[b] / d[b] : 0;
    }
    result_t r = {median(d, rounds), median(s, rounds), median(diff, rounds),
                  median(ratio, rounds)};
    return r;
}

/* Rounds of four rounds in the order direct, shim, shim, direct: drift and the position
 * of a block cancel out within a round. Medians over the rounds. */
static result_t measure(call_t c, int n, int rounds)
{
    double d[MAX_BLOCKS], s[MAX_BLOCKS];
    block_ns(c, 0, n / 4 + 1);   /* warm both paths up */
    block_ns(c, 1, n / 4 + 1);
    for (int b = 0; b < rounds; b++) {
        double d1 = block_ns(c, 0, n), s1 = block_ns(c, 1, n);
        double s2 = block_ns(c, 1, n), d2 = block_ns(c, 0, n);
        d[b] = 0.5 * (d1 + d2);
        s[b] = 0.5 * (s1 + s2);
    }
    return summarize(d, s, rounds);
}

/* Wall time per launch of n launches and the synchronize that waits for them. */
static double wall_ns(int via_shim, int n)
{
    static const dim3 g = {1, 1, 1};
    CK(cudaDeviceSynchronize());
    double t0 = now_ns();
    for (int i = 0; i < n; i++)
        CK(via_shim ? cudaLaunchKernel((const void *)noop_stub, g, g, B.args, 0, B.s)
                    : B.launch((const void *)noop_stub, g, g, B.args, 0, B.s));
    CK(cudaDeviceSynchronize());
    return (now_ns() - t0) / n;
}

static result_t measure_dispatch(int n, int rounds)
{
    double d[MAX_BLOCKS], s[MAX_BLOCKS];
    for (int b = 0; b < rounds; b++) {
        double d1 = wall_ns(0, n), s1 = wall_ns(1, n);
        double s2 = wall_ns(1, n), d2 = wall_ns(0, n);
        d[b] = 0.5 * (d1 + d2);
        s[b] = 0.5 * (s1 + s2);
    }
    return summarize(d, s, rounds);
}

static const dh_col_t cols[] = {
    {"what", "what", DH_CELL_STR},
    {"direct_ns", "direct ns/call", DH_CELL_NUM},
    {"shim_ns", "via shim ns/call", DH_CELL_NUM},
    {"added_ns", "added ns/call", DH_CELL_NUM},
    {"ratio", "ratio", DH_CELL_NUM},
    {"target_ns", "target ns", DH_CELL_NUM},
};

static void add_row(dh_table_t *t, const char *what, result_t r, double target)
{
    char c[5][32];
    snprintf(c[0], sizeof(c[0]), "%.1f", r.direct);
    snprintf(c[1], sizeof(c[1]), "%.1f", r.shim);
    snprintf(c[2], sizeof(c[2]), "%.1f", r.added);
    snprintf(c[3], sizeof(c[3]), "%.3f", r.ratio);
    snprintf(c[4], sizeof(c[4]), "%.0f", target);
    const char *cells[] = {what, c[0], c[1], c[2], c[3], c[4]};
    if (dh_table_row(t, cells) != DH_OK)
        die("dh_table_row", 0);
}

int main(int argc, char **argv)
{
    int n = 512, rounds = 25, json = 0, smoke = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--calls") == 0 && i + 1 < argc)
            n = atoi(argv[++i]);
        else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (strcmp(argv[i], "--json") == 0)
            json = 1;
        else if (strcmp(argv[i], "--smoke") == 0)
            smoke = 1;
        else {
            fprintf(stderr, "usage: bench_overhead [--calls N] [--rounds R] [--json] [--smoke]\n");
            return 2;
        }
    }
    if (smoke) {
        n = 200;
        rounds = 3;
    }
    if (n < 1 || rounds < 1 || rounds > MAX_BLOCKS)
        return 2;
    setup();
    const char *mode = getenv("DHELIX_MODE") && *getenv("DHELIX_MODE") ? getenv("DHELIX_MODE")
                                                                      : "passthrough";
    int queued = strcmp(mode, "passthrough") != 0 && strcmp(mode, "profile") != 0;
    /* The program's own reference resolves to the first definition: the shim's, if any. */
    void *volatile self = (void *)cudaLaunchKernel;
    int interposed = (void *)B.launch != self;
    dh_table_t *t = NULL;
    if (dh_table_new(&t, "shim_overhead", cols, 6) != DH_OK)
        die("dh_table_new", 0);
    char nbuf[32], bbuf[32];
    snprintf(nbuf, sizeof(nbuf), "%d", n);
    snprintf(bbuf, sizeof(bbuf), "%d", rounds);
    dh_table_meta(t, "mode", DH_CELL_STR, mode);
    dh_table_meta(t, "interposed", DH_CELL_STR, interposed ? "yes" : "no");
    dh_table_meta(t, "calls_per_block", DH_CELL_NUM, nbuf);
    dh_table_meta(t, "rounds", DH_CELL_NUM, bbuf);
    int bad = 0;
    for (int c = 0; c < C_COUNT; c++) {
        /* A GEMM costs the vgpu tens of microseconds: fewer of them. */
        int calls = c == C_SGEMM ? n / 10 + 1 : n;
        result_t r = measure((call_t)c, calls, rounds);
        add_row(t, call_names[c], r, queued ? 300 : 50);
        bad |= !(r.direct > 0 && r.shim > 0 && isfinite(r.direct) && isfinite(r.shim));
    }
    result_t dsp = measure_dispatch(n, rounds);
    /* As a row: "direct" is the backend's wall per launch, "via shim" the same through the
     * shim including its dispatcher; the difference is the dispatcher's own cost. */
    add_row(t, "dispatcher (wall per launch)", dsp, 1000);
    bad |= !(dsp.direct > 0 && dsp.shim > 0);
    double own = dsp.added;
    char ops[32];
    snprintf(ops, sizeof(ops), "%.0f", own > 0 ? 1e9 / own : 0.0);
    dh_table_meta(t, "dispatcher_ops_per_s", DH_CELL_NUM, ops);
    dh_strbuf_t out = DH_STRBUF_INIT;
    if (dh_table_render(t, json ? DH_FMT_JSON : DH_FMT_TEXT, &out) != DH_OK)
        die("dh_table_render", 0);
    fputs(out.data, stdout);
    if (!json)
        printf("dispatcher: %.1f ns/op of its own (%s ops/s)%s\n", own, ops,
               queued ? "" : "; in passthrough this is the wrapper's cost, not a dispatcher's");
    dh_strbuf_free(&out);
    dh_table_free(t);
    CK(cudaGraphExecDestroy(B.exec));
    CK(cublasDestroy(B.h));
    CK(cudaFree(B.a));
    CK(cudaFree(B.b));
    CK(cudaFree(B.c));
    CK(cudaEventDestroy(B.done));
    CK(cudaEventDestroy(B.ev));
    CK(cudaStreamDestroy(B.s));
    if (smoke && (bad || !interposed)) {
        fprintf(stderr, "bench_overhead --smoke: %s\n",
                !interposed ? "the shim is not interposed on cudaLaunchKernel (LD_PRELOAD?)"
                            : "a measurement is not a finite positive number");
        return 1;
    }
    return 0;
}
