/*
 * deps.h: what an op must follow, decided from program order alone.
 *
 * Plan and strands modes: a strand-1 op (the forward of micro-batch i+1) must not run
 * before strand-0 work (the backward of i) that precedes it in program order and that it
 * depends on: an event record it waits for, memory that work wrote (exact ranges for GEMMs,
 * copies and collectives; allocation ranges for pointer-sized kernel arguments), memory
 * strand 0 allocated during the pair (a pipeline stage's outgoing gradient), or an older
 * allocation strand 0 certainly wrote during the pair (the gradient buffer: see
 * dh_deps_taint_t); for the last two, all of strand 0's work so far. The log of
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

/* Old memory one strand is seen writing. A kernel's pointer into an allocation made before
 * the pair counts as a read (op.h), and a kernel that reaches its buffers only through a
 * struct argument shows nothing at all; so where strand 0 certainly writes such an
 * allocation (a GEMM accumulating a weight gradient into the gradient buffer), its kernels
 * may write any of it (the layer norms' and embedding's gradients), and whatever the other
 * strand does with that allocation depends on all of strand 0's work. A set of those
 * allocations (start and stamp, op.h's abase and born), made before the stamp `since`, that
 * the ops added since the reset certainly wrote. A zeroed set is empty, with since 0. */
typedef struct dh_deps_taint {
    uint64_t since;
    struct dh__taint_e *e;    /* open addressing by start; cap a power of two */
    size_t n, cap;
    int over;                 /* no memory to grow: every allocation made before since */
} dh_deps_taint_t;

/* Empties t; allocations made before since (a stamp, memtab.h) are what counts from now. */
void dh_deps_taint_reset(dh_deps_taint_t *t, uint64_t since);
/* Adds the allocations made before t->since that op certainly writes (write == 1). */
void dh_deps_taint_add(dh_deps_taint_t *t, const dh_op_t *op);
/* Whether op touches (reads, writes or maybe writes) an allocation in t: the index of such
 * an access of op, or -1. An op that may touch anything (nacc < 0) answers 0 when t holds
 * anything. */
int dh_deps_taint_hit(const dh_deps_taint_t *t, const dh_op_t *op);
void dh_deps_taint_free(dh_deps_taint_t *t);

/* The latest group among the strand-0 ops of the region op depends on, or op->group - 1
 * when none. */
int64_t dh_deps_group(const dh_op_t *op);
/* The latest group among the strand-0 ops of the region, -1 when none. */
int64_t dh_deps_s0_last(void);
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
