/* wrap_cublaslt.c: the cuBLASLt wrappers, generated from DH_HOOKS_CUBLASLT (passthrough). */
#include <cublasLt.h>

#include "hooks.h"

DH_HOOKS_CUBLASLT(DH_HOOK_PASSTHROUGH)
