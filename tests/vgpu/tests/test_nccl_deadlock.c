/*
 * test_nccl_deadlock.c: a cycle of waits across communicators is reported as a deadlock
 * within seconds (tests/vgpu/src/nccl/nccl_deadlock.c), not as a communication timeout.
 * Run under mpirun with 2 ranks, CUDA_DEVICE_MAX_CONNECTIONS=1 (one hardware queue, as
 * Megatron runs with tensor parallelism), VGPU_COMM_TIMEOUT=60 and the detector's default
 * VGPU_DEADLOCK_S (2 s) (vgpu.nccl.deadlock).
 *
 *   opposite_order  rank 0 all-reduces on "tp" then on "dp", rank 1 on "dp" then on "tp",
 *                   on one stream: each head waits for an op its peer queued behind its own
 *                   head. Both ranks print the cycle (ranks, queues, ops, communicators)
 *                   and fail their head with ncclSystemError, long before the timeout.
 *   moved_send      the move issue 29 is about, made unsafely: rank 0 posts a send on "pp"
 *                   before its "tp" all-reduce, rank 1 all-reduces on "tp" before the
 *                   matching receive: the send waits for a receive queued behind rank 1's
 *                   all-reduce, which waits for rank 0's, queued behind the send.
 *   send_first      both ranks send, then receive, on one communicator and stream, ungrouped:
 *                   each send waits for a receive queued behind the other's send (it was
 *                   a 60 s timeout before).
 *   same_order      both ranks in one order: no report, no error, right results.
 *   late_peer       rank 1 issues the same ops 3 s late (more than VGPU_DEADLOCK_S): rank 0
 *                   waits without progress all that time, yet no cycle exists (rank 1 waits
 *                   for nothing): no report.
 */
#include "nccl_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TIMEOUT_S 60.0 /* VGPU_COMM_TIMEOUT in nccl.cmake */
#define REPORT_S 10.0  /* VGPU_DEADLOCK_S (2 s) plus the checks' pace and a loaded machine */

static ncclComm_t named_comm(const char *name)
{
    ncclComm_t c = NULL;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.commName = name;
    ncclUniqueId id = vnt_shared_id(MPI_COMM_WORLD);
    VNT_NCCL_OK(ncclCommInitRankConfig(&c, vnt.size, id, vnt.rank, &cfg));
    return c;
}

static void expect_text(const char *text, const char *needle)
{
    VNT_CHECK(strstr(text, needle) != NULL, "the message lacks \"%s\"; stderr was:\n%s", needle,
              text);
}

static ncclResult_t async_of(ncclComm_t c)
{
    ncclResult_t e = ncclSuccess;
    VNT_NCCL_OK(ncclCommGetAsyncError(c, &e));
    return e;
}

/* Synchronises with stderr captured; returns it and the seconds it took. */
static char *sync_captured(double *dt)
{
    double t0 = vnt_wall();
    vnt_capture_begin();
    VNT_CUDA_OK(cudaStreamSynchronize(0));
    char *msg = vnt_capture_end();
    *dt = vnt_wall() - t0;
    return msg;
}

/* What both cycle tests check of the report: in time, the cycle with both ranks and the
 * one queue, this rank's failed head named, and its communicator's asynchronous error. */
static void expect_cycle(const char *msg, double dt, const char *head_op, ncclComm_t head,
                         ncclComm_t other)
{
    VNT_CHECK(dt < REPORT_S, "the deadlock was reported after %.1f s (timeout %.0f s)", dt,
              TIMEOUT_S);
    expect_text(msg, "deadlock");
    expect_text(msg, "rank 0 (device 0, queue 0)");
    expect_text(msg, "rank 1 (device 1, queue 0)"); /* vnt_init: device rank % count */
    expect_text(msg, head_op);
    VNT_CHECK(strstr(msg, "VGPU_COMM_TIMEOUT") == NULL, "a timeout was reported:\n%s", msg);
    VNT_CHECK(async_of(head) == ncclSystemError, "the failed head's communicator: %d",
              (int)async_of(head));
    VNT_CHECK(strstr(ncclGetLastError(head), "deadlock") != NULL, "ncclGetLastError: %s",
              ncclGetLastError(head));
    (void)other;
}

static void test_opposite_order(void **st)
{
    ncclComm_t tp = named_comm("tp"), dp = named_comm("dp");
    float *a = vnt_dev_alloc(64 * sizeof(float)), *b = vnt_dev_alloc(64 * sizeof(float));
    ncclComm_t first = vnt.rank == 0 ? tp : dp, second = vnt.rank == 0 ? dp : tp;
    VNT_NCCL_OK(ncclAllReduce(a, a, 64, ncclFloat32, ncclSum, first, 0));
    VNT_NCCL_OK(ncclAllReduce(b, b, 64, ncclFloat32, ncclSum, second, 0));
    double dt;
    char *msg = sync_captured(&dt);
    expect_cycle(msg, dt, vnt.rank == 0 ? "allreduce #0 on communicator tp waits for rank 1"
                                        : "allreduce #0 on communicator dp waits for rank 0",
                 first, second);
    free(msg);
    MPI_Barrier(MPI_COMM_WORLD);
    VNT_NCCL_OK(ncclCommDestroy(tp));
    VNT_NCCL_OK(ncclCommDestroy(dp));
    VNT_CUDA_OK(cudaFree(a));
    VNT_CUDA_OK(cudaFree(b));
    vnt_end();
}

static void test_moved_send(void **st)
{
    ncclComm_t tp = named_comm("tp"), pp = named_comm("pp");
    float *x = vnt_dev_alloc(64 * sizeof(float)), *g = vnt_dev_alloc(64 * sizeof(float));
    if (vnt.rank == 0) {
        VNT_NCCL_OK(ncclSend(g, 64, ncclFloat32, 1, pp, 0)); /* moved before the forward */
        VNT_NCCL_OK(ncclAllReduce(x, x, 64, ncclFloat32, ncclSum, tp, 0));
    } else {
        VNT_NCCL_OK(ncclAllReduce(x, x, 64, ncclFloat32, ncclSum, tp, 0));
        VNT_NCCL_OK(ncclRecv(g, 64, ncclFloat32, 0, pp, 0));
    }
    double dt;
    char *msg = sync_captured(&dt);
    expect_cycle(msg, dt, vnt.rank == 0 ? "send #0 to rank 1 on communicator pp waits for rank 1"
                                        : "allreduce #0 on communicator tp waits for rank 0",
                 vnt.rank == 0 ? pp : tp, vnt.rank == 0 ? tp : pp);
    free(msg);
    MPI_Barrier(MPI_COMM_WORLD);
    VNT_NCCL_OK(ncclCommDestroy(tp));
    VNT_NCCL_OK(ncclCommDestroy(pp));
    VNT_CUDA_OK(cudaFree(x));
    VNT_CUDA_OK(cudaFree(g));
    vnt_end();
}

static void test_send_first(void **st)
{
    ncclComm_t pp = named_comm("pp");
    int peer = vnt.rank ^ 1;
    double *s = vnt_dev_alloc(4 * sizeof(double)), *r = vnt_dev_alloc(4 * sizeof(double));
    VNT_NCCL_OK(ncclSend(s, 4, ncclFloat64, peer, pp, 0));
    VNT_NCCL_OK(ncclRecv(r, 4, ncclFloat64, peer, pp, 0));
    double dt;
    char *msg = sync_captured(&dt);
    char want[96];
    snprintf(want, sizeof want, "send #0 to rank %d on communicator pp waits for rank %d", peer,
             peer);
    expect_cycle(msg, dt, want, pp, pp);
    free(msg);
    MPI_Barrier(MPI_COMM_WORLD);
    VNT_NCCL_OK(ncclCommDestroy(pp));
    VNT_CUDA_OK(cudaFree(s));
    VNT_CUDA_OK(cudaFree(r));
    vnt_end();
}

/* Both orders alike, rank 1 optionally late: no report, no error, the sums right. */
static void no_cycle(unsigned late_s)
{
    ncclComm_t tp = named_comm("tp"), dp = named_comm("dp");
    float h[64], *a = vnt_dev_alloc(sizeof h), *b = vnt_dev_alloc(sizeof h);
    for (int i = 0; i < 64; i++)
        h[i] = (float)(vnt.rank + i);
    vnt_to_dev(a, h, sizeof h);
    vnt_to_dev(b, h, sizeof h);
    if (vnt.rank == 1 && late_s)
        sleep(late_s);
    VNT_NCCL_OK(ncclAllReduce(a, a, 64, ncclFloat32, ncclSum, tp, 0));
    VNT_NCCL_OK(ncclAllReduce(b, b, 64, ncclFloat32, ncclSum, dp, 0));
    double dt;
    char *msg = sync_captured(&dt);
    VNT_CHECK(strstr(msg, "deadlock") == NULL, "a deadlock was reported:\n%s", msg);
    VNT_CHECK(async_of(tp) == ncclSuccess && async_of(dp) == ncclSuccess, "errors %d %d",
              (int)async_of(tp), (int)async_of(dp));
    vnt_from_dev(h, b, sizeof h);
    for (int i = 0; i < 64; i++)
        VNT_CHECK(h[i] == (float)(1 + 2 * i), "element %d: %g, want %d", i, (double)h[i],
                  1 + 2 * i);
    free(msg);
    VNT_NCCL_OK(ncclCommDestroy(tp));
    VNT_NCCL_OK(ncclCommDestroy(dp));
    VNT_CUDA_OK(cudaFree(a));
    VNT_CUDA_OK(cudaFree(b));
    vnt_end();
}

static void test_same_order(void **st)
{
    no_cycle(0);
}

static void test_late_peer(void **st)
{
    no_cycle(3);
}

int main(int argc, char **argv)
{
    vnt_init(&argc, &argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_opposite_order),
        cmocka_unit_test(test_moved_send),
        cmocka_unit_test(test_send_first),
        cmocka_unit_test(test_same_order),
        cmocka_unit_test(test_late_peer),
    };
    return vnt_run("vgpu.nccl.deadlock", tests, sizeof(tests) / sizeof(tests[0]), NULL, NULL);
}
