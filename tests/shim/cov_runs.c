/* cov_runs.c: see cov_runs.h. */
#define _GNU_SOURCE
#include "cov_runs.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "common/config.h"
#include "runner.h"

int cov_env_int(const char *name, int def)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : def;
}

static unsigned char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    *len = 0;
    if (f == NULL)
        return NULL;
    size_t cap = 1 << 16;
    unsigned char *buf = malloc(cap);
    for (size_t n; buf && (n = fread(buf + *len, 1, cap - *len, f)) > 0;) {
        *len += n;
        if (*len == cap) {
            unsigned char *nb = realloc(buf, cap *= 2);
            if (nb == NULL)
                free(buf);
            buf = nb;
        }
    }
    fclose(f);
    return buf;
}

void cov_run(const char *dir, const cov_cfg_t *cfg, cov_result_t *r)
{
    char out[600], stats[600], stats_env[640], iters[16], mbs[16];
    snprintf(out, sizeof(out), "%s/out.bin", dir);
    snprintf(stats, sizeof(stats), "%s/stats.json", dir);
    snprintf(stats_env, sizeof(stats_env), "DHELIX_STATS_FILE=%s", stats);
    snprintf(iters, sizeof(iters), "%d", cov_env_int("DH_COV_ITERS", 2));
    snprintf(mbs, sizeof(mbs), "%d", cov_env_int("DH_COV_MBS", 4));
    unlink(out);
    unlink(stats);
    const char *env[32];
    int n = 0;
    env[n++] = "VGPU_HAZARD=abort";
    if (cfg->shim) {
        env[n++] = "DHELIX_STATS=json";
        env[n++] = stats_env;
    }
    for (const char *const *e = cfg->env; e && *e && n < 31; e++)
        env[n++] = *e;
    env[n] = NULL;
    char *argv[16] = {(char *)dh_test_env("DH_TEST_COVERAGE", 1), "--out", out, "--iters", iters,
                      "--mbs", mbs, "--timeout", "60"};
    int argc = 9;
    if (cfg->pool) {
        argv[argc++] = "--stream";
        argv[argc++] = "pool";
    }
    if (cfg->nccl)
        argv[argc++] = "--nccl";
    argv[argc] = NULL;
    const char *preload = dh_test_env(cfg->shim ? "DH_TEST_PRELOAD" : "DH_TEST_VGPU_PRELOAD", 1);
    dh_run_t run;
    dh_run(&run, dir, argv, preload, env);
    memset(r, 0, sizeof(*r));
    r->status = run.status;
    r->err = run.err;
    free(run.out);
    r->out = read_all(out, &r->out_len);
    if (cfg->shim) {
        char *text = dh_read_file(stats);
        if (text != NULL && *text != '\0') {
            json_error_t e;
            r->stats = json_loads(text, 0, &e);
        }
        free(text);
    }
}

void cov_result_free(cov_result_t *r)
{
    free(r->out);
    free(r->err);
    if (r->stats)
        json_decref(r->stats);
    memset(r, 0, sizeof(*r));
}

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...)
{
    va_list ap;
    char *s = NULL;
    va_start(ap, f);
    if (vasprintf(&s, f, ap) < 0)
        s = NULL;
    va_end(ap);
    return s;
}

/* One "name bytes\n<bytes>\n" section of an output file. */
typedef struct section {
    char name[64];
    const unsigned char *data;
    size_t len;
} section_t;

/* Finds the section holding byte offset off of buf, if any. */
static int section_at(const unsigned char *buf, size_t len, size_t off, section_t *s)
{
    const unsigned char *p = memchr(buf, '\n', len);
    while (p != NULL && (size_t)(p + 1 - buf) < len) {
        const unsigned char *line = p + 1;
        const unsigned char *nl = memchr(line, '\n', len - (size_t)(line - buf));
        size_t bytes = 0;
        if (nl == NULL || sscanf((const char *)line, "%63s %zu", s->name, &bytes) != 2)
            return 0;
        s->data = nl + 1;
        s->len = bytes;
        if ((size_t)(s->data - buf) + bytes > len)
            return 0;
        if (off >= (size_t)(line - buf) && off < (size_t)(s->data - buf) + bytes + 1)
            return 1;
        p = s->data + bytes;
    }
    return 0;
}

char *cov_diff(const unsigned char *a, size_t alen, const unsigned char *b, size_t blen)
{
    if (a == NULL || b == NULL)
        return fmt("%s output file is missing", a == NULL ? "the first" : "the second");
    size_t n = alen < blen ? alen : blen, off = 0;
    while (off < n && a[off] == b[off])
        off++;
    if (off == n && alen == blen)
        return NULL;
    section_t sa, sb;
    if (!section_at(a, alen, off, &sa) || !section_at(b, blen, off, &sb) ||
        strcmp(sa.name, sb.name) != 0 || sa.len != sb.len || off < (size_t)(sa.data - a))
        return fmt("outputs differ at byte %zu (sizes %zu and %zu), outside a data section",
                   off, alen, blen);
    size_t rel = off - (size_t)(sa.data - a), word = rel / 4, ndiff = 0;
    for (size_t i = 0; i + 4 <= sa.len; i += 4)
        ndiff += memcmp(sa.data + i, sb.data + i, 4) != 0;
    float fa = 0, fb = 0;
    uint32_t ua = 0, ub = 0;
    if (word * 4 + 4 <= sa.len) {
        memcpy(&fa, sa.data + word * 4, 4);
        memcpy(&fb, sb.data + word * 4, 4);
        memcpy(&ua, sa.data + word * 4, 4);
        memcpy(&ub, sb.data + word * 4, 4);
    }
    return fmt("section '%s' differs: first at element %zu (%.9g [0x%08x] vs %.9g [0x%08x]), "
               "%zu of %zu 4-byte elements differ",
               sa.name, word, (double)fa, ua, (double)fb, ub, ndiff, sa.len / 4);
}

char *cov_diff_body(const unsigned char *a, size_t alen, const unsigned char *b, size_t blen)
{
    if (a == NULL || b == NULL)
        return cov_diff(a, alen, b, blen);
    const unsigned char *na = memchr(a, '\n', alen), *nb = memchr(b, '\n', blen);
    if (na == NULL || nb == NULL)
        return fmt("an output file has no header line");
    /* Keep one header so that section_at's first memchr finds the same start. */
    size_t la = alen - (size_t)(na - a), lb = blen - (size_t)(nb - b);
    return cov_diff(na, la, nb, lb);
}

static const char *tail(const char *s, size_t n)
{
    size_t len = s ? strlen(s) : 0;
    return s == NULL ? "" : len > n ? s + len - n : s;
}

/* The first line of err that the program, the vgpu or a sanitizer wrote (not the shim's
 * log), else its last line; copied into out. */
static void gist(const char *err, char *out, size_t n)
{
    const char *pick = NULL, *last = NULL;
    size_t pick_len = 0, last_len = 0;
    for (const char *line = err; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        if (len) {
            last = line;
            last_len = len;
        }
        static const char *const marks[] = {"coverage:", "vgpu:", "ERROR: AddressSanitizer",
                                            "WARNING: ThreadSanitizer", "runtime error:",
                                            "SUMMARY:"};
        for (size_t i = 0; !pick && i < sizeof(marks) / sizeof(marks[0]); i++) {
            if (memmem(line, len, marks[i], strlen(marks[i])) != NULL) {
                pick = line;
                pick_len = len;
            }
        }
        line = end ? end + 1 : NULL;
    }
    if (!pick) {
        pick = last;
        pick_len = last_len;
    }
    snprintf(out, n, "%.*s", pick ? (int)(pick_len < 400 ? pick_len : 400) : 0,
             pick ? pick : "");
}

char *cov_describe(const cov_result_t *r)
{
    char sig[64];
    snprintf(sig, sizeof(sig), "killed by signal %d (%s)", r->status - 128,
             r->status > 128 ? strsignal(r->status - 128) : "");
    const char *what = r->status == COV_HAZARD_EXIT ? "hazard reported by the vgpu (exit 86)"
                       : r->status == 142           ? "timed out (SIGALRM, exit 142)"
                       : r->status > 128            ? sig
                                                    : "exit";
    char g[420];
    gist(r->err, g, sizeof(g));
    return fmt("%s [status %d]: %s\nstderr tail:\n%s", what, r->status, g, tail(r->err, 1500));
}

int cov_config_accepts(const char *const *env, char *why, size_t n)
{
    dh_config_t *cfg = malloc(sizeof(*cfg));
    assert_non_null(cfg);
    assert_int_equal(dh_config_parse(cfg, (char *const *)env), DH_OK);
    int ok = cfg->nwarnings == 0;
    if (!ok)
        snprintf(why, n, "%s", cfg->warnings[0]);
    free(cfg);
    return ok;
}

long long cov_json_find_int(json_t *j, const char *key)
{
    if (json_is_object(j)) {
        const char *k;
        json_t *v;
        json_object_foreach(j, k, v) {
            if (strcmp(k, key) == 0 && json_is_integer(v))
                return (long long)json_integer_value(v);
            long long r = cov_json_find_int(v, key);
            if (r >= 0)
                return r;
        }
    } else if (json_is_array(j)) {
        size_t i;
        json_t *v;
        json_array_foreach(j, i, v) {
            long long r = cov_json_find_int(v, key);
            if (r >= 0)
                return r;
        }
    }
    return -1;
}
