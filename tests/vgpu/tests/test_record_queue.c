/*
 * test_record_queue.c: with one hardware queue (CUDA_DEVICE_MAX_CONNECTIONS=1) an event
 * record does not hold the queue while the work before it runs; a wait does.
 *
 * Stream A runs a 1 ms kernel and records E after it (a collective and its end event, as
 * ProcessGroupNCCL issues them); stream B then issues a 0.5 ms device-to-device copy. The
 * copy must overlap the kernel (end at 0.5 ms), not wait behind the record (1.5 ms). Then
 * the control: stream B waits for E before its copy; that wait blocks the queue, so the copy
 * ends at 1.5 ms.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "vgpu.h"

#define CK(x)                                                                           \
    do {                                                                                \
        long e_ = (long)(x);                                                            \
        if (e_) {                                                                       \
            fprintf(stderr, "%s:%d: %s failed (%ld)\n", __FILE__, __LINE__, #x, e_);    \
            exit(1);                                                                    \
        }                                                                               \
    } while (0)

static void spin_stub(double ns) { (void)ns; }
static double spin_cost(const vgpu_launch_t *l, double *f) { (void)f; return *(double *)l->args[0]; }

/* Returns the copy's end after the gate, in ns; wait: stream B waits for E first. */
static double run(int wait)
{
    cudaStream_t a, b;
    cudaEvent_t start, e, end;
    void *src, *dst;
    /* A copy of bytes at 2*bytes/hbm takes 0.5 ms. */
    size_t bytes = (size_t)(0.5e-3 * vgpu_profile()->hbm_gbps * 1e9 / 2);
    CK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    CK(cudaEventCreate(&start));
    CK(cudaEventCreate(&e));
    CK(cudaEventCreate(&end));
    CK(cudaMalloc(&src, bytes));
    CK(cudaMalloc(&dst, bytes));
    CK(cudaDeviceSynchronize());
    CK(cudaEventRecord(start, a));
    double ns = 1e6;
    void *args[] = {&ns};
    CK(cudaLaunchKernel((const void *)spin_stub, (dim3){1, 1, 1}, (dim3){1, 1, 1}, args, 0, a));
    CK(cudaEventRecord(e, a));
    if (wait)
        CK(cudaStreamWaitEvent(b, e, 0));
    CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, b));
    CK(cudaEventRecord(end, b));
    CK(cudaDeviceSynchronize());
    float ms;
    CK(cudaEventElapsedTime(&ms, start, end));
    return ms * 1e6;
}

int main(void)
{
    vgpu_kernel_desc_t kd = {.name = "spin", .nparams = 1, .param_sizes = {sizeof(double)}, .cost = spin_cost};
    CK(vgpu_register_kernel((const void *)spin_stub, &kd));
    const char *conn = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
    if (!conn || atoi(conn) != 1) {
        fprintf(stderr, "run with CUDA_DEVICE_MAX_CONNECTIONS=1\n");
        return 1;
    }
    double lat = vgpu_profile()->launch_us * 1e3; /* the copy is issued a few calls later */
    double free_run = run(0), waited = run(1);
    int ok1 = free_run < 0.5e6 + 8 * lat, ok2 = waited > 1.5e6 - 1;
    printf("copy after another stream's record: ends at %.1f us (want about 500: %s)\n",
           free_run / 1e3, ok1 ? "ok" : "FAIL");
    printf("copy after a wait on that record:   ends at %.1f us (want 1500: %s)\n",
           waited / 1e3, ok2 ? "ok" : "FAIL");
    return ok1 && ok2 ? 0 : 1;
}
