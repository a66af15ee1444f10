/*
 * nccl.exact.np<N>: every NCCL collective and point-to-point call, ungrouped and grouped,
 * through the shim on N ranks of the vgpu (nccl_prog exact): passthrough, stress with three
 * seeds, and two-strand execution each give, on every rank, the digest of the run without
 * the shim, with the hazard detector set to abort. The rank count is the driver's argument.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "drive.h"

static int g_np = 2;

static void run_one(const char *dir, int shim, const char *const *env, char d[][17],
                    const char *what)
{
    static const char *const args[] = {"exact", NULL};
    dh_run_t r;
    nd_run(&r, dir, g_np, shim, args, env);
    nd_expect_clean(&r, what);
    nd_digests(&r, g_np, d, what);
    dh_run_free(&r);
}

static void test_every_mode_is_bit_identical(void **state)
{
    (void)state;
    char dir[512], base[ND_MAX_RANKS][17], got[ND_MAX_RANKS][17];
    dh_tmpdir_make(dir, sizeof dir);
    static const char *const plain[] = {"VGPU_HAZARD=abort", NULL};
    run_one(dir, 0, plain, base, "without the shim");
    static const struct {
        const char *what;
        const char *env[4];
    } runs[] = {
        {"passthrough", {"VGPU_HAZARD=abort", "DHELIX_MODE=passthrough", NULL}},
        {"stress seed 1", {"VGPU_HAZARD=abort", "DHELIX_MODE=stress", "DHELIX_SEED=1", NULL}},
        {"stress seed 2", {"VGPU_HAZARD=abort", "DHELIX_MODE=stress", "DHELIX_SEED=2", NULL}},
        {"stress seed 3", {"VGPU_HAZARD=abort", "DHELIX_MODE=stress", "DHELIX_SEED=3", NULL}},
        {"two strands", {"VGPU_HAZARD=abort", "DHELIX_MODE=test-strands", NULL}},
    };
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        run_one(dir, 1, runs[i].env, got, runs[i].what);
        nd_same_digests(base, got, g_np, "the run without the shim", runs[i].what);
    }
    dh_tmpdir_remove(dir);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        g_np = atoi(argv[1]);
    if (g_np < 1 || g_np > ND_MAX_RANKS) {
        fprintf(stderr, "usage: %s <ranks 1..%d>\n", argv[0], ND_MAX_RANKS);
        return 2;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_mode_is_bit_identical),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
