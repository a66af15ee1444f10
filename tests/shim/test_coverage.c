/*
 * shim.coverage (and the shorter shim.coverage_tsan): DESIGN.md invariant 1 shown on the
 * coverage program (coverage.c), which issues every wrapped call in the patterns of
 * REFERENCE.md. It runs
 *   (a) on the vgpu without the shim: the reference; run twice, the two must agree, or
 *       comparing against it would prove nothing;
 *   (b) with the shim in passthrough;
 *   (c) in stress mode with seeds 1..DH_COV_SEEDS (20 for shim.coverage) on the legacy
 *       default stream, and a quarter as many with the work on a pool stream;
 *   (d) in two-strand execution with seeds 1..DH_COV_STRAND_SEEDS, both streams;
 *   and the NCCL variant of the side stream (ncclAllReduce over one rank) in (a) and (b),
 *   and in stress as well once the shim intercepts NCCL,
 * all with VGPU_HAZARD=abort. Every output file must be byte-identical to (a)'s, and every
 * run must exit 0 (86 is a hazard the vgpu saw). A deferring mode must also be in effect
 * (the shim's report names the mode that ran), so that a mode that silently falls back to
 * passthrough cannot pass here. The passthrough report also shows that the program makes
 * every call the shim wraps at least once.
 *
 * (d) needs the shim's two-strand mode, selected by DH_COV_STRANDS_ENV (settings separated
 * by '|', from tests/shim_coverage.cmake). While the configuration table does not accept
 * them, (d) is skipped and the whole test exits 77 (skipped), never 0.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "cov_runs.h"
#include "runner.h"

/* The references, one per variant of the program: 0 the legacy default stream, 1 a pool
 * stream (--stream pool), 2 the legacy stream with --nccl. */
enum { V_LEGACY, V_POOL, V_NCCL, V_COUNT };

static struct {
    char dir[512];
    cov_result_t ref[V_COUNT];
    int have_ref[V_COUNT];
    json_t *passthrough_stats;
    int skipped;
} S;

static int variant(const cov_cfg_t *cfg)
{
    return cfg->nccl ? V_NCCL : cfg->pool ? V_POOL : V_LEGACY;
}

static const cov_result_t *reference(int v)
{
    if (!S.have_ref[v])
        fail_msg("no reference run without the shim for this variant (see the failure of "
                 "the test that makes it)");
    return &S.ref[v];
}

/* Runs the variant of cfg without the shim and keeps it as its reference; every variant
 * computes the same numbers, so its output must equal the first one's past the header. */
static void make_reference(const cov_cfg_t *cfg)
{
    int v = variant(cfg);
    cov_run(S.dir, cfg, &S.ref[v]);
    if (S.ref[v].status != 0 || S.ref[v].out == NULL) {
        char *d = cov_describe(&S.ref[v]);
        fail_msg("coverage (%s) without the shim: expected exit 0 and an output file, got %s",
                 cfg->label, d);
    }
    S.have_ref[v] = 1;
    if (v != V_LEGACY) {
        const cov_result_t *base = reference(V_LEGACY);
        char *d = cov_diff_body(base->out, base->out_len, S.ref[v].out, S.ref[v].out_len);
        if (d != NULL)
            fail_msg("coverage (%s) without the shim computes other numbers than on the "
                     "legacy stream: %s", cfg->label, d);
    }
}

/* Failures of one test: each is printed when found, so that one test reports every bad
 * run, and the test fails at the end if there was any. */
typedef struct fails {
    int count;
} fails_t;

static void fails_add(fails_t *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fails_add(fails_t *f, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("FAIL: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    f->count++;
}

static void fails_check(const fails_t *f, const char *what)
{
    if (f->count)
        fail_msg("%s: %d failure(s), listed above", what, f->count);
}

/* Runs cfg and compares with the reference. expect_mode: the mode the shim's report must
 * say ran (NULL: no shim). Adds one failure per problem found and returns the count. */
static int run_and_compare(const cov_cfg_t *cfg, const char *expect_mode, fails_t *f,
                           cov_result_t *keep)
{
    cov_result_t r;
    int before = f->count;
    const cov_result_t *ref = reference(variant(cfg));
    cov_run(S.dir, cfg, &r);
    if (r.status != 0) {
        char *d = cov_describe(&r);
        fails_add(f, "[%s] expected exit 0, got %s", cfg->label, d);
        free(d);
    } else {
        char *d = cov_diff(ref->out, ref->out_len, r.out, r.out_len);
        if (d != NULL)
            fails_add(f, "[%s] output differs from the run without the shim: %s", cfg->label, d);
        free(d);
    }
    if (expect_mode != NULL && r.status == 0) {
        const char *mode = r.stats ? dh_stats_meta(r.stats, "mode") : NULL;
        if (mode == NULL)
            fails_add(f, "[%s] no DHELIX_STATS report from the shim", cfg->label);
        else if (strcmp(mode, expect_mode) != 0)
            fails_add(f, "[%s] the shim ran in mode '%s', expected '%s' (requested '%s')",
                      cfg->label, mode, expect_mode,
                      dh_stats_meta(r.stats, "requested_mode")
                          ? dh_stats_meta(r.stats, "requested_mode") : "?");
    }
    if (keep != NULL)
        *keep = r;
    else
        cov_result_free(&r);
    return f->count - before;
}

/* ---- (a) ---- */

static void test_reference_is_deterministic(void **state)
{
    (void)state;
    cov_cfg_t cfg = {.label = "no shim"};
    make_reference(&cfg);
    const cov_result_t *ref = reference(V_LEGACY);
    if (ref->out_len < 64 * 1024 ||
        memmem(ref->out, ref->out_len, "checksum fnv1a64=", 17) == NULL)
        fail_msg("the reference output has %zu bytes and no checksum line: not what coverage "
                 "writes", ref->out_len);
    cov_result_t again;
    cov_run(S.dir, &cfg, &again);
    char *d = cov_diff(ref->out, ref->out_len, again.out, again.out_len);
    if (again.status != 0 || d != NULL)
        fail_msg("two runs without the shim disagree (status %d): %s", again.status,
                 d ? d : "(outputs equal)");
    cov_result_free(&again);
    cov_cfg_t pool = {.label = "pool stream, no shim", .pool = 1};
    make_reference(&pool);
}

/* ---- (b) ---- */

static void test_passthrough_is_exact(void **state)
{
    (void)state;
    static const char *const env[] = {"DHELIX_MODE=passthrough", NULL};
    cov_cfg_t cfg = {.label = "passthrough", .shim = 1, .env = env};
    fails_t f = {0};
    cov_result_t r;
    run_and_compare(&cfg, "passthrough", &f, &r);
    if (r.stats != NULL)
        S.passthrough_stats = json_incref(r.stats);
    cov_result_free(&r);
    fails_check(&f, "passthrough");
}

/* Entry points the coverage program cannot use on the vgpu, with the reason. Keep this
 * list short: everything else the shim wraps must be called. */
static const char *exempt(const char *api)
{
    static const char *const list[][2] = {
        {"ncclCommRevoke", "the vgpu does not support it (it answers ncclInvalidUsage)"},
        /* NCCL's device API (nccl_device/core.h, CUDA C++): device communicators for
         * kernels that communicate themselves, which the vgpu cannot run; shim.preload
         * calls both wrappers. */
        {"ncclDevCommCreate", "the vgpu has no device API (device kernels that communicate)"},
        {"ncclDevCommDestroy", "the vgpu has no device API (device kernels that communicate)"},
        /* The other doors into graph capture (the vgpu models capture through
         * cudaStreamBeginCapture and cuStreamBeginCapture_v2 only) and the per-thread
         * entry-point queries: shim.preload calls each against the real runtime. */
        {"cudaStreamBeginCapture_ptsz", "the vgpu models one door into capture per API"},
        {"cudaStreamBeginCaptureToGraph", "the vgpu models one door into capture per API"},
        {"cudaStreamBeginCaptureToGraph_ptsz", "the vgpu models one door into capture per API"},
        {"cudaStreamEndCapture_ptsz", "the vgpu models one door into capture per API"},
        {"cuStreamBeginCapture_v2_ptsz", "the vgpu models one door into capture per API"},
        {"cuStreamBeginCaptureToGraph", "the vgpu models one door into capture per API"},
        {"cuStreamBeginCaptureToGraph_ptsz", "the vgpu models one door into capture per API"},
        {"cuStreamEndCapture_ptsz", "the vgpu models one door into capture per API"},
        {"cudaGetDriverEntryPoint_ptsz", "the vgpu does not export the per-thread form"},
        {"cudaGetDriverEntryPointByVersion_ptsz", "the vgpu does not export the per-thread form"},
    };
    for (size_t i = 0; api && i < sizeof(list) / sizeof(list[0]); i++)
        if (strcmp(api, list[i][0]) == 0)
            return list[i][1];
    return NULL;
}

/* The program must exercise every entry point the shim wraps, or the runs above would not
 * cover them: a wrapper added to the shim needs a use in coverage.c. Counted over the
 * passthrough runs of both variants (NCCL calls are made with --nccl only). */
static void test_every_wrapped_call_is_used(void **state)
{
    (void)state;
    if (S.passthrough_stats == NULL)
        fail_msg("no DHELIX_STATS report from the passthrough run");
    static const char *const pt[] = {"DHELIX_MODE=passthrough", NULL};
    cov_cfg_t cfg = {.label = "nccl, passthrough", .shim = 1, .nccl = 1, .env = pt};
    cov_result_t r;
    cov_run(S.dir, &cfg, &r);
    if (r.status != 0 || r.stats == NULL) {
        char *d = cov_describe(&r);
        fail_msg("coverage --nccl in passthrough: expected exit 0 and a report, got %s", d);
    }
    json_t *rows = json_object_get(S.passthrough_stats, "rows");
    size_t i, n = json_array_size(rows);
    json_t *row;
    fails_t f = {0};
    if (n == 0)
        fails_add(&f, "the report lists no wrapped entry points");
    json_array_foreach(rows, i, row) {
        const char *api = json_string_value(json_object_get(row, "api"));
        long long a = dh_stats_get(S.passthrough_stats, api ? api : "", "calls");
        long long b = dh_stats_get(r.stats, api ? api : "", "calls");
        long long calls = (a > 0 ? a : 0) + (b > 0 ? b : 0);
        const char *why = exempt(api);
        if (why != NULL) {
            print_message("note: %s is not exercised here: %s\n", api, why);
            continue;
        }
        if (calls <= 0)
            fails_add(&f, "%s: the coverage program made no call of it (with and without "
                      "--nccl), expected at least 1", api ? api : "(row without a name)");
    }
    cov_result_free(&r);
    fails_check(&f, "wrapped entry points unused by tests/shim/coverage.c");
}

/* ---- (c) ---- */

static void test_stress_seeds_are_exact(void **state)
{
    (void)state;
    int seeds = cov_env_int("DH_COV_SEEDS", 20);
    fails_t f = {0};
    int nodefer = 0;
    for (int pool = 0; pool <= 1; pool++) {
        /* Every seed on the legacy stream (what PyTorch uses), a quarter of them on a
         * pool stream. */
        int n = pool ? (seeds + 3) / 4 : seeds;
        for (int s = 1; s <= n; s++) {
            char seed[32], label[64];
            snprintf(seed, sizeof(seed), "DHELIX_SEED=%d", s);
            snprintf(label, sizeof(label), "stress, %s stream, seed %d",
                     pool ? "pool" : "legacy", s);
            const char *env[] = {"DHELIX_MODE=stress", seed, NULL};
            cov_cfg_t cfg = {.label = label, .shim = 1, .pool = pool, .env = env};
            cov_result_t r;
            run_and_compare(&cfg, "stress", &f, &r);
            long long depth = r.stats ? cov_json_find_int(r.stats, "max_queue_depth") : -1;
            if (depth == 0)
                fails_add(&f, "[%s] the shim's report says max_queue_depth 0: nothing was "
                          "deferred", label);
            nodefer += r.status == 0 && depth < 0;
            cov_result_free(&r);
        }
    }
    if (nodefer)
        print_message("note: %d stress run(s) reported no max_queue_depth, so deferral could "
                      "only be checked through the mode the report names\n", nodefer);
    fails_check(&f, "stress mode");
}

/* ---- (d) ---- */

#define MAX_STRAND_ENV 8

static void test_two_strand_is_exact(void **state)
{
    (void)state;
    char *spec = strdup(dh_test_env("DH_COV_STRANDS_ENV", 0) ? dh_test_env("DH_COV_STRANDS_ENV", 0)
                                                              : "");
    const char *env[MAX_STRAND_ENV + 2];
    int n = 0;
    const char *mode = NULL;
    for (char *save = NULL, *t = strtok_r(spec, "|", &save); t && n < MAX_STRAND_ENV;
         t = strtok_r(NULL, "|", &save)) {
        env[n++] = t;
        if (strncmp(t, "DHELIX_MODE=", 12) == 0)
            mode = t + 12;
    }
    env[n] = NULL;
    char why[400];
    if (n == 0 || !cov_config_accepts(env, why, sizeof(why))) {
        print_message("TODO(two-strand): the shim has no two-strand mode yet: '%s' is %s; "
                      "part (d) is SKIPPED and the test exits 77, not 0\n",
                      dh_test_env("DH_COV_STRANDS_ENV", 0) ? dh_test_env("DH_COV_STRANDS_ENV", 0)
                                                            : "",
                      n == 0 ? "empty" : why);
        S.skipped = 1;
        free(spec);
        skip();
    }
    int seeds = cov_env_int("DH_COV_STRAND_SEEDS", 4);
    fails_t f = {0};
    for (int pool = 0; pool <= 1; pool++) {
        for (int s = 1; s <= seeds; s++) {
            char seed[32], label[64];
            snprintf(seed, sizeof(seed), "DHELIX_SEED=%d", s);
            snprintf(label, sizeof(label), "two-strand, %s stream, seed %d",
                     pool ? "pool" : "legacy", s);
            env[n] = seed;
            env[n + 1] = NULL;
            cov_cfg_t cfg = {.label = label, .shim = 1, .pool = pool, .env = env};
            cov_result_t r;
            run_and_compare(&cfg, mode, &f, &r);
            long long barriers =
                r.stats ? cov_json_find_int(r.stats, "cross_strand_barriers") : -1;
            if (r.status == 0 && barriers == 0)
                fails_add(&f, "[%s] the shim's report says cross_strand_barriers 0: the run "
                          "never used two strands", label);
            cov_result_free(&r);
        }
    }
    free(spec);
    fails_check(&f, "two-strand execution");
}

/* ---- NCCL variant ---- */

static void test_nccl_side_stream_is_exact(void **state)
{
    (void)state;
    cov_cfg_t ref = {.label = "nccl, no shim", .nccl = 1};
    make_reference(&ref);   /* one rank: the collectives copy, as the copy kernels do */

    static const char *const pt[] = {"DHELIX_MODE=passthrough", NULL};
    cov_cfg_t cfg = {.label = "nccl, passthrough", .shim = 1, .nccl = 1, .env = pt};
    fails_t f = {0};
    cov_result_t r;
    run_and_compare(&cfg, "passthrough", &f, &r);
    int wrapped = r.stats && dh_stats_get(r.stats, "ncclAllReduce", "calls") > 0;
    cov_result_free(&r);
    if (!wrapped) {
        print_message("note: the shim does not intercept NCCL yet (no ncclAllReduce in its "
                      "report): the NCCL variant runs only without deferral\n");
    } else {
        for (int s = 1; s <= 3; s++) {
            char seed[32], label[48];
            snprintf(seed, sizeof(seed), "DHELIX_SEED=%d", s);
            snprintf(label, sizeof(label), "nccl, stress seed %d", s);
            const char *env[] = {"DHELIX_MODE=stress", seed, NULL};
            cov_cfg_t c = {.label = label, .shim = 1, .nccl = 1, .env = env};
            run_and_compare(&c, "stress", &f, NULL);
        }
    }
    fails_check(&f, "NCCL variant");
}

int main(void)
{
    dh_tmpdir_make(S.dir, sizeof(S.dir));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_is_deterministic),
        cmocka_unit_test(test_passthrough_is_exact),
        cmocka_unit_test(test_every_wrapped_call_is_used),
        cmocka_unit_test(test_stress_seeds_are_exact),
        cmocka_unit_test(test_two_strand_is_exact),
        cmocka_unit_test(test_nccl_side_stream_is_exact),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    for (int v = 0; v < V_COUNT; v++)
        cov_result_free(&S.ref[v]);
    if (S.passthrough_stats)
        json_decref(S.passthrough_stats);
    dh_tmpdir_remove(S.dir);
    if (rc == 0 && S.skipped) {
        fprintf(stderr, "shim.coverage: every part that could run passed; part (d) is a TODO "
                "(skipped), so the test reports SKIP (77)\n");
        return 77;
    }
    return rc;
}
