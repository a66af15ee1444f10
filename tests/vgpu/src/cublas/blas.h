/*
 * blas.h: the cuBLAS handle of the vgpu, shared by libcublas.so.13 and libcublasLt.so.13.
 *
 * PyTorch passes its cuBLAS handle to cublasLtMatmul as a cublasLtHandle_t
 * (at::cuda::getCurrentCUDABlasLtHandle is a reinterpret_cast on CUDA), so cuBLASLt must
 * accept either kind of handle. Both start with vg_blas_hdr_t, which is all cuBLASLt reads.
 *
 * Handles are never returned to malloc: a destroyed handle is marked dead and kept on its
 * library's list for reuse by a later create, so that a call on a destroyed handle reads a
 * dead magic (CUBLAS_STATUS_NOT_INITIALIZED) instead of freed memory. A handle is not
 * thread-safe, as in cuBLAS: one thread uses it at a time (PyTorch keeps one per thread).
 */
#ifndef VG_BLAS_H
#define VG_BLAS_H

#include <stdint.h>

#include <cublas_api.h>

#include "core/gemm.h"

#define VG_BLAS_MAGIC 0x76426c61u   /* "vBla": live cuBLAS handle */
#define VG_BLASLT_MAGIC 0x764c7448u /* "vLtH": live cuBLASLt handle */
#define VG_BLAS_DEAD 0x64656164u    /* "dead": destroyed, kept for reuse */

typedef struct vg_blas_hdr {
    uint32_t magic;
    int dev;           /* device current when the handle was created */
} vg_blas_hdr_t;

struct cublasContext {
    vg_blas_hdr_t hdr;
    cudaStream_t stream;
    void *ws;                        /* cublasSetWorkspace buffer; NULL: library default */
    size_t ws_size;
    cublasPointerMode_t pointer_mode;
    cublasMath_t math_mode;
    cublasAtomicsMode_t atomics_mode;
    cublasEmulationStrategy_t emulation;  /* recorded only: the vgpu never emulates */
    struct cublasContext *next;      /* every handle ever made; guarded by the list lock */
};

/* The live cuBLAS handle h, or NULL for NULL, destroyed or foreign handles. */
static inline struct cublasContext *vg__blas(cublasHandle_t h)
{
    return h && h->hdr.magic == VG_BLAS_MAGIC ? h : NULL;
}

/* One cuBLAS GEMM as the API described it, before any checking (blas_gemm.c). a_array,
 * b_array and c_array are set only by the pointer-array batched entry points, which leave
 * a, b, c and the strides zero. */
typedef struct vg_blas_gemm_args {
    const char *api;
    cublasOperation_t ta, tb;
    int64_t m, n, k;
    const void *alpha, *beta;
    const void *a; cudaDataType_t at; int64_t lda; long long sa;
    const void *b; cudaDataType_t bt; int64_t ldb; long long sb;
    void *c;       cudaDataType_t ct; int64_t ldc; long long sc;
    int64_t batch;
    cublasComputeType_t compute;
    const void *const *a_array, *const *b_array;
    void *const *c_array;
} vg_blas_gemm_args_t;

/* Checks x as cuBLAS does (the list is in blas_gemm.c) and submits it on the handle's
 * stream. Returns the cuBLAS status of the call. */
cublasStatus_t vg__blas_gemm_call(cublasHandle_t handle, const vg_blas_gemm_args_t *x);

#endif
