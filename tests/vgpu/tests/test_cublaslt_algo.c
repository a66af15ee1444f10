/*
 * test_cublaslt_algo.c (vgpu.cublaslt_algo): cuBLASLt's algorithm API and the call-time
 * statuses of the vgpu's libcublasLt.so.13 through the real API: cublasLtMatmulAlgoGetIds,
 * cublasLtMatmulAlgoInit, cublasLtMatmulAlgoConfigSet/GetAttribute (consistent with the
 * heuristic's algos and with cublasLtMatmul's workspace rule), an fp64 matmul, fp8 inputs
 * (CUBLAS_STATUS_NOT_SUPPORTED from the heuristic, as cuBLASLt answers a configuration it
 * has no algorithm for), a layout whose leading dimension is too small (INVALID_VALUE), and
 * a matmul into a stream of another device (EXECUTION_FAILED).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>

#include "gemm_common.h"
#include "rt_common.h"

#define MiB ((size_t)1 << 20)

static int setup(void **state)
{
    vgt_register_kernels();
    return 0;
}

/* One non-batched matmul's descriptors, all column-major, D laid out as C. */
typedef struct lt_problem {
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, c;
} lt_problem_t;

static void problem(lt_problem_t *p, cublasComputeType_t compute, cudaDataType_t scale,
                    cudaDataType_t ab, cudaDataType_t c, int64_t m, int64_t n, int64_t k,
                    int64_t lda, int64_t ldb, int64_t ldc)
{
    GT_BLAS_OK(cublasLtMatmulDescCreate(&p->desc, compute, scale));
    GT_BLAS_OK(cublasLtMatrixLayoutCreate(&p->a, ab, (uint64_t)m, (uint64_t)k, lda));
    GT_BLAS_OK(cublasLtMatrixLayoutCreate(&p->b, ab, (uint64_t)k, (uint64_t)n, ldb));
    GT_BLAS_OK(cublasLtMatrixLayoutCreate(&p->c, c, (uint64_t)m, (uint64_t)n, ldc));
}

static void problem_free(lt_problem_t *p)
{
    GT_BLAS_OK(cublasLtMatrixLayoutDestroy(p->a));
    GT_BLAS_OK(cublasLtMatrixLayoutDestroy(p->b));
    GT_BLAS_OK(cublasLtMatrixLayoutDestroy(p->c));
    GT_BLAS_OK(cublasLtMatmulDescDestroy(p->desc));
}

/* The heuristic's status and first result for p with max_ws bytes allowed. */
static cublasStatus_t heuristic(cublasLtHandle_t h, const lt_problem_t *p, uint64_t max_ws,
                                cublasLtMatmulHeuristicResult_t *res, int *n)
{
    cublasLtMatmulPreference_t pref;
    GT_BLAS_OK(cublasLtMatmulPreferenceCreate(&pref));
    GT_BLAS_OK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &max_ws, sizeof max_ws));
    *n = -1;
    cublasStatus_t st =
        cublasLtMatmulAlgoGetHeuristic(h, p->desc, p->a, p->b, p->c, p->c, pref, 1, res, n);
    GT_BLAS_OK(cublasLtMatmulPreferenceDestroy(pref));
    return st;
}

static void test_get_ids_and_init(void **state)
{
    cublasLtHandle_t h;
    GT_BLAS_OK(cublasLtCreate(&h));
    int ids[8], n = -1;
    GT_BLAS_OK(cublasLtMatmulAlgoGetIds(h, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16BF,
                                        CUDA_R_16BF, CUDA_R_16BF, CUDA_R_16BF, 8, ids, &n));
    assert_int_equal(n, 1);
    GT_BLAS_OK(cublasLtMatmulAlgoGetIds(h, CUBLAS_COMPUTE_64F, CUDA_R_64F, CUDA_R_64F,
                                        CUDA_R_64F, CUDA_R_64F, CUDA_R_64F, 8, ids, &n));
    assert_int_equal(n, 1);
    /* No algorithm for a combination outside the table: success with no ids. */
    GT_BLAS_OK(cublasLtMatmulAlgoGetIds(h, CUBLAS_COMPUTE_16F, CUDA_R_16F, CUDA_R_32F,
                                        CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, 8, ids, &n));
    assert_int_equal(n, 0);
    GT_EXPECT_BLAS(CUBLAS_STATUS_INVALID_VALUE,
                   cublasLtMatmulAlgoGetIds(h, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F,
                                            CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, 0, ids, &n));
    GT_EXPECT_BLAS(CUBLAS_STATUS_NOT_INITIALIZED,
                   cublasLtMatmulAlgoGetIds(NULL, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F,
                                            CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, 8, ids, &n));

    GT_BLAS_OK(cublasLtMatmulAlgoGetIds(h, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F,
                                        CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, 8, ids, &n));
    assert_int_equal(n, 1);
    cublasLtMatmulAlgo_t algo;
    GT_BLAS_OK(cublasLtMatmulAlgoInit(h, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F,
                                      CUDA_R_32F, CUDA_R_32F, ids[0], &algo));
    int32_t id = -5, splitk = -5;
    uint32_t red = 99, tile = 99;
    size_t written = 0;
    GT_BLAS_OK(cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_ID, &id,
                                                    sizeof id, &written));
    assert_int_equal(id, ids[0]);
    assert_int_equal(written, sizeof id);
    GT_BLAS_OK(cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM,
                                                    &splitk, sizeof splitk, NULL));
    assert_int_equal(splitk, 1);
    GT_BLAS_OK(cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME,
                                                    &red, sizeof red, NULL));
    assert_int_equal(red, CUBLASLT_REDUCTION_SCHEME_NONE);
    GT_BLAS_OK(cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile,
                                                    sizeof tile, NULL));
    assert_int_equal(tile, CUBLASLT_MATMUL_TILE_UNDEFINED);
    /* Size queries and size mismatches, as for the descriptors. */
    GT_BLAS_OK(cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID,
                                                    NULL, 0, &written));
    assert_int_equal(written, sizeof(uint16_t));
    GT_EXPECT_BLAS(CUBLAS_STATUS_INVALID_VALUE,
                   cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_ID, NULL, 0,
                                                        NULL));
    GT_EXPECT_BLAS(CUBLAS_STATUS_INVALID_VALUE,
                   cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_ID, &id, 8,
                                                        NULL));
    GT_EXPECT_BLAS(CUBLAS_STATUS_INVALID_VALUE,
                   cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM,
                                                        &splitk, 2));
    GT_EXPECT_BLAS(CUBLAS_STATUS_INVALID_VALUE,
                   cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM,
                                                        NULL, sizeof splitk));
    GT_EXPECT_BLAS(CUBLAS_STATUS_INVALID_VALUE,
                   cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_ID, &id,
                                                        sizeof id));
    GT_EXPECT_BLAS(CUBLAS_STATUS_INVALID_VALUE,
                   cublasLtMatmulAlgoConfigSetAttribute(
                       &algo, (cublasLtMatmulAlgoConfigAttributes_t)77, &id, sizeof id));
    uint16_t cluster = 3, cluster_back = 0;
    GT_BLAS_OK(cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID,
                                                    &cluster, sizeof cluster));
    GT_BLAS_OK(cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID,
                                                    &cluster_back, sizeof cluster_back, NULL));
    assert_int_equal(cluster_back, 3);

    GT_EXPECT_BLAS(CUBLAS_STATUS_INVALID_VALUE,
                   cublasLtMatmulAlgoInit(h, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F,
                                          CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, -1, &algo));
    GT_EXPECT_BLAS(CUBLAS_STATUS_INVALID_VALUE,
                   cublasLtMatmulAlgoInit(h, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F,
                                          CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, 0, NULL));
    GT_EXPECT_BLAS(CUBLAS_STATUS_NOT_SUPPORTED,
                   cublasLtMatmulAlgoInit(h, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F,
                                          CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, ids[0] + 1, &algo));
    GT_EXPECT_BLAS(CUBLAS_STATUS_NOT_SUPPORTED,
                   cublasLtMatmulAlgoInit(h, CUBLAS_COMPUTE_16F, CUDA_R_16F, CUDA_R_32F,
                                          CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, ids[0], &algo));
    GT_EXPECT_BLAS(CUBLAS_STATUS_NOT_INITIALIZED,
                   cublasLtMatmulAlgoInit(NULL, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F,
                                          CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, 0, &algo));
    GT_BLAS_OK(cublasLtDestroy(h));
}

/* The heuristic's algo describes its split-K in its config; an AlgoInit algo needs no
 * workspace until split-K with a separate reduction is configured, and cublasLtMatmul then
 * insists on the workspace, as it does for the heuristic's algo. */
static void test_config_and_workspace(void **state)
{
    gt_seed(51);
    cublasLtHandle_t h;
    GT_BLAS_OK(cublasLtCreate(&h));
    gt_gemm_t g = {.m = 16, .n = 8, .k = 1500, .ab_type = CUDA_R_32F, .c_type = CUDA_R_32F,
                   .alpha = 1.0, .beta = 0.0};
    gt_gemm_init(&g);
    gt_dev_t d;
    gt_dev_upload(&g, &d);
    lt_problem_t p;
    problem(&p, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, 16, 8, 1500, 16, 1500,
            16);
    cublasLtMatmulHeuristicResult_t res;
    int n;
    GT_BLAS_OK(heuristic(h, &p, 4 * MiB, &res, &n));
    assert_int_equal(n, 1);
    int32_t splitk = 0;
    GT_BLAS_OK(cublasLtMatmulAlgoConfigGetAttribute(&res.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM,
                                                    &splitk, sizeof splitk, NULL));
    if (res.workspaceSize == 0 || splitk <= 1)
        fail_msg("K = 1500 with 4 MiB allowed: expected a split-K algo with workspace, got "
                 "splitk %d and %zu bytes", splitk, res.workspaceSize);

    cublasLtMatmulAlgo_t algo;
    GT_BLAS_OK(cublasLtMatmulAlgoInit(h, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F,
                                      CUDA_R_32F, CUDA_R_32F, 0, &algo));
    float one = 1.0f, zero = 0.0f;
    GT_BLAS_OK(cublasLtMatmul(h, p.desc, &one, d.a, p.a, d.b, p.b, &zero, d.c, p.c, d.c, p.c,
                              &algo, NULL, 0, NULL));
    void *out = gt_dev_download_c(&g, &d);
    gt_gemm_check(&g, out, "AlgoInit algo, no workspace");
    free(out);
    int32_t four = 4;
    uint32_t red = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    GT_BLAS_OK(cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM,
                                                    &four, sizeof four));
    GT_BLAS_OK(cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME,
                                                    &red, sizeof red));
    GT_EXPECT_BLAS(CUBLAS_STATUS_INVALID_VALUE,
                   cublasLtMatmul(h, p.desc, &one, d.a, p.a, d.b, p.b, &zero, d.c, p.c, d.c,
                                  p.c, &algo, NULL, 0, NULL));
    void *ws;
    GT_RT_OK(cudaMalloc(&ws, 2 * MiB));
    GT_BLAS_OK(cublasLtMatmul(h, p.desc, &one, d.a, p.a, d.b, p.b, &zero, d.c, p.c, d.c, p.c,
                              &algo, ws, 2 * MiB, NULL));
    out = gt_dev_download_c(&g, &d);
    gt_gemm_check(&g, out, "AlgoInit algo, split K");
    free(out);
    /* An algo the vgpu never filled is rejected. */
    cublasLtMatmulAlgo_t junk;
    memset(&junk, 0x5a, sizeof junk);
    GT_EXPECT_BLAS(CUBLAS_STATUS_INVALID_VALUE,
                   cublasLtMatmul(h, p.desc, &one, d.a, p.a, d.b, p.b, &zero, d.c, p.c, d.c,
                                  p.c, &junk, ws, 2 * MiB, NULL));
    GT_RT_OK(cudaFree(ws));
    problem_free(&p);
    gt_dev_free(&d);
    gt_gemm_free(&g);
    GT_BLAS_OK(cublasLtDestroy(h));
}

/* An fp64 matmul (64F compute, 64F scale) to the fp64 bound. */
static void test_fp64_matmul(void **state)
{
    gt_seed(52);
    cublasLtHandle_t h;
    GT_BLAS_OK(cublasLtCreate(&h));
    gt_gemm_t g = {.m = 12, .n = 10, .k = 30, .ab_type = CUDA_R_64F, .c_type = CUDA_R_64F,
                   .alpha = 1.0 / 3.0, .beta = 0.7, .ldc = 14};
    gt_gemm_init(&g);
    gt_dev_t d;
    gt_dev_upload(&g, &d);
    lt_problem_t p;
    problem(&p, CUBLAS_COMPUTE_64F, CUDA_R_64F, CUDA_R_64F, CUDA_R_64F, 12, 10, 30, g.lda, g.ldb,
            g.ldc);
    double alpha = g.alpha, beta = g.beta;
    GT_BLAS_OK(cublasLtMatmul(h, p.desc, &alpha, d.a, p.a, d.b, p.b, &beta, d.c, p.c, d.c, p.c,
                              NULL, NULL, 0, NULL));
    void *out = gt_dev_download_c(&g, &d);
    gt_gemm_check(&g, out, "cublasLtMatmul fp64");
    free(out);
    /* fp32 scale with fp64 compute is not a cuBLASLt combination. */
    lt_problem_t q;
    problem(&q, CUBLAS_COMPUTE_64F, CUDA_R_32F, CUDA_R_64F, CUDA_R_64F, 12, 10, 30, g.lda, g.ldb,
            g.ldc);
    cublasLtMatmulHeuristicResult_t res;
    int n;
    GT_EXPECT_BLAS(CUBLAS_STATUS_NOT_SUPPORTED, heuristic(h, &q, 0, &res, &n));
    problem_free(&q);
    problem_free(&p);
    gt_dev_free(&d);
    gt_gemm_free(&g);
    GT_BLAS_OK(cublasLtDestroy(h));
}

/* fp8 inputs: NOT_SUPPORTED from the heuristic with no result (the vgpu has no fp8 algo),
 * with or without scale pointers; the matmul itself answers the same. */
static void test_fp8_not_supported(void **state)
{
    cublasLtHandle_t h;
    GT_BLAS_OK(cublasLtCreate(&h));
    lt_problem_t p;
    problem(&p, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_8F_E4M3, CUDA_R_16BF, 64, 64, 64, 64, 64,
            64);
    int32_t t = CUBLAS_OP_T;
    GT_BLAS_OK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t));
    cublasLtMatmulHeuristicResult_t res;
    int n;
    GT_EXPECT_BLAS(CUBLAS_STATUS_NOT_SUPPORTED, heuristic(h, &p, 32 * MiB, &res, &n));
    assert_int_equal(n, 0);
    float *scale;
    GT_RT_OK(cudaMalloc((void **)&scale, sizeof(float)));
    GT_BLAS_OK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                                              &scale, sizeof scale));
    GT_BLAS_OK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                                              &scale, sizeof scale));
    GT_EXPECT_BLAS(CUBLAS_STATUS_NOT_SUPPORTED, heuristic(h, &p, 32 * MiB, &res, &n));
    assert_int_equal(n, 0);
    float one = 1.0f, zero = 0.0f;
    GT_EXPECT_BLAS(CUBLAS_STATUS_NOT_SUPPORTED,
                   cublasLtMatmul(h, p.desc, &one, scale, p.a, scale, p.b, &zero, scale, p.c,
                                  scale, p.c, NULL, NULL, 0, NULL));
    GT_RT_OK(cudaFree(scale));
    problem_free(&p);
    GT_BLAS_OK(cublasLtDestroy(h));
}

/* A leading dimension below the rows of its layout: INVALID_VALUE from the heuristic and
 * from cublasLtMatmul, for A, B and C alike. */
static void test_small_leading_dimension(void **state)
{
    cublasLtHandle_t h;
    GT_BLAS_OK(cublasLtCreate(&h));
    float *buf;
    GT_RT_OK(cudaMalloc((void **)&buf, 64 * 64 * sizeof(float)));
    const int64_t lds[3][3] = {{15, 16, 16}, {16, 15, 16}, {16, 16, 15}};
    for (int i = 0; i < 3; i++) {
        lt_problem_t p;
        problem(&p, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, 16, 16, 16,
                lds[i][0], lds[i][1], lds[i][2]);
        cublasLtMatmulHeuristicResult_t res;
        int n;
        GT_EXPECT_BLAS(CUBLAS_STATUS_INVALID_VALUE, heuristic(h, &p, 0, &res, &n));
        float one = 1.0f, zero = 0.0f;
        GT_EXPECT_BLAS(CUBLAS_STATUS_INVALID_VALUE,
                       cublasLtMatmul(h, p.desc, &one, buf, p.a, buf, p.b, &zero, buf, p.c, buf,
                                      p.c, NULL, NULL, 0, NULL));
        problem_free(&p);
    }
    GT_RT_OK(cudaFree(buf));
    GT_BLAS_OK(cublasLtDestroy(h));
}

/* A matmul into a stream of another device: the launch fails, EXECUTION_FAILED, with
 * cudaErrorInvalidResourceHandle left as the runtime's last error; D is untouched. */
static void test_other_device_stream(void **state)
{
    gt_seed(53);
    GT_RT_OK(cudaSetDevice(1));
    cudaStream_t s1;
    GT_RT_OK(cudaStreamCreate(&s1));
    GT_RT_OK(cudaSetDevice(0));
    cublasLtHandle_t h;
    GT_BLAS_OK(cublasLtCreate(&h));
    gt_gemm_t g = {.m = 8, .n = 8, .k = 8, .ab_type = CUDA_R_32F, .c_type = CUDA_R_32F,
                   .alpha = 0.0, .beta = 1.0};
    gt_gemm_init(&g);
    gt_dev_t d;
    gt_dev_upload(&g, &d);
    lt_problem_t p;
    problem(&p, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, 8, 8, 8, 8, 8, 8);
    float one = 1.0f, zero = 0.0f;
    (void)cudaGetLastError();
    GT_EXPECT_BLAS(CUBLAS_STATUS_EXECUTION_FAILED,
                   cublasLtMatmul(h, p.desc, &one, d.a, p.a, d.b, p.b, &zero, d.c, p.c, d.c, p.c,
                                  NULL, NULL, 0, s1));
    VGT_EXPECT_RT(cudaErrorInvalidResourceHandle, cudaGetLastError());
    void *out = gt_dev_download_c(&g, &d);
    gt_gemm_check(&g, out, "D after the failed launch (unchanged)");
    free(out);
    problem_free(&p);
    gt_dev_free(&d);
    gt_gemm_free(&g);
    GT_BLAS_OK(cublasLtDestroy(h));
    GT_RT_OK(cudaStreamDestroy(s1));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_get_ids_and_init),
        cmocka_unit_test(test_config_and_workspace),
        cmocka_unit_test(test_fp64_matmul),
        cmocka_unit_test(test_fp8_not_supported),
        cmocka_unit_test(test_small_leading_dimension),
        cmocka_unit_test(test_other_device_stream),
        cmocka_unit_test(vgt_test_no_hazards),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
