/*
 * mode_plan.c: DHELIX_MODE=plan, the default when DHELIX_PLAN is set. The strand tracker
 * (tracker.h) matches every op against the plan's template and gives it its strand and
 * co-execution group; the dispatcher issues complete groups in the plan's order. Pairs of
 * micro-batches go out of program order only after every rank voted for them (agree.h,
 * tracker.c "agreement"); bounded lag, the memory bound and a drain in the middle of a pair
 * send the rest of the iteration to program order on every rank alike.
 */
#include <stdlib.h>

#include "agree.h"
#include "common/config.h"
#include "common/log.h"
#include "memacct.h"
#include "mode.h"
#include "pairing.h"
#include "sched_int.h"
#include "tracker.h"

static dh_mode_t dh__plan_start(void)
{
    if (dh_config()->plan[0])
        return DH_MODE_PLAN;
    DH_ERROR(PLAN, "DHELIX_MODE=plan needs DHELIX_PLAN (a plan file); running passthrough");
    return DH_MODE_PASSTHROUGH;
}

/* The plan cannot be used (one line said why): nothing was deferred yet. */
static int dh__plan_first_call(void) { return dh_tracker_load(dh_config()->plan) == 0 ? 0 : -1; }

/* No lock. With ranks to agree with: when the op described by d completes a pair this rank
 * would issue out of program order, the ranks vote on it first (tracker.c, "agreement").
 * The vote waits without the lock: the dispatcher goes on meanwhile. */
static void dh__plan_submit(dh_op_t *op, const dh_op_desc_t *d)
{
    (void)op;
    if (!dh_agree_needed())
        return;
    static _Atomic int opened;
    if (!atomic_exchange_explicit(&opened, 1, memory_order_relaxed) && dh_tracker_planned())
        dh_agree_open();
    uint64_t key = 0;
    pthread_mutex_lock(&dh__s.lock);
    int due = dh_tracker_vote_due(d, &key);
    pthread_mutex_unlock(&dh__s.lock);
    if (!due)
        return;
    int yes = dh_agree_vote(key, 1);
    pthread_mutex_lock(&dh__s.lock);
    dh_tracker_vote_set(yes);
    pthread_mutex_unlock(&dh__s.lock);
}

/* Lock held: what the plan holds by design is not lag: the planner bounded its memory
 * (max_extra_mem_bytes); past a quarter more than it planned, it is. */
static void dh__plan_limits(uint64_t *ops, uint64_t *bytes)
{
    uint64_t po, pb;
    dh_tracker_planned_hold(&po, &pb);
    if (po + po / 4 > *ops)
        *ops = po + po / 4;
    if (pb + pb / 4 > *bytes)
        *bytes = pb + pb / 4;
}

/* Lock held: past the extra-memory bound, the pair under way is given up (this rank says
 * no) and what is held goes out. */
static int dh__plan_over_memory(const dh_op_t *op, int64_t mem)
{
    if (!dh__mem_count(op, mem))
        return 0;
    dh_tracker_drain(DH_UNPAIRED_MEM_BOUND);
    return 1;
}

/* Lock held. */
static void dh__plan_lag(void)
{
    if (dh_tracker_mid_iteration())
        dh_pairing_drain(DH_DRAIN_LAG);
    dh_tracker_drain(DH_UNPAIRED_LAG);
}

/* Lock held: casts the "no" the tracker asked for, with the lock released for the send (it
 * waits for nobody), before the caller waits for anything. */
static void dh__plan_queued(void)
{
    uint64_t no = dh_tracker_no_due();
    if (!no)
        return;
    pthread_mutex_unlock(&dh__s.lock);
    dh_agree_vote(no - 1, 0);
    pthread_mutex_lock(&dh__s.lock);
}

/* Lock held. Mid-pair: the ranks agree on draining here before this thread waits for the
 * device; unless every rank does, what is held goes out in program order (tracker.c,
 * "agreement"). */
static void dh__plan_drain(dh_drain_reason_t why)
{
    if (dh_tracker_mid_iteration())
        dh_pairing_drain(why);
    uint64_t key = 0;
    if (!dh_tracker_drain_due(&key))
        return;
    pthread_mutex_unlock(&dh__s.lock);
    int d = dh_agree_vote(key, 2);
    pthread_mutex_lock(&dh__s.lock);
    dh_tracker_drain_set(d);
}

/* Lock held: the strand of the next op; one strand while reordering is not allowed. */
static int dh__plan_predict(void) { return dh__s.reorder_allowed ? dh_tracker_predict_strand() : 0; }

static void dh__plan_finish(void)
{
    dh_tracker_finish();
    dh_pairing_finish();
}

const dh_mode_ops_t dh_mode_plan = {
    .mode = DH_MODE_PLAN,
    .defers = 1,
    .two_strands = 1,
    .pools = 1,
    .describes = 1,
    .footprints = 1,
    .ranks_agree = 1,
    .polls_let_out = 1,
    .order = DH_ORDER_GROUPS,
    .start = dh__plan_start,
    .first_call = dh__plan_first_call,
    .submit = dh__plan_submit,
    .assign = dh_tracker_assign,
    .iteration = dh_tracker_new_iteration,
    .moved = dh_tracker_floor,
    .limits = dh__plan_limits,
    .over_memory = dh__plan_over_memory,
    .fresh = dh__mem_before_fresh,
    .lag = dh__plan_lag,
    .seq_due = dh_tracker_seq_due,
    .queued = dh__plan_queued,
    .submitted = dh_tracker_report,
    .drain = dh__plan_drain,
    .sync = dh_tracker_sync,
    .predict_strand = dh__plan_predict,
    .predict_where = dh_tracker_predict_where,
    .group_order = dh_tracker_order,
    .pair_stamp = dh_tracker_pair_stamp,
    .finish = dh__plan_finish,
};
