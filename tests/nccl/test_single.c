/*
 * nccl.single: NCCL interception inside one process, fast enough for the sanitizer builds
 * (labels asan, tsan). Run with the shim and the vgpu preloaded in stress mode
 * (tests/nccl.cmake). Two communicators of one 2-rank clique live on devices 0 and 1 of
 * this process, created by one thread inside a group (a group the shim must release to
 * the library, since communicators are being created in it); two threads then drive one
 * rank each, concurrently, through ungrouped, grouped and nested-group calls, a custom
 * reduction, point-to-point, the policy switch and an abort with queued work, while the
 * shim's dispatcher replays for both.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <setjmp.h>
#include <cmocka.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);

#define R 2
#define SN 512

static ncclComm_t g_comm[R];

typedef struct rank_out {
    float ar[SN], ag[R * SN], rs[SN], bc[SN], p2p[SN], nested[SN], premul[SN];
    int failures;
    char msg[256];
} rank_out_t;

static float input(int rank, int i) { return (float)(rank * 1000 + i) * 0.5f; }

#define T_NCCL(out, call)                                                              \
    do {                                                                               \
        ncclResult_t r_ = (call);                                                      \
        if (r_ != ncclSuccess && (out)->failures++ == 0)                               \
            snprintf((out)->msg, sizeof (out)->msg, "%s returned %d", #call, (int)r_); \
    } while (0)
#define T_RT(out, call)                                                                \
    do {                                                                               \
        cudaError_t e_ = (call);                                                       \
        if (e_ != cudaSuccess && (out)->failures++ == 0)                               \
            snprintf((out)->msg, sizeof (out)->msg, "%s returned %d", #call, (int)e_); \
    } while (0)

typedef struct rank_arg {
    int rank;
    rank_out_t *out;
} rank_arg_t;

static void *rank_main(void *arg)
{
    rank_arg_t *a = arg;
    int r = a->rank, peer = 1 - r;
    rank_out_t *o = a->out;
    ncclComm_t c = g_comm[r];
    cudaStream_t s;
    float *x, *y;
    float h[R * SN];
    T_RT(o, cudaSetDevice(r));
    T_RT(o, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    T_RT(o, cudaMalloc((void **)&x, sizeof(float) * R * SN));
    T_RT(o, cudaMalloc((void **)&y, sizeof(float) * 8 * R * SN));
    for (int i = 0; i < R * SN; i++)
        h[i] = input(r, i);
    T_RT(o, cudaMemcpy(x, h, sizeof h, cudaMemcpyHostToDevice));
    float *ar = y, *ag = y + R * SN, *rs = ag + R * SN, *bc = rs + R * SN, *p2p = bc + R * SN;
    float *nested = p2p + R * SN, *pm = nested + R * SN;
    T_NCCL(o, ncclAllReduce(x, ar, SN, ncclFloat32, ncclSum, c, s));
    T_NCCL(o, ncclAllGather(x, ag, SN, ncclFloat32, c, s));
    T_NCCL(o, ncclReduceScatter(x, rs, SN, ncclFloat32, ncclSum, c, s));
    T_RT(o, cudaMemcpyAsync(bc, x, sizeof(float) * SN, cudaMemcpyDeviceToDevice, s));
    T_NCCL(o, ncclBcast(bc, SN, ncclFloat32, 1, c, s));
    T_NCCL(o, ncclGroupStart());
    T_NCCL(o, ncclSend(x, SN, ncclFloat32, peer, c, s));
    T_NCCL(o, ncclRecv(p2p, SN, ncclFloat32, peer, c, s));
    T_NCCL(o, ncclGroupEnd());
    T_NCCL(o, ncclGroupStart());
    T_NCCL(o, ncclGroupStart());
    T_NCCL(o, ncclAllReduce(x, nested, SN, ncclFloat32, ncclMax, c, s));
    T_NCCL(o, ncclGroupEnd());
    T_NCCL(o, ncclGroupEnd());
    ncclRedOp_t op;
    float two = 2.0f;
    T_NCCL(o, ncclRedOpCreatePreMulSum(&op, &two, ncclFloat32, ncclScalarHostImmediate, c));
    T_NCCL(o, ncclAllReduce(x, pm, SN, ncclFloat32, op, c, s));
    T_NCCL(o, ncclRedOpDestroy(op, c)); /* drains first: the queued all-reduce uses op */
    T_RT(o, cudaStreamSynchronize(s));
    T_RT(o, cudaMemcpy(o->ar, ar, sizeof o->ar, cudaMemcpyDeviceToHost));
    T_RT(o, cudaMemcpy(o->ag, ag, sizeof o->ag, cudaMemcpyDeviceToHost));
    T_RT(o, cudaMemcpy(o->rs, rs, sizeof o->rs, cudaMemcpyDeviceToHost));
    T_RT(o, cudaMemcpy(o->bc, bc, sizeof o->bc, cudaMemcpyDeviceToHost));
    T_RT(o, cudaMemcpy(o->p2p, p2p, sizeof o->p2p, cudaMemcpyDeviceToHost));
    T_RT(o, cudaMemcpy(o->nested, nested, sizeof o->nested, cudaMemcpyDeviceToHost));
    T_RT(o, cudaMemcpy(o->premul, pm, sizeof o->premul, cudaMemcpyDeviceToHost));
    T_RT(o, cudaFree(x));
    T_RT(o, cudaFree(y));
    T_RT(o, cudaStreamDestroy(s));
    return NULL;
}

static void expect_eq(float got, float want, const char *what, int rank, int i)
{
    if (got != want)
        fail_msg("rank %d, %s[%d]: %g, expected %g", rank, what, i, (double)got, (double)want);
}

static void test_two_ranks_two_threads(void **state)
{
    (void)state;
    static rank_out_t out[R];
    pthread_t th[R];
    rank_arg_t args[R];
    for (int r = 0; r < R; r++) {
        memset(&out[r], 0, sizeof out[r]);
        args[r] = (rank_arg_t){r, &out[r]};
        assert_int_equal(pthread_create(&th[r], NULL, rank_main, &args[r]), 0);
    }
    for (int r = 0; r < R; r++)
        pthread_join(th[r], NULL);
    for (int r = 0; r < R; r++) {
        if (out[r].failures)
            fail_msg("rank %d: %d failures, the first: %s", r, out[r].failures, out[r].msg);
        for (int i = 0; i < SN; i++) {
            expect_eq(out[r].ar[i], input(0, i) + input(1, i), "allreduce", r, i);
            expect_eq(out[r].rs[i], input(0, r * SN + i) + input(1, r * SN + i), "reducescatter",
                      r, i);
            expect_eq(out[r].bc[i], input(1, i), "bcast", r, i);
            expect_eq(out[r].p2p[i], input(1 - r, i), "recv", r, i);
            expect_eq(out[r].nested[i], input(1, i), "nested max", r, i);
            expect_eq(out[r].premul[i], 2.0f * input(0, i) + 2.0f * input(1, i), "premul", r, i);
            for (int k = 0; k < R; k++)
                expect_eq(out[r].ag[k * SN + i], input(k, i), "allgather", r, k * SN + i);
        }
    }
}

/* dh_group_set_enabled is exported by the shim: it answers the previous setting, or -1 for
 * something that is not a communicator. */
static void test_set_enabled(void **state)
{
    (void)state;
    int (*set)(ncclComm_t, int) = NULL;
    *(void **)&set = dlsym(RTLD_DEFAULT, "dh_group_set_enabled");
    if (set == NULL)
        fail_msg("dh_group_set_enabled is not exported (is the shim preloaded?)");
    assert_int_equal(set(g_comm[0], 0), 1);
    assert_int_equal(set(g_comm[0], 0), 0);
    assert_int_equal(set(g_comm[0], 1), 0);
    uint64_t not_a_comm[64] = {0};
    assert_int_equal(set((ncclComm_t)not_a_comm, 0), -1);
    assert_int_equal(set(NULL, 0), -1);
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Rank 0 queues an all-reduce its peer never joins and aborts: prompt, and the library
 * never sees the cancelled operation (no timeout message). */
static void test_abort_with_queued_work(void **state)
{
    (void)state;
    float *x;
    assert_int_equal(cudaSetDevice(0), cudaSuccess);
    assert_int_equal(cudaMalloc((void **)&x, sizeof(float) * 2 * SN), cudaSuccess);
    assert_int_equal(ncclAllReduce(x, x + SN, SN, ncclFloat32, ncclSum, g_comm[0], NULL),
                     ncclSuccess);
    double t0 = now_ms();
    assert_int_equal(ncclCommAbort(g_comm[0]), ncclSuccess);
    double ms = now_ms() - t0;
    if (ms > 1000.0)
        fail_msg("ncclCommAbort took %.1f ms with queued work, expected < 1000", ms);
    assert_int_equal(cudaSetDevice(1), cudaSuccess);
    assert_int_equal(ncclCommAbort(g_comm[1]), ncclSuccess);
    assert_int_equal(cudaSetDevice(0), cudaSuccess);
    assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
    assert_int_equal(cudaFree(x), cudaSuccess);
    g_comm[0] = g_comm[1] = NULL;
}

/* One thread creates both ranks inside a group (as ncclCommInitAll does). */
static int setup(void **state)
{
    (void)state;
    ncclUniqueId id;
    if (ncclGetUniqueId(&id) != ncclSuccess || ncclGroupStart() != ncclSuccess)
        return -1;
    for (int r = 0; r < R; r++) {
        if (cudaSetDevice(r) != cudaSuccess || ncclCommInitRank(&g_comm[r], R, id, r) != ncclSuccess)
            return -1;
    }
    int rc = ncclGroupEnd() == ncclSuccess ? 0 : -1;
    cudaSetDevice(0);
    return rc;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_ranks_two_threads),
        cmocka_unit_test(test_set_enabled),
        cmocka_unit_test(test_abort_with_queued_work),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
