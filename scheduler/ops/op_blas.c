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
#include <stdio.h>
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
    if (h == NULL)
        return DH_ERR_INVALID; /* forwarded: cuBLAS answers CUBLAS_STATUS_NOT_INITIALIZED */
    const dh_real_t *r = dh_real();
    dh_blas_state_t st;
    int dev;
    DH_CHECK(dh__op_device(r, &dev));
    dh_blas_state_get(h, &st);
    dh_op_t *op = dh_op_alloc(DH_OP_GEMM, st.stream, dev, sizeof(dh__gemm_pl_t));
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
 * algorithm choice depends on it): the framework's own buffer when the context has none
 * (op.h), else the strand's. */
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
    if (st == CUBLAS_STATUS_SUCCESS && p->st.workspace != NULL && ctx->workspace == NULL) {
        st = set_ws(ctx->blas, p->st.workspace, p->st.workspace_size); /* the framework's */
    } else if (st == CUBLAS_STATUS_SUCCESS && p->st.workspace != NULL) {
        if (ctx->workspace_size < p->st.workspace_size) {
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
    /* A library without emulation strategies has only the default. */
    dh_real_cublasSetEmulationStrategy_t set_emu = DH_REAL_FN(r, cublasSetEmulationStrategy);
    if (st == CUBLAS_STATUS_SUCCESS && set_emu != NULL)
        st = set_emu(ctx->blas, p->st.emulation);
    else if (st == CUBLAS_STATUS_SUCCESS && p->st.emulation != CUBLAS_EMULATION_STRATEGY_DEFAULT)
        st = CUBLAS_STATUS_NOT_SUPPORTED;
    return st;
}

static int dh__replay_gemm(dh_op_t *op, const dh_replay_ctx_t *ctx)
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

/* ---- what a GEMM is and what it touches ---- */

/* Signature: the entry point, transposes, types and compute type; shape: the dimensions,
 * leading dimensions, batch and strides. */
static void dh__gemm_describe(const dh_op_t *op, dh_op_desc_t *d)
{
    const dh__gemm_pl_t *p = (const dh__gemm_pl_t *)op->payload;
    int at = p->sgemm ? CUDA_R_32F : (int)p->at;
    uint64_t h = dh_op_hash_u64(DH_OP_HASH_INIT, op->kind);
    h = dh_op_hash_u64(h, (uint64_t)p->sgemm | (uint64_t)(p->batch > 0) << 8 |
                              (uint64_t)p->ta << 16 | (uint64_t)p->tb << 24);
    h = dh_op_hash_u64(h, (uint64_t)at | (uint64_t)p->bt << 16 | (uint64_t)p->ct << 32);
    d->sig = dh_op_hash_u64(h, (uint64_t)p->compute);
    int64_t dims[] = {p->m, p->n, p->k, p->lda, p->ldb, p->ldc, p->batch, p->sa, p->sb, p->sc};
    d->shape = dh_op_hash(DH_OP_HASH_INIT, dims, sizeof dims);
    double b = p->batch > 0 ? p->batch : 1;
    d->flops = 2.0 * p->m * p->n * p->k * b;
    char batch[24] = "";
    if (p->batch > 0)
        snprintf(batch, sizeof batch, " x%d", p->batch);
    snprintf(d->name, sizeof d->name, "gemm %c,%c %dx%dx%d %s%s", p->ta == CUBLAS_OP_N ? 'n' : 't',
             p->tb == CUBLAS_OP_N ? 'n' : 't', p->m, p->n, p->k, dh__dtype_name(at), batch);
}

/* Bytes of a column-major matrix of rows x cols with leading dimension ld, batch copies
 * stride elements apart. */
static size_t dh__mat_bytes(long long rows, long long cols, long long ld, int batch,
                            long long stride, size_t esize)
{
    if (rows <= 0 || cols <= 0 || ld <= 0 || !esize)
        return 0;
    long long n = (cols - 1) * ld + rows;
    if (batch > 1)
        n += (long long)(batch - 1) * (stride > 0 ? stride : 0);
    return (size_t)n * esize;
}

/* Exact ranges of A and B (read) and C (written); the whole allocation where the size is
 * not known (a degenerate shape). */
static void dh__gemm_footprint(const dh_op_t *op, dh_op_fp_t *fp)
{
    const dh__gemm_pl_t *p = (const dh__gemm_pl_t *)op->payload;
    size_t ea = p->sgemm ? 4 : dh__dtype_size(p->at), eb = p->sgemm ? 4 : dh__dtype_size(p->bt);
    size_t ec = p->sgemm ? 4 : dh__dtype_size(p->ct);
    int tA = p->ta != CUBLAS_OP_N, tB = p->tb != CUBLAS_OP_N;
    size_t na = dh__mat_bytes(tA ? p->k : p->m, tA ? p->m : p->k, p->lda, p->batch, p->sa, ea);
    size_t nb = dh__mat_bytes(tB ? p->n : p->k, tB ? p->k : p->n, p->ldb, p->batch, p->sb, eb);
    size_t nc = dh__mat_bytes(p->m, p->n, p->ldc, p->batch, p->sc, ec);
    if (na) dh_op_fp_range(fp, (uintptr_t)p->A, na, 0); else dh_op_fp_alloc(fp, p->A, 0);
    if (nb) dh_op_fp_range(fp, (uintptr_t)p->B, nb, 0); else dh_op_fp_alloc(fp, p->B, 0);
    if (nc) dh_op_fp_range(fp, (uintptr_t)p->C, nc, 1); else dh_op_fp_alloc(fp, p->C, 1);
}

/* ---- what cuBLAS checks at the call ---- */

static int dh__max1(int v) { return v > 1 ? v : 1; }

/* The checks cuBLAS documents for its GEMMs ("Return values" of cublas<t>gemm,
 * cublasGemmEx and the strided-batched forms, cuBLAS library documentation, section 2.7
 * cuBLAS Level-3 / BLAS-like extension): m, n or k < 0, a transpose that is not N, T or C,
 * lda < max(1, rows of A as stored), ldb likewise, ldc < max(1, m) ->
 * CUBLAS_STATUS_INVALID_VALUE (batchCount <= 0 never reaches here: the capture forwards it).
 * Which type and compute-type combinations cublasGemmEx implements (NOT_SUPPORTED
 * otherwise) only the library can tell: the first call of each combination is forwarded
 * and a success remembered (dh_op_accept); fp32 cublasSgemm needs no such answer. */
static uint64_t dh__gemm_combo(const dh_op_t *op, const dh__gemm_pl_t *p)
{
    uint64_t h = dh_op_hash_u64(DH_OP_HASH_INIT, op->kind);
    h = dh_op_hash_u64(h, (uint64_t)p->sgemm | (uint64_t)(p->batch > 0) << 8);
    h = dh_op_hash_u64(h, (uint64_t)p->at | (uint64_t)p->bt << 16 | (uint64_t)p->ct << 32);
    h = dh_op_hash_u64(h, (uint64_t)p->compute | (uint64_t)(uint32_t)p->algo << 32);
    return dh_op_hash_u64(h, (uint64_t)p->st.math);
}

static int dh__gemm_validate(const dh_op_t *op)
{
    const dh__gemm_pl_t *p = (const dh__gemm_pl_t *)op->payload;
    if (p->m < 0 || p->n < 0 || p->k < 0)
        return CUBLAS_STATUS_INVALID_VALUE;
    if ((p->ta != CUBLAS_OP_N && p->ta != CUBLAS_OP_T && p->ta != CUBLAS_OP_C) ||
        (p->tb != CUBLAS_OP_N && p->tb != CUBLAS_OP_T && p->tb != CUBLAS_OP_C))
        return CUBLAS_STATUS_INVALID_VALUE;
    int rows_a = p->ta == CUBLAS_OP_N ? p->m : p->k, rows_b = p->tb == CUBLAS_OP_N ? p->k : p->n;
    if (p->lda < dh__max1(rows_a) || p->ldb < dh__max1(rows_b) || p->ldc < dh__max1(p->m))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (p->sgemm)
        return 0;
    return dh_op_accepted(dh__gemm_combo(op, p)) ? 0 : -1;
}

static void dh__gemm_learn(const dh_op_t *op, int rc)
{
    if (rc == CUBLAS_STATUS_SUCCESS)
        dh_op_accept(dh__gemm_combo(op, (const dh__gemm_pl_t *)op->payload));
}

static size_t dh__gemm_workspace(const dh_op_t *op)
{
    const dh__gemm_pl_t *p = (const dh__gemm_pl_t *)op->payload;
    return p->st.workspace != NULL ? p->st.workspace_size : 0;
}

const dh_op_kind_ops_t dh__kind_gemm = {
    .name = "GEMM",
    .cls = DH_CLS_COMPUTE,
    .flags = DH_OPK_BLAS | DH_OPK_TIMED | DH_OPK_ON_DEVICE,
    .api = DH_OP_API_CUBLAS,
    .describe = dh__gemm_describe,
    .footprint = dh__gemm_footprint,
    .validate = dh__gemm_validate,
    .learn = dh__gemm_learn,
    .replay = dh__replay_gemm,
    .workspace = dh__gemm_workspace,
};
