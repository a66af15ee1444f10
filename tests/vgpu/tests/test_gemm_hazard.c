/*
 * test_gemm_hazard.c (vgpu.gemm_hazard): GEMM workspaces as the hazard detector sees them.
 *
 * On a GPU, a cuBLAS handle given a workspace with cublasSetWorkspace scribbles on it during
 * every GEMM, and a cuBLASLt algo that needs workspace does too: two GEMMs sharing one
 * workspace on two streams at once race (PyTorch keys workspaces by handle and stream for
 * that reason; Transformer Engine keeps one per device). Each scenario runs in a child
 * process: two GEMMs on two streams released at the same virtual instant by one event, with
 * a shared or a separate workspace. With VGPU_HAZARD=abort a race must end the child with
 * status 86 and a "vgpu: hazard:" line; without one the child must finish cleanly. A child
 * exits with the number of hazards it counted (capped), so warn mode is checked too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>
#include <cublas_v2.h>

#include "rt_common.h"

#define MiB ((size_t)1 << 20)
#define M 64
#define N 48
#define K_SHORT 64
#define K_LONG 2048

#define CHECK(call)                                                                          \
    do {                                                                                     \
        int rc_ = (int)(call);                                                               \
        if (rc_ != 0) {                                                                      \
            fprintf(stderr, "scenario: %s failed with %d\n", #call, rc_);                    \
            return 2;                                                                        \
        }                                                                                    \
    } while (0)

typedef struct world {
    cudaStream_t gate, s[2];
    cudaEvent_t open;
    void *a, *b, *c[2], *ws[2];
} world_t;

/* Two streams held back by one event that completes after a long kernel, so whatever is
 * issued on them next starts at the same virtual time. ws[1] is ws[0] when shared. */
static int world_make(world_t *w, int shared, size_t k)
{
    vgt_register_kernels();
    CHECK(cudaStreamCreate(&w->gate));
    CHECK(cudaStreamCreate(&w->s[0]));
    CHECK(cudaStreamCreate(&w->s[1]));
    CHECK(cudaEventCreate(&w->open));
    CHECK(cudaMalloc(&w->a, M * k * 2));
    CHECK(cudaMalloc(&w->b, k * N * 2));
    CHECK(cudaMemset(w->a, 0, M * k * 2));
    CHECK(cudaMemset(w->b, 0, k * N * 2));
    for (int i = 0; i < 2; i++) {
        CHECK(cudaMalloc(&w->c[i], M * N * 4));
        w->ws[i] = NULL;
        if (i == 0 || !shared) {
            CHECK(cudaMalloc(&w->ws[i], 4 * MiB));
        } else {
            w->ws[i] = w->ws[0];
        }
    }
    CHECK(vgt_spin(1e6, 0.1, w->gate));
    CHECK(cudaEventRecord(w->open, w->gate));
    CHECK(cudaStreamWaitEvent(w->s[0], w->open, 0));
    CHECK(cudaStreamWaitEvent(w->s[1], w->open, 0));
    return 0;
}

/* Waits for everything and exits with the number of hazards seen (at most 50). */
static int world_end(void)
{
    CHECK(cudaDeviceSynchronize());
    vgpu_counters_t c;
    memset(&c, 0, sizeof c);
    vgpu_counters(&c);
    return c.hazards > 50 ? 50 : (int)c.hazards;
}

static int cublas_pair(int shared, int reset_by_set_stream)
{
    world_t w;
    CHECK(world_make(&w, shared, K_SHORT));
    cublasHandle_t h[2];
    const float one = 1.0f, zero = 0.0f;
    for (int i = 0; i < 2; i++) {
        CHECK(cublasCreate(&h[i]));
        CHECK(cublasSetStream(h[i], w.s[i]));
        CHECK(cublasSetWorkspace(h[i], w.ws[i], 4 * MiB));
        if (reset_by_set_stream) {
            CHECK(cublasSetStream(h[i], w.s[i]));   /* drops the user workspace */
        }
    }
    for (int i = 0; i < 2; i++) {
        CHECK(cublasGemmEx(h[i], CUBLAS_OP_N, CUBLAS_OP_N, M, N, K_SHORT, &one, w.a, CUDA_R_16BF,
                           M, w.b, CUDA_R_16BF, K_SHORT, &zero, w.c[i], CUDA_R_32F, M,
                           CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }
    int hazards = world_end();
    CHECK(cublasDestroy(h[0]));
    CHECK(cublasDestroy(h[1]));
    return hazards;
}

static int lt_pair(int shared, size_t k)
{
    world_t w;
    CHECK(world_make(&w, shared, k));
    cublasLtHandle_t h;
    CHECK(cublasLtCreate(&h));
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc;
    CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CHECK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, M, k, M));
    CHECK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, k, N, k));
    CHECK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, M, N, M));
    const float one = 1.0f, zero = 0.0f;
    for (int i = 0; i < 2; i++) {
        CHECK(cublasLtMatmul(h, desc, &one, w.a, la, w.b, lb, &zero, w.c[i], lc, w.c[i], lc, NULL,
                             w.ws[i], 4 * MiB, w.s[i]));
    }
    CHECK(cublasLtMatrixLayoutDestroy(la));
    CHECK(cublasLtMatrixLayoutDestroy(lb));
    CHECK(cublasLtMatrixLayoutDestroy(lc));
    CHECK(cublasLtMatmulDescDestroy(desc));
    int hazards = world_end();
    CHECK(cublasLtDestroy(h));
    return hazards;
}

static int sc_cublas_shared(void) { return cublas_pair(1, 0); }
static int sc_cublas_separate(void) { return cublas_pair(0, 0); }
static int sc_cublas_reset(void) { return cublas_pair(1, 1); }
static int sc_lt_shared(void) { return lt_pair(1, K_LONG); }
static int sc_lt_separate(void) { return lt_pair(0, K_LONG); }
static int sc_lt_short_k(void) { return lt_pair(1, K_SHORT); }

static const vgt_scenario_t scenarios[] = {
    {"cublas_shared", sc_cublas_shared},
    {"cublas_separate", sc_cublas_separate},
    {"cublas_reset", sc_cublas_reset},
    {"lt_shared", sc_lt_shared},
    {"lt_separate", sc_lt_separate},
    {"lt_short_k", sc_lt_short_k},
    {NULL, NULL},
};

/* Runs a scenario under VGPU_HAZARD=mode and checks its exit status and hazard lines. */
static void expect(const char *scenario, const char *mode, int code, int hazard_lines_min,
                   int hazard_lines_max, const char *api)
{
    char env_mode[32];
    snprintf(env_mode, sizeof env_mode, "VGPU_HAZARD=%s", mode);
    const char *env[] = {env_mode, "CUDA_DEVICE_MAX_CONNECTIONS=8", NULL};
    vgt_child_t c;
    assert_int_equal(vgt_run_child(scenario, env, 120, &c), 0);
    int lines = vgt_count_lines(c.err, "vgpu: hazard:");
    int ok = c.exited && c.code == code && lines >= hazard_lines_min && lines <= hazard_lines_max &&
             (!api || (c.err && strstr(c.err, api)));
    if (!ok) {
        VGT_CHILD_INFO(&c);
        vgt_child_free(&c);
        fail_msg("%s with VGPU_HAZARD=%s: expected exit %d and %d..%d hazard lines%s%s, got "
                 "exit %d and %d", scenario, mode, code, hazard_lines_min, hazard_lines_max,
                 api ? " naming " : "", api ? api : "", c.code, lines);
    }
    vgt_child_free(&c);
}

static void test_cublas_shared_workspace_aborts(void **state)
{
    expect("cublas_shared", "abort", 86, 1, 1, "cublasGemmEx");
}

static void test_cublas_shared_workspace_warns(void **state)
{
    expect("cublas_shared", "warn", 1, 1, 1, "cublasGemmEx");
}

static void test_cublas_separate_workspaces(void **state)
{
    expect("cublas_separate", "abort", 0, 0, 0, NULL);
}

static void test_cublas_set_stream_resets_workspace(void **state)
{
    expect("cublas_reset", "abort", 0, 0, 0, NULL);
}

static void test_lt_shared_workspace_aborts(void **state)
{
    expect("lt_shared", "abort", 86, 1, 1, "cublasLtMatmul");
}

static void test_lt_separate_workspaces(void **state)
{
    expect("lt_separate", "abort", 0, 0, 0, NULL);
}

static void test_lt_short_k_uses_no_workspace(void **state)
{
    expect("lt_short_k", "abort", 0, 0, 0, NULL);
}

int main(int argc, char **argv)
{
    int rc = vgt_scenario_dispatch(argc, argv, scenarios);
    if (rc >= 0) {
        return rc;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cublas_shared_workspace_aborts),
        cmocka_unit_test(test_cublas_shared_workspace_warns),
        cmocka_unit_test(test_cublas_separate_workspaces),
        cmocka_unit_test(test_cublas_set_stream_resets_workspace),
        cmocka_unit_test(test_lt_shared_workspace_aborts),
        cmocka_unit_test(test_lt_separate_workspaces),
        cmocka_unit_test(test_lt_short_k_uses_no_workspace),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
