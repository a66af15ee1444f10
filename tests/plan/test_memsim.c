/*
 * plan.memsim: the planner's account of what a plan costs in device memory (memsim.h), on
 * small sections whose answer is worked out by hand in each test's comment: frees held by
 * an unreleased group, their release, a solo group let out op by op, the pool's reuse by
 * exact size (same strand, and the other strand only behind a barrier), the ranks'
 * agreement holding a pair whole until its vote, and the cuBLAS workspaces.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "memsim.h"

#define MIB (1ll << 20)
#define MAXOPS 16

/* A section built op by op: each op's strand and group, its phase (0: the backward A, 1:
 * the forward B), and its memory. Groups are given as ranges by the test. */
typedef struct sect {
    dh_plan_section_t s;
    dh_plan_op_t ops[MAXOPS];
    dh_plan_phase_t ph[2];
    dh_plan_group_t g[MAXOPS];
    dh_memsim_op_t m[MAXOPS];
    int64_t sizes[MAXOPS];
} sect_t;

static void sect_init(sect_t *x)
{
    memset(x, 0, sizeof *x);
    x->s.ops = x->ops;
    x->s.phases = x->ph;
    x->s.groups = x->g;
    x->s.nphases = 2;
    x->ph[0] = (dh_plan_phase_t){0, 0, 'B', 0, 0, 1};
    x->ph[1] = (dh_plan_phase_t){0, 0, 'F', 1, 1, 0};
}

/* Appends an op of strand (0 a, 1 b) in group g that allocates alloc bytes (0 none) before
 * it and frees freed bytes (0 none); blas: a GEMM. */
static void add(sect_t *x, int strand, int g, int64_t alloc, int64_t freed, int blas)
{
    size_t c = x->s.nops++;
    x->ops[c] = (dh_plan_op_t){.phase = strand, .strand = (int8_t)strand, .group = g};
    x->sizes[c] = alloc;
    x->m[c] = (dh_memsim_op_t){alloc ? &x->sizes[c] : NULL, alloc ? 1 : 0, freed, 0,
                               (uint8_t)blas, 64 * MIB};
}

static void group(sect_t *x, size_t a_first, size_t a_n, size_t b_first, size_t b_n)
{
    x->g[x->s.ngroups++] = (dh_plan_group_t){a_first, a_n, b_first, b_n, NULL, 0, 0};
}

static dh_memsim_result_t sim(sect_t *x, int agree)
{
    dh_memsim_result_t r;
    assert_int_equal(dh_memsim_section(&x->s, x->m, agree, &r), DH_OK);
    return r;
}

#define EXPECT_MIB(got, want)                                                               \
    do {                                                                                    \
        double g_ = (got), w_ = (double)(want) * MIB;                                       \
        if (g_ != w_)                                                                       \
            fail_msg("%s is %.3f MiB, expected %.3f MiB", #got, g_ / MIB, w_ / MIB);        \
    } while (0)

/* A frees 10 MiB in a pair group; B allocates 5 MiB in that group before it is complete:
 *   c0 A +10 (g0, solo)   live 10
 *   c1 A -10 (g1, pair)   live 0, held 10
 *   c2 A     (g1)
 *   c3 B +5  (g1)         live 5 + held 10 = 15, then g1 complete: held 0
 *   c4 B     (g2, solo)
 * The program alone peaks at 10, the runtime at 15: 5 MiB extra, no workspace. */
static void test_held_until_release(void **state)
{
    (void)state;
    sect_t x;
    sect_init(&x);
    add(&x, 0, 0, 10 * MIB, 0, 0);
    add(&x, 0, 1, 0, 10 * MIB, 0);
    add(&x, 0, 1, 0, 0, 0);
    add(&x, 1, 1, 5 * MIB, 0, 0);
    add(&x, 1, 2, 0, 0, 0);
    group(&x, 0, 1, 0, 0);
    group(&x, 1, 2, 3, 1);
    group(&x, 0, 0, 4, 1);
    dh_memsim_result_t r = sim(&x, 0);
    EXPECT_MIB(r.live_peak, 10);
    EXPECT_MIB(r.held, 5);
    EXPECT_MIB(r.workspace, 0);
    EXPECT_MIB(r.extra, 5);
    assert_int_equal(r.peak_op, 3);
}

/* The same, with B's allocation of 10 MiB: the block A freed is of strand a, in the group
 * B's allocation is for (no barrier between them), so B takes fresh memory: live 10 + held
 * 10 = 20 against the program's 10: 10 MiB. B's own free of a block, taken back by its
 * next allocation of that size in the same group, costs nothing: c4 B -10, c5 B +10 keeps
 * it at 20. */
static void test_same_strand_reuse(void **state)
{
    (void)state;
    sect_t x;
    sect_init(&x);
    add(&x, 0, 0, 10 * MIB, 0, 0);
    add(&x, 0, 1, 0, 10 * MIB, 0);
    add(&x, 0, 1, 0, 0, 0);
    add(&x, 1, 1, 10 * MIB, 0, 0);
    add(&x, 1, 1, 0, 10 * MIB, 0);
    add(&x, 1, 1, 10 * MIB, 0, 0);
    group(&x, 0, 1, 0, 0);
    group(&x, 1, 2, 3, 3);
    dh_memsim_result_t r = sim(&x, 0);
    EXPECT_MIB(r.live_peak, 10);
    EXPECT_MIB(r.extra, 10);
    /* A block of another size is not taken: c5 allocating 12 MiB stands at 12 + 20 held
     * = 32 against the program's own peak of 12 (its curve 10, 0, 0, 10, 0, 12): 20. */
    x.sizes[5] = 12 * MIB;
    r = sim(&x, 0);
    EXPECT_MIB(r.live_peak, 12);
    EXPECT_MIB(r.extra, 32 - 12);
}

/* A solo group whose predecessors are all released goes out op by op: its frees are not
 * held. c3 B frees 5 MiB in solo group g2 and c4 allocates 7 MiB there:
 *   c0 A +10 (g0)  c1 A -10 (g1)  c2 B +5 (g1, completes it)  c3 B -5 (g2)  c4 B +7 (g2)
 * live 10, 0, 5, 0, 7; held: 10 from c1 until c2 completes g1 (15 at c2's allocation);
 * c3's free goes out at once, so c4 stands at 7, not 12. Peak 15 against 10: 5 MiB. */
static void test_let_out(void **state)
{
    (void)state;
    sect_t x;
    sect_init(&x);
    add(&x, 0, 0, 10 * MIB, 0, 0);
    add(&x, 0, 1, 0, 10 * MIB, 0);
    add(&x, 1, 1, 5 * MIB, 0, 0);
    add(&x, 1, 2, 0, 5 * MIB, 0);
    add(&x, 1, 2, 7 * MIB, 0, 0);
    group(&x, 0, 1, 0, 0);
    group(&x, 1, 1, 2, 1);
    group(&x, 0, 0, 3, 2);
    dh_memsim_result_t r = sim(&x, 0);
    EXPECT_MIB(r.live_peak, 10);
    EXPECT_MIB(r.extra, 5);
    /* With c4 at 16 MiB the program peaks there, and c3's free has gone out: nothing is
     * held then (held, it would be 5 MiB). */
    x.sizes[4] = 16 * MIB;
    r = sim(&x, 0);
    EXPECT_MIB(r.live_peak, 16);
    EXPECT_MIB(r.extra, 0);
}

/* The ranks' agreement: a pair's two-strand groups (g1, g2) wait for its vote, at the op
 * that completes the last of them (c4). A frees 10 MiB in g1:
 *   c0 A +10 (g0)  c1 A -10 (g1)  c2 A (g2)  c3 B (g1)  c4 B +a (g2)
 * Without agreement g1 goes out at c3 and B's allocation at c4 is fresh: live 10, 0, 0, 0,
 * a: nothing extra for a = 10. With it, A's block is still parked at c4: B's allocation of
 * 10 MiB is in a later group than the free (a barrier between), so it takes the block back
 * (the other strand's rule): still nothing extra. Of 12 MiB it cannot: 12 + 10 held = 22
 * against the program's 12: 10 MiB. */
static void test_agreement_and_cross_strand(void **state)
{
    (void)state;
    sect_t x;
    sect_init(&x);
    add(&x, 0, 0, 10 * MIB, 0, 0);
    add(&x, 0, 1, 0, 10 * MIB, 0);
    add(&x, 0, 2, 0, 0, 0);
    add(&x, 1, 1, 0, 0, 0);
    add(&x, 1, 2, 10 * MIB, 0, 0);
    group(&x, 0, 1, 0, 0);
    group(&x, 1, 1, 3, 1);
    group(&x, 2, 1, 4, 1);
    EXPECT_MIB(sim(&x, 0).extra, 0);
    EXPECT_MIB(sim(&x, 1).extra, 0);
    x.sizes[4] = 12 * MIB;
    EXPECT_MIB(sim(&x, 0).extra, 0);
    dh_memsim_result_t r = sim(&x, 1);
    EXPECT_MIB(r.live_peak, 12);
    EXPECT_MIB(r.extra, 10);
}

/* The workspace: strand 1's when it runs a GEMM, of the size the op says (strand 0 runs on
 * the framework's, scheduler/dispatch/workspace.c). */
static void test_workspaces(void **state)
{
    (void)state;
    sect_t x;
    sect_init(&x);
    add(&x, 0, 0, 0, 0, 1);
    add(&x, 0, 1, 0, 0, 0);
    add(&x, 1, 1, 0, 0, 0);
    group(&x, 0, 1, 0, 0);
    group(&x, 1, 1, 2, 1);
    /* Strand 0 runs its GEMMs on the framework's workspace: the shim allocates none. */
    EXPECT_MIB(sim(&x, 0).extra, 0);
    x.m[2].blas = 1;
    dh_memsim_result_t r = sim(&x, 0);
    EXPECT_MIB(r.workspace, 64);
    EXPECT_MIB(r.extra, 64);
    x.m[2].ws_bytes = 4 * MIB; /* the framework's size */
    EXPECT_MIB(sim(&x, 0).workspace, 4);
}

/* A phase's own reuse, newest block first, exact size and stream:
 *   0: -8  1: -8  2: +8 +8  3: -4 (stream 1)  4: +4 (stream 0)  5: +8
 * op 2's first allocation takes op 1's block, its second op 0's (2 ops back): retaken 16,
 * from 2; op 4 finds no 4 MiB block on its stream; op 5 none of 8 left. */
static void test_reuse(void **state)
{
    (void)state;
    int64_t two[2] = {8 * MIB, 8 * MIB}, four = 4 * MIB, eight = 8 * MIB;
    dh_memsim_op_t ops[6] = {
        {NULL, 0, 8 * MIB, 0, 0, 0}, {NULL, 0, 8 * MIB, 0, 0, 0}, {two, 2, 0, 0, 0, 0},
        {NULL, 0, 4 * MIB, 1, 0, 0}, {&four, 1, 0, 0, 0, 0},      {&eight, 1, 0, 0, 0, 0}};
    int64_t kept[6], re[6];
    uint32_t from[6];
    assert_int_equal(dh_memsim_reuse(ops, 6, kept, re, from), DH_OK);
    int64_t want_kept[6] = {8 * MIB, 8 * MIB, 0, 0, 0, 0}, want_re[6] = {0, 0, 16 * MIB, 0, 0, 0};
    uint32_t want_from[6] = {0, 0, 2, 0, 0, 0};
    for (int i = 0; i < 6; i++) {
        if (kept[i] != want_kept[i] || re[i] != want_re[i] || from[i] != want_from[i])
            fail_msg("op %d: kept %lld retaken %lld from %u, expected %lld %lld %u", i,
                     (long long)kept[i], (long long)re[i], from[i], (long long)want_kept[i],
                     (long long)want_re[i], want_from[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_held_until_release),
        cmocka_unit_test(test_same_strand_reuse),
        cmocka_unit_test(test_let_out),
        cmocka_unit_test(test_agreement_and_cross_strand),
        cmocka_unit_test(test_workspaces),
        cmocka_unit_test(test_reuse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
