/*
 * wrap_cuda.c: the driver wrappers and the two doors through which programs fetch entry
 * points at run time: dlsym (PyTorch's c10/cuda/driver_api.cpp and Triton dlopen libcuda
 * and dlsym from that handle) and cuGetProcAddress (the CUDA runtime resolves the driver
 * through it). On both doors, an address the real library hands out for an entry point the
 * shim wraps is replaced by the shim's wrapper, so a call cannot slip past the scheduler.
 *
 * dlsym is interposed for the whole process (dlsym_entry.c explains how RTLD_NEXT keeps its
 * meaning for every caller).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

#include <cublasLt.h>
#include <cublasXt.h>
#include <cublas_v2.h>
#include <cuda.h>
#include <cudaProfiler.h>
#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdlib.h>

#undef cuGetProcAddress
CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);
#include "ptsz.h" /* declared by the headers only under per-thread compilation */
#include "entry_protos.h" /* likewise, for the generated wrappers */
#include "nccl_dev.h"      /* ncclDevCommCreate/Destroy: declared for CUDA C++ only */

/* cudaGetDriverEntryPoint is deprecated in CUDA 13 but still exported and called: the
 * wrapper table below takes its address. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include "memtab.h"
#include "wrap.h"
#include "wrap_gen.h"

/* ---- the wrapper table ---- */

/* Every wrapper but the legacy cuBLAS API's, whose names cublas_v2.h maps onto the _v2
 * API: those addresses come from their own translation unit (wrap_gen_legacy.c). */
static void *const dh__wrappers[DH_HOOK_LEGACY_FIRST] = {
#define DH__WRAPPER_ADDR(lib, ret, name, params, args) (void *)&name,
    DH_HOOKS_HAND(DH__WRAPPER_ADDR) DH_HOOKS_GEN(DH__WRAPPER_ADDR)
#undef DH__WRAPPER_ADDR
};

void *dh_hook_wrapper(dh_hook_id_t id)
{
    if ((unsigned)id < (unsigned)DH_HOOK_LEGACY_FIRST)
        return dh__wrappers[id];
    if ((unsigned)id < (unsigned)DH_HOOK_OLDABI_FIRST)
        return dh__legacy_wrappers[(unsigned)id - (unsigned)DH_HOOK_LEGACY_FIRST];
    return (unsigned)id < DH_HOOK_COUNT ? dh__oldabi_wrappers[(unsigned)id - (unsigned)DH_HOOK_OLDABI_FIRST] : NULL;
}

/* The ids sorted by name, for dh_hook_find: dlsym and cuGetProcAddress ask for every name
 * a program or the runtime looks up, and there are thousands of entry points. */
static dh_hook_id_t dh__by_name[DH_HOOK_COUNT];
static pthread_once_t dh__by_name_once = PTHREAD_ONCE_INIT;

static int dh__cmp_id(const void *a, const void *b)
{
    return strcmp(dh_hook_name(*(const dh_hook_id_t *)a), dh_hook_name(*(const dh_hook_id_t *)b));
}

static void dh__sort_names(void)
{
    for (int id = 0; id < DH_HOOK_COUNT; id++)
        dh__by_name[id] = (dh_hook_id_t)id;
    qsort(dh__by_name, DH_HOOK_COUNT, sizeof dh__by_name[0], dh__cmp_id);
}

dh_hook_id_t dh_hook_find(const char *name)
{
    pthread_once(&dh__by_name_once, dh__sort_names);
    size_t lo = 0, hi = DH_HOOK_COUNT;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(dh_hook_name(dh__by_name[mid]), name);
        if (c == 0)
            return dh__by_name[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return DH_HOOK_COUNT;
}

/* p, the address the real library gave for name: the shim's wrapper when it is exactly the
 * function the wrapper forwards to, else p. */
static void *dh__substitute(const char *name, void *p)
{
    dh_hook_id_t id = p && name ? dh_hook_find(name) : DH_HOOK_COUNT;
    if (id == DH_HOOK_COUNT)
        return p;
    void *real = dh_hook_real(id), *wrapper = dh_hook_wrapper(id);
    /* A lookup that found the shim's own generated wrapper of a function no library
     * defines (dlsym(RTLD_DEFAULT) on the vgpu, say) answers as if the shim were absent,
     * so a program probing for the function sees that it is missing. */
    if (p == wrapper && real == NULL && (int)id >= (int)DH_HOOK_HAND_COUNT)
        return NULL;
    return real == p ? wrapper : p;
}

/* dlsym itself is in dlsym_entry.c (built without sanitizers); it asks this for the
 * substitution once the shim is initialised. */
void *dh__dlsym_substitute(const char *name, void *p);
void *dh__dlsym_substitute(const char *name, void *p) { return dh__substitute(name, p); }

/* ---- cuGetProcAddress ---- */

/* The exported name the real driver handed out a pointer for, found by address among the
 * forms of the symbol asked for: the plain name (the old ABI where a newer form exists:
 * cuMemcpyHtoD for a version before 3.2, cuStreamWaitValue32 before 11.7, both wrapped in
 * wrap_gen_oldabi.c), its _v2.._v4 forms, and each of those with _ptsz or _ptds (the
 * per-thread default stream flag). The driver picks the form by the version asked for
 * (cudaTypedefs.h, PFN_<name>_v<version>); matching by address hands out the wrapper of
 * exactly the form it picked, whatever the version. */
static void *dh__proc_substitute(const char *symbol, cuuint64_t flags, void *p)
{
    char name[128];
    static const char *const versions[] = {"", "_v2", "_v3", "_v4"};
    static const char *const streams[] = {"", "_ptsz", "_ptds"};
    for (size_t v = 0; v < sizeof versions / sizeof versions[0]; v++)
        for (size_t s = 0; s < sizeof streams / sizeof streams[0]; s++) {
            if ((size_t)snprintf(name, sizeof name, "%s%s%s", symbol, versions[v], streams[s]) >=
                sizeof name)
                return p;
            void *w = dh__substitute(name, p);
            if (w != p)
                return w;
        }
    (void)flags;
    return p;
}

DH_HOOK_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                            cuuint64_t flags,
                                            CUdriverProcAddressQueryResult *symbolStatus)
{
    DH_WRAP_ENTER(CUDA, CUresult, cuGetProcAddress_v2);
    CUresult rc = real_(symbol, pfn, cudaVersion, flags, symbolStatus);
    if (rc == CUDA_SUCCESS && pfn && symbol)
        *pfn = dh__proc_substitute(symbol, flags, *pfn);
    dh__hook_leave();
    return rc;
}

DH_HOOK_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                                         cuuint64_t flags)
{
    DH_WRAP_ENTER(CUDA, CUresult, cuGetProcAddress);
    CUresult rc = real_(symbol, pfn, cudaVersion, flags);
    if (rc == CUDA_SUCCESS && pfn && symbol)
        *pfn = dh__proc_substitute(symbol, flags, *pfn);
    dh__hook_leave();
    return rc;
}

/* ---- launches ---- */

/* A _ptsz entry point means the per-thread default stream where its stream is NULL. */
#define DH__PTSZ_STREAM(s, ptsz) ((ptsz) && !(s) ? CU_STREAM_PER_THREAD : (s))

#define DH_CU_LAUNCH(name, ptsz)                                                           \
    DH_WRAP_CAPTURE(CUDA, CUresult, name,                                                  \
                    (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,     \
                     unsigned by, unsigned bz, unsigned shm, CUstream s, void **params,    \
                     void **extra),                                                        \
                    (f, gx, gy, gz, bx, by, bz, shm, s, params, extra),                    \
                    dh_op_capture_cu_kernel(&op_, f, gx, gy, gz, bx, by, bz, shm,          \
                                            DH__PTSZ_STREAM(s, ptsz), params, extra),      \
                    CUDA_SUCCESS)

DH_CU_LAUNCH(cuLaunchKernel, 0)
DH_CU_LAUNCH(cuLaunchKernel_ptsz, 1)

/* The Ex launches: the config is copied so its stream can name the per-thread stream. */
static dh_status_t dh__capture_ex(dh_op_t **op, const CUlaunchConfig *config, CUfunction f,
                                  void **params, void **extra, int ptsz)
{
    if (!config)
        return DH_ERR_INVALID;
    CUlaunchConfig c = *config;
    c.hStream = DH__PTSZ_STREAM(c.hStream, ptsz);
    return dh_op_capture_cu_kernel_ex(op, &c, f, params, extra);
}

#define DH_CU_LAUNCH_EX(name, ptsz)                                                        \
    DH_WRAP_CAPTURE(CUDA, CUresult, name,                                                  \
                    (const CUlaunchConfig *config, CUfunction f, void **params,            \
                     void **extra),                                                        \
                    (config, f, params, extra),                                            \
                    dh__capture_ex(&op_, config, f, params, extra, ptsz), CUDA_SUCCESS)

DH_CU_LAUNCH_EX(cuLaunchKernelEx, 0)
DH_CU_LAUNCH_EX(cuLaunchKernelEx_ptsz, 1)

/* A graph launch through the driver: as cudaGraphLaunch (wrap_cudart.c). */
DH_WRAP_CAPTURE(CUDA, CUresult, cuGraphLaunch, (CUgraphExec hGraphExec, CUstream hStream),
                (hGraphExec, hStream),
                dh_op_capture_graph_launch(&op_, (void *)hGraphExec, (cudaStream_t)hStream, 1),
                CUDA_SUCCESS)

/* ---- waits and uncaptured work: drain, then forward ---- */

#define DH_CU_SYNC(lib, ret, name, params, args) \
    DH_WRAP_DRAIN(lib, ret, name, params, args, DH_DRAIN_STREAM_SYNC, 0, 1)

DH_HOOKS_CUDA_SYNC(DH_CU_SYNC)

/* ---- allocations: retried after the shim gives memory back (DESIGN.md invariant 11) ----
 * As the runtime's (wrap_cudart.c): forwarded at once, a failure with
 * CUDA_ERROR_OUT_OF_MEMORY retried after each round of the give-back, the last answer
 * returned as the driver gave it; the stream-ordered ones drain first, as before. */

#define DH_CU_ALLOC_NOTE(ptr, bytes)                                                       \
    do {                                                                                   \
        if (rc == CUDA_SUCCESS && dh_sched_mirroring())                                    \
            dh_memtab_add((uintptr_t)(ptr), (bytes), dh_sched_stamp(), -1);                \
    } while (0)

DH_HOOK_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    DH_WRAP_ENTER(CUDA, CUresult, cuMemAlloc_v2);
    CUresult rc = real_(dptr, bytesize);
    DH_SCHED_RETRY_ALLOC(rc, CUDA_ERROR_OUT_OF_MEMORY, bytesize, real_(dptr, bytesize));
    if (dptr)
        DH_CU_ALLOC_NOTE(*dptr, bytesize);
    dh__hook_leave();
    return rc;
}

DH_HOOK_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                                           size_t Height, unsigned int ElementSizeBytes)
{
    DH_WRAP_ENTER(CUDA, CUresult, cuMemAllocPitch_v2);
    CUresult rc = real_(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
    DH_SCHED_RETRY_ALLOC(rc, CUDA_ERROR_OUT_OF_MEMORY, WidthInBytes * Height,
                         real_(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes));
    if (dptr && pPitch)
        DH_CU_ALLOC_NOTE(*dptr, *pPitch * Height);
    dh__hook_leave();
    return rc;
}

DH_HOOK_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    DH_WRAP_ENTER(CUDA, CUresult, cuMemAllocManaged);
    CUresult rc = real_(dptr, bytesize, flags);
    DH_SCHED_RETRY_ALLOC(rc, CUDA_ERROR_OUT_OF_MEMORY, bytesize, real_(dptr, bytesize, flags));
    if (dptr)
        DH_CU_ALLOC_NOTE(*dptr, bytesize);
    dh__hook_leave();
    return rc;
}

/* Physical memory of the virtual-memory API: no address yet (cuMemMap gives it one), so
 * nothing for the allocation table. */
DH_HOOK_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                                    const CUmemAllocationProp *prop, unsigned long long flags)
{
    DH_WRAP_ENTER(CUDA, CUresult, cuMemCreate);
    CUresult rc = real_(handle, size, prop, flags);
    DH_SCHED_RETRY_ALLOC(rc, CUDA_ERROR_OUT_OF_MEMORY, size, real_(handle, size, prop, flags));
    dh__hook_leave();
    return rc;
}

#define DH_CU_ALLOC_ASYNC(name)                                                            \
    DH_HOOK_EXPORT CUresult name(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)     \
    {                                                                                      \
        DH_WRAP_ENTER(CUDA, CUresult, name);                                               \
        int defer = dh__may_defer();                                                       \
        if (defer)                                                                         \
            dh_sched_drain(DH_DRAIN_STREAM_SYNC); /* as DH_CU_SYNC drained it */           \
        CUresult rc = real_(dptr, bytesize, hStream);                                      \
        DH_SCHED_RETRY_ALLOC(rc, CUDA_ERROR_OUT_OF_MEMORY, bytesize,                       \
                             real_(dptr, bytesize, hStream));                              \
        if (defer)                                                                         \
            dh_sched_forwarded(); /* later strand-1 work must follow this call */         \
        dh__hook_leave();                                                                  \
        return (CUresult)dh__report(DH_HOOK_LIB_CUDA, (int)rc);                            \
    }

DH_CU_ALLOC_ASYNC(cuMemAllocAsync)
DH_CU_ALLOC_ASYNC(cuMemAllocAsync_ptsz)

/* ---- graph capture: drain, then pass everything through until it ends ---- */

DH_WRAP_CAPTURE_BEGIN(CUDA, CUresult, cuStreamBeginCapture_v2,
                      (CUstream hStream, CUstreamCaptureMode mode), (hStream, mode))
DH_WRAP_CAPTURE_BEGIN(CUDA, CUresult, cuStreamBeginCapture_v2_ptsz,
                      (CUstream hStream, CUstreamCaptureMode mode), (hStream, mode))
DH_WRAP_CAPTURE_BEGIN(CUDA, CUresult, cuStreamBeginCaptureToGraph,
                      (CUstream hStream, CUgraph hGraph, const CUgraphNode *dependencies,
                       const CUgraphEdgeData *dependencyData, size_t numDependencies,
                       CUstreamCaptureMode mode),
                      (hStream, hGraph, dependencies, dependencyData, numDependencies, mode))
DH_WRAP_CAPTURE_BEGIN(CUDA, CUresult, cuStreamBeginCaptureToGraph_ptsz,
                      (CUstream hStream, CUgraph hGraph, const CUgraphNode *dependencies,
                       const CUgraphEdgeData *dependencyData, size_t numDependencies,
                       CUstreamCaptureMode mode),
                      (hStream, hGraph, dependencies, dependencyData, numDependencies, mode))
DH_WRAP_CAPTURE_END(CUDA, CUresult, cuStreamEndCapture, (CUstream hStream, CUgraph *phGraph),
                    (hStream, phGraph))
DH_WRAP_CAPTURE_END(CUDA, CUresult, cuStreamEndCapture_ptsz,
                    (CUstream hStream, CUgraph *phGraph), (hStream, phGraph))

/* ---- destruction ---- */

DH_HOOK_EXPORT CUresult cuStreamDestroy_v2(CUstream hStream)
{
    DH_WRAP_ENTER(CUDA, CUresult, cuStreamDestroy_v2);
    if (dh__may_defer())
        dh_sched_drain(DH_DRAIN_STREAM_DESTROY);
    if (dh_sched_mirroring())
        dh_sched_stream_forget((cudaStream_t)hStream);
    CUresult rc = real_(hStream);
    dh__hook_leave();
    return rc;
}

DH_HOOK_EXPORT CUresult cuEventDestroy_v2(CUevent hEvent)
{
    DH_WRAP_ENTER(CUDA, CUresult, cuEventDestroy_v2);
    if (dh__may_defer() && hEvent != NULL && dh_sched_event_destroy_later((cudaEvent_t)hEvent, 1)) {
        dh__hook_leave();
        return CUDA_SUCCESS;
    }
    if (dh_sched_mirroring())
        dh_sched_event_forget((cudaEvent_t)hEvent);
    CUresult rc = real_(hEvent);
    dh__hook_leave();
    return rc;
}

/* ---- the runtime's way to the driver ----
 * cudaGetDriverEntryPoint(ByVersion) hands out driver entry points as cuGetProcAddress
 * does (PyTorch's c10/cuda/driver_api.cpp fetches cuMemCreate and friends this way): the
 * shim's wrapper where it has one. */

#define DH_ENTRY_POINT(name)                                                               \
    DH_HOOK_EXPORT cudaError_t name(const char *symbol, void **funcPtr,                    \
                                    unsigned long long flags,                              \
                                    enum cudaDriverEntryPointQueryResult *driverStatus)    \
    {                                                                                      \
        DH_WRAP_ENTER(CUDART, cudaError_t, name);                                          \
        cudaError_t rc = real_(symbol, funcPtr, flags, driverStatus);                      \
        if (rc == cudaSuccess && funcPtr && symbol)                                        \
            *funcPtr = dh__proc_substitute(symbol, flags, *funcPtr);                       \
        dh__hook_leave();                                                                  \
        return rc;                                                                         \
    }

#define DH_ENTRY_POINT_BY_VERSION(name)                                                    \
    DH_HOOK_EXPORT cudaError_t name(const char *symbol, void **funcPtr,                    \
                                    unsigned int cudaVersion, unsigned long long flags,    \
                                    enum cudaDriverEntryPointQueryResult *driverStatus)    \
    {                                                                                      \
        DH_WRAP_ENTER(CUDART, cudaError_t, name);                                          \
        cudaError_t rc = real_(symbol, funcPtr, cudaVersion, flags, driverStatus);         \
        if (rc == cudaSuccess && funcPtr && symbol)                                        \
            *funcPtr = dh__proc_substitute(symbol, flags, *funcPtr);                       \
        dh__hook_leave();                                                                  \
        return rc;                                                                         \
    }

DH_ENTRY_POINT(cudaGetDriverEntryPoint)
DH_ENTRY_POINT(cudaGetDriverEntryPoint_ptsz)
DH_ENTRY_POINT_BY_VERSION(cudaGetDriverEntryPointByVersion)
DH_ENTRY_POINT_BY_VERSION(cudaGetDriverEntryPointByVersion_ptsz)
