/*
 * op_blas.c: capture and replay of cuBLAS GEMMs (cublasGemmEx, cublasSgemm_v2).
 *
 * The framework's handle is not used at replay: the strand's own handle (ctx->blas) is
 * given the state the framework's handle had at the call (dh_blas_state_get: stream
 * aside, its workspace SIZE, math, pointer and atomics modes), so that cuBLAS picks the
 * same algorithm and produces the same bits, without two strands sharing a handle or a
 * workspace (DESIGN.md invariant 5). In host pointer mode alpha and beta live on the
 * framework's stack: the op owns copies, as many bytes as the scale type has.
 */
#include <string.h>

#include "common/log.h"
#include "op_internal.h"

typedef struct dh__gemm_pl {
    int sgemm;                   /* cublasSgemm_v2; otherwise cublasGemmEx */
    int batch;                   /* > 0: the strided-batched form of the same call */
    long long sa, sb, sc;        /* its element strides */
    cublasOperation_t ta, tb;
    int m, n, k;
    const void *A, *B;
    void *C;
    cudaDataType at, bt, ct;
    int lda, ldb, ldc;
    cublasComputeType_t compute;
    cublasGemmAlgo_t algo;
    dh_blas_state_t st;          /* the framework handle's state at the call */
    const void *alpha, *beta;    /* -> alpha_buf/beta_buf in host mode, else device pointers */
    _Alignas(8) unsigned char alpha_buf[16];
    _Alignas(8) unsigned char beta_buf[16];
} dh__gemm_pl_t;
_Static_assert(_Alignof(dh__gemm_pl_t) <= 8, "a payload starts 8-byte aligned");

static int dh__is_complex(cudaDataType t)
{
    switch (t) {
    case CUDA_C_16F:
    case CUDA_C_16BF:
    case CUDA_C_32F:
    case CUDA_C_64F:
    case CUDA_C_8I:
    case CUDA_C_8U:
    case CUDA_C_32I:
    case CUDA_C_32U:
        return 1;
    default:
        return 0;
    }
}

/* Bytes of one alpha/beta of cublasGemmEx: the scale type follows the compute type (and is
 * complex when C is), as the cublasGemmEx documentation tables it. 0: unknown. */
static size_t dh__gemm_scale_size(cublasComputeType_t c, cudaDataType ct)
{
    size_t mul = dh__is_complex(ct) ? 2 : 1;
    switch (c) {
    case CUBLAS_COMPUTE_16F:
    case CUBLAS_COMPUTE_16F_PEDANTIC:
        return 2 * mul;
    case CUBLAS_COMPUTE_32F:
    case CUBLAS_COMPUTE_32F_PEDANTIC:
    case CUBLAS_COMPUTE_32F_FAST_16F:
    case CUBLAS_COMPUTE_32F_FAST_16BF:
    case CUBLAS_COMPUTE_32F_FAST_TF32:
    case CUBLAS_COMPUTE_32F_EMULATED_16BFX9:
        return 4 * mul;
    case CUBLAS_COMPUTE_64F:
    case CUBLAS_COMPUTE_64F_PEDANTIC:
    case CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT:
        return 8 * mul;
    case CUBLAS_COMPUTE_32I:
    case CUBLAS_COMPUTE_32I_PEDANTIC:
        return 4;
    default:
        return 0;
    }
}

/* Fills alpha/beta of p: owned copies of scale bytes in host mode, the pointers otherwise
 * (device memory is ordered by the stream, not by the call). */
static dh_status_t dh__gemm_scalars(dh__gemm_pl_t *p, const void *alpha, const void *beta,
                                    size_t scale)
{
    if (alpha == NULL || beta == NULL)
        return DH_ERR_INVALID; /* the real call reports it at once */
    p->alpha = alpha;
    p->beta = beta;
    if (p->st.pointer != CUBLAS_POINTER_MODE_HOST || (dh__op_breaks() & DH_OP_BREAK_ALPHA_BETA))
        return DH_OK;
    if (scale == 0 || scale > sizeof p->alpha_buf)
        return DH_ERR_UNSUPPORTED;
    memcpy(p->alpha_buf, alpha, scale);
    memcpy(p->beta_buf, beta, scale);
    p->alpha = p->alpha_buf;
    p->beta = p->beta_buf;
    return DH_OK;
}

static dh_status_t dh__gemm_capture(dh_op_t **out, cublasHandle_t h, const dh__gemm_pl_t *args,
                                    const void *alpha, const void *beta, size_t scale)
{
    *out = NULL;
    const dh_real_t *r = dh_real();
    dh_blas_state_t st;
    int dev;
    DH_CHECK(dh__op_device(r, &dev));
    dh_blas_state_get(h, &st);
    dh_op_t *op = dh__op_new(DH_OP_GEMM, st.stream, dev, sizeof(dh__gemm_pl_t));
    if (op == NULL)
        return DH_ERR_NOMEM;
    dh__gemm_pl_t *p = (dh__gemm_pl_t *)op->payload;
    *p = *args;
    p->st = st;
    dh_status_t rc = dh__gemm_scalars(p, alpha, beta, scale);
    if (rc != DH_OK) {
        dh_op_free(op);
        return rc;
    }
    *out = op;
    return DH_OK;
}

dh_status_t dh_op_capture_gemm_ex(dh_op_t **out, cublasHandle_t h, cublasOperation_t ta,
                                  cublasOperation_t tb, int m, int n, int k,
                                  const void *alpha, const void *A, cudaDataType at, int lda,
                                  const void *B, cudaDataType bt, int ldb, const void *beta,
                                  void *C, cudaDataType ct, int ldc,
                                  cublasComputeType_t compute, cublasGemmAlgo_t algo)
{
    dh__gemm_pl_t p = {.sgemm = 0, .ta = ta, .tb = tb, .m = m, .n = n, .k = k, .A = A, .B = B,
                       .C = C, .at = at, .bt = bt, .ct = ct, .lda = lda, .ldb = ldb,
                       .ldc = ldc, .compute = compute, .algo = algo};
    return dh__gemm_capture(out, h, &p, alpha, beta, dh__gemm_scale_size(compute, ct));
}

dh_status_t dh_op_capture_sgemm(dh_op_t **out, cublasHandle_t h, cublasOperation_t ta,
                                cublasOperation_t tb, int m, int n, int k, const float *alpha,
                                const float *A, int lda, const float *B, int ldb,
                                const float *beta, float *C, int ldc)
{
    dh__gemm_pl_t p = {.sgemm = 1, .ta = ta, .tb = tb, .m = m, .n = n, .k = k, .A = A, .B = B,
                       .C = C, .at = CUDA_R_32F, .bt = CUDA_R_32F, .ct = CUDA_R_32F,
                       .lda = lda, .ldb = ldb, .ldc = ldc, .compute = CUBLAS_COMPUTE_32F,
                       .algo = CUBLAS_GEMM_DEFAULT};
    return dh__gemm_capture(out, h, &p, alpha, beta, sizeof(float));
}

dh_status_t dh_op_capture_sgemm_strided(dh_op_t **out, cublasHandle_t h, cublasOperation_t ta,
                                        cublasOperation_t tb, int m, int n, int k,
                                        const float *alpha, const float *A, int lda,
                                        long long sa, const float *B, int ldb, long long sb,
                                        const float *beta, float *C, int ldc, long long sc,
                                        int batch)
{
    dh__gemm_pl_t p = {.sgemm = 1, .batch = batch, .sa = sa, .sb = sb, .sc = sc, .ta = ta,
                       .tb = tb, .m = m, .n = n, .k = k, .A = A, .B = B, .C = C,
                       .at = CUDA_R_32F, .bt = CUDA_R_32F, .ct = CUDA_R_32F, .lda = lda,
                       .ldb = ldb, .ldc = ldc, .compute = CUBLAS_COMPUTE_32F,
                       .algo = CUBLAS_GEMM_DEFAULT};
    if (batch <= 0)
        return DH_ERR_INVALID; /* forwarded: cuBLAS answers what it answers */
    return dh__gemm_capture(out, h, &p, alpha, beta, sizeof(float));
}

dh_status_t dh_op_capture_gemm_strided_ex(dh_op_t **out, cublasHandle_t h, cublasOperation_t ta,
                                          cublasOperation_t tb, int m, int n, int k,
                                          const void *alpha, const void *A, cudaDataType at,
                                          int lda, long long sa, const void *B, cudaDataType bt,
                                          int ldb, long long sb, const void *beta, void *C,
                                          cudaDataType ct, int ldc, long long sc, int batch,
                                          cublasComputeType_t compute, cublasGemmAlgo_t algo)
{
    dh__gemm_pl_t p = {.sgemm = 0, .batch = batch, .sa = sa, .sb = sb, .sc = sc, .ta = ta,
                       .tb = tb, .m = m, .n = n, .k = k, .A = A, .B = B, .C = C, .at = at,
                       .bt = bt, .ct = ct, .lda = lda, .ldb = ldb, .ldc = ldc,
                       .compute = compute, .algo = algo};
    if (batch <= 0)
        return DH_ERR_INVALID;
    return dh__gemm_capture(out, h, &p, alpha, beta, dh__gemm_scale_size(compute, ct));
}

/* Gives ctx->blas the captured state. cublasSetStream first: it resets the workspace,
 * which is then set again when the framework had one, with the framework's SIZE (the
 * algorithm choice depends on it) in the strand's own buffer. */
static int dh__gemm_prepare(const dh_real_t *r, const dh__gemm_pl_t *p,
                            const dh_replay_ctx_t *ctx)
{
    dh_real_cublasSetStream_v2_t set_stream = DH_REAL_FN(r, cublasSetStream_v2);
    dh_real_cublasSetWorkspace_v2_t set_ws = DH_REAL_FN(r, cublasSetWorkspace_v2);
    dh_real_cublasSetMathMode_t set_math = DH_REAL_FN(r, cublasSetMathMode);
    dh_real_cublasSetPointerMode_v2_t set_ptr = DH_REAL_FN(r, cublasSetPointerMode_v2);
    dh_real_cublasSetAtomicsMode_t set_atom = DH_REAL_FN(r, cublasSetAtomicsMode);
    if (set_stream == NULL || set_ws == NULL || set_math == NULL || set_ptr == NULL ||
        set_atom == NULL)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    cublasStatus_t st = set_stream(ctx->blas, ctx->stream);
    if (st == CUBLAS_STATUS_SUCCESS && p->st.workspace != NULL) {
        if (ctx->workspace == NULL || ctx->workspace_size < p->st.workspace_size) {
            DH_ERROR(SCHED, "GEMM replay: strand %d workspace is %zu bytes, the framework's "
                     "handle had %zu; not replayed", ctx->strand, ctx->workspace_size,
                     p->st.workspace_size);
            return CUBLAS_STATUS_INVALID_VALUE;
        }
        st = set_ws(ctx->blas, ctx->workspace, p->st.workspace_size);
    }
    if (st == CUBLAS_STATUS_SUCCESS)
        st = set_math(ctx->blas, p->st.math);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = set_ptr(ctx->blas, p->st.pointer);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = set_atom(ctx->blas, p->st.atomics);
    return st;
}

int dh__replay_gemm(dh_op_t *op, const dh_replay_ctx_t *ctx)
{
    const dh_real_t *r = dh_real();
    const dh__gemm_pl_t *p = (const dh__gemm_pl_t *)op->payload;
    int st = dh__gemm_prepare(r, p, ctx);
    if (st != CUBLAS_STATUS_SUCCESS)
        return st;
    if (p->batch > 0 && p->sgemm) {
        dh_real_cublasSgemmStridedBatched_t fn = DH_REAL_FN(r, cublasSgemmStridedBatched);
        if (fn == NULL)
            return CUBLAS_STATUS_NOT_INITIALIZED;
        return fn(ctx->blas, p->ta, p->tb, p->m, p->n, p->k, (const float *)p->alpha,
                  (const float *)p->A, p->lda, p->sa, (const float *)p->B, p->ldb, p->sb,
                  (const float *)p->beta, (float *)p->C, p->ldc, p->sc, p->batch);
    }
    if (p->batch > 0) {
        dh_real_cublasGemmStridedBatchedEx_t fn = DH_REAL_FN(r, cublasGemmStridedBatchedEx);
        if (fn == NULL)
            return CUBLAS_STATUS_NOT_INITIALIZED;
        return fn(ctx->blas, p->ta, p->tb, p->m, p->n, p->k, p->alpha, p->A, p->at, p->lda,
                  p->sa, p->B, p->bt, p->ldb, p->sb, p->beta, p->C, p->ct, p->ldc, p->sc,
                  p->batch, p->compute, p->algo);
    }
    if (p->sgemm) {
        dh_real_cublasSgemm_v2_t fn = DH_REAL_FN(r, cublasSgemm_v2);
        if (fn == NULL)
            return CUBLAS_STATUS_NOT_INITIALIZED;
        return fn(ctx->blas, p->ta, p->tb, p->m, p->n, p->k, (const float *)p->alpha,
                  (const float *)p->A, p->lda, (const float *)p->B, p->ldb,
                  (const float *)p->beta, (float *)p->C, p->ldc);
    }
    dh_real_cublasGemmEx_t fn = DH_REAL_FN(r, cublasGemmEx);
    if (fn == NULL)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    return fn(ctx->blas, p->ta, p->tb, p->m, p->n, p->k, p->alpha, p->A, p->at, p->lda, p->B,
              p->bt, p->ldb, p->beta, p->C, p->ct, p->ldc, p->compute, p->algo);
}

void dh__gemm_view(const dh_op_t *op, dh__gemm_view_t *v)
{
    const dh__gemm_pl_t *p = (const dh__gemm_pl_t *)op->payload;
    *v = (dh__gemm_view_t){.sgemm = p->sgemm, .batch = p->batch, .sa = p->sa, .sb = p->sb,
                           .sc = p->sc, .ta = p->ta, .tb = p->tb, .m = p->m, .n = p->n,
                           .k = p->k, .lda = p->lda, .ldb = p->ldb, .ldc = p->ldc, .A = p->A,
                           .B = p->B, .C = p->C, .at = p->at, .bt = p->bt, .ct = p->ct,
                           .compute = p->compute};
}
