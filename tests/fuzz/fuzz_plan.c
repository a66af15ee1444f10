/*
 * fuzz_plan.c: the fuzz target of dh_plan_parse.
 *
 * Every input is parsed from a heap buffer of exactly its size (no terminator, so reading
 * past it is an AddressSanitizer report; libFuzzer and replay.c both pass one). A failure must leave one terminated line in err
 * that names the input, the same in a short buffer as a prefix, and the same status on a
 * second try. A success must hold the invariants the runtime indexes by (docs/plan-format.md)
 * and survive a round trip: save, parse the saved text, compare field by field, save again
 * and get the same bytes.
 */
#include "fuzz.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan.h"

#define NAME "fuzz-plan.json"
#define ERRLEN 512

static dh_plan_t *parse_checked(const char *buf, size_t len, const char *what)
{
    char *err = dh_fuzz_errbuf(ERRLEN);
    dh_plan_t *p = NULL;
    dh_status_t st = dh_plan_parse(buf, len, NAME, &p, err, ERRLEN);
    if (st == DH_OK) {
        if (!p)
            dh_fuzz_fail("%s: DH_OK without a plan", what);
        free(err);
        return p;
    }
    dh_fuzz_check_err(what, st, err, ERRLEN, NAME);
    if (p)
        dh_fuzz_fail("%s failed (%s: %s) but set *out", what, dh_status_name(st), err);

    /* The same input again, into a buffer of 1 to 32 bytes chosen by the input's length. */
    size_t shortlen = 1 + len % 32;
    char *shrt = dh_fuzz_errbuf(shortlen);
    dh_plan_t *q = NULL;
    dh_status_t st2 = dh_plan_parse(buf, len, NAME, &q, shrt, shortlen);
    if (st2 != st)
        dh_fuzz_fail("%s: the same input gave %s, then %s", what, dh_status_name(st),
                     dh_status_name(st2));
    if (q)
        dh_fuzz_fail("%s failed (%s) but set *out", what, dh_status_name(st2));
    dh_fuzz_check_short_err(what, err, shrt, shortlen);
    free(shrt);
    free(err);
    return NULL;
}

static void check_str(const char *what, const char *s, size_t cap)
{
    if (!memchr(s, '\0', cap))
        dh_fuzz_fail("accepted plan: %s is not terminated within its %zu bytes", what, cap);
}

/* The invariants docs/plan-format.md states and the runtime relies on. */
static void check_section(const dh_plan_section_t *s, int si)
{
    if (s->nranks < 0 || (s->nranks > 0 && !s->ranks))
        dh_fuzz_fail("accepted plan: section %d has nranks %d, ranks %p", si, s->nranks,
                     (void *)s->ranks);
    if (s->nphases < 0 || (s->nphases > 0 && !s->phases) || s->ngroups < 0 ||
        (s->ngroups > 0 && !s->groups) || (s->nops > 0 && !s->ops))
        dh_fuzz_fail("accepted plan: section %d has nops %zu, nphases %d, ngroups %d with a "
                     "NULL array", si, s->nops, s->nphases, s->ngroups);
    for (int i = 0; i < s->nphases; i++) {
        const dh_plan_phase_t *ph = &s->phases[i];
        if (ph->first > s->nops || ph->n > s->nops - ph->first)
            dh_fuzz_fail("accepted plan: section %d phase %d covers ops [%zu, +%zu) of %zu", si,
                         i, ph->first, ph->n, s->nops);
        if (ph->paired_with < -1 || ph->paired_with >= s->nphases)
            dh_fuzz_fail("accepted plan: section %d phase %d paired_with %d of %d phases", si,
                         i, ph->paired_with, s->nphases);
        if (ph->kind != 'F' && ph->kind != 'B' && ph->kind != 'O')
            dh_fuzz_fail("accepted plan: section %d phase %d kind 0x%02x", si, i,
                         (unsigned char)ph->kind);
    }
    for (size_t i = 0; i < s->nops; i++) {
        const dh_plan_op_t *op = &s->ops[i];
        check_str("an op's kind", op->kind, sizeof op->kind);
        check_str("an op's name", op->name, sizeof op->name);
        if ((int)op->cls < 0 || op->cls >= DH_CLS_COUNT)
            dh_fuzz_fail("accepted plan: section %d op %zu class %d", si, i, (int)op->cls);
        /* -1: an op outside every phase, which dh_plan_check allows. */
        if (op->phase < -1 || op->phase >= s->nphases)
            dh_fuzz_fail("accepted plan: section %d op %zu phase %d of %d", si, i,
                         (int)op->phase, s->nphases);
        if (op->group < 0 || op->group >= s->ngroups)
            dh_fuzz_fail("accepted plan: section %d op %zu group %d of %d", si, i,
                         (int)op->group, s->ngroups);
        if (op->strand != 0 && op->strand != 1)
            dh_fuzz_fail("accepted plan: section %d op %zu strand %d", si, i, (int)op->strand);
    }
    /* Every op in exactly one group, and its group and strand agree with the ranges. */
    size_t covered = 0;
    for (int g = 0; g < s->ngroups; g++) {
        const dh_plan_group_t *gr = &s->groups[g];
        if (gr->a_first > s->nops || gr->a_n > s->nops - gr->a_first ||
            gr->b_first > s->nops || gr->b_n > s->nops - gr->b_first || gr->a_n + gr->b_n == 0)
            dh_fuzz_fail("accepted plan: section %d group %d ranges a [%zu, +%zu) b [%zu, +%zu) "
                         "of %zu ops", si, g, gr->a_first, gr->a_n, gr->b_first, gr->b_n,
                         s->nops);
        for (int strand = 0; strand < 2; strand++) {
            size_t first = strand ? gr->b_first : gr->a_first, n = strand ? gr->b_n : gr->a_n;
            for (size_t i = first; i < first + n; i++)
                if (s->ops[i].group != g || s->ops[i].strand != strand)
                    dh_fuzz_fail("accepted plan: section %d group %d lists op %zu, which says "
                                 "group %d strand %d", si, g, i, (int)s->ops[i].group,
                                 (int)s->ops[i].strand);
        }
        covered += gr->a_n + gr->b_n;
        if (!gr->order || strlen(gr->order) != gr->a_n + gr->b_n)
            dh_fuzz_fail("accepted plan: section %d group %d order of length %zu for %zu ops",
                         si, g, gr->order ? strlen(gr->order) : 0, gr->a_n + gr->b_n);
        size_t na = 0;
        for (const char *c = gr->order; *c; c++) {
            if (*c != 'a' && *c != 'b')
                dh_fuzz_fail("accepted plan: section %d group %d order has 0x%02x", si, g,
                             (unsigned char)*c);
            na += *c == 'a';
        }
        if (na != gr->a_n)
            dh_fuzz_fail("accepted plan: section %d group %d order has %zu a's for a_n %zu", si,
                         g, na, gr->a_n);
    }
    /* Each op names one group and that group's ranges hold it, so the ranges are disjoint
     * exactly when their lengths add up to the template. */
    if (covered != s->nops)
        dh_fuzz_fail("accepted plan: section %d groups cover %zu ops of %zu", si, covered,
                     s->nops);
}

static void check_plan(const dh_plan_t *p)
{
    check_str("created_by", p->created_by, sizeof p->created_by);
    check_str("layout", p->layout, sizeof p->layout);
    check_str("policy", p->policy, sizeof p->policy);
    if (p->nsections < 0 || (p->nsections > 0 && !p->sections))
        dh_fuzz_fail("accepted plan: nsections %d, sections %p", p->nsections,
                     (void *)p->sections);
    for (int i = 0; i < p->nsections; i++)
        check_section(&p->sections[i], i);
    /* The lookup must return one of the sections or NULL, whatever the rank. */
    static const int ranks[] = {-1, 0, 1, 7, 1 << 30};
    for (size_t i = 0; i < sizeof ranks / sizeof ranks[0]; i++) {
        const dh_plan_section_t *s = dh_plan_section_for(p, ranks[i]);
        if (s && (s < p->sections || s >= p->sections + p->nsections))
            dh_fuzz_fail("dh_plan_section_for(%d) returned a pointer outside the sections",
                         ranks[i]);
    }
}

#define SAME(field, fmt)                                                                   \
    do {                                                                                   \
        if ((a)->field != (b)->field)                                                      \
            dh_fuzz_fail("round trip changed %s%s: " fmt " became " fmt, where, #field,      \
                         (a)->field, (b)->field);                                          \
    } while (0)
#define SAME_STR(field)                                                                    \
    do {                                                                                   \
        if (strcmp((a)->field, (b)->field) != 0)                                           \
            dh_fuzz_fail("round trip changed %s%s: \"%s\" became \"%s\"", where, #field,     \
                         (a)->field, (b)->field);                                          \
    } while (0)

static void same_section(const dh_plan_section_t *a, const dh_plan_section_t *b,
                         const char *where)
{
    SAME(nranks, "%d");
    for (int i = 0; i < a->nranks; i++)
        SAME(ranks[i], "%d");
    SAME(fingerprint, "%016" PRIx64);
    SAME(nops, "%zu");
    SAME(nphases, "%d");
    SAME(ngroups, "%d");
    SAME(baseline_us, "%.17g");
    SAME(si_us, "%.17g");
    SAME(extra_mem_bytes, "%.17g");
    SAME(hidden_comm_fraction, "%.17g");
    for (size_t i = 0; i < a->nops; i++) {
        SAME(ops[i].sig, "%016" PRIx64);
        SAME(ops[i].shape_dynamic, "%d");
        if (!a->ops[i].shape_dynamic)
            SAME(ops[i].shape, "%016" PRIx64);
        SAME_STR(ops[i].kind);
        SAME(ops[i].cls, "%d");
        SAME_STR(ops[i].name);
        SAME(ops[i].phase, "%d");
        SAME(ops[i].strand, "%d");
        SAME(ops[i].group, "%d");
        SAME(ops[i].us, "%.17g");
    }
    for (int i = 0; i < a->nphases; i++) {
        SAME(phases[i].first, "%zu");
        SAME(phases[i].n, "%zu");
        SAME(phases[i].kind, "%c");
        SAME(phases[i].mb, "%d");
        SAME(phases[i].thread, "%u");
        SAME(phases[i].paired_with, "%d");
    }
    for (int i = 0; i < a->ngroups; i++) {
        SAME(groups[i].a_first, "%zu");
        SAME(groups[i].a_n, "%zu");
        SAME(groups[i].b_first, "%zu");
        SAME(groups[i].b_n, "%zu");
        SAME_STR(groups[i].order);
        SAME(groups[i].pred_us, "%.17g");
        SAME(groups[i].start_us, "%.17g");
    }
}

static void same_plan(const dh_plan_t *a, const dh_plan_t *b)
{
    const char *where = "";
    SAME(version, "%d");
    SAME_STR(created_by);
    SAME(world, "%d");
    SAME_STR(layout);
    SAME_STR(policy);
    SAME(max_extra_mem_bytes, "%.17g");
    SAME(planning_s, "%.17g");
    SAME(nsections, "%d");
    for (int i = 0; i < a->nsections; i++) {
        char w[32];
        snprintf(w, sizeof w, "sections[%d].", i);
        same_section(&a->sections[i], &b->sections[i], w);
    }
}

/* Saves p to the scratch file and returns the text (the caller frees it). */
static char *save_checked(const dh_plan_t *p, size_t *len)
{
    char *err = dh_fuzz_errbuf(ERRLEN);
    dh_status_t st = dh_plan_save(p, dh_fuzz_scratch_path(), err, ERRLEN);
    if (st != DH_OK) {
        dh_fuzz_check_err("dh_plan_save", st, err, ERRLEN, "");
        dh_fuzz_fail("dh_plan_save of an accepted plan failed (%s): %s", dh_status_name(st),
                     err);
    }
    free(err);
    return dh_fuzz_scratch_read(len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* Both drivers pass a heap buffer of exactly size bytes with no terminator. */
    dh_plan_t *p = parse_checked((const char *)data, size, "dh_plan_parse");
    dh_fuzz_last_ok = p != NULL;
    if (!p)
        return 0;
    check_plan(p);

    size_t n1, n2;
    char *t1 = save_checked(p, &n1);
    dh_plan_t *q = parse_checked(t1, n1, "dh_plan_parse of the saved plan");
    if (!q)
        dh_fuzz_fail("the saved text of an accepted plan does not parse:\n%.*s", (int)n1, t1);
    same_plan(p, q);
    char *t2 = save_checked(q, &n2);
    if (n1 != n2 || (n1 && memcmp(t1, t2, n1) != 0))
        dh_fuzz_fail("saving the reloaded plan gave other text:\n%.*s\n----\n%.*s", (int)n1,
                     t1, (int)n2, t2);
    free(t1);
    free(t2);
    dh_plan_free(q);
    dh_plan_free(p);
    return 0;
}
