/*
 * cudart_copy3d.c: 3D copies between pitched pointers (cudaMemcpy3D, cudaMemcpy3DAsync)
 * and copies to and from __device__ variables (cudaMemcpyToSymbol(Async),
 * cudaMemcpyFromSymbol(Async), cudaGetSymbolAddress, cudaGetSymbolSize), with the
 * registration nvcc's host stubs make for such a variable (__cudaRegisterVar).
 *
 * A 3D copy is one 2D copy per slice of the extent, on one stream in order (so the slices
 * complete in order, and the synchronous form returns when the last one has); CUDA arrays
 * are not modelled (cudaErrorNotSupported with a message). A symbol is the host shadow
 * variable's address; its device copy is a device allocation made at registration and
 * initialised from the shadow, as the module load initialises a __device__ variable.
 */
#include <pthread.h>
#include <string.h>

#include "cudart.h"

void __cudaRegisterVar(void **fatCubinHandle, char *hostVar, char *deviceAddress,
                       const char *deviceName, int ext, size_t size, int constant, int global);

/* ---- 3D ---- */

static cudaError_t copy3d(const struct cudaMemcpy3DParms *p, cudaStream_t s, int blocking,
                          const char *api)
{
    if (!p)
        return cudaErrorInvalidValue;
    if (p->srcArray || p->dstArray) {
        vg_msg("%s: CUDA arrays are not modelled by the vgpu", api);
        return cudaErrorNotSupported;
    }
    const struct cudaExtent e = p->extent;
    if (!e.width || !e.height || !e.depth)
        return cudaSuccess;
    const struct cudaPitchedPtr sp = p->srcPtr, dp = p->dstPtr;
    if (e.height > 1 && (sp.ysize < p->srcPos.y + e.height || dp.ysize < p->dstPos.y + e.height))
        return cudaErrorInvalidValue;
    size_t sslice = sp.pitch * sp.ysize, dslice = dp.pitch * dp.ysize;
    for (size_t z = 0; z < e.depth; z++) {
        const char *src = (const char *)sp.ptr + (p->srcPos.z + z) * sslice +
                          p->srcPos.y * sp.pitch + p->srcPos.x;
        char *dst = (char *)dp.ptr + (p->dstPos.z + z) * dslice + p->dstPos.y * dp.pitch +
                    p->dstPos.x;
        cudaError_t r = vg_memcpy2d(dst, dp.pitch, src, sp.pitch, e.width, e.height, p->kind, s,
                                    blocking && z + 1 == e.depth, api);
        if (r != cudaSuccess)
            return r;
    }
    return cudaSuccess;
}

VG_API cudaError_t cudaMemcpy3DAsync(const struct cudaMemcpy3DParms *p, cudaStream_t s)
{
    RET(copy3d(p, s, 0, "cudaMemcpy3DAsync"));
}

VG_API cudaError_t cudaMemcpy3D(const struct cudaMemcpy3DParms *p)
{
    RET(copy3d(p, 0, 1, "cudaMemcpy3D"));
}

/* ---- symbols ---- */

enum { MAX_SYMBOLS = 256 };

static struct {
    pthread_mutex_t lock;
    int n;
    struct {
        const void *host;
        void *dev;
        size_t size;
    } sym[MAX_SYMBOLS]; /* guarded by lock */
} S = {PTHREAD_MUTEX_INITIALIZER, 0, {{0}}};

VG_API void __cudaRegisterVar(void **fatCubinHandle, char *hostVar, char *deviceAddress,
                              const char *deviceName, int ext, size_t size, int constant,
                              int global)
{
    (void)fatCubinHandle;
    (void)deviceAddress;
    (void)ext;
    (void)constant;
    (void)global;
    void *dev = NULL;
    if (!hostVar || !size || vg_mem_alloc(&dev, size, VG_MEM_DEVICE, vg_current_device())) {
        vg_msg("__cudaRegisterVar: %s (%zu bytes) could not be registered",
               deviceName ? deviceName : "?", size);
        return;
    }
    if (!vg_config()->timing_only)
        memcpy(dev, hostVar, size);
    pthread_mutex_lock(&S.lock);
    if (S.n < MAX_SYMBOLS) {
        S.sym[S.n].host = hostVar;
        S.sym[S.n].dev = dev;
        S.sym[S.n].size = size;
        S.n++;
    } else {
        vg_msg("__cudaRegisterVar: more than %d variables; %s not registered", MAX_SYMBOLS,
               deviceName ? deviceName : "?");
    }
    pthread_mutex_unlock(&S.lock);
}

/* The device copy of symbol and its size, or cudaErrorInvalidSymbol. */
static cudaError_t lookup(const void *symbol, void **dev, size_t *size)
{
    cudaError_t r = cudaErrorInvalidSymbol;
    pthread_mutex_lock(&S.lock);
    for (int i = 0; i < S.n; i++) {
        if (S.sym[i].host == symbol) {
            *dev = S.sym[i].dev;
            *size = S.sym[i].size;
            r = cudaSuccess;
            break;
        }
    }
    pthread_mutex_unlock(&S.lock);
    return r;
}

static cudaError_t symbol_copy(const void *symbol, void *host, size_t count, size_t offset,
                               enum cudaMemcpyKind kind, cudaStream_t s, int blocking, int to,
                               const char *api)
{
    void *dev;
    size_t size;
    cudaError_t r = lookup(symbol, &dev, &size);
    if (r != cudaSuccess)
        return r;
    if (offset > size || count > size - offset)
        return cudaErrorInvalidValue;
    char *d = (char *)dev + offset;
    if (to) {
        if (kind != cudaMemcpyHostToDevice && kind != cudaMemcpyDeviceToDevice &&
            kind != cudaMemcpyDefault)
            return cudaErrorInvalidMemcpyDirection;
        return vg_memcpy2d(d, count, host, count, count, 1, kind, s, blocking, api);
    }
    if (kind != cudaMemcpyDeviceToHost && kind != cudaMemcpyDeviceToDevice &&
        kind != cudaMemcpyDefault)
        return cudaErrorInvalidMemcpyDirection;
    return vg_memcpy2d(host, count, d, count, count, 1, kind, s, blocking, api);
}

VG_API cudaError_t cudaMemcpyToSymbolAsync(const void *symbol, const void *src, size_t count,
                                           size_t offset, enum cudaMemcpyKind kind,
                                           cudaStream_t s)
{
    RET(symbol_copy(symbol, (void *)src, count, offset, kind, s, 0, 1, "cudaMemcpyToSymbolAsync"));
}

VG_API cudaError_t cudaMemcpyFromSymbolAsync(void *dst, const void *symbol, size_t count,
                                             size_t offset, enum cudaMemcpyKind kind,
                                             cudaStream_t s)
{
    RET(symbol_copy(symbol, dst, count, offset, kind, s, 0, 0, "cudaMemcpyFromSymbolAsync"));
}

VG_API cudaError_t cudaMemcpyToSymbol(const void *symbol, const void *src, size_t count,
                                      size_t offset, enum cudaMemcpyKind kind)
{
    RET(symbol_copy(symbol, (void *)src, count, offset, kind, 0, 1, 1, "cudaMemcpyToSymbol"));
}

VG_API cudaError_t cudaMemcpyFromSymbol(void *dst, const void *symbol, size_t count,
                                        size_t offset, enum cudaMemcpyKind kind)
{
    RET(symbol_copy(symbol, dst, count, offset, kind, 0, 1, 0, "cudaMemcpyFromSymbol"));
}

VG_API cudaError_t cudaGetSymbolAddress(void **devPtr, const void *symbol)
{
    size_t size;
    if (!devPtr)
        RET(cudaErrorInvalidValue);
    RET(lookup(symbol, devPtr, &size));
}

VG_API cudaError_t cudaGetSymbolSize(size_t *size, const void *symbol)
{
    void *dev;
    if (!size)
        RET(cudaErrorInvalidValue);
    RET(lookup(symbol, &dev, size));
}
