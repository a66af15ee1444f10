/*
 * shim.passthrough: the shim in front of the vgpu, under a program linked against the
 * real CUDA libraries: LD_PRELOAD=libdhelix_shim.so:<vgpu libraries>. The program moves
 * data through copies, stream-ordered and plain allocations, memsets, events and streams
 * (created and destroyed) from several threads, runs GEMMs through cuBLAS and cuBLASLt
 * and kernels through both launch calls, and checks every result; the shim's JSON report
 * must count exactly the calls it made (each table below is derived from child.c, and
 * every other wrapped entry point must count zero: the libraries' own calls of wrapped
 * APIs are nested, not the program's).
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hook_list.h"
#include "runner.h"

static const char *const hook_names[] = {
#define HOOK_NAME(lib, ret, name, params, args) #name,
    DH_HOOKS_HAND(HOOK_NAME)
#undef HOOK_NAME
};
#define NHOOKS (sizeof(hook_names) / sizeof(hook_names[0]))

typedef struct expect {
    const char *api;
    long long calls;
} expect_t;

#define THREADS 4

/* What child.c's roundtrip_one does once per thread, plus one cudaDeviceSynchronize.
 * (cudaStreamCreate and cudaEventCreate are not wrapped.) */
static const expect_t roundtrip[] = {
    {"cudaMalloc", 2 * THREADS},        {"cudaFree", 2 * THREADS},
    {"cudaMallocAsync", THREADS},       {"cudaFreeAsync", THREADS},
    {"cudaMemcpy", 2 * THREADS},        {"cudaMemcpyAsync", 2 * THREADS},
    {"cudaMemsetAsync", THREADS},       {"cudaEventRecord", THREADS},
    {"cudaEventRecordWithFlags", THREADS}, {"cudaEventSynchronize", THREADS},
    {"cudaEventQuery", THREADS},        {"cudaStreamWaitEvent", THREADS},
    {"cudaStreamSynchronize", 2 * THREADS}, {"cudaEventDestroy", 2 * THREADS},
    {"cudaStreamDestroy", 2 * THREADS}, {"cudaDeviceSynchronize", 1},
    {NULL, 0},
};

/* mode_gemm: gemm_setup (3 cudaMalloc, 2 cudaMemcpy), two GEMMs each followed by
 * gemm_check (1 cudaMemcpy, 1 cudaMemset), cublasDestroy (the header maps it to
 * cublasDestroy_v2), gemm_teardown (3 cudaFree). cublasCreate is not wrapped. */
static const expect_t gemm[] = {
    {"cudaMalloc", 3}, {"cudaMemcpy", 2 + 2}, {"cudaMemset", 2}, {"cudaFree", 3},
    {"cublasSgemm_v2", 1}, {"cublasGemmEx", 1}, {"cublasDestroy_v2", 1}, {NULL, 0},
};

/* mode_lt: gemm_setup, one matmul, one gemm_check, gemm_teardown; the cuBLASLt handle,
 * descriptor and layout calls are not wrapped. */
static const expect_t lt[] = {
    {"cudaMalloc", 3}, {"cudaMemcpy", 2 + 1}, {"cudaMemset", 1}, {"cudaFree", 3},
    {"cublasLtMatmul", 1}, {NULL, 0},
};

static const expect_t kernel[] = {
    {"cudaMalloc", 1}, {"cudaMemcpy", 1}, {"cudaFree", 1},
    {"cudaLaunchKernel", 1}, {"cudaLaunchKernelExC", 1}, {NULL, 0},
};

static long long expected_calls(const expect_t *e, const char *api)
{
    for (; e->api; e++)
        if (strcmp(e->api, api) == 0)
            return e->calls;
    return 0;
}

/* Runs the child in mode under the shim and the vgpu and checks the report: every
 * entry point counted exactly as expected (zero for the others). */
static void run_and_count(const char *mode, const char *arg, const expect_t *expect)
{
    char dir[512], stats_path[600], stats_env[640];
    dh_tmpdir_make(dir, sizeof(dir));
    snprintf(stats_path, sizeof(stats_path), "%s/stats.json", dir);
    snprintf(stats_env, sizeof(stats_env), "DHELIX_STATS_FILE=%s", stats_path);
    const char *env[] = {"DHELIX_STATS=json", stats_env, NULL};
    char *argv[] = {(char *)dh_test_env("DH_TEST_CHILD", 1), (char *)mode, (char *)arg, NULL};
    dh_run_t r;
    dh_run(&r, dir, argv, dh_test_env("DH_TEST_PRELOAD", 1), env);
    if (r.status != 0)
        fail_msg("child %s exited %d\nstdout: %s\nstderr: %s", mode, r.status, r.out, r.err);
    char *text = dh_read_file(stats_path);
    if (text == NULL)
        fail_msg("no stats report from the shim (stderr: %s)", r.err);
    json_t *stats = dh_stats_parse(text);
    assert_int_equal(dh_stats_rows(stats), NHOOKS);
    for (size_t i = 0; i < NHOOKS; i++) {
        long long want = expected_calls(expect, hook_names[i]);
        long long got = dh_stats_get(stats, hook_names[i], "calls");
        if (got != want)
            fail_msg("%s %s: %s counted %lld calls, expected %lld", mode, arg ? arg : "",
                     hook_names[i], got, want);
    }
    json_decref(stats);
    free(text);
    dh_run_free(&r);
    dh_tmpdir_remove(dir);
}

static void test_roundtrip_threads(void **state)
{
    (void)state;
    char threads[8];
    snprintf(threads, sizeof(threads), "%d", THREADS);
    run_and_count("roundtrip", threads, roundtrip);
}

static void test_cublas_gemms(void **state)
{
    (void)state;
    run_and_count("gemm", NULL, gemm);
}

static void test_cublaslt_matmul(void **state)
{
    (void)state;
    run_and_count("lt", NULL, lt);
}

static void test_kernel_launches(void **state)
{
    (void)state;
    run_and_count("kernel", NULL, kernel);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_threads),
        cmocka_unit_test(test_cublas_gemms),
        cmocka_unit_test(test_cublaslt_matmul),
        cmocka_unit_test(test_kernel_launches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
