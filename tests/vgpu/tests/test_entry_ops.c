/*
 * test_entry_ops.c (vgpu.entry_ops): the vgpu entry points issue 28 added so that a program
 * can call them on data queued work has just written: stream memory operations
 * (cuStreamWriteValue32/64, cuStreamWaitValue32/64; an unmet wait fails the device, where
 * a GPU would stall), 3D copies between pitched pointers, copies to and from a __device__
 * variable, and CUDA graphs made by stream capture (runtime and driver), launched in
 * stream order.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_common.h"

void __cudaRegisterVar(void **fatCubinHandle, char *hostVar, char *deviceAddress,
                       const char *deviceName, int ext, size_t size, int constant, int global);

static int setup(void **state)
{
    (void)state;
    vgt_register_kernels();
    return 0;
}

static void test_stream_memops(void **state)
{
    (void)state;
    cudaStream_t s;
    VGT_OK(cudaStreamCreate(&s));
    uint32_t *w;
    VGT_OK(cudaMalloc((void **)&w, 8 * sizeof(uint32_t)));
    VGT_OK(cudaMemset(w, 0, 8 * sizeof(uint32_t)));
    /* A write after a queued memset of the same word lands after it. */
    VGT_OK(cudaMemsetAsync(w, 0xff, 4 * sizeof(uint32_t), s));
    VGT_CU_OK(cuStreamWriteValue32_v2((CUstream)s, (CUdeviceptr)w, 7, 0));
    VGT_CU_OK(cuStreamWriteValue64_v2((CUstream)s, (CUdeviceptr)(w + 2), 0x0123456789abcdefull, 0));
    VGT_CU_OK(cuStreamWaitValue32_v2((CUstream)s, (CUdeviceptr)w, 5, CU_STREAM_WAIT_VALUE_GEQ));
    VGT_CU_OK(cuStreamWaitValue64_v2((CUstream)s, (CUdeviceptr)(w + 2), 0x0123456789abcdefull,
                                     CU_STREAM_WAIT_VALUE_EQ));
    VGT_CU_OK(cuStreamWaitValue32_v2((CUstream)s, (CUdeviceptr)w, 1, CU_STREAM_WAIT_VALUE_AND));
    VGT_OK(cudaStreamSynchronize(s));
    uint32_t h[4];
    VGT_OK(cudaMemcpy(h, w, sizeof h, cudaMemcpyDeviceToHost));
    uint64_t v64;
    memcpy(&v64, h + 2, 8);
    if (h[0] != 7 || h[1] != 0xffffffffu || v64 != 0x0123456789abcdefull)
        fail_msg("after the writes: %u %#x %#llx, expected 7 0xffffffff 0x123456789abcdef",
                 h[0], h[1], (unsigned long long)v64);
    /* Bad arguments: a misaligned address, an unknown flag, memory outside allocations. */
    VGT_EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
                  cuStreamWriteValue32_v2((CUstream)s, (CUdeviceptr)w + 1, 1, 0));
    VGT_EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
                  cuStreamWaitValue32_v2((CUstream)s, (CUdeviceptr)w, 1, 0x100));
    VGT_EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
                  cuStreamWriteValue32_v2((CUstream)s, (CUdeviceptr)h, 1, 0));
    VGT_OK(cudaFree(w));
    VGT_OK(cudaStreamDestroy(s));
}

/* In a child: a wait whose condition never holds fails the device with a message. */
static int scenario_unmet_wait(void)
{
    uint32_t *w;
    if (cudaMalloc((void **)&w, 4) || cudaMemset(w, 0, 4))
        return 2;
    if (cuStreamWaitValue32_v2(NULL, (CUdeviceptr)w, 1, CU_STREAM_WAIT_VALUE_EQ) != CUDA_SUCCESS)
        return 3;
    cudaError_t e = cudaDeviceSynchronize();
    printf("sync: %d\n", (int)e);
    return e == cudaErrorLaunchTimeout ? 0 : 4;
}

static void test_unmet_wait_fails_the_device(void **state)
{
    (void)state;
    vgt_child_t c;
    if (vgt_run_child("unmet_wait", NULL, 30, &c) != 0)
        fail_msg("could not start the child");
    if (!c.exited || c.code != 0 ||
        vgt_count_lines(c.err, "vgpu: cuStreamWaitValue32: the condition") != 1) {
        VGT_CHILD_INFO(&c);
        fail_msg("an unmet wait must fail the device with one message");
    }
    vgt_child_free(&c);
}

static void test_copy3d(void **state)
{
    (void)state;
    enum { W = 3, PS = 5, PD = 4, H = 2, D = 3 };
    float hs[PS * H * D], back[PD * H * D];
    for (int i = 0; i < PS * H * D; i++)
        hs[i] = (float)i;
    float *src, *dst;
    VGT_OK(cudaMalloc((void **)&src, sizeof hs));
    VGT_OK(cudaMalloc((void **)&dst, sizeof back));
    VGT_OK(cudaMemset(dst, 0, sizeof back));
    struct cudaMemcpy3DParms p;
    memset(&p, 0, sizeof p);
    p.srcPtr = (struct cudaPitchedPtr){hs, PS * sizeof(float), PS, H};
    p.dstPtr = (struct cudaPitchedPtr){src, PS * sizeof(float), PS, H};
    p.extent = (struct cudaExtent){PS * sizeof(float), H, D};
    p.kind = cudaMemcpyHostToDevice;
    VGT_OK(cudaMemcpy3D(&p));
    memset(&p, 0, sizeof p);
    p.srcPtr = (struct cudaPitchedPtr){src, PS * sizeof(float), PS, H};
    p.srcPos = (struct cudaPos){2 * sizeof(float), 0, 0};
    p.dstPtr = (struct cudaPitchedPtr){dst, PD * sizeof(float), PD, H};
    p.extent = (struct cudaExtent){W * sizeof(float), H, D};
    p.kind = cudaMemcpyDeviceToDevice;
    VGT_OK(cudaMemcpy3DAsync(&p, NULL));
    VGT_OK(cudaMemcpy(back, dst, sizeof back, cudaMemcpyDeviceToHost));
    for (int z = 0; z < D; z++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < PD; x++) {
                float want = x < W ? hs[(z * H + y) * PS + 2 + x] : 0.0f;
                float got = back[(z * H + y) * PD + x];
                if (got != want)
                    fail_msg("3D copy: (%d,%d,%d) = %g, expected %g", x, y, z, (double)got,
                             (double)want);
            }
    p.srcArray = (cudaArray_t)&p; /* arrays are not modelled */
    VGT_EXPECT_RT(cudaErrorNotSupported, cudaMemcpy3DAsync(&p, NULL));
    VGT_OK(cudaFree(src));
    VGT_OK(cudaFree(dst));
}

static float symbol_shadow[8] = {1, 2, 3, 4, 5, 6, 7, 8};

static void test_symbols(void **state)
{
    (void)state;
    __cudaRegisterVar(NULL, (char *)symbol_shadow, (char *)symbol_shadow, "symbol_shadow", 0,
                      sizeof symbol_shadow, 0, 0);
    size_t size = 0;
    void *dev = NULL;
    VGT_OK(cudaGetSymbolSize(&size, symbol_shadow));
    VGT_OK(cudaGetSymbolAddress(&dev, symbol_shadow));
    if (size != sizeof symbol_shadow || dev == NULL)
        fail_msg("symbol: size %zu at %p, expected %zu bytes", size, dev, sizeof symbol_shadow);
    float h[8];
    VGT_OK(cudaMemcpyFromSymbol(h, symbol_shadow, sizeof h, 0, cudaMemcpyDeviceToHost));
    if (memcmp(h, symbol_shadow, sizeof h))
        fail_msg("the device copy does not start as the shadow");
    float two[2] = {-1, -2};
    VGT_OK(cudaMemcpyToSymbolAsync(symbol_shadow, two, sizeof two, 3 * sizeof(float),
                                   cudaMemcpyHostToDevice, NULL));
    VGT_OK(cudaMemcpyFromSymbolAsync(h, symbol_shadow, sizeof h, 0, cudaMemcpyDeviceToHost, NULL));
    if (h[3] != -1 || h[4] != -2 || h[2] != 3 || h[5] != 6)
        fail_msg("after the copy to offset 3: %g %g %g %g", (double)h[2], (double)h[3],
                 (double)h[4], (double)h[5]);
    VGT_EXPECT_RT(cudaErrorInvalidValue,
                  cudaMemcpyToSymbol(symbol_shadow, two, sizeof two, 7 * sizeof(float),
                                     cudaMemcpyHostToDevice));
    VGT_EXPECT_RT(cudaErrorInvalidSymbol,
                  cudaMemcpyToSymbol(two, two, sizeof two, 0, cudaMemcpyHostToDevice));
}

static void test_graphs(void **state)
{
    (void)state;
    enum { N = 32 };
    cudaStream_t cs, s;
    VGT_OK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
    VGT_OK(cudaStreamCreate(&s));
    float *a, *b, *c;
    VGT_OK(cudaMalloc((void **)&a, N * sizeof(float)));
    VGT_OK(cudaMalloc((void **)&b, N * sizeof(float)));
    VGT_OK(cudaMalloc((void **)&c, N * sizeof(float)));
    VGT_EXPECT_RT(cudaErrorStreamCaptureUnsupported,
                  cudaStreamBeginCapture(NULL, cudaStreamCaptureModeGlobal));
    cudaGraph_t g;
    VGT_OK(cudaStreamBeginCapture(cs, cudaStreamCaptureModeGlobal));
    enum cudaStreamCaptureStatus st;
    VGT_OK(cudaStreamIsCapturing(cs, &st));
    if (st != cudaStreamCaptureStatusActive)
        fail_msg("cudaStreamIsCapturing: %d, expected active", (int)st);
    VGT_OK(vgt_add(a, a, b, N, 1000, cs));                   /* b = 2a */
    VGT_OK(cudaMemcpyAsync(c, b, N * sizeof(float), cudaMemcpyDeviceToDevice, cs));
    VGT_EXPECT_RT(cudaErrorStreamCaptureUnsupported, cudaStreamSynchronize(cs));
    VGT_OK(cudaStreamEndCapture(cs, &g));
    cudaGraphExec_t e;
    VGT_OK(cudaGraphInstantiate(&e, g, 0));
    VGT_OK(cudaGraphDestroy(g));
    /* Nothing ran at capture: c is still what the fill below leaves. */
    VGT_OK(vgt_fill(a, 1.5f, N, 1000, s));
    VGT_OK(vgt_fill(c, -1.0f, N, 1000, s));
    VGT_OK(cudaStreamSynchronize(s));
    vgt_expect_device_floats(c, N, -1.0f);
    /* Launched in stream order after a fill, and again through the driver. */
    VGT_OK(vgt_fill(a, 2.0f, N, 1000, s));
    VGT_OK(cudaGraphLaunch(e, s));
    VGT_OK(cudaStreamSynchronize(s));
    vgt_expect_device_floats(c, N, 4.0f);
    VGT_OK(vgt_fill(a, 3.0f, N, 1000, s));
    VGT_CU_OK(cuGraphLaunch((CUgraphExec)e, (CUstream)s));
    VGT_OK(cudaStreamSynchronize(s));
    vgt_expect_device_floats(c, N, 6.0f);
    VGT_OK(cudaGraphExecDestroy(e));
    VGT_EXPECT_RT(cudaErrorInvalidValue, cudaGraphInstantiate(&e, NULL, 0));
    VGT_OK(cudaFree(a));
    VGT_OK(cudaFree(b));
    VGT_OK(cudaFree(c));
    VGT_OK(cudaStreamDestroy(cs));
    VGT_OK(cudaStreamDestroy(s));
}

static const vgt_scenario_t scenarios[] = {
    {"unmet_wait", scenario_unmet_wait},
    {NULL, NULL},
};

int main(int argc, char **argv)
{
    int rc = vgt_scenario_dispatch(argc, argv, scenarios);
    if (rc >= 0)
        return rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stream_memops),
        cmocka_unit_test(test_unmet_wait_fails_the_device),
        cmocka_unit_test(test_copy3d),
        cmocka_unit_test(test_symbols),
        cmocka_unit_test(test_graphs),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
