/*
 * gemm.h: the GEMM of the CPU device, shared by libcublas.so.13 and libcublasLt.so.13.
 *
 * Two layers. gemm.c is pure reference math: a strided-batched, column-major GEMM
 * D = epilogue(alpha * op(A) * op(B) + beta * C) in fp32 arithmetic over fp32, fp16 and
 * bf16 storage, with the type conversions it needs. gemm_op.c turns one validated call into
 * one device operation (vg_op_t): pointer checks against the allocation table, byte ranges
 * for the hazard detector, cost, and an exec callback that runs the math at the op's start.
 *
 * Numerics. Every output element is one fp32 accumulator summed over k in increasing order
 * (no split-K, no reassociation), then scaled, biased, activated and rounded once to the
 * output type with round-to-nearest-even. Results are therefore bit-reproducible within a
 * build and at least as accurate as a GPU's fp32-accumulating tensor-core GEMM; the _FAST
 * compute types (which may down-convert inputs on a GPU) are computed in full fp32.
 */
#ifndef VG_GEMM_H
#define VG_GEMM_H

#include <stddef.h>
#include <stdint.h>

#include <cublas_api.h>

#include "vg.h"

/* ---- storage types and conversions ---- */

typedef enum { VG_GEMM_F32 = 0, VG_GEMM_F16 = 1, VG_GEMM_BF16 = 2, VG_GEMM_F64 = 3 } vg_gemm_type_t;

/* Bytes per element of t (8, 4 or 2). */
VG_API size_t vg_gemm_type_size(vg_gemm_type_t t);
/* "f32", "f16", "bf16" or "f64". */
VG_API const char *vg_gemm_type_name(vg_gemm_type_t t);

/* IEEE binary16 <-> binary32. Widening is exact (subnormals included); narrowing rounds to
 * nearest, ties to even, overflows to infinity and keeps the sign of zero. Both directions
 * turn any NaN into a quiet NaN of the same sign that keeps the top payload bits.
 * Thread-safe. */
VG_API float vg_gemm_f16_to_f32(uint16_t h);
VG_API uint16_t vg_gemm_f32_to_f16(float f);
/* bfloat16 <-> binary32: widening is a shift (exact, NaN bits kept as they are); narrowing
 * rounds and treats NaN as above. */
VG_API float vg_gemm_bf16_to_f32(uint16_t h);
VG_API uint16_t vg_gemm_f32_to_bf16(float f);

/* GELU as cuBLASLt computes it (tanh approximation):
 * 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), in fp32. */
VG_API float vg_gemm_gelu(float x);

/* ---- the reference GEMM ---- */

/* Epilogue flags, applied in this order to t = alpha*acc + beta*C: BIAS adds bias[i] (one
 * value per row of D, broadcast over columns); AUX stores t (the activation's input) to
 * aux; RELU or GELU replaces t by max(t, 0) or gelu(t). */
enum {
    VG_GEMM_EPI_BIAS = 1u << 0,
    VG_GEMM_EPI_RELU = 1u << 1,
    VG_GEMM_EPI_GELU = 1u << 2,
    VG_GEMM_EPI_AUX = 1u << 3,
};

/* One strided-batched GEMM, everything column-major and counted in elements. fp64 (all of
 * A, B, C and D VG_GEMM_F64) is computed in fp64 by its own routine: one fp64 accumulator per
 * element summed over k in increasing order, alpha*acc + beta*C, no epilogue (the API
 * libraries never pass one with fp64). Matrix b of
 * the batch starts at X + b * stride_x. op(A) is m x k: A is m x k (trans_a == 0) or k x m
 * (trans_a != 0, transpose; conjugate-transpose is the same for real types); op(B) is k x n
 * likewise. C and D are m x n; D may equal C (in place, ldd == ldc). */
typedef struct vg_gemm_desc {
    int64_t m, n, k, batch;
    int trans_a, trans_b;
    vg_gemm_type_t a_type, b_type, c_type, d_type;
    const void *a; int64_t lda, stride_a;
    const void *b; int64_t ldb, stride_b;
    const void *c; int64_t ldc, stride_c;  /* read only when beta != 0 */
    void *d;       int64_t ldd, stride_d;
    double alpha, beta;                     /* fp32/fp16 scalars are held exactly; the fp32
                                               path rounds them back to float (exact) */
    unsigned epilogue;                      /* VG_GEMM_EPI_* */
    const void *bias; vg_gemm_type_t bias_type; int64_t stride_bias;
    void *aux;        vg_gemm_type_t aux_type;  int64_t ld_aux, stride_aux;
} vg_gemm_desc_t;

/* Computes g in place. Never reads C when beta == 0 (C may hold NaN garbage or be NULL)
 * and never reads A or B when alpha == 0 or k == 0 (BLAS convention). The caller has
 * validated dimensions and pointers. Returns 0, or -1 if scratch memory could not be
 * allocated (D untouched). Thread-safe for distinct outputs. */
VG_API int vg_gemm_run(const vg_gemm_desc_t *g);
/* vg_gemm_run for fp64 problems (gemm_f64.c); same contract. */
int vg__gemm_run_f64(const vg_gemm_desc_t *g);

/* ---- the GEMM as a device operation ---- */

/* Bytes of a cuBLAS handle's workspace that every GEMM on that handle is modelled to write,
 * when a workspace was set with cublasSetWorkspace (see vg_gemm_call_t.ws). */
#define VG_GEMM_WS_TOUCH ((size_t)1 << 20)

/* Everything one API call needs for its operation; the op keeps a private copy. */
typedef struct vg_gemm_call {
    vg_gemm_desc_t g;          /* g.alpha/g.beta are used unless the *_dev pointers are set */
    const void *alpha_dev;     /* device pointer mode: read at execution, type scalar_type */
    const void *beta_dev;
    vg_gemm_type_t scalar_type; /* VG_GEMM_F32, VG_GEMM_F16 or VG_GEMM_F64 */
    int beta_is_zero;          /* host mode: beta == 0, so C is neither read nor declared */
    int dtype_bits;            /* cost class for vg_cost_gemm: 32, 19 (tf32), 16, 17 (bf16),
                                  64 (fp64) */
    const void *ws;            /* workspace declared written: [ws, ws + ws_bytes) */
    size_t ws_bytes;
    /* Array-of-pointers batches (cublas<t>gemmBatched, cublasGemmBatchedEx): device arrays
     * of g.batch pointers to each entry's A, B and C (D is C). The GEMM reads them when it
     * runs, as a GPU kernel does; the hazard ranges of the matrices are declared from what
     * they hold at the call (both are checked against the allocation table). g.a, g.b,
     * g.c, g.d and the batch strides are unused when a_array is set. */
    const void *const *a_array, *const *b_array;
    void *const *c_array;
    int dev;                   /* device that runs the op (the handle's) */
    const char *api;           /* static string: "cublasGemmEx", "cublasLtMatmul", ... */
} vg_gemm_call_t;

/* Checks the types of a cuBLAS/cuBLASLt GEMM and fills call->g's types, call->scalar_type
 * and call->dtype_bits. Supported with CUBLAS_COMPUTE_32F[_PEDANTIC]: A=B=f32 with C f32;
 * A=B=f16 with C f16 or f32; A=B=bf16 with C bf16 or f32. With the _FAST_16F/_FAST_16BF/
 * _FAST_TF32 compute types: A=B=C=f32. With CUBLAS_COMPUTE_16F[_PEDANTIC]: A=B=C=f16 and
 * half scalars. tf32_math: the handle's math mode allows TF32 for fp32 (cost only).
 * Returns CUBLAS_STATUS_SUCCESS or CUBLAS_STATUS_NOT_SUPPORTED. */
VG_API cublasStatus_t vg_gemm_set_types(vg_gemm_call_t *call, cudaDataType_t at,
                                        cudaDataType_t bt, cudaDataType_t ct,
                                        cublasComputeType_t compute, int tf32_math);

/* Validates call (every operand, the bias, aux, device scalars and workspace must lie in one
 * live device-visible allocation each; a failure prints one "vgpu: <api>: <argument> ..."
 * line) and submits one VG_COMPUTE op on stream s, named like "gemm_f16_NT_m128n256k64",
 * timed with vg_cost_gemm, reading A, B (and C when C != D), writing D, aux and the
 * workspace. Empty problems (m, n or batch 0) submit nothing. Returns CUBLAS_STATUS_SUCCESS,
 * CUBLAS_STATUS_INVALID_VALUE (bad pointer) or CUBLAS_STATUS_EXECUTION_FAILED (the stream
 * refused the op). Thread-safe. */
VG_API cublasStatus_t vg_gemm_submit(const vg_gemm_call_t *call, cudaStream_t s);

/* The scalar at p (host or device memory the caller may read) of type t, widened exactly
 * to double: how alpha and beta are read, at the call in host pointer mode and when the op
 * runs in device pointer mode. */
VG_API double vg_gemm_read_scalar(const void *p, vg_gemm_type_t t);

/* cublasGetStatusName / cublasGetStatusString texts (shared by cuBLAS and cuBLASLt). */
VG_API const char *vg_gemm_status_name(cublasStatus_t st);
VG_API const char *vg_gemm_status_string(cublasStatus_t st);

#endif
