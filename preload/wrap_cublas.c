/* wrap_cublas.c: the cuBLAS wrappers, generated from DH_HOOKS_CUBLAS (passthrough). */
#include <cublas_api.h>

#include "hooks.h"

DH_HOOKS_CUBLAS(DH_HOOK_PASSTHROUGH)
