/*
 * sched_mode.h: what the scheduler asks of a DHELIX_MODE. Each mode is one table of
 * behaviours (dh_mode_ops_t), defined in the mode's own file under scheduler/modes/, the
 * way each op kind is one dh_op_kind_ops_t: submission, drains and the dispatcher ask the
 * table of the mode in force (dh__mode()) instead of branching on the mode. The table type
 * lives here, in the lower layer, so that dispatch/ never includes a header of modes/; the
 * tables themselves are linked in from modes/mode.c.
 *
 * Auto mode is a controller rather than a way of running: it starts the job in profile mode
 * and later switches it to plan mode or passthrough. Its table (dh__sched_ctl(), NULL when
 * auto mode is off) is asked first at the points where it acts; the mode in force is asked
 * after it.
 *
 * Every hook may be NULL: the scheduler then does what passthrough does there. "Lock held"
 * is dh__s.lock (sched_int.h).
 */
#ifndef DH_SCHED_MODE_H
#define DH_SCHED_MODE_H

#include <stdint.h>

#include "common/config.h"
#include "op.h"
#include "scheduler.h"

/* How the dispatcher orders what it may issue (dispatch.c). */
typedef enum dh_mode_order {
    DH_ORDER_PROGRAM, /* one strand, program order */
    DH_ORDER_STRESS,  /* a seeded random legal order of everything held until a drain */
    DH_ORDER_GROUPS,  /* two strands: each flush in the program's order, then complete groups */
} dh_mode_order_t;

/* What the framework thread allocated since its last op (profile records keep it). */
typedef struct dh_mode_alloc {
    int64_t bytes;
    const int64_t *sizes;
    size_t nsizes;
} dh_mode_alloc_t;

typedef struct dh_mode_ops {
    dh_mode_t mode;
    /* What the mode is. */
    unsigned defers : 1;        /* calls are captured and queued; a dispatcher thread runs */
    unsigned two_strands : 1;   /* ops go to two strands and co-execution groups */
    unsigned pools : 1;         /* captured frees park their blocks for reuse (mempool.h) */
    unsigned describes : 1;     /* ops are described (signature, name) at submission */
    unsigned footprints : 1;    /* ops keep their memory footprint (what they touch) */
    unsigned issues_each : 1;   /* every op is issued as soon as it is queued */
    unsigned ranks_agree : 1;   /* what is issued early must be decided alike on every rank */
    unsigned polls_let_out : 1; /* ops let out early are looked at within a millisecond */
    unsigned controls : 1;      /* a controller (auto): asked first, runs another mode */
    dh_mode_order_t order;

    /* ---- at dh_sched_init (no lock): the mode to run in (NULL: this one) ---- */
    dh_mode_t (*start)(void);

    /* ---- at the program's first GPU call (no lock): 0, or -1 to run passthrough ---- */
    int (*first_call)(void);

    /* ---- at submission, in this order ---- */
    /* No lock, before op is queued: may wait for the ranks (a vote) or change the mode. */
    void (*submit)(dh_op_t *op, const dh_op_desc_t *d);
    /* Lock held: op's strand, group and lgroup (dh_tracker_assign's contract). NULL: one
     * strand, one group, released at once. */
    void (*assign)(dh_op_t *op, const dh_op_desc_t *d, int *flush);
    /* Lock held, right after assign: 1 when op started an iteration (an iteration
     * boundary: what strand 0 wrote before is issued). */
    int (*iteration)(void);
    /* Lock held: a strand-1 op was moved to group g, after strand-0 work it depends on. */
    void (*moved)(uint64_t g);
    /* Lock held: op is about to be queued (its seq not yet set). */
    void (*queue)(dh_op_t *op, const dh_op_desc_t *d, const dh_mode_alloc_t *alloc);
    /* Lock held: raises the bounded-lag limits by what the mode holds by design. */
    void (*limits)(uint64_t *ops, uint64_t *bytes);
    /* Lock held: 1 when op (mem bytes allocated before it) would take pairing past the
     * memory bound: what is held goes out, unpaired. */
    int (*over_memory)(const dh_op_t *op, int64_t mem);
    /* Lock held: bounded lag is about to issue what is held, unpaired. */
    void (*lag)(void);
    /* Lock held: 1 once when what is held must go out in program order (dh__flush_seq). */
    int (*seq_due)(void);
    /* Lock held, op queued, before the framework thread waits for anything. */
    void (*queued)(void);
    /* No lock, last thing before dh_sched_submit returns. */
    void (*submitted)(void);

    /* ---- at a drain and at a synchronising call ---- */
    /* Lock held (a hook may release and retake it): a drain for why begins. */
    void (*drain)(dh_drain_reason_t why);
    /* Lock held: the host synchronised at a fixed point of the program's order (an
     * iteration boundary may follow). */
    void (*sync)(void);
    /* No lock: a drain completed (not the one at exit). */
    void (*drained)(void);

    /* ---- what the dispatcher and the allocator ask (lock held) ---- */
    /* The strand the program's next op is expected on. NULL: 0. */
    int (*predict_strand)(void);
    /* Where the program's next op goes if it matches: 1 with *strand and *group set, or 0
     * when not known (predict_strand's answer is used). */
    int (*predict_where)(int *strand, uint64_t *group);
    /* The issue order of template group lgroup ('a'/'b' letters), NULL when none. */
    const char *(*group_order)(int lgroup);
    /* An allocation of size bytes must take fresh memory (no parked block fits); its
     * thread allocated pending bytes since its last op. May wait, releasing the lock. */
    void (*fresh)(size_t size, int64_t pending);
    /* The allocation stamp at the start of the current pair's strand-0 phase, 0 none. */
    uint64_t (*pair_stamp)(void);

    /* ---- at exit, after the dispatcher stopped (no lock) ---- */
    void (*finish)(void);
} dh_mode_ops_t;

/* The table of mode m (never NULL for m < DH_MODE_COUNT). Defined in modes/mode.c. */
const dh_mode_ops_t *dh_mode_table(dh_mode_t m);

#endif
