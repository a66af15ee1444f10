/*
 * cudart_exec.c: streams, events, kernel launches, function queries, host functions and
 * stream capture and graph launch (core/graph.c).
 */
#include <string.h>

#include <cuda.h>

#include "cudart.h"

VG_API cudaError_t cudaStreamCreate(cudaStream_t *s) { RET(vg_stream_create(s, cudaStreamDefault, 0)); }
VG_API cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned f) { RET(vg_stream_create(s, f, 0)); }
VG_API cudaError_t cudaStreamCreateWithPriority(cudaStream_t *s, unsigned f, int prio)
{
    RET(vg_stream_create(s, f, prio < -5 ? -5 : prio));
}
VG_API cudaError_t cudaStreamDestroy(cudaStream_t s) { RET(vg_stream_destroy(s)); }
VG_API cudaError_t cudaStreamSynchronize(cudaStream_t s) { RET(vg_stream_sync(s)); }
VG_API cudaError_t cudaStreamQuery(cudaStream_t s)
{
    cudaError_t e = vg_stream_query(s);
    return e == cudaErrorNotReady ? e : vg_record_error(e); /* not-ready is not an error */
}
VG_API cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned f) { RET(vg_stream_wait_event(s, e, f)); }
VG_API cudaError_t cudaStreamGetFlags(cudaStream_t s, unsigned *f) { RET(vg_stream_get_flags(s, f)); }
VG_API cudaError_t cudaStreamGetPriority(cudaStream_t s, int *p) { RET(vg_stream_get_priority(s, p)); }
VG_API cudaError_t cudaStreamGetDevice(cudaStream_t s, int *d) { RET(vg_stream_get_device(s, d)); }
VG_API cudaError_t cudaStreamGetId(cudaStream_t s, unsigned long long *id) { RET(vg_stream_get_id(s, id)); }

VG_API cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t s);
VG_API cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t s) { return cudaStreamSynchronize(vg_ptsz(s)); }
VG_API cudaError_t cudaStreamQuery_ptsz(cudaStream_t s);
VG_API cudaError_t cudaStreamQuery_ptsz(cudaStream_t s) { return cudaStreamQuery(vg_ptsz(s)); }
VG_API cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t s, cudaEvent_t e, unsigned f);
VG_API cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t s, cudaEvent_t e, unsigned f) { return cudaStreamWaitEvent(vg_ptsz(s), e, f); }

VG_API cudaError_t cudaStreamIsCapturing(cudaStream_t s, enum cudaStreamCaptureStatus *st)
{
    if (!st) RET(cudaErrorInvalidValue);
    int a = vg_capture_active(s);
    if (a < 0) RET(vg_stream_check(s));
    *st = a ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
    return cudaSuccess;
}

VG_API cudaError_t cudaStreamGetCaptureInfo(cudaStream_t s, enum cudaStreamCaptureStatus *st,
                                            unsigned long long *id, cudaGraph_t *graph,
                                            const cudaGraphNode_t **deps,
                                            const cudaGraphEdgeData **edges, size_t *ndeps)
{
    if (!st) RET(cudaErrorInvalidValue);
    int a = vg_capture_active(s);
    if (a < 0) RET(vg_stream_check(s));
    *st = a ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
    if (id) *id = 0;
    if (graph) *graph = NULL;
    if (deps) *deps = NULL;
    if (edges) *edges = NULL;
    if (ndeps) *ndeps = 0;
    return cudaSuccess;
}

/* Graphs by stream capture (core/graph.c: one stream, kernels, copies, memsets, GEMMs and
 * host functions; event nodes are not modelled). */
VG_API cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode m)
{
    if (m > cudaStreamCaptureModeRelaxed) RET(cudaErrorInvalidValue);
    RET(vg_capture_begin(s));
}

VG_API cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g)
{
    RET(vg_capture_end(s, (void **)g));
}

VG_API cudaError_t cudaGraphInstantiate(cudaGraphExec_t *e, cudaGraph_t g, unsigned long long f)
{
    (void)f;
    RET(vg_graph_instantiate((void **)e, g));
}

VG_API cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *e, cudaGraph_t g,
                                                 unsigned long long f)
{
    return cudaGraphInstantiate(e, g, f);
}

VG_API cudaError_t cudaGraphLaunch(cudaGraphExec_t e, cudaStream_t s) { RET(vg_graph_launch(e, s)); }
VG_API cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t e, cudaStream_t s);
VG_API cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t e, cudaStream_t s) { return cudaGraphLaunch(e, vg_ptsz(s)); }
VG_API cudaError_t cudaGraphExecDestroy(cudaGraphExec_t e) { RET(vg_graph_release(e)); }
VG_API cudaError_t cudaGraphDestroy(cudaGraph_t g) { RET(vg_graph_release(g)); }

static __thread enum cudaStreamCaptureMode tls_capture_mode = cudaStreamCaptureModeGlobal;

VG_API cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *m)
{
    if (!m) RET(cudaErrorInvalidValue);
    enum cudaStreamCaptureMode old = tls_capture_mode;
    tls_capture_mode = *m;
    *m = old;
    return cudaSuccess;
}

/* ---- events ---- */

VG_API cudaError_t cudaEventCreate(cudaEvent_t *e) { RET(vg_event_create(e, cudaEventDefault)); }
VG_API cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned f) { RET(vg_event_create(e, f)); }
/* Through the driver entry point fetched with cuGetProcAddress, as the real runtime does: a
 * shim in front sees cuEventDestroy_v2 nested in this call (on an H100 the shim counted
 * 445 such nested calls in 8 PyTorch steps), and must not hold its own lock around it. */
VG_API cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    typedef CUresult (*destroy_fn)(CUevent);
    static destroy_fn _Atomic drv;
    destroy_fn f = drv;
    if (f == NULL) {
        f = (destroy_fn)vg_driver_entry("cuEventDestroy");
        drv = f;
    }
    if (f != NULL)
        RET((cudaError_t)f((CUevent)e));
    RET(vg_event_destroy(e));
}
VG_API cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) { RET(vg_event_record(e, s, 0)); }
VG_API cudaError_t cudaEventRecordWithFlags(cudaEvent_t e, cudaStream_t s, unsigned f) { RET(vg_event_record(e, s, f)); }
VG_API cudaError_t cudaEventSynchronize(cudaEvent_t e) { RET(vg_event_sync(e)); }
VG_API cudaError_t cudaEventQuery(cudaEvent_t e)
{
    cudaError_t r = vg_event_query(e);
    return r == cudaErrorNotReady ? r : vg_record_error(r);
}
VG_API cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
    cudaError_t r = vg_event_elapsed(ms, a, b);
    return r == cudaErrorNotReady ? r : vg_record_error(r);
}

VG_API cudaError_t cudaEventRecord_ptsz(cudaEvent_t e, cudaStream_t s);
VG_API cudaError_t cudaEventRecord_ptsz(cudaEvent_t e, cudaStream_t s) { return cudaEventRecord(e, vg_ptsz(s)); }
VG_API cudaError_t cudaEventRecordWithFlags_ptsz(cudaEvent_t e, cudaStream_t s, unsigned f);
VG_API cudaError_t cudaEventRecordWithFlags_ptsz(cudaEvent_t e, cudaStream_t s, unsigned f) { return cudaEventRecordWithFlags(e, vg_ptsz(s), f); }

/* ---- kernels ---- */

VG_API cudaError_t cudaLaunchKernel(const void *f, dim3 g, dim3 b, void **args, size_t shm, cudaStream_t s)
{
    RET(vg_launch(f, g, b, args, shm, s, "cudaLaunchKernel"));
}

VG_API cudaError_t cudaLaunchKernel_ptsz(const void *f, dim3 g, dim3 b, void **args, size_t shm, cudaStream_t s);
VG_API cudaError_t cudaLaunchKernel_ptsz(const void *f, dim3 g, dim3 b, void **args, size_t shm, cudaStream_t s)
{
    return cudaLaunchKernel(f, g, b, args, shm, vg_ptsz(s));
}

/* nvcc 13's kernel<<<...>>> (crt/host_runtime.h, __cudaLaunch): the stub fetches a
 * cudaKernel_t once and launches through __cudaLaunchKernel. Here a kernel's handle is its
 * registry entry, which every entry point taking a function also accepts. */
VG_API cudaError_t __cudaGetKernel(cudaKernel_t *out, const void *f);
VG_API cudaError_t __cudaGetKernel(cudaKernel_t *out, const void *f)
{
    if (!out) RET(cudaErrorInvalidValue);
    const vg_kernel_t *k = vg_kernel_find(f);
    if (!k) RET(cudaErrorInvalidDeviceFunction);
    *out = (cudaKernel_t)(void *)k;
    return cudaSuccess;
}

VG_API cudaError_t __cudaLaunchKernel(cudaKernel_t k, dim3 g, dim3 b, void **args, size_t shm, cudaStream_t s);
VG_API cudaError_t __cudaLaunchKernel(cudaKernel_t k, dim3 g, dim3 b, void **args, size_t shm, cudaStream_t s)
{
    RET(vg_launch((const void *)k, g, b, args, shm, s, "__cudaLaunchKernel"));
}

VG_API cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t k, dim3 g, dim3 b, void **args, size_t shm, cudaStream_t s);
VG_API cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t k, dim3 g, dim3 b, void **args, size_t shm, cudaStream_t s)
{
    return __cudaLaunchKernel(k, g, b, args, shm, vg_ptsz(s));
}

VG_API cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *c, const void *f, void **args)
{
    if (!c || (c->numAttrs && !c->attrs)) RET(cudaErrorInvalidValue);
    for (unsigned i = 0; i < c->numAttrs; i++)
        if (!vg_launch_attr_id_valid((int)c->attrs[i].id, "cudaLaunchKernelExC")) RET(cudaErrorInvalidValue);
    RET(vg_launch(f, c->gridDim, c->blockDim, args, c->dynamicSmemBytes, c->stream, "cudaLaunchKernelExC"));
}

VG_API cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t *c, const void *f, void **args);
VG_API cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t *c, const void *f, void **args)
{
    if (!c) RET(cudaErrorInvalidValue);
    cudaLaunchConfig_t cc = *c;
    cc.stream = vg_ptsz(c->stream);
    return cudaLaunchKernelExC(&cc, f, args);
}

/* The kernel's name as registered (the real runtime gives the mangled device name). */
VG_API cudaError_t cudaFuncGetName(const char **name, const void *f)
{
    if (!name) RET(cudaErrorInvalidValue);
    const vg_kernel_t *k = vg_kernel_find(f);
    if (!k) RET(cudaErrorInvalidDeviceFunction);
    *name = k->name;
    return cudaSuccess;
}

/* Parameter offsets as a compiler lays them out: each at its natural alignment (the
 * largest power of two dividing its size, at most 8), in order. */
static size_t param_align(size_t size)
{
    size_t a = 1;
    while (a < 8 && size % (a * 2) == 0) {
        a *= 2;
    }
    return a;
}

VG_API cudaError_t cudaFuncGetParamInfo(const void *f, size_t idx, size_t *off, size_t *size)
{
    const vg_kernel_t *k = vg_kernel_find(f);
    if (!k) RET(cudaErrorInvalidDeviceFunction);
    if (idx >= (size_t)k->d.nparams || !off || !size) RET(cudaErrorInvalidValue);
    size_t o = 0;
    for (size_t i = 0; i <= idx; i++) {
        size_t a = param_align(k->d.param_sizes[i]);
        o = (o + a - 1) / a * a;
        if (i < idx) {
            o += k->d.param_sizes[i];
        }
    }
    *off = o;
    *size = k->d.param_sizes[idx];
    return cudaSuccess;
}

VG_API cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes *a, const void *f)
{
    if (!a) RET(cudaErrorInvalidValue);
    if (!vg_kernel_find(f)) RET(cudaErrorInvalidDeviceFunction);
    memset(a, 0, sizeof *a);
    const vgpu_profile_t *p = vg_profile(vg_current_device());
    a->maxThreadsPerBlock = 1024;
    a->numRegs = 32;
    a->ptxVersion = a->binaryVersion = p->cc_major * 10 + p->cc_minor;
    a->maxDynamicSharedSizeBytes = 48 << 10;
    return cudaSuccess;
}

VG_API cudaError_t cudaFuncSetAttribute(const void *f, enum cudaFuncAttribute attr, int v)
{
    (void)attr;
    (void)v;
    RET(vg_kernel_find(f) ? cudaSuccess : cudaErrorInvalidDeviceFunction);
}

VG_API cudaError_t cudaGetFuncBySymbol(cudaFunction_t *out, const void *sym)
{
    if (!out) RET(cudaErrorInvalidValue);
    const vg_kernel_t *k = vg_kernel_find(sym);
    if (!k) RET(cudaErrorInvalidDeviceFunction);
    *out = (cudaFunction_t)(void *)k;
    return cudaSuccess;
}

VG_API cudaError_t cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void *data) { RET(vg_host_func(s, fn, data)); }

VG_API cudaError_t cudaLaunchHostFunc_ptsz(cudaStream_t s, cudaHostFn_t fn, void *data);
VG_API cudaError_t cudaLaunchHostFunc_ptsz(cudaStream_t s, cudaHostFn_t fn, void *data)
{
    return cudaLaunchHostFunc(vg_ptsz(s), fn, data);
}
