/*
 * op_desc.c: what an op is (signature, shape, class, name) and what memory it touches.
 *
 * Signatures must be equal for the same call in two runs of the same program, so nothing
 * that changes from run to run enters them: no pointers, no stream handles. Kernels are
 * named by the runtime (cudaFuncGetName / cuFuncGetName); where it cannot say, by the
 * symbol dladdr finds, or by the function's offset inside its object, which is stable
 * across runs of one build.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fnmatch.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uthash.h>

#include "common/config.h"
#include "memtab.h"
#include "nccl_op.h"
#include "op_internal.h"
#include "plan.h"

#define DH__FNV_OFF 0xcbf29ce484222325ull
#define DH__FNV_PRIME 0x100000001b3ull

static uint64_t dh__mix(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= DH__FNV_PRIME;
    }
    return h;
}

static uint64_t dh__mixu(uint64_t h, uint64_t v) { return dh__mix(h, &v, sizeof v); }

static uint64_t dh__mixs(uint64_t h, const char *s) { return dh__mix(h, s, strlen(s) + 1); }

/* ---- kernel names, once per function ---- */

typedef struct dh__kname {
    const void *key;
    int driver;
    int comm;                 /* its name matches DHELIX_COMM_KERNELS */
    char name[56];
    uint64_t hash;
    UT_hash_handle hh;
} dh__kname_t;

static pthread_mutex_t dh__kn_lock = PTHREAD_MUTEX_INITIALIZER;
static dh__kname_t *dh__kn; /* guarded by dh__kn_lock */

static void dh__kname_lookup(const void *f, int driver, char *out, size_t n)
{
    const dh_real_t *r = dh_real();
    const char *name = NULL;
    if (!driver) {
        dh_real_cudaFuncGetName_t get = DH_REAL_FN(r, cudaFuncGetName);
        if (get && dh__rt_quiet_begin(r) == DH_OK) {
            if (get(&name, f) != cudaSuccess)
                name = NULL;
            dh__rt_quiet_end(r);
        }
    } else {
        dh_real_cuFuncGetName_t get = DH_REAL_FN(r, cuFuncGetName);
        if (get && get(&name, (CUfunction)f) != CUDA_SUCCESS)
            name = NULL;
    }
    if (name && *name) {
        snprintf(out, n, "%s", name);
        return;
    }
    Dl_info di;
    if (!driver && dladdr(f, &di) && di.dli_fname) {
        const char *obj = strrchr(di.dli_fname, '/');
        if (di.dli_sname)
            snprintf(out, n, "%s", di.dli_sname);
        else
            snprintf(out, n, "%s+0x%lx", obj ? obj + 1 : di.dli_fname,
                     (unsigned long)((uintptr_t)f - (uintptr_t)di.dli_fbase));
        return;
    }
    snprintf(out, n, "%s", driver ? "cu_kernel" : "kernel");
}

/* Whether name matches one of DHELIX_COMM_KERNELS's globs. */
static int dh__comm_kernel(const char *name)
{
    char list[sizeof dh_config()->comm_kernels];
    memcpy(list, dh_config()->comm_kernels, sizeof list);
    for (char *save = NULL, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        while (*t == ' ')
            t++;
        if (*t && fnmatch(t, name, 0) == 0)
            return 1;
    }
    return 0;
}

static const dh__kname_t *dh__kname(const void *f, int driver)
{
    pthread_mutex_lock(&dh__kn_lock);
    dh__kname_t *e;
    HASH_FIND_PTR(dh__kn, &f, e);
    if (e && e->driver != driver)
        e = NULL;
    pthread_mutex_unlock(&dh__kn_lock);
    if (e)
        return e;
    e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->key = f;
    e->driver = driver;
    dh__kname_lookup(f, driver, e->name, sizeof e->name);
    e->hash = dh__mixs(DH__FNV_OFF, e->name);
    e->comm = dh__comm_kernel(e->name);
    pthread_mutex_lock(&dh__kn_lock);
    dh__kname_t *old;
    HASH_FIND_PTR(dh__kn, &f, old);
    if (old) {
        free(e);
        e = old;
    } else {
        HASH_ADD_PTR(dh__kn, key, e);
    }
    pthread_mutex_unlock(&dh__kn_lock);
    return e;
}

/* ---- descriptions ---- */

static const char *dh__tname(int t)
{
    switch (t) {
    case CUDA_R_32F: return "f32";
    case CUDA_R_16F: return "f16";
    case CUDA_R_16BF: return "bf16";
    case CUDA_R_64F: return "f64";
    case CUDA_R_8I: return "i8";
    case CUDA_R_32I: return "i32";
    default: return "t?";
    }
}

static void dh__desc_kernel(const dh_op_t *op, dh_op_desc_t *d)
{
    const void *f;
    unsigned grid[3], block[3];
    size_t shmem, nargs;
    const unsigned char *args;
    dh__kernel_view(op, &f, grid, block, &shmem, &args, &nargs);
    const dh__kname_t *kn = dh__kname(f, op->kind == DH_OP_CU_KERNEL);
    d->cls = kn && kn->comm ? DH_CLS_COMM : DH_CLS_COMPUTE;
    d->sig = dh__mixu(kn ? kn->hash : 0, op->kind);
    d->sig = dh__mix(d->sig, block, sizeof(unsigned) * 3);
    d->sig = dh__mixu(d->sig, shmem);
    d->shape = dh__mix(DH__FNV_OFF, grid, sizeof(unsigned) * 3);
    snprintf(d->name, sizeof d->name, "%s", kn ? kn->name : "kernel");
}

static void dh__desc_gemm(const dh_op_t *op, dh_op_desc_t *d)
{
    dh__gemm_view_t v;
    dh__gemm_view(op, &v);
    int at = v.sgemm ? CUDA_R_32F : (int)v.at;
    d->cls = DH_CLS_COMPUTE;
    uint64_t h = dh__mixu(DH__FNV_OFF, op->kind);
    h = dh__mixu(h, (uint64_t)v.sgemm | (uint64_t)(v.batch > 0) << 8 | (uint64_t)v.ta << 16 |
                        (uint64_t)v.tb << 24);
    h = dh__mixu(h, (uint64_t)at | (uint64_t)v.bt << 16 | (uint64_t)v.ct << 32);
    d->sig = dh__mixu(h, (uint64_t)v.compute);
    int64_t dims[] = {v.m, v.n, v.k, v.lda, v.ldb, v.ldc, v.batch, v.sa, v.sb, v.sc};
    d->shape = dh__mix(DH__FNV_OFF, dims, sizeof dims);
    double b = v.batch > 0 ? v.batch : 1;
    d->flops = 2.0 * v.m * v.n * v.k * b;
    char batch[24] = "";
    if (v.batch > 0)
        snprintf(batch, sizeof batch, " x%d", v.batch);
    snprintf(d->name, sizeof d->name, "gemm %c,%c %dx%dx%d %s%s", v.ta == CUBLAS_OP_N ? 'n' : 't',
             v.tb == CUBLAS_OP_N ? 'n' : 't', v.m, v.n, v.k, dh__tname(at), batch);
}

static void dh__desc_lt(const dh_op_t *op, dh_op_desc_t *d)
{
    dh__lt_view_t v;
    dh__lt_view(op, &v);
    d->cls = DH_CLS_COMPUTE;
    uint64_t h = dh__mixu(DH__FNV_OFF, op->kind);
    h = dh__mixu(h, (uint64_t)(uint32_t)v.ta | (uint64_t)(uint32_t)v.tb << 32);
    d->sig = dh__mixu(h, (uint64_t)(uint32_t)v.type | (uint64_t)v.epilogue << 32);
    uint64_t dims[] = {v.m, v.n, v.k, (uint64_t)v.batch};
    d->shape = dh__mix(DH__FNV_OFF, dims, sizeof dims);
    d->flops = 2.0 * (double)v.m * (double)v.n * (double)v.k * (v.batch > 0 ? v.batch : 1);
    char batch[24] = "";
    if (v.batch > 1)
        snprintf(batch, sizeof batch, " x%d", v.batch);
    snprintf(d->name, sizeof d->name, "lt %c,%c %llux%llux%llu %s%s", v.ta == CUBLAS_OP_N ? 'n' : 't',
             v.tb == CUBLAS_OP_N ? 'n' : 't', (unsigned long long)v.m, (unsigned long long)v.n,
             (unsigned long long)v.k, dh__tname(v.type), batch);
}

static const char *dh__copy_dir(enum cudaMemcpyKind k)
{
    switch (k) {
    case cudaMemcpyHostToDevice: return "h2d";
    case cudaMemcpyDeviceToHost: return "d2h";
    case cudaMemcpyDeviceToDevice: return "d2d";
    case cudaMemcpyHostToHost: return "h2h";
    default: return "default";
    }
}

void dh_op_describe(const dh_op_t *op, dh_op_desc_t *d)
{
    memset(d, 0, sizeof *d);
    d->sig = dh__mixu(DH__FNV_OFF, op->kind);
    d->shape = DH__FNV_OFF;
    switch (op->kind) {
    case DH_OP_KERNEL:
    case DH_OP_CU_KERNEL:
        dh__desc_kernel(op, d);
        break;
    case DH_OP_GEMM:
        dh__desc_gemm(op, d);
        break;
    case DH_OP_LT_MATMUL:
        dh__desc_lt(op, d);
        break;
    case DH_OP_MEMCPY: {
        dh__copy_view_t c = dh__copy_view(op);
        d->cls = DH_CLS_COPY;
        d->sig = dh__mixu(d->sig, (uint64_t)c.kind);
        d->shape = dh__mixu(DH__FNV_OFF, c.n);
        d->bytes = c.n;
        snprintf(d->name, sizeof d->name, "memcpy %s %zu", dh__copy_dir(c.kind), c.n);
        break;
    }
    case DH_OP_MEMSET: {
        void *dst;
        size_t n;
        dh__memset_view(op, &dst, &n);
        d->cls = DH_CLS_COPY;
        d->shape = dh__mixu(DH__FNV_OFF, n);
        d->bytes = n;
        snprintf(d->name, sizeof d->name, "memset %zu", n);
        break;
    }
    case DH_OP_HOST_FUNC:
        d->cls = DH_CLS_HOST;
        snprintf(d->name, sizeof d->name, "host function");
        break;
    case DH_OP_NCCL:
    case DH_OP_NCCL_GROUP:
        d->cls = DH_CLS_COMM;
        dh_nccl_op_describe(op, d);
        break;
    case DH_OP_EVENT_RECORD:
    case DH_OP_EVENT_WAIT:
        d->cls = DH_CLS_EVENT;
        snprintf(d->name, sizeof d->name, "%s", op->kind == DH_OP_EVENT_RECORD ? "record" : "wait");
        break;
    case DH_OP_FREE_ASYNC:
        d->cls = DH_CLS_FREE;
        d->bytes = op->free_bytes;
        snprintf(d->name, sizeof d->name, "free %zu", op->free_bytes);
        break;
    default:
        d->cls = DH_CLS_HOST;
        snprintf(d->name, sizeof d->name, "%s", dh_op_kind_name(op->kind));
        break;
    }
}

/* ---- footprints ---- */

typedef struct dh__acc_buf {
    dh_op_access_t *a;
    int n, max, over;
} dh__acc_buf_t;

static void dh__add_born(dh__acc_buf_t *b, uintptr_t lo, size_t len, int write, uint64_t born,
                         int strand)
{
    if (!lo || !len)
        return;
    for (int i = 0; i < b->n; i++) {
        if (b->a[i].lo == lo && b->a[i].len == len) {
            if (write == 1 || (write && !b->a[i].write))
                b->a[i].write = write;
            return;
        }
    }
    if (b->n == b->max) {
        b->over = 1;
        return;
    }
    b->a[b->n++] = (dh_op_access_t){lo, len, write, born, strand};
}

/* An exact range, stamped with the allocation it lies in (0 when none is known). */
static void dh__add(dh__acc_buf_t *b, uintptr_t lo, size_t len, int write)
{
    uintptr_t alo;
    size_t alen;
    uint64_t born = 0;
    int strand = -1;
    if (!lo || !len || !dh_memtab_find(lo, &alo, &alen, &born, &strand))
        born = 0, strand = -1;
    dh__add_born(b, lo, len, write, born, strand);
}

/* A pointer whose extent the op does not say: the allocation it points into. Unknown
 * memory is compared by its first byte (which still orders two uses of one pointer). */
static void dh__add_alloc(dh__acc_buf_t *b, const void *p, int write)
{
    uintptr_t lo;
    size_t len;
    uint64_t born;
    int strand;
    if (!p)
        return;
    if (dh_memtab_find((uintptr_t)p, &lo, &len, &born, &strand))
        dh__add_born(b, lo, len, write, born, strand);
    else
        dh__add(b, (uintptr_t)p, 1, write);
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

static void dh__fp_gemm(const dh_op_t *op, dh__acc_buf_t *b)
{
    dh__gemm_view_t v;
    dh__gemm_view(op, &v);
    size_t ea = v.sgemm ? 4 : dh__dtype_size(v.at), eb = v.sgemm ? 4 : dh__dtype_size(v.bt);
    size_t ec = v.sgemm ? 4 : dh__dtype_size(v.ct);
    int tA = v.ta != CUBLAS_OP_N, tB = v.tb != CUBLAS_OP_N;
    size_t na = dh__mat_bytes(tA ? v.k : v.m, tA ? v.m : v.k, v.lda, v.batch, v.sa, ea);
    size_t nb = dh__mat_bytes(tB ? v.n : v.k, tB ? v.k : v.n, v.ldb, v.batch, v.sb, eb);
    size_t nc = dh__mat_bytes(v.m, v.n, v.ldc, v.batch, v.sc, ec);
    if (na) dh__add(b, (uintptr_t)v.A, na, 0); else dh__add_alloc(b, v.A, 0);
    if (nb) dh__add(b, (uintptr_t)v.B, nb, 0); else dh__add_alloc(b, v.B, 0);
    if (nc) dh__add(b, (uintptr_t)v.C, nc, 1); else dh__add_alloc(b, v.C, 1);
}

static void dh__fp_kernel(const dh_op_t *op, dh__acc_buf_t *b)
{
    /* Each pointer-sized parameter that points into a known allocation: the kernel may read
     * or write all of it. Pointers inside struct parameters are not looked for: the
     * padding between a struct's fields holds stale stack bytes, which would make
     * dependencies differ from run to run and from rank to rank. */
    uintptr_t v[64];
    size_t n = dh__kernel_pointer_params(op, v, 64);
    for (size_t i = 0; i < n; i++) {
        uintptr_t lo;
        size_t len;
        uint64_t born;
        int strand;
        if (dh_memtab_find(v[i], &lo, &len, &born, &strand))
            dh__add_born(b, lo, len, DH_ACCESS_MAYBE, born, strand);
    }
}

int dh_op_footprint(const dh_op_t *op, dh_op_access_t *acc, int max)
{
    dh__acc_buf_t b = {acc, 0, max, 0};
    switch (op->kind) {
    case DH_OP_KERNEL:
    case DH_OP_CU_KERNEL:
        dh__fp_kernel(op, &b);
        break;
    case DH_OP_GEMM:
        dh__fp_gemm(op, &b);
        break;
    case DH_OP_LT_MATMUL: {
        dh__lt_view_t v;
        dh__lt_view(op, &v);
        dh__add_alloc(&b, v.A, 0);
        dh__add_alloc(&b, v.B, 0);
        dh__add_alloc(&b, v.C, 0);
        dh__add_alloc(&b, v.D, 1);
        for (int i = 0; i < v.nptrs; i++)
            dh__add_alloc(&b, v.ptrs[i], DH_ACCESS_MAYBE);
        break;
    }
    case DH_OP_MEMCPY: {
        dh__copy_view_t c = dh__copy_view(op);
        dh__add(&b, (uintptr_t)c.dst, c.n, 1);
        if (!c.src_owned)
            dh__add(&b, (uintptr_t)c.src, c.n, 0);
        break;
    }
    case DH_OP_MEMSET: {
        void *dst;
        size_t n;
        dh__memset_view(op, &dst, &n);
        dh__add(&b, (uintptr_t)dst, n, 1);
        break;
    }
    case DH_OP_NCCL:
    case DH_OP_NCCL_GROUP:
        if (dh_nccl_op_footprint(op, acc, max, &b.n) != 0) {
            b.over = 1;
            break;
        }
        for (int i = 0; i < b.n; i++) {
            uintptr_t lo;
            size_t len;
            if (!dh_memtab_find(acc[i].lo, &lo, &len, &acc[i].born, &acc[i].astrand))
                acc[i].born = 0, acc[i].astrand = -1;
        }
        break;
    case DH_OP_EVENT_RECORD:
    case DH_OP_EVENT_WAIT:
    case DH_OP_FREE_ASYNC:
        break;
    default:
        b.over = 1;
        break;
    }
    return b.over ? -1 : b.n;
}
