/*
 * vgpu.memory: allocations (device, pinned host, stream-ordered pools), copies, memsets,
 * pointer attributes, and the errors the CUDA documentation gives for bad pointers.
 */
#include "rt_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB (1u << 20)

static int setup(void **state)
{
    vgt_register_kernels();
    if (cudaSetDevice(0) != cudaSuccess)
        return -1;
    return 0;
}

static void test_malloc_free(void **state)
{
    void *d = NULL;
    VGT_OK(cudaMalloc(&d, MIB));
    assert_non_null(d);
    if ((uintptr_t)d % 256 != 0)
        fail_msg("cudaMalloc pointer %p is not 256-byte aligned", d);
    void *e = NULL;
    VGT_OK(cudaMalloc(&e, 1000));
    assert_non_null(e);
    /* Two live allocations never overlap. */
    assert_true((char *)e >= (char *)d + MIB || (char *)e + 1000 <= (char *)d);
    VGT_OK(cudaFree(e));
    VGT_OK(cudaFree(d));
    VGT_OK(cudaFree(NULL));
    VGT_EXPECT_RT(cudaErrorInvalidValue, cudaMalloc(NULL, 16));
    (void)cudaGetLastError();
}

static void test_malloc_too_large(void **state)
{
    size_t fr = 0, total = 0;
    VGT_OK(cudaMemGetInfo(&fr, &total));
    void *d = (void *)0x1;
    VGT_EXPECT_RT(cudaErrorMemoryAllocation, cudaMalloc(&d, total + MIB));
    VGT_EXPECT_RT(cudaErrorMemoryAllocation, cudaGetLastError());
    /* Not sticky: the device still works. */
    VGT_OK(cudaMalloc(&d, MIB));
    VGT_OK(cudaFree(d));
    VGT_OK(cudaGetLastError());
}

static void test_free_errors(void **state)
{
    char *d = NULL;
    VGT_OK(cudaMalloc((void **)&d, MIB));
    VGT_EXPECT_RT(cudaErrorInvalidValue, cudaFree(d + 256)); /* not an allocation base */
    VGT_EXPECT_RT(cudaErrorInvalidValue, cudaGetLastError());
    int on_stack = 0;
    VGT_EXPECT_RT(cudaErrorInvalidValue, cudaFree(&on_stack)); /* never allocated */
    char *pageable = malloc(4096);
    assert_non_null(pageable);
    VGT_EXPECT_RT(cudaErrorInvalidValue, cudaFree(pageable));
    VGT_EXPECT_RT(cudaErrorInvalidValue, cudaFreeHost(pageable));
    void *pinned = NULL;
    VGT_OK(cudaMallocHost(&pinned, 4096));
    VGT_EXPECT_RT(cudaErrorInvalidValue, cudaFree(pinned)); /* wrong kind */
    VGT_EXPECT_RT(cudaErrorInvalidValue, cudaFreeHost(d));  /* wrong kind */
    (void)cudaGetLastError();
    /* The failed frees left both allocations alive. */
    VGT_OK(cudaMemset(d, 1, MIB));
    VGT_OK(cudaFreeHost(pinned));
    VGT_OK(cudaFree(d));
    VGT_EXPECT_RT(cudaErrorInvalidValue, cudaFree(d));          /* double free */
    VGT_EXPECT_RT(cudaErrorInvalidValue, cudaFreeHost(pinned)); /* double free */
    (void)cudaGetLastError();
    free(pageable);
}

static void test_pinned_host(void **state)
{
    unsigned flags[] = {cudaHostAllocDefault, cudaHostAllocPortable, cudaHostAllocMapped,
                        cudaHostAllocWriteCombined,
                        cudaHostAllocPortable | cudaHostAllocMapped};
    for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
        unsigned char *h = NULL;
        VGT_OK(cudaHostAlloc((void **)&h, 8192, flags[i]));
        assert_non_null(h);
        memset(h, 0x5a, 8192); /* host-accessible */
        assert_int_equal(h[8191], 0x5a);
        VGT_OK(cudaFreeHost(h));
    }
    void *h = NULL;
    VGT_EXPECT_RT(cudaErrorInvalidValue, cudaHostAlloc(&h, 4096, 0x80));
    VGT_EXPECT_RT(cudaErrorInvalidValue, cudaMallocHost(NULL, 4096));
    (void)cudaGetLastError();
    VGT_OK(cudaMallocHost(&h, 100));
    memset(h, 1, 100);
    VGT_OK(cudaFreeHost(h));
}

static void test_memcpy_roundtrip(void **state)
{
    enum { n = 4096, bytes = n * sizeof(float) };
    static float src[n], dst[n]; /* pageable memory the heap never hands out */
    float *pin = NULL;
    VGT_OK(cudaMallocHost((void **)&pin, bytes));
    for (size_t i = 0; i < n; i++)
        src[i] = (float)i * 0.5f;
    float *a = NULL, *b = NULL;
    VGT_OK(cudaMalloc((void **)&a, bytes));
    VGT_OK(cudaMalloc((void **)&b, bytes));
    VGT_OK(cudaMemcpy(a, src, bytes, cudaMemcpyHostToDevice));
    VGT_OK(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
    VGT_OK(cudaMemcpy(pin, b, bytes, cudaMemcpyDeviceToHost));
    assert_memory_equal(pin, src, bytes);
    /* cudaMemcpyDefault infers the direction from the pointers (unified addressing). */
    memset(dst, 0, bytes);
    VGT_OK(cudaMemset(b, 0, bytes));
    VGT_OK(cudaMemcpy(b, pin, bytes, cudaMemcpyDefault));
    VGT_OK(cudaMemcpy(dst, b, bytes, cudaMemcpyDefault));
    assert_memory_equal(dst, src, bytes);
    /* Host to host. */
    memset(dst, 0, bytes);
    VGT_OK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToHost));
    assert_memory_equal(dst, src, bytes);
    /* Interior pointers and partial lengths. */
    memset(dst, 0, bytes);
    VGT_OK(cudaMemcpy(dst + 10, a + 100, 50 * sizeof(float), cudaMemcpyDeviceToHost));
    assert_memory_equal(dst + 10, src + 100, 50 * sizeof(float));
    assert_true(dst[9] == 0.0f && dst[60] == 0.0f);
    VGT_OK(cudaMemcpy(dst, a, 0, cudaMemcpyDeviceToHost)); /* zero bytes: nothing, success */
    VGT_OK(cudaFree(a));
    VGT_OK(cudaFree(b));
    VGT_OK(cudaFreeHost(pin));
}

static void test_memcpy_bad_pointers(void **state)
{
    enum { bytes = 4096 };
    static char h[2 * bytes]; /* pageable memory the heap never hands out */
    char *d = NULL, *e = NULL;
    VGT_OK(cudaMalloc((void **)&d, bytes));
    VGT_OK(cudaMalloc((void **)&e, bytes));
    /* Ranges that run past the end of the allocation. */
    VGT_EXPECT_RT(cudaErrorInvalidValue, cudaMemcpy(h, d, bytes + 4, cudaMemcpyDeviceToHost));
    VGT_EXPECT_RT(cudaErrorInvalidValue, cudaMemcpy(d + 8, h, bytes, cudaMemcpyHostToDevice));
    VGT_EXPECT_RT(cudaErrorInvalidValue, cudaMemcpy(e, d + 1, bytes, cudaMemcpyDeviceToDevice));
    VGT_EXPECT_RT(cudaErrorInvalidValue,
                  cudaMemcpyAsync(h, d + bytes - 4, 8, cudaMemcpyDeviceToHost, 0));
    /* A device-to-device copy from memory that is not device memory. */
    VGT_EXPECT_RT(cudaErrorInvalidValue, cudaMemcpy(e, h, 64, cudaMemcpyDeviceToDevice));
    (void)cudaGetLastError();
    /* Not sticky: a correct copy still works. */
    VGT_OK(cudaMemset(d, 7, bytes));
    VGT_OK(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
    assert_int_equal(h[bytes - 1], 7);

    /* Use after free: an error, never success. */
    VGT_OK(cudaFree(d));
    cudaError_t r1 = cudaMemcpy(h, d, 64, cudaMemcpyDeviceToHost);
    cudaError_t r2 = cudaMemcpy(d, h, 64, cudaMemcpyHostToDevice);
    cudaError_t r3 = cudaMemcpy(e, d, 64, cudaMemcpyDeviceToDevice);
    cudaError_t r4 = cudaMemset(d, 0, 64);
    if (r1 == cudaSuccess || r2 == cudaSuccess || r3 == cudaSuccess || r4 == cudaSuccess)
        fail_msg("copies/memset on a freed allocation: expected errors, got D2H %s, H2D %s, "
                 "D2D %s, memset %s",
                 vgt_rt_name(r1), vgt_rt_name(r2), vgt_rt_name(r3), vgt_rt_name(r4));
    (void)cudaGetLastError();
    VGT_OK(cudaMemcpy(h, e, 64, cudaMemcpyDeviceToHost)); /* the device is still usable */
    VGT_OK(cudaFree(e));
}

/* Pageable memory is ordinary host memory wherever malloc places it, also at addresses
 * that a freed device allocation used before. */
static void test_pageable_memory_at_reused_addresses(void **state)
{
    const size_t sizes[] = {256, 4096, 100000, 1 << 20};
    char report[1024] = "";
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        size_t sz = sizes[k];
        char *dev = NULL, *gone = NULL;
        VGT_OK(cudaMalloc((void **)&dev, sz));
        VGT_OK(cudaMemset(dev, 0x42, sz));
        VGT_OK(cudaMalloc((void **)&gone, sz));
        VGT_OK(cudaFree(gone));
        char *h = malloc(sz); /* may or may not reuse gone's addresses */
        assert_non_null(h);
        memset(h, 0, sz);
        cudaError_t e1 = cudaMemcpy(h, dev, sz, cudaMemcpyDeviceToHost);
        cudaError_t e2 = cudaMemcpy(dev, h, sz, cudaMemcpyHostToDevice);
        struct cudaPointerAttributes at;
        memset(&at, 0, sizeof(at));
        cudaError_t e3 = cudaPointerGetAttributes(&at, h);
        (void)cudaGetLastError();
        if (e1 != cudaSuccess || e2 != cudaSuccess || e3 != cudaSuccess ||
            at.type != cudaMemoryTypeUnregistered || (unsigned char)h[sz - 1] != 0x42) {
            size_t l = strlen(report);
            snprintf(report + l, sizeof(report) - l,
                     "  %zu bytes at %p (%s a freed allocation at %p): D2H %s, H2D %s, "
                     "attributes %s type %d\n",
                     sz, (void *)h, h == gone ? "reusing" : "not reusing", (void *)gone,
                     vgt_rt_name(e1), vgt_rt_name(e2), vgt_rt_name(e3), (int)at.type);
        }
        free(h);
        VGT_OK(cudaFree(dev));
    }
    if (report[0])
        fail_msg("copies with malloc'ed host memory:\n%s", report);
}

static void test_memcpy_async_stream_order(void **state)
{
    const size_t n = 1 << 16, bytes = n * sizeof(float);
    cudaStream_t s;
    VGT_OK(cudaStreamCreate(&s));
    float *hin = NULL, *hout = NULL, *a = NULL, *b = NULL, *c = NULL;
    VGT_OK(cudaMallocHost((void **)&hin, bytes));
    VGT_OK(cudaMallocHost((void **)&hout, bytes));
    VGT_OK(cudaMalloc((void **)&a, bytes));
    VGT_OK(cudaMalloc((void **)&b, bytes));
    VGT_OK(cudaMalloc((void **)&c, bytes));
    for (size_t i = 0; i < n; i++) {
        hin[i] = (float)i;
        hout[i] = -1.0f;
    }
    VGT_OK(vgt_spin(500000, 1.0, s)); /* keep the stream busy so ordering matters */
    VGT_OK(cudaMemcpyAsync(a, hin, bytes, cudaMemcpyHostToDevice, s));
    VGT_OK(vgt_fill(b, 2.0f, n, 20000, s));
    VGT_OK(vgt_add(a, b, c, n, 20000, s));
    VGT_OK(cudaMemcpyAsync(hout, c, bytes, cudaMemcpyDeviceToHost, s));
    VGT_OK(cudaStreamSynchronize(s));
    for (size_t i = 0; i < n; i++)
        if (hout[i] != (float)i + 2.0f)
            fail_msg("element %zu: expected %g, got %g", i, (double)i + 2.0, (double)hout[i]);
    VGT_OK(cudaFree(a));
    VGT_OK(cudaFree(b));
    VGT_OK(cudaFree(c));
    VGT_OK(cudaFreeHost(hin));
    VGT_OK(cudaFreeHost(hout));
    VGT_OK(cudaStreamDestroy(s));
}

/* CUDA's API synchronisation rules for pageable host memory: an H2D async copy has taken
 * the source by the time it returns; a D2H async copy into pageable memory returns only
 * once the copy has completed. */
static void test_memcpy_async_pageable(void **state)
{
    enum { n = 1024, bytes = n * sizeof(float) };
    static float src[n], dst[n]; /* pageable memory the heap never hands out */
    cudaStream_t s;
    VGT_OK(cudaStreamCreate(&s));
    float *d = NULL;
    VGT_OK(cudaMalloc((void **)&d, bytes));
    for (size_t i = 0; i < n; i++)
        src[i] = 3.0f;
    VGT_OK(vgt_spin(1000000, 1.0, s));
    VGT_OK(cudaMemcpyAsync(d, src, bytes, cudaMemcpyHostToDevice, s));
    for (size_t i = 0; i < n; i++)
        src[i] = -3.0f; /* allowed: the source was staged */
    VGT_OK(cudaStreamSynchronize(s));
    vgt_expect_device_floats(d, n, 3.0f);

    VGT_OK(vgt_spin(1000000, 1.0, s));
    VGT_OK(vgt_fill(d, 9.0f, n, 10000, s));
    memset(dst, 0, bytes);
    VGT_OK(cudaMemcpyAsync(dst, d, bytes, cudaMemcpyDeviceToHost, s));
    for (size_t i = 0; i < n; i++) /* no synchronize: the call itself waited */
        if (dst[i] != 9.0f)
            fail_msg("pageable D2H async, element %zu right after the call: expected 9, got %g",
                     i, (double)dst[i]);
    VGT_OK(cudaStreamSynchronize(s));
    VGT_OK(cudaFree(d));
    VGT_OK(cudaStreamDestroy(s));
}

static void test_memcpy2d_async(void **state)
{
    const size_t w = 40, hgt = 8, spitch = 64, dpitch = 48;
    unsigned char *src = NULL, *back = NULL, *d = NULL;
    VGT_OK(cudaMallocHost((void **)&src, spitch * hgt));
    VGT_OK(cudaMallocHost((void **)&back, spitch * hgt));
    VGT_OK(cudaMalloc((void **)&d, dpitch * hgt));
    for (size_t i = 0; i < spitch * hgt; i++)
        src[i] = (unsigned char)(i * 7 + 1);
    cudaStream_t s;
    VGT_OK(cudaStreamCreate(&s));
    VGT_OK(cudaMemsetAsync(d, 0xee, dpitch * hgt, s));
    VGT_OK(cudaMemcpy2DAsync(d, dpitch, src, spitch, w, hgt, cudaMemcpyHostToDevice, s));
    memset(back, 0, spitch * hgt);
    VGT_OK(cudaMemcpy2DAsync(back, spitch, d, dpitch, dpitch, hgt, cudaMemcpyDeviceToHost, s));
    VGT_OK(cudaStreamSynchronize(s));
    for (size_t r = 0; r < hgt; r++)
        for (size_t c = 0; c < dpitch; c++) {
            unsigned want = c < w ? src[r * spitch + c] : 0xee;
            if (back[r * spitch + c] != want)
                fail_msg("2-D copy row %zu column %zu: expected %u, got %u", r, c, want,
                         (unsigned)back[r * spitch + c]);
        }
    /* Width wider than a pitch is an error. */
    cudaError_t e = cudaMemcpy2DAsync(d, 16, src, spitch, w, hgt, cudaMemcpyHostToDevice, s);
    if (e != cudaErrorInvalidPitchValue && e != cudaErrorInvalidValue)
        fail_msg("width %zu > dpitch 16: expected cudaErrorInvalidPitchValue or "
                 "cudaErrorInvalidValue, got %s",
                 w, vgt_rt_name(e));
    /* A region that runs past the end of the destination allocation. */
    VGT_EXPECT_RT(cudaErrorInvalidValue, cudaMemcpy2DAsync(d, dpitch, src, spitch, w, hgt + 1,
                                                           cudaMemcpyHostToDevice, s));
    (void)cudaGetLastError();
    VGT_OK(cudaStreamSynchronize(s));
    VGT_OK(cudaStreamDestroy(s));
    VGT_OK(cudaFree(d));
    VGT_OK(cudaFreeHost(src));
    VGT_OK(cudaFreeHost(back));
}

static void test_memset(void **state)
{
    enum { bytes = 10000 };
    static unsigned char h[bytes];
    unsigned char *d = NULL;
    VGT_OK(cudaMalloc((void **)&d, bytes));
    VGT_OK(cudaMemset(d, 0x11, bytes));
    VGT_OK(cudaMemset(d + 100, 0x1ab, 50)); /* the value is converted to unsigned char */
    VGT_OK(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < bytes; i++) {
        unsigned want = (i >= 100 && i < 150) ? 0xab : 0x11;
        if (h[i] != want)
            fail_msg("byte %zu: expected 0x%x, got 0x%x", i, want, (unsigned)h[i]);
    }
    cudaStream_t s;
    VGT_OK(cudaStreamCreate(&s));
    VGT_OK(vgt_fill((float *)d, 1.0f, bytes / sizeof(float), 300000, s));
    VGT_OK(cudaMemsetAsync(d, 0, bytes, s)); /* after the kernel, in stream order */
    VGT_OK(cudaStreamSynchronize(s));
    VGT_OK(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < bytes; i++)
        if (h[i] != 0)
            fail_msg("byte %zu after kernel then memset: expected 0, got 0x%x", i, (unsigned)h[i]);
    VGT_EXPECT_RT(cudaErrorInvalidValue, cudaMemset(d + 1, 0, bytes));
    VGT_EXPECT_RT(cudaErrorInvalidValue, cudaMemsetAsync(d, 0, bytes + 1, s));
    VGT_EXPECT_RT(cudaErrorInvalidValue, cudaMemset(h, 0, 16)); /* pageable host memory */
    (void)cudaGetLastError();
    VGT_OK(cudaStreamDestroy(s));
    VGT_OK(cudaFree(d));
}

static void test_pointer_attributes(void **state)
{
    struct cudaPointerAttributes at;
    char *d = NULL, *d1 = NULL, *pin = NULL, *pool = NULL;
    VGT_OK(cudaSetDevice(0));
    VGT_OK(cudaMalloc((void **)&d, MIB));
    VGT_OK(cudaMallocHost((void **)&pin, 4096));
    VGT_OK(cudaSetDevice(1));
    VGT_OK(cudaMalloc((void **)&d1, 4096));
    VGT_OK(cudaSetDevice(0));

    memset(&at, 0x7f, sizeof(at));
    VGT_OK(cudaPointerGetAttributes(&at, d));
    assert_int_equal(at.type, cudaMemoryTypeDevice);
    assert_int_equal(at.device, 0);
    assert_ptr_equal(at.devicePointer, d);
    assert_null(at.hostPointer); /* device memory is not host-accessible in CUDA's terms */

    memset(&at, 0x7f, sizeof(at));
    VGT_OK(cudaPointerGetAttributes(&at, d + 1000));
    assert_int_equal(at.type, cudaMemoryTypeDevice);
    assert_ptr_equal(at.devicePointer, d + 1000);

    memset(&at, 0x7f, sizeof(at));
    VGT_OK(cudaPointerGetAttributes(&at, d1));
    assert_int_equal(at.type, cudaMemoryTypeDevice);
    assert_int_equal(at.device, 1);

    memset(&at, 0x7f, sizeof(at));
    VGT_OK(cudaPointerGetAttributes(&at, pin + 10));
    assert_int_equal(at.type, cudaMemoryTypeHost);
    assert_int_equal(at.device, 0);
    assert_ptr_equal(at.hostPointer, pin + 10);
    assert_ptr_equal(at.devicePointer, pin + 10);

    static char pageable[64];
    memset(&at, 0x7f, sizeof(at));
    VGT_OK(cudaPointerGetAttributes(&at, pageable));
    assert_int_equal(at.type, cudaMemoryTypeUnregistered);

    VGT_OK(cudaMallocAsync((void **)&pool, 4096, 0));
    VGT_OK(cudaStreamSynchronize(0));
    memset(&at, 0x7f, sizeof(at));
    VGT_OK(cudaPointerGetAttributes(&at, pool));
    assert_int_equal(at.type, cudaMemoryTypeDevice);
    assert_int_equal(at.device, 0);
    VGT_OK(cudaFreeAsync(pool, 0));

    VGT_EXPECT_RT(cudaErrorInvalidValue, cudaPointerGetAttributes(NULL, d));
    (void)cudaGetLastError();
    VGT_OK(cudaDeviceSynchronize());
    VGT_OK(cudaFree(d));
    VGT_OK(cudaFree(d1));
    VGT_OK(cudaFreeHost(pin));
}

static uint64_t pool_attr(cudaMemPool_t p, enum cudaMemPoolAttr a)
{
    uint64_t v = 0xdeadbeefull;
    VGT_OK(cudaMemPoolGetAttribute(p, a, &v));
    return v;
}

static void test_malloc_async_and_pool(void **state)
{
    int n = 0;
    VGT_OK(cudaGetDeviceCount(&n));
    cudaMemPool_t pool = NULL, again = NULL, other = NULL;
    VGT_OK(cudaDeviceGetDefaultMemPool(&pool, 0));
    assert_non_null(pool);
    VGT_OK(cudaDeviceGetDefaultMemPool(&again, 0));
    assert_ptr_equal(pool, again);
    VGT_OK(cudaDeviceGetDefaultMemPool(&other, 1));
    assert_ptr_not_equal(pool, other);
    VGT_EXPECT_RT(cudaErrorInvalidDevice, cudaDeviceGetDefaultMemPool(&other, n));
    VGT_EXPECT_RT(cudaErrorInvalidValue, cudaDeviceGetDefaultMemPool(NULL, 0));
    (void)cudaGetLastError();

    assert_int_equal(pool_attr(pool, cudaMemPoolAttrReleaseThreshold), 0); /* documented */
    uint64_t keep = UINT64_MAX;
    VGT_OK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
    assert_true(pool_attr(pool, cudaMemPoolAttrReleaseThreshold) == UINT64_MAX);

    cudaStream_t s;
    VGT_OK(cudaStreamCreate(&s));
    VGT_OK(cudaStreamSynchronize(s));
    uint64_t used0 = pool_attr(pool, cudaMemPoolAttrUsedMemCurrent);
    const size_t sz = 4 * MIB, n_el = sz / sizeof(float);
    float *p = NULL;
    VGT_OK(cudaMallocAsync((void **)&p, sz, s));
    assert_non_null(p);
    VGT_OK(vgt_fill(p, 4.0f, n_el, 10000, s));
    VGT_OK(cudaStreamSynchronize(s));
    vgt_expect_device_floats(p, n_el, 4.0f);
    uint64_t used1 = pool_attr(pool, cudaMemPoolAttrUsedMemCurrent);
    uint64_t res1 = pool_attr(pool, cudaMemPoolAttrReservedMemCurrent);
    if (used1 < used0 + sz)
        fail_msg("UsedMemCurrent after cudaMallocAsync(%zu): expected >= %llu, got %llu", sz,
                 (unsigned long long)(used0 + sz), (unsigned long long)used1);
    VGT_GE("ReservedMemCurrent vs UsedMemCurrent", res1, used1);
    VGT_GE("UsedMemHigh vs UsedMemCurrent", pool_attr(pool, cudaMemPoolAttrUsedMemHigh), used1);
    VGT_GE("ReservedMemHigh vs ReservedMemCurrent",
           pool_attr(pool, cudaMemPoolAttrReservedMemHigh), res1);

    VGT_OK(cudaFreeAsync(p, s));
    VGT_OK(cudaStreamSynchronize(s));
    uint64_t used2 = pool_attr(pool, cudaMemPoolAttrUsedMemCurrent);
    uint64_t res2 = pool_attr(pool, cudaMemPoolAttrReservedMemCurrent);
    assert_int_equal(used2, used0);
    if (res2 < sz) /* the release threshold keeps the memory in the pool */
        fail_msg("ReservedMemCurrent with release threshold UINT64_MAX after a free: expected "
                 ">= %zu, got %llu",
                 sz, (unsigned long long)res2);
    VGT_OK(cudaMemPoolTrimTo(pool, 0));
    uint64_t res3 = pool_attr(pool, cudaMemPoolAttrReservedMemCurrent);
    VGT_GE("ReservedMemCurrent before TrimTo(0) vs after", res2, res3);
    if (used2 == 0)
        assert_int_equal(res3, 0); /* nothing outstanding: everything can be released */

    /* The high watermarks reset to the current value; only zero may be written. */
    uint64_t zero = 0, five = 5;
    VGT_OK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero));
    assert_int_equal(pool_attr(pool, cudaMemPoolAttrUsedMemHigh),
                     pool_attr(pool, cudaMemPoolAttrUsedMemCurrent));
    VGT_OK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &zero));
    VGT_EXPECT_RT(cudaErrorInvalidValue,
                  cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &five));
    VGT_EXPECT_RT(cudaErrorInvalidValue,
                  cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &zero));
    (void)cudaGetLastError();
    VGT_OK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &zero));

    /* Errors. */
    VGT_EXPECT_RT(cudaErrorInvalidValue, cudaMallocAsync(NULL, 64, s));
    char *q = NULL;
    VGT_OK(cudaMallocAsync((void **)&q, 4096, s));
    VGT_EXPECT_RT(cudaErrorInvalidValue, cudaFreeAsync(q + 64, s));
    (void)cudaGetLastError();
    VGT_OK(cudaFreeAsync(q, s));
    VGT_OK(cudaStreamSynchronize(s));
    VGT_OK(cudaStreamDestroy(s));
}

/* A block freed on one stream and allocated on another must not be handed out while the
 * first stream can still touch it: no hazard, and both streams see their own data. */
static void test_pool_reuse_across_streams(void **state)
{
    vgpu_counters_t c0, c1;
    vgpu_counters(&c0);
    cudaStream_t s1, s2;
    VGT_OK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    VGT_OK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    const size_t n = 1 << 18, bytes = n * sizeof(float);
    float *x = NULL, *y = NULL, *out1 = NULL, *out2 = NULL;
    VGT_OK(cudaMalloc((void **)&out1, bytes));
    VGT_OK(cudaMalloc((void **)&out2, bytes));
    VGT_OK(cudaMallocAsync((void **)&x, bytes, s1));
    VGT_OK(vgt_fill(x, 1.0f, n, 1000000, s1));       /* long writer */
    VGT_OK(vgt_copy(x, out1, n, 1000000, s1));       /* long reader */
    VGT_OK(cudaFreeAsync(x, s1));
    VGT_OK(cudaMallocAsync((void **)&y, bytes, s2)); /* may or may not be x's block */
    VGT_OK(vgt_fill(y, 2.0f, n, 10000, s2));
    VGT_OK(vgt_copy(y, out2, n, 10000, s2));
    VGT_OK(cudaFreeAsync(y, s2));
    VGT_OK(cudaDeviceSynchronize());
    vgt_expect_device_floats(out1, n, 1.0f);
    vgt_expect_device_floats(out2, n, 2.0f);
    vgpu_counters(&c1);
    assert_int_equal(c1.hazards - c0.hazards, 0);
    VGT_OK(cudaFree(out1));
    VGT_OK(cudaFree(out2));
    VGT_OK(cudaStreamDestroy(s1));
    VGT_OK(cudaStreamDestroy(s2));
}

static void test_allocation_counters(void **state)
{
    vgpu_counters_t c0, c1, c2;
    VGT_OK(cudaDeviceSynchronize());
    vgpu_counters(&c0);
    void *d = NULL;
    const size_t sz = 32 * MIB;
    VGT_OK(cudaMalloc(&d, sz));
    vgpu_counters(&c1);
    if (c1.bytes_allocated < c0.bytes_allocated + sz)
        fail_msg("bytes_allocated after cudaMalloc(%zu): expected >= %zu, got %zu", sz,
                 c0.bytes_allocated + sz, c1.bytes_allocated);
    assert_true(c1.peak_bytes_allocated >= c1.bytes_allocated);
    VGT_OK(cudaFree(d));
    vgpu_counters(&c2);
    assert_int_equal(c2.bytes_allocated, c0.bytes_allocated);
    assert_true(c2.peak_bytes_allocated >= c1.bytes_allocated); /* a high-water mark */
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_malloc_free),
        cmocka_unit_test(test_malloc_too_large),
        cmocka_unit_test(test_free_errors),
        cmocka_unit_test(test_pinned_host),
        cmocka_unit_test(test_memcpy_roundtrip),
        cmocka_unit_test(test_memcpy_bad_pointers),
        cmocka_unit_test(test_pageable_memory_at_reused_addresses),
        cmocka_unit_test(test_memcpy_async_stream_order),
        cmocka_unit_test(test_memcpy_async_pageable),
        cmocka_unit_test(test_memcpy2d_async),
        cmocka_unit_test(test_memset),
        cmocka_unit_test(test_pointer_attributes),
        cmocka_unit_test(test_malloc_async_and_pool),
        cmocka_unit_test(test_pool_reuse_across_streams),
        cmocka_unit_test(test_allocation_counters),
        cmocka_unit_test(vgt_test_no_hazards),
    };
    return cmocka_run_group_tests_name("vgpu.memory", tests, setup, NULL);
}
