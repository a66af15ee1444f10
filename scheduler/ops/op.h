/*
 * scheduler/ops/: operation records, one table per op kind (dh_op_kind_ops_t). It owns the
 * capture of a call into an owned record (deep copies), its description and signature for
 * profiles and plans, its memory footprint, its replay on a physical stream, the table of
 * live stream-ordered allocations (memtab.h), per-strand cuBLAS/cuBLASLt state and the
 * test breaks of single rules (breaks.h). It may call real/ and plan/'s formats; it never
 * calls the scheduler: records know nothing of strands, queues or modes.
 *
 * op.h: operation records, the unit the shim defers and re-issues.
 *
 * A wrapper that may defer a call captures it into a dh_op_t: the kind, the framework
 * stream it was issued on, and a payload that OWNS a copy of everything the call pointed
 * at which the framework may change or free after the call returns (DESIGN.md invariant
 * 3): kernel arguments (sizes from cudaFuncGetParamInfo/cuFuncGetParamInfo or the packed
 * `extra` buffer), launch attribute arrays, host-mode alpha/beta, cuBLASLt matmul
 * descriptors, layouts, preference and algo (cloned attribute by attribute), and the
 * bytes of a pageable host source of a host-to-device copy. Pointers into device memory
 * are kept as pointers: the device memory itself is ordered by streams, not by the call.
 *
 * The dispatcher later replays the op onto a physical stream with dh_op_replay(), using
 * the real entry points (never the wrappers) and, for cuBLAS/cuBLASLt, the per-strand
 * handle and workspace of the strand the op runs on.
 *
 * Ownership: a capture (or dh_op_alloc()) returns an op owned by the caller; dh_op_free()
 * releases it and its payload. Not thread-safe per op (one thread touches an op at a time:
 * the capturing thread until it hands the op to the scheduler, then the dispatcher).
 */
#ifndef DH_OP_H
#define DH_OP_H

#include <stddef.h>
#include <stdint.h>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_runtime_api.h>

#include "common/status.h"

/* X(id): every kind of captured operation. What an op of a kind does is its kind's table of
 * behaviours (dh_op_kind_ops_t below), defined next to the kind's capture and replay code:
 * op.c (MEMSET, HOST_FUNC, EVENT_RECORD, EVENT_WAIT, FREE_ASYNC), op_kernel.c (KERNEL,
 * CU_KERNEL), op_copy.c (MEMCPY), op_blas.c (GEMM), op_lt.c (LT_MATMUL); NCCL (one
 * collective or point-to-point call) and NCCL_GROUP (an ncclGroupStart..End batch) are
 * registered by nccl_wrap/nccl_op.c through dh_op_kind_register(). */
#define DH_OP_KINDS(X) \
    X(KERNEL)          \
    X(CU_KERNEL)       \
    X(MEMCPY)          \
    X(MEMSET)          \
    X(HOST_FUNC)       \
    X(GEMM)            \
    X(LT_MATMUL)       \
    X(NCCL)            \
    X(NCCL_GROUP)      \
    X(EVENT_RECORD)    \
    X(EVENT_WAIT)      \
    X(FREE_ASYNC)      \
    X(GRAPH_LAUNCH)

typedef enum dh_op_kind {
#define DH__OP_KIND_ENUM(id) DH_OP_##id,
    DH_OP_KINDS(DH__OP_KIND_ENUM)
#undef DH__OP_KIND_ENUM
    DH_OP_KIND_COUNT
} dh_op_kind_t;

const char *dh_op_kind_name(dh_op_kind_t k);

/* What a replay needs besides the op: where and with what it runs. Filled by the
 * dispatcher. */
typedef struct dh_replay_ctx {
    cudaStream_t stream;          /* the physical stream */
    int strand;                   /* 0 or 1 */
    int device;
    cublasHandle_t blas;          /* this (device, strand)'s own cuBLAS handle */
    cublasLtHandle_t blaslt;      /* this device's own cuBLASLt handle */
    /* The workspace a BLAS op runs with. NULL: the one the framework gave at the call (its
     * pointer and size as captured): strand 0 runs in program order on the framework's own
     * stream, where the framework's workspace is ordered as it was without the shim, so it
     * needs none of the shim's (DESIGN.md invariant 11); so does a strand-1 op that the
     * dispatcher orders with strand 0 because it has no workspace of its own for it. Else
     * the shim's own for the strand (at least the captured size; the captured SIZE is what
     * the library is told, so its choice of algorithm is the framework's). */
    void *workspace;
    size_t workspace_size;        /* its size in bytes (with workspace) */
    cudaEvent_t record_event;     /* EVENT_RECORD: the shim-owned event to record */
    cudaEvent_t wait_event;       /* EVENT_WAIT: the shim-owned event of the record */
} dh_replay_ctx_t;

typedef struct dh_op dh_op_t;
typedef struct dh_op_access dh_op_access_t;

struct dh_op {
    dh_op_kind_t kind;
    int device;                   /* current device of the capturing thread */
    cudaStream_t stream;          /* framework stream as passed (NULL = legacy) */
    uint64_t seq;                 /* program order, set by the scheduler */
    int strand;                   /* set by the strand tracker; 0 unless two-strand */
    uint64_t group;               /* co-execution group, set by the strand tracker */
    int thread;                   /* small id of the capturing thread */
    dh_op_t *next;                /* scheduler queue link */
    dh_op_t *dep;                 /* EVENT_WAIT: the record it waits for (scheduler) */
    cudaEvent_t event;            /* EVENT_*: the framework event */
    void *shim_event;             /* EVENT_RECORD: pooled event instance (scheduler) */
    size_t free_bytes;            /* FREE_ASYNC: size of the block (scheduler) */
    void *pool_blk;               /* FREE_ASYNC: its parked block (mempool.h), or NULL */
    int pinned;                   /* set by the capturer: never co-run with the other strand
                                     (a collective of a communicator the policy pins) */
    int lgroup;                   /* plan mode: the template group (-1 none), for the order */
    int after0;                   /* two strands: issue after the group's strand-0 ops (it
                                     depends on one of them) */
    int issue_only;               /* EVENT_WAIT that orders issue only (nccl_wrap/chain.h):
                                     with one hardware queue issue order is run order, and
                                     it is not replayed */
    int nacc;                     /* two-strand modes: accesses in acc, -1 anything */
    dh_op_access_t *acc;          /* owned (malloc), or NULL */
    uint64_t prof;                /* profile mode: record number + 1, 0 none */
    size_t payload_size;
    unsigned char payload[];      /* kind-specific, owned; see op.c */
};

/* ---- capture (framework thread). Each returns DH_OK and *out, or an error status when
 * the call cannot be captured (the wrapper then drains and forwards it). The arguments
 * are those of the API call. ---- */
dh_status_t dh_op_capture_kernel(dh_op_t **out, const void *func, dim3 grid, dim3 block,
                                 void **args, size_t shmem, cudaStream_t s);
/* A launch through __cudaLaunchKernel (nvcc 13's <<<>>>): a KERNEL op replayed through
 * the same entry point. */
dh_status_t dh_op_capture_kernel_handle(dh_op_t **out, cudaKernel_t kernel, dim3 grid,
                                        dim3 block, void **args, size_t shmem,
                                        cudaStream_t s);
dh_status_t dh_op_capture_kernel_ex(dh_op_t **out, const cudaLaunchConfig_t *cfg,
                                    const void *func, void **args);
dh_status_t dh_op_capture_cu_kernel(dh_op_t **out, CUfunction f, unsigned gx, unsigned gy,
                                    unsigned gz, unsigned bx, unsigned by, unsigned bz,
                                    unsigned shmem, CUstream s, void **params, void **extra);
dh_status_t dh_op_capture_cu_kernel_ex(dh_op_t **out, const CUlaunchConfig *cfg, CUfunction f,
                                       void **params, void **extra);
dh_status_t dh_op_capture_memcpy(dh_op_t **out, void *dst, const void *src, size_t n,
                                 enum cudaMemcpyKind kind, cudaStream_t s);
dh_status_t dh_op_capture_memset(dh_op_t **out, void *dst, int value, size_t n,
                                 cudaStream_t s);
dh_status_t dh_op_capture_host_func(dh_op_t **out, cudaStream_t s, cudaHostFn_t fn,
                                    void *data);
/* cuBLAS: the handle's state (stream, math/pointer/atomics mode, workspace pointer and
 * size) is read from the shim's mirror of the framework handle, see blas_state below. */
dh_status_t dh_op_capture_gemm_ex(dh_op_t **out, cublasHandle_t h, cublasOperation_t ta,
                                  cublasOperation_t tb, int m, int n, int k,
                                  const void *alpha, const void *A, cudaDataType at, int lda,
                                  const void *B, cudaDataType bt, int ldb, const void *beta,
                                  void *C, cudaDataType ct, int ldc,
                                  cublasComputeType_t compute, cublasGemmAlgo_t algo);
dh_status_t dh_op_capture_sgemm(dh_op_t **out, cublasHandle_t h, cublasOperation_t ta,
                                cublasOperation_t tb, int m, int n, int k, const float *alpha,
                                const float *A, int lda, const float *B, int ldb,
                                const float *beta, float *C, int ldc);
/* Strided-batched GEMMs (PyTorch's bmm/baddbmm, attention): the same state and scalar
 * rules as above, batchCount GEMMs at the given element strides. */
dh_status_t dh_op_capture_sgemm_strided(dh_op_t **out, cublasHandle_t h, cublasOperation_t ta,
                                        cublasOperation_t tb, int m, int n, int k,
                                        const float *alpha, const float *A, int lda,
                                        long long sa, const float *B, int ldb, long long sb,
                                        const float *beta, float *C, int ldc, long long sc,
                                        int batch);
dh_status_t dh_op_capture_gemm_strided_ex(dh_op_t **out, cublasHandle_t h, cublasOperation_t ta,
                                          cublasOperation_t tb, int m, int n, int k,
                                          const void *alpha, const void *A, cudaDataType at,
                                          int lda, long long sa, const void *B, cudaDataType bt,
                                          int ldb, long long sb, const void *beta, void *C,
                                          cudaDataType ct, int ldc, long long sc, int batch,
                                          cublasComputeType_t compute, cublasGemmAlgo_t algo);
dh_status_t dh_op_capture_lt_matmul(dh_op_t **out, cublasLtHandle_t h,
                                    cublasLtMatmulDesc_t desc, const void *alpha,
                                    const void *A, cublasLtMatrixLayout_t Adesc, const void *B,
                                    cublasLtMatrixLayout_t Bdesc, const void *beta,
                                    const void *C, cublasLtMatrixLayout_t Cdesc, void *D,
                                    cublasLtMatrixLayout_t Ddesc,
                                    const cublasLtMatmulAlgo_t *algo, void *workspace,
                                    size_t workspace_size, cudaStream_t s);
dh_status_t dh_op_capture_event_record(dh_op_t **out, cudaEvent_t e, cudaStream_t s,
                                       unsigned flags);
dh_status_t dh_op_capture_event_wait(dh_op_t **out, cudaStream_t s, cudaEvent_t e,
                                     unsigned flags);
dh_status_t dh_op_capture_free_async(dh_op_t **out, void *p, cudaStream_t s);
/* A launch of an executable CUDA graph (cudaGraphLaunch, or cuGraphLaunch when driver is
 * set) on s (op_graph.c). What a graph touches is not known: the op orders like a barrier
 * of everything (no footprint), and is never paired with the other strand. The first
 * launch of each executable graph is forwarded (only the library can judge the handle);
 * later ones are deferred. */
dh_status_t dh_op_capture_graph_launch(dh_op_t **out, void *exec, cudaStream_t s, int driver);
/* FREE_ASYNC: the pointer it frees (NULL for any other kind). */
void *dh_op_free_ptr(const dh_op_t *op);

/* Replays op on ctx through its kind's table (dispatcher thread). Returns the API's status
 * as an int (cudaError_t, CUresult or cublasStatus_t: 0 is success in all three);
 * cudaErrorInvalidValue for a kind without a table. */
int dh_op_replay(dh_op_t *op, const dh_replay_ctx_t *ctx);

/* ---- what an op is and what it touches (op_desc.c) ---- */

/* The op's identity for profiles and plan matching. sig hashes the kind and the static
 * parameters (kernel name and block, GEMM transposes and types, collective, data type,
 * reduction and communicator); shape hashes the sizes that may vary with the data (grid,
 * m/n/k, counts). cls is a dh_opclass_t (plan/plan.h). name is for people and for
 * `dhelix profile-pairs` (docs/plan-format.md gives its forms). */
#define DH_OP_P2P_MAX 40

typedef struct dh_op_desc {
    int cls;
    uint64_t sig, shape;
    char name[64];
    const void *comm;             /* NCCL: the registry entry of its (first) communicator */
    char p2p[DH_OP_P2P_MAX];      /* NCCL: its point-to-point calls in call order, each "s"
                                     (send) or "r" (receive) and the peer's rank in the
                                     communicator, space-separated ("s1 r3"); "" none; "?"
                                     when they do not fit or the group mixes communicators
                                     or collectives in (nccl_wrap/nccl_op.c) */
    uint64_t bytes;               /* a collective's or copy's payload on this rank */
    double flops;                 /* GEMMs: 2mnk x batch */
} dh_op_desc_t;

/* Fills *d. Any thread; the op is not modified. Kernel names are looked up once per
 * function (cudaFuncGetName / cuFuncGetName, else the symbol or object offset). */
void dh_op_describe(const dh_op_t *op, dh_op_desc_t *d);

/* One range of memory an op reads or writes. write: 0 read, 1 written, 2 maybe written
 * (a kernel's pointer argument: the shim cannot tell what a kernel does with it). */
struct dh_op_access {
    uintptr_t lo;
    size_t len;
    int write;
    uint64_t born;                /* when its allocation was made (memtab.h), 0 unknown */
    int astrand;                  /* the strand the allocation was made for, -1 unknown */
    uintptr_t abase;              /* where that allocation starts, 0 unknown: with born, which
                                     allocation it is (deps.c) */
};

#define DH_ACCESS_MAYBE 2

#define DH_OP_ACCESS_MAX 12

/* The memory op reads and writes into acc[0..max): exact ranges for copies, GEMMs and
 * collectives; for kernels and cuBLASLt, the whole allocation (memtab.h) that each
 * pointer-sized argument value falls in, as "maybe written" (arguments that are not
 * pointers to known allocations are ignored). Returns the count, or -1 when the op may
 * touch anything (a host function, more ranges than max). Call on the capturing thread,
 * when the allocation table still describes the memory the op was given.
 *
 * Two accesses conflict when they overlap and one of them writes (sched.c): a "maybe"
 * access writes when its allocation is young (made during the current iteration: the
 * tensors a micro-batch produces) and reads when it is older (weights, gradient buffers,
 * optimizer state, which the kernels of two micro-batches share all the time). An older
 * allocation some op of the pair certainly writes (a GEMM accumulating into the gradient
 * buffer) is the exception: deps.h (dh_deps_taint_t) orders the other strand's ops on it
 * after all of that strand's work. Beyond that, a program whose kernels write long-lived
 * memory that the other micro-batch also uses (a shared scratch buffer other than
 * cuBLAS's workspace) is outside what the shim can see (docs/shim.md, "Running a plan":
 * Limits). */
int dh_op_footprint(const dh_op_t *op, dh_op_access_t *acc, int max);

/* Bytes the payload holds (for the deferred-bytes limit and statistics). */
size_t dh_op_bytes(const dh_op_t *op);

void dh_op_free(dh_op_t *op);

/* ---- kinds as tables of behaviours ---- */

/* A footprint under construction (dh_op_footprint): accesses go into a[0..max); over is
 * set when they do not fit or the op may touch anything. */
typedef struct dh_op_fp {
    dh_op_access_t *a;
    int n, max, over;
} dh_op_fp_t;

/* An exact range [lo, lo+len), stamped with the allocation it lies in (memtab.h); a range
 * equal to one already there only raises that one's write flag. Ignored when lo or len is
 * 0. */
void dh_op_fp_range(dh_op_fp_t *fp, uintptr_t lo, size_t len, int write);
/* The whole allocation p points into, as a range (unknown memory: its first byte). */
void dh_op_fp_alloc(dh_op_fp_t *fp, const void *p, int write);
/* An exact range appended as it is, stamped like dh_op_fp_range but never merged. */
void dh_op_fp_append(dh_op_fp_t *fp, uintptr_t lo, size_t len, int write);

/* 64-bit FNV-1a, the hash of every signature and shape (profiles and plans store them:
 * changing it invalidates every plan). */
#define DH_OP_HASH_INIT 0xcbf29ce484222325ull
uint64_t dh_op_hash(uint64_t h, const void *p, size_t n);
static inline uint64_t dh_op_hash_u64(uint64_t h, uint64_t v) { return dh_op_hash(h, &v, sizeof v); }

/* The API family whose status type a kind's replay returns. */
typedef enum dh_op_api {
    DH_OP_API_RUNTIME,      /* cudaError_t */
    DH_OP_API_DRIVER,       /* CUresult */
    DH_OP_API_CUBLAS,       /* cublasStatus_t (cuBLAS and cuBLASLt) */
    DH_OP_API_NCCL,         /* its replay reports failures itself (nccl_op.h) and returns 0 */
} dh_op_api_t;

enum {
    DH_OPK_BLAS = 1u << 0,  /* its replay needs the strand's cuBLAS/cuBLASLt handle and
                               workspace in the replay context */
    DH_OPK_TIMED = 1u << 1, /* work on a stream: profile mode brackets it with events */
    DH_OPK_ON_DEVICE = 1u << 2, /* CUDA refuses it at the call into a stream of another
                                   device than the current one: dh_op_validate forwards */
};

/* What every op of one kind does. The scheduler never looks inside a payload: it asks the
 * kind's table. Tables are immutable and live for the process. */
typedef struct dh_op_kind_ops {
    const char *name;          /* the kind's name, as in DH_OP_KINDS ("GEMM") */
    int cls;                   /* the dh_opclass_t (plan/plan.h) of its ops, which describe
                                  may refine (a kernel named like a collective is COMM) */
    unsigned flags;            /* DH_OPK_* */
    dh_op_api_t api;           /* the status type of replay */
    /* Fills d (zeroed, d->cls = cls, d->sig = hash of the kind, d->shape = DH_OP_HASH_INIT
     * on entry): signature, shape, name, bytes, flops, comm. NULL: the defaults stay and
     * the name is the kind's. */
    void (*describe)(const dh_op_t *op, dh_op_desc_t *d);
    /* Adds the memory the op reads and writes to fp. NULL: it may touch anything. */
    void (*footprint)(const dh_op_t *op, dh_op_fp_t *fp);
    /* At capture, before the op is deferred: the status the real call would return now for
     * these arguments (0 when it would be accepted), or -1 when only the library can tell;
     * a non-zero answer makes the wrapper forward the call instead (issue 13). NULL:
     * nothing to check beyond what the capture itself refuses. */
    int (*validate)(const dh_op_t *op);
    /* After validate said -1 and the call was forwarded: the library answered rc (the
     * kind's api). NULL: nothing to learn. */
    void (*learn)(const dh_op_t *op, int rc);
    /* Issues the op on ctx->stream with the real entry points; the API's status as an int
     * (cudaError_t, CUresult or cublasStatus_t: 0 is success in all three). */
    int (*replay)(dh_op_t *op, const dh_replay_ctx_t *ctx);
    /* Releases what the payload owns outside the op's own allocation. NULL: nothing. */
    void (*release)(dh_op_t *op);
    /* DH_OPK_BLAS kinds: the bytes of workspace the framework gave the call (0: none, the
     * library's default), which a replay on the shim's own workspace needs. */
    size_t (*workspace)(const dh_op_t *op);
} dh_op_kind_ops_t;

/* Installs the table of kind k (a kind defined outside scheduler/: NCCL, NCCL_GROUP). Call
 * before the first op of that kind is made; installing the same table again is a no-op.
 * DH_ERR_INVALID for a kind out of range or one that already has another table.
 * Thread-safe. */
dh_status_t dh_op_kind_register(dh_op_kind_t k, const dh_op_kind_ops_t *ops);
/* The table of k, NULL when none is installed. Any thread. */
const dh_op_kind_ops_t *dh_op_kind_ops(dh_op_kind_t k);

/* A new op of kind k on stream s of device, with payload bytes of payload (uninitialised)
 * and every other header field zero. Owned by the caller (dh_op_free). NULL when out of
 * memory. For modules that capture a kind; the capture functions above use it too. */
dh_op_t *dh_op_alloc(dh_op_kind_t k, cudaStream_t s, int device, size_t payload);

/* The kind's table's validate (0 when it has none; for DH_OPK_ON_DEVICE kinds, first the
 * stream's device against the current one), and learn (nothing when it has none).
 * Capturing thread. */
int dh_op_validate(const dh_op_t *op);
void dh_op_learn(const dh_op_t *op, int rc);

/* A process-wide set of static signatures the real library has accepted (the answers
 * validate cannot know: which type combinations cuBLAS implements). Lock-free; a full set
 * answers "unknown" (the call is then forwarded, which is always correct). */
int dh_op_accepted(uint64_t key);
/* A stream was destroyed: forget what dh_op_validate learnt of streams' devices. */
void dh_op_streams_changed(void);
void dh_op_accept(uint64_t key);

/* A replay of op failed with status rc (its kind's api): the cudaError_t a program is told
 * when it is reported later. Runtime errors stay as they are; driver errors become the
 * runtime error of the same meaning (CUDA numbers the shared ones alike), else
 * cudaErrorUnknown; a cuBLAS failure becomes the CUDA error the library left on this
 * thread (a failed launch inside it), else cudaErrorUnknown: call it on the replaying
 * thread right after the replay. */
int dh_op_status_to_cuda(const dh_op_t *op, int rc);

/* A runtime error as the driver API reports it (CUDA_ERROR_UNKNOWN where the two APIs
 * have no common code). */
CUresult dh_cuda_to_cu(int cuda_err);

/* ---- the shim's mirror of framework cuBLAS handles ----
 * Wrappers of cublasSetStream/SetWorkspace/SetMathMode/SetPointerMode/SetAtomicsMode
 * forward the call and record the setting here, so a captured GEMM knows the state its
 * handle had at the call. Thread-safe. */
typedef struct dh_blas_state {
    cudaStream_t stream;
    void *workspace;
    size_t workspace_size;
    cublasMath_t math;
    cublasPointerMode_t pointer;
    cublasAtomicsMode_t atomics;
    cublasEmulationStrategy_t emulation; /* which fp32 emulation the math mode may use */
} dh_blas_state_t;

void dh_blas_state_get(cublasHandle_t h, dh_blas_state_t *out);
void dh_blas_state_set_stream(cublasHandle_t h, cudaStream_t s);   /* resets workspace */
void dh_blas_state_set_workspace(cublasHandle_t h, void *ws, size_t size);
void dh_blas_state_set_math(cublasHandle_t h, cublasMath_t m);
void dh_blas_state_set_pointer(cublasHandle_t h, cublasPointerMode_t m);
void dh_blas_state_set_atomics(cublasHandle_t h, cublasAtomicsMode_t m);
void dh_blas_state_set_emulation(cublasHandle_t h, cublasEmulationStrategy_t e);
void dh_blas_state_forget(cublasHandle_t h);                        /* cublasDestroy */

#endif
