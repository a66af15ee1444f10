/*
 * blas_gemm64.c: the fp64 and pointer-array batched cuBLAS GEMMs (libcublas.so.13):
 * cublasDgemm_v2, cublasDgemmStridedBatched, cublasSgemmBatched, cublasDgemmBatched,
 * cublasGemmBatchedEx and their _64 forms. Checks and statuses are blas_gemm.c's.
 *
 * In the Batched forms Aarray, Barray and Carray are arrays in device memory, as cuBLAS
 * requires ("array of pointers to <type> array", device memory, cublas<t>gemmBatched docs):
 * the GEMM reads them when it runs. A host array is not device memory and fails the
 * vgpu's pointer check (CUBLAS_STATUS_INVALID_VALUE) where a GPU would fault.
 */
#include <cublas_v2.h>

#include "blas.h"

VG_API cublasStatus_t cublasDgemm_v2_64(cublasHandle_t handle, cublasOperation_t transa,
                                        cublasOperation_t transb, int64_t m, int64_t n,
                                        int64_t k, const double *alpha, const double *A,
                                        int64_t lda, const double *B, int64_t ldb,
                                        const double *beta, double *C, int64_t ldc)
{
    vg_blas_gemm_args_t x = {"cublasDgemm", transa, transb, m, n, k, alpha, beta,
                             A, CUDA_R_64F, lda, 0, B, CUDA_R_64F, ldb, 0, C, CUDA_R_64F, ldc,
                             0, 1, CUBLAS_COMPUTE_64F, NULL, NULL, NULL};
    return vg__blas_gemm_call(handle, &x);
}

VG_API cublasStatus_t cublasDgemm_v2(cublasHandle_t handle, cublasOperation_t transa,
                                     cublasOperation_t transb, int m, int n, int k,
                                     const double *alpha, const double *A, int lda,
                                     const double *B, int ldb, const double *beta, double *C,
                                     int ldc)
{
    return cublasDgemm_v2_64(handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C,
                             ldc);
}

VG_API cublasStatus_t cublasDgemmStridedBatched_64(
    cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int64_t m,
    int64_t n, int64_t k, const double *alpha, const double *A, int64_t lda,
    long long int strideA, const double *B, int64_t ldb, long long int strideB,
    const double *beta, double *C, int64_t ldc, long long int strideC, int64_t batchCount)
{
    vg_blas_gemm_args_t x = {"cublasDgemmStridedBatched", transa, transb, m, n, k, alpha, beta,
                             A, CUDA_R_64F, lda, strideA, B, CUDA_R_64F, ldb, strideB,
                             C, CUDA_R_64F, ldc, strideC, batchCount, CUBLAS_COMPUTE_64F,
                             NULL, NULL, NULL};
    return vg__blas_gemm_call(handle, &x);
}

VG_API cublasStatus_t cublasDgemmStridedBatched(
    cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
    int k, const double *alpha, const double *A, int lda, long long int strideA,
    const double *B, int ldb, long long int strideB, const double *beta, double *C, int ldc,
    long long int strideC, int batchCount)
{
    return cublasDgemmStridedBatched_64(handle, transa, transb, m, n, k, alpha, A, lda, strideA,
                                        B, ldb, strideB, beta, C, ldc, strideC, batchCount);
}

/* The pointer-array batch of the given types. */
static cublasStatus_t batched(const char *api, cublasHandle_t handle, cublasOperation_t ta,
                              cublasOperation_t tb, int64_t m, int64_t n, int64_t k,
                              const void *alpha, const void *const *aa, cudaDataType_t at,
                              int64_t lda, const void *const *ba, cudaDataType_t bt,
                              int64_t ldb, const void *beta, void *const *ca,
                              cudaDataType_t ct, int64_t ldc, int64_t batch,
                              cublasComputeType_t compute)
{
    vg_blas_gemm_args_t x = {api, ta, tb, m, n, k, alpha, beta, NULL, at, lda, 0,
                             NULL, bt, ldb, 0, NULL, ct, ldc, 0, batch, compute, aa, ba, ca};
    return vg__blas_gemm_call(handle, &x);
}

VG_API cublasStatus_t cublasSgemmBatched_64(cublasHandle_t handle, cublasOperation_t transa,
                                            cublasOperation_t transb, int64_t m, int64_t n,
                                            int64_t k, const float *alpha,
                                            const float *const Aarray[], int64_t lda,
                                            const float *const Barray[], int64_t ldb,
                                            const float *beta, float *const Carray[],
                                            int64_t ldc, int64_t batchCount)
{
    return batched("cublasSgemmBatched", handle, transa, transb, m, n, k, alpha,
                   (const void *const *)Aarray, CUDA_R_32F, lda, (const void *const *)Barray,
                   CUDA_R_32F, ldb, beta, (void *const *)Carray, CUDA_R_32F, ldc, batchCount,
                   CUBLAS_COMPUTE_32F);
}

VG_API cublasStatus_t cublasSgemmBatched(cublasHandle_t handle, cublasOperation_t transa,
                                         cublasOperation_t transb, int m, int n, int k,
                                         const float *alpha, const float *const Aarray[],
                                         int lda, const float *const Barray[], int ldb,
                                         const float *beta, float *const Carray[], int ldc,
                                         int batchCount)
{
    return cublasSgemmBatched_64(handle, transa, transb, m, n, k, alpha, Aarray, lda, Barray,
                                 ldb, beta, Carray, ldc, batchCount);
}

VG_API cublasStatus_t cublasDgemmBatched_64(cublasHandle_t handle, cublasOperation_t transa,
                                            cublasOperation_t transb, int64_t m, int64_t n,
                                            int64_t k, const double *alpha,
                                            const double *const Aarray[], int64_t lda,
                                            const double *const Barray[], int64_t ldb,
                                            const double *beta, double *const Carray[],
                                            int64_t ldc, int64_t batchCount)
{
    return batched("cublasDgemmBatched", handle, transa, transb, m, n, k, alpha,
                   (const void *const *)Aarray, CUDA_R_64F, lda, (const void *const *)Barray,
                   CUDA_R_64F, ldb, beta, (void *const *)Carray, CUDA_R_64F, ldc, batchCount,
                   CUBLAS_COMPUTE_64F);
}

VG_API cublasStatus_t cublasDgemmBatched(cublasHandle_t handle, cublasOperation_t transa,
                                         cublasOperation_t transb, int m, int n, int k,
                                         const double *alpha, const double *const Aarray[],
                                         int lda, const double *const Barray[], int ldb,
                                         const double *beta, double *const Carray[], int ldc,
                                         int batchCount)
{
    return cublasDgemmBatched_64(handle, transa, transb, m, n, k, alpha, Aarray, lda, Barray,
                                 ldb, beta, Carray, ldc, batchCount);
}

VG_API cublasStatus_t cublasGemmBatchedEx_64(
    cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int64_t m,
    int64_t n, int64_t k, const void *alpha, const void *const Aarray[], cudaDataType Atype,
    int64_t lda, const void *const Barray[], cudaDataType Btype, int64_t ldb, const void *beta,
    void *const Carray[], cudaDataType Ctype, int64_t ldc, int64_t batchCount,
    cublasComputeType_t computeType, cublasGemmAlgo_t algo)
{
    return batched("cublasGemmBatchedEx", handle, transa, transb, m, n, k, alpha, Aarray, Atype,
                   lda, Barray, Btype, ldb, beta, Carray, Ctype, ldc, batchCount, computeType);
}

VG_API cublasStatus_t cublasGemmBatchedEx(cublasHandle_t handle, cublasOperation_t transa,
                                          cublasOperation_t transb, int m, int n, int k,
                                          const void *alpha, const void *const Aarray[],
                                          cudaDataType Atype, int lda,
                                          const void *const Barray[], cudaDataType Btype,
                                          int ldb, const void *beta, void *const Carray[],
                                          cudaDataType Ctype, int ldc, int batchCount,
                                          cublasComputeType_t computeType,
                                          cublasGemmAlgo_t algo)
{
    return cublasGemmBatchedEx_64(handle, transa, transb, m, n, k, alpha, Aarray, Atype, lda,
                                  Barray, Btype, ldb, beta, Carray, Ctype, ldc, batchCount,
                                  computeType, algo);
}
