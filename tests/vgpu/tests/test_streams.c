/*
 * vgpu.streams: stream creation (flags, priorities), synchronize and query, event waits
 * across streams, capture-status queries, host functions in stream order, the legacy
 * default stream's implicit synchronisation, and errors for invalid stream handles.
 */
#include "rt_common.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static int setup(void **state)
{
    vgt_register_kernels();
    return cudaSetDevice(0) == cudaSuccess ? 0 : -1;
}

static void test_create_flags(void **state)
{
    cudaStream_t a, b;
    unsigned f = 99;
    VGT_OK(cudaStreamCreate(&a));
    VGT_OK(cudaStreamGetFlags(a, &f));
    assert_int_equal(f, cudaStreamDefault);
    VGT_OK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    VGT_OK(cudaStreamGetFlags(b, &f));
    assert_int_equal(f, cudaStreamNonBlocking);
    assert_ptr_not_equal(a, b);
    assert_ptr_not_equal(a, NULL);
    VGT_OK(cudaStreamDestroy(a));
    VGT_OK(cudaStreamDestroy(b));
    cudaStream_t c;
    VGT_EXPECT_RT(cudaErrorInvalidValue, cudaStreamCreate(NULL));
    VGT_EXPECT_RT(cudaErrorInvalidValue, cudaStreamCreateWithFlags(&c, 0x40));
    (void)cudaGetLastError();
}

static void test_priorities(void **state)
{
    int least = 99, greatest = 99;
    VGT_OK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    if (greatest > least)
        fail_msg("priority range: greatest %d must be numerically <= least %d", greatest, least);
    for (int p = greatest; p <= least; p++) {
        cudaStream_t s;
        int got = 99;
        VGT_OK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, p));
        VGT_OK(cudaStreamGetPriority(s, &got));
        assert_int_equal(got, p);
        unsigned f = 0;
        VGT_OK(cudaStreamGetFlags(s, &f));
        assert_int_equal(f, cudaStreamNonBlocking);
        VGT_OK(cudaStreamDestroy(s));
    }
    /* Out-of-range priorities are clamped to the range. */
    cudaStream_t lo, hi;
    int got = 99;
    VGT_OK(cudaStreamCreateWithPriority(&lo, cudaStreamDefault, least + 10));
    VGT_OK(cudaStreamGetPriority(lo, &got));
    assert_int_equal(got, least);
    VGT_OK(cudaStreamCreateWithPriority(&hi, cudaStreamDefault, greatest - 10));
    VGT_OK(cudaStreamGetPriority(hi, &got));
    assert_int_equal(got, greatest);
    VGT_OK(cudaStreamDestroy(lo));
    VGT_OK(cudaStreamDestroy(hi));
    /* A stream made without a priority has the default priority 0. */
    cudaStream_t d;
    VGT_OK(cudaStreamCreate(&d));
    VGT_OK(cudaStreamGetPriority(d, &got));
    assert_int_equal(got, 0);
    VGT_OK(cudaStreamDestroy(d));
}

static void test_query_and_synchronize(void **state)
{
    cudaStream_t s;
    VGT_OK(cudaStreamCreate(&s));
    VGT_OK(cudaStreamQuery(s)); /* empty */
    VGT_OK(vgt_spin(2000000, 1.0, s));
    VGT_EXPECT_RT(cudaErrorNotReady, cudaStreamQuery(s));
    VGT_OK(cudaStreamSynchronize(s));
    VGT_OK(cudaStreamQuery(s));
    /* cudaErrorNotReady is a status, not an error: nothing is left behind. */
    VGT_OK(cudaStreamDestroy(s));
}

static void test_invalid_handles(void **state)
{
    static long long not_a_stream[64];
    cudaStream_t s;
    VGT_OK(cudaStreamCreate(&s));
    VGT_OK(cudaStreamDestroy(s));
    float *d = NULL;
    VGT_OK(cudaMalloc((void **)&d, 4096));
    cudaStream_t bad[2] = {s, (cudaStream_t)(void *)not_a_stream};
    for (int i = 0; i < 2; i++) {
        unsigned f;
        int prio;
        cudaEvent_t e;
        VGT_OK(cudaEventCreate(&e));
        VGT_EXPECT_RT(cudaErrorInvalidResourceHandle, cudaStreamSynchronize(bad[i]));
        VGT_EXPECT_RT(cudaErrorInvalidResourceHandle, cudaStreamQuery(bad[i]));
        VGT_EXPECT_RT(cudaErrorInvalidResourceHandle, cudaStreamGetFlags(bad[i], &f));
        VGT_EXPECT_RT(cudaErrorInvalidResourceHandle, cudaStreamGetPriority(bad[i], &prio));
        VGT_EXPECT_RT(cudaErrorInvalidResourceHandle, cudaStreamWaitEvent(bad[i], e, 0));
        VGT_EXPECT_RT(cudaErrorInvalidResourceHandle, cudaEventRecord(e, bad[i]));
        VGT_EXPECT_RT(cudaErrorInvalidResourceHandle, vgt_fill(d, 1.0f, 16, 1000, bad[i]));
        VGT_EXPECT_RT(cudaErrorInvalidResourceHandle,
                      cudaMemsetAsync(d, 0, 64, bad[i]));
        VGT_EXPECT_RT(cudaErrorInvalidResourceHandle, cudaStreamDestroy(bad[i]));
        (void)cudaGetLastError();
        VGT_OK(cudaEventDestroy(e));
    }
    VGT_OK(cudaFree(d));
}

static void test_wait_event_orders_streams(void **state)
{
    const size_t n = 1 << 16;
    cudaStream_t s1, s2;
    cudaEvent_t e;
    VGT_OK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    VGT_OK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    VGT_OK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    float *x = NULL, *y = NULL;
    VGT_OK(cudaMalloc((void **)&x, n * sizeof(float)));
    VGT_OK(cudaMalloc((void **)&y, n * sizeof(float)));
    VGT_OK(cudaMemset(x, 0, n * sizeof(float)));
    VGT_OK(vgt_spin(1000000, 1.0, s1));
    VGT_OK(vgt_fill(x, 5.0f, n, 100000, s1));
    VGT_OK(cudaEventRecord(e, s1));
    VGT_OK(cudaStreamWaitEvent(s2, e, 0));
    VGT_OK(vgt_copy(x, y, n, 10000, s2));
    VGT_OK(cudaStreamSynchronize(s2)); /* only the reader's stream */
    vgt_expect_device_floats(y, n, 5.0f);
    /* Waiting on an event that was never recorded is a no-op. */
    cudaEvent_t never;
    VGT_OK(cudaEventCreate(&never));
    VGT_OK(vgt_spin(3000000, 1.0, s1));
    VGT_OK(cudaStreamWaitEvent(s2, never, 0));
    VGT_OK(vgt_fill(y, 6.0f, n, 1000, s2));
    VGT_OK(cudaStreamSynchronize(s2));
    VGT_EXPECT_RT(cudaErrorNotReady, cudaStreamQuery(s1)); /* s2 did not wait for s1 */
    VGT_OK(cudaDeviceSynchronize());
    VGT_OK(cudaEventDestroy(never));
    VGT_OK(cudaEventDestroy(e));
    VGT_OK(cudaFree(x));
    VGT_OK(cudaFree(y));
    VGT_OK(cudaStreamDestroy(s1));
    VGT_OK(cudaStreamDestroy(s2));
}

/* cudaStreamWaitEvent waits for the record that was most recent when it was called. */
static void test_wait_uses_record_at_call_time(void **state)
{
    cudaStream_t s1, s2;
    cudaEvent_t e, start, done;
    VGT_OK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    VGT_OK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    VGT_OK(cudaEventCreate(&e));
    VGT_OK(cudaEventCreate(&start));
    VGT_OK(cudaEventCreate(&done));
    VGT_OK(vgt_spin(200000, 1.0, s1));
    VGT_OK(cudaEventRecord(start, s1));
    VGT_OK(vgt_spin(100000, 0.1, s1));
    VGT_OK(cudaEventRecord(e, s1));
    VGT_OK(cudaStreamWaitEvent(s2, e, 0));
    VGT_OK(vgt_spin(5000000, 0.1, s1));
    VGT_OK(cudaEventRecord(e, s1)); /* re-recorded after the wait was issued */
    VGT_OK(vgt_spin(100000, 0.1, s2));
    VGT_OK(cudaEventRecord(done, s2));
    VGT_OK(cudaEventSynchronize(done));
    double ns = vgt_elapsed_ns(start, done);
    if (ns > 1000000)
        fail_msg("s2 finished %.0f ns after the first record; it waited for the second record "
                 "(expected about 200000 ns)",
                 ns);
    VGT_OK(cudaDeviceSynchronize());
    VGT_OK(cudaEventDestroy(e));
    VGT_OK(cudaEventDestroy(start));
    VGT_OK(cudaEventDestroy(done));
    VGT_OK(cudaStreamDestroy(s1));
    VGT_OK(cudaStreamDestroy(s2));
}

static void test_capture_status(void **state)
{
    cudaStream_t s;
    VGT_OK(cudaStreamCreate(&s));
    cudaStream_t all[] = {s, 0, cudaStreamLegacy, cudaStreamPerThread};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
        enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusActive;
        VGT_OK(cudaStreamIsCapturing(all[i], &st));
        assert_int_equal(st, cudaStreamCaptureStatusNone);
        st = cudaStreamCaptureStatusActive;
        unsigned long long id = 0;
        VGT_OK(cudaStreamGetCaptureInfo(all[i], &st, &id, NULL, NULL, NULL, NULL));
        assert_int_equal(st, cudaStreamCaptureStatusNone);
    }
    VGT_EXPECT_RT(cudaErrorInvalidValue, cudaStreamIsCapturing(s, NULL));
    (void)cudaGetLastError();
    VGT_OK(cudaStreamDestroy(s));
}

typedef struct host_fn_state {
    float *pinned;     /* host-visible copy of the kernel's output */
    size_t n;
    atomic_int calls;
    atomic_int saw_ok; /* 1 when every element equalled `expect` */
    float expect;
    float write;       /* what the host function stores for later stream work */
} host_fn_state_t;

static void CUDART_CB host_fn(void *arg)
{
    host_fn_state_t *st = arg;
    int ok = 1;
    for (size_t i = 0; i < st->n; i++)
        if (st->pinned[i] != st->expect)
            ok = 0;
    for (size_t i = 0; i < st->n; i++)
        st->pinned[i] = st->write;
    atomic_store(&st->saw_ok, ok);
    atomic_fetch_add(&st->calls, 1);
}

static void test_host_func_stream_order(void **state)
{
    const size_t n = 4096, bytes = n * sizeof(float);
    cudaStream_t s;
    VGT_OK(cudaStreamCreate(&s));
    float *d = NULL, *d2 = NULL;
    host_fn_state_t st;
    memset(&st, 0, sizeof(st));
    VGT_OK(cudaMalloc((void **)&d, bytes));
    VGT_OK(cudaMalloc((void **)&d2, bytes));
    VGT_OK(cudaMallocHost((void **)&st.pinned, bytes));
    st.n = n;
    st.expect = 8.0f;
    st.write = 11.0f;
    atomic_init(&st.calls, 0);
    atomic_init(&st.saw_ok, 0);
    VGT_OK(vgt_spin(1000000, 1.0, s));
    VGT_OK(vgt_fill(d, 8.0f, n, 50000, s));
    VGT_OK(cudaMemcpyAsync(st.pinned, d, bytes, cudaMemcpyDeviceToHost, s));
    VGT_OK(cudaLaunchHostFunc(s, host_fn, &st));
    /* Stream work after the host function sees what it wrote. */
    VGT_OK(cudaMemcpyAsync(d2, st.pinned, bytes, cudaMemcpyHostToDevice, s));
    VGT_OK(cudaStreamSynchronize(s));
    assert_int_equal(atomic_load(&st.calls), 1);
    assert_int_equal(atomic_load(&st.saw_ok), 1);
    vgt_expect_device_floats(d2, n, 11.0f);
    VGT_EXPECT_RT(cudaErrorInvalidValue, cudaLaunchHostFunc(s, NULL, &st));
    (void)cudaGetLastError();
    VGT_OK(cudaStreamDestroy(s));
    VGT_OK(cudaFree(d));
    VGT_OK(cudaFree(d2));
    VGT_OK(cudaFreeHost(st.pinned));
}

/* The legacy default stream waits for, and is waited on by, blocking streams. */
static void test_legacy_stream_implicit_sync(void **state)
{
    enum { n = 1 << 14, bytes = n * sizeof(float) };
    static float h[n];
    vgpu_counters_t c0, c1;
    vgpu_counters(&c0);
    cudaStream_t blk;
    VGT_OK(cudaStreamCreate(&blk));
    float *x = NULL, *y = NULL;
    VGT_OK(cudaMalloc((void **)&x, bytes));
    VGT_OK(cudaMalloc((void **)&y, bytes));
    /* Blocking stream, then a synchronous copy on the legacy stream. */
    VGT_OK(vgt_spin(1000000, 1.0, blk));
    VGT_OK(vgt_fill(x, 12.0f, n, 100000, blk));
    VGT_OK(cudaMemcpy(h, x, bytes, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++)
        if (h[i] != 12.0f)
            fail_msg("legacy cudaMemcpy after a blocking stream's kernel, element %zu: expected "
                     "12, got %g",
                     i, (double)h[i]);
    /* Legacy stream work, then a blocking stream: the latter waits. */
    VGT_OK(vgt_fill(x, 13.0f, n, 1000000, 0));
    VGT_OK(vgt_copy(x, y, n, 1000, blk));
    VGT_OK(cudaStreamSynchronize(blk));
    vgt_expect_device_floats(y, n, 13.0f);
    VGT_OK(cudaDeviceSynchronize());
    vgpu_counters(&c1);
    assert_int_equal(c1.hazards - c0.hazards, 0);

    /* A non-blocking stream does not synchronise with the legacy stream. */
    cudaStream_t nb;
    cudaEvent_t e0;
    VGT_OK(cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking));
    VGT_OK(cudaEventCreate(&e0));
    VGT_OK(vgt_spin(5000000, 0.1, nb));
    VGT_OK(cudaMemsetAsync(y, 0, bytes, 0));
    VGT_OK(cudaEventRecord(e0, 0));
    VGT_OK(cudaEventSynchronize(e0));
    VGT_EXPECT_RT(cudaErrorNotReady, cudaStreamQuery(nb));
    VGT_OK(cudaDeviceSynchronize());
    VGT_OK(cudaStreamQuery(nb));
    VGT_OK(cudaEventDestroy(e0));
    VGT_OK(cudaStreamDestroy(nb));
    VGT_OK(cudaStreamDestroy(blk));
    VGT_OK(cudaFree(x));
    VGT_OK(cudaFree(y));
}

static void test_per_thread_stream_handle(void **state)
{
    const size_t n = 1000;
    float *d = NULL;
    VGT_OK(cudaMalloc((void **)&d, n * sizeof(float)));
    VGT_OK(vgt_fill(d, 21.0f, n, 10000, cudaStreamPerThread));
    VGT_OK(cudaStreamSynchronize(cudaStreamPerThread));
    vgt_expect_device_floats(d, n, 21.0f);
    VGT_OK(vgt_fill(d, 22.0f, n, 10000, cudaStreamLegacy));
    VGT_OK(cudaStreamSynchronize(cudaStreamLegacy));
    vgt_expect_device_floats(d, n, 22.0f);
    VGT_OK(cudaFree(d));
}

static void test_destroy_with_pending_work(void **state)
{
    const size_t n = 1 << 12;
    float *d = NULL;
    VGT_OK(cudaMalloc((void **)&d, n * sizeof(float)));
    VGT_OK(cudaMemset(d, 0, n * sizeof(float)));
    cudaStream_t s;
    VGT_OK(cudaStreamCreate(&s));
    VGT_OK(vgt_spin(1000000, 1.0, s));
    VGT_OK(vgt_fill(d, 31.0f, n, 1000, s));
    VGT_OK(cudaStreamDestroy(s)); /* returns at once; the work still runs */
    VGT_OK(cudaDeviceSynchronize());
    vgt_expect_device_floats(d, n, 31.0f);
    VGT_OK(cudaFree(d));
}

static void test_device_synchronize_waits_for_all(void **state)
{
    cudaStream_t s[4];
    for (int i = 0; i < 4; i++) {
        VGT_OK(cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking));
        VGT_OK(vgt_spin(1000000.0 * (i + 1), 0.2, s[i]));
    }
    VGT_OK(cudaDeviceSynchronize());
    for (int i = 0; i < 4; i++) {
        VGT_OK(cudaStreamQuery(s[i]));
        VGT_OK(cudaStreamDestroy(s[i]));
    }
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_flags),
        cmocka_unit_test(test_priorities),
        cmocka_unit_test(test_query_and_synchronize),
        cmocka_unit_test(test_invalid_handles),
        cmocka_unit_test(test_wait_event_orders_streams),
        cmocka_unit_test(test_wait_uses_record_at_call_time),
        cmocka_unit_test(test_capture_status),
        cmocka_unit_test(test_host_func_stream_order),
        cmocka_unit_test(test_legacy_stream_implicit_sync),
        cmocka_unit_test(test_per_thread_stream_handle),
        cmocka_unit_test(test_destroy_with_pending_work),
        cmocka_unit_test(test_device_synchronize_waits_for_all),
        cmocka_unit_test(vgt_test_no_hazards),
    };
    return cmocka_run_group_tests_name("vgpu.streams", tests, setup, NULL);
}
