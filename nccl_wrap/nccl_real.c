/* nccl_real.c: the pncclX table (see nccl_real.h). */
#define _GNU_SOURCE
#include "nccl_real.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>

#include "real.h"

static const char *const dh__nccl_names[DH_NCCL_FN_COUNT] = {
#define DH__NCCL_FN_NAME(lib, ret, name, params, args) #name,
    DH_HOOKS_NCCL(DH__NCCL_FN_NAME)
#undef DH__NCCL_FN_NAME
};

void *_Atomic dh__nccl_fns[DH_NCCL_FN_COUNT];
static _Atomic unsigned char dh__nccl_profiling[DH_NCCL_FN_COUNT];

typedef void *(*dh__dlsym_t)(void *, const char *);

/* The C library's dlsym: the shim interposes dlsym, and RTLD_NEXT must mean "after the
 * object that holds this code", which glibc derives from its caller. */
static dh__dlsym_t dh__libc_dlsym(void)
{
    static dh__dlsym_t fn;
    dh__dlsym_t f = __atomic_load_n(&fn, __ATOMIC_ACQUIRE);
    if (f != NULL)
        return f;
    static const char *const versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17"};
    for (size_t i = 0; i < sizeof versions / sizeof versions[0] && f == NULL; i++)
        f = (dh__dlsym_t)dlvsym(RTLD_NEXT, "dlsym", versions[i]);
    if (f == NULL)
        f = dlsym;
    __atomic_store_n(&fn, f, __ATOMIC_RELEASE);
    return f;
}

void *dh__nccl_real_slow(dh_nccl_fn_t fn)
{
    if ((unsigned)fn >= DH_NCCL_FN_COUNT)
        return NULL;
    void *p;
    char pname[96];
    snprintf(pname, sizeof pname, "p%s", dh__nccl_names[fn]);
    dh__dlsym_t look = dh__libc_dlsym();
    p = look(RTLD_NEXT, pname);
    int profiling = p != NULL;
    if (p == NULL)
        p = look(RTLD_NEXT, dh__nccl_names[fn]);
    /* A libnccl loaded outside the global scope (PyTorch's, from the nvidia-nccl wheel):
     * real.h, dh_real_lookup_loaded. */
    if (p == NULL && (p = dh_real_lookup_loaded("libnccl.so.2", pname)) != NULL)
        profiling = 1;
    if (p == NULL)
        p = dh_real_lookup_loaded("libnccl.so.2", dh__nccl_names[fn]);
    if (p != NULL) {
        atomic_store_explicit(&dh__nccl_profiling[fn], (unsigned char)profiling,
                              memory_order_relaxed);
        atomic_store_explicit(&dh__nccl_fns[fn], p, memory_order_release);
    }
    return p;
}

int dh_nccl_real_is_profiling(dh_nccl_fn_t fn)
{
    if (dh_nccl_real_fn(fn) == NULL)
        return 0;
    return atomic_load_explicit(&dh__nccl_profiling[fn], memory_order_relaxed);
}
