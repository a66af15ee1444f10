/*
 * plan.io: profiles and plans survive save and load unchanged; every class of bad input is
 * rejected with one line that names the file and the problem.
 */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "plan_int.h"
#include "planner.h"
#include "synth.h"

static char tmpdir[] = "/tmp/dh_plan_io_XXXXXX";

static char *tmp_path(const char *name)
{
    static char buf[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof(buf[k]), "%s/%s", tmpdir, name);
    return buf[k];
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
    b[n] = '\0';
    fclose(f);
    *len = (size_t)n;
    return b;
}

/* A plan built from a synthetic two-rank profile set. */
static dh_plan_t *sample_plan(void)
{
    dh_synth_t s;
    dh_synth_defaults(&s);
    s.world = 2;
    s.dyn_shape = 1;
    dh_profile_t *p0 = dh_synth_profile(&s);
    s.rank = 1;
    dh_profile_t *p1 = dh_synth_profile(&s);
    const dh_profile_t *ps[] = {p0, p1};
    dh_plan_t *plan;
    char err[512];
    dh_status_t st = dh_plan_build(ps, 2, NULL, &plan, err, sizeof(err));
    if (st != DH_OK)
        fail_msg("dh_plan_build: %s", err);
    dh_profile_free(p0);
    dh_profile_free(p1);
    return plan;
}

static int setup(void **state)
{
    (void)state;
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

#define SAME_NUM(x, y) assert_true((x) == (y))

static void same_plan(const dh_plan_t *a, const dh_plan_t *b)
{
    assert_int_equal(a->version, b->version);
    assert_string_equal(a->created_by, b->created_by);
    assert_int_equal(a->world, b->world);
    assert_string_equal(a->layout, b->layout);
    assert_string_equal(a->policy, b->policy);
    SAME_NUM(a->max_extra_mem_bytes, b->max_extra_mem_bytes);
    SAME_NUM(a->planning_s, b->planning_s);
    assert_int_equal(a->nsections, b->nsections);
    for (int i = 0; i < a->nsections; i++) {
        const dh_plan_section_t *x = &a->sections[i], *y = &b->sections[i];
        assert_int_equal(x->nranks, y->nranks);
        for (int k = 0; k < x->nranks; k++)
            assert_int_equal(x->ranks[k], y->ranks[k]);
        assert_int_equal(x->fingerprint, y->fingerprint);
        SAME_NUM(x->baseline_us, y->baseline_us);
        SAME_NUM(x->si_us, y->si_us);
        SAME_NUM(x->extra_mem_bytes, y->extra_mem_bytes);
        SAME_NUM(x->hidden_comm_fraction, y->hidden_comm_fraction);
        assert_int_equal(x->nops, y->nops);
        for (size_t k = 0; k < x->nops; k++) {
            const dh_plan_op_t *o = &x->ops[k], *q = &y->ops[k];
            assert_int_equal(o->sig, q->sig);
            assert_int_equal(o->shape_dynamic, q->shape_dynamic);
            if (!o->shape_dynamic)
                assert_int_equal(o->shape, q->shape);
            assert_string_equal(o->kind, q->kind);
            assert_int_equal(o->cls, q->cls);
            assert_string_equal(o->name, q->name);
            assert_int_equal(o->phase, q->phase);
            assert_int_equal(o->strand, q->strand);
            assert_int_equal(o->group, q->group);
            SAME_NUM(o->us, q->us);
        }
        assert_int_equal(x->nphases, y->nphases);
        assert_memory_equal(x->phases, y->phases, (size_t)x->nphases * sizeof(*x->phases));
        assert_int_equal(x->ngroups, y->ngroups);
        for (int g = 0; g < x->ngroups; g++) {
            const dh_plan_group_t *o = &x->groups[g], *q = &y->groups[g];
            assert_int_equal(o->a_first, q->a_first);
            assert_int_equal(o->a_n, q->a_n);
            assert_int_equal(o->b_first, q->b_first);
            assert_int_equal(o->b_n, q->b_n);
            assert_string_equal(o->order, q->order);
            SAME_NUM(o->pred_us, q->pred_us);
            SAME_NUM(o->start_us, q->start_us);
        }
    }
}

static void test_plan_round_trip(void **state)
{
    (void)state;
    dh_plan_t *p = sample_plan(), *q;
    char err[512];
    const char *path = tmp_path("plan.json");
    assert_int_equal(dh_plan_save(p, path, err, sizeof(err)), DH_OK);
    if (dh_plan_load(path, &q, err, sizeof(err)) != DH_OK)
        fail_msg("load of a saved plan: %s", err);
    same_plan(p, q);
    /* Saving the loaded plan gives the same bytes. */
    size_t n1, n2;
    char *t1 = slurp(path, &n1);
    assert_int_equal(dh_plan_save(q, path, err, sizeof(err)), DH_OK);
    char *t2 = slurp(path, &n2);
    assert_int_equal(n1, n2);
    assert_memory_equal(t1, t2, n1);
    free(t1);
    free(t2);
    assert_ptr_equal(dh_plan_section_for(q, 1), &q->sections[0]);
    assert_null(dh_plan_section_for(q, 2));
    dh_plan_free(p);
    dh_plan_free(q);
}

/* A version-1 plan (flat arrays) is still read, as the same plan. */
static void test_plan_v1(void **state)
{
    (void)state;
    dh_plan_t *p = sample_plan(), *q;
    dh_strbuf_t b = DH_STRBUF_INIT;
    assert_int_equal(dh__plan_render_version(p, &b, DH_PLAN_VERSION_FLAT), DH_OK);
    char err[512];
    if (dh_plan_parse(dh_strbuf_str(&b), b.len, "v1.json", &q, err, sizeof(err)) != DH_OK)
        fail_msg("a version-1 plan: %s", err);
    assert_int_equal(q->version, DH_PLAN_VERSION_FLAT);
    q->version = p->version;
    same_plan(p, q);
    dh_strbuf_free(&b);
    dh_plan_free(p);
    dh_plan_free(q);
}

/* A plan of n micro-batches from a synthetic profile, saved; returns the file's size and
 * the plan (*out). */
static size_t plan_of(int mb, int layers, dh_plan_t **out)
{
    dh_synth_t s;
    dh_synth_defaults(&s);
    s.mb = mb;
    s.layers = layers;
    dh_profile_t *pr = dh_synth_profile(&s);
    const dh_profile_t *ps[] = {pr};
    char err[512];
    if (dh_plan_build(ps, 1, NULL, out, err, sizeof(err)) != DH_OK)
        fail_msg("dh_plan_build: %s", err);
    dh_profile_free(pr);
    const char *path = tmp_path("mb.json");
    assert_int_equal(dh_plan_save(*out, path, err, sizeof(err)), DH_OK);
    size_t len;
    free(slurp(path, &len));
    return len;
}

/* The steady pair is written once with a repeat count: the file does not grow with the
 * micro-batches, and reads back as the flat plan the planner made. */
static void test_plan_blocks(void **state)
{
    (void)state;
    dh_plan_t *p4, *p32, *q;
    size_t n4 = plan_of(4, 2, &p4), n32 = plan_of(32, 2, &p32);
    if (n32 > n4 + n4 / 5)
        fail_msg("plan of 32 micro-batches: %zu bytes, of 4: %zu (it grows)", n32, n4);
    char err[512];
    const char *path = tmp_path("mb32.json");
    assert_int_equal(dh_plan_save(p32, path, err, sizeof(err)), DH_OK);
    size_t len;
    char *text = slurp(path, &len);
    long most = 0;
    for (const char *c = text; (c = strstr(c, "\"repeat\": ")) != NULL; c++)
        most = strtol(c + 10, NULL, 10) > most ? strtol(c + 10, NULL, 10) : most;
    if (most < 16)
        fail_msg("the longest repeat is %ld blocks", most);
    free(text);
    if (dh_plan_load(path, &q, err, sizeof(err)) != DH_OK)
        fail_msg("load: %s", err);
    const dh_plan_section_t *x = &p32->sections[0], *y = &q->sections[0];
    assert_int_equal(x->nops, y->nops);
    assert_int_equal(x->ngroups, y->ngroups);
    assert_int_equal(x->nphases, y->nphases);
    assert_memory_equal(x->phases, y->phases, (size_t)x->nphases * sizeof(*x->phases));
    for (size_t k = 0; k < x->nops; k++)
        if (x->ops[k].sig != y->ops[k].sig || x->ops[k].group != y->ops[k].group ||
            x->ops[k].phase != y->ops[k].phase || x->ops[k].strand != y->ops[k].strand ||
            x->ops[k].us != y->ops[k].us)
            fail_msg("op %zu differs", k);
    for (int g = 0; g < x->ngroups; g++) {
        const dh_plan_group_t *a = &x->groups[g], *b = &y->groups[g];
        if (a->a_first != b->a_first || a->a_n != b->a_n || a->b_first != b->b_first ||
            a->b_n != b->b_n || strcmp(a->order, b->order) != 0 || a->pred_us != b->pred_us ||
            fabs(a->start_us - b->start_us) > 1e-6 * (1 + a->start_us))
            fail_msg("group %d differs", g);
    }
    /* The runtime's walker agrees with the flat template op for op, twice round. */
    dh_plan_walk_t *w = dh_plan_walk_new(y);
    assert_non_null(w);
    assert_int_equal(dh_plan_walk_nops(w), y->nops);
    if (dh_plan_walk_nblocks(w) > 6)
        fail_msg("%d blocks for 32 micro-batches", dh_plan_walk_nblocks(w));
    size_t *ra = dh_plan_release_marks(y);
    dh_plan_cursor_t cur = {0};
    for (size_t n = 0; n < 2 * y->nops; n++) {
        size_t c = n % y->nops;
        assert_int_equal(cur.c, c);
        dh_plan_here_t h;
        dh_plan_walk_at(w, &cur, &h);
        const dh_plan_op_t *op = &y->ops[c];
        const dh_plan_group_t *g = &y->groups[op->group];
        const dh_plan_phase_t *ph = &y->phases[op->phase];
        int pb = ph->first == c && ph->kind == 'B' && ph->paired_with >= 0;
        if (h.op->sig != op->sig || h.op->strand != op->strand || h.group != op->group ||
            h.release != ra[c] || h.single_strand != (g->a_n == 0 || g->b_n == 0) ||
            h.starts_paired_b != pb || strcmp(dh_plan_walk_order(w, h.group), g->order) != 0)
            fail_msg("op %zu: the walker says group %d release %zu, the template group %d "
                     "release %zu", c, h.group, h.release, (int)op->group, ra[c]);
        dh_plan_walk_next(w, &cur);
    }
    assert_null(dh_plan_walk_order(w, y->ngroups));
    free(ra);
    dh_plan_walk_free(w);
    dh_plan_free(p4);
    dh_plan_free(p32);
    dh_plan_free(q);
}

static void test_profile_round_trip(void **state)
{
    (void)state;
    dh_synth_t s;
    dh_synth_defaults(&s);
    s.dyn_shape = 1;
    dh_profile_t *p = dh_synth_profile(&s), *q;
    p->ops[3].us = 0.1;          /* a time that needs 17 digits */
    p->ops[4].mem = -(1ll << 40);
    snprintf(p->ops[5].name, sizeof(p->ops[5].name), "quote \" backslash \\ tab \t é");
    p->ops[6].dep1 = 2;          /* follows op 1 */
    char err[512];
    const char *path = tmp_path("prof.json");
    assert_int_equal(dh_profile_save(p, path, err, sizeof(err)), DH_OK);
    if (dh_profile_load(path, &q, err, sizeof(err)) != DH_OK)
        fail_msg("load of a saved profile: %s", err);
    assert_int_equal(p->nops, q->nops);
    assert_int_equal(p->ncomms, q->ncomms);
    assert_int_equal(p->rank, q->rank);
    assert_int_equal(p->world, q->world);
    assert_string_equal(p->layout, q->layout);
    assert_int_equal(p->max_connections, q->max_connections);
    assert_int_equal(p->sync_at_end, q->sync_at_end);
    for (int c = 0; c < p->ncomms; c++)
        assert_memory_equal(&p->comms[c], &q->comms[c], sizeof(p->comms[c]));
    for (size_t i = 0; i < p->nops; i++) {
        const dh_prof_op_t *a = &p->ops[i], *b = &q->ops[i];
        assert_int_equal(a->thread, b->thread);
        assert_int_equal(a->sig, b->sig);
        assert_int_equal(a->shape, b->shape);
        assert_string_equal(a->name, b->name);
        assert_string_equal(a->kind, b->kind);
        assert_int_equal(a->cls, b->cls);
        assert_int_equal(a->comm, b->comm);
        assert_int_equal(a->mem, b->mem);
        assert_int_equal(a->sync_before, b->sync_before);
        assert_int_equal(a->dep1, b->dep1);
        SAME_NUM(a->us, b->us);
        SAME_NUM(a->start_us, b->start_us);
        SAME_NUM(a->flops, b->flops);
    }
    dh_profile_free(p);
    dh_profile_free(q);
}

/* The sizes of the allocations behind an op's mem (the planner's memory model reuses by
 * exact size) survive both forms: several before a kernel (summing to its mem), and those
 * made before a free (whose mem is minus the bytes freed). A list that does not sum to a
 * non-free op's mem is refused with its path. */
static void test_profile_allocs(void **state)
{
    (void)state;
    dh_synth_t s;
    dh_synth_defaults(&s);
    dh_profile_t *p = dh_synth_profile(&s), *q;
    size_t k = 0, f = 0;
    while (k < p->nops && p->ops[k].cls == DH_CLS_FREE)
        k++;
    f = k + 1;
    assert_true(f < p->nops);
    p->ops[f].cls = DH_CLS_FREE;
    snprintf(p->ops[f].kind, sizeof p->ops[f].kind, "FREE_ASYNC");
    p->ops[f].mem = -4096;
    p->alloc_sizes = malloc(3 * sizeof *p->alloc_sizes);
    p->alloc_sizes[0] = 3 << 20;
    p->alloc_sizes[1] = 5 << 20;
    p->alloc_sizes[2] = 512;
    p->nalloc_sizes = 3;
    p->ops[k].mem = 8 << 20;
    p->ops[k].nallocs = 2;
    p->ops[k].alloc_first = 0;
    p->ops[f].nallocs = 1;
    p->ops[f].alloc_first = 2;
    char err[512];
    for (int compact = 0; compact < 2; compact++) {
        const char *path = tmp_path(compact ? "allocs2.json" : "allocs1.json");
        assert_int_equal(compact ? dh_profile_save_compact(p, path, err, sizeof err)
                                 : dh_profile_save(p, path, err, sizeof err), DH_OK);
        if (dh_profile_load(path, &q, err, sizeof err) != DH_OK)
            fail_msg("load: %s", err);
        for (size_t i = 0; i < p->nops; i++) {
            const int64_t *a, *b;
            int64_t ba, bb, fa, fb;
            size_t na = dh_prof_allocs(p, &p->ops[i], &a, &ba, &fa);
            size_t nb = dh_prof_allocs(q, &q->ops[i], &b, &bb, &fb);
            if (na != nb || ba != bb || fa != fb || (na && memcmp(a, b, na * sizeof *a) != 0))
                fail_msg("%s form, op %zu: %zu allocations (%lld bytes, %lld freed) became %zu "
                         "(%lld, %lld)", compact ? "compact" : "flat", i, na, (long long)ba,
                         (long long)fa, nb, (long long)bb, (long long)fb);
        }
        const int64_t *sz;
        int64_t bytes, freed;
        assert_int_equal(dh_prof_allocs(q, &q->ops[k], &sz, &bytes, &freed), 2);
        assert_int_equal(sz[0], 3 << 20);
        assert_int_equal(sz[1], 5 << 20);
        assert_int_equal(dh_prof_allocs(q, &q->ops[f], &sz, &bytes, &freed), 1);
        assert_int_equal(bytes, 512);
        assert_int_equal(freed, 4096);
        dh_profile_free(q);
    }
    dh_profile_free(p);
    const char *bad = "{\"format\": \"dhelix-profile\", \"version\": 1, \"ops\": [{\"t\": 0, "
                      "\"k\": \"KERNEL\", \"c\": \"compute\", \"sig\": \"0000000000000001\", \"shape\": \"0000000000000000\", \"mem\": 8, "
                      "\"allocs\": [3, 4]}]}";
    assert_int_equal(dh_profile_parse(bad, strlen(bad), "bad.json", &q, err, sizeof err),
                     DH_ERR_PARSE);
    if (!strstr(err, "ops[0].allocs") || !strstr(err, "sums to 7"))
        fail_msg("unexpected message: %s", err);
}

/* The compact form (version 2) keeps every op's description, memory, sync and dependency,
 * and gives each op its phase position's mean time; each distinct op and phase is written
 * once, so the file does not grow with micro-batches or iterations. */
static void test_profile_compact(void **state)
{
    (void)state;
    dh_synth_t s;
    dh_synth_defaults(&s);
    s.dyn_shape = 1;
    s.jitter = 7;
    dh_profile_t *p = dh_synth_profile(&s), *q;
    p->ops[4].mem = -(1ll << 40);
    p->ops[6].dep1 = 2;
    char err[512];
    const char *path = tmp_path("prof2.json");
    assert_int_equal(dh_profile_save_compact(p, path, err, sizeof(err)), DH_OK);
    if (dh_profile_load(path, &q, err, sizeof(err)) != DH_OK)
        fail_msg("load of a compact profile: %s", err);
    assert_int_equal(q->version, DH_PROFILE_VERSION);
    assert_int_equal(p->nops, q->nops);
    assert_int_equal(p->sync_at_end, q->sync_at_end);
    assert_string_equal(p->layout, q->layout);
    for (size_t i = 0; i < p->nops; i++) {
        const dh_prof_op_t *a = &p->ops[i], *b = &q->ops[i];
        if (a->sig != b->sig || a->shape != b->shape || a->thread != b->thread ||
            a->mem != b->mem || a->sync_before != b->sync_before || a->dep1 != b->dep1 ||
            a->cls != b->cls || a->comm != b->comm || strcmp(a->name, b->name) != 0)
            fail_msg("op %zu differs after the compact round trip", i);
        /* jitter keeps times within 30 % of the op's own; a mean of them too */
        if ((a->us < 0) != (b->us < 0) || (a->us >= 0 && fabs(a->us - b->us) > 0.6 * a->us + 1e-9))
            fail_msg("op %zu: time %g became %g", i, a->us, b->us);
    }
    size_t len;
    char *text = slurp(path, &len);
    /* 3 micro-batches x 4 iterations of 2 layers: far fewer op records than ops */
    size_t records = 0;
    for (const char *c = strstr(text, "\"ops\": ["); c && (c = strstr(c + 1, "\"sig\"")); )
        records++;
    if (records * 10 > p->nops)
        fail_msg("%zu op records for %zu ops", records, p->nops);
    free(text);
    /* and one more round trip changes nothing but nothing (means of means) */
    const char *path2 = tmp_path("prof2b.json");
    assert_int_equal(dh_profile_save_compact(q, path2, err, sizeof(err)), DH_OK);
    dh_profile_t *r;
    assert_int_equal(dh_profile_load(path2, &r, err, sizeof(err)), DH_OK);
    assert_int_equal(r->nops, q->nops);
    for (size_t i = 0; i < q->nops; i++)
        if (fabs(r->ops[i].us - q->ops[i].us) > 1e-9 * (1 + fabs(q->ops[i].us)))
            fail_msg("op %zu: %g became %g on the second round trip", i, q->ops[i].us,
                     r->ops[i].us);
    dh_profile_free(r);
    dh_profile_free(p);
    dh_profile_free(q);
}

/* ---- bad input ---- */

/* Parses text as a plan named plan.json and expects a failure whose one-line message
 * starts with the name and contains want. */
static void expect_bad_plan(const char *text, size_t len, const char *want)
{
    char err[512];
    dh_plan_t *p = (dh_plan_t *)1;
    dh_status_t st = dh_plan_parse(text, len, "plan.json", &p, err, sizeof(err));
    if (st == DH_OK)
        fail_msg("accepted a plan that should fail with \"%s\"", want);
    assert_null(p);
    if (strncmp(err, "plan.json: ", 11) != 0 || strstr(err, want) == NULL || strchr(err, '\n'))
        fail_msg("message \"%s\", expected \"plan.json: ...%s...\" on one line", err, want);
}

/* Replaces the first occurrence of from by to in text (a new string). */
static char *replace(const char *text, const char *from, const char *to)
{
    const char *at = strstr(text, from);
    if (at == NULL)
        fail_msg("'%s' is not in the sample", from);
    size_t n = strlen(text) - strlen(from) + strlen(to);
    char *out = malloc(n + 1);
    assert_non_null(out);
    size_t pre = (size_t)(at - text);
    memcpy(out, text, pre);
    strcpy(out + pre, to);
    strcat(out, at + strlen(from));
    return out;
}

static void expect_bad_edit(const char *text, const char *from, const char *to, const char *want)
{
    char *t = replace(text, from, to);
    expect_bad_plan(t, strlen(t), want);
    free(t);
}

/* The plan saved after mutate() changed it must be rejected with want. */
static void expect_bad_struct(void (*mutate)(dh_plan_t *), const char *want)
{
    dh_plan_t *p = sample_plan();
    mutate(p);
    char err[512];
    const char *path = tmp_path("bad.json");
    assert_int_equal(dh_plan_save(p, path, err, sizeof(err)), DH_OK);
    size_t len;
    char *text = slurp(path, &len);
    expect_bad_plan(text, len, want);
    free(text);
    dh_plan_free(p);
}

static void m_range(dh_plan_t *p) { p->sections[0].groups[0].a_n = p->sections[0].nops + 5; }
static void m_overlap(dh_plan_t *p)
{
    dh_plan_group_t *g = &p->sections[0].groups[1];
    g->a_first = p->sections[0].groups[0].a_first;
}
static void m_letter(dh_plan_t *p) { p->sections[0].groups[0].order[0] = 'c'; }
static void m_fingerprint(dh_plan_t *p) { p->sections[0].fingerprint ^= 1; }
static void m_strand(dh_plan_t *p) { p->sections[0].ops[0].strand ^= 1; }
static void m_order_count(dh_plan_t *p)
{
    char *o = p->sections[0].groups[0].order;
    o[strlen(o) - 1] = '\0';
}

static void test_bad_inputs(void **state)
{
    (void)state;
    dh_plan_t *p = sample_plan();
    char err[512];
    const char *path = tmp_path("good.json");
    assert_int_equal(dh_plan_save(p, path, err, sizeof(err)), DH_OK);
    dh_plan_free(p);
    size_t len;
    char *good = slurp(path, &len);

    expect_bad_plan("", 0, "truncated or empty");
    expect_bad_plan("  \n\t", 4, "truncated or empty");
    expect_bad_plan("{\"format\": nope}", 16, "not JSON (line 1, column");
    expect_bad_plan("[1, 2]", 6, "is not a JSON object");
    /* Cut anywhere, a file is truncated, never accepted and never a crash. */
    for (int k = 1; k < 20; k++)
        expect_bad_plan(good, len * (size_t)k / 20, "truncated or empty");
    expect_bad_edit(good, "\"dhelix-plan\"", "\"dhelix-profile\"",
                    "format is \"dhelix-profile\", expected \"dhelix-plan\"");
    expect_bad_edit(good, "\"version\": 2", "\"version\": 7",
                    "version 7 is not supported (this shim reads versions 1 to 2)");
    expect_bad_edit(good, "\"fingerprint\":", "\"fingerprinz\":",
                    "sections[0] has no key \"fingerprint\"");
    expect_bad_edit(good, "\"strand\": ", "\"strand\": \"x\", \"zz\": ",
                    "sections[0].blocks[0].ops[0].strand is a string, expected an integer");
    expect_bad_edit(good, "\"baseline_us\": ", "\"baseline_us\": [], \"x\": ",
                    "sections[0].baseline_us is an array, expected a number");
    expect_bad_edit(good, "\"sig\": \"", "\"sig\": \"zz",
                    "sections[0].blocks[0].ops[0].sig is not 16 hex digits");
    expect_bad_edit(good, "\"ops\": [", "\"ops\": {}, \"opz\": [",
                    "sections[0].blocks[0].ops is an object, expected an array");
    expect_bad_struct(m_range, "groups[0].a is [");
    expect_bad_struct(m_overlap, "is in groups 0 and 1");
    expect_bad_struct(m_letter, "sections[0].blocks[0].groups[0].order has the letter 'c'");
    expect_bad_struct(m_order_count, "letters, expected");
    expect_bad_struct(m_fingerprint, "sections[0].fingerprint is ");
    expect_bad_struct(m_strand, "sections[0].ops[0] has strand");
    free(good);
}

static void test_bad_profiles(void **state)
{
    (void)state;
    char err[512];
    dh_profile_t *p = (dh_profile_t *)1;
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"", "prof.json: truncated or empty"},
        {"{\"format\": \"dhelix-plan\", \"version\": 1}",
         "prof.json: format is \"dhelix-plan\", expected \"dhelix-profile\""},
        {"{\"format\": \"dhelix-profile\", \"version\": 3, \"ops\": []}",
         "prof.json: version 3 is not supported (this shim reads versions 1 to 2)"},
        /* the compact form: references must land */
        {"{\"format\": \"dhelix-profile\", \"version\": 2, \"ops\": []}",
         "prof.json: has no key \"phases\""},
        {"{\"format\": \"dhelix-profile\", \"version\": 2, \"ops\": [{\"t\": 0, \"k\": \"K\", "
         "\"c\": \"compute\", \"sig\": \"0000000000000001\"}], \"phases\": [{\"ops\": [0, 1]}], "
         "\"seq\": []}",
         "prof.json: phases[0].ops[1] is not the index of an op (0 to 0)"},
        {"{\"format\": \"dhelix-profile\", \"version\": 2, \"ops\": [{\"t\": 0, \"k\": \"K\", "
         "\"c\": \"compute\", \"sig\": \"0000000000000001\"}], \"phases\": [{\"ops\": [0, 0], "
         "\"us\": [1]}], \"seq\": []}",
         "prof.json: phases[0].us has 1 elements, expected 2"},
        {"{\"format\": \"dhelix-profile\", \"version\": 2, \"ops\": [{\"t\": 0, \"k\": \"K\", "
         "\"c\": \"compute\", \"sig\": \"0000000000000001\"}], \"phases\": [{\"ops\": [0]}], "
         "\"seq\": [[1, 0, 0]]}",
         "prof.json: seq[0] names phase 1 of 1"},
        {"{\"format\": \"dhelix-profile\", \"version\": 2, \"ops\": [{\"t\": 0, \"k\": \"K\", "
         "\"c\": \"compute\", \"sig\": \"0000000000000001\"}], \"phases\": [{\"ops\": [0], "
         "\"dep\": [1]}], \"seq\": [[0, 1, 0]]}",
         "prof.json: seq[0] puts op 0's dependency 1 ops back, before the first op"},
        {"{\"format\": \"dhelix-profile\", \"version\": 2, \"ops\": [{\"t\": 0, \"k\": \"K\", "
         "\"c\": \"compute\", \"sig\": \"0000000000000001\"}], \"phases\": [{\"ops\": [0]}], "
         "\"seq\": [[0, 1, 0], [0, 1, 5]], \"nops\": 3}",
         "prof.json: nops is 3, but the phases in \"seq\" hold 2 ops"},
        {"{\"format\": \"dhelix-profile\", \"version\": 1}", "prof.json: has no key \"ops\""},
        {"{\"format\": \"dhelix-profile\", \"version\": 1, \"ops\": [{\"t\": 0, \"k\": \"GEMM\", "
         "\"c\": \"gpu\", \"sig\": \"0000000000000001\"}]}",
         "prof.json: ops[0].c is \"gpu\", not an op class"},
        {"{\"format\": \"dhelix-profile\", \"version\": 1, \"ops\": [{\"t\": 0, \"k\": \"NCCL\", "
         "\"c\": \"comm\", \"sig\": \"0000000000000001\", \"comm\": 0}]}",
         "prof.json: ops[0].comm is 0, expected -1..-1"},
        {"{\"format\": \"dhelix-profile\", \"version\": 1, \"ops\": [{\"t\": 0, \"k\": \"K\", "
         "\"c\": \"compute\", \"sig\": \"000000000000001\"}]}",
         "prof.json: ops[0].sig is not 16 hex digits"},
        /* a dependency must point to an earlier op */
        {"{\"format\": \"dhelix-profile\", \"version\": 1, \"ops\": [{\"t\": 0, \"k\": \"K\", "
         "\"c\": \"compute\", \"sig\": \"0000000000000001\", \"dep\": 0}]}",
         "prof.json: ops[0].dep is 0, expected -1..-1"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        dh_status_t st = dh_profile_parse(cases[i].text, strlen(cases[i].text), "prof.json", &p,
                                          err, sizeof(err));
        if (st == DH_OK || p != NULL || strstr(err, cases[i].want) != err)
            fail_msg("case %zu: status %s, message \"%s\", expected \"%s\"", i,
                     dh_status_name(st), err, cases[i].want);
    }
    assert_int_equal(dh_profile_load(tmp_path("missing.json"), &p, err, sizeof(err)), DH_ERR_IO);
    assert_non_null(strstr(err, "missing.json: cannot open"));
}

/* Measured co-run efficiencies (dhelix profile-pairs): classes override the table, pairs
 * come sorted with their efficiency (given, or from the times). */
static void test_pairs_file(void **state)
{
    (void)state;
    static const char good[] =
        "{\"format\": \"dhelix-pairs\", \"version\": 1, \"future\": 1,\n"
        " \"classes\": [{\"a\": \"compute\", \"b\": \"comm\", \"efficiency\": 0.93},\n"
        "               {\"a\": \"compute\", \"b\": \"compute\", \"efficiency\": -0.05}],\n"
        " \"pairs\": [{\"a_sig\": \"00000000000000ff\", \"b_sig\": \"0000000000000001\",\n"
        "             \"a_us\": 100, \"b_us\": 50, \"corun_us\": 110},\n"
        "            {\"a_sig\": \"0000000000000002\", \"b_sig\": \"0000000000000003\",\n"
        "             \"a_us\": 10, \"b_us\": 10, \"corun_us\": 12, \"efficiency\": 0.8}]}";
    char err[512];
    dh_pairs_t *p;
    if (dh_pairs_parse(good, strlen(good), "pairs.json", &p, err, sizeof(err)) != DH_OK)
        fail_msg("dh_pairs_parse: %s", err);
    assert_true(p->class_set[DH_CLS_COMPUTE][DH_CLS_COMM]);
    assert_true(p->class_eff[DH_CLS_COMPUTE][DH_CLS_COMM] == 0.93);
    assert_true(p->class_eff[DH_CLS_COMPUTE][DH_CLS_COMPUTE] == -0.05);
    assert_false(p->class_set[DH_CLS_COMM][DH_CLS_COMPUTE]);
    assert_int_equal(p->n, 2);
    assert_int_equal(p->pairs[0].a_sig, 2);
    assert_true(p->pairs[0].efficiency == 0.8);
    assert_int_equal(p->pairs[1].a_sig, 0xff);
    assert_true(fabs(p->pairs[1].efficiency - 0.8) < 1e-12);   /* (100 + 50 - 110) / 50 */
    dh_pairs_free(p);

    static const struct {
        const char *text, *want;
    } bad[] = {
        {"{\"format\": \"dhelix-plan\", \"version\": 1}",
         "pairs.json: format is \"dhelix-plan\", expected \"dhelix-pairs\""},
        {"{\"format\": \"dhelix-pairs\", \"version\": 1, \"classes\": [{\"a\": \"host\", "
         "\"b\": \"comm\", \"efficiency\": 0.5}]}",
         "pairs.json: classes[0] pairs \"host\" with \"comm\""},
        {"{\"format\": \"dhelix-pairs\", \"version\": 1, \"pairs\": [{\"a_sig\": "
         "\"0000000000000001\", \"b_sig\": \"0000000000000002\"}]}",
         "pairs.json: pairs[0] has no efficiency"},
        {"{\"format\": \"dhelix-pairs\", \"version\": 1, \"classes\": [{\"a\": \"comm\", "
         "\"b\": \"comm\", \"efficiency\": 3}]}",
         "pairs.json: classes[0].efficiency is 3"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        p = (dh_pairs_t *)1;
        dh_status_t st = dh_pairs_parse(bad[i].text, strlen(bad[i].text), "pairs.json", &p, err,
                                        sizeof(err));
        if (st == DH_OK || p != NULL || strstr(err, bad[i].want) != err)
            fail_msg("case %zu: %s, \"%s\", expected \"%s\"", i, dh_status_name(st), err,
                     bad[i].want);
    }
}

/* A short error buffer holds a prefix of the message, terminated. */
static void test_short_error_buffer(void **state)
{
    (void)state;
    char err[8];
    memset(err, 'X', sizeof(err));
    dh_plan_t *p;
    assert_int_not_equal(dh_plan_parse("{", 1, "plan.json", &p, err, sizeof(err)), DH_OK);
    assert_string_equal(err, "plan.js");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan_round_trip),
        cmocka_unit_test(test_plan_v1),
        cmocka_unit_test(test_plan_blocks),
        cmocka_unit_test(test_profile_round_trip),
        cmocka_unit_test(test_profile_compact),
        cmocka_unit_test(test_profile_allocs),
        cmocka_unit_test(test_bad_inputs),
        cmocka_unit_test(test_bad_profiles),
        cmocka_unit_test(test_pairs_file),
        cmocka_unit_test(test_short_error_buffer),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
