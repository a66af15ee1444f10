/*
 * child.c: the "unmodified program" the shim tests run with libdhelix_shim.so preloaded.
 * It is linked against the real CUDA libraries (so its references are versioned, as a
 * PyTorch process's are) and makes a known sequence of calls; the test drivers
 * (test_preload.c, test_passthrough.c) count them in the shim's DHELIX_STATS report.
 *
 *   child calls          each wrapped entry point exactly once, results ignored (works
 *                        with no device at all: the real libraries return errors); the
 *                        driver and NCCL entry points through dlsym(RTLD_DEFAULT), so
 *                        shim_child_nodrv (linked with a stand-in for libcuda and libnccl,
 *                        see fakedrv.c) makes the same calls; exit 1 if one is not found
 *   child env            prints PYTORCH_CUDA_ALLOC_CONF as the shim left it
 *   child roundtrip T    T threads: H2D, D2D through a stream-ordered allocation, memset,
 *                        events, D2H; checks the data; destroys its events and streams;
 *                        then cudaDeviceSynchronize (vgpu)
 *   child gemm           cublasSgemm_v2 and cublasGemmEx on 2x3 * 3x2, checked, then
 *                        cublasDestroy (vgpu)
 *   child lt             cublasLtMatmul on the same, checked (vgpu)
 *   child kernel         a registered vgpu kernel through cudaLaunchKernel and
 *                        cudaLaunchKernelExC, checked (vgpu)
 * Exit status 0 on success; otherwise a message on stderr.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

/* The legacy 4-argument cuGetProcAddress (the header maps the name to cuGetProcAddress_v2)
 * and the _ptsz variants the header declares only under per-thread compilation. */
#undef cuGetProcAddress
CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);
#include "nccl_dev.h"
#include "ptsz.h"
/* cudaGetDriverEntryPoint is deprecated in CUDA 13, and still called. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
/* nccl.h declares these without a prototype. */
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);

#include "vgpu.h"

#define CK(call)                                                                        \
    do {                                                                                \
        int ck_ = (int)(call);                                                          \
        if (ck_ != 0) {                                                                 \
            fprintf(stderr, "child: %s:%d: %s returned %d\n", __FILE__, __LINE__, #call, ck_); \
            return 1;                                                                   \
        }                                                                               \
    } while (0)

/* ---- calls: every wrapped entry point once ---- */

/* The driver and NCCL are reached as PyTorch and Triton reach them: by name at run time,
 * through dlsym (which the shim interposes), so the same code runs whether or not the
 * program was linked against libcuda and libnccl. A name that cannot be found is an
 * error of the run. */
static int g_missing;

static void *by_name(const char *name)
{
    void *p = dlsym(RTLD_DEFAULT, name);
    if (p == NULL) {
        fprintf(stderr, "child: calls: dlsym(RTLD_DEFAULT, \"%s\") found nothing\n", name);
        g_missing = 1;
    }
    return p;
}

/* Calls name through the address dlsym gives for it, if any. */
#define CALL_BY_NAME(name, ...)                                                          \
    do {                                                                                 \
        __typeof__(&name) fn_ = (__typeof__(&name))by_name(#name);                       \
        if (fn_ != NULL)                                                                 \
            (void)fn_(__VA_ARGS__);                                                      \
    } while (0)

static void noop_host_fn(void *arg) { (void)arg; }

static void calls_runtime(void)
{
    void *p = NULL;
    cudaStream_t s = 0, mine = NULL;
    cudaEvent_t e = NULL;
    cudaGraph_t graph = NULL;
    float ms = 0;
    dim3 one = {1, 1, 1};
    cudaLaunchConfig_t cfg = {0};
    cfg.gridDim = one;
    cfg.blockDim = one;
    /* Not wrapped: a stream and an event to destroy (both stay NULL without a device). */
    (void)cudaStreamCreate(&mine);
    (void)cudaEventCreate(&e);
    /* CAPTURE */
    (void)cudaLaunchKernel((const void *)calls_runtime, one, one, NULL, 0, s);
    (void)cudaLaunchKernelExC(&cfg, (const void *)calls_runtime, NULL);
    (void)__cudaLaunchKernel((cudaKernel_t)(void *)calls_runtime, one, one, NULL, 0, s);
    (void)cudaMemcpyAsync(NULL, NULL, 0, cudaMemcpyHostToHost, s);
    (void)cudaMemsetAsync(NULL, 0, 0, s);
    (void)cudaLaunchHostFunc(s, noop_host_fn, NULL);
    (void)cudaEventRecord(e, s);
    (void)cudaEventRecordWithFlags(e, s, 0);
    (void)cudaStreamWaitEvent(s, e, 0);
    (void)cudaMallocAsync(&p, 16, s);
    (void)cudaFreeAsync(p, s);
    (void)cudaEventQuery(e);
    /* The legacy stream cannot be captured: both calls fail, with or without a device. */
    (void)cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    (void)cudaStreamEndCapture(s, &graph);
    /* SYNC */
    (void)cudaStreamSynchronize(s);
    (void)cudaDeviceSynchronize();
    (void)cudaEventSynchronize(e);
    (void)cudaEventElapsedTime(&ms, e, e);
    (void)cudaStreamQuery(s);
    (void)cudaMemcpy(NULL, NULL, 0, cudaMemcpyHostToHost);
    (void)cudaMemset(NULL, 0, 0);
    (void)cudaMemcpy2DAsync(NULL, 0, NULL, 0, 0, 0, cudaMemcpyHostToHost, s);
    /* FORWARD (cudaMalloc), then the frees and destructions */
    p = NULL;
    (void)cudaMalloc(&p, 16);
    (void)cudaPeekAtLastError();
    (void)cudaGetLastError();
    (void)cudaFree(p);
    (void)cudaFreeHost(NULL);
    /* SYNC: uncaptured work, and the per-thread-default-stream forms */
    (void)cudaMemcpy2D(NULL, 0, NULL, 0, 0, 0, cudaMemcpyHostToHost);
    (void)cudaMemcpyPeerAsync(NULL, 0, NULL, 0, 0, s);
    (void)cudaMallocFromPoolAsync(&p, 16, NULL, s);
    /* ALLOC: the other allocations (retried after a give-back) */
    size_t pitch = 0;
    struct cudaPitchedPtr pp;
    (void)cudaMallocPitch(&p, &pitch, 16, 1);
    (void)cudaMalloc3D(&pp, (struct cudaExtent){16, 1, 1});
    (void)cudaMallocManaged(&p, 16, cudaMemAttachGlobal);
    (void)cudaLaunchKernel_ptsz((const void *)calls_runtime, one, one, NULL, 0, s);
    (void)cudaLaunchKernelExC_ptsz(&cfg, (const void *)calls_runtime, NULL);
    (void)__cudaLaunchKernel_ptsz((cudaKernel_t)(void *)calls_runtime, one, one, NULL, 0, s);
    (void)cudaMemcpyAsync_ptsz(NULL, NULL, 0, cudaMemcpyHostToHost, s);
    (void)cudaMemsetAsync_ptsz(NULL, 0, 0, s);
    (void)cudaLaunchHostFunc_ptsz(s, noop_host_fn, NULL);
    (void)cudaEventRecord_ptsz(e, s);
    (void)cudaEventRecordWithFlags_ptsz(e, s, 0);
    (void)cudaStreamWaitEvent_ptsz(s, e, 0);
    (void)cudaMallocAsync_ptsz(&p, 16, s);
    (void)cudaFreeAsync_ptsz(NULL, s);
    (void)cudaStreamQuery_ptsz(s);
    (void)cudaStreamSynchronize_ptsz(s);
    (void)cudaEventDestroy(e);
    (void)cudaStreamDestroy(mine);
    void *entry = NULL;
    (void)cudaGetDriverEntryPoint("cuStreamQuery", &entry, cudaEnableDefault, NULL);
    (void)cudaGetDriverEntryPointByVersion("cuStreamQuery", &entry, 13000, cudaEnableDefault,
                                           NULL);
    /* The other doors into graph capture: all fail on the legacy stream. */
    (void)cudaStreamBeginCapture_ptsz(s, cudaStreamCaptureModeGlobal);
    (void)cudaStreamBeginCaptureToGraph(s, NULL, NULL, NULL, 0, cudaStreamCaptureModeGlobal);
    (void)cudaStreamBeginCaptureToGraph_ptsz(s, NULL, NULL, NULL, 0,
                                             cudaStreamCaptureModeGlobal);
    (void)cudaStreamEndCapture_ptsz(s, &graph);
    (void)cudaGetDriverEntryPoint_ptsz("cuStreamQuery", &entry, cudaEnableDefault, NULL);
    (void)cudaGetDriverEntryPointByVersion_ptsz("cuStreamQuery", &entry, 13000,
                                                cudaEnableDefault, NULL);
    (void)cudaGraphLaunch(NULL, s);
    (void)cudaDeviceReset();
}

/* A NULL handle: cuBLAS answers CUBLAS_STATUS_NOT_INITIALIZED and does nothing. */
/* DH_HOOKS_CUBLAS_SYNC: drained and forwarded; all fail at once on a NULL handle or
 * sizes of zero. */
static void calls_cublas_sync(void)
{
    float f = 0, hf[1] = {0};
    double d = 0;
    cudaStream_t s = 0;
    (void)cublasSetVector(0, 4, hf, 1, NULL, 1);
    (void)cublasGetVector(0, 4, NULL, 1, hf, 1);
    (void)cublasSetMatrix(0, 0, 4, hf, 1, NULL, 1);
    (void)cublasGetMatrix(0, 0, 4, NULL, 1, hf, 1);
    (void)cublasSetVectorAsync(0, 4, hf, 1, NULL, 1, s);
    (void)cublasGetVectorAsync(0, 4, NULL, 1, hf, 1, s);
    (void)cublasSetMatrixAsync(0, 0, 4, hf, 1, NULL, 1, s);
    (void)cublasGetMatrixAsync(0, 0, 4, NULL, 1, hf, 1, s);
    (void)cublasSetVector_64(0, 4, hf, 1, NULL, 1);
    (void)cublasGetVector_64(0, 4, NULL, 1, hf, 1);
    (void)cublasSetMatrix_64(0, 0, 4, hf, 1, NULL, 1);
    (void)cublasGetMatrix_64(0, 0, 4, NULL, 1, hf, 1);
    (void)cublasSetVectorAsync_64(0, 4, hf, 1, NULL, 1, s);
    (void)cublasGetVectorAsync_64(0, 4, NULL, 1, hf, 1, s);
    (void)cublasSetMatrixAsync_64(0, 0, 4, hf, 1, NULL, 1, s);
    (void)cublasGetMatrixAsync_64(0, 0, 4, NULL, 1, hf, 1, s);
    (void)cublasSgemm_v2_64(NULL, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &f, NULL, 1, NULL, 1, &f,
                            NULL, 1);
    (void)cublasDgemm_v2(NULL, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &d, NULL, 1, NULL, 1, &d,
                         NULL, 1);
    (void)cublasDgemm_v2_64(NULL, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &d, NULL, 1, NULL, 1, &d,
                            NULL, 1);
    (void)cublasSgemmEx(NULL, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &f, NULL, CUDA_R_32F, 1, NULL,
                        CUDA_R_32F, 1, &f, NULL, CUDA_R_32F, 1);
    (void)cublasSgemmBatched(NULL, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &f, NULL, 1, NULL, 1, &f,
                             NULL, 1, 1);
    (void)cublasSgemmBatched_64(NULL, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &f, NULL, 1, NULL, 1,
                                &f, NULL, 1, 1);
    (void)cublasDgemmBatched(NULL, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &d, NULL, 1, NULL, 1, &d,
                             NULL, 1, 1);
    (void)cublasDgemmBatched_64(NULL, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &d, NULL, 1, NULL, 1,
                                &d, NULL, 1, 1);
    (void)cublasGemmBatchedEx(NULL, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &f, NULL, CUDA_R_32F, 1,
                              NULL, CUDA_R_32F, 1, &f, NULL, CUDA_R_32F, 1, 1,
                              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    (void)cublasGemmBatchedEx_64(NULL, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &f, NULL, CUDA_R_32F,
                                 1, NULL, CUDA_R_32F, 1, &f, NULL, CUDA_R_32F, 1, 1,
                                 CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    (void)cublasSgemmStridedBatched_64(NULL, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &f, NULL, 1, 1,
                                       NULL, 1, 1, &f, NULL, 1, 1, 1);
    (void)cublasDgemmStridedBatched(NULL, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &d, NULL, 1, 1,
                                    NULL, 1, 1, &d, NULL, 1, 1, 1);
    (void)cublasDgemmStridedBatched_64(NULL, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &d, NULL, 1, 1,
                                       NULL, 1, 1, &d, NULL, 1, 1, 1);
    (void)cublasGemmEx_64(NULL, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &f, NULL, CUDA_R_32F, 1,
                          NULL, CUDA_R_32F, 1, &f, NULL, CUDA_R_32F, 1, CUBLAS_COMPUTE_32F,
                          CUBLAS_GEMM_DEFAULT);
    (void)cublasGemmStridedBatchedEx_64(NULL, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &f, NULL,
                                        CUDA_R_32F, 1, 1, NULL, CUDA_R_32F, 1, 1, &f, NULL,
                                        CUDA_R_32F, 1, 1, 1, CUBLAS_COMPUTE_32F,
                                        CUBLAS_GEMM_DEFAULT);
}

static void calls_cublas(void)
{
    float f = 0;
    cudaStream_t s = 0;
    (void)cublasGemmEx(NULL, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &f, NULL, CUDA_R_32F, 1, NULL,
                       CUDA_R_32F, 1, &f, NULL, CUDA_R_32F, 1, CUBLAS_COMPUTE_32F,
                       CUBLAS_GEMM_DEFAULT);
    (void)cublasSgemm_v2(NULL, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &f, NULL, 1, NULL, 1, &f,
                         NULL, 1);
    (void)cublasSetStream_v2(NULL, s);
    (void)cublasSetWorkspace_v2(NULL, NULL, 0);
    (void)cublasSetMathMode(NULL, CUBLAS_DEFAULT_MATH);
    (void)cublasSetPointerMode_v2(NULL, CUBLAS_POINTER_MODE_HOST);
    (void)cublasSetAtomicsMode(NULL, CUBLAS_ATOMICS_NOT_ALLOWED);
    (void)cublasSgemmStridedBatched(NULL, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &f, NULL, 1, 1,
                                    NULL, 1, 1, &f, NULL, 1, 1, 1);
    (void)cublasGemmStridedBatchedEx(NULL, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &f, NULL,
                                     CUDA_R_32F, 1, 1, NULL, CUDA_R_32F, 1, 1, &f, NULL,
                                     CUDA_R_32F, 1, 1, 1, CUBLAS_COMPUTE_32F,
                                     CUBLAS_GEMM_DEFAULT);
    (void)cublasSetEmulationStrategy(NULL, CUBLAS_EMULATION_STRATEGY_DEFAULT);
    calls_cublas_sync();
    (void)cublasDestroy_v2(NULL);
    (void)cublasLtMatmul(NULL, NULL, &f, NULL, NULL, NULL, NULL, &f, NULL, NULL, NULL, NULL,
                         NULL, NULL, 0, s);
}

/* The driver, uninitialised (cuInit is never called): every call fails at once. */
static void calls_driver(void)
{
    void *pfn = NULL;
    char h[1] = {0};
    CUdriverProcAddressQueryResult found;
    CUlaunchConfig cfg = {0};
    CALL_BY_NAME(cuLaunchKernel, NULL, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
    CALL_BY_NAME(cuLaunchKernel_ptsz, NULL, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
    CALL_BY_NAME(cuLaunchKernelEx, &cfg, NULL, NULL, NULL);
    CALL_BY_NAME(cuLaunchKernelEx_ptsz, &cfg, NULL, NULL, NULL);
    CALL_BY_NAME(cuGetProcAddress_v2, "cuStreamQuery", &pfn, 13000, CU_GET_PROC_ADDRESS_DEFAULT,
                 &found);
    CALL_BY_NAME(cuGetProcAddress, "cuStreamQuery", &pfn, 13000, CU_GET_PROC_ADDRESS_DEFAULT);
    CALL_BY_NAME(cuStreamSynchronize, NULL);
    CALL_BY_NAME(cuStreamSynchronize_ptsz, NULL);
    CALL_BY_NAME(cuStreamQuery, NULL);
    CALL_BY_NAME(cuCtxSynchronize);
    CALL_BY_NAME(cuEventSynchronize, NULL);
    CALL_BY_NAME(cuMemcpyHtoD_v2, 0, h, 0);
    CALL_BY_NAME(cuMemcpyDtoH_v2, h, 0, 0);
    CALL_BY_NAME(cuMemcpyAsync, 0, 0, 0, NULL);
    CALL_BY_NAME(cuMemcpyHtoDAsync_v2, 0, h, 0, NULL);
    CALL_BY_NAME(cuMemcpyDtoHAsync_v2, h, 0, 0, NULL);
    CALL_BY_NAME(cuMemsetD8Async, 0, 0, 0, NULL);
    CALL_BY_NAME(cuMemFree_v2, 0);
    CUdeviceptr dp = 0;
    float ms = 0;
    CALL_BY_NAME(cuLaunchHostFunc, NULL, NULL, NULL);
    CALL_BY_NAME(cuEventRecord, NULL, NULL);
    CALL_BY_NAME(cuEventRecord_ptsz, NULL, NULL);
    CALL_BY_NAME(cuEventRecordWithFlags, NULL, NULL, 0);
    CALL_BY_NAME(cuStreamWaitEvent, NULL, NULL, 0);
    CALL_BY_NAME(cuStreamWaitEvent_ptsz, NULL, NULL, 0);
    CALL_BY_NAME(cuMemAllocAsync, &dp, 16, NULL);
    size_t dpitch = 0;
    CUmemGenericAllocationHandle mh = 0;
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    CALL_BY_NAME(cuMemAlloc_v2, &dp, 16);
    CALL_BY_NAME(cuMemAllocPitch_v2, &dp, &dpitch, 16, 1, 4);
    CALL_BY_NAME(cuMemAllocManaged, &dp, 16, CU_MEM_ATTACH_GLOBAL);
    CALL_BY_NAME(cuMemCreate, &mh, 16, &prop, 0);
    CALL_BY_NAME(cuMemAllocAsync_ptsz, &dp, 16, NULL);
    CALL_BY_NAME(cuMemFreeAsync, 0, NULL);
    CALL_BY_NAME(cuMemFreeAsync_ptsz, 0, NULL);
    CALL_BY_NAME(cuMemcpyDtoD_v2, 0, 0, 0);
    CALL_BY_NAME(cuMemcpyDtoDAsync_v2, 0, 0, 0, NULL);
    CALL_BY_NAME(cuMemcpyAsync_ptsz, 0, 0, 0, NULL);
    CALL_BY_NAME(cuMemcpyHtoDAsync_v2_ptsz, 0, h, 0, NULL);
    CALL_BY_NAME(cuMemsetD8_v2, 0, 0, 0);
    CALL_BY_NAME(cuMemsetD8Async_ptsz, 0, 0, 0, NULL);
    CALL_BY_NAME(cuStreamQuery_ptsz, NULL);
    CALL_BY_NAME(cuEventQuery, NULL);
    CALL_BY_NAME(cuEventElapsedTime_v2, &ms, NULL, NULL);
    CALL_BY_NAME(cuMemFreeHost, NULL);
    CALL_BY_NAME(cuDevicePrimaryCtxReset_v2, 0);
    CALL_BY_NAME(cuDevicePrimaryCtxRelease_v2, 0);
    CALL_BY_NAME(cuStreamDestroy_v2, NULL);
    CALL_BY_NAME(cuEventDestroy_v2, NULL);
    CUgraph graph = NULL;
    CALL_BY_NAME(cuStreamBeginCapture_v2, NULL, CU_STREAM_CAPTURE_MODE_GLOBAL);
    CALL_BY_NAME(cuStreamBeginCapture_v2_ptsz, NULL, CU_STREAM_CAPTURE_MODE_GLOBAL);
    CALL_BY_NAME(cuStreamBeginCaptureToGraph, NULL, NULL, NULL, NULL, 0,
                 CU_STREAM_CAPTURE_MODE_GLOBAL);
    CALL_BY_NAME(cuStreamBeginCaptureToGraph_ptsz, NULL, NULL, NULL, NULL, 0,
                 CU_STREAM_CAPTURE_MODE_GLOBAL);
    CALL_BY_NAME(cuStreamEndCapture, NULL, &graph);
    CALL_BY_NAME(cuStreamEndCapture_ptsz, NULL, &graph);
    CALL_BY_NAME(cuGraphLaunch, NULL, NULL);
}

/* A NULL communicator: NCCL answers ncclInvalidArgument and does nothing. Every entry point
 * of nccl.h the shim wraps, once; the group is opened and closed in that order. */
static void calls_nccl(void)
{
    float f = 0;
    int i = 0;
    cudaStream_t s = 0;
    void *p = NULL;
    ncclComm_t c = NULL;
    ncclUniqueId id;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
    ncclRedOp_t op = ncclSum;
    ncclResult_t err = ncclSuccess;
    ncclWindow_t win = NULL;
    memset(&id, 0, sizeof(id));
    /* CAPTURE */
    CALL_BY_NAME(ncclAllReduce, &f, &f, 0, ncclFloat, ncclSum, NULL, s);
    CALL_BY_NAME(ncclAllGather, &f, &f, 0, ncclFloat, NULL, s);
    CALL_BY_NAME(ncclReduceScatter, &f, &f, 0, ncclFloat, ncclSum, NULL, s);
    CALL_BY_NAME(ncclBroadcast, &f, &f, 0, ncclFloat, 0, NULL, s);
    CALL_BY_NAME(ncclBcast, &f, 0, ncclFloat, 0, NULL, s);
    CALL_BY_NAME(ncclReduce, &f, &f, 0, ncclFloat, ncclSum, 0, NULL, s);
    CALL_BY_NAME(ncclAlltoAll, &f, &f, 0, ncclFloat, NULL, s);
    CALL_BY_NAME(ncclGather, &f, &f, 0, ncclFloat, 0, NULL, s);
    CALL_BY_NAME(ncclScatter, &f, &f, 0, ncclFloat, 0, NULL, s);
    CALL_BY_NAME(ncclSend, &f, 0, ncclFloat, 0, NULL, s);
    CALL_BY_NAME(ncclRecv, &f, 0, ncclFloat, 0, NULL, s);
    /* GROUP */
    CALL_BY_NAME(ncclGroupStart);
    CALL_BY_NAME(ncclGroupEnd);
    CALL_BY_NAME(ncclGroupSimulateEnd, &sim);
    /* COMM: no valid unique id, no communicator */
    CALL_BY_NAME(ncclCommInitRank, &c, 0, id, 0);
    CALL_BY_NAME(ncclCommInitRankConfig, &c, 0, id, 0, &cfg);
    CALL_BY_NAME(ncclCommInitRankScalable, &c, 0, 0, 0, NULL, &cfg);
    CALL_BY_NAME(ncclCommInitAll, NULL, 0, NULL);
    CALL_BY_NAME(ncclCommSplit, NULL, 0, 0, &c, NULL);
    CALL_BY_NAME(ncclCommShrink, NULL, NULL, 0, &c, NULL, 0);
    CALL_BY_NAME(ncclCommFinalize, NULL);
    CALL_BY_NAME(ncclCommRevoke, NULL, 0);
    CALL_BY_NAME(ncclCommDestroy, NULL);
    CALL_BY_NAME(ncclCommAbort, NULL);
    CALL_BY_NAME(ncclCommGetAsyncError, NULL, &err);
    /* SYNC */
    CALL_BY_NAME(ncclRedOpCreatePreMulSum, &op, &f, ncclFloat, ncclScalarHostImmediate, NULL);
    CALL_BY_NAME(ncclRedOpDestroy, op, NULL);
    CALL_BY_NAME(ncclCommRegister, NULL, &f, sizeof(f), &p);
    CALL_BY_NAME(ncclCommDeregister, NULL, p);
    CALL_BY_NAME(ncclCommWindowRegister, NULL, &f, sizeof(f), &win, 0);
    CALL_BY_NAME(ncclCommWindowDeregister, NULL, win);
    CALL_BY_NAME(ncclMemFree, NULL);
    CALL_BY_NAME(ncclDevCommCreate, NULL, NULL, NULL);
    CALL_BY_NAME(ncclDevCommDestroy, NULL, NULL);
    /* FORWARD and STRING */
    CALL_BY_NAME(ncclGetVersion, &i);
    CALL_BY_NAME(ncclGetUniqueId, NULL);
    CALL_BY_NAME(ncclCommCount, NULL, &i);
    CALL_BY_NAME(ncclCommCuDevice, NULL, &i);
    CALL_BY_NAME(ncclCommUserRank, NULL, &i);
    CALL_BY_NAME(ncclMemAlloc, NULL, 0);
    CALL_BY_NAME(ncclGetErrorString, ncclSuccess);
    CALL_BY_NAME(ncclGetLastError, NULL);
}

/* Each wrapped entry point exactly once; results are ignored. The runtime and cuBLAS are
 * called directly (through the program's versioned references), the driver and NCCL by
 * name. */
static int mode_calls(void)
{
    calls_runtime();
    calls_cublas();
    calls_driver();
    calls_nccl();
    return g_missing;
}

static int mode_env(void)
{
    const char *v = getenv("PYTORCH_CUDA_ALLOC_CONF");
    printf("PYTORCH_CUDA_ALLOC_CONF=%s\n", v ? v : "(unset)");
    return 0;
}

/* ---- roundtrip ---- */

#define RT_N 4096

/* h_in -> d_a (cudaMemcpy) -> d_c (stream-ordered allocation) -> d_b, where d_b was
 * zeroed on another stream first and the copy stream waits for it through an event. */
static int roundtrip_one(int t)
{
    static const size_t bytes = RT_N * sizeof(float);
    float *in = malloc(bytes), *out = malloc(bytes);
    float *d_a = NULL, *d_b = NULL, *d_c = NULL;
    cudaStream_t s1, s2;
    cudaEvent_t zeroed, copied;
    CK(in == NULL || out == NULL);
    for (int i = 0; i < RT_N; i++)
        in[i] = (float)(t * 100000 + i);
    CK(cudaStreamCreate(&s1));
    CK(cudaStreamCreate(&s2));
    CK(cudaEventCreate(&zeroed));
    CK(cudaEventCreate(&copied));
    CK(cudaMalloc((void **)&d_a, bytes));
    CK(cudaMalloc((void **)&d_b, bytes));
    CK(cudaMemcpy(d_a, in, bytes, cudaMemcpyHostToDevice));
    CK(cudaMemsetAsync(d_b, 0, bytes, s1));
    CK(cudaEventRecord(zeroed, s1));
    CK(cudaStreamWaitEvent(s2, zeroed, 0));
    CK(cudaMallocAsync((void **)&d_c, bytes, s2));
    CK(cudaMemcpyAsync(d_c, d_a, bytes, cudaMemcpyDeviceToDevice, s2));
    CK(cudaMemcpyAsync(d_b, d_c, bytes, cudaMemcpyDeviceToDevice, s2));
    CK(cudaEventRecordWithFlags(copied, s2, cudaEventRecordDefault));
    CK(cudaEventSynchronize(copied));
    CK(cudaEventQuery(copied));
    CK(cudaFreeAsync(d_c, s2));
    CK(cudaStreamSynchronize(s2));
    CK(cudaStreamSynchronize(s1));
    CK(cudaMemcpy(out, d_b, bytes, cudaMemcpyDeviceToHost));
    for (int i = 0; i < RT_N; i++) {
        if (out[i] != in[i]) {
            fprintf(stderr, "child: thread %d: element %d is %g, expected %g\n", t, i,
                    (double)out[i], (double)in[i]);
            return 1;
        }
    }
    CK(cudaFree(d_a));
    CK(cudaFree(d_b));
    CK(cudaEventDestroy(zeroed));
    CK(cudaEventDestroy(copied));
    CK(cudaStreamDestroy(s1));
    CK(cudaStreamDestroy(s2));
    free(in);
    free(out);
    return 0;
}

static void *roundtrip_thread(void *arg)
{
    return (void *)(intptr_t)roundtrip_one((int)(intptr_t)arg);
}

static int mode_roundtrip(int nthreads)
{
    pthread_t th[16];
    int failed = 0;
    if (nthreads < 1 || nthreads > 16)
        return 2;
    for (int t = 0; t < nthreads; t++)
        CK(pthread_create(&th[t], NULL, roundtrip_thread, (void *)(intptr_t)t));
    for (int t = 0; t < nthreads; t++) {
        void *rc;
        pthread_join(th[t], &rc);
        failed |= rc != NULL;
    }
    CK(cudaDeviceSynchronize());
    return failed;
}

/* ---- GEMMs: C(2x2) = A(2x3) * B(3x2), column-major ---- */

static const float g_a[6] = {1, 4, 2, 5, 3, 6};
static const float g_b[6] = {7, 9, 11, 8, 10, 12};
static const float g_c[4] = {58, 139, 64, 154};

typedef struct gemm_bufs {
    float *a, *b, *c;
} gemm_bufs_t;

/* 3 cudaMalloc, 2 cudaMemcpy. */
static int gemm_setup(gemm_bufs_t *g)
{
    CK(cudaMalloc((void **)&g->a, sizeof(g_a)));
    CK(cudaMalloc((void **)&g->b, sizeof(g_b)));
    CK(cudaMalloc((void **)&g->c, sizeof(g_c)));
    CK(cudaMemcpy(g->a, g_a, sizeof(g_a), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(g->b, g_b, sizeof(g_b), cudaMemcpyHostToDevice));
    return 0;
}

/* 1 cudaMemcpy and 1 cudaMemset: C is zeroed so that the next GEMM has to write every
 * element again. */
static int gemm_check(const gemm_bufs_t *g, const char *what)
{
    float c[4];
    CK(cudaMemcpy(c, g->c, sizeof(c), cudaMemcpyDeviceToHost));
    for (int i = 0; i < 4; i++) {
        if (c[i] != g_c[i]) {
            fprintf(stderr, "child: %s: C[%d] is %g, expected %g\n", what, i, (double)c[i],
                    (double)g_c[i]);
            return 1;
        }
    }
    CK(cudaMemset(g->c, 0, sizeof(g_c)));
    return 0;
}

/* 3 cudaFree. */
static int gemm_teardown(gemm_bufs_t *g)
{
    CK(cudaFree(g->a));
    CK(cudaFree(g->b));
    CK(cudaFree(g->c));
    return 0;
}

static int mode_gemm(void)
{
    gemm_bufs_t g;
    cublasHandle_t h;
    const float one = 1.0f, zero = 0.0f;
    CK(gemm_setup(&g));
    CK(cublasCreate(&h));
    CK(cublasSgemm_v2(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, g.a, 2, g.b, 3, &zero, g.c, 2));
    CK(gemm_check(&g, "cublasSgemm_v2"));
    CK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, g.a, CUDA_R_32F, 2, g.b,
                    CUDA_R_32F, 3, &zero, g.c, CUDA_R_32F, 2, CUBLAS_COMPUTE_32F,
                    CUBLAS_GEMM_DEFAULT));
    CK(gemm_check(&g, "cublasGemmEx"));
    CK(cublasDestroy(h));
    return gemm_teardown(&g);
}

static int mode_lt(void)
{
    gemm_bufs_t g;
    cublasLtHandle_t lt;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    const float one = 1.0f, zero = 0.0f;
    CK(gemm_setup(&g));
    CK(cublasLtCreate(&lt));
    CK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, 2, 3, 2));
    CK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, 3, 2, 3));
    CK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, 2, 2, 2));
    CK(cublasLtMatmul(lt, op, &one, g.a, la, g.b, lb, &zero, g.c, lc, g.c, lc, NULL, NULL, 0, 0));
    CK(gemm_check(&g, "cublasLtMatmul"));
    CK(cublasLtMatrixLayoutDestroy(la));
    CK(cublasLtMatrixLayoutDestroy(lb));
    CK(cublasLtMatrixLayoutDestroy(lc));
    CK(cublasLtMatmulDescDestroy(op));
    CK(cublasLtDestroy(lt));
    return gemm_teardown(&g);
}

/* ---- a registered vgpu kernel: p[i] = v for i < n ---- */

#define K_N 1024

static void fill_stub(void) {}

static void fill_impl(const vgpu_launch_t *l)
{
    float *p = *(float *const *)l->args[0];
    float v = *(const float *)l->args[1];
    int n = *(const int *)l->args[2];
    for (int i = 0; i < n; i++)
        p[i] = v;
}

static int fill_footprint(const vgpu_launch_t *l, vgpu_range_t *out, int max)
{
    if (max < 1)
        return 0;
    out[0].ptr = *(float *const *)l->args[0];
    out[0].len = (size_t)*(const int *)l->args[2] * sizeof(float);
    out[0].write = 1;
    return 1;
}

static int register_fill(void)
{
    int (*reg)(const void *, const vgpu_kernel_desc_t *) =
        (int (*)(const void *, const vgpu_kernel_desc_t *))dlsym(RTLD_DEFAULT,
                                                                 "vgpu_register_kernel");
    vgpu_kernel_desc_t d = {0};
    if (reg == NULL) {
        fprintf(stderr, "child: vgpu_register_kernel not found (not running on the vgpu?)\n");
        return 1;
    }
    d.name = "dh_fill";
    d.nparams = 3;
    d.param_sizes[0] = sizeof(float *);
    d.param_sizes[1] = sizeof(float);
    d.param_sizes[2] = sizeof(int);
    d.impl = fill_impl;
    d.footprint = fill_footprint;
    return reg((const void *)fill_stub, &d) == 0 ? 0 : 1;
}

static int mode_kernel(void)
{
    float *d = NULL, h[2 * K_N];
    float v1 = 1.5f, v2 = 2.5f;
    int n = K_N;
    dim3 one = {1, 1, 1};
    CK(register_fill());
    CK(cudaMalloc((void **)&d, sizeof(h)));
    float *p1 = d, *p2 = d + K_N;
    void *args1[] = {&p1, &v1, &n};
    void *args2[] = {&p2, &v2, &n};
    CK(cudaLaunchKernel((const void *)fill_stub, one, one, args1, 0, 0));
    cudaLaunchConfig_t cfg = {0};
    cfg.gridDim = one;
    cfg.blockDim = one;
    CK(cudaLaunchKernelExC(&cfg, (const void *)fill_stub, args2));
    CK(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost));
    for (int i = 0; i < 2 * K_N; i++) {
        if (h[i] != (i < K_N ? v1 : v2)) {
            fprintf(stderr, "child: kernel: element %d is %g\n", i, (double)h[i]);
            return 1;
        }
    }
    CK(cudaFree(d));
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "calls") == 0)
        return mode_calls();
    if (strcmp(mode, "env") == 0)
        return mode_env();
    if (strcmp(mode, "roundtrip") == 0)
        return mode_roundtrip(argc > 2 ? atoi(argv[2]) : 1);
    if (strcmp(mode, "gemm") == 0)
        return mode_gemm();
    if (strcmp(mode, "lt") == 0)
        return mode_lt();
    if (strcmp(mode, "kernel") == 0)
        return mode_kernel();
    fprintf(stderr, "usage: child calls|env|roundtrip T|gemm|lt|kernel\n");
    return 2;
}
