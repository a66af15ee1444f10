/*
 * plan.phases: iteration detection, phases, pairs and sections on synthetic profiles with a
 * known answer (synth.h): 4 iterations of F0 B0 F1 B1 F2 B2 O on 2 threads, a sync at each
 * iteration's end, an MoE-like sync inside F1, a dynamic shape in one op, warm-up ops that
 * make the first iteration differ.
 */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "planner.h"
#include "synth.h"

#define FWD 16
#define BWD 24
#define LAYERS 2

static dh_synth_t base(void)
{
    dh_synth_t s;
    dh_synth_defaults(&s);
    s.moe_sync_mb = 1;
    s.dyn_shape = 1;
    s.warmup_ops = 3;
    return s;
}

typedef struct warns {
    char text[8][512];
    int n;
} warns_t;

static void on_warn(void *ctx, const char *msg)
{
    warns_t *w = ctx;
    if (w->n < 8)
        snprintf(w->text[w->n++], sizeof(w->text[0]), "%s", msg);
}

static dh_plan_t *build(const dh_profile_t *const *ps, int n, warns_t *w, int microbatches)
{
    dh_plan_opts_t o;
    dh_plan_opts_init(&o);
    o.warn = on_warn;
    o.ctx = w;
    o.microbatches = microbatches;
    dh_plan_t *plan;
    char err[512];
    if (dh_plan_build(ps, n, &o, &plan, err, sizeof(err)) != DH_OK)
        fail_msg("dh_plan_build: %s", err);
    return plan;
}

/* FNV-1a 64 over the little-endian bytes of each sig, written out again here. */
static uint64_t fnv(const dh_prof_op_t *ops, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        for (int b = 0; b < 8; b++) {
            h ^= (ops[i].sig >> (8 * b)) & 0xff;
            h *= 0x100000001b3ull;
        }
    return h;
}

static void test_iteration_and_phases(void **state)
{
    (void)state;
    dh_synth_t s = base();
    dh_profile_t *p = dh_synth_profile(&s);
    size_t n = dh_synth_iter_ops(&s);
    assert_int_equal(n, 3 * LAYERS * (FWD + BWD) + DH_SYNTH_OPT_OPS);

    dh_iteration_t it;
    char err[512];
    assert_int_equal(dh_profile_find_iteration(p, "prof.json", &it, err, sizeof(err)), DH_OK);
    assert_int_equal(it.n, n);
    assert_int_equal(it.first, 3 + 3 * n);
    assert_int_equal(it.reps, 3);          /* the warm-up iteration differs */
    assert_int_equal(it.nsegments, 2);     /* the MoE sync splits each iteration */

    warns_t w = {0};
    const dh_profile_t *ps[] = {p};
    dh_plan_t *plan = build(ps, 1, &w, 3);
    assert_int_equal(w.n, 0);
    assert_int_equal(plan->nsections, 1);
    const dh_plan_section_t *sec = &plan->sections[0];
    assert_int_equal(sec->nops, n);
    assert_int_equal(sec->fingerprint, fnv(&p->ops[it.first], n));
    assert_int_equal(sec->fingerprint, dh_plan_fingerprint(sec->ops, sec->nops));

    static const char kinds[] = "FBFFBFBO";
    static const int mbs[] = {0, 0, 1, 1, 1, 2, 2, -1};
    static const int paired[] = {-1, 2, 1, -1, 5, 4, -1, -1};
    const size_t sizes[] = {LAYERS * FWD, LAYERS * BWD, FWD / 2, LAYERS * FWD - FWD / 2,
                            LAYERS * BWD, LAYERS * FWD, LAYERS * BWD, DH_SYNTH_OPT_OPS};
    assert_int_equal(sec->nphases, 8);
    size_t at = 0;
    for (int k = 0; k < 8; k++) {
        const dh_plan_phase_t *ph = &sec->phases[k];
        if (ph->kind != kinds[k] || ph->mb != mbs[k] || ph->paired_with != paired[k] ||
            ph->first != at || ph->n != sizes[k])
            fail_msg("phase %d: kind %c mb %d paired %d ops [%zu, +%zu), expected %c %d %d "
                     "[%zu, +%zu)", k, ph->kind, ph->mb, ph->paired_with, ph->first, ph->n,
                     kinds[k], mbs[k], paired[k], at, sizes[k]);
        assert_int_equal(ph->thread, kinds[k] == 'B' ? 1u : 0u);
        at += ph->n;
    }

    /* Exactly op 2 of F0 changed shape between iterations. */
    for (size_t i = 0; i < n; i++)
        if (sec->ops[i].shape_dynamic != (i == 2))
            fail_msg("op %zu: shape_dynamic %d", i, sec->ops[i].shape_dynamic);

    /* Strand b holds exactly the forward phases that are paired. */
    for (size_t i = 0; i < n; i++) {
        int k = sec->ops[i].phase;
        int want = sec->phases[k].kind == 'F' && sec->phases[k].paired_with >= 0;
        if (sec->ops[i].strand != want)
            fail_msg("op %zu (phase %d): strand %d", i, k, sec->ops[i].strand);
    }
    int paired_groups = 0;
    for (int g = 0; g < sec->ngroups; g++)
        paired_groups += sec->groups[g].a_n > 0 && sec->groups[g].b_n > 0;
    assert_true(paired_groups >= 4);

    /* Back-to-back ops with 1 us gaps: the iteration spans their times and gaps. */
    double sum = 0, comm = 0;
    for (size_t i = 0; i < n; i++) {
        sum += p->ops[it.first + i].us;
        comm += p->ops[it.first + i].cls == DH_CLS_COMM ? p->ops[it.first + i].us : 0;
    }
    if (fabs(sec->baseline_us - (sum + (double)n - 1)) > 1e-6)
        fail_msg("baseline %.3f us, expected %.3f", sec->baseline_us, sum + (double)n - 1);
    assert_true(sec->si_us < sec->baseline_us);
    assert_true(sec->hidden_comm_fraction > 0 && sec->hidden_comm_fraction <= 1);
    double saved = sec->baseline_us - sec->si_us;
    if (fabs(sec->hidden_comm_fraction - fmin(1, saved / comm)) > 1e-9)
        fail_msg("hidden %.6f, expected %.6f", sec->hidden_comm_fraction, fmin(1, saved / comm));
    assert_true(sec->extra_mem_bytes <= 2147483648.0);
    printf("plan.phases: %zu ops, %d groups (%d paired), baseline %.1f us, predicted %.1f us, "
           "hidden comm %.0f%%\n", n, sec->ngroups, paired_groups, sec->baseline_us, sec->si_us,
           100 * sec->hidden_comm_fraction);
    dh_plan_free(plan);
    dh_profile_free(p);
}

/* A forward that starts right after a sync is not paired with the backward before it. */
static void test_no_pair_across_a_sync(void **state)
{
    (void)state;
    dh_synth_t s = base();
    s.moe_sync_mb = -1;
    s.sync_first_mb = 2;
    dh_profile_t *p = dh_synth_profile(&s);
    const dh_profile_t *ps[] = {p};
    warns_t w = {0};
    dh_plan_t *plan = build(ps, 1, &w, 0);
    const dh_plan_section_t *sec = &plan->sections[0];
    assert_int_equal(sec->nphases, 7);
    static const int paired[] = {-1, 2, 1, -1, -1, -1, -1};
    for (int k = 0; k < 7; k++)
        if (sec->phases[k].paired_with != paired[k])
            fail_msg("phase %d (%c): paired with %d, expected %d", k, sec->phases[k].kind,
                     sec->phases[k].paired_with, paired[k]);
    dh_plan_free(plan);
    dh_profile_free(p);
}

/* A profile cut in the middle of an iteration: the unfinished iteration is ignored. */
static void test_truncated_profile(void **state)
{
    (void)state;
    dh_synth_t s = base();
    dh_profile_t *p = dh_synth_profile(&s);
    size_t n = dh_synth_iter_ops(&s);
    p->nops = 3 + 3 * n + 100;
    p->sync_at_end = 0;
    dh_iteration_t it;
    char err[512];
    assert_int_equal(dh_profile_find_iteration(p, "prof.json", &it, err, sizeof(err)), DH_OK);
    assert_int_equal(it.n, n);
    assert_int_equal(it.first, 3 + 2 * n);
    assert_int_equal(it.reps, 2);
    dh_profile_free(p);
}

/* The program goes on after its training steps with a loop of its own (PyTorch's
 * per-parameter checksum, an evaluation): many short segments that repeat with a period
 * of one. The iteration is still the training step, not that loop's 2 ops. */
static void test_periodic_tail(void **state)
{
    (void)state;
    dh_synth_t s = base();
    dh_profile_t *p = dh_synth_profile(&s);
    size_t n = dh_synth_iter_ops(&s), iter_end = p->nops, tail = 2 * 100;
    dh_prof_op_t *ops = realloc(p->ops, (p->nops + tail) * sizeof(*ops));
    assert_non_null(ops);
    p->ops = ops;
    for (size_t i = 0; i < tail; i++) {
        dh_prof_op_t *o = &p->ops[iter_end + i];
        *o = p->ops[0];
        o->sig = i % 2 ? 0x7a11u : 0x7a10u;
        o->thread = 0;
        o->sync_before = i % 2 == 0;
        o->dep1 = 0;
    }
    p->nops += tail;
    p->sync_at_end = 1;
    dh_iteration_t it;
    char err[512];
    assert_int_equal(dh_profile_find_iteration(p, "prof.json", &it, err, sizeof(err)), DH_OK);
    assert_int_equal(it.n, n);
    assert_true(it.reps >= 2);
    assert_true(it.first + it.n <= iter_end);
    /* Without the tail's length dropped past, the period of 2 ops would have been taken. */
    dh_profile_free(p);
}

/* After its iterations the program does something long that never repeats (3 segments of
 * distinct ops). Looking past it finds the iterations, but they cover under half of the
 * profile: a program that repeats only here and there (MoE whose op counts vary) is not
 * planned (phases.c); with a short such tail the iterations are found. */
static void append_junk(dh_profile_t *p, size_t per_seg)
{
    size_t add = 3 * per_seg, base_n = p->nops;
    dh_prof_op_t *ops = realloc(p->ops, (p->nops + add) * sizeof(*ops));
    assert_non_null(ops);
    p->ops = ops;
    for (size_t i = 0; i < add; i++) {
        dh_prof_op_t *o = &p->ops[base_n + i];
        *o = p->ops[0];
        o->sig = 0x5eed0000u + i;
        o->thread = 0;
        o->sync_before = i % per_seg == 0;
        o->dep1 = 0;
    }
    p->nops += add;
    p->sync_at_end = 1;
}

static void test_repeat_under_half(void **state)
{
    (void)state;
    dh_synth_t s = base();
    dh_profile_t *p = dh_synth_profile(&s);
    size_t n = dh_synth_iter_ops(&s);
    append_junk(p, 2 * n);
    dh_iteration_t it;
    char err[512];
    assert_int_equal(dh_profile_find_iteration(p, "prof.json", &it, err, sizeof(err)),
                     DH_ERR_NOT_FOUND);
    dh_profile_free(p);
    p = dh_synth_profile(&s);
    append_junk(p, 4);
    assert_int_equal(dh_profile_find_iteration(p, "prof.json", &it, err, sizeof(err)), DH_OK);
    assert_int_equal(it.n, n);
    dh_profile_free(p);
}

static void test_no_iteration(void **state)
{
    (void)state;
    dh_synth_t s = base();
    s.iters = 1;
    dh_profile_t *p = dh_synth_profile(&s);
    dh_iteration_t it;
    char err[512], want[128];
    assert_int_equal(dh_profile_find_iteration(p, "prof.json", &it, err, sizeof(err)),
                     DH_ERR_NOT_FOUND);
    snprintf(want, sizeof(want),
             "prof.json: no repeating iteration found in %zu ops; profile at least 3 iterations",
             p->nops);
    assert_string_equal(err, want);
    const dh_profile_t *ps[] = {p};
    const char *names[] = {"prof.json"};
    dh_plan_opts_t o;
    dh_plan_opts_init(&o);
    o.names = names;
    dh_plan_t *plan = (dh_plan_t *)1;
    assert_int_equal(dh_plan_build(ps, 1, &o, &plan, err, sizeof(err)), DH_ERR_NOT_FOUND);
    assert_null(plan);
    assert_string_equal(err, want);
    p->nops = 0;
    assert_int_equal(dh_profile_find_iteration(p, "prof.json", &it, err, sizeof(err)),
                     DH_ERR_NOT_FOUND);
    dh_profile_free(p);
}

static void test_microbatch_warning_and_unknown_times(void **state)
{
    (void)state;
    dh_synth_t s = base();
    s.no_times = 1;
    dh_profile_t *p = dh_synth_profile(&s);
    const dh_profile_t *ps[] = {p};
    warns_t w = {0};
    dh_plan_t *plan = build(ps, 1, &w, 4);
    int mb = 0, times = 0;
    for (int i = 0; i < w.n; i++) {
        mb += strstr(w.text[i], "3 backward micro-batches, expected 4") != NULL;
        times += strstr(w.text[i], "have no device time") != NULL;
    }
    if (mb != 1 || times != 1)
        fail_msg("%d warnings, first \"%s\"", w.n, w.n ? w.text[0] : "");
    assert_true(plan->sections[0].baseline_us == 0);
    dh_plan_free(plan);
    dh_profile_free(p);
}

/* Ranks with the same iteration share a section; another program gets its own, and the
 * template comparison names the first op that differs. */
static void test_sections_and_diff(void **state)
{
    (void)state;
    dh_synth_t s = base();
    s.world = 3;
    dh_profile_t *p0 = dh_synth_profile(&s);
    s.rank = 1;
    dh_profile_t *p1 = dh_synth_profile(&s);
    s.rank = 2;
    s.variant = 1;
    dh_profile_t *p2 = dh_synth_profile(&s);
    const dh_profile_t *ps[] = {p0, p1, p2};
    warns_t w = {0};
    dh_plan_t *plan = build(ps, 3, &w, 0);
    assert_int_equal(plan->nsections, 2);
    assert_int_equal(plan->world, 3);
    assert_string_equal(plan->layout, "tp=3");
    assert_int_equal(plan->sections[0].nranks, 2);
    assert_int_equal(plan->sections[0].ranks[1], 1);
    assert_int_equal(plan->sections[1].nranks, 1);
    assert_ptr_equal(dh_plan_section_for(plan, 2), &plan->sections[1]);

    dh_iteration_t it;
    char err[512];
    assert_int_equal(dh_profile_find_iteration(p2, "p2", &it, err, sizeof(err)), DH_OK);
    assert_int_equal(dh_plan_template_diff(&plan->sections[1], &p2->ops[it.first], it.n, err,
                                           sizeof(err)), 0);
    assert_int_equal(dh_plan_template_diff(&plan->sections[0], &p2->ops[it.first], it.n, err,
                                           sizeof(err)), 1);
    char want[160];
    snprintf(want, sizeof(want), "first difference at op %d: expected GEMM 'gemm n,t qkv', "
                                 "found GEMM 'gemm n,t qkv'", LAYERS * (FWD + BWD) + 2);
    assert_string_equal(err, want);
    assert_int_equal(dh_plan_template_diff(&plan->sections[0], &p2->ops[it.first], 10, err,
                                           sizeof(err)), 1);
    assert_non_null(strstr(err, "found the end of the iteration"));
    dh_plan_free(plan);

    /* A rank twice, and an unknown rank among different programs, are errors. */
    const char *names[] = {"a.json", "b.json", "c.json"};
    dh_plan_opts_t o;
    dh_plan_opts_init(&o);
    o.names = names;
    p1->rank = 0;
    assert_int_equal(dh_plan_build(ps, 3, &o, &plan, err, sizeof(err)), DH_ERR_PARSE);
    assert_string_equal(err, "b.json: rank 0 is also the rank of a.json");
    p1->rank = 1;
    p2->rank = -1;
    assert_int_equal(dh_plan_build(ps, 3, &o, &plan, err, sizeof(err)), DH_ERR_PARSE);
    assert_non_null(strstr(err, "c.json: rank unknown"));
    p2->world = 4;
    p2->rank = 2;
    assert_int_equal(dh_plan_build(ps, 3, &o, &plan, err, sizeof(err)), DH_ERR_PARSE);
    assert_string_equal(err, "c.json: world 4 differs from a.json's 3");
    dh_profile_free(p0);
    dh_profile_free(p1);
    dh_profile_free(p2);
}

/* The collectives of a section in the order the plan issues them: groups in order, each in
 * its issue order; one letter per collective, 'a' or 'b' by strand, into out. */
static size_t issued_collectives(const dh_plan_section_t *s, char *out, size_t cap)
{
    size_t n = 0;
    for (int g = 0; g < s->ngroups; g++) {
        const dh_plan_group_t *gr = &s->groups[g];
        size_t ia = 0, ib = 0;
        for (const char *c = gr->order; *c; c++) {
            size_t op = *c == 'a' ? gr->a_first + ia++ : gr->b_first + ib++;
            if (s->ops[op].cls == DH_CLS_COMM && n + 1 < cap)
                out[n++] = *c;
        }
    }
    out[n] = '\0';
    return n;
}

/* Rank 0 loads the data (one more op per forward) and its ops take other times: its own
 * section, its own DP. Both sections must still issue the tensor-parallel collectives in one
 * order, or NCCL matches rank 0's all-gather with rank 1's reduce-scatter. */
static void test_sections_follow_one_order(void **state)
{
    (void)state;
    dh_synth_t s = base();
    s.moe_sync_mb = -1;
    s.world = 2;
    s.data_copy = 1;
    s.jitter = 11;
    dh_profile_t *p0 = dh_synth_profile(&s);
    s.rank = 1;
    s.data_copy = 0;
    s.jitter = 29;
    dh_profile_t *p1 = dh_synth_profile(&s);
    const dh_profile_t *ps[] = {p0, p1};
    warns_t w = {0};
    dh_plan_t *plan = build(ps, 2, &w, 0);
    assert_int_equal(plan->nsections, 2);
    assert_int_equal(w.n, 0);
    static char c0[4096], c1[4096];
    size_t n0 = issued_collectives(&plan->sections[0], c0, sizeof(c0));
    size_t n1 = issued_collectives(&plan->sections[1], c1, sizeof(c1));
    assert_int_equal(n0, n1);
    if (strcmp(c0, c1) != 0)
        fail_msg("collectives issued as\n%s (section 0)\n%s (section 1)", c0, c1);
    /* The orders really interleave the strands (else the test would prove nothing). */
    assert_non_null(strstr(c0, "ab"));
    assert_non_null(strstr(c0, "ba"));
    /* The two ranks run one schedule: rank 1's template lacks rank 0's data copies, and
     * otherwise its groups are rank 0's, although their profiled times differ. */
    const dh_plan_section_t *s0 = &plan->sections[0], *s1 = &plan->sections[1];
    assert_int_equal(s0->ngroups, s1->ngroups);
    for (int g = 0; g < s0->ngroups; g++) {
        const dh_plan_group_t *g0 = &s0->groups[g], *g1 = &s1->groups[g];
        size_t copies_a = 0, copies_b = 0;
        for (size_t i = g0->a_first; i < g0->a_first + g0->a_n; i++)
            copies_a += strcmp(s0->ops[i].name, "memcpy h2d 1024") == 0;
        for (size_t i = g0->b_first; i < g0->b_first + g0->b_n; i++)
            copies_b += strcmp(s0->ops[i].name, "memcpy h2d 1024") == 0;
        if (g0->a_n != g1->a_n + copies_a || g0->b_n != g1->b_n + copies_b)
            fail_msg("group %d: rank 0 has %zu + %zu ops (%zu + %zu copies), rank 1 %zu + %zu", g,
                     g0->a_n, g0->b_n, copies_a, copies_b, g1->a_n, g1->b_n);
    }
    dh_plan_free(plan);
    dh_profile_free(p0);
    dh_profile_free(p1);
}

/* Inside a paired group, a collective that starts with a compute op is issued first. */
static void test_issue_order(void **state)
{
    (void)state;
    dh_synth_t s = base();
    dh_profile_t *p = dh_synth_profile(&s);
    const dh_profile_t *ps[] = {p};
    warns_t w = {0};
    dh_plan_t *plan = build(ps, 1, &w, 0);
    const dh_plan_section_t *sec = &plan->sections[0];
    int checked = 0;
    for (int g = 0; g < sec->ngroups; g++) {
        const dh_plan_group_t *gr = &sec->groups[g];
        if (gr->a_n == 0 || gr->b_n == 0)
            continue;
        const dh_plan_op_t *a0 = &sec->ops[gr->a_first], *b0 = &sec->ops[gr->b_first];
        if (a0->cls == DH_CLS_COMM && b0->cls != DH_CLS_COMM)
            assert_int_equal(gr->order[0], 'a');
        if (b0->cls == DH_CLS_COMM && a0->cls != DH_CLS_COMM) {
            assert_int_equal(gr->order[0], 'b');
            checked++;
        }
    }
    assert_true(checked > 0);
    dh_plan_free(plan);
    dh_profile_free(p);
}

/* One GPU without communication: nothing to hide, so no pair is worth the barriers of its
 * groups. The plan has no paired group, one group for the whole iteration (it runs like the
 * baseline), and predicts the baseline. */
static void test_nothing_to_hide(void **state)
{
    (void)state;
    dh_synth_t s = base();
    s.no_comm = 1;
    dh_profile_t *p = dh_synth_profile(&s);
    const dh_profile_t *ps[] = {p};
    warns_t w = {0};
    dh_plan_t *plan = build(ps, 1, &w, 3);
    const dh_plan_section_t *sec = &plan->sections[0];
    for (int g = 0; g < sec->ngroups; g++)
        if (sec->groups[g].b_n != 0)
            fail_msg("group %d has %zu strand-b ops", g, sec->groups[g].b_n);
    assert_int_equal(sec->ngroups, 1);
    assert_int_equal(sec->groups[0].a_n, sec->nops);
    for (int k = 0; k < sec->nphases; k++)
        assert_int_equal(sec->phases[k].paired_with, -1);
    for (size_t i = 0; i < sec->nops; i++)
        assert_int_equal(sec->ops[i].strand, 0);
    if (fabs(sec->si_us - sec->baseline_us) > 1e-9)
        fail_msg("predicted %.3f us, baseline %.3f us", sec->si_us, sec->baseline_us);
    dh_plan_free(plan);
    /* Without the group overhead and without folding, a compute-only pair still gains
     * nothing (compute beside compute is not paired): serial all the same. */
    dh_plan_opts_t o;
    dh_plan_opts_init(&o);
    o.group_cost_us = 0;
    o.fold_below_us = -1;
    char err[512];
    assert_int_equal(dh_plan_build(ps, 1, &o, &plan, err, sizeof(err)), DH_OK);
    for (int g = 0; g < plan->sections[0].ngroups; g++)
        assert_int_equal(plan->sections[0].groups[g].b_n, 0);
    dh_plan_free(plan);
    dh_profile_free(p);
}

static int zero_time(const dh_plan_op_t *op)
{
    return op->cls == DH_CLS_EVENT || op->cls == DH_CLS_FREE;
}

/* 1 when ops [i, end of its phase) are all events or frees. */
static int trailing_bookkeeping(const dh_plan_section_t *s, size_t i)
{
    const dh_plan_phase_t *ph = &s->phases[s->ops[i].phase];
    for (size_t k = i; k < ph->first + ph->n; k++)
        if (!zero_time(&s->ops[k]))
            return 0;
    return 1;
}

/* Folding: every op in exactly one group, each strand's ops in program order across the
 * groups, and bookkeeping ops (events, frees) never cut off from the op they ride with:
 * outside serial groups a strand's range ends with one only at its phase's end, and in an
 * issue order one is followed by the next op of its own strand. */
static void test_folding_keeps_program_order(void **state)
{
    (void)state;
    dh_synth_t s = base();
    s.moe_sync_mb = -1;
    dh_profile_t *p = dh_synth_profile(&s);
    const dh_profile_t *ps[] = {p};
    dh_plan_opts_t o;
    dh_plan_opts_init(&o);
    o.group_cost_us = 0;   /* many groups: many places to get it wrong */
    dh_plan_t *plan;
    char err[512];
    assert_int_equal(dh_plan_build(ps, 1, &o, &plan, err, sizeof(err)), DH_OK);
    const dh_plan_section_t *sec = &plan->sections[0];
    int *owner = calloc(sec->nops, sizeof(*owner));
    assert_non_null(owner);
    for (size_t i = 0; i < sec->nops; i++)
        owner[i] = -1;
    long next[2] = {-1, -1};   /* per strand: the last op seen, in execution order */
    int paired = 0, checked = 0;
    for (int g = 0; g < sec->ngroups; g++) {
        const dh_plan_group_t *gr = &sec->groups[g];
        paired += gr->a_n > 0 && gr->b_n > 0;
        for (int strand = 0; strand < 2; strand++) {
            size_t first = strand ? gr->b_first : gr->a_first, n = strand ? gr->b_n : gr->a_n;
            for (size_t i = first; i < first + n; i++) {
                if (owner[i] != -1)
                    fail_msg("op %zu is in groups %d and %d", i, owner[i], g);
                owner[i] = g;
                assert_int_equal(sec->ops[i].group, g);
                assert_int_equal(sec->ops[i].strand, strand);
                if ((long)i <= next[strand])
                    fail_msg("strand %d: op %zu in group %d after op %ld", strand, i, g,
                             next[strand]);
                next[strand] = (long)i;
            }
            if (gr->b_n > 0 && n > 0 && zero_time(&sec->ops[first + n - 1]) &&
                !trailing_bookkeeping(sec, first + n - 1))
                fail_msg("group %d: strand %d's range ends with bookkeeping op %zu, cut off from "
                         "the op it rides with", g, strand, first + n - 1);
        }
        size_t ia = 0, ib = 0, len = strlen(gr->order);
        for (size_t k = 0; k < len; k++) {
            int b = gr->order[k] == 'b';
            size_t op = b ? gr->b_first + ib++ : gr->a_first + ia++;
            size_t left = b ? gr->b_n - ib : gr->a_n - ia;
            if (!zero_time(&sec->ops[op]) || left == 0 || trailing_bookkeeping(sec, op))
                continue;
            checked++;
            if (gr->order[k + 1] != gr->order[k])
                fail_msg("group %d: bookkeeping op %zu is issued apart from the op after it "
                         "(order %s)", g, op, gr->order);
        }
    }
    for (size_t i = 0; i < sec->nops; i++)
        if (owner[i] == -1)
            fail_msg("op %zu is in no group", i);
    assert_true(paired > 0 && checked > 0);
    free(owner);
    dh_plan_free(plan);
    dh_profile_free(p);
}

/* A pipeline transfer's profiled time is mostly waiting for the other stage, which pairing
 * cannot hide: on a "pp" communicator the DP counts a collective at most at the lower
 * envelope of its communicator's, so the same inflated times promise less than on "tp". */
static void test_pipeline_waits_are_not_hidden(void **state)
{
    (void)state;
    dh_synth_t s = base();
    s.moe_sync_mb = -1;
    dh_profile_t *p = dh_synth_profile(&s);
    size_t k = 0;
    for (size_t i = 0; i < p->nops; i++)
        if (p->ops[i].cls == DH_CLS_COMM && p->ops[i].comm == 0 && k++ % 2 == 1)
            p->ops[i].us *= 10;   /* every other transfer waited for its peer */
    const dh_profile_t *ps[] = {p};
    warns_t w = {0};
    double saved[2];
    for (int pp = 0; pp < 2; pp++) {
        snprintf(p->comms[0].role, sizeof(p->comms[0].role), "%s", pp ? "pp" : "tp");
        dh_plan_t *plan = build(ps, 1, &w, 0);
        saved[pp] = plan->sections[0].baseline_us - plan->sections[0].si_us;
        dh_plan_free(plan);
    }
    if (!(saved[1] < saved[0] && saved[1] >= 0))
        fail_msg("predicted savings: %.1f us as tp, %.1f us as pp", saved[0], saved[1]);
    dh_profile_free(p);
}

/* Emulated communication on one GPU (workload --emulate-comm): the collectives are kernels
 * the shim classifies as comm (DHELIX_COMM_KERNELS) without a communicator (comm -1), long
 * beside a few us of compute between two of them, less than the barriers of a group. No
 * NCCL order joins them, so each is a channel of its own: segments holding one on each
 * strand may co-run, and the strands interleave (when comm -1 counted as every
 * communicator, only segments of one strand's compute could go beside the other's
 * collective, too short to pay for their groups: no pair at all). With
 * two sections (rank 0 loads the data), no order is recorded for them and both pair. */
static dh_profile_t *emulated(dh_synth_t *s)
{
    dh_profile_t *p = dh_synth_profile(s);
    if (p == NULL)
        return NULL;
    for (size_t i = 0; i < p->nops; i++) {
        dh_prof_op_t *op = &p->ops[i];
        if (op->cls != DH_CLS_COMM) {
            if (op->us > 0)
                op->us = 3;   /* a tiny model: a few us per kernel */
            continue;
        }
        snprintf(op->kind, sizeof(op->kind), "KERNEL");
        snprintf(op->name, sizeof(op->name), "wl_emu_comm");
        op->comm = -1;
        op->bytes = 0;
        op->us = 200;
    }
    p->ncomms = 0;   /* the single process has no communicator (p->comms is still freed) */
    return p;
}

static int paired_groups(const dh_plan_section_t *sec)
{
    int n = 0;
    for (int g = 0; g < sec->ngroups; g++)
        n += sec->groups[g].a_n > 0 && sec->groups[g].b_n > 0;
    return n;
}

/* The last pipeline stage: its forward starts with the transfer that sends the backward's
 * gradient (Megatron's send_backward_recv_forward), so every forward op depends on all of
 * the backward before it ("dep" in the profile). Nothing of the two can overlap: the pairs
 * go, and the prediction is the baseline. With the dependency on the backward's first op
 * only, the rest of the backward may still run beside the forward. */
static void test_dependencies_unpair(void **state)
{
    (void)state;
    dh_synth_t s = base();
    s.moe_sync_mb = -1;
    for (int variant = 0; variant < 3; variant++) {
        dh_profile_t *p = dh_synth_profile(&s);
        /* Each forward's first op after a backward depends on that backward's last (or
         * first) op. */
        size_t bfirst = 0;
        for (size_t i = 1; i < p->nops && variant > 0; i++) {
            if (p->ops[i].thread == 1 && p->ops[i - 1].thread != 1)
                bfirst = i;
            if (p->ops[i].thread == 0 && p->ops[i - 1].thread == 1)
                p->ops[i].dep1 = (int64_t)(variant == 1 ? i - 1 : bfirst) + 1;
        }
        const dh_profile_t *ps[] = {p};
        warns_t w = {0};
        dh_plan_t *plan = build(ps, 1, &w, 3);
        const dh_plan_section_t *sec = &plan->sections[0];
        int pg = paired_groups(sec);
        double saved = sec->baseline_us - sec->si_us;
        if (variant == 1 && (pg != 0 || fabs(saved) > 1e-9))
            fail_msg("forwards that need all of the backward: %d paired groups, %.1f us saved",
                     pg, saved);
        if (variant != 1 && (pg == 0 || !(saved > 0)))
            fail_msg("variant %d: %d paired groups, %.1f us saved", variant, pg, saved);
        dh_plan_free(plan);
        dh_profile_free(p);
    }
}

/* dh_profile_trim keeps 2 repetitions: the same iteration, the same groups and pairs, the
 * dependencies still pointing at the same ops; a profile with no iteration is left alone. */
static void test_trim(void **state)
{
    (void)state;
    dh_synth_t s = base();
    s.moe_sync_mb = -1;
    s.iters = 5;
    s.warmup_ops = 7;
    dh_profile_t *p = dh_synth_profile(&s), *q = dh_synth_profile(&s);
    /* a forward that follows its backward's last op, in every iteration */
    for (size_t i = 1; i < p->nops; i++)
        if (p->ops[i].thread == 0 && p->ops[i - 1].thread == 1)
            p->ops[i].dep1 = q->ops[i].dep1 = (int64_t)i;
    char err[256];
    assert_int_equal(dh_profile_trim(q, 2, "q", err, sizeof(err)), DH_OK);
    size_t n = dh_synth_iter_ops(&s);
    if (q->nops != 2 * n)
        fail_msg("trimmed to %zu ops, expected 2 iterations of %zu", q->nops, n);
    for (size_t i = 0; i < q->nops; i++)
        if (q->ops[i].dep1 > 0 && q->ops[q->ops[i].dep1 - 1].thread != 1)
            fail_msg("op %zu's dependency %lld no longer names a backward op", i,
                     (long long)q->ops[i].dep1 - 1);
    dh_iteration_t a, b;
    assert_int_equal(dh_profile_find_iteration(p, "p", &a, err, sizeof(err)), DH_OK);
    assert_int_equal(dh_profile_find_iteration(q, "q", &b, err, sizeof(err)), DH_OK);
    assert_int_equal(a.n, b.n);
    for (size_t i = 0; i < a.n; i++)
        if (p->ops[a.first + i].sig != q->ops[b.first + i].sig)
            fail_msg("template op %zu differs after trimming", i);
    const dh_profile_t *pp[] = {p}, *qq[] = {q};
    warns_t w = {0};
    dh_plan_t *x = build(pp, 1, &w, 3), *y = build(qq, 1, &w, 3);
    assert_int_equal(x->sections[0].ngroups, y->sections[0].ngroups);
    assert_int_equal(paired_groups(&x->sections[0]), paired_groups(&y->sections[0]));
    for (int g = 0; g < x->sections[0].ngroups; g++)
        assert_string_equal(x->sections[0].groups[g].order, y->sections[0].groups[g].order);
    dh_plan_free(x);
    dh_plan_free(y);
    /* no iteration: an error, the profile untouched */
    dh_synth_t one = base();
    one.iters = 1;
    dh_profile_t *o = dh_synth_profile(&one);
    size_t before = o->nops;
    assert_int_not_equal(dh_profile_trim(o, 2, "o", err, sizeof(err)), DH_OK);
    assert_int_equal(o->nops, before);
    dh_profile_free(o);
    dh_profile_free(p);
    dh_profile_free(q);
}

/* A profile that starts inside an iteration, at an MoE routing synchronisation (the one
 * si.rotated_plan cuts at): trimming keeps the iteration found in the whole profile, where
 * looking again in the two repetitions left could take two alike micro-batches at its end
 * for the iteration. */
static void test_trim_rotated(void **state)
{
    (void)state;
    dh_synth_t s = base();
    s.moe_sync_mb = -2;
    s.iters = 5;
    dh_profile_t *p = dh_synth_profile(&s);
    size_t n = dh_synth_iter_ops(&s), cut = 0;
    /* the routing sync of the last forward of iteration 0 */
    for (size_t i = 1; i < n; i++)
        if (p->ops[i].sync_before && p->ops[i].thread == 0 && p->ops[i - 1].thread == 0)
            cut = i;
    if (cut == 0)
        fail_msg("no routing synchronisation inside a forward of iteration 0");
    memmove(p->ops, p->ops + cut, (p->nops - cut) * sizeof(*p->ops));
    p->nops -= cut;
    for (size_t i = 0; i < p->nops; i++)
        p->ops[i].dep1 = 0;
    p->sync_at_end = 0;
    char err[256];
    dh_iteration_t a, b;
    assert_int_equal(dh_profile_find_iteration(p, "p", &a, err, sizeof(err)), DH_OK);
    if (a.n != n)
        fail_msg("the cut profile's iteration is %zu ops, expected %zu", a.n, n);
    assert_int_equal(dh_profile_trim(p, 2, "p", err, sizeof(err)), DH_OK);
    assert_int_equal(dh_profile_find_iteration(p, "p", &b, err, sizeof(err)), DH_OK);
    if (b.n != a.n || p->nops != 2 * a.n)
        fail_msg("after trimming: %zu ops, iteration %zu, expected 2 x %zu", p->nops, b.n, a.n);
    dh_profile_free(p);
}

static void test_emulated_comm_pairs(void **state)
{
    (void)state;
    dh_synth_t s = base();
    s.moe_sync_mb = -1;
    dh_profile_t *p = emulated(&s);
    assert_non_null(p);
    const dh_profile_t *ps[] = {p};
    warns_t w = {0};
    dh_plan_t *plan = build(ps, 1, &w, 0);
    const dh_plan_section_t *sec = &plan->sections[0];
    if (paired_groups(sec) == 0 || !(sec->si_us < sec->baseline_us))
        fail_msg("%d paired groups, predicted %.3f us, baseline %.3f us", paired_groups(sec),
                 sec->si_us, sec->baseline_us);
    dh_plan_free(plan);
    /* Two sections: rank 0 loads the data. */
    s.world = 2;
    s.data_copy = 1;
    s.jitter = 11;
    dh_profile_t *p0 = emulated(&s);
    s.rank = 1;
    s.data_copy = 0;
    s.jitter = 29;
    dh_profile_t *p1 = emulated(&s);
    assert_non_null(p0);
    assert_non_null(p1);
    const dh_profile_t *ps2[] = {p0, p1};
    plan = build(ps2, 2, &w, 0);
    assert_int_equal(plan->nsections, 2);
    assert_int_equal(w.n, 0);
    for (int k = 0; k < 2; k++)
        if (paired_groups(&plan->sections[k]) == 0)
            fail_msg("section %d has no paired group", k);
    dh_plan_free(plan);
    dh_profile_free(p0);
    dh_profile_free(p1);
    dh_profile_free(p);
}

/* Options outside their ranges are refused with one line. */
static void test_bad_options(void **state)
{
    (void)state;
    dh_synth_t s = base();
    dh_profile_t *p = dh_synth_profile(&s);
    const dh_profile_t *ps[] = {p};
    dh_plan_opts_t o;
    dh_plan_t *plan = NULL;
    char err[512];
    dh_plan_opts_init(&o);
    assert_int_equal(o.max_segment, 0);
    assert_true(o.group_cost_us == DH_PLAN_GROUP_COST_US);
    assert_true(o.fold_below_us == DH_PLAN_FOLD_BELOW_US);
    o.group_cost_us = -1;
    assert_int_equal(dh_plan_build(ps, 1, &o, &plan, err, sizeof(err)), DH_ERR_INVALID);
    assert_string_equal(err, "dhelix plan: bad group cost or folding threshold");
    dh_plan_opts_init(&o);
    o.fold_below_us = NAN;
    assert_int_equal(dh_plan_build(ps, 1, &o, &plan, err, sizeof(err)), DH_ERR_INVALID);
    dh_plan_opts_init(&o);
    o.max_segment = DH_ALIGN_MAX_SEG + 1;
    assert_int_equal(dh_plan_build(ps, 1, &o, &plan, err, sizeof(err)), DH_ERR_INVALID);
    assert_non_null(strstr(err, "outside 1..16 (0: automatic)"));
    assert_null(plan);
    dh_profile_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_iteration_and_phases),
        cmocka_unit_test(test_no_pair_across_a_sync),
        cmocka_unit_test(test_truncated_profile),
        cmocka_unit_test(test_no_iteration),
        cmocka_unit_test(test_periodic_tail),
        cmocka_unit_test(test_repeat_under_half),
        cmocka_unit_test(test_microbatch_warning_and_unknown_times),
        cmocka_unit_test(test_sections_and_diff),
        cmocka_unit_test(test_issue_order),
        cmocka_unit_test(test_sections_follow_one_order),
        cmocka_unit_test(test_nothing_to_hide),
        cmocka_unit_test(test_folding_keeps_program_order),
        cmocka_unit_test(test_bad_options),
        cmocka_unit_test(test_pipeline_waits_are_not_hidden),
        cmocka_unit_test(test_emulated_comm_pairs),
        cmocka_unit_test(test_dependencies_unpair),
        cmocka_unit_test(test_trim),
        cmocka_unit_test(test_trim_rotated),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
