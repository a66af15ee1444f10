/*
 * nccl.order: the rule that keeps NCCL calls in program order across communicators
 * (nccl_wrap/chain.h) is load-bearing, and the vgpu says so when it is broken: a deadlock,
 * reported within seconds with its cycle (tests/vgpu/src/nccl/nccl_deadlock.c).
 *
 * nccl_prog order on 2 ranks with one hardware queue (CUDA_DEVICE_MAX_CONNECTIONS=1, as
 * Megatron runs): all-reduces on "tp" (stream 1) and "dp" (stream 2), the same program order
 * on both ranks. Without the shim, and in stress mode (the dispatcher reorders the two
 * streams at random, seeded) for several seeds: exact sums, no error, no deadlock. With
 * DHELIX_TEST_BREAK=nccl_order the chain is gone and stress mode may issue "dp" before "tp"
 * on one rank only: some seed must end in the vgpu's deadlock report naming both
 * communicators, with no communication timeout (20 s) on the way, and no run may hang.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <setjmp.h>
#include <cmocka.h>

#include "drive.h"

#define NP 2
#define SEEDS 4        /* seeds of the intact runs */
#define BREAK_SEEDS 12 /* seeds tried with the rule broken until one deadlocks */
#define REPORT_S 15.0  /* a run that deadlocks (once per iteration at most: 2) ends within:
                          mpirun, 2 x VGPU_DEADLOCK_S (2 s), a loaded machine; < the timeout */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* One run; returns its stderr (malloc'd) and whether every rank printed sums=ok with no
 * error. */
static char *run(int shim, int seed, int broken, int *clean, double *secs)
{
    char dir[512], seed_env[64], what[96];
    dh_tmpdir_make(dir, sizeof dir);
    snprintf(seed_env, sizeof seed_env, "DHELIX_SEED=%d", seed);
    const char *env[] = {"CUDA_DEVICE_MAX_CONNECTIONS=1", "DHELIX_MODE=stress", seed_env,
                         "VGPU_HAZARD=abort", broken ? "DHELIX_TEST_BREAK=nccl_order" : NULL,
                         NULL};
    static const char *const args[] = {"order", NULL};
    dh_run_t r;
    double t0 = now_s();
    nd_run(&r, dir, NP, shim, args, env);
    *secs = now_s() - t0;
    snprintf(what, sizeof what, "order, %s, seed %d%s", shim ? "stress" : "without the shim",
             seed, broken ? ", nccl_order broken" : "");
    *clean = r.status == 0;
    for (int k = 0; k < NP; k++) {
        const char *l = nd_line(r.out, "order ", k);
        *clean &= l != NULL && strstr(l, "async=0,0 sums=ok") != NULL;
    }
    if (!broken) {
        nd_expect_clean(&r, what);
        if (!*clean || strstr(r.err, "deadlock"))
            fail_msg("%s: not exact, or a deadlock:\n%s\n%s", what, r.out, r.err);
    }
    char *err = strdup(r.err);
    dh_run_free(&r);
    dh_tmpdir_remove(dir);
    return err;
}

static void test_intact(void **state)
{
    (void)state;
    int clean;
    double secs;
    free(run(0, 0, 0, &clean, &secs));
    for (int seed = 1; seed <= SEEDS; seed++)
        free(run(1, seed, 0, &clean, &secs));
}

static void test_broken_deadlocks(void **state)
{
    (void)state;
    int found = 0;
    for (int seed = 1; seed <= BREAK_SEEDS && !found; seed++) {
        int clean;
        double secs;
        char *err = run(1, seed, 1, &clean, &secs);
        if (strstr(err, "vgpu: deadlock")) {
            found = 1;
            printf("seed %d: the deadlock was reported, the run took %.1f s\n", seed, secs);
            if (!strstr(err, "on communicator tp") || !strstr(err, "on communicator dp"))
                fail_msg("seed %d: the cycle does not name both communicators:\n%s", seed, err);
            if (secs > REPORT_S || strstr(err, "VGPU_COMM_TIMEOUT"))
                fail_msg("seed %d: the deadlocked run took %.1f s (timeout 20 s):\n%s", seed,
                         secs, err);
            if (clean)
                fail_msg("seed %d: a deadlock was reported, yet every rank saw no error", seed);
        } else if (!clean) {
            fail_msg("seed %d: the run failed without a deadlock report:\n%s", seed, err);
        } else {
            printf("seed %d: the dispatcher kept one order on both ranks\n", seed);
        }
        free(err);
    }
    if (!found)
        fail_msg("with nccl_order broken no seed of %d reordered the communicators differently "
                 "on the two ranks: the break (or stress mode's reordering) does nothing here",
                 BREAK_SEEDS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_intact),
        cmocka_unit_test(test_broken_deadlocks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
