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
 * With DHELIX_PLAN_CACHE the plan is written to a file keyed by the program (its command
 * line), the world size, DHELIX_LAYOUT and the device; a start that finds it skips the
 * profile and switches at boundary 0 (every rank must find it; else profile as usual).
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
/* Framework thread, lock not held, before the op described by d is assigned: at an
 * iteration boundary, the switch round; when every rank is ready, attaches the plan and
 * sets plan mode (under dh__s.lock). */
void dh_auto_submit(const dh_op_desc_t *d);
/* Lock held: the program synchronised the host (a boundary may follow). */
void dh_auto_synced(void);
/* Lock NOT held, after a drain completed: starts the planning once recording stopped. */
void dh_auto_drained(void);
/* At exit (lock not held): waits for the planning thread to be done with the device;
 * reports when no plan was used. */
void dh_auto_fini(void);

typedef struct dh_auto_stats {
    int on, switched, cache_hit, plan_ready;
    int64_t switch_iteration;       /* -1 none */
    double planning_ms;             /* the planner on rank 0, -1 none */
    double ready_ms;                /* recording stopped -> plan held here, -1 none */
    double predicted;               /* predicted speedup of the plan, 0 none */
    uint64_t profile_ops;           /* recorded */
    char status[200];               /* what happened, in words */
} dh_auto_stats_t;
void dh_auto_stats(dh_auto_stats_t *out);

#endif
