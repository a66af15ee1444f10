/*
 * wrap_gen_legacy.c: the generated drain-and-forward wrappers of the legacy cuBLAS API
 * (cublas.h: cublasSgemm without a handle, cublasSdot returning its result, ...), and
 * their addresses for dlsym and cuGetProcAddress (wrap_cuda.c). A translation unit of its
 * own: cublas.h and cublas_v2.h may not meet, and cublas_v2.h maps these very names onto
 * the _v2 API. The legacy routines report errors through cublasGetError, so a wrapper
 * with nothing to forward to logs once (hooks.h) and returns nothing, or zero.
 */
#include <cublas.h>

#include "hooks.h"
#include "wrap_gen.h"

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#define DH__LEGACY_BODY(lib, name, args, CALL, MISSING)                                    \
    __typeof__(&name) real_ =                                                              \
        (__typeof__(&name))dh__hook_enter(DH_HOOK_##name, DH_HOOK_LIB_##lib);              \
    if (real_ == NULL) {                                                                   \
        MISSING;                                                                           \
    }                                                                                      \
    int drained_ = dh__gen_drain();                                                        \
    CALL;                                                                                  \
    dh__gen_done(drained_)

#define DH_LEGACY_STATUS(lib, ret, name, params, args)                                     \
    DH_HOOK_EXPORT ret name params                                                         \
    {                                                                                      \
        ret rc_;                                                                           \
        DH__LEGACY_BODY(lib, name, args, rc_ = real_ args,                                 \
                        return (ret)dh__hook_missing(DH_HOOK_##name));                     \
        return rc_;                                                                        \
    }

#define DH_LEGACY_VOID(lib, ret, name, params, args)                                       \
    DH_HOOK_EXPORT void name params                                                        \
    {                                                                                      \
        DH__LEGACY_BODY(lib, name, args, real_ args,                                       \
                        (void)dh__hook_missing(DH_HOOK_##name); return);                   \
    }

#define DH_LEGACY_VALUE(lib, ret, name, params, args)                                      \
    DH_HOOK_EXPORT ret name params                                                         \
    {                                                                                      \
        ret rc_;                                                                           \
        DH__LEGACY_BODY(lib, name, args, rc_ = real_ args,                                 \
                        (void)dh__hook_missing(DH_HOOK_##name); return (ret){0});          \
        return rc_;                                                                        \
    }

DH_HOOKS_GEN_CUBLAS_LEGACY(DH_LEGACY_STATUS)
DH_HOOKS_GEN_CUBLAS_LEGACY_VOID(DH_LEGACY_VOID)
DH_HOOKS_GEN_CUBLAS_LEGACY_VALUE(DH_LEGACY_VALUE)

void *const dh__legacy_wrappers[] = {
#define DH__LEGACY_ADDR(lib, ret, name, params, args) (void *)&name,
    DH_HOOKS_GEN_LEGACY(DH__LEGACY_ADDR)
#undef DH__LEGACY_ADDR
    NULL,
};
