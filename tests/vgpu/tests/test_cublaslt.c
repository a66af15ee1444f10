/*
 * test_cublaslt.c (vgpu.cublaslt): the vgpu's libcublasLt.so.13 through the real API, the
 * way PyTorch's addmm/baddbmm (CUDABlas.cpp) and Transformer Engine use it: descriptors,
 * layouts and preferences with their attribute rules, the heuristic and its workspace,
 * cublasLtMatmul for every type and transpose with the BIAS, RELU, GELU and GELU_AUX
 * epilogues against a float64 reference, strided batches, descriptors destroyed before
 * the work runs, a cuBLAS handle used as a cuBLASLt handle, and the documented errors.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>
#include <cublas_v2.h>

#include "gemm_common.h"
#include "rt_common.h"

static const cudaDataType_t types[3] = {CUDA_R_32F, CUDA_R_16F, CUDA_R_16BF};

#define MiB ((size_t)1 << 20)

static int setup(void **state)
{
    vgt_register_kernels();
    return 0;
}

/* How one cublasLtMatmul of a gt_gemm_t is issued. */
typedef struct lt_opts {
    cublasLtHandle_t handle;
    cudaStream_t stream;
    int use_algo;          /* pass the heuristic's algo (else NULL) */
    size_t pref_ws;        /* CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES */
    void *ws;              /* workspace passed to cublasLtMatmul */
    size_t ws_size;
    void *aux;             /* GELU_AUX: pre-activation output, ld aux_ld */
    int64_t aux_ld;
    const float *dev_scalars; /* device pointer mode: alpha, beta */
    size_t heuristic_ws;   /* out: the heuristic's workspaceSize */
} lt_opts_t;

static cublasLtEpilogue_t lt_epilogue(unsigned epi, int aux)
{
    if (epi & GT_EPI_GELU) {
        if (aux) {
            return (epi & GT_EPI_BIAS) ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS
                                       : CUBLASLT_EPILOGUE_GELU_AUX;
        }
        return (epi & GT_EPI_BIAS) ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
    }
    if (epi & GT_EPI_RELU) {
        return (epi & GT_EPI_BIAS) ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
    }
    return (epi & GT_EPI_BIAS) ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
}

static cublasLtMatrixLayout_t layout(cudaDataType_t t, int64_t rows, int64_t cols, int64_t ld,
                                     int64_t batch, int64_t stride)
{
    cublasLtMatrixLayout_t l;
    GT_BLAS_OK(cublasLtMatrixLayoutCreate(&l, t, (uint64_t)rows, (uint64_t)cols, ld));
    if (batch > 1) {
        int32_t b = (int32_t)batch;
        GT_BLAS_OK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &b,
                                                    sizeof b));
        GT_BLAS_OK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                    &stride, sizeof stride));
    }
    return l;
}

/* Issues g as PyTorch does: descriptors built, heuristic asked, matmul issued, everything
 * destroyed before returning (and long before the device runs it). */
static cublasStatus_t lt_matmul(const gt_gemm_t *g, const gt_dev_t *d, lt_opts_t *o)
{
    cublasLtMatmulDesc_t desc;
    GT_BLAS_OK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    int32_t ta = g->ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb = g->tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    GT_BLAS_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    GT_BLAS_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    uint32_t epi = lt_epilogue(g->epi, o->aux != NULL);
    GT_BLAS_OK(
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    if (g->epi & GT_EPI_BIAS) {
        GT_BLAS_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                  &d->bias, sizeof d->bias));
        if (g->bias_type != g->c_type) {
            int32_t bt = g->bias_type;
            GT_BLAS_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                                      &bt, sizeof bt));
        }
    }
    if (o->aux) {
        GT_BLAS_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                                  &o->aux, sizeof o->aux));
        GT_BLAS_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD,
                                                  &o->aux_ld, sizeof o->aux_ld));
    }
    if (o->dev_scalars) {
        int32_t pm = CUBLASLT_POINTER_MODE_DEVICE;
        GT_BLAS_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_POINTER_MODE, &pm,
                                                  sizeof pm));
    }
    cublasLtMatrixLayout_t la = layout(g->ab_type, g->ta ? g->k : g->m, g->ta ? g->m : g->k,
                                       g->lda, g->batch, g->sa);
    cublasLtMatrixLayout_t lb = layout(g->ab_type, g->tb ? g->n : g->k, g->tb ? g->k : g->n,
                                       g->ldb, g->batch, g->sb);
    cublasLtMatrixLayout_t lc = layout(g->c_type, g->m, g->n, g->ldc, g->batch, g->sc);
    cublasLtMatmulPreference_t pref;
    GT_BLAS_OK(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t max_ws = o->pref_ws;
    GT_BLAS_OK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &max_ws, sizeof max_ws));
    cublasLtMatmulHeuristicResult_t res;
    int nres = 0;
    GT_BLAS_OK(
        cublasLtMatmulAlgoGetHeuristic(o->handle, desc, la, lb, lc, lc, pref, 1, &res, &nres));
    assert_int_equal(nres, 1);
    assert_int_equal(res.state, CUBLAS_STATUS_SUCCESS);
    o->heuristic_ws = res.workspaceSize;
    float alpha = (float)g->alpha, beta = (float)g->beta;
    const void *pa = o->dev_scalars ? (const void *)o->dev_scalars : (const void *)&alpha;
    const void *pb = o->dev_scalars ? (const void *)(o->dev_scalars + 1) : (const void *)&beta;
    cublasStatus_t st = cublasLtMatmul(o->handle, desc, pa, d->a, la, d->b, lb, pb, d->c, lc, d->c,
                                       lc, o->use_algo ? &res.algo : NULL, o->ws, o->ws_size,
                                       o->stream);
    GT_BLAS_OK(cublasLtMatmulPreferenceDestroy(pref));
    GT_BLAS_OK(cublasLtMatrixLayoutDestroy(la));
    GT_BLAS_OK(cublasLtMatrixLayoutDestroy(lb));
    GT_BLAS_OK(cublasLtMatrixLayoutDestroy(lc));
    GT_BLAS_OK(cublasLtMatmulDescDestroy(desc));
    return st;
}

/* Runs g through lt_matmul with a fresh handle and a 1 MiB workspace, checks the result. */
static void run_and_check(gt_gemm_t *g, int with_aux, const char *what)
{
    cublasLtHandle_t h;
    GT_BLAS_OK(cublasLtCreate(&h));
    gt_dev_t d;
    gt_dev_upload(g, &d);
    void *ws = NULL, *aux = NULL;
    GT_RT_OK(cudaMalloc(&ws, MiB));
    int64_t aux_ld = (g->m + 7) / 8 * 8;
    size_t aux_bytes = (size_t)(aux_ld * g->n) * gt_type_size(g->c_type);
    if (with_aux) {
        GT_RT_OK(cudaMalloc(&aux, aux_bytes));
    }
    lt_opts_t o = {.handle = h, .use_algo = 1, .pref_ws = MiB, .ws = ws, .ws_size = MiB,
                   .aux = aux, .aux_ld = aux_ld};
    GT_BLAS_OK(lt_matmul(g, &d, &o));
    void *out = gt_dev_download_c(g, &d);
    gt_gemm_check(g, out, what);
    free(out);
    if (with_aux) {
        void *host_aux = malloc(aux_bytes);
        assert_non_null(host_aux);
        GT_RT_OK(cudaMemcpy(host_aux, aux, aux_bytes, cudaMemcpyDeviceToHost));
        gt_gemm_check_aux(g, host_aux, aux_ld, 0, what);
        free(host_aux);
        GT_RT_OK(cudaFree(aux));
    }
    GT_RT_OK(cudaFree(ws));
    gt_dev_free(&d);
    GT_BLAS_OK(cublasLtDestroy(h));
}

/* ---- descriptors ---- */

static void test_desc_attributes(void **state)
{
    cublasLtMatmulDesc_t desc;
    GT_BLAS_OK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    int32_t v = -5;
    size_t written = 0;
    GT_BLAS_OK(cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &v, sizeof v,
                                              &written));
    assert_int_equal(v, CUBLAS_OP_N);
    assert_int_equal(written, sizeof v);
    v = CUBLAS_OP_T;
    GT_BLAS_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &v, sizeof v));
    v = 0;
    GT_BLAS_OK(
        cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &v, sizeof v, NULL));
    assert_int_equal(v, CUBLAS_OP_T);
    /* Size query: sizeInBytes 0 reports the size in sizeWritten. */
    written = 0;
    GT_BLAS_OK(cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, NULL, 0,
                                              &written));
    assert_int_equal(written, sizeof(void *));
    GT_EXPECT_BLAS(
        CUBLAS_STATUS_INVALID_VALUE,
        cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, NULL, 0, NULL));
    GT_EXPECT_BLAS(
        CUBLAS_STATUS_INVALID_VALUE,
        cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, NULL, 4, &written));
    int64_t wide = 1;
    GT_EXPECT_BLAS(
        CUBLAS_STATUS_INVALID_VALUE,
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &wide, sizeof wide));
    GT_EXPECT_BLAS(CUBLAS_STATUS_INVALID_VALUE,
                   cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, NULL, 4));
    GT_EXPECT_BLAS(
        CUBLAS_STATUS_INVALID_VALUE,
        cublasLtMatmulDescSetAttribute(desc, (cublasLtMatmulDescAttributes_t)9, &v, sizeof v));
    GT_EXPECT_BLAS(CUBLAS_STATUS_INVALID_VALUE,
                   cublasLtMatmulDescGetAttribute(desc, (cublasLtMatmulDescAttributes_t)999, &v,
                                                  sizeof v, &written));
    uint32_t epi = 0;
    GT_BLAS_OK(cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi,
                                              NULL));
    assert_int_equal(epi, CUBLASLT_EPILOGUE_DEFAULT);
    int32_t ct = 0, bt = 0;
    GT_BLAS_OK(cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, &ct,
                                              sizeof ct, NULL));
    assert_int_equal(ct, CUBLAS_COMPUTE_32F);
    GT_BLAS_OK(cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt,
                                              sizeof bt, NULL));
    assert_int_equal(bt, -1);
    int8_t fast = 1;
    GT_BLAS_OK(
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast));
    GT_BLAS_OK(cublasLtMatmulDescDestroy(desc));

    /* Descriptors initialised in caller storage, as the inline *Init helpers do. */
    cublasLtMatmulDescOpaque_t storage;
    GT_BLAS_OK(cublasLtMatmulDescInit(&storage, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    GT_BLAS_OK(cublasLtMatmulDescGetAttribute(&storage, CUBLASLT_MATMUL_DESC_SCALE_TYPE, &ct,
                                              sizeof ct, NULL));
    assert_int_equal(ct, CUDA_R_32F);
}

static void test_layout_and_preference_attributes(void **state)
{
    cublasLtMatrixLayout_t l;
    GT_BLAS_OK(cublasLtMatrixLayoutCreate(&l, CUDA_R_16BF, 10, 20, 12));
    uint64_t rows = 0;
    int64_t ld = 0, stride = 777;
    int32_t batch = 0, order = -1;
    uint32_t type = 0;
    size_t written = 0;
    GT_BLAS_OK(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ROWS, &rows, sizeof rows,
                                                &written));
    assert_int_equal(rows, 10);
    assert_int_equal(written, 8);
    GT_BLAS_OK(
        cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_LD, &ld, sizeof ld, NULL));
    assert_int_equal(ld, 12);
    GT_BLAS_OK(
        cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_TYPE, &type, sizeof type, NULL));
    assert_int_equal(type, CUDA_R_16BF);
    GT_BLAS_OK(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ORDER, &order,
                                                sizeof order, NULL));
    assert_int_equal(order, CUBLASLT_ORDER_COL);
    GT_BLAS_OK(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
                                                sizeof batch, NULL));
    assert_int_equal(batch, 1);
    batch = 3;
    GT_BLAS_OK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
                                                sizeof batch));
    GT_BLAS_OK(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                &stride, sizeof stride, NULL));
    assert_int_equal(stride, 0);
    written = 0;
    GT_BLAS_OK(
        cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, NULL, 0, &written));
    assert_int_equal(written, 4);
    GT_EXPECT_BLAS(
        CUBLAS_STATUS_INVALID_VALUE,
        cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ROWS, &batch, sizeof batch));
    GT_EXPECT_BLAS(CUBLAS_STATUS_INVALID_VALUE,
                   cublasLtMatrixLayoutSetAttribute(l, (cublasLtMatrixLayoutAttribute_t)99, &batch,
                                                    sizeof batch));
    GT_BLAS_OK(cublasLtMatrixLayoutDestroy(l));

    cublasLtMatmulPreference_t p;
    GT_BLAS_OK(cublasLtMatmulPreferenceCreate(&p));
    uint64_t ws = 123;
    GT_BLAS_OK(cublasLtMatmulPreferenceGetAttribute(p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &ws, sizeof ws, NULL));
    assert_int_equal(ws, 0);
    ws = 4 * MiB;
    GT_BLAS_OK(cublasLtMatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &ws, sizeof ws));
    ws = 0;
    GT_BLAS_OK(cublasLtMatmulPreferenceGetAttribute(p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &ws, sizeof ws, &written));
    assert_int_equal(ws, 4 * MiB);
    uint32_t small = 1;
    GT_EXPECT_BLAS(CUBLAS_STATUS_INVALID_VALUE,
                   cublasLtMatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                        &small, sizeof small));
    GT_BLAS_OK(cublasLtMatmulPreferenceDestroy(p));
}

/* ---- heuristic ---- */

/* The heuristic's workspace for an f16 m x n x k problem under a max of pref_ws bytes. */
static size_t heuristic_ws(cublasLtHandle_t h, int64_t m, int64_t n, int64_t k, size_t pref_ws,
                           cublasStatus_t *st)
{
    cublasLtMatmulDesc_t desc;
    GT_BLAS_OK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasLtMatrixLayout_t la = layout(CUDA_R_16F, m, k, m, 1, 0);
    cublasLtMatrixLayout_t lb = layout(CUDA_R_16F, k, n, k, 1, 0);
    cublasLtMatrixLayout_t lc = layout(CUDA_R_16F, m, n, m, 1, 0);
    cublasLtMatmulPreference_t pref;
    GT_BLAS_OK(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t max_ws = pref_ws;
    GT_BLAS_OK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &max_ws, sizeof max_ws));
    cublasLtMatmulHeuristicResult_t res;
    memset(&res, 0xff, sizeof res);
    int n_res = -1;
    *st = cublasLtMatmulAlgoGetHeuristic(h, desc, la, lb, lc, lc, pref, 1, &res, &n_res);
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatmulDescDestroy(desc);
    if (*st == CUBLAS_STATUS_SUCCESS) {
        assert_int_equal(n_res, 1);
        assert_int_equal(res.state, CUBLAS_STATUS_SUCCESS);
    }
    return res.workspaceSize;
}

static void test_heuristic(void **state)
{
    cublasLtHandle_t h;
    GT_BLAS_OK(cublasLtCreate(&h));
    cublasStatus_t st;
    assert_int_equal(heuristic_ws(h, 128, 128, 64, 4 * MiB, &st), 0);       /* short K */
    GT_BLAS_OK(st);
    assert_int_equal(heuristic_ws(h, 128, 128, 4096, 4 * MiB, &st), MiB);   /* split K */
    GT_BLAS_OK(st);
    assert_int_equal(heuristic_ws(h, 128, 128, 4096, 256 << 10, &st), 256 << 10); /* capped */
    GT_BLAS_OK(st);
    assert_int_equal(heuristic_ws(h, 128, 128, 4096, 0, &st), 0);           /* none allowed */
    GT_BLAS_OK(st);
    GT_BLAS_OK(cublasLtDestroy(h));
    heuristic_ws(h, 8, 8, 8, 0, &st);
    GT_EXPECT_BLAS(CUBLAS_STATUS_NOT_INITIALIZED, st);

    GT_BLAS_OK(cublasLtCreate(&h));
    cublasLtMatmulDesc_t desc;
    GT_BLAS_OK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasLtMatrixLayout_t l = layout(CUDA_R_32F, 8, 8, 8, 1, 0);
    cublasLtMatmulHeuristicResult_t res;
    int n_res = 0;
    GT_EXPECT_BLAS(CUBLAS_STATUS_INVALID_VALUE,
                   cublasLtMatmulAlgoGetHeuristic(h, desc, l, l, l, l, NULL, 0, &res, &n_res));
    int32_t row = CUBLASLT_ORDER_ROW;
    GT_BLAS_OK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ORDER, &row, sizeof row));
    GT_EXPECT_BLAS(CUBLAS_STATUS_NOT_SUPPORTED,
                   cublasLtMatmulAlgoGetHeuristic(h, desc, l, l, l, l, NULL, 1, &res, &n_res));
    cublasLtMatrixLayoutDestroy(l);
    cublasLtMatmulDescDestroy(desc);
    GT_BLAS_OK(cublasLtDestroy(h));
}

/* ---- matmul ---- */

static void test_matmul_types(void **state)
{
    gt_seed(21);
    for (int t = 0; t < 3; t++) {
        for (int out32 = 0; out32 < 2; out32++) {
            for (int tt = 0; tt < 4; tt++) {
                gt_gemm_t g = {.ta = tt & 1, .tb = tt >> 1, .m = 40, .n = 25, .k = 36,
                               .ab_type = types[t], .c_type = out32 ? CUDA_R_32F : types[t],
                               .ldc = 44, .alpha = 0.5, .beta = 1.5};
                g.lda = (g.ta ? g.k : g.m) + 2;
                gt_gemm_init(&g);
                char what[48];
                snprintf(what, sizeof what, "Lt type %d out32 %d trans %d", (int)types[t], out32,
                         tt);
                run_and_check(&g, 0, what);
                gt_gemm_free(&g);
            }
        }
    }
}

static void test_matmul_epilogues(void **state)
{
    gt_seed(22);
    const unsigned epis[] = {GT_EPI_BIAS, GT_EPI_GELU, GT_EPI_GELU | GT_EPI_BIAS, GT_EPI_RELU,
                             GT_EPI_RELU | GT_EPI_BIAS};
    for (int t = 0; t < 3; t++) {
        for (size_t e = 0; e < sizeof epis / sizeof epis[0]; e++) {
            for (int variant = 0; variant < 2; variant++) {
                /* variant 1: an fp32 bias vector, or (GELU) the AUX output as well. */
                gt_gemm_t g = {.ta = 1, .tb = 0, .m = 48, .n = 20, .k = 50, .ab_type = types[t],
                               .c_type = types[t], .alpha = 1.0, .beta = 0.0, .c_nan = 1,
                               .epi = epis[e]};
                int aux = variant && (epis[e] & GT_EPI_GELU);
                if (variant && !aux) {
                    if (!(epis[e] & GT_EPI_BIAS)) {
                        continue;
                    }
                    g.bias_type = CUDA_R_32F;
                }
                gt_gemm_init(&g);
                char what[64];
                snprintf(what, sizeof what, "Lt type %d epilogue %u variant %d", (int)types[t],
                         epis[e], variant);
                run_and_check(&g, aux, what);
                gt_gemm_free(&g);
            }
        }
    }
}

static void test_matmul_batched(void **state)
{
    gt_seed(23);
    for (int t = 0; t < 3; t++) {
        gt_gemm_t g = {.ta = 0, .tb = 1, .m = 18, .n = 22, .k = 30, .batch = 3,
                       .ab_type = types[t], .c_type = types[t], .lda = 20, .ldb = 24, .ldc = 19,
                       .sa = 20 * 30 + 8, .sb = 24 * 30 + 2, .sc = 19 * 22 + 5, .alpha = 1.0,
                       .beta = 0.5, .epi = GT_EPI_BIAS};
        gt_gemm_init(&g);
        run_and_check(&g, 0, "Lt strided batched with bias");
        gt_gemm_free(&g);
    }
}

/* The algo needs 1 MiB (K >= 1024): less workspace is an error; without an algo the
 * library picks one that fits; a NULL workspace for a workspace-needing algo is an error. */
static void test_workspace_too_small(void **state)
{
    gt_seed(24);
    cublasLtHandle_t h;
    GT_BLAS_OK(cublasLtCreate(&h));
    gt_gemm_t g = {.m = 16, .n = 8, .k = 1500, .ab_type = CUDA_R_16BF, .c_type = CUDA_R_32F,
                   .alpha = 1.0, .beta = 0.0};
    gt_gemm_init(&g);
    gt_dev_t d;
    gt_dev_upload(&g, &d);
    void *ws;
    GT_RT_OK(cudaMalloc(&ws, MiB));
    lt_opts_t o = {.handle = h, .use_algo = 1, .pref_ws = 4 * MiB, .ws = ws, .ws_size = MiB / 2};
    GT_EXPECT_BLAS(CUBLAS_STATUS_INVALID_VALUE, lt_matmul(&g, &d, &o));
    assert_int_equal(o.heuristic_ws, MiB);
    o.ws = NULL;
    o.ws_size = MiB;
    GT_EXPECT_BLAS(CUBLAS_STATUS_INVALID_VALUE, lt_matmul(&g, &d, &o));
    o.use_algo = 0;
    o.ws = ws;
    o.ws_size = MiB / 2;
    GT_BLAS_OK(lt_matmul(&g, &d, &o));
    void *out = gt_dev_download_c(&g, &d);
    gt_gemm_check(&g, out, "library-picked algo with a small workspace");
    free(out);
    GT_RT_OK(cudaFree(ws));
    gt_dev_free(&d);
    gt_gemm_free(&g);
    GT_BLAS_OK(cublasLtDestroy(h));
}

/* PyTorch destroys its descriptors right after cublasLtMatmul. Here the stream is held by
 * a long kernel so the matmul runs after that, and new descriptors with other values are
 * created meanwhile (likely in the freed memory): the result must be the original one. */
static void test_descriptors_destroyed_before_execution(void **state)
{
    gt_seed(25);
    cublasLtHandle_t h;
    cudaStream_t s;
    GT_RT_OK(cudaStreamCreate(&s));
    GT_BLAS_OK(cublasLtCreate(&h));
    gt_gemm_t g = {.ta = 1, .tb = 1, .m = 30, .n = 26, .k = 40, .ab_type = CUDA_R_16F,
                   .c_type = CUDA_R_16F, .alpha = 1.0, .beta = 1.0,
                   .epi = GT_EPI_GELU | GT_EPI_BIAS};
    gt_gemm_init(&g);
    gt_dev_t d;
    gt_dev_upload(&g, &d);
    GT_RT_OK(vgt_spin(1e6, 1.0, s));
    lt_opts_t o = {.handle = h, .stream = s, .use_algo = 1};
    GT_BLAS_OK(lt_matmul(&g, &d, &o));
    cublasLtMatmulDesc_t other;
    cublasLtMatrixLayout_t ol[3];
    GT_BLAS_OK(cublasLtMatmulDescCreate(&other, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    int32_t n = CUBLAS_OP_N;
    uint32_t relu = CUBLASLT_EPILOGUE_RELU;
    GT_BLAS_OK(cublasLtMatmulDescSetAttribute(other, CUBLASLT_MATMUL_DESC_TRANSA, &n, sizeof n));
    GT_BLAS_OK(
        cublasLtMatmulDescSetAttribute(other, CUBLASLT_MATMUL_DESC_EPILOGUE, &relu, sizeof relu));
    for (int i = 0; i < 3; i++) {
        GT_BLAS_OK(cublasLtMatrixLayoutCreate(&ol[i], CUDA_R_32F, 3, 3, 3));
    }
    void *out = gt_dev_download_c(&g, &d);
    gt_gemm_check(&g, out, "descriptors destroyed before execution");
    free(out);
    for (int i = 0; i < 3; i++) {
        GT_BLAS_OK(cublasLtMatrixLayoutDestroy(ol[i]));
    }
    GT_BLAS_OK(cublasLtMatmulDescDestroy(other));
    gt_dev_free(&d);
    gt_gemm_free(&g);
    GT_BLAS_OK(cublasLtDestroy(h));
    GT_RT_OK(cudaStreamDestroy(s));
}

/* at::cuda::getCurrentCUDABlasLtHandle() is the cuBLAS handle reinterpret_cast. */
static void test_cublas_handle_as_lt_handle(void **state)
{
    gt_seed(26);
    cublasHandle_t bh;
    GT_BLAS_OK(cublasCreate(&bh));
    gt_gemm_t g = {.m = 12, .n = 10, .k = 14, .ab_type = CUDA_R_16BF, .c_type = CUDA_R_16BF,
                   .alpha = 1.0, .beta = 0.0, .epi = GT_EPI_BIAS};
    gt_gemm_init(&g);
    gt_dev_t d;
    gt_dev_upload(&g, &d);
    lt_opts_t o = {.handle = (cublasLtHandle_t)bh, .use_algo = 1};
    GT_BLAS_OK(lt_matmul(&g, &d, &o));
    void *out = gt_dev_download_c(&g, &d);
    gt_gemm_check(&g, out, "cuBLAS handle as cuBLASLt handle");
    free(out);
    gt_dev_free(&d);
    gt_gemm_free(&g);
    GT_BLAS_OK(cublasDestroy(bh));
}

static void test_device_pointer_mode(void **state)
{
    gt_seed(27);
    cublasLtHandle_t h;
    GT_BLAS_OK(cublasLtCreate(&h));
    gt_gemm_t g = {.ta = 1, .m = 16, .n = 12, .k = 20, .ab_type = CUDA_R_32F, .c_type = CUDA_R_32F,
                   .alpha = -2.0, .beta = 0.25};
    gt_gemm_init(&g);
    gt_dev_t d;
    gt_dev_upload(&g, &d);
    float *scal;
    const float host[2] = {-2.0f, 0.25f};
    GT_RT_OK(cudaMalloc((void **)&scal, sizeof host));
    GT_RT_OK(cudaMemcpy(scal, host, sizeof host, cudaMemcpyHostToDevice));
    lt_opts_t o = {.handle = h, .use_algo = 1, .dev_scalars = scal};
    GT_BLAS_OK(lt_matmul(&g, &d, &o));
    void *out = gt_dev_download_c(&g, &d);
    gt_gemm_check(&g, out, "Lt device pointer mode");
    free(out);
    GT_RT_OK(cudaFree(scal));
    gt_dev_free(&d);
    gt_gemm_free(&g);
    GT_BLAS_OK(cublasLtDestroy(h));
}

/* The statuses cuBLASLt documents for inconsistent or unsupported arguments. */
static void test_invalid_arguments(void **state)
{
    cublasLtHandle_t h;
    GT_BLAS_OK(cublasLtCreate(&h));
    float *a, *b, *c;
    GT_RT_OK(cudaMalloc((void **)&a, 4096));
    GT_RT_OK(cudaMalloc((void **)&b, 4096));
    GT_RT_OK(cudaMalloc((void **)&c, 4096));
    cublasLtMatmulDesc_t desc;
    GT_BLAS_OK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasLtMatrixLayout_t l8 = layout(CUDA_R_32F, 8, 8, 8, 1, 0);
    cublasLtMatrixLayout_t l9 = layout(CUDA_R_32F, 9, 8, 9, 1, 0);
    cublasLtMatrixLayout_t bad_ld = layout(CUDA_R_32F, 8, 8, 4, 1, 0);
    cublasLtMatrixLayout_t l16 = layout(CUDA_R_16F, 8, 8, 8, 1, 0);
    const float one = 1.0f, zero = 0.0f;
#define MM(st, hh, dsc, la, lb, lc, bp, C)                                                    \
    GT_EXPECT_BLAS(st, cublasLtMatmul(hh, dsc, &one, a, la, b, lb, bp, C, lc, c, lc, NULL, NULL, \
                                      0, 0))
    MM(CUBLAS_STATUS_SUCCESS, h, desc, l8, l8, l8, &zero, c);
    MM(CUBLAS_STATUS_SUCCESS, h, desc, l8, l8, l8, &zero, NULL);   /* beta 0: C unused */
    MM(CUBLAS_STATUS_INVALID_VALUE, h, desc, l8, l8, l8, &one, NULL);
    MM(CUBLAS_STATUS_NOT_INITIALIZED, NULL, desc, l8, l8, l8, &zero, c);
    MM(CUBLAS_STATUS_INVALID_VALUE, h, desc, l8, l9, l8, &zero, c);   /* k mismatch */
    MM(CUBLAS_STATUS_INVALID_VALUE, h, desc, bad_ld, l8, l8, &zero, c); /* ld < rows */
    MM(CUBLAS_STATUS_NOT_SUPPORTED, h, desc, l16, l8, l8, &zero, c);  /* mixed A/B types */
    uint32_t epi = CUBLASLT_EPILOGUE_BIAS;
    GT_BLAS_OK(
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    MM(CUBLAS_STATUS_INVALID_VALUE, h, desc, l8, l8, l8, &zero, c);   /* no bias pointer */
    epi = CUBLASLT_EPILOGUE_DGELU_BGRAD;
    GT_BLAS_OK(
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    MM(CUBLAS_STATUS_NOT_SUPPORTED, h, desc, l8, l8, l8, &zero, c);
    epi = CUBLASLT_EPILOGUE_DEFAULT;
    GT_BLAS_OK(
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    const void *scale = b;
    GT_BLAS_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &scale,
                                              sizeof scale));
    MM(CUBLAS_STATUS_INVALID_VALUE, h, desc, l8, l8, l8, &zero, c);   /* fp8 scaling */
    cublasLtMatmulDesc_t half_scale;
    GT_BLAS_OK(cublasLtMatmulDescCreate(&half_scale, CUBLAS_COMPUTE_32F, CUDA_R_16F));
    MM(CUBLAS_STATUS_NOT_SUPPORTED, h, half_scale, l8, l8, l8, &zero, c);
    cublasLtMatmulDesc_t plain;
    GT_BLAS_OK(cublasLtMatmulDescCreate(&plain, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasLtMatmulAlgo_t junk;
    memset(&junk, 0x5a, sizeof junk);
    GT_EXPECT_BLAS(CUBLAS_STATUS_INVALID_VALUE,
                   cublasLtMatmul(h, plain, &one, a, l8, b, l8, &zero, c, l8, c, l8, &junk,
                                  NULL, 0, 0));
#undef MM
    GT_RT_OK(cudaDeviceSynchronize());
    cublasLtMatmulDescDestroy(plain);
    cublasLtMatmulDescDestroy(half_scale);
    cublasLtMatmulDescDestroy(desc);
    cublasLtMatrixLayoutDestroy(l8);
    cublasLtMatrixLayoutDestroy(l9);
    cublasLtMatrixLayoutDestroy(bad_ld);
    cublasLtMatrixLayoutDestroy(l16);
    GT_RT_OK(cudaFree(a));
    GT_RT_OK(cudaFree(b));
    GT_RT_OK(cudaFree(c));
    GT_BLAS_OK(cublasLtDestroy(h));
    GT_EXPECT_BLAS(CUBLAS_STATUS_NOT_INITIALIZED, cublasLtDestroy(h));
    assert_int_equal(cublasLtGetVersion(), CUBLAS_VERSION);
    assert_string_equal(cublasLtGetStatusName(CUBLAS_STATUS_NOT_SUPPORTED),
                        "CUBLAS_STATUS_NOT_SUPPORTED");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_desc_attributes),
        cmocka_unit_test(test_layout_and_preference_attributes),
        cmocka_unit_test(test_heuristic),
        cmocka_unit_test(test_matmul_types),
        cmocka_unit_test(test_matmul_epilogues),
        cmocka_unit_test(test_matmul_batched),
        cmocka_unit_test(test_workspace_too_small),
        cmocka_unit_test(test_descriptors_destroyed_before_execution),
        cmocka_unit_test(test_cublas_handle_as_lt_handle),
        cmocka_unit_test(test_device_pointer_mode),
        cmocka_unit_test(test_invalid_arguments),
        cmocka_unit_test(vgt_test_no_hazards),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
