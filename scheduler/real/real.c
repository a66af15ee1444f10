/* real.c: the table of real entry points (see real.h). */
#define _GNU_SOURCE
#include "real.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

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

static const char *const dh__real_lib_sonames[DH_REAL_LIB_COUNT] = {
#define DH__REAL_LIB_SONAME(lib, name) "lib" name ".so",
    DH_REAL_LIBS(DH__REAL_LIB_SONAME)
#undef DH__REAL_LIB_SONAME
};

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

/* ---- definitions outside the global scope ----
 *
 * dlsym(RTLD_NEXT) searches the objects of the global scope that follow the shim: the
 * program's dependencies and whatever was dlopened with RTLD_GLOBAL. A library dlopened
 * with RTLD_LOCAL, or loaded as a dependency of one (PyTorch: Python imports torch._C with
 * RTLD_LOCAL, and libtorch_cuda.so brings in cuBLAS and NCCL from the nvidia-* wheels' own
 * folders), is not in that scope, yet its users' undefined references still bind to the
 * preloaded shim, which is in it. Seen on a GPU machine (2026-11-26): RTLD_NEXT found no
 * cublasSetStream_v2 and no ncclGetVersion under PyTorch 2.11. So when RTLD_NEXT finds
 * nothing, the loaded objects named like the library are asked directly: a handle from
 * dlopen(path, RTLD_NOLOAD) makes dlsym search that object and its dependencies only. */

#define DH__LOADED_MAX 8

typedef struct dh__loaded {
    const char *prefix; /* "libcublas.so": the file name up to and including ".so" */
    size_t plen;
    int n;
    char *path[DH__LOADED_MAX];
} dh__loaded_t;

static int dh__loaded_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    dh__loaded_t *l = data;
    const char *name = info->dlpi_name;
    if (name == NULL || *name == '\0' || l->n == DH__LOADED_MAX)
        return 0;
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    /* libcublas.so.13 and libcublas.so, not libcublasLt.so.13. */
    if (strncmp(base, l->prefix, l->plen) == 0 &&
        (base[l->plen] == '\0' || base[l->plen] == '.')) {
        char *copy = strdup(name);
        if (copy != NULL)
            l->path[l->n++] = copy;
    }
    return 0;
}

void *dh_real_lookup_loaded(const char *soname, const char *name)
{
    if (soname == NULL || name == NULL)
        return NULL;
    const char *so = strstr(soname, ".so");
    if (so == NULL)
        return NULL;
    char prefix[64];
    size_t plen = (size_t)(so - soname) + 3;
    if (plen >= sizeof prefix)
        return NULL;
    memcpy(prefix, soname, plen);
    prefix[plen] = '\0';
    dh__loaded_t l = {.prefix = prefix, .plen = plen};
    /* Paths first, dlopen after: no loader call from inside the walk. */
    dl_iterate_phdr(dh__loaded_cb, &l);
    dh__dlsym_fn_t look = dh__libc_dlsym();
    void *p = NULL;
    for (int i = 0; i < l.n; i++) {
        if (p == NULL) {
            void *h = dlopen(l.path[i], RTLD_LAZY | RTLD_NOLOAD);
            if (h != NULL) {
                p = look(h, name);
                dlclose(h);
            }
        }
        free(l.path[i]);
    }
    return p;
}

void *dh_real_next(const char *soname, const char *name)
{
    void *p = dh__libc_dlsym()(RTLD_NEXT, name);
    return p != NULL ? p : dh_real_lookup_loaded(soname, name);
}

/* Looks up every entry that is still NULL. Caller holds dh__real_lock or runs under
 * dh__real_once. */
static void dh__real_fill(void)
{
    void *p;
#define DH__REAL_FILL(lib, ret, name, params)                                           \
    if (atomic_load_explicit(&dh__real.name, memory_order_relaxed) == NULL &&          \
        ((p = dh__dlsym(RTLD_NEXT, #name)) != NULL ||                                  \
         (p = dh_real_lookup_loaded(dh__real_lib_sonames[DH_REAL_LIB_##lib], #name)) != NULL)) { \
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
