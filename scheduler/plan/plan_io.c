/* plan_io.c: SI plans (docs/plan-format.md) from and to JSON. The structural rules a plan
 * must obey beyond its JSON types are in plan_check.c. */
#include "plan_int.h"

#include <stdlib.h>
#include <string.h>

#define DH__READER "this shim"

/* ---- reading ---- */

dh_status_t dh__plan_phase_parse(const dh__jr_t *r, json_t *arr, const dh__jpath_t *at,
                                 size_t i, size_t nops, dh_plan_phase_t *ph)
{
    dh__jpath_t here = DH__JIDX(at, i);
    json_t *o;
    long long v;
    char kind[4];
    DH_CHECK(dh__jobj_at(r, arr, &here, i, &o));
    DH_CHECK(dh__jint(r, o, &here, "first", 1, 0, 0, (long long)nops, &v));
    ph->first = (size_t)v;
    DH_CHECK(dh__jint(r, o, &here, "n", 1, 0, 0, (long long)nops, &v));
    ph->n = (size_t)v;
    DH_CHECK(dh__jstr(r, o, &here, "kind", 1, "", kind, sizeof(kind)));
    if (strcmp(kind, "F") != 0 && strcmp(kind, "B") != 0 && strcmp(kind, "O") != 0) {
        dh__jpath_t k = DH__JKEY(&here, "kind");
        return dh__jerr(r, &k, "is \"%s\", expected \"F\", \"B\" or \"O\"", kind);
    }
    ph->kind = kind[0];
    DH_CHECK(dh__jint(r, o, &here, "mb", 0, -1, -1, 1 << 24, &v));
    ph->mb = (int)v;
    DH_CHECK(dh__jint(r, o, &here, "thread", 0, 0, 0, 0xffffffffLL, &v));
    ph->thread = (uint32_t)v;
    DH_CHECK(dh__jint(r, o, &here, "paired_with", 0, -1, -1, 1 << 30, &v));
    ph->paired_with = (int)v;
    return DH_OK;
}

dh_status_t dh__plan_op_parse(const dh__jr_t *r, json_t *arr, const dh__jpath_t *at, size_t i,
                              dh_plan_op_t *op)
{
    dh__jpath_t here = DH__JIDX(at, i);
    json_t *o;
    long long v;
    char cls[16];
    DH_CHECK(dh__jobj_at(r, arr, &here, i, &o));
    DH_CHECK(dh__jhex(r, o, &here, "sig", 0, &op->sig, NULL));
    DH_CHECK(dh__jhex(r, o, &here, "shape", 1, &op->shape, &op->shape_dynamic));
    DH_CHECK(dh__jstr(r, o, &here, "k", 1, "", op->kind, sizeof(op->kind)));
    DH_CHECK(dh__jstr(r, o, &here, "c", 1, "", cls, sizeof(cls)));
    int c = dh_opclass_parse(cls);
    if (c < 0) {
        dh__jpath_t k = DH__JKEY(&here, "c");
        return dh__jerr(r, &k, "is \"%s\", not an op class", cls);
    }
    op->cls = (dh_opclass_t)c;
    DH_CHECK(dh__jstr(r, o, &here, "name", 0, "", op->name, sizeof(op->name)));
    DH_CHECK(dh__jint(r, o, &here, "phase", 1, 0, -1, 1 << 30, &v));
    op->phase = (int32_t)v;
    DH_CHECK(dh__jint(r, o, &here, "strand", 1, 0, 0, 1, &v));
    op->strand = (int8_t)v;
    DH_CHECK(dh__jint(r, o, &here, "group", 1, 0, 0, 1 << 30, &v));
    op->group = (int32_t)v;
    DH_CHECK(dh__jnum(r, o, &here, "us", 0, 0, -1, 1e15, &op->us));
    DH_CHECK(dh__jint(r, o, &here, "moved", 0, 0, 0, 1, &v));
    op->moved = (int8_t)v;
    return DH_OK;
}

dh_status_t dh__plan_group_parse(const dh__jr_t *r, json_t *arr, const dh__jpath_t *at,
                                 size_t i, size_t nops, dh_plan_group_t *g)
{
    dh__jpath_t here = DH__JIDX(at, i);
    json_t *o;
    DH_CHECK(dh__jobj_at(r, arr, &here, i, &o));
    DH_CHECK(dh__jrange(r, o, &here, "a", nops, &g->a_first, &g->a_n));
    DH_CHECK(dh__jrange(r, o, &here, "b", nops, &g->b_first, &g->b_n));
    json_t *ord = json_object_get(o, "order");
    dh__jpath_t k = DH__JKEY(&here, "order");
    if (ord == NULL)
        return dh__jerr(r, &here, "has no key \"order\"");
    if (!json_is_string(ord))
        return dh__jerr(r, &k, "is not a string");
    size_t len = json_string_length(ord);
    const char *s = json_string_value(ord);
    size_t na = 0, nb = 0;
    for (size_t j = 0; j < len; j++) {
        if (s[j] == 'a')
            na++;
        else if (s[j] == 'b')
            nb++;
        else
            return dh__jerr(r, &k, "has the letter '%c' at %zu (only 'a' and 'b' are allowed)",
                            (s[j] >= 0x20 && s[j] < 0x7f) ? s[j] : '?', j);
    }
    if (len != g->a_n + g->b_n)
        return dh__jerr(r, &k, "has %zu letters, expected %zu", len, g->a_n + g->b_n);
    if (na != g->a_n || nb != g->b_n)
        return dh__jerr(r, &k, "has %zu 'a' and %zu 'b', expected %zu and %zu", na, nb, g->a_n,
                        g->b_n);
    if ((g->order = malloc(len + 1)) == NULL)
        return DH_ERR_NOMEM;
    memcpy(g->order, s, len + 1);
    DH_CHECK(dh__jnum(r, o, &here, "pred_us", 0, 0, 0, 1e15, &g->pred_us));
    DH_CHECK(dh__jnum(r, o, &here, "start_us", 0, 0, 0, 1e15, &g->start_us));
    return DH_OK;
}

static dh_status_t dh__ranks_parse(const dh__jr_t *r, json_t *o, const dh__jpath_t *at,
                                   dh_plan_section_t *s)
{
    json_t *ranks;
    DH_CHECK(dh__jarr(r, o, at, "ranks", 0, DH__MAX_RANKS, &ranks));
    size_t n = ranks ? json_array_size(ranks) : 0;
    if (n > 0 && (s->ranks = calloc(n, sizeof(*s->ranks))) == NULL)
        return DH_ERR_NOMEM;
    dh__jpath_t k = DH__JKEY(at, "ranks");
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(ranks, i);
        dh__jpath_t e = DH__JIDX(&k, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            json_integer_value(v) > (1 << 24))
            return dh__jerr(r, &e, "is not a rank (an integer 0..%d)", 1 << 24);
        s->ranks[i] = (int)json_integer_value(v);
        s->nranks++;
    }
    return DH_OK;
}

/* Reads the array member key into a calloc'ed array, one parse call per element. count
 * grows before each element is parsed, so that a failure half-way through an element
 * leaves it (zeroed, then partly filled) where the free path finds it. */
#define DH__READ_ARRAY(r, o, at, key, min, max, items, count, ...)                             \
    do {                                                                                   \
        json_t *arr_;                                                                      \
        DH_CHECK(dh__jarr((r), (o), (at), (key), 1, (max), &arr_));                        \
        size_t n_ = json_array_size(arr_);                                                 \
        dh__jpath_t k_ = DH__JKEY((at), (key));                                            \
        if (n_ == 0 && (min))                                                             \
            return dh__jerr((r), &k_, "is empty");                                         \
        if (n_ > 0 && ((items) = calloc(n_, sizeof(*(items)))) == NULL)                    \
            return DH_ERR_NOMEM;                                                           \
        for (size_t i_ = 0; i_ < n_; i_++) {                                               \
            (count)++;                                                                     \
            DH_CHECK(__VA_ARGS__);                                                         \
        }                                                                                  \
    } while (0)

static dh_status_t dh__section_parse(const dh__jr_t *r, json_t *arr, const dh__jpath_t *at,
                                     size_t i, int version, dh_plan_section_t *s)
{
    dh__jpath_t here = DH__JIDX(at, i);
    json_t *o;
    DH_CHECK(dh__jobj_at(r, arr, &here, i, &o));
    DH_CHECK(dh__ranks_parse(r, o, &here, s));
    DH_CHECK(dh__jhex(r, o, &here, "fingerprint", 0, &s->fingerprint, NULL));
    DH_CHECK(dh__jnum(r, o, &here, "baseline_us", 0, 0, 0, 1e15, &s->baseline_us));
    DH_CHECK(dh__jnum(r, o, &here, "si_us", 0, 0, 0, 1e15, &s->si_us));
    DH_CHECK(dh__jnum(r, o, &here, "extra_mem_bytes", 0, 0, 0, 1e18, &s->extra_mem_bytes));
    DH_CHECK(dh__jnum(r, o, &here, "hidden_comm_fraction", 0, 0, 0, 1, &s->hidden_comm_fraction));
    DH_CHECK(dh__jnum(r, o, &here, "held_ops", 0, 0, 0, 1e15, &s->held_ops));
    DH_CHECK(dh__jnum(r, o, &here, "held_free_bytes", 0, 0, 0, 1e18, &s->held_free_bytes));
    long long mv;
    DH_CHECK(dh__jint(r, o, &here, "moves", 0, 0, 0, 1 << 30, &mv));
    s->moves = (int)mv;
    DH_CHECK(dh__jint(r, o, &here, "moves_refused", 0, 0, 0, 1 << 30, &mv));
    s->moves_refused = (int)mv;

    if (version != DH_PLAN_VERSION_FLAT)
        return dh__plan_blocks_parse(r, o, &here, s);
    return dh__plan_flat_parse(r, o, &here, s);
}

dh_status_t dh__plan_flat_parse(const dh__jr_t *r, json_t *o, const dh__jpath_t *at,
                                dh_plan_section_t *s)
{
    /* Ops first: the ranges of phases and groups are checked against their count. */
    DH__READ_ARRAY(r, o, at, "ops", 1, DH__MAX_OPS, s->ops, s->nops,
                   dh__plan_op_parse(r, arr_, &k_, i_, &s->ops[i_]));
    DH__READ_ARRAY(r, o, at, "phases", 0, s->nops, s->phases, s->nphases,
                   dh__plan_phase_parse(r, arr_, &k_, i_, s->nops, &s->phases[i_]));
    DH__READ_ARRAY(r, o, at, "groups", 1, s->nops, s->groups, s->ngroups,
                   dh__plan_group_parse(r, arr_, &k_, i_, s->nops, &s->groups[i_]));
    return DH_OK;
}

static dh_status_t dh__plan_fill(const dh__jr_t *r, json_t *root, int version, dh_plan_t *p)
{
    long long v;
    p->version = version;
    DH_CHECK(dh__jstr(r, root, NULL, "created_by", 0, "", p->created_by, sizeof(p->created_by)));
    DH_CHECK(dh__jnum(r, root, NULL, "planning_s", 0, 0, 0, 1e9, &p->planning_s));
    DH_CHECK(dh__jint(r, root, NULL, "world", 0, -1, -1, 1 << 24, &v));
    p->world = v == 0 ? -1 : (int)v;
    DH_CHECK(dh__jstr(r, root, NULL, "layout", 0, "", p->layout, sizeof(p->layout)));
    DH_CHECK(dh__jstr(r, root, NULL, "policy", 0, "all", p->policy, sizeof(p->policy)));
    DH_CHECK(dh__jnum(r, root, NULL, "max_extra_mem_bytes", 0, 2147483648.0, -1, 1e18,
                      &p->max_extra_mem_bytes));
    DH__READ_ARRAY(r, root, (const dh__jpath_t *)NULL, "sections", 1, DH__MAX_SECTIONS,
                   p->sections, p->nsections,
                   dh__section_parse(r, arr_, &k_, i_, version, &p->sections[i_]));
    return DH_OK;
}

dh_status_t dh_plan_parse(const char *buf, size_t len, const char *name, dh_plan_t **out,
                          char *err, size_t errlen)
{
    dh__jr_t r = {name ? name : "<buffer>", err, errlen};
    *out = NULL;
    if (err && errlen)
        err[0] = '\0';
    json_t *root;
    DH_CHECK(dh__jparse(&r, buf, len, &root));
    int version = 0;
    dh_status_t st = dh__jcheck_versions(&r, root, "dhelix-plan", DH_PLAN_VERSION_FLAT,
                                         DH_PLAN_VERSION, DH__READER, &version);
    dh_plan_t *p = NULL;
    if (st == DH_OK && (p = calloc(1, sizeof(*p))) == NULL)
        st = DH_ERR_NOMEM;
    if (st == DH_OK)
        st = dh__plan_fill(&r, root, version, p);
    json_decref(root);
    if (st == DH_ERR_NOMEM)
        dh__errf(err, errlen, r.file, "out of memory");
    if (st == DH_OK)
        st = dh_plan_check(p, r.file, err, errlen);
    if (st != DH_OK) {
        dh_plan_free(p);
        return st;
    }
    *out = p;
    return DH_OK;
}

dh_status_t dh_plan_load(const char *path, dh_plan_t **out, char *err, size_t errlen)
{
    char *buf;
    size_t len;
    *out = NULL;
    DH_CHECK(dh__read_file(path, &buf, &len, err, errlen));
    dh_status_t st = dh_plan_parse(buf, len, path, out, err, errlen);
    free(buf);
    return st;
}

void dh__plan_section_clear(dh_plan_section_t *s)
{
    if (s == NULL)
        return;
    for (int g = 0; g < s->ngroups; g++)
        free(s->groups[g].order);
    free(s->groups);
    free(s->phases);
    free(s->ops);
    free(s->ranks);
    memset(s, 0, sizeof(*s));
}

void dh_plan_free(dh_plan_t *p)
{
    if (p == NULL)
        return;
    for (int i = 0; i < p->nsections; i++)
        dh__plan_section_clear(&p->sections[i]);
    free(p->sections);
    free(p);
}

size_t *dh_plan_release_marks(const dh_plan_section_t *s)
{
    size_t *ra = malloc((s->nops ? s->nops : 1) * sizeof *ra);
    size_t *last = calloc(s->ngroups > 0 ? (size_t)s->ngroups : 1, sizeof *last);
    if (!ra || !last) {
        free(ra);
        free(last);
        return NULL;
    }
    for (size_t c = 0; c < s->nops; c++)
        last[s->ops[c].group] = c;
    size_t r = 0;
    for (size_t c = 0; c < s->nops; c++) {
        while (r < (size_t)s->ngroups && last[r] <= c)
            r++;
        ra[c] = r;
    }
    free(last);
    return ra;
}

int dh_plan_vote_points(const dh_plan_section_t *s, dh_plan_vp_t **out, uint64_t *held_most)
{
    *out = NULL;
    *held_most = 0;
    size_t *rel = dh_plan_release_marks(s);
    dh_plan_vp_t *vp = calloc((size_t)s->ngroups + 1, sizeof *vp);
    size_t *last = calloc((size_t)s->ngroups + 1, sizeof *last);
    size_t *cnt = calloc((size_t)s->ngroups + 1, sizeof *cnt);
    if (!rel || !vp || !last || !cnt) {
        free(rel);
        free(vp);
        free(last);
        free(cnt);
        return -1;
    }
    int n = 0;
    for (int g = 0; g < s->ngroups; g++) {
        const dh_plan_group_t *gr = &s->groups[g];
        if (gr->a_n == 0 || gr->b_n == 0)
            continue;
        const dh_plan_op_t *op = &s->ops[gr->a_first];
        int mb = op->phase >= 0 && op->phase < s->nphases ? s->phases[op->phase].mb : -1;
        uint64_t pair = mb < 0 ? 0 : (uint64_t)mb > 0xfffe ? 0xfffe : (uint64_t)mb;
        if (n > 0 && pair <= vp[n - 1].pair) {
            last[n - 1] = (size_t)g; /* keys only grow within an iteration: one round */
            continue;
        }
        vp[n] = (dh_plan_vp_t){.cap = (size_t)g, .pair = pair};
        last[n++] = (size_t)g;
    }
    /* Each vote at the first op after which the pair's last two-strand group is complete. */
    for (int k = 0, c = 0; k < n; k++) {
        while ((size_t)c < s->nops && rel[c] <= last[k])
            c++;
        vp[k].c = (size_t)c < s->nops ? (size_t)c : s->nops - 1;
        vp[k].c0 = vp[k].c;
        for (size_t j = k > 0 ? vp[k - 1].c + 1 : 0; j < vp[k].c; j++)
            if ((size_t)s->ops[j].group >= vp[k].cap) {
                vp[k].c0 = j;
                break;
            }
    }
    /* What the plan holds at most once the release mark stops at each cap. */
    uint64_t held = 0, most = 0;
    size_t r = 0;
    for (size_t c = 0, k = 0; c < s->nops; c++) {
        size_t g = (size_t)s->ops[c].group;
        cnt[g]++;
        held += g >= r;
        while (k < (size_t)n && vp[k].c < c)
            k++;
        size_t to = rel[c];
        if (k < (size_t)n && vp[k].c > c && to > vp[k].cap)
            to = vp[k].cap;
        for (; r < to; r++)
            held -= cnt[r];
        most = held > most ? held : most;
    }
    free(rel);
    free(last);
    free(cnt);
    if (n == 0) {
        free(vp);
        vp = NULL;
    }
    *out = vp;
    *held_most = most;
    return n;
}

const dh_plan_section_t *dh_plan_section_for(const dh_plan_t *p, int rank)
{
    if (p == NULL)
        return NULL;
    for (int i = 0; i < p->nsections; i++)
        for (int k = 0; k < p->sections[i].nranks; k++)
            if (p->sections[i].ranks[k] == rank)
                return &p->sections[i];
    if (p->nsections == 1 && p->sections[0].nranks == 0)
        return &p->sections[0];
    return NULL;
}

/* ---- writing ---- */

void dh__plan_phase_json(dh_strbuf_t *b, const dh_plan_phase_t *ph, size_t op0, int ph0, int mb0)
{
    dh_strbuf_printf(b, "{\"first\": %zu, \"n\": %zu, \"kind\": \"%c\", \"mb\": %d, "
                        "\"thread\": %u, \"paired_with\": %d}",
                     ph->first - op0, ph->n, ph->kind, ph->mb >= 0 ? ph->mb - mb0 : -1,
                     ph->thread, ph->paired_with >= 0 ? ph->paired_with - ph0 : -1);
}

void dh__plan_op_json(dh_strbuf_t *b, const dh_plan_op_t *op, int ph0, int g0)
{
    char hex[17], shape[17];
    dh__hex16(op->sig, hex);
    dh__hex16(op->shape, shape);
    dh_strbuf_printf(b, "{\"sig\": \"%s\", \"shape\": ", hex);
    if (op->shape_dynamic)
        dh_strbuf_puts(b, "null");
    else
        dh_strbuf_printf(b, "\"%s\"", shape);
    dh_strbuf_puts(b, ", \"k\": ");
    dh_strbuf_json_str(b, op->kind);
    dh_strbuf_printf(b, ", \"c\": \"%s\", \"name\": ", dh_opclass_name(op->cls));
    dh_strbuf_json_str(b, op->name);
    dh_strbuf_printf(b, ", \"phase\": %d, \"strand\": %d, \"group\": %d, \"us\": ",
                     op->phase >= 0 ? (int)op->phase - ph0 : -1, (int)op->strand,
                     (int)op->group - g0);
    dh__json_num(b, op->us);
    if (op->moved)
        dh_strbuf_puts(b, ", \"moved\": 1");
    dh_strbuf_puts(b, "}");
}

void dh__plan_group_json(dh_strbuf_t *b, const dh_plan_group_t *g, size_t op0, double t0)
{
    dh_strbuf_printf(b, "{\"a\": [%zu, %zu], \"b\": [%zu, %zu], \"order\": ",
                     g->a_n ? g->a_first - op0 : 0, g->a_n, g->b_n ? g->b_first - op0 : 0, g->b_n);
    dh_strbuf_json_str(b, g->order ? g->order : "");
    dh_strbuf_puts(b, ", \"pred_us\": ");
    dh__json_num(b, g->pred_us);
    dh_strbuf_puts(b, ", \"start_us\": ");
    dh__json_num(b, g->start_us - t0);
    dh_strbuf_puts(b, "}");
}

void dh__plan_section_head_json(dh_strbuf_t *b, const dh_plan_section_t *s)
{
    char hex[17];
    dh_strbuf_puts(b, "    {\n      \"ranks\": [");
    for (int i = 0; i < s->nranks; i++)
        dh_strbuf_printf(b, "%s%d", i ? ", " : "", s->ranks[i]);
    dh__hex16(s->fingerprint, hex);
    dh_strbuf_printf(b, "], \"fingerprint\": \"%s\", \"nops\": %zu,\n      \"baseline_us\": ",
                     hex, s->nops);
    dh__json_num(b, s->baseline_us);
    dh_strbuf_puts(b, ", \"si_us\": ");
    dh__json_num(b, s->si_us);
    dh_strbuf_puts(b, ", \"extra_mem_bytes\": ");
    dh__json_num(b, s->extra_mem_bytes);
    dh_strbuf_puts(b, ",\n      \"hidden_comm_fraction\": ");
    dh__json_num(b, s->hidden_comm_fraction);
    dh_strbuf_puts(b, ", \"held_ops\": ");
    dh__json_num(b, s->held_ops);
    dh_strbuf_puts(b, ", \"held_free_bytes\": ");
    dh__json_num(b, s->held_free_bytes);
    if (s->moves || s->moves_refused)
        dh_strbuf_printf(b, ", \"moves\": %d, \"moves_refused\": %d", s->moves,
                         s->moves_refused);
    dh_strbuf_puts(b, ",\n");
}

/* Version 1: every phase, op and group of the template. */
void dh__plan_flat_json(dh_strbuf_t *b, const dh_plan_section_t *s)
{
    dh_strbuf_puts(b, "      \"phases\": [");
    for (int i = 0; i < s->nphases; i++) {
        dh_strbuf_puts(b, i ? ",\n        " : "\n        ");
        dh__plan_phase_json(b, &s->phases[i], 0, 0, 0);
    }
    dh_strbuf_puts(b, s->nphases ? "\n      ],\n      \"ops\": [" : "],\n      \"ops\": [");
    for (size_t i = 0; i < s->nops; i++) {
        dh_strbuf_puts(b, i ? ",\n        " : "\n        ");
        dh__plan_op_json(b, &s->ops[i], 0, 0);
    }
    dh_strbuf_puts(b, "\n      ],\n      \"groups\": [");
    for (int i = 0; i < s->ngroups; i++) {
        dh_strbuf_puts(b, i ? ",\n        " : "\n        ");
        dh__plan_group_json(b, &s->groups[i], 0, 0);
    }
    dh_strbuf_puts(b, "\n      ]\n    }");
}

dh_status_t dh__plan_render(const dh_plan_t *p, dh_strbuf_t *b)
{
    /* A plan read from a version-1 file is written back as one, so that it survives a
     * round trip unchanged (version 2 keeps start times to the nanosecond only). */
    return dh__plan_render_version(p, b, p->version == DH_PLAN_VERSION_FLAT
                                             ? DH_PLAN_VERSION_FLAT : DH_PLAN_VERSION);
}

dh_status_t dh__plan_render_version(const dh_plan_t *p, dh_strbuf_t *b, int version)
{
    dh_strbuf_printf(b, "{\n  \"format\": \"dhelix-plan\", \"version\": %d,\n  \"created_by\": ",
                     version);
    dh_strbuf_json_str(b, p->created_by);
    dh_strbuf_puts(b, ", \"planning_s\": ");
    dh__json_num(b, p->planning_s);
    dh_strbuf_printf(b, ",\n  \"world\": %d, \"layout\": ", p->world);
    dh_strbuf_json_str(b, p->layout);
    dh_strbuf_puts(b, ", \"policy\": ");
    dh_strbuf_json_str(b, p->policy);
    dh_strbuf_puts(b, ", \"max_extra_mem_bytes\": ");
    dh__json_num(b, p->max_extra_mem_bytes);
    dh_strbuf_puts(b, ",\n  \"sections\": [");
    dh_status_t st = DH_OK;
    for (int i = 0; i < p->nsections && st == DH_OK; i++) {
        dh_strbuf_puts(b, i ? ",\n" : "\n");
        dh__plan_section_head_json(b, &p->sections[i]);
        if (version == DH_PLAN_VERSION_FLAT)
            dh__plan_flat_json(b, &p->sections[i]);
        else
            st = dh__plan_blocks_json(b, &p->sections[i]);
    }
    if (st != DH_OK)
        return st;
    dh_strbuf_puts(b, "\n  ]\n}\n");
    return dh_strbuf_status(b);
}

dh_status_t dh_plan_save(const dh_plan_t *p, const char *path, char *err, size_t errlen)
{
    dh_strbuf_t b = DH_STRBUF_INIT;
    dh_status_t st = dh__plan_render(p, &b);
    if (st != DH_OK)
        dh__errf(err, errlen, path, "out of memory");
    else
        st = dh__write_file(path, dh_strbuf_str(&b), b.len, err, errlen);
    dh_strbuf_free(&b);
    return st;
}

dh_status_t dh_plan_render(const dh_plan_t *p, char **buf, size_t *len)
{
    dh_strbuf_t b = DH_STRBUF_INIT;
    dh_status_t st = dh__plan_render(p, &b);
    *buf = NULL;
    *len = 0;
    if (st == DH_OK && !(*buf = malloc(b.len + 1)))
        st = DH_ERR_NOMEM;
    if (st == DH_OK) {
        memcpy(*buf, dh_strbuf_str(&b), b.len + 1);
        *len = b.len;
    }
    dh_strbuf_free(&b);
    return st;
}
