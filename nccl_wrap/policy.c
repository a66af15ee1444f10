/* policy.c: the DHELIX_GROUPS grammar (see policy.h). */
#include "policy.h"

#include <ctype.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "roles.h"

static dh_status_t dh__fail(dh_policy_t *p, char *err, size_t errlen, const char *fmt,
                            const char *arg)
{
    snprintf(err, errlen, fmt, arg);
    dh_policy_parse("all", p, NULL, 0);
    return DH_ERR_PARSE;
}

/* "size<=8" and friends. Returns 0 on success. */
static int dh__parse_size(const char *s, dh_policy_term_t *t)
{
    static const struct {
        const char *op;
        dh_policy_cmp_t cmp;
    } ops[] = {{"<=", DH_CMP_LE}, {">=", DH_CMP_GE}, {"<", DH_CMP_LT}, {">", DH_CMP_GT},
               {"=", DH_CMP_EQ},  {":", DH_CMP_EQ}};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        size_t n = strlen(ops[i].op);
        if (strncmp(s, ops[i].op, n) != 0)
            continue;
        char *end;
        long v = strtol(s + n, &end, 10);
        if (end == s + n || *end || v < 0 || v > 1 << 24)
            return -1;
        t->cmp = ops[i].cmp;
        t->size = (int)v;
        return 0;
    }
    return -1;
}

static int dh__parse_term(const char *s, dh_policy_term_t *t)
{
    if (*s == '!') {
        t->pin = 1;
        s++;
    }
    if (*s == '\0')
        return -1;
    if (strcasecmp(s, "all") == 0 || strcasecmp(s, "none") == 0) {
        t->sel = DH_SEL_ALL;
        t->pin ^= strcasecmp(s, "none") == 0;
        return 0;
    }
    if (strncasecmp(s, "size", 4) == 0 && !isalpha((unsigned char)s[4])) {
        t->sel = DH_SEL_SIZE;
        return dh__parse_size(s + 4, t);
    }
    if (strncasecmp(s, "role:", 5) == 0) {
        t->sel = DH_SEL_ROLE;
        t->role = dh_role_parse(s + 5);
        return t->role ? 0 : -1;
    }
    if (strncasecmp(s, "name:", 5) == 0) {
        t->sel = DH_SEL_NAME;
        memmove(t->text, s + 5, strlen(s + 5) + 1);
        return t->text[0] ? 0 : -1;
    }
    unsigned role = dh_role_parse(s);
    if (role) {
        t->sel = DH_SEL_ROLE;
        t->role = role;
        return 0;
    }
    t->sel = DH_SEL_NAME;
    memmove(t->text, s, strlen(s) + 1);
    return 0;
}

dh_status_t dh_policy_parse(const char *spec, dh_policy_t *p, char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    if (err && errlen)
        err[0] = '\0';
    if (spec == NULL || *spec == '\0')
        spec = "all";
    for (const char *s = spec; *s;) {
        size_t len = strcspn(s, ",");
        const char *b = s, *e = s + len;
        while (b < e && isspace((unsigned char)*b))
            b++;
        while (e > b && isspace((unsigned char)e[-1]))
            e--;
        char one[DH_POLICY_PATTERN_MAX];
        if (e == b || (size_t)(e - b) >= sizeof one)
            return dh__fail(p, err, errlen, "empty or too long term in '%.60s'", spec);
        if (p->nterms == DH_POLICY_MAX_TERMS)
            return dh__fail(p, err, errlen, "more than 32 terms in '%.60s'", spec);
        memcpy(one, b, (size_t)(e - b));
        one[e - b] = '\0';
        dh_policy_term_t *t = &p->terms[p->nterms];
        snprintf(t->text, sizeof t->text, "%s", one);
        if (dh__parse_term(one, t) != 0)
            return dh__fail(p, err, errlen, "cannot read the term '%s'", one);
        if (t->sel != DH_SEL_NAME)
            snprintf(t->text, sizeof t->text, "%s", one);
        p->nterms++;
        s += len + (s[len] == ',');
    }
    p->start_enabled = p->nterms > 0 && p->terms[0].pin;
    return DH_OK;
}

static int dh__matches(const dh_policy_term_t *t, const char *name, unsigned role, int nranks)
{
    switch (t->sel) {
    case DH_SEL_ALL:
        return 1;
    case DH_SEL_ROLE:
        return role != 0 && role == t->role;
    case DH_SEL_SIZE:
        switch (t->cmp) {
        case DH_CMP_EQ: return nranks == t->size;
        case DH_CMP_LT: return nranks < t->size;
        case DH_CMP_LE: return nranks <= t->size;
        case DH_CMP_GT: return nranks > t->size;
        case DH_CMP_GE: return nranks >= t->size;
        }
        return 0;
    case DH_SEL_NAME:
        return name != NULL && *name && fnmatch(t->text, name, 0) == 0;
    }
    return 0;
}

int dh_policy_decide(const dh_policy_t *p, const char *name, unsigned role, int nranks,
                     int *term)
{
    int on = p->start_enabled, which = -1;
    for (int i = 0; i < p->nterms; i++)
        if (dh__matches(&p->terms[i], name, role, nranks)) {
            on = !p->terms[i].pin;
            which = i;
        }
    if (term != NULL)
        *term = which;
    return on;
}
