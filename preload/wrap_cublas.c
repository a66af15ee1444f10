/*
 * wrap_cublas.c: the cuBLAS wrappers, by the classes of hook_list.h. GEMMs are captured
 * when the mode defers; the handle setters are forwarded and, in the deferring modes,
 * mirrored so that a deferred GEMM replays with the state its handle had at the call.
 */
#include <cublas_v2.h>

#include "wrap.h"

#define DH_BLAS_CAPTURE(ret, name, params, args, CAPTURE) \
    DH_WRAP_CAPTURE(CUBLAS, ret, name, params, args, CAPTURE, CUBLAS_STATUS_SUCCESS)

DH_BLAS_CAPTURE(cublasStatus_t, cublasGemmEx,
                (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                 int n, int k, const void *alpha, const void *A, cudaDataType Atype, int lda,
                 const void *B, cudaDataType Btype, int ldb, const void *beta, void *C,
                 cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                 cublasGemmAlgo_t algo),
                (handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C,
                 Ctype, ldc, computeType, algo),
                dh_op_capture_gemm_ex(&op_, handle, transa, transb, m, n, k, alpha, A, Atype, lda,
                                      B, Btype, ldb, beta, C, Ctype, ldc, computeType, algo))

DH_BLAS_CAPTURE(cublasStatus_t, cublasSgemm_v2,
                (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                 int n, int k, const float *alpha, const float *A, int lda, const float *B,
                 int ldb, const float *beta, float *C, int ldc),
                (handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc),
                dh_op_capture_sgemm(&op_, handle, transa, transb, m, n, k, alpha, A, lda, B, ldb,
                                    beta, C, ldc))

DH_BLAS_CAPTURE(cublasStatus_t, cublasSgemmStridedBatched,
                (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                 int n, int k, const float *alpha, const float *A, int lda, long long int strideA,
                 const float *B, int ldb, long long int strideB, const float *beta, float *C,
                 int ldc, long long int strideC, int batchCount),
                (handle, transa, transb, m, n, k, alpha, A, lda, strideA, B, ldb, strideB, beta,
                 C, ldc, strideC, batchCount),
                dh_op_capture_sgemm_strided(&op_, handle, transa, transb, m, n, k, alpha, A, lda,
                                            strideA, B, ldb, strideB, beta, C, ldc, strideC,
                                            batchCount))

DH_BLAS_CAPTURE(cublasStatus_t, cublasGemmStridedBatchedEx,
                (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                 int n, int k, const void *alpha, const void *A, cudaDataType Atype, int lda,
                 long long int strideA, const void *B, cudaDataType Btype, int ldb,
                 long long int strideB, const void *beta, void *C, cudaDataType Ctype, int ldc,
                 long long int strideC, int batchCount, cublasComputeType_t computeType,
                 cublasGemmAlgo_t algo),
                (handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA, B, Btype, ldb,
                 strideB, beta, C, Ctype, ldc, strideC, batchCount, computeType, algo),
                dh_op_capture_gemm_strided_ex(&op_, handle, transa, transb, m, n, k, alpha, A,
                                              Atype, lda, strideA, B, Btype, ldb, strideB, beta,
                                              C, Ctype, ldc, strideC, batchCount, computeType,
                                              algo))

/* Setters: forward, then mirror what took effect. MIRROR is a statement using handle and
 * the setting's parameter. */
#define DH_BLAS_STATE(name, params, args, MIRROR)                                          \
    DH_HOOK_EXPORT cublasStatus_t name params                                              \
    {                                                                                      \
        DH_WRAP_ENTER(CUBLAS, cublasStatus_t, name);                                       \
        cublasStatus_t rc_ = real_ args;                                                   \
        if (rc_ == CUBLAS_STATUS_SUCCESS && dh_sched_mirroring())                          \
            MIRROR;                                                                        \
        dh__hook_leave();                                                                  \
        return rc_;                                                                        \
    }

DH_BLAS_STATE(cublasSetStream_v2, (cublasHandle_t handle, cudaStream_t s), (handle, s),
              dh_blas_state_set_stream(handle, s))
DH_BLAS_STATE(cublasSetWorkspace_v2, (cublasHandle_t handle, void *ws, size_t size),
              (handle, ws, size), dh_blas_state_set_workspace(handle, ws, size))
DH_BLAS_STATE(cublasSetMathMode, (cublasHandle_t handle, cublasMath_t mode), (handle, mode),
              dh_blas_state_set_math(handle, mode))
DH_BLAS_STATE(cublasSetPointerMode_v2, (cublasHandle_t handle, cublasPointerMode_t mode),
              (handle, mode), dh_blas_state_set_pointer(handle, mode))
DH_BLAS_STATE(cublasSetEmulationStrategy,
              (cublasHandle_t handle, cublasEmulationStrategy_t emulationStrategy),
              (handle, emulationStrategy), dh_blas_state_set_emulation(handle, emulationStrategy))
DH_BLAS_STATE(cublasSetAtomicsMode, (cublasHandle_t handle, cublasAtomicsMode_t mode),
              (handle, mode), dh_blas_state_set_atomics(handle, mode))

/* cublasDestroy synchronises the device; the handle's deferred GEMMs replay on the shim's
 * own handles, so only the mirror goes. */
DH_HOOK_EXPORT cublasStatus_t cublasDestroy_v2(cublasHandle_t handle)
{
    DH_WRAP_ENTER(CUBLAS, cublasStatus_t, cublasDestroy_v2);
    if (dh__may_defer())
        dh_sched_drain(DH_DRAIN_DEVICE_SYNC);
    if (dh_sched_mirroring())
        dh_blas_state_forget(handle);
    cublasStatus_t rc = real_(handle);
    dh__hook_leave();
    return rc;
}

#define DH_BLAS_SYNC(lib, ret, name, params, args) \
    DH_WRAP_DRAIN(lib, ret, name, params, args, DH_DRAIN_UNCAPTURABLE, 0, 0)

DH_HOOKS_CUBLAS_SYNC(DH_BLAS_SYNC)
