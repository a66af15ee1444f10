/* op_common.c: helpers of the shim.op_* tests (see op_common.h). */
#define _GNU_SOURCE
#include "op_common.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vgpu.h"

void opt_ctx_init(dh_replay_ctx_t *c, size_t ws_size)
{
    memset(c, 0, sizeof *c);
    OPT_OK(cudaGetDevice(&c->device));
    OPT_OK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    OPT_BLAS_OK(cublasCreate(&c->blas));
    OPT_BLAS_OK(cublasLtCreate(&c->blaslt));
    if (ws_size > 0)
        OPT_OK(cudaMalloc(&c->workspace, ws_size));
    c->workspace_size = ws_size;
    OPT_OK(cudaEventCreateWithFlags(&c->record_event, cudaEventDisableTiming));
    c->wait_event = c->record_event;
}

void opt_ctx_fini(dh_replay_ctx_t *c)
{
    OPT_OK(cudaStreamSynchronize(c->stream));
    OPT_OK(cudaEventDestroy(c->record_event));
    if (c->workspace != NULL)
        OPT_OK(cudaFree(c->workspace));
    OPT_BLAS_OK(cublasLtDestroy(c->blaslt));
    OPT_BLAS_OK(cublasDestroy(c->blas));
    OPT_OK(cudaStreamDestroy(c->stream));
    memset(c, 0, sizeof *c);
}

int opt_replay_sync(dh_op_t *op, const dh_replay_ctx_t *c)
{
    int rc = dh_op_replay(op, c);
    dh_op_free(op);
    OPT_OK(cudaStreamSynchronize(c->stream));
    return rc;
}

void *opt_dev_alloc(size_t n)
{
    void *d = NULL;
    OPT_OK(cudaMalloc(&d, n));
    return d;
}

void *opt_dev_upload(const void *host, size_t n)
{
    void *d = opt_dev_alloc(n);
    OPT_OK(cudaMemcpy(d, host, n, cudaMemcpyHostToDevice));
    return d;
}

void opt_download(void *host, const void *dev, size_t n)
{
    OPT_OK(cudaMemcpy(host, dev, n, cudaMemcpyDeviceToHost));
}

void opt_fill_random(float *h, size_t n, unsigned seed)
{
    uint64_t x = 0x9E3779B97F4A7C15ull ^ seed;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        h[i] = (float)((double)(x >> 11) / (double)(1ull << 53) * 2.0 - 1.0);
    }
}

int opt_same(const void *a, const void *b, size_t n, size_t *first)
{
    const unsigned char *p = a, *q = b;
    for (size_t i = 0; i < n; i++) {
        if (p[i] != q[i]) {
            if (first != NULL)
                *first = i;
            return 0;
        }
    }
    return 1;
}

void opt_assert_same_floats(const float *a, const float *b, size_t n, const char *what)
{
    size_t at = 0;
    if (!opt_same(a, b, n * sizeof(float), &at)) {
        size_t i = at / sizeof(float);
        uint32_t x, y;
        memcpy(&x, &a[i], 4);
        memcpy(&y, &b[i], 4);
        fail_msg("%s: element %zu of %zu differs: replay %.9g (0x%08x), direct %.9g (0x%08x)",
                 what, i, n, (double)a[i], x, (double)b[i], y);
    }
}

double opt_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* ---- kernels ---- */

void opt_k_axpy(float *y, const float *x, float a, unsigned long long n) { abort(); }
void opt_k_mix(float *out, char c, opt_triple_t t, double d, short h, unsigned long long n)
{
    abort();
}
void opt_k_scale(float *out, float s, unsigned long long n) { abort(); }
void opt_k_unregistered(float *out) { abort(); }

#define ARG(l, i, type) (*(type const *)(l)->args[i])

static void axpy_impl(const vgpu_launch_t *l)
{
    float *y = ARG(l, 0, float *);
    const float *x = ARG(l, 1, const float *);
    float a = ARG(l, 2, float);
    unsigned long long n = ARG(l, 3, unsigned long long);
    for (unsigned long long i = 0; i < n; i++)
        y[i] += a * x[i];
}

static int axpy_fp(const vgpu_launch_t *l, vgpu_range_t *out, int max)
{
    size_t bytes = ARG(l, 3, unsigned long long) * sizeof(float);
    if (max < 2)
        return 0;
    out[0] = (vgpu_range_t){ARG(l, 1, const float *), bytes, 0};
    out[1] = (vgpu_range_t){ARG(l, 0, float *), bytes, 1};
    return 2;
}

static void mix_impl(const vgpu_launch_t *l)
{
    float *out = ARG(l, 0, float *);
    char c = ARG(l, 1, char);
    opt_triple_t t = ARG(l, 2, opt_triple_t);
    double d = ARG(l, 3, double);
    short h = ARG(l, 4, short);
    unsigned long long n = ARG(l, 5, unsigned long long);
    for (unsigned long long i = 0; i < n; i++)
        out[i] = (float)c + t.v[0] * (float)i + t.v[1] - t.v[2] * (float)d + (float)h;
}

static int mix_fp(const vgpu_launch_t *l, vgpu_range_t *out, int max)
{
    if (max < 1)
        return 0;
    out[0] = (vgpu_range_t){ARG(l, 0, float *), ARG(l, 5, unsigned long long) * sizeof(float), 1};
    return 1;
}

static void scale_impl(const vgpu_launch_t *l)
{
    float *out = ARG(l, 0, float *);
    float s = ARG(l, 1, float);
    unsigned long long n = ARG(l, 2, unsigned long long);
    for (unsigned long long i = 0; i < n; i++)
        out[i] *= s;
}

static int scale_fp(const vgpu_launch_t *l, vgpu_range_t *out, int max)
{
    if (max < 1)
        return 0;
    out[0] = (vgpu_range_t){ARG(l, 0, float *), ARG(l, 2, unsigned long long) * sizeof(float), 1};
    return 1;
}

typedef int (*opt_register_fn)(const void *, const vgpu_kernel_desc_t *);

static void reg(opt_register_fn fn, const void *func, const char *name, int nparams,
                const size_t *sizes, vgpu_kernel_impl_fn impl, vgpu_kernel_footprint_fn fp)
{
    vgpu_kernel_desc_t d;
    memset(&d, 0, sizeof d);
    d.name = name;
    d.nparams = nparams;
    memcpy(d.param_sizes, sizes, (size_t)nparams * sizeof(size_t));
    d.impl = impl;
    d.footprint = fp;
    if (fn(func, &d) != 0)
        fail_msg("vgpu_register_kernel(%s) failed", name);
}

int opt_register_kernels(void)
{
    opt_register_fn fn = (opt_register_fn)dlsym(RTLD_DEFAULT, "vgpu_register_kernel");
    if (fn == NULL)
        return 0;
    static const size_t axpy_sz[] = {8, 8, 4, 8};
    static const size_t mix_sz[] = {8, 1, sizeof(opt_triple_t), 8, 2, 8};
    static const size_t scale_sz[] = {8, 4, 8};
    reg(fn, (const void *)opt_k_axpy, "opt_axpy", 4, axpy_sz, axpy_impl, axpy_fp);
    reg(fn, (const void *)opt_k_mix, "opt_mix", 6, mix_sz, mix_impl, mix_fp);
    reg(fn, (const void *)opt_k_scale, "opt_scale", 3, scale_sz, scale_impl, scale_fp);
    return 1;
}
