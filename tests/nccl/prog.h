/*
 * prog.h: what the NCCL test program's scenarios share (tests/nccl/prog*.c).
 *
 * nccl_prog is an ordinary MPI + CUDA + NCCL program linked against the real libraries; the
 * drivers (test_*.c) run it under mpirun on the vgpu, with and without the shim, and compare
 * what it prints. MPI only hands out unique ids and keeps ranks in step between scenarios;
 * all data moves through NCCL. A failed check prints "FAIL rank R: ..." and the program
 * exits 1 at the end (a rank never stops in the middle of a collective).
 *
 * Output lines the drivers read (one printf each, flushed):
 *   digest rank=<r> <16 hex digits>   FNV-1a of every output buffer, in a fixed order
 *   <scenario-specific lines, documented in each scenario's file>
 */
#ifndef NCCL_PROG_H
#define NCCL_PROG_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

/* nccl.h declares these without a prototype. */
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);

typedef struct np_world {
    int rank, size;
    int failures;
} np_world_t;
extern np_world_t np;

void np_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#define NP_CHECK(cond, ...)                                                            \
    do {                                                                               \
        if (!(cond))                                                                   \
            np_fail(__FILE__, __LINE__, __VA_ARGS__);                                  \
    } while (0)
#define NP_NCCL(call)                                                                  \
    do {                                                                               \
        ncclResult_t np_r_ = (call);                                                   \
        NP_CHECK(np_r_ == ncclSuccess, "%s returned %d (%s)", #call, (int)np_r_,       \
                 ncclGetErrorString(np_r_));                                           \
    } while (0)
#define NP_RT(call)                                                                    \
    do {                                                                               \
        cudaError_t np_e_ = (call);                                                    \
        NP_CHECK(np_e_ == cudaSuccess, "%s returned %d", #call, (int)np_e_);            \
    } while (0)

/* MPI_Init, rank and size, device 0, the kernels registered with the vgpu. */
void np_init(int *argc, char ***argv);
/* MPI_Finalize; the exit status (1 if any check failed on this rank). */
int np_finish(void);

/* A unique id made by rank 0 of comm and broadcast over it. */
ncclUniqueId np_shared_id(MPI_Comm comm);
/* cudaMalloc, zeroed. */
void *np_dev(size_t bytes);

/* Kernels (registered with the vgpu; cost in proportion to the bytes they touch, footprints
 * exact): y[i] = a * x[i] + y[i]; y[i] = base + step * i. */
void np_axpy(float *y, const float *x, float a, int n, cudaStream_t s);
void np_fill(float *y, int n, float base, float step, cudaStream_t s);

/* FNV-1a over n bytes of device memory (copied back), continuing from h. */
uint64_t np_hash_dev(uint64_t h, const void *dev, size_t n);
#define NP_HASH_INIT 0xcbf29ce484222325ull
void np_print_digest(uint64_t h);

/* Scenarios (prog_*.c); argv after the scenario's name. Each returns nothing; checks count
 * failures. */
void np_exact(int argc, char **argv);
void np_pin(int argc, char **argv);
void np_groups(int argc, char **argv);
void np_errors(int argc, char **argv);
void np_order(int argc, char **argv);

#endif
