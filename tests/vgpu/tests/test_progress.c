/*
 * test_progress.c: a rank blocked outside CUDA does not stall its peers.
 *
 * Rank 0 issues an all-reduce and then waits in MPI_Barrier without synchronising; rank 1
 * synchronises on the same all-reduce before entering the barrier. On a GPU the
 * collective runs by itself; on the vgpu the progress thread must post rank 0's side
 * while its host is away, or rank 1 would wait until VGPU_COMM_TIMEOUT and fail. The
 * result must also be right.
 */
#include <mpi.h>
#include <stdio.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    ncclUniqueId id;
    if (rank == 0) ncclGetUniqueId(&id);
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t comm;
    float *buf, host[256];
    int ok = ncclCommInitRank(&comm, n, id, rank) == ncclSuccess &&
             cudaMalloc((void **)&buf, sizeof host) == cudaSuccess;
    for (int i = 0; i < 256; i++) host[i] = (float)(rank + 1);
    ok = ok && cudaMemcpy(buf, host, sizeof host, cudaMemcpyHostToDevice) == cudaSuccess;
    ok = ok && ncclAllReduce(buf, buf, 256, ncclFloat, ncclSum, comm, 0) == ncclSuccess;
    if (rank != 0) ok = ok && cudaStreamSynchronize(0) == cudaSuccess;
    MPI_Barrier(MPI_COMM_WORLD);
    ok = ok && cudaMemcpy(host, buf, sizeof host, cudaMemcpyDeviceToHost) == cudaSuccess;
    float want = (float)(n * (n + 1) / 2);
    if (ok && host[0] != want) {
        printf("rank %d: got %g, want %g\n", rank, host[0], want);
        ok = 0;
    }
    int all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (rank == 0) printf("%s\n", all ? "ok: no stall while a rank was blocked outside CUDA" : "FAIL");
    ncclCommDestroy(comm);
    MPI_Finalize();
    return all ? 0 : 1;
}
