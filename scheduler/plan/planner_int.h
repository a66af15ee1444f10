/*
 * planner_int.h: what phases.c hands to planner.c (not part of dh_plan's API).
 */
#ifndef DH_PLANNER_INT_H
#define DH_PLANNER_INT_H

#include "memsim.h"
#include "planner.h"
#include "timesim.h"

/* A profile's iteration with the statistics over its repetitions. */
typedef struct dh__tmpl {
    dh_iteration_t it;
    const dh_prof_op_t *ops;        /* the profile's ops of the last repetition (it.first) */
    double *us;                     /* per template op: mean known time, -1 when never known */
    int *shape_dyn;                 /* per template op: the shape varied between repetitions */
    double baseline_us;             /* mean iteration time */
    double exposed_comm_us;         /* mean comm time not under any compute */
    size_t unknown_us;              /* template ops with no known time */
} dh__tmpl_t;

/* Finds p's iteration and its statistics. Errors as dh_profile_find_iteration. */
dh_status_t dh__tmpl_build(const dh_profile_t *p, const char *name, dh__tmpl_t *t, char *err,
                           size_t errlen);
void dh__tmpl_free(dh__tmpl_t *t);

/* Splits template ops[0..n) into phases, gives them kinds, micro-batches and pairs
 * (planner.h steps 3 and 4). *out is malloc'ed. Errors: DH_ERR_NOMEM. */
dh_status_t dh__phases(const dh_prof_op_t *ops, size_t n, dh_plan_phase_t **out, int *nphases);

/* ---- transfer.c ---- */

/* Caps the DP's time of each collective of a pipeline communicator in aops[0..n) (the
 * template t of profile p) at the lower envelope of that communicator's transfers, latency
 * plus bytes times the least time per byte: what pairing can hide of a transfer is the
 * transfer, not its wait for the other stage. Errors: DH_ERR_NOMEM. */
dh_status_t dh__transfer_times(const dh_profile_t *p, const dh__tmpl_t *t, dh_align_op_t *aops,
                               size_t n);

/* ---- groups.c: a section's groups ---- */

typedef struct dh__groups {         /* the groups made so far, in execution order */
    dh_plan_group_t *g;
    int n, cap;
} dh__groups_t;

/* Serial strand-a work: template ops [first, first+n) as one group, or appended to the last
 * group when that is strand a alone and ends at first (no barrier between the two). Its
 * predicted time is pred_us, or the ops' solo times when pred_us < 0. Errors: DH_ERR_NOMEM. */
dh_status_t dh__emit_serial(dh_plan_section_t *s, dh__groups_t *gs, size_t first, size_t n,
                            double pred_us);
/* The groups of one aligned pair r: A (strand a) starts at template op a_base, B (strand b)
 * at b_base; cuta and cutb are the units the DP ran on (relative to the phases). A leading
 * solo-a step joins the serial group before it (dh__emit_serial); a paired group's issue
 * order goes unit by unit. Every group's predicted time is its replay on ts (timesim.h),
 * and a paired group whose replay is slower than its two strands' replayed one after the
 * other becomes those two groups (strand a, then strand b): a pair that costs more than it
 * hides is not made. *sum_us is the sum of the groups' times. Errors: DH_ERR_NOMEM. */
dh_status_t dh__emit_pair(dh_plan_section_t *s, dh__groups_t *gs, size_t a_base, size_t b_base,
                          const dh_align_result_t *r, const size_t *cuta, const size_t *cutb,
                          dh_tsim_t *ts, double *sum_us);
void dh__groups_free(dh__groups_t *gs);

/* ---- planmem.c: memory ---- */

/* The template ops tops[0..s->nops) of profile p as memsim.h sees them (*mops, malloc'ed;
 * their sizes point into p) and the DP's memory fields of aops (net bytes, and per phase of
 * s what its own later allocations take back); *fixed the runtime's own memory that pairing
 * makes it allocate (both strands' cuBLAS workspaces when the template runs GEMMs).
 * Errors: DH_ERR_NOMEM. */
dh_status_t dh__mem_ops(const dh_profile_t *p, const dh_prof_op_t *tops,
                        const dh_plan_section_t *s, dh_align_op_t *aops, dh_memsim_op_t **mops,
                        double *fixed);
/* dh_align of A (a, na) beside B (b, nb), then, with a bound, the pair simulated as the
 * runtime holds it (mops: A's memsim ops followed by B's; agree: the ranks vote on pairs):
 * when it passes p->max_extra_mem, the DP again under lower bounds (a bisection) for the
 * best alignment that keeps it. *fits 0 when none does (r is then the first, unchanged).
 * Errors as dh_align, and DH_ERR_NOMEM. */
dh_status_t dh__align_fit(const dh_align_op_t *a, size_t na, const dh_align_op_t *b, size_t nb,
                          const dh_memsim_op_t *mops, int agree, const dh_align_model_t *m,
                          const dh_align_params_t *p, dh_align_result_t *r, int *fits);
/* What the runtime holds back for pairing at most (s->held_ops, s->held_free_bytes):
 * walking the template (src, its profile ops) in program order, the ops and bytes of frees
 * in groups not complete yet, as the tracker releases them (scheduler/modes/tracker.c; a group of
 * one strand goes out op by op once every group before it is complete). The runtime's
 * bounded-lag limits stretch to this. Errors: DH_ERR_NOMEM. */
dh_status_t dh__held(const dh_prof_op_t *src, dh_plan_section_t *s);

/* ---- dpcache.c: alignments by their input ---- */

/* Results of dh_align by input: a pair whose input equals an earlier pair's (the steady
 * state repeats per micro-batch) gets that pair's result without running the DP again.
 * Not thread-safe; one per section. */
struct dh__dpcache_entry;
typedef struct dh__dpcache {
    struct dh__dpcache_entry *e;
    int n, cap;
    size_t hits;                    /* lookups answered from the cache */
} dh__dpcache_t;

/* The key of one DP input (everything dh_align and dh__align_fit read: A, B, their memsim
 * ops mops (A's then B's; may be NULL), the dependency limits, the orders of collectives,
 * L); *key is malloc'ed. Errors: DH_ERR_NOMEM. */
dh_status_t dh__dpcache_key(const dh_align_op_t *a, size_t na, const dh_align_op_t *b,
                            size_t nb, const dh_memsim_op_t *mops, const size_t *need,
                            const dh_align_order_t *orders, int norders, int max_seg,
                            uint64_t **key, size_t *nkey);
/* 1 when key is known: *st is what dh_align returned for it and, when DH_OK, r a copy of
 * its result (free with dh_align_result_free); 0 when not (r untouched). */
int dh__dpcache_get(dh__dpcache_t *c, const uint64_t *key, size_t nkey, dh_status_t *st,
                    dh_align_result_t *r);
/* Remembers st and r (copied) for key, which the cache takes over (freed on failure too).
 * Errors: DH_ERR_NOMEM. */
dh_status_t dh__dpcache_put(dh__dpcache_t *c, uint64_t *key, size_t nkey, dh_status_t st,
                            const dh_align_result_t *r);
void dh__dpcache_free(dh__dpcache_t *c);

/* ---- match.c ---- */

/* Matches b's ops to a's by signature with the fewest insertions and deletions: match[j]
 * (room for nb) is the index in a of b's op j, or -1 when it has none. Returns the number
 * of edits, -1 when more than max_edits are needed (match undefined), -2 out of memory. */
long dh__match_sigs(const uint64_t *a, size_t na, const uint64_t *b, size_t nb,
                    size_t max_edits, long *match);

/* Ranks of one program run in lockstep (their collectives wait for each other), so they
 * should run one schedule; and the runtime's dependency moves keep the order of collectives
 * alike on every rank only when the ranks' groups are alike. So a section whose template
 * differs from an earlier section's by at most DH__MIRROR_EDITS ops plus one per
 * DH__MIRROR_PER_EDIT (rank 0 loads the data) mirrors the first such section (its root,
 * which mirrors none): every section of the cluster, the root included, plans with the
 * root's DP input for the ops they share, and with the ops that not all of them have as
 * bookkeeping (no time; compute and copy ones as events), so their DPs see one input and
 * choose the same groups. */
#define DH__MIRROR_EDITS 8
#define DH__MIRROR_PER_EDIT 50
/* ... of which at most this many: a few per micro-batch of a deep model (rank 0's data
 * copies), while the matcher's time and trace grow with its square. */
#define DH__MIRROR_MAX_PER_EDIT 1024

typedef struct dh__mirror {
    int ns;
    int *root;                      /* [k]: the section k mirrors, k itself for a root */
    long **match;                   /* [k]: section k's ops matched to its root's (-1: one
                                       the root lacks); NULL for a root */
    uint8_t **alone;                /* [r]: root r's ops that a section of its cluster lacks;
                                       NULL when none mirrors r */
} dh__mirror_t;

/* The clusters of the sections' templates (tmpl[k] is section k's). Errors: DH_ERR_NOMEM. */
dh_status_t dh__mirror_build(const dh__tmpl_t *const *tmpl, int ns, dh__mirror_t *m);
void dh__mirror_free(dh__mirror_t *m);

/* ---- orders.c: one order of collectives per communicator for every section ---- */

typedef struct dh__ordrec {         /* one communicator's order in one reference pair */
    char key[160];                  /* name|role|nranks|occurrence */
    size_t na, nb;                  /* its collectives in A and in B */
    uint8_t *seq;                   /* na + nb entries, as dh_align_order_t.from_b */
} dh__ordrec_t;

typedef struct dh__pairrec {
    dh__ordrec_t *recs;
    int n;
} dh__pairrec_t;

typedef struct dh__orders {         /* the orders chosen so far, by pair ordinal */
    dh__pairrec_t *pairs;
    int npairs;
} dh__orders_t;

/* Records, for the communicators of pair ordinal pair that no earlier section chose for
 * (by key and counts), the orders its DP result r runs, or program order (all of A first)
 * when r is NULL (the pair runs serially). prof names the communicators. Errors:
 * DH_ERR_NOMEM. */
dh_status_t dh__orders_record(dh__orders_t *o, int pair, const dh_profile_t *prof,
                              const dh_align_op_t *a, size_t na, const dh_align_op_t *b,
                              size_t nb, const dh_align_result_t *r);
/* The orders a section's pair must follow: one per communicator of its collectives that an
 * earlier section chose for (same key and counts); the others are its DP's to choose. *out
 * and *buf (the sequences) are malloc'ed. Errors: DH_ERR_NOMEM. */
dh_status_t dh__orders_for(const dh__orders_t *o, int pair, const dh_profile_t *prof,
                           const dh_align_op_t *a, size_t na, const dh_align_op_t *b, size_t nb,
                           dh_align_order_t **out, int *nout, uint8_t **buf);
void dh__orders_free(dh__orders_t *o);

#endif
