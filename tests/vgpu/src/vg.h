/*
 * vg.h: the vgpu core's internal contract (libvgpu.so), used by the API libraries
 * (libcudart.so.13, libcuda.so.1, libcublas.so.13, libcublasLt.so.13, libnccl.so.2).
 *
 * Execution model. Every enqueueing API call turns into one operation (vg_op_t) that the
 * caller fills in (class, solo device time, byte ranges, functional effect) and hands to
 * vg_submit(). The core keeps, per process, one discrete-event simulation of all its
 * devices in virtual time. An operation starts when it is at the head of its hardware
 * queue (streams map onto CUDA_DEVICE_MAX_CONNECTIONS queues), its stream predecessor has
 * completed, its explicit dependencies (event waits, legacy-stream rules) have completed,
 * the host clock has reached its issue time and, for rendezvous operations (NCCL), every
 * peer has posted. Its functional effect (op->exec) runs at its start, in virtual-time
 * order, under the device lock; the hazard detector checks it against every operation
 * still running. Running operations progress at rates set by the interference model.
 *
 * The simulation is lazy: it advances only as far as the host clock (work issued later
 * cannot start earlier) unless a thread waits, in which case it runs until the awaited
 * operation is done. It only ever stops on event times, so where it is stopped never
 * changes a result: two runs of one program give identical virtual times.
 *
 * Locking: one process-wide device lock (vg_lock/vg_unlock) guards every structure below
 * unless a field says otherwise. exec and rdv callbacks run with it held.
 */
#ifndef VG_H
#define VG_H

#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "vgpu.h"

#define VG_API __attribute__((visibility("default")))
#define VG_PRINTF(a, b) __attribute__((format(printf, a, b)))

/* ---- configuration (read once from VGPU_* variables) ---- */
typedef enum { VG_HAZARD_OFF, VG_HAZARD_WARN, VG_HAZARD_ABORT } vg_hazard_mode_t;

typedef struct vg_config {
    int device_count;          /* VGPU_DEVICES, default 8 */
    int max_connections;       /* CUDA_DEVICE_MAX_CONNECTIONS, default 8 */
    int timing_only;           /* VGPU_TIMING_ONLY */
    vg_hazard_mode_t hazard;   /* VGPU_HAZARD=off|warn|abort, default warn */
    int queue_depth;           /* VGPU_QUEUE_DEPTH: pending ops before the host blocks */
    double comm_timeout_s;     /* VGPU_COMM_TIMEOUT: rendezvous wait before reporting */
    char trace_path[4096];     /* VGPU_TRACE */
    int verbose;               /* VGPU_VERBOSE */
} vg_config_t;

VG_API const vg_config_t *vg_config(void);
/* Initialises the core once (profile, devices, config); cheap after the first call. */
VG_API void vg_init(void);
/* Prints "vgpu: <message>" to stderr. */
VG_API void vg_msg(const char *fmt, ...) VG_PRINTF(1, 2);
/* The global rank of this process (OMPI_COMM_WORLD_RANK, RANK, PMI_RANK; else 0). */
VG_API int vg_global_rank(void);

VG_API void vg_lock(void);
VG_API void vg_unlock(void);

/* ---- devices ---- */
VG_API const vgpu_profile_t *vg_profile(int dev);
VG_API int vg_current_device(void);             /* per thread */
VG_API cudaError_t vg_set_device(int dev);
/* Whether a device's primary context is active: any use of the device (selecting it,
 * allocating or issuing work on it, retaining its context) activates it. */
VG_API void vg_device_activate(int dev);
VG_API int vg_device_active(int dev);
/* Per-thread last error (cudaGetLastError semantics) and per-device sticky error. */
VG_API cudaError_t vg_record_error(cudaError_t e); /* stores e if != success, returns e */
VG_API cudaError_t vg_get_last_error(int reset);
VG_API cudaError_t vg_sticky_error(int dev);

/* Device properties and attributes (cudaDeviceAttr values) of the profile. */
VG_API cudaError_t vg_device_props(struct cudaDeviceProp *p, int dev);
VG_API cudaError_t vg_device_attr(int *value, int attr, int dev);

/* ---- memory ---- */
typedef enum { VG_MEM_DEVICE = 1, VG_MEM_HOST = 2, VG_MEM_POOL = 3, VG_MEM_MANAGED = 4 } vg_mem_kind_t;

typedef struct vg_alloc_info {
    uintptr_t base;
    size_t size;
    vg_mem_kind_t kind;
    int dev;
    uint64_t serial;  /* allocation number, for messages */
} vg_alloc_info_t;

/* Device-visible allocations. In timing-only mode VG_MEM_DEVICE/POOL memory is reserved
 * address space with no backing (host access faults); host memory is always real. */
VG_API cudaError_t vg_mem_alloc(void **p, size_t size, vg_mem_kind_t kind, int dev);
/* Frees p, which must be the base of a live allocation of that kind (any kind if 0). */
VG_API cudaError_t vg_mem_free(void *p, vg_mem_kind_t kind);
/* 1: [p, p+len) lies inside one live allocation (info filled when non-NULL);
 * 0: p is not device-visible memory (for example pageable host memory);
 * -1: it lies in an allocation that was freed (use after free; info describes it). */
VG_API int vg_mem_find(const void *p, size_t len, vg_alloc_info_t *info);
/* Stream-ordered allocation (cudaMallocAsync / cudaFreeAsync semantics, default pool). */
VG_API cudaError_t vg_pool_alloc(void **p, size_t size, cudaStream_t s);
VG_API cudaError_t vg_pool_free(void *p, cudaStream_t s);
VG_API void vg_mem_usage(int dev, size_t *now, size_t *peak);
/* The default pool's statistics (cudaMemPoolAttr*) and the device memory held in all. */
typedef struct vg_pool_stats {
    size_t device_reserved;   /* every kind, live + cached: what cudaMemGetInfo subtracts */
    size_t reserved, reserved_peak, used, used_peak; /* the pool alone */
} vg_pool_stats_t;
VG_API void vg_pool_stats(int dev, vg_pool_stats_t *st);
VG_API void vg_pool_reset_peak(int dev, int reserved); /* high watermark := current */
/* Releases cached pool blocks until at most keep bytes stay (cudaMemPoolTrimTo). */
VG_API void vg_pool_trim(int dev, size_t keep);
/* The default pool's reuse policy attr (0 opportunistic, 1 internal dependencies, 2 event
 * dependencies): sets it to value when set, returns it (1 allowed, the default). Only
 * opportunistic reuse changes what vg_pool_alloc does (mem.c). */
VG_API int vg_pool_policy(int dev, int attr, int set, int value);

/* ---- operations ---- */
typedef enum {
    VG_MARKER = 0,  /* zero-duration (event record, wait) */
    VG_COMPUTE,     /* kernels, GEMMs, memsets */
    VG_COMM,        /* collectives and point-to-point */
    VG_COPY,        /* memcpy; op->link is the direction (cudaMemcpyKind) */
    VG_HOST,        /* host function */
    VG_NCLASS
} vg_class_t;

typedef struct vg_range {
    uintptr_t lo;
    size_t len;
    int write;
} vg_range_t;

typedef struct vg_op vg_op_t;
typedef void (*vg_op_fn)(vg_op_t *op);

/* Operations that need peers (NCCL). Both callbacks run in the simulation with the device
 * lock held and must not block.
 * post: called once, when the op could start locally at virtual time t_ready; publishes
 *       what peers need (inputs, t_ready). Returns 0, or -1 on failure (the op is then
 *       completed at once with no effect and op->failed set).
 * poll: returns 1 when every peer has posted: sets *t_start (>= t_ready, identical on all
 *       ranks) and may update op->solo_ns; 0 to be asked again later; VG_RDV_LOCAL when
 *       every missing peer is an operation of this process (other devices driven by this
 *       process), so simulating on will post them; -1 on a failure it has already reported
 *       (mismatch, timeout): the op completes with no effect. */
#define VG_RDV_LOCAL 2
typedef struct vg_rdv_ops {
    int (*post)(vg_op_t *op, double t_ready);
    int (*poll)(vg_op_t *op, double *t_start);
} vg_rdv_ops_t;

/* A rendezvous op waiting at the head of a hardware queue for its peers (posted, not yet
 * matched), which holds every op behind it: what a deadlock detector needs (nccl). behind:
 * the first rendezvous ops queued after it on that queue, in order. */
#define VG_HEAD_BEHIND 8
typedef struct vg_rdv_head {
    vg_op_t *op;
    int dev, queue;
    int nbehind;
    vg_op_t *behind[VG_HEAD_BEHIND];
} vg_rdv_head_t;
/* Device lock held (a rendezvous callback holds it). Fills heads[0..max) with the waiting
 * rendezvous heads of every device, in (device, queue) order, and returns how many there
 * are (at most max). *every_queue: 1 when each hardware queue of every device that holds
 * one of them has such a head (a rendezvous op issued later on those devices can only
 * queue behind one). */
VG_API int vg_rdv_heads(vg_rdv_head_t *heads, int max, int *every_queue);
/* Device lock held. Ops issued plus ops completed by this process so far: unchanged while
 * nothing of its device work moves. */
VG_API uint64_t vg_progress_count(void);

#define VG_OP_INLINE_RANGES 6

struct vg_op {
    /* Filled by the creator before vg_submit. */
    const char *api;          /* static string: the API that made it */
    char name[64];            /* kernel name or detail for traces and messages */
    vg_class_t cls;
    int link;                 /* VG_COMM: bandwidth-sharing key; VG_COPY: direction */
    double solo_ns;           /* device time when running alone */
    double sm_fraction;       /* VG_COMPUTE: share of the device it fills (default 1) */
    uint64_t bytes;           /* bytes moved, for counters (copies, communication) */
    vg_op_fn exec;            /* functional effect at start; skipped in timing-only mode
                                 unless exec_always */
    vg_op_fn resolve;         /* at start, before the hazard and memory checks: declares
                                 the ranges only known when the op runs (the matrices a
                                 batched GEMM's device pointer arrays hold then); may be
                                 NULL; skipped in timing-only mode */
    int exec_always;
    int skip_mem_check;       /* ranges need not be live at start (a free's own block) */
    vg_op_fn release;         /* frees payload when the op is destroyed (may be NULL) */
    void *payload;
    const vg_rdv_ops_t *rdv;  /* non-NULL for rendezvous operations */
    char trace_args[96];      /* extra JSON members for the trace ("\"k\":v,..."), or "" */

    /* Owned by the core. */
    vg_range_t range_inline[VG_OP_INLINE_RANGES];
    vg_range_t *ranges;
    int nranges, cap_ranges;
    int dev;
    int failed;
    uint64_t seq;
    struct vg_stream *stream;
    struct vg_op *qnext;      /* hardware-queue FIFO link */
    struct vg_op **deps;
    int ndeps, cap_deps;
    int refs;
    int state;                /* VG_ST_* in sim.c */
    double t_issue, t_ready, t_start, t_end;
    double remaining, rate;
};

/* Creates an operation for the current device; never NULL (aborts on out of memory). */
VG_API vg_op_t *vg_op_new(const char *api, vg_class_t cls);
/* Declares a byte range the operation touches (exact ranges make exact hazards). */
VG_API void vg_op_add_range(vg_op_t *op, const void *p, size_t len, int write);
/* Allocates a zeroed payload of n bytes owned by the op (freed with it). */
VG_API void *vg_op_payload(vg_op_t *op, size_t n);
/* From an op's exec (device lock held): the op failed on the device, which takes the sticky
 * error err as after a kernel fault (every later synchronising call reports it). */
VG_API void vg_op_fail(vg_op_t *op, cudaError_t err);
/* Frees an op that was never submitted. */
VG_API void vg_op_discard(vg_op_t *op);

/* Enqueues op on stream s (0, cudaStreamLegacy, cudaStreamPerThread or a created stream)
 * and takes ownership of it in every case. Checks that every declared range lies in live
 * device-visible memory (cudaErrorInvalidValue otherwise, with a message) unless the op's
 * creator already did. Advances the host clock by the profile's launch cost. May block the
 * host (in virtual time) when the device queue is full. */
VG_API cudaError_t vg_submit(cudaStream_t s, vg_op_t *op);
/* Same, without the range check (for ranges the creator validated or host memory). */
VG_API cudaError_t vg_submit_unchecked(cudaStream_t s, vg_op_t *op);

/* ---- graphs by stream capture (graph.c; runtime semantics, the driver maps onto them) */
/* Starts capturing s (not the legacy stream: cudaErrorStreamCaptureUnsupported). */
VG_API cudaError_t vg_capture_begin(cudaStream_t s);
/* Ends the capture of s: *graph is the captured graph (cudaErrorIllegalState if none). */
VG_API cudaError_t vg_capture_end(cudaStream_t s, void **graph);
/* 1 while s captures, 0 otherwise, -1 for a bad stream. */
VG_API int vg_capture_active(cudaStream_t s);
/* An executable graph of graph (a reference to it). */
VG_API cudaError_t vg_graph_instantiate(void **exec, void *graph);
/* Enqueues one op on s that runs the graph's nodes in capture order. */
VG_API cudaError_t vg_graph_launch(void *exec, cudaStream_t s);
/* Destroys a graph or an executable graph (its nodes go with the last reference). */
VG_API cudaError_t vg_graph_release(void *graph);

/* ---- streams and events (runtime semantics; the driver API maps onto them) ---- */
VG_API cudaError_t vg_stream_create(cudaStream_t *s, unsigned flags, int priority);
VG_API cudaError_t vg_stream_destroy(cudaStream_t s);
VG_API cudaError_t vg_stream_sync(cudaStream_t s);
VG_API cudaError_t vg_stream_query(cudaStream_t s);
VG_API cudaError_t vg_stream_wait_event(cudaStream_t s, cudaEvent_t e, unsigned flags);
VG_API cudaError_t vg_stream_get_flags(cudaStream_t s, unsigned *flags);
VG_API cudaError_t vg_stream_get_priority(cudaStream_t s, int *priority);
VG_API cudaError_t vg_stream_get_device(cudaStream_t s, int *dev);
VG_API cudaError_t vg_stream_get_id(cudaStream_t s, unsigned long long *id);
/* cudaErrorInvalidResourceHandle for a handle that is not a live stream. */
VG_API cudaError_t vg_stream_check(cudaStream_t s);
/* What a kernel launch (runtime, driver, or inside cuBLAS) checks of its stream: a live
 * stream of the calling thread's current device. A stream of another device fails with
 * cudaErrorInvalidResourceHandle (one message naming api and both devices), as CUDA fails
 * it: the CUDA C++ Programming Guide (Multi-Device System, "Stream and Event Behavior")
 * says "a kernel launch will fail if it is issued to a stream that is not associated to the
 * current device"; the code reported for it is 400, cudaErrorInvalidResourceHandle /
 * CUDA_ERROR_INVALID_HANDLE (JuliaGPU/KernelAbstractions.jl PR 294 shows the driver's
 * "invalid resource handle (code 400, ERROR_INVALID_HANDLE)"; HIP adopted the same
 * hipErrorInvalidResourceHandle for it, ROCm/rocm-systems PR 852). Copies and memsets are
 * not launches: CUDA allows them on another device's stream, and so does the vgpu. */
VG_API cudaError_t vg_stream_check_current(cudaStream_t s, const char *api);

VG_API cudaError_t vg_event_create(cudaEvent_t *e, unsigned flags);
VG_API cudaError_t vg_event_destroy(cudaEvent_t e);
VG_API cudaError_t vg_event_record(cudaEvent_t e, cudaStream_t s, unsigned flags);
VG_API cudaError_t vg_event_query(cudaEvent_t e);
VG_API cudaError_t vg_event_sync(cudaEvent_t e);
VG_API cudaError_t vg_event_elapsed(float *ms, cudaEvent_t a, cudaEvent_t b);

VG_API cudaError_t vg_device_sync(void);     /* current device */
VG_API void vg_sync_all(void);               /* every device; used at exit and by NCCL */

/* ---- shared operations (runtime and driver) ---- */
/* A 2D copy (1D: height 1, pitches = width); blocking waits for it. kind may be
 * cudaMemcpyDefault (inferred from the pointers). */
VG_API cudaError_t vg_memcpy2d(void *dst, size_t dpitch, const void *src, size_t spitch,
                               size_t width, size_t height, enum cudaMemcpyKind kind,
                               cudaStream_t s, int blocking, const char *api);
VG_API cudaError_t vg_memset(void *dst, int value, size_t n, cudaStream_t s, int blocking,
                             const char *api);
VG_API cudaError_t vg_host_func(cudaStream_t s, cudaHostFn_t fn, void *data);

/* ---- cost model helpers shared by the API libraries ---- */
/* GEMM solo time: flops = 2*m*n*k*batch at the dtype's peak times a shape efficiency
 * (wave quantisation over gemm_tile tiles and a K factor k/(k+gemm_k_half)), plus the
 * minimum kernel time. dtype_bits: 32 (fp32, non-tensor), 19 (tf32), 16 (fp16), 17 (bf16),
 * 64 (fp64, at the fp32 peak: see cost.c). */
VG_API double vg_cost_gemm(const vgpu_profile_t *p, double m, double n, double k,
                           double batch, int dtype_bits);
VG_API double vg_cost_mem(const vgpu_profile_t *p, double bytes_read_plus_written);
VG_API double vg_cost_copy(const vgpu_profile_t *p, double bytes, int kind);

/* ---- NCCL ---- */
/* libnccl installs how a unique id is marked for representative mode; vgpu_nccl_represent
 * (vgpu.h, in the core so programs need only libvgpu) calls it. */
VG_API void vg_nccl_set_represent_hook(int (*fn)(void *id, int base, int stride));

/* ---- NVTX (src/nvtx/inject.c hands the program's NVTX calls to these) ---- */
/* Each does nothing without VGPU_TRACE; thread-safe. The names and ranges appear in the
 * trace (core/nvtx_trace.c): a named stream's lane carries its name, ranges and marks
 * go on a lane per host thread at the host's virtual time. */
VG_API void vg_trace_name_stream(cudaStream_t s, const char *name);
VG_API void vg_trace_name_thread(const char *name); /* the calling thread */
typedef enum { VG_NVTX_PUSH, VG_NVTX_POP, VG_NVTX_MARK } vg_nvtx_kind_t;
/* A push, pop or mark of the calling thread (domain "" for NVTX's default domain).
 * Returns the nesting depth before the call (push, mark) or after it (pop), NVTX's own
 * return values; -1 when not tracing or on a pop with nothing pushed. */
VG_API int vg_trace_nvtx(vg_nvtx_kind_t kind, const char *domain, const char *msg);

/* ---- kernels (registry behind vgpu_register_kernel) ---- */
typedef struct vg_kernel {
    const void *func;
    vgpu_kernel_desc_t d;
    char name[128];
} vg_kernel_t;
/* Looks up a kernel by host stub or by the CUfunction handed out for it; NULL if none. */
VG_API const vg_kernel_t *vg_kernel_find(const void *func_or_cufunction);
/* Launch attribute ids the CUDA 13 headers define (0-14 and 16): a launch naming any other
 * fails with cudaErrorInvalidValue, as a real driver's does. Returns 1 when valid; on an
 * unknown id prints one line naming it and the API. */
VG_API int vg_launch_attr_id_valid(int id, const char *api);
/* Builds and submits the launch of a registered kernel (shared by runtime and driver
 * launches). args follow the cudaLaunchKernel convention. */
VG_API cudaError_t vg_launch(const void *func, dim3 grid, dim3 block, void **args,
                             size_t shmem, cudaStream_t s, const char *api);

#endif
