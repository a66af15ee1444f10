/*
 * test_cublas_checks.c (vgpu.cublas_checks): the call-time statuses of the vgpu's cuBLAS
 * GEMMs that the shim mirrors (the list is in src/cublas/blas_gemm.c): dimension, leading
 * dimension and batch checks of every GEMM family, cublasGemmEx's type/compute table walked
 * combination by combination against the cuBLAS documentation's table (written out again
 * here, independently of the vgpu's), a GEMM whose stream belongs to another device, and
 * cublasSet/GetEmulationStrategy.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>

#include "gemm_common.h"
#include "rt_common.h"

static int setup(void **state)
{
    vgt_register_kernels();
    return 0;
}

typedef struct bufs {
    void *a, *b, *c;
} bufs_t;

static void bufs_alloc(bufs_t *x)
{
    const size_t bytes = 64 * 64 * sizeof(double);
    GT_RT_OK(cudaMalloc(&x->a, bytes));
    GT_RT_OK(cudaMalloc(&x->b, bytes));
    GT_RT_OK(cudaMalloc(&x->c, bytes));
    GT_RT_OK(cudaMemset(x->a, 0, bytes));
    GT_RT_OK(cudaMemset(x->b, 0, bytes));
    GT_RT_OK(cudaMemset(x->c, 0, bytes));
}

static void bufs_free(bufs_t *x)
{
    GT_RT_OK(cudaFree(x->a));
    GT_RT_OK(cudaFree(x->b));
    GT_RT_OK(cudaFree(x->c));
}

/* Dimensions, leading dimensions (against the stored shape of each operand for each
 * transpose) and batch counts, for GemmEx, GemmStridedBatchedEx, DgemmStridedBatched and
 * the _64 forms. */
static void test_dimension_checks(void **state)
{
    cublasHandle_t h;
    GT_BLAS_OK(cublasCreate(&h));
    bufs_t x;
    bufs_alloc(&x);
    const float one = 1.0f, zero = 0.0f;
    const double done = 1.0, dzero = 0.0;
    const cublasOperation_t N = CUBLAS_OP_N, T = CUBLAS_OP_T, C = CUBLAS_OP_C;
    const cublasStatus_t INV = CUBLAS_STATUS_INVALID_VALUE, OK = CUBLAS_STATUS_SUCCESS;
#define GX(st, ta, tb, m, n, k, lda, ldb, ldc)                                                  \
    GT_EXPECT_BLAS(st, cublasGemmEx(h, ta, tb, m, n, k, &one, x.a, CUDA_R_32F, lda, x.b,       \
                                    CUDA_R_32F, ldb, &zero, x.c, CUDA_R_32F, ldc,              \
                                    CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT))
    GX(INV, N, N, -1, 4, 4, 4, 4, 4);
    GX(INV, N, N, 4, -1, 4, 4, 4, 4);
    GX(INV, N, N, 4, 4, -1, 4, 4, 4);
    GX(OK, N, N, 6, 4, 5, 6, 5, 6);
    GX(INV, N, N, 6, 4, 5, 5, 5, 6);   /* A m x k: lda >= m */
    GX(OK, T, N, 6, 4, 5, 5, 5, 6);    /* A k x m: lda >= k */
    GX(INV, T, N, 6, 4, 5, 4, 5, 6);
    GX(INV, C, N, 6, 4, 5, 4, 5, 6);
    GX(INV, N, N, 6, 4, 5, 6, 4, 6);   /* B k x n: ldb >= k */
    GX(OK, N, T, 6, 4, 5, 6, 4, 6);    /* B n x k: ldb >= n */
    GX(INV, N, T, 6, 4, 5, 6, 3, 6);
    GX(INV, N, N, 6, 4, 5, 6, 5, 5);   /* ldc >= m */
    GX(INV, N, N, 0, 4, 5, 0, 5, 0);   /* max(1, m): 0 is never a leading dimension */
    GX(OK, N, N, 0, 4, 5, 1, 5, 1);    /* m == 0: nothing to do */
    GX(OK, N, N, 4, 4, 0, 4, 1, 4);    /* k == 0: C = beta C */
    GX(INV, (cublasOperation_t)3, N, 4, 4, 4, 4, 4, 4);
#undef GX
    GT_EXPECT_BLAS(INV, cublasGemmEx_64(h, N, N, 4, 4, 4, &one, x.a, CUDA_R_32F, 3, x.b,
                                        CUDA_R_32F, 4, &zero, x.c, CUDA_R_32F, 4,
                                        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    GT_EXPECT_BLAS(INV, cublasGemmEx(h, N, N, 4, 4, 4, &one, x.a, CUDA_R_32F, 4, x.b,
                                     CUDA_R_32F, 4, NULL, x.c, CUDA_R_32F, 4, CUBLAS_COMPUTE_32F,
                                     CUBLAS_GEMM_DEFAULT));
#define SBX(st, m, lda, batch)                                                                  \
    GT_EXPECT_BLAS(st, cublasGemmStridedBatchedEx(h, N, N, m, 4, 4, &one, x.a, CUDA_R_32F, lda, \
                                                  64, x.b, CUDA_R_32F, 4, 64, &zero, x.c,      \
                                                  CUDA_R_32F, 4, 64, batch, CUBLAS_COMPUTE_32F, \
                                                  CUBLAS_GEMM_DEFAULT))
    SBX(INV, 4, 4, -1);
    SBX(OK, 4, 4, 0);
    SBX(INV, -4, 4, 2);
    SBX(INV, 4, 3, 2);
    SBX(OK, 4, 4, 3);
#undef SBX
    GT_EXPECT_BLAS(INV, cublasDgemmStridedBatched(h, T, N, 4, 4, 6, &done, x.a, 5, 64, x.b, 6,
                                                  64, &dzero, x.c, 4, 64, 2));
    GT_EXPECT_BLAS(INV, cublasDgemmStridedBatched_64(h, N, N, 4, 4, 4, &done, x.a, 4, 64, x.b,
                                                     4, 64, &dzero, x.c, 4, 64, -2));
    GT_EXPECT_BLAS(INV, cublasDgemm(h, N, N, 4, 4, 4, &done, x.a, 4, x.b, 4, &dzero, x.c, 3));
    GT_EXPECT_BLAS(CUBLAS_STATUS_NOT_INITIALIZED,
                   cublasDgemm(NULL, N, N, 4, 4, 4, &done, x.a, 4, x.b, 4, &dzero, x.c, 4));
    GT_RT_OK(cudaDeviceSynchronize());
    bufs_free(&x);
    GT_BLAS_OK(cublasDestroy(h));
}

/* The documented table of cublasGemmEx (NVIDIA cuBLAS docs, cublasGemmEx(): compute type,
 * A/B type, C type); every other combination is NOT_SUPPORTED. The vgpu computes the rows
 * marked 1 and answers NOT_SUPPORTED for the int8 and complex rows too (it does not compute
 * them; a message says so), so the statuses below are what a program sees on the vgpu. */
typedef struct row {
    cublasComputeType_t compute;
    cudaDataType_t ab, c;
    int vgpu_computes;
} row_t;

/* Rows by compute family: each _PEDANTIC type has its base type's rows, and the three
 * 32F_FAST types share theirs (written as CUBLAS_COMPUTE_32F_FAST_TF32). */
static const row_t table[] = {
    {CUBLAS_COMPUTE_16F, CUDA_R_16F, CUDA_R_16F, 1},
    {CUBLAS_COMPUTE_32I, CUDA_R_8I, CUDA_R_32I, 0},
    {CUBLAS_COMPUTE_32F, CUDA_R_16BF, CUDA_R_16BF, 1},
    {CUBLAS_COMPUTE_32F, CUDA_R_16F, CUDA_R_16F, 1},
    {CUBLAS_COMPUTE_32F, CUDA_R_8I, CUDA_R_32F, 0},
    {CUBLAS_COMPUTE_32F, CUDA_R_16BF, CUDA_R_32F, 1},
    {CUBLAS_COMPUTE_32F, CUDA_R_16F, CUDA_R_32F, 1},
    {CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F, 1},
    {CUBLAS_COMPUTE_32F, CUDA_C_8I, CUDA_C_32F, 0},
    {CUBLAS_COMPUTE_32F, CUDA_C_32F, CUDA_C_32F, 0},
    {CUBLAS_COMPUTE_32F_FAST_TF32, CUDA_R_32F, CUDA_R_32F, 1},
    {CUBLAS_COMPUTE_32F_FAST_TF32, CUDA_C_32F, CUDA_C_32F, 0},
    {CUBLAS_COMPUTE_64F, CUDA_R_64F, CUDA_R_64F, 1},
    {CUBLAS_COMPUTE_64F, CUDA_C_64F, CUDA_C_64F, 0},
};

static cublasComputeType_t family(cublasComputeType_t c)
{
    switch (c) {
    case CUBLAS_COMPUTE_16F_PEDANTIC: return CUBLAS_COMPUTE_16F;
    case CUBLAS_COMPUTE_32F_PEDANTIC: return CUBLAS_COMPUTE_32F;
    case CUBLAS_COMPUTE_64F_PEDANTIC: return CUBLAS_COMPUTE_64F;
    case CUBLAS_COMPUTE_32I_PEDANTIC: return CUBLAS_COMPUTE_32I;
    case CUBLAS_COMPUTE_32F_FAST_16F:
    case CUBLAS_COMPUTE_32F_FAST_16BF: return CUBLAS_COMPUTE_32F_FAST_TF32;
    default: return c;
    }
}

static int in_table(cublasComputeType_t compute, cudaDataType_t ab, cudaDataType_t c)
{
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (table[i].compute == family(compute) && table[i].ab == ab && table[i].c == c) {
            return table[i].vgpu_computes ? 1 : 2;
        }
    }
    return 0;
}

/* Every (compute, A=B, C) over the types and compute types that matter, plus a mixed A/B. */
static void test_gemm_ex_type_table(void **state)
{
    cublasHandle_t h;
    GT_BLAS_OK(cublasCreate(&h));
    bufs_t x;
    bufs_alloc(&x);
    const cudaDataType_t types[] = {CUDA_R_16F, CUDA_R_16BF, CUDA_R_32F, CUDA_R_64F, CUDA_R_8I,
                                    CUDA_R_32I, CUDA_C_32F, CUDA_C_64F, CUDA_C_8I,
                                    CUDA_R_8F_E4M3};
    const cublasComputeType_t computes[] = {
        CUBLAS_COMPUTE_16F, CUBLAS_COMPUTE_16F_PEDANTIC, CUBLAS_COMPUTE_32F,
        CUBLAS_COMPUTE_32F_PEDANTIC, CUBLAS_COMPUTE_32F_FAST_16F, CUBLAS_COMPUTE_32F_FAST_16BF,
        CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_COMPUTE_64F, CUBLAS_COMPUTE_64F_PEDANTIC,
        CUBLAS_COMPUTE_32I, CUBLAS_COMPUTE_32I_PEDANTIC};
    /* Scalars big enough for any scale type, all zero (so nothing but types matters). */
    const double alpha[2] = {0, 0}, beta[2] = {0, 0};
    const size_t nt = sizeof types / sizeof types[0];
    for (size_t ci = 0; ci < sizeof computes / sizeof computes[0]; ci++) {
        for (size_t ai = 0; ai < nt; ai++) {
            for (size_t ki = 0; ki < nt; ki++) {
                int row = in_table(computes[ci], types[ai], types[ki]);
                cublasStatus_t want = row == 1 ? CUBLAS_STATUS_SUCCESS
                                               : CUBLAS_STATUS_NOT_SUPPORTED;
                cublasStatus_t got = cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, alpha,
                                                  x.a, types[ai], 4, x.b, types[ai], 4, beta,
                                                  x.c, types[ki], 4, computes[ci],
                                                  CUBLAS_GEMM_DEFAULT);
                if (got != want)
                    fail_msg("GemmEx compute %d A=B type %d C type %d (table row: %s): expected "
                             "%s, got %s", (int)computes[ci], (int)types[ai], (int)types[ki],
                             row == 0 ? "none" : row == 1 ? "computed" : "cuBLAS only",
                             cublasGetStatusName(want), cublasGetStatusName(got));
            }
        }
    }
    GT_EXPECT_BLAS(CUBLAS_STATUS_NOT_SUPPORTED,
                   cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, alpha, x.a, CUDA_R_16F, 4,
                                x.b, CUDA_R_16BF, 4, beta, x.c, CUDA_R_32F, 4,
                                CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    GT_RT_OK(cudaDeviceSynchronize());
    bufs_free(&x);
    GT_BLAS_OK(cublasDestroy(h));
}

/* A GEMM whose stream belongs to another device than the calling thread's: the launch
 * fails, CUBLAS_STATUS_EXECUTION_FAILED, cudaErrorInvalidResourceHandle is the runtime's
 * last error, C is untouched. With the stream's device current it runs. */
static void test_stream_of_other_device(void **state)
{
    gt_seed(61);
    GT_RT_OK(cudaSetDevice(1));
    cudaStream_t s1;
    GT_RT_OK(cudaStreamCreate(&s1));
    gt_gemm_t g = {.m = 9, .n = 7, .k = 5, .ab_type = CUDA_R_32F, .c_type = CUDA_R_32F,
                   .alpha = 0.5, .beta = 2.0};
    gt_gemm_init(&g);
    gt_dev_t d;
    gt_dev_upload(&g, &d);
    cublasHandle_t h;
    GT_BLAS_OK(cublasCreate(&h));
    GT_BLAS_OK(cublasSetStream(h, s1));
    GT_RT_OK(cudaSetDevice(0));
    (void)cudaGetLastError();
    const float alpha = 0.5f, beta = 2.0f;
    GT_EXPECT_BLAS(CUBLAS_STATUS_EXECUTION_FAILED,
                   cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 9, 7, 5, &alpha, d.a, 9, d.b, 5,
                               &beta, d.c, 9));
    VGT_EXPECT_RT(cudaErrorInvalidResourceHandle, cudaGetLastError());
    GT_RT_OK(cudaSetDevice(1));
    GT_RT_OK(cudaDeviceSynchronize());
    void *out = gt_dev_download_c(&g, &d);
    if (memcmp(out, g.c, g.nc * sizeof(float)) != 0)
        fail_msg("the failed GEMM changed C");
    free(out);
    GT_BLAS_OK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 9, 7, 5, &alpha, d.a, 9, d.b, 5, &beta,
                           d.c, 9));
    out = gt_dev_download_c(&g, &d);
    gt_gemm_check(&g, out, "the same GEMM with the stream's device current");
    free(out);
    /* An empty GEMM launches nothing, so it cannot fail that way. */
    GT_RT_OK(cudaSetDevice(0));
    GT_BLAS_OK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 0, 7, 5, &alpha, d.a, 1, d.b, 5, &beta,
                           d.c, 1));
    GT_RT_OK(cudaSetDevice(1));
    GT_BLAS_OK(cublasDestroy(h));
    gt_dev_free(&d);
    gt_gemm_free(&g);
    GT_RT_OK(cudaStreamDestroy(s1));
    GT_RT_OK(cudaSetDevice(0));
}

static void test_emulation_strategy(void **state)
{
    cublasHandle_t h;
    GT_BLAS_OK(cublasCreate(&h));
    cublasEmulationStrategy_t es = (cublasEmulationStrategy_t)-1;
    GT_BLAS_OK(cublasGetEmulationStrategy(h, &es));
    assert_int_equal(es, CUBLAS_EMULATION_STRATEGY_DEFAULT);
    GT_BLAS_OK(cublasSetEmulationStrategy(h, CUBLAS_EMULATION_STRATEGY_EAGER));
    GT_BLAS_OK(cublasGetEmulationStrategy(h, &es));
    assert_int_equal(es, CUBLAS_EMULATION_STRATEGY_EAGER);
    GT_EXPECT_BLAS(CUBLAS_STATUS_INVALID_VALUE,
                   cublasSetEmulationStrategy(h, (cublasEmulationStrategy_t)3));
    GT_EXPECT_BLAS(CUBLAS_STATUS_INVALID_VALUE, cublasGetEmulationStrategy(h, NULL));
    GT_BLAS_OK(cublasDestroy(h));
    GT_EXPECT_BLAS(CUBLAS_STATUS_NOT_INITIALIZED,
                   cublasSetEmulationStrategy(h, CUBLAS_EMULATION_STRATEGY_PERFORMANT));
    GT_EXPECT_BLAS(CUBLAS_STATUS_NOT_INITIALIZED, cublasGetEmulationStrategy(NULL, &es));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dimension_checks),
        cmocka_unit_test(test_gemm_ex_type_table),
        cmocka_unit_test(test_stream_of_other_device),
        cmocka_unit_test(test_emulation_strategy),
        cmocka_unit_test(vgt_test_no_hazards),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
