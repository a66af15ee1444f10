/* drive.c: see drive.h. */
#define _GNU_SOURCE
#include "drive.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

void nd_run(dh_run_t *r, const char *dir, int np, int shim, const char *const *args,
            const char *const *env)
{
    char nps[16], preload[8192];
    snprintf(nps, sizeof nps, "%d", np);
    const char *pre = dh_test_env(shim ? "DH_TEST_PRELOAD" : "DH_TEST_VGPU_PRELOAD", 1);
    snprintf(preload, sizeof preload, "LD_PRELOAD=%s", pre);
    char *argv[48];
    int n = 0;
    argv[n++] = (char *)dh_test_env("DH_TEST_MPIEXEC", 1);
    argv[n++] = "-n";
    argv[n++] = nps;
    argv[n++] = "--oversubscribe";
    argv[n++] = "--allow-run-as-root";
    argv[n++] = "/usr/bin/env";
    argv[n++] = preload;
    argv[n++] = (char *)dh_test_env("DH_TEST_PROG", 1);
    for (const char *const *a = args; a && *a && n < 46; a++)
        argv[n++] = (char *)*a;
    argv[n] = NULL;
    dh_run(r, dir, argv, NULL, env);
}

void nd_expect_clean(const dh_run_t *r, const char *what)
{
    if (r->status != 0 || strstr(r->out, "FAIL rank") != NULL ||
        strstr(r->err, "vgpu: hazard") != NULL)
        fail_msg("%s: exit %d\n--- stdout ---\n%.4000s\n--- stderr ---\n%.4000s", what,
                 r->status, r->out, r->err);
}

const char *nd_line(const char *text, const char *prefix, int rank)
{
    char tag[32];
    snprintf(tag, sizeof tag, "rank=%d", rank);
    size_t plen = strlen(prefix), tlen = strlen(tag);
    for (const char *l = text; l && *l;) {
        const char *end = strchr(l, '\n');
        size_t len = end ? (size_t)(end - l) : strlen(l);
        if (len >= plen && strncmp(l, prefix, plen) == 0) {
            const char *hit = memmem(l, len, tag, tlen);
            if (hit && (hit + tlen == l + len || hit[tlen] == ' '))
                return l;
        }
        l = end ? end + 1 : NULL;
    }
    return NULL;
}

void nd_digests(const dh_run_t *r, int np, char d[][17], const char *what)
{
    for (int k = 0; k < np; k++) {
        const char *l = nd_line(r->out, "digest ", k);
        if (l == NULL || sscanf(l, "digest rank=%*d %16s", d[k]) != 1)
            fail_msg("%s: no digest from rank %d\n--- stdout ---\n%.4000s", what, k, r->out);
    }
}

void nd_same_digests(char a[][17], char b[][17], int np, const char *what_a,
                     const char *what_b)
{
    for (int k = 0; k < np; k++)
        if (strcmp(a[k], b[k]) != 0)
            fail_msg("rank %d: %s gives digest %s, %s gives %s", k, what_a, a[k], what_b, b[k]);
}
