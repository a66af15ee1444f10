/*
 * scheduler/dispatch/: submission, drains, bounded lag and the dispatcher thread. It owns
 * the queue of captured ops in program order, virtual streams and shim events, the
 * dispatcher's replay and ordering of groups onto two physical streams (dispatch.c,
 * order.c), what an op must follow (deps.h) and what held pairing back (pairing.h). What
 * differs between modes it asks of the mode's table (modes/mode.h); it may call mem/, ops/
 * and real/, and modes/ only through that table.
 *
 * scheduler.h: what the wrappers ask of the scheduler.
 *
 * Pattern of a wrapper for a call that enqueues stream work:
 *
 *     if (!dh_sched_deferring())            -> forward at once (passthrough, or a call
 *                                              made by the dispatcher itself)
 *     if (dh_op_capture_X(&op, ...) != DH_OK) { dh_sched_drain(DH_DRAIN_UNCAPTURABLE);
 *                                              forward }
 *     return dh_sched_submit(op);          -> the API's success value
 *
 * and for a call that makes the host wait or observes device progress:
 *
 *     if (dh_sched_deferring()) dh_sched_drain(DH_DRAIN_<REASON>);   then forward.
 *
 * Errors of deferred operations: the dispatcher replays an op after its wrapper returned
 * success; a replay that fails is reported once (log), counted, and its status is kept
 * as the device's pending error, which the next synchronising call on that device
 * returns in place of success (the way CUDA reports asynchronous errors).
 *
 * All functions are thread-safe.
 */
#ifndef DH_SCHED_H
#define DH_SCHED_H

#include <stdint.h>

#include "common/config.h"
#include "op.h"

/* X(id, description): why the framework thread waited for the dispatcher. */
#define DH_DRAIN_REASONS(X)                                                              \
    X(STREAM_SYNC, "cudaStreamSynchronize: the host waits for the stream")               \
    X(DEVICE_SYNC, "cudaDeviceSynchronize: the host waits for the device")               \
    X(EVENT_SYNC, "cudaEventSynchronize: the host waits for the event's record")         \
    X(EVENT_ELAPSED, "cudaEventElapsedTime: both records must have run")                 \
    X(STREAM_QUERY, "cudaStreamQuery: reports the stream's progress")                    \
    X(BLOCKING_COPY, "a copy that returns when done (cudaMemcpy, device to pageable)")   \
    X(FREE, "cudaFree/cudaFreeHost synchronise the device")                              \
    X(CAPTURE, "graph capture: everything passes through until it ends")                 \
    X(UNCAPTURABLE, "a call the shim cannot defer is forwarded in program order")        \
    X(LEARN, "the first call of a signature only the library can judge is forwarded")   \
    X(STREAM_DESTROY, "a stream is destroyed: its work is issued first")                 \
    X(LAG, "bounded lag: queued operations or deferred-free bytes over the limit")       \
    X(EXIT, "process exit")

typedef enum dh_drain_reason {
#define DH__DRAIN_ENUM(id, d) DH_DRAIN_##id,
    DH_DRAIN_REASONS(DH__DRAIN_ENUM)
#undef DH__DRAIN_ENUM
    DH_DRAIN_COUNT
} dh_drain_reason_t;

/* Nonzero when calls on this thread are to be captured: the mode defers (not
 * passthrough), the scheduler is healthy (no fallback), no graph capture is under way,
 * and the caller is not the dispatcher. One relaxed load and a thread-local read. */
int dh_sched_deferring(void);

/* Takes ownership of a captured op and queues it; returns 0. Never fails: on an internal
 * error the scheduler falls back to passthrough (drains, warns once) and replays op at
 * once. */
int dh_sched_submit(dh_op_t *op);

/* Issues every queued op of every device and waits until the dispatcher has replayed
 * them. A replay that failed leaves its error pending (dh_sched_error_take): a drain
 * never consumes it, whatever called it (DESIGN.md invariant 8). */
void dh_sched_drain(dh_drain_reason_t why);

/* The first failure of a deferred op's replay that no call has reported yet, as the
 * cudaError_t the program is told (op.h dh_op_status_to_cuda), 0 when none. take clears
 * it, peek does not. The wrappers of calls that report asynchronous errors (the runtime's
 * and the driver's synchronising calls, cudaGetLastError, cudaPeekAtLastError, a runtime
 * call forwarded after a drain) return it in place of their own success. Any thread; one
 * relaxed load when nothing is pending. */
int dh_sched_error_take(void);
/* A runtime or driver status that CUDA keeps for every later call of the process (the
 * context is unusable: illegal address, launch failure, ...). */
int dh_sched_sticky_error(int cuda_err);
/* A call returned such an error: every later call fails at the call in a program without
 * the shim, which a deferred call could not do, so the shim drains and forwards everything
 * from now on (once; warns once). Any thread; not from the dispatcher. */
void dh_sched_poisoned(int cuda_err);

/* Counts a capture whose validate did not let it be deferred (invalid: 1, learning: 0). */
void dh_sched_count_rejected(int invalid);
int dh_sched_error_peek(void);

/* The calling wrapper has just forwarded a call that enqueues work on a framework stream
 * itself (after a drain): strand-1 work captured from now on must follow it. Call it after
 * the real call returned. */
void dh_sched_forwarded(void);

/* The framework destroys stream s: forget its physical streams (after a drain). */
void dh_sched_stream_forget(cudaStream_t s);

/* Event bookkeeping for wrappers of cudaEventQuery/Synchronize/ElapsedTime:
 * 1 if the latest record of e in program order has not been replayed yet. */
int dh_sched_event_pending(cudaEvent_t e);
/* Asks the dispatcher to issue what it holds back without waiting (a query polled the
 * event of a queued record). */
void dh_sched_kick(void);

/* The framework event e is being destroyed: forget its records (a new event may reuse
 * the handle, and a wait on a never-recorded event is a no-op). */
void dh_sched_event_forget(cudaEvent_t e);

/* The framework destroys e while the latest record of it is still queued: returns 1 and
 * destroys it later, right after that record is replayed (through the runtime, or the
 * driver when driver is nonzero), which is what CUDA itself does with an event whose
 * record has not completed ("resources are released asynchronously"); the handle stays
 * the framework's until then, so no new event can get it. Returns 0 when nothing is
 * queued: the caller destroys it now. PyTorch's ProcessGroupNCCL destroys the events of
 * every finished collective's Work; draining for each (as before) left nothing to pair. */
int dh_sched_event_destroy_later(cudaEvent_t e, int driver);

/* The physical stream on which stream-ordered memory for the calling thread's next op on
 * framework stream s must be allocated (cudaMallocAsync): the strand that op will run on,
 * so the allocation is ordered with its uses. NULL when s itself is right (or on
 * failure, where s is safe too). */
cudaStream_t dh_sched_alloc_stream(cudaStream_t s);
/* Remembers the size of a stream-ordered allocation, for the deferred-free limit;
 * dh_sched_alloc_take forgets it and returns it (0 if unknown). */
void dh_sched_alloc_note(void *p, size_t size);
size_t dh_sched_alloc_take(void *p);
/* A block of exactly size bytes whose captured free the issue order puts before every use
 * of an allocation made now on framework stream s (mempool.h), or NULL: then allocate as
 * usual. The caller notes the block like a new allocation (dh_sched_alloc_note). Framework
 * thread; takes the scheduler's lock. */
void *dh_sched_alloc_reuse(size_t size, cudaStream_t s);
/* The scheduler's op count now: the stamp of an allocation made now (memtab.h). */
uint64_t dh_sched_stamp(void);

/* Nonzero when the configured mode may defer, so the cuBLAS handle state must be
 * mirrored (even while a graph capture passes calls through). Constant after load. */
int dh_sched_mirroring(void);

/* Graph capture: cudaStreamBeginCapture drains and enters pass-through until the
 * matching cudaStreamEndCapture. */
void dh_sched_capture_begin(void);
void dh_sched_capture_end(void);

/* Allocator policy (invariant 5): set by the constructor after checking
 * PYTORCH_CUDA_ALLOC_CONF; when the framework chose another allocator the scheduler keeps
 * program order (no reordering) and says why once. */
void dh_sched_set_reorder_allowed(int allowed, const char *why);

/* Framework thread, no lock: the program's allocation of size bytes just failed with
 * cudaErrorMemoryAllocation (or the driver's out of memory), for the round-th time (0
 * first). Gives back what the shim holds, in rounds (giveback.c): round 0 what it owes (frees
 * to issue, the device's pending frees, the pool's cache), round 1 what pairing holds (a
 * pair not agreed yet), then its workspaces. Returns 1 when it gave something back: the
 * caller retries and calls again with round + 1 while the retry fails; 0 when there is
 * nothing (more) to give (not deferring, or no round left): the failure is the program's. The caller reports the last retry's
 * result with dh_sched_alloc_retried. Clears the thread's last error, which the retry sets
 * again if it fails. DH_SCHED_RETRY_ALLOC is the caller's loop. */
int dh_sched_alloc_failed(size_t size, int round);
void dh_sched_alloc_retried(int ok);
/* The give-back-and-retry of an allocation call (the wrappers'): rc holds the first
 * attempt's result, oom is the API's out-of-memory status, call is the retried call. */
#define DH_SCHED_RETRY_ALLOC(rc, oom, size, call)                                       \
    do {                                                                               \
        if ((rc) == (oom) && dh_sched_mirroring()) {                                   \
            int dh__round = 0, dh__retried = 0;                                        \
            while ((rc) == (oom) && dh_sched_alloc_failed((size), dh__round++)) {      \
                (rc) = (call);                                                         \
                dh__retried = 1;                                                       \
            }                                                                          \
            if (dh__retried)                                                           \
                dh_sched_alloc_retried((rc) != (oom));                                 \
        }                                                                              \
    } while (0)

/* Statistics for the exit summary. */
typedef struct dh_sched_stats {
    uint64_t ops[DH_OP_KIND_COUNT];
    uint64_t drains[DH_DRAIN_COUNT];
    uint64_t max_queue_depth;
    uint64_t max_deferred_bytes;
    uint64_t replay_errors;
    uint64_t call_rejects;        /* captures validate refused: forwarded for the
                                     library to answer at the call */
    uint64_t call_learns;         /* captures only the library could judge: forwarded
                                     once per static signature */
    uint64_t cross_strand_barriers;
    uint64_t paired_groups;       /* groups issued with ops of both strands */
    uint64_t dependency_moves;    /* strand-1 ops moved after a strand-0 op they depend on */
    uint64_t order_fallbacks;     /* batches issued in program order (the plan's could not be) */
    uint64_t kick_flushes;        /* held work issued early for a polled event */
    uint64_t lag_waits;           /* times the framework thread waited for the lag limits */
    uint64_t events_destroyed_later; /* event destructions held until their queued record */
    uint64_t max_held_back;       /* most ops held back by design (in groups not complete, no
                                     flush since): program order alone decides it */
    /* plan mode (the strand tracker) */
    uint64_t plan_iterations, plan_desyncs, plan_resyncs, plan_matched_ops, plan_unmatched_ops;
    uint64_t plan_refuted_phases; /* strand-b phases run unpaired: they depend on strand a */
    uint64_t plan_held_design;    /* what the plan holds back at most (the caps included) */
    uint64_t plan_vetoed;         /* iterations matched here but run unpaired: a rank said no */
    uint64_t mem_bound_vetoes;    /* "no" votes this rank cast: the pair it was capturing
                                     would pass DHELIX_MAX_EXTRA_MEM (sched.c) */
    uint64_t mem_extra_peak;      /* most extra bytes the bound's accounting saw */
    int64_t mem_bound_bytes;      /* the bound in effect at the end (-1 none) */
    uint64_t mem_fresh_waits;     /* allocations that waited for the dispatcher's frees
                                     (memacct.c) */
    /* A device the program fills (giveback.c, workspace.c; DESIGN.md invariant 11). */
    uint64_t mem_givebacks;       /* failed allocations of the program retried after the
                                     shim gave memory back */
    uint64_t mem_giveback_failed; /* ... whose retry failed too: the program's own failure */
    uint64_t mem_giveback_pair;   /* ... retried again after the pairing under way was given up */
    uint64_t mem_giveback_ws;     /* ... retried again after the workspace went */
    uint64_t mem_device_vetoes;   /* "no" votes this rank cast: an allocation failed while
                                     it held a pair not agreed yet */
    uint64_t ws_serialised;       /* strand-1 BLAS ops run after strand 0's for want of a
                                     workspace of the shim's */
    uint64_t ws_refused;          /* workspace allocations not made: no room on the device */
    uint64_t ws_bytes_peak;       /* most bytes of workspace the shim held at once */
    /* The device as the shim saw it (sched.c, dh__devmem_note): the program's own peak, and
     * the peak of program + unissued frees + workspaces with what it held then. */
    int64_t mem_program_peak, mem_device_peak, mem_device_at_program, mem_device_at_program_peak;
    int64_t mem_device_at_paired, mem_device_at_unissued, mem_device_at_ws;
    /* the ranks' agreement (agree.h) */
    uint64_t agree_rounds, agree_no, agree_timeouts; /* votes cast, "no" results, timeouts */
    uint64_t agree_waits, agree_total_ns, agree_max_ns; /* yes votes: their waits */
    int agree_broken;
} dh_sched_stats_t;
void dh_sched_stats(dh_sched_stats_t *out);

/* The mode in effect: the configured one, or passthrough when it could not run (a plan
 * that cannot be used). Valid after dh_sched_init. */
dh_mode_t dh_sched_mode(void);

/* Starts the dispatcher(s) for the configured mode; called by the constructor. */
void dh_sched_init(void);
/* The program's first call into a GPU library (any thread, any number of times): plan mode
 * loads its plan here, once, and falls back to passthrough when it cannot be used. */
void dh_sched_first_call(void);

/* Drains and stops the dispatcher(s); called by the destructor. */
void dh_sched_fini(void);

#endif
