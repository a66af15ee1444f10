/*
 * coverage_sync.c: the runtime and driver entry points the shim drains for and forwards
 * (hook_list.h: the per-thread-default-stream forms, the copies, memsets, events, waits,
 * stream-ordered allocations and host functions it does not capture), once per iteration
 * on weights that deferred work has just written, every result gathered on the host; and
 * the device resets, once at the end. See coverage.h.
 */
#define _GNU_SOURCE
#include "coverage.h"

#include <dlfcn.h>
#include <string.h>

#include "ptsz.h"
/* cudaGetDriverEntryPoint is deprecated in CUDA 13, and still called. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

/* Driver entry points as a framework reaches them: by name at run time (the shim hands
 * out its wrappers through dlsym). */
#define DRV(name) ((__typeof__(&name))drv_sym(#name))

static void *drv_sym(const char *name)
{
    void *p = dlsym(RTLD_DEFAULT, name);
    if (p == NULL)
        cov_die(__LINE__, "dlsym(%s) found nothing", name);
    return p;
}

static void count_call(void *arg) { ++*(int *)arg; }

#define N 64

void cov_sync_extra(cudaStream_t s0, cudaStream_t sc, const float *w, float *out)
{
    static int host_calls; /* written by host functions in stream order */
    cudaEvent_t ev0, ev1, ev2;
    CK_RT(cudaEventCreate(&ev0));
    CK_RT(cudaEventCreate(&ev1));
    CK_RT(cudaEventCreate(&ev2));
    float *t = NULL;
    CK_RT(cudaMallocAsync_ptsz((void **)&t, N * sizeof(float), sc));
    CUdeviceptr dt = (CUdeviceptr)t;

    /* sc waits for the optimizer step queued on s0, then copies and sets through every
     * form; the bytes end up in t. */
    CK_CU(DRV(cuEventRecord)((CUevent)ev0, (CUstream)s0));
    CK_CU(DRV(cuStreamWaitEvent)((CUstream)sc, (CUevent)ev0, 0));
    CK_RT(cudaMemcpyAsync_ptsz(t, w, 16 * sizeof(float), cudaMemcpyDeviceToDevice, sc));
    CK_RT(cudaMemsetAsync_ptsz(t + 16, 0, 16 * sizeof(float), sc));
    CK_CU(DRV(cuMemsetD8Async_ptsz)(dt + 32 * sizeof(float), 0x3f, 16 * sizeof(float),
                                    (CUstream)sc));
    CK_CU(DRV(cuMemcpyDtoDAsync_v2)(dt + 48 * sizeof(float), dt, 8 * sizeof(float),
                                    (CUstream)sc));
    CK_CU(DRV(cuMemcpyAsync_ptsz)(dt + 56 * sizeof(float), dt + 4 * sizeof(float),
                                  8 * sizeof(float), (CUstream)sc));
    CK_RT(cudaEventRecord_ptsz(ev1, sc));
    CK_RT(cudaEventRecordWithFlags_ptsz(ev1, sc, 0));
    CK_CU(DRV(cuEventRecord_ptsz)((CUevent)ev2, (CUstream)sc));
    CK_CU(DRV(cuEventRecordWithFlags)((CUevent)ev2, (CUstream)sc, 0));
    CK_RT(cudaStreamWaitEvent_ptsz(sc, ev1, 0));
    CK_CU(DRV(cuStreamWaitEvent_ptsz)((CUstream)sc, (CUevent)ev2, 0));
    CK_RT(cudaLaunchHostFunc_ptsz(sc, count_call, &host_calls));
    CK_CU(DRV(cuLaunchHostFunc)((CUstream)sc, count_call, &host_calls));
    cudaError_t q = cudaStreamQuery_ptsz(sc);
    if (q != cudaSuccess && q != cudaErrorNotReady)
        cov_die(__LINE__, "cudaStreamQuery_ptsz returned %d", (int)q);
    CUresult cq = DRV(cuStreamQuery_ptsz)((CUstream)sc);
    if (cq != CUDA_SUCCESS && cq != CUDA_ERROR_NOT_READY)
        cov_die(__LINE__, "cuStreamQuery_ptsz returned %d", (int)cq);
    cq = DRV(cuEventQuery)((CUevent)ev2);
    if (cq != CUDA_SUCCESS && cq != CUDA_ERROR_NOT_READY)
        cov_die(__LINE__, "cuEventQuery returned %d", (int)cq);
    CK_RT(cudaStreamSynchronize_ptsz(sc));
    float ms = -1;
    CK_CU(DRV(cuEventElapsedTime_v2)(&ms, (CUevent)ev1, (CUevent)ev2));
    if (!(ms >= 0))
        cov_die(__LINE__, "cuEventElapsedTime: %g ms", (double)ms);

    /* Read it back as a 2D copy, then change it with the synchronous forms and read again. */
    CK_RT(cudaMemcpy2D(out, 16 * sizeof(float), t, 16 * sizeof(float), 16 * sizeof(float), 4,
                       cudaMemcpyDeviceToHost));
    int dev = 0;
    CK_RT(cudaGetDevice(&dev));
    CK_RT(cudaMemcpyPeerAsync(t, dev, t + 16, dev, 8 * sizeof(float), sc));
    CK_CU(DRV(cuMemcpyDtoD_v2)(dt + 16 * sizeof(float), dt + 48 * sizeof(float),
                               16 * sizeof(float)));
    CK_CU(DRV(cuMemsetD8_v2)(dt + 32 * sizeof(float), 0, 4 * sizeof(float)));
    CK_CU(DRV(cuMemcpyHtoDAsync_v2_ptsz)(dt + 60 * sizeof(float), out, 4 * sizeof(float),
                                         (CUstream)sc));
    CK_RT(cudaMemcpy2D(out + N, 16 * sizeof(float), t, 16 * sizeof(float),
                       16 * sizeof(float), 4, cudaMemcpyDeviceToHost));

    /* Stream-ordered allocations through every form, each freed again. */
    cudaMemPool_t pool;
    CK_RT(cudaDeviceGetDefaultMemPool(&pool, dev));
    void *u = NULL;
    CK_RT(cudaMallocFromPoolAsync(&u, 256, pool, sc));
    CK_RT(cudaFreeAsync_ptsz(u, sc));
    CUdeviceptr d1 = 0, d2 = 0;
    CK_CU(DRV(cuMemAllocAsync)(&d1, 256, (CUstream)sc));
    CK_CU(DRV(cuMemFreeAsync)(d1, (CUstream)sc));
    CK_CU(DRV(cuMemAllocAsync_ptsz)(&d2, 256, (CUstream)sc));
    CK_CU(DRV(cuMemFreeAsync_ptsz)(d2, (CUstream)sc));
    void *pinned = NULL;
    CK_CU(DRV(cuMemAllocHost_v2)(&pinned, 64));
    CK_CU(DRV(cuMemFreeHost)(pinned));
    /* The other allocations (retried after a give-back: wrap_cudart.c, wrap_cuda.c), each
     * freed again. */
    void *m = NULL;
    size_t pitch = 0;
    CK_RT(cudaMallocPitch(&m, &pitch, 64, 4));
    CK_RT(cudaFree(m));
    struct cudaPitchedPtr pp;
    CK_RT(cudaMalloc3D(&pp, (struct cudaExtent){64, 4, 2}));
    CK_RT(cudaFree(pp.ptr));
    CK_RT(cudaMallocManaged(&m, 64, cudaMemAttachGlobal));
    CK_RT(cudaFree(m));
    CUdeviceptr d3 = 0;
    CK_CU(DRV(cuMemAlloc_v2)(&d3, 64));
    CK_CU(DRV(cuMemFree_v2)(d3));
    CK_CU(DRV(cuMemAllocPitch_v2)(&d3, &pitch, 64, 4, 4));
    CK_CU(DRV(cuMemFree_v2)(d3));
    CK_CU(DRV(cuMemAllocManaged)(&d3, 64, CU_MEM_ATTACH_GLOBAL));
    CK_CU(DRV(cuMemFree_v2)(d3));
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    CUmemGenericAllocationHandle mh = 0;
    CK_CU(DRV(cuMemCreate)(&mh, (size_t)2 << 20, &prop, 0));
    CK_CU(DRV(cuMemRelease)(mh));
    CK_RT(cudaFreeAsync_ptsz(t, sc));
    CK_RT(cudaStreamSynchronize_ptsz(sc));
    out[2 * N] = (float)host_calls;
    CK_RT(cudaEventDestroy(ev0));
    CK_RT(cudaEventDestroy(ev1));
    CK_RT(cudaEventDestroy(ev2));
}

/* The runtime's way to driver entry points, and destruction through the driver of a
 * stream with work queued on it and of an event recorded on it. */
void cov_sync_driver_paths(cudaStream_t s0, const float *src, float *out)
{
    float *buf = NULL;
    const int n = 1;
    CK_RT(cudaMalloc((void **)&buf, 2 * sizeof(float)));
    CK_RT(cudaMemcpyAsync(buf, src, sizeof(float), cudaMemcpyDeviceToDevice, s0));
    void *fn = NULL, *fn2 = NULL;
    CK_RT(cudaGetDriverEntryPoint("cuStreamQuery", &fn, cudaEnableDefault, NULL));
    CK_RT(cudaGetDriverEntryPointByVersion("cuMemsetD8Async", &fn2, 13000, cudaEnableDefault,
                                           NULL));
    cudaStream_t s;
    cudaEvent_t e;
    CK_RT(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CK_RT(cudaEventCreate(&e));
    CK_RT(cudaEventRecord(e, s0));
    CK_RT(cudaStreamWaitEvent(s, e, 0));
    /* On s: buf doubled in place (a memset would not depend on the data), then s goes. */
    CK_CU(((CUresult(*)(CUdeviceptr, unsigned char, size_t, CUstream))fn2)(
        (CUdeviceptr)(buf + n), 0, sizeof(float), (CUstream)s));
    CK_RT(cudaMemcpyAsync(buf + n, buf, sizeof(float), cudaMemcpyDeviceToDevice, s));
    CUresult q = ((CUresult(*)(CUstream))fn)((CUstream)s);
    if (q != CUDA_SUCCESS && q != CUDA_ERROR_NOT_READY)
        cov_die(__LINE__, "cuStreamQuery from cudaGetDriverEntryPoint returned %d", (int)q);
    CK_RT(cudaEventRecord(e, s));
    CK_CU(DRV(cuStreamDestroy_v2)((CUstream)s));
    CK_RT(cudaStreamWaitEvent(s0, e, 0));
    CK_CU(DRV(cuEventDestroy_v2)((CUevent)e));
    CK_RT(cudaMemcpy(out, buf, 2 * sizeof(float), cudaMemcpyDeviceToHost));
    CK_RT(cudaFree(buf));
}

void cov_sync_reset(void)
{
    CK_CU(DRV(cuDevicePrimaryCtxRelease_v2)(0));
    CK_RT(cudaDeviceReset());
    CK_CU(DRV(cuDevicePrimaryCtxReset_v2)(0));
}
