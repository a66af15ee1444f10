/*
 * hooks.h: resolution, re-entry guard and call counters behind every wrapper.
 *
 * Each library in DH_HOOK_LIBS is resolved on the first call of any of its entry points
 * (pthread_once per library, so a library the program loads late is still found):
 * dlsym(RTLD_NEXT, name) for each entry point, i.e. the next definition after the shim
 * in the lookup order (the vgpu, or the real library). An entry point with no next
 * definition makes its wrapper return the library's "not initialised" error, with one
 * error message per entry point.
 *
 * A thread-local depth counts wrapper frames on the current thread. A call made while a
 * wrapper is already running on the thread (a library calling another wrapped API
 * internally) is forwarded and counted as nested, not as a call of the program.
 *
 * Counters are relaxed atomics, one per entry point; the hot path takes no lock.
 */
#ifndef DH_HOOKS_H
#define DH_HOOKS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "hook_list.h"

typedef enum dh_hook_lib {
#define DH__HOOK_LIB_ENUM(lib, short_name, soname, fail) DH_HOOK_LIB_##lib,
    DH_HOOK_LIBS(DH__HOOK_LIB_ENUM)
#undef DH__HOOK_LIB_ENUM
    DH_HOOK_LIB_COUNT
} dh_hook_lib_t;

typedef enum dh_hook_id {
#define DH__HOOK_ID_ENUM(lib, ret, name, params, args) DH_HOOK_##name,
    DH_HOOKS_ALL(DH__HOOK_ID_ENUM)
#undef DH__HOOK_ID_ENUM
    DH_HOOK_COUNT
} dh_hook_id_t;

/* Where the id ranges of DH_HOOKS_ALL begin: the hand-written wrappers, then the generated
 * ones (wrap_gen.h), the legacy cuBLAS API, the driver's old ABI last. */
#define DH__HOOK_ONE(lib, ret, name, params, args) +1
enum {
    DH_HOOK_HAND_COUNT = 0 DH_HOOKS_HAND(DH__HOOK_ONE),
    DH_HOOK_LEGACY_FIRST = DH_HOOK_HAND_COUNT DH_HOOKS_GEN(DH__HOOK_ONE),
    DH_HOOK_OLDABI_FIRST = DH_HOOK_LEGACY_FIRST DH_HOOKS_GEN_LEGACY(DH__HOOK_ONE)
};
#undef DH__HOOK_ONE

/* Names and libraries; "?" / DH_HOOK_LIB_COUNT outside the lists. Thread-safe. */
const char *dh_hook_name(dh_hook_id_t id);
dh_hook_lib_t dh_hook_lib(dh_hook_id_t id);
const char *dh_hook_lib_name(dh_hook_lib_t lib);

/* The next definition of id (resolving its library first if needed), or NULL when there
 * is none. For code that must call the real API without being counted (the dispatcher of
 * later issues). Thread-safe. */
void *dh_hook_real(dh_hook_id_t id);

/* The C library's own dlsym (the shim interposes dlsym, see wrap_cuda.c). Code of the shim
 * that looks up the next definition of a symbol calls this one: called from inside the
 * shim, RTLD_NEXT means "after the shim". Never NULL. Thread-safe. */
typedef void *(*dh_dlsym_fn)(void *, const char *);
dh_dlsym_fn dh_real_dlsym(void);

/* The id of a wrapped entry point by name, or DH_HOOK_COUNT. */
dh_hook_id_t dh_hook_find(const char *name);
/* The shim's wrapper of id (the address a program must get instead of the real one). */
void *dh_hook_wrapper(dh_hook_id_t id);

/* Calls of id made by the program, and calls made while another wrapper was running on
 * the same thread. Relaxed reads: exact once the counting threads have stopped. */
uint64_t dh_hook_calls(dh_hook_id_t id);
uint64_t dh_hook_nested(dh_hook_id_t id);
/* Sets every counter to zero (a forked child starts its own count). */
void dh_hook_reset_counts(void);

/* ---- used by the wrappers (wrap_*.c); not an interface for other code ---- */

#define DH_TLS_IE __thread __attribute__((tls_model("initial-exec")))

extern void *dh__hook_fn[DH_HOOK_COUNT];          /* written before dh__hook_ready[lib] */
extern _Atomic int dh__hook_ready[DH_HOOK_LIB_COUNT];
extern _Atomic uint64_t dh__hook_calls[DH_HOOK_COUNT];
extern _Atomic uint64_t dh__hook_nested[DH_HOOK_COUNT];
extern DH_TLS_IE int dh__hook_depth;               /* wrapper frames on this thread */

/* Slow path: resolves lib and returns the function of id, or NULL. */
void *dh__hook_resolve(dh_hook_lib_t lib, dh_hook_id_t id);
/* Reports a missing definition of id (once per entry point); returns the library's
 * "not initialised" status as an int. */
int dh__hook_missing(dh_hook_id_t id);

/* Returns the function to forward to, counted and inside the guard, or NULL (not
 * counted, guard untouched) when there is none. */
static inline void *dh__hook_enter(dh_hook_id_t id, dh_hook_lib_t lib)
{
    void *fn = atomic_load_explicit(&dh__hook_ready[lib], memory_order_acquire)
                   ? dh__hook_fn[id]
                   : dh__hook_resolve(lib, id);
    if (__builtin_expect(fn == NULL, 0))
        return NULL;
    _Atomic uint64_t *ctr = dh__hook_depth++ == 0 ? &dh__hook_calls[id] : &dh__hook_nested[id];
    atomic_fetch_add_explicit(ctr, 1, memory_order_relaxed);
    return fn;
}

static inline void dh__hook_leave(void)
{
    dh__hook_depth--;
}

#define DH_HOOK_EXPORT __attribute__((visibility("default")))

/* Defines one passthrough wrapper from a DH_HOOKS_* entry. The definition sits under the
 * header's prototype of name, so a parameter list that differs from the real API's does
 * not compile. */
#define DH_HOOK_PASSTHROUGH(lib, ret, name, params, args)                                  \
    DH_HOOK_EXPORT ret name params                                                         \
    {                                                                                      \
        __typeof__(&name) real_ =                                                          \
            (__typeof__(&name))dh__hook_enter(DH_HOOK_##name, DH_HOOK_LIB_##lib);          \
        if (real_ == NULL)                                                                 \
            return (ret)dh__hook_missing(DH_HOOK_##name);                                  \
        ret rc_ = real_ args;                                                              \
        dh__hook_leave();                                                                  \
        return rc_;                                                                        \
    }

#endif
