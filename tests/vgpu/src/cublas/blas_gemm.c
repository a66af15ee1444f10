/*
 * blas_gemm.c: the cuBLAS GEMM entry points (libcublas.so.13).
 *
 * Every entry point (here and in blas_gemm64.c) funnels into vg__blas_gemm_call(), which
 * checks its arguments in the order and with the statuses cuBLAS documents, copies host
 * scalars at call time, and hands the call to the core's vg_gemm_submit() as one operation
 * on the handle's stream. A handle with a user workspace (cublasSetWorkspace) declares the
 * first VG_GEMM_WS_TOUCH bytes of it written by every GEMM, so that two GEMMs sharing one
 * workspace on two streams at once are reported by the hazard detector, as they would race
 * on a GPU.
 *
 * Call-time checks, in this order, of every GEMM entry point (cublasSgemm_v2, cublasDgemm_v2,
 * cublasHgemm, cublasSgemmEx, cublasGemmEx, the StridedBatched and Batched forms, and the
 * _64 variants); the shim mirrors this list to answer a deferred GEMM at the call:
 *   1. handle NULL, destroyed or not a cuBLAS handle       -> CUBLAS_STATUS_NOT_INITIALIZED
 *   2. transa/transb not N, T or C; m, n or k < 0; batchCount < 0
 *                                                          -> CUBLAS_STATUS_INVALID_VALUE
 *   3. lda < max(1, transa == N ? m : k), ldb < max(1, transb == N ? k : n),
 *      ldc < max(1, m)                                     -> CUBLAS_STATUS_INVALID_VALUE
 *   4. alpha or beta NULL                                  -> CUBLAS_STATUS_INVALID_VALUE
 *   5. (A, B, C, compute type) not in cuBLAS's cublasGemmEx table (vg_gemm_set_types),
 *      or one the vgpu does not compute (int8, complex)    -> CUBLAS_STATUS_NOT_SUPPORTED
 *   6. m, n or batchCount 0: nothing is launched           -> CUBLAS_STATUS_SUCCESS
 *   7. the handle's stream belongs to a device other than the calling thread's current one
 *      (the launch fails; cudaErrorInvalidResourceHandle is left as the runtime's last
 *      error)                                              -> CUBLAS_STATUS_EXECUTION_FAILED
 *   8. vgpu only (cuBLAS does not check pointers; a GPU faults asynchronously): an operand,
 *      pointer array, device-mode scalar or workspace not inside one live device
 *      allocation                                          -> CUBLAS_STATUS_INVALID_VALUE
 * Steps 1-4 are the cuBLAS documentation's "Error Value" tables of cublas<t>gemm,
 * cublas<t>gemmBatched, cublas<t>gemmStridedBatched and cublasGemmEx (NVIDIA cuBLAS docs,
 * BLAS-like extension and Level-3 sections); step 5 its cublasGemmEx type table.
 */
#include <cublas_v2.h>

#include "blas.h"

/* cublas_api.h declares the __half entry points for C++ only; these are the same functions
 * with the 2-byte __half passed by pointer as uint16_t. */
cublasStatus_t cublasHgemm(cublasHandle_t handle, cublasOperation_t transa,
                           cublasOperation_t transb, int m, int n, int k, const uint16_t *alpha,
                           const uint16_t *A, int lda, const uint16_t *B, int ldb,
                           const uint16_t *beta, uint16_t *C, int ldc);
cublasStatus_t cublasHgemm_64(cublasHandle_t handle, cublasOperation_t transa,
                              cublasOperation_t transb, int64_t m, int64_t n, int64_t k,
                              const uint16_t *alpha, const uint16_t *A, int64_t lda,
                              const uint16_t *B, int64_t ldb, const uint16_t *beta, uint16_t *C,
                              int64_t ldc);
cublasStatus_t cublasHgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,
                                         cublasOperation_t transb, int m, int n, int k,
                                         const uint16_t *alpha, const uint16_t *A, int lda,
                                         long long strideA, const uint16_t *B, int ldb,
                                         long long strideB, const uint16_t *beta, uint16_t *C,
                                         int ldc, long long strideC, int batchCount);

static int valid_op(cublasOperation_t op)
{
    return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C;
}

static int64_t max1(int64_t v) { return v > 1 ? v : 1; }

cublasStatus_t vg__blas_gemm_call(cublasHandle_t handle, const vg_blas_gemm_args_t *x)
{
    struct cublasContext *h = vg__blas(handle);
    if (!h) {
        return CUBLAS_STATUS_NOT_INITIALIZED;
    }
    if (!valid_op(x->ta) || !valid_op(x->tb) || x->m < 0 || x->n < 0 || x->k < 0 ||
        x->batch < 0) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    /* Leading dimensions of the stored matrices: A is m x k (N) or k x m (T, C). */
    if (x->lda < max1(x->ta == CUBLAS_OP_N ? x->m : x->k) ||
        x->ldb < max1(x->tb == CUBLAS_OP_N ? x->k : x->n) || x->ldc < max1(x->m)) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (!x->alpha || !x->beta) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    vg_gemm_call_t call = {0};
    call.api = x->api;
    int tf32 = ((unsigned)h->math_mode & 0xfu) == CUBLAS_TF32_TENSOR_OP_MATH;
    cublasStatus_t st = vg_gemm_set_types(&call, x->at, x->bt, x->ct, x->compute, tf32);
    if (st != CUBLAS_STATUS_SUCCESS) {
        return st;
    }
    vg_gemm_desc_t *g = &call.g;
    g->m = x->m;
    g->n = x->n;
    g->k = x->k;
    g->batch = x->batch;
    g->trans_a = x->ta != CUBLAS_OP_N;
    g->trans_b = x->tb != CUBLAS_OP_N;
    call.a_array = x->a_array;
    call.b_array = x->b_array;
    call.c_array = x->c_array;
    g->a = x->a;
    g->lda = x->lda;
    g->stride_a = x->sa;
    g->b = x->b;
    g->ldb = x->ldb;
    g->stride_b = x->sb;
    g->c = x->c;
    g->ldc = x->ldc;
    g->stride_c = x->sc;
    g->d = x->c;
    g->ldd = x->ldc;
    g->stride_d = x->sc;
    if (h->pointer_mode == CUBLAS_POINTER_MODE_DEVICE) {
        call.alpha_dev = x->alpha;
        call.beta_dev = x->beta;
    } else {
        /* Host scalars are read now: the caller may reuse them as soon as we return. */
        g->alpha = vg_gemm_read_scalar(x->alpha, call.scalar_type);
        g->beta = vg_gemm_read_scalar(x->beta, call.scalar_type);
        call.beta_is_zero = g->beta == 0.0;
    }
    if (h->ws) {
        call.ws = h->ws;
        call.ws_bytes = h->ws_size < VG_GEMM_WS_TOUCH ? h->ws_size : VG_GEMM_WS_TOUCH;
    }
    call.dev = h->hdr.dev;
    return vg_gemm_submit(&call, h->stream);
}

VG_API cublasStatus_t cublasGemmStridedBatchedEx_64(
    cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int64_t m,
    int64_t n, int64_t k, const void *alpha, const void *A, cudaDataType Atype, int64_t lda,
    long long int strideA, const void *B, cudaDataType Btype, int64_t ldb, long long int strideB,
    const void *beta, void *C, cudaDataType Ctype, int64_t ldc, long long int strideC,
    int64_t batchCount, cublasComputeType_t computeType, cublasGemmAlgo_t algo)
{
    vg_blas_gemm_args_t x = {"cublasGemmStridedBatchedEx", transa, transb, m, n, k, alpha, beta,
                     A, Atype, lda, strideA, B, Btype, ldb, strideB, C, Ctype, ldc, strideC,
                     batchCount, computeType, NULL, NULL, NULL};
    return vg__blas_gemm_call(handle, &x);
}

VG_API cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
    int k, const void *alpha, const void *A, cudaDataType Atype, int lda, long long int strideA,
    const void *B, cudaDataType Btype, int ldb, long long int strideB, const void *beta, void *C,
    cudaDataType Ctype, int ldc, long long int strideC, int batchCount,
    cublasComputeType_t computeType, cublasGemmAlgo_t algo)
{
    return cublasGemmStridedBatchedEx_64(handle, transa, transb, m, n, k, alpha, A, Atype, lda,
                                         strideA, B, Btype, ldb, strideB, beta, C, Ctype, ldc,
                                         strideC, batchCount, computeType, algo);
}

VG_API cublasStatus_t cublasGemmEx_64(cublasHandle_t handle, cublasOperation_t transa,
                                      cublasOperation_t transb, int64_t m, int64_t n, int64_t k,
                                      const void *alpha, const void *A, cudaDataType Atype,
                                      int64_t lda, const void *B, cudaDataType Btype,
                                      int64_t ldb, const void *beta, void *C, cudaDataType Ctype,
                                      int64_t ldc, cublasComputeType_t computeType,
                                      cublasGemmAlgo_t algo)
{
    vg_blas_gemm_args_t x = {"cublasGemmEx", transa, transb, m, n, k, alpha, beta,
                     A, Atype, lda, 0, B, Btype, ldb, 0, C, Ctype, ldc, 0, 1, computeType,
                     NULL, NULL, NULL};
    return vg__blas_gemm_call(handle, &x);
}

VG_API cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                                   cublasOperation_t transb, int m, int n, int k,
                                   const void *alpha, const void *A, cudaDataType Atype, int lda,
                                   const void *B, cudaDataType Btype, int ldb, const void *beta,
                                   void *C, cudaDataType Ctype, int ldc,
                                   cublasComputeType_t computeType, cublasGemmAlgo_t algo)
{
    return cublasGemmEx_64(handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb,
                           beta, C, Ctype, ldc, computeType, algo);
}

VG_API cublasStatus_t cublasSgemmEx(cublasHandle_t handle, cublasOperation_t transa,
                                    cublasOperation_t transb, int m, int n, int k,
                                    const float *alpha, const void *A, cudaDataType Atype,
                                    int lda, const void *B, cudaDataType Btype, int ldb,
                                    const float *beta, void *C, cudaDataType Ctype, int ldc)
{
    vg_blas_gemm_args_t x = {"cublasSgemmEx", transa, transb, m, n, k, alpha, beta,
                     A, Atype, lda, 0, B, Btype, ldb, 0, C, Ctype, ldc, 0, 1, CUBLAS_COMPUTE_32F,
                     NULL, NULL, NULL};
    return vg__blas_gemm_call(handle, &x);
}

VG_API cublasStatus_t cublasSgemmStridedBatched_64(
    cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int64_t m,
    int64_t n, int64_t k, const float *alpha, const float *A, int64_t lda, long long int strideA,
    const float *B, int64_t ldb, long long int strideB, const float *beta, float *C, int64_t ldc,
    long long int strideC, int64_t batchCount)
{
    vg_blas_gemm_args_t x = {"cublasSgemmStridedBatched", transa, transb, m, n, k, alpha, beta,
                     A, CUDA_R_32F, lda, strideA, B, CUDA_R_32F, ldb, strideB,
                     C, CUDA_R_32F, ldc, strideC, batchCount, CUBLAS_COMPUTE_32F, NULL, NULL, NULL};
    return vg__blas_gemm_call(handle, &x);
}

VG_API cublasStatus_t cublasSgemmStridedBatched(
    cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
    int k, const float *alpha, const float *A, int lda, long long int strideA, const float *B,
    int ldb, long long int strideB, const float *beta, float *C, int ldc, long long int strideC,
    int batchCount)
{
    return cublasSgemmStridedBatched_64(handle, transa, transb, m, n, k, alpha, A, lda, strideA,
                                        B, ldb, strideB, beta, C, ldc, strideC, batchCount);
}

VG_API cublasStatus_t cublasSgemm_v2_64(cublasHandle_t handle, cublasOperation_t transa,
                                        cublasOperation_t transb, int64_t m, int64_t n,
                                        int64_t k, const float *alpha, const float *A,
                                        int64_t lda, const float *B, int64_t ldb,
                                        const float *beta, float *C, int64_t ldc)
{
    vg_blas_gemm_args_t x = {"cublasSgemm", transa, transb, m, n, k, alpha, beta,
                     A, CUDA_R_32F, lda, 0, B, CUDA_R_32F, ldb, 0, C, CUDA_R_32F, ldc, 0,
                     1, CUBLAS_COMPUTE_32F, NULL, NULL, NULL};
    return vg__blas_gemm_call(handle, &x);
}

VG_API cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa,
                                     cublasOperation_t transb, int m, int n, int k,
                                     const float *alpha, const float *A, int lda, const float *B,
                                     int ldb, const float *beta, float *C, int ldc)
{
    return cublasSgemm_v2_64(handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C,
                             ldc);
}

VG_API cublasStatus_t cublasHgemm_64(cublasHandle_t handle, cublasOperation_t transa,
                                     cublasOperation_t transb, int64_t m, int64_t n, int64_t k,
                                     const uint16_t *alpha, const uint16_t *A, int64_t lda,
                                     const uint16_t *B, int64_t ldb, const uint16_t *beta,
                                     uint16_t *C, int64_t ldc)
{
    vg_blas_gemm_args_t x = {"cublasHgemm", transa, transb, m, n, k, alpha, beta,
                     A, CUDA_R_16F, lda, 0, B, CUDA_R_16F, ldb, 0, C, CUDA_R_16F, ldc, 0,
                     1, CUBLAS_COMPUTE_16F, NULL, NULL, NULL};
    return vg__blas_gemm_call(handle, &x);
}

VG_API cublasStatus_t cublasHgemm(cublasHandle_t handle, cublasOperation_t transa,
                                  cublasOperation_t transb, int m, int n, int k,
                                  const uint16_t *alpha, const uint16_t *A, int lda,
                                  const uint16_t *B, int ldb, const uint16_t *beta, uint16_t *C,
                                  int ldc)
{
    return cublasHgemm_64(handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}

VG_API cublasStatus_t cublasHgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,
                                                cublasOperation_t transb, int m, int n, int k,
                                                const uint16_t *alpha, const uint16_t *A,
                                                int lda, long long strideA, const uint16_t *B,
                                                int ldb, long long strideB,
                                                const uint16_t *beta, uint16_t *C, int ldc,
                                                long long strideC, int batchCount)
{
    vg_blas_gemm_args_t x = {"cublasHgemmStridedBatched", transa, transb, m, n, k, alpha, beta,
                     A, CUDA_R_16F, lda, strideA, B, CUDA_R_16F, ldb, strideB,
                     C, CUDA_R_16F, ldc, strideC, batchCount, CUBLAS_COMPUTE_16F, NULL, NULL, NULL};
    return vg__blas_gemm_call(handle, &x);
}
