/*
 * child.c: the "unmodified program" the shim tests run with libdhelix_shim.so preloaded.
 * It is linked against the real CUDA libraries (so its references are versioned, as a
 * PyTorch process's are) and makes a known sequence of calls; the test drivers
 * (test_preload.c, test_passthrough.c) count them in the shim's DHELIX_STATS report.
 *
 *   child calls          each wrapped entry point exactly once, results ignored (works
 *                        with no device at all: the real libraries return errors)
 *   child env            prints PYTORCH_CUDA_ALLOC_CONF as the shim left it
 *   child roundtrip T    T threads: H2D, D2D through a stream-ordered allocation, memset,
 *                        events, D2H; checks the data; then cudaDeviceSynchronize (vgpu)
 *   child gemm           cublasSgemm_v2 and cublasGemmEx on 2x3 * 3x2, checked (vgpu)
 *   child lt             cublasLtMatmul on the same, checked (vgpu)
 *   child kernel         a registered vgpu kernel through cudaLaunchKernel and
 *                        cudaLaunchKernelExC, checked (vgpu)
 * Exit status 0 on success; otherwise a message on stderr.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "vgpu.h"

#define CK(call)                                                                        \
    do {                                                                                \
        int ck_ = (int)(call);                                                          \
        if (ck_ != 0) {                                                                 \
            fprintf(stderr, "child: %s:%d: %s returned %d\n", __FILE__, __LINE__, #call, ck_); \
            return 1;                                                                   \
        }                                                                               \
    } while (0)

static int mode_calls(void)
{
    void *p = NULL;
    cudaStream_t s = 0;
    cudaEvent_t e = NULL;
    dim3 one = {1, 1, 1};
    cudaLaunchConfig_t cfg = {0};
    cfg.gridDim = one;
    cfg.blockDim = one;
    (void)cudaMalloc(&p, 16);
    (void)cudaFree(p);
    p = NULL;
    (void)cudaMallocAsync(&p, 16, s);
    (void)cudaFreeAsync(p, s);
    (void)cudaMemcpy(NULL, NULL, 0, cudaMemcpyHostToHost);
    (void)cudaMemcpyAsync(NULL, NULL, 0, cudaMemcpyHostToHost, s);
    (void)cudaMemsetAsync(NULL, 0, 0, s);
    (void)cudaLaunchKernel((const void *)mode_calls, one, one, NULL, 0, s);
    (void)cudaLaunchKernelExC(&cfg, (const void *)mode_calls, NULL);
    (void)cudaStreamSynchronize(s);
    (void)cudaDeviceSynchronize();
    (void)cudaEventRecord(e, s);
    (void)cudaEventRecordWithFlags(e, s, 0);
    (void)cudaEventQuery(e);
    (void)cudaEventSynchronize(e);
    (void)cudaStreamWaitEvent(s, e, 0);
    float f = 0;
    (void)cublasGemmEx(NULL, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &f, NULL, CUDA_R_32F, 1, NULL,
                       CUDA_R_32F, 1, &f, NULL, CUDA_R_32F, 1, CUBLAS_COMPUTE_32F,
                       CUBLAS_GEMM_DEFAULT);
    (void)cublasSgemm_v2(NULL, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &f, NULL, 1, NULL, 1, &f,
                         NULL, 1);
    (void)cublasLtMatmul(NULL, NULL, &f, NULL, NULL, NULL, NULL, &f, NULL, NULL, NULL, NULL,
                         NULL, NULL, 0, s);
    return 0;
}

static int mode_env(void)
{
    const char *v = getenv("PYTORCH_CUDA_ALLOC_CONF");
    printf("PYTORCH_CUDA_ALLOC_CONF=%s\n", v ? v : "(unset)");
    return 0;
}

/* ---- roundtrip ---- */

#define RT_N 4096

/* h_in -> d_a (cudaMemcpy) -> d_c (stream-ordered allocation) -> d_b, where d_b was
 * zeroed on another stream first and the copy stream waits for it through an event. */
static int roundtrip_one(int t)
{
    static const size_t bytes = RT_N * sizeof(float);
    float *in = malloc(bytes), *out = malloc(bytes);
    float *d_a = NULL, *d_b = NULL, *d_c = NULL;
    cudaStream_t s1, s2;
    cudaEvent_t zeroed, copied;
    CK(in == NULL || out == NULL);
    for (int i = 0; i < RT_N; i++)
        in[i] = (float)(t * 100000 + i);
    CK(cudaStreamCreate(&s1));
    CK(cudaStreamCreate(&s2));
    CK(cudaEventCreate(&zeroed));
    CK(cudaEventCreate(&copied));
    CK(cudaMalloc((void **)&d_a, bytes));
    CK(cudaMalloc((void **)&d_b, bytes));
    CK(cudaMemcpy(d_a, in, bytes, cudaMemcpyHostToDevice));
    CK(cudaMemsetAsync(d_b, 0, bytes, s1));
    CK(cudaEventRecord(zeroed, s1));
    CK(cudaStreamWaitEvent(s2, zeroed, 0));
    CK(cudaMallocAsync((void **)&d_c, bytes, s2));
    CK(cudaMemcpyAsync(d_c, d_a, bytes, cudaMemcpyDeviceToDevice, s2));
    CK(cudaMemcpyAsync(d_b, d_c, bytes, cudaMemcpyDeviceToDevice, s2));
    CK(cudaEventRecordWithFlags(copied, s2, cudaEventRecordDefault));
    CK(cudaEventSynchronize(copied));
    CK(cudaEventQuery(copied));
    CK(cudaFreeAsync(d_c, s2));
    CK(cudaStreamSynchronize(s2));
    CK(cudaStreamSynchronize(s1));
    CK(cudaMemcpy(out, d_b, bytes, cudaMemcpyDeviceToHost));
    for (int i = 0; i < RT_N; i++) {
        if (out[i] != in[i]) {
            fprintf(stderr, "child: thread %d: element %d is %g, expected %g\n", t, i,
                    (double)out[i], (double)in[i]);
            return 1;
        }
    }
    CK(cudaFree(d_a));
    CK(cudaFree(d_b));
    CK(cudaEventDestroy(zeroed));
    CK(cudaEventDestroy(copied));
    CK(cudaStreamDestroy(s1));
    CK(cudaStreamDestroy(s2));
    free(in);
    free(out);
    return 0;
}

static void *roundtrip_thread(void *arg)
{
    return (void *)(intptr_t)roundtrip_one((int)(intptr_t)arg);
}

static int mode_roundtrip(int nthreads)
{
    pthread_t th[16];
    int failed = 0;
    if (nthreads < 1 || nthreads > 16)
        return 2;
    for (int t = 0; t < nthreads; t++)
        CK(pthread_create(&th[t], NULL, roundtrip_thread, (void *)(intptr_t)t));
    for (int t = 0; t < nthreads; t++) {
        void *rc;
        pthread_join(th[t], &rc);
        failed |= rc != NULL;
    }
    CK(cudaDeviceSynchronize());
    return failed;
}

/* ---- GEMMs: C(2x2) = A(2x3) * B(3x2), column-major ---- */

static const float g_a[6] = {1, 4, 2, 5, 3, 6};
static const float g_b[6] = {7, 9, 11, 8, 10, 12};
static const float g_c[4] = {58, 139, 64, 154};

typedef struct gemm_bufs {
    float *a, *b, *c;
} gemm_bufs_t;

/* 3 cudaMalloc, 2 cudaMemcpy. */
static int gemm_setup(gemm_bufs_t *g)
{
    CK(cudaMalloc((void **)&g->a, sizeof(g_a)));
    CK(cudaMalloc((void **)&g->b, sizeof(g_b)));
    CK(cudaMalloc((void **)&g->c, sizeof(g_c)));
    CK(cudaMemcpy(g->a, g_a, sizeof(g_a), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(g->b, g_b, sizeof(g_b), cudaMemcpyHostToDevice));
    return 0;
}

/* 1 cudaMemcpy; then zeroes C with cudaMemset, which the shim does not wrap, so that
 * the next GEMM has to write every element again. */
static int gemm_check(const gemm_bufs_t *g, const char *what)
{
    float c[4];
    CK(cudaMemcpy(c, g->c, sizeof(c), cudaMemcpyDeviceToHost));
    for (int i = 0; i < 4; i++) {
        if (c[i] != g_c[i]) {
            fprintf(stderr, "child: %s: C[%d] is %g, expected %g\n", what, i, (double)c[i],
                    (double)g_c[i]);
            return 1;
        }
    }
    CK(cudaMemset(g->c, 0, sizeof(g_c)));
    return 0;
}

/* 3 cudaFree. */
static int gemm_teardown(gemm_bufs_t *g)
{
    CK(cudaFree(g->a));
    CK(cudaFree(g->b));
    CK(cudaFree(g->c));
    return 0;
}

static int mode_gemm(void)
{
    gemm_bufs_t g;
    cublasHandle_t h;
    const float one = 1.0f, zero = 0.0f;
    CK(gemm_setup(&g));
    CK(cublasCreate(&h));
    CK(cublasSgemm_v2(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, g.a, 2, g.b, 3, &zero, g.c, 2));
    CK(gemm_check(&g, "cublasSgemm_v2"));
    CK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, g.a, CUDA_R_32F, 2, g.b,
                    CUDA_R_32F, 3, &zero, g.c, CUDA_R_32F, 2, CUBLAS_COMPUTE_32F,
                    CUBLAS_GEMM_DEFAULT));
    CK(gemm_check(&g, "cublasGemmEx"));
    CK(cublasDestroy(h));
    return gemm_teardown(&g);
}

static int mode_lt(void)
{
    gemm_bufs_t g;
    cublasLtHandle_t lt;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    const float one = 1.0f, zero = 0.0f;
    CK(gemm_setup(&g));
    CK(cublasLtCreate(&lt));
    CK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, 2, 3, 2));
    CK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, 3, 2, 3));
    CK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, 2, 2, 2));
    CK(cublasLtMatmul(lt, op, &one, g.a, la, g.b, lb, &zero, g.c, lc, g.c, lc, NULL, NULL, 0, 0));
    CK(gemm_check(&g, "cublasLtMatmul"));
    CK(cublasLtMatrixLayoutDestroy(la));
    CK(cublasLtMatrixLayoutDestroy(lb));
    CK(cublasLtMatrixLayoutDestroy(lc));
    CK(cublasLtMatmulDescDestroy(op));
    CK(cublasLtDestroy(lt));
    return gemm_teardown(&g);
}

/* ---- a registered vgpu kernel: p[i] = v for i < n ---- */

#define K_N 1024

static void fill_stub(void) {}

static void fill_impl(const vgpu_launch_t *l)
{
    float *p = *(float *const *)l->args[0];
    float v = *(const float *)l->args[1];
    int n = *(const int *)l->args[2];
    for (int i = 0; i < n; i++)
        p[i] = v;
}

static int fill_footprint(const vgpu_launch_t *l, vgpu_range_t *out, int max)
{
    if (max < 1)
        return 0;
    out[0].ptr = *(float *const *)l->args[0];
    out[0].len = (size_t)*(const int *)l->args[2] * sizeof(float);
    out[0].write = 1;
    return 1;
}

static int register_fill(void)
{
    int (*reg)(const void *, const vgpu_kernel_desc_t *) =
        (int (*)(const void *, const vgpu_kernel_desc_t *))dlsym(RTLD_DEFAULT,
                                                                 "vgpu_register_kernel");
    vgpu_kernel_desc_t d = {0};
    if (reg == NULL) {
        fprintf(stderr, "child: vgpu_register_kernel not found (not running on the vgpu?)\n");
        return 1;
    }
    d.name = "dh_fill";
    d.nparams = 3;
    d.param_sizes[0] = sizeof(float *);
    d.param_sizes[1] = sizeof(float);
    d.param_sizes[2] = sizeof(int);
    d.impl = fill_impl;
    d.footprint = fill_footprint;
    return reg((const void *)fill_stub, &d) == 0 ? 0 : 1;
}

static int mode_kernel(void)
{
    float *d = NULL, h[2 * K_N];
    float v1 = 1.5f, v2 = 2.5f;
    int n = K_N;
    dim3 one = {1, 1, 1};
    CK(register_fill());
    CK(cudaMalloc((void **)&d, sizeof(h)));
    float *p1 = d, *p2 = d + K_N;
    void *args1[] = {&p1, &v1, &n};
    void *args2[] = {&p2, &v2, &n};
    CK(cudaLaunchKernel((const void *)fill_stub, one, one, args1, 0, 0));
    cudaLaunchConfig_t cfg = {0};
    cfg.gridDim = one;
    cfg.blockDim = one;
    CK(cudaLaunchKernelExC(&cfg, (const void *)fill_stub, args2));
    CK(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost));
    for (int i = 0; i < 2 * K_N; i++) {
        if (h[i] != (i < K_N ? v1 : v2)) {
            fprintf(stderr, "child: kernel: element %d is %g\n", i, (double)h[i]);
            return 1;
        }
    }
    CK(cudaFree(d));
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "calls") == 0)
        return mode_calls();
    if (strcmp(mode, "env") == 0)
        return mode_env();
    if (strcmp(mode, "roundtrip") == 0)
        return mode_roundtrip(argc > 2 ? atoi(argv[2]) : 1);
    if (strcmp(mode, "gemm") == 0)
        return mode_gemm();
    if (strcmp(mode, "lt") == 0)
        return mode_lt();
    if (strcmp(mode, "kernel") == 0)
        return mode_kernel();
    fprintf(stderr, "usage: child calls|env|roundtrip T|gemm|lt|kernel\n");
    return 2;
}
