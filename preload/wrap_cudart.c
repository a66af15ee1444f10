/*
 * wrap_cudart.c: the CUDA runtime wrappers, by the classes of hook_list.h.
 *
 * In passthrough every wrapper forwards at once. When the mode defers, a CAPTURE call made
 * by the program (not nested inside another wrapped call, not by the dispatcher) becomes
 * an op and returns success; a call the capture module refuses (an unregistered kernel,
 * a copy into pageable memory, which CUDA itself makes synchronous) drains and forwards.
 * A SYNC call drains first, then forwards, and reports a pending asynchronous error of a
 * deferred op in place of success.
 */
#include <cuda_runtime_api.h>

#include "breaks.h"
#include "ptsz.h"
#include "memtab.h"
#include "wrap.h"

#define DH_CAPTURE_WRAPPER(ret, name, params, args, CAPTURE) \
    DH_WRAP_CAPTURE(CUDART, ret, name, params, args, CAPTURE, cudaSuccess)

DH_CAPTURE_WRAPPER(cudaError_t, cudaLaunchKernel,
                   (const void *func, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,
                    cudaStream_t stream),
                   (func, gridDim, blockDim, args, sharedMem, stream),
                   dh_op_capture_kernel(&op_, func, gridDim, blockDim, args, sharedMem, stream))

DH_CAPTURE_WRAPPER(cudaError_t, cudaLaunchKernelExC,
                   (const cudaLaunchConfig_t *config, const void *func, void **args),
                   (config, func, args), dh_op_capture_kernel_ex(&op_, config, func, args))

/* nvcc 13's kernel<<<...>>> (ptsz.h). The runtime's parameter and name queries take the
 * cudaKernel_t as it is (cuda_runtime_api.h, cudaFuncGetParamInfo: "If func is not a
 * device entry function, then it is assumed to be a cudaKernel_t"). */
DH_CAPTURE_WRAPPER(cudaError_t, __cudaLaunchKernel,
                   (cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args,
                    size_t sharedMem, cudaStream_t stream),
                   (kernel, gridDim, blockDim, args, sharedMem, stream),
                   dh_op_capture_kernel_handle(&op_, kernel, gridDim, blockDim, args,
                                               sharedMem, stream))

DH_CAPTURE_WRAPPER(cudaError_t, cudaMemcpyAsync,
                   (void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                    cudaStream_t stream),
                   (dst, src, count, kind, stream),
                   dh_op_capture_memcpy(&op_, dst, src, count, kind, stream))

DH_CAPTURE_WRAPPER(cudaError_t, cudaMemsetAsync,
                   (void *devPtr, int value, size_t count, cudaStream_t stream),
                   (devPtr, value, count, stream),
                   dh_op_capture_memset(&op_, devPtr, value, count, stream))

DH_CAPTURE_WRAPPER(cudaError_t, cudaLaunchHostFunc,
                   (cudaStream_t stream, cudaHostFn_t fn, void *userData),
                   (stream, fn, userData), dh_op_capture_host_func(&op_, stream, fn, userData))

DH_CAPTURE_WRAPPER(cudaError_t, cudaEventRecord, (cudaEvent_t event, cudaStream_t stream),
                   (event, stream), dh_op_capture_event_record(&op_, event, stream, 0))

DH_CAPTURE_WRAPPER(cudaError_t, cudaEventRecordWithFlags,
                   (cudaEvent_t event, cudaStream_t stream, unsigned int flags),
                   (event, stream, flags),
                   dh_op_capture_event_record(&op_, event, stream, flags))

DH_CAPTURE_WRAPPER(cudaError_t, cudaStreamWaitEvent,
                   (cudaStream_t stream, cudaEvent_t event, unsigned int flags),
                   (stream, event, flags), dh_op_capture_event_wait(&op_, stream, event, flags))

/* A graph launch: deferred as a barrier of whatever it may touch (op_graph.c); the first
 * launch of each executable graph is forwarded, so a bad handle fails at the call. */
DH_CAPTURE_WRAPPER(cudaError_t, cudaGraphLaunch, (cudaGraphExec_t graphExec, cudaStream_t stream),
                   (graphExec, stream),
                   dh_op_capture_graph_launch(&op_, (void *)graphExec, stream, 0))

/* A deferred free carries the block's size for the deferred-bytes limit. */
static dh_status_t dh__capture_free(dh_op_t **op, void *p, cudaStream_t s)
{
    dh_status_t st = dh_op_capture_free_async(op, p, s);
    if (st == DH_OK)
        (*op)->free_bytes = dh_sched_alloc_take(p);
    return st;
}

/* A free is deferred until every queued use of its memory has been issued; the test break
 * free_order issues it at once instead (ahead of those uses). */
DH_HOOK_EXPORT cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t hStream)
{
    DH_WRAP_ENTER(CUDART, cudaError_t, cudaFreeAsync);
    if (dh__may_defer()) {
        if (dh_break(DH_BREAK_FREE_ORDER)) {
            cudaStream_t p = dh_sched_alloc_stream(hStream);
            cudaError_t rc = real_(devPtr, p ? p : hStream);
            dh__hook_leave();
            return rc;
        }
        dh_op_t *op = NULL;
        if (dh__capture_free(&op, devPtr, hStream) == DH_OK) {
            dh_sched_submit(op);
            dh__hook_leave();
            return cudaSuccess;
        }
        dh_sched_drain(DH_DRAIN_UNCAPTURABLE);
    }
    cudaError_t rc = real_(devPtr, hStream);
    dh__hook_leave();
    return rc;
}

/* The program needs the address now, so the allocation is made at once: from a block
 * whose free is captured and ordered before every use of this allocation (mempool.h), or
 * else stream-ordered on the physical stream of the strand that will use it. */
DH_HOOK_EXPORT cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t hStream)
{
    DH_WRAP_ENTER(CUDART, cudaError_t, cudaMallocAsync);
    cudaStream_t s = hStream;
    if (dh__may_defer() && devPtr) {
        void *blk = dh_sched_alloc_reuse(size, hStream);
        if (blk) {
            *devPtr = blk;
            dh_sched_alloc_note(blk, size);
            dh__hook_leave();
            return cudaSuccess;
        }
    }
    if (dh__may_defer()) {
        cudaStream_t p = dh_sched_alloc_stream(hStream);
        s = p ? p : hStream;
    }
    cudaError_t rc = real_(devPtr, size, s);
    /* Memory the shim holds is given back before the program is told it has none
     * (DESIGN.md invariant 11). */
    DH_SCHED_RETRY_ALLOC(rc, cudaErrorMemoryAllocation, size, real_(devPtr, size, s));
    if (rc == cudaSuccess && dh_sched_mirroring())
        dh_sched_alloc_note(*devPtr, size);
    dh__hook_leave();
    return rc;
}

/* A query of an event whose record is still queued answers "not ready" (invariant 4) and
 * asks the dispatcher not to hold that record much longer. */
DH_HOOK_EXPORT cudaError_t cudaEventQuery(cudaEvent_t event)
{
    DH_WRAP_ENTER(CUDART, cudaError_t, cudaEventQuery);
    if (dh__may_defer() && dh_sched_event_pending(event)) {
        dh__hook_leave();
        if (dh_break(DH_BREAK_DRAIN_EVENT_QUERY))
            return cudaSuccess;
        dh_sched_kick();
        return cudaErrorNotReady;
    }
    cudaError_t rc = real_(event);
    dh__hook_leave();
    return rc;
}

DH_HOOK_EXPORT cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
    DH_WRAP_ENTER(CUDART, cudaError_t, cudaStreamBeginCapture);
    if (dh__hook_depth == 1 && dh_sched_mirroring())
        dh_sched_capture_begin();
    cudaError_t rc = real_(stream, mode);
    if (rc != cudaSuccess && dh__hook_depth == 1 && dh_sched_mirroring())
        dh_sched_capture_end();
    dh__hook_leave();
    return rc;
}

DH_HOOK_EXPORT cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph)
{
    DH_WRAP_ENTER(CUDART, cudaError_t, cudaStreamEndCapture);
    cudaError_t rc = real_(stream, pGraph);
    if (dh__hook_depth == 1 && dh_sched_mirroring())
        dh_sched_capture_end();
    dh__hook_leave();
    return rc;
}

/* The other doors into graph capture (hook_list.h DH_HOOKS_CUDART_GRAPHCAP). */
DH_WRAP_CAPTURE_BEGIN(CUDART, cudaError_t, cudaStreamBeginCapture_ptsz,
                      (cudaStream_t stream, enum cudaStreamCaptureMode mode), (stream, mode))
DH_WRAP_CAPTURE_BEGIN(CUDART, cudaError_t, cudaStreamBeginCaptureToGraph,
                      (cudaStream_t stream, cudaGraph_t graph,
                       const cudaGraphNode_t *dependencies,
                       const cudaGraphEdgeData *dependencyData, size_t numDependencies,
                       enum cudaStreamCaptureMode mode),
                      (stream, graph, dependencies, dependencyData, numDependencies, mode))
DH_WRAP_CAPTURE_BEGIN(CUDART, cudaError_t, cudaStreamBeginCaptureToGraph_ptsz,
                      (cudaStream_t stream, cudaGraph_t graph,
                       const cudaGraphNode_t *dependencies,
                       const cudaGraphEdgeData *dependencyData, size_t numDependencies,
                       enum cudaStreamCaptureMode mode),
                      (stream, graph, dependencies, dependencyData, numDependencies, mode))
DH_WRAP_CAPTURE_END(CUDART, cudaError_t, cudaStreamEndCapture_ptsz,
                    (cudaStream_t stream, cudaGraph_t *pGraph), (stream, pGraph))

/* Destroying an event whose record is queued destroys it once that record is issued
 * (scheduler.h, dh_sched_event_destroy_later); otherwise now, and the event's bookkeeping
 * goes (a new event may get the same handle). */
DH_HOOK_EXPORT cudaError_t cudaEventDestroy(cudaEvent_t event)
{
    DH_WRAP_ENTER(CUDART, cudaError_t, cudaEventDestroy);
    if (dh__may_defer() && event != NULL && dh_sched_event_destroy_later(event, 0)) {
        dh__hook_leave();
        return cudaSuccess;
    }
    if (dh_sched_mirroring())
        dh_sched_event_forget(event);
    cudaError_t rc = real_(event);
    dh__hook_leave();
    return rc;
}

/* Destroying a stream issues its queued work first; its strand-1 twin goes with it. */
DH_HOOK_EXPORT cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
    DH_WRAP_ENTER(CUDART, cudaError_t, cudaStreamDestroy);
    if (dh__may_defer())
        dh_sched_drain(DH_DRAIN_STREAM_DESTROY);
    if (dh_sched_mirroring())
        dh_sched_stream_forget(stream);
    cudaError_t rc = real_(stream);
    dh__hook_leave();
    return rc;
}

/* ---- SYNC ---- */

static dh_drain_reason_t dh__drain_reason(dh_hook_id_t id)
{
    switch (id) {
    case DH_HOOK_cudaStreamSynchronize: return DH_DRAIN_STREAM_SYNC;
    case DH_HOOK_cudaDeviceSynchronize: return DH_DRAIN_DEVICE_SYNC;
    case DH_HOOK_cudaEventSynchronize: return DH_DRAIN_EVENT_SYNC;
    case DH_HOOK_cudaEventElapsedTime: return DH_DRAIN_EVENT_ELAPSED;
    case DH_HOOK_cudaStreamQuery: return DH_DRAIN_STREAM_QUERY;
    case DH_HOOK_cudaMemcpy: case DH_HOOK_cudaMemset: return DH_DRAIN_BLOCKING_COPY;
    case DH_HOOK_cudaFree: case DH_HOOK_cudaFreeHost: return DH_DRAIN_FREE;
    default: return DH_DRAIN_UNCAPTURABLE; /* work the shim cannot capture: program order */
    }
}

/* Test breaks of drain rules: the named call skips its drain. */
static int dh__drain_broken(dh_hook_id_t id)
{
    return (id == DH_HOOK_cudaStreamSynchronize && dh_break(DH_BREAK_DRAIN_STREAM_SYNC)) ||
           (id == DH_HOOK_cudaMemcpy && dh_break(DH_BREAK_DRAIN_MEMCPY));
}

#define DH_SYNC_WRAPPER(lib, ret, name, params, args)                                      \
    DH_WRAP_DRAIN(lib, ret, name, params, args, dh__drain_reason(DH_HOOK_##name),         \
                  dh__drain_broken(DH_HOOK_##name), 1)

DH_HOOKS_CUDART_SYNC(DH_SYNC_WRAPPER)

/* ---- FORWARD ---- */

/* Forwarded (retried once after the shim gave its memory back, as cudaMallocAsync), and
 * remembered in the allocation table in the two-strand modes: a kernel
 * argument pointing into this memory is then known by its whole allocation (memtab.h). A
 * freed block's entry stays until a new allocation overlaps it: a stale entry can only make
 * two ops look dependent, never independent. */
DH_HOOK_EXPORT cudaError_t cudaMalloc(void **devPtr, size_t size)
{
    DH_WRAP_ENTER(CUDART, cudaError_t, cudaMalloc);
    cudaError_t rc = real_(devPtr, size);
    DH_SCHED_RETRY_ALLOC(rc, cudaErrorMemoryAllocation, size, real_(devPtr, size));
    if (rc == cudaSuccess && devPtr && dh_sched_mirroring())
        dh_memtab_add((uintptr_t)*devPtr, size, dh_sched_stamp(), -1);
    dh__hook_leave();
    return rc;
}

/* The other allocations: forwarded at once as cudaMalloc (the stream-ordered one from a
 * program's pool after a drain, as before: the shim does not place it on a strand's
 * stream), retried after the shim gave memory back, and remembered in the allocation
 * table. A failure the retries keep is returned as the runtime returned it. */
DH_HOOK_EXPORT cudaError_t cudaMallocPitch(void **devPtr, size_t *pitch, size_t width,
                                           size_t height)
{
    DH_WRAP_ENTER(CUDART, cudaError_t, cudaMallocPitch);
    cudaError_t rc = real_(devPtr, pitch, width, height);
    DH_SCHED_RETRY_ALLOC(rc, cudaErrorMemoryAllocation, width * height,
                         real_(devPtr, pitch, width, height));
    if (rc == cudaSuccess && devPtr && pitch && dh_sched_mirroring())
        dh_memtab_add((uintptr_t)*devPtr, *pitch * height, dh_sched_stamp(), -1);
    dh__hook_leave();
    return rc;
}

DH_HOOK_EXPORT cudaError_t cudaMalloc3D(struct cudaPitchedPtr *pitchedDevPtr,
                                        struct cudaExtent extent)
{
    DH_WRAP_ENTER(CUDART, cudaError_t, cudaMalloc3D);
    cudaError_t rc = real_(pitchedDevPtr, extent);
    DH_SCHED_RETRY_ALLOC(rc, cudaErrorMemoryAllocation,
                         extent.width * extent.height * extent.depth,
                         real_(pitchedDevPtr, extent));
    if (rc == cudaSuccess && pitchedDevPtr && dh_sched_mirroring())
        dh_memtab_add((uintptr_t)pitchedDevPtr->ptr,
                      pitchedDevPtr->pitch * extent.height * (extent.depth ? extent.depth : 1),
                      dh_sched_stamp(), -1);
    dh__hook_leave();
    return rc;
}

DH_HOOK_EXPORT cudaError_t cudaMallocManaged(void **devPtr, size_t size, unsigned int flags)
{
    DH_WRAP_ENTER(CUDART, cudaError_t, cudaMallocManaged);
    cudaError_t rc = real_(devPtr, size, flags);
    DH_SCHED_RETRY_ALLOC(rc, cudaErrorMemoryAllocation, size, real_(devPtr, size, flags));
    if (rc == cudaSuccess && devPtr && dh_sched_mirroring())
        dh_memtab_add((uintptr_t)*devPtr, size, dh_sched_stamp(), -1);
    dh__hook_leave();
    return rc;
}

DH_HOOK_EXPORT cudaError_t cudaMallocFromPoolAsync(void **ptr, size_t size,
                                                   cudaMemPool_t memPool, cudaStream_t stream)
{
    DH_WRAP_ENTER(CUDART, cudaError_t, cudaMallocFromPoolAsync);
    int defer = dh__may_defer();
    if (defer)
        dh_sched_drain(DH_DRAIN_UNCAPTURABLE); /* as its generated wrapper drained */
    cudaError_t rc = real_(ptr, size, memPool, stream);
    DH_SCHED_RETRY_ALLOC(rc, cudaErrorMemoryAllocation, size, real_(ptr, size, memPool, stream));
    if (defer)
        dh_sched_forwarded(); /* later strand-1 work must follow this call */
    dh__hook_leave();
    return (cudaError_t)dh__report(DH_HOOK_LIB_CUDART, (int)rc);
}

/* The thread's last error, or else a replay failure no call has reported yet (scheduler.h
 * dh_sched_error_take): PyTorch reads it after every launch (C10_CUDA_KERNEL_LAUNCH_CHECK),
 * so this costs one relaxed load when nothing is pending. A real error of the thread comes
 * first and the pending one waits for the next report, so neither is lost. */
DH_HOOK_EXPORT cudaError_t cudaGetLastError(void)
{
    DH_WRAP_ENTER(CUDART, cudaError_t, cudaGetLastError);
    cudaError_t rc = real_();
    if (rc == cudaSuccess)
        rc = (cudaError_t)dh_sched_error_take();
    dh__hook_leave();
    return rc;
}

DH_HOOK_EXPORT cudaError_t cudaPeekAtLastError(void)
{
    DH_WRAP_ENTER(CUDART, cudaError_t, cudaPeekAtLastError);
    cudaError_t rc = real_();
    if (rc == cudaSuccess)
        rc = (cudaError_t)dh_sched_error_peek();
    dh__hook_leave();
    return rc;
}
