/*
 * hook_list.h: the entry points the shim intercepts, one X-macro list per library.
 *
 * X(lib, ret, name, params, args)
 *   lib     DH_HOOK_LIB_<lib>: the library whose next definition the wrapper forwards to
 *   ret     the API's return type
 *   name    the exported symbol
 *   params  the parameter list exactly as in the CUDA 13 headers (a mismatch is a
 *           compile error, because each wrapper is defined under the header's prototype)
 *   args    the same names, in order, for forwarding
 *
 * These lists generate the real-function table, the counters, the names, the wrappers
 * (wrap_*.c) and the linker version script (exports.map.in), so adding a line is all it
 * takes to intercept one more entry point. The file has no includes so that the version
 * script can be made from it by the preprocessor alone.
 */
#ifndef DH_HOOK_LIST_H
#define DH_HOOK_LIST_H

/* X(lib, short name, soname of the real library, what a wrapper returns when no real
 * definition can be found: the API's own "not initialised" error) */
#define DH_HOOK_LIBS(X)                                                        \
    X(CUDART, "cudart", "libcudart.so.13", cudaErrorInitializationError)       \
    X(CUBLAS, "cublas", "libcublas.so.13", CUBLAS_STATUS_NOT_INITIALIZED)      \
    X(CUBLASLT, "cublasLt", "libcublasLt.so.13", CUBLAS_STATUS_NOT_INITIALIZED)

#define DH_HOOKS_CUDART(X)                                                                  \
    X(CUDART, cudaError_t, cudaMalloc, (void **devPtr, size_t size), (devPtr, size))        \
    X(CUDART, cudaError_t, cudaFree, (void *devPtr), (devPtr))                              \
    X(CUDART, cudaError_t, cudaMallocAsync, (void **devPtr, size_t size, cudaStream_t hStream), \
      (devPtr, size, hStream))                                                              \
    X(CUDART, cudaError_t, cudaFreeAsync, (void *devPtr, cudaStream_t hStream),             \
      (devPtr, hStream))                                                                    \
    X(CUDART, cudaError_t, cudaMemcpy,                                                      \
      (void *dst, const void *src, size_t count, enum cudaMemcpyKind kind),                 \
      (dst, src, count, kind))                                                              \
    X(CUDART, cudaError_t, cudaMemcpyAsync,                                                 \
      (void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,                  \
       cudaStream_t stream),                                                                \
      (dst, src, count, kind, stream))                                                      \
    X(CUDART, cudaError_t, cudaMemsetAsync,                                                 \
      (void *devPtr, int value, size_t count, cudaStream_t stream),                         \
      (devPtr, value, count, stream))                                                       \
    X(CUDART, cudaError_t, cudaLaunchKernel,                                                \
      (const void *func, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,        \
       cudaStream_t stream),                                                                \
      (func, gridDim, blockDim, args, sharedMem, stream))                                   \
    X(CUDART, cudaError_t, cudaLaunchKernelExC,                                             \
      (const cudaLaunchConfig_t *config, const void *func, void **args),                    \
      (config, func, args))                                                                 \
    X(CUDART, cudaError_t, cudaStreamSynchronize, (cudaStream_t stream), (stream))          \
    X(CUDART, cudaError_t, cudaDeviceSynchronize, (void), ())                               \
    X(CUDART, cudaError_t, cudaEventRecord, (cudaEvent_t event, cudaStream_t stream),       \
      (event, stream))                                                                      \
    X(CUDART, cudaError_t, cudaEventRecordWithFlags,                                        \
      (cudaEvent_t event, cudaStream_t stream, unsigned int flags), (event, stream, flags)) \
    X(CUDART, cudaError_t, cudaEventQuery, (cudaEvent_t event), (event))                    \
    X(CUDART, cudaError_t, cudaEventSynchronize, (cudaEvent_t event), (event))              \
    X(CUDART, cudaError_t, cudaStreamWaitEvent,                                             \
      (cudaStream_t stream, cudaEvent_t event, unsigned int flags), (stream, event, flags))

#define DH_HOOKS_CUBLAS(X)                                                                  \
    X(CUBLAS, cublasStatus_t, cublasGemmEx,                                                 \
      (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,    \
       int n, int k, const void *alpha, const void *A, cudaDataType Atype, int lda,         \
       const void *B, cudaDataType Btype, int ldb, const void *beta, void *C,               \
       cudaDataType Ctype, int ldc, cublasComputeType_t computeType,                        \
       cublasGemmAlgo_t algo),                                                              \
      (handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C,       \
       Ctype, ldc, computeType, algo))                                                      \
    X(CUBLAS, cublasStatus_t, cublasSgemm_v2,                                               \
      (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,    \
       int n, int k, const float *alpha, const float *A, int lda, const float *B, int ldb,  \
       const float *beta, float *C, int ldc),                                               \
      (handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc))

#define DH_HOOKS_CUBLASLT(X)                                                                \
    X(CUBLASLT, cublasStatus_t, cublasLtMatmul,                                             \
      (cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc, const void *alpha,   \
       const void *A, cublasLtMatrixLayout_t Adesc, const void *B,                          \
       cublasLtMatrixLayout_t Bdesc, const void *beta, const void *C,                       \
       cublasLtMatrixLayout_t Cdesc, void *D, cublasLtMatrixLayout_t Ddesc,                 \
       const cublasLtMatmulAlgo_t *algo, void *workspace, size_t workspaceSizeInBytes,      \
       cudaStream_t stream),                                                                \
      (lightHandle, computeDesc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, algo, \
       workspace, workspaceSizeInBytes, stream))

#define DH_HOOKS_ALL(X) DH_HOOKS_CUDART(X) DH_HOOKS_CUBLAS(X) DH_HOOKS_CUBLASLT(X)

#endif
