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
 * forward. Then context parallelism's ring exchange (a group of a send to the next rank
 * and a receive from the previous, below): matched per peer and proven; a ring that does
 * not mirror refused; the old reading of a group by its name refused where the calls and
 * peers prove it; a cycle through a ring refused and named.
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

/* ---- context parallelism: a ring exchange inside one NCCL group ----
 *
 * Transformer Engine's context-parallel attention (NVIDIA/TransformerEngine
 * transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py,
 * flash_attn_p2p_communicate) posts, per step, a send of its KV chunk to the next rank of
 * the ring and a receive from the previous one as one batch of point-to-point operations
 * (torch.distributed.batch_isend_irecv: one NCCL group); tests/workloads does the same
 * (attention.c, ring_exchange). The profile names such a group by its first call ("nccl
 * Group 2 Send ..."); the proof matches its calls from the list of calls and peers the
 * profile keeps (dh_prof_op_t.p2p). Each rank here: template ops in program order, phases
 * B = ops[0, nb) and F = ops[nb, n), one paired group issued in `order`. */

#define ROPS 6

typedef struct rrank {
    dh_profile_t p;
    dh_prof_comm_t comms[4];
    dh_prof_op_t tops[ROPS];
    dh_plan_section_t s;
    dh_plan_op_t ops[ROPS];
    dh_plan_phase_t ph[2];
    dh_plan_group_t g;
    char order[ROPS + 1];
    int r;
} rrank_t;

/* Adds communicator (name, role, nranks, rank, ident) to x; its index. */
static int rcomm(rrank_t *x, const char *name, const char *role, int nranks, int rank,
                 uint64_t ident)
{
    dh_prof_comm_t *c = &x->comms[x->p.ncomms];
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", name);
    snprintf(c->role, sizeof c->role, "%s", role);
    c->nranks = nranks;
    c->rank = rank;
    c->ident = ident;
    return x->p.ncomms++;
}

static void rrank_begin(rrank_t *x, int r)
{
    memset(x, 0, sizeof *x);
    x->r = r;
    x->p.rank = r;
    x->p.comms = x->comms;
    x->p.ops = x->tops;
}

/* Appends a template op; p2p its calls and peers ("" none). */
static void rop(rrank_t *x, const char *kind, const char *name, int comm, const char *p2p)
{
    size_t i = x->p.nops++;
    op(&x->tops[i], kind, name, comm);
    snprintf(x->tops[i].p2p, sizeof x->tops[i].p2p, "%s", p2p);
}

/* Phases B = [0, nb), F = [nb, n); plan order `order`; op `moved` (-1 none) moved. */
static void rrank_end(rrank_t *x, size_t nb, const char *order, int moved)
{
    size_t n = x->p.nops;
    for (size_t i = 0; i < n; i++) {
        x->ops[i].phase = i < nb ? 0 : 1;
        x->ops[i].strand = i < nb ? 0 : 1;
        x->ops[i].moved = (int8_t)((int)i == moved);
        memcpy(x->ops[i].kind, x->tops[i].kind, sizeof x->ops[i].kind);
    }
    x->ph[0] = (dh_plan_phase_t){0, nb, 'B', 0, 1, 1};
    x->ph[1] = (dh_plan_phase_t){nb, n - nb, 'F', 1, 0, 0};
    snprintf(x->order, sizeof x->order, "%s", order);
    x->g = (dh_plan_group_t){0, nb, nb, n - nb, x->order, 0, 0};
    x->s.nops = n;
    x->s.ops = x->ops;
    x->s.nphases = 2;
    x->s.phases = x->ph;
    x->s.ngroups = 1;
    x->s.groups = &x->g;
    x->s.nranks = 1;
    x->s.ranks = &x->r;
}

static void rcheck(rrank_t *x, int n, int *cycle, uint8_t *refuse, char *why, size_t whylen)
{
    dh__mv_sect_t mv[8];
    for (int k = 0; k < n; k++)
        mv[k] = (dh__mv_sect_t){&x[k].s, &x[k].p, x[k].tops, k};
    memset(refuse, 0, (size_t)n);
    assert_int_equal(dh__moves_check(mv, n, refuse, cycle, why, whylen), DH_OK);
}

/* Two pipeline stages of three context-parallel ranks each (ranks 0-2, 3-5; ring i of
 * stage s has identity 40 + s; rank r of stage 0 and rank r + 3 of stage 1 share a
 * pipeline communicator, identity 10 + r). Stage 0's backward ends with its ring exchange
 * (a group: send to the next rank, receive from the previous) and the send of its input
 * gradient, which the plan moves after its forward's tensor-parallel collective (a
 * communicator of its own); stage 1 receives, then runs its ring. The ring's calls and
 * the pipeline's match per peer, no wait can cycle: proven. `bad` makes rank 1's group
 * receive from rank 0 twice instead of sending to rank 2: the ring does not mirror, and
 * the move is refused as not proven. */
static void ring_stages(rrank_t *x, int bad)
{
    char p2p[16];
    for (int r = 0; r < 6; r++) {
        int st = r / 3, c = r % 3;
        rrank_t *y = &x[r];
        rrank_begin(y, r);
        int ring = rcomm(y, "CONTEXT_PARALLEL_GROUP", "cp", 3, c, 40 + (uint64_t)st);
        int pp = rcomm(y, "PIPELINE_MODEL_PARALLEL_GROUP", "pp", 2, st, 10 + (uint64_t)c);
        int tp = rcomm(y, "TENSOR_MODEL_PARALLEL_GROUP", "tp", 1, 0, 50 + (uint64_t)r);
        snprintf(p2p, sizeof p2p, "s%d r%d", (c + 1) % 3, (c + 2) % 3);
        if (bad && r == 1)
            snprintf(p2p, sizeof p2p, "r0 r0");
        rop(y, "KERNEL", "dgrad", -1, "");
        if (st == 0) {
            rop(y, "NCCL_GROUP", "nccl Group 2 Send bf16 1024", ring, p2p);
            rop(y, "NCCL_GROUP", "nccl Group 1 Send bf16 4096", pp, "s1");
            rop(y, "NCCL", "nccl AllGather bf16 4096", tp, "");
            rrank_end(y, 3, "aaba", 2);      /* dgrad, ring, AllGather, then the send */
        } else {
            rop(y, "NCCL_GROUP", "nccl Group 1 Recv bf16 4096", pp, "r0");
            rop(y, "NCCL_GROUP", "nccl Group 2 Send bf16 1024", ring, p2p);
            rop(y, "NCCL", "nccl AllGather bf16 4096", tp, "");
            rrank_end(y, 3, "aaab", -1);
        }
    }
}

static void test_ring_proven(void **state)
{
    (void)state;
    rrank_t x[6];
    ring_stages(x, 0);
    int cycle = 1;
    uint8_t refuse[6];
    char why[1024];
    rcheck(x, 6, &cycle, refuse, why, sizeof why);
    if (cycle)
        print_message("%s\n", why);
    assert_int_equal(cycle, 0);
    for (int r = 0; r < 6; r++)
        assert_int_equal(refuse[r], 0);
}

static void test_ring_not_mirrored_refused(void **state)
{
    (void)state;
    rrank_t x[6];
    ring_stages(x, 1);
    int cycle = 0;
    uint8_t refuse[6];
    char why[1024];
    rcheck(x, 6, &cycle, refuse, why, sizeof why);
    print_message("%s\n", why);
    assert_int_equal(cycle, 1);
    assert_non_null(strstr(why, "do not mirror"));
    assert_non_null(strstr(why, "CONTEXT_PARALLEL_GROUP"));
    for (int r = 0; r < 3; r++)
        assert_int_equal(refuse[r], 1);     /* stage 0's sections hold the moves */
}

/* Before profiles listed calls and peers, the proof read a group's direction from its name,
 * which names its first call: a ring group "Group 2 Send" on both ranks of a two-rank
 * ring counted as two sends and no receive, and no move of the job was ever proven. Here
 * the same two groups without p2p: not proven (the old reading); with p2p: proven. */
static void test_ring_named_by_first_call(void **state)
{
    (void)state;
    rrank_t x[4];
    for (int pass = 0; pass < 2; pass++) {
        for (int r = 0; r < 4; r++) {
            int st = r / 2, c = r % 2;
            rrank_t *y = &x[r];
            rrank_begin(y, r);
            int ring = rcomm(y, "CONTEXT_PARALLEL_GROUP", "cp", 2, c, 40 + (uint64_t)st);
            int pp = rcomm(y, "PIPELINE_MODEL_PARALLEL_GROUP", "pp", 2, st, 10 + (uint64_t)c);
            int tp = rcomm(y, "TENSOR_MODEL_PARALLEL_GROUP", "tp", 1, 0, 50 + (uint64_t)r);
            const char *rp = pass ? (c ? "s0 r0" : "s1 r1") : "";
            rop(y, "KERNEL", "dgrad", -1, "");
            rop(y, "NCCL_GROUP", "nccl Group 2 Send bf16 1024", ring, rp);
            rop(y, "NCCL_GROUP", st ? "nccl Group 1 Recv bf16 4096" : "nccl Group 1 Send bf16 4096",
                pp, pass ? (st ? "r0" : "s1") : "");
            rop(y, "NCCL", "nccl AllGather bf16 4096", tp, "");
            rrank_end(y, 3, st ? "aaab" : "aaba", st ? -1 : 2);
        }
        int cycle = -1;
        uint8_t refuse[4];
        char why[1024];
        rcheck(x, 4, &cycle, refuse, why, sizeof why);
        print_message("pass %d: cycle %d %s\n", pass, cycle, why);
        assert_int_equal(cycle, pass ? 0 : 1);
        if (!pass)
            assert_non_null(strstr(why, "do not mirror"));
    }
}

/* A cycle through a ring: rank 0 issues its forward's ring exchange with rank 1 and then
 * (moved) the pipeline send to rank 2; rank 1 reaches the ring only after a collective
 * with rank 2 (their communicator 'x12'), which rank 2 issues after its receive of rank
 * 0's send. Ring (0, 1) waits for x12 on rank 1, x12 for the receive on rank 2, the
 * receive for rank 0's send, the send for the ring: refused, the cycle named with the
 * ring's communicator and all three ranks. */
static void test_ring_cycle_refused(void **state)
{
    (void)state;
    rrank_t x[3];
    rrank_begin(&x[0], 0);
    int ring = rcomm(&x[0], "CONTEXT_PARALLEL_GROUP", "cp", 2, 0, 40);
    int pp = rcomm(&x[0], "PIPELINE_MODEL_PARALLEL_GROUP", "pp", 2, 0, 10);
    rop(&x[0], "KERNEL", "dgrad", -1, "");
    rop(&x[0], "NCCL_GROUP", "nccl Group 1 Send bf16 4096", pp, "s1");
    rop(&x[0], "NCCL_GROUP", "nccl Group 2 Send bf16 1024", ring, "s1 r1");
    rrank_end(&x[0], 2, "aba", 1);          /* dgrad, ring, then the send */

    rrank_begin(&x[1], 1);
    ring = rcomm(&x[1], "CONTEXT_PARALLEL_GROUP", "cp", 2, 1, 40);
    int x12 = rcomm(&x[1], "x12", "dp", 2, 0, 20);
    rop(&x[1], "KERNEL", "dgrad", -1, "");
    rop(&x[1], "NCCL", "nccl AllReduce f32 16", x12, "");
    rop(&x[1], "NCCL_GROUP", "nccl Group 2 Send bf16 1024", ring, "s0 r0");
    rrank_end(&x[1], 2, "aab", -1);

    rrank_begin(&x[2], 2);
    pp = rcomm(&x[2], "PIPELINE_MODEL_PARALLEL_GROUP", "pp", 2, 1, 10);
    x12 = rcomm(&x[2], "x12", "dp", 2, 1, 20);
    rop(&x[2], "KERNEL", "dgrad", -1, "");
    rop(&x[2], "NCCL_GROUP", "nccl Group 1 Recv bf16 4096", pp, "r0");
    rop(&x[2], "NCCL", "nccl AllReduce f32 16", x12, "");
    rrank_end(&x[2], 2, "aab", -1);

    int cycle = 0;
    uint8_t refuse[3];
    char why[1536];
    rcheck(x, 3, &cycle, refuse, why, sizeof why);
    print_message("%s\n", why);
    assert_int_equal(cycle, 1);
    assert_int_equal(refuse[0], 1);
    assert_int_equal(refuse[1], 0);
    assert_int_equal(refuse[2], 0);
    assert_non_null(strstr(why, "a cycle of"));
    assert_non_null(strstr(why, "'CONTEXT_PARALLEL_GROUP'"));
    assert_non_null(strstr(why, "'x12'"));
    assert_non_null(strstr(why, "'PIPELINE_MODEL_PARALLEL_GROUP'"));
    assert_non_null(strstr(why, "rank 0"));
    assert_non_null(strstr(why, "rank 1"));
    assert_non_null(strstr(why, "rank 2"));
    /* The same plan with rank 0 in program order (send, then ring): no cycle. */
    rrank_end(&x[0], 2, "aab", -1);
    rcheck(x, 3, &cycle, refuse, why, sizeof why);
    assert_int_equal(cycle, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cycle_refused),
        cmocka_unit_test(test_local_collective_proven),
        cmocka_unit_test(test_program_order_nothing_to_prove),
        cmocka_unit_test(test_peer_unprofiled_refused),
        cmocka_unit_test(test_move_len),
        cmocka_unit_test(test_ring_proven),
        cmocka_unit_test(test_ring_not_mirrored_refused),
        cmocka_unit_test(test_ring_named_by_first_call),
        cmocka_unit_test(test_ring_cycle_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
