/*
 * vgpu.queues: hardware queues follow CUDA_DEVICE_MAX_CONNECTIONS. With one queue every
 * stream shares a FIFO: issue order is start order, and an op waiting on an event blocks
 * the ops issued after it, so the makespan of a program depends on the order in which it
 * issues work to independent streams; with 8 queues (the default) it does not.
 *
 * The program: stream A runs a long kernel K1 and records E; stream B waits on E and runs
 * a short kernel K2; stream C runs an independent copy as long as K1 (K1's cost is set to
 * the copy's measured time). Order 1 issues C's copy after B's wait, order 2 before A's
 * record and B's wait. One queue: in order 1 the copy cannot start before B's wait is
 * satisfied (makespan K1 + copy = 2*K1), in order 2 it starts at once (K1 + K2). Eight
 * queues: both orders end at K1 + K2. The program runs as a child under each setting.
 * Makespans are measured from a gate that every stream waits on (see run_order).
 */
#include "rt_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB (1u << 20)

/* Every stream first waits for a gate that opens 2 ms after the program starts, after all
 * of the work below has been issued, so that only queue order decides start times and
 * the makespan, measured from the gate, has no host-time terms. */
static double run_order(int order, cudaStream_t a, cudaStream_t b, cudaStream_t c, void *d,
                        const void *h, size_t bytes, double k1, double k2)
{
    cudaStream_t g;
    cudaEvent_t gate, e, end[3];
    cudaStreamCreateWithFlags(&g, cudaStreamNonBlocking);
    cudaEventCreate(&gate);
    cudaEventCreate(&e);
    for (int i = 0; i < 3; i++)
        cudaEventCreate(&end[i]);
    cudaDeviceSynchronize();
    vgt_spin(2000000, 1.0, g);
    cudaEventRecord(gate, g);
    cudaStreamWaitEvent(a, gate, 0);
    vgt_spin(k1, 1.0, a);
    if (order == 2) { /* C's copy issued early: before A's record and B's wait */
        cudaStreamWaitEvent(c, gate, 0);
        cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, c);
    }
    cudaEventRecord(e, a);
    cudaStreamWaitEvent(b, gate, 0);
    cudaStreamWaitEvent(b, e, 0);
    vgt_spin(k2, 1.0, b);
    if (order == 1) { /* C's copy issued after B's wait */
        cudaStreamWaitEvent(c, gate, 0);
        cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, c);
    }
    cudaEventRecord(end[0], a);
    cudaEventRecord(end[1], b);
    cudaEventRecord(end[2], c);
    cudaDeviceSynchronize();
    double mk = 0;
    for (int i = 0; i < 3; i++) {
        float ms = 0;
        if (cudaEventElapsedTime(&ms, gate, end[i]) != cudaSuccess)
            return -1;
        if (ms * 1e6 > mk)
            mk = ms * 1e6;
    }
    cudaEventDestroy(gate);
    cudaEventDestroy(e);
    for (int i = 0; i < 3; i++)
        cudaEventDestroy(end[i]);
    cudaStreamDestroy(g);
    return mk;
}

static int sc_orders(void)
{
    vgt_register_kernels();
    if (cudaSetDevice(0) != cudaSuccess)
        return 3;
    const size_t bytes = 64 * MIB;
    void *h = NULL, *d = NULL;
    if (cudaMallocHost(&h, bytes) != cudaSuccess || cudaMalloc(&d, bytes) != cudaSuccess)
        return 4;
    memset(h, 3, bytes);
    const vgpu_profile_t *p = vgpu_profile();
    cudaStream_t a, b, c;
    cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&c, cudaStreamNonBlocking);
    /* K1 lasts as long as the copy does on this device (measured, so that this test
     * depends on the queues only, not on the copy cost model). */
    cudaEvent_t x, y;
    cudaEventCreate(&x);
    cudaEventCreate(&y);
    vgt_spin(1000000, 1.0, c);
    cudaEventRecord(x, c);
    cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, c);
    cudaEventRecord(y, c);
    cudaEventSynchronize(y);
    float ms = 0;
    cudaEventElapsedTime(&ms, x, y);
    double copy_ns = ms * 1e6;
    /* K2 stays clear of the profile's minimum kernel time. */
    double k2 = copy_ns / 10 > 2 * p->kernel_min_us * 1e3 ? copy_ns / 10 : 2 * p->kernel_min_us * 1e3;
    cudaEventDestroy(x);
    cudaEventDestroy(y);
    double o1 = run_order(1, a, b, c, d, h, bytes, copy_ns, k2);
    double o2 = run_order(2, a, b, c, d, h, bytes, copy_ns, k2);
    vgpu_counters_t cnt;
    vgpu_counters(&cnt);
    printf("k1=%.3f\nk2=%.3f\norder1=%.3f\norder2=%.3f\nhazards=%llu\nlast=%d\n", copy_ns, k2,
           o1, o2, (unsigned long long)cnt.hazards, (int)cudaGetLastError());
    return 0;
}

static const vgt_scenario_t scenarios[] = {
    {"orders", sc_orders},
    {NULL, NULL},
};

static double field_d(const char *out, const char *key)
{
    size_t kl = strlen(key);
    for (const char *p = out; p && *p;) {
        if (strncmp(p, key, kl) == 0 && p[kl] == '=')
            return strtod(p + kl + 1, NULL);
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    fail_msg("child output has no \"%s=\" line:\n%s", key, out ? out : "");
    return -1;
}

typedef struct result {
    double k1, k2, o1, o2;
} result_t;

static result_t run_with(const char *setting)
{
    char envv[64];
    if (setting)
        snprintf(envv, sizeof(envv), "CUDA_DEVICE_MAX_CONNECTIONS=%s", setting);
    else
        snprintf(envv, sizeof(envv), "CUDA_DEVICE_MAX_CONNECTIONS");
    const char *env[] = {envv, NULL};
    vgt_child_t c;
    assert_int_equal(vgt_run_child("orders", env, 90, &c), 0);
    if (!c.exited || c.code != 0) {
        VGT_CHILD_INFO(&c);
        fail_msg("%s: child failed", envv);
    }
    result_t r = {field_d(c.out, "k1"), field_d(c.out, "k2"), field_d(c.out, "order1"),
                  field_d(c.out, "order2")};
    if (field_d(c.out, "hazards") != 0 || field_d(c.out, "last") != 0 || r.o1 <= 0 ||
        r.o2 <= 0) {
        VGT_CHILD_INFO(&c);
        fail_msg("%s: expected no hazards, no error and positive makespans", envv);
    }
    print_message("%s: K1 %.0f ns, makespan order 1 %.0f ns, order 2 %.0f ns\n", envv, r.k1,
                  r.o1, r.o2);
    vgt_child_free(&c);
    return r;
}

static void check_order_independent(const result_t *r, const char *what)
{
    double slack = 0.01 * r->k1 + 2;
    VGT_IN_RANGE(what, r->k1 + r->k2 - 1, r->k1 + r->k2 + slack, r->o1);
    VGT_IN_RANGE(what, r->k1 + r->k2 - 1, r->k1 + r->k2 + slack, r->o2);
    VGT_NEAR(what, r->o1, r->o2, slack, 0);
}

static void test_one_queue_issue_order_matters(void **state)
{
    result_t r = run_with("1");
    double slack = 0.01 * r.k1 + 2;
    VGT_IN_RANGE("one queue, order 1 (copy issued after B's wait): makespan K1 + copy (ns)",
                 2.0 * r.k1 - 1, 2.0 * r.k1 + slack, r.o1);
    VGT_IN_RANGE("one queue, order 2 (copy issued before A's record and B's wait): makespan "
                 "K1 + K2 (ns)",
                 r.k1 + r.k2 - 1, r.k1 + r.k2 + slack, r.o2);
}

static void test_eight_queues_issue_order_does_not_matter(void **state)
{
    result_t r = run_with("8");
    check_order_independent(&r, "eight queues: makespan (ns)");
}

static void test_default_is_eight_queues(void **state)
{
    result_t r = run_with(NULL);
    check_order_independent(&r, "CUDA_DEVICE_MAX_CONNECTIONS unset: makespan (ns)");
}

int main(int argc, char **argv)
{
    int rc = vgt_scenario_dispatch(argc, argv, scenarios);
    if (rc >= 0)
        return rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_queue_issue_order_matters),
        cmocka_unit_test(test_eight_queues_issue_order_does_not_matter),
        cmocka_unit_test(test_default_is_eight_queues),
    };
    return cmocka_run_group_tests_name("vgpu.queues", tests, NULL, NULL);
}
