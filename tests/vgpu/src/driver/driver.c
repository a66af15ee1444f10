/*
 * driver.c: the vgpu's libcuda.so.1. The driver API maps onto the same core objects as the
 * runtime (a CUstream is a cudaStream_t, a CUfunction is the kernel's registry entry), the
 * way the real runtime is a layer over the real driver. Entry points are reachable both
 * directly and through cuGetProcAddress, which honours the per-thread default stream flag
 * by handing out the _ptsz variants.
 */
#include <string.h>

#include <cuda.h>

#include "vg.h"

#define VG_DRIVER_VERSION 13000

static const struct {
    CUresult code;
    const char *name, *text;
} res_tab[] = {
#define VG_CU_RESULT(n, v, d) {(CUresult)(v), #n, d},
#include "errors.inc"
#undef VG_CU_RESULT
};

/* Runtime and driver codes share numbers for the errors both have; the rest map here. */
static CUresult cu(cudaError_t e)
{
    switch (e) {
    case cudaErrorInvalidDeviceFunction: return CUDA_ERROR_INVALID_HANDLE;
    case cudaErrorInvalidConfiguration: return CUDA_ERROR_INVALID_VALUE;
    case cudaErrorMemoryAllocation: return CUDA_ERROR_OUT_OF_MEMORY;
    default: return (CUresult)e;
    }
}

VG_API CUresult cuGetErrorString(CUresult r, const char **s)
{
    if (!s) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof res_tab / sizeof res_tab[0]; i++) {
        if (res_tab[i].code == r) {
            *s = res_tab[i].text;
            return CUDA_SUCCESS;
        }
    }
    *s = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

VG_API CUresult cuGetErrorName(CUresult r, const char **s)
{
    if (!s) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof res_tab / sizeof res_tab[0]; i++) {
        if (res_tab[i].code == r) {
            *s = res_tab[i].name;
            return CUDA_SUCCESS;
        }
    }
    *s = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

VG_API CUresult cuInit(unsigned flags)
{
    if (flags) return CUDA_ERROR_INVALID_VALUE;
    vg_init();
    return CUDA_SUCCESS;
}

VG_API CUresult cuDriverGetVersion(int *v)
{
    if (!v) return CUDA_ERROR_INVALID_VALUE;
    *v = VG_DRIVER_VERSION;
    return CUDA_SUCCESS;
}

static int ndev(void) { return vg_config()->device_count; }

VG_API CUresult cuDeviceGetCount(int *n)
{
    if (!n) return CUDA_ERROR_INVALID_VALUE;
    *n = ndev();
    return CUDA_SUCCESS;
}

VG_API CUresult cuDeviceGet(CUdevice *d, int ordinal)
{
    if (!d) return CUDA_ERROR_INVALID_VALUE;
    if (ordinal < 0 || ordinal >= ndev()) return CUDA_ERROR_INVALID_DEVICE;
    *d = ordinal;
    return CUDA_SUCCESS;
}

VG_API CUresult cuDeviceGetName(char *name, int len, CUdevice d)
{
    if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    if (d < 0 || d >= ndev()) return CUDA_ERROR_INVALID_DEVICE;
    struct cudaDeviceProp p;
    vg_device_props(&p, d);
    strncpy(name, p.name, (size_t)len - 1);
    name[len - 1] = 0;
    return CUDA_SUCCESS;
}

VG_API CUresult cuDeviceTotalMem_v2(size_t *b, CUdevice d)
{
    if (!b) return CUDA_ERROR_INVALID_VALUE;
    if (d < 0 || d >= ndev()) return CUDA_ERROR_INVALID_DEVICE;
    *b = vg_profile(d)->mem_bytes;
    return CUDA_SUCCESS;
}

VG_API CUresult cuDeviceGetUuid_v2(CUuuid *u, CUdevice d)
{
    if (!u) return CUDA_ERROR_INVALID_VALUE;
    if (d < 0 || d >= ndev()) return CUDA_ERROR_INVALID_DEVICE;
    struct cudaDeviceProp p;
    vg_device_props(&p, d);
    memcpy(u->bytes, p.uuid.bytes, sizeof u->bytes);
    return CUDA_SUCCESS;
}

VG_API CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d)
{
    /* CUdevice_attribute and cudaDeviceAttr share their values. */
    return cu(vg_device_attr(v, (int)a, d));
}

/* ---- contexts: one primary context per device; its handle is the device's slot ---- */

static char ctx_slots[32];
static __thread int tls_unbound; /* cuCtxSetCurrent(NULL) was the last binding call */

static CUcontext ctx_of(int d) { return (CUcontext)(void *)&ctx_slots[d]; }

static int dev_of(CUcontext c)
{
    for (int d = 0; d < ndev(); d++) {
        if (c == ctx_of(d)) return d;
    }
    return -1;
}

VG_API CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d)
{
    if (!c) return CUDA_ERROR_INVALID_VALUE;
    if (d < 0 || d >= ndev()) return CUDA_ERROR_INVALID_DEVICE;
    *c = ctx_of(d);
    vg_device_activate(d);
    return CUDA_SUCCESS;
}

VG_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) { return d >= 0 && d < ndev() ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE; }
VG_API CUresult cuDevicePrimaryCtxReset_v2(CUdevice d) { return cuDevicePrimaryCtxRelease_v2(d); }
VG_API CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice d, unsigned f) { (void)f; return cuDevicePrimaryCtxRelease_v2(d); }

VG_API CUresult cuDevicePrimaryCtxGetState(CUdevice d, unsigned *flags, int *active)
{
    if (!flags || !active) return CUDA_ERROR_INVALID_VALUE;
    if (d < 0 || d >= ndev()) return CUDA_ERROR_INVALID_DEVICE;
    *flags = 0;
    *active = vg_device_active(d);
    return CUDA_SUCCESS;
}

VG_API CUresult cuCtxGetCurrent(CUcontext *c)
{
    if (!c) return CUDA_ERROR_INVALID_VALUE;
    *c = tls_unbound ? NULL : ctx_of(vg_current_device());
    return CUDA_SUCCESS;
}

VG_API CUresult cuCtxSetCurrent(CUcontext c)
{
    if (!c) {
        tls_unbound = 1; /* the runtime binds the primary context again on its next call */
        return CUDA_SUCCESS;
    }
    int d = dev_of(c);
    if (d < 0) return CUDA_ERROR_INVALID_CONTEXT;
    tls_unbound = 0;
    return cu(vg_set_device(d));
}

VG_API CUresult cuCtxPushCurrent_v2(CUcontext c) { return cuCtxSetCurrent(c); }

VG_API CUresult cuCtxPopCurrent_v2(CUcontext *c)
{
    if (c) *c = ctx_of(vg_current_device());
    return CUDA_SUCCESS;
}

VG_API CUresult cuCtxGetDevice(CUdevice *d)
{
    if (!d) return CUDA_ERROR_INVALID_VALUE;
    *d = vg_current_device();
    return CUDA_SUCCESS;
}

VG_API CUresult cuCtxSynchronize(void) { return cu(vg_device_sync()); }

VG_API CUresult cuCtxGetStreamPriorityRange(int *least, int *greatest)
{
    if (least) *least = 0;
    if (greatest) *greatest = -5;
    return CUDA_SUCCESS;
}
