/*
 * prog_errors.c: what the application sees when NCCL fails (the drivers set
 * VGPU_NCCL_FAIL, see tests/vgpu/src/nccl/nccl_fault.c).
 *
 *   errors calls   three all-reduces (the drivers make the third fail), a synchronisation
 *                  of the stream, ncclCommGetAsyncError, one more all-reduce; prints
 *                  "errors rank=<r> calls=<a>,<b>,<c> sync=<cudaError> async=<e> next=<n>"
 *                  and aborts the communicator.
 *   errors abort   rank 0 all-reduces on a communicator whose other members never call
 *                  (a dead peer), then aborts it while that work is in flight or queued;
 *                  prints "abort rank=0 ms=<time ncclCommAbort took> rc=<its result>".
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "prog.h"

#define EN 1024

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void errors_calls(ncclComm_t c, cudaStream_t s, float *buf)
{
    ncclResult_t r[3], async = ncclSuccess;
    for (int i = 0; i < 3; i++)
        r[i] = ncclAllReduce(buf, buf + EN, EN, ncclFloat32, ncclSum, c, s);
    cudaError_t se = cudaStreamSynchronize(s);
    ncclResult_t ge = ncclCommGetAsyncError(c, &async);
    NP_CHECK(ge == ncclSuccess, "ncclCommGetAsyncError returned %d", (int)ge);
    ncclResult_t next = ncclAllReduce(buf, buf + EN, EN, ncclFloat32, ncclSum, c, s);
    printf("errors rank=%d calls=%d,%d,%d sync=%d async=%d next=%d\n", np.rank, (int)r[0],
           (int)r[1], (int)r[2], (int)se, (int)async, (int)next);
    NP_NCCL(ncclCommAbort(c));
}

static void errors_abort(ncclComm_t c, cudaStream_t s, float *buf)
{
    if (np.rank == 0) {
        NP_NCCL(ncclAllReduce(buf, buf + EN, EN, ncclFloat32, ncclSum, c, s));
        double t0 = now_ms();
        ncclResult_t r = ncclCommAbort(c);
        printf("abort rank=0 ms=%.1f rc=%d\n", now_ms() - t0, (int)r);
    } else {
        NP_NCCL(ncclCommAbort(c));
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

void np_errors(int argc, char **argv)
{
    ncclComm_t c = NULL;
    cudaStream_t s;
    NP_NCCL(ncclCommInitRank(&c, np.size, np_shared_id(MPI_COMM_WORLD), np.rank));
    NP_RT(cudaStreamCreate(&s));
    float *buf = np_dev(2 * EN * sizeof(float));
    if (argc > 0 && strcmp(argv[0], "abort") == 0)
        errors_abort(c, s, buf);
    else
        errors_calls(c, s, buf);
}
