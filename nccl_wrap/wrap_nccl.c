/*
 * wrap_nccl.c: NCCL's enqueueing calls, drained in program order. The shim cannot capture
 * collectives yet (the NCCL issue brings the communicator registry and per-group policy),
 * and a call it does not capture must not overtake the work it has deferred: every one
 * issues everything queued first, then forwards. In passthrough they only count.
 */
#include <nccl.h>

#include "wrap.h"

#define DH_NCCL_DRAIN(lib, ret, name, params, args) \
    DH_WRAP_DRAIN(lib, ret, name, params, args, DH_DRAIN_UNCAPTURABLE, 0, 0)

DH_HOOKS_NCCL_SYNC(DH_NCCL_DRAIN)
