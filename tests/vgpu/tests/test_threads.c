/*
 * vgpu.threads: what several host threads see. The current device and the last error are
 * per thread; a watchdog thread polls events (as PyTorch's NCCL watchdog does) while the
 * main thread issues; two threads issue to their own streams at once; a host function's
 * plain writes are visible after the stream is synchronised. Built for ThreadSanitizer
 * too (label tsan).
 */
#include "rt_common.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static int setup(void **state)
{
    vgt_register_kernels();
    return cudaSetDevice(0) == cudaSuccess ? 0 : -1;
}

/* Errors seen by helper threads, checked by the main thread (cmocka is not thread-safe). */
typedef struct report {
    char msg[512];
} report_t;

static void note(report_t *r, const char *what, long want, long got)
{
    if (!r->msg[0])
        snprintf(r->msg, sizeof(r->msg), "%s: expected %ld, got %ld", what, want, got);
}

static void *device_thread(void *arg)
{
    report_t *r = arg;
    int d = -1;
    if (cudaGetDevice(&d) != cudaSuccess || d != 0)
        note(r, "a new thread's current device", 0, d);
    if (cudaSetDevice(3) != cudaSuccess)
        note(r, "cudaSetDevice(3) in the thread", 0, 1);
    cudaGetDevice(&d);
    if (d != 3)
        note(r, "the thread's device after cudaSetDevice(3)", 3, d);
    float *p = NULL;
    cudaMalloc((void **)&p, 1024 * sizeof(float));
    struct cudaPointerAttributes at;
    memset(&at, 0, sizeof(at));
    cudaPointerGetAttributes(&at, p);
    if (at.device != 3)
        note(r, "device of memory allocated by the thread", 3, at.device);
    cudaStream_t s;
    cudaStreamCreate(&s);
    vgt_fill(p, 9.0f, 1024, 10000, s);
    cudaStreamSynchronize(s);
    float h = 0;
    cudaMemcpy(&h, p + 1023, sizeof(float), cudaMemcpyDeviceToHost);
    if (h != 9.0f)
        note(r, "the thread's kernel result", 9, (long)h);
    cudaStreamDestroy(s);
    cudaFree(p);
    /* An error in this thread is this thread's. */
    cudaSetDevice(-1);
    if (cudaGetLastError() != cudaErrorInvalidDevice)
        note(r, "the thread's last error", cudaErrorInvalidDevice, 0);
    return NULL;
}

static void test_per_thread_device_and_error(void **state)
{
    VGT_OK(cudaSetDevice(2));
    VGT_OK(cudaGetLastError());
    report_t r;
    memset(&r, 0, sizeof(r));
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, device_thread, &r), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    if (r.msg[0])
        fail_msg("%s", r.msg);
    int d = -1;
    VGT_OK(cudaGetDevice(&d));
    assert_int_equal(d, 2); /* the thread's cudaSetDevice did not change ours */
    VGT_OK(cudaGetLastError()); /* nor did its error */
    VGT_OK(cudaSetDevice(0));
}

#define WD_EVENTS 64

typedef struct watchdog {
    cudaEvent_t ev[WD_EVENTS];
    atomic_int published; /* events [0, published) have been recorded */
    int done[WD_EVENTS];  /* owned by the watchdog thread */
    int polls, not_ready;
    report_t r;
} watchdog_t;

static void *watchdog_thread(void *arg)
{
    watchdog_t *w = arg;
    struct timespec nap = {0, 200 * 1000};
    time_t start = time(NULL);
    for (;;) {
        int n = atomic_load(&w->published), all = n == WD_EVENTS;
        for (int i = 0; i < n; i++) {
            cudaError_t e = cudaEventQuery(w->ev[i]);
            w->polls++;
            if (e == cudaSuccess) {
                w->done[i] = 1;
            } else if (e == cudaErrorNotReady) {
                w->not_ready++;
                if (w->done[i])
                    note(&w->r, "an event that completed became not ready (event index)", -1,
                         i);
                all = 0;
            } else {
                note(&w->r, "cudaEventQuery from the watchdog", cudaSuccess, e);
                return NULL;
            }
        }
        (void)cudaGetLastError();
        if (all)
            return NULL;
        if (time(NULL) - start > 60) {
            note(&w->r, "events still not complete after 60 s (published)", WD_EVENTS, n);
            return NULL;
        }
        nanosleep(&nap, NULL);
    }
}

static void test_watchdog_polls_while_main_issues(void **state)
{
    static watchdog_t w;
    memset(&w, 0, sizeof(w));
    for (int i = 0; i < WD_EVENTS; i++)
        VGT_OK(cudaEventCreateWithFlags(&w.ev[i], cudaEventDisableTiming));
    atomic_init(&w.published, 0);
    const size_t n = 4096;
    float *x = NULL;
    VGT_OK(cudaMalloc((void **)&x, n * sizeof(float)));
    cudaStream_t s;
    VGT_OK(cudaStreamCreate(&s));
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, watchdog_thread, &w), 0);
    for (int i = 0; i < WD_EVENTS; i++) {
        VGT_OK(vgt_fill(x, (float)i, n, 200000, s));
        VGT_OK(cudaEventRecord(w.ev[i], s));
        atomic_store(&w.published, i + 1);
        if (i % 8 == 7) {
            struct timespec nap = {0, 1000 * 1000};
            nanosleep(&nap, NULL); /* let the watchdog see work in flight */
        }
    }
    VGT_OK(cudaStreamSynchronize(s));
    assert_int_equal(pthread_join(t, NULL), 0);
    if (w.r.msg[0])
        fail_msg("watchdog: %s", w.r.msg);
    for (int i = 0; i < WD_EVENTS; i++) {
        assert_int_equal(w.done[i], 1);
        VGT_OK(cudaEventQuery(w.ev[i]));
        VGT_OK(cudaEventDestroy(w.ev[i]));
    }
    print_message("watchdog: %d polls, %d answered not ready\n", w.polls, w.not_ready);
    vgt_expect_device_floats(x, n, (float)(WD_EVENTS - 1));
    VGT_OK(cudaStreamDestroy(s));
    VGT_OK(cudaFree(x));
}

typedef struct worker {
    int id;
    report_t r;
} worker_t;

static void *issuer_thread(void *arg)
{
    worker_t *w = arg;
    const size_t n = 8192;
    cudaSetDevice(0);
    cudaStream_t s;
    float *a = NULL, *b = NULL, *c = NULL;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    cudaMalloc((void **)&a, n * sizeof(float));
    cudaMalloc((void **)&b, n * sizeof(float));
    cudaMalloc((void **)&c, n * sizeof(float));
    for (int it = 0; it < 20; it++) {
        vgt_fill(a, (float)w->id, n, 30000, s);
        vgt_fill(b, (float)it, n, 30000, s);
        vgt_add(a, b, c, n, 30000, s);
    }
    cudaStreamSynchronize(s);
    float h = -1;
    cudaMemcpy(&h, c + n - 1, sizeof(float), cudaMemcpyDeviceToHost);
    if (h != (float)(w->id + 19))
        note(&w->r, "a worker's final result", w->id + 19, (long)h);
    if (cudaGetLastError() != cudaSuccess)
        note(&w->r, "a worker's last error", 0, 1);
    cudaStreamDestroy(s);
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
    return NULL;
}

static void test_two_threads_issue_at_once(void **state)
{
    vgpu_counters_t c0, c1;
    vgpu_counters(&c0);
    worker_t w[2];
    pthread_t t[2];
    for (int i = 0; i < 2; i++) {
        memset(&w[i], 0, sizeof(w[i]));
        w[i].id = 100 * (i + 1);
        assert_int_equal(pthread_create(&t[i], NULL, issuer_thread, &w[i]), 0);
    }
    for (int i = 0; i < 2; i++) {
        assert_int_equal(pthread_join(t[i], NULL), 0);
        if (w[i].r.msg[0])
            fail_msg("worker %d: %s", i, w[i].r.msg);
    }
    vgpu_counters(&c1);
    assert_int_equal(c1.hazards - c0.hazards, 0);
}

typedef struct plain {
    int value; /* deliberately not atomic: the stream synchronisation orders it */
} plain_t;

static void CUDART_CB set_plain(void *arg) { ((plain_t *)arg)->value = 1234; }

static void test_host_function_writes_visible_after_sync(void **state)
{
    plain_t p = {0};
    cudaStream_t s;
    VGT_OK(cudaStreamCreate(&s));
    VGT_OK(vgt_spin(500000, 1.0, s));
    VGT_OK(cudaLaunchHostFunc(s, set_plain, &p));
    VGT_OK(cudaStreamSynchronize(s));
    assert_int_equal(p.value, 1234);
    VGT_OK(cudaStreamDestroy(s));
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_per_thread_device_and_error),
        cmocka_unit_test(test_watchdog_polls_while_main_issues),
        cmocka_unit_test(test_two_threads_issue_at_once),
        cmocka_unit_test(test_host_function_writes_visible_after_sync),
        cmocka_unit_test(vgt_test_no_hazards),
    };
    return cmocka_run_group_tests_name("vgpu.threads", tests, setup, NULL);
}
