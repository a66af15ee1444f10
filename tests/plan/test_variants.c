/*
 * test_variants.c: iterations whose ops vary with the data (plan.variants).
 *
 * MoE experts that get no token skip their GEMMs and a regrouping copy of an empty bucket is
 * not launched (tests/workloads/src/moe.c), so no two iterations need repeat op for op. The
 * planner then finds the iteration on a period of the collectives and threads and takes
 * the variant that occurs most often as the template (scheduler/plan/phases.c); iterations
 * that differ in a collective are not that program.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "planner.h"
#include "synth.h"

/* 6 iterations, a synchronisation (MoE routing) in every forward. */
static dh_synth_t base(void)
{
    dh_synth_t s;
    dh_synth_defaults(&s);
    s.iters = 6;
    s.moe_sync_mb = -2;
    return s;
}

/* Removes op k of p (dependencies on later ops move with them). */
static void drop_op(dh_profile_t *p, size_t k)
{
    memmove(&p->ops[k], &p->ops[k + 1], (p->nops - k - 1) * sizeof(*p->ops));
    p->nops--;
    for (size_t i = 0; i < p->nops; i++)
        if (p->ops[i].dep1 > (int64_t)k + 1)
            p->ops[i].dep1--;
        else if (p->ops[i].dep1 == (int64_t)k + 1)
            p->ops[i].dep1 = 0;
}

/* The index of the j-th op of class cls (and, for compute, not the first of its segment or
 * of its thread's run) within iteration it of n ops. */
static size_t nth_op(const dh_profile_t *p, size_t n, int it, dh_opclass_t cls, int j)
{
    for (size_t i = (size_t)it * n + 1; i < (size_t)(it + 1) * n; i++) {
        const dh_prof_op_t *o = &p->ops[i];
        if (o->cls == cls && !o->sync_before && o->thread == p->ops[i - 1].thread &&
            i + 1 < p->nops && !p->ops[i + 1].sync_before && j-- == 0)
            return i;
    }
    fail_msg("iteration %d has no op %d of class %d", it, j, (int)cls);
    return 0;
}

/* Iterations 2 and 4 each miss a different compute op (kernels an expert without tokens
 * skips): the full iteration occurs in 0, 1, 3 and 5; the template is the last of them, and
 * the planner plans it. */
static void test_most_frequent_variant(void **state)
{
    (void)state;
    dh_synth_t s = base();
    dh_profile_t *p = dh_synth_profile(&s);
    size_t n = dh_synth_iter_ops(&s);
    /* later iterations first, so that the earlier indices stay put */
    drop_op(p, nth_op(p, n, 4, DH_CLS_COMPUTE, 40));
    drop_op(p, nth_op(p, n, 2, DH_CLS_COMPUTE, 7));
    dh_iteration_t it;
    char err[512];
    assert_int_equal(dh_profile_find_iteration(p, "prof.json", &it, err, sizeof(err)), DH_OK);
    assert_int_equal(it.n, n);
    assert_int_equal(it.first, 5 * n - 2); /* iteration 5, two ops dropped before it */
    assert_int_equal(it.occurs, 4); /* iterations 0, 1, 3 and 5 */
    assert_int_equal(it.reps, 1);
    /* Trimming keeps every iteration: the variant must be found among the others again. */
    size_t before = p->nops;
    assert_int_equal(dh_profile_trim(p, 2, "prof.json", err, sizeof(err)), DH_OK);
    assert_int_equal(p->nops, before);

    dh_plan_opts_t o;
    dh_plan_opts_init(&o);
    o.microbatches = s.mb;
    const dh_profile_t *ps[] = {p};
    dh_plan_t *plan = NULL;
    assert_int_equal(dh_plan_build(ps, 1, &o, &plan, err, sizeof(err)), DH_OK);
    assert_int_equal(plan->nsections, 1);
    assert_int_equal(plan->sections[0].nops, n);
    assert_int_equal(dh_plan_template_diff(&plan->sections[0], &p->ops[it.first], n, NULL, 0),
                     0);
    dh_plan_free(plan);
    dh_profile_free(p);
}

/* Every iteration differs from every other: no variant occurs twice, so there is nothing
 * the runtime would ever see again; not planned. */
static void test_no_variant_twice(void **state)
{
    (void)state;
    dh_synth_t s = base();
    s.iters = 4;
    dh_profile_t *p = dh_synth_profile(&s);
    size_t n = dh_synth_iter_ops(&s);
    drop_op(p, nth_op(p, n, 3, DH_CLS_COMPUTE, 30));
    drop_op(p, nth_op(p, n, 2, DH_CLS_COMPUTE, 20));
    drop_op(p, nth_op(p, n, 1, DH_CLS_COMPUTE, 10));
    dh_iteration_t it;
    char err[512];
    assert_int_equal(dh_profile_find_iteration(p, "prof.json", &it, err, sizeof(err)),
                     DH_ERR_NOT_FOUND);
    dh_profile_free(p);
}

/* Iterations that differ in a collective are not one program varying with its data: the
 * collectives' period breaks, and no iteration of its length is found. Iterations 0 and 2
 * are alike, 1 misses a compute op, and 3 a collective; with a compute op missing in 3
 * instead, 0 and 2 make the template. */
static dh_profile_t *four(int comm_in_3)
{
    dh_synth_t s = base();
    s.iters = 4;
    dh_profile_t *p = dh_synth_profile(&s);
    size_t n = dh_synth_iter_ops(&s);
    /* early in it: a difference in the profile's last segments could be a recording cut
     * short, and the search looks past up to two of them */
    drop_op(p, nth_op(p, n, 3, comm_in_3 ? DH_CLS_COMM : DH_CLS_COMPUTE, 1));
    drop_op(p, nth_op(p, n, 1, DH_CLS_COMPUTE, 5));
    return p;
}

static void test_collectives_must_repeat(void **state)
{
    (void)state;
    dh_synth_t s = base();
    size_t n = dh_synth_iter_ops(&s);
    dh_iteration_t it;
    char err[512];
    dh_profile_t *p = four(0);
    assert_int_equal(dh_profile_find_iteration(p, "prof.json", &it, err, sizeof(err)), DH_OK);
    assert_int_equal(it.n, n);
    assert_int_equal(it.first, 2 * n - 1);
    assert_int_equal(it.occurs, 2);
    dh_profile_free(p);
    p = four(1);
    /* No iteration of the program's length; the exact search may still take two segments
     * alike at the profile's end for one, as it always did (it is not this search's). */
    dh_status_t st = dh_profile_find_iteration(p, "prof.json", &it, err, sizeof(err));
    if (st == DH_OK && it.n == n)
        fail_msg("an iteration of %zu ops at op %zu, %d occurrences", it.n, it.first, it.occurs);
    dh_profile_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_most_frequent_variant),
        cmocka_unit_test(test_no_variant_twice),
        cmocka_unit_test(test_collectives_must_repeat),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
