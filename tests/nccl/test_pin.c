/*
 * nccl.pin: switching one group off. nccl_prog pin on 2 ranks of the vgpu in two-strand
 * execution, with the vgpu's Chrome trace (VGPU_TRACE): with DHELIX_GROUPS=all the
 * TENSOR_MODEL_PARALLEL_GROUP all-reduces run beside the other strand's kernels (some
 * overlap in virtual time with work on the other strand's stream); pinned, by
 * DHELIX_GROUPS=!TENSOR_MODEL_PARALLEL* or by the program calling dh_group_set_enabled(comm,
 * 0), none does. Every run gives the digests of the run without the shim, with the hazard
 * detector set to abort.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "drive.h"

#define NP 2
#define TP_NAME "TENSOR_MODEL_PARALLEL" /* the trace keeps 24 characters of the name */

typedef struct corun {
    int comm_ops;       /* the group's operations in the trace */
    int overlapping;    /* ... of which some overlap work on another lane */
    double overlap_us;  /* total overlap */
} corun_t;

/* Reads one rank's trace: for every operation of the TP communicator, the time it shares
 * with operations on other lanes (the other strand's physical stream). */
static corun_t corun_of(const char *path)
{
    json_error_t e;
    json_t *root = json_load_file(path, 0, &e);
    if (root == NULL)
        fail_msg("trace %s: %s (line %d)", path, e.text, e.line);
    json_t *ev = json_object_get(root, "traceEvents");
    corun_t c = {0, 0, 0};
    size_t i, j;
    json_t *a, *b;
    json_array_foreach(ev, i, a) {
        const char *ph = json_string_value(json_object_get(a, "ph"));
        const char *comm = json_string_value(json_object_get(json_object_get(a, "args"), "comm"));
        if (!ph || strcmp(ph, "X") != 0 || !comm || strncmp(comm, TP_NAME, strlen(TP_NAME)))
            continue;
        double t0 = json_number_value(json_object_get(a, "ts"));
        double t1 = t0 + json_number_value(json_object_get(a, "dur"));
        json_int_t lane = json_integer_value(json_object_get(a, "tid"));
        double shared = 0;
        json_array_foreach(ev, j, b) {
            const char *phb = json_string_value(json_object_get(b, "ph"));
            if (!phb || strcmp(phb, "X") != 0 || json_integer_value(json_object_get(b, "tid")) == lane)
                continue;
            double u0 = json_number_value(json_object_get(b, "ts"));
            double u1 = u0 + json_number_value(json_object_get(b, "dur"));
            double lo = t0 > u0 ? t0 : u0, hi = t1 < u1 ? t1 : u1;
            if (hi > lo)
                shared += hi - lo;
        }
        c.comm_ops++;
        /* The trace prints times to the nanosecond: two ops that only touch (one starts as
         * the other ends) can appear to share a rounding error's worth. */
        c.overlapping += shared > 0.002;
        c.overlap_us += shared;
    }
    json_decref(root);
    return c;
}

/* Runs the scenario with the shim; returns the co-running of every rank summed, and checks
 * the digests against base. keep, when not NULL, receives the run (the caller frees it). */
static corun_t run_pin(const char *const *env_extra, const char *arg, char base[][17],
                       const char *what, dh_run_t *keep)
{
    char dir[512], trace_env[640], d[NP][17];
    dh_tmpdir_make(dir, sizeof dir);
    snprintf(trace_env, sizeof trace_env, "VGPU_TRACE=%s/trace.%%r.json", dir);
    const char *env[12];
    int k = 0;
    env[k++] = "VGPU_HAZARD=abort";
    env[k++] = trace_env;
    for (const char *const *e = env_extra; e && *e && k < 11; e++)
        env[k++] = *e;
    env[k] = NULL;
    const char *args[] = {"pin", arg, NULL};
    dh_run_t r;
    nd_run(&r, dir, NP, 1, args, env);
    nd_expect_clean(&r, what);
    nd_digests(&r, NP, d, what);
    corun_t sum = {0, 0, 0};
    for (int rank = 0; rank < NP; rank++) {
        char path[700];
        snprintf(path, sizeof path, "%s/trace.%d.json", dir, rank);
        corun_t c = corun_of(path);
        sum.comm_ops += c.comm_ops;
        sum.overlapping += c.overlapping;
        sum.overlap_us += c.overlap_us;
    }
    nd_same_digests(base, d, NP, "the run without the shim", what);
    if (keep != NULL)
        *keep = r;
    else
        dh_run_free(&r);
    dh_tmpdir_remove(dir);
    printf("%-34s %2d of %2d all-reduces co-run, %.1f us in all\n", what, sum.overlapping,
           sum.comm_ops, sum.overlap_us);
    return sum;
}

static void test_switching_a_group_off(void **state)
{
    (void)state;
    char base[NP][17], dir[512];
    /* The reference digests, without the shim. */
    dh_tmpdir_make(dir, sizeof dir);
    static const char *const args[] = {"pin", "", NULL};
    static const char *const plain[] = {"VGPU_HAZARD=abort", NULL};
    dh_run_t r;
    nd_run(&r, dir, NP, 0, args, plain);
    nd_expect_clean(&r, "without the shim");
    nd_digests(&r, NP, base, "without the shim");
    dh_run_free(&r);
    dh_tmpdir_remove(dir);

    static const char *const on[] = {"DHELIX_MODE=test-strands", "DHELIX_GROUPS=all", NULL};
    corun_t c = run_pin(on, "", base, "interleaved (DHELIX_GROUPS=all)", NULL);
    if (c.comm_ops != NP * 8 || c.overlapping == 0)
        fail_msg("interleaved: %d of %d all-reduces co-run with the other strand; expected "
                 "all %d traced and some co-running", c.overlapping, c.comm_ops, NP * 8);

    static const char *const off[] = {"DHELIX_MODE=test-strands",
                                      "DHELIX_GROUPS=!TENSOR_MODEL_PARALLEL*", NULL};
    c = run_pin(off, "", base, "pinned (DHELIX_GROUPS)", NULL);
    if (c.comm_ops != NP * 8 || c.overlapping != 0)
        fail_msg("pinned by DHELIX_GROUPS: %d of %d all-reduces co-run (%.1f us), expected 0",
                 c.overlapping, c.comm_ops, c.overlap_us);

    c = run_pin(on, "api", base, "pinned (dh_group_set_enabled)", &r);
    if (c.comm_ops != NP * 8 || c.overlapping != 0)
        fail_msg("pinned by dh_group_set_enabled: %d of %d all-reduces co-run (%.1f us), "
                 "expected 0", c.overlapping, c.comm_ops, c.overlap_us);
    if (dh_count_lines(r.out, "set_enabled previous=1") != NP)
        fail_msg("dh_group_set_enabled did not answer 1 (interleaved before) on every rank:\n%s",
                 r.out);
    dh_run_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_switching_a_group_off),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
