/*
 * alloc_retry.c: one allocation entry point of the CUDA runtime or driver, called the way
 * tests/shim/alloc_retry.sh needs it (DESIGN.md invariant 11, issue 27): the shim gives
 * memory back before an allocation of the program fails, and a failure it cannot avoid
 * reaches the program as the library's own error.
 *
 *   alloc_retry API big   asks for 1 TiB (more than any device has): prints
 *                         "API big rc=N last=M" (M: cudaGetLastError() after it)
 *   alloc_retry API fit   on a device of 64 MiB: takes 48 MiB with cudaMallocAsync, writes
 *                         it, frees it with cudaFreeAsync (a mode that defers holds that
 *                         free), then asks API for 40 MiB, which fits only once the 48 go
 *                         back to the device: prints "API fit rc=N", frees what it got
 *
 * API: cudaMalloc cudaMallocAsync cudaMallocPitch cudaMalloc3D cudaMallocManaged
 * cudaMallocFromPoolAsync cuMemAlloc cuMemAllocPitch cuMemAllocManaged cuMemAllocAsync
 * cuMemCreate. Exit status 0 when it ran (the codes are the output), 2 on bad usage.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#define MIB ((size_t)1 << 20)

static cudaStream_t stream;

/* Allocates n bytes with api; *drv = 1 for a driver entry point. Returns its status as an
 * int, and what to free in *p (or the cuMemCreate handle in *h). */
static int alloc_with(const char *api, size_t n, void **p, unsigned long long *h)
{
    CUdeviceptr d = 0;
    size_t pitch = 0;
    int rc = -1;
    *p = NULL;
    *h = 0;
    if (!strcmp(api, "cudaMalloc")) {
        rc = cudaMalloc(p, n);
    } else if (!strcmp(api, "cudaMallocAsync")) {
        rc = cudaMallocAsync(p, n, stream);
    } else if (!strcmp(api, "cudaMallocPitch")) {
        rc = cudaMallocPitch(p, &pitch, n / 1024, 1024);
    } else if (!strcmp(api, "cudaMalloc3D")) {
        struct cudaPitchedPtr pp = {0};
        rc = cudaMalloc3D(&pp, (struct cudaExtent){n / 1024 / 4, 1024, 4});
        *p = pp.ptr;
    } else if (!strcmp(api, "cudaMallocManaged")) {
        rc = cudaMallocManaged(p, n, cudaMemAttachGlobal);
    } else if (!strcmp(api, "cudaMallocFromPoolAsync")) {
        cudaMemPool_t pool;
        rc = cudaDeviceGetDefaultMemPool(&pool, 0);
        if (rc == 0)
            rc = cudaMallocFromPoolAsync(p, n, pool, stream);
    } else if (!strcmp(api, "cuMemAlloc")) {
        rc = cuMemAlloc(&d, n);
        *p = (void *)(uintptr_t)d;
    } else if (!strcmp(api, "cuMemAllocPitch")) {
        rc = cuMemAllocPitch(&d, &pitch, n / 1024, 1024, 4);
        *p = (void *)(uintptr_t)d;
    } else if (!strcmp(api, "cuMemAllocManaged")) {
        rc = cuMemAllocManaged(&d, n, CU_MEM_ATTACH_GLOBAL);
        *p = (void *)(uintptr_t)d;
    } else if (!strcmp(api, "cuMemAllocAsync")) {
        rc = cuMemAllocAsync(&d, n, (CUstream)stream);
        *p = (void *)(uintptr_t)d;
    } else if (!strcmp(api, "cuMemCreate")) {
        CUmemAllocationProp prop;
        memset(&prop, 0, sizeof prop);
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id = 0;
        CUmemGenericAllocationHandle hh = 0;
        rc = cuMemCreate(&hh, n, &prop, 0);
        *h = hh;
    }
    return rc;
}

static void release(const char *api, void *p, unsigned long long h)
{
    if (h)
        cuMemRelease((CUmemGenericAllocationHandle)h);
    else if (p && (!strcmp(api, "cudaMallocAsync") || !strcmp(api, "cudaMallocFromPoolAsync")))
        cudaFreeAsync(p, stream);
    else if (p && !strcmp(api, "cuMemAllocAsync"))
        cuMemFreeAsync((CUdeviceptr)(uintptr_t)p, (CUstream)stream);
    else if (p && !strncmp(api, "cuMem", 5))
        cuMemFree((CUdeviceptr)(uintptr_t)p);
    else if (p)
        cudaFree(p);
}

int main(int argc, char **argv)
{
    if (argc != 3 || (strcmp(argv[2], "big") && strcmp(argv[2], "fit"))) {
        fprintf(stderr, "usage: alloc_retry API big|fit\n");
        return 2;
    }
    const char *api = argv[1];
    void *p = NULL;
    unsigned long long h = 0;
    cuInit(0);
    cudaSetDevice(0);
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    if (!strcmp(argv[2], "big")) {
        int rc = alloc_with(api, (size_t)1 << 40, &p, &h);
        int last = cudaGetLastError();
        printf("%s big rc=%d last=%d\n", api, rc, last);
        release(api, p, h);
    } else {
        void *x = NULL;
        if (cudaMallocAsync(&x, 48 * MIB, stream) != cudaSuccess ||
            cudaMemsetAsync(x, 1, 48 * MIB, stream) != cudaSuccess ||
            cudaFreeAsync(x, stream) != cudaSuccess) {
            printf("%s fit setup failed\n", api);
            return 1;
        }
        int rc = alloc_with(api, 40 * MIB, &p, &h);
        printf("%s fit rc=%d\n", api, rc);
        if (rc == -1) {
            fprintf(stderr, "alloc_retry: unknown API '%s'\n", api);
            return 2;
        }
        release(api, p, h);
    }
    cudaStreamSynchronize(stream);
    cudaStreamDestroy(stream);
    return 0;
}
