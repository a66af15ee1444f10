/*
 * vgpu.events: event creation flags, record / record with flags, query, synchronize,
 * elapsed time in virtual time, destroy, and the documented errors (never recorded,
 * timing disabled, not yet complete, invalid handles).
 */
#include "rt_common.h"

#include <string.h>

static int setup(void **state)
{
    vgt_register_kernels();
    return cudaSetDevice(0) == cudaSuccess ? 0 : -1;
}

static void test_create_flags(void **state)
{
    unsigned ok[] = {cudaEventDefault, cudaEventBlockingSync, cudaEventDisableTiming,
                     cudaEventBlockingSync | cudaEventDisableTiming,
                     cudaEventDisableTiming | cudaEventInterprocess};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        cudaEvent_t e = NULL;
        VGT_OK(cudaEventCreateWithFlags(&e, ok[i]));
        assert_non_null(e);
        VGT_OK(cudaEventDestroy(e));
    }
    cudaEvent_t e;
    VGT_EXPECT_RT(cudaErrorInvalidValue, cudaEventCreateWithFlags(&e, cudaEventInterprocess));
    VGT_EXPECT_RT(cudaErrorInvalidValue, cudaEventCreateWithFlags(&e, 0x80));
    VGT_EXPECT_RT(cudaErrorInvalidValue, cudaEventCreate(NULL));
    (void)cudaGetLastError();
    cudaEvent_t a, b;
    VGT_OK(cudaEventCreate(&a));
    VGT_OK(cudaEventCreate(&b));
    assert_ptr_not_equal(a, b);
    VGT_OK(cudaEventDestroy(a));
    VGT_OK(cudaEventDestroy(b));
}

static void test_never_recorded(void **state)
{
    cudaEvent_t a, b, c;
    float ms = -1;
    VGT_OK(cudaEventCreate(&a));
    VGT_OK(cudaEventCreate(&b));
    VGT_OK(cudaEventCreate(&c));
    VGT_OK(cudaEventQuery(a));       /* an empty set of work is complete */
    VGT_OK(cudaEventSynchronize(a)); /* returns at once */
    VGT_EXPECT_RT(cudaErrorInvalidResourceHandle, cudaEventElapsedTime(&ms, a, b));
    VGT_OK(cudaEventRecord(c, 0));
    VGT_OK(cudaEventSynchronize(c));
    VGT_EXPECT_RT(cudaErrorInvalidResourceHandle, cudaEventElapsedTime(&ms, c, b));
    VGT_EXPECT_RT(cudaErrorInvalidResourceHandle, cudaEventElapsedTime(&ms, a, c));
    (void)cudaGetLastError();
    VGT_OK(cudaEventDestroy(a));
    VGT_OK(cudaEventDestroy(b));
    VGT_OK(cudaEventDestroy(c));
}

static void test_disable_timing(void **state)
{
    cudaEvent_t t, nt;
    float ms = -1;
    VGT_OK(cudaEventCreate(&t));
    VGT_OK(cudaEventCreateWithFlags(&nt, cudaEventDisableTiming));
    VGT_OK(cudaEventRecord(t, 0));
    VGT_OK(vgt_spin(10000, 1.0, 0));
    VGT_OK(cudaEventRecord(nt, 0));
    VGT_OK(cudaDeviceSynchronize());
    VGT_OK(cudaEventQuery(nt));
    VGT_EXPECT_RT(cudaErrorInvalidResourceHandle, cudaEventElapsedTime(&ms, t, nt));
    VGT_EXPECT_RT(cudaErrorInvalidResourceHandle, cudaEventElapsedTime(&ms, nt, t));
    (void)cudaGetLastError();
    VGT_OK(cudaEventDestroy(t));
    VGT_OK(cudaEventDestroy(nt));
}

static void test_query_and_synchronize(void **state)
{
    cudaStream_t s;
    cudaEvent_t e;
    VGT_OK(cudaStreamCreate(&s));
    VGT_OK(cudaEventCreate(&e));
    VGT_OK(vgt_spin(2000000, 1.0, s));
    VGT_OK(cudaEventRecord(e, s));
    VGT_EXPECT_RT(cudaErrorNotReady, cudaEventQuery(e));
    VGT_OK(cudaEventSynchronize(e));
    VGT_OK(cudaEventQuery(e));
    VGT_OK(cudaStreamQuery(s)); /* the event was the stream's last work */
    /* A re-record replaces the state: the event is pending again. */
    VGT_OK(vgt_spin(2000000, 1.0, s));
    VGT_OK(cudaEventRecord(e, s));
    VGT_EXPECT_RT(cudaErrorNotReady, cudaEventQuery(e));
    VGT_OK(cudaStreamSynchronize(s));
    VGT_OK(cudaEventQuery(e));
    VGT_OK(cudaEventDestroy(e));
    VGT_OK(cudaStreamDestroy(s));
}

static void test_elapsed_not_ready(void **state)
{
    cudaStream_t s;
    cudaEvent_t a, b;
    float ms = -1;
    VGT_OK(cudaStreamCreate(&s));
    VGT_OK(cudaEventCreate(&a));
    VGT_OK(cudaEventCreate(&b));
    VGT_OK(cudaEventRecord(a, s));
    VGT_OK(cudaEventSynchronize(a));
    VGT_OK(vgt_spin(3000000, 1.0, s));
    VGT_OK(cudaEventRecord(b, s));
    VGT_EXPECT_RT(cudaErrorNotReady, cudaEventElapsedTime(&ms, a, b));
    (void)cudaGetLastError();
    VGT_OK(cudaEventSynchronize(b));
    double ns = vgt_elapsed_ns(a, b);
    VGT_IN_RANGE("elapsed around a 3 ms kernel (ns)", 3000000.0 - 1.0, 3100000.0, ns);
    VGT_EXPECT_RT(cudaErrorInvalidValue, cudaEventElapsedTime(NULL, a, b));
    (void)cudaGetLastError();
    VGT_OK(cudaEventDestroy(a));
    VGT_OK(cudaEventDestroy(b));
    VGT_OK(cudaStreamDestroy(s));
}

/* Events around one kernel on a stream that is already busy (so neither record waits for
 * the host) measure exactly the kernel's device time: its registered cost, or the
 * profile's minimum kernel time when it has no cost function. */
static double time_kernel(cudaStream_t s, int which, double cost_ns)
{
    cudaEvent_t a, b;
    VGT_OK(cudaEventCreate(&a));
    VGT_OK(cudaEventCreate(&b));
    VGT_OK(vgt_spin(1000000, 1.0, s));
    VGT_OK(cudaEventRecord(a, s));
    if (which == 0) {
        VGT_OK(vgt_spin(cost_ns, 1.0, s));
    } else if (which == 1) {
        float *d = NULL;
        VGT_OK(cudaMalloc((void **)&d, 1024 * sizeof(float)));
        VGT_OK(vgt_fill(d, 1.0f, 1024, cost_ns, s));
        VGT_OK(cudaEventRecord(b, s));
        VGT_OK(cudaFree(d)); /* waits for the kernel */
    } else {
        int ia = 1;
        double db = 2.0;
        char cc = 'c';
        void *pd = NULL;
        void *args[] = {&ia, &db, &cc, &pd};
        dim3 g = {1, 1, 1}, bl = {32, 1, 1};
        VGT_OK(cudaLaunchKernel((const void *)vgt_k_probe, g, bl, args, 0, s));
    }
    if (which != 1)
        VGT_OK(cudaEventRecord(b, s));
    VGT_OK(cudaEventSynchronize(b));
    double ns = vgt_elapsed_ns(a, b);
    VGT_OK(cudaEventDestroy(a));
    VGT_OK(cudaEventDestroy(b));
    return ns;
}

static void test_elapsed_equals_kernel_cost(void **state)
{
    cudaStream_t s;
    VGT_OK(cudaStreamCreate(&s));
    VGT_NEAR("elapsed around a 100000 ns kernel (ns)", 100000.0, time_kernel(s, 0, 100000),
             1.0, 1e-6);
    VGT_NEAR("elapsed around a 123456 ns fill (ns)", 123456.0, time_kernel(s, 1, 123456), 1.0,
             1e-6);
    double kmin = vgpu_profile()->kernel_min_us * 1000.0;
    VGT_NEAR("elapsed around a kernel without a cost function (ns)", kmin,
             time_kernel(s, 2, 0), 1.0, 1e-6);
    VGT_OK(cudaStreamDestroy(s));
}

static void test_record_with_flags(void **state)
{
    cudaEvent_t a, b;
    VGT_OK(cudaEventCreate(&a));
    VGT_OK(cudaEventCreate(&b));
    cudaStream_t s;
    VGT_OK(cudaStreamCreate(&s));
    VGT_OK(vgt_spin(500000, 1.0, s));
    VGT_OK(cudaEventRecordWithFlags(a, s, cudaEventRecordDefault));
    VGT_OK(vgt_spin(250000, 1.0, s));
    VGT_OK(cudaEventRecordWithFlags(b, s, cudaEventRecordExternal)); /* no capture: a record */
    VGT_EXPECT_RT(cudaErrorNotReady, cudaEventQuery(b));
    VGT_OK(cudaEventSynchronize(b));
    VGT_NEAR("elapsed between records with flags (ns)", 250000.0, vgt_elapsed_ns(a, b), 1.0,
             1e-6);
    VGT_EXPECT_RT(cudaErrorInvalidValue, cudaEventRecordWithFlags(a, s, 0x10));
    (void)cudaGetLastError();
    VGT_OK(cudaEventDestroy(a));
    VGT_OK(cudaEventDestroy(b));
    VGT_OK(cudaStreamDestroy(s));
}

static void test_elapsed_across_streams(void **state)
{
    cudaStream_t s1, s2;
    cudaEvent_t a, b;
    VGT_OK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    VGT_OK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    VGT_OK(cudaEventCreate(&a));
    VGT_OK(cudaEventCreate(&b));
    VGT_OK(vgt_spin(1000000, 1.0, s1));
    VGT_OK(cudaEventRecord(a, s1));
    VGT_OK(cudaStreamWaitEvent(s2, a, 0));
    VGT_OK(vgt_spin(400000, 1.0, s2));
    VGT_OK(cudaEventRecord(b, s2));
    VGT_OK(cudaEventSynchronize(b));
    VGT_NEAR("elapsed from s1's record to s2's after a wait (ns)", 400000.0,
             vgt_elapsed_ns(a, b), 1.0, 1e-6);
    VGT_OK(cudaEventDestroy(a));
    VGT_OK(cudaEventDestroy(b));
    VGT_OK(cudaStreamDestroy(s1));
    VGT_OK(cudaStreamDestroy(s2));
}

static void test_destroy(void **state)
{
    cudaStream_t s;
    VGT_OK(cudaStreamCreate(&s));
    cudaEvent_t pending, dead, ok;
    VGT_OK(cudaEventCreate(&pending));
    VGT_OK(cudaEventCreate(&dead));
    VGT_OK(cudaEventCreate(&ok));
    VGT_OK(vgt_spin(1000000, 1.0, s));
    VGT_OK(cudaEventRecord(pending, s));
    VGT_OK(cudaEventDestroy(pending)); /* returns at once; released when complete */
    VGT_OK(cudaStreamSynchronize(s));
    VGT_OK(cudaEventDestroy(dead));
    float ms;
    VGT_OK(cudaEventRecord(ok, s));
    VGT_OK(cudaEventSynchronize(ok));
    VGT_EXPECT_RT(cudaErrorInvalidResourceHandle, cudaEventQuery(dead));
    VGT_EXPECT_RT(cudaErrorInvalidResourceHandle, cudaEventSynchronize(dead));
    VGT_EXPECT_RT(cudaErrorInvalidResourceHandle, cudaEventRecord(dead, s));
    VGT_EXPECT_RT(cudaErrorInvalidResourceHandle, cudaStreamWaitEvent(s, dead, 0));
    VGT_EXPECT_RT(cudaErrorInvalidResourceHandle, cudaEventElapsedTime(&ms, ok, dead));
    VGT_EXPECT_RT(cudaErrorInvalidResourceHandle, cudaEventDestroy(dead));
    static long long not_an_event[64];
    VGT_EXPECT_RT(cudaErrorInvalidResourceHandle,
                  cudaEventQuery((cudaEvent_t)(void *)not_an_event));
    (void)cudaGetLastError();
    VGT_OK(cudaEventDestroy(ok));
    VGT_OK(cudaStreamDestroy(s));
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_flags),
        cmocka_unit_test(test_never_recorded),
        cmocka_unit_test(test_disable_timing),
        cmocka_unit_test(test_query_and_synchronize),
        cmocka_unit_test(test_elapsed_not_ready),
        cmocka_unit_test(test_elapsed_equals_kernel_cost),
        cmocka_unit_test(test_record_with_flags),
        cmocka_unit_test(test_elapsed_across_streams),
        cmocka_unit_test(test_destroy),
        cmocka_unit_test(vgt_test_no_hazards),
    };
    return cmocka_run_group_tests_name("vgpu.events", tests, setup, NULL);
}
