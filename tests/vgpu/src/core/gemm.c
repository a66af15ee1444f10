/*
 * gemm.c: the reference math behind the vgpu's cuBLAS and cuBLASLt (contract in gemm.h).
 *
 * Shape of the computation (one batch entry): the output is cut into MC x NC blocks. For a
 * block, op(A) rows and op(B) columns are converted to fp32 and packed, KC values of k at a
 * time, into slivers of MR rows and NR columns; a register-blocked micro-kernel then adds
 * a(i,p) * b(p,j) into one fp32 accumulator per output element for p = 0, 1, ..., k-1 in
 * that order, so every element sees exactly the naive loop's sequence of roundings
 * whatever the blocking (hence bit-reproducible and independent of the tile sizes). The
 * accumulators of a block persist in a scratch tile between k panels; the epilogue then
 * scales, adds beta*C and the bias, applies the activation and rounds once to D's type.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gemm.h"

/* Workloads run real GEMMs of a few hundred in each dimension and the tests run Debug
 * builds, where -O0 code would be ten times slower; the file is plain C with no
 * floating-point reassociation at any level, so optimising it cannot change a result.
 * FMA contraction is kept off so that a build for an FMA-capable target rounds the same. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O2", "fp-contract=off")
#endif

/* Tile sizes. MR x NR accumulators (2 x 6 vectors of 4 floats) fit the 16 SSE registers;
 * a KC-long sliver of A or B (12 KiB or 9 KiB) stays in L1; MC x KC and KC x NC packs
 * (192 KiB and 288 KiB) stay in L2. MC and NC are multiples of MR and NR. */
#define MR 8
#define NR 6
#define MC 128
#define NC 192
#define KC 384

typedef float v4f __attribute__((vector_size(16)));

/* ---- conversions ---- */

static inline uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

VG_API size_t vg_gemm_type_size(vg_gemm_type_t t)
{
    return t == VG_GEMM_F64 ? 8 : t == VG_GEMM_F32 ? 4 : 2;
}

VG_API const char *vg_gemm_type_name(vg_gemm_type_t t)
{
    switch (t) {
    case VG_GEMM_F32: return "f32";
    case VG_GEMM_F16: return "f16";
    case VG_GEMM_BF16: return "bf16";
    case VG_GEMM_F64: return "f64";
    }
    return "?";
}

VG_API float vg_gemm_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0x1f) {                      /* infinity, or NaN (quieted, payload kept) */
        return u2f(sign | 0x7f800000u | (man ? 0x400000u : 0) | (man << 13));
    }
    if (exp != 0) {                         /* normal: rebias 15 -> 127 */
        return u2f(sign | ((exp + 112) << 23) | (man << 13));
    }
    if (man == 0) {
        return u2f(sign);
    }
    /* Subnormal man * 2^-24: shift the leading one up to the implicit bit. */
    uint32_t e = 113;
    while (!(man & 0x400u)) {
        man <<= 1;
        e--;
    }
    return u2f(sign | (e << 23) | ((man & 0x3ffu) << 13));
}

VG_API uint16_t vg_gemm_f32_to_f16(float f)
{
    uint32_t u = f2u(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) {                  /* NaN: keep the top payload bits, force quiet */
        return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    }
    if (a >= 0x477ff000u) {                 /* >= 65520 rounds past 65504: infinity */
        return (uint16_t)(sign | 0x7c00u);
    }
    if (a >= 0x38800000u) {                 /* normal half (>= 2^-14) */
        /* Adding 0xfff plus the kept lsb rounds to nearest even in the 13 dropped bits; a
         * carry out of the mantissa correctly bumps the exponent. */
        uint32_t r = a + 0xfffu + ((a >> 13) & 1u);
        return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
    }
    if (a <= 0x33000000u) {                 /* <= 2^-25: half of the smallest subnormal,
                                               the tie goes to the even zero */
        return sign;
    }
    /* Subnormal half: the value in units of 2^-24 is m >> (126 - e), rounded to even. */
    uint32_t e = a >> 23;
    uint32_t m = (a & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - e;               /* 14 .. 24 */
    uint32_t q = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) {
        q++;                                /* may become 0x400, the smallest normal */
    }
    return (uint16_t)(sign | q);
}

VG_API float vg_gemm_bf16_to_f32(uint16_t h) { return u2f((uint32_t)h << 16); }

VG_API uint16_t vg_gemm_f32_to_bf16(float f)
{
    uint32_t u = f2u(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        return (uint16_t)((u >> 16) | 0x40u);   /* quiet NaN, sign and top payload kept */
    }
    /* Round to nearest even on the low 16 bits; the largest finite values carry into the
     * exponent and become infinity, as they should. */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

VG_API float vg_gemm_gelu(float x)
{
    const float k0 = 0.7978845608028654f;   /* sqrt(2 / pi) */
    const float k1 = 0.044715f;
    return 0.5f * x * (1.0f + tanhf(k0 * (x + k1 * x * x * x)));
}

/* Converts n elements of type t at src[off + i*ss] into dst[i*ds]. One switch per run of
 * elements keeps type dispatch out of the inner loops. */
static void load_f32(const void *src, vg_gemm_type_t t, int64_t off, int64_t ss, int64_t n,
                     float *dst, int64_t ds)
{
    switch (t) {
    case VG_GEMM_F32: {
        const float *s = (const float *)src + off;
        for (int64_t i = 0; i < n; i++) {
            dst[i * ds] = s[i * ss];
        }
        break;
    }
    case VG_GEMM_F16: {
        const uint16_t *s = (const uint16_t *)src + off;
        for (int64_t i = 0; i < n; i++) {
            dst[i * ds] = vg_gemm_f16_to_f32(s[i * ss]);
        }
        break;
    }
    case VG_GEMM_BF16: {
        const uint16_t *s = (const uint16_t *)src + off;
        for (int64_t i = 0; i < n; i++) {
            dst[i * ds] = u2f((uint32_t)s[i * ss] << 16);
        }
        break;
    }
    case VG_GEMM_F64:
        break;              /* fp64 never takes the fp32 path (vg__gemm_run_f64) */
    }
}

/* Stores n contiguous floats into dst[off ...] as type t. */
static void store_f32(void *dst, vg_gemm_type_t t, int64_t off, int64_t n, const float *src)
{
    switch (t) {
    case VG_GEMM_F32:
        memcpy((float *)dst + off, src, (size_t)n * sizeof(float));
        break;
    case VG_GEMM_F16: {
        uint16_t *d = (uint16_t *)dst + off;
        for (int64_t i = 0; i < n; i++) {
            d[i] = vg_gemm_f32_to_f16(src[i]);
        }
        break;
    }
    case VG_GEMM_BF16: {
        uint16_t *d = (uint16_t *)dst + off;
        for (int64_t i = 0; i < n; i++) {
            d[i] = vg_gemm_f32_to_bf16(src[i]);
        }
        break;
    }
    case VG_GEMM_F64:
        break;              /* fp64 never takes the fp32 path (vg__gemm_run_f64) */
    }
}

/* ---- packing ---- */

/* Packs op(A)(i0 .. i0+mc-1, p0 .. p0+kc-1) into slivers of MR rows: sliver r holds, for
 * each p, MR consecutive rows (Ap[r*MR*kc + p*MR + ii]); rows past mc are zero. */
static void pack_a(const vg_gemm_desc_t *g, const void *a, int64_t i0, int64_t mc, int64_t p0,
                   int64_t kc, float *ap)
{
    int64_t slivers = (mc + MR - 1) / MR;
    memset(ap, 0, (size_t)(slivers * MR * kc) * sizeof(float));
    if (!g->trans_a) {
        /* A is m x k: a column of A holds rows i contiguously. */
        for (int64_t r = 0; r < slivers; r++) {
            int64_t rows = mc - r * MR < MR ? mc - r * MR : MR;
            for (int64_t p = 0; p < kc; p++) {
                load_f32(a, g->a_type, (i0 + r * MR) + (p0 + p) * g->lda, 1, rows,
                         ap + r * MR * kc + p * MR, 1);
            }
        }
    } else {
        /* A is k x m: op(A)(i, p) = A[p + i*lda], so each row i is a contiguous run of p. */
        for (int64_t i = 0; i < mc; i++) {
            load_f32(a, g->a_type, p0 + (i0 + i) * g->lda, 1, kc,
                     ap + (i / MR) * MR * kc + (i % MR), MR);
        }
    }
}

/* Packs op(B)(p0 .. p0+kc-1, j0 .. j0+nc-1) into slivers of NR columns
 * (Bp[s*NR*kc + p*NR + jj]); columns past nc are zero. */
static void pack_b(const vg_gemm_desc_t *g, const void *b, int64_t p0, int64_t kc, int64_t j0,
                   int64_t nc, float *bp)
{
    int64_t slivers = (nc + NR - 1) / NR;
    memset(bp, 0, (size_t)(slivers * NR * kc) * sizeof(float));
    if (!g->trans_b) {
        /* B is k x n: op(B)(p, j) = B[p + j*ldb], each column a contiguous run of p. */
        for (int64_t j = 0; j < nc; j++) {
            load_f32(b, g->b_type, p0 + (j0 + j) * g->ldb, 1, kc,
                     bp + (j / NR) * NR * kc + (j % NR), NR);
        }
    } else {
        /* B is n x k: op(B)(p, j) = B[j + p*ldb], each p a contiguous run of columns j. */
        for (int64_t s = 0; s < slivers; s++) {
            int64_t cols = nc - s * NR < NR ? nc - s * NR : NR;
            for (int64_t p = 0; p < kc; p++) {
                load_f32(b, g->b_type, (j0 + s * NR) + (p0 + p) * g->ldb, 1, cols,
                         bp + s * NR * kc + p * NR, 1);
            }
        }
    }
}

/* ---- micro-kernel ---- */

static inline v4f vload(const float *p)
{
    v4f v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void vstore(float *p, v4f v) { memcpy(p, &v, sizeof v); }

/* acc(MR x NR, column-major with leading dimension ldt) += A sliver * B sliver over kc
 * values of p, in increasing p. first: start from zero instead of loading acc. Each lane
 * is one output element's own accumulator: a multiply then an add per p, no reassociation. */
static void micro(int64_t kc, const float *ap, const float *bp, float *acc, int64_t ldt,
                  int first)
{
    v4f c[NR][2];
    for (int j = 0; j < NR; j++) {
        if (first) {
            c[j][0] = (v4f){0, 0, 0, 0};
            c[j][1] = (v4f){0, 0, 0, 0};
        } else {
            c[j][0] = vload(acc + j * ldt);
            c[j][1] = vload(acc + j * ldt + 4);
        }
    }
    for (int64_t p = 0; p < kc; p++) {
        v4f a0 = vload(ap + p * MR);
        v4f a1 = vload(ap + p * MR + 4);
        const float *b = bp + p * NR;
#pragma GCC unroll 6
        for (int j = 0; j < NR; j++) {
            v4f bj = {b[j], b[j], b[j], b[j]};
            c[j][0] += a0 * bj;
            c[j][1] += a1 * bj;
        }
    }
    for (int j = 0; j < NR; j++) {
        vstore(acc + j * ldt, c[j][0]);
        vstore(acc + j * ldt + 4, c[j][1]);
    }
}

/* ---- epilogue ---- */

typedef struct scratch {
    float *ap;     /* MC x KC packed A */
    float *bp;     /* KC x NC packed B */
    float *tile;   /* MC x NC accumulators, column-major, ld MC */
    float *col;    /* MC floats: one column of C, bias or results */
    float *bias;   /* MC floats */
} scratch_t;

/* Finishes rows i0 .. i0+mc-1 of columns j0 .. j0+nc-1 of batch entry bt. acc: the
 * accumulators (ld MC), or NULL when op(A)*op(B) does not contribute (alpha == 0, k == 0). */
static void epilogue(const vg_gemm_desc_t *g, int64_t bt, int64_t i0, int64_t mc, int64_t j0,
                     int64_t nc, const float *acc, scratch_t *s)
{
    float *t = s->col;
    /* The scalars came from fp32 or fp16 values, so these conversions are exact. */
    const float alpha = (float)g->alpha, beta = (float)g->beta;
    int has_bias = (g->epilogue & VG_GEMM_EPI_BIAS) != 0;
    if (has_bias) {
        load_f32(g->bias, g->bias_type, bt * g->stride_bias + i0, 1, mc, s->bias, 1);
    }
    for (int64_t j = 0; j < nc; j++) {
        if (beta != 0.0f) {
            load_f32(g->c, g->c_type, bt * g->stride_c + i0 + (j0 + j) * g->ldc, 1, mc, t, 1);
            for (int64_t i = 0; i < mc; i++) {
                t[i] *= beta;
            }
        } else {
            memset(t, 0, (size_t)mc * sizeof(float));
        }
        if (acc) {
            /* alpha*acc + beta*c, rounded in that order as a GPU epilogue does. */
            const float *aj = acc + j * MC;
            for (int64_t i = 0; i < mc; i++) {
                t[i] = alpha * aj[i] + t[i];
            }
        }
        if (has_bias) {
            for (int64_t i = 0; i < mc; i++) {
                t[i] += s->bias[i];
            }
        }
        if (g->epilogue & VG_GEMM_EPI_AUX) {
            store_f32(g->aux, g->aux_type, bt * g->stride_aux + i0 + (j0 + j) * g->ld_aux, mc, t);
        }
        if (g->epilogue & VG_GEMM_EPI_RELU) {
            for (int64_t i = 0; i < mc; i++) {
                t[i] = t[i] > 0.0f ? t[i] : 0.0f;
            }
        } else if (g->epilogue & VG_GEMM_EPI_GELU) {
            for (int64_t i = 0; i < mc; i++) {
                t[i] = vg_gemm_gelu(t[i]);
            }
        }
        store_f32(g->d, g->d_type, bt * g->stride_d + i0 + (j0 + j) * g->ldd, mc, t);
    }
}

/* ---- driver ---- */

/* One MC x NC block of one batch entry: all k panels into the tile, then the epilogue. */
static void block(const vg_gemm_desc_t *g, int64_t bt, int64_t i0, int64_t mc, int64_t j0,
                  int64_t nc, scratch_t *s)
{
    const void *a = (const char *)g->a + bt * g->stride_a * (int64_t)vg_gemm_type_size(g->a_type);
    const void *b = (const char *)g->b + bt * g->stride_b * (int64_t)vg_gemm_type_size(g->b_type);
    for (int64_t p0 = 0; p0 < g->k; p0 += KC) {
        int64_t kc = g->k - p0 < KC ? g->k - p0 : KC;
        pack_b(g, b, p0, kc, j0, nc, s->bp);
        pack_a(g, a, i0, mc, p0, kc, s->ap);
        for (int64_t jr = 0; jr < nc; jr += NR) {
            for (int64_t ir = 0; ir < mc; ir += MR) {
                micro(kc, s->ap + ir * kc, s->bp + jr * kc, s->tile + ir + jr * MC, MC, p0 == 0);
            }
        }
    }
    epilogue(g, bt, i0, mc, j0, nc, s->tile, s);
}

VG_API int vg_gemm_run(const vg_gemm_desc_t *g)
{
    if (g->m <= 0 || g->n <= 0 || g->batch <= 0) {
        return 0;
    }
    if (g->a_type == VG_GEMM_F64) {
        return vg__gemm_run_f64(g);
    }
    int product = (float)g->alpha != 0.0f && g->k > 0;
    scratch_t s = {0};
    /* Edge micro-tiles compute (and store) a full MR x NR block; MC and NC being multiples
     * of MR and NR keeps that inside the MC x NC tile. */
    s.tile = malloc(sizeof(float) * (size_t)MC * NC);
    s.col = malloc(sizeof(float) * MC);
    s.bias = malloc(sizeof(float) * MC);
    if (product) {
        s.ap = malloc(sizeof(float) * (size_t)MC * KC);
        s.bp = malloc(sizeof(float) * (size_t)KC * NC);
    }
    int rc = 0;
    if (!s.tile || !s.col || !s.bias || (product && (!s.ap || !s.bp))) {
        rc = -1;
        goto out;
    }
    for (int64_t bt = 0; bt < g->batch; bt++) {
        for (int64_t j0 = 0; j0 < g->n; j0 += NC) {
            int64_t nc = g->n - j0 < NC ? g->n - j0 : NC;
            for (int64_t i0 = 0; i0 < g->m; i0 += MC) {
                int64_t mc = g->m - i0 < MC ? g->m - i0 : MC;
                if (product) {
                    block(g, bt, i0, mc, j0, nc, &s);
                } else {
                    epilogue(g, bt, i0, mc, j0, nc, NULL, &s);
                }
            }
        }
    }
out:
    free(s.ap);
    free(s.bp);
    free(s.tile);
    free(s.col);
    free(s.bias);
    return rc;
}
