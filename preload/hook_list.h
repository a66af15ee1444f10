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
 * takes to intercept one more entry point. The file includes only the generated list (no
 * system header) so that the version script can be made from it by the preprocessor
 * alone.
 */
#ifndef DH_HOOK_LIST_H
#define DH_HOOK_LIST_H

#include "entry_list.h" /* generated; itself without includes */

/* X(lib, short name, soname of the real library, what a wrapper returns when no real
 * definition can be found: the API's own "not initialised" error) */
#define DH_HOOK_LIBS(X)                                                        \
    X(CUDART, "cudart", "libcudart.so.13", cudaErrorInitializationError)       \
    X(CUBLAS, "cublas", "libcublas.so.13", CUBLAS_STATUS_NOT_INITIALIZED)      \
    X(CUBLASLT, "cublasLt", "libcublasLt.so.13", CUBLAS_STATUS_NOT_INITIALIZED)   \
    X(CUDA, "cuda", "libcuda.so.1", CUDA_ERROR_NOT_INITIALIZED)                   \
    X(NCCL, "nccl", "libnccl.so.2", ncclInternalError)

/* The CUDA runtime, by class (DESIGN.md "Data flow"; the classes are what the wrappers in
 * wrap_cudart.c do when the mode defers):
 *   CAPTURE  the call enqueues stream work: captured into an op and deferred; also the
 *            calls whose deferred handling is written one by one (cudaMallocAsync,
 *            cudaEventQuery, graph capture, cudaEventDestroy, cudaStreamDestroy);
 *   SYNC     the call makes the host wait, observes device progress, or enqueues work the
 *            shim cannot capture: everything queued is issued first (drain), then the
 *            call is forwarded; the drain reason of each is in dh__drain_reason();
 *   FORWARD  no stream work and no ordering concern: forwarded at once. */
#define DH_HOOKS_CUDART_CAPTURE(X)                                                          \
    X(CUDART, cudaError_t, cudaLaunchKernel,                                                \
      (const void *func, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,        \
       cudaStream_t stream),                                                                \
      (func, gridDim, blockDim, args, sharedMem, stream))                                   \
    X(CUDART, cudaError_t, cudaLaunchKernelExC,                                             \
      (const cudaLaunchConfig_t *config, const void *func, void **args),                    \
      (config, func, args))                                                                 \
    X(CUDART, cudaError_t, __cudaLaunchKernel,                                              \
      (cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,     \
       cudaStream_t stream),                                                                \
      (kernel, gridDim, blockDim, args, sharedMem, stream))                                 \
    X(CUDART, cudaError_t, cudaMemcpyAsync,                                                 \
      (void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,                  \
       cudaStream_t stream),                                                                \
      (dst, src, count, kind, stream))                                                      \
    X(CUDART, cudaError_t, cudaMemsetAsync,                                                 \
      (void *devPtr, int value, size_t count, cudaStream_t stream),                         \
      (devPtr, value, count, stream))                                                       \
    X(CUDART, cudaError_t, cudaLaunchHostFunc,                                              \
      (cudaStream_t stream, cudaHostFn_t fn, void *userData), (stream, fn, userData))       \
    X(CUDART, cudaError_t, cudaEventRecord, (cudaEvent_t event, cudaStream_t stream),       \
      (event, stream))                                                                      \
    X(CUDART, cudaError_t, cudaEventRecordWithFlags,                                        \
      (cudaEvent_t event, cudaStream_t stream, unsigned int flags), (event, stream, flags)) \
    X(CUDART, cudaError_t, cudaStreamWaitEvent,                                             \
      (cudaStream_t stream, cudaEvent_t event, unsigned int flags), (stream, event, flags)) \
    X(CUDART, cudaError_t, cudaFreeAsync, (void *devPtr, cudaStream_t hStream),             \
      (devPtr, hStream))                                                                    \
    X(CUDART, cudaError_t, cudaMallocAsync, (void **devPtr, size_t size, cudaStream_t hStream), \
      (devPtr, size, hStream))                                                              \
    X(CUDART, cudaError_t, cudaEventQuery, (cudaEvent_t event), (event))                    \
    X(CUDART, cudaError_t, cudaStreamBeginCapture,                                          \
      (cudaStream_t stream, enum cudaStreamCaptureMode mode), (stream, mode))               \
    X(CUDART, cudaError_t, cudaStreamEndCapture, (cudaStream_t stream, cudaGraph_t *pGraph), \
      (stream, pGraph))                                                                     \
    X(CUDART, cudaError_t, cudaEventDestroy, (cudaEvent_t event), (event))                  \
    X(CUDART, cudaError_t, cudaStreamDestroy, (cudaStream_t stream), (stream))              \
    X(CUDART, cudaError_t, cudaGraphLaunch, (cudaGraphExec_t graphExec, cudaStream_t stream), \
      (graphExec, stream))

#define DH_HOOKS_CUDART_SYNC(X)                                                             \
    X(CUDART, cudaError_t, cudaStreamSynchronize, (cudaStream_t stream), (stream))          \
    X(CUDART, cudaError_t, cudaDeviceSynchronize, (void), ())                               \
    X(CUDART, cudaError_t, cudaEventSynchronize, (cudaEvent_t event), (event))              \
    X(CUDART, cudaError_t, cudaEventElapsedTime,                                            \
      (float *ms, cudaEvent_t start, cudaEvent_t end), (ms, start, end))                    \
    X(CUDART, cudaError_t, cudaStreamQuery, (cudaStream_t stream), (stream))                \
    X(CUDART, cudaError_t, cudaMemcpy,                                                      \
      (void *dst, const void *src, size_t count, enum cudaMemcpyKind kind),                 \
      (dst, src, count, kind))                                                              \
    X(CUDART, cudaError_t, cudaMemset, (void *devPtr, int value, size_t count),             \
      (devPtr, value, count))                                                               \
    X(CUDART, cudaError_t, cudaMemcpy2DAsync,                                               \
      (void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,              \
       size_t height, enum cudaMemcpyKind kind, cudaStream_t stream),                       \
      (dst, dpitch, src, spitch, width, height, kind, stream))                              \
    X(CUDART, cudaError_t, cudaFree, (void *devPtr), (devPtr))                              \
    X(CUDART, cudaError_t, cudaFreeHost, (void *ptr), (ptr)) \
    X(CUDART, cudaError_t, cudaMemcpy2D, (void *dst, size_t dpitch, const void *src, \
      size_t spitch, size_t width, size_t height, enum cudaMemcpyKind kind), (dst, dpitch, \
      src, spitch, width, height, kind)) \
    X(CUDART, cudaError_t, cudaMemcpyPeerAsync, (void *dst, int dstDevice, const void \
      *src, int srcDevice, size_t count, cudaStream_t stream), (dst, dstDevice, src, \
      srcDevice, count, stream)) \
    X(CUDART, cudaError_t, cudaDeviceReset, (void), ()) \
    X(CUDART, cudaError_t, cudaLaunchKernel_ptsz, (const void *func, dim3 gridDim, dim3 \
      blockDim, void **args, size_t sharedMem, cudaStream_t stream), (func, gridDim, \
      blockDim, args, sharedMem, stream)) \
    X(CUDART, cudaError_t, cudaLaunchKernelExC_ptsz, (const cudaLaunchConfig_t *config, \
      const void *func, void **args), (config, func, args)) \
    X(CUDART, cudaError_t, __cudaLaunchKernel_ptsz, (cudaKernel_t kernel, dim3 gridDim, \
      dim3 blockDim, void **args, size_t sharedMem, cudaStream_t stream), (kernel, gridDim, \
      blockDim, args, sharedMem, stream)) \
    X(CUDART, cudaError_t, cudaMemcpyAsync_ptsz, (void *dst, const void *src, size_t \
      count, enum cudaMemcpyKind kind, cudaStream_t stream), (dst, src, count, kind, \
      stream)) \
    X(CUDART, cudaError_t, cudaMemsetAsync_ptsz, (void *devPtr, int value, size_t count, \
      cudaStream_t stream), (devPtr, value, count, stream)) \
    X(CUDART, cudaError_t, cudaLaunchHostFunc_ptsz, (cudaStream_t stream, cudaHostFn_t fn, \
      void *userData), (stream, fn, userData)) \
    X(CUDART, cudaError_t, cudaEventRecord_ptsz, (cudaEvent_t event, cudaStream_t stream), \
      (event, stream)) \
    X(CUDART, cudaError_t, cudaEventRecordWithFlags_ptsz, (cudaEvent_t event, cudaStream_t \
      stream, unsigned int flags), (event, stream, flags)) \
    X(CUDART, cudaError_t, cudaStreamWaitEvent_ptsz, (cudaStream_t stream, cudaEvent_t \
      event, unsigned int flags), (stream, event, flags)) \
    X(CUDART, cudaError_t, cudaMallocAsync_ptsz, (void **devPtr, size_t size, cudaStream_t \
      hStream), (devPtr, size, hStream)) \
    X(CUDART, cudaError_t, cudaFreeAsync_ptsz, (void *devPtr, cudaStream_t hStream), \
      (devPtr, hStream)) \
    X(CUDART, cudaError_t, cudaStreamQuery_ptsz, (cudaStream_t stream), (stream)) \
    X(CUDART, cudaError_t, cudaStreamSynchronize_ptsz, (cudaStream_t stream), (stream))

#define DH_HOOKS_CUDART_FORWARD(X)                                                          \
    X(CUDART, cudaError_t, cudaMalloc, (void **devPtr, size_t size), (devPtr, size))        \
    X(CUDART, cudaError_t, cudaGetLastError, (void), ())                                    \
    X(CUDART, cudaError_t, cudaPeekAtLastError, (void), ())                                 \
    X(CUDART, cudaError_t, cudaGetDriverEntryPoint,                                         \
      (const char *symbol, void **funcPtr, unsigned long long flags,                        \
       enum cudaDriverEntryPointQueryResult *driverStatus),                                 \
      (symbol, funcPtr, flags, driverStatus))                                               \
    X(CUDART, cudaError_t, cudaGetDriverEntryPointByVersion,                                \
      (const char *symbol, void **funcPtr, unsigned int cudaVersion, unsigned long long flags, \
       enum cudaDriverEntryPointQueryResult *driverStatus),                                 \
      (symbol, funcPtr, cudaVersion, flags, driverStatus))

/* Graph capture entered and left by the other doors (per-thread forms, capture into an
 * existing graph): the shim drains and passes everything through while a capture is under
 * way, as for cudaStreamBeginCapture (wrap_cudart.c, DH_WRAP_CAPTURE_BEGIN). */
#define DH_HOOKS_CUDART_GRAPHCAP(X)                                                         \
    X(CUDART, cudaError_t, cudaStreamBeginCapture_ptsz,                                     \
      (cudaStream_t stream, enum cudaStreamCaptureMode mode), (stream, mode))               \
    X(CUDART, cudaError_t, cudaStreamBeginCaptureToGraph,                                   \
      (cudaStream_t stream, cudaGraph_t graph, const cudaGraphNode_t *dependencies,         \
       const cudaGraphEdgeData *dependencyData, size_t numDependencies,                     \
       enum cudaStreamCaptureMode mode),                                                    \
      (stream, graph, dependencies, dependencyData, numDependencies, mode))                 \
    X(CUDART, cudaError_t, cudaStreamBeginCaptureToGraph_ptsz,                              \
      (cudaStream_t stream, cudaGraph_t graph, const cudaGraphNode_t *dependencies,         \
       const cudaGraphEdgeData *dependencyData, size_t numDependencies,                     \
       enum cudaStreamCaptureMode mode),                                                    \
      (stream, graph, dependencies, dependencyData, numDependencies, mode))                 \
    X(CUDART, cudaError_t, cudaStreamEndCapture_ptsz,                                       \
      (cudaStream_t stream, cudaGraph_t *pGraph), (stream, pGraph))                         \
    X(CUDART, cudaError_t, cudaGetDriverEntryPoint_ptsz,                                    \
      (const char *symbol, void **funcPtr, unsigned long long flags,                        \
       enum cudaDriverEntryPointQueryResult *driverStatus),                                 \
      (symbol, funcPtr, flags, driverStatus))                                               \
    X(CUDART, cudaError_t, cudaGetDriverEntryPointByVersion_ptsz,                           \
      (const char *symbol, void **funcPtr, unsigned int cudaVersion, unsigned long long flags, \
       enum cudaDriverEntryPointQueryResult *driverStatus),                                 \
      (symbol, funcPtr, cudaVersion, flags, driverStatus))

/* Allocations besides cudaMalloc and cudaMallocAsync (wrap_cudart.c, DH_WRAP_ALLOC): an
 * out-of-memory failure is retried after the shim gives memory back (scheduler.h
 * DH_SCHED_RETRY_ALLOC, DESIGN.md invariant 11); the stream-ordered one from a pool of the
 * program's drains first, as before. */
#define DH_HOOKS_CUDART_ALLOC(X)                                                            \
    X(CUDART, cudaError_t, cudaMallocPitch,                                                 \
      (void **devPtr, size_t *pitch, size_t width, size_t height),                          \
      (devPtr, pitch, width, height))                                                       \
    X(CUDART, cudaError_t, cudaMalloc3D,                                                    \
      (struct cudaPitchedPtr *pitchedDevPtr, struct cudaExtent extent),                     \
      (pitchedDevPtr, extent))                                                              \
    X(CUDART, cudaError_t, cudaMallocManaged, (void **devPtr, size_t size, unsigned int flags), \
      (devPtr, size, flags))                                                                \
    X(CUDART, cudaError_t, cudaMallocFromPoolAsync,                                         \
      (void **ptr, size_t size, cudaMemPool_t memPool, cudaStream_t stream),                \
      (ptr, size, memPool, stream))

#define DH_HOOKS_CUDART(X) DH_HOOKS_CUDART_CAPTURE(X) DH_HOOKS_CUDART_SYNC(X) \
    DH_HOOKS_CUDART_FORWARD(X) DH_HOOKS_CUDART_GRAPHCAP(X) DH_HOOKS_CUDART_ALLOC(X)

/* cuBLAS: GEMMs (plain and strided-batched) are captured; the handle setters are forwarded
 * and mirrored (a deferred GEMM replays with the state its handle had at the call). */
#define DH_HOOKS_CUBLAS_CAPTURE(X)                                                          \
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
      (handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc))                \
    X(CUBLAS, cublasStatus_t, cublasSgemmStridedBatched,                                    \
      (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,    \
       int n, int k, const float *alpha, const float *A, int lda, long long int strideA,    \
       const float *B, int ldb, long long int strideB, const float *beta, float *C,         \
       int ldc, long long int strideC, int batchCount),                                     \
      (handle, transa, transb, m, n, k, alpha, A, lda, strideA, B, ldb, strideB, beta, C,   \
       ldc, strideC, batchCount))                                                           \
    X(CUBLAS, cublasStatus_t, cublasGemmStridedBatchedEx,                                   \
      (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,    \
       int n, int k, const void *alpha, const void *A, cudaDataType Atype, int lda,         \
       long long int strideA, const void *B, cudaDataType Btype, int ldb,                   \
       long long int strideB, const void *beta, void *C, cudaDataType Ctype, int ldc,       \
       long long int strideC, int batchCount, cublasComputeType_t computeType,              \
       cublasGemmAlgo_t algo),                                                              \
      (handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA, B, Btype, ldb,       \
       strideB, beta, C, Ctype, ldc, strideC, batchCount, computeType, algo))

#define DH_HOOKS_CUBLAS_STATE(X)                                                            \
    X(CUBLAS, cublasStatus_t, cublasSetStream_v2, (cublasHandle_t handle, cudaStream_t s),  \
      (handle, s))                                                                          \
    X(CUBLAS, cublasStatus_t, cublasSetWorkspace_v2,                                        \
      (cublasHandle_t handle, void *workspace, size_t workspaceSizeInBytes),                \
      (handle, workspace, workspaceSizeInBytes))                                            \
    X(CUBLAS, cublasStatus_t, cublasSetMathMode, (cublasHandle_t handle, cublasMath_t mode), \
      (handle, mode))                                                                       \
    X(CUBLAS, cublasStatus_t, cublasSetPointerMode_v2,                                      \
      (cublasHandle_t handle, cublasPointerMode_t mode), (handle, mode))                    \
    X(CUBLAS, cublasStatus_t, cublasSetEmulationStrategy,                                  \
      (cublasHandle_t handle, cublasEmulationStrategy_t emulationStrategy),                 \
      (handle, emulationStrategy))                                                          \
    X(CUBLAS, cublasStatus_t, cublasSetAtomicsMode,                                         \
      (cublasHandle_t handle, cublasAtomicsMode_t mode), (handle, mode))                    \
    X(CUBLAS, cublasStatus_t, cublasDestroy_v2, (cublasHandle_t handle), (handle))

/* Everything else of cuBLAS that enqueues work and that a program may call (each entry
 * point the vgpu implements: tests/shim/test_preload.c checks that none is left out):
 * drained and forwarded in program order. The fp64 and pointer-array batched GEMMs, the
 * 64-bit-index forms and the vector/matrix copies are rare in training; deferring them
 * would need their own kinds. cublasHgemm is declared for C++ only (cuda_fp16.h's __half),
 * so a C wrapper cannot be defined under its prototype: not wrapped (docs/shim.md,
 * "Interception"). */
#define DH_HOOKS_CUBLAS_SYNC(X) \
    X(CUBLAS, cublasStatus_t, cublasSetVector, (int n, int elemSize, const void* x, int \
      incx, void* devicePtr, int incy), (n, elemSize, x, incx, devicePtr, incy)) \
    X(CUBLAS, cublasStatus_t, cublasGetVector, (int n, int elemSize, const void* x, int \
      incx, void* y, int incy), (n, elemSize, x, incx, y, incy)) \
    X(CUBLAS, cublasStatus_t, cublasSetMatrix, (int rows, int cols, int elemSize, const \
      void* A, int lda, void* B, int ldb), (rows, cols, elemSize, A, lda, B, ldb)) \
    X(CUBLAS, cublasStatus_t, cublasGetMatrix, (int rows, int cols, int elemSize, const \
      void* A, int lda, void* B, int ldb), (rows, cols, elemSize, A, lda, B, ldb)) \
    X(CUBLAS, cublasStatus_t, cublasSetVectorAsync, (int n, int elemSize, const void* \
      hostPtr, int incx, void* devicePtr, int incy, cudaStream_t stream), (n, elemSize, \
      hostPtr, incx, devicePtr, incy, stream)) \
    X(CUBLAS, cublasStatus_t, cublasGetVectorAsync, (int n, int elemSize, const void* \
      devicePtr, int incx, void* hostPtr, int incy, cudaStream_t stream), (n, elemSize, \
      devicePtr, incx, hostPtr, incy, stream)) \
    X(CUBLAS, cublasStatus_t, cublasSetMatrixAsync, (int rows, int cols, int elemSize, \
      const void* A, int lda, void* B, int ldb, cudaStream_t stream), (rows, cols, \
      elemSize, A, lda, B, ldb, stream)) \
    X(CUBLAS, cublasStatus_t, cublasGetMatrixAsync, (int rows, int cols, int elemSize, \
      const void* A, int lda, void* B, int ldb, cudaStream_t stream), (rows, cols, \
      elemSize, A, lda, B, ldb, stream)) \
    X(CUBLAS, cublasStatus_t, cublasSetVector_64, (int64_t n, int64_t elemSize, const \
      void* x, int64_t incx, void* devicePtr, int64_t incy), (n, elemSize, x, incx, \
      devicePtr, incy)) \
    X(CUBLAS, cublasStatus_t, cublasGetVector_64, (int64_t n, int64_t elemSize, const \
      void* x, int64_t incx, void* y, int64_t incy), (n, elemSize, x, incx, y, incy)) \
    X(CUBLAS, cublasStatus_t, cublasSetMatrix_64, (int64_t rows, int64_t cols, int64_t \
      elemSize, const void* A, int64_t lda, void* B, int64_t ldb), (rows, cols, elemSize, \
      A, lda, B, ldb)) \
    X(CUBLAS, cublasStatus_t, cublasGetMatrix_64, (int64_t rows, int64_t cols, int64_t \
      elemSize, const void* A, int64_t lda, void* B, int64_t ldb), (rows, cols, elemSize, \
      A, lda, B, ldb)) \
    X(CUBLAS, cublasStatus_t, cublasSetVectorAsync_64, (int64_t n, int64_t elemSize, const \
      void* hostPtr, int64_t incx, void* devicePtr, int64_t incy, cudaStream_t stream), \
      (n, elemSize, hostPtr, incx, devicePtr, incy, stream)) \
    X(CUBLAS, cublasStatus_t, cublasGetVectorAsync_64, (int64_t n, int64_t elemSize, const \
      void* devicePtr, int64_t incx, void* hostPtr, int64_t incy, cudaStream_t stream), \
      (n, elemSize, devicePtr, incx, hostPtr, incy, stream)) \
    X(CUBLAS, cublasStatus_t, cublasSetMatrixAsync_64, (int64_t rows, int64_t cols, \
      int64_t elemSize, const void* A, int64_t lda, void* B, int64_t ldb, cudaStream_t \
      stream), (rows, cols, elemSize, A, lda, B, ldb, stream)) \
    X(CUBLAS, cublasStatus_t, cublasGetMatrixAsync_64, (int64_t rows, int64_t cols, \
      int64_t elemSize, const void* A, int64_t lda, void* B, int64_t ldb, cudaStream_t \
      stream), (rows, cols, elemSize, A, lda, B, ldb, stream)) \
    X(CUBLAS, cublasStatus_t, cublasSgemm_v2_64, (cublasHandle_t handle, cublasOperation_t \
      transa, cublasOperation_t transb, int64_t m, int64_t n, int64_t k, const float* \
      alpha, const float* A, int64_t lda, const float* B, int64_t ldb, const float* beta, \
      float* C, int64_t ldc), (handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, \
      beta, C, ldc)) \
    X(CUBLAS, cublasStatus_t, cublasDgemm_v2, (cublasHandle_t handle, cublasOperation_t \
      transa, cublasOperation_t transb, int m, int n, int k, const double* alpha, const \
      double* A, int lda, const double* B, int ldb, const double* beta, double* C, int \
      ldc), (handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc)) \
    X(CUBLAS, cublasStatus_t, cublasDgemm_v2_64, (cublasHandle_t handle, cublasOperation_t \
      transa, cublasOperation_t transb, int64_t m, int64_t n, int64_t k, const double* \
      alpha, const double* A, int64_t lda, const double* B, int64_t ldb, const double* \
      beta, double* C, int64_t ldc), (handle, transa, transb, m, n, k, alpha, A, lda, B, \
      ldb, beta, C, ldc)) \
    X(CUBLAS, cublasStatus_t, cublasSgemmEx, (cublasHandle_t handle, cublasOperation_t \
      transa, cublasOperation_t transb, int m, int n, int k, const float* alpha, const \
      void* A, cudaDataType Atype, int lda, const void* B, cudaDataType Btype, int ldb, \
      const float* beta, void* C, cudaDataType Ctype, int ldc), (handle, transa, transb, \
      m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc)) \
    X(CUBLAS, cublasStatus_t, cublasSgemmBatched, (cublasHandle_t handle, \
      cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k, const \
      float* alpha, const float* const Aarray[], int lda, const float* const Barray[], int \
      ldb, const float* beta, float* const Carray[], int ldc, int batchCount), (handle, \
      transa, transb, m, n, k, alpha, Aarray, lda, Barray, ldb, beta, Carray, ldc, \
      batchCount)) \
    X(CUBLAS, cublasStatus_t, cublasSgemmBatched_64, (cublasHandle_t handle, \
      cublasOperation_t transa, cublasOperation_t transb, int64_t m, int64_t n, int64_t k, \
      const float* alpha, const float* const Aarray[], int64_t lda, const float* const \
      Barray[], int64_t ldb, const float* beta, float* const Carray[], int64_t ldc, \
      int64_t batchCount), (handle, transa, transb, m, n, k, alpha, Aarray, lda, Barray, \
      ldb, beta, Carray, ldc, batchCount)) \
    X(CUBLAS, cublasStatus_t, cublasDgemmBatched, (cublasHandle_t handle, \
      cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k, const \
      double* alpha, const double* const Aarray[], int lda, const double* const Barray[], \
      int ldb, const double* beta, double* const Carray[], int ldc, int batchCount), \
      (handle, transa, transb, m, n, k, alpha, Aarray, lda, Barray, ldb, beta, Carray, \
      ldc, batchCount)) \
    X(CUBLAS, cublasStatus_t, cublasDgemmBatched_64, (cublasHandle_t handle, \
      cublasOperation_t transa, cublasOperation_t transb, int64_t m, int64_t n, int64_t k, \
      const double* alpha, const double* const Aarray[], int64_t lda, const double* const \
      Barray[], int64_t ldb, const double* beta, double* const Carray[], int64_t ldc, \
      int64_t batchCount), (handle, transa, transb, m, n, k, alpha, Aarray, lda, Barray, \
      ldb, beta, Carray, ldc, batchCount)) \
    X(CUBLAS, cublasStatus_t, cublasGemmBatchedEx, (cublasHandle_t handle, \
      cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k, const void* \
      alpha, const void* const Aarray[], cudaDataType Atype, int lda, const void* const \
      Barray[], cudaDataType Btype, int ldb, const void* beta, void* const Carray[], \
      cudaDataType Ctype, int ldc, int batchCount, cublasComputeType_t computeType, \
      cublasGemmAlgo_t algo), (handle, transa, transb, m, n, k, alpha, Aarray, Atype, lda, \
      Barray, Btype, ldb, beta, Carray, Ctype, ldc, batchCount, computeType, algo)) \
    X(CUBLAS, cublasStatus_t, cublasGemmBatchedEx_64, (cublasHandle_t handle, \
      cublasOperation_t transa, cublasOperation_t transb, int64_t m, int64_t n, int64_t k, \
      const void* alpha, const void* const Aarray[], cudaDataType Atype, int64_t lda, \
      const void* const Barray[], cudaDataType Btype, int64_t ldb, const void* beta, void* \
      const Carray[], cudaDataType Ctype, int64_t ldc, int64_t batchCount, \
      cublasComputeType_t computeType, cublasGemmAlgo_t algo), (handle, transa, transb, m, \
      n, k, alpha, Aarray, Atype, lda, Barray, Btype, ldb, beta, Carray, Ctype, ldc, \
      batchCount, computeType, algo)) \
    X(CUBLAS, cublasStatus_t, cublasSgemmStridedBatched_64, (cublasHandle_t handle, \
      cublasOperation_t transa, cublasOperation_t transb, int64_t m, int64_t n, int64_t k, \
      const float* alpha, const float* A, int64_t lda, long long int strideA, const float* \
      B, int64_t ldb, long long int strideB, const float* beta, float* C, int64_t ldc, \
      long long int strideC, int64_t batchCount), (handle, transa, transb, m, n, k, alpha, \
      A, lda, strideA, B, ldb, strideB, beta, C, ldc, strideC, batchCount)) \
    X(CUBLAS, cublasStatus_t, cublasDgemmStridedBatched, (cublasHandle_t handle, \
      cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k, const \
      double* alpha, const double* A, int lda, long long int strideA, const double* B, int \
      ldb, long long int strideB, const double* beta, double* C, int ldc, long long int \
      strideC, int batchCount), (handle, transa, transb, m, n, k, alpha, A, lda, strideA, \
      B, ldb, strideB, beta, C, ldc, strideC, batchCount)) \
    X(CUBLAS, cublasStatus_t, cublasDgemmStridedBatched_64, (cublasHandle_t handle, \
      cublasOperation_t transa, cublasOperation_t transb, int64_t m, int64_t n, int64_t k, \
      const double* alpha, const double* A, int64_t lda, long long int strideA, const \
      double* B, int64_t ldb, long long int strideB, const double* beta, double* C, \
      int64_t ldc, long long int strideC, int64_t batchCount), (handle, transa, transb, m, \
      n, k, alpha, A, lda, strideA, B, ldb, strideB, beta, C, ldc, strideC, batchCount)) \
    X(CUBLAS, cublasStatus_t, cublasGemmEx_64, (cublasHandle_t handle, cublasOperation_t \
      transa, cublasOperation_t transb, int64_t m, int64_t n, int64_t k, const void* \
      alpha, const void* A, cudaDataType Atype, int64_t lda, const void* B, cudaDataType \
      Btype, int64_t ldb, const void* beta, void* C, cudaDataType Ctype, int64_t ldc, \
      cublasComputeType_t computeType, cublasGemmAlgo_t algo), (handle, transa, transb, m, \
      n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc, computeType, algo)) \
    X(CUBLAS, cublasStatus_t, cublasGemmStridedBatchedEx_64, (cublasHandle_t handle, \
      cublasOperation_t transa, cublasOperation_t transb, int64_t m, int64_t n, int64_t k, \
      const void* alpha, const void* A, cudaDataType Atype, int64_t lda, long long int \
      strideA, const void* B, cudaDataType Btype, int64_t ldb, long long int strideB, \
      const void* beta, void* C, cudaDataType Ctype, int64_t ldc, long long int strideC, \
      int64_t batchCount, cublasComputeType_t computeType, cublasGemmAlgo_t algo), \
      (handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA, B, Btype, ldb, \
      strideB, beta, C, Ctype, ldc, strideC, batchCount, computeType, algo))

#define DH_HOOKS_CUBLAS(X) DH_HOOKS_CUBLAS_CAPTURE(X) DH_HOOKS_CUBLAS_STATE(X) \
    DH_HOOKS_CUBLAS_SYNC(X)

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

/* The driver. Programs reach it directly, through dlsym on a libcuda handle (PyTorch,
 * Triton) and through cuGetProcAddress (the runtime itself): wrap_cuda.c hands out these
 * wrappers on all three paths. Launches are captured; waits and copies the shim does not
 * capture drain first. (cuGetProcAddress is the legacy 4-argument entry point; the header
 * maps the name to cuGetProcAddress_v2.) */
#define DH_HOOKS_CUDA_CAPTURE(X)                                                            \
    X(CUDA, CUresult, cuLaunchKernel,                                                       \
      (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,       \
       unsigned bz, unsigned shm, CUstream s, void **params, void **extra),                 \
      (f, gx, gy, gz, bx, by, bz, shm, s, params, extra))                                   \
    X(CUDA, CUresult, cuLaunchKernel_ptsz,                                                  \
      (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,       \
       unsigned bz, unsigned shm, CUstream s, void **params, void **extra),                 \
      (f, gx, gy, gz, bx, by, bz, shm, s, params, extra))                                   \
    X(CUDA, CUresult, cuLaunchKernelEx,                                                     \
      (const CUlaunchConfig *config, CUfunction f, void **params, void **extra),            \
      (config, f, params, extra))                                                           \
    X(CUDA, CUresult, cuLaunchKernelEx_ptsz,                                                \
      (const CUlaunchConfig *config, CUfunction f, void **params, void **extra),            \
      (config, f, params, extra))                                                           \
    X(CUDA, CUresult, cuGetProcAddress_v2,                                                  \
      (const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,                   \
       CUdriverProcAddressQueryResult *symbolStatus),                                       \
      (symbol, pfn, cudaVersion, flags, symbolStatus))                                      \
    X(CUDA, CUresult, cuGetProcAddress,                                                     \
      (const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags),                  \
      (symbol, pfn, cudaVersion, flags))                                                    \
    X(CUDA, CUresult, cuGraphLaunch, (CUgraphExec hGraphExec, CUstream hStream),            \
      (hGraphExec, hStream))

#define DH_HOOKS_CUDA_SYNC(X)                                                               \
    X(CUDA, CUresult, cuStreamSynchronize, (CUstream s), (s))                               \
    X(CUDA, CUresult, cuStreamSynchronize_ptsz, (CUstream s), (s))                          \
    X(CUDA, CUresult, cuStreamQuery, (CUstream s), (s))                                     \
    X(CUDA, CUresult, cuCtxSynchronize, (void), ())                                         \
    X(CUDA, CUresult, cuEventSynchronize, (CUevent e), (e))                                 \
    X(CUDA, CUresult, cuMemcpyHtoD_v2, (CUdeviceptr d, const void *h, size_t n), (d, h, n)) \
    X(CUDA, CUresult, cuMemcpyDtoH_v2, (void *h, CUdeviceptr d, size_t n), (h, d, n))       \
    X(CUDA, CUresult, cuMemcpyAsync, (CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st),  \
      (d, s, n, st))                                                                        \
    X(CUDA, CUresult, cuMemcpyHtoDAsync_v2,                                                 \
      (CUdeviceptr d, const void *h, size_t n, CUstream st), (d, h, n, st))                 \
    X(CUDA, CUresult, cuMemcpyDtoHAsync_v2,                                                 \
      (void *h, CUdeviceptr d, size_t n, CUstream st), (h, d, n, st))                       \
    X(CUDA, CUresult, cuMemsetD8Async,                                                      \
      (CUdeviceptr d, unsigned char v, size_t n, CUstream st), (d, v, n, st))               \
    X(CUDA, CUresult, cuMemFree_v2, (CUdeviceptr d), (d)) \
    X(CUDA, CUresult, cuLaunchHostFunc, (CUstream hStream, CUhostFn fn, void *userData), \
      (hStream, fn, userData)) \
    X(CUDA, CUresult, cuEventRecord, (CUevent hEvent, CUstream hStream), (hEvent, \
      hStream)) \
    X(CUDA, CUresult, cuEventRecord_ptsz, (CUevent hEvent, CUstream hStream), (hEvent, \
      hStream)) \
    X(CUDA, CUresult, cuEventRecordWithFlags, (CUevent hEvent, CUstream hStream, unsigned \
      int flags), (hEvent, hStream, flags)) \
    X(CUDA, CUresult, cuStreamWaitEvent, (CUstream hStream, CUevent hEvent, unsigned int \
      Flags), (hStream, hEvent, Flags)) \
    X(CUDA, CUresult, cuStreamWaitEvent_ptsz, (CUstream hStream, CUevent hEvent, unsigned \
      int Flags), (hStream, hEvent, Flags)) \
    X(CUDA, CUresult, cuMemFreeAsync, (CUdeviceptr dptr, CUstream hStream), (dptr, \
      hStream)) \
    X(CUDA, CUresult, cuMemFreeAsync_ptsz, (CUdeviceptr dptr, CUstream hStream), (dptr, \
      hStream)) \
    X(CUDA, CUresult, cuMemcpyDtoD_v2, (CUdeviceptr dstDevice, CUdeviceptr srcDevice, \
      size_t ByteCount), (dstDevice, srcDevice, ByteCount)) \
    X(CUDA, CUresult, cuMemcpyDtoDAsync_v2, (CUdeviceptr dstDevice, CUdeviceptr srcDevice, \
      size_t ByteCount, CUstream hStream), (dstDevice, srcDevice, ByteCount, hStream)) \
    X(CUDA, CUresult, cuMemcpyAsync_ptsz, (CUdeviceptr dst, CUdeviceptr src, size_t \
      ByteCount, CUstream hStream), (dst, src, ByteCount, hStream)) \
    X(CUDA, CUresult, cuMemcpyHtoDAsync_v2_ptsz, (CUdeviceptr dstDevice, const void \
      *srcHost, size_t ByteCount, CUstream hStream), (dstDevice, srcHost, ByteCount, \
      hStream)) \
    X(CUDA, CUresult, cuMemsetD8_v2, (CUdeviceptr dstDevice, unsigned char uc, size_t N), \
      (dstDevice, uc, N)) \
    X(CUDA, CUresult, cuMemsetD8Async_ptsz, (CUdeviceptr dstDevice, unsigned char uc, \
      size_t N, CUstream hStream), (dstDevice, uc, N, hStream)) \
    X(CUDA, CUresult, cuStreamQuery_ptsz, (CUstream hStream), (hStream)) \
    X(CUDA, CUresult, cuEventQuery, (CUevent hEvent), (hEvent)) \
    X(CUDA, CUresult, cuEventElapsedTime_v2, (float *pMilliseconds, CUevent hStart, \
      CUevent hEnd), (pMilliseconds, hStart, hEnd)) \
    X(CUDA, CUresult, cuMemFreeHost, (void *p), (p)) \
    X(CUDA, CUresult, cuDevicePrimaryCtxReset_v2, (CUdevice dev), (dev))                    \
    X(CUDA, CUresult, cuDevicePrimaryCtxRelease_v2, (CUdevice dev), (dev))

/* Destroying a stream or an event issues its queued work first and forgets the shim's
 * bookkeeping of it, as cudaStreamDestroy and cudaEventDestroy do (wrap_cuda.c). */
#define DH_HOOKS_CUDA_DESTROY(X)                                                            \
    X(CUDA, CUresult, cuStreamDestroy_v2, (CUstream hStream), (hStream))                    \
    X(CUDA, CUresult, cuEventDestroy_v2, (CUevent hEvent), (hEvent))

/* Graph capture through the driver (wrap_cuda.c): as the runtime's. */
#define DH_HOOKS_CUDA_GRAPHCAP(X)                                                           \
    X(CUDA, CUresult, cuStreamBeginCapture_v2, (CUstream hStream, CUstreamCaptureMode mode), \
      (hStream, mode))                                                                      \
    X(CUDA, CUresult, cuStreamBeginCapture_v2_ptsz,                                         \
      (CUstream hStream, CUstreamCaptureMode mode), (hStream, mode))                        \
    X(CUDA, CUresult, cuStreamBeginCaptureToGraph,                                          \
      (CUstream hStream, CUgraph hGraph, const CUgraphNode *dependencies,                   \
       const CUgraphEdgeData *dependencyData, size_t numDependencies,                       \
       CUstreamCaptureMode mode),                                                           \
      (hStream, hGraph, dependencies, dependencyData, numDependencies, mode))               \
    X(CUDA, CUresult, cuStreamBeginCaptureToGraph_ptsz,                                     \
      (CUstream hStream, CUgraph hGraph, const CUgraphNode *dependencies,                   \
       const CUgraphEdgeData *dependencyData, size_t numDependencies,                       \
       CUstreamCaptureMode mode),                                                           \
      (hStream, hGraph, dependencies, dependencyData, numDependencies, mode))               \
    X(CUDA, CUresult, cuStreamEndCapture, (CUstream hStream, CUgraph *phGraph),             \
      (hStream, phGraph))                                                                   \
    X(CUDA, CUresult, cuStreamEndCapture_ptsz, (CUstream hStream, CUgraph *phGraph),        \
      (hStream, phGraph))

/* Allocations through the driver (wrap_cuda.c): retried as the runtime's; the
 * stream-ordered ones drain first, as before. */
#define DH_HOOKS_CUDA_ALLOC(X)                                                              \
    X(CUDA, CUresult, cuMemAlloc_v2, (CUdeviceptr *dptr, size_t bytesize), (dptr, bytesize)) \
    X(CUDA, CUresult, cuMemAllocPitch_v2,                                                   \
      (CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,               \
       unsigned int ElementSizeBytes),                                                      \
      (dptr, pPitch, WidthInBytes, Height, ElementSizeBytes))                               \
    X(CUDA, CUresult, cuMemAllocManaged, (CUdeviceptr *dptr, size_t bytesize, unsigned int flags), \
      (dptr, bytesize, flags))                                                              \
    X(CUDA, CUresult, cuMemCreate,                                                          \
      (CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,  \
       unsigned long long flags),                                                           \
      (handle, size, prop, flags))                                                          \
    X(CUDA, CUresult, cuMemAllocAsync, (CUdeviceptr *dptr, size_t bytesize, CUstream hStream), \
      (dptr, bytesize, hStream))                                                            \
    X(CUDA, CUresult, cuMemAllocAsync_ptsz,                                                 \
      (CUdeviceptr *dptr, size_t bytesize, CUstream hStream), (dptr, bytesize, hStream))

#define DH_HOOKS_CUDA(X) DH_HOOKS_CUDA_CAPTURE(X) DH_HOOKS_CUDA_SYNC(X) \
    DH_HOOKS_CUDA_DESTROY(X) DH_HOOKS_CUDA_GRAPHCAP(X) DH_HOOKS_CUDA_ALLOC(X)

/* NCCL (nccl_wrap/): the whole API of nccl.h 2.28 but the deprecated ncclResetDebugInit,
 * which the header itself says is not part of the API, and the device API's
 * ncclDevCommCreate/Destroy (nccl_wrap/nccl_dev.h declares them for C). Every wrapper forwards to the
 * library's pncclX, its profiling-interface twin (ncclX where a library has no pncclX;
 * nccl_wrap/nccl_real.h), so a wrapper never re-enters another ncclX definition. By what
 * a wrapper does when the mode defers:
 *   CAPTURE  collectives and point-to-point: an operation record (nccl_wrap/nccl_op.h), or
 *            a member of the ncclGroupStart..End batch the thread is capturing; a call the
 *            shim cannot check (an unknown communicator, a bad argument) drains and is
 *            forwarded, so the library answers it at once;
 *   GROUP    a batch between the outermost ncclGroupStart and ncclGroupEnd becomes ONE op
 *            (nesting kept); nccl_wrap/group.c;
 *   COMM     communicator lifetime: created ones enter the registry (nccl_wrap/registry.h);
 *            split, shrink, finalize, revoke, destroy and abort drain first (queued work
 *            may use the communicator), abort also cancels the queued work of its
 *            communicator; ncclCommGetAsyncError adds the errors of deferred operations;
 *   SYNC     calls that change a communicator or memory queued work may use: drain, then
 *            forward;
 *   FORWARD  ids, versions, queries and allocation: forwarded at once;
 *   STRING   the two entry points that return text (forwarded at once). */
#define DH_HOOKS_NCCL_CAPTURE(X)                                                            \
    X(NCCL, ncclResult_t, ncclAllReduce,                                                    \
      (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,         \
       ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream),                               \
      (sendbuff, recvbuff, count, datatype, op, comm, stream))                              \
    X(NCCL, ncclResult_t, ncclAllGather,                                                    \
      (const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,     \
       ncclComm_t comm, cudaStream_t stream),                                               \
      (sendbuff, recvbuff, sendcount, datatype, comm, stream))                              \
    X(NCCL, ncclResult_t, ncclReduceScatter,                                                \
      (const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype,     \
       ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream),                               \
      (sendbuff, recvbuff, recvcount, datatype, op, comm, stream))                          \
    X(NCCL, ncclResult_t, ncclBroadcast,                                                    \
      (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,         \
       int root, ncclComm_t comm, cudaStream_t stream),                                     \
      (sendbuff, recvbuff, count, datatype, root, comm, stream))                            \
    X(NCCL, ncclResult_t, ncclBcast,                                                        \
      (void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,        \
       cudaStream_t stream),                                                                \
      (buff, count, datatype, root, comm, stream))                                          \
    X(NCCL, ncclResult_t, ncclReduce,                                                       \
      (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,         \
       ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream),                     \
      (sendbuff, recvbuff, count, datatype, op, root, comm, stream))                        \
    X(NCCL, ncclResult_t, ncclAlltoAll,                                                     \
      (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,         \
       ncclComm_t comm, cudaStream_t stream),                                               \
      (sendbuff, recvbuff, count, datatype, comm, stream))                                  \
    X(NCCL, ncclResult_t, ncclGather,                                                       \
      (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,         \
       int root, ncclComm_t comm, cudaStream_t stream),                                     \
      (sendbuff, recvbuff, count, datatype, root, comm, stream))                            \
    X(NCCL, ncclResult_t, ncclScatter,                                                      \
      (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,         \
       int root, ncclComm_t comm, cudaStream_t stream),                                     \
      (sendbuff, recvbuff, count, datatype, root, comm, stream))                            \
    X(NCCL, ncclResult_t, ncclSend,                                                         \
      (const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,               \
       ncclComm_t comm, cudaStream_t stream),                                               \
      (sendbuff, count, datatype, peer, comm, stream))                                      \
    X(NCCL, ncclResult_t, ncclRecv,                                                         \
      (void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,    \
       cudaStream_t stream),                                                                \
      (recvbuff, count, datatype, peer, comm, stream))

#define DH_HOOKS_NCCL_GROUP(X)                                                              \
    X(NCCL, ncclResult_t, ncclGroupStart, (void), ())                                       \
    X(NCCL, ncclResult_t, ncclGroupEnd, (void), ())                                         \
    X(NCCL, ncclResult_t, ncclGroupSimulateEnd, (ncclSimInfo_t *simInfo), (simInfo))

#define DH_HOOKS_NCCL_COMM(X)                                                               \
    X(NCCL, ncclResult_t, ncclCommInitRank,                                                 \
      (ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank),                        \
      (comm, nranks, commId, rank))                                                         \
    X(NCCL, ncclResult_t, ncclCommInitRankConfig,                                           \
      (ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t *config),  \
      (comm, nranks, commId, rank, config))                                                 \
    X(NCCL, ncclResult_t, ncclCommInitRankScalable,                                         \
      (ncclComm_t *newcomm, int nranks, int myrank, int nId, ncclUniqueId *commIds,         \
       ncclConfig_t *config),                                                               \
      (newcomm, nranks, myrank, nId, commIds, config))                                      \
    X(NCCL, ncclResult_t, ncclCommInitAll, (ncclComm_t *comm, int ndev, const int *devlist), \
      (comm, ndev, devlist))                                                                \
    X(NCCL, ncclResult_t, ncclCommSplit,                                                    \
      (ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config),     \
      (comm, color, key, newcomm, config))                                                  \
    X(NCCL, ncclResult_t, ncclCommShrink,                                                   \
      (ncclComm_t comm, int *excludeRanksList, int excludeRanksCount, ncclComm_t *newcomm,  \
       ncclConfig_t *config, int shrinkFlags),                                              \
      (comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags))            \
    X(NCCL, ncclResult_t, ncclCommFinalize, (ncclComm_t comm), (comm))                      \
    X(NCCL, ncclResult_t, ncclCommRevoke, (ncclComm_t comm, int revokeFlags),               \
      (comm, revokeFlags))                                                                  \
    X(NCCL, ncclResult_t, ncclCommDestroy, (ncclComm_t comm), (comm))                       \
    X(NCCL, ncclResult_t, ncclCommAbort, (ncclComm_t comm), (comm))                         \
    X(NCCL, ncclResult_t, ncclCommGetAsyncError,                                            \
      (ncclComm_t comm, ncclResult_t *asyncError), (comm, asyncError))

#define DH_HOOKS_NCCL_SYNC(X)                                                               \
    X(NCCL, ncclResult_t, ncclRedOpCreatePreMulSum,                                         \
      (ncclRedOp_t *op, void *scalar, ncclDataType_t datatype,                              \
       ncclScalarResidence_t residence, ncclComm_t comm),                                   \
      (op, scalar, datatype, residence, comm))                                              \
    X(NCCL, ncclResult_t, ncclRedOpDestroy, (ncclRedOp_t op, ncclComm_t comm), (op, comm))  \
    X(NCCL, ncclResult_t, ncclCommRegister,                                                 \
      (const ncclComm_t comm, void *buff, size_t size, void **handle),                      \
      (comm, buff, size, handle))                                                           \
    X(NCCL, ncclResult_t, ncclCommDeregister, (const ncclComm_t comm, void *handle),        \
      (comm, handle))                                                                       \
    X(NCCL, ncclResult_t, ncclCommWindowRegister,                                           \
      (ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win, int winFlags),          \
      (comm, buff, size, win, winFlags))                                                    \
    X(NCCL, ncclResult_t, ncclCommWindowDeregister, (ncclComm_t comm, ncclWindow_t win),    \
      (comm, win))                                                                          \
    X(NCCL, ncclResult_t, ncclMemFree, (void *ptr), (ptr))                                  \
    X(NCCL, ncclResult_t, ncclDevCommCreate,                                                \
      (ncclComm_t comm, const struct ncclDevCommRequirements *reqs,                         \
       struct ncclDevComm *outDevComm),                                                     \
      (comm, reqs, outDevComm))                                                             \
    X(NCCL, ncclResult_t, ncclDevCommDestroy,                                               \
      (ncclComm_t comm, const struct ncclDevComm *devComm), (comm, devComm))

#define DH_HOOKS_NCCL_FORWARD(X)                                                            \
    X(NCCL, ncclResult_t, ncclGetVersion, (int *version), (version))                        \
    X(NCCL, ncclResult_t, ncclGetUniqueId, (ncclUniqueId *uniqueId), (uniqueId))            \
    X(NCCL, ncclResult_t, ncclCommCount, (const ncclComm_t comm, int *count), (comm, count)) \
    X(NCCL, ncclResult_t, ncclCommCuDevice, (const ncclComm_t comm, int *device),           \
      (comm, device))                                                                       \
    X(NCCL, ncclResult_t, ncclCommUserRank, (const ncclComm_t comm, int *rank),             \
      (comm, rank))                                                                         \
    X(NCCL, ncclResult_t, ncclMemAlloc, (void **ptr, size_t size), (ptr, size))

#define DH_HOOKS_NCCL_STRING(X)                                                             \
    X(NCCL, const char *, ncclGetErrorString, (ncclResult_t result), (result))              \
    X(NCCL, const char *, ncclGetLastError, (ncclComm_t comm), (comm))

/* The entry points that return ncclResult_t, and all of them. */
#define DH_HOOKS_NCCL_RESULT(X) DH_HOOKS_NCCL_CAPTURE(X) DH_HOOKS_NCCL_GROUP(X) \
    DH_HOOKS_NCCL_COMM(X) DH_HOOKS_NCCL_SYNC(X) DH_HOOKS_NCCL_FORWARD(X)
#define DH_HOOKS_NCCL(X) DH_HOOKS_NCCL_RESULT(X) DH_HOOKS_NCCL_STRING(X)

/* The entry points wrapped by hand, above: the shim.preload test calls each once. */
#define DH_HOOKS_HAND(X) DH_HOOKS_CUDART(X) DH_HOOKS_CUBLAS(X) DH_HOOKS_CUBLASLT(X) \
    DH_HOOKS_CUDA(X) DH_HOOKS_NCCL(X)

/* Everything else of the toolkit's headers that is not on the host-only list
 * (preload/entries/host_only.txt): drain-and-forward wrappers generated by
 * scripts/gen-entries into entry_list.h (wrap_gen.c, wrap_gen_legacy.c). The legacy cuBLAS
 * API comes last: its names are macros of cublas_v2.h, so its wrappers and their addresses
 * live in a translation unit of their own (DH_HOOK_LEGACY_FIRST in hooks.h). */
#define DH_HOOKS_GEN(X) DH_HOOKS_GEN_CUDART(X) DH_HOOKS_GEN_CUDA(X) DH_HOOKS_GEN_CUBLAS(X) \
    DH_HOOKS_GEN_CUBLASLT(X)
#define DH_HOOKS_GEN_LEGACY(X) DH_HOOKS_GEN_CUBLAS_LEGACY(X) \
    DH_HOOKS_GEN_CUBLAS_LEGACY_VOID(X) DH_HOOKS_GEN_CUBLAS_LEGACY_VALUE(X)

/* The driver's old ABI (the names libcuda exports for programs built against an older
 * toolkit and that cuGetProcAddress hands out for an older version; cuda.h declares them
 * under __CUDA_API_VERSION_INTERNAL): in a translation unit of their own
 * (wrap_gen_oldabi.c), because everywhere else cuda.h maps these names onto the current
 * ones. The four below are written by hand there, like their current forms; the rest
 * (DH_HOOKS_GEN_CUDA_OLDABI) drain and forward. */
#define DH_HOOKS_CUDA_OLDABI(X)                                                             \
    X(CUDA, CUresult, cuStreamBeginCapture, (CUstream hStream), (hStream))                  \
    X(CUDA, CUresult, cuStreamBeginCapture_ptsz, (CUstream hStream), (hStream))             \
    X(CUDA, CUresult, cuStreamDestroy, (CUstream hStream), (hStream))                       \
    X(CUDA, CUresult, cuEventDestroy, (CUevent hEvent), (hEvent))
#define DH_HOOKS_OLDABI(X) DH_HOOKS_CUDA_OLDABI(X) DH_HOOKS_GEN_CUDA_OLDABI(X)

#define DH_HOOKS_ALL(X) DH_HOOKS_HAND(X) DH_HOOKS_GEN(X) DH_HOOKS_GEN_LEGACY(X) DH_HOOKS_OLDABI(X)

#endif
