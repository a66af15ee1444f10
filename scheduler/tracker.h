/*
 * tracker.h: the strand tracker of plan mode. It walks the plan's template (one iteration
 * of the program, docs/plan-format.md) with every submitted op and gives each matching op
 * its strand and co-execution group; the dispatcher may issue every group below the
 * tracker's release mark (dh__s.release).
 *
 * A mismatch (an extra op, a missing one, a changed shape) is a desync: the held groups
 * are flushed, one warning names the op and its call site, the ops run unpaired (strand 0,
 * program order), and the tracker re-synchronises at the next iteration boundary: the
 * template's first op right after a host synchronisation. A plan none of whose iterations
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

/* Loads the plan at path for this process (its rank's section), checking its world size
 * and layout against the job's. 0 on success; otherwise one error line is logged (naming
 * the file and the problem) and -1 is returned: the caller runs passthrough. */
int dh_tracker_load(const char *path);

/* Lock held: op (described by d) gets its strand, group and lgroup; the release mark
 * moves. Sets *flush to 1 when held work must be issued now (a desync), to 2 when op may
 * go out before its group is complete (a group of one strand under way, every group
 * before it complete), else 0. */
void dh_tracker_assign(dh_op_t *op, const dh_op_desc_t *d, int *flush);

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

/* Lock held: the strand the next op of the program is expected on (0 when unknown). */
int dh_tracker_predict_strand(void);

/* Lock held: the host synchronised (an iteration boundary may follow). */
void dh_tracker_sync(void);

/* The issue order of template group lgroup ('a'/'b' letters), NULL when none. The plan is
 * immutable once loaded: no lock needed. */
const char *dh_tracker_order(int lgroup);

typedef struct dh_tracker_stats {
    uint64_t iterations, desyncs, resyncs, matched_ops, unmatched_ops;
    uint64_t refuted;         /* phases found to depend on the work they are paired with */
} dh_tracker_stats_t;
/* Lock held. */
void dh_tracker_stats(dh_tracker_stats_t *out);

/* At exit, lock NOT held: reports a plan that never matched; frees the plan. */
void dh_tracker_finish(void);

#endif
