/*
 * prog_groups.c: Megatron's process groups, made the two ways PyTorch makes them.
 *
 *   groups TP CP DP PP   the job's layout (TP * CP * DP * PP ranks, Megatron's order: tensor-
 *                        parallel rank fastest, then context, data, pipeline). For every
 *                        dimension of size > 1, the group of ranks that differ only in it is
 *                        made twice: by ncclCommSplit of the world communicator (colour: the
 *                        group, key: the global rank; no commName) and by
 *                        ncclCommInitRankConfig with Megatron's group name as commName
 *                        (TENSOR_MODEL_PARALLEL_GROUP, CONTEXT_PARALLEL_GROUP,
 *                        DATA_PARALLEL_GROUP, PIPELINE_MODEL_PARALLEL_GROUP). Each one
 *                        all-reduces the members' global ranks, which must sum to the
 *                        group's; prints "groups made=<n>".
 * Creation order (the registry's order, which the driver relies on): world, then per
 * dimension in the order tp, cp, dp, pp: the split one, then the named one.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prog.h"

static const char *const g_names[4] = {"TENSOR_MODEL_PARALLEL_GROUP", "CONTEXT_PARALLEL_GROUP",
                                       "DATA_PARALLEL_GROUP", "PIPELINE_MODEL_PARALLEL_GROUP"};

/* The sum of the global ranks of r's group along dimension d, and its colour (r with that
 * coordinate zeroed). */
static int group_of(const int size[4], int r, int d, int *sum)
{
    int stride = 1;
    for (int i = 0; i < d; i++)
        stride *= size[i];
    int coord = (r / stride) % size[d], base = r - coord * stride;
    *sum = 0;
    for (int k = 0; k < size[d]; k++)
        *sum += base + k * stride;
    return base;
}

static void check_sum(ncclComm_t c, int want, const char *what)
{
    int *d = np_dev(2 * sizeof(int)), got = -1;
    NP_RT(cudaMemcpy(d, &np.rank, sizeof(int), cudaMemcpyHostToDevice));
    NP_NCCL(ncclAllReduce(d, d + 1, 1, ncclInt32, ncclSum, c, NULL));
    NP_RT(cudaMemcpy(&got, d + 1, sizeof(int), cudaMemcpyDeviceToHost));
    NP_CHECK(got == want, "%s: the members' global ranks sum to %d, expected %d", what, got,
             want);
    NP_RT(cudaFree(d));
}

void np_groups(int argc, char **argv)
{
    int size[4] = {1, 1, 1, 1};
    for (int i = 0; i < 4 && i < argc; i++)
        size[i] = atoi(argv[i]);
    if (size[0] * size[1] * size[2] * size[3] != np.size) {
        NP_CHECK(0, "layout %d x %d x %d x %d does not make %d ranks", size[0], size[1],
                 size[2], size[3], np.size);
        return;
    }
    ncclComm_t world = NULL, made[8];
    int n = 0;
    NP_NCCL(ncclCommInitRank(&world, np.size, np_shared_id(MPI_COMM_WORLD), np.rank));
    for (int d = 0; d < 4; d++) {
        if (size[d] < 2)
            continue;
        int sum, color = group_of(size, np.rank, d, &sum);
        ncclComm_t split = NULL, named = NULL;
        NP_NCCL(ncclCommSplit(world, color, np.rank, &split, NULL));
        check_sum(split, sum, "split");
        made[n++] = split;
        MPI_Comm mc;
        MPI_Comm_split(MPI_COMM_WORLD, color, np.rank, &mc);
        int mr;
        MPI_Comm_rank(mc, &mr);
        ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
        cfg.commName = g_names[d];
        NP_NCCL(ncclCommInitRankConfig(&named, size[d], np_shared_id(mc), mr, &cfg));
        MPI_Comm_free(&mc);
        check_sum(named, sum, g_names[d]);
        made[n++] = named;
    }
    printf("groups made=%d\n", n);
    while (n > 0)
        NP_NCCL(ncclCommDestroy(made[--n]));
    NP_NCCL(ncclCommDestroy(world));
}
