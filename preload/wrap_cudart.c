/* wrap_cudart.c: the CUDA runtime wrappers, generated from DH_HOOKS_CUDART. In this
 * issue every wrapper forwards at once (passthrough); the shim-core issue gives the
 * enqueueing ones a deferred path. */
#include <cuda_runtime_api.h>

#include "hooks.h"

DH_HOOKS_CUDART(DH_HOOK_PASSTHROUGH)
