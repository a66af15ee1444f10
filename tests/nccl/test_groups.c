/*
 * nccl.groups: Megatron-style process groups are recognised with the right role, and
 * DHELIX_GROUPS decides by role, name and size (nccl_prog groups on 8 ranks of the vgpu,
 * two-strand execution). Each rank's DHELIX_STATS=json report lists its communicators in
 * creation order: the world, then per dimension of size > 1 (tp, cp, dp, pp) the group made
 * by ncclCommSplit (no name: its role must come from its members and DHELIX_LAYOUT; with
 * three dimensions of size 2 the position alone is ambiguous, so only the member exchange
 * tells them apart) and the one made by ncclCommInitRankConfig with Megatron's commName.
 * Without DHELIX_LAYOUT the named groups still get their role from the name.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "drive.h"

#define NP 8

typedef struct want {
    const char *name, *origin, *role, *policy;
} want_t;

/* Checks one rank's report against want[0..n). */
static void check_report(json_t *stats, const want_t *want, int n, const char *what)
{
    const char *rank = dh_stats_meta(stats, "rank");
    json_t *rows = json_object_get(json_object_get(stats, "nccl"), "rows");
    if (!json_is_array(rows) || (int)json_array_size(rows) != n)
        fail_msg("%s, rank %s: %zu communicators in the report, expected %d", what,
                 rank ? rank : "?", json_is_array(rows) ? json_array_size(rows) : 0, n);
    for (int i = 0; i < n; i++) {
        json_t *row = json_array_get(rows, (size_t)i);
        const char *got[4];
        static const char *const keys[4] = {"name", "origin", "role", "policy"};
        const char *exp[4] = {want[i].name, want[i].origin, want[i].role, want[i].policy};
        for (int k = 0; k < 4; k++) {
            got[k] = json_string_value(json_object_get(row, keys[k]));
            if (got[k] == NULL || strcmp(got[k], exp[k]) != 0)
                fail_msg("%s, rank %s, communicator %d: %s is %s, expected %s", what,
                         rank ? rank : "?", i + 1, keys[k], got[k] ? got[k] : "(none)", exp[k]);
        }
        json_t *ops = json_object_get(row, "ops");
        if (i > 0 && (!json_is_integer(ops) || json_integer_value(ops) < 1)) /* not the world */
            fail_msg("%s, rank %s, communicator %d: no operation counted", what,
                     rank ? rank : "?", i + 1);
    }
}

/* Runs the scenario with layout args and env, and checks every rank's report. */
static void run_groups(const char *const *args, const char *const *env_extra, const want_t *want,
                       int n, const char *what, int expect_log_lines)
{
    char dir[512], stats_env[640];
    dh_tmpdir_make(dir, sizeof dir);
    snprintf(stats_env, sizeof stats_env, "DHELIX_STATS_FILE=%s/stats.%%p.json", dir);
    const char *env[16];
    int k = 0;
    env[k++] = "DHELIX_MODE=test-strands";
    env[k++] = "DHELIX_STATS=json";
    env[k++] = "VGPU_HAZARD=abort";
    env[k++] = "DHELIX_LOG=info";
    env[k++] = "DHELIX_LOG_SUBSYS=nccl";
    env[k++] = stats_env;
    for (const char *const *e = env_extra; *e && k < 15; e++)
        env[k++] = *e;
    env[k] = NULL;
    dh_run_t r;
    nd_run(&r, dir, NP, 1, args, env);
    nd_expect_clean(&r, what);
    /* Every decision is logged once: one line per communicator per rank. */
    int lines = dh_count_lines(r.err, "(DHELIX_GROUPS ");
    if (lines != expect_log_lines)
        fail_msg("%s: %d policy decisions logged, expected %d\n%.3000s", what, lines,
                 expect_log_lines, r.err);
    int reports = 0;
    DIR *d = opendir(dir);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (strncmp(e->d_name, "stats.", 6) != 0)
            continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        char *text = dh_read_file(path);
        assert_non_null(text);
        json_t *stats = dh_stats_parse(text);
        check_report(stats, want, n, what);
        json_decref(stats);
        free(text);
        reports++;
    }
    closedir(d);
    if (reports != NP)
        fail_msg("%s: %d reports, expected %d", what, reports, NP);
    dh_run_free(&r);
    dh_tmpdir_remove(dir);
}

/* tp=2, cp=2, pp=2: interleave tp and cp only. */
static void test_tp_cp_pp_by_role(void **state)
{
    (void)state;
    static const char *const args[] = {"groups", "2", "2", "1", "2", NULL};
    static const char *const env[] = {"DHELIX_LAYOUT=tp=2,cp=2,pp=2", "DHELIX_GROUPS=tp,cp", NULL};
    static const want_t want[] = {
        {"-", "init", "tp+cp+pp", "pinned"},
        {"-", "split", "tp", "interleaved"},
        {"TENSOR_MODEL_PARALLEL_GROUP", "init", "tp", "interleaved"},
        {"-", "split", "cp", "interleaved"},
        {"CONTEXT_PARALLEL_GROUP", "init", "cp", "interleaved"},
        {"-", "split", "pp", "pinned"},
        {"PIPELINE_MODEL_PARALLEL_GROUP", "init", "pp", "pinned"},
    };
    run_groups(args, env, want, 7, "tp=2,cp=2,pp=2", 7 * NP);
}

/* tp=2, dp=2, pp=2: everything but data parallelism is interleaved. */
static void test_tp_dp_pp_all_but_dp(void **state)
{
    (void)state;
    static const char *const args[] = {"groups", "2", "1", "2", "2", NULL};
    static const char *const env[] = {"DHELIX_LAYOUT=tp=2,dp=2,pp=2", "DHELIX_GROUPS=all,!dp",
                                      NULL};
    static const want_t want[] = {
        {"-", "init", "tp+dp+pp", "interleaved"},
        {"-", "split", "tp", "interleaved"},
        {"TENSOR_MODEL_PARALLEL_GROUP", "init", "tp", "interleaved"},
        {"-", "split", "dp", "pinned"},
        {"DATA_PARALLEL_GROUP", "init", "dp", "pinned"},
        {"-", "split", "pp", "interleaved"},
        {"PIPELINE_MODEL_PARALLEL_GROUP", "init", "pp", "interleaved"},
    };
    run_groups(args, env, want, 7, "tp=2,dp=2,pp=2", 7 * NP);
}

/* No layout: names give the roles of the named groups; selection by name and by size. */
static void test_names_without_layout(void **state)
{
    (void)state;
    static const char *const args[] = {"groups", "2", "1", "2", "2", NULL};
    static const char *const env[] = {"DHELIX_GROUPS=TENSOR_MODEL_PARALLEL*,size=8", NULL};
    static const want_t want[] = {
        {"-", "init", "-", "interleaved"},
        {"-", "split", "-", "pinned"},
        {"TENSOR_MODEL_PARALLEL_GROUP", "init", "tp", "interleaved"},
        {"-", "split", "-", "pinned"},
        {"DATA_PARALLEL_GROUP", "init", "dp", "pinned"},
        {"-", "split", "-", "pinned"},
        {"PIPELINE_MODEL_PARALLEL_GROUP", "init", "pp", "pinned"},
    };
    run_groups(args, env, want, 7, "no layout", 7 * NP);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tp_cp_pp_by_role),
        cmocka_unit_test(test_tp_dp_pp_all_but_dp),
        cmocka_unit_test(test_names_without_layout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
