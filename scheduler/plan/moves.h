/*
 * moves.h: point-to-point posts moved across communicators, and the proof that no wait can
 * cycle (DESIGN.md, "NCCL order"; docs/plan-format.md, "moved").
 *
 * Megatron's interleaved schedule posts a backward's input-gradient send (and the receive
 * for the next backward) on the main thread right after the backward, before the next
 * forward; the phases put them at the start of that forward, so the forward's first
 * tensor-parallel collective comes after a send that needs the whole backward, and the
 * pair cannot overlap. A move attributes those posts to the backward (the phase boundary
 * shifts; the template is unchanged), so the alignment may issue the forward's collectives
 * before them: an issue-order change across communicators, which the planner keeps only
 * where dh__moves_check proves, over the plans of every section together, that no cycle of
 * waits can form.
 *
 * The wait-for graph of one steady iteration: one node per NCCL operation of every rank
 * with a profile (a rank runs its section's plan); with one hardware queue every operation
 * waits for the one issued before it on its rank (so the proof covers more queues too);
 * the operations of one collective on every member, and a send with its receive, are one
 * node (all must be reached). Communicators are told apart across processes by their
 * identity (nccl_wrap/registry.h, dh_nccl_ident: a hash of the unique id, or of the parent,
 * colour and ordinal of a split): the i-th collective of one communicator joins on every
 * member, the i-th send of one member of a two-rank communicator joins the i-th receive of
 * the other. What cannot be matched (no identity, a peer without a profile, a pipeline
 * communicator with members not profiled, point-to-point on more than two ranks) is not
 * proven, and the moves are refused. A cycle is looked for with every section in plan
 * order below a pair ordinal and in program order from there, for every ordinal: that is
 * every mix the runtime's agreement can produce (scheduler/modes/agree.c, tracker.c). The
 * job's ranks decide each (iteration, pair ordinal) together, a rank votes only once it
 * has captured every op of the pair's two-strand groups, and a no (a stage that votes no,
 * a desync or a drain before the vote) ends pairing for the rest
 * of the iteration on every rank; a desync after a yes finds the pair captured whole and
 * issues it in plan order. Ordinal 0 is program order everywhere (the probe, auto mode
 * before its switch, which every rank makes at one iteration boundary). Outside the proof,
 * as for the orders of collectives per communicator (orders.c): a broken agreement channel
 * (a rank that gave up waiting runs program order while a peer may already have had its
 * yes).
 *
 * Not thread-safe; used by one planning run.
 */
#ifndef DH_PLAN_MOVES_H
#define DH_PLAN_MOVES_H

#include <stddef.h>
#include <stdint.h>

#include "plan.h"
#include "planner.h"

/* The number of ops at the start of F phase k + 1 (paired with B phase k) that are posts of
 * point-to-point operations and their bookkeeping (the shim's chain events, frees), ending
 * with the last point-to-point operation of that run and the event recorded right after it,
 * when the phase has a collective of another communicator after them; 0 when none. ops is
 * the template (tops) of profile p. */
size_t dh__move_len(const dh_profile_t *p, const dh_prof_op_t *ops, const dh_plan_phase_t *ph,
                    int nph, int k);

/* What the check needs of one rank with a profile. */
typedef struct dh__mv_sect {
    const dh_plan_section_t *s;     /* its section's plan (groups, phases, ops, moved) */
    const dh_profile_t *p;          /* its profile (communicators and their identities) */
    const dh_prof_op_t *tops;       /* its template ops */
    int sec;                        /* its section */
} dh__mv_sect_t;

/* Checks the plans of the ranks x[0..ns) together (above). Returns DH_OK and *cycle 0 when
 * no mix of plan and program order can form a cycle of waits; else *cycle 1, refuse[sec]
 * set for every section whose moved operation is on the cycle (every section on it that
 * moves when none is), and why (whylen bytes) says which ranks, communicators and
 * operations form it. Ranks that cannot be checked (a communicator without an identity, a
 * peer without a profile) count as a cycle through every move. Errors: DH_ERR_NOMEM. */
dh_status_t dh__moves_check(const dh__mv_sect_t *x, int ns, uint8_t *refuse, int *cycle,
                            char *why, size_t whylen);

/* ---- what the planner calls (planner.c) ---- */

/* 1 when o is a point-to-point operation on a communicator of the pipeline (what a move
 * moves, and what of a forward must stay after it). */
int dh__move_is_post(const dh_profile_t *p, const dh_prof_op_t *o);
/* The pairs of s (phases made, groups not yet) whose posts would move. */
int dh__moves_count(const dh_profile_t *p, const dh_prof_op_t *tops, const dh_plan_section_t *s);
/* Moves the posts of every pair of s into its backward phase (dh__move_len); moved[k] (room
 * for s->nphases) the ops moved into B phase k. Before the pairs are aligned. */
void dh__moves_apply(const dh_profile_t *p, const dh_prof_op_t *tops, dh_plan_section_t *s,
                     size_t *moved);
/* After the alignment: marks the NCCL ops of the moves whose pairs stayed paired (moved = 1)
 * and counts them in s->moves (a pair left serial runs in program order). */
void dh__moves_mark(dh_plan_section_t *s, const size_t *moved);
struct dh__tmpl;
/* One round of the check over plan (sections built; n profiles, profile k in section
 * sec[k], its template tmpl[k]): *again 1 when a cycle refused moves, refuse[] then names
 * at least one more section (all of them when the cycle named none new), and warn (when
 * not NULL) says which and the cycle in full. Errors: DH_ERR_NOMEM. */
dh_status_t dh__moves_round(const dh_plan_t *plan, const dh_profile_t *const *prof,
                            const struct dh__tmpl *tmpl, const int *sec, int n,
                            dh_plan_warn_fn warn, void *ctx, uint8_t *refuse, int *again);

#endif
