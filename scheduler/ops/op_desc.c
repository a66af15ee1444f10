/*
 * op_desc.c: what the kinds' describe and footprint functions share: the signature hash,
 * kernel names, the names of data types and the footprint builder. Which kind does what is
 * each kind's table (op.h); op.c dispatches.
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

#define DH__FNV_PRIME 0x100000001b3ull

uint64_t dh_op_hash(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= DH__FNV_PRIME;
    }
    return h;
}

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

static const dh__kname_t *dh__kname_get(const void *f, int driver)
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
    e->hash = dh_op_hash(DH_OP_HASH_INIT, e->name, strlen(e->name) + 1);
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

const char *dh__kname(const void *f, int driver, uint64_t *hash, int *comm)
{
    const dh__kname_t *e = dh__kname_get(f, driver);
    *hash = e ? e->hash : 0;
    *comm = e ? e->comm : 0;
    return e ? e->name : NULL;
}

const char *dh__dtype_name(int t)
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

/* ---- footprints ---- */

static void dh__fp_born(dh_op_fp_t *b, uintptr_t lo, size_t len, int write, uint64_t born,
                        int strand, uintptr_t abase)
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
    b->a[b->n++] = (dh_op_access_t){lo, len, write, born, strand, abase};
}

void dh_op_fp_range(dh_op_fp_t *b, uintptr_t lo, size_t len, int write)
{
    uintptr_t alo = 0;
    size_t alen;
    uint64_t born = 0;
    int strand = -1;
    if (!lo || !len || !dh_memtab_find(lo, &alo, &alen, &born, &strand))
        born = 0, strand = -1, alo = 0;
    dh__fp_born(b, lo, len, write, born, strand, alo);
}

void dh_op_fp_alloc(dh_op_fp_t *b, const void *p, int write)
{
    uintptr_t lo;
    size_t len;
    uint64_t born;
    int strand;
    if (!p)
        return;
    if (dh_memtab_find((uintptr_t)p, &lo, &len, &born, &strand))
        dh__fp_born(b, lo, len, write, born, strand, lo);
    else
        dh_op_fp_range(b, (uintptr_t)p, 1, write);
}

void dh__fp_alloc_of(dh_op_fp_t *b, uintptr_t v)
{
    uintptr_t lo;
    size_t len;
    uint64_t born;
    int strand;
    if (dh_memtab_find(v, &lo, &len, &born, &strand))
        dh__fp_born(b, lo, len, DH_ACCESS_MAYBE, born, strand, lo);
}

void dh_op_fp_append(dh_op_fp_t *b, uintptr_t lo, size_t len, int write)
{
    if (b->n >= b->max) {
        b->over = 1;
        return;
    }
    dh_op_access_t *a = &b->a[b->n++];
    *a = (dh_op_access_t){lo, len, write, 0, -1, 0};
    size_t alen;
    if (!dh_memtab_find(lo, &a->abase, &alen, &a->born, &a->astrand))
        a->born = 0, a->astrand = -1, a->abase = 0;
}
