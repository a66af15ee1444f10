/*
 * vgpu.cost: virtual time. Kernel costs as registered, the cost helpers of vgpu.h, copy
 * and memset times from bytes and the profile's bandwidths, launch cost as host time,
 * the host clock's jump on a wait, concurrency (two compute kernels share the device; a
 * kernel and a copy overlap without interference), and the counters.
 *
 * Timed regions start behind a "gate": a kernel on another stream followed by an event
 * that every measured stream waits on, so that the host's issue times never decide when
 * measured work starts.
 */
#include "rt_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB (1u << 20)

static int setup(void **state)
{
    vgt_register_kernels();
    return cudaSetDevice(0) == cudaSuccess ? 0 : -1;
}

typedef struct gate {
    cudaStream_t g;
    cudaEvent_t open;
} gate_t;

/* Makes streams s[0..n) wait until 1 ms of device time after now. */
static void gate_start(gate_t *gt, cudaStream_t *s, int n)
{
    VGT_OK(cudaStreamCreateWithFlags(&gt->g, cudaStreamNonBlocking));
    VGT_OK(cudaEventCreate(&gt->open));
    VGT_OK(vgt_spin(1000000, 1.0, gt->g));
    VGT_OK(cudaEventRecord(gt->open, gt->g));
    for (int i = 0; i < n; i++)
        VGT_OK(cudaStreamWaitEvent(s[i], gt->open, 0));
}

static void gate_end(gate_t *gt)
{
    VGT_OK(cudaStreamSynchronize(gt->g));
    VGT_OK(cudaEventDestroy(gt->open));
    VGT_OK(cudaStreamDestroy(gt->g));
}

static cudaEvent_t mark(cudaStream_t s)
{
    cudaEvent_t e;
    VGT_OK(cudaEventCreate(&e));
    VGT_OK(cudaEventRecord(e, s));
    return e;
}

static void make_streams(cudaStream_t *s, int n)
{
    for (int i = 0; i < n; i++)
        VGT_OK(cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking));
}

static void drop_streams(cudaStream_t *s, int n)
{
    for (int i = 0; i < n; i++)
        VGT_OK(cudaStreamDestroy(s[i]));
}

/* Device time of one asynchronous operation issued by `issue` on a busy stream. */
typedef void (*issue_fn)(cudaStream_t s, void *arg);

static double time_op(issue_fn issue, void *arg)
{
    cudaStream_t s;
    VGT_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    VGT_OK(vgt_spin(1000000, 1.0, s));
    cudaEvent_t a = mark(s);
    issue(s, arg);
    cudaEvent_t b = mark(s);
    VGT_OK(cudaEventSynchronize(b));
    double ns = vgt_elapsed_ns(a, b);
    VGT_OK(cudaEventDestroy(a));
    VGT_OK(cudaEventDestroy(b));
    VGT_OK(cudaStreamDestroy(s));
    return ns;
}

typedef struct copy_arg {
    void *dst;
    const void *src;
    size_t bytes;
    enum cudaMemcpyKind kind;
} copy_arg_t;

static void issue_copy(cudaStream_t s, void *p)
{
    copy_arg_t *c = p;
    VGT_OK(cudaMemcpyAsync(c->dst, c->src, c->bytes, c->kind, s));
}

static void issue_memset(cudaStream_t s, void *p)
{
    copy_arg_t *c = p;
    VGT_OK(cudaMemsetAsync(c->dst, 0, c->bytes, s));
}

static void test_kernel_cost_is_exact(void **state)
{
    cudaStream_t s[1];
    make_streams(s, 1);
    gate_t gt;
    gate_start(&gt, s, 1);
    VGT_OK(vgt_spin(100000, 1.0, s[0]));
    cudaEvent_t e1 = mark(s[0]);
    VGT_OK(vgt_spin(250000, 0.5, s[0]));
    cudaEvent_t e2 = mark(s[0]);
    VGT_OK(cudaEventSynchronize(e2));
    VGT_NEAR("100000 ns kernel (ns)", 100000.0, vgt_elapsed_ns(gt.open, e1), 1.0, 1e-6);
    VGT_NEAR("then a 250000 ns kernel (ns)", 350000.0, vgt_elapsed_ns(gt.open, e2), 1.0, 1e-6);
    gate_end(&gt);
    VGT_OK(cudaEventDestroy(e1));
    VGT_OK(cudaEventDestroy(e2));
    drop_streams(s, 1);
}

/* The registered cost is the kernel's device time, also below the profile's minimum
 * (vgpu.h: the minimum applies to kernels without a cost function). */
static void test_small_registered_cost_is_kept(void **state)
{
    const double kmin = vgpu_profile()->kernel_min_us * 1e3;
    const double small = kmin / 4;
    cudaStream_t s[1];
    make_streams(s, 1);
    gate_t gt;
    gate_start(&gt, s, 1);
    VGT_OK(vgt_spin(small, 1.0, s[0]));
    cudaEvent_t e1 = mark(s[0]);
    VGT_OK(cudaEventSynchronize(e1));
    VGT_NEAR("kernel registered with a cost of kernel_min_us / 4 (ns)", small,
             vgt_elapsed_ns(gt.open, e1), 1.0, 1e-6);
    gate_end(&gt);
    VGT_OK(cudaEventDestroy(e1));
    drop_streams(s, 1);
}

static void test_cost_helpers(void **state)
{
    const vgpu_profile_t *p = vgpu_profile();
    assert_non_null(p);
    assert_true(p->hbm_gbps > 0 && p->pcie_gbps > 0 && p->kernel_min_us > 0);
    double kmin = p->kernel_min_us * 1e3;
    double b = 256.0 * MIB;
    VGT_NEAR("vgpu_cost_bytes(256 MiB) (ns)", b / p->hbm_gbps + kmin, vgpu_cost_bytes(b), 1e-3,
             1e-9);
    VGT_NEAR("vgpu_cost_bytes(0) (ns)", kmin, vgpu_cost_bytes(0), 1e-3, 1e-9);
    struct {
        int bits;
        double tflops;
    } d[] = {{32, p->fp32_tflops}, {19, p->tf32_tflops}, {16, p->fp16_tflops},
             {17, p->bf16_tflops}};
    double f = 1e13;
    for (size_t i = 0; i < sizeof(d) / sizeof(d[0]); i++) {
        double peak = f / (d[i].tflops * 1e3);
        char what[64];
        snprintf(what, sizeof(what), "vgpu_cost_flops(1e13, %d) (ns)", d[i].bits);
        VGT_IN_RANGE(what, peak * (1 - 1e-9), peak + kmin + 1e-3, vgpu_cost_flops(f, d[i].bits));
    }
}

static void test_copy_times(void **state)
{
    const vgpu_profile_t *p = vgpu_profile();
    const size_t bytes = 64 * MIB;
    char *h = NULL, *d1 = NULL, *d2 = NULL, *pageable = malloc(bytes);
    assert_non_null(pageable);
    VGT_OK(cudaMallocHost((void **)&h, bytes));
    VGT_OK(cudaMalloc((void **)&d1, bytes));
    VGT_OK(cudaMalloc((void **)&d2, bytes));
    memset(h, 1, bytes);
    memset(pageable, 1, bytes);
    double pcie = (double)bytes / p->pcie_gbps, hbm = 2.0 * (double)bytes / p->hbm_gbps;
    const struct {
        const char *what;
        copy_arg_t c;
        double want;
    } t[] = {
        {"H2D from pinned memory = bytes / pcie_gbps", {d1, h, bytes, cudaMemcpyHostToDevice}, pcie},
        {"H2D from pageable memory = bytes / pcie_gbps",
         {d1, pageable, bytes, cudaMemcpyHostToDevice}, pcie},
        {"D2H to pinned memory = bytes / pcie_gbps", {h, d1, bytes, cudaMemcpyDeviceToHost}, pcie},
        {"H2D from pinned memory, cudaMemcpyDefault", {d1, h, bytes, cudaMemcpyDefault}, pcie},
        {"D2D = 2 * bytes / hbm_gbps", {d2, d1, bytes, cudaMemcpyDeviceToDevice}, hbm},
        {"D2D, cudaMemcpyDefault", {d2, d1, bytes, cudaMemcpyDefault}, hbm},
    };
    char report[2048] = "";
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        double got = time_op(issue_copy, (void *)&t[i].c);
        if (!(got >= t[i].want * (1 - 1e-4) - 1 && got <= t[i].want * (1 + 1e-4) + 1)) {
            size_t l = strlen(report);
            snprintf(report + l, sizeof(report) - l, "  %s: expected %.1f ns, got %.1f ns\n",
                     t[i].what, t[i].want, got);
        }
    }
    /* The bandwidth term alone, whatever fixed cost a copy has. */
    copy_arg_t full = {d1, h, bytes, cudaMemcpyHostToDevice};
    copy_arg_t half = {d1, h, bytes / 2, cudaMemcpyHostToDevice};
    double slope = time_op(issue_copy, &full) - time_op(issue_copy, &half);
    if (!(slope >= pcie / 2 * (1 - 1e-4) - 1 && slope <= pcie / 2 * (1 + 1e-4) + 1)) {
        size_t l = strlen(report);
        snprintf(report + l, sizeof(report) - l,
                 "  pinned H2D: time(64 MiB) - time(32 MiB) = 32 MiB / pcie_gbps: expected %.1f "
                 "ns, got %.1f ns\n",
                 pcie / 2, slope);
    }
    VGT_OK(cudaFree(d1));
    VGT_OK(cudaFree(d2));
    VGT_OK(cudaFreeHost(h));
    free(pageable);
    if (report[0])
        fail_msg("copy times of 64 MiB (%s: hbm_gbps %g, pcie_gbps %g):\n%s", p->name,
                 p->hbm_gbps, p->pcie_gbps, report);
}

static void test_memset_times(void **state)
{
    const vgpu_profile_t *p = vgpu_profile();
    const size_t bytes = 64 * MIB;
    char *d = NULL;
    VGT_OK(cudaMalloc((void **)&d, bytes));
    copy_arg_t full = {d, NULL, bytes, cudaMemcpyDefault};
    copy_arg_t half = {d, NULL, bytes / 2, cudaMemcpyDefault};
    double t_full = time_op(issue_memset, &full), t_half = time_op(issue_memset, &half);
    double bw = (double)bytes / p->hbm_gbps;
    VGT_IN_RANGE("memset 64 MiB: bytes / hbm_gbps, plus at most the minimum kernel time (ns)",
                 bw * (1 - 1e-4), bw + p->kernel_min_us * 1e3 + 1.0, t_full);
    VGT_NEAR("memset: time(64 MiB) - time(32 MiB) = 32 MiB / hbm_gbps (ns)", bw / 2,
             t_full - t_half, 1.0, 1e-4);
    VGT_OK(cudaFree(d));
}

static void test_launch_cost_is_host_time(void **state)
{
    const vgpu_profile_t *p = vgpu_profile();
    double L = p->launch_us * 1e3;
    cudaStream_t s[1];
    make_streams(s, 1);
    VGT_OK(cudaStreamSynchronize(s[0]));
    double h0 = vgpu_host_time_ns();
    for (int i = 0; i < 10; i++)
        VGT_OK(vgt_spin(1.0, 0.1, s[0]));
    double h1 = vgpu_host_time_ns();
    VGT_NEAR("host time of 10 launches (ns)", 10 * L, h1 - h0, 1e-3, 1e-9);
    VGT_OK(cudaStreamSynchronize(s[0]));

    /* Kernels much shorter than a launch: the stream is launch-bound. */
    const int n = 50;
    cudaEvent_t a = mark(s[0]);
    for (int i = 0; i < n; i++)
        VGT_OK(vgt_spin(L / 10, 0.1, s[0]));
    cudaEvent_t b = mark(s[0]);
    VGT_OK(cudaEventSynchronize(b));
    VGT_IN_RANGE("50 launch-bound kernels (ns)", (n - 1) * L, (n + 2) * L,
                 vgt_elapsed_ns(a, b));
    VGT_OK(cudaEventDestroy(a));
    VGT_OK(cudaEventDestroy(b));
    drop_streams(s, 1);
}

static void test_host_clock_jumps_on_wait(void **state)
{
    const vgpu_profile_t *p = vgpu_profile();
    double L = p->launch_us * 1e3;
    cudaStream_t s[1];
    make_streams(s, 1);
    VGT_OK(cudaStreamSynchronize(s[0]));
    double h0 = vgpu_host_time_ns();
    VGT_OK(vgt_spin(5000000, 1.0, s[0]));
    VGT_OK(cudaStreamSynchronize(s[0]));
    double h1 = vgpu_host_time_ns(), d1 = vgpu_device_time_ns();
    VGT_IN_RANGE("host time after waiting for a 5 ms kernel (ns since issue)", 5e6,
                 5e6 + 3 * L + 1, h1 - h0);
    if (d1 + 1e-6 < h0 + 5e6)
        fail_msg("device time %.1f is before the kernel's end %.1f", d1, h0 + 5e6);
    /* Virtual clocks never run backwards. */
    double h2 = vgpu_host_time_ns(), d2 = vgpu_device_time_ns();
    assert_true(h2 >= h1 && d2 >= d1);
    drop_streams(s, 1);
}

/* Two equal compute kernels that fill the device share it: each takes twice as long. */
static void test_two_kernels_share_device(void **state)
{
    const double T = 1000000;
    cudaStream_t s[2];
    make_streams(s, 2);
    gate_t gt;
    gate_start(&gt, s, 2);
    VGT_OK(vgt_spin(T, 1.0, s[0]));
    VGT_OK(vgt_spin(T, 1.0, s[1]));
    cudaEvent_t e0 = mark(s[0]), e1 = mark(s[1]);
    VGT_OK(cudaDeviceSynchronize());
    VGT_NEAR("first of two co-running kernels of solo time T (ns)", 2 * T,
             vgt_elapsed_ns(gt.open, e0), 1.0, 1e-3);
    VGT_NEAR("second of two co-running kernels of solo time T (ns)", 2 * T,
             vgt_elapsed_ns(gt.open, e1), 1.0, 1e-3);
    gate_end(&gt);
    VGT_OK(cudaEventDestroy(e0));
    VGT_OK(cudaEventDestroy(e1));

    /* On one stream: T, then 2T. */
    gate_start(&gt, s, 1);
    VGT_OK(vgt_spin(T, 1.0, s[0]));
    e0 = mark(s[0]);
    VGT_OK(vgt_spin(T, 1.0, s[0]));
    e1 = mark(s[0]);
    VGT_OK(cudaDeviceSynchronize());
    VGT_NEAR("first of two kernels on one stream (ns)", T, vgt_elapsed_ns(gt.open, e0), 1.0, 1e-6);
    VGT_NEAR("second of two kernels on one stream (ns)", 2 * T, vgt_elapsed_ns(gt.open, e1), 1.0,
             1e-6);
    gate_end(&gt);
    VGT_OK(cudaEventDestroy(e0));
    VGT_OK(cudaEventDestroy(e1));
    drop_streams(s, 2);
}

/* Kernels that declare half the device each fit side by side. */
static void test_partial_kernels_fit_together(void **state)
{
    const double T = 1000000;
    cudaStream_t s[2];
    make_streams(s, 2);
    gate_t gt;
    gate_start(&gt, s, 2);
    VGT_OK(vgt_spin(T, 0.5, s[0]));
    VGT_OK(vgt_spin(T, 0.5, s[1]));
    cudaEvent_t e0 = mark(s[0]), e1 = mark(s[1]);
    VGT_OK(cudaDeviceSynchronize());
    VGT_NEAR("two co-running kernels with sm_fraction 0.5 (ns)", T, vgt_elapsed_ns(gt.open, e0),
             1.0, 1e-3);
    VGT_NEAR("two co-running kernels with sm_fraction 0.5 (ns)", T, vgt_elapsed_ns(gt.open, e1),
             1.0, 1e-3);
    gate_end(&gt);
    VGT_OK(cudaEventDestroy(e0));
    VGT_OK(cudaEventDestroy(e1));
    drop_streams(s, 2);
}

/* A compute kernel and a copy overlap fully: neither slows the other. */
static void test_kernel_and_copy_overlap(void **state)
{
    const size_t bytes = 32 * MIB;
    const double T = 1000000;
    char *h = NULL, *d = NULL;
    VGT_OK(cudaMallocHost((void **)&h, bytes));
    VGT_OK(cudaMalloc((void **)&d, bytes));
    /* The copy's solo time as this device models it (test_copy_times checks the model). */
    copy_arg_t h2d = {d, h, bytes, cudaMemcpyHostToDevice};
    const double C = time_op(issue_copy, &h2d);
    cudaStream_t s[2];
    make_streams(s, 2);
    gate_t gt;
    gate_start(&gt, s, 2);
    VGT_OK(vgt_spin(T, 1.0, s[0]));
    VGT_OK(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, s[1]));
    cudaEvent_t e0 = mark(s[0]), e1 = mark(s[1]);
    VGT_OK(cudaDeviceSynchronize());
    VGT_NEAR("kernel co-running with a copy (ns)", T, vgt_elapsed_ns(gt.open, e0), 1.0, 1e-6);
    VGT_NEAR("copy co-running with a kernel (ns)", C, vgt_elapsed_ns(gt.open, e1), 1.0, 1e-4);
    gate_end(&gt);
    VGT_OK(cudaEventDestroy(e0));
    VGT_OK(cudaEventDestroy(e1));
    drop_streams(s, 2);
    VGT_OK(cudaFree(d));
    VGT_OK(cudaFreeHost(h));
}

static void test_counters(void **state)
{
    const vgpu_profile_t *p = vgpu_profile();
    const size_t bytes = 16 * MIB;
    const double T = 2000000;
    char *h = NULL, *d = NULL;
    VGT_OK(cudaMallocHost((void **)&h, bytes));
    VGT_OK(cudaMalloc((void **)&d, bytes));
    copy_arg_t h2d = {d, h, bytes, cudaMemcpyHostToDevice};
    const double C = time_op(issue_copy, &h2d);
    cudaStream_t s[2];
    make_streams(s, 2);
    VGT_OK(cudaDeviceSynchronize());
    vgpu_counters_reset();
    vgpu_counters_t c;
    memset(&c, 0xff, sizeof(c));
    vgpu_counters(&c);
    assert_true(c.busy_ns_compute == 0 && c.busy_ns_copy == 0 && c.busy_ns_comm == 0);
    assert_true(c.overlap_ns == 0);
    assert_int_equal(c.ops_completed, 0);
    assert_int_equal(c.bytes_copied, 0);

    VGT_OK(vgt_spin(T, 1.0, s[0]));
    VGT_OK(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, s[1]));
    vgpu_counters(&c); /* waits for the work */
    VGT_OK(cudaStreamQuery(s[0]));
    VGT_OK(cudaStreamQuery(s[1]));
    VGT_NEAR("busy_ns_compute", T, c.busy_ns_compute, 1.0, 1e-6);
    VGT_NEAR("busy_ns_copy", C, c.busy_ns_copy, 1.0, 1e-4);
    VGT_NEAR("busy_ns_comm", 0, c.busy_ns_comm, 0, 0);
    VGT_NEAR("overlap_ns (compute with communication)", 0, c.overlap_ns, 0, 0);
    assert_int_equal(c.ops_completed, 2);
    assert_int_equal(c.bytes_copied, bytes);
    assert_int_equal(c.hazards, 0);
    assert_true(c.peak_bytes_allocated >= c.bytes_allocated && c.bytes_allocated >= bytes);

    /* Busy time is a union: two overlapping kernels count once. */
    vgpu_counters_reset();
    VGT_OK(vgt_spin(T, 0.5, s[0]));
    VGT_OK(vgt_spin(T, 0.5, s[1]));
    vgpu_counters(&c);
    VGT_IN_RANGE("busy_ns_compute of two overlapping kernels", T, T + 3 * p->launch_us * 1e3 + 1,
                 c.busy_ns_compute);
    drop_streams(s, 2);
    VGT_OK(cudaFree(d));
    VGT_OK(cudaFreeHost(h));
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernel_cost_is_exact),
        cmocka_unit_test(test_small_registered_cost_is_kept),
        cmocka_unit_test(test_cost_helpers),
        cmocka_unit_test(test_copy_times),
        cmocka_unit_test(test_memset_times),
        cmocka_unit_test(test_launch_cost_is_host_time),
        cmocka_unit_test(test_host_clock_jumps_on_wait),
        cmocka_unit_test(test_two_kernels_share_device),
        cmocka_unit_test(test_partial_kernels_fit_together),
        cmocka_unit_test(test_kernel_and_copy_overlap),
        cmocka_unit_test(test_counters),
    };
    return cmocka_run_group_tests_name("vgpu.cost", tests, setup, NULL);
}
