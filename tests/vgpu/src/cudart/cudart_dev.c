/*
 * cudart_dev.c: devices, properties, errors, versions and driver entry points.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include <cuda.h>

#include "cudart.h"

#define VG_CUDART_VERSION 13000

static const struct {
    cudaError_t code;
    const char *name, *text;
} err_tab[] = {
#define VG_CUDA_ERROR(n, v, d) {(cudaError_t)(v), #n, d},
#include "errors.inc"
#undef VG_CUDA_ERROR
};

VG_API const char *cudaGetErrorName(cudaError_t e)
{
    for (size_t i = 0; i < sizeof err_tab / sizeof err_tab[0]; i++) {
        if (err_tab[i].code == e) {
            return err_tab[i].name;
        }
    }
    return "unrecognized error code";
}

VG_API const char *cudaGetErrorString(cudaError_t e)
{
    for (size_t i = 0; i < sizeof err_tab / sizeof err_tab[0]; i++) {
        if (err_tab[i].code == e) {
            return err_tab[i].text;
        }
    }
    return "unrecognized error code";
}

VG_API cudaError_t cudaGetLastError(void) { return vg_get_last_error(1); }
VG_API cudaError_t cudaPeekAtLastError(void) { return vg_get_last_error(0); }

VG_API cudaError_t cudaRuntimeGetVersion(int *v)
{
    if (!v) RET(cudaErrorInvalidValue);
    *v = VG_CUDART_VERSION;
    return cudaSuccess;
}

VG_API cudaError_t cudaDriverGetVersion(int *v)
{
    if (!v) RET(cudaErrorInvalidValue);
    *v = VG_CUDART_VERSION;
    return cudaSuccess;
}

VG_API cudaError_t cudaGetDeviceCount(int *n)
{
    if (!n) RET(cudaErrorInvalidValue);
    *n = vg_config()->device_count;
    return cudaSuccess;
}

VG_API cudaError_t cudaSetDevice(int d) { RET(vg_set_device(d)); }

VG_API cudaError_t cudaGetDevice(int *d)
{
    if (!d) RET(cudaErrorInvalidValue);
    *d = vg_current_device();
    return cudaSuccess;
}

VG_API cudaError_t cudaInitDevice(int d, unsigned dflags, unsigned flags)
{
    (void)dflags;
    (void)flags;
    RET(d >= 0 && d < vg_config()->device_count ? cudaSuccess : cudaErrorInvalidDevice);
}

static __thread unsigned tls_dev_flags;

VG_API cudaError_t cudaSetDeviceFlags(unsigned flags)
{
    tls_dev_flags = flags;
    return cudaSuccess;
}

VG_API cudaError_t cudaGetDeviceFlags(unsigned *flags)
{
    if (!flags) RET(cudaErrorInvalidValue);
    *flags = tls_dev_flags;
    return cudaSuccess;
}

static int valid_dev(int d) { return d >= 0 && d < vg_config()->device_count; }

VG_API cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int d) { RET(vg_device_props(p, d)); }

VG_API cudaError_t cudaDeviceGetAttribute(int *v, enum cudaDeviceAttr a, int d) { RET(vg_device_attr(v, (int)a, d)); }

VG_API cudaError_t cudaDeviceGetStreamPriorityRange(int *least, int *greatest)
{
    if (least) *least = 0;
    if (greatest) *greatest = -5;
    return cudaSuccess;
}

VG_API cudaError_t cudaDeviceGetPCIBusId(char *buf, int len, int d)
{
    if (!buf || len <= 0) RET(cudaErrorInvalidValue);
    if (!valid_dev(d)) RET(cudaErrorInvalidDevice);
    snprintf(buf, (size_t)len, "00000000:%02X:00.0", d + 1);
    return cudaSuccess;
}

VG_API cudaError_t cudaDeviceCanAccessPeer(int *can, int d, int peer)
{
    if (!can) RET(cudaErrorInvalidValue);
    if (!valid_dev(d) || !valid_dev(peer)) RET(cudaErrorInvalidDevice);
    *can = d != peer;
    return cudaSuccess;
}

VG_API cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned flags)
{
    if (flags) RET(cudaErrorInvalidValue);
    RET(valid_dev(peer) ? cudaSuccess : cudaErrorInvalidDevice);
}

VG_API cudaError_t cudaDeviceGetLimit(size_t *v, enum cudaLimit l)
{
    if (!v) RET(cudaErrorInvalidValue);
    switch (l) {
    case cudaLimitStackSize: *v = 1024; break;
    case cudaLimitPrintfFifoSize: case cudaLimitMallocHeapSize: *v = 8 << 20; break;
    default: *v = 0; break;
    }
    return cudaSuccess;
}

VG_API cudaError_t cudaDeviceSetLimit(enum cudaLimit l, size_t v)
{
    (void)l;
    (void)v;
    return cudaSuccess;
}

VG_API cudaError_t cudaDeviceSynchronize(void) { RET(vg_device_sync()); }

VG_API cudaError_t cudaDeviceReset(void) { RET(vg_device_sync()); }

/* The runtime reaches the driver through cuGetProcAddress, as the real one does. */
static cudaError_t entry_point(const char *sym, void **fn, int ver, unsigned long long flags,
                               enum cudaDriverEntryPointQueryResult *st)
{
    if (!sym || !fn) RET(cudaErrorInvalidValue);
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!h) {
        h = dlopen("libcuda.so.1", RTLD_NOW);
    }
    typedef CUresult (*gpa_t)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
    gpa_t gpa = h ? (gpa_t)dlsym(h, "cuGetProcAddress_v2") : NULL;
    if (!gpa) RET(cudaErrorInitializationError);
    CUdriverProcAddressQueryResult q = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CUresult r = gpa(sym, fn, ver, flags, &q);
    if (st) {
        *st = q == CU_GET_PROC_ADDRESS_SUCCESS ? cudaDriverEntryPointSuccess
              : q == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT ? cudaDriverEntryPointVersionNotSufficent
                                                                : cudaDriverEntryPointSymbolNotFound;
    }
    (void)r;
    return cudaSuccess; /* as documented: status tells whether the symbol was found */
}

void *vg_driver_entry(const char *sym)
{
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult st = cudaDriverEntryPointSymbolNotFound;
    if (entry_point(sym, &fn, VG_CUDART_VERSION, 0, &st) != cudaSuccess ||
        st != cudaDriverEntryPointSuccess)
        return NULL;
    return fn;
}

VG_API cudaError_t cudaGetDriverEntryPoint(const char *sym, void **fn, unsigned long long flags,
                                           enum cudaDriverEntryPointQueryResult *st)
{
    return entry_point(sym, fn, VG_CUDART_VERSION, flags, st);
}

VG_API cudaError_t cudaGetDriverEntryPointByVersion(const char *sym, void **fn, unsigned ver,
                                                    unsigned long long flags,
                                                    enum cudaDriverEntryPointQueryResult *st)
{
    return entry_point(sym, fn, (int)ver, flags, st);
}
