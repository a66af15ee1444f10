/*
 * test_emu_kernel.c: gpu.emu_kernel, the emulated-communication kernel (wl_emu_comm,
 * tests/workloads/cuda/emucomm.cu) on a real GPU, launched as the workload launches it (one
 * argument block, SMS blocks of 256 threads) from the workload's libwl_kernels_gpu.so.
 *
 *   test_emu_kernel LIBWL_KERNELS_GPU
 *
 * Checks, each printing what it expected and what it got:
 *   - data: an in-place segment is left as it was; a copy to an offset, zero fills around
 *     it and a copy whose pointers and length are not 16-byte aligned give exactly the
 *     expected bytes, across chunk boundaries;
 *   - time: a small launch asked to take T us takes at least T (CUDA events) and not much
 *     more, and its own %globaltimer measurement (t_start, t_end) agrees;
 *   - bandwidth: a large launch asked for no time moves its bytes at a rate that is printed
 *     for 8, 32 and all SMs (with all SMs it must be a plausible device-memory rate, above
 *     50 GB/s).
 * Run under gpu_probe (tests/gpu.cmake), which skips it (77) where there is no GPU.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "kargs.h"

static int failures;

#define CK(x)                                                                              \
    do {                                                                                   \
        cudaError_t e_ = (x);                                                              \
        if (e_ != cudaSuccess) {                                                           \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorName(e_)); \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

static const void *kernel;

/* One launch; returns its event time in ms; *measured_us from its own slots. */
static float launch(wl_emu_args_t *a, int sms, double target_us, double *measured_us)
{
    unsigned long long *flags, *slot, init[2] = {~0ull, 0}, got[2];
    CK(cudaMalloc((void **)&flags, 1024 * sizeof *flags));
    CK(cudaMalloc((void **)&slot, 2 * sizeof *slot));
    CK(cudaMemcpy(slot, init, sizeof init, cudaMemcpyHostToDevice));
    a->sms = sms;
    a->target_ns = (int64_t)(target_us * 1e3);
    a->flags = flags;
    a->t_start = slot;
    a->t_end = slot + 1;
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    void *argv[1] = {a};
    dim3 grid = {(unsigned)sms, 1, 1}, block = {256, 1, 1};
    CK(cudaEventRecord(e0, 0));
    CK(cudaLaunchKernel(kernel, grid, block, argv, 0, 0));
    CK(cudaEventRecord(e1, 0));
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    CK(cudaMemcpy(got, slot, sizeof got, cudaMemcpyDeviceToHost));
    *measured_us = (double)(got[1] - got[0]) / 1e3;
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    CK(cudaFree(flags));
    CK(cudaFree(slot));
    return ms;
}

static void check_bytes(const char *what, const unsigned char *got, const unsigned char *want, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i]) {
            printf("FAIL: %s: byte %zu of %zu is 0x%02x, expected 0x%02x\n", what, i, n, got[i], want[i]);
            failures++;
            return;
        }
    printf("ok: %s (%zu bytes)\n", what, n);
}

static void test_data(void)
{
    const size_t n = 3 * 32768 + 1000; /* more than three chunks, not a multiple of 16 */
    unsigned char *h = malloc(5 * n), *want = malloc(5 * n), *got = malloc(5 * n), *d;
    for (size_t i = 0; i < 5 * n; i++) h[i] = (unsigned char)(i * 131 + 7);
    CK(cudaMalloc((void **)&d, 5 * n));
    CK(cudaMemcpy(d, h, 5 * n, cudaMemcpyHostToDevice));
    /* [0, n): in place. [n, 2n): zeros. [2n + 3, 3n + 3): the bytes of [3n + 5, 4n + 5)
     * (neither end 16-byte aligned). The rest: untouched. */
    wl_emu_args_t a;
    memset(&a, 0, sizeof a);
    a.seg[0] = (wl_emu_seg_t){d, d, (int64_t)n};
    a.seg[1] = (wl_emu_seg_t){NULL, d + n, (int64_t)n};
    a.seg[2] = (wl_emu_seg_t){d + 3 * n + 5, d + 2 * n + 3, (int64_t)n};
    a.nseg = 3;
    double us;
    launch(&a, 7, 0, &us);
    CK(cudaMemcpy(got, d, 5 * n, cudaMemcpyDeviceToHost));
    memcpy(want, h, 5 * n);
    memset(want + n, 0, n);
    memcpy(want + 2 * n + 3, h + 3 * n + 5, n);
    check_bytes("in place, zero fill and unaligned copy over 7 blocks", got, want, 5 * n);
    CK(cudaFree(d));
    free(h);
    free(want);
    free(got);
}

static void test_time(void)
{
    unsigned char *d;
    CK(cudaMalloc((void **)&d, 1 << 20));
    const double target = 500;
    for (int sms = 1; sms <= 16; sms *= 4) {
        wl_emu_args_t a;
        memset(&a, 0, sizeof a);
        a.seg[0] = (wl_emu_seg_t){d, d, 1 << 20};
        a.nseg = 1;
        double us;
        float ms = launch(&a, sms, target, &us);
        int ok = ms * 1e3 >= target && ms * 1e3 <= target + 300 && us >= target && us <= ms * 1e3 + 50;
        printf("%s: %d blocks, asked %.0f us: events %.1f us, own measurement %.1f us\n", ok ? "ok" : "FAIL", sms,
               target, ms * 1e3, us);
        failures += !ok;
    }
    CK(cudaFree(d));
}

static void test_bandwidth(void)
{
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    size_t n = (size_t)1 << 29;
    unsigned char *s, *d;
    CK(cudaMalloc((void **)&s, n));
    CK(cudaMalloc((void **)&d, n));
    CK(cudaMemset(s, 1, n));
    wl_emu_args_t a;
    memset(&a, 0, sizeof a);
    a.seg[0] = (wl_emu_seg_t){s, d, (int64_t)n};
    a.nseg = 1;
    double us;
    launch(&a, sms, 0, &us); /* warm up */
    const int ks[] = {8, 32, sms};
    for (int i = 0; i < 3; i++) {
        int k = ks[i];
        if (k > sms || (i < 2 && k == sms)) continue;
        float ms = launch(&a, k, 0, &us);
        double gbps = 2.0 * (double)n / (ms * 1e-3) / 1e9;
        int ok = k < sms || gbps > 50;
        printf("%s: %d blocks copy 512 MiB in %.3f ms: %.0f GB/s of device memory traffic (read + write)\n",
               ok ? "ok" : "FAIL", k, ms, gbps);
        failures += !ok;
    }
    CK(cudaFree(s));
    CK(cudaFree(d));
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_emu_kernel LIBWL_KERNELS_GPU\n");
        return 2;
    }
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    const void *const *(*table)(int *) = NULL;
    if (h) *(void **)&table = dlsym(h, "wl_gpu_kernel_table");
    int n = 0;
    const void *const *t = table ? table(&n) : NULL;
    if (!t || n != WL_K_COUNT) {
        fprintf(stderr, "test_emu_kernel: %s: no kernel table of %d entries (%s)\n", argv[1], WL_K_COUNT,
                h ? "wrong size" : dlerror());
        return 1;
    }
    kernel = t[WL_K_EMU_COMM];
    test_data();
    test_time();
    test_bandwidth();
    printf("gpu.emu_kernel: %s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
