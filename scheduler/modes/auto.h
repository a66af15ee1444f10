/*
 * auto.h: DHELIX_MODE=auto. The shim starts in profile mode; once the recorder stopped (an
 * iteration repeated), a thread of its own reads the profile's times, sends the profile to
 * rank 0 and gets the plan back (agree.h, dh_agree_exchange: rank 0 plans for every rank,
 * one section per distinct template, one order of collectives per communicator); a plan
 * that does not promise DHELIX_AUTO_MIN_GAIN percent is not used. Meanwhile every rank
 * goes on in program order and, at every iteration boundary (the program's first op, then
 * the start of every period of the recorder's stop rule: profile_rec.h dh_prof_period),
 * takes part in a switch round
 * (dh_agree_switch): once every rank holds the plan at the same boundary, each attaches it
 * there (the tracker, as if from DHELIX_PLAN, with the same checks) and plan mode starts.
 * A rank holds it, for the round, from the boundary after the one where its recording
 * stopped on, and waits there for the planning thread (bounded by DHELIX_AUTO_SWITCH_WAIT_MS):
 * the switch iteration does not depend on how fast the host plans (auto.c, "the switch
 * boundary").
 * With DHELIX_PLAN_CACHE the plan is written to a file keyed by the program (its command
 * line), the world size, DHELIX_LAYOUT and the device; a start that finds it skips the
 * profile and switches at boundary 0 (every rank must find it; else profile as usual).
 *
 * A plan that does not help is not used: one rejected by its prediction, or none at all,
 * leaves every rank in passthrough (the cheap mode) from its next boundary on; one that
 * measured no gain on rank 0 over the first DHELIX_AUTO_MEASURE_ITERS iterations, too, at
 * one boundary agreed by every rank (agree.h dh_agree_switch_back).
 *
 * Locking: dh_auto_submit and dh_auto_drained take dh__s.lock themselves (called without);
 * dh_auto_synced with it held. The planning thread shares only the ready plan, under the
 * module's own lock (after dh__s.lock in the lock order).
 */
#ifndef DH_AUTO_H
#define DH_AUTO_H

#include <stdint.h>

#include "op.h"

/* dh_sched_init: the configured mode is auto. Returns the mode to start in (profile). */
int dh_auto_init(void);
/* Whether auto mode is on (constant after dh_sched_init). */
int dh_auto_on(void);
/* The program's first GPU call: looks the plan up in DHELIX_PLAN_CACHE. */
void dh_auto_first_call(void);
/* Framework thread, lock not held, before op (described by d) is queued: at an iteration
 * boundary, the switch round; when every rank is ready, attaches the plan and sets plan
 * mode (under dh__s.lock). When no plan will be used here (rejected, none, or another
 * rank has none), goes passthrough (dh__sched_passthrough) instead, with one log line.
 * After the switch, rank 0 times the iterations and at the boundary
 * DHELIX_AUTO_MEASURE_ITERS + 1 after it every rank takes part in the switch-back round:
 * all go passthrough there when Strand Interleaving did not gain DHELIX_AUTO_MIN_GAIN
 * percent. One relaxed load per op once none of that is left to do. */
void dh_auto_submit(const dh_op_t *op, const dh_op_desc_t *d);
/* Lock held: the program synchronised the host (a boundary may follow). */
void dh_auto_synced(void);
/* Lock NOT held, after a drain completed: starts the planning once recording stopped. */
void dh_auto_drained(void);
/* At exit (lock not held): keeps the planning thread off the device from now on; says
 * why no plan was used when no boundary came after the planning thread gave up. */
void dh_auto_fini(void);

typedef struct dh_auto_stats {
    int on, switched, cache_hit, plan_ready;
    int64_t switch_iteration;       /* -1 none */
    int64_t switch_due;             /* the switch boundary: the boundary after the one where
                                       recording stopped, -1 not yet (auto.c) */
    double switch_wait_ms;          /* the wait for the plan there, 0 none */
    double planning_ms;             /* the planner on rank 0, -1 none */
    double ready_ms;                /* recording stopped -> plan held here, -1 none */
    double predicted;               /* predicted speedup of the plan, 0 none */
    uint64_t profile_ops;           /* recorded */
    int64_t passthrough_iteration;  /* the boundary this rank went passthrough at, -1 none */
    uint64_t deferred_after;        /* ops deferred after it (0: the mode changed) */
    double measured;                /* rank 0: measured speedup of SI, 0 none */
    double measured_base_ms, measured_si_ms; /* rank 0: per iteration, 0 none */
    char status[200];               /* what happened, in words */
} dh_auto_stats_t;
void dh_auto_stats(dh_auto_stats_t *out);

#endif
