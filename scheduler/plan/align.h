/*
 * align.h: the alignment DP that pairs the backward of micro-batch i (sequence A, strand a)
 * with the forward of micro-batch i+1 (sequence B, strand b).
 *
 *   T[i][j] = min( T[i-1][j] + solo(a_i),  T[i][j-1] + solo(b_j),
 *                  T[i-l1][j-l2] + P(A[i-l1..i), B[j-l2..j))   1 <= l1, l2 <= L, legal )
 *
 * Cost of co-running segments SA and SB (tX = sum of solo times, fX(c) = share of tX spent
 * in class c):
 *   e = sum_x sum_y fA(x) fB(y) eff(x, y)        over x, y in {compute, comm, copy}
 *   P = max(tA, tB) + (1 - e) min(tA, tB)
 * With e = 1 the shorter segment hides completely; with e = 0 co-running gains nothing.
 * A pair of single ops (single units: of each unit's longest op) whose signatures were
 * measured together (dh_align_model_t.measured) uses the measured efficiency instead.
 *
 * Units (pre-grouping, the paper's "pre-grouped op lists"): the DP may run on units instead
 * of ops (dh_align_params_t.a_cuts, b_cuts; dh_align_fold makes them): a unit is a run of
 * consecutive ops that a step never splits. Segments, L and the state grid are then counted
 * in units; a segment's sums run over all of its ops (times, class shares, communicators,
 * bad ops), so a unit is legal beside another only when each of its ops would be. Results
 * are always in ops.
 *
 * Group overhead: between two groups the runtime puts a cross-strand barrier (event
 * records and waits between the two physical streams of each framework stream), except
 * between two groups of strand a alone; its host time is G = group_cost_us. Consecutive
 * solo steps of one strand form one group. A pair is entered from serial strand-a work and
 * hands back to it, so a path pays G for each of its groups except a leading solo-a one,
 * and G once more when its last group is not solo a. With T_a, T_b, T_p the best cost of a
 * path into (i, j) whose last step was solo a, solo b, or a pair, and M = min of the three:
 *   T_a[i][j] = min(T_a[i-1][j], T_b[i-1][j] + G, T_p[i-1][j] + G) + solo(a_i)
 *   T_b[i][j] = min(T_b[i][j-1], T_a[i][j-1] + G, T_p[i][j-1] + G) + solo(b_j)
 *   T_p[i][j] = min over l1, l2 of M[i-l1][j-l2] + P(...) + G
 * with T_a[0][0] = 0 (T_b, T_p infinite there); the optimum is min(T_a, T_b + G, T_p + G)
 * at (nA, nB). The serial path (A, then B) costs serial + 2G, and any path with a pair at
 * least G more than its solo-time sum: a pair whose optimum is not below the serial time is
 * better left unpaired (one strand-a group). With G = 0 this is the recurrence above.
 *
 * Dependencies (params b_need): a B op that depends on A's op i may only run once A's
 * first i + 1 ops are done: in a solo-b step or a pair step that starts past them.
 *
 * Legality (a pair that breaks one is never chosen):
 *   - both segments use the same communicator (NCCL needs one order per communicator; an
 *     op of class comm with comm index -1, a kernel classified as comm or an emulated
 *     collective, is a channel of its own and conflicts with no other op);
 *   - either segment holds a host op or a pinned op (DHELIX_GROUPS);
 *   - neither side holds comm or copy (compute || compute) and eff(compute, compute) <= 0
 *     (for a measured single-op pair: its measured efficiency <= 0).
 *
 * Memory, as the runtime holds it (the planner's full account of a plan is memsim.h; this
 * is its bound, per state). memA(i) is the sum of mem over A's first i ops, memB(j)
 * likewise; peak_base = max(max_i memA(i), memA(nA) + max_j memB(j)) (A then B, serially).
 * The program issues all of A before B, and the runtime holds A's ops from its first
 * paired group on until their B ops arrive: by then every allocation of A has been made
 * (cudaMallocAsync answers at once) while A's frees take effect only as their groups go
 * out, except those a later allocation of A took back (the shim's pool, exact size: kept),
 * whose bytes live on in that allocation. So once B has started, or inside a pair, A
 * stands at
 *   heldA(i) = memA(nA) + (the bytes of A's frees at or past op i that nothing took back),
 * and before (A's leading solo steps, j = 0) at memA(i). Frees of B inside a paired group
 * wait for the group too, and only B's allocations of that group may take them back
 * (retaken, from a free inside the group), so a pair segment of B from j0 stands at
 *   heldB(j0, j) = memB(j0) + (the bytes B allocates in [j0, j) that take back no free of
 *                  [j0, j)),
 * and between groups at memB(j) (a group's frees go out with it; a solo-b group goes out
 * op by op):
 *   extra(i, j) = max(0, (j > 0 or in a pair ? heldA(i) : memA(i)) + memB'(j) - peak_base),
 * with memB' heldB inside a pair step, memB otherwise. A step is allowed only when extra
 * is within the bound at every state (i', j') it spans: for a pair step from (i0, j0) to
 * (i1, j1) every i0 <= i' <= i1, j0 <= j' <= j1, because two co-running segments may
 * interleave in any way; for a solo step every state its ops pass through (its end state
 * when it is one op). The serial path (all of A, then all of B) never exceeds peak_base
 * (heldA(nA) = memA(nA)), so it is always allowed and the DP is never worse than serial
 * plus 2G. The runtime's own memory (its cuBLAS workspaces) is the caller's to take off
 * the bound.
 *
 * Pure functions of their arguments: thread-safe.
 */
#ifndef DH_ALIGN_H
#define DH_ALIGN_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "plan.h"

#define DH_ALIGN_MAX_SEG 16

/* One op as the DP sees it. */
typedef struct dh_align_op {
    double us;          /* solo device time (>= 0) */
    dh_opclass_t cls;
    int comm;           /* communicator index (class comm), -1 none (own channel) */
    int pinned;         /* may never run beside the other strand */
    int64_t mem;        /* bytes allocated minus bytes freed by this op (its thread's
                           allocations since its previous op, and a free's block) */
    uint64_t sig;       /* for the measured pairs */
    /* Memory reuse inside its sequence (the shim's pool, dh_memsim_reuse; all 0 when
     * unknown, which is conservative): */
    int64_t freed;      /* bytes it frees (>= 0) */
    int64_t kept;       /* of those, what a later allocation of its sequence takes back */
    int64_t retaken;    /* bytes of its allocations that take back earlier frees of its
                           sequence */
    uint32_t retaken_from; /* how many ops back the earliest free they take is (0: none) */
} dh_align_op_t;

/* A measured pair: op a (strand a) and op b (strand b) co-ran with this efficiency. */
typedef struct dh_align_measured {
    uint64_t a_sig, b_sig;
    double efficiency;
} dh_align_measured_t;

typedef struct dh_align_model {
    /* eff[x][y]: efficiency of class x (strand a) beside class y (strand b), for x, y in
     * compute, comm, copy; other classes count as 0. Clamped to [-1, 1] by the DP. */
    double eff[3][3];
    const dh_align_measured_t *measured;   /* sorted by (a_sig, b_sig); may be NULL */
    size_t nmeasured;
} dh_align_model_t;

/* The default table; sources: the paper's overlap profiling (REFERENCE.md, "The paper"):
 * GEMM || all-gather 0.85-0.99, GEMM || GEMM -0.1..0.1, attention || all-gather 0.70-0.85.
 *   compute||comm 0.90, comm||compute 0.90, compute||compute 0, comm||comm 0,
 *   copy||compute 0.5, copy||comm 0.5 (and symmetric), copy||copy 0. */
void dh_align_model_default(dh_align_model_t *m);

/* The order in which one communicator's collectives of A and of B must run. NCCL matches
 * collectives by their order on each communicator, so every member rank must interleave the
 * two strands' collectives the same way; ranks whose templates differ (rank 0 loads the
 * data, say) get different DPs, and the planner makes them follow one order with this. */
typedef struct dh_align_order {
    int comm;                   /* the communicator (>= 0): ops of class comm with this index */
    size_t n;                   /* its collectives in A plus in B */
    const uint8_t *from_b;      /* n entries in run order: 0 the next of A's, 1 the next of B's */
} dh_align_order_t;

typedef struct dh_align_params {
    int max_seg;                /* L, in units, 1..DH_ALIGN_MAX_SEG */
    double max_extra_mem;       /* bytes; < 0: no bound */
    double group_cost_us;       /* G, >= 0: the overhead of every group after the first */
    /* Optional units: unit u of A is ops [a_cuts[u], a_cuts[u+1]), with a_cuts[0] = 0,
     * strictly increasing, a_cuts[a_nunits] = na (dh_align_fold). NULL: one unit per op. */
    const size_t *a_cuts, *b_cuts;
    size_t a_nunits, b_nunits;
    /* Optional: a state (i, j) is allowed only when, for every order, the collectives done
     * (in A[0..i) and B[0..j)) are a prefix of it. A pair step never holds one communicator
     * on both sides, so checking each step's end state keeps the whole order. */
    const dh_align_order_t *orders;
    int norders;
    /* Optional, nb entries: how many of A's ops must be done before B's op j starts (it
     * waits for an event of A's, or touches memory A made or wrote; the runtime moves it
     * behind them, scheduler/dispatch/sched.c). A step that holds B's op j then starts at a state
     * (i, .) with i >= need[j'] for every j' <= j (B's ops keep their order). NULL: none. */
    const size_t *b_need;
} dh_align_params_t;

/* One group of the optimal path. Ranges are op ranges relative to A and B (whole units
 * when the DP ran on units). A solo group has one empty range; consecutive solo steps of
 * one strand are merged into one group. */
typedef struct dh_align_step {
    size_t a_first, a_n, b_first, b_n;
    int paired;                 /* both ranges non-empty and co-run */
    double cost_us;             /* P for a pair, the solo sum otherwise (no overhead) */
    double extra_mem;           /* largest extra over the states the step spans */
} dh_align_step_t;

typedef struct dh_align_result {
    double cost_us;             /* the optimum, group overheads included */
    double serial_us;           /* sum of all solo times */
    double overhead_us;         /* G times the overheads the path pays: nsteps, less one
                                   when the first step is solo a, plus one when the last
                                   is not; cost_us = sum of the steps' cost_us + this */
    double extra_mem;           /* max extra over the chosen path */
    int npairs;                 /* paired steps */
    size_t nsteps;
    dh_align_step_t *steps;     /* in execution order */
} dh_align_result_t;

/* Cost of co-running a[0..na) beside b[0..nb) (na, nb >= 1), or INFINITY when the pair is
 * illegal. Memory is not considered here (it depends on the position in the sequences). */
double dh_align_pair_cost(const dh_align_model_t *m, const dh_align_op_t *a, size_t na,
                          const dh_align_op_t *b, size_t nb);

/* Pre-grouping. An op is an anchor when it takes time: its class is neither event nor
 * free, and it is a collective, a host op, pinned, or at least min_us long (an unknown time
 * counts as 0). Every other op folds into the next anchor of ops[0..n), or into the last
 * one when no anchor follows: a unit is the non-anchors before an anchor and the anchor.
 * Collectives always anchor, so a unit holds at most one and every order of collectives
 * stays expressible in units; host and pinned ops anchor so that they make only their own
 * unit unpairable. Writes the k + 1 unit boundaries to cuts (room for n + 1: cuts[0] = 0,
 * cuts[k] = n) and returns k, the number of units (1 when no op anchors, 0 when n is 0). */
size_t dh_align_fold(const dh_align_op_t *ops, size_t n, double min_us, size_t *cuts);

/* Runs the DP. Either sequence may be empty. Errors: DH_ERR_INVALID (max_seg out of
 * range, a negative or non-finite group_cost_us, cuts that do not cover their sequence as
 * described, an order whose counts are not those of its communicator's ops, an order of
 * comm -1, whose ops no NCCL order joins), DH_ERR_RANGE
 * ((units of A + 1)(units of B + 1) above DH_ALIGN_MAX_STATES), DH_ERR_STATE (no path keeps
 * the orders: they contradict each other), DH_ERR_NOMEM. On success *out owns steps (free with
 * dh_align_result_free). */
#define DH_ALIGN_MAX_STATES (64u << 20)
dh_status_t dh_align(const dh_align_op_t *a, size_t na, const dh_align_op_t *b, size_t nb,
                     const dh_align_model_t *m, const dh_align_params_t *p,
                     dh_align_result_t *out);
void dh_align_result_free(dh_align_result_t *r);

/* The order in which r's path runs the collectives of communicator comm (as in
 * dh_align_order_t.from_b), written to out (room for every one of them); returns their
 * number. */
size_t dh_align_comm_order(const dh_align_result_t *r, const dh_align_op_t *a,
                           const dh_align_op_t *b, int comm, uint8_t *out);

#endif
