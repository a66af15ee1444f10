/*
 * nccl_reduce.c: data types and reductions of the vgpu's NCCL.
 *
 * Every rank reduces the inputs of all ranks itself, in rank order, so that all ranks get
 * bit-identical results (a real ring reduces in a rotating order per chunk; the vgpu
 * defines one order so that results are reproducible and checkable).
 *
 * Arithmetic: 16- and 8-bit floats are widened to fp32, reduced in fp32 and rounded once
 * to nearest even at the end (fp16, bf16 and fp8 e5m2 overflow to infinity; fp8 e4m3 has
 * no infinity and saturates to +-448). fp32 reduces in fp32, fp64 in fp64. Integers wrap
 * (two's complement) like the device's integer arithmetic. ncclAvg is the reduction with
 * ncclSum divided by nranks at the end (integers: truncating division in the type).
 * A pre-multiply-sum op (ncclRedOpCreatePreMulSum) multiplies each input by its scalar, in
 * the same arithmetic, before adding it. Max and min with NaN inputs are unspecified.
 */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "nccl_int.h"

/* A binary floating-point format narrower than fp32. */
typedef struct vgn_fmt {
    int ebits, mbits, bias;
    int ieee;          /* all-ones exponent encodes inf/NaN; else only S.1..1.1..1 is NaN */
    uint32_t nan_bits; /* the canonical NaN written for NaN inputs */
} vgn_fmt_t;

static const vgn_fmt_t k_f16 = {5, 10, 15, 1, 0x7e00};
static const vgn_fmt_t k_bf16 = {8, 7, 127, 1, 0x7fc0};
static const vgn_fmt_t k_e4m3 = {4, 3, 7, 0, 0x7f};
static const vgn_fmt_t k_e5m2 = {5, 2, 15, 1, 0x7e};

static const vgn_fmt_t *fmt_of(ncclDataType_t dt)
{
    switch (dt) {
    case ncclFloat16: return &k_f16;
    case ncclBfloat16: return &k_bf16;
    case ncclFloat8e4m3: return &k_e4m3;
    case ncclFloat8e5m2: return &k_e5m2;
    default: return NULL;
    }
}

static float fmt_decode(const vgn_fmt_t *f, uint32_t bits)
{
    uint32_t emask = (1u << f->ebits) - 1, mmask = (1u << f->mbits) - 1;
    uint32_t e = (bits >> f->mbits) & emask, m = bits & mmask;
    int neg = (bits >> (f->ebits + f->mbits)) & 1;
    float v;
    if (f->ieee && e == emask)
        v = m ? NAN : INFINITY;
    else if (!f->ieee && e == emask && m == mmask)
        v = NAN;
    else if (e == 0)
        v = ldexpf((float)m, 1 - f->bias - f->mbits);
    else
        v = ldexpf((float)(m | (1u << f->mbits)), (int)e - f->bias - f->mbits);
    return neg ? -v : v;
}

/* Largest finite value of the format: IEEE-like formats reserve the all-ones exponent,
 * e4m3 reserves only the all-ones mantissa under it. */
static float fmt_max(const vgn_fmt_t *f)
{
    int emax = ((1 << f->ebits) - 1) - f->bias - (f->ieee ? 1 : 0);
    uint32_t mmax = f->ieee ? (1u << f->mbits) - 1 : (1u << f->mbits) - 2;
    return ldexpf((float)((1u << f->mbits) | mmax), emax - f->mbits);
}

/* Rounds v to the nearest representable value, ties to even, and returns its bits. */
static uint32_t fmt_encode(const vgn_fmt_t *f, float v)
{
    uint32_t sign = signbit(v) ? 1u << (f->ebits + f->mbits) : 0;
    float a = fabsf(v), max = fmt_max(f);
    uint32_t one = 1u << f->mbits;
    if (isnan(v))
        return sign | f->nan_bits;
    if (a == 0.0f)
        return sign;
    if (isinf(a))
        return f->ieee ? sign | (((1u << f->ebits) - 1) << f->mbits) : sign | fmt_encode(f, max);
    int e2;
    (void)frexpf(a, &e2);
    int ue = e2 - 1, emin = 1 - f->bias;
    if (ue < emin)
        ue = emin; /* subnormal: the quantum stays that of the smallest normal binade */
    float r = rintf(ldexpf(a, f->mbits - ue)); /* exact scaling, then round to integer */
    if (ldexpf(r, ue - f->mbits) > max) {
        if (f->ieee)
            return sign | (((1u << f->ebits) - 1) << f->mbits);
        return sign | fmt_encode(f, max); /* saturate */
    }
    uint32_t ri = (uint32_t)r;
    if (ri < one) /* still subnormal (ue == emin) */
        return sign | ri;
    if (ri == 2 * one) { /* rounding carried into the next binade */
        ri = one;
        ue++;
    }
    return sign | ((uint32_t)(ue + f->bias) << f->mbits) | (ri - one);
}

size_t vgn_dtype_size(int dtype)
{
    switch (dtype) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
    }
}

const char *vgn_dtype_name(int dtype)
{
    static const char *const names[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64",
                                        "float16", "float32", "float64", "bfloat16",
                                        "float8e4m3", "float8e5m2"};
    return dtype >= 0 && dtype < ncclNumTypes ? names[dtype] : "invalid-dtype";
}

const char *vgn_redop_name(int op)
{
    static const char *const names[] = {"sum", "prod", "max", "min", "avg", "premulsum"};
    return op >= 0 && op <= ncclNumOps ? names[op] : "invalid-op";
}

const char *vgn_kind_name(vgn_kind_t k)
{
    static const char *const names[] = {"allreduce", "allgather", "reducescatter", "broadcast",
                                        "reduce", "alltoall", "gather", "scatter", "send",
                                        "recv"};
    return k < VGN_NKINDS ? names[k] : "?";
}

/* Every code of the 16-bit float and the two fp8 formats, decoded once: the reductions
 * decode n inputs per output, so decoding is their inner loop (bf16 is a shift). */
static float g_f16[1 << 16], g_e4m3[256], g_e5m2[256];
static pthread_once_t g_tables_once = PTHREAD_ONCE_INIT;

static void tables_init(void)
{
    for (uint32_t b = 0; b < (1u << 16); b++)
        g_f16[b] = fmt_decode(&k_f16, b);
    for (uint32_t b = 0; b < 256; b++) {
        g_e4m3[b] = fmt_decode(&k_e4m3, b);
        g_e5m2[b] = fmt_decode(&k_e5m2, b);
    }
}

static float to_float(const void *p, ncclDataType_t dt)
{
    float v;
    uint16_t h;
    switch (dt) {
    case ncclFloat32:
        memcpy(&v, p, 4);
        return v;
    case ncclBfloat16: {
        memcpy(&h, p, 2);
        uint32_t u = (uint32_t)h << 16; /* bf16 is the top half of an fp32 */
        memcpy(&v, &u, 4);
        return v;
    }
    case ncclFloat16:
        memcpy(&h, p, 2);
        return g_f16[h];
    case ncclFloat8e4m3:
        return g_e4m3[*(const uint8_t *)p];
    default:
        return g_e5m2[*(const uint8_t *)p];
    }
}

static void from_float(void *p, float v, ncclDataType_t dt)
{
    const vgn_fmt_t *f = fmt_of(dt);
    if (dt == ncclFloat32) {
        memcpy(p, &v, 4);
        return;
    }
    uint32_t b = fmt_encode(f, v);
    if (f->ebits + f->mbits == 15) {
        uint16_t h = (uint16_t)b;
        memcpy(p, &h, 2);
    } else {
        *(uint8_t *)p = (uint8_t)b;
    }
}

/* Elements per accumulation block: bounds the scratch space and keeps it in cache. */
#define VGN_BLOCK 1024

static void reduce_float(void *out, const void *const *in, int n, size_t count,
                         ncclDataType_t dt, ncclRedOp_t op, const void *scalar)
{
    pthread_once(&g_tables_once, tables_init);
    size_t sz = vgn_dtype_size(dt);
    float acc[VGN_BLOCK], s = op == VGN_PREMUL ? to_float(scalar, dt) : 1.0f;
    if (op == VGN_PREMUL)
        op = ncclSum;
    for (size_t b0 = 0; b0 < count; b0 += VGN_BLOCK) {
        size_t nb = count - b0 < VGN_BLOCK ? count - b0 : VGN_BLOCK;
        for (size_t i = 0; i < nb; i++)
            acc[i] = s * to_float((const char *)in[0] + (b0 + i) * sz, dt);
        for (int k = 1; k < n; k++) {
            const char *src = (const char *)in[k] + b0 * sz;
            for (size_t i = 0; i < nb; i++) {
                float x = s * to_float(src + i * sz, dt);
                switch (op) {
                case ncclProd: acc[i] *= x; break;
                case ncclMax: acc[i] = x > acc[i] ? x : acc[i]; break;
                case ncclMin: acc[i] = x < acc[i] ? x : acc[i]; break;
                default: acc[i] += x; break; /* sum, avg */
                }
            }
        }
        for (size_t i = 0; i < nb; i++) {
            float v = op == ncclAvg ? acc[i] / (float)n : acc[i];
            from_float((char *)out + (b0 + i) * sz, v, dt);
        }
    }
}

static void reduce_double(double *out, const void *const *in, int n, size_t count,
                          ncclRedOp_t op, const void *scalar)
{
    double s = 1.0;
    if (op == VGN_PREMUL) {
        memcpy(&s, scalar, 8);
        op = ncclSum;
    }
    for (size_t i = 0; i < count; i++) {
        double acc;
        memcpy(&acc, (const char *)in[0] + i * 8, 8);
        acc *= s;
        for (int k = 1; k < n; k++) {
            double x;
            memcpy(&x, (const char *)in[k] + i * 8, 8);
            x *= s;
            switch (op) {
            case ncclProd: acc *= x; break;
            case ncclMax: acc = x > acc ? x : acc; break;
            case ncclMin: acc = x < acc ? x : acc; break;
            default: acc += x; break;
            }
        }
        if (op == ncclAvg)
            acc /= n;
        memcpy((char *)out + i * 8, &acc, 8);
    }
}

/* Integers are held as uint64 (sign-extended for signed types): sums and products wrap
 * modulo 2^64, and truncating to the type's width gives the same result as wrapping in it. */
static uint64_t int_load(const char *p, ncclDataType_t dt)
{
    switch (dt) {
    case ncclInt8: return (uint64_t)(int64_t) * (const int8_t *)p;
    case ncclUint8: return *(const uint8_t *)p;
    case ncclInt32: { int32_t v; memcpy(&v, p, 4); return (uint64_t)(int64_t)v; }
    case ncclUint32: { uint32_t v; memcpy(&v, p, 4); return v; }
    default: { uint64_t v; memcpy(&v, p, 8); return v; }
    }
}

static void int_store(char *p, uint64_t v, ncclDataType_t dt)
{
    switch (dt) {
    case ncclInt8: case ncclUint8: *(uint8_t *)p = (uint8_t)v; break;
    case ncclInt32: case ncclUint32: { uint32_t w = (uint32_t)v; memcpy(p, &w, 4); break; }
    default: memcpy(p, &v, 8); break;
    }
}

static void reduce_int(void *out, const void *const *in, int n, size_t count,
                       ncclDataType_t dt, ncclRedOp_t op, const void *scalar)
{
    size_t sz = vgn_dtype_size(dt);
    int is_signed = dt == ncclInt8 || dt == ncclInt32 || dt == ncclInt64;
    uint64_t s = 1;
    if (op == VGN_PREMUL) {
        s = int_load(scalar, dt);
        op = ncclSum;
    }
    for (size_t i = 0; i < count; i++) {
        uint64_t acc = s * int_load((const char *)in[0] + i * sz, dt);
        for (int k = 1; k < n; k++) {
            uint64_t x = s * int_load((const char *)in[k] + i * sz, dt);
            switch (op) {
            case ncclProd: acc *= x; break;
            case ncclMax:
                if (is_signed ? (int64_t)x > (int64_t)acc : x > acc)
                    acc = x;
                break;
            case ncclMin:
                if (is_signed ? (int64_t)x < (int64_t)acc : x < acc)
                    acc = x;
                break;
            default: acc += x; break;
            }
        }
        char *dst = (char *)out + i * sz;
        int_store(dst, acc, dt);
        if (op == ncclAvg) { /* divide the sum as the type holds it, truncating */
            uint64_t sum = int_load(dst, dt);
            uint64_t q = is_signed ? (uint64_t)((int64_t)sum / n) : sum / (uint64_t)n;
            int_store(dst, q, dt);
        }
    }
}

void vgn_reduce(void *out, const void *const *in, int n, size_t count, ncclDataType_t dt,
                ncclRedOp_t op, const void *scalar)
{
    switch (dt) {
    case ncclFloat16: case ncclBfloat16: case ncclFloat32: case ncclFloat8e4m3:
    case ncclFloat8e5m2:
        reduce_float(out, in, n, count, dt, op, scalar);
        break;
    case ncclFloat64:
        reduce_double(out, in, n, count, op, scalar);
        break;
    default:
        reduce_int(out, in, n, count, dt, op, scalar);
        break;
    }
}
