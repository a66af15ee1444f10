/*
 * driver_exec.c: the driver's memory, stream, event and launch entry points, and
 * cuGetProcAddress over one table of every entry point this library defines.
 */
#include <string.h>

#include <cuda.h>

#include "vg.h"

#undef cuGetProcAddress
VG_API CUresult cuGetProcAddress(const char *symbol, void **pfn, int ver, cuuint64_t flags);

static CUresult cu(cudaError_t e)
{
    switch (e) {
    case cudaErrorInvalidDeviceFunction: return CUDA_ERROR_INVALID_HANDLE;
    case cudaErrorInvalidConfiguration: return CUDA_ERROR_INVALID_VALUE;
    case cudaErrorMemoryAllocation: return CUDA_ERROR_OUT_OF_MEMORY;
    default: return (CUresult)e;
    }
}

static cudaStream_t ptsz(CUstream s) { return s ? (cudaStream_t)s : cudaStreamPerThread; }

/* ---- memory ---- */

VG_API CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n)
{
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    void *v = NULL;
    CUresult r = cu(vg_mem_alloc(&v, n, VG_MEM_DEVICE, vg_current_device()));
    *p = (CUdeviceptr)v;
    return r;
}

VG_API CUresult cuMemAllocPitch_v2(CUdeviceptr *p, size_t *pitch, size_t w, size_t h, unsigned elem)
{
    if (!p || !pitch || (elem != 4 && elem != 8 && elem != 16)) return CUDA_ERROR_INVALID_VALUE;
    /* Rows padded to 512 bytes, as cudaMallocPitch pads them (cudart_mem.c). */
    size_t pt = ((w ? w : 1) + 511) / 512 * 512;
    void *v = NULL;
    CUresult r = cu(vg_mem_alloc(&v, pt * (h ? h : 1), VG_MEM_DEVICE, vg_current_device()));
    if (r == CUDA_SUCCESS) *pitch = pt;
    *p = (CUdeviceptr)v;
    return r;
}

VG_API CUresult cuMemAllocManaged(CUdeviceptr *p, size_t n, unsigned flags)
{
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    (void)flags;
    void *v = NULL;
    CUresult r = cu(vg_mem_alloc(&v, n, VG_MEM_MANAGED, vg_current_device()));
    *p = (CUdeviceptr)v;
    return r;
}

/* Virtual memory management: only the physical allocation (its handle is the backing's
 * address; no mapping calls), so that a program's cuMemCreate can run out of memory as a
 * cudaMalloc does. */
VG_API CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t n, const CUmemAllocationProp *prop,
                            unsigned long long flags)
{
    if (!h || !prop || flags || n == 0 || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
        prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    void *v = NULL;
    CUresult r = cu(vg_mem_alloc(&v, n, VG_MEM_DEVICE, prop->location.id));
    *h = (CUmemGenericAllocationHandle)(uintptr_t)v;
    return r;
}

VG_API CUresult cuMemRelease(CUmemGenericAllocationHandle h)
{
    if (!h) return CUDA_ERROR_INVALID_VALUE;
    return cu(vg_mem_free((void *)(uintptr_t)h, 0));
}

VG_API CUresult cuMemFree_v2(CUdeviceptr p)
{
    if (!p) return CUDA_SUCCESS;
    vg_sync_all();
    return cu(vg_mem_free((void *)p, 0));
}

VG_API CUresult cuMemAllocHost_v2(void **p, size_t n) { return cu(vg_mem_alloc(p, n, VG_MEM_HOST, vg_current_device())); }

VG_API CUresult cuMemFreeHost(void *p)
{
    if (!p) return CUDA_SUCCESS;
    vg_sync_all();
    return cu(vg_mem_free(p, VG_MEM_HOST));
}

VG_API CUresult cuMemAllocAsync(CUdeviceptr *p, size_t n, CUstream s)
{
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    void *v = NULL;
    CUresult r = cu(vg_pool_alloc(&v, n, (cudaStream_t)s));
    *p = (CUdeviceptr)v;
    return r;
}

VG_API CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s) { return cu(vg_pool_free((void *)p, (cudaStream_t)s)); }
VG_API CUresult cuMemAllocAsync_ptsz(CUdeviceptr *p, size_t n, CUstream s);
VG_API CUresult cuMemAllocAsync_ptsz(CUdeviceptr *p, size_t n, CUstream s) { return cuMemAllocAsync(p, n, (CUstream)ptsz(s)); }
VG_API CUresult cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream s);
VG_API CUresult cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream s) { return cuMemFreeAsync(p, (CUstream)ptsz(s)); }

VG_API CUresult cuMemGetInfo_v2(size_t *f, size_t *t)
{
    if (!f || !t) return CUDA_ERROR_INVALID_VALUE;
    vg_pool_stats_t st;
    int d = vg_current_device();
    vg_pool_stats(d, &st);
    size_t cap = vg_profile(d)->mem_bytes;
    *f = cap > st.device_reserved ? cap - st.device_reserved : 0;
    *t = cap;
    return CUDA_SUCCESS;
}

/* The runtime's copy path does the work; the driver names its direction explicitly. */
VG_API CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n) { return cu(vg_memcpy2d((void *)d, n, s, n, n, 1, cudaMemcpyHostToDevice, 0, 1, "cuMemcpyHtoD")); }
VG_API CUresult cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n) { return cu(vg_memcpy2d(d, n, (void *)s, n, n, 1, cudaMemcpyDeviceToHost, 0, 1, "cuMemcpyDtoH")); }
VG_API CUresult cuMemcpyDtoD_v2(CUdeviceptr d, CUdeviceptr s, size_t n) { return cu(vg_memcpy2d((void *)d, n, (void *)s, n, n, 1, cudaMemcpyDeviceToDevice, 0, 1, "cuMemcpyDtoD")); }
VG_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *s, size_t n, CUstream st) { return cu(vg_memcpy2d((void *)d, n, s, n, n, 1, cudaMemcpyHostToDevice, (cudaStream_t)st, 0, "cuMemcpyHtoDAsync")); }
VG_API CUresult cuMemcpyDtoHAsync_v2(void *d, CUdeviceptr s, size_t n, CUstream st) { return cu(vg_memcpy2d(d, n, (void *)s, n, n, 1, cudaMemcpyDeviceToHost, (cudaStream_t)st, 0, "cuMemcpyDtoHAsync")); }
VG_API CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) { return cu(vg_memcpy2d((void *)d, n, (void *)s, n, n, 1, cudaMemcpyDeviceToDevice, (cudaStream_t)st, 0, "cuMemcpyDtoDAsync")); }
VG_API CUresult cuMemcpyAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) { return cu(vg_memcpy2d((void *)d, n, (void *)s, n, n, 1, cudaMemcpyDefault, (cudaStream_t)st, 0, "cuMemcpyAsync")); }
VG_API CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n) { return cu(vg_memset((void *)d, v, n, 0, 1, "cuMemsetD8")); }
VG_API CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream st) { return cu(vg_memset((void *)d, v, n, (cudaStream_t)st, 0, "cuMemsetD8Async")); }
VG_API CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr d, const void *s, size_t n, CUstream st);
VG_API CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr d, const void *s, size_t n, CUstream st) { return cuMemcpyHtoDAsync_v2(d, s, n, (CUstream)ptsz(st)); }
VG_API CUresult cuMemcpyAsync_ptsz(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st);
VG_API CUresult cuMemcpyAsync_ptsz(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) { return cuMemcpyAsync(d, s, n, (CUstream)ptsz(st)); }
VG_API CUresult cuMemsetD8Async_ptsz(CUdeviceptr d, unsigned char v, size_t n, CUstream st);
VG_API CUresult cuMemsetD8Async_ptsz(CUdeviceptr d, unsigned char v, size_t n, CUstream st) { return cuMemsetD8Async(d, v, n, (CUstream)ptsz(st)); }

/* ---- streams and events ---- */

VG_API CUresult cuStreamCreate(CUstream *s, unsigned f) { return cu(vg_stream_create((cudaStream_t *)s, f, 0)); }
VG_API CUresult cuStreamCreateWithPriority(CUstream *s, unsigned f, int p) { return cu(vg_stream_create((cudaStream_t *)s, f, p)); }
VG_API CUresult cuStreamDestroy_v2(CUstream s) { return cu(vg_stream_destroy((cudaStream_t)s)); }
VG_API CUresult cuStreamSynchronize(CUstream s) { return cu(vg_stream_sync((cudaStream_t)s)); }
VG_API CUresult cuStreamQuery(CUstream s) { return cu(vg_stream_query((cudaStream_t)s)); }
VG_API CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned f) { return cu(vg_stream_wait_event((cudaStream_t)s, (cudaEvent_t)e, f)); }
VG_API CUresult cuStreamSynchronize_ptsz(CUstream s);
VG_API CUresult cuStreamSynchronize_ptsz(CUstream s) { return cuStreamSynchronize((CUstream)ptsz(s)); }
VG_API CUresult cuStreamQuery_ptsz(CUstream s);
VG_API CUresult cuStreamQuery_ptsz(CUstream s) { return cuStreamQuery((CUstream)ptsz(s)); }
VG_API CUresult cuStreamWaitEvent_ptsz(CUstream s, CUevent e, unsigned f);
VG_API CUresult cuStreamWaitEvent_ptsz(CUstream s, CUevent e, unsigned f) { return cuStreamWaitEvent((CUstream)ptsz(s), e, f); }

VG_API CUresult cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus *st)
{
    if (!st) return CUDA_ERROR_INVALID_VALUE;
    int a = vg_capture_active((cudaStream_t)s);
    if (a < 0) return cu(vg_stream_check((cudaStream_t)s));
    *st = a ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
    return CUDA_SUCCESS;
}

VG_API CUresult cuEventCreate(CUevent *e, unsigned f) { return cu(vg_event_create((cudaEvent_t *)e, f)); }
VG_API CUresult cuEventDestroy_v2(CUevent e) { return cu(vg_event_destroy((cudaEvent_t)e)); }
VG_API CUresult cuEventRecord(CUevent e, CUstream s) { return cu(vg_event_record((cudaEvent_t)e, (cudaStream_t)s, 0)); }
VG_API CUresult cuEventRecordWithFlags(CUevent e, CUstream s, unsigned f) { return cu(vg_event_record((cudaEvent_t)e, (cudaStream_t)s, f)); }
VG_API CUresult cuEventQuery(CUevent e) { return cu(vg_event_query((cudaEvent_t)e)); }
VG_API CUresult cuEventSynchronize(CUevent e) { return cu(vg_event_sync((cudaEvent_t)e)); }
VG_API CUresult cuEventElapsedTime_v2(float *ms, CUevent a, CUevent b) { return cu(vg_event_elapsed(ms, (cudaEvent_t)a, (cudaEvent_t)b)); }
VG_API CUresult cuEventRecord_ptsz(CUevent e, CUstream s);
VG_API CUresult cuEventRecord_ptsz(CUevent e, CUstream s) { return cuEventRecord(e, (CUstream)ptsz(s)); }

/* ---- functions and launches ---- */

/* Parameter layout as cudaFuncGetParamInfo reports it (natural alignment, at most 8). */
static CUresult param_info(const vg_kernel_t *k, size_t idx, size_t *off, size_t *size)
{
    size_t o = 0;
    for (size_t i = 0; i <= idx; i++) {
        size_t a = 1, s = k->d.param_sizes[i];
        while (a < 8 && s % (a * 2) == 0) {
            a *= 2;
        }
        o = (o + a - 1) / a * a;
        if (i < idx) {
            o += s;
        }
    }
    *off = o;
    *size = k->d.param_sizes[idx];
    return CUDA_SUCCESS;
}

VG_API CUresult cuFuncGetParamInfo(CUfunction f, size_t idx, size_t *off, size_t *size)
{
    const vg_kernel_t *k = vg_kernel_find(f);
    if (!k) return CUDA_ERROR_INVALID_HANDLE;
    if (idx >= (size_t)k->d.nparams || !off || !size) return CUDA_ERROR_INVALID_VALUE;
    return param_info(k, idx, off, size);
}

VG_API CUresult cuFuncGetName(const char **name, CUfunction f)
{
    const vg_kernel_t *k = vg_kernel_find(f);
    if (!name) return CUDA_ERROR_INVALID_VALUE;
    if (!k) return CUDA_ERROR_INVALID_HANDLE;
    *name = k->name;
    return CUDA_SUCCESS;
}

VG_API CUresult cuFuncGetAttribute(int *v, CUfunction_attribute a, CUfunction f)
{
    if (!v) return CUDA_ERROR_INVALID_VALUE;
    if (!vg_kernel_find(f)) return CUDA_ERROR_INVALID_HANDLE;
    *v = a == CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK ? 1024 : a == CU_FUNC_ATTRIBUTE_NUM_REGS ? 32 : 0;
    return CUDA_SUCCESS;
}

/* kernelParams, or the packed buffer of `extra` (CU_LAUNCH_PARAM_BUFFER_POINTER/SIZE). */
static CUresult launch(CUfunction f, dim3 g, dim3 b, unsigned shm, CUstream s, void **params,
                       void **extra, const char *api)
{
    const vg_kernel_t *k = vg_kernel_find(f);
    if (!k) return CUDA_ERROR_INVALID_HANDLE;
    void *argv[VGPU_MAX_KERNEL_PARAMS];
    if (!params && extra) {
        char *buf = NULL;
        size_t bufsize = 0;
        for (int i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
            if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) buf = extra[i + 1];
            else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) bufsize = *(size_t *)extra[i + 1];
            else return CUDA_ERROR_INVALID_VALUE;
        }
        for (int i = 0; i < k->d.nparams; i++) {
            size_t off, size;
            param_info(k, (size_t)i, &off, &size);
            if (!buf || off + size > bufsize) return CUDA_ERROR_INVALID_VALUE;
            argv[i] = buf + off;
        }
        params = argv;
    } else if (params && extra) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    return cu(vg_launch(k->func, g, b, params, shm, (cudaStream_t)s, api));
}

VG_API CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                               unsigned by, unsigned bz, unsigned shm, CUstream s, void **p, void **extra)
{
    return launch(f, (dim3){gx, gy, gz}, (dim3){bx, by, bz}, shm, s, p, extra, "cuLaunchKernel");
}

VG_API CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                    unsigned by, unsigned bz, unsigned shm, CUstream s, void **p, void **extra);
VG_API CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                    unsigned by, unsigned bz, unsigned shm, CUstream s, void **p, void **extra)
{
    return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shm, (CUstream)ptsz(s), p, extra);
}

VG_API CUresult cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **p, void **extra)
{
    if (!c || (c->numAttrs && !c->attrs)) return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < c->numAttrs; i++)
        if (!vg_launch_attr_id_valid((int)c->attrs[i].id, "cuLaunchKernelEx")) return CUDA_ERROR_INVALID_VALUE;
    return launch(f, (dim3){c->gridDimX, c->gridDimY, c->gridDimZ},
                  (dim3){c->blockDimX, c->blockDimY, c->blockDimZ}, c->sharedMemBytes, c->hStream,
                  p, extra, "cuLaunchKernelEx");
}

VG_API CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *c, CUfunction f, void **p, void **extra);
VG_API CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *c, CUfunction f, void **p, void **extra)
{
    if (!c) return CUDA_ERROR_INVALID_VALUE;
    CUlaunchConfig cc = *c;
    cc.hStream = (CUstream)ptsz(c->hStream);
    return cuLaunchKernelEx(&cc, f, p, extra);
}

VG_API CUresult cuLaunchHostFunc(CUstream s, CUhostFn fn, void *data) { return cu(vg_host_func((cudaStream_t)s, fn, data)); }

/* ---- cuGetProcAddress ---- */

/* name as asked for, the entry point, its per-thread-default-stream variant (or NULL). */
#define VG_DRIVER_ENTRIES(X)                                                              \
    X(cuInit, cuInit, 0) X(cuDriverGetVersion, cuDriverGetVersion, 0)                     \
    X(cuGetErrorString, cuGetErrorString, 0) X(cuGetErrorName, cuGetErrorName, 0)         \
    X(cuDeviceGet, cuDeviceGet, 0) X(cuDeviceGetCount, cuDeviceGetCount, 0)               \
    X(cuDeviceGetName, cuDeviceGetName, 0) X(cuDeviceTotalMem, cuDeviceTotalMem_v2, 0)    \
    X(cuDeviceGetUuid, cuDeviceGetUuid_v2, 0) X(cuDeviceGetAttribute, cuDeviceGetAttribute, 0) \
    X(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, 0)                              \
    X(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2, 0)                         \
    X(cuDevicePrimaryCtxReset, cuDevicePrimaryCtxReset_v2, 0)                             \
    X(cuDevicePrimaryCtxSetFlags, cuDevicePrimaryCtxSetFlags_v2, 0)                       \
    X(cuDevicePrimaryCtxGetState, cuDevicePrimaryCtxGetState, 0)                          \
    X(cuCtxGetCurrent, cuCtxGetCurrent, 0) X(cuCtxSetCurrent, cuCtxSetCurrent, 0)         \
    X(cuCtxPushCurrent, cuCtxPushCurrent_v2, 0) X(cuCtxPopCurrent, cuCtxPopCurrent_v2, 0) \
    X(cuCtxGetDevice, cuCtxGetDevice, 0) X(cuCtxSynchronize, cuCtxSynchronize, 0)         \
    X(cuCtxGetStreamPriorityRange, cuCtxGetStreamPriorityRange, 0)                        \
    X(cuMemAlloc, cuMemAlloc_v2, 0) X(cuMemFree, cuMemFree_v2, 0)                         \
    X(cuMemAllocHost, cuMemAllocHost_v2, 0) X(cuMemFreeHost, cuMemFreeHost, 0)            \
    X(cuMemAllocPitch, cuMemAllocPitch_v2, 0) X(cuMemAllocManaged, cuMemAllocManaged, 0)  \
    X(cuMemCreate, cuMemCreate, 0) X(cuMemRelease, cuMemRelease, 0)                       \
    X(cuMemAllocAsync, cuMemAllocAsync, cuMemAllocAsync_ptsz)                             \
    X(cuMemFreeAsync, cuMemFreeAsync, cuMemFreeAsync_ptsz) X(cuMemGetInfo, cuMemGetInfo_v2, 0) \
    X(cuMemcpyHtoD, cuMemcpyHtoD_v2, 0) X(cuMemcpyDtoH, cuMemcpyDtoH_v2, 0)               \
    X(cuMemcpyDtoD, cuMemcpyDtoD_v2, 0)                                                   \
    X(cuMemcpyHtoDAsync, cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync_v2_ptsz)                 \
    X(cuMemcpyDtoHAsync, cuMemcpyDtoHAsync_v2, 0) X(cuMemcpyDtoDAsync, cuMemcpyDtoDAsync_v2, 0) \
    X(cuMemcpyAsync, cuMemcpyAsync, cuMemcpyAsync_ptsz) X(cuMemsetD8, cuMemsetD8_v2, 0)   \
    X(cuMemsetD8Async, cuMemsetD8Async, cuMemsetD8Async_ptsz)                             \
    X(cuStreamCreate, cuStreamCreate, 0) X(cuStreamCreateWithPriority, cuStreamCreateWithPriority, 0) \
    X(cuStreamDestroy, cuStreamDestroy_v2, 0)                                             \
    X(cuStreamSynchronize, cuStreamSynchronize, cuStreamSynchronize_ptsz)                 \
    X(cuStreamQuery, cuStreamQuery, cuStreamQuery_ptsz)                                   \
    X(cuStreamWaitEvent, cuStreamWaitEvent, cuStreamWaitEvent_ptsz)                       \
    X(cuStreamIsCapturing, cuStreamIsCapturing, 0)                                        \
    X(cuEventCreate, cuEventCreate, 0) X(cuEventDestroy, cuEventDestroy_v2, 0)            \
    X(cuEventRecord, cuEventRecord, cuEventRecord_ptsz)                                   \
    X(cuEventRecordWithFlags, cuEventRecordWithFlags, 0) X(cuEventQuery, cuEventQuery, 0) \
    X(cuEventSynchronize, cuEventSynchronize, 0) X(cuEventElapsedTime, cuEventElapsedTime_v2, 0) \
    X(cuFuncGetParamInfo, cuFuncGetParamInfo, 0) X(cuFuncGetName, cuFuncGetName, 0)      \
    X(cuFuncGetAttribute, cuFuncGetAttribute, 0)                                          \
    X(cuLaunchKernel, cuLaunchKernel, cuLaunchKernel_ptsz)                                \
    X(cuLaunchKernelEx, cuLaunchKernelEx, cuLaunchKernelEx_ptsz)                          \
    X(cuLaunchHostFunc, cuLaunchHostFunc, 0)                                              \
    X(cuStreamWriteValue32, cuStreamWriteValue32_v2, cuStreamWriteValue32_v2_ptsz)        \
    X(cuStreamWriteValue64, cuStreamWriteValue64_v2, cuStreamWriteValue64_v2_ptsz)        \
    X(cuStreamWaitValue32, cuStreamWaitValue32_v2, cuStreamWaitValue32_v2_ptsz)           \
    X(cuStreamWaitValue64, cuStreamWaitValue64_v2, cuStreamWaitValue64_v2_ptsz)           \
    X(cuStreamBeginCapture, cuStreamBeginCapture_v2, 0) X(cuStreamEndCapture, cuStreamEndCapture, 0) \
    X(cuGraphInstantiateWithFlags, cuGraphInstantiateWithFlags, 0)                        \
    X(cuGraphLaunch, cuGraphLaunch, 0) X(cuGraphExecDestroy, cuGraphExecDestroy, 0)       \
    X(cuGraphDestroy, cuGraphDestroy, 0)                                                  \
    X(cuGetProcAddress, cuGetProcAddress_v2, 0)

/* Stream memory operations (driver_memop.c). */
CUresult cuStreamWriteValue32_v2_ptsz(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
CUresult cuStreamWriteValue64_v2_ptsz(CUstream, CUdeviceptr, cuuint64_t, unsigned int);
CUresult cuStreamWaitValue32_v2_ptsz(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
CUresult cuStreamWaitValue64_v2_ptsz(CUstream, CUdeviceptr, cuuint64_t, unsigned int);

/* The old ABI (driver_memop.c): what cuGetProcAddress hands out for a version before the
 * current form's (cudaTypedefs.h, PFN_<name>_v<version>). */
CUresult cuStreamWriteValue32_v1_(CUstream, CUdeviceptr, cuuint32_t, unsigned int)
    __asm__("cuStreamWriteValue32");
CUresult cuStreamWaitValue32_v1_(CUstream, CUdeviceptr, cuuint32_t, unsigned int)
    __asm__("cuStreamWaitValue32");
CUresult cuStreamWriteValue32_v1_ptsz_(CUstream, CUdeviceptr, cuuint32_t, unsigned int)
    __asm__("cuStreamWriteValue32_ptsz");
CUresult cuStreamWaitValue32_v1_ptsz_(CUstream, CUdeviceptr, cuuint32_t, unsigned int)
    __asm__("cuStreamWaitValue32_ptsz");

static const struct {
    const char *name;
    int before; /* the first version of the current form */
    void *fn, *fn_ptsz;
} old_entries[] = {
    {"cuStreamWriteValue32", 11070, (void *)cuStreamWriteValue32_v1_,
     (void *)cuStreamWriteValue32_v1_ptsz_},
    {"cuStreamWaitValue32", 11070, (void *)cuStreamWaitValue32_v1_,
     (void *)cuStreamWaitValue32_v1_ptsz_},
};

static const struct {
    const char *name;
    void *fn, *fn_ptsz;
} entries[] = {
#define X(n, f, p) {#n, (void *)f, (void *)p},
    VG_DRIVER_ENTRIES(X)
#undef X
};

VG_API CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int ver, cuuint64_t flags,
                                    CUdriverProcAddressQueryResult *st)
{
    if (!sym || !pfn || flags > CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *pfn = NULL;
    int ptds_ = flags == CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    for (size_t i = 0; i < sizeof old_entries / sizeof old_entries[0]; i++) {
        if (strcmp(old_entries[i].name, sym) == 0 && ver >= 2000 && ver < old_entries[i].before) {
            *pfn = ptds_ ? old_entries[i].fn_ptsz : old_entries[i].fn;
            if (st) *st = CU_GET_PROC_ADDRESS_SUCCESS;
            return CUDA_SUCCESS;
        }
    }
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) {
        if (strcmp(entries[i].name, sym)) {
            continue;
        }
        if (ver < 2000) {
            if (st) *st = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
            return CUDA_ERROR_NOT_FOUND;
        }
        int ptds = flags == CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
        *pfn = ptds && entries[i].fn_ptsz ? entries[i].fn_ptsz : entries[i].fn;
        if (st) *st = CU_GET_PROC_ADDRESS_SUCCESS;
        return CUDA_SUCCESS;
    }
    if (st) *st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_ERROR_NOT_FOUND;
}

CUresult cuGetProcAddress(const char *sym, void **pfn, int ver, cuuint64_t flags)
{
    return cuGetProcAddress_v2(sym, pfn, ver, flags, NULL);
}
