/* roles.c: layouts and roles (see roles.h). */
#include "roles.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const dh__role_names[] = {
#define DH__ROLE_NAME(id, name, bit) name,
    DH_ROLE_LIST(DH__ROLE_NAME)
#undef DH__ROLE_NAME
};
#define DH__NROLES ((int)(sizeof dh__role_names / sizeof dh__role_names[0]))

/* The four dense dimensions in rank order; ep is derived. */
enum { D_TP, D_CP, D_DP, D_PP, D_N };

static void dh__sizes(const dh_layout_t *l, int size[D_N])
{
    size[D_TP] = l->tp;
    size[D_CP] = l->cp;
    size[D_DP] = l->dp;
    size[D_PP] = l->pp;
}

static void dh__coords(const dh_layout_t *l, int r, int c[D_N])
{
    int size[D_N];
    dh__sizes(l, size);
    for (int d = 0; d < D_N; d++) {
        c[d] = r % size[d];
        r /= size[d];
    }
}

static int dh__rank_of(const dh_layout_t *l, const int c[D_N])
{
    int size[D_N], r = 0;
    dh__sizes(l, size);
    for (int d = D_N - 1; d >= 0; d--)
        r = r * size[d] + c[d];
    return r;
}

/* ---- parsing ---- */

static int dh__parse_size(const char *v, size_t n, int *out)
{
    char buf[16];
    while (n && isspace((unsigned char)*v)) {
        v++;
        n--;
    }
    while (n && isspace((unsigned char)v[n - 1]))
        n--;
    if (n == 0 || n >= sizeof buf)
        return -1;
    memcpy(buf, v, n);
    buf[n] = '\0';
    char *end;
    errno = 0;
    long x = strtol(buf, &end, 10);
    if (errno || *end || x < 1 || x > 1 << 20)
        return -1;
    *out = (int)x;
    return 0;
}

static dh_status_t dh__layout_fail(dh_layout_t *out, char *err, size_t errlen, const char *what)
{
    snprintf(err, errlen, "%s", what);
    out->set = 0;
    return DH_ERR_PARSE;
}

dh_status_t dh_layout_parse(const char *text, int world, dh_layout_t *out, char *err,
                            size_t errlen)
{
    *out = (dh_layout_t){0, 1, 1, 0, 1, 1, 0};
    if (errlen)
        err[0] = '\0';
    if (text == NULL || *text == '\0')
        return DH_OK;
    for (const char *p = text; *p;) {
        size_t len = strcspn(p, ",");
        const char *eq = memchr(p, '=', len);
        int *field = NULL;
        if (eq != NULL) {
            size_t klen = (size_t)(eq - p);
            while (klen && isspace((unsigned char)p[klen - 1]))
                klen--;
            const char *k = p;
            while (klen && isspace((unsigned char)*k)) {
                k++;
                klen--;
            }
            static const char *const keys[] = {"tp", "cp", "dp", "pp", "ep"};
            int *fields[] = {&out->tp, &out->cp, &out->dp, &out->pp, &out->ep};
            for (int i = 0; i < 5; i++)
                if (klen == 2 && strncasecmp(k, keys[i], 2) == 0)
                    field = fields[i];
        }
        if (field == NULL || dh__parse_size(eq + 1, len - (size_t)(eq + 1 - p), field) != 0) {
            char what[96];
            snprintf(what, sizeof what, "'%.*s' is not tp=N, cp=N, dp=N, pp=N or ep=N",
                     (int)(len > 40 ? 40 : len), p);
            return dh__layout_fail(out, err, errlen, what);
        }
        p += len + (p[len] == ',');
    }
    int model = out->tp * out->cp * out->pp;
    if (out->dp == 0) {
        if (world <= 0 || world % model != 0)
            return dh__layout_fail(out, err, errlen,
                                   "dp is not given and the world size does not give it");
        out->dp = world / model;
    }
    out->world = model * out->dp;
    if (world > 0 && out->world != world) {
        char what[96];
        snprintf(what, sizeof what, "tp*cp*dp*pp is %d but the job has %d ranks", out->world,
                 world);
        return dh__layout_fail(out, err, errlen, what);
    }
    if ((out->cp * out->dp) % out->ep != 0)
        return dh__layout_fail(out, err, errlen, "ep does not divide cp*dp");
    out->set = 1;
    return DH_OK;
}

/* ---- from members ---- */

static unsigned dh__dim_role(int d)
{
    static const unsigned bits[D_N] = {DH_ROLE_TP, DH_ROLE_CP, DH_ROLE_DP, DH_ROLE_PP};
    return bits[d];
}

/* Whether the members are exactly the expert-parallel group of their first member. */
static int dh__is_ep(const dh_layout_t *l, const int *m, int n)
{
    if (l->ep < 2 || n != l->ep)
        return 0;
    int c0[D_N];
    dh__coords(l, m[0], c0);
    int cd0 = c0[D_CP] + l->cp * c0[D_DP];
    unsigned long long seen = 0;
    for (int i = 0; i < n; i++) {
        int c[D_N];
        dh__coords(l, m[i], c);
        int cd = c[D_CP] + l->cp * c[D_DP];
        if (c[D_TP] != c0[D_TP] || c[D_PP] != c0[D_PP] || cd / l->ep != cd0 / l->ep)
            return 0;
        int e = cd % l->ep;
        if (e < 64) {
            if (seen & (1ull << e))
                return 0;
            seen |= 1ull << e;
        }
    }
    return 1;
}

unsigned dh_role_from_members(const dh_layout_t *l, const int *m, int n)
{
    if (!l->set || m == NULL || n < 2)
        return 0;
    for (int i = 0; i < n; i++)
        if (m[i] < 0 || m[i] >= l->world)
            return 0;
    int c0[D_N], size[D_N];
    dh__coords(l, m[0], c0);
    dh__sizes(l, size);
    unsigned vary = 0;
    for (int i = 1; i < n; i++) {
        int c[D_N];
        dh__coords(l, m[i], c);
        for (int d = 0; d < D_N; d++)
            if (c[d] != c0[d])
                vary |= 1u << d;
    }
    /* A full rectangle: as many distinct members as the product of the varying sizes. */
    long want = 1;
    for (int d = 0; d < D_N; d++)
        if (vary & (1u << d))
            want *= size[d];
    int distinct = 1;
    for (int i = 0; i < n && distinct; i++)
        for (int j = i + 1; j < n; j++)
            if (m[i] == m[j]) {
                distinct = 0;
                break;
            }
    if (distinct && want == n) {
        unsigned role = 0;
        for (int d = 0; d < D_N; d++)
            if (vary & (1u << d))
                role |= dh__dim_role(d);
        return role;
    }
    return distinct && dh__is_ep(l, m, n) ? DH_ROLE_EP : 0;
}

/* ---- from the position ---- */

/* The members of the rectangle varying the dimensions in vary that contains grank, in
 * global-rank order, and grank's index among them. */
static int dh__rect(const dh_layout_t *l, int grank, unsigned vary, int *members, int cap)
{
    int c0[D_N], size[D_N], idx[D_N] = {0}, n = 0, me = -1;
    dh__coords(l, grank, c0);
    dh__sizes(l, size);
    for (;;) {
        int c[D_N];
        for (int d = 0; d < D_N; d++)
            c[d] = (vary & (1u << d)) ? idx[d] : c0[d];
        int r = dh__rank_of(l, c);
        if (r == grank)
            me = n;
        if (members != NULL && n < cap)
            members[n] = r;
        n++;
        int d = 0;
        for (; d < D_N; d++) {
            if (!(vary & (1u << d)))
                continue;
            if (++idx[d] < size[d])
                break;
            idx[d] = 0;
        }
        if (d == D_N)
            break;
    }
    return me; /* odometer order, tp fastest: global-rank order */
}

static int dh__ep_members(const dh_layout_t *l, int grank, int *members, int cap)
{
    int c[D_N];
    dh__coords(l, grank, c);
    int cd = c[D_CP] + l->cp * c[D_DP], base = cd - cd % l->ep, me = cd % l->ep;
    for (int e = 0; e < l->ep && e < cap; e++) {
        int x = base + e, cc[D_N] = {c[D_TP], x % l->cp, x / l->cp, c[D_PP]};
        if (members != NULL)
            members[e] = dh__rank_of(l, cc);
    }
    return me;
}

unsigned dh_role_from_position(const dh_layout_t *l, int grank, int nranks, int rank,
                               int *members)
{
    if (!l->set || grank < 0 || grank >= l->world || nranks < 2 || rank < 0 || rank >= nranks)
        return 0;
    int size[D_N];
    dh__sizes(l, size);
    unsigned found = 0, vary_found = 0;
    int nfound = 0;
    for (unsigned vary = 1; vary < (1u << D_N); vary++) {
        long prod = 1;
        int degenerate = 0;
        for (int d = 0; d < D_N; d++)
            if (vary & (1u << d)) {
                prod *= size[d];
                degenerate |= size[d] == 1;
            }
        if (degenerate || prod != nranks || dh__rect(l, grank, vary, NULL, 0) != rank)
            continue;
        nfound++;
        vary_found = vary;
        found = 0;
        for (int d = 0; d < D_N; d++)
            if (vary & (1u << d))
                found |= dh__dim_role(d);
    }
    int ep_fits = l->ep > 1 && l->ep == nranks && dh__ep_members(l, grank, NULL, 0) == rank;
    if (ep_fits) {
        int *tmp = malloc(sizeof(int) * (size_t)nranks);
        /* An ep group that is also a rectangle is that rectangle, not a second candidate. */
        if (tmp != NULL) {
            dh__ep_members(l, grank, tmp, nranks);
            if (dh_role_from_members(l, tmp, nranks) == DH_ROLE_EP) {
                nfound++;
                found = DH_ROLE_EP;
                vary_found = 0;
            }
            free(tmp);
        }
    }
    if (nfound != 1)
        return 0;
    if (members != NULL) {
        if (vary_found)
            dh__rect(l, grank, vary_found, members, nranks);
        else
            dh__ep_members(l, grank, members, nranks);
    }
    return found;
}

/* ---- names ---- */

static int dh__has(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (const char *p = hay; *p; p++)
        if (strncasecmp(p, needle, n) == 0)
            return 1;
    return 0;
}

unsigned dh_role_parse(const char *text)
{
    unsigned role = 0;
    if (text == NULL || *text == '\0')
        return 0;
    for (const char *p = text; *p;) {
        size_t len = strcspn(p, "+");
        int hit = -1;
        for (int i = 0; i < DH__NROLES; i++)
            if (len == strlen(dh__role_names[i]) && strncasecmp(p, dh__role_names[i], len) == 0)
                hit = i;
        if (hit < 0)
            return 0;
        role |= 1u << hit;
        p += len;
        if (*p == '+') {
            p++;
            if (*p == '\0')
                return 0;
        }
    }
    return role;
}

unsigned dh_role_from_name(const char *name)
{
    static const struct {
        const char *pattern;
        unsigned role;
    } table[] = {
        /* Most specific first: several descriptions contain others. */
        {"EXPERT_MODEL_PARALLEL", DH_ROLE_EP},
        {"TENSOR_AND_DATA_PARALLEL", DH_ROLE_TP | DH_ROLE_DP},
        {"TENSOR_AND_CONTEXT_PARALLEL", DH_ROLE_TP | DH_ROLE_CP},
        {"DATA_PARALLEL_GROUP_WITH_CP", DH_ROLE_DP | DH_ROLE_CP},
        {"DATA_PARALLEL_WITH_CP", DH_ROLE_DP | DH_ROLE_CP},
        {"TENSOR_MODEL_PARALLEL", DH_ROLE_TP},
        {"PIPELINE_MODEL_PARALLEL", DH_ROLE_PP},
        {"CONTEXT_PARALLEL", DH_ROLE_CP},
        {"DATA_PARALLEL", DH_ROLE_DP},
    };
    if (name == NULL || *name == '\0')
        return 0;
    if (dh__has(name, "EXPERT") && !dh__has(name, "EXPERT_MODEL_PARALLEL"))
        return 0; /* expert tensor/data groups: not one of the five roles */
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (dh__has(name, table[i].pattern))
            return table[i].role;
    return dh_role_parse(name);
}

void dh_role_name(unsigned role, char *buf, size_t len)
{
    size_t used = 0;
    if (len == 0)
        return;
    buf[0] = '\0';
    for (int i = 0; i < DH__NROLES; i++) {
        if (!(role & (1u << i)))
            continue;
        int w = snprintf(buf + used, len - used, "%s%s", used ? "+" : "", dh__role_names[i]);
        if (w < 0 || (size_t)w >= len - used)
            break;
        used += (size_t)w;
    }
    if (used == 0)
        snprintf(buf, len, "-");
}
