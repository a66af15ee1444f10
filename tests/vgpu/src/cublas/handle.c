/*
 * handle.c: cuBLAS handles and their settings (libcublas.so.13).
 *
 * A handle remembers the device current at creation, its stream, its user workspace and
 * its modes. As in cuBLAS, cublasSetStream drops the user workspace (back to the library's
 * default pool, which the vgpu models as no workspace at all).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>

#include "blas.h"

/* Every handle ever created; destroyed ones are reused first. */
static pthread_mutex_t list_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cublasContext *all_handles; /* guarded by list_lock */

VG_API cublasStatus_t cublasCreate_v2(cublasHandle_t *handle)
{
    if (!handle) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    vg_init();
    struct cublasContext *h = NULL;
    pthread_mutex_lock(&list_lock);
    for (struct cublasContext *it = all_handles; it; it = it->next) {
        if (it->hdr.magic == VG_BLAS_DEAD) {
            h = it;
            break;
        }
    }
    if (!h) {
        h = calloc(1, sizeof *h);
        if (h) {
            h->next = all_handles;
            all_handles = h;
        }
    }
    if (h) {
        struct cublasContext *keep = h->next;
        memset(h, 0, sizeof *h);
        h->next = keep;
        h->hdr.dev = vg_current_device();
        h->pointer_mode = CUBLAS_POINTER_MODE_HOST;
        h->math_mode = CUBLAS_DEFAULT_MATH;
        h->atomics_mode = CUBLAS_ATOMICS_NOT_ALLOWED;
        h->emulation = CUBLAS_EMULATION_STRATEGY_DEFAULT;
        h->hdr.magic = VG_BLAS_MAGIC;
    }
    pthread_mutex_unlock(&list_lock);
    if (!h) {
        return CUBLAS_STATUS_ALLOC_FAILED;
    }
    *handle = h;
    return CUBLAS_STATUS_SUCCESS;
}

VG_API cublasStatus_t cublasDestroy_v2(cublasHandle_t handle)
{
    struct cublasContext *h = vg__blas(handle);
    if (!h) {
        return CUBLAS_STATUS_NOT_INITIALIZED;
    }
    /* cuBLAS documents that destroying a handle synchronises its device (the host waits,
     * which the virtual clocks must show). Work already issued owns copies of everything it
     * needs, so only the handle itself goes. */
    int prev = vg_current_device();
    if (prev != h->hdr.dev && vg_set_device(h->hdr.dev) == cudaSuccess) {
        vg_device_sync();
        vg_set_device(prev);
    } else {
        vg_device_sync();
    }
    pthread_mutex_lock(&list_lock);
    h->hdr.magic = VG_BLAS_DEAD;
    pthread_mutex_unlock(&list_lock);
    return CUBLAS_STATUS_SUCCESS;
}

VG_API cublasStatus_t cublasGetVersion_v2(cublasHandle_t handle, int *version)
{
    if (!vg__blas(handle)) {
        return CUBLAS_STATUS_NOT_INITIALIZED;
    }
    if (!version) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    *version = CUBLAS_VERSION;
    return CUBLAS_STATUS_SUCCESS;
}

VG_API cublasStatus_t cublasGetProperty(libraryPropertyType type, int *value)
{
    if (!value) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    switch (type) {
    case MAJOR_VERSION: *value = CUBLAS_VER_MAJOR; return CUBLAS_STATUS_SUCCESS;
    case MINOR_VERSION: *value = CUBLAS_VER_MINOR; return CUBLAS_STATUS_SUCCESS;
    case PATCH_LEVEL: *value = CUBLAS_VER_PATCH; return CUBLAS_STATUS_SUCCESS;
    }
    return CUBLAS_STATUS_INVALID_VALUE;
}

VG_API size_t cublasGetCudartVersion(void) { return CUDART_VERSION; }

VG_API const char *cublasGetStatusName(cublasStatus_t status)
{
    return vg_gemm_status_name(status);
}

VG_API const char *cublasGetStatusString(cublasStatus_t status)
{
    return vg_gemm_status_string(status);
}

VG_API cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t streamId)
{
    struct cublasContext *h = vg__blas(handle);
    if (!h) {
        return CUBLAS_STATUS_NOT_INITIALIZED;
    }
    h->stream = streamId;
    h->ws = NULL;
    h->ws_size = 0;
    return CUBLAS_STATUS_SUCCESS;
}

VG_API cublasStatus_t cublasGetStream_v2(cublasHandle_t handle, cudaStream_t *streamId)
{
    struct cublasContext *h = vg__blas(handle);
    if (!h) {
        return CUBLAS_STATUS_NOT_INITIALIZED;
    }
    if (!streamId) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    *streamId = h->stream;
    return CUBLAS_STATUS_SUCCESS;
}

/* cuBLAS requires a user workspace aligned to 256 bytes; NULL or size 0 means the default.
 * Where the buffer lives is checked by each GEMM that uses it (it may be freed and
 * replaced between GEMMs as long as none is using it). */
VG_API cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void *workspace,
                                            size_t workspaceSizeInBytes)
{
    struct cublasContext *h = vg__blas(handle);
    if (!h) {
        return CUBLAS_STATUS_NOT_INITIALIZED;
    }
    if (workspace && ((uintptr_t)workspace % 256) != 0) {
        vg_msg("cublasSetWorkspace: workspace %p is not aligned to 256 bytes", workspace);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (!workspace || workspaceSizeInBytes == 0) {
        h->ws = NULL;
        h->ws_size = 0;
    } else {
        h->ws = workspace;
        h->ws_size = workspaceSizeInBytes;
    }
    return CUBLAS_STATUS_SUCCESS;
}

/* cublasGet*Mode: the handle's setting; a bad handle or a NULL output fail as cuBLAS does. */
#define VG_BLAS_GETTER(fn, type, field)                                                    \
    VG_API cublasStatus_t fn(cublasHandle_t handle, type *mode)                            \
    {                                                                                      \
        struct cublasContext *h = vg__blas(handle);                                        \
        if (!h) {                                                                          \
            return CUBLAS_STATUS_NOT_INITIALIZED;                                          \
        }                                                                                  \
        if (!mode) {                                                                       \
            return CUBLAS_STATUS_INVALID_VALUE;                                            \
        }                                                                                  \
        *mode = h->field;                                                                  \
        return CUBLAS_STATUS_SUCCESS;                                                      \
    }

VG_BLAS_GETTER(cublasGetPointerMode_v2, cublasPointerMode_t, pointer_mode)

/* cublasSet*Mode for the two-valued modes: a bad handle, or a value other than a and b,
 * fail as cuBLAS does. */
#define VG_BLAS_SETTER(fn, type, field, a, b)                                              \
    VG_API cublasStatus_t fn(cublasHandle_t handle, type mode)                             \
    {                                                                                      \
        struct cublasContext *h = vg__blas(handle);                                        \
        if (!h) {                                                                          \
            return CUBLAS_STATUS_NOT_INITIALIZED;                                          \
        }                                                                                  \
        if (mode != (a) && mode != (b)) {                                                  \
            return CUBLAS_STATUS_INVALID_VALUE;                                            \
        }                                                                                  \
        h->field = mode;                                                                   \
        return CUBLAS_STATUS_SUCCESS;                                                      \
    }

VG_BLAS_SETTER(cublasSetPointerMode_v2, cublasPointerMode_t, pointer_mode,
               CUBLAS_POINTER_MODE_HOST, CUBLAS_POINTER_MODE_DEVICE)

VG_BLAS_GETTER(cublasGetAtomicsMode, cublasAtomicsMode_t, atomics_mode)

/* Recorded only: the vgpu's GEMMs never use atomics, so both modes are deterministic. */
VG_BLAS_SETTER(cublasSetAtomicsMode, cublasAtomicsMode_t, atomics_mode,
               CUBLAS_ATOMICS_NOT_ALLOWED, CUBLAS_ATOMICS_ALLOWED)

VG_BLAS_GETTER(cublasGetMathMode, cublasMath_t, math_mode)

/* The low bits select one mode; CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION may be
 * or-ed in. Only CUBLAS_TF32_TENSOR_OP_MATH changes anything here: the cost of fp32 GEMMs. */
VG_API cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode)
{
    struct cublasContext *h = vg__blas(handle);
    if (!h) {
        return CUBLAS_STATUS_NOT_INITIALIZED;
    }
    unsigned base = (unsigned)mode & ~(unsigned)CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
    switch (base) {
    case CUBLAS_DEFAULT_MATH:
    case CUBLAS_TENSOR_OP_MATH:
    case CUBLAS_PEDANTIC_MATH:
    case CUBLAS_TF32_TENSOR_OP_MATH:
    case CUBLAS_FP32_EMULATED_BF16X9_MATH:
    case CUBLAS_FP64_EMULATED_FIXEDPOINT_MATH:
        h->math_mode = mode;
        return CUBLAS_STATUS_SUCCESS;
    default:
        return CUBLAS_STATUS_INVALID_VALUE;
    }
}

VG_BLAS_GETTER(cublasGetEmulationStrategy, cublasEmulationStrategy_t, emulation)

/* cublas_api.h (CUDA 13) names three strategies; any other value is INVALID_VALUE, as for
 * the other handle modes. Recorded only: the vgpu computes fp32 and fp64 exactly as asked,
 * never through BF16x9 or fixed-point emulation, so the strategy changes no result here
 * (on a GPU it may change results of CUBLAS_COMPUTE_32F_EMULATED_16BFX9 and the
 * CUBLAS_*_EMULATED_* math modes). */
VG_API cublasStatus_t cublasSetEmulationStrategy(cublasHandle_t handle,
                                                 cublasEmulationStrategy_t emulationStrategy)
{
    struct cublasContext *h = vg__blas(handle);
    if (!h) {
        return CUBLAS_STATUS_NOT_INITIALIZED;
    }
    switch (emulationStrategy) {
    case CUBLAS_EMULATION_STRATEGY_DEFAULT:
    case CUBLAS_EMULATION_STRATEGY_PERFORMANT:
    case CUBLAS_EMULATION_STRATEGY_EAGER:
        h->emulation = emulationStrategy;
        return CUBLAS_STATUS_SUCCESS;
    default:
        return CUBLAS_STATUS_INVALID_VALUE;
    }
}
