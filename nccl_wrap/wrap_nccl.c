/*
 * wrap_nccl.c: NCCL's enqueueing calls, drained in program order. The shim cannot capture
 * collectives yet (the NCCL issue brings the communicator registry and per-group policy),
 * and a call it does not capture must not overtake the work it has deferred: every one
 * issues everything queued first, then forwards. In passthrough they only count.
 */
#include <nccl.h>

#include "hooks.h"
#include "scheduler.h"

#define DH_NCCL_DRAIN(lib, ret, name, params, args)                                        \
    DH_HOOK_EXPORT ret name params                                                         \
    {                                                                                      \
        __typeof__(&name) real_ =                                                          \
            (__typeof__(&name))dh__hook_enter(DH_HOOK_##name, DH_HOOK_LIB_##lib);          \
        if (real_ == NULL)                                                                 \
            return (ret)dh__hook_missing(DH_HOOK_##name);                                  \
        if (dh__hook_depth == 1 && dh_sched_deferring())                                   \
            dh_sched_drain(DH_DRAIN_UNCAPTURABLE);                                         \
        ret rc_ = real_ args;                                                              \
        dh__hook_leave();                                                                  \
        return rc_;                                                                        \
    }

DH_HOOKS_NCCL_SYNC(DH_NCCL_DRAIN)
