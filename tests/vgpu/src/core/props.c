/*
 * props.c: device properties and attributes from the profile, shared by the runtime's
 * cudaGetDeviceProperties/cudaDeviceGetAttribute and the driver's cuDeviceGetAttribute.
 */
#include <stdio.h>
#include <string.h>

#include "core.h"

static int valid_dev(int d) { return d >= 0 && d < vg_config()->device_count; }

cudaError_t vg_device_props(struct cudaDeviceProp *p, int d)
{
    if (!p) return (cudaErrorInvalidValue);
    if (!valid_dev(d)) return (cudaErrorInvalidDevice);
    const vgpu_profile_t *pr = vg_profile(d);
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "vgpu %s", pr->name);
    for (int i = 0; i < 16; i++) {
        p->uuid.bytes[i] = (char)(0x56 + i * 7 + d); /* stable per device */
    }
    p->totalGlobalMem = pr->mem_bytes;
    p->sharedMemPerBlock = 48 << 10;
    p->sharedMemPerBlockOptin = pr->cc_major >= 9 ? 227 << 10 : 163 << 10;
    p->sharedMemPerMultiprocessor = pr->cc_major >= 9 ? 228 << 10 : 164 << 10;
    p->regsPerBlock = 65536;
    p->regsPerMultiprocessor = 65536;
    p->warpSize = 32;
    p->maxThreadsPerBlock = 1024;
    p->maxThreadsDim[0] = p->maxThreadsDim[1] = 1024;
    p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 0x7fffffff;
    p->maxGridSize[1] = p->maxGridSize[2] = 65535;
    p->totalConstMem = 64 << 10;
    p->major = pr->cc_major;
    p->minor = pr->cc_minor;
    p->multiProcessorCount = pr->sm_count;
    p->maxThreadsPerMultiProcessor = 2048;
    p->l2CacheSize = pr->cc_major >= 9 ? 50 << 20 : 40 << 20;
    p->memoryBusWidth = 5120;
    p->asyncEngineCount = 2;
    p->unifiedAddressing = 1;
    p->concurrentKernels = 1;
    p->pciBusID = d + 1;
    p->memoryPoolsSupported = 1;
    p->canMapHostMemory = 1;
    p->managedMemory = 1;
    p->streamPrioritiesSupported = 1;
    p->globalL1CacheSupported = 1;
    return cudaSuccess;
}

cudaError_t vg_device_attr(int *v, int a, int d)
{
    if (!v) return (cudaErrorInvalidValue);
    if (!valid_dev(d)) return (cudaErrorInvalidDevice);
    struct cudaDeviceProp p;
    vg_device_props(&p, d);
    switch ((enum cudaDeviceAttr)a) {
    case cudaDevAttrMultiProcessorCount: *v = p.multiProcessorCount; break;
    case cudaDevAttrComputeCapabilityMajor: *v = p.major; break;
    case cudaDevAttrComputeCapabilityMinor: *v = p.minor; break;
    case cudaDevAttrMaxThreadsPerBlock: *v = p.maxThreadsPerBlock; break;
    case cudaDevAttrWarpSize: *v = p.warpSize; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *v = (int)p.sharedMemPerBlock; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *v = (int)p.sharedMemPerBlockOptin; break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor: *v = (int)p.sharedMemPerMultiprocessor; break;
    case cudaDevAttrL2CacheSize: *v = p.l2CacheSize; break;
    case cudaDevAttrMaxThreadsPerMultiProcessor: *v = p.maxThreadsPerMultiProcessor; break;
    case cudaDevAttrMaxBlockDimX: case cudaDevAttrMaxBlockDimY: *v = 1024; break;
    case cudaDevAttrMaxBlockDimZ: *v = 64; break;
    case cudaDevAttrMaxGridDimX: *v = p.maxGridSize[0]; break;
    case cudaDevAttrMaxGridDimY: case cudaDevAttrMaxGridDimZ: *v = 65535; break;
    case cudaDevAttrMemoryPoolsSupported: case cudaDevAttrUnifiedAddressing:
    case cudaDevAttrConcurrentKernels: case cudaDevAttrManagedMemory:
    case cudaDevAttrCanMapHostMemory: *v = 1; break;
    case cudaDevAttrPciBusId: *v = p.pciBusID; break;
    case cudaDevAttrMaxRegistersPerBlock: *v = p.regsPerBlock; break;
    case cudaDevAttrAsyncEngineCount: *v = p.asyncEngineCount; break;
    default: *v = 0; break; /* a valid attribute the device does not model */
    }
    return cudaSuccess;
}

