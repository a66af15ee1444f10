/*
 * tracker.h: the strand tracker of plan mode. It walks the plan's template (one iteration
 * of the program, docs/plan-format.md) with every submitted op and gives each matching op
 * its strand and co-execution group; the dispatcher may issue every group below the
 * tracker's release mark (dh__s.release).
 *
 * A mismatch (an extra op, a missing one, a changed shape) is a desync: the held groups
 * are flushed, one warning names the op and its call site, the ops run unpaired (strand 0,
 * program order), and the tracker re-synchronises at the next iteration boundary: the
 * template's first op among the first few ops after a host synchronisation that followed
 * the template's last op (tracker.c DH__START_SLACK: ops a rank adds of its own there do
 * not move its iteration count, which keys the ranks' votes); such a start less than half a
 * template's worth of ops after the last counted one is that iteration again, not a new one
 * (tracker.c dh__restart_same says why). A plan none of whose iterations
 * match within three iterations' worth of ops (or by exit) is reported once as a plan for
 * another program, and the tracker stops matching.
 *
 * The first template iteration followed is a probe: it runs in program order on one strand
 * while the plan's pairs are checked against what the ops touch (tracker.c, "checking the
 * plan's pairs"); a strand-b phase found to use what the strand-a phase it is paired with
 * wrote runs after that strand-a work from then on, unpaired.
 *
 * Locking: everything but dh_tracker_load and dh_tracker_report runs with dh__s.lock held.
 */
#ifndef DH_TRACKER_H
#define DH_TRACKER_H

#include <stdint.h>

#include "op.h"
#include "pairing.h"

/* Loads the plan at path for this process (its rank's section), checking its world size
 * and layout against the job's. 0 on success; otherwise one error line is logged (naming
 * the file and the problem) and -1 is returned: the caller runs passthrough. */
int dh_tracker_load(const char *path);
/* The same for plan p (taken: freed here whatever the result), path naming it in messages.
 * Auto mode calls it with dh__s.lock held, at an iteration boundary (the next op is the
 * first of an iteration), before any op was assigned by the tracker. */
struct dh_plan;
int dh_tracker_attach(struct dh_plan *p, const char *path);

/* Lock held: op (described by d) gets its strand, group and lgroup; the release mark
 * moves. Sets *flush to 1 when held work must be issued now (a desync), to 2 when op may
 * go out before its group is complete (a group of one strand under way, every group
 * before it complete), else 0. */
void dh_tracker_assign(dh_op_t *op, const dh_op_desc_t *d, int *flush);

/* What this rank holds back for pairing at most by design: the plan's held_ops, or more
 * when pairs wait for the ranks' vote (tracker.c, "agreement"); 0 without a plan. */
uint64_t dh_tracker_hold_design(void);

/* Whether a plan was loaded (immutable after load; no lock needed). */
int dh_tracker_planned(void);

/* Lock held: the allocation stamp (memtab.h) at the start of the current pair's strand-0
 * phase, 0 when no pair is under way. */
uint64_t dh_tracker_pair_stamp(void);

/* Lock held: 1 once after an assign that started a template iteration. */
int dh_tracker_new_iteration(void);

/* Lock held: strand-1 ops of this iteration from now on go to groups >= g (one was moved
 * after an op of strand 0 it depends on; program order within the strand stays). */
void dh_tracker_floor(uint64_t g);

/* Lock NOT held, on the thread that submitted the op: writes a pending desync warning
 * (with the call site, found with libunwind) if the last assign made one. */
void dh_tracker_report(void);

/* What the plan holds back for pairing at most (ops, bytes of frees; docs/plan-format.md),
 * 0 and 0 without a plan being followed. Lock held. */
void dh_tracker_planned_hold(uint64_t *ops, uint64_t *bytes);
/* The plan's max_extra_mem_bytes (< 0 none, or no plan). Lock held. */
double dh_tracker_mem_bound(void);
/* 1 while the rank holds ops of a pair it has not voted on yet (a "no" now, by
 * dh_tracker_drain, makes every rank run the rest of the iteration in program order).
 * Lock held. */
int dh_tracker_pairing(void);

/* Agreement between ranks (agree.h, DESIGN.md invariant 9; tracker.c "agreement" says how
 * and why it cannot deadlock). Every function here runs with dh__s.lock held; the caller
 * votes with the lock released.
 * dh_tracker_vote_due: 1 when the op described by d completes a pair of micro-batches
 * this rank would issue out of program order (its key in *key): the caller votes yes on it
 * before assigning the op. dh_tracker_vote_set: the round's decision (a no sends the rest
 * of the iteration to program order). dh_tracker_drain: bounded lag is about to issue what
 * is held: mid-pair, the rest of the iteration runs in program order (unpaired for why) and
 * this rank says no. dh_tracker_no_due: 1 + the key of a "no" this rank must cast (0 none), once;
 * the caller casts it before anything waits. dh_tracker_seq_due: 1 once when what is held
 * (not released yet) must go out in program order (sched.c, dh__flush_seq). */
int dh_tracker_vote_due(const dh_op_desc_t *d, uint64_t *key);
void dh_tracker_vote_set(int yes);
void dh_tracker_drain(dh_unpaired_t why);
uint64_t dh_tracker_no_due(void);
int dh_tracker_seq_due(void);
/* A drain the program asked for (sched.c) in the middle of a pair not agreed yet: the ranks
 * vote on draining here (agree.h, value 2), lock released. dh_tracker_drain_due: 1 when such
 * a vote is due (its key in *key). dh_tracker_drain_set: its result, 2 when every rank
 * drains here (the pair goes on), else the rest of the iteration runs in program order. */
int dh_tracker_drain_due(uint64_t *key);
void dh_tracker_drain_set(int d);

/* Lock held: 1 while an iteration of the template is followed as planned and under way
 * (past its first op, not the probe, not sent to program order). */
int dh_tracker_mid_iteration(void);

/* Lock held: the strand the next op of the program is expected on (0 when unknown). */
int dh_tracker_predict_strand(void);
/* Lock held. Where the program's next op will go if it matches the plan: its strand and
 * co-execution group (at least: a dependency may move it later, never earlier). Returns 0
 * when not following the plan or in the checking iteration (everything on strand 0 in
 * program order), leaving *strand and *group alone. */
int dh_tracker_predict_where(int *strand, uint64_t *group);

/* Takes the scheduler's lock. How nccl_wrap/chain.c orders the program's op `ahead` ops
 * from now (0: the next) among NCCL ops: *strand is its strand in the plan (0 when the
 * template is not followed); returns 1 when it is in an iteration this rank may pair (not
 * the probe, not sent to program order) and the plan moves NCCL ops across communicators
 * (dh_plan_op_t.moved: the planner proved its order across strands, scheduler/plan/
 * moves.h), so that each strand's NCCL ops keep program order among themselves and the
 * plan orders the two strands'; 0: every NCCL op in program order. Asked while chain.c
 * holds its own lock, before it submits the op; an op another thread submits in between
 * would shift it, which the programs the shim follows (one thread issues at a time: the
 * autograd thread while the main thread waits for it) do not do. */
int dh_tracker_chain_class(int ahead, int *strand);

/* Lock held: the host synchronised (an iteration boundary may follow). */
void dh_tracker_sync(void);

/* The issue order of template group lgroup ('a'/'b' letters), NULL when none. The plan is
 * immutable once loaded: no lock needed. */
const char *dh_tracker_order(int lgroup);

typedef struct dh_tracker_stats {
    uint64_t iterations, desyncs, resyncs, matched_ops, unmatched_ops;
    uint64_t refuted;         /* phases found to depend on the work they are paired with */
    uint64_t vetoed;          /* rounds this rank voted yes on and got no: another rank
                                 (or the agreement channel) said no */
} dh_tracker_stats_t;
/* Lock held. */
void dh_tracker_stats(dh_tracker_stats_t *out);

/* At exit, lock NOT held: reports a plan that never matched; frees the plan. */
void dh_tracker_finish(void);

#endif
