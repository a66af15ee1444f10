/*
 * plan.moves: the proof that moved point-to-point posts cannot make waits cycle
 * (scheduler/plan/moves.h), on two ranks of two pipeline stages whose answer is worked out
 * by hand: rank 0's backward ends with a send to rank 1 (a two-rank communicator), which
 * the plan moves after a collective of its forward; rank 1 receives, then runs the same
 * collective's forward.
 *   - The collective on a communicator of both ranks (the job's world): with the send
 *     after it on rank 0, rank 0 waits in the collective for rank 1, which waits in its
 *     receive for rank 0's send: a cycle, refused, naming both ranks and communicators.
 *   - The collective on a communicator of rank 0 alone (a tensor-parallel group of its
 *     stage): nothing on rank 1 waits for it, no cycle.
 *   - The same move in program order (no op marked moved): nothing to prove.
 *   - A peer without a profile: not proven, refused.
 * And dh__move_len finds the posts (send, the records after it on its stream) that open a
 * forward.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "moves.h"

enum { P2P = 0, COLL = 1 };
#define OPS 3

/* One rank: template ops K (kernel), S or R (post), W (collective); phases B = [K, S/R] and
 * F = [W]; one paired group issued in `order`. */
typedef struct rank {
    dh_profile_t p;
    dh_prof_comm_t comms[2];
    dh_prof_op_t tops[OPS];
    dh_plan_section_t s;
    dh_plan_op_t ops[OPS];
    dh_plan_phase_t ph[2];
    dh_plan_group_t g;
    char order[OPS + 1];
    int r;
} rank_t;

static void op(dh_prof_op_t *o, const char *kind, const char *name, int comm)
{
    memset(o, 0, sizeof *o);
    snprintf(o->kind, sizeof o->kind, "%s", kind);
    snprintf(o->name, sizeof o->name, "%s", name);
    o->comm = comm;
    o->cls = strncmp(kind, "NCCL", 4) == 0      ? DH_CLS_COMM
             : strncmp(kind, "EVENT", 5) == 0   ? DH_CLS_EVENT
             : strcmp(kind, "FREE_ASYNC") == 0 ? DH_CLS_FREE
                                               : DH_CLS_COMPUTE;
}

/* Rank r of 2: sends (r 0) or receives (r 1) on the pair communicator (ident 10), then the
 * collective on comm W (ident w_ident, w_nranks ranks); plan order `order`, moved: the
 * post is marked moved. */
static void rank_init(rank_t *x, int r, uint64_t w_ident, int w_nranks, const char *order,
                      int moved)
{
    memset(x, 0, sizeof *x);
    x->r = r;
    x->p.rank = r;
    x->p.world = 2;
    x->p.ncomms = 2;
    x->p.comms = x->comms;
    x->comms[P2P] = (dh_prof_comm_t){"pair", "pp", 2, r, 10};
    x->comms[COLL] = (dh_prof_comm_t){"world", "", w_nranks, w_nranks > 1 ? r : 0, w_ident};
    op(&x->tops[0], "KERNEL", "dgrad", -1);
    op(&x->tops[1], "NCCL_GROUP", r == 0 ? "nccl Group 1 Send bf16 1024" : "nccl Group 1 Recv bf16 1024",
       P2P);
    op(&x->tops[2], "NCCL", "nccl AllReduce f32 16", COLL);
    x->p.nops = OPS;
    x->p.ops = x->tops;
    for (int i = 0; i < OPS; i++) {
        x->ops[i].phase = i < 2 ? 0 : 1;
        x->ops[i].strand = i < 2 ? 0 : 1;
        memcpy(x->ops[i].kind, x->tops[i].kind, sizeof x->ops[i].kind);
    }
    x->ops[1].moved = (int8_t)moved;
    x->ph[0] = (dh_plan_phase_t){0, 2, 'B', 0, 1, 1};
    x->ph[1] = (dh_plan_phase_t){2, 1, 'F', 1, 0, 0};
    snprintf(x->order, sizeof x->order, "%s", order);
    x->g = (dh_plan_group_t){0, 2, 2, 1, x->order, 0, 0};
    x->s.nops = OPS;
    x->s.ops = x->ops;
    x->s.nphases = 2;
    x->s.phases = x->ph;
    x->s.ngroups = 1;
    x->s.groups = &x->g;
    x->s.nranks = 1;
    x->s.ranks = &x->r;
}

static void check(rank_t *x, int n, int *cycle, uint8_t *refuse, char *why, size_t whylen)
{
    dh__mv_sect_t mv[2];
    for (int k = 0; k < n; k++)
        mv[k] = (dh__mv_sect_t){&x[k].s, &x[k].p, x[k].tops, k};
    memset(refuse, 0, 2);
    assert_int_equal(dh__moves_check(mv, n, refuse, cycle, why, whylen), DH_OK);
}

static void test_cycle_refused(void **state)
{
    (void)state;
    rank_t x[2];
    rank_init(&x[0], 0, 20, 2, "aba", 1);   /* K, W, S: the send after the collective */
    rank_init(&x[1], 1, 20, 2, "aab", 0);   /* K, R, W */
    int cycle = 0;
    uint8_t refuse[2];
    char why[1024];
    check(x, 2, &cycle, refuse, why, sizeof why);
    assert_int_equal(cycle, 1);
    assert_int_equal(refuse[0], 1);          /* rank 0's section holds the moved send */
    assert_int_equal(refuse[1], 0);
    print_message("%s\n", why);
    assert_non_null(strstr(why, "rank 0"));
    assert_non_null(strstr(why, "rank 1"));
    assert_non_null(strstr(why, "'world'"));
    assert_non_null(strstr(why, "'pair'"));
    assert_non_null(strstr(why, "Send"));
    assert_non_null(strstr(why, "Recv"));
}

static void test_local_collective_proven(void **state)
{
    (void)state;
    rank_t x[2];
    rank_init(&x[0], 0, 20, 1, "aba", 1);   /* W on rank 0's own communicator */
    rank_init(&x[1], 1, 21, 1, "aab", 0);
    int cycle = 1;
    uint8_t refuse[2];
    char why[1024];
    check(x, 2, &cycle, refuse, why, sizeof why);
    assert_int_equal(cycle, 0);
    assert_int_equal(refuse[0], 0);
}

static void test_program_order_nothing_to_prove(void **state)
{
    (void)state;
    rank_t x[2];
    rank_init(&x[0], 0, 20, 2, "aab", 0);
    rank_init(&x[1], 1, 20, 2, "aab", 0);
    int cycle = 1;
    uint8_t refuse[2];
    char why[1024];
    check(x, 2, &cycle, refuse, why, sizeof why);
    assert_int_equal(cycle, 0);
}

static void test_peer_unprofiled_refused(void **state)
{
    (void)state;
    rank_t x[1];
    rank_init(&x[0], 0, 20, 1, "aba", 1);
    int cycle = 0;
    uint8_t refuse[2];
    char why[1024];
    check(x, 1, &cycle, refuse, why, sizeof why);
    assert_int_equal(cycle, 1);
    assert_int_equal(refuse[0], 1);
    assert_non_null(strstr(why, "no profile of the peer"));
}

static void test_move_len(void **state)
{
    (void)state;
    /* F phase: free, event wait, Send, record, event wait, AllGather (tp): the first four
     * are posts and their bookkeeping; the AllGather is what the move lets go first. */
    dh_prof_comm_t comms[2] = {{"pair", "pp", 2, 0, 10}, {"tp", "tp", 2, 0, 30}};
    dh_profile_t p = {.ncomms = 2, .comms = comms};
    dh_prof_op_t o[7];
    op(&o[0], "KERNEL", "dgrad", -1);
    op(&o[1], "FREE_ASYNC", "free 4096", -1);
    op(&o[2], "EVENT_WAIT", "wait", -1);
    op(&o[3], "NCCL_GROUP", "nccl Group 1 Send bf16 1024", 0);
    op(&o[4], "EVENT_RECORD", "record", -1);
    op(&o[5], "EVENT_WAIT", "wait", -1);
    op(&o[6], "NCCL", "nccl AllGather bf16 1024", 1);
    o[2].stream = o[3].stream = o[4].stream = 2;   /* the post's stream: its wait, its record */
    dh_plan_phase_t ph[2] = {{0, 1, 'B', 0, 1, 1}, {1, 6, 'F', 1, 0, 0}};
    assert_int_equal(dh__move_len(&p, o, ph, 2, 0), 4);
    /* A record on another stream after the post is the next operation's start event: it
     * stays in the forward, whose wait for it comes next. */
    op(&o[4], "EVENT_RECORD", "record", -1);
    assert_int_equal(dh__move_len(&p, o, ph, 2, 0), 3);
    o[4].stream = 2;
    /* Without a collective after them, nothing to gain: no move. */
    ph[1].n = 4;
    assert_int_equal(dh__move_len(&p, o, ph, 2, 0), 0);
    /* Only computation after the posts (no tensor parallelism): no move (moves.c says
     * why). */
    op(&o[6], "KERNEL", "norm_fwd", -1);
    ph[1].n = 6;
    assert_int_equal(dh__move_len(&p, o, ph, 2, 0), 0);
    op(&o[6], "NCCL", "nccl AllGather bf16 1024", 1);
    /* A tensor-parallel collective first: not a post of the pipeline, no move. */
    ph[1] = (dh_plan_phase_t){6, 1, 'F', 1, 0, 0};
    assert_int_equal(dh__move_len(&p, o, ph, 2, 0), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cycle_refused),
        cmocka_unit_test(test_local_collective_proven),
        cmocka_unit_test(test_program_order_nothing_to_prove),
        cmocka_unit_test(test_peer_unprofiled_refused),
        cmocka_unit_test(test_move_len),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
