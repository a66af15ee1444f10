/*
 * nccl_common.c: MPI/cmocka plumbing, reference data types and reductions, device buffer
 * helpers for the vgpu NCCL tests (see nccl_common.h).
 */
#include "nccl_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

vnt_world_t vnt;
static int g_failures;   /* this rank, this test */
static int g_printed;

const ncclDataType_t vnt_all_types[ncclNumTypes] = {
    ncclInt8, ncclUint8, ncclInt32, ncclUint32, ncclInt64, ncclUint64,
    ncclFloat16, ncclFloat32, ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};
const ncclRedOp_t vnt_all_ops[ncclNumOps] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};

/* ---- MPI and cmocka ---- */

void vnt_init(int *argc, char ***argv)
{
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &vnt.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &vnt.size);
    if (vnt.rank != 0 && !freopen("/dev/null", "w", stdout))
        fprintf(stderr, "rank %d: cannot silence stdout\n", vnt.rank);
    int ndev = 1;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1)
        ndev = 1;
    cudaSetDevice(vnt.rank % ndev);
}

int vnt_run(const char *name, const struct CMUnitTest *tests, size_t n,
            CMFixtureFunction setup, CMFixtureFunction teardown)
{
    int failed = _cmocka_run_group_tests(name, tests, n, setup, teardown);
    int any = 0;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return any ? 1 : 0;
}

ncclUniqueId vnt_shared_id(MPI_Comm comm)
{
    ncclUniqueId id;
    int r;
    memset(&id, 0, sizeof(id));
    MPI_Comm_rank(comm, &r);
    if (r == 0)
        VNT_NCCL_OK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, comm);
    return id;
}

void vnt_fail(const char *file, int line, const char *fmt, ...)
{
    g_failures++;
    if (g_printed++ >= 20)
        return;
    va_list ap;
    char buf[1024];
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    fprintf(stderr, "rank %d: %s:%d: %s\n", vnt.rank, file, line, buf);
}

void vnt_end(void)
{
    int total = 0, mine = g_failures, mpi = 0;
    g_failures = g_printed = 0;
    MPI_Initialized(&mpi);
    if (mpi) /* single-process tests run without MPI */
        MPI_Allreduce(&mine, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    else
        total = mine;
    if (total)
        fail_msg("%d check(s) failed across %d ranks (this rank: %d; see stderr)", total,
                 vnt.size, mine);
}

static int g_saved_err = -1;
static FILE *g_capture;

void vnt_capture_begin(void)
{
    fflush(stderr);
    g_capture = tmpfile();
    if (!g_capture) {
        vnt_fail(__FILE__, __LINE__, "tmpfile failed");
        return;
    }
    g_saved_err = dup(2);
    dup2(fileno(g_capture), 2);
}

char *vnt_capture_end(void)
{
    if (!g_capture)
        return strdup("");
    fflush(stderr);
    dup2(g_saved_err, 2);
    close(g_saved_err);
    long len = (long)lseek(fileno(g_capture), 0, SEEK_END); /* written through fd 2 */
    char *buf = calloc(1, (size_t)(len > 0 ? len : 0) + 1);
    rewind(g_capture);
    if (len > 0 && fread(buf, 1, (size_t)len, g_capture) != (size_t)len)
        buf[0] = 0;
    fclose(g_capture);
    g_capture = NULL;
    fprintf(stderr, "%s", buf);
    return buf;
}

double vnt_wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- data types ---- */

size_t vnt_size(ncclDataType_t dt)
{
    static const size_t sz[ncclNumTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
    return sz[dt];
}

const char *vnt_type_name(ncclDataType_t dt)
{
    static const char *const n[ncclNumTypes] = {"int8", "uint8", "int32", "uint32", "int64",
                                                "uint64", "fp16", "fp32", "fp64", "bf16",
                                                "e4m3", "e5m2"};
    return n[dt];
}

const char *vnt_op_name(ncclRedOp_t op)
{
    static const char *const n[ncclNumOps] = {"sum", "prod", "max", "min", "avg"};
    return n[op];
}

int vnt_is_float(ncclDataType_t dt)
{
    return dt == ncclFloat16 || dt == ncclFloat32 || dt == ncclFloat64 || dt == ncclBfloat16 ||
           dt == ncclFloat8e4m3 || dt == ncclFloat8e5m2;
}

static int is_signed_int(ncclDataType_t dt)
{
    return dt == ncclInt8 || dt == ncclInt32 || dt == ncclInt64;
}

/* fp8 straight from the OCP definitions: e4m3 (bias 7, no infinity, S.1111.111 is NaN),
 * e5m2 (bias 15, IEEE-like). */
static double fp8_value(uint8_t b, int e4m3)
{
    int s = b >> 7, mb = e4m3 ? 3 : 2, eb = e4m3 ? 4 : 5, bias = e4m3 ? 7 : 15;
    int e = (b >> mb) & ((1 << eb) - 1), m = b & ((1 << mb) - 1);
    double v;
    if (e4m3 && e == 15 && m == 7)
        v = NAN;
    else if (!e4m3 && e == 31)
        v = m ? NAN : INFINITY;
    else if (e == 0)
        v = ldexp((double)m, 1 - bias - mb);
    else
        v = ldexp(1.0 + (double)m / (1 << mb), e - bias);
    return s ? -v : v;
}

/* fp8_value of every code, computed once (the search below looks at all of them). */
static const double *fp8_table(int e4m3)
{
    static double tab[2][256];
    static int ready[2];
    if (!ready[e4m3]) {
        for (int c = 0; c < 256; c++)
            tab[e4m3][c] = fp8_value((uint8_t)c, e4m3);
        ready[e4m3] = 1;
    }
    return tab[e4m3];
}

/* The nearest code by exhaustive search, ties to the code with an even mantissa. */
static uint8_t fp8_code(double v, int e4m3)
{
    const double *tab = fp8_table(e4m3);
    double max = e4m3 ? 448.0 : 57344.0;
    if (isnan(v))
        return e4m3 ? 0x7f : 0x7e;
    if (fabs(v) > max) {
        if (e4m3)
            return v < 0 ? 0xfe : 0x7e; /* saturate to +-448 */
        if (fabs(v) >= 61440.0)         /* max + half an ulp rounds to infinity */
            return v < 0 ? 0xfc : 0x7c;
        return v < 0 ? 0xfb : 0x7b;
    }
    int best = -1;
    double bd = INFINITY;
    for (int c = 0; c < 256; c++) {
        double x = tab[c];
        if (isnan(x) || isinf(x) || signbit(x) != signbit(v))
            continue;
        double d = fabs(x - v);
        if (d < bd || (d == bd && best >= 0 && (best & 1) && !(c & 1))) {
            bd = d;
            best = c;
        }
    }
    if (v == 0)
        return signbit(v) ? 0x80 : 0;
    return (uint8_t)best;
}

static uint16_t bf16_code(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if (isnan(f))
        return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even on the dropped 16 bits */
    return (uint16_t)(u >> 16);
}

double vnt_load(const void *p, ncclDataType_t dt)
{
    switch (dt) {
    case ncclInt8: return *(const int8_t *)p;
    case ncclUint8: return *(const uint8_t *)p;
    case ncclInt32: { int32_t v; memcpy(&v, p, 4); return v; }
    case ncclUint32: { uint32_t v; memcpy(&v, p, 4); return v; }
    case ncclInt64: { int64_t v; memcpy(&v, p, 8); return (double)v; }
    case ncclUint64: { uint64_t v; memcpy(&v, p, 8); return (double)v; }
    case ncclFloat16: { _Float16 h; memcpy(&h, p, 2); return (double)h; }
    case ncclFloat32: { float f; memcpy(&f, p, 4); return f; }
    case ncclFloat64: { double d; memcpy(&d, p, 8); return d; }
    case ncclBfloat16: {
        uint16_t b;
        memcpy(&b, p, 2);
        uint32_t u = (uint32_t)b << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    case ncclFloat8e4m3: return fp8_table(1)[*(const uint8_t *)p];
    case ncclFloat8e5m2: return fp8_table(0)[*(const uint8_t *)p];
    default: return NAN;
    }
}

void vnt_store(void *p, double v, ncclDataType_t dt)
{
    switch (dt) {
    case ncclInt8: *(int8_t *)p = (int8_t)(int64_t)v; break;
    case ncclUint8: *(uint8_t *)p = (uint8_t)(int64_t)v; break;
    case ncclInt32: { int32_t x = (int32_t)(int64_t)v; memcpy(p, &x, 4); break; }
    case ncclUint32: { uint32_t x = (uint32_t)(int64_t)v; memcpy(p, &x, 4); break; }
    case ncclInt64: { int64_t x = (int64_t)v; memcpy(p, &x, 8); break; }
    case ncclUint64: { uint64_t x = (uint64_t)(int64_t)v; memcpy(p, &x, 8); break; }
    case ncclFloat16: { _Float16 h = (_Float16)(float)v; memcpy(p, &h, 2); break; }
    case ncclFloat32: { float f = (float)v; memcpy(p, &f, 4); break; }
    case ncclFloat64: memcpy(p, &v, 8); break;
    case ncclBfloat16: { uint16_t b = bf16_code((float)v); memcpy(p, &b, 2); break; }
    case ncclFloat8e4m3: *(uint8_t *)p = fp8_code((float)v, 1); break;
    case ncclFloat8e5m2: *(uint8_t *)p = fp8_code((float)v, 0); break;
    default: break;
    }
}

double vnt_gen(int r, size_t i, ncclDataType_t dt, ncclRedOp_t op)
{
    int sgn = is_signed_int(dt) || vnt_is_float(dt);
    int wide = dt == ncclFloat32 || dt == ncclFloat64,
        half = dt == ncclFloat16 || dt == ncclBfloat16;
    double v;
    if (op == ncclProd) { /* magnitudes 1 and 2 keep 8-rank products in every type's range */
        v = (r + i) % 3 == 0 ? 2 : 1;
        if (sgn && (r * 7 + i) % 5 == 0)
            v = -v;
        if (wide)
            v *= 1.0 + 0.01 * (r + 1);
        else if (half)
            v *= 1.0 + 0.125 * (r % 2);
        return v;
    }
    v = (double)((r * 13 + i * 7) % 11) - (sgn ? 5 : 0);
    if (wide)
        v += 0.1 * (r + 1);
    else if (half)
        v += 0.25 * (r % 4);
    return v;
}

static void ref_int(void *out, const void *const *in, int n, size_t i, ncclDataType_t dt,
                    ncclRedOp_t op)
{
    size_t sz = vnt_size(dt);
    int sgn = is_signed_int(dt);
    /* Exact here: every test value is a small integer; wrapping comes from the store. */
    int64_t acc = (int64_t)vnt_load((const char *)in[0] + i * sz, dt);
    for (int k = 1; k < n; k++) {
        int64_t x = (int64_t)vnt_load((const char *)in[k] + i * sz, dt);
        switch (op) {
        case ncclProd: acc *= x; break;
        case ncclMax: acc = x > acc ? x : acc; break;
        case ncclMin: acc = x < acc ? x : acc; break;
        default: acc += x; break;
        }
    }
    char *dst = (char *)out + i * sz;
    vnt_store(dst, (double)acc, dt);
    if (op == ncclAvg) {
        int64_t s = (int64_t)vnt_load(dst, dt);
        vnt_store(dst, (double)(sgn ? s / n : (int64_t)((uint64_t)s / (uint64_t)n)), dt);
    }
}

void vnt_ref_reduce(void *out, const void *const *in, int n, size_t count, ncclDataType_t dt,
                    ncclRedOp_t op)
{
    size_t sz = vnt_size(dt);
    for (size_t i = 0; i < count; i++) {
        if (!vnt_is_float(dt)) {
            ref_int(out, in, n, i, dt, op);
        } else if (dt == ncclFloat64) {
            double acc = vnt_load((const char *)in[0] + i * sz, dt);
            for (int k = 1; k < n; k++) {
                double x = vnt_load((const char *)in[k] + i * sz, dt);
                acc = op == ncclProd ? acc * x : op == ncclMax ? fmax(acc, x)
                    : op == ncclMin ? fmin(acc, x) : acc + x;
            }
            vnt_store((char *)out + i * sz, op == ncclAvg ? acc / n : acc, dt);
        } else {
            float acc = (float)vnt_load((const char *)in[0] + i * sz, dt);
            for (int k = 1; k < n; k++) {
                float x = (float)vnt_load((const char *)in[k] + i * sz, dt);
                acc = op == ncclProd ? acc * x : op == ncclMax ? fmaxf(acc, x)
                    : op == ncclMin ? fminf(acc, x) : acc + x;
            }
            vnt_store((char *)out + i * sz, op == ncclAvg ? acc / (float)n : acc, dt);
        }
    }
}

void vnt_ref_premul(void *out, const void *const *in, int n, size_t count, ncclDataType_t dt,
                    const void *scalar)
{
    size_t sz = vnt_size(dt);
    double s = vnt_load(scalar, dt);
    for (size_t i = 0; i < count; i++) {
        char *dst = (char *)out + i * sz;
        if (!vnt_is_float(dt)) {
            int64_t acc = 0; /* small test values: exact, wrapping comes from the store */
            for (int k = 0; k < n; k++)
                acc += (int64_t)s * (int64_t)vnt_load((const char *)in[k] + i * sz, dt);
            vnt_store(dst, (double)acc, dt);
        } else if (dt == ncclFloat64) {
            double acc = 0;
            for (int k = 0; k < n; k++) {
                double x = s * vnt_load((const char *)in[k] + i * sz, dt);
                acc = k ? acc + x : x;
            }
            vnt_store(dst, acc, dt);
        } else {
            float acc = 0, fs = (float)s;
            for (int k = 0; k < n; k++) {
                float x = fs * (float)vnt_load((const char *)in[k] + i * sz, dt);
                acc = k ? acc + x : x;
            }
            vnt_store(dst, acc, dt);
        }
    }
}

size_t vnt_compare(const char *what, const void *expected, const void *got, size_t count,
                   ncclDataType_t dt)
{
    size_t sz = vnt_size(dt), bad = 0;
    for (size_t i = 0; i < count; i++) {
        const char *e = (const char *)expected + i * sz, *g = (const char *)got + i * sz;
        if (memcmp(e, g, sz) == 0)
            continue;
        if (bad++ < 3)
            vnt_fail(__FILE__, __LINE__, "%s: element %zu: expected %.9g, got %.9g", what, i,
                     vnt_load(e, dt), vnt_load(g, dt));
    }
    if (bad > 3)
        vnt_fail(__FILE__, __LINE__, "%s: %zu of %zu elements differ", what, bad, count);
    return bad;
}

/* ---- device buffers ---- */

void *vnt_dev_alloc(size_t bytes)
{
    void *p = NULL;
    VNT_CUDA_OK(cudaMalloc(&p, bytes ? bytes : 1));
    return p;
}

void vnt_to_dev(void *dev, const void *host, size_t bytes)
{
    VNT_CUDA_OK(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice));
}

void vnt_from_dev(void *host, const void *dev, size_t bytes)
{
    VNT_CUDA_OK(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost));
}
