/*
 * shim.preload: libdhelix_shim.so in front of the REAL CUDA libraries, no device needed.
 *
 * A program linked against libcudart.so.13, libcublas.so.13 and libcublasLt.so.13 refers
 * to versioned symbols (cudaMalloc@libcudart.so.13); the shim defines them unversioned.
 * The driver and NCCL it reaches by name, through dlsym, as PyTorch does; where neither is
 * installed the child links a stand-in for both (fakedrv.c), since a wrapper with nothing
 * to forward to does not count the call. These tests prove the references and the names
 * bind to the shim all the same (every wrapped entry point is counted exactly once), that
 * the shim exports nothing else (but dlsym), and check what the constructor and destructor
 * do: the PYTORCH_CUDA_ALLOC_CONF default, DHELIX_PRINT_CONFIG, warnings for bad values,
 * the log file pattern, DHELIX_STATS in both formats (and the scheduler's summary in a
 * deferring mode), the "not initialised" answer of a wrapper with nothing to forward to,
 * and the re-entry guard (nested calls counted apart).
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include <cublas_api.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "hook_list.h"
#include "runner.h"
#include "scheduler.h" /* DH_OP_KINDS, DH_DRAIN_REASONS: the report's scheduler keys */

static const char *const hook_names[] = {
#define HOOK_NAME(lib, ret, name, params, args) #name,
    DH_HOOKS_HAND(HOOK_NAME)
#undef HOOK_NAME
};
#define NHOOKS (sizeof(hook_names) / sizeof(hook_names[0]))

/* Every exported wrapper: the hand-written ones and the generated drain-and-forward ones
 * (scripts/gen-entries), which the calls below do not reach (shim.entry_points and the
 * coverage program test those). */
static const char *const all_names[] = {
#define ALL_NAME(lib, ret, name, params, args) #name,
    DH_HOOKS_ALL(ALL_NAME)
#undef ALL_NAME
};
#define NALL (sizeof(all_names) / sizeof(all_names[0]))

/* The LIB column of each entry point: its library's short name in DH_HOOK_LIBS. */
static const char *const hook_lib_ids[] = {
#define HOOK_LIB_ID(lib, ret, name, params, args) #lib,
    DH_HOOKS_HAND(HOOK_LIB_ID)
#undef HOOK_LIB_ID
};

static const char *hook_lib(size_t i)
{
    static const struct {
        const char *id, *short_name;
    } libs[] = {
#define LIB_NAME(lib, short_name, soname, fail) {#lib, short_name},
        DH_HOOK_LIBS(LIB_NAME)
#undef LIB_NAME
    };
    for (size_t k = 0; k < sizeof(libs) / sizeof(libs[0]); k++)
        if (strcmp(libs[k].id, hook_lib_ids[i]) == 0)
            return libs[k].short_name;
    return "?";
}

typedef struct fx {
    char dir[512];
    char stats_path[600];
    char stats_env[640];  /* DHELIX_STATS_FILE=<dir>/stats.json */
} fx_t;

static int fx_setup(void **state)
{
    fx_t *f = calloc(1, sizeof(*f));
    dh_tmpdir_make(f->dir, sizeof(f->dir));
    snprintf(f->stats_path, sizeof(f->stats_path), "%s/stats.json", f->dir);
    snprintf(f->stats_env, sizeof(f->stats_env), "DHELIX_STATS_FILE=%s", f->stats_path);
    *state = f;
    return 0;
}

static int fx_teardown(void **state)
{
    fx_t *f = *state;
    dh_tmpdir_remove(f->dir);
    free(f);
    return 0;
}

/* Runs the child in mode with the shim (or without), and env_add. */
static void run_child(dh_run_t *r, fx_t *f, const char *mode, int with_shim,
                      const char *const *env_add)
{
    char *argv[] = {(char *)dh_test_env("DH_TEST_CHILD", 1), (char *)mode, NULL};
    dh_run(r, f->dir, argv, with_shim ? dh_test_env("DH_TEST_PRELOAD", 1) : NULL, env_add);
}

static void expect_exit0(const dh_run_t *r)
{
    if (r->status != 0)
        fail_msg("child exited %d\nstdout: %s\nstderr: %s", r->status, r->out, r->err);
}

/* Output lines of a command, for objdump/nm checks. */
static char *command_output(const char *fmt, const char *arg)
{
    char cmd[4096];
    snprintf(cmd, sizeof(cmd), fmt, arg);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    for (size_t n; (n = fread(buf + len, 1, cap - len - 1, p)) > 0;) {
        len += n;
        if (len + 1 == cap)
            buf = realloc(buf, cap *= 2);
    }
    buf[len] = '\0';
    assert_int_equal(pclose(p), 0);
    return buf;
}

/* The child's undefined reference to name carries version: that is what a PyTorch
 * process has, and what the binding test below must bind. */
static void expect_versioned_ref(const char *dyn, const char *name, const char *version)
{
    char tail[128];
    snprintf(tail, sizeof(tail), " %s\n", name);
    for (const char *l = dyn; (l = strstr(l, tail)) != NULL; l++) {
        const char *start = l;
        while (start > dyn && start[-1] != '\n')
            start--;
        if (memmem(start, (size_t)(l - start), "*UND*", 5) &&
            memmem(start, (size_t)(l - start), version, strlen(version)))
            return;
    }
    fail_msg("the child has no undefined reference %s@%s", name, version);
}

static void test_versioned_references_bind_to_the_shim(void **state)
{
    fx_t *f = *state;
    char *dyn = command_output("objdump -T '%s'", dh_test_env("DH_TEST_CHILD", 1));
    expect_versioned_ref(dyn, "cudaMalloc", "libcudart.so.13");
    expect_versioned_ref(dyn, "cublasSgemm_v2", "libcublas.so.13");
    expect_versioned_ref(dyn, "cublasLtMatmul", "libcublasLt.so.13");
    free(dyn);

    const char *env[] = {"DHELIX_STATS=json", f->stats_env, NULL};
    dh_run_t r;
    run_child(&r, f, "calls", 1, env);
    expect_exit0(&r);
    char *text = dh_read_file(f->stats_path);
    assert_non_null(text);
    json_t *stats = dh_stats_parse(text);
    assert_int_equal(dh_stats_rows(stats), NHOOKS);
    for (size_t i = 0; i < NHOOKS; i++) {
        long long calls = dh_stats_get(stats, hook_names[i], "calls");
        if (calls != 1)
            fail_msg("%s: expected 1 call counted, got %lld", hook_names[i], calls);
        assert_int_equal(dh_stats_get(stats, hook_names[i], "nested"), 0);
    }
    assert_string_equal(dh_stats_meta(stats, "mode"), "passthrough");
    json_decref(stats);
    free(text);
    dh_run_free(&r);
}

/* The control for the test above: the same run without the shim has no report. */
static void test_without_the_shim_there_is_no_report(void **state)
{
    fx_t *f = *state;
    const char *env[] = {"DHELIX_STATS=json", f->stats_env, NULL};
    dh_run_t r;
    run_child(&r, f, "calls", 0, env);
    expect_exit0(&r);
    char *text = dh_read_file(f->stats_path);
    if (text != NULL)
        fail_msg("a report without the shim: %s", text);
    dh_run_free(&r);
}

static int hook_index(const char *name, size_t len)
{
    for (size_t i = 0; i < NALL; i++)
        if (strlen(all_names[i]) == len && strncmp(all_names[i], name, len) == 0)
            return (int)i;
    return -1;
}

/* Every defined dynamic symbol is a wrapped entry point, and each one appears once. */
static void test_exports_are_exactly_the_wrapped_api(void **state)
{
    (void)state;
    char *syms = command_output("nm -D --defined-only '%s' | awk '{print $3}' | sed 's/@.*//'",
                                dh_test_env("DH_TEST_SHIM", 1));
    static int seen[NALL];
    memset(seen, 0, sizeof seen);
    for (char *l = syms; *l;) {
        size_t len = strcspn(l, "\n");
        int i = hook_index(l, len);
        if (i < 0 && len == 5 && !strncmp(l, "dlsym", 5)) {
            l += len + (l[len] == '\n'); /* interposed to hand out the driver wrappers */
            continue;
        }
        if (i < 0 && len == 20 && !strncmp(l, "dh_group_set_enabled", 20)) {
            l += len + (l[len] == '\n'); /* the shim's own C interface (dhelix_nccl.h) */
            continue;
        }
        if (i < 0)
            fail_msg("libdhelix_shim.so exports %.*s, which is not a wrapped entry point",
                     (int)len, l);
        seen[i]++;
        l += len + (l[len] == '\n');
    }
    for (size_t i = 0; i < NALL; i++)
        if (seen[i] != 1)
            fail_msg("%s is exported %d times, expected once", all_names[i], seen[i]);
    free(syms);
}

/* cuBLAS entry points that enqueue no work: handle life and state, versions, names. */
static int blas_no_work(const char *name, size_t len)
{
    static const char *const prefixes[] = {"cublasCreate", "cublasGet", "cublasSetStream",
                                           "cublasSetWorkspace", "cublasSetMathMode",
                                           "cublasSetPointerMode", "cublasSetAtomicsMode",
                                           "cublasSetEmulationStrategy", "cublasDestroy"};
    static const char *const getters[] = {"cublasGetVector", "cublasGetMatrix"};
    for (size_t i = 0; i < sizeof getters / sizeof getters[0]; i++)
        if (len >= strlen(getters[i]) && !strncmp(name, getters[i], strlen(getters[i])))
            return 0; /* copies from the device: they enqueue work */
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (len >= strlen(prefixes[i]) && !strncmp(name, prefixes[i], strlen(prefixes[i])))
            return 1;
    return 0;
}

/* Every cuBLAS entry point the vgpu implements that enqueues work is wrapped (captured or
 * drained for): one the shim let through would run ahead of the work it deferred. A
 * program can only call on the vgpu what the vgpu exports, so this is the list that must
 * be covered; cublasHgemm* (declared for C++ only) is the documented exception. */
static void test_vgpu_cublas_work_is_wrapped(void **state)
{
    (void)state;
    const char *lib = getenv("DH_TEST_VGPU_CUBLAS");
    if (lib == NULL)
        skip();
    char *syms = command_output("nm -D --defined-only '%s' | awk '{print $3}' | sed 's/@.*//'",
                                lib);
    int checked = 0;
    for (char *l = syms; *l;) {
        size_t len = strcspn(l, "\n");
        if (len > 6 && !strncmp(l, "cublas", 6) && !blas_no_work(l, len) &&
            strncmp(l, "cublasHgemm", 11) != 0) {
            checked++;
            if (hook_index(l, len) < 0)
                fail_msg("the vgpu's %.*s enqueues work but the shim does not wrap it",
                         (int)len, l);
        }
        l += len + (l[len] == '\n');
    }
    if (checked < 30)
        fail_msg("only %d cuBLAS entry points that enqueue work found in %s", checked, lib);
    free(syms);
}

/* The vgpu's runtime and driver entry points that enqueue no work and change nothing a
 * deferred operation depends on: queries, creation, allocation the program waits for,
 * device and pool settings. Every other one it exports must be wrapped. */
static const char *const rt_no_work[] = {
    "cudaDeviceCanAccessPeer", "cudaDeviceEnablePeerAccess", "cudaDeviceGetAttribute",
    "cudaDeviceGetDefaultMemPool", "cudaDeviceGetLimit", "cudaDeviceGetMemPool",
    "cudaDeviceGetPCIBusId", "cudaDeviceGetStreamPriorityRange", "cudaDeviceSetLimit",
    "cudaDeviceSetMemPool", "cudaDriverGetVersion", "cudaEventCreate",
    "cudaEventCreateWithFlags", "cudaFuncGetAttributes", "cudaFuncGetName",
    "cudaFuncGetParamInfo", "cudaFuncSetAttribute", "cudaGetDevice", "cudaGetDeviceCount",
    "cudaGetDeviceFlags", "cudaGetDeviceProperties", "cudaGetErrorName", "cudaGetErrorString",
    "cudaGetFuncBySymbol", "cudaGetSymbolAddress", "cudaGetSymbolSize", "cudaGraphDestroy",
    "cudaGraphInstantiate", "cudaGraphInstantiateWithFlags", "cudaHostAlloc",
    "cudaHostGetDevicePointer", "cudaInitDevice",
    "cudaMallocHost", "cudaMallocManaged", "cudaMemGetInfo", "cudaMemPoolGetAccess",
    "cudaMemPoolGetAttribute", "cudaMemPoolSetAccess", "cudaMemPoolSetAttribute",
    "cudaMemPoolTrimTo", "cudaPointerGetAttributes", "cudaRuntimeGetVersion", "cudaSetDevice",
    "cudaSetDeviceFlags", "cudaStreamCreate", "cudaStreamCreateWithFlags",
    "cudaStreamCreateWithPriority", "cudaStreamGetCaptureInfo", "cudaStreamGetDevice",
    "cudaStreamGetFlags", "cudaStreamGetId", "cudaStreamGetPriority", "cudaStreamIsCapturing",
    "cudaThreadExchangeStreamCaptureMode", NULL};
static const char *const cu_no_work[] = {
    "cuCtxGetCurrent", "cuCtxGetDevice", "cuCtxGetStreamPriorityRange", "cuCtxPopCurrent_v2",
    "cuCtxPushCurrent_v2", "cuCtxSetCurrent", "cuDeviceGet", "cuDeviceGetAttribute",
    "cuDeviceGetCount", "cuDeviceGetName", "cuDeviceGetUuid_v2", "cuDevicePrimaryCtxGetState",
    "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxSetFlags_v2", "cuDeviceTotalMem_v2",
    "cuDriverGetVersion", "cuEventCreate", "cuFuncGetAttribute", "cuFuncGetName",
    "cuFuncGetParamInfo", "cuGetErrorName", "cuGetErrorString", "cuGraphDestroy",
    "cuGraphInstantiateWithFlags", "cuInit", "cuMemAllocHost_v2",
    "cuMemAlloc_v2", "cuMemGetInfo_v2", "cuStreamCreate", "cuStreamCreateWithPriority",
    "cuStreamIsCapturing", NULL};

static int listed(const char *const *list, const char *name, size_t len)
{
    for (; *list; list++)
        if (strlen(*list) == len && !strncmp(*list, name, len))
            return 1;
    return 0;
}

/* Fails for every export of lib starting with prefix that is neither wrapped nor listed;
 * returns how many were checked. */
static int expect_exports_wrapped(const char *lib, const char *prefix,
                                  const char *const *no_work)
{
    char *syms = command_output("nm -D --defined-only '%s' | awk '{print $3}' | sed 's/@.*//'",
                                lib);
    int checked = 0, bad = 0;
    size_t pl = strlen(prefix);
    for (char *l = syms; *l;) {
        size_t len = strcspn(l, "\n");
        if (len > pl && !strncmp(l, prefix, pl) && !listed(no_work, l, len)) {
            checked++;
            if (hook_index(l, len) < 0) {
                print_error("the vgpu's %.*s is neither wrapped nor known to enqueue no work\n",
                            (int)len, l);
                bad++;
            }
        }
        l += len + (l[len] == '\n');
    }
    free(syms);
    if (bad)
        fail_msg("%d entry points of %s left out", bad, lib);
    return checked;
}

/* A call the shim lets through unwrapped would run ahead of the work it deferred, or
 * destroy what that work uses: every runtime and driver entry point of the vgpu is either
 * wrapped or known to enqueue nothing (the lists above). */
static void test_vgpu_runtime_and_driver_work_is_wrapped(void **state)
{
    (void)state;
    const char *dir = getenv("DH_TEST_VGPU_LIBDIR");
    if (dir == NULL)
        skip();
    char path[4096];
    snprintf(path, sizeof path, "%s/libcudart.so.13", dir);
    int n = expect_exports_wrapped(path, "cuda", rt_no_work);
    snprintf(path, sizeof path, "%s/libcuda.so.1", dir);
    n += expect_exports_wrapped(path, "cu", cu_no_work);
    if (n < 60)
        fail_msg("only %d runtime and driver entry points checked", n);
}

static void test_alloc_conf_is_set_only_when_unset(void **state)
{
    fx_t *f = *state;
    dh_run_t r;
    run_child(&r, f, "env", 1, NULL);
    expect_exit0(&r);
    assert_string_equal(r.out, "PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync\n");
    dh_run_free(&r);

    const char *mine[] = {"PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", NULL};
    run_child(&r, f, "env", 1, mine);
    expect_exit0(&r);
    assert_string_equal(r.out, "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n");
    dh_run_free(&r);

    /* Newer PyTorch reads PYTORCH_ALLOC_CONF first: a user's setting there is theirs. */
    const char *newer[] = {"PYTORCH_ALLOC_CONF=backend:native", NULL};
    run_child(&r, f, "env", 1, newer);
    expect_exit0(&r);
    assert_string_equal(r.out, "PYTORCH_CUDA_ALLOC_CONF=(unset)\n");
    dh_run_free(&r);

    run_child(&r, f, "env", 0, NULL);
    assert_string_equal(r.out, "PYTORCH_CUDA_ALLOC_CONF=(unset)\n");
    dh_run_free(&r);
}

/* The first line of text containing key also contains a and b. */
static void expect_line(const char *text, const char *key, const char *a, const char *b)
{
    const char *k = strstr(text, key);
    if (k == NULL)
        fail_msg("no line with '%s' in:\n%s", key, text);
    const char *start = k, *end = k + strcspn(k, "\n");
    while (start > text && start[-1] != '\n')
        start--;
    if (!memmem(start, (size_t)(end - start), a, strlen(a)) ||
        !memmem(start, (size_t)(end - start), b, strlen(b)))
        fail_msg("expected '%s' and '%s' in '%.*s'", a, b, (int)(end - start), start);
}

static void test_print_config_and_mode_line(void **state)
{
    fx_t *f = *state;
    const char *env[] = {"DHELIX_PRINT_CONFIG=1", "DHELIX_LOG=info", NULL};
    dh_run_t r;
    run_child(&r, f, "env", 1, env);
    expect_exit0(&r);
    assert_int_equal(dh_count_lines(r.err, "DHELIX_MAX_QUEUED_OPS"), 1);
    expect_line(r.err, "DHELIX_PRINT_CONFIG ", " 1 ", " env ");
    expect_line(r.err, "DHELIX_MAX_QUEUED_OPS ", " 4096 ", " default ");
    assert_int_equal(dh_count_lines(r.err, "mode=passthrough"), 1);
    assert_int_equal(
        dh_count_lines(r.err, "set PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync"), 1);
    /* Every line the shim wrote carries the prefix. */
    assert_int_equal(dh_count_lines(r.err, ""), dh_count_lines(r.err, "dhelix["));
    dh_run_free(&r);

    run_child(&r, f, "env", 1, NULL);
    expect_exit0(&r);
    assert_string_equal(r.err, ""); /* warn level by default: nothing to say */
    dh_run_free(&r);
}

static void test_bad_value_warns_once(void **state)
{
    fx_t *f = *state;
    const char *env[] = {"DHELIX_MAX_QUEUED_OPS=7", "DHELIX_LOG=loud", NULL};
    dh_run_t r;
    run_child(&r, f, "calls", 1, env);
    expect_exit0(&r);
    assert_int_equal(dh_count_lines(r.err, "DHELIX_MAX_QUEUED_OPS=7: out of range 16..1048576"), 1);
    assert_int_equal(dh_count_lines(r.err, "DHELIX_LOG=loud: not one of"), 1);
    assert_int_equal(dh_count_lines(r.err, "WARN conf:"), 2);
    dh_run_free(&r);
}

/* A plan that cannot be read: one line naming the file, then passthrough. */
static void test_plan_mode_with_a_missing_plan(void **state)
{
    fx_t *f = *state;
    const char *env[] = {"DHELIX_PLAN=/nonexistent/plan.json", "DHELIX_STATS=json", f->stats_env,
                         NULL};
    dh_run_t r;
    run_child(&r, f, "calls", 1, env);
    expect_exit0(&r);
    assert_int_equal(dh_count_lines(r.err, "/nonexistent/plan.json"), 1);
    char *text = dh_read_file(f->stats_path);
    assert_non_null(text);
    json_t *stats = dh_stats_parse(text);
    assert_string_equal(dh_stats_meta(stats, "requested_mode"), "plan");
    assert_string_equal(dh_stats_meta(stats, "mode"), "passthrough");
    assert_int_equal(dh_stats_get(stats, "cudaMalloc", "calls"), 1);
    json_decref(stats);
    free(text);
    dh_run_free(&r);
}

static void test_log_file_pattern(void **state)
{
    fx_t *f = *state;
    char env_file[700], host[64], path[800];
    snprintf(env_file, sizeof(env_file), "DHELIX_LOG_FILE=%s/shim.%%h.%%p.log", f->dir);
    const char *env[] = {"DHELIX_LOG=info", env_file, NULL};
    dh_run_t r;
    run_child(&r, f, "env", 1, env);
    expect_exit0(&r);
    assert_string_equal(r.err, "");
    assert_int_equal(gethostname(host, sizeof(host)), 0);
    host[strcspn(host, ".")] = '\0';
    snprintf(path, sizeof(path), "%s/shim.%s.%ld.log", f->dir, host, r.pid);
    char *log = dh_read_file(path);
    if (log == NULL)
        fail_msg("no log file %s", path);
    assert_int_equal(dh_count_lines(log, "mode=passthrough"), 1);
    free(log);
    dh_run_free(&r);
}

/* The stats table: a header and one row per entry point, in the order of hook_list.h and
 * with its library, all lines the same width (numbers are right-aligned in the last
 * columns). */
static void test_stats_table(void **state)
{
    fx_t *f = *state;
    const char *env[] = {"DHELIX_STATS=1", NULL};
    dh_run_t r;
    run_child(&r, f, "calls", 1, env);
    expect_exit0(&r);
    const char *head = strstr(r.err, "API ");
    assert_non_null(head);
    size_t width = strcspn(head, "\n"), rows = 0;
    for (const char *l = head; *l; l += strcspn(l, "\n") + 1, rows++) {
        if (strcspn(l, "\n") != width)
            fail_msg("misaligned line: '%.*s'", (int)strcspn(l, "\n"), l);
        if (l == head)
            continue;
        char api[64], lib[32];
        unsigned long long calls, nested;
        assert_int_equal(sscanf(l, "%63s %31s %llu %llu", api, lib, &calls, &nested), 4);
        if (rows > NHOOKS)
            fail_msg("row %zu (%s) past the %zu entry points", rows, api, (size_t)NHOOKS);
        assert_string_equal(api, hook_names[rows - 1]);
        assert_string_equal(lib, hook_lib(rows - 1));
        if (calls != 1 || nested != 0)
            fail_msg("%s: %llu calls and %llu nested, expected 1 and 0", api, calls, nested);
    }
    assert_int_equal(rows, NHOOKS + 1);
    assert_int_equal(dh_count_lines(r.err, "dhelix_stats: version="), 1);
    dh_run_free(&r);
}

/* Integer meta value of key, failing when absent or not an integer. */
static long long meta_int(json_t *stats, const char *key)
{
    json_t *v = json_object_get(json_object_get(stats, "meta"), key);
    if (!json_is_integer(v))
        fail_msg("meta \"%s\" is %s, expected an integer", key,
                 v == NULL ? "absent" : "not an integer");
    return (long long)json_integer_value(v);
}

/* The report's meta in mode, for a run that calls no wrapped API: the six keys of the
 * process, plus in a deferring mode the scheduler's summary (an operation count per kind,
 * a drain count per reason, four totals), nothing deferred and no drain but, possibly,
 * the one at exit. */
static void expect_meta(fx_t *f, const char *mode, int deferring)
{
    static const char *const kinds[] = {
#define KIND(id) #id,
        DH_OP_KINDS(KIND)
#undef KIND
    };
    static const char *const drains[] = {
#define DRAIN(id, d) #id,
        DH_DRAIN_REASONS(DRAIN)
#undef DRAIN
    };
    static const char *const totals[] = {"max_queue_depth", "max_deferred_free_bytes",
                                         "replay_errors", "call_rejects", "call_learns", "cross_strand_barriers",
                                         "paired_groups", "dependency_moves",
                                         "order_fallbacks", "kick_flushes", "lag_waits",
                                         "max_held_back", "events_destroyed_later", "pool_parked_peak_bytes",
                                         "pool_reuse_same_strand", "pool_reuse_same_strand_bytes",
                                         "pool_reuse_cross_strand",
                                         "pool_reuse_cross_strand_bytes", "pool_fresh_allocs",
                                         "pool_fresh_bytes", "pool_cross_refused",
                                         "mem_givebacks", "mem_giveback_failed", "mem_giveback_pair", "mem_giveback_ws",
                                         "mem_device_vetoes", "workspace_peak_bytes",
                                         "workspace_serialised_ops", "workspace_refused"};
    const size_t nkinds = sizeof(kinds) / sizeof(kinds[0]);
    const size_t ndrains = sizeof(drains) / sizeof(drains[0]);
    const size_t ntotals = sizeof(totals) / sizeof(totals[0]);
    char mode_env[64], key[64];
    snprintf(mode_env, sizeof(mode_env), "DHELIX_MODE=%s", mode);
    const char *env[] = {mode_env, "DHELIX_STATS=json", f->stats_env, NULL};
    dh_run_t r;
    unlink(f->stats_path); /* the report is appended to the file */
    run_child(&r, f, "env", 1, env);
    expect_exit0(&r);
    char *text = dh_read_file(f->stats_path);
    if (text == NULL)
        fail_msg("%s: no report (stderr: %s)", mode, r.err);
    json_t *stats = dh_stats_parse(text);
    assert_string_equal(dh_stats_meta(stats, "mode"), mode);
    assert_string_equal(dh_stats_meta(stats, "requested_mode"), mode);
    assert_non_null(dh_stats_meta(stats, "version"));
    assert_non_null(dh_stats_meta(stats, "rank"));
    assert_non_null(dh_stats_meta(stats, "host"));
    assert_int_equal(meta_int(stats, "pid"), r.pid);
    size_t want = 6 + (deferring ? nkinds + ndrains + ntotals : 0);
    size_t got = json_object_size(json_object_get(stats, "meta"));
    if (got != want)
        fail_msg("%s: %zu meta keys, expected %zu", mode, got, want);
    for (size_t i = 0; deferring && i < nkinds; i++) {
        snprintf(key, sizeof(key), "deferred_%s", kinds[i]);
        assert_int_equal(meta_int(stats, key), 0);
    }
    for (size_t i = 0; deferring && i < ndrains; i++) {
        snprintf(key, sizeof(key), "drains_%s", drains[i]);
        long long n = meta_int(stats, key);
        if (n != 0 && !(strcmp(drains[i], "EXIT") == 0 && n == 1))
            fail_msg("%s: %s is %lld, expected 0%s", mode, key, n,
                     strcmp(drains[i], "EXIT") == 0 ? " or 1" : "");
    }
    for (size_t i = 0; deferring && i < ntotals; i++)
        assert_int_equal(meta_int(stats, totals[i]), 0);
    json_decref(stats);
    free(text);
    dh_run_free(&r);
}

static void test_stats_meta_by_mode(void **state)
{
    fx_t *f = *state;
    expect_meta(f, "passthrough", 0);
    expect_meta(f, "stress", 1);
    expect_meta(f, "test-strands", 1);
}

/* A wrapper with nothing to forward to answers the API's "not initialised" error and
 * says so once per entry point. */
static void test_missing_definition_returns_not_initialised(void **state)
{
    fx_t *f = *state;
    char *argv[] = {(char *)dh_test_env("DH_TEST_ORPHAN", 1), NULL};
    char expect[256];
    dh_run_t r;
    dh_run(&r, f->dir, argv, dh_test_env("DH_TEST_PRELOAD", 1), NULL);
    expect_exit0(&r);
    snprintf(expect, sizeof(expect),
             "cudaMalloc=%d,%d\ncublasSgemm_v2=%d,%d\ncuStreamSynchronize=%d,%d\n"
             "ncclAllReduce=%d,%d\n",
             (int)cudaErrorInitializationError, (int)cudaErrorInitializationError,
             (int)CUBLAS_STATUS_NOT_INITIALIZED, (int)CUBLAS_STATUS_NOT_INITIALIZED,
             (int)CUDA_ERROR_NOT_INITIALIZED, (int)CUDA_ERROR_NOT_INITIALIZED,
             (int)ncclInternalError, (int)ncclInternalError);
    assert_string_equal(r.out, expect);
    assert_int_equal(dh_count_lines(r.err, "ERROR hook: cudaMalloc: no definition"), 1);
    assert_int_equal(dh_count_lines(r.err, "ERROR hook: cublasSgemm_v2: no definition"), 1);
    assert_int_equal(dh_count_lines(r.err, "ERROR hook: cuStreamSynchronize: no definition"), 1);
    assert_int_equal(dh_count_lines(r.err, "ERROR hook: ncclAllReduce: no definition"), 1);
    assert_int_equal(dh_count_lines(r.err, "ERROR hook:"), 4);
    dh_run_free(&r);
}

/* The re-entry guard: a wrapped call made inside another wrapper on the same thread is
 * forwarded and counted as nested. */
static void test_nested_calls_are_counted_apart(void **state)
{
    fx_t *f = *state;
    char *argv[] = {(char *)dh_test_env("DH_TEST_NESTED", 1), NULL};
    const char *env[] = {"DHELIX_STATS=json", f->stats_env, NULL};
    dh_run_t r;
    dh_run(&r, f->dir, argv, dh_test_env("DH_TEST_PRELOAD", 1), env);
    expect_exit0(&r);
    assert_string_equal(r.out, "cublasSgemm_v2=0\n"); /* the fake library ran */
    char *text = dh_read_file(f->stats_path);
    assert_non_null(text);
    json_t *stats = dh_stats_parse(text);
    assert_int_equal(dh_stats_get(stats, "cublasSgemm_v2", "calls"), 1);
    assert_int_equal(dh_stats_get(stats, "cublasSgemm_v2", "nested"), 0);
    assert_int_equal(dh_stats_get(stats, "cudaMalloc", "calls"), 1);
    assert_int_equal(dh_stats_get(stats, "cudaMalloc", "nested"), 1);
    json_decref(stats);
    free(text);
    dh_run_free(&r);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_versioned_references_bind_to_the_shim),
        T(test_without_the_shim_there_is_no_report),
        T(test_exports_are_exactly_the_wrapped_api),
        T(test_vgpu_cublas_work_is_wrapped),
        T(test_vgpu_runtime_and_driver_work_is_wrapped),
        T(test_alloc_conf_is_set_only_when_unset),
        T(test_print_config_and_mode_line),
        T(test_bad_value_warns_once),
        T(test_plan_mode_with_a_missing_plan),
        T(test_log_file_pattern),
        T(test_stats_table),
        T(test_stats_meta_by_mode),
        T(test_missing_definition_returns_not_initialised),
        T(test_nested_calls_are_counted_apart),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
