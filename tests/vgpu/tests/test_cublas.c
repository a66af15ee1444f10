/*
 * test_cublas.c (vgpu.cublas): the vgpu's libcublas.so.13 through the real cuBLAS API, as
 * PyTorch and Megatron call it: handles and their modes, every GEMM entry point against a
 * float64 reference (types, transposes, leading dimensions, batches, alpha/beta, the fp32
 * gradient accumulation of Megatron), host and device pointer modes with the moment each
 * reads its scalars, the documented error statuses, and the virtual time a GEMM takes.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>

#include "gemm_common.h"
#include "rt_common.h"
#include "vg.h"

/* Declared by cublas_api.h for C++ only; __half travels as its 16 bits. */
cublasStatus_t cublasHgemm(cublasHandle_t handle, cublasOperation_t transa,
                           cublasOperation_t transb, int m, int n, int k, const uint16_t *alpha,
                           const uint16_t *A, int lda, const uint16_t *B, int ldb,
                           const uint16_t *beta, uint16_t *C, int ldc);

static const cudaDataType_t types[3] = {CUDA_R_32F, CUDA_R_16F, CUDA_R_16BF};

static cublasOperation_t op(int t) { return t ? CUBLAS_OP_T : CUBLAS_OP_N; }

static cublasStatus_t gemm_ex(cublasHandle_t h, const gt_gemm_t *g, const gt_dev_t *d,
                              cublasComputeType_t compute)
{
    float alpha = (float)g->alpha, beta = (float)g->beta;
    return cublasGemmEx(h, op(g->ta), op(g->tb), (int)g->m, (int)g->n, (int)g->k, &alpha, d->a,
                        g->ab_type, (int)g->lda, d->b, g->ab_type, (int)g->ldb, &beta, d->c,
                        g->c_type, (int)g->ldc, compute, CUBLAS_GEMM_DEFAULT);
}

static int setup(void **state)
{
    vgt_register_kernels();
    return 0;
}

static void test_handle(void **state)
{
    cublasHandle_t h = NULL;
    GT_BLAS_OK(cublasCreate(&h));
    int version = 0;
    GT_BLAS_OK(cublasGetVersion(h, &version));
    assert_int_equal(version, CUBLAS_VERSION);
    int major = 0;
    GT_BLAS_OK(cublasGetProperty(MAJOR_VERSION, &major));
    assert_int_equal(major, CUBLAS_VER_MAJOR);

    cudaStream_t s, got_s = (cudaStream_t)1;
    GT_RT_OK(cudaStreamCreate(&s));
    GT_BLAS_OK(cublasGetStream(h, &got_s));
    assert_ptr_equal(got_s, NULL);
    GT_BLAS_OK(cublasSetStream(h, s));
    GT_BLAS_OK(cublasGetStream(h, &got_s));
    assert_ptr_equal(got_s, s);

    cublasPointerMode_t pm;
    GT_BLAS_OK(cublasGetPointerMode(h, &pm));
    assert_int_equal(pm, CUBLAS_POINTER_MODE_HOST);
    GT_BLAS_OK(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_DEVICE));
    GT_BLAS_OK(cublasGetPointerMode(h, &pm));
    assert_int_equal(pm, CUBLAS_POINTER_MODE_DEVICE);
    GT_EXPECT_BLAS(CUBLAS_STATUS_INVALID_VALUE, cublasSetPointerMode(h, (cublasPointerMode_t)5));

    cublasMath_t mm;
    GT_BLAS_OK(cublasGetMathMode(h, &mm));
    assert_int_equal(mm, CUBLAS_DEFAULT_MATH);
    GT_BLAS_OK(cublasSetMathMode(h, CUBLAS_TF32_TENSOR_OP_MATH));
    GT_BLAS_OK(cublasSetMathMode(
        h, (cublasMath_t)(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
    GT_BLAS_OK(cublasGetMathMode(h, &mm));
    assert_int_equal(mm, CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION);
    GT_EXPECT_BLAS(CUBLAS_STATUS_INVALID_VALUE, cublasSetMathMode(h, (cublasMath_t)7));

    cublasAtomicsMode_t am;
    GT_BLAS_OK(cublasSetAtomicsMode(h, CUBLAS_ATOMICS_ALLOWED));
    GT_BLAS_OK(cublasGetAtomicsMode(h, &am));
    assert_int_equal(am, CUBLAS_ATOMICS_ALLOWED);

    /* 256-byte alignment is required of a user workspace. */
    void *ws;
    GT_RT_OK(cudaMalloc(&ws, 1 << 16));
    GT_BLAS_OK(cublasSetWorkspace(h, ws, 1 << 16));
    GT_EXPECT_BLAS(CUBLAS_STATUS_INVALID_VALUE, cublasSetWorkspace(h, (char *)ws + 64, 1024));

    assert_string_equal(cublasGetStatusName(CUBLAS_STATUS_INVALID_VALUE),
                        "CUBLAS_STATUS_INVALID_VALUE");
    assert_non_null(cublasGetStatusString(CUBLAS_STATUS_NOT_SUPPORTED));

    GT_BLAS_OK(cublasDestroy(h));
    /* A destroyed or NULL handle is detected. */
    GT_EXPECT_BLAS(CUBLAS_STATUS_NOT_INITIALIZED, cublasSetStream(h, s));
    GT_EXPECT_BLAS(CUBLAS_STATUS_NOT_INITIALIZED, cublasDestroy(h));
    GT_EXPECT_BLAS(CUBLAS_STATUS_NOT_INITIALIZED, cublasGetVersion(NULL, &version));
    GT_RT_OK(cudaFree(ws));
    GT_RT_OK(cudaStreamDestroy(s));
}

/* cublasSgemm with every transpose (OP_C means OP_T for real types) and padded lds. */
static void test_sgemm(void **state)
{
    gt_seed(11);
    cublasHandle_t h;
    GT_BLAS_OK(cublasCreate(&h));
    const cublasOperation_t ops[3] = {CUBLAS_OP_N, CUBLAS_OP_T, CUBLAS_OP_C};
    for (int ia = 0; ia < 3; ia++) {
        for (int ib = 0; ib < 3; ib++) {
            gt_gemm_t g = {.ta = ia != 0, .tb = ib != 0, .m = 45, .n = 38, .k = 52,
                           .ab_type = CUDA_R_32F, .c_type = CUDA_R_32F, .alpha = -1.25,
                           .beta = 0.5};
            g.lda = (g.ta ? g.k : g.m) + 7;
            g.ldb = (g.tb ? g.n : g.k) + 1;
            g.ldc = g.m + 3;
            gt_gemm_init(&g);
            gt_dev_t d;
            gt_dev_upload(&g, &d);
            float alpha = (float)g.alpha, beta = (float)g.beta;
            GT_BLAS_OK(cublasSgemm(h, ops[ia], ops[ib], (int)g.m, (int)g.n, (int)g.k, &alpha,
                                   d.a, (int)g.lda, d.b, (int)g.ldb, &beta, d.c, (int)g.ldc));
            void *out = gt_dev_download_c(&g, &d);
            char what[32];
            snprintf(what, sizeof what, "sgemm op %d %d", ia, ib);
            gt_gemm_check(&g, out, what);
            free(out);
            gt_dev_free(&d);
            gt_gemm_free(&g);
        }
    }
    GT_BLAS_OK(cublasDestroy(h));
}

static void test_gemm_ex_types(void **state)
{
    gt_seed(12);
    cublasHandle_t h;
    GT_BLAS_OK(cublasCreate(&h));
    for (int t = 0; t < 3; t++) {
        for (int out32 = 0; out32 < 2; out32++) {
            for (int tt = 0; tt < 4; tt++) {
                gt_gemm_t g = {.ta = tt & 1, .tb = tt >> 1, .m = 33, .n = 40, .k = 27,
                               .ab_type = types[t], .c_type = out32 ? CUDA_R_32F : types[t],
                               .ldc = 35, .alpha = 1.0, .beta = -1.0};
                gt_gemm_init(&g);
                gt_dev_t d;
                gt_dev_upload(&g, &d);
                GT_BLAS_OK(gemm_ex(h, &g, &d, CUBLAS_COMPUTE_32F));
                void *out = gt_dev_download_c(&g, &d);
                char what[48];
                snprintf(what, sizeof what, "GemmEx type %d out32 %d trans %d", (int)types[t],
                         out32, tt);
                gt_gemm_check(&g, out, what);
                free(out);
                gt_dev_free(&d);
                gt_gemm_free(&g);
            }
        }
    }
    /* fp32 with the TF32 compute type (computed in full fp32 by the vgpu). */
    gt_gemm_t g = {.ta = 1, .m = 20, .n = 21, .k = 22, .ab_type = CUDA_R_32F,
                   .c_type = CUDA_R_32F, .alpha = 2.0, .beta = 0.0};
    gt_gemm_init(&g);
    gt_dev_t d;
    gt_dev_upload(&g, &d);
    GT_BLAS_OK(gemm_ex(h, &g, &d, CUBLAS_COMPUTE_32F_FAST_TF32));
    void *out = gt_dev_download_c(&g, &d);
    gt_gemm_check(&g, out, "GemmEx FAST_TF32");
    free(out);
    gt_dev_free(&d);
    gt_gemm_free(&g);
    GT_BLAS_OK(cublasDestroy(h));
}

/* Megatron's gradient_accumulation_fusion: bf16 (and fp16) inputs accumulated into an fp32
 * main_grad with beta = 1, twice, each result checked against the one before it. */
static void test_fp32_accumulation(void **state)
{
    gt_seed(13);
    cublasHandle_t h;
    GT_BLAS_OK(cublasCreate(&h));
    for (int t = 1; t < 3; t++) {
        gt_gemm_t g = {.ta = 0, .tb = 1, .m = 64, .n = 48, .k = 96, .ab_type = types[t],
                       .c_type = CUDA_R_32F, .alpha = 1.0, .beta = 1.0};
        gt_gemm_init(&g);
        gt_dev_t d;
        gt_dev_upload(&g, &d);
        for (int round = 0; round < 2; round++) {
            GT_BLAS_OK(gemm_ex(h, &g, &d, CUBLAS_COMPUTE_32F));
            void *out = gt_dev_download_c(&g, &d);
            gt_gemm_check(&g, out, round ? "second accumulation" : "first accumulation");
            memcpy(g.c, out, g.nc * sizeof(float));   /* the next round starts from here */
            free(out);
        }
        gt_dev_free(&d);
        gt_gemm_free(&g);
    }
    GT_BLAS_OK(cublasDestroy(h));
}

static void test_strided_batched(void **state)
{
    gt_seed(14);
    cublasHandle_t h;
    GT_BLAS_OK(cublasCreate(&h));
    for (int t = 0; t < 3; t++) {
        gt_gemm_t g = {.ta = 1, .tb = 0, .m = 19, .n = 23, .k = 31, .batch = 4,
                       .ab_type = types[t], .c_type = types[t], .lda = 33, .ldb = 32, .ldc = 20,
                       .sa = 33 * 19 + 9, .sb = 32 * 23 + 4, .sc = 20 * 23 + 6, .alpha = 0.5,
                       .beta = 2.0};
        gt_gemm_init(&g);
        gt_dev_t d;
        gt_dev_upload(&g, &d);
        float alpha = (float)g.alpha, beta = (float)g.beta;
        if (t == 0) {
            GT_BLAS_OK(cublasSgemmStridedBatched(h, op(g.ta), op(g.tb), (int)g.m, (int)g.n,
                                                 (int)g.k, &alpha, d.a, (int)g.lda, g.sa, d.b,
                                                 (int)g.ldb, g.sb, &beta, d.c, (int)g.ldc, g.sc,
                                                 (int)g.batch));
        } else {
            GT_BLAS_OK(cublasGemmStridedBatchedEx(
                h, op(g.ta), op(g.tb), (int)g.m, (int)g.n, (int)g.k, &alpha, d.a, g.ab_type,
                (int)g.lda, g.sa, d.b, g.ab_type, (int)g.ldb, g.sb, &beta, d.c, g.c_type,
                (int)g.ldc, g.sc, (int)g.batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        }
        void *out = gt_dev_download_c(&g, &d);
        gt_gemm_check(&g, out, "strided batched");
        free(out);
        gt_dev_free(&d);
        gt_gemm_free(&g);
    }
    GT_BLAS_OK(cublasDestroy(h));
}

static void test_hgemm(void **state)
{
    gt_seed(15);
    cublasHandle_t h;
    GT_BLAS_OK(cublasCreate(&h));
    gt_gemm_t g = {.ta = 0, .tb = 1, .m = 17, .n = 15, .k = 24, .ab_type = CUDA_R_16F,
                   .c_type = CUDA_R_16F, .alpha = 0.5, .beta = 1.0};
    gt_gemm_init(&g);
    gt_dev_t d;
    gt_dev_upload(&g, &d);
    uint16_t alpha = gt_f16_from_float(0.5f), beta = gt_f16_from_float(1.0f);
    GT_BLAS_OK(cublasHgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, 17, 15, 24, &alpha, d.a, (int)g.lda, d.b,
                           (int)g.ldb, &beta, d.c, (int)g.ldc));
    void *out = gt_dev_download_c(&g, &d);
    gt_gemm_check(&g, out, "hgemm");
    free(out);
    gt_dev_free(&d);
    gt_gemm_free(&g);
    GT_BLAS_OK(cublasDestroy(h));
}

/* beta == 0 must not read C: the NaN garbage there must not reach the result. */
static void test_beta_zero_nan_c(void **state)
{
    gt_seed(16);
    cublasHandle_t h;
    GT_BLAS_OK(cublasCreate(&h));
    gt_gemm_t g = {.m = 30, .n = 20, .k = 10, .ab_type = CUDA_R_16BF, .c_type = CUDA_R_16BF,
                   .alpha = 1.0, .beta = 0.0, .c_nan = 1};
    gt_gemm_init(&g);
    gt_dev_t d;
    gt_dev_upload(&g, &d);
    GT_BLAS_OK(gemm_ex(h, &g, &d, CUBLAS_COMPUTE_32F));
    void *out = gt_dev_download_c(&g, &d);
    gt_gemm_check(&g, out, "beta 0 over NaN");
    free(out);
    gt_dev_free(&d);
    gt_gemm_free(&g);
    GT_BLAS_OK(cublasDestroy(h));
}

/* Host pointer mode: the scalars are read during the call. The stream is held busy by a
 * long kernel so the GEMM runs well after the caller has overwritten them. */
static void test_host_scalars_read_at_call(void **state)
{
    gt_seed(17);
    cublasHandle_t h;
    cudaStream_t s;
    GT_RT_OK(cudaStreamCreate(&s));
    GT_BLAS_OK(cublasCreate(&h));
    GT_BLAS_OK(cublasSetStream(h, s));
    gt_gemm_t g = {.m = 12, .n = 11, .k = 10, .ab_type = CUDA_R_32F, .c_type = CUDA_R_32F,
                   .alpha = 1.5, .beta = -0.5};
    gt_gemm_init(&g);
    gt_dev_t d;
    gt_dev_upload(&g, &d);
    GT_RT_OK(vgt_spin(1e6, 1.0, s));
    float alpha = 1.5f, beta = -0.5f;
    GT_BLAS_OK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 12, 11, 10, &alpha, d.a, (int)g.lda, d.b,
                           (int)g.ldb, &beta, d.c, (int)g.ldc));
    alpha = 100.0f;
    beta = 100.0f;
    void *out = gt_dev_download_c(&g, &d);
    gt_gemm_check(&g, out, "host scalars changed after the call");
    free(out);
    gt_dev_free(&d);
    gt_gemm_free(&g);
    GT_BLAS_OK(cublasDestroy(h));
    GT_RT_OK(cudaStreamDestroy(s));
}

/* Device pointer mode: the scalars are read when the GEMM runs, in stream order. On the
 * stream: a long kernel, a copy setting alpha to 2, the GEMM, a copy setting alpha to 5.
 * Read at the call, alpha would be 1; read after everything, 5; the right answer is 2.
 * beta is 0 in device memory over a NaN C, so C must not be read either. */
static void test_device_scalars_read_at_execution(void **state)
{
    gt_seed(18);
    cublasHandle_t h;
    cudaStream_t s;
    GT_RT_OK(cudaStreamCreate(&s));
    GT_BLAS_OK(cublasCreate(&h));
    GT_BLAS_OK(cublasSetStream(h, s));
    GT_BLAS_OK(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_DEVICE));
    gt_gemm_t g = {.ta = 1, .tb = 1, .m = 14, .n = 9, .k = 21, .ab_type = CUDA_R_16F,
                   .c_type = CUDA_R_32F, .alpha = 2.0, .beta = 0.0, .c_nan = 1};
    gt_gemm_init(&g);
    gt_dev_t d;
    gt_dev_upload(&g, &d);
    float *scal;
    GT_RT_OK(cudaMalloc((void **)&scal, 2 * sizeof(float)));
    const float init[2] = {1.0f, 0.0f}, two = 2.0f, five = 5.0f;
    GT_RT_OK(cudaMemcpy(scal, init, sizeof init, cudaMemcpyHostToDevice));
    GT_RT_OK(vgt_spin(1e6, 1.0, s));
    GT_RT_OK(cudaMemcpyAsync(scal, &two, sizeof two, cudaMemcpyHostToDevice, s));
    GT_BLAS_OK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_T, 14, 9, 21, scal, d.a, g.ab_type,
                            (int)g.lda, d.b, g.ab_type, (int)g.ldb, scal + 1, d.c, g.c_type,
                            (int)g.ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    GT_RT_OK(cudaMemcpyAsync(scal, &five, sizeof five, cudaMemcpyHostToDevice, s));
    void *out = gt_dev_download_c(&g, &d);
    gt_gemm_check(&g, out, "device scalars");
    free(out);
    /* Host addresses are not device scalars. */
    float host_alpha = 1.0f, host_beta = 0.0f;
    GT_EXPECT_BLAS(CUBLAS_STATUS_INVALID_VALUE,
                   cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_T, 14, 9, 21, &host_alpha, d.a,
                                g.ab_type, (int)g.lda, d.b, g.ab_type, (int)g.ldb, &host_beta,
                                d.c, g.c_type, (int)g.ldc, CUBLAS_COMPUTE_32F,
                                CUBLAS_GEMM_DEFAULT));
    gt_dev_free(&d);
    gt_gemm_free(&g);
    GT_RT_OK(cudaFree(scal));
    GT_BLAS_OK(cublasDestroy(h));
    GT_RT_OK(cudaStreamDestroy(s));
}

/* The statuses cuBLAS documents for bad arguments. */
static void test_invalid_arguments(void **state)
{
    cublasHandle_t h;
    GT_BLAS_OK(cublasCreate(&h));
    float *a, *b, *c, *gone;
    GT_RT_OK(cudaMalloc((void **)&a, 64 * 64 * sizeof(float)));
    GT_RT_OK(cudaMalloc((void **)&b, 64 * 64 * sizeof(float)));
    GT_RT_OK(cudaMalloc((void **)&c, 64 * 64 * sizeof(float)));
    GT_RT_OK(cudaMalloc((void **)&gone, 64 * 64 * sizeof(float)));
    GT_RT_OK(cudaFree(gone));
    float *host = calloc(64 * 64, sizeof(float));
    assert_non_null(host);
    const float one = 1.0f, zero = 0.0f;
    const cublasOperation_t N = CUBLAS_OP_N, T = CUBLAS_OP_T;
#define SG(st, hh, ta, tb, m, n, k, A, lda, B, ldb, C, ldc)                                  \
    GT_EXPECT_BLAS(st, cublasSgemm(hh, ta, tb, m, n, k, &one, A, lda, B, ldb, &zero, C, ldc))
    SG(CUBLAS_STATUS_NOT_INITIALIZED, NULL, N, N, 8, 8, 8, a, 8, b, 8, c, 8);
    SG(CUBLAS_STATUS_INVALID_VALUE, h, N, N, -1, 8, 8, a, 8, b, 8, c, 8);
    SG(CUBLAS_STATUS_INVALID_VALUE, h, N, N, 8, -1, 8, a, 8, b, 8, c, 8);
    SG(CUBLAS_STATUS_INVALID_VALUE, h, N, N, 8, 8, -1, a, 8, b, 8, c, 8);
    SG(CUBLAS_STATUS_INVALID_VALUE, h, N, N, 8, 8, 8, a, 7, b, 8, c, 8);    /* lda < m */
    SG(CUBLAS_STATUS_INVALID_VALUE, h, T, N, 8, 8, 9, a, 8, b, 9, c, 8);    /* lda < k */
    SG(CUBLAS_STATUS_INVALID_VALUE, h, N, N, 8, 8, 9, a, 8, b, 8, c, 8);    /* ldb < k */
    SG(CUBLAS_STATUS_INVALID_VALUE, h, N, T, 8, 9, 8, a, 8, b, 8, c, 8);    /* ldb < n */
    SG(CUBLAS_STATUS_INVALID_VALUE, h, N, N, 8, 8, 8, a, 8, b, 8, c, 7);    /* ldc < m */
    SG(CUBLAS_STATUS_INVALID_VALUE, h, (cublasOperation_t)7, N, 8, 8, 8, a, 8, b, 8, c, 8);
    SG(CUBLAS_STATUS_INVALID_VALUE, h, N, N, 8, 8, 8, host, 8, b, 8, c, 8); /* not device */
    SG(CUBLAS_STATUS_INVALID_VALUE, h, N, N, 8, 8, 8, a, 8, gone, 8, c, 8); /* freed */
    SG(CUBLAS_STATUS_INVALID_VALUE, h, N, N, 64, 65, 8, a, 64, b, 8, c, 64); /* C too small */
    SG(CUBLAS_STATUS_SUCCESS, h, N, N, 0, 8, 8, NULL, 1, NULL, 8, NULL, 1);  /* empty */
    GT_EXPECT_BLAS(CUBLAS_STATUS_INVALID_VALUE,
                   cublasSgemm(h, N, N, 8, 8, 8, NULL, a, 8, b, 8, &zero, c, 8));
#undef SG
#define GX(st, at, bt, ct, compute)                                                           \
    GT_EXPECT_BLAS(st, cublasGemmEx(h, N, N, 8, 8, 8, &one, a, at, 8, b, bt, 8, &zero, c, ct, \
                                    8, compute, CUBLAS_GEMM_DEFAULT))
    GX(CUBLAS_STATUS_SUCCESS, CUDA_R_16BF, CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F);
    GX(CUBLAS_STATUS_NOT_SUPPORTED, CUDA_R_16F, CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F);
    GX(CUBLAS_STATUS_NOT_SUPPORTED, CUDA_R_16F, CUDA_R_16F, CUDA_R_16BF, CUBLAS_COMPUTE_32F);
    GX(CUBLAS_STATUS_NOT_SUPPORTED, CUDA_R_16F, CUDA_R_16F, CUDA_R_16F,
       CUBLAS_COMPUTE_32F_FAST_TF32);
    GX(CUBLAS_STATUS_NOT_SUPPORTED, CUDA_R_64F, CUDA_R_64F, CUDA_R_64F, CUBLAS_COMPUTE_32F);
    GX(CUBLAS_STATUS_NOT_SUPPORTED, CUDA_R_8I, CUDA_R_8I, CUDA_R_32I, CUBLAS_COMPUTE_32I);
    GX(CUBLAS_STATUS_NOT_SUPPORTED, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_16F);
#undef GX
    GT_EXPECT_BLAS(CUBLAS_STATUS_INVALID_VALUE,
                   cublasSgemmStridedBatched(h, N, N, 8, 8, 8, &one, a, 8, 64, b, 8, 64, &zero, c,
                                             8, 64, -1));
    /* The batch must fit: 4 packed 32x32 matrices do not fit in 64x64 floats plus 1. */
    GT_EXPECT_BLAS(CUBLAS_STATUS_INVALID_VALUE,
                   cublasSgemmStridedBatched(h, N, N, 32, 32, 32, &one, a, 32, 1025, b, 32, 1024,
                                             &zero, c, 32, 1024, 4));
    GT_RT_OK(cudaDeviceSynchronize());
    free(host);
    GT_RT_OK(cudaFree(a));
    GT_RT_OK(cudaFree(b));
    GT_RT_OK(cudaFree(c));
    GT_BLAS_OK(cublasDestroy(h));
}

/* Virtual time of one GEMM: exactly vg_cost_gemm for its shape and cost class (fp32, TF32
 * by math mode, bf16). A long kernel first keeps the stream busy so that the events and the
 * GEMM run back to back with no issue gap. */
static double timed(cublasHandle_t h, cudaStream_t s, cudaDataType_t t, int m, int n, int k,
                    void *a, void *b, void *c)
{
    cudaEvent_t e0, e1;
    GT_RT_OK(cudaEventCreate(&e0));
    GT_RT_OK(cudaEventCreate(&e1));
    GT_RT_OK(vgt_spin(1e6, 1.0, s));
    GT_RT_OK(cudaEventRecord(e0, s));
    float one = 1.0f, zero = 0.0f;
    GT_BLAS_OK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, a, t, m, b, t, k, &zero,
                            c, t, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    GT_RT_OK(cudaEventRecord(e1, s));
    GT_RT_OK(cudaEventSynchronize(e1));
    double ns = vgt_elapsed_ns(e0, e1);
    GT_RT_OK(cudaEventDestroy(e0));
    GT_RT_OK(cudaEventDestroy(e1));
    return ns;
}

static void test_virtual_time(void **state)
{
    const int m = 256, n = 384, k = 512;
    cublasHandle_t h;
    cudaStream_t s;
    GT_RT_OK(cudaStreamCreate(&s));
    GT_BLAS_OK(cublasCreate(&h));
    GT_BLAS_OK(cublasSetStream(h, s));
    void *a, *b, *c;
    GT_RT_OK(cudaMalloc(&a, (size_t)m * k * 4));
    GT_RT_OK(cudaMalloc(&b, (size_t)k * n * 4));
    GT_RT_OK(cudaMalloc(&c, (size_t)m * n * 4));
    GT_RT_OK(cudaMemset(a, 0, (size_t)m * k * 4));
    GT_RT_OK(cudaMemset(b, 0, (size_t)k * n * 4));
    int dev = 0;
    GT_RT_OK(cudaGetDevice(&dev));
    const vgpu_profile_t *p = vg_profile(dev);
    double want32 = vg_cost_gemm(p, m, n, k, 1, 32);
    double want19 = vg_cost_gemm(p, m, n, k, 1, 19);
    double want17 = vg_cost_gemm(p, m, n, k, 1, 17);
    VGT_NEAR("fp32 GEMM ns", want32, timed(h, s, CUDA_R_32F, m, n, k, a, b, c), 10, 1e-4);
    GT_BLAS_OK(cublasSetMathMode(h, CUBLAS_TF32_TENSOR_OP_MATH));
    VGT_NEAR("fp32 GEMM with TF32 math ns", want19, timed(h, s, CUDA_R_32F, m, n, k, a, b, c),
             10, 1e-4);
    VGT_NEAR("bf16 GEMM ns", want17, timed(h, s, CUDA_R_16BF, m, n, k, a, b, c), 10, 1e-4);
    assert_true(want19 < want32);
    GT_RT_OK(cudaFree(a));
    GT_RT_OK(cudaFree(b));
    GT_RT_OK(cudaFree(c));
    GT_BLAS_OK(cublasDestroy(h));
    GT_RT_OK(cudaStreamDestroy(s));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_handle),
        cmocka_unit_test(test_sgemm),
        cmocka_unit_test(test_gemm_ex_types),
        cmocka_unit_test(test_fp32_accumulation),
        cmocka_unit_test(test_strided_batched),
        cmocka_unit_test(test_hgemm),
        cmocka_unit_test(test_beta_zero_nan_c),
        cmocka_unit_test(test_host_scalars_read_at_call),
        cmocka_unit_test(test_device_scalars_read_at_execution),
        cmocka_unit_test(test_invalid_arguments),
        cmocka_unit_test(test_virtual_time),
        cmocka_unit_test(vgt_test_no_hazards),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
