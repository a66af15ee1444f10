/*
 * sched_int.h: state shared by sched.c (the framework side) and dispatch.c (the
 * dispatcher thread). Nothing here leaves the scheduler.
 *
 * Locking: dh__s.lock guards every field marked "lock"; it is never held while a real CUDA
 * function runs. Lock order: dh__s.lock is a leaf except that the dispatcher may take it
 * while holding nothing else; the op capture module's caches have their own leaf locks.
 */
#ifndef DH_SCHED_INT_H
#define DH_SCHED_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <uthash.h>

#include "common/config.h"
#include "breaks.h"
#include "sched_mode.h"
#include "scheduler.h"

#define DH_MAX_DEVICES 16

/* A shim-owned event instance: what a deferred cudaStreamWaitEvent waits on, so that a
 * later record of the same framework event cannot change what an earlier wait means. */
typedef struct dh_evinst {
    cudaEvent_t ev;          /* created by the dispatcher on first use (device below) */
    int device;
    int refs;                /* lock: event table's latest + pending record + pending waits */
    int recorded;            /* lock: its record has been replayed */
    int batched;             /* lock: its record is ahead in the dispatcher's batch */
    int rec_strand;          /* lock: strand and group of its record op (profile mode: its
                                record number, and the run, in rec_run) */
    uint64_t rec_group;
    uint64_t rec_run;        /* lock: profile mode, the run of its record (sched.c), 0 none */
    struct dh_evinst *next_free;
} dh_evinst_t;

/* Framework event -> its latest record in program order. */
typedef struct dh_evrec {
    cudaEvent_t key;
    dh_evinst_t *latest;     /* lock */
    int doomed;              /* lock: destroyed by the framework while latest was queued:
                                1 through the runtime, 2 through the driver */
    UT_hash_handle hh;
} dh_evrec_t;

/* One framework stream (per device): its held operations and physical streams. */
typedef struct dh_vstream {
    struct {
        int device;
        cudaStream_t stream;
    } key;
    cudaStream_t phys[2];    /* lock: [0] the framework stream itself, [1] shim-created */
    int blocking;            /* lock: -1 unknown; 1 when it synchronises with the legacy stream */
    dh_op_t *head[2], *tail[2]; /* dispatcher only: held ops of each strand, program order */
    uint64_t joined;         /* lock: the join generation at which phys[1] last joined phys[0] */
    uint64_t fwd_seen;       /* lock: the forward epoch phys[1] has joined */
    int since[2];            /* lock: strand s replayed work here since the last barrier */
    UT_hash_handle hh;
} dh_vstream_t;

typedef struct dh_sched_state {
    pthread_mutex_t lock;
    pthread_cond_t work;          /* dispatcher waits for ops or a flush */
    pthread_cond_t done;          /* drainers wait for the low-water mark */
    atomic_int deferring;         /* mode defers, healthy, not capturing a graph */
    dh_mode_t mode;               /* the mode in force; its table: dh__mode() */
    const dh_mode_ops_t *ctl;     /* auto mode's table, NULL without it (set at init) */
    int reorder_allowed;          /* lock */
    dh_op_t *in_head, *in_tail;   /* lock: submitted, not yet taken by the dispatcher */
    uint64_t next_seq;            /* lock */
    uint64_t low_water;           /* lock: every op with seq < low_water has been replayed */
    uint64_t flush_upto;          /* lock: the dispatcher must replay every seq < this */
    uint64_t flush_served;        /* lock: the dispatcher has run, barrier included, the
                                     batch of every flush up to this seq (dh_sched_drain) */
    /* Flushes not served yet, in the order they were asked for (a ring; see dh__flush_to).
     * The dispatcher serves each in turn, ops with seq < lim and group < gend group by
     * group, and only then the groups below the release mark. */
    struct dh_cut {
        uint64_t lim, gend;       /* gend UINT64_MAX: a flush; else a group let out early */
        int seq;                  /* a flush in two parts (dh__flush_seq): the groups below
                                     gend group by group, then the rest in program order */
    } *cuts;                      /* lock: a ring of cut_cap (grows; sched.c) */
    unsigned cut_head, cut_n, cut_cap; /* lock */
    unsigned let_out_unwoken;     /* lock: ops let out since the dispatcher was last woken */
    /* What no flush and no release covers yet (held by design, not by lag): ops and
     * deferred-free bytes per group from unc_base on. Program order alone decides these,
     * so the bounded-lag flush they trigger is at the same op on every rank. */
    struct dh_unc *unc;           /* lock: [unc_cap], index group - unc_base */
    size_t unc_cap;
    uint64_t unc_base, unc_ops, unc_bytes; /* lock */
    /* The extra-memory bound (DHELIX_MAX_EXTRA_MEM, sched.c "memory bound"): what the
     * program holds in its own order (allocations made minus frees captured, so the
     * baseline's curve), its peak, and the bound (bytes, < 0 none; -2 not read yet). */
    int64_t live_bytes, live_peak; /* lock */
    int64_t held_peak;            /* lock: the peak of live_bytes + unc_bytes (memacct.c) */
    int mem_over_alloc;           /* lock: an allocation since the last op passed the bound */
    /* The device as the shim sees it (sched.c "memory bound"): the program's memory plus
     * the frees not issued yet plus the workspaces, its peak and what it held then. */
    struct dh_devmem {
        int64_t peak, live, live_peak, paired, unissued, ws;
    } devmem;                     /* lock */
    double mem_bound;             /* lock */
    uint64_t kick_ms;             /* lock: wall time of the first unanswered kick, or 0 */
    uint64_t join_gen;            /* lock: bumped by every barrier */
    uint64_t fwd_epoch;           /* lock: bumped after every call forwarded onto a stream */
    uint64_t release;             /* lock: groups below it are complete and may be issued */
    uint64_t last_submit_ms;      /* lock: wall time of the latest submission */
    _Atomic uint64_t stamp;       /* next_seq, readable without the lock (allocation stamps) */
    _Atomic uint64_t young_from;  /* allocations stamped since are young (op.h); 0: all */
    uint64_t held;                /* lock: ops submitted and not replayed */
    uint64_t held_free_bytes;     /* lock */
    struct dh_doomed {            /* lock: framework events to destroy, outside the lock */
        cudaEvent_t ev;
        int driver;
    } *doomed;
    size_t ndoomed, capdoomed;
    int stop;                     /* lock */
    int pending_error;            /* lock: first replay failure not yet reported, as a
                                     cudaError_t (dh_sched_error_take) */
    const char *pending_what;     /* lock: the kind that failed, for the exit warning */
    dh_evrec_t *events;           /* lock */
    dh_evinst_t *free_inst;       /* lock */
    dh_vstream_t *vstreams;       /* lock */
    struct dh_allocsz *allocs;    /* lock: stream-ordered allocation sizes */
    /* strand tracker (threads rule), lock */
    int last_thread;
    uint64_t phase;
    dh_sched_stats_t stats;       /* lock */
    pthread_t thread;
    int started;
} dh_sched_state_t;

extern dh_sched_state_t dh__s;

/* The table of the mode in force (sched_mode.h). Auto mode changes dh__s.mode under the
 * lock at an iteration boundary; a reader without the lock sees the old or the new mode. */
static inline const dh_mode_ops_t *dh__mode(void) { return dh_mode_table(dh__s.mode); }

/* dispatch.c */
void *dh__dispatch_main(void *arg);
/* Lock held: the framework stream's record (created on first use). NULL on no memory. */
dh_vstream_t *dh__vstream_get(int device, cudaStream_t s);
/* Lock NOT held: the physical stream of (device, s, strand), created on first use by the
 * calling thread with the real API; NULL on failure. */
cudaStream_t dh__physical(int device, cudaStream_t s, int strand);

/* The issue order of a plan's template group (NULL none), from the mode's table. */
const char *dh__plan_order(int lgroup);
/* Lock held: the small ordinal of framework stream s, in order of first use (0 the legacy
 * stream, -1 out of memory); profiles name streams so. */
int dh__stream_ordinal(cudaStream_t s);

/* sched.c, lock held */
/* Asks the dispatcher to replay every op with seq < lim (after the flushes asked for
 * before). Out of memory for the queue, the newest absorbs it. */
void dh__flush_to(uint64_t lim);
/* Like dh__flush_to, but only the groups below gend (released: agreed by the ranks, or in
 * program order already) go out in the plan's order; the rest with seq < lim goes out in
 * program order (tracker.c, "agreement": a round decided no). */
void dh__flush_seq(uint64_t lim, uint64_t gend);
/* Lets the dispatcher issue the ops with seq < lim of groups below gend now (the program's
 * single-strand group under way, every group before it complete). */
void dh__let_out(uint64_t lim, uint64_t gend);
void dh__inst_unref(dh_evinst_t *inst);
/* Lock held: binds an event op to an instance at submission, in program order
 * (sched_event.c). Returns 0, -1 when the op can be dropped (a wait on a never-recorded
 * event is a no-op), -2 out of memory. */
int dh__sched_bind_event(dh_op_t *op);
/* Lock held: the record of framework event e into instance i was replayed; destroys e if
 * the framework destroyed it meanwhile and this was its latest record. */
void dh__event_recorded(cudaEvent_t e, dh_evinst_t *i);
/* Lock NOT held: destroys the events dh__event_recorded set aside. Never under the lock:
 * the real runtime's cudaEventDestroy calls the driver's through the table the shim hands
 * out (cuGetProcAddress), whose wrapper takes the lock (seen as a hang on an H100). */
void dh__destroy_doomed(void);
/* Lock held. Keeps cuda_err as the pending error unless one is already pending (the first
 * failure is the one a program without the shim would have met first). */
void dh__sched_error_note(int cuda_err, const char *what);
void dh__fallback(const char *why);  /* lock NOT held */
/* Lock NOT held, framework thread: auto mode will reorder nothing more (no plan, or one
 * that did not help). Issues everything queued, in the order the mode in effect chose,
 * waits until it has been replayed, then sets passthrough: later calls are forwarded at
 * once (a capture already under way on another thread goes out before its call returns,
 * dh_sched_submit). Returns the operations deferred until then. */
uint64_t dh__sched_passthrough(void);
uint64_t dh__wall_ms(void);
/* A small id of the calling thread, in order of first use (op->thread). */
int dh__sched_thread_id(void);

/* ---- dispatch/workspace.c: the shim's cuBLAS/cuBLASLt workspaces (strand 1's only) ---- */
/* Bytes of workspace the shim holds now. Any thread. */
uint64_t dh__sched_ws_bytes(void);
/* Strand-1 BLAS ops run after strand 0 for want of a workspace, workspace allocations
 * refused for want of room, and the most workspace bytes held at once, so far. Any
 * thread. */
void dh__ws_stats(uint64_t *serialised, uint64_t *refused, uint64_t *peak);
/* Framework thread, at submission: op (any kind) is in program order; a BLAS op's
 * workspace size raises what dh__ws_seen answers. Any thread. */
void dh__ws_note(const dh_op_t *op);
/* The largest workspace (bytes) the framework gave a BLAS op so far: the size of strand
 * 1's, and what the program-order count (modes/memacct.c) and profiles say it costs. */
uint64_t dh__ws_seen(void);
/* Dispatcher, dh__s.lock NOT held: sets ctx's workspace for BLAS op on strand (op.h:
 * NULL, the framework's own, on strand 0). Returns 1 when the op has none of its own and
 * must run after strand 0 on the framework's workspace (dispatch.c), else 0. Leaves the
 * workspace lock held either way: dh__ws_done releases it once the op is enqueued. */
int dh__ws_bind(const dh_op_t *op, int strand, dh_replay_ctx_t *ctx);
void dh__ws_done(void);
/* Framework thread, dh__s.lock NOT held: frees strand 1's workspaces once the device has
 * finished every op that used them, and takes none again (strand 1's BLAS ops then run
 * after strand 0's). Returns the bytes freed. */
uint64_t dh__ws_give_back(void);

/* ---- dispatch/giveback.c ---- */
/* Lock held: the give_back of a mode that orders each rank's work on its own (stress,
 * profile): everything held goes out. Returns dh__s.next_seq. */
uint64_t dh__give_back_all(void);

#endif
