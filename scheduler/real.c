/* real.c: the table of real entry points (see real.h). */
#define _GNU_SOURCE
#include "real.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>

#include "common/log.h"

static dh_real_t dh__real;
static pthread_once_t dh__real_once = PTHREAD_ONCE_INIT;
static _Atomic int dh__real_found[DH_REAL_LIB_COUNT];

/* Serialises refreshes; the entries themselves are atomics that readers load freely. */
static pthread_mutex_t dh__real_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long long dh__real_adds; /* guarded by dh__real_lock: objects loaded as of
                                            the last resolution attempt */

static const char *const dh__real_lib_names[DH_REAL_LIB_COUNT] = {
#define DH__REAL_LIB_NAME(lib, name) name,
    DH_REAL_LIBS(DH__REAL_LIB_NAME)
#undef DH__REAL_LIB_NAME
};

typedef void *(*dh__dlsym_fn_t)(void *, const char *);

/* The C library's dlsym, not whatever definition of dlsym comes first in the process: the
 * shim interposes dlsym to catch driver entry points fetched at run time, and that wrapper
 * may answer with the shim's own functions. glibc's dlsym resolves RTLD_NEXT relative to
 * its caller's object, which is this one when it is called through the pointer. */
static dh__dlsym_fn_t dh__libc_dlsym(void)
{
    static const char *const versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17"};
    for (size_t i = 0; i < sizeof versions / sizeof versions[0]; i++) {
        void *p = dlvsym(RTLD_NEXT, "dlsym", versions[i]);
        if (p != NULL)
            return (dh__dlsym_fn_t)p;
    }
    return dlsym;
}

static dh__dlsym_fn_t dh__dlsym; /* set once under dh__real_once */

static int dh__adds_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    *(unsigned long long *)data = info->dlpi_adds;
    return 1; /* the counter is the same in every entry: one is enough */
}

static unsigned long long dh__loaded_objects(void)
{
    unsigned long long adds = 0;
    dl_iterate_phdr(dh__adds_cb, &adds);
    return adds;
}

/* Looks up every entry that is still NULL. Caller holds dh__real_lock or runs under
 * dh__real_once. */
static void dh__real_fill(void)
{
    void *p;
#define DH__REAL_FILL(lib, ret, name, params)                                           \
    if (atomic_load_explicit(&dh__real.name, memory_order_relaxed) == NULL &&          \
        (p = dh__dlsym(RTLD_NEXT, #name)) != NULL) {                                   \
        atomic_store_explicit(&dh__real.name, (ret(*) params)p, memory_order_release); \
        atomic_fetch_add_explicit(&dh__real_found[DH_REAL_LIB_##lib], 1,               \
                                  memory_order_relaxed);                               \
    }
    DH_REAL_ALL(DH__REAL_FILL)
#undef DH__REAL_FILL
}

static void dh__real_log(void)
{
    for (int lib = 0; lib < DH_REAL_LIB_COUNT; lib++)
        DH_DEBUG(SCHED, "real %s: %d entry points found", dh__real_lib_names[lib],
                 atomic_load_explicit(&dh__real_found[lib], memory_order_relaxed));
}

static void dh__real_init(void)
{
    dh__dlsym = dh__libc_dlsym();
    dh__real_adds = dh__loaded_objects();
    dh__real_fill();
    dh__real_log();
}

/* The once-flag is only read through pthread_once, whose return orders the table's first
 * fill before the caller's loads. */
const dh_real_t *dh_real(void)
{
    static _Atomic int ready;
    if (__builtin_expect(!atomic_load_explicit(&ready, memory_order_acquire), 0)) {
        pthread_once(&dh__real_once, dh__real_init);
        atomic_store_explicit(&ready, 1, memory_order_release);
    }
    return &dh__real;
}

const dh_real_t *dh_real_refresh(void)
{
    const dh_real_t *r = dh_real();
    pthread_mutex_lock(&dh__real_lock);
    unsigned long long adds = dh__loaded_objects();
    if (adds != dh__real_adds) {
        dh__real_adds = adds;
        dh__real_fill();
        dh__real_log();
    }
    pthread_mutex_unlock(&dh__real_lock);
    return r;
}

int dh_real_lib_found(dh_real_lib_t lib)
{
    if ((unsigned)lib >= DH_REAL_LIB_COUNT)
        return 0;
    dh_real();
    return atomic_load_explicit(&dh__real_found[lib], memory_order_relaxed);
}
