/*
 * deps.h: what an op must follow, decided from program order alone.
 *
 * Plan and strands modes: a strand-1 op (the forward of micro-batch i+1) must not run
 * before strand-0 work (the backward of i) that precedes it in program order and that it
 * depends on: an event record it waits for, memory that work wrote (exact ranges for GEMMs,
 * copies and collectives; allocation ranges for pointer-sized kernel arguments), or memory
 * strand 0 allocated during the pair (a pipeline stage's outgoing gradient). The log of
 * strand 0's footprints covers the current region (a plan iteration, or the work since the
 * last synchronisation in strands mode), issued or not: a decision that depended on how far
 * the dispatcher got could order one communicator's calls differently on two ranks.
 *
 * Profile mode applies the same rules between runs of one thread's ops (phases) and
 * records, per op, the latest op of the previous run it must follow (docs/plan-format.md,
 * "dep"), so that the planner never pairs it with that work.
 *
 * Locking: everything here runs with dh__s.lock held.
 */
#ifndef DH_DEPS_H
#define DH_DEPS_H

#include <stdint.h>

#include "op.h"

/* The latest group among the strand-0 ops of the region op depends on, or op->group - 1
 * when none. */
int64_t dh_deps_group(const dh_op_t *op);
/* A strand-0 op joins the region's log (after its group is final). */
void dh_deps_s0_add(const dh_op_t *op);
/* A new region: a plan iteration starts, or everything before was issued in order. */
void dh_deps_s0_reset(void);

/* Profile mode: the record number of the latest op of the previous run op must follow, -1
 * none; then dh_deps_prof_add records op (record number rec) in the current run. */
int64_t dh_deps_prof(const dh_op_t *op);
void dh_deps_prof_add(const dh_op_t *op, uint64_t rec);
/* The current run's number (1 for the first), for event records (sched_int.h, rec_run). */
uint64_t dh_deps_prof_run(void);

void dh_deps_free(void);

#endif
