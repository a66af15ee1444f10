/*
 * blas.c: per-thread cuBLAS/cuBLASLt state and the linear-layer GEMMs (see blas.h).
 */
#include "blas.h"

#include <string.h>

#include "wl.h"

#define WL_MAX_WS 8

typedef struct ws_entry {
    cudaStream_t stream;
    void *ptr;
} ws_entry_t;

/* One per thread: PyTorch's CuBLASPoolType hands each thread its own handle. */
typedef struct blas_tls {
    cublasHandle_t h;
    cublasLtHandle_t lt;
    ws_entry_t ws[WL_MAX_WS];
    int nws;
} blas_tls_t;

static __thread blas_tls_t tls;

/* PyTorch: 4096 KiB x 8 on sm90 and newer (CUBLAS_WORKSPACE_CONFIG ":4096:8"), else 4 MiB
 * plus small chunks; 4 MiB here. */
static size_t workspace_bytes(void)
{
    static __thread size_t bytes;
    if (bytes) return bytes;
    int dev = 0, major = 0;
    WL_CK(cudaGetDevice(&dev));
    WL_CK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    bytes = major >= 9 ? (size_t)32 << 20 : (size_t)4 << 20;
    return bytes;
}

/* The handle, bound to the current stream and its workspace, in PyTorch's order. */
static cublasHandle_t handle(void)
{
    if (!tls.h) WL_CK(cublasCreate(&tls.h));
    cudaStream_t s = wl_cur_stream();
    void *ws = NULL;
    for (int i = 0; i < tls.nws; i++)
        if (tls.ws[i].stream == s) ws = tls.ws[i].ptr;
    size_t bytes = workspace_bytes();
    if (!ws) {
        if (tls.nws == WL_MAX_WS) wl_fatal("too many streams for one cuBLAS handle");
        ws = wl_alloc(bytes);
        tls.ws[tls.nws++] = (ws_entry_t){s, ws};
    }
    WL_CK(cublasSetStream(tls.h, s));
    WL_CK(cublasSetWorkspace(tls.h, ws, bytes));
    WL_CK(cublasSetMathMode(tls.h, CUBLAS_DEFAULT_MATH));
    return tls.h;
}

/* C = alpha op(A) op(B) + beta C, column-major, A/B of type dt, C of type cdt. */
static void gemm(int dt, int cdt, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n,
                 int64_t k, const void *A, int64_t lda, const void *B, int64_t ldb, float beta,
                 void *C, int64_t ldc)
{
    const float alpha = 1.0f;
    cublasHandle_t h = handle();
    if (dt == WL_DT_F32) {
        WL_CK(cublasSgemm(h, ta, tb, (int)m, (int)n, (int)k, &alpha, A, (int)lda, B, (int)ldb, &beta,
                          C, (int)ldc));
        return;
    }
    cudaDataType_t ct = cdt == WL_DT_F32 ? CUDA_R_32F : CUDA_R_16BF;
    WL_CK(cublasGemmEx(h, ta, tb, (int)m, (int)n, (int)k, &alpha, A, CUDA_R_16BF, (int)lda, B,
                       CUDA_R_16BF, (int)ldb, &beta, C, ct, (int)ldc, CUBLAS_COMPUTE_32F,
                       CUBLAS_GEMM_DEFAULT_TENSOR_OP));
}

void wl_linear_fwd(int dt, const void *x, const void *w, void *y, int64_t T, int64_t in, int64_t out)
{
    gemm(dt, dt, CUBLAS_OP_T, CUBLAS_OP_N, out, T, in, w, in, x, in, 0.0f, y, out);
}

void wl_linear_fwd_out(int dt, int ydt, const void *x, const void *w, void *y, int64_t T, int64_t in,
                       int64_t out)
{
    gemm(dt, ydt, CUBLAS_OP_T, CUBLAS_OP_N, out, T, in, w, in, x, in, 0.0f, y, out);
}

void wl_linear_dgrad(int dt, const void *dy, const void *w, void *dx, int64_t T, int64_t in,
                     int64_t out, float beta)
{
    gemm(dt, dt, CUBLAS_OP_N, CUBLAS_OP_N, in, T, out, w, in, dy, out, beta, dx, in);
}

void wl_linear_wgrad(int dt, const void *x, const void *dy, float *main_grad, int64_t T,
                     int64_t in, int64_t out)
{
    gemm(dt, WL_DT_F32, CUBLAS_OP_N, CUBLAS_OP_T, in, out, T, x, in, dy, out, 1.0f, main_grad, in);
}

/* ---- cuBLASLt ---- */

static void lt_set(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a, const void *v, size_t n)
{
    WL_CK(cublasLtMatmulDescSetAttribute(d, a, v, n));
}

static void lt_epilogue(cublasLtMatmulDesc_t op, int epilogue, const void *bias, void *aux, int64_t ld)
{
    cublasLtEpilogue_t e = epilogue == WL_EPI_BIAS ? CUBLASLT_EPILOGUE_BIAS
                           : epilogue == WL_EPI_GELU_AUX_BIAS ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS
                                                              : CUBLASLT_EPILOGUE_DEFAULT;
    lt_set(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e);
    if (bias) lt_set(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
    if (aux) {
        lt_set(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux);
        lt_set(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld);
    }
}

void wl_linear_fwd_lt(int dt, const void *x, const void *w, const void *bias, void *y, void *aux,
                      int64_t T, int64_t in, int64_t out, int epilogue)
{
    if (!tls.lt) WL_CK(cublasLtCreate(&tls.lt));
    cudaDataType_t t = dt == WL_DT_F32 ? CUDA_R_32F : CUDA_R_16BF;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulPreference_t pref;
    WL_CK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    lt_set(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    lt_set(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    lt_epilogue(op, epilogue, bias, aux, out);
    WL_CK(cublasLtMatrixLayoutCreate(&la, t, (uint64_t)in, (uint64_t)out, in));
    WL_CK(cublasLtMatrixLayoutCreate(&lb, t, (uint64_t)in, (uint64_t)T, in));
    WL_CK(cublasLtMatrixLayoutCreate(&lc, t, (uint64_t)out, (uint64_t)T, out));
    WL_CK(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t max_ws = (uint64_t)1 << 20; /* PyTorch's CUBLASLT_WORKSPACE_SIZE default */
    WL_CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_ws,
                                               sizeof max_ws));
    cublasLtMatmulHeuristicResult_t res;
    int got = 0;
    WL_CK(cublasLtMatmulAlgoGetHeuristic(tls.lt, op, la, lb, lc, lc, pref, 1, &res, &got));
    if (got < 1) wl_fatal("cublasLtMatmulAlgoGetHeuristic found no algorithm");
    void *ws = res.workspaceSize ? wl_alloc(res.workspaceSize) : NULL;
    const float alpha = 1.0f, beta = 0.0f;
    WL_CK(cublasLtMatmul(tls.lt, op, &alpha, w, la, x, lb, &beta, y, lc, y, lc, &res.algo, ws,
                         res.workspaceSize, wl_cur_stream()));
    if (ws) wl_free(ws);
    WL_CK(cublasLtMatmulPreferenceDestroy(pref));
    WL_CK(cublasLtMatrixLayoutDestroy(lc));
    WL_CK(cublasLtMatrixLayoutDestroy(lb));
    WL_CK(cublasLtMatrixLayoutDestroy(la));
    WL_CK(cublasLtMatmulDescDestroy(op));
}

void wl_blas_thread_fini(void)
{
    if (tls.h) WL_CK(cublasDestroy(tls.h));
    if (tls.lt) WL_CK(cublasLtDestroy(tls.lt));
    memset(&tls, 0, sizeof tls);
}
