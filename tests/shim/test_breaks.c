/*
 * shim.breaks: every deep copy and every drain rule of the shim is load-bearing (issue 3).
 *
 * The shim has a test-only switch, DHELIX_TEST_BREAK=<name>, that disables one deep copy
 * or one drain rule. For each name in the list below, the coverage program runs with that
 * break in the deferring configurations of shim.coverage (stress, then two-strand when the
 * shim has it), seeds 1..DH_COV_BREAK_SEEDS each, until one run fails: an exit status
 * other than 0 (86: the vgpu saw a hazard; 1: an API call failed; 4: a self-check of the
 * program failed) or an output that differs from the run without the shim. A break that
 * makes no run fail means the rule it disables is not covered by shim.coverage (or the
 * break does nothing), and this test fails. Only configurations that pass without any
 * break count: a run that fails anyway proves nothing about the break (shim.coverage
 * reports those).
 *
 * The list and the shim cannot drift apart:
 *   - a name the shim does not know must fail here: the shim has to warn about an unknown
 *     DHELIX_TEST_BREAK value (checked with a made-up name), and no run with a listed name
 *     may produce such a warning;
 *   - the shim's own list (scheduler/ops/breaks.h, DH_BREAK_LIST) must equal this one plus
 *     the breaks another test makes fail (OTHER_BREAKS: rules of plan mode, or of several
 *     ranks, which the coverage program does not run).
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "breaks.h"
#include "common/config.h"
#include "cov_runs.h"
#include "runner.h"

/* X(name, what it disables) */
#define COV_BREAKS(X)                                                                       \
    X(kernel_args, "copy of kernel arguments (cudaFuncGetParamInfo sizes, extra)")          \
    X(gemm_scalars, "copy of host-mode alpha/beta of cuBLAS and cuBLASLt GEMMs")            \
    X(lt_desc, "clone of cuBLASLt descriptors, layouts, preference and algo")               \
    X(pageable_h2d, "copy of the pageable source of a host-to-device copy")                 \
    X(launch_attrs, "copy of the launch attribute arrays of the Ex launches")               \
    X(drain_stream_sync, "drain before cudaStreamSynchronize")                              \
    X(drain_event_query, "not-ready answer for an event whose record is queued")            \
    X(drain_memcpy, "drain before a blocking copy (cudaMemcpy, D2H to pageable)")           \
    X(drain_generated, "drain before a call without a deferred kind (generated wrappers)")   \
    X(free_order, "issuing a free only after every queued use of the memory")              \
    X(graph_barrier, "a graph launch ordered as a barrier (it may touch anything)")

/* X(name, the test whose runs it must make fail) */
#define OTHER_BREAKS(X)                                                                     \
    X(pool_barrier, "si.share_mem (plan mode: cross-strand reuse)")                         \
    X(nccl_order, "nccl.order (two ranks: the vgpu reports the deadlock)")

static const char *const other_breaks[] = {
#define OTHER_BRK(n, t) #n,
    OTHER_BREAKS(OTHER_BRK)
#undef OTHER_BRK
};

typedef struct brk {
    const char *name, *what;
} brk_t;

static const brk_t breaks[] = {
#define COV_BRK(n, w) {#n, w},
    COV_BREAKS(COV_BRK)
#undef COV_BRK
};
#define NBREAKS (sizeof(breaks) / sizeof(breaks[0]))

/* The deferring configurations of shim.coverage a break is tried in, in order: stress,
 * then two-strand execution (DH_COV_STRANDS_ENV, '|'-separated) when the shim has it; each
 * with the program on the legacy default stream, then on a pool stream. */
#define MAX_ENV 8
#define MAX_MODES 4
typedef struct mode_cfg {
    const char *label, *mode;   /* mode: what the shim's report must say ran */
    int pool;
    const char *env[MAX_ENV + 1];
} mode_cfg_t;

static mode_cfg_t modes[MAX_MODES];
static int nmodes;
static char strands_spec[512];

static void find_modes(void)
{
    modes[0] = (mode_cfg_t){.label = "stress", .mode = "stress", .env = {"DHELIX_MODE=stress"}};
    modes[1] = modes[0];
    modes[1].label = "stress (pool stream)";
    modes[1].pool = 1;
    nmodes = 2;
    const char *spec = getenv("DH_COV_STRANDS_ENV");
    snprintf(strands_spec, sizeof(strands_spec), "%s", spec ? spec : "");
    mode_cfg_t *m = &modes[2];
    int n = 0;
    for (char *save = NULL, *t = strtok_r(strands_spec, "|", &save); t && n < MAX_ENV;
         t = strtok_r(NULL, "|", &save)) {
        m->env[n++] = t;
        if (strncmp(t, "DHELIX_MODE=", 12) == 0)
            m->mode = t + 12;
    }
    char why[400];
    if (n > 0 && cov_config_accepts(m->env, why, sizeof(why))) {
        m->label = "two-strand";
        modes[3] = *m;
        modes[3].label = "two-strand (pool stream)";
        modes[3].pool = 1;
        nmodes = 4;
    } else {
        print_message("note: no two-strand mode in the shim yet (%s): breaks are tried in "
                      "stress mode only\n", n ? why : "DH_COV_STRANDS_ENV is empty");
    }
}

static struct {
    char dir[512];
    cov_result_t ref;
    int have_ref;
} S;

static const char *break_var(void) { return "DHELIX_TEST_BREAK"; }

/* Lines of the shim's log that reject a DHELIX_TEST_BREAK setting (an unknown variable, or
 * a value that is not a known break), and mention value when it is not NULL. A warning
 * that a known break is in effect does not count. */
static int break_rejections(const char *err, const char *value)
{
    static const char *const refusal[] = {"unknown", "invalid", "not a known", "using the default",
                                          "ignored", "not recognised", "not recognized"};
    int n = 0;
    for (const char *line = err; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        int refuses = 0;
        for (size_t i = 0; i < sizeof(refusal) / sizeof(refusal[0]); i++)
            refuses |= memmem(line, len, refusal[i], strlen(refusal[i])) != NULL;
        if (refuses && memmem(line, len, "dhelix[", 7) &&
            memmem(line, len, break_var(), strlen(break_var())) &&
            (value == NULL || memmem(line, len, value, strlen(value))))
            n++;
        line = end ? end + 1 : NULL;
    }
    return n;
}

static void run_break(const char *name, const mode_cfg_t *m, int seed, cov_result_t *r)
{
    char brk[128], seedv[32];
    snprintf(brk, sizeof(brk), "%s=%s", break_var(), name);
    snprintf(seedv, sizeof(seedv), "DHELIX_SEED=%d", seed);
    const char *env[MAX_ENV + 4];
    int n = 0;
    for (int i = 0; m->env[i] && n < MAX_ENV; i++)
        env[n++] = m->env[i];
    env[n++] = seedv;
    env[n++] = brk;
    env[n++] = "DHELIX_LOG=warn";
    env[n] = NULL;
    cov_cfg_t cfg = {.label = name, .shim = 1, .pool = m->pool, .env = env};
    cov_run(S.dir, &cfg, r);
}

static void test_reference(void **state)
{
    (void)state;
    cov_cfg_t cfg = {.label = "no shim"};
    cov_run(S.dir, &cfg, &S.ref);
    if (S.ref.status != 0 || S.ref.out == NULL) {
        char *d = cov_describe(&S.ref);
        fail_msg("coverage without the shim: expected exit 0 and an output file, got %s", d);
    }
    S.have_ref = 1;
}

/* The switch is in the shim's configuration table, and the shim's own list of breaks
 * (scheduler/ops/breaks.h) holds exactly the names above, in both directions. */
static void test_lists_agree(void **state)
{
    (void)state;
    const dh_cfg_desc_t *d = NULL;
    for (int i = 0; i < DH_CFG_COUNT && d == NULL; i++)
        if (strcmp(dh_config_desc((dh_cfg_id_t)i)->name, break_var()) == 0)
            d = dh_config_desc((dh_cfg_id_t)i);
    if (d == NULL)
        fail_msg("%s is not in the configuration table (preload/common/config.h)", break_var());
    static const char *const shim_names[] = {
#define COV_SHIM_NAME(id, name, what) name,
        DH_BREAK_LIST(COV_SHIM_NAME)
#undef COV_SHIM_NAME
    };
    size_t nshim = sizeof(shim_names) / sizeof(shim_names[0]);
    int bad = 0;
    for (size_t i = 0; i < NBREAKS; i++) {
        int found = 0;
        for (size_t j = 0; j < nshim && !found; j++)
            found = strcmp(breaks[i].name, shim_names[j]) == 0;
        if (!found) {
            print_error("break '%s' is in this test's list but not in the shim's "
                        "(scheduler/ops/breaks.h DH_BREAK_LIST)\n", breaks[i].name);
            bad++;
        }
    }
    for (size_t j = 0; j < nshim; j++) {
        int found = 0;
        for (size_t i = 0; i < NBREAKS && !found; i++)
            found = strcmp(breaks[i].name, shim_names[j]) == 0;
        for (size_t i = 0; i < sizeof other_breaks / sizeof *other_breaks && !found; i++)
            found = strcmp(other_breaks[i], shim_names[j]) == 0;
        if (!found) {
            print_error("break '%s' is in the shim but not in tests/shim/test_breaks.c: add it "
                        "to COV_BREAKS with the mode whose runs it must make fail\n",
                        shim_names[j]);
            bad++;
        }
    }
    if (bad)
        fail_msg("%d name(s) differ between scheduler/ops/breaks.h and this test", bad);
}

/* The shim refuses a name it does not know, loudly: otherwise a misspelt break would make
 * nothing fail and the check below would pass vacuously for the wrong reason. */
static void test_unknown_break_is_reported(void **state)
{
    (void)state;
    cov_result_t r;
    run_break("no_such_break", &modes[0], 1, &r);
    int warned = break_rejections(r.err, "no_such_break");
    if (warned == 0)
        fail_msg("%s=no_such_break: expected a shim warning naming the value, got none; "
                 "stderr tail:\n%.1500s", break_var(),
                 r.err && strlen(r.err) > 1500 ? r.err + strlen(r.err) - 1500 : r.err);
    cov_result_free(&r);
}

/* Whether (mode m, seed) passes without any break: only such runs can show that a break
 * matters. Computed on first use. 0 unknown, 1 passes, -1 fails without a break. */
#define MAX_SEEDS 32
static int baseline[MAX_MODES][MAX_SEEDS + 1];

static int baseline_passes(int m, int seed)
{
    if (baseline[m][seed] == 0) {
        char seedv[32];
        snprintf(seedv, sizeof(seedv), "DHELIX_SEED=%d", seed);
        const char *env[MAX_ENV + 2];
        int n = 0;
        for (int i = 0; modes[m].env[i] && n < MAX_ENV; i++)
            env[n++] = modes[m].env[i];
        env[n++] = seedv;
        env[n] = NULL;
        cov_cfg_t cfg = {.label = modes[m].label, .shim = 1, .pool = modes[m].pool, .env = env};
        cov_result_t r;
        cov_run(S.dir, &cfg, &r);
        char *why = r.status != 0 ? cov_describe(&r)
                                  : cov_diff_body(S.ref.out, S.ref.out_len, r.out, r.out_len);
        baseline[m][seed] = why == NULL ? 1 : -1;
        if (why != NULL) {
            char *nl = strchr(why, '\n');
            print_message("note: the %s run with seed %d fails WITHOUT any break (%.*s); it "
                          "cannot show a break (shim.coverage reports it)\n", modes[m].label,
                          seed, nl ? (int)(nl - why) : (int)strlen(why), why);
        }
        free(why);
        cov_result_free(&r);
    }
    return baseline[m][seed] > 0;
}

static void test_break(void **state)
{
    const brk_t *b = *state;
    int seeds = cov_env_int("DH_COV_BREAK_SEEDS", 4), usable = 0;
    if (seeds > MAX_SEEDS)
        seeds = MAX_SEEDS;
    if (!S.have_ref)
        fail_msg("no reference run without the shim");
    for (int m = 0; m < nmodes; m++) {
        for (int s = 1; s <= seeds; s++) {
            if (!baseline_passes(m, s))
                continue;
            usable++;
            cov_result_t r;
            run_break(b->name, &modes[m], s, &r);
            if (break_rejections(r.err, NULL) > 0)
                fail_msg("break '%s': the shim rejected the %s setting, so it does not know "
                         "this name (this test and the shim have drifted apart); stderr "
                         "tail:\n%.1500s", b->name, break_var(),
                         strlen(r.err) > 1500 ? r.err + strlen(r.err) - 1500 : r.err);
            const char *mode = r.stats ? dh_stats_meta(r.stats, "mode") : NULL;
            if (r.status == 0 && (mode == NULL || strcmp(mode, modes[m].mode) != 0))
                fail_msg("break '%s': the shim ran in mode '%s', expected '%s'", b->name,
                         mode ? mode : "(no report)", modes[m].mode);
            char *why = r.status != 0 ? cov_describe(&r)
                                      : cov_diff_body(S.ref.out, S.ref.out_len, r.out,
                                                      r.out_len);
            cov_result_free(&r);
            if (why != NULL) {
                char *nl = strchr(why, '\n');
                print_message("break %-18s fails the %s run with seed %d: %.*s\n", b->name,
                              modes[m].label, s, nl ? (int)(nl - why) : (int)strlen(why), why);
                free(why);
                return;
            }
        }
    }
    fail_msg("break '%s' (%s) made no run fail among the %d configurations (stress%s, both "
             "streams, seeds 1..%d) that pass without it: the rule it disables is not shown "
             "to be load-bearing", b->name, b->what, usable, nmodes > 2 ? ", two-strand" : "",
             seeds);
}

int main(void)
{
    dh_tmpdir_make(S.dir, sizeof(S.dir));
    find_modes();
    struct CMUnitTest tests[3 + NBREAKS];
    memset(tests, 0, sizeof(tests));
    tests[0] = (struct CMUnitTest)cmocka_unit_test(test_reference);
    tests[1] = (struct CMUnitTest)cmocka_unit_test(test_lists_agree);
    tests[2] = (struct CMUnitTest)cmocka_unit_test(test_unknown_break_is_reported);
    for (size_t i = 0; i < NBREAKS; i++) {
        tests[3 + i] = (struct CMUnitTest)cmocka_unit_test_prestate(test_break, (void *)&breaks[i]);
        tests[3 + i].name = breaks[i].name;
    }
    int rc = cmocka_run_group_tests_name("shim.breaks", tests, NULL, NULL);
    cov_result_free(&S.ref);
    dh_tmpdir_remove(S.dir);
    return rc;
}
