/*
 * nccl_common.h: what the vgpu NCCL tests share.
 *
 * The tests are MPI programs linked against the real CUDA and NCCL libraries; CTest runs
 * them under mpirun with the vgpu in front. MPI only distributes unique ids and keeps the
 * books: every rank runs the same cmocka tests in the same order, checks never abort a
 * rank in the middle of a collective (a rank that stopped would leave its peers waiting),
 * they count failures, and vnt_end() at the end of each test sums the failures of all
 * ranks and fails the test on every rank alike. Ranks other than 0 send stdout to
 * /dev/null so that cmocka's report appears once; failures go to stderr with the rank.
 *
 * The data-type conversions and the reference reduction here are written independently of
 * the library (compiler _Float16 for fp16, bit rounding for bf16, nearest-code search for
 * fp8), so that a shared mistake cannot make a test pass.
 */
#ifndef VGPU_NCCL_COMMON_H
#define VGPU_NCCL_COMMON_H

#include <mpi.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "vgpu.h"

/* nccl.h declares these without a prototype. */
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);

typedef struct vnt_world {
    int rank, size;
} vnt_world_t;
extern vnt_world_t vnt;

/* MPI_Init, world rank and size, stdout of ranks > 0 to /dev/null, device rank % count. */
void vnt_init(int *argc, char ***argv);
/* Runs the group (with optional group setup/teardown) on every rank, then MPI_Finalize.
 * Returns the process exit status, nonzero when a test failed on any rank. */
int vnt_run(const char *name, const struct CMUnitTest *tests, size_t n,
            CMFixtureFunction setup, CMFixtureFunction teardown);
/* A unique id made by rank 0 of comm and broadcast over it. */
ncclUniqueId vnt_shared_id(MPI_Comm comm);
/* Ends a test: fails it on every rank when any rank counted a failure (without MPI, when
 * this process did). */
void vnt_end(void);

/* Counts a failure and prints it (the first 20 per test) with the rank and place. */
void vnt_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#define VNT_CHECK(cond, ...)                                                                 \
    do {                                                                                     \
        if (!(cond))                                                                         \
            vnt_fail(__FILE__, __LINE__, __VA_ARGS__);                                       \
    } while (0)
#define VNT_NCCL(expected, call)                                                             \
    do {                                                                                     \
        ncclResult_t vnt_r_ = (call), vnt_x_ = (expected);                                   \
        if (vnt_r_ != vnt_x_)                                                                \
            vnt_fail(__FILE__, __LINE__, "%s: expected %d (%s), got %d (%s)", #call,         \
                     (int)vnt_x_, ncclGetErrorString(vnt_x_), (int)vnt_r_,                   \
                     ncclGetErrorString(vnt_r_));                                            \
    } while (0)
#define VNT_NCCL_OK(call) VNT_NCCL(ncclSuccess, call)
#define VNT_CUDA_OK(call)                                                                    \
    do {                                                                                     \
        cudaError_t vnt_e_ = (call);                                                         \
        if (vnt_e_ != cudaSuccess)                                                           \
            vnt_fail(__FILE__, __LINE__, "%s: got %s (%d)", #call,                           \
                     cudaGetErrorName(vnt_e_), (int)vnt_e_);                                 \
    } while (0)

/* ---- data types (test-side implementation) ---- */
extern const ncclDataType_t vnt_all_types[ncclNumTypes];
extern const ncclRedOp_t vnt_all_ops[ncclNumOps];
size_t vnt_size(ncclDataType_t dt);
const char *vnt_type_name(ncclDataType_t dt);
const char *vnt_op_name(ncclRedOp_t op);
int vnt_is_float(ncclDataType_t dt);
/* The exact value of an element. */
double vnt_load(const void *p, ncclDataType_t dt);
/* Stores v rounded to the type: floats to nearest even (fp16, bf16 and e5m2 overflow to
 * infinity, e4m3 saturates at 448), integers by C conversion (wrapping). */
void vnt_store(void *p, double v, ncclDataType_t dt);
/* The deterministic input value of element i of rank r for an op: small integers, with
 * fractions for fp16/bf16/fp32/fp64 so that the order of the reduction matters. */
double vnt_gen(int r, size_t i, ncclDataType_t dt, ncclRedOp_t op);
/* out[i] = in[0][i] op ... op in[n-1][i] in rank order, as documented by the vgpu:
 * fp32 accumulation for narrow floats with one rounding, wrapping integers, avg = sum/n. */
void vnt_ref_reduce(void *out, const void *const *in, int n, size_t count, ncclDataType_t dt,
                    ncclRedOp_t op);
/* out[i] = s*in[0][i] + ... + s*in[n-1][i] in rank order, s being one element of type dt
 * (ncclRedOpCreatePreMulSum), in the same arithmetic as vnt_ref_reduce. */
void vnt_ref_premul(void *out, const void *const *in, int n, size_t count, ncclDataType_t dt,
                    const void *scalar);
/* Compares count elements bit for bit; prints the first differences with both values.
 * Returns the number of differing elements. */
size_t vnt_compare(const char *what, const void *expected, const void *got, size_t count,
                   ncclDataType_t dt);

/* Sends this process's stderr to a temporary file until vnt_capture_end, which restores
 * it, echoes what was captured (so that logs keep it) and returns it (malloc'd). */
void vnt_capture_begin(void);
char *vnt_capture_end(void);
/* Seconds on CLOCK_MONOTONIC. */
double vnt_wall(void);

/* ---- device buffers ---- */
void *vnt_dev_alloc(size_t bytes);              /* cudaMalloc, counted failure on error */
void vnt_to_dev(void *dev, const void *host, size_t bytes);
void vnt_from_dev(void *host, const void *dev, size_t bytes);

#endif
