/*
 * memsim.h: the device memory a plan costs, as the runtime holds it (issue 15; DESIGN.md
 * invariant 10).
 *
 * What a run measures over the baseline is, by construction of the runtime
 * (scheduler/modes/memacct.c: an allocation that would pass the count's peak waits for the
 * frees the dispatcher owes), what the runtime counts in program order:
 *
 *   extra = workspaces + max over the iteration of (live + held) - max of live
 *
 * live: the program's stream-ordered memory in its own order (allocations made, frees
 * captured); held: the frees of groups the runtime has not released yet whose blocks no
 * allocation took back; workspaces: the shim's cuBLAS workspace of each strand that runs a
 * GEMM (DH_PLAN_BLAS_WS_BYTES). The simulation walks one iteration of a section in program
 * order as the runtime does:
 *
 *   - groups are released as scheduler/modes/tracker.c releases them (dh_plan_release_marks); a
 *     group of one strand whose predecessors are all released goes out op by op; when the
 *     ranks must agree (a job of several processes), a pair's two-strand groups wait for
 *     its vote, after its last one is complete (dh_plan_vote_points);
 *   - an op's allocations come before it (its thread allocates, then submits it); each
 *     takes back a parked block of exactly its size on its framework stream when the shim's
 *     pool would (scheduler/mem/mempool.h): the newest its own strand freed, else the oldest
 *     the other strand freed in an earlier group; otherwise it is fresh memory;
 *   - a free parks its block while its group is held; once the group is released, the
 *     block is as good as freed (the runtime issues it, and an allocation that takes it
 *     back before that costs no more memory than one the allocator serves from it).
 *
 * The peak is read after each op's allocations and after each op.
 *
 * Pure functions of their arguments: thread-safe.
 */
#ifndef DH_MEMSIM_H
#define DH_MEMSIM_H

#include <stddef.h>
#include <stdint.h>

#include "align.h"
#include "common/status.h"
#include "plan.h"

/* One template op as the simulation sees it. */
typedef struct dh_memsim_op {
    const int64_t *sizes;       /* the allocations its thread made since its previous op */
    size_t nsizes;
    int64_t freed;              /* bytes it frees (a FREE op), else 0 */
    uint32_t stream;            /* framework stream ordinal */
    uint8_t blas;               /* a GEMM: runs with its strand's cuBLAS workspace */
} dh_memsim_op_t;

typedef struct dh_memsim_result {
    double extra;               /* workspace + held (bytes) */
    double workspace;           /* the cuBLAS workspaces the plan makes the runtime allocate */
    double held;                /* max(live + held) - max(live), >= 0 */
    double live_peak;           /* max of live, relative to the iteration's start */
    size_t peak_op;             /* the op at which live + held peaked (after its allocations,
                                   or after it) */
} dh_memsim_result_t;

/* Simulates one iteration of section s (its ops, groups and strands; ops[i] is template op
 * i); agree: the ranks vote on each pair (the job has several processes). Errors:
 * DH_ERR_NOMEM, DH_ERR_INVALID (a group index out of range). */
dh_status_t dh_memsim_section(const dh_plan_section_t *s, const dh_memsim_op_t *ops, int agree,
                              dh_memsim_result_t *out);

/* The same for one aligned pair alone (r, from dh_align: A's na ops, then B's nb ops, in
 * ops[0..na+nb)), each step a group; the result's held is what the pair holds past its own
 * serial peak. Errors: DH_ERR_NOMEM. */
dh_status_t dh_memsim_pair(const dh_memsim_op_t *ops, size_t na, size_t nb,
                           const dh_align_result_t *r, int agree, dh_memsim_result_t *out);

/* The reuse inside one run of ops of one strand (a phase), the pool's same-strand rule
 * with every free parked: kept[i] (n entries) the bytes of op i's free that a later
 * allocation of the run takes back (0 or its freed bytes), retaken[i] the bytes of op i's
 * allocations that take back an earlier free of the run, from[i] how many ops back the
 * earliest free they take is (0 when retaken[i] is 0). Errors: DH_ERR_NOMEM. */
dh_status_t dh_memsim_reuse(const dh_memsim_op_t *ops, size_t n, int64_t *kept,
                            int64_t *retaken, uint32_t *from);

#endif
