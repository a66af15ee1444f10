/*
 * wrap.h: the shapes of the wrappers that defer or drain (wrap_cudart.c, wrap_cublas.c,
 * wrap_cublaslt.c, wrap_cuda.c, nccl_wrap/wrap_nccl.c). Each defines the API entry point
 * `name` under the header's own prototype, so a parameter list that differs from the real
 * API's does not compile.
 */
#ifndef DH_WRAP_H
#define DH_WRAP_H

#include "hooks.h"
#include "op.h"
#include "scheduler.h"

/* Nonzero when this wrapper call (already entered) may defer: the program's own call
 * (not nested in another wrapped call, not the dispatcher's) in a deferring mode. */
static inline int dh__may_defer(void) { return dh__hook_depth == 1 && dh_sched_deferring(); }

/* Prologue of every wrapper: real_ is the next definition of name; without one the API's
 * "not initialised" status is returned. */
#define DH_WRAP_ENTER(lib, ret, name)                                                      \
    __typeof__(&name) real_ =                                                              \
        (__typeof__(&name))dh__hook_enter(DH_HOOK_##name, DH_HOOK_LIB_##lib);              \
    if (real_ == NULL)                                                                     \
        return (ret)dh__hook_missing(DH_HOOK_##name)

/* A call that enqueues stream work: CAPTURE (an expression of op_ and the parameters,
 * returning dh_status_t) makes the op, which is queued, and the call returns OK. A call the
 * capture refuses drains what is queued and is forwarded, in program order. */
#define DH_WRAP_CAPTURE(lib, ret, name, params, args, CAPTURE, OK)                         \
    DH_HOOK_EXPORT ret name params                                                         \
    {                                                                                      \
        DH_WRAP_ENTER(lib, ret, name);                                                     \
        if (dh__may_defer()) {                                                             \
            dh_op_t *op_ = NULL;                                                           \
            if ((CAPTURE) == DH_OK) {                                                      \
                dh_sched_submit(op_);                                                      \
                dh__hook_leave();                                                          \
                return OK;                                                                 \
            }                                                                              \
            dh_sched_drain(DH_DRAIN_UNCAPTURABLE);                                         \
            ret rc_ = real_ args;                                                          \
            dh_sched_forwarded();                                                          \
            dh__hook_leave();                                                              \
            return rc_;                                                                    \
        }                                                                                  \
        ret rc_ = real_ args;                                                              \
        dh__hook_leave();                                                                  \
        return rc_;                                                                        \
    }

/* A call that waits, observes progress, or enqueues work the shim cannot capture: drain
 * (REASON, unless SKIP is true: a test break), then forward. When REPORT is true, an
 * asynchronous error of a deferred op is returned in place of success. */
#define DH_WRAP_DRAIN(lib, ret, name, params, args, REASON, SKIP, REPORT)                  \
    DH_HOOK_EXPORT ret name params                                                         \
    {                                                                                      \
        DH_WRAP_ENTER(lib, ret, name);                                                     \
        int pending_ = 0, defer_ = dh__may_defer();                                        \
        if (defer_ && !(SKIP))                                                             \
            pending_ = dh_sched_drain(REASON);                                             \
        ret rc_ = real_ args;                                                              \
        if (defer_)                                                                        \
            dh_sched_forwarded(); /* later strand-1 work must follow this call */         \
        dh__hook_leave();                                                                  \
        return (REPORT) && rc_ == (ret)0 && pending_ ? (ret)pending_ : rc_;                \
    }

#endif
