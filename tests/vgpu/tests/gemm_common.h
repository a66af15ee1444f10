/*
 * gemm_common.h: what the GEMM tests of the vgpu share (vgpu.gemm, vgpu.cublas,
 * vgpu.cublaslt, vgpu.gemm_hazard).
 *
 * A test describes one GEMM in a gt_gemm_t, lets gt_gemm_init fill A, B, C and the bias
 * with random values exactly representable in their storage types (fixed seed), runs it
 * through the API under test, and hands the output to gt_gemm_check, which compares every
 * element with a float64 reference within a bound derived per element (see gemm_common.c
 * for the reasoning) and checks that nothing outside the output matrices changed.
 *
 * The fp16 and bf16 conversions here are the tests' own (fp16 through the compiler's
 * _Float16, bf16 by picking the nearer neighbour in float64), independent of the vgpu's.
 */
#ifndef VGPU_GEMM_COMMON_H
#define VGPU_GEMM_COMMON_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <library_types.h>

/* Fails unless the cuBLAS call returns `expected`; prints both statuses by name. */
#define GT_EXPECT_BLAS(expected, call)                                                       \
    do {                                                                                     \
        cublasStatus_t gt_s_ = (call);                                                       \
        cublasStatus_t gt_x_ = (expected);                                                   \
        if (gt_s_ != gt_x_)                                                                  \
            fail_msg("%s\n      expected %s (%d), got %s (%d)", #call,                       \
                     cublasGetStatusName(gt_x_), (int)gt_x_, cublasGetStatusName(gt_s_),     \
                     (int)gt_s_);                                                            \
    } while (0)
#define GT_BLAS_OK(call) GT_EXPECT_BLAS(CUBLAS_STATUS_SUCCESS, call)

/* Fails unless the runtime call succeeds. */
#define GT_RT_OK(call)                                                                       \
    do {                                                                                     \
        cudaError_t gt_e_ = (call);                                                          \
        if (gt_e_ != cudaSuccess)                                                            \
            fail_msg("%s: %s", #call, cudaGetErrorName(gt_e_));                              \
    } while (0)

/* ---- conversions (test references) ---- */

/* Nearest bf16 to f, ties to even, NaN quieted with sign kept. */
uint16_t gt_bf16_from_float(float f);
float gt_bf16_to_float(uint16_t h);
uint16_t gt_f16_from_float(float f);
float gt_f16_to_float(uint16_t h);

/* Size in bytes of one element of t (CUDA_R_64F, CUDA_R_32F, CUDA_R_16F, CUDA_R_16BF). */
size_t gt_type_size(cudaDataType_t t);
/* Element i of a buffer of type t, widened exactly to double. */
double gt_load(const void *buf, cudaDataType_t t, size_t i);
/* Stores v (first rounded to float, unless t is CUDA_R_64F) into element i as type t. */
void gt_store(void *buf, cudaDataType_t t, size_t i, double v);

/* ---- deterministic random numbers ---- */

void gt_seed(uint64_t seed);
/* Uniform in [lo, hi). */
double gt_uniform(double lo, double hi);

/* ---- one GEMM: D = act(alpha * op(A) op(B) + beta * C + bias), D stored over C ---- */

enum { GT_EPI_BIAS = 1, GT_EPI_RELU = 2, GT_EPI_GELU = 4 };

typedef struct gt_gemm {
    /* Set by the test before gt_gemm_init (0 for ld/stride means packed). */
    int ta, tb;                  /* 0: N, 1: T */
    int64_t m, n, k, batch;
    cudaDataType_t ab_type, c_type, bias_type;
    int64_t lda, ldb, ldc, sa, sb, sc;
    double alpha, beta;
    unsigned epi;                /* GT_EPI_* */
    int c_nan;                   /* fill C with NaN (for beta == 0) */
    /* Filled by gt_gemm_init: host buffers in storage types, element counts. */
    void *a, *b, *c, *bias;
    size_t na, nb, nc, nbias;
} gt_gemm_t;

/* Fills defaults (packed leading dimensions and strides), allocates and fills the buffers.
 * Fails the test on out of memory. */
void gt_gemm_init(gt_gemm_t *g);
void gt_gemm_free(gt_gemm_t *g);

/* The reference for output element (i, j) of batch entry bt, and its error bound:
 * pre is the activation's input (alpha*AB + beta*C + bias) before the activation. */
void gt_gemm_ref(const gt_gemm_t *g, int64_t bt, int64_t i, int64_t j, double *want,
                 double *bound, double *pre);

/* Checks out (a host copy of the whole C buffer after the GEMM, type c_type) against the
 * reference: every output element within its bound, every other element bit-identical to
 * the initial C. Prints index, got, want and bound of the first failure and fails. */
void gt_gemm_check(const gt_gemm_t *g, const void *out, const char *what);

/* Checks a separately stored activation input (aux, type c_type, leading dimension ld,
 * batch stride s) against the reference's pre value. */
void gt_gemm_check_aux(const gt_gemm_t *g, const void *aux, int64_t ld, int64_t s,
                       const char *what);

/* ---- device copies of a problem ---- */

typedef struct gt_dev {
    void *a, *b, *c, *bias;
} gt_dev_t;

/* cudaMalloc + copy of A, B, C and the bias. */
void gt_dev_upload(const gt_gemm_t *g, gt_dev_t *d);
/* Waits for the device, then returns a malloc'ed host copy of the whole C buffer. */
void *gt_dev_download_c(const gt_gemm_t *g, const gt_dev_t *d);
void gt_dev_free(gt_dev_t *d);

#endif
