/*
 * gemm_common.c: random GEMM problems, a float64 reference and its error bounds.
 *
 * Error bound for one output element (what gt_gemm_ref returns), with u = 2^-24:
 *  - inputs are exact (they are generated representable in their storage type), and the
 *    reference sums their products in float64, whose own error (k * 2^-53 relative) is
 *    negligible next to the terms below;
 *  - the device accumulates k products in one fp32 accumulator: each product is exact in
 *    the accumulator's precision before rounding, and k sequential additions err by at most
 *    k u sum|a_ip b_pj| (the classic gamma_k bound, k u << 1 here);
 *  - the epilogue rounds alpha*acc, beta*c, their sum and the bias addition: at most
 *    4 u (|alpha| S + |beta c| + |bias|). Together: E = (k + 4) u (|alpha| S + |beta c| + |bias|)
 *    with S = sum_p |a_ip b_pj|;
 *  - GELU: its derivative is at most 1.13 in magnitude, so E becomes 1.13 E, plus the fp32
 *    evaluation of the tanh formula (about a dozen roundings and tanhf's few ulp), bounded
 *    by 2^-20 |x|; ReLU adds nothing;
 *  - the single rounding to the output type adds u_out (|want| + E), with u_out = 2^-24
 *    (fp32), 2^-11 (fp16: 10 stored mantissa bits plus rounding) or 2^-8 (bf16: 7 bits),
 *    plus half the smallest subnormal for fp16 (2^-25, rounded up to 2^-24).
 *  - fp64 (CUDA_R_64F everywhere): the same shape with u = 2^-52, covering both the device's
 *    fp64 accumulation and the reference's own (both 2^-53 per rounding); an fp32 computation
 *    misses this bound by a factor of about 2^28.
 * A transposition, stride or type mistake produces errors of order |want| itself, far
 * outside these bounds for every type (the bf16 bound is 2^-8 relative).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_common.h"

/* ---- conversions ---- */

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float float_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

uint16_t gt_bf16_from_float(float f)
{
    uint32_t u = bits_of(f);
    if (isnan(f)) {
        return (uint16_t)((u >> 16) | 0x40u);
    }
    uint32_t lo = u & 0xffff0000u;     /* the neighbour towards zero */
    if (lo == u) {
        return (uint16_t)(u >> 16);
    }
    uint32_t hi = lo + 0x10000u;       /* the neighbour away from zero (maybe infinity) */
    double x = fabs((double)f);
    double vlo = fabs((double)float_of(lo));
    double vhi = (hi & 0x7fffffffu) == 0x7f800000u ? ldexp(1.0, 128) : fabs((double)float_of(hi));
    double dl = x - vlo, dh = vhi - x;
    if (dl < dh) {
        return (uint16_t)(lo >> 16);
    }
    if (dh < dl) {
        return (uint16_t)(hi >> 16);
    }
    return (uint16_t)(((lo >> 16) & 1u) ? hi >> 16 : lo >> 16);
}

float gt_bf16_to_float(uint16_t h) { return float_of((uint32_t)h << 16); }

uint16_t gt_f16_from_float(float f)
{
    _Float16 h = (_Float16)f;
    uint16_t u;
    memcpy(&u, &h, sizeof u);
    return u;
}

float gt_f16_to_float(uint16_t u)
{
    _Float16 h;
    memcpy(&h, &u, sizeof h);
    return (float)h;
}

size_t gt_type_size(cudaDataType_t t)
{
    return t == CUDA_R_64F ? 8 : t == CUDA_R_32F ? 4 : 2;
}

double gt_load(const void *buf, cudaDataType_t t, size_t i)
{
    switch (t) {
    case CUDA_R_16F: return gt_f16_to_float(((const uint16_t *)buf)[i]);
    case CUDA_R_16BF: return gt_bf16_to_float(((const uint16_t *)buf)[i]);
    case CUDA_R_64F: return ((const double *)buf)[i];
    default: return ((const float *)buf)[i];
    }
}

void gt_store(void *buf, cudaDataType_t t, size_t i, double v)
{
    switch (t) {
    case CUDA_R_16F: ((uint16_t *)buf)[i] = gt_f16_from_float((float)v); break;
    case CUDA_R_16BF: ((uint16_t *)buf)[i] = gt_bf16_from_float((float)v); break;
    case CUDA_R_64F: ((double *)buf)[i] = v; break;
    default: ((float *)buf)[i] = (float)v; break;
    }
}

/* ---- random numbers (splitmix64) ---- */

static uint64_t rng_state = 0x243f6a8885a308d3ull;

void gt_seed(uint64_t seed) { rng_state = seed; }

double gt_uniform(double lo, double hi)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return lo + (hi - lo) * (double)(z >> 11) * 0x1p-53;
}

/* ---- problems ---- */

static size_t span(int64_t rows, int64_t cols, int64_t ld, int64_t stride, int64_t batch)
{
    return (size_t)((batch - 1) * stride + (cols - 1) * ld + rows);
}

static void *fill(cudaDataType_t t, size_t n, int nan)
{
    void *p = malloc(n * gt_type_size(t) + 1);
    assert_non_null(p);
    for (size_t i = 0; i < n; i++) {
        gt_store(p, t, i, nan ? NAN : gt_uniform(-1.0, 1.0));
    }
    return p;
}

void gt_gemm_init(gt_gemm_t *g)
{
    int64_t ar = g->ta ? g->k : g->m, ac = g->ta ? g->m : g->k;
    int64_t br = g->tb ? g->n : g->k, bc = g->tb ? g->k : g->n;
    if (g->batch == 0) {
        g->batch = 1;
    }
    if (!g->lda) {
        g->lda = ar > 0 ? ar : 1;
    }
    if (!g->ldb) {
        g->ldb = br > 0 ? br : 1;
    }
    if (!g->ldc) {
        g->ldc = g->m > 0 ? g->m : 1;
    }
    if (!g->sa) {
        g->sa = g->lda * ac;
    }
    if (!g->sb) {
        g->sb = g->ldb * bc;
    }
    if (!g->sc) {
        g->sc = g->ldc * g->n;
    }
    if (!g->bias_type) {
        g->bias_type = g->c_type;
    }
    g->na = ac > 0 ? span(ar, ac, g->lda, g->sa, g->batch) : 1;
    g->nb = bc > 0 ? span(br, bc, g->ldb, g->sb, g->batch) : 1;
    g->nc = span(g->m, g->n, g->ldc, g->sc, g->batch);
    g->nbias = (size_t)(g->m > 0 ? g->m : 1);
    g->a = fill(g->ab_type, g->na, 0);
    g->b = fill(g->ab_type, g->nb, 0);
    g->c = fill(g->c_type, g->nc, g->c_nan);
    g->bias = fill(g->bias_type, g->nbias, 0);
}

void gt_gemm_free(gt_gemm_t *g)
{
    free(g->a);
    free(g->b);
    free(g->c);
    free(g->bias);
    g->a = g->b = g->c = g->bias = NULL;
}

static double gelu(double x)
{
    return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

void gt_gemm_ref(const gt_gemm_t *g, int64_t bt, int64_t i, int64_t j, double *want,
                 double *bound, double *pre)
{
    double dot = 0, s = 0;
    for (int64_t p = 0; p < g->k; p++) {
        size_t ia = (size_t)(bt * g->sa + (g->ta ? p + i * g->lda : i + p * g->lda));
        size_t ib = (size_t)(bt * g->sb + (g->tb ? j + p * g->ldb : p + j * g->ldb));
        double prod = gt_load(g->a, g->ab_type, ia) * gt_load(g->b, g->ab_type, ib);
        dot += prod;
        s += fabs(prod);
    }
    double c = g->beta != 0 ? gt_load(g->c, g->c_type, (size_t)(bt * g->sc + i + j * g->ldc)) : 0;
    double bias = (g->epi & GT_EPI_BIAS) ? gt_load(g->bias, g->bias_type, (size_t)i) : 0;
    /* fp64: the device's and the reference's own roundings, 2^-53 each. */
    const double u = g->ab_type == CUDA_R_64F ? 0x1p-52 : 0x1p-24;
    double e = (double)(g->k + 4) * u * (fabs(g->alpha) * s + fabs(g->beta * c) + fabs(bias));
    double x = g->alpha * dot + g->beta * c + bias;
    double v = x;
    if (g->epi & GT_EPI_RELU) {
        v = x > 0 ? x : 0;
    } else if (g->epi & GT_EPI_GELU) {
        v = gelu(x);
        e = 1.13 * e + 0x1p-20 * fabs(x);
    }
    double u_out = g->c_type == CUDA_R_16F ? 0x1p-11 : g->c_type == CUDA_R_16BF ? 0x1p-8 : u;
    double floor_abs = g->c_type == CUDA_R_16F   ? 0x1p-24
                       : g->c_type == CUDA_R_64F ? 0x1p-1022
                                                 : 0x1p-126;
    *want = v;
    *bound = e + u_out * (fabs(v) + e) + floor_abs;
    if (pre) {
        *pre = x;
    }
}

static int within(double got, double want, double bound)
{
    return fabs(got - want) <= bound;   /* false for NaN */
}

void gt_gemm_check(const gt_gemm_t *g, const void *out, const char *what)
{
    size_t esz = gt_type_size(g->c_type);
    char *touched = calloc(g->nc, 1);
    assert_non_null(touched);
    for (int64_t bt = 0; bt < g->batch; bt++) {
        for (int64_t j = 0; j < g->n; j++) {
            for (int64_t i = 0; i < g->m; i++) {
                size_t idx = (size_t)(bt * g->sc + i + j * g->ldc);
                double want, bound;
                gt_gemm_ref(g, bt, i, j, &want, &bound, NULL);
                double got = gt_load(out, g->c_type, idx);
                touched[idx] = 1;
                if (!within(got, want, bound)) {
                    free(touched);
                    fail_msg("%s: batch %lld element (%lld, %lld): got %.9g, want %.9g, "
                             "|diff| %.3g > bound %.3g", what, (long long)bt, (long long)i,
                             (long long)j, got, want, fabs(got - want), bound);
                }
            }
        }
    }
    for (size_t idx = 0; idx < g->nc; idx++) {
        if (!touched[idx] && memcmp((const char *)out + idx * esz, (const char *)g->c + idx * esz,
                                    esz) != 0) {
            free(touched);
            fail_msg("%s: element %zu outside the output matrices changed: got %.9g, was %.9g",
                     what, idx, gt_load(out, g->c_type, idx), gt_load(g->c, g->c_type, idx));
        }
    }
    free(touched);
}

void gt_gemm_check_aux(const gt_gemm_t *g, const void *aux, int64_t ld, int64_t s,
                       const char *what)
{
    /* aux holds the activation's input: the reference without the activation. */
    gt_gemm_t plain = *g;
    plain.epi &= GT_EPI_BIAS;
    for (int64_t bt = 0; bt < g->batch; bt++) {
        for (int64_t j = 0; j < g->n; j++) {
            for (int64_t i = 0; i < g->m; i++) {
                double want, bound;
                gt_gemm_ref(&plain, bt, i, j, &want, &bound, NULL);
                double got = gt_load(aux, g->c_type, (size_t)(bt * s + i + j * ld));
                if (!within(got, want, bound)) {
                    fail_msg("%s: aux batch %lld element (%lld, %lld): got %.9g, want %.9g, "
                             "bound %.3g", what, (long long)bt, (long long)i, (long long)j, got,
                             want, bound);
                }
            }
        }
    }
}

/* ---- device copies ---- */

static void *upload(const void *host, size_t bytes)
{
    void *p = NULL;
    GT_RT_OK(cudaMalloc(&p, bytes));
    GT_RT_OK(cudaMemcpy(p, host, bytes, cudaMemcpyHostToDevice));
    return p;
}

void gt_dev_upload(const gt_gemm_t *g, gt_dev_t *d)
{
    d->a = upload(g->a, g->na * gt_type_size(g->ab_type));
    d->b = upload(g->b, g->nb * gt_type_size(g->ab_type));
    d->c = upload(g->c, g->nc * gt_type_size(g->c_type));
    d->bias = upload(g->bias, g->nbias * gt_type_size(g->bias_type));
}

void *gt_dev_download_c(const gt_gemm_t *g, const gt_dev_t *d)
{
    size_t bytes = g->nc * gt_type_size(g->c_type);
    void *out = malloc(bytes);
    assert_non_null(out);
    GT_RT_OK(cudaDeviceSynchronize());
    GT_RT_OK(cudaMemcpy(out, d->c, bytes, cudaMemcpyDeviceToHost));
    return out;
}

void gt_dev_free(gt_dev_t *d)
{
    cudaFree(d->a);
    cudaFree(d->b);
    cudaFree(d->c);
    cudaFree(d->bias);
    memset(d, 0, sizeof *d);
}
