/*
 * blas_gemm.c: the cuBLAS GEMM entry points (libcublas.so.13).
 *
 * Every entry point funnels into gemm_call(), which checks its arguments in the order and
 * with the statuses cuBLAS documents (handle, then values, then type support), copies host
 * scalars at call time, and hands the call to the core's vg_gemm_submit() as one operation
 * on the handle's stream. A handle with a user workspace (cublasSetWorkspace) declares the
 * first VG_GEMM_WS_TOUCH bytes of it written by every GEMM, so that two GEMMs sharing one
 * workspace on two streams at once are reported by the hazard detector, as they would race
 * on a GPU.
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

/* One GEMM as the API described it (before any checking). */
typedef struct gemm_args {
    const char *api;
    cublasOperation_t ta, tb;
    int64_t m, n, k;
    const void *alpha, *beta;
    const void *a; cudaDataType_t at; int64_t lda; long long sa;
    const void *b; cudaDataType_t bt; int64_t ldb; long long sb;
    void *c;       cudaDataType_t ct; int64_t ldc; long long sc;
    int64_t batch;
    cublasComputeType_t compute;
} gemm_args_t;

static int valid_op(cublasOperation_t op)
{
    return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C;
}

static int64_t max1(int64_t v) { return v > 1 ? v : 1; }

static float host_scalar(const void *p, vg_gemm_type_t t)
{
    if (t == VG_GEMM_F16) {
        return vg_gemm_f16_to_f32(*(const uint16_t *)p);
    }
    return *(const float *)p;
}

static cublasStatus_t gemm_call(cublasHandle_t handle, const gemm_args_t *x)
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
        g->alpha = host_scalar(x->alpha, call.scalar_type);
        g->beta = host_scalar(x->beta, call.scalar_type);
        call.beta_is_zero = g->beta == 0.0f;
    }
    if (h->ws) {
        call.ws = h->ws;
        call.ws_bytes = h->ws_size < VG_GEMM_WS_TOUCH ? h->ws_size : VG_GEMM_WS_TOUCH;
    }
    call.dev = h->hdr.dev;
    call.api = x->api;
    return vg_gemm_submit(&call, h->stream);
}

VG_API cublasStatus_t cublasGemmStridedBatchedEx_64(
    cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int64_t m,
    int64_t n, int64_t k, const void *alpha, const void *A, cudaDataType Atype, int64_t lda,
    long long int strideA, const void *B, cudaDataType Btype, int64_t ldb, long long int strideB,
    const void *beta, void *C, cudaDataType Ctype, int64_t ldc, long long int strideC,
    int64_t batchCount, cublasComputeType_t computeType, cublasGemmAlgo_t algo)
{
    gemm_args_t x = {"cublasGemmStridedBatchedEx", transa, transb, m, n, k, alpha, beta,
                     A, Atype, lda, strideA, B, Btype, ldb, strideB, C, Ctype, ldc, strideC,
                     batchCount, computeType};
    return gemm_call(handle, &x);
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
    gemm_args_t x = {"cublasGemmEx", transa, transb, m, n, k, alpha, beta,
                     A, Atype, lda, 0, B, Btype, ldb, 0, C, Ctype, ldc, 0, 1, computeType};
    return gemm_call(handle, &x);
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
    gemm_args_t x = {"cublasSgemmEx", transa, transb, m, n, k, alpha, beta,
                     A, Atype, lda, 0, B, Btype, ldb, 0, C, Ctype, ldc, 0, 1, CUBLAS_COMPUTE_32F};
    return gemm_call(handle, &x);
}

VG_API cublasStatus_t cublasSgemmStridedBatched_64(
    cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int64_t m,
    int64_t n, int64_t k, const float *alpha, const float *A, int64_t lda, long long int strideA,
    const float *B, int64_t ldb, long long int strideB, const float *beta, float *C, int64_t ldc,
    long long int strideC, int64_t batchCount)
{
    gemm_args_t x = {"cublasSgemmStridedBatched", transa, transb, m, n, k, alpha, beta,
                     A, CUDA_R_32F, lda, strideA, B, CUDA_R_32F, ldb, strideB,
                     C, CUDA_R_32F, ldc, strideC, batchCount, CUBLAS_COMPUTE_32F};
    return gemm_call(handle, &x);
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
    gemm_args_t x = {"cublasSgemm", transa, transb, m, n, k, alpha, beta,
                     A, CUDA_R_32F, lda, 0, B, CUDA_R_32F, ldb, 0, C, CUDA_R_32F, ldc, 0,
                     1, CUBLAS_COMPUTE_32F};
    return gemm_call(handle, &x);
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
    gemm_args_t x = {"cublasHgemm", transa, transb, m, n, k, alpha, beta,
                     A, CUDA_R_16F, lda, 0, B, CUDA_R_16F, ldb, 0, C, CUDA_R_16F, ldc, 0,
                     1, CUBLAS_COMPUTE_16F};
    return gemm_call(handle, &x);
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
    gemm_args_t x = {"cublasHgemmStridedBatched", transa, transb, m, n, k, alpha, beta,
                     A, CUDA_R_16F, lda, strideA, B, CUDA_R_16F, ldb, strideB,
                     C, CUDA_R_16F, ldc, strideC, batchCount, CUBLAS_COMPUTE_16F};
    return gemm_call(handle, &x);
}
