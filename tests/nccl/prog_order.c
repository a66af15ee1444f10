/*
 * prog_order.c: NCCL calls of two communicators from two streams, in one program order on
 * every rank (the nccl.order driver runs it with the shim's order rule broken, see
 * nccl_wrap/chain.h).
 *
 *   order   ORDER_ITERS times: (rank 1 only) a memset on stream 1, an all-reduce on "tp"
 *           on stream 1, an all-reduce on "dp" on stream 2; then both streams are
 *           synchronised. Prints "order rank=<r> async=<tp>,<dp> sums=<ok|bad>". The memset
 *           makes the ranks' queued work differ, so that a dispatcher free to reorder the
 *           two streams (stress mode) chooses differently on each rank.
 */
#include <stdio.h>
#include <string.h>

#include "prog.h"

#define ORDER_ITERS 2
#define ON 256

static ncclComm_t named(const char *name)
{
    ncclComm_t c = NULL;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.commName = name;
    NP_NCCL(ncclCommInitRankConfig(&c, np.size, np_shared_id(MPI_COMM_WORLD), np.rank, &cfg));
    return c;
}

void np_order(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    ncclComm_t tp = named("tp"), dp = named("dp");
    cudaStream_t s1, s2;
    NP_RT(cudaStreamCreate(&s1));
    NP_RT(cudaStreamCreate(&s2));
    float *a = np_dev(ON * sizeof(float)), *b = np_dev(ON * sizeof(float));
    float *scratch = np_dev(ON * sizeof(float));
    float h[ON];
    for (int i = 0; i < ON; i++)
        h[i] = 1.0f;
    NP_RT(cudaMemcpy(a, h, sizeof h, cudaMemcpyHostToDevice));
    NP_RT(cudaMemcpy(b, h, sizeof h, cudaMemcpyHostToDevice));
    for (int it = 0; it < ORDER_ITERS; it++) {
        if (np.rank == 1)
            NP_RT(cudaMemsetAsync(scratch, it, sizeof(float) * ON, s1));
        NP_NCCL(ncclAllReduce(a, a, ON, ncclFloat32, ncclSum, tp, s1));
        NP_NCCL(ncclAllReduce(b, b, ON, ncclFloat32, ncclSum, dp, s2));
    }
    NP_RT(cudaStreamSynchronize(s1));
    NP_RT(cudaStreamSynchronize(s2));
    ncclResult_t et = ncclSuccess, ed = ncclSuccess;
    NP_NCCL(ncclCommGetAsyncError(tp, &et));
    NP_NCCL(ncclCommGetAsyncError(dp, &ed));
    /* Every element doubles per all-reduce over two ranks: size^ORDER_ITERS. */
    float want = 1.0f, ga[ON], gb[ON];
    for (int it = 0; it < ORDER_ITERS; it++)
        want *= (float)np.size;
    NP_RT(cudaMemcpy(ga, a, sizeof ga, cudaMemcpyDeviceToHost));
    NP_RT(cudaMemcpy(gb, b, sizeof gb, cudaMemcpyDeviceToHost));
    int ok = 1;
    for (int i = 0; i < ON; i++)
        ok &= ga[i] == want && gb[i] == want;
    printf("order rank=%d async=%d,%d sums=%s\n", np.rank, (int)et, (int)ed, ok ? "ok" : "bad");
    if (et == ncclSuccess && ed == ncclSuccess) {
        NP_NCCL(ncclCommDestroy(tp));
        NP_NCCL(ncclCommDestroy(dp));
    } else {
        ncclCommAbort(tp);
        ncclCommAbort(dp);
    }
}
