/*
 * test_nccl_errors.c: what goes wrong between ranks is reported, not hung on.
 * Run under mpirun with 2 ranks and VGPU_COMM_TIMEOUT=2 (vgpu.nccl.errors).
 *
 * Each test uses a fresh communicator, since a failure is sticky: it becomes the
 * communicator's asynchronous error, returned by ncclCommGetAsyncError and by every later
 * call on it. Messages are captured from stderr and must name both sides.
 */
#include "nccl_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TIMEOUT_S 2.0 /* VGPU_COMM_TIMEOUT in nccl.cmake */

static ncclComm_t fresh_comm(void)
{
    ncclComm_t c = NULL;
    ncclUniqueId id = vnt_shared_id(MPI_COMM_WORLD);
    VNT_NCCL_OK(ncclCommInitRank(&c, vnt.size, id, vnt.rank));
    return c;
}

static void expect_text(const char *text, const char *needle)
{
    VNT_CHECK(strstr(text, needle) != NULL, "the message lacks \"%s\"; stderr was:\n%s", needle,
              text);
}

static void expect_async(ncclComm_t c, ncclResult_t want)
{
    ncclResult_t e = ncclSuccess;
    VNT_NCCL_OK(ncclCommGetAsyncError(c, &e));
    VNT_CHECK(e == want, "async error: expected %d (%s), got %d (%s)", (int)want,
              ncclGetErrorString(want), (int)e, ncclGetErrorString(e));
}

/* Rank 0 all-reduces while rank 1 all-gathers the same count: both fail at once with
 * ncclInvalidUsage, the message names both calls, and the receive buffer is untouched. */
static void test_mismatch_call(void **st)
{
    enum { C = 16 };
    ncclComm_t c = fresh_comm();
    float *buf = vnt_dev_alloc(C * 2 * sizeof(float)), h[C * 2];
    VNT_CUDA_OK(cudaMemset(buf, 0, sizeof(h)));
    if (vnt.rank == 0)
        VNT_NCCL_OK(ncclAllReduce(buf, buf + C, C, ncclFloat32, ncclSum, c, 0));
    else
        VNT_NCCL_OK(ncclAllGather(buf, buf, C, ncclFloat32, c, 0));
    double t0 = vnt_wall();
    vnt_capture_begin();
    VNT_CUDA_OK(cudaDeviceSynchronize());
    char *msg = vnt_capture_end();
    VNT_CHECK(vnt_wall() - t0 < TIMEOUT_S, "a mismatch took %.1f s to report (the timeout)",
              vnt_wall() - t0);
    expect_text(msg, "rank 0 called allreduce(count 16, float32, sum)");
    expect_text(msg, "rank 1 called allgather(count 16, float32)");
    expect_text(msg, "mismatch");
    free(msg);
    expect_async(c, ncclInvalidUsage);
    VNT_NCCL(ncclInvalidUsage, ncclAllReduce(buf, buf, C, ncclFloat32, ncclSum, c, 0));
    VNT_CHECK(strstr(ncclGetLastError(c), "mismatch") != NULL, "ncclGetLastError: %s",
              ncclGetLastError(c));
    vnt_from_dev(h, buf, sizeof(h));
    for (int i = 0; i < 2 * C; i++)
        VNT_CHECK(h[i] == 0.0f, "element %d written by a failed collective: %g", i, (double)h[i]);
    VNT_NCCL_OK(ncclCommDestroy(c));
    VNT_CUDA_OK(cudaFree(buf));
    vnt_end();
}

/* Counts differ, then (on another communicator) roots differ. */
static void test_mismatch_count_and_root(void **st)
{
    ncclComm_t c = fresh_comm(), c2 = fresh_comm();
    int32_t *buf = vnt_dev_alloc(64 * sizeof(int32_t));
    VNT_NCCL_OK(ncclAllReduce(buf, buf, vnt.rank ? 17 : 16, ncclInt32, ncclMax, c, 0));
    VNT_NCCL_OK(ncclBroadcast(buf, buf, 8, ncclInt32, vnt.rank, c2, 0));
    vnt_capture_begin();
    VNT_CUDA_OK(cudaDeviceSynchronize());
    char *msg = vnt_capture_end();
    expect_text(msg, "allreduce(count 16, int32, max)");
    expect_text(msg, "allreduce(count 17, int32, max)");
    expect_text(msg, "broadcast(count 8, int32, root 0)");
    expect_text(msg, "broadcast(count 8, int32, root 1)");
    free(msg);
    expect_async(c, ncclInvalidUsage);
    expect_async(c2, ncclInvalidUsage);
    VNT_NCCL_OK(ncclCommDestroy(c));
    VNT_NCCL_OK(ncclCommDestroy(c2));
    VNT_CUDA_OK(cudaFree(buf));
    vnt_end();
}

/* Rank 0 sends, rank 1 takes no part for longer than the timeout: rank 0 reports the
 * timeout naming the peer and fails its send. (Both ranks sending before receiving, each
 * send waiting for a receive queued behind the other's, is a deadlock: test_nccl_deadlock.c
 * has it.) */
static void test_p2p_timeout_reported(void **st)
{
    ncclComm_t c = fresh_comm();
    double *s = vnt_dev_alloc(4 * sizeof(double)), *r = vnt_dev_alloc(4 * sizeof(double));
    /* Rank 1 is busy elsewhere (here: in MPI) while rank 0's send waits for its receive:
     * not a deadlock (rank 1 waits for nothing on the device), so the timeout speaks. */
    if (vnt.rank == 0) {
        VNT_NCCL_OK(ncclSend(s, 4, ncclFloat64, 1, c, 0));
        double t0 = vnt_wall();
        vnt_capture_begin();
        VNT_CUDA_OK(cudaDeviceSynchronize());
        char *msg = vnt_capture_end();
        double dt = vnt_wall() - t0;
        VNT_CHECK(dt >= TIMEOUT_S * 0.9 && dt < TIMEOUT_S * 4, "the wait ended after %.2f s, "
                  "expected about the %.0f s timeout", dt, TIMEOUT_S);
        expect_text(msg, "VGPU_COMM_TIMEOUT");
        expect_text(msg, "send #0");
        expect_text(msg, "for rank(s) 1");
        VNT_CHECK(strstr(msg, "deadlock") == NULL, "reported as a deadlock:\n%s", msg);
        ncclResult_t e = ncclSuccess;
        VNT_NCCL_OK(ncclCommGetAsyncError(c, &e));
        VNT_CHECK(e == ncclSystemError, "the waiting rank's async error is %d", (int)e);
        free(msg);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (vnt.rank == 1) { /* the send it never took is still posted: this receive ends it */
        VNT_NCCL_OK(ncclRecv(r, 4, ncclFloat64, 0, c, 0));
        VNT_CUDA_OK(cudaDeviceSynchronize());
    }
    VNT_NCCL_OK(ncclCommDestroy(c));
    VNT_CUDA_OK(cudaFree(s));
    VNT_CUDA_OK(cudaFree(r));
    vnt_end();
}

/* Rank 0 initialises a 2-rank communicator alone: ncclCommInitRank returns an error after
 * the timeout and names the missing rank. */
static void test_init_timeout(void **st)
{
    if (vnt.rank == 0) {
        ncclUniqueId id;
        ncclComm_t c = (ncclComm_t)&id; /* must be reset to NULL on failure */
        VNT_NCCL_OK(ncclGetUniqueId(&id));
        double t0 = vnt_wall();
        vnt_capture_begin();
        ncclResult_t r = ncclCommInitRank(&c, 2, id, 0);
        char *msg = vnt_capture_end();
        VNT_CHECK(r == ncclSystemError, "expected ncclSystemError, got %d", (int)r);
        VNT_CHECK(c == NULL, "comm not NULL after a failed init");
        VNT_CHECK(vnt_wall() - t0 < TIMEOUT_S * 4, "init took %.1f s", vnt_wall() - t0);
        expect_text(msg, "waiting for rank(s) 1");
        free(msg);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    vnt_end();
}

/* Rank 0 all-reduces, rank 1 never does; both abort. Abort returns at once and the queued
 * collective ends without waiting for the timeout. */
static void test_abort_with_peer_gone(void **st)
{
    ncclComm_t c = fresh_comm();
    float *buf = vnt_dev_alloc(8 * sizeof(float));
    double t0 = vnt_wall();
    if (vnt.rank == 0)
        VNT_NCCL_OK(ncclAllReduce(buf, buf, 8, ncclFloat32, ncclSum, c, 0));
    VNT_NCCL_OK(ncclCommAbort(c));
    VNT_CUDA_OK(cudaDeviceSynchronize());
    VNT_CHECK(vnt_wall() - t0 < TIMEOUT_S * 0.5, "abort and sync took %.2f s",
              vnt_wall() - t0);
    VNT_CUDA_OK(cudaFree(buf));
    MPI_Barrier(MPI_COMM_WORLD);
    vnt_end();
}

/* Destroy (without a prior synchronisation) waits for the communicator's work. */
static void test_destroy_flushes(void **st)
{
    ncclComm_t c = fresh_comm();
    int32_t h[4] = {vnt.rank + 1, 2, 3, 4}, *buf = vnt_dev_alloc(sizeof(h));
    vnt_to_dev(buf, h, sizeof(h));
    VNT_NCCL_OK(ncclAllReduce(buf, buf, 4, ncclInt32, ncclProd, c, 0));
    VNT_NCCL_OK(ncclCommFinalize(c));
    VNT_NCCL_OK(ncclCommDestroy(c));
    vnt_from_dev(h, buf, sizeof(h));
    VNT_CHECK(h[0] == 2 && h[1] == 4 && h[3] == 16, "prod: got %d %d %d %d", h[0], h[1], h[2],
              h[3]);
    VNT_CUDA_OK(cudaFree(buf));
    vnt_end();
}

int main(int argc, char **argv)
{
    vnt_init(&argc, &argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mismatch_call),
        cmocka_unit_test(test_mismatch_count_and_root),
        cmocka_unit_test(test_p2p_timeout_reported),
        cmocka_unit_test(test_init_timeout),
        cmocka_unit_test(test_abort_with_peer_gone),
        cmocka_unit_test(test_destroy_flushes),
    };
    return vnt_run("vgpu.nccl.errors", tests, sizeof(tests) / sizeof(tests[0]), NULL, NULL);
}
