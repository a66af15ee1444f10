/*
 * test_cublas_fp64.c (vgpu.cublas_fp64): the vgpu's fp64 GEMMs through the real cuBLAS
 * API: cublasDgemm with every transpose and padded leading dimensions,
 * cublasDgemmStridedBatched, cublasGemmEx / cublasGemmStridedBatchedEx with CUDA_R_64F and
 * the 64F compute types, device-mode fp64 scalars, and the virtual time of an fp64 GEMM.
 *
 * Every result is held to an fp64 error bound (gemm_common.c): a GEMM computed in fp32, or
 * with fp32 scalars, misses it by a factor of about 2^28, so these tests fail unless the
 * vgpu really computes in fp64.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>

#include "gemm_common.h"
#include "rt_common.h"
#include "vg.h"

static cublasOperation_t op(int t) { return t ? CUBLAS_OP_T : CUBLAS_OP_N; }

static int setup(void **state)
{
    vgt_register_kernels();
    return 0;
}

/* Runs g through fn, then checks it; fn issues the GEMM and returns its status. */
typedef cublasStatus_t (*issue_fn)(cublasHandle_t h, const gt_gemm_t *g, const gt_dev_t *d,
                                   cublasOperation_t ta, cublasOperation_t tb);

static void run_checked(cublasHandle_t h, gt_gemm_t *g, issue_fn fn, cublasOperation_t ta,
                        cublasOperation_t tb, const char *what)
{
    gt_gemm_init(g);
    gt_dev_t d;
    gt_dev_upload(g, &d);
    GT_BLAS_OK(fn(h, g, &d, ta, tb));
    void *out = gt_dev_download_c(g, &d);
    gt_gemm_check(g, out, what);
    free(out);
    gt_dev_free(&d);
    gt_gemm_free(g);
}

static cublasStatus_t dgemm(cublasHandle_t h, const gt_gemm_t *g, const gt_dev_t *d,
                            cublasOperation_t ta, cublasOperation_t tb)
{
    double alpha = g->alpha, beta = g->beta;
    return cublasDgemm(h, ta, tb, (int)g->m, (int)g->n, (int)g->k, &alpha, d->a, (int)g->lda,
                       d->b, (int)g->ldb, &beta, d->c, (int)g->ldc);
}

/* cublasDgemm with every transpose (OP_C is OP_T for real types) and padded lds; alpha
 * and beta are not representable in fp32, so fp32 scalars would miss the bound too. */
static void test_dgemm(void **state)
{
    gt_seed(31);
    cublasHandle_t h;
    GT_BLAS_OK(cublasCreate(&h));
    const cublasOperation_t ops[3] = {CUBLAS_OP_N, CUBLAS_OP_T, CUBLAS_OP_C};
    for (int ia = 0; ia < 3; ia++) {
        for (int ib = 0; ib < 3; ib++) {
            gt_gemm_t g = {.ta = ia != 0, .tb = ib != 0, .m = 37, .n = 29, .k = 41,
                           .ab_type = CUDA_R_64F, .c_type = CUDA_R_64F,
                           .alpha = -1.0 / 3.0, .beta = 0.1};
            g.lda = (g.ta ? g.k : g.m) + 5;
            g.ldb = (g.tb ? g.n : g.k) + 2;
            g.ldc = g.m + 1;
            char what[32];
            snprintf(what, sizeof what, "dgemm op %d %d", ia, ib);
            run_checked(h, &g, dgemm, ops[ia], ops[ib], what);
        }
    }
    GT_BLAS_OK(cublasDestroy(h));
}

/* One product whose fp32 rounding is visible: (1 + 2^-40) * (1 + 2^-40) = 1 + 2^-39 +
 * 2^-80; fp64 keeps 1 + 2^-39, fp32 would give exactly 1. */
static void test_dgemm_is_fp64(void **state)
{
    cublasHandle_t h;
    GT_BLAS_OK(cublasCreate(&h));
    double *d;
    GT_RT_OK(cudaMalloc((void **)&d, 3 * sizeof(double)));
    const double x = 1.0 + 0x1p-40, init[3] = {x, x, 0.0}, one = 1.0, zero = 0.0;
    GT_RT_OK(cudaMemcpy(d, init, sizeof init, cudaMemcpyHostToDevice));
    GT_BLAS_OK(cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, d, 1, d + 1, 1, &zero,
                           d + 2, 1));
    double got = 0;
    GT_RT_OK(cudaMemcpy(&got, d + 2, sizeof got, cudaMemcpyDeviceToHost));
    if (got != 1.0 + 0x1p-39)
        fail_msg("(1+2^-40)^2: expected %.17g, got %.17g", 1.0 + 0x1p-39, got);
    GT_RT_OK(cudaFree(d));
    GT_BLAS_OK(cublasDestroy(h));
}

static cublasStatus_t dgemm_strided(cublasHandle_t h, const gt_gemm_t *g, const gt_dev_t *d,
                                    cublasOperation_t ta, cublasOperation_t tb)
{
    double alpha = g->alpha, beta = g->beta;
    return cublasDgemmStridedBatched(h, ta, tb, (int)g->m, (int)g->n, (int)g->k, &alpha, d->a,
                                     (int)g->lda, g->sa, d->b, (int)g->ldb, g->sb, &beta, d->c,
                                     (int)g->ldc, g->sc, (int)g->batch);
}

static cublasStatus_t gemm_ex_64(cublasHandle_t h, const gt_gemm_t *g, const gt_dev_t *d,
                                 cublasOperation_t ta, cublasOperation_t tb)
{
    double alpha = g->alpha, beta = g->beta;
    return cublasGemmEx(h, ta, tb, (int)g->m, (int)g->n, (int)g->k, &alpha, d->a, CUDA_R_64F,
                        (int)g->lda, d->b, CUDA_R_64F, (int)g->ldb, &beta, d->c, CUDA_R_64F,
                        (int)g->ldc, CUBLAS_COMPUTE_64F, CUBLAS_GEMM_DEFAULT);
}

static cublasStatus_t gemm_ex_64_pedantic(cublasHandle_t h, const gt_gemm_t *g,
                                          const gt_dev_t *d, cublasOperation_t ta,
                                          cublasOperation_t tb)
{
    double alpha = g->alpha, beta = g->beta;
    return cublasGemmEx(h, ta, tb, (int)g->m, (int)g->n, (int)g->k, &alpha, d->a, CUDA_R_64F,
                        (int)g->lda, d->b, CUDA_R_64F, (int)g->ldb, &beta, d->c, CUDA_R_64F,
                        (int)g->ldc, CUBLAS_COMPUTE_64F_PEDANTIC, CUBLAS_GEMM_DEFAULT);
}

static cublasStatus_t gemm_strided_ex_64(cublasHandle_t h, const gt_gemm_t *g,
                                         const gt_dev_t *d, cublasOperation_t ta,
                                         cublasOperation_t tb)
{
    double alpha = g->alpha, beta = g->beta;
    return cublasGemmStridedBatchedEx(h, ta, tb, (int)g->m, (int)g->n, (int)g->k, &alpha, d->a,
                                      CUDA_R_64F, (int)g->lda, g->sa, d->b, CUDA_R_64F,
                                      (int)g->ldb, g->sb, &beta, d->c, CUDA_R_64F, (int)g->ldc,
                                      g->sc, (int)g->batch, CUBLAS_COMPUTE_64F,
                                      CUBLAS_GEMM_DEFAULT);
}

static void test_strided_and_ex(void **state)
{
    gt_seed(32);
    cublasHandle_t h;
    GT_BLAS_OK(cublasCreate(&h));
    gt_gemm_t g1 = {.ta = 1, .m = 19, .n = 23, .k = 31, .batch = 3, .ab_type = CUDA_R_64F,
                    .c_type = CUDA_R_64F, .lda = 33, .ldb = 32, .ldc = 20, .sa = 33 * 19 + 9,
                    .sb = 32 * 23 + 4, .sc = 20 * 23 + 6, .alpha = 0.7, .beta = -1.3};
    run_checked(h, &g1, dgemm_strided, CUBLAS_OP_T, CUBLAS_OP_N, "DgemmStridedBatched");
    gt_gemm_t g2 = {.tb = 1, .m = 21, .n = 17, .k = 26, .ab_type = CUDA_R_64F,
                    .c_type = CUDA_R_64F, .alpha = 1.1, .beta = 0.0, .c_nan = 1};
    run_checked(h, &g2, gemm_ex_64, CUBLAS_OP_N, CUBLAS_OP_T, "GemmEx 64F, beta 0 over NaN");
    gt_gemm_t g3 = {.m = 13, .n = 12, .k = 40, .ab_type = CUDA_R_64F, .c_type = CUDA_R_64F,
                    .alpha = -2.5, .beta = 0.25};
    run_checked(h, &g3, gemm_ex_64_pedantic, CUBLAS_OP_N, CUBLAS_OP_N, "GemmEx 64F pedantic");
    gt_gemm_t g4 = {.ta = 1, .tb = 1, .m = 9, .n = 11, .k = 7, .batch = 4,
                    .ab_type = CUDA_R_64F, .c_type = CUDA_R_64F, .alpha = 0.3, .beta = 0.6};
    run_checked(h, &g4, gemm_strided_ex_64, CUBLAS_OP_T, CUBLAS_OP_T,
                "GemmStridedBatchedEx 64F");
    GT_BLAS_OK(cublasDestroy(h));
}

/* Device pointer mode reads 8-byte scalars when the GEMM runs. */
static void test_device_scalars(void **state)
{
    gt_seed(33);
    cublasHandle_t h;
    cudaStream_t s;
    GT_RT_OK(cudaStreamCreate(&s));
    GT_BLAS_OK(cublasCreate(&h));
    GT_BLAS_OK(cublasSetStream(h, s));
    GT_BLAS_OK(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_DEVICE));
    gt_gemm_t g = {.m = 10, .n = 8, .k = 12, .ab_type = CUDA_R_64F, .c_type = CUDA_R_64F,
                   .alpha = 1.0 / 7.0, .beta = -0.2};
    gt_gemm_init(&g);
    gt_dev_t d;
    gt_dev_upload(&g, &d);
    double *scal;
    GT_RT_OK(cudaMalloc((void **)&scal, 2 * sizeof(double)));
    const double init[2] = {1.0, 0.0}, want[2] = {1.0 / 7.0, -0.2};
    GT_RT_OK(cudaMemcpy(scal, init, sizeof init, cudaMemcpyHostToDevice));
    GT_RT_OK(vgt_spin(1e6, 1.0, s));
    GT_RT_OK(cudaMemcpyAsync(scal, want, sizeof want, cudaMemcpyHostToDevice, s));
    GT_BLAS_OK(cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 10, 8, 12, scal, d.a, (int)g.lda, d.b,
                           (int)g.ldb, scal + 1, d.c, (int)g.ldc));
    void *out = gt_dev_download_c(&g, &d);
    gt_gemm_check(&g, out, "fp64 device scalars");
    free(out);
    gt_dev_free(&d);
    gt_gemm_free(&g);
    GT_RT_OK(cudaFree(scal));
    GT_BLAS_OK(cublasDestroy(h));
    GT_RT_OK(cudaStreamDestroy(s));
}

/* An fp64 GEMM's virtual time is vg_cost_gemm's for the fp64 cost class. */
static void test_virtual_time(void **state)
{
    const int m = 128, n = 96, k = 256;
    cublasHandle_t h;
    cudaStream_t s;
    GT_RT_OK(cudaStreamCreate(&s));
    GT_BLAS_OK(cublasCreate(&h));
    GT_BLAS_OK(cublasSetStream(h, s));
    double *a, *b, *c;
    GT_RT_OK(cudaMalloc((void **)&a, (size_t)m * k * 8));
    GT_RT_OK(cudaMalloc((void **)&b, (size_t)k * n * 8));
    GT_RT_OK(cudaMalloc((void **)&c, (size_t)m * n * 8));
    GT_RT_OK(cudaMemset(a, 0, (size_t)m * k * 8));
    GT_RT_OK(cudaMemset(b, 0, (size_t)k * n * 8));
    cudaEvent_t e0, e1;
    GT_RT_OK(cudaEventCreate(&e0));
    GT_RT_OK(cudaEventCreate(&e1));
    GT_RT_OK(vgt_spin(1e6, 1.0, s));
    GT_RT_OK(cudaEventRecord(e0, s));
    const double one = 1.0, zero = 0.0;
    GT_BLAS_OK(cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, a, m, b, k, &zero, c, m));
    GT_RT_OK(cudaEventRecord(e1, s));
    GT_RT_OK(cudaEventSynchronize(e1));
    int dev = 0;
    GT_RT_OK(cudaGetDevice(&dev));
    VGT_NEAR("fp64 GEMM ns", vg_cost_gemm(vg_profile(dev), m, n, k, 1, 64),
             vgt_elapsed_ns(e0, e1), 10, 1e-4);
    GT_RT_OK(cudaEventDestroy(e0));
    GT_RT_OK(cudaEventDestroy(e1));
    GT_RT_OK(cudaFree(a));
    GT_RT_OK(cudaFree(b));
    GT_RT_OK(cudaFree(c));
    GT_BLAS_OK(cublasDestroy(h));
    GT_RT_OK(cudaStreamDestroy(s));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dgemm),
        cmocka_unit_test(test_dgemm_is_fp64),
        cmocka_unit_test(test_strided_and_ex),
        cmocka_unit_test(test_device_scalars),
        cmocka_unit_test(test_virtual_time),
        cmocka_unit_test(vgt_test_no_hazards),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
