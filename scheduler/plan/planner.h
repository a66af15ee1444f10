/*
 * planner.h: from profiles to a Strand Interleaving plan (`dhelix plan`).
 *
 * Steps (docs/plan-format.md for the files; align.h for the DP):
 *   1. Iteration: each profile is cut into segments at host synchronisations; the smallest
 *      period p (in segments) whose last 2p segments repeat is one iteration (up to 2
 *      trailing segments of an unfinished iteration are ignored). The template is the last
 *      complete period; of its rotations, the one that ends where the profile ends when the
 *      profile stopped right after a sync with nothing ignored, else the one on the grid
 *      from the profile's first op (where iteration 0 began). Its times are means over
 *      every complete repetition.
 *   2. Sections: profiles whose templates are identical (signatures, threads, syncs) share
 *      one section; their times are averaged.
 *   3. Phases: the template splits at thread changes and syncs. Phases on the template's
 *      first thread are forward ('F'), except those after the last backward phase ('O':
 *      optimizer, loss); phases on other threads are backward ('B': PyTorch's autograd
 *      thread). A phase split from its predecessor only by a sync continues its micro-batch.
 *   4. Pairs: a B phase directly followed by an F phase that does not start with a sync
 *      co-executes with it (B: strand a, F: strand b); the DP aligns the two op lists,
 *      pre-grouped into units (align.h, dh_align_fold: events, frees and ops shorter than
 *      fold_below_us ride with the next op that takes time), with the host cost of each
 *      group's cross-strand barrier (group_cost_us) in its objective. A pair whose best
 *      alignment is not faster than its two phases run serially stays unpaired. Everything
 *      else is serial strand-a work, one group per maximal run (a pair's leading solo-a
 *      step joins the run before it). Every group is then replayed on the device model
 *      (timesim.h): its replay is its predicted time, a paired group slower than its two
 *      strands one after the other is split into them, and what a pair saves (the replay of
 *      its phases in program order less its groups') is taken off the profiled iteration to
 *      give the section's predicted time.
 *   5. One order of collectives: NCCL matches collectives by their order on a communicator,
 *      so with several sections (ranks whose templates differ) the DP of the first section
 *      whose pair uses a communicator chooses how the pair interleaves the two strands'
 *      collectives on it, and the later sections' DPs follow (orders.c). Sections whose
 *      templates differ from an earlier one's by a few ops (rank 0 loads the data) go
 *      further and plan on that section's times, so that they get the same groups
 *      (match.c, planner_int.h): ranks in lockstep run one schedule.
 *
 * No global state, no output: warnings and progress go to the callbacks in the options.
 * Thread-safe for distinct arguments.
 */
#ifndef DH_PLANNER_H
#define DH_PLANNER_H

#include <stddef.h>
#include <stdint.h>

#include "align.h"
#include "plan.h"

/* ---- measured pairs (`dhelix profile-pairs`) ---- */

typedef struct dh_pairs {
    double class_eff[3][3];         /* [a class][b class] over compute, comm, copy */
    int class_set[3][3];            /* 1 where the file gives the efficiency */
    size_t n;
    dh_align_measured_t *pairs;     /* sorted by (a_sig, b_sig) */
} dh_pairs_t;

/* Reads {"format":"dhelix-pairs","version":1,"classes":[{"a","b","efficiency"}],
 * "pairs":[{"a_sig","b_sig","a_us","b_us","corun_us","efficiency"}]}. A pair without
 * "efficiency" gets (a_us + b_us - corun_us) / min(a_us, b_us). Errors as the other
 * loaders: one line "<file>: <problem>". */
dh_status_t dh_pairs_parse(const char *buf, size_t len, const char *name, dh_pairs_t **out,
                           char *err, size_t errlen);
dh_status_t dh_pairs_load(const char *path, dh_pairs_t **out, char *err, size_t errlen);
void dh_pairs_free(dh_pairs_t *p);

/* ---- iterations ---- */

typedef struct dh_iteration {
    size_t first, n;                /* profile ops of the last complete iteration */
    int reps;                       /* complete repetitions ending with it, op for op (>= 2,
                                       or >= 1 when the iterations vary: occurs) */
    size_t nsegments;               /* sync-delimited segments per iteration */
    int occurs;                     /* iterations of the profile equal to it op for op: reps,
                                       or, when the iterations vary with the data (their
                                       collectives and threads repeat, some kernels or
                                       GEMMs do not), how often the variant taken occurs
                                       (>= 2, the most of any) */
} dh_iteration_t;

/* Finds the repeating iteration of p (step 1). Errors: DH_ERR_NOT_FOUND with
 * "<name>: no repeating iteration found in N ops; profile at least 3 iterations". */
dh_status_t dh_profile_find_iteration(const dh_profile_t *p, const char *name,
                                      dh_iteration_t *out, char *err, size_t errlen);

/* Keeps of p only what the planner reads: the last keep (>= 1) complete repetitions of its
 * iteration (all of them when fewer), so that it finds the same iteration with the same
 * ops, dependencies kept. With compact profiles (version 2) the times per position are
 * means over every occurrence already; 2 repetitions still let the planner see shapes that
 * vary between iterations. Errors as dh_profile_find_iteration (p unchanged). */
dh_status_t dh_profile_trim(dh_profile_t *p, int keep, const char *name, char *err,
                            size_t errlen);

/* Compares profile ops ops[0..n) (one iteration) with a section's template. Returns 0 when
 * they match by signature, else 1 with msg = "first difference at op K: expected GEMM
 * 'gemm ...', found KERNEL '...'" (or "... found the end of the iteration"). */
int dh_plan_template_diff(const dh_plan_section_t *s, const dh_prof_op_t *ops, size_t n,
                          char *msg, size_t msglen);

/* ---- the planner ---- */

/* Called between steps: what is being done, and how far along (done of total). */
typedef void (*dh_plan_progress_fn)(void *ctx, const char *what, size_t done, size_t total);
/* Called once per warning with one line (no newline). */
typedef void (*dh_plan_warn_fn)(void *ctx, const char *msg);
/* Whether communicator c of the section's profile is pinned (DHELIX_GROUPS): its ops are
 * never paired. */
typedef int (*dh_plan_pinned_fn)(void *ctx, const dh_prof_comm_t *c);

#define DH_PLAN_GROUP_COST_US 10.0
#define DH_PLAN_FOLD_BELOW_US 2.0
/* Units per phase up to which the automatic L is 8: the DP's work grows with L^2 times the
 * states, and at this size it stays well under a second. */
#define DH_PLAN_LONG_SEG_UNITS 400

typedef struct dh_plan_opts {
    const char *const *names;       /* file name of each profile, for messages; NULL ok */
    const dh_pairs_t *pairs;        /* measured efficiencies; NULL: the default table */
    double max_extra_mem_bytes;     /* memory bound of the DP; < 0 none (default 2 GiB) */
    int max_segment;                /* L in units, 1..DH_ALIGN_MAX_SEG, or 0 (the default):
                                       8 when neither phase of a pair has more than
                                       DH_PLAN_LONG_SEG_UNITS units, else 4; with 0 each
                                       pair is aligned once more with 1.5 times that and
                                       the alignment whose groups replay faster is taken */
    double group_cost_us;           /* host time of one cross-strand barrier (event records
                                       and waits on both physical streams of each framework
                                       stream involved), >= 0 (default DH_PLAN_GROUP_COST_US) */
    double fold_below_us;           /* ops shorter than this fold into the next op of their
                                       phase (events and frees always do); < 0: no folding
                                       at all (default DH_PLAN_FOLD_BELOW_US) */
    const char *policy;             /* DHELIX_GROUPS text recorded in the plan ("all") */
    dh_plan_pinned_fn pinned;       /* NULL: nothing pinned */
    int microbatches;               /* expected micro-batches per iteration; 0 unchecked */
    dh_plan_progress_fn progress;   /* may be NULL */
    dh_plan_warn_fn warn;           /* may be NULL */
    void *ctx;                      /* passed to the three callbacks */
} dh_plan_opts_t;

/* The defaults above. */
void dh_plan_opts_init(dh_plan_opts_t *o);

/* Builds a plan from n >= 1 profiles. Errors: DH_ERR_NOT_FOUND (no iteration), DH_ERR_PARSE
 * (profiles that contradict each other: world, layout, a rank twice), DH_ERR_INVALID (bad
 * options), DH_ERR_NOMEM, DH_ERR_INTERNAL (the result failed dh_plan_check); one line in
 * err naming the profile and the problem. */
dh_status_t dh_plan_build(const dh_profile_t *const *profiles, int n, const dh_plan_opts_t *opts,
                          dh_plan_t **out, char *err, size_t errlen);

#endif
