/*
 * shim.op_lt: cublasLtMatmul captured into operation records (scheduler/ops/op_lt.c) and
 * replayed on the test's own cuBLASLt handle, stream and workspace. As PyTorch does, the
 * framework destroys its matmul descriptor, layouts and preference right after the call,
 * and its alpha, beta and algo are stack variables it overwrites: the replay must still
 * produce the bits of the same matmul made directly, while that direct matmul runs at
 * the same time on the framework's workspace (same size as the strand's, another
 * buffer; VGPU_HAZARD=abort would stop the test if the two shared one).
 *
 * Variants: fp32 with a transposed A and a bias epilogue over a long K (split-K: the
 * algorithm needs workspace); fp16 with fp16 compute (2-byte scalars); a NULL D layout;
 * device pointer mode. With the descriptor clone disabled (op_break.h), a descriptor
 * changed after the call changes the replay: the test can fail. A strand workspace
 * smaller than the framework's fails the replay; an emulation descriptor (a framework
 * object the clone would point at) is refused.
 */
#include "op_common.h"

#include <string.h>

#define M 64
#define NN 48
#define K_LONG 1536 /* >= the vgpu's split-K threshold: the algo needs workspace */
#define K_SHORT 40
#define WS_BYTES ((size_t)4 << 20)

static cublasLtHandle_t fw;       /* the framework's handle */
static cudaStream_t fw_stream;
static void *fw_ws;
static dh_replay_ctx_t ctx;

enum { V_FP32_BIAS, V_FP16, V_NULL_D, V_DEVICE_SCALARS };

typedef struct lt_problem {
    int variant;
    int k;
    cudaDataType t;           /* A, B, C, D */
    size_t esz;
    void *dA, *dB, *dC, *bias;
    float *dscal;             /* device alpha, beta (V_DEVICE_SCALARS) */
} lt_problem_t;

typedef struct lt_objs {
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t lay[4];
    cublasLtMatmulAlgo_t algo;
    size_t ws_need;
} lt_objs_t;

static int setup(void **state)
{
    OPT_BLAS_OK(cublasLtCreate(&fw));
    OPT_OK(cudaStreamCreateWithFlags(&fw_stream, cudaStreamNonBlocking));
    OPT_OK(cudaMalloc(&fw_ws, WS_BYTES));
    opt_ctx_init(&ctx, WS_BYTES);
    return 0;
}

static int teardown(void **state)
{
    opt_ctx_fini(&ctx);
    OPT_OK(cudaFree(fw_ws));
    OPT_OK(cudaStreamDestroy(fw_stream));
    OPT_BLAS_OK(cublasLtDestroy(fw));
    return 0;
}

static uint16_t to_half(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u, exp = (x >> 23) & 0xffu, man = x & 0x7fffffu;
    if (exp == 0)
        return (uint16_t)sign;
    return (uint16_t)(sign | ((exp - 127 + 15) << 10) | (man >> 13));
}

/* Device data of one problem: A stored K x M (op(A) = A^T for fp32) or M x K, B K x N, C
 * M x N, a bias of M. */
static void problem_init(lt_problem_t *p, int variant)
{
    static float h[K_LONG * M];
    memset(p, 0, sizeof *p);
    p->variant = variant;
    p->k = variant == V_FP32_BIAS ? K_LONG : K_SHORT;
    p->t = variant == V_FP16 ? CUDA_R_16F : CUDA_R_32F;
    p->esz = variant == V_FP16 ? 2 : 4;
    size_t na = (size_t)p->k * M, nb = (size_t)p->k * NN, nc = (size_t)M * NN;
    void **bufs[] = {&p->dA, &p->dB, &p->dC, &p->bias};
    size_t counts[] = {na, nb, nc, M};
    for (int i = 0; i < 4; i++) {
        opt_fill_random(h, counts[i], 100u + (unsigned)i);
        if (p->t == CUDA_R_16F) {
            static uint16_t h16[K_LONG * M];
            for (size_t j = 0; j < counts[i]; j++)
                h16[j] = to_half((float)((int)(h[j] * 8.0f)) * 0.125f);
            *bufs[i] = opt_dev_upload(h16, counts[i] * 2);
        } else {
            *bufs[i] = opt_dev_upload(h, counts[i] * 4);
        }
    }
    if (variant == V_DEVICE_SCALARS) {
        const float ab[2] = {0.625f, -0.75f};
        p->dscal = opt_dev_upload(ab, sizeof ab);
    }
}

static void problem_fini(lt_problem_t *p)
{
    void *bufs[] = {p->dA, p->dB, p->dC, p->bias, p->dscal};
    for (int i = 0; i < 5; i++)
        if (bufs[i] != NULL)
            OPT_OK(cudaFree(bufs[i]));
}

/* Builds the descriptor, layouts, preference and algo the way PyTorch's addmm does. */
static void objs_make(lt_objs_t *o, const lt_problem_t *p)
{
    int fp16 = p->variant == V_FP16;
    OPT_BLAS_OK(cublasLtMatmulDescCreate(&o->desc, fp16 ? CUBLAS_COMPUTE_16F : CUBLAS_COMPUTE_32F,
                                         fp16 ? CUDA_R_16F : CUDA_R_32F));
    int transa = p->variant == V_FP32_BIAS;
    if (transa) {
        cublasOperation_t t = CUBLAS_OP_T;
        OPT_BLAS_OK(cublasLtMatmulDescSetAttribute(o->desc, CUBLASLT_MATMUL_DESC_TRANSA, &t,
                                                   sizeof t));
        cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
        OPT_BLAS_OK(cublasLtMatmulDescSetAttribute(o->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi,
                                                   sizeof epi));
        OPT_BLAS_OK(cublasLtMatmulDescSetAttribute(o->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                   &p->bias, sizeof p->bias));
    }
    if (p->variant == V_DEVICE_SCALARS) {
        cublasLtPointerMode_t pm = CUBLASLT_POINTER_MODE_DEVICE;
        OPT_BLAS_OK(cublasLtMatmulDescSetAttribute(o->desc, CUBLASLT_MATMUL_DESC_POINTER_MODE,
                                                   &pm, sizeof pm));
    }
    uint64_t ar = transa ? (uint64_t)p->k : M, ac = transa ? M : (uint64_t)p->k;
    OPT_BLAS_OK(cublasLtMatrixLayoutCreate(&o->lay[0], p->t, ar, ac, (int64_t)ar));
    OPT_BLAS_OK(cublasLtMatrixLayoutCreate(&o->lay[1], p->t, p->k, NN, p->k));
    OPT_BLAS_OK(cublasLtMatrixLayoutCreate(&o->lay[2], p->t, M, NN, M));
    if (p->variant == V_NULL_D)
        o->lay[3] = NULL;
    else
        OPT_BLAS_OK(cublasLtMatrixLayoutCreate(&o->lay[3], p->t, M, NN, M));
    cublasLtMatmulPreference_t pref;
    OPT_BLAS_OK(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t max_ws = WS_BYTES;
    OPT_BLAS_OK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_ws, sizeof max_ws));
    cublasLtMatmulHeuristicResult_t res;
    int n = 0;
    OPT_BLAS_OK(cublasLtMatmulAlgoGetHeuristic(fw, o->desc, o->lay[0], o->lay[1], o->lay[2],
                                               o->lay[3] ? o->lay[3] : o->lay[2], pref, 1,
                                               &res, &n));
    assert_int_equal(n, 1);
    OPT_BLAS_OK(cublasLtMatmulPreferenceDestroy(pref));
    o->algo = res.algo;
    o->ws_need = res.workspaceSize;
}

static void objs_destroy(lt_objs_t *o)
{
    for (int i = 0; i < 4; i++)
        if (o->lay[i] != NULL)
            OPT_BLAS_OK(cublasLtMatrixLayoutDestroy(o->lay[i]));
    OPT_BLAS_OK(cublasLtMatmulDescDestroy(o->desc));
    memset(o, 0, sizeof *o);
}

/* The scalars of a variant, as host bytes (fp32 or fp16) or device pointers. */
typedef struct scalars {
    float f[2];
    uint16_t h[2];
} scalars_t;

static void scalars_set(scalars_t *s, const lt_problem_t *p, const void **alpha,
                        const void **beta)
{
    s->f[0] = 1.25f;
    s->f[1] = 0.5f;
    s->h[0] = to_half(1.5f);
    s->h[1] = to_half(-0.25f);
    if (p->variant == V_DEVICE_SCALARS) {
        *alpha = p->dscal;
        *beta = p->dscal + 1;
    } else if (p->variant == V_FP16) {
        *alpha = &s->h[0];
        *beta = &s->h[1];
    } else {
        *alpha = &s->f[0];
        *beta = &s->f[1];
    }
}

/* What the framework does after the call returns: it moves on with its locals. */
static void framework_moves_on(lt_objs_t *o, scalars_t *s)
{
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DEFAULT;
    OPT_BLAS_OK(cublasLtMatmulDescSetAttribute(o->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi,
                                               sizeof epi));
    int64_t rows = 1;
    OPT_BLAS_OK(cublasLtMatrixLayoutSetAttribute(o->lay[2], CUBLASLT_MATRIX_LAYOUT_ROWS, &rows,
                                                 sizeof rows));
    memset(s, 0x7b, sizeof *s);
    memset(&o->algo, 0, sizeof o->algo);
}

/* Captures the variant, lets the framework move on (destroying its objects unless
 * keep_objs), replays on c while the same matmul runs directly on the framework's
 * stream and workspace; returns the replay status, and *same whether the bits agree. */
static int lt_roundtrip(int variant, const dh_replay_ctx_t *c, int keep_objs, int *same)
{
    lt_problem_t p;
    problem_init(&p, variant);
    size_t bytes = (size_t)M * NN * p.esz;
    void *dW = opt_dev_alloc(bytes), *dG = opt_dev_alloc(bytes);
    unsigned char *want = malloc(bytes), *got = malloc(bytes);
    scalars_t s;
    const void *alpha, *beta;
    scalars_set(&s, &p, &alpha, &beta);

    lt_objs_t o;
    objs_make(&o, &p);
    if (variant == V_FP32_BIAS)
        assert_true(o.ws_need > 0);
    dh_op_t *op = NULL;
    OPT_DH_OK(dh_op_capture_lt_matmul(&op, fw, o.desc, alpha, p.dA, o.lay[0], p.dB, o.lay[1],
                                      beta, p.dC, o.lay[2], dG, o.lay[3], &o.algo, fw_ws,
                                      WS_BYTES, fw_stream));
    assert_int_equal(op->kind, DH_OP_LT_MATMUL);
    assert_ptr_equal(op->stream, fw_stream);

    /* The direct matmul, with objects built the same way, on the framework's stream. */
    lt_objs_t r;
    objs_make(&r, &p);
    scalars_t rs;
    const void *ralpha, *rbeta;
    scalars_set(&rs, &p, &ralpha, &rbeta);
    OPT_BLAS_OK(cublasLtMatmul(fw, r.desc, ralpha, p.dA, r.lay[0], p.dB, r.lay[1], rbeta, p.dC,
                               r.lay[2], dW, r.lay[3], &r.algo, fw_ws, WS_BYTES, fw_stream));
    objs_destroy(&r);

    framework_moves_on(&o, &s);
    if (!keep_objs)
        objs_destroy(&o);
    int rc = dh_op_replay(op, c);
    dh_op_free(op);
    OPT_OK(cudaDeviceSynchronize());
    if (keep_objs)
        objs_destroy(&o);
    opt_download(want, dW, bytes);
    opt_download(got, dG, bytes);
    *same = opt_same(got, want, bytes, NULL);
    free(want);
    free(got);
    OPT_OK(cudaFree(dW));
    OPT_OK(cudaFree(dG));
    problem_fini(&p);
    return rc;
}

static void check_variant(int variant)
{
    int same = 0;
    assert_int_equal(lt_roundtrip(variant, &ctx, 0, &same), CUBLAS_STATUS_SUCCESS);
    if (!same)
        fail_msg("variant %d: the replay's D differs from the direct matmul's", variant);
}

static void test_fp32_bias_split_k(void **state)
{
    check_variant(V_FP32_BIAS);
}

static void test_fp16_half_scalars(void **state)
{
    check_variant(V_FP16);
}

/* A NULL D layout: cuBLASLt 13 refuses it (CUBLAS_STATUS_INVALID_VALUE, measured on an
 * H100), so the shim must not defer it: its validate says "forward", and the program then
 * gets the library's own status at the call. */
static void test_null_d_layout(void **state)
{
    lt_problem_t p;
    problem_init(&p, V_NULL_D);
    size_t bytes = (size_t)M * NN * p.esz;
    void *dW = opt_dev_alloc(bytes);
    scalars_t s;
    const void *alpha, *beta;
    scalars_set(&s, &p, &alpha, &beta);
    lt_objs_t o;
    objs_make(&o, &p);
    dh_op_t *op = NULL;
    OPT_DH_OK(dh_op_capture_lt_matmul(&op, fw, o.desc, alpha, p.dA, o.lay[0], p.dB, o.lay[1],
                                      beta, p.dC, o.lay[2], dW, o.lay[3], &o.algo, fw_ws,
                                      WS_BYTES, fw_stream));
    assert_int_equal(dh_op_validate(op), CUBLAS_STATUS_INVALID_VALUE);
    dh_op_free(op);
    assert_int_equal(cublasLtMatmul(fw, o.desc, alpha, p.dA, o.lay[0], p.dB, o.lay[1], beta,
                                    p.dC, o.lay[2], dW, o.lay[3], &o.algo, fw_ws, WS_BYTES,
                                    fw_stream),
                     CUBLAS_STATUS_INVALID_VALUE);
    objs_destroy(&o);
    OPT_OK(cudaFree(dW));
    problem_fini(&p);
}

static void test_device_pointer_mode(void **state)
{
    check_variant(V_DEVICE_SCALARS);
}

/* With the clone disabled the replay reads the descriptors as the framework left them
 * (kept alive here, so that the difference is a result, not a crash). */
static void test_break_lt_desc_is_detected(void **state)
{
    int same = 1;
    dh_op_set_test_break(DH_OP_BREAK_LT_DESC);
    int rc = lt_roundtrip(V_FP32_BIAS, &ctx, 1, &same);
    dh_op_set_test_break(0);
    assert_false(rc == 0 && same);
    /* And the same with the clone, objects kept: the clone is what makes it right. */
    assert_int_equal(lt_roundtrip(V_FP32_BIAS, &ctx, 1, &same), 0);
    assert_true(same);
}

static void test_break_alpha_beta_is_detected(void **state)
{
    int same = 1;
    dh_op_set_test_break(DH_OP_BREAK_ALPHA_BETA);
    int rc = lt_roundtrip(V_FP16, &ctx, 1, &same);
    dh_op_set_test_break(0);
    assert_false(rc == 0 && same);
}

static void test_small_strand_workspace_fails(void **state)
{
    dh_replay_ctx_t small;
    opt_ctx_init(&small, WS_BYTES / 8);
    int same = 1;
    assert_int_equal(lt_roundtrip(V_FP32_BIAS, &small, 0, &same), CUBLAS_STATUS_INVALID_VALUE);
    assert_false(same);
    opt_ctx_fini(&small);
}

/* An emulation descriptor is an object of the framework's the clone would point at. */
static void test_emulation_descriptor_refused(void **state)
{
    lt_problem_t p;
    problem_init(&p, V_FP32_BIAS);
    lt_objs_t o;
    objs_make(&o, &p);
    static char not_a_desc[64];
    void *emu = not_a_desc;
    OPT_BLAS_OK(cublasLtMatmulDescSetAttribute(o.desc, CUBLASLT_MATMUL_DESC_EMULATION_DESCRIPTOR,
                                               &emu, sizeof emu));
    float ab[2] = {1.0f, 0.0f};
    dh_op_t *op = (dh_op_t *)&op;
    OPT_DH_IS(dh_op_capture_lt_matmul(&op, fw, o.desc, &ab[0], p.dA, o.lay[0], p.dB, o.lay[1],
                                      &ab[1], p.dC, o.lay[2], p.dC, o.lay[3], &o.algo, fw_ws,
                                      WS_BYTES, fw_stream),
              DH_ERR_UNSUPPORTED);
    assert_null(op);
    OPT_DH_IS(dh_op_capture_lt_matmul(&op, fw, NULL, &ab[0], p.dA, o.lay[0], p.dB, o.lay[1],
                                      &ab[1], p.dC, o.lay[2], p.dC, o.lay[3], &o.algo, fw_ws,
                                      WS_BYTES, fw_stream),
              DH_ERR_INVALID);
    objs_destroy(&o);
    problem_fini(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fp32_bias_split_k),
        cmocka_unit_test(test_fp16_half_scalars),
        cmocka_unit_test(test_null_d_layout),
        cmocka_unit_test(test_device_pointer_mode),
        cmocka_unit_test(test_break_lt_desc_is_detected),
        cmocka_unit_test(test_break_alpha_beta_is_detected),
        cmocka_unit_test(test_small_strand_workspace_fails),
        cmocka_unit_test(test_emulation_descriptor_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
