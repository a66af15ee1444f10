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

/* What a forwarded call of library lib returns when it succeeded but a deferred op's replay
 * failed before it: the runtime and the driver report asynchronous errors at any call
 * that could have met them, so a runtime or driver call returns the pending error (in its
 * own API's type) in place of success, once; cuBLAS, cuBLASLt and NCCL calls never report
 * CUDA errors, so the error stays pending for the next call that does (invariant 8). */
static inline int dh__report(int lib, int rc)
{
    if (lib != DH_HOOK_LIB_CUDART && lib != DH_HOOK_LIB_CUDA)
        return rc;
    if (rc != 0) {
        /* Driver codes of these errors are the runtime's (op.c's shared codes). */
        if (__builtin_expect(dh_sched_sticky_error(rc), 0))
            dh_sched_poisoned(rc);
        return rc;
    }
    int pending = dh_sched_error_take();
    return lib == DH_HOOK_LIB_CUDA ? (int)dh_cuda_to_cu(pending) : pending;
}

/* A call that enqueues stream work: CAPTURE (an expression of op_ and the parameters,
 * returning dh_status_t) makes the op. When its kind's validate (op.h) agrees that the
 * real call would accept it here, the op is queued and the call returns OK. Otherwise (a
 * call the library rejects at the call, or one only the library can judge, whose answer
 * is then learnt), and for a call the capture refuses, what is queued is drained and the
 * call is forwarded in program order: the program gets the library's own status at the
 * call, and a runtime or driver call also any error a replay left pending. */
#define DH_WRAP_CAPTURE(lib, ret, name, params, args, CAPTURE, OK)                         \
    DH_HOOK_EXPORT ret name params                                                         \
    {                                                                                      \
        DH_WRAP_ENTER(lib, ret, name);                                                     \
        if (dh__may_defer()) {                                                             \
            dh_op_t *op_ = NULL;                                                           \
            int valid_ = 1;                                                                \
            if ((CAPTURE) == DH_OK) {                                                      \
                if ((valid_ = dh_op_validate(op_)) == 0) {                                 \
                    dh_sched_submit(op_);                                                  \
                    dh__hook_leave();                                                      \
                    return OK;                                                             \
                }                                                                          \
                dh_sched_count_rejected(valid_ > 0);                                       \
            }                                                                              \
            dh_sched_drain(valid_ < 0 ? DH_DRAIN_LEARN : DH_DRAIN_UNCAPTURABLE);           \
            ret rc_ = real_ args;                                                          \
            dh_sched_forwarded();                                                          \
            if (op_ != NULL) {                                                             \
                if (valid_ < 0)                                                            \
                    dh_op_learn(op_, (int)rc_);                                            \
                dh_op_free(op_);                                                           \
            }                                                                              \
            dh__hook_leave();                                                              \
            return (ret)dh__report(DH_HOOK_LIB_##lib, (int)rc_);                           \
        }                                                                                  \
        ret rc_ = real_ args;                                                              \
        dh__hook_leave();                                                                  \
        return rc_;                                                                        \
    }

/* A call that waits, observes progress, or enqueues work the shim cannot capture: drain
 * (REASON, unless SKIP is true: a test break), then forward. When REPORT is true, an
 * asynchronous error of a deferred op is returned in place of success (dh__report). */
#define DH_WRAP_DRAIN(lib, ret, name, params, args, REASON, SKIP, REPORT)                  \
    DH_HOOK_EXPORT ret name params                                                         \
    {                                                                                      \
        DH_WRAP_ENTER(lib, ret, name);                                                     \
        int defer_ = dh__may_defer();                                                      \
        if (defer_ && !(SKIP))                                                             \
            dh_sched_drain(REASON);                                                        \
        ret rc_ = real_ args;                                                              \
        if (defer_)                                                                        \
            dh_sched_forwarded(); /* later strand-1 work must follow this call */         \
        dh__hook_leave();                                                                  \
        return (REPORT) ? (ret)dh__report(DH_HOOK_LIB_##lib, (int)rc_) : rc_;              \
    }

/* Graph capture begins: everything queued is issued and calls pass through until it ends
 * (DESIGN.md invariant 6); a begin the library refuses starts nothing. */
#define DH_WRAP_CAPTURE_BEGIN(lib, ret, name, params, args)                                \
    DH_HOOK_EXPORT ret name params                                                         \
    {                                                                                      \
        DH_WRAP_ENTER(lib, ret, name);                                                     \
        int mine_ = dh__hook_depth == 1 && dh_sched_mirroring();                           \
        if (mine_)                                                                         \
            dh_sched_capture_begin();                                                      \
        ret rc_ = real_ args;                                                              \
        if (rc_ != 0 && mine_)                                                             \
            dh_sched_capture_end();                                                        \
        dh__hook_leave();                                                                  \
        return rc_;                                                                        \
    }

/* Graph capture ends (whatever the library answers, the capture is over). */
#define DH_WRAP_CAPTURE_END(lib, ret, name, params, args)                                  \
    DH_HOOK_EXPORT ret name params                                                         \
    {                                                                                      \
        DH_WRAP_ENTER(lib, ret, name);                                                     \
        ret rc_ = real_ args;                                                              \
        if (dh__hook_depth == 1 && dh_sched_mirroring())                                   \
            dh_sched_capture_end();                                                        \
        dh__hook_leave();                                                                  \
        return rc_;                                                                        \
    }

#endif
