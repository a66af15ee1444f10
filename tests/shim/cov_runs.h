/*
 * cov_runs.h: running the coverage program (coverage.c) under one configuration and
 * comparing what it wrote, for test_coverage.c and test_breaks.c.
 *
 * Environment of the drivers (set by tests/shim_coverage.cmake): DH_TEST_COVERAGE (the
 * program), DH_TEST_PRELOAD (LD_PRELOAD with the shim: sanitizer runtime if any, the shim,
 * the vgpu libraries), DH_TEST_VGPU_PRELOAD (the same without the shim), DH_TEST_LIBDIR,
 * DH_TEST_SHIM (the library), and the knobs DH_COV_ITERS / DH_COV_MBS (size of a run).
 * Every run has VGPU_HAZARD=abort, so a race the vgpu sees ends it with exit status 86.
 */
#ifndef DH_COV_RUNS_H
#define DH_COV_RUNS_H

#include <stddef.h>

#include <jansson.h>

#define COV_HAZARD_EXIT 86

typedef struct cov_cfg {
    const char *label;            /* for messages: "stress seed 3" */
    int shim;                     /* preload the shim (DHELIX_STATS=json is added) */
    int nccl;                     /* --nccl */
    int pool;                     /* --stream pool (else the legacy default stream) */
    const char *const *env;       /* more "K=V" settings, NULL-terminated; may be NULL */
} cov_cfg_t;

typedef struct cov_result {
    int status;                   /* exit status, or 128 + signal */
    unsigned char *out;           /* the output file (NULL if none was written) */
    size_t out_len;
    char *err;                    /* the program's stderr (shim log lines included) */
    json_t *stats;                /* the shim's DHELIX_STATS report, or NULL */
} cov_result_t;

/* Runs the program once in dir (a directory of the caller's). Fails the test only when it
 * cannot be started; everything else is in *r. */
void cov_run(const char *dir, const cov_cfg_t *cfg, cov_result_t *r);
void cov_result_free(cov_result_t *r);

/* NULL when a and b are byte-identical; otherwise a description of the first difference
 * (section, offset, both values) and how many bytes of that section differ (malloc'd). */
char *cov_diff(const unsigned char *a, size_t alen, const unsigned char *b, size_t blen);

/* Same, ignoring the first line (the header names the configuration, e.g. nccl=1). */
char *cov_diff_body(const unsigned char *a, size_t alen, const unsigned char *b, size_t blen);

/* "hazard reported by the vgpu (exit 86) [status 86]: <the program's or the vgpu's first
 * message>", then, after a newline, the tail of stderr (malloc'd). */
char *cov_describe(const cov_result_t *r);

/* 1 when the shim's configuration table accepts every "K=V" of env without a warning
 * (no unknown variable, no invalid value); otherwise 0 with the first warning in why. */
int cov_config_accepts(const char *const *env, char *why, size_t n);

/* The integer of the first member named key anywhere in j (depth first); -1 if none. */
long long cov_json_find_int(json_t *j, const char *key);

/* DH_COV_* knobs as integers. */
int cov_env_int(const char *name, int def);

#endif
