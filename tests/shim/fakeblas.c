/*
 * fakeblas.c: libdh_fakeblas.so, a stand-in for a library that calls another wrapped API
 * from inside one of its own (as cuBLAS may call the runtime). Its cublasSgemm_v2 calls
 * cudaMalloc through the PLT, which the preloaded shim intercepts: the shim must count
 * that call as nested, not as a call of the program.
 */
#include <cublas_api.h>
#include <cuda_runtime_api.h>

__attribute__((visibility("default"))) cublasStatus_t
cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
               int m, int n, int k, const float *alpha, const float *A, int lda,
               const float *B, int ldb, const float *beta, float *C, int ldc)
{
    void *p = NULL;
    (void)cudaMalloc(&p, 16);
    return CUBLAS_STATUS_SUCCESS;
}
