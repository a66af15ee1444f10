/*
 * vgpu.hazard: the hazard detector. Two operations that overlap in virtual time and touch
 * overlapping bytes, at least one of them writing, are one hazard. Races between streams
 * (write/write, read/write, write/read; kernels, copies, memsets) are reported; the same
 * work ordered by an event, by stream order, by a host synchronisation or by the legacy
 * stream, and read/read or disjoint (even adjacent) ranges are not. VGPU_HAZARD selects
 * off, warn (one "vgpu: hazard:" line per hazard, the default) or abort (the first
 * hazard's line, then exit status 86); those are checked in child processes.
 */
#include "rt_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N (1u << 16) /* floats per buffer */
#define LONG_NS 1000000.0

typedef struct bufs {
    float *x, *y, *z;
    float *pinned;
    cudaStream_t s1, s2;
} bufs_t;

static void bufs_init(bufs_t *b)
{
    VGT_OK(cudaMalloc((void **)&b->x, N * sizeof(float)));
    VGT_OK(cudaMalloc((void **)&b->y, N * sizeof(float)));
    VGT_OK(cudaMalloc((void **)&b->z, N * sizeof(float)));
    VGT_OK(cudaMallocHost((void **)&b->pinned, N * sizeof(float)));
    VGT_OK(cudaMemset(b->x, 0, N * sizeof(float)));
    VGT_OK(cudaStreamCreateWithFlags(&b->s1, cudaStreamNonBlocking));
    VGT_OK(cudaStreamCreateWithFlags(&b->s2, cudaStreamNonBlocking));
    VGT_OK(cudaDeviceSynchronize());
}

static void bufs_free(bufs_t *b)
{
    VGT_OK(cudaDeviceSynchronize());
    VGT_OK(cudaFree(b->x));
    VGT_OK(cudaFree(b->y));
    VGT_OK(cudaFree(b->z));
    VGT_OK(cudaFreeHost(b->pinned));
    VGT_OK(cudaStreamDestroy(b->s1));
    VGT_OK(cudaStreamDestroy(b->s2));
}

/* ---- scenarios: each issues work and returns how many hazards it must cause ---- */

typedef int (*scenario_fn)(bufs_t *b);

static int ww_kernels(bufs_t *b)
{
    VGT_OK(vgt_fill(b->x, 1.0f, N, LONG_NS, b->s1));
    VGT_OK(vgt_fill(b->x, 2.0f, N, LONG_NS, b->s2));
    return 1;
}

static int rw_kernels(bufs_t *b) /* writer first, then a reader on another stream */
{
    VGT_OK(vgt_fill(b->x, 1.0f, N, LONG_NS, b->s1));
    VGT_OK(vgt_copy(b->x, b->y, N, LONG_NS, b->s2));
    return 1;
}

static int wr_kernels(bufs_t *b) /* reader first, then a writer */
{
    VGT_OK(vgt_add(b->x, b->z, b->y, N, LONG_NS, b->s1));
    VGT_OK(vgt_fill(b->x, 1.0f, N, LONG_NS, b->s2));
    return 1;
}

static int kernel_vs_copy(bufs_t *b)
{
    VGT_OK(vgt_fill(b->x, 1.0f, N, LONG_NS, b->s1));
    VGT_OK(cudaMemcpyAsync(b->z, b->x, N * sizeof(float), cudaMemcpyDeviceToDevice, b->s2));
    return 1;
}

static int kernel_vs_memset(bufs_t *b)
{
    VGT_OK(vgt_copy(b->x, b->y, N, LONG_NS, b->s1));
    VGT_OK(cudaMemsetAsync(b->x + 100, 0, 64, b->s2));
    return 1;
}

static int kernel_vs_h2d(bufs_t *b)
{
    VGT_OK(vgt_copy(b->x, b->y, N, LONG_NS, b->s1));
    VGT_OK(cudaMemcpyAsync(b->x, b->pinned, 256, cudaMemcpyHostToDevice, b->s2));
    return 1;
}

static int one_float_overlap(bufs_t *b)
{
    VGT_OK(vgt_fill(b->x, 1.0f, N / 2 + 1, LONG_NS, b->s1));
    VGT_OK(vgt_fill(b->x + N / 2, 2.0f, N / 2, LONG_NS, b->s2));
    return 1;
}

static int event_ordered(bufs_t *b)
{
    cudaEvent_t e;
    VGT_OK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    VGT_OK(vgt_fill(b->x, 1.0f, N, LONG_NS, b->s1));
    VGT_OK(cudaEventRecord(e, b->s1));
    VGT_OK(cudaStreamWaitEvent(b->s2, e, 0));
    VGT_OK(vgt_copy(b->x, b->y, N, LONG_NS, b->s2));
    VGT_OK(cudaEventDestroy(e));
    return 0;
}

static int read_read(bufs_t *b)
{
    VGT_OK(vgt_copy(b->x, b->y, N, LONG_NS, b->s1));
    VGT_OK(vgt_copy(b->x, b->z, N, LONG_NS, b->s2));
    VGT_OK(cudaMemcpyAsync(b->pinned, b->x, N * sizeof(float), cudaMemcpyDeviceToHost,
                           b->s2));
    return 0;
}

static int disjoint_adjacent(bufs_t *b)
{
    VGT_OK(vgt_fill(b->x, 1.0f, N / 2, LONG_NS, b->s1));
    VGT_OK(vgt_fill(b->x + N / 2, 2.0f, N / 2, LONG_NS, b->s2));
    VGT_OK(vgt_fill(b->y, 2.0f, N, LONG_NS, b->s2));
    return 0;
}

static int same_stream(bufs_t *b)
{
    VGT_OK(vgt_fill(b->x, 1.0f, N, LONG_NS, b->s1));
    VGT_OK(vgt_fill(b->x, 2.0f, N, LONG_NS, b->s1));
    VGT_OK(cudaMemcpyAsync(b->y, b->x, N * sizeof(float), cudaMemcpyDeviceToDevice, b->s1));
    return 0;
}

static int host_synchronised(bufs_t *b)
{
    VGT_OK(vgt_fill(b->x, 1.0f, N, LONG_NS, b->s1));
    VGT_OK(cudaStreamSynchronize(b->s1));
    VGT_OK(vgt_fill(b->x, 2.0f, N, LONG_NS, b->s2));
    return 0;
}

static int legacy_ordered(bufs_t *b)
{
    cudaStream_t blk;
    VGT_OK(cudaStreamCreate(&blk));
    VGT_OK(vgt_fill(b->x, 1.0f, N, LONG_NS, blk));
    VGT_OK(vgt_fill(b->x, 2.0f, N, LONG_NS, 0)); /* the legacy stream waits for blk */
    VGT_OK(vgt_copy(b->x, b->y, N, LONG_NS, blk)); /* and blk waits for it */
    VGT_OK(cudaStreamDestroy(blk));
    return 0;
}

static uint64_t hazards_now(void)
{
    vgpu_counters_t c;
    memset(&c, 0, sizeof(c));
    vgpu_counters(&c);
    return c.hazards;
}

/* Runs one scenario on fresh buffers and compares the hazards it caused with its claim. */
static void run_scenario(const char *name, scenario_fn fn)
{
    bufs_t b;
    bufs_init(&b);
    uint64_t h0 = hazards_now();
    int want = fn(&b);
    VGT_OK(cudaDeviceSynchronize());
    uint64_t got = hazards_now() - h0;
    bufs_free(&b);
    if (got != (uint64_t)want)
        fail_msg("%s: expected %d hazard(s), got %llu", name, want, (unsigned long long)got);
}

#define SCENARIO_TEST(fn)                                                                    \
    static void test_##fn(void **state) { run_scenario(#fn, fn); }
SCENARIO_TEST(ww_kernels)
SCENARIO_TEST(rw_kernels)
SCENARIO_TEST(wr_kernels)
SCENARIO_TEST(kernel_vs_copy)
SCENARIO_TEST(kernel_vs_memset)
SCENARIO_TEST(kernel_vs_h2d)
SCENARIO_TEST(one_float_overlap)
SCENARIO_TEST(event_ordered)
SCENARIO_TEST(read_read)
SCENARIO_TEST(disjoint_adjacent)
SCENARIO_TEST(same_stream)
SCENARIO_TEST(host_synchronised)
SCENARIO_TEST(legacy_ordered)

/* ---- child processes for the modes ---- */

/* Two hazards (write/write, then write/read), each between vgt_fill and another op. */
static int sc_two_hazards(void)
{
    vgt_register_kernels();
    bufs_t b;
    memset(&b, 0, sizeof(b));
    cudaMalloc((void **)&b.x, N * sizeof(float));
    cudaMalloc((void **)&b.y, N * sizeof(float));
    cudaStreamCreateWithFlags(&b.s1, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&b.s2, cudaStreamNonBlocking);
    vgt_fill(b.x, 1.0f, N, LONG_NS, b.s1);
    vgt_fill(b.x, 2.0f, N, LONG_NS, b.s2);
    cudaDeviceSynchronize();
    vgt_fill(b.x, 1.0f, N, LONG_NS, b.s1);
    vgt_copy(b.x, b.y, N, LONG_NS, b.s2);
    cudaDeviceSynchronize();
    printf("hazards=%llu\n", (unsigned long long)hazards_now());
    return 0;
}

static int sc_clean(void)
{
    vgt_register_kernels();
    bufs_t b;
    memset(&b, 0, sizeof(b));
    cudaMalloc((void **)&b.x, N * sizeof(float));
    cudaMalloc((void **)&b.y, N * sizeof(float));
    cudaMalloc((void **)&b.z, N * sizeof(float));
    cudaMallocHost((void **)&b.pinned, N * sizeof(float));
    cudaStreamCreateWithFlags(&b.s1, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&b.s2, cudaStreamNonBlocking);
    event_ordered(&b);
    cudaDeviceSynchronize();
    read_read(&b);
    cudaDeviceSynchronize();
    disjoint_adjacent(&b);
    cudaDeviceSynchronize();
    printf("hazards=%llu\n", (unsigned long long)hazards_now());
    return 0;
}

static const vgt_scenario_t scenarios[] = {
    {"two_hazards", sc_two_hazards},
    {"clean", sc_clean},
    {NULL, NULL},
};

static const char PREFIX[] = "vgpu: hazard:";

/* Every hazard line names the kernel both hazards involve. */
static void check_lines_name_kernel(const vgt_child_t *c)
{
    for (const char *p = c->err; p && *p;) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        if (strncmp(p, PREFIX, sizeof(PREFIX) - 1) == 0) {
            char line[1024];
            snprintf(line, sizeof(line), "%.*s", (int)len, p);
            if (!strstr(line, "vgt_fill"))
                fail_msg("hazard line does not name the kernel vgt_fill: %s", line);
        }
        p = eol ? eol + 1 : NULL;
    }
}

static void run_mode(const char *scenario, const char *mode, int want_code, int want_lines)
{
    char envv[64];
    if (mode)
        snprintf(envv, sizeof(envv), "VGPU_HAZARD=%s", mode);
    else
        snprintf(envv, sizeof(envv), "VGPU_HAZARD");
    const char *env[] = {envv, NULL};
    vgt_child_t c;
    assert_int_equal(vgt_run_child(scenario, env, 60, &c), 0);
    int lines = vgt_count_lines(c.err, PREFIX);
    if (!c.exited || c.code != want_code || lines != want_lines) {
        VGT_CHILD_INFO(&c);
        fail_msg("%s with %s: expected exit %d and %d \"%s\" line(s), got exited=%d code=%d "
                 "sig=%d and %d line(s)",
                 scenario, envv, want_code, want_lines, PREFIX, c.exited, c.code, c.sig, lines);
    }
    check_lines_name_kernel(&c);
    vgt_child_free(&c);
}

static void test_warn_mode(void **state) { run_mode("two_hazards", "warn", 0, 2); }
static void test_default_mode_warns(void **state) { run_mode("two_hazards", NULL, 0, 2); }
static void test_abort_mode(void **state) { run_mode("two_hazards", "abort", 86, 1); }
static void test_abort_mode_clean_program(void **state) { run_mode("clean", "abort", 0, 0); }
static void test_off_mode(void **state) { run_mode("two_hazards", "off", 0, 0); }

static int setup(void **state)
{
    vgt_register_kernels();
    return cudaSetDevice(0) == cudaSuccess ? 0 : -1;
}

int main(int argc, char **argv)
{
    int rc = vgt_scenario_dispatch(argc, argv, scenarios);
    if (rc >= 0)
        return rc;
    const struct CMUnitTest tests[] = {
        /* races: one hazard each */
        cmocka_unit_test(test_ww_kernels),
        cmocka_unit_test(test_rw_kernels),
        cmocka_unit_test(test_wr_kernels),
        cmocka_unit_test(test_kernel_vs_copy),
        cmocka_unit_test(test_kernel_vs_memset),
        cmocka_unit_test(test_kernel_vs_h2d),
        cmocka_unit_test(test_one_float_overlap),
        /* ordered or harmless: none */
        cmocka_unit_test(test_event_ordered),
        cmocka_unit_test(test_read_read),
        cmocka_unit_test(test_disjoint_adjacent),
        cmocka_unit_test(test_same_stream),
        cmocka_unit_test(test_host_synchronised),
        cmocka_unit_test(test_legacy_ordered),
        /* modes, in child processes */
        cmocka_unit_test(test_warn_mode),
        cmocka_unit_test(test_default_mode_warns),
        cmocka_unit_test(test_abort_mode),
        cmocka_unit_test(test_abort_mode_clean_program),
        cmocka_unit_test(test_off_mode),
    };
    return cmocka_run_group_tests_name("vgpu.hazard", tests, setup, NULL);
}
