/*
 * runner.h: what the shim's driver tests share: running a program with the shim preloaded
 * and a chosen environment, capturing its output, and reading its DHELIX_STATS report.
 *
 * The drivers themselves run without the shim. Their environment (set by tests/shim.cmake)
 * names what to run: DH_TEST_CHILD, DH_TEST_ORPHAN (programs), DH_TEST_SHIM (the library),
 * DH_TEST_PRELOAD (the LD_PRELOAD list for runs with the shim: sanitizer runtime if any,
 * the shim, then the vgpu libraries for the passthrough test) and DH_TEST_LIBDIR (an
 * LD_LIBRARY_PATH, optional).
 */
#ifndef DH_TEST_RUNNER_H
#define DH_TEST_RUNNER_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

typedef struct dh_run {
    int status;          /* exit status, or 128 + signal */
    long pid;            /* of the child */
    char *out, *err;     /* its stdout and stderr (malloc'd, NUL-terminated) */
} dh_run_t;

/* A fresh directory for one test's files; dh_tmpdir_remove deletes it and its files. */
void dh_tmpdir_make(char *dir, size_t n);
void dh_tmpdir_remove(const char *dir);

/* The value of a DH_TEST_* variable; fails the test when it is unset and required. */
const char *dh_test_env(const char *name, int required);

/* Runs argv[0] (a path) with the driver's environment minus every DHELIX_*, LD_PRELOAD,
 * LD_LIBRARY_PATH and PYTORCH_*ALLOC_CONF variable, plus: LD_PRELOAD=preload when
 * preload is non-NULL, LD_LIBRARY_PATH=DH_TEST_LIBDIR when set, and env_add ("K=V",
 * NULL-terminated). Output goes through files in dir. Fails the test if it cannot run. */
void dh_run(dh_run_t *r, const char *dir, char *const argv[], const char *preload,
            const char *const *env_add);
void dh_run_free(dh_run_t *r);

/* Whole file as a NUL-terminated string, or NULL when it cannot be read. */
char *dh_read_file(const char *path);

/* Number of lines of text that contain needle. */
int dh_count_lines(const char *text, const char *needle);

/* Parses a DHELIX_STATS=json report (exactly one JSON object, checked) and returns it;
 * fails the test on anything else. */
json_t *dh_stats_parse(const char *text);
/* Field ("calls" or "nested") of api's row; -1 when the row or field is absent. */
long long dh_stats_get(json_t *stats, const char *api, const char *field);
/* A metadata string ("mode", ...), or NULL. */
const char *dh_stats_meta(json_t *stats, const char *key);
/* Number of rows. */
size_t dh_stats_rows(json_t *stats);

#endif
