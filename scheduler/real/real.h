/*
 * scheduler/real/: the lowest layer of the runtime. It owns the table of the real entry
 * points (the next definitions after the shim: the vgpu or the CUDA, cuBLAS and NCCL
 * libraries) that every replay and every call of the scheduler's own goes through. It may
 * call the C library and the dynamic linker only; every other folder may call it.
 *
 * real.h: the real entry points the scheduler and the replays call.
 *
 * The shim's wrappers must never be re-entered by its own work: a replayed kernel launch
 * that reached the shim's cudaLaunchKernel would be captured again. Every call the
 * scheduler and dh_op_replay() make therefore goes through this table, whose entries are
 * the next definitions after the object that holds this code (dlsym(RTLD_NEXT)): inside
 * libdhelix_shim.so that is the vgpu or the real CUDA libraries; inside a test program
 * linked with dh_sched it is the same libraries, found after the program.
 *
 * The lookup uses the C library's own dlsym (fetched with dlvsym), so a dlsym interposed
 * by the shim cannot hand the table one of the shim's wrappers.
 *
 * Resolution: every entry is looked up on the first dh_real() call (pthread_once). An
 * entry whose library was not loaded yet (cuBLAS is often dlopened after the first
 * kernel launch) stays NULL until dh_real_refresh() finds it; the refresh retries NULL
 * entries only when the process has loaded new objects since its last attempt, so
 * asking for an entry that truly does not exist costs one dl_iterate_phdr walk, not a
 * dlsym per name. A NULL entry is the caller's to handle (usually: fail the capture or
 * the replay with the API's "not initialised" status).
 *
 * Names: the members are the EXPORTED symbols (cublasSetStream_v2, not the header's
 * cublasSetStream macro; cuLaunchKernel, never its _ptsz variant).
 *
 * Thread-safety: all functions are thread-safe; entries are atomics, written at most once
 * each (NULL -> function), so a reader sees NULL or the final value.
 */
#ifndef DH_REAL_H
#define DH_REAL_H

#include <stddef.h>
#include <stdint.h>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_runtime_api.h>

/* X(lib, ret, name, params): lib is one of DH_REAL_LIBS. */
#define DH_REAL_CUDART(X)                                                                   \
    X(CUDART, cudaError_t, cudaLaunchKernel,                                                \
      (const void *func, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,        \
       cudaStream_t stream))                                                                \
    X(CUDART, cudaError_t, cudaLaunchKernelExC,                                             \
      (const cudaLaunchConfig_t *config, const void *func, void **args))                    \
    X(CUDART, cudaError_t, __cudaLaunchKernel,                                              \
      (cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,     \
       cudaStream_t stream))                                                                \
    X(CUDART, cudaError_t, cudaFuncGetParamInfo,                                            \
      (const void *func, size_t paramIndex, size_t *paramOffset, size_t *paramSize))        \
    X(CUDART, cudaError_t, cudaFuncGetName, (const char **name, const void *func))          \
    X(CUDART, cudaError_t, cudaMemcpyAsync,                                                 \
      (void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,                  \
       cudaStream_t stream))                                                                \
    X(CUDART, cudaError_t, cudaMemsetAsync,                                                 \
      (void *devPtr, int value, size_t count, cudaStream_t stream))                         \
    X(CUDART, cudaError_t, cudaLaunchHostFunc,                                              \
      (cudaStream_t stream, cudaHostFn_t fn, void *userData))                               \
    X(CUDART, cudaError_t, cudaMallocAsync,                                                 \
      (void **devPtr, size_t size, cudaStream_t hStream))                                   \
    X(CUDART, cudaError_t, cudaFreeAsync, (void *devPtr, cudaStream_t hStream))             \
    X(CUDART, cudaError_t, cudaMalloc, (void **devPtr, size_t size))                        \
    X(CUDART, cudaError_t, cudaFree, (void *devPtr))                                        \
    X(CUDART, cudaError_t, cudaPointerGetAttributes,                                        \
      (struct cudaPointerAttributes *attributes, const void *ptr))                          \
    X(CUDART, cudaError_t, cudaEventCreateWithFlags, (cudaEvent_t *event, unsigned int flags)) \
    X(CUDART, cudaError_t, cudaEventDestroy, (cudaEvent_t event))                           \
    X(CUDART, cudaError_t, cudaEventRecord, (cudaEvent_t event, cudaStream_t stream))       \
    X(CUDART, cudaError_t, cudaEventRecordWithFlags,                                        \
      (cudaEvent_t event, cudaStream_t stream, unsigned int flags))                         \
    X(CUDART, cudaError_t, cudaEventQuery, (cudaEvent_t event))                             \
    X(CUDART, cudaError_t, cudaEventSynchronize, (cudaEvent_t event))                       \
    X(CUDART, cudaError_t, cudaEventElapsedTime, (float *ms, cudaEvent_t start, cudaEvent_t end)) \
    X(CUDART, cudaError_t, cudaStreamWaitEvent,                                             \
      (cudaStream_t stream, cudaEvent_t event, unsigned int flags))                         \
    X(CUDART, cudaError_t, cudaStreamCreateWithFlags, (cudaStream_t *pStream, unsigned int flags)) \
    X(CUDART, cudaError_t, cudaStreamCreateWithPriority,                                    \
      (cudaStream_t *pStream, unsigned int flags, int priority))                            \
    X(CUDART, cudaError_t, cudaStreamGetFlags, (cudaStream_t hStream, unsigned int *flags)) \
    X(CUDART, cudaError_t, cudaStreamGetPriority, (cudaStream_t hStream, int *priority))    \
    X(CUDART, cudaError_t, cudaStreamDestroy, (cudaStream_t stream))                        \
    X(CUDART, cudaError_t, cudaStreamQuery, (cudaStream_t stream))                          \
    X(CUDART, cudaError_t, cudaStreamSynchronize, (cudaStream_t stream))                    \
    X(CUDART, cudaError_t, cudaDeviceSynchronize, (void))                                   \
    X(CUDART, cudaError_t, cudaGetDevice, (int *device))                                    \
    X(CUDART, cudaError_t, cudaDeviceGetMemPool, (cudaMemPool_t *memPool, int device))       \
    X(CUDART, cudaError_t, cudaMemPoolSetAttribute,                                         \
      (cudaMemPool_t memPool, enum cudaMemPoolAttr attr, void *value))                      \
    X(CUDART, cudaError_t, cudaMemPoolTrimTo, (cudaMemPool_t memPool, size_t minBytesToKeep)) \
    X(CUDART, cudaError_t, cudaMemPoolGetAttribute,                                         \
      (cudaMemPool_t memPool, enum cudaMemPoolAttr attr, void *value))                      \
    X(CUDART, cudaError_t, cudaMemGetInfo, (size_t *free, size_t *total))                   \
    X(CUDART, cudaError_t, cudaStreamGetDevice, (cudaStream_t hStream, int *device))         \
    X(CUDART, cudaError_t, cudaSetDevice, (int device))                                     \
    X(CUDART, cudaError_t, cudaGetLastError, (void))                                        \
    X(CUDART, cudaError_t, cudaPeekAtLastError, (void))                                     \
    X(CUDART, const char *, cudaGetErrorName, (cudaError_t error))                          \
    X(CUDART, cudaError_t, cudaGraphLaunch, (cudaGraphExec_t graphExec, cudaStream_t stream))

#define DH_REAL_DRIVER(X)                                                                   \
    X(DRIVER, CUresult, cuEventDestroy_v2, (CUevent hEvent))                                \
    X(DRIVER, CUresult, cuGraphLaunch, (CUgraphExec hGraphExec, CUstream hStream))          \
    X(DRIVER, CUresult, cuLaunchKernel,                                                     \
      (CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,   \
       unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,              \
       unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra))   \
    X(DRIVER, CUresult, cuLaunchKernelEx,                                                   \
      (const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra))      \
    X(DRIVER, CUresult, cuFuncGetParamInfo,                                                 \
      (CUfunction func, size_t paramIndex, size_t *paramOffset, size_t *paramSize))         \
    X(DRIVER, CUresult, cuKernelGetParamInfo,                                               \
      (CUkernel kernel, size_t paramIndex, size_t *paramOffset, size_t *paramSize))         \
    X(DRIVER, CUresult, cuFuncGetName, (const char **name, CUfunction hfunc))

#define DH_REAL_CUBLAS(X)                                                                   \
    X(CUBLAS, cublasStatus_t, cublasCreate_v2, (cublasHandle_t *handle))                    \
    X(CUBLAS, cublasStatus_t, cublasDestroy_v2, (cublasHandle_t handle))                    \
    X(CUBLAS, cublasStatus_t, cublasSetStream_v2, (cublasHandle_t handle, cudaStream_t streamId)) \
    X(CUBLAS, cublasStatus_t, cublasSetWorkspace_v2,                                        \
      (cublasHandle_t handle, void *workspace, size_t workspaceSizeInBytes))                \
    X(CUBLAS, cublasStatus_t, cublasSetMathMode, (cublasHandle_t handle, cublasMath_t mode)) \
    X(CUBLAS, cublasStatus_t, cublasSetPointerMode_v2,                                      \
      (cublasHandle_t handle, cublasPointerMode_t mode))                                    \
    X(CUBLAS, cublasStatus_t, cublasSetEmulationStrategy,                                   \
      (cublasHandle_t handle, cublasEmulationStrategy_t emulationStrategy))                 \
    X(CUBLAS, cublasStatus_t, cublasSetAtomicsMode,                                         \
      (cublasHandle_t handle, cublasAtomicsMode_t mode))                                    \
    X(CUBLAS, cublasStatus_t, cublasGemmEx,                                                 \
      (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,    \
       int n, int k, const void *alpha, const void *A, cudaDataType Atype, int lda,         \
       const void *B, cudaDataType Btype, int ldb, const void *beta, void *C,               \
       cudaDataType Ctype, int ldc, cublasComputeType_t computeType, cublasGemmAlgo_t algo)) \
    X(CUBLAS, cublasStatus_t, cublasSgemm_v2,                                               \
      (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,    \
       int n, int k, const float *alpha, const float *A, int lda, const float *B, int ldb,  \
       const float *beta, float *C, int ldc))                                               \
    X(CUBLAS, cublasStatus_t, cublasSgemmStridedBatched,                                    \
      (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,    \
       int n, int k, const float *alpha, const float *A, int lda, long long int strideA,    \
       const float *B, int ldb, long long int strideB, const float *beta, float *C,         \
       int ldc, long long int strideC, int batchCount))                                     \
    X(CUBLAS, cublasStatus_t, cublasGemmStridedBatchedEx,                                   \
      (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,    \
       int n, int k, const void *alpha, const void *A, cudaDataType Atype, int lda,         \
       long long int strideA, const void *B, cudaDataType Btype, int ldb,                   \
       long long int strideB, const void *beta, void *C, cudaDataType Ctype, int ldc,       \
       long long int strideC, int batchCount, cublasComputeType_t computeType,              \
       cublasGemmAlgo_t algo))

#define DH_REAL_CUBLASLT(X)                                                                 \
    X(CUBLASLT, cublasStatus_t, cublasLtCreate, (cublasLtHandle_t *lightHandle))            \
    X(CUBLASLT, cublasStatus_t, cublasLtDestroy, (cublasLtHandle_t lightHandle))            \
    X(CUBLASLT, cublasStatus_t, cublasLtMatmul,                                             \
      (cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc, const void *alpha,   \
       const void *A, cublasLtMatrixLayout_t Adesc, const void *B,                          \
       cublasLtMatrixLayout_t Bdesc, const void *beta, const void *C,                       \
       cublasLtMatrixLayout_t Cdesc, void *D, cublasLtMatrixLayout_t Ddesc,                 \
       const cublasLtMatmulAlgo_t *algo, void *workspace, size_t workspaceSizeInBytes,      \
       cudaStream_t stream))                                                                \
    X(CUBLASLT, cublasStatus_t, cublasLtMatmulDescCreate,                                   \
      (cublasLtMatmulDesc_t *matmulDesc, cublasComputeType_t computeType,                   \
       cudaDataType_t scaleType))                                                           \
    X(CUBLASLT, cublasStatus_t, cublasLtMatmulDescDestroy, (cublasLtMatmulDesc_t matmulDesc)) \
    X(CUBLASLT, cublasStatus_t, cublasLtMatmulDescSetAttribute,                             \
      (cublasLtMatmulDesc_t matmulDesc, cublasLtMatmulDescAttributes_t attr,                \
       const void *buf, size_t sizeInBytes))                                                \
    X(CUBLASLT, cublasStatus_t, cublasLtMatmulDescGetAttribute,                             \
      (cublasLtMatmulDesc_t matmulDesc, cublasLtMatmulDescAttributes_t attr, void *buf,     \
       size_t sizeInBytes, size_t *sizeWritten))                                            \
    X(CUBLASLT, cublasStatus_t, cublasLtMatrixLayoutCreate,                                 \
      (cublasLtMatrixLayout_t *matLayout, cudaDataType type, uint64_t rows, uint64_t cols,  \
       int64_t ld))                                                                         \
    X(CUBLASLT, cublasStatus_t, cublasLtMatrixLayoutDestroy, (cublasLtMatrixLayout_t matLayout)) \
    X(CUBLASLT, cublasStatus_t, cublasLtMatrixLayoutSetAttribute,                           \
      (cublasLtMatrixLayout_t matLayout, cublasLtMatrixLayoutAttribute_t attr,              \
       const void *buf, size_t sizeInBytes))                                                \
    X(CUBLASLT, cublasStatus_t, cublasLtMatrixLayoutGetAttribute,                           \
      (cublasLtMatrixLayout_t matLayout, cublasLtMatrixLayoutAttribute_t attr, void *buf,   \
       size_t sizeInBytes, size_t *sizeWritten))

#define DH_REAL_ALL(X) DH_REAL_CUDART(X) DH_REAL_DRIVER(X) DH_REAL_CUBLAS(X) DH_REAL_CUBLASLT(X)

/* The libraries, for dh_real_lib_found(). */
#define DH_REAL_LIBS(X) X(CUDART, "cudart") X(DRIVER, "cuda") X(CUBLAS, "cublas") \
    X(CUBLASLT, "cublasLt")

typedef enum dh_real_lib {
#define DH__REAL_LIB_ENUM(lib, name) DH_REAL_LIB_##lib,
    DH_REAL_LIBS(DH__REAL_LIB_ENUM)
#undef DH__REAL_LIB_ENUM
    DH_REAL_LIB_COUNT
} dh_real_lib_t;

/* dh_real_<name>_t: the plain function pointer type of each entry point, for locals. */
#define DH__REAL_TYPEDEF(lib, ret, name, params) typedef ret (*dh_real_##name##_t) params;
DH_REAL_ALL(DH__REAL_TYPEDEF)
#undef DH__REAL_TYPEDEF

/* One typed, atomic function pointer per entry point, named like the API. Reading a member
 * is an atomic load (a plain load on x86-64). */
typedef struct dh_real {
#define DH__REAL_MEMBER(lib, ret, name, params) dh_real_##name##_t _Atomic name;
    DH_REAL_ALL(DH__REAL_MEMBER)
#undef DH__REAL_MEMBER
} dh_real_t;

/* The table, resolved on the first call. Never NULL; entries may be NULL (see above).
 * Cost after the first call: one acquire load. */
const dh_real_t *dh_real(void);

/* Retries the NULL entries when objects were loaded since the last attempt, then returns
 * the table. Cost when nothing new was loaded: one dl_iterate_phdr walk. */
const dh_real_t *dh_real_refresh(void);

/* The entry `name` of table r, refreshing the table once when it is NULL; may still be
 * NULL. */
#define DH_REAL_FN(r, name) ((r)->name != NULL ? (r)->name : dh_real_refresh()->name)

/* The definition of name in a loaded object named like soname ("libcublas.so.13" and
 * "libcublas.so" both mean any loaded libcublas.so*), asked through a handle of that
 * object: it finds libraries loaded outside the global scope (RTLD_LOCAL), which
 * dlsym(RTLD_NEXT) does not search. NULL when none is loaded or none defines it. Costs a
 * dl_iterate_phdr walk and a dlopen(RTLD_NOLOAD) per match: for resolution, not per call.
 * dh_real_next: dlsym(RTLD_NEXT, name) from the shim, else dh_real_lookup_loaded. */
void *dh_real_lookup_loaded(const char *soname, const char *name);
void *dh_real_next(const char *soname, const char *name);

/* Number of entries of lib found so far (0: the library is not loaded, or not reachable
 * from the shim). For diagnostics. */
int dh_real_lib_found(dh_real_lib_t lib);

#endif
