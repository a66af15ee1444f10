/*
 * cudart_mem.c: allocation, copies, memsets, pointer attributes and the memory pool.
 *
 * Copies follow the CUDA documentation on synchronous behaviour: a host-to-device copy from
 * pageable memory is staged at the call (the caller may reuse its buffer at once); a
 * device-to-host copy into pageable memory returns when it is done; copies involving
 * pinned memory read or write it when they run on the device.
 */
#include <string.h>

#include "cudart.h"


VG_API cudaError_t cudaMalloc(void **p, size_t n) { RET(vg_mem_alloc(p, n, VG_MEM_DEVICE, vg_current_device())); }

VG_API cudaError_t cudaMallocManaged(void **p, size_t n, unsigned flags)
{
    (void)flags;
    RET(vg_mem_alloc(p, n, VG_MEM_MANAGED, vg_current_device()));
}

/* Pitched allocations: rows padded to a multiple of 512 bytes (the texture alignment of
 * current GPUs; the CUDA documentation leaves the pitch to the runtime). An allocation the
 * device cannot hold fails with cudaErrorMemoryAllocation, as cudaMalloc does. */
#define VG_PITCH_ALIGN 512
static size_t vg_pitch(size_t width) { return (width + VG_PITCH_ALIGN - 1) / VG_PITCH_ALIGN * VG_PITCH_ALIGN; }

VG_API cudaError_t cudaMallocPitch(void **p, size_t *pitch, size_t width, size_t height)
{
    if (!p || !pitch) RET(cudaErrorInvalidValue);
    size_t pt = vg_pitch(width ? width : 1);
    cudaError_t e = vg_mem_alloc(p, pt * (height ? height : 1), VG_MEM_DEVICE, vg_current_device());
    if (e == cudaSuccess) *pitch = pt;
    RET(e);
}

VG_API cudaError_t cudaMalloc3D(struct cudaPitchedPtr *pp, struct cudaExtent e)
{
    if (!pp) RET(cudaErrorInvalidValue);
    size_t pt = vg_pitch(e.width ? e.width : 1);
    void *p = NULL;
    cudaError_t r = vg_mem_alloc(&p, pt * (e.height ? e.height : 1) * (e.depth ? e.depth : 1),
                                 VG_MEM_DEVICE, vg_current_device());
    if (r == cudaSuccess) *pp = (struct cudaPitchedPtr){p, pt, e.width, e.height};
    RET(r);
}

VG_API cudaError_t cudaMallocHost(void **p, size_t n) { RET(vg_mem_alloc(p, n, VG_MEM_HOST, vg_current_device())); }

VG_API cudaError_t cudaHostAlloc(void **p, size_t n, unsigned flags)
{
    if (flags & ~(unsigned)(cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined))
        RET(cudaErrorInvalidValue);
    RET(vg_mem_alloc(p, n, VG_MEM_HOST, vg_current_device()));
}

/* cudaFree and cudaFreeHost synchronise the device first, as the documentation says. */
VG_API cudaError_t cudaFree(void *p)
{
    if (!p) {
        return cudaSuccess; /* cudaFree(0) is the classic way to create the context */
    }
    vg_sync_all();
    vg_alloc_info_t info;
    if (vg_mem_find(p, 1, &info) == 1 && info.kind == VG_MEM_HOST) RET(cudaErrorInvalidValue);
    RET(vg_mem_free(p, 0));
}

VG_API cudaError_t cudaFreeHost(void *p)
{
    if (!p) return cudaSuccess;
    vg_sync_all();
    RET(vg_mem_free(p, VG_MEM_HOST));
}

VG_API cudaError_t cudaHostGetDevicePointer(void **d, void *h, unsigned flags)
{
    if (!d || flags || vg_mem_find(h, 1, NULL) != 1) RET(cudaErrorInvalidValue);
    *d = h;
    return cudaSuccess;
}

VG_API cudaError_t cudaMemGetInfo(size_t *freeb, size_t *total)
{
    if (!freeb || !total) RET(cudaErrorInvalidValue);
    vg_pool_stats_t st;
    int d = vg_current_device();
    vg_pool_stats(d, &st);
    size_t cap = vg_profile(d)->mem_bytes;
    *freeb = cap > st.device_reserved ? cap - st.device_reserved : 0;
    *total = cap;
    return cudaSuccess;
}

VG_API cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *p)
{
    if (!a) RET(cudaErrorInvalidValue);
    vg_alloc_info_t info;
    int f = vg_mem_find(p, 1, &info);
    memset(a, 0, sizeof *a);
    if (f != 1) {
        a->type = cudaMemoryTypeUnregistered;
        a->device = -2;
        return cudaSuccess;
    }
    a->device = info.dev;
    a->devicePointer = (void *)p;
    switch (info.kind) {
    case VG_MEM_HOST: a->type = cudaMemoryTypeHost; a->hostPointer = (void *)p; break;
    case VG_MEM_MANAGED: a->type = cudaMemoryTypeManaged; a->hostPointer = (void *)p; break;
    default: a->type = cudaMemoryTypeDevice; break;
    }
    return cudaSuccess;
}

VG_API cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, enum cudaMemcpyKind k, cudaStream_t st)
{
    RET(vg_memcpy2d(d, n, s, n, n, 1, k, st, 0, "cudaMemcpyAsync"));
}

VG_API cudaError_t cudaMemcpy(void *d, const void *s, size_t n, enum cudaMemcpyKind k)
{
    RET(vg_memcpy2d(d, n, s, n, n, 1, k, 0, 1, "cudaMemcpy"));
}

VG_API cudaError_t cudaMemcpy2DAsync(void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h,
                                     enum cudaMemcpyKind k, cudaStream_t st)
{
    RET(vg_memcpy2d(d, dp, s, sp, w, h, k, st, 0, "cudaMemcpy2DAsync"));
}

VG_API cudaError_t cudaMemcpy2D(void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h,
                                enum cudaMemcpyKind k)
{
    RET(vg_memcpy2d(d, dp, s, sp, w, h, k, 0, 1, "cudaMemcpy2D"));
}

VG_API cudaError_t cudaMemcpyPeerAsync(void *d, int dd, const void *s, int sd, size_t n, cudaStream_t st)
{
    (void)dd;
    (void)sd;
    RET(vg_memcpy2d(d, n, s, n, n, 1, cudaMemcpyDeviceToDevice, st, 0, "cudaMemcpyPeerAsync"));
}

VG_API cudaError_t cudaMemcpyAsync_ptsz(void *d, const void *s, size_t n, enum cudaMemcpyKind k, cudaStream_t st);
VG_API cudaError_t cudaMemcpyAsync_ptsz(void *d, const void *s, size_t n, enum cudaMemcpyKind k, cudaStream_t st)
{
    return cudaMemcpyAsync(d, s, n, k, vg_ptsz(st));
}

VG_API cudaError_t cudaMemsetAsync(void *d, int v, size_t n, cudaStream_t s) { RET(vg_memset(d, v, n, s, 0, "cudaMemsetAsync")); }
VG_API cudaError_t cudaMemset(void *d, int v, size_t n) { RET(vg_memset(d, v, n, 0, 1, "cudaMemset")); }
VG_API cudaError_t cudaMemsetAsync_ptsz(void *d, int v, size_t n, cudaStream_t s);
VG_API cudaError_t cudaMemsetAsync_ptsz(void *d, int v, size_t n, cudaStream_t s) { return cudaMemsetAsync(d, v, n, vg_ptsz(s)); }

/* ---- stream-ordered allocation and the default pool ---- */

static char pool_storage[16]; /* a pool handle is the address of its device's byte */
static unsigned long long pool_threshold[16];

static int pool_dev(cudaMemPool_t p)
{
    for (int d = 0; d < vg_config()->device_count && d < 16; d++) {
        if ((void *)p == (void *)&pool_storage[d]) return d;
    }
    return -1;
}

VG_API cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *p, int d)
{
    if (!p) RET(cudaErrorInvalidValue);
    if (d < 0 || d >= vg_config()->device_count || d >= 16) RET(cudaErrorInvalidDevice);
    *p = (cudaMemPool_t)(void *)&pool_storage[d];
    return cudaSuccess;
}

VG_API cudaError_t cudaDeviceGetMemPool(cudaMemPool_t *p, int d) { return cudaDeviceGetDefaultMemPool(p, d); }

VG_API cudaError_t cudaDeviceSetMemPool(int d, cudaMemPool_t p)
{
    RET(pool_dev(p) == d ? cudaSuccess : cudaErrorNotSupported); /* only the default pool exists */
}

VG_API cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t p, enum cudaMemPoolAttr a, void *v)
{
    int d = pool_dev(p);
    if (d < 0 || !v) RET(cudaErrorInvalidValue);
    switch (a) {
    case cudaMemPoolAttrReleaseThreshold: pool_threshold[d] = *(unsigned long long *)v; break;
    case cudaMemPoolReuseAllowOpportunistic: vg_pool_policy(d, 0, 1, *(int *)v); break;
    case cudaMemPoolReuseAllowInternalDependencies: vg_pool_policy(d, 1, 1, *(int *)v); break;
    case cudaMemPoolReuseFollowEventDependencies: vg_pool_policy(d, 2, 1, *(int *)v); break;
    case cudaMemPoolAttrReservedMemHigh: case cudaMemPoolAttrUsedMemHigh:
        if (*(unsigned long long *)v) RET(cudaErrorInvalidValue); /* only a reset is allowed */
        vg_pool_reset_peak(d, a == cudaMemPoolAttrReservedMemHigh);
        break;
    default: RET(cudaErrorInvalidValue);
    }
    return cudaSuccess;
}

VG_API cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t p, enum cudaMemPoolAttr a, void *v)
{
    int d = pool_dev(p);
    if (d < 0 || !v) RET(cudaErrorInvalidValue);
    vg_pool_stats_t st;
    vg_pool_stats(d, &st);
    switch (a) {
    case cudaMemPoolAttrReleaseThreshold: *(unsigned long long *)v = pool_threshold[d]; break;
    case cudaMemPoolReuseAllowOpportunistic: *(int *)v = vg_pool_policy(d, 0, 0, 0); break;
    case cudaMemPoolReuseAllowInternalDependencies: *(int *)v = vg_pool_policy(d, 1, 0, 0); break;
    case cudaMemPoolReuseFollowEventDependencies: *(int *)v = vg_pool_policy(d, 2, 0, 0); break;
    case cudaMemPoolAttrReservedMemCurrent: *(unsigned long long *)v = st.reserved; break;
    case cudaMemPoolAttrUsedMemCurrent: *(unsigned long long *)v = st.used; break;
    case cudaMemPoolAttrReservedMemHigh: *(unsigned long long *)v = st.reserved_peak; break;
    case cudaMemPoolAttrUsedMemHigh: *(unsigned long long *)v = st.used_peak; break;
    default: RET(cudaErrorInvalidValue);
    }
    return cudaSuccess;
}

VG_API cudaError_t cudaMemPoolTrimTo(cudaMemPool_t p, size_t keep)
{
    int d = pool_dev(p);
    if (d < 0) RET(cudaErrorInvalidValue);
    vg_pool_trim(d, keep);
    return cudaSuccess;
}

VG_API cudaError_t cudaMemPoolSetAccess(cudaMemPool_t p, const struct cudaMemAccessDesc *desc, size_t n)
{
    if (pool_dev(p) < 0 || (n && !desc)) RET(cudaErrorInvalidValue);
    return cudaSuccess;
}

VG_API cudaError_t cudaMemPoolGetAccess(enum cudaMemAccessFlags *f, cudaMemPool_t p, struct cudaMemLocation *loc)
{
    if (pool_dev(p) < 0 || !f || !loc) RET(cudaErrorInvalidValue);
    *f = cudaMemAccessFlagsProtReadWrite;
    return cudaSuccess;
}

VG_API cudaError_t cudaMallocAsync(void **p, size_t n, cudaStream_t s) { RET(vg_pool_alloc(p, n, s)); }
VG_API cudaError_t cudaFreeAsync(void *p, cudaStream_t s) { RET(vg_pool_free(p, s)); }

VG_API cudaError_t cudaMallocFromPoolAsync(void **p, size_t n, cudaMemPool_t pool, cudaStream_t s)
{
    if (pool_dev(pool) < 0) RET(cudaErrorInvalidValue);
    RET(vg_pool_alloc(p, n, s));
}

VG_API cudaError_t cudaMallocAsync_ptsz(void **p, size_t n, cudaStream_t s);
VG_API cudaError_t cudaMallocAsync_ptsz(void **p, size_t n, cudaStream_t s) { return cudaMallocAsync(p, n, vg_ptsz(s)); }
VG_API cudaError_t cudaFreeAsync_ptsz(void *p, cudaStream_t s);
VG_API cudaError_t cudaFreeAsync_ptsz(void *p, cudaStream_t s) { return cudaFreeAsync(p, vg_ptsz(s)); }
