/* hooks.c: the real-function table, its one-time resolution and the call counters. */
#define _GNU_SOURCE
#include "hooks.h"
#include "real.h"
#include "scheduler.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

#include <cublasLt.h>
#include <cublas_api.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "common/log.h"

void *dh__hook_fn[DH_HOOK_COUNT];
_Atomic int dh__hook_ready[DH_HOOK_LIB_COUNT];
_Atomic uint64_t dh__hook_calls[DH_HOOK_COUNT];
_Atomic uint64_t dh__hook_nested[DH_HOOK_COUNT];
DH_TLS_IE int dh__hook_depth;

/* Set while this thread runs a library's resolution: a wrapped call made from inside
 * dlsym must not wait on the pthread_once it is running under. */
static DH_TLS_IE int dh__resolving;
static atomic_flag dh__missing_reported[DH_HOOK_COUNT];

static const char *const dh__hook_names[DH_HOOK_COUNT] = {
#define DH__HOOK_NAME(lib, ret, name, params, args) #name,
    DH_HOOKS_ALL(DH__HOOK_NAME)
#undef DH__HOOK_NAME
};

static const dh_hook_lib_t dh__hook_libs[DH_HOOK_COUNT] = {
#define DH__HOOK_LIB(lib, ret, name, params, args) DH_HOOK_LIB_##lib,
    DH_HOOKS_ALL(DH__HOOK_LIB)
#undef DH__HOOK_LIB
};

typedef struct dh__lib_info {
    const char *name;
    const char *soname;
    int fail;               /* the API's "not initialised" status */
    const char *fail_name;
} dh__lib_info_t;

static const dh__lib_info_t dh__libs[DH_HOOK_LIB_COUNT] = {
#define DH__LIB_INFO(lib, short_name, soname, fail) {short_name, soname, (int)(fail), #fail},
    DH_HOOK_LIBS(DH__LIB_INFO)
#undef DH__LIB_INFO
};

const char *dh_hook_name(dh_hook_id_t id)
{
    return (unsigned)id < DH_HOOK_COUNT ? dh__hook_names[id] : "?";
}

dh_hook_lib_t dh_hook_lib(dh_hook_id_t id)
{
    return (unsigned)id < DH_HOOK_COUNT ? dh__hook_libs[id] : DH_HOOK_LIB_COUNT;
}

const char *dh_hook_lib_name(dh_hook_lib_t lib)
{
    return (unsigned)lib < DH_HOOK_LIB_COUNT ? dh__libs[lib].name : "?";
}

/* ---- resolution ---- */

/* Logs where a library's entry points came from: the first thing to check when a run
 * does not use the backend it was meant to. */
static void dh__log_provider(dh_hook_lib_t lib, int found, int total, void *first)
{
    Dl_info info = {0};
    if (first == NULL || !dladdr(first, &info) || info.dli_fname == NULL)
        info.dli_fname = "(none)";
    DH_DEBUG(HOOK, "%s: resolved %d of %d entry points after the shim (from %s)",
             dh__libs[lib].name, found, total, info.dli_fname);
}

static void dh__resolve_lib(dh_hook_lib_t lib)
{
    int found = 0, total = 0;
    void *first = NULL;
    dh__resolving = 1;
    /* The next definition after the shim; when none of the library's entry points has one,
     * the library may be loaded outside the global scope (real.h, dh_real_lookup_loaded:
     * PyTorch's cuBLAS and NCCL). Not per missing name: the generated wrappers cover the
     * whole API, most of which a stand-in such as the vgpu does not define. */
    for (int pass = 0; pass < 2 && found == 0; pass++) {
        total = 0;
        for (int id = 0; id < DH_HOOK_COUNT; id++) {
            if (dh__hook_libs[id] != lib)
                continue;
            void *p = pass == 0 ? dh_real_dlsym()(RTLD_NEXT, dh__hook_names[id])
                                : dh_real_lookup_loaded(dh__libs[lib].soname, dh__hook_names[id]);
            dh__hook_fn[id] = p;
            total++;
            found += p != NULL;
            if (first == NULL)
                first = p;
        }
    }
    dh__resolving = 0;
    atomic_store_explicit(&dh__hook_ready[lib], 1, memory_order_release);
    dh__log_provider(lib, found, total, first);
}

#define DH__RESOLVER(lib, short_name, soname, fail) \
    static void dh__resolve_##lib(void) { dh__resolve_lib(DH_HOOK_LIB_##lib); }
DH_HOOK_LIBS(DH__RESOLVER)
#undef DH__RESOLVER

static void (*const dh__resolvers[DH_HOOK_LIB_COUNT])(void) = {
#define DH__RESOLVER_PTR(lib, short_name, soname, fail) dh__resolve_##lib,
    DH_HOOK_LIBS(DH__RESOLVER_PTR)
#undef DH__RESOLVER_PTR
};

static pthread_once_t dh__resolve_once[DH_HOOK_LIB_COUNT] = {
#define DH__ONCE_INIT(lib, short_name, soname, fail) PTHREAD_ONCE_INIT,
    DH_HOOK_LIBS(DH__ONCE_INIT)
#undef DH__ONCE_INIT
};

void *dh__hook_resolve(dh_hook_lib_t lib, dh_hook_id_t id)
{
    if (dh__resolving)
        return NULL;
    pthread_once(&dh__resolve_once[lib], dh__resolvers[lib]);
    /* The program's first call into a GPU library: what the mode needs from files (a plan)
     * is read now, so a launcher that merely inherits LD_PRELOAD (mpirun, torchrun) reads
     * and reports nothing. */
    dh_sched_first_call();
    return dh__hook_fn[id];
}

void *dh_hook_real(dh_hook_id_t id)
{
    if ((unsigned)id >= DH_HOOK_COUNT)
        return NULL;
    dh_hook_lib_t lib = dh__hook_libs[id];
    if (atomic_load_explicit(&dh__hook_ready[lib], memory_order_acquire))
        return dh__hook_fn[id];
    return dh__hook_resolve(lib, id);
}

int dh__hook_missing(dh_hook_id_t id)
{
    const dh__lib_info_t *l = &dh__libs[dh__hook_libs[id]];
    if (dh__resolving) {
        DH_WARN_ONCE(HOOK, "%s called from inside the shim's symbol resolution; returning %s",
                     dh__hook_names[id], l->fail_name);
        return l->fail;
    }
    if (!atomic_flag_test_and_set_explicit(&dh__missing_reported[id], memory_order_relaxed))
        DH_ERROR(HOOK, "%s: no definition after libdhelix_shim.so (is %s loaded?); "
                 "returning %s", dh__hook_names[id], l->soname, l->fail_name);
    return l->fail;
}

/* ---- counters ---- */

uint64_t dh_hook_calls(dh_hook_id_t id)
{
    if ((unsigned)id >= DH_HOOK_COUNT)
        return 0;
    return atomic_load_explicit(&dh__hook_calls[id], memory_order_relaxed);
}

uint64_t dh_hook_nested(dh_hook_id_t id)
{
    if ((unsigned)id >= DH_HOOK_COUNT)
        return 0;
    return atomic_load_explicit(&dh__hook_nested[id], memory_order_relaxed);
}

void dh_hook_reset_counts(void)
{
    for (int id = 0; id < DH_HOOK_COUNT; id++) {
        atomic_store_explicit(&dh__hook_calls[id], 0, memory_order_relaxed);
        atomic_store_explicit(&dh__hook_nested[id], 0, memory_order_relaxed);
    }
}
