/*
 * shim.op_blas: cuBLAS GEMMs captured into operation records (scheduler/ops/op_blas.c) and
 * replayed on the test's own handle, stream and workspace, after the framework changed
 * its host alpha/beta (stack variables) and its handle. The framework's handle settings
 * reach the capture through the mirror (blas_state.c), which the test feeds the way the
 * wrappers do: real setter first, then dh_blas_state_set_*.
 *
 * Each replay must produce the bits of the same GEMM made directly on the framework's
 * handle: fp32 (default and TF32 math), fp16 with fp16 compute (2-byte scalars),
 * bf16 inputs accumulating into fp32 with beta = 1 (Megatron's weight-gradient GEMM),
 * device pointer mode. The replay uses a workspace of the framework's size but another
 * buffer, concurrently with a framework GEMM on the framework's workspace: the vgpu's
 * hazard detector (VGPU_HAZARD=abort) proves they do not share. A too-small strand
 * workspace fails the replay. With the alpha/beta copy disabled the replay differs.
 */
#include "op_common.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define M 96
#define NN 80
#define K 72
#define WS_BYTES ((size_t)4 << 20)

static cublasHandle_t fw;         /* the framework's handle */
static cudaStream_t fw_stream;
static void *fw_ws;
static dh_replay_ctx_t ctx;       /* the strand's: own handle, stream, workspace */
static float hA[M * K], hB[K * NN], hC[M * NN];

/* The framework's handle setters, as the wrappers forward and mirror them. */
static void fw_set_stream(cudaStream_t s)
{
    OPT_BLAS_OK(cublasSetStream(fw, s));
    dh_blas_state_set_stream(fw, s);
}

static void fw_set_workspace(void *ws, size_t size)
{
    OPT_BLAS_OK(cublasSetWorkspace(fw, ws, size));
    dh_blas_state_set_workspace(fw, ws, size);
}

static void fw_set_math(cublasMath_t m)
{
    OPT_BLAS_OK(cublasSetMathMode(fw, m));
    dh_blas_state_set_math(fw, m);
}

static void fw_set_pointer(cublasPointerMode_t m)
{
    OPT_BLAS_OK(cublasSetPointerMode(fw, m));
    dh_blas_state_set_pointer(fw, m);
}

/* What PyTorch does before each GEMM. */
static void fw_prepare(cublasMath_t math)
{
    fw_set_stream(fw_stream);
    fw_set_workspace(fw_ws, WS_BYTES);
    fw_set_math(math);
    fw_set_pointer(CUBLAS_POINTER_MODE_HOST);
}

static int setup(void **state)
{
    OPT_BLAS_OK(cublasCreate(&fw));
    OPT_OK(cudaStreamCreate(&fw_stream));
    OPT_OK(cudaMalloc(&fw_ws, WS_BYTES));
    opt_ctx_init(&ctx, WS_BYTES);
    opt_fill_random(hA, M * K, 1);
    opt_fill_random(hB, K * NN, 2);
    opt_fill_random(hC, M * NN, 3);
    return 0;
}

static int teardown(void **state)
{
    opt_ctx_fini(&ctx);
    OPT_OK(cudaFree(fw_ws));
    OPT_OK(cudaStreamDestroy(fw_stream));
    OPT_BLAS_OK(cublasDestroy(fw));
    dh_blas_state_forget(fw);
    return 0;
}

/* ---- fp32 ---- */

/* Direct SGEMM on the framework's handle into a fresh C; result to out. */
static void sgemm_direct(float *out, float alpha, float beta, const float *dA, const float *dB)
{
    float *dC = opt_dev_upload(hC, sizeof hC);
    OPT_BLAS_OK(cublasSgemm(fw, CUBLAS_OP_N, CUBLAS_OP_N, M, NN, K, &alpha, dA, M, dB, K, &beta,
                            dC, M));
    OPT_OK(cudaStreamSynchronize(fw_stream));
    opt_download(out, dC, M * NN * sizeof(float));
    OPT_OK(cudaFree(dC));
}

/* Captures the SGEMM with alpha/beta on the stack, changes them as a caller's next
 * statement would, replays on c; returns the replay status, result in out. */
static int sgemm_replayed(float *out, float alpha, float beta, const float *dA,
                          const float *dB, const dh_replay_ctx_t *c)
{
    float *dC = opt_dev_upload(hC, sizeof hC);
    float a = alpha, b = beta;
    dh_op_t *op = NULL;
    OPT_DH_OK(dh_op_capture_sgemm(&op, fw, CUBLAS_OP_N, CUBLAS_OP_N, M, NN, K, &a, dA, M, dB, K,
                                  &b, dC, M));
    assert_int_equal(op->kind, DH_OP_GEMM);
    assert_ptr_equal(op->stream, fw_stream);
    a = -7.0f;
    b = 3.0f;
    int rc = opt_replay_sync(op, c);
    opt_download(out, dC, M * NN * sizeof(float));
    OPT_OK(cudaFree(dC));
    return rc;
}

static void test_sgemm_host_scalars_owned(void **state)
{
    static float want[M * NN], got[M * NN];
    float *dA = opt_dev_upload(hA, sizeof hA), *dB = opt_dev_upload(hB, sizeof hB);
    fw_prepare(CUBLAS_DEFAULT_MATH);
    sgemm_direct(want, 1.25f, 0.5f, dA, dB);
    assert_ptr_not_equal(ctx.workspace, fw_ws);
    assert_int_equal(sgemm_replayed(got, 1.25f, 0.5f, dA, dB, &ctx), CUBLAS_STATUS_SUCCESS);
    opt_assert_same_floats(got, want, M * NN, "sgemm replay");
    OPT_OK(cudaFree(dA));
    OPT_OK(cudaFree(dB));
}

static void test_break_alpha_beta_is_detected(void **state)
{
    static float want[M * NN], got[M * NN];
    float *dA = opt_dev_upload(hA, sizeof hA), *dB = opt_dev_upload(hB, sizeof hB);
    fw_prepare(CUBLAS_DEFAULT_MATH);
    sgemm_direct(want, 1.25f, 0.5f, dA, dB);
    dh_op_set_test_break(DH_OP_BREAK_ALPHA_BETA);
    int rc = sgemm_replayed(got, 1.25f, 0.5f, dA, dB, &ctx);
    dh_op_set_test_break(0);
    /* The stack slots the op pointed at were rewritten (or are gone): any outcome but the
     * right one. */
    assert_false(rc == 0 && opt_same(got, want, sizeof got, NULL));
    OPT_OK(cudaFree(dA));
    OPT_OK(cudaFree(dB));
}

/* The math mode must be the framework handle's, not the strand handle's default. On a
 * GPU TF32 changes the bits (checked: the fp32 and TF32 results differ, and the replay's
 * equals TF32's); a GPU's timings say nothing reliable (the first TF32 GEMM took 11 ms,
 * the fp32 one 0.3 ms, on an H100). The vgpu computes in fp32 either way but times a TF32
 * GEMM at the tensor-core rate, so there the replay's virtual duration shows the mode. */
enum { BIG = 512 };

/* Virtual device time of op (replayed on c) or, with op NULL, of a direct SGEMM of
 * BIG^3 on the framework's handle. */
static float sgemm_time(dh_op_t *op, const dh_replay_ctx_t *c, const float *dX, float *dY)
{
    cudaStream_t s = op != NULL ? c->stream : fw_stream;
    cudaEvent_t e0, e1;
    OPT_OK(cudaEventCreate(&e0));
    OPT_OK(cudaEventCreate(&e1));
    OPT_OK(cudaEventRecord(e0, s));
    if (op != NULL) {
        assert_int_equal(dh_op_replay(op, c), CUBLAS_STATUS_SUCCESS);
        dh_op_free(op);
    } else {
        float one = 1.0f, zero = 0.0f;
        OPT_BLAS_OK(cublasSgemm(fw, CUBLAS_OP_N, CUBLAS_OP_N, BIG, BIG, BIG, &one, dX, BIG, dX,
                                BIG, &zero, dY, BIG));
    }
    OPT_OK(cudaEventRecord(e1, s));
    OPT_OK(cudaEventSynchronize(e1));
    float ms = 0.0f;
    OPT_OK(cudaEventElapsedTime(&ms, e0, e1));
    OPT_OK(cudaEventDestroy(e0));
    OPT_OK(cudaEventDestroy(e1));
    return ms;
}

static void test_sgemm_math_mode_replayed(void **state)
{
    static float hx[BIG * BIG], want[BIG * BIG], got[BIG * BIG], fp32[BIG * BIG];
    const int vgpu = dlsym(RTLD_DEFAULT, "vgpu_profile") != NULL;
    opt_fill_random(hx, BIG * BIG, 5);
    float *dX = opt_dev_upload(hx, sizeof hx), *dY = opt_dev_alloc(sizeof hx);
    float *dZ = opt_dev_alloc(sizeof hx);
    fw_prepare(CUBLAS_DEFAULT_MATH);
    float t_fp32 = sgemm_time(NULL, NULL, dX, dY);
    opt_download(fp32, dY, sizeof fp32);
    fw_prepare(CUBLAS_TF32_TENSOR_OP_MATH);
    float t_tf32 = sgemm_time(NULL, NULL, dX, dY);
    if (vgpu && !(t_tf32 < 0.8f * t_fp32))
        fail_msg("TF32 is not visible: %.6f ms under TF32, %.6f ms under fp32", (double)t_tf32,
                 (double)t_fp32);
    opt_download(want, dY, sizeof want);
    if (!vgpu && memcmp(want, fp32, sizeof want) == 0)
        fail_msg("TF32 is not visible: the TF32 and fp32 results are bit-identical");
    float one = 1.0f, zero = 0.0f;
    dh_op_t *op = NULL;
    OPT_DH_OK(dh_op_capture_sgemm(&op, fw, CUBLAS_OP_N, CUBLAS_OP_N, BIG, BIG, BIG, &one, dX,
                                  BIG, dX, BIG, &zero, dZ, BIG));
    fw_set_math(CUBLAS_DEFAULT_MATH); /* the framework's next GEMM wants fp32 */
    float t_rep = sgemm_time(op, &ctx, NULL, NULL);
    if (vgpu && (t_rep > t_tf32 * 1.001f || t_rep < t_tf32 * 0.999f))
        fail_msg("replay took %.6f ms: TF32 takes %.6f ms, fp32 %.6f ms", (double)t_rep,
                 (double)t_tf32, (double)t_fp32);
    opt_download(got, dZ, sizeof got);
    opt_assert_same_floats(got, want, BIG * BIG, "sgemm replay under TF32 math");
    OPT_OK(cudaFree(dX));
    OPT_OK(cudaFree(dY));
    OPT_OK(cudaFree(dZ));
}

/* ---- GemmEx ---- */

static uint16_t to_half(float f)
{
    /* Exact for the values used here (small dyadic rationals and zero). */
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u, exp = (x >> 23) & 0xffu, man = x & 0x7fffffu;
    if (exp == 0)
        return (uint16_t)sign;
    return (uint16_t)(sign | ((exp - 127 + 15) << 10) | (man >> 13));
}

static uint16_t to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    return (uint16_t)(x >> 16);
}

/* fp16 A, B, C with fp16 compute: alpha and beta are 2-byte halves on the stack, so a
 * capture that copied 4 bytes would read past them (ASan) or copy garbage. */
static void test_gemm_ex_half_scalars(void **state)
{
    static uint16_t a16[M * K], b16[K * NN], c16[M * NN], want[M * NN], got[M * NN];
    for (int i = 0; i < M * K; i++)
        a16[i] = to_half((float)((i % 7) - 3) * 0.125f);
    for (int i = 0; i < K * NN; i++)
        b16[i] = to_half((float)((i % 5) - 2) * 0.25f);
    for (int i = 0; i < M * NN; i++)
        c16[i] = to_half((float)((i % 3) - 1) * 0.5f);
    void *dA = opt_dev_upload(a16, sizeof a16), *dB = opt_dev_upload(b16, sizeof b16);
    void *dW = opt_dev_upload(c16, sizeof c16), *dG = opt_dev_upload(c16, sizeof c16);
    fw_prepare(CUBLAS_DEFAULT_MATH);
    uint16_t alpha = to_half(1.5f), beta = to_half(0.25f);
    OPT_BLAS_OK(cublasGemmEx(fw, CUBLAS_OP_N, CUBLAS_OP_N, M, NN, K, &alpha, dA, CUDA_R_16F, M,
                             dB, CUDA_R_16F, K, &beta, dW, CUDA_R_16F, M, CUBLAS_COMPUTE_16F,
                             CUBLAS_GEMM_DEFAULT));
    OPT_OK(cudaStreamSynchronize(fw_stream));
    dh_op_t *op = NULL;
    OPT_DH_OK(dh_op_capture_gemm_ex(&op, fw, CUBLAS_OP_N, CUBLAS_OP_N, M, NN, K, &alpha, dA,
                                    CUDA_R_16F, M, dB, CUDA_R_16F, K, &beta, dG, CUDA_R_16F, M,
                                    CUBLAS_COMPUTE_16F, CUBLAS_GEMM_DEFAULT));
    alpha = beta = to_half(-2.0f);
    assert_int_equal(opt_replay_sync(op, &ctx), CUBLAS_STATUS_SUCCESS);
    opt_download(want, dW, sizeof want);
    opt_download(got, dG, sizeof got);
    assert_true(opt_same(got, want, sizeof got, NULL));
    OPT_OK(cudaFree(dA));
    OPT_OK(cudaFree(dB));
    OPT_OK(cudaFree(dW));
    OPT_OK(cudaFree(dG));
}

/* bf16 inputs accumulated into an fp32 main_grad with beta = 1 (gradient accumulation
 * fusion): the read-modify-write of a buffer the framework keeps. */
static void test_gemm_ex_bf16_accumulate(void **state)
{
    static uint16_t a16[M * K], b16[K * NN];
    static float want[M * NN], got[M * NN];
    for (int i = 0; i < M * K; i++)
        a16[i] = to_bf16(hA[i]);
    for (int i = 0; i < K * NN; i++)
        b16[i] = to_bf16(hB[i]);
    void *dA = opt_dev_upload(a16, sizeof a16), *dB = opt_dev_upload(b16, sizeof b16);
    float *dW = opt_dev_upload(hC, sizeof hC), *dG = opt_dev_upload(hC, sizeof hC);
    fw_prepare(CUBLAS_DEFAULT_MATH);
    float alpha = 1.0f, beta = 1.0f;
    for (int rep = 0; rep < 2; rep++) /* two micro-batches accumulate */
        OPT_BLAS_OK(cublasGemmEx(fw, CUBLAS_OP_N, CUBLAS_OP_T, M, NN, K, &alpha, dA,
                                 CUDA_R_16BF, M, dB, CUDA_R_16BF, NN, &beta, dW, CUDA_R_32F, M,
                                 CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    OPT_OK(cudaStreamSynchronize(fw_stream));
    for (int rep = 0; rep < 2; rep++) {
        dh_op_t *op = NULL;
        float a = alpha, b = beta;
        OPT_DH_OK(dh_op_capture_gemm_ex(&op, fw, CUBLAS_OP_N, CUBLAS_OP_T, M, NN, K, &a, dA,
                                        CUDA_R_16BF, M, dB, CUDA_R_16BF, NN, &b, dG, CUDA_R_32F,
                                        M, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        a = b = 0.0f;
        assert_int_equal(opt_replay_sync(op, &ctx), CUBLAS_STATUS_SUCCESS);
    }
    opt_download(want, dW, sizeof want);
    opt_download(got, dG, sizeof got);
    opt_assert_same_floats(got, want, M * NN, "bf16 accumulate replay");
    OPT_OK(cudaFree(dA));
    OPT_OK(cudaFree(dB));
    OPT_OK(cudaFree(dW));
    OPT_OK(cudaFree(dG));
}

/* Device pointer mode: alpha/beta are device memory, kept as pointers. */
static void test_device_pointer_mode(void **state)
{
    static float want[M * NN], got[M * NN];
    float *dA = opt_dev_upload(hA, sizeof hA), *dB = opt_dev_upload(hB, sizeof hB);
    const float ab[2] = {0.75f, -1.5f};
    float *dab = opt_dev_upload(ab, sizeof ab);
    float *dW = opt_dev_upload(hC, sizeof hC), *dG = opt_dev_upload(hC, sizeof hC);
    fw_prepare(CUBLAS_DEFAULT_MATH);
    fw_set_pointer(CUBLAS_POINTER_MODE_DEVICE);
    OPT_BLAS_OK(cublasSgemm(fw, CUBLAS_OP_T, CUBLAS_OP_N, M, NN, K, dab, dA, K, dB, K, dab + 1,
                            dW, M));
    OPT_OK(cudaStreamSynchronize(fw_stream));
    dh_op_t *op = NULL;
    OPT_DH_OK(dh_op_capture_sgemm(&op, fw, CUBLAS_OP_T, CUBLAS_OP_N, M, NN, K, dab, dA, K, dB,
                                  K, dab + 1, dG, M));
    assert_int_equal(opt_replay_sync(op, &ctx), CUBLAS_STATUS_SUCCESS);
    fw_set_pointer(CUBLAS_POINTER_MODE_HOST);
    opt_download(want, dW, sizeof want);
    opt_download(got, dG, sizeof got);
    opt_assert_same_floats(got, want, M * NN, "device pointer mode replay");
    OPT_OK(cudaFree(dA));
    OPT_OK(cudaFree(dB));
    OPT_OK(cudaFree(dab));
    OPT_OK(cudaFree(dW));
    OPT_OK(cudaFree(dG));
}

/* ---- workspaces ---- */

/* A framework GEMM on the framework's workspace and a replay on the strand's run at the
 * same time on two streams. Both declare their workspace written; had the replay used
 * the framework's buffer, the vgpu would report a hazard (and abort the test). */
static void test_replay_workspace_is_the_strands(void **state)
{
    static float ha[BIG * BIG], want[M * NN], got[M * NN];
    opt_fill_random(ha, BIG * BIG, 9);
    float *dX = opt_dev_upload(ha, sizeof ha), *dY = opt_dev_alloc(sizeof ha);
    float *dA = opt_dev_upload(hA, sizeof hA), *dB = opt_dev_upload(hB, sizeof hB);
    fw_prepare(CUBLAS_DEFAULT_MATH);
    sgemm_direct(want, 1.0f, 1.0f, dA, dB);
    float *dG = opt_dev_upload(hC, sizeof hC);
    float one = 1.0f, zero = 0.0f;
    dh_op_t *op = NULL;
    OPT_DH_OK(dh_op_capture_sgemm(&op, fw, CUBLAS_OP_N, CUBLAS_OP_N, M, NN, K, &one, dA, M, dB,
                                  K, &one, dG, M));
    /* A long framework GEMM, then the replay while it runs. */
    OPT_BLAS_OK(cublasSgemm(fw, CUBLAS_OP_N, CUBLAS_OP_N, BIG, BIG, BIG, &one, dX, BIG, dX, BIG,
                            &zero, dY, BIG));
    assert_int_equal(dh_op_replay(op, &ctx), CUBLAS_STATUS_SUCCESS);
    dh_op_free(op);
    OPT_OK(cudaDeviceSynchronize());
    opt_download(got, dG, sizeof got);
    opt_assert_same_floats(got, want, M * NN, "replay beside a framework GEMM");
    float *bufs[] = {dX, dY, dA, dB, dG};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        OPT_OK(cudaFree(bufs[i]));
}

static void test_small_strand_workspace_fails(void **state)
{
    static float got[M * NN];
    float *dA = opt_dev_upload(hA, sizeof hA), *dB = opt_dev_upload(hB, sizeof hB);
    dh_replay_ctx_t small;
    opt_ctx_init(&small, WS_BYTES / 2);
    fw_prepare(CUBLAS_DEFAULT_MATH);
    assert_int_equal(sgemm_replayed(got, 1.0f, 0.0f, dA, dB, &small),
                     CUBLAS_STATUS_INVALID_VALUE);
    assert_true(opt_same(got, hC, sizeof got, NULL)); /* nothing ran */
    /* Without a framework workspace the default pool applies and any strand fits. */
    fw_set_stream(fw_stream);
    assert_int_equal(sgemm_replayed(got, 1.0f, 0.0f, dA, dB, &small), CUBLAS_STATUS_SUCCESS);
    opt_ctx_fini(&small);
    OPT_OK(cudaFree(dA));
    OPT_OK(cudaFree(dB));
}

/* ---- the handle mirror ---- */

static void test_blas_state_mirror(void **state)
{
    cublasHandle_t h = (cublasHandle_t)(uintptr_t)0x1000; /* never dereferenced */
    dh_blas_state_t st;
    dh_blas_state_get(h, &st);
    assert_null(st.stream);
    assert_null(st.workspace);
    assert_int_equal(st.workspace_size, 0);
    assert_int_equal(st.math, CUBLAS_DEFAULT_MATH);
    assert_int_equal(st.pointer, CUBLAS_POINTER_MODE_HOST);
    assert_int_equal(st.atomics, CUBLAS_ATOMICS_NOT_ALLOWED);

    int ws;
    dh_blas_state_set_workspace(h, &ws, 256);
    dh_blas_state_set_math(h, CUBLAS_TF32_TENSOR_OP_MATH);
    dh_blas_state_set_pointer(h, CUBLAS_POINTER_MODE_DEVICE);
    dh_blas_state_set_atomics(h, CUBLAS_ATOMICS_ALLOWED);
    dh_blas_state_get(h, &st);
    assert_ptr_equal(st.workspace, &ws);
    assert_int_equal(st.workspace_size, 256);
    assert_int_equal(st.math, CUBLAS_TF32_TENSOR_OP_MATH);
    assert_int_equal(st.pointer, CUBLAS_POINTER_MODE_DEVICE);
    assert_int_equal(st.atomics, CUBLAS_ATOMICS_ALLOWED);

    /* cublasSetStream resets the workspace (cuBLAS goes back to its default pool). */
    dh_blas_state_set_stream(h, fw_stream);
    dh_blas_state_get(h, &st);
    assert_ptr_equal(st.stream, fw_stream);
    assert_null(st.workspace);
    assert_int_equal(st.workspace_size, 0);
    assert_int_equal(st.math, CUBLAS_TF32_TENSOR_OP_MATH);

    dh_blas_state_forget(h);
    dh_blas_state_get(h, &st);
    assert_null(st.stream);
    assert_int_equal(st.math, CUBLAS_DEFAULT_MATH);
    assert_int_equal(st.pointer, CUBLAS_POINTER_MODE_HOST);
}

/* The mirror from several threads: each sets and reads its own handles (first sightings
 * race on insertion) and all share one, as a program that passes a handle around would. */
#define THREADS 4
#define ROUNDS 5000

static void *mirror_worker(void *arg)
{
    uintptr_t id = (uintptr_t)arg;
    cublasHandle_t shared = (cublasHandle_t)(uintptr_t)0x2000;
    for (int i = 0; i < ROUNDS; i++) {
        cublasHandle_t own = (cublasHandle_t)(uintptr_t)(0x10000 + 0x100 * (id * ROUNDS + i % 64));
        dh_blas_state_t st;
        dh_blas_state_set_stream(own, (cudaStream_t)(uintptr_t)(id + 1));
        dh_blas_state_set_workspace(own, (void *)(uintptr_t)0x4000, 4096 + id);
        dh_blas_state_get(own, &st);
        if (st.stream != (cudaStream_t)(uintptr_t)(id + 1) || st.workspace_size != 4096 + id)
            return (void *)1;
        dh_blas_state_set_math(shared, (i & 1) ? CUBLAS_DEFAULT_MATH : CUBLAS_TF32_TENSOR_OP_MATH);
        dh_blas_state_get(shared, &st);
        if (st.math != CUBLAS_DEFAULT_MATH && st.math != CUBLAS_TF32_TENSOR_OP_MATH)
            return (void *)1;
    }
    return NULL;
}

static void test_blas_state_threads(void **state)
{
    pthread_t t[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, mirror_worker, (void *)i), 0);
    for (int i = 0; i < THREADS; i++) {
        void *rc = NULL;
        pthread_join(t[i], &rc);
        assert_null(rc);
    }
}

/* Calls the real library would refuse at once are not deferred (the wrapper forwards
 * them, and the framework sees the error): no scalars, an unknown compute type. */
static void test_gemm_invalid_scalars_refused(void **state)
{
    dh_op_t *op = (dh_op_t *)&op;
    float one = 1.0f;
    OPT_DH_IS(dh_op_capture_sgemm(&op, fw, CUBLAS_OP_N, CUBLAS_OP_N, M, NN, K, NULL, NULL, M,
                                  NULL, K, &one, NULL, M),
              DH_ERR_INVALID);
    assert_null(op);
    OPT_DH_IS(dh_op_capture_gemm_ex(&op, fw, CUBLAS_OP_N, CUBLAS_OP_N, M, NN, K, &one, NULL,
                                    CUDA_R_32F, M, NULL, CUDA_R_32F, K, &one, NULL, CUDA_R_32F,
                                    M, (cublasComputeType_t)12345, CUBLAS_GEMM_DEFAULT),
              DH_ERR_UNSUPPORTED);
    assert_null(op);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sgemm_host_scalars_owned),
        cmocka_unit_test(test_break_alpha_beta_is_detected),
        cmocka_unit_test(test_sgemm_math_mode_replayed),
        cmocka_unit_test(test_gemm_ex_half_scalars),
        cmocka_unit_test(test_gemm_ex_bf16_accumulate),
        cmocka_unit_test(test_device_pointer_mode),
        cmocka_unit_test(test_replay_workspace_is_the_strands),
        cmocka_unit_test(test_small_strand_workspace_fails),
        cmocka_unit_test(test_blas_state_mirror),
        cmocka_unit_test(test_blas_state_threads),
        cmocka_unit_test(test_gemm_invalid_scalars_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
