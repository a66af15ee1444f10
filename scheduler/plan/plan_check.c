/* plan_check.c: the structural rules of a plan (docs/plan-format.md) that its JSON types do
 * not express. The runtime trusts a plan that passed them: every template op has exactly
 * one group and strand, so the dispatcher never meets an op it has no place for. */
#include "plan_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static dh_status_t dh__check_phases(const dh__jr_t *r, const dh__jpath_t *at,
                                    const dh_plan_section_t *s)
{
    dh__jpath_t arr = DH__JKEY(at, "phases");
    if (s->nphases < 0 || (s->nphases > 0 && s->phases == NULL))
        return dh__jerr(r, &arr, "is missing");
    for (int i = 0; i < s->nphases; i++) {
        const dh_plan_phase_t *ph = &s->phases[i];
        dh__jpath_t here = DH__JIDX(&arr, (size_t)i);
        if (ph->first > s->nops || ph->n > s->nops - ph->first)
            return dh__jerr(r, &here, "covers ops %zu..%zu, outside the %zu ops", ph->first,
                            ph->first + ph->n, s->nops);
        if (ph->kind != 'F' && ph->kind != 'B' && ph->kind != 'O')
            return dh__jerr(r, &here, "has kind '%c', expected F, B or O",
                            (ph->kind >= 0x20 && ph->kind < 0x7f) ? ph->kind : '?');
        if (ph->mb < -1)
            return dh__jerr(r, &here, "has mb %d", ph->mb);
        int q = ph->paired_with;
        if (q < -1 || q >= s->nphases || q == i)
            return dh__jerr(r, &here, "is paired with phase %d (of %d)", q, s->nphases);
        if (q >= 0 && s->phases[q].paired_with != i)
            return dh__jerr(r, &here, "is paired with phase %d, which is paired with %d", q,
                            s->phases[q].paired_with);
    }
    return DH_OK;
}

static dh_status_t dh__check_ops(const dh__jr_t *r, const dh__jpath_t *at,
                                 const dh_plan_section_t *s)
{
    dh__jpath_t arr = DH__JKEY(at, "ops");
    for (size_t i = 0; i < s->nops; i++) {
        const dh_plan_op_t *op = &s->ops[i];
        dh__jpath_t here = DH__JIDX(&arr, i);
        /* -1 (no phase) only in a plan without phases: where there are phases, every op
         * of the template is in one, as the planner writes it. */
        if (op->phase < (s->nphases ? 0 : -1) || op->phase >= s->nphases)
            return dh__jerr(r, &here, "has phase %d (of %d)", (int)op->phase, s->nphases);
        if (op->phase >= 0) {
            const dh_plan_phase_t *ph = &s->phases[op->phase];
            if (i < ph->first || i - ph->first >= ph->n)
                return dh__jerr(r, &here, "is outside its phase %d (ops %zu..%zu)",
                                (int)op->phase, ph->first, ph->first + ph->n);
        }
        if (op->strand != 0 && op->strand != 1)
            return dh__jerr(r, &here, "has strand %d, expected 0 or 1", (int)op->strand);
        if (op->group < 0 || op->group >= s->ngroups)
            return dh__jerr(r, &here, "has group %d (of %d)", (int)op->group, s->ngroups);
        if ((unsigned)op->cls >= DH_CLS_COUNT)
            return dh__jerr(r, &here, "has no valid class");
        if (!isfinite(op->us))
            return dh__jerr(r, &here, "has a time that is not a number");
    }
    return DH_OK;
}

/* Marks the ops of one strand range of group g in owner[], checking each op's fields. */
static dh_status_t dh__claim(const dh__jr_t *r, const dh__jpath_t *at, const dh_plan_section_t *s,
                             int g, size_t first, size_t n, int strand, int32_t *owner)
{
    dh__jpath_t ops = DH__JKEY(at, "ops");
    for (size_t k = first; k < first + n; k++) {
        dh__jpath_t here = DH__JIDX(&ops, k);
        if (owner[k] == g)
            return dh__jerr(r, &here, "is in both strands of groups[%d]", g);
        if (owner[k] >= 0)
            return dh__jerr(r, &here, "is in groups %d and %d", (int)owner[k], g);
        owner[k] = g;
        if (s->ops[k].group != g)
            return dh__jerr(r, &here, "has group %d, but groups[%d] holds it", (int)s->ops[k].group,
                            g);
        if (s->ops[k].strand != strand)
            return dh__jerr(r, &here, "has strand %d, but groups[%d] holds it in strand %c",
                            (int)s->ops[k].strand, g, strand ? 'b' : 'a');
    }
    return DH_OK;
}

static dh_status_t dh__check_group(const dh__jr_t *r, const dh__jpath_t *at,
                                   const dh_plan_section_t *s, int g, int32_t *owner)
{
    dh__jpath_t arr = DH__JKEY(at, "groups");
    dh__jpath_t here = DH__JIDX(&arr, (size_t)g);
    const dh_plan_group_t *gr = &s->groups[g];
    if (gr->a_first > s->nops || gr->a_n > s->nops - gr->a_first)
        return dh__jerr(r, &here, "has a = [%zu, %zu], outside the %zu ops", gr->a_first, gr->a_n,
                        s->nops);
    if (gr->b_first > s->nops || gr->b_n > s->nops - gr->b_first)
        return dh__jerr(r, &here, "has b = [%zu, %zu], outside the %zu ops", gr->b_first, gr->b_n,
                        s->nops);
    if (gr->a_n + gr->b_n == 0)
        return dh__jerr(r, &here, "has no ops");
    dh__jpath_t ord = DH__JKEY(&here, "order");
    if (gr->order == NULL)
        return dh__jerr(r, &ord, "is missing");
    size_t len = strlen(gr->order), na = 0, nb = 0;
    for (size_t j = 0; j < len; j++) {
        if (gr->order[j] == 'a')
            na++;
        else if (gr->order[j] == 'b')
            nb++;
        else
            return dh__jerr(r, &ord, "has a letter other than 'a' and 'b' at %zu", j);
    }
    if (len != gr->a_n + gr->b_n)
        return dh__jerr(r, &ord, "has %zu letters, expected %zu", len, gr->a_n + gr->b_n);
    if (na != gr->a_n || nb != gr->b_n)
        return dh__jerr(r, &ord, "has %zu 'a' and %zu 'b', expected %zu and %zu", na, nb,
                        gr->a_n, gr->b_n);
    if (!isfinite(gr->pred_us) || !isfinite(gr->start_us) || gr->pred_us < 0 ||
        gr->start_us < 0)
        return dh__jerr(r, &here, "has a predicted time that is negative or not a number");
    DH_CHECK(dh__claim(r, at, s, g, gr->a_first, gr->a_n, 0, owner));
    DH_CHECK(dh__claim(r, at, s, g, gr->b_first, gr->b_n, 1, owner));
    return DH_OK;
}

static dh_status_t dh__check_groups(const dh__jr_t *r, const dh__jpath_t *at,
                                    const dh_plan_section_t *s)
{
    dh__jpath_t arr = DH__JKEY(at, "groups");
    if (s->ngroups < 1 || s->groups == NULL)
        return dh__jerr(r, &arr, "is empty");
    int32_t *owner = malloc(s->nops * sizeof(*owner));
    if (owner == NULL) {
        dh__errf(r->err, r->errlen, r->file, "out of memory");
        return DH_ERR_NOMEM;
    }
    for (size_t k = 0; k < s->nops; k++)
        owner[k] = -1;
    dh_status_t st = DH_OK;
    for (int g = 0; g < s->ngroups && st == DH_OK; g++)
        st = dh__check_group(r, at, s, g, owner);
    dh__jpath_t ops = DH__JKEY(at, "ops");
    for (size_t k = 0; k < s->nops && st == DH_OK; k++) {
        dh__jpath_t here = DH__JIDX(&ops, k);
        if (owner[k] < 0)
            st = dh__jerr(r, &here, "is in no group");
    }
    free(owner);
    return st;
}

static dh_status_t dh__check_section(const dh__jr_t *r, const dh_plan_t *p, int i)
{
    const dh_plan_section_t *s = &p->sections[i];
    dh__jpath_t arr = DH__JKEY(NULL, "sections");
    dh__jpath_t here = DH__JIDX(&arr, (size_t)i);
    if (s->nops == 0 || s->ops == NULL || s->nops > DH__MAX_OPS)
        return dh__jerr(r, &here, "has %zu ops (1..%u allowed)", s->nops, DH__MAX_OPS);
    if (s->nranks < 0 || (s->nranks > 0 && s->ranks == NULL))
        return dh__jerr(r, &here, "has a bad rank list");
    if (s->nranks == 0 && p->nsections > 1)
        return dh__jerr(r, &here, "lists no ranks (only the single section of a plan may)");
    double nums[] = {s->baseline_us, s->si_us, s->extra_mem_bytes, s->hidden_comm_fraction};
    for (size_t k = 0; k < sizeof(nums) / sizeof(nums[0]); k++)
        if (!isfinite(nums[k]) || nums[k] < 0)
            return dh__jerr(r, &here, "has a prediction that is negative or not a number");
    if (s->hidden_comm_fraction > 1)
        return dh__jerr(r, &here, "has hidden_comm_fraction %g, more than 1",
                        s->hidden_comm_fraction);
    uint64_t fp = dh_plan_fingerprint(s->ops, s->nops);
    if (fp != s->fingerprint) {
        char want[17], got[17];
        dh__hex16(s->fingerprint, want);
        dh__hex16(fp, got);
        dh__jpath_t f = DH__JKEY(&here, "fingerprint");
        return dh__jerr(r, &f, "is %s, but the ops' signatures hash to %s", want, got);
    }
    DH_CHECK(dh__check_phases(r, &here, s));
    DH_CHECK(dh__check_ops(r, &here, s));
    return dh__check_groups(r, &here, s);
}

static int dh__cmp_rank(const void *x, const void *y)
{
    const int *a = x, *b = y;
    return a[0] != b[0] ? (a[0] < b[0] ? -1 : 1) : (a[1] < b[1] ? -1 : a[1] > b[1]);
}

/* A rank listed by two sections would make dh_plan_section_for's answer depend on their
 * order; a plan is rejected instead. */
static dh_status_t dh__check_ranks(const dh__jr_t *r, const dh_plan_t *p)
{
    size_t total = 0;
    for (int i = 0; i < p->nsections; i++)
        total += (size_t)p->sections[i].nranks;
    if (total < 2)
        return DH_OK;
    int *pairs = malloc(total * 2 * sizeof(*pairs));
    if (pairs == NULL) {
        dh__errf(r->err, r->errlen, r->file, "out of memory");
        return DH_ERR_NOMEM;
    }
    size_t n = 0;
    for (int i = 0; i < p->nsections; i++)
        for (int k = 0; k < p->sections[i].nranks; k++) {
            pairs[2 * n] = p->sections[i].ranks[k];
            pairs[2 * n + 1] = i;
            n++;
        }
    qsort(pairs, n, 2 * sizeof(*pairs), dh__cmp_rank);
    dh_status_t st = DH_OK;
    for (size_t k = 1; k < n && st == DH_OK; k++) {
        if (pairs[2 * k] != pairs[2 * k - 2])
            continue;
        dh__jpath_t arr = DH__JKEY(NULL, "sections");
        dh__jpath_t here = DH__JIDX(&arr, (size_t)pairs[2 * k + 1]);
        if (pairs[2 * k + 1] == pairs[2 * k - 1])
            st = dh__jerr(r, &here, "lists rank %d twice", pairs[2 * k]);
        else
            st = dh__jerr(r, &here, "lists rank %d, which sections[%d] lists too", pairs[2 * k],
                          pairs[2 * k - 1]);
    }
    free(pairs);
    return st;
}

dh_status_t dh_plan_check(const dh_plan_t *p, const char *name, char *err, size_t errlen)
{
    dh__jr_t r = {name ? name : "<plan>", err, errlen};
    if (p == NULL) {
        dh__errf(err, errlen, r.file, "no plan");
        return DH_ERR_INVALID;
    }
    if (p->version < DH_PLAN_VERSION_FLAT || p->version > DH_PLAN_VERSION) {
        dh__errf(err, errlen, r.file,
                 "version %d is not supported (this shim reads versions %d to %d)", p->version,
                 DH_PLAN_VERSION_FLAT, DH_PLAN_VERSION);
        return DH_ERR_UNSUPPORTED;
    }
    if (p->nsections < 1 || p->sections == NULL || p->nsections > (int)DH__MAX_SECTIONS) {
        dh__errf(err, errlen, r.file, "has %d sections (1..%u allowed)", p->nsections,
                 DH__MAX_SECTIONS);
        return DH_ERR_PARSE;
    }
    for (int i = 0; i < p->nsections; i++)
        DH_CHECK(dh__check_section(&r, p, i));
    return dh__check_ranks(&r, p);
}
