/*
 * test_cublas_batched.c (vgpu.cublas_batched): the vgpu's pointer-array batched GEMMs
 * (cublasSgemmBatched, cublasDgemmBatched, cublasGemmBatchedEx) through the real cuBLAS
 * API. The pointer arrays live in device memory, as cuBLAS requires; the entries point
 * anywhere (not a fixed stride, some shared), the arrays are read when the GEMM runs (a
 * stream-ordered rewrite of the array before the GEMM is honoured, and so is an array an
 * asynchronous copy fills just before the call), and a host array, a
 * negative batch count or an empty batch get cuBLAS's statuses.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>

#include "gemm_common.h"
#include "rt_common.h"
#include "vg.h"

enum { NB = 4 };

static int setup(void **state)
{
    vgt_register_kernels();
    return 0;
}

/* NB problems of one shape, uploaded as separate allocations, with device arrays of their
 * A, B and C pointers. Entry 3 reuses entry 0's A and B (a broadcast operand). */
typedef struct problem_set {
    gt_gemm_t g[NB];
    gt_dev_t d[NB];
    void **a_arr, **b_arr, **c_arr;   /* device arrays */
} problem_set_t;

static void set_up(problem_set_t *ps, const gt_gemm_t *shape)
{
    void *ha[NB], *hb[NB], *hc[NB];
    for (int e = 0; e < NB; e++) {
        ps->g[e] = *shape;
        gt_gemm_init(&ps->g[e]);
        if (e == NB - 1) {
            memcpy(ps->g[e].a, ps->g[0].a, ps->g[0].na * gt_type_size(shape->ab_type));
            memcpy(ps->g[e].b, ps->g[0].b, ps->g[0].nb * gt_type_size(shape->ab_type));
        }
        gt_dev_upload(&ps->g[e], &ps->d[e]);
        ha[e] = e == NB - 1 ? ps->d[0].a : ps->d[e].a;
        hb[e] = e == NB - 1 ? ps->d[0].b : ps->d[e].b;
        hc[e] = ps->d[e].c;
    }
    GT_RT_OK(cudaMalloc((void **)&ps->a_arr, sizeof ha));
    GT_RT_OK(cudaMalloc((void **)&ps->b_arr, sizeof hb));
    GT_RT_OK(cudaMalloc((void **)&ps->c_arr, sizeof hc));
    GT_RT_OK(cudaMemcpy(ps->a_arr, ha, sizeof ha, cudaMemcpyHostToDevice));
    GT_RT_OK(cudaMemcpy(ps->b_arr, hb, sizeof hb, cudaMemcpyHostToDevice));
    GT_RT_OK(cudaMemcpy(ps->c_arr, hc, sizeof hc, cudaMemcpyHostToDevice));
}

static void check_and_free(problem_set_t *ps, const char *what)
{
    for (int e = 0; e < NB; e++) {
        void *out = gt_dev_download_c(&ps->g[e], &ps->d[e]);
        char w[64];
        snprintf(w, sizeof w, "%s entry %d", what, e);
        gt_gemm_check(&ps->g[e], out, w);
        free(out);
        gt_dev_free(&ps->d[e]);
        gt_gemm_free(&ps->g[e]);
    }
    GT_RT_OK(cudaFree(ps->a_arr));
    GT_RT_OK(cudaFree(ps->b_arr));
    GT_RT_OK(cudaFree(ps->c_arr));
}

static void test_sgemm_batched(void **state)
{
    gt_seed(41);
    cublasHandle_t h;
    GT_BLAS_OK(cublasCreate(&h));
    for (int t = 0; t < 4; t++) {
        gt_gemm_t shape = {.ta = t & 1, .tb = t >> 1, .m = 21, .n = 18, .k = 25,
                           .ab_type = CUDA_R_32F, .c_type = CUDA_R_32F, .alpha = 0.75,
                           .beta = -0.5};
        shape.lda = (shape.ta ? shape.k : shape.m) + 3;
        shape.ldb = (shape.tb ? shape.n : shape.k) + 1;
        shape.ldc = shape.m + 2;
        problem_set_t ps;
        set_up(&ps, &shape);
        float alpha = 0.75f, beta = -0.5f;
        cublasOperation_t ta = t & 1 ? CUBLAS_OP_T : CUBLAS_OP_N;
        cublasOperation_t tb = t >> 1 ? CUBLAS_OP_T : CUBLAS_OP_N;
        if (t == 3) {   /* the _64 entry point once */
            GT_BLAS_OK(cublasSgemmBatched_64(h, ta, tb, 21, 18, 25, &alpha,
                                             (const float *const *)ps.a_arr, shape.lda,
                                             (const float *const *)ps.b_arr, shape.ldb, &beta,
                                             (float *const *)ps.c_arr, shape.ldc, NB));
        } else {
            GT_BLAS_OK(cublasSgemmBatched(h, ta, tb, 21, 18, 25, &alpha,
                                          (const float *const *)ps.a_arr, (int)shape.lda,
                                          (const float *const *)ps.b_arr, (int)shape.ldb, &beta,
                                          (float *const *)ps.c_arr, (int)shape.ldc, NB));
        }
        char what[32];
        snprintf(what, sizeof what, "SgemmBatched trans %d", t);
        check_and_free(&ps, what);
    }
    GT_BLAS_OK(cublasDestroy(h));
}

static void test_dgemm_batched(void **state)
{
    gt_seed(42);
    cublasHandle_t h;
    GT_BLAS_OK(cublasCreate(&h));
    gt_gemm_t shape = {.ta = 1, .m = 15, .n = 14, .k = 33, .ab_type = CUDA_R_64F,
                       .c_type = CUDA_R_64F, .alpha = 1.0 / 3.0, .beta = 0.1};
    problem_set_t ps;
    set_up(&ps, &shape);
    double alpha = shape.alpha, beta = shape.beta;
    GT_BLAS_OK(cublasDgemmBatched(h, CUBLAS_OP_T, CUBLAS_OP_N, 15, 14, 33, &alpha,
                                  (const double *const *)ps.a_arr, (int)ps.g[0].lda,
                                  (const double *const *)ps.b_arr, (int)ps.g[0].ldb, &beta,
                                  (double *const *)ps.c_arr, (int)ps.g[0].ldc, NB));
    check_and_free(&ps, "DgemmBatched");
    /* The same through cublasGemmBatchedEx_64 with CUDA_R_64F and CUBLAS_COMPUTE_64F. */
    set_up(&ps, &shape);
    GT_BLAS_OK(cublasGemmBatchedEx_64(h, CUBLAS_OP_T, CUBLAS_OP_N, 15, 14, 33, &alpha,
                                      (const void *const *)ps.a_arr, CUDA_R_64F, ps.g[0].lda,
                                      (const void *const *)ps.b_arr, CUDA_R_64F, ps.g[0].ldb,
                                      &beta, ps.c_arr, CUDA_R_64F, ps.g[0].ldc, NB,
                                      CUBLAS_COMPUTE_64F, CUBLAS_GEMM_DEFAULT));
    check_and_free(&ps, "GemmBatchedEx_64 fp64");
    GT_BLAS_OK(cublasDestroy(h));
}

/* bf16 inputs, fp32 output, fp32 compute: the common mixed-precision row. */
static void test_gemm_batched_ex(void **state)
{
    gt_seed(43);
    cublasHandle_t h;
    GT_BLAS_OK(cublasCreate(&h));
    gt_gemm_t shape = {.tb = 1, .m = 16, .n = 24, .k = 32, .ab_type = CUDA_R_16BF,
                       .c_type = CUDA_R_32F, .alpha = 1.0, .beta = 1.0};
    problem_set_t ps;
    set_up(&ps, &shape);
    float alpha = 1.0f, beta = 1.0f;
    GT_BLAS_OK(cublasGemmBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_T, 16, 24, 32, &alpha,
                                   (const void *const *)ps.a_arr, CUDA_R_16BF, (int)ps.g[0].lda,
                                   (const void *const *)ps.b_arr, CUDA_R_16BF, (int)ps.g[0].ldb,
                                   &beta, ps.c_arr, CUDA_R_32F, (int)ps.g[0].ldc, NB,
                                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    check_and_free(&ps, "GemmBatchedEx bf16->f32");
    GT_BLAS_OK(cublasDestroy(h));
}

/* NVIDIA's gemmBatched sample: the pointer arrays are filled by an asynchronous copy on
 * the GEMM's stream just before the call, so at the call they still hold zeros. The GEMM
 * reads them when it runs, as the device does, and computes every entry. */
static void test_arrays_filled_just_before(void **state)
{
    (void)state;
    gt_seed(45);
    cublasHandle_t h;
    GT_BLAS_OK(cublasCreate(&h));
    cudaStream_t s;
    GT_RT_OK(cudaStreamCreate(&s));
    GT_BLAS_OK(cublasSetStream(h, s));
    gt_gemm_t shape = {.m = 12, .n = 10, .k = 9, .ab_type = CUDA_R_64F, .c_type = CUDA_R_64F,
                       .alpha = 1.0, .beta = 0.0};
    problem_set_t ps;
    set_up(&ps, &shape);
    void *ha[NB], *hb[NB], *hc[NB];
    GT_RT_OK(cudaMemcpy(ha, ps.a_arr, sizeof ha, cudaMemcpyDeviceToHost));
    GT_RT_OK(cudaMemcpy(hb, ps.b_arr, sizeof hb, cudaMemcpyDeviceToHost));
    GT_RT_OK(cudaMemcpy(hc, ps.c_arr, sizeof hc, cudaMemcpyDeviceToHost));
    GT_RT_OK(cudaMemset(ps.a_arr, 0, sizeof ha));
    GT_RT_OK(cudaMemset(ps.b_arr, 0, sizeof hb));
    GT_RT_OK(cudaMemset(ps.c_arr, 0, sizeof hc));
    /* Pageable sources are staged at the call; the copies run on s before the GEMM. */
    GT_RT_OK(cudaMemcpyAsync(ps.a_arr, ha, sizeof ha, cudaMemcpyHostToDevice, s));
    GT_RT_OK(cudaMemcpyAsync(ps.b_arr, hb, sizeof hb, cudaMemcpyHostToDevice, s));
    GT_RT_OK(cudaMemcpyAsync(ps.c_arr, hc, sizeof hc, cudaMemcpyHostToDevice, s));
    double alpha = 1.0, beta = 0.0;
    GT_BLAS_OK(cublasDgemmBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, 12, 10, 9, &alpha,
                                  (const double *const *)ps.a_arr, (int)ps.g[0].lda,
                                  (const double *const *)ps.b_arr, (int)ps.g[0].ldb, &beta,
                                  (double *const *)ps.c_arr, (int)ps.g[0].ldc, NB));
    GT_RT_OK(cudaStreamSynchronize(s));
    check_and_free(&ps, "DgemmBatched, arrays copied just before");
    GT_BLAS_OK(cublasDestroy(h));
    GT_RT_OK(cudaStreamDestroy(s));
}

/* The GEMM reads its pointer arrays when it runs: with the stream held busy, the array of C
 * pointers is rewritten in stream order after the call was made with the old one; only the
 * new targets change. */
static void test_arrays_read_at_execution(void **state)
{
    gt_seed(44);
    cublasHandle_t h;
    cudaStream_t s;
    GT_RT_OK(cudaStreamCreate(&s));
    GT_BLAS_OK(cublasCreate(&h));
    GT_BLAS_OK(cublasSetStream(h, s));
    gt_gemm_t shape = {.m = 8, .n = 8, .k = 8, .ab_type = CUDA_R_32F, .c_type = CUDA_R_32F,
                       .alpha = 1.0, .beta = 0.0};
    problem_set_t ps;
    set_up(&ps, &shape);
    /* Spare C buffers the rewritten array points to, filled with a sentinel. */
    float *spare;
    const size_t per = 64;
    GT_RT_OK(cudaMalloc((void **)&spare, NB * per * sizeof(float)));
    float sentinel[NB * 64];
    for (size_t i = 0; i < NB * per; i++) {
        sentinel[i] = -7.0f;
    }
    GT_RT_OK(cudaMemcpy(spare, sentinel, sizeof sentinel, cudaMemcpyHostToDevice));
    void *newc[NB];
    for (int e = 0; e < NB; e++) {
        newc[e] = spare + e * per;
    }
    GT_RT_OK(vgt_spin(1e6, 1.0, s));
    GT_RT_OK(cudaMemcpyAsync(ps.c_arr, newc, sizeof newc, cudaMemcpyHostToDevice, s));
    float alpha = 1.0f, beta = 0.0f;
    GT_BLAS_OK(cublasSgemmBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, 8, 8, 8, &alpha,
                                  (const float *const *)ps.a_arr, 8,
                                  (const float *const *)ps.b_arr, 8, &beta,
                                  (float *const *)ps.c_arr, 8, NB));
    GT_RT_OK(cudaStreamSynchronize(s));
    float got[NB * 64];
    GT_RT_OK(cudaMemcpy(got, spare, sizeof got, cudaMemcpyDeviceToHost));
    for (int e = 0; e < NB; e++) {
        /* Entry e's result landed in spare[e]: compare with the reference of problem e. */
        for (int j = 0; j < 8; j++) {
            for (int i = 0; i < 8; i++) {
                double want, bound;
                gt_gemm_ref(&ps.g[e], 0, i, j, &want, &bound, NULL);
                double v = got[e * per + (size_t)(i + j * 8)];
                if (!(fabs(v - want) <= bound))
                    fail_msg("entry %d (%d, %d) in the rewritten target: got %.9g, want %.9g "
                             "(bound %.3g)", e, i, j, v, want, bound);
            }
        }
        /* ... and the old targets kept their initial contents. */
        void *old = gt_dev_download_c(&ps.g[e], &ps.d[e]);
        if (memcmp(old, ps.g[e].c, ps.g[e].nc * sizeof(float)) != 0)
            fail_msg("entry %d: the C the array held at the call was written; expected the "
                     "array's value when the GEMM ran", e);
        free(old);
        memcpy(ps.g[e].c, got + e * per, 64 * sizeof(float));   /* for check_and_free */
        GT_RT_OK(cudaMemcpy(ps.d[e].c, ps.g[e].c, 64 * sizeof(float), cudaMemcpyHostToDevice));
        ps.g[e].beta = 1.0;
        ps.g[e].alpha = 0.0;
    }
    check_and_free(&ps, "after the rewrite (unchanged)");
    GT_RT_OK(cudaFree(spare));
    GT_BLAS_OK(cublasDestroy(h));
    GT_RT_OK(cudaStreamDestroy(s));
}

/* Statuses: batchCount < 0 is INVALID_VALUE, 0 is a successful no-op, a host pointer array
 * is not device memory (the vgpu says so; a GPU would fault). */
static void test_batched_statuses(void **state)
{
    cublasHandle_t h;
    GT_BLAS_OK(cublasCreate(&h));
    gt_gemm_t shape = {.m = 8, .n = 8, .k = 8, .ab_type = CUDA_R_32F, .c_type = CUDA_R_32F,
                       .alpha = 1.0, .beta = 0.0};
    problem_set_t ps;
    set_up(&ps, &shape);
    const float one = 1.0f, zero = 0.0f;
    const float *const *A = (const float *const *)ps.a_arr;
    const float *const *B = (const float *const *)ps.b_arr;
    float *const *C = (float *const *)ps.c_arr;
    GT_EXPECT_BLAS(CUBLAS_STATUS_INVALID_VALUE,
                   cublasSgemmBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, 8, 8, 8, &one, A, 8, B, 8,
                                      &zero, C, 8, -1));
    GT_EXPECT_BLAS(CUBLAS_STATUS_INVALID_VALUE,
                   cublasSgemmBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, 8, 8, 8, &one, A, 7, B, 8,
                                      &zero, C, 8, NB));
    GT_EXPECT_BLAS(CUBLAS_STATUS_NOT_INITIALIZED,
                   cublasSgemmBatched(NULL, CUBLAS_OP_N, CUBLAS_OP_N, 8, 8, 8, &one, A, 8, B, 8,
                                      &zero, C, 8, NB));
    GT_BLAS_OK(cublasSgemmBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, 8, 8, 8, &one, A, 8, B, 8, &zero,
                                  C, 8, 0));
    const float *host_a[NB] = {0};
    GT_EXPECT_BLAS(CUBLAS_STATUS_INVALID_VALUE,
                   cublasSgemmBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, 8, 8, 8, &one, host_a, 8, B,
                                      8, &zero, C, 8, NB));
    GT_EXPECT_BLAS(CUBLAS_STATUS_NOT_SUPPORTED,
                   cublasGemmBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 8, 8, 8, &one,
                                       (const void *const *)A, CUDA_R_16F,
                                       8, (const void *const *)B, CUDA_R_16BF, 8, &zero,
                                       (void *const *)C, CUDA_R_32F, 8, NB, CUBLAS_COMPUTE_32F,
                                       CUBLAS_GEMM_DEFAULT));
    GT_RT_OK(cudaDeviceSynchronize());
    for (int e = 0; e < NB; e++) {
        ps.g[e].alpha = 0.0;        /* nothing ran: C must still be what was uploaded */
        ps.g[e].beta = 1.0;
    }
    check_and_free(&ps, "failed calls wrote nothing");
    GT_BLAS_OK(cublasDestroy(h));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sgemm_batched),
        cmocka_unit_test(test_dgemm_batched),
        cmocka_unit_test(test_gemm_batched_ex),
        cmocka_unit_test(test_arrays_read_at_execution),
        cmocka_unit_test(test_arrays_filled_just_before),
        cmocka_unit_test(test_batched_statuses),
        cmocka_unit_test(vgt_test_no_hazards),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
