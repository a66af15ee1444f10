/*
 * errprobe.c: a program of failing calls (issue 13), linked against the real libraries by
 * name and run on the vgpu. Each case makes one call that the library rejects at the call
 * (or that fails later), then synchronises its stream, reads cudaGetLastError, and runs a
 * valid GEMM whose checksum it prints. Its output must be byte-identical without the shim
 * and with it in every mode (tests/shim/errprobe.sh): a deferred call returns at the call
 * what the real call returns there, and no error is lost or changes type.
 *
 * Usage: errprobe [--nccl]   (--nccl adds the NCCL argument cases on a one-rank
 * communicator)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "vgpu.h"

#define N 8

static cudaStream_t S;
static cublasHandle_t H;
static float *dA, *dB, *dC;

/* A kernel: x[i] += 1 over n floats. */
static void inc_impl(const vgpu_launch_t *l)
{
    float *x = *(float *const *)l->args[0];
    int n = *(const int *)l->args[1];
    for (int i = 0; i < n; i++)
        x[i] += 1.0f;
}

static int inc_footprint(const vgpu_launch_t *l, vgpu_range_t *out, int max)
{
    if (max < 1)
        return 0;
    out[0] = (vgpu_range_t){*(float *const *)l->args[0],
                            (size_t)*(const int *)l->args[1] * sizeof(float), 1};
    return 1;
}

static void inc_kernel(float *x, int n) { (void)x, (void)n; }

static int register_kernel(void)
{
    __typeof__(&vgpu_register_kernel) reg =
        (__typeof__(&vgpu_register_kernel))dlsym(RTLD_DEFAULT, "vgpu_register_kernel");
    if (reg == NULL) {
        fprintf(stderr, "errprobe: vgpu_register_kernel not found (run it on the vgpu)\n");
        return 1;
    }
    vgpu_kernel_desc_t d = {0};
    d.name = "errprobe_inc";
    d.nparams = 2;
    d.param_sizes[0] = sizeof(float *);
    d.param_sizes[1] = sizeof(int);
    d.impl = inc_impl;
    d.footprint = inc_footprint;
    return reg((const void *)inc_kernel, &d) != 0;
}

static cudaError_t launch(dim3 grid, dim3 block, cudaStream_t s, float *x, int n)
{
    void *args[] = {&x, &n};
    return cudaLaunchKernel((const void *)inc_kernel, grid, block, args, 0, s);
}

/* nvcc 13's launch path (crt/host_runtime.h), declared by the headers for nvcc only. */
cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *func);
cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args,
                               size_t sharedMem, cudaStream_t stream);

static cudaError_t launch_handle(dim3 grid, dim3 block, cudaStream_t s, float *x, int n)
{
    cudaKernel_t k = NULL;
    cudaError_t e = __cudaGetKernel(&k, (const void *)inc_kernel);
    if (e != cudaSuccess)
        return e;
    void *args[] = {&x, &n};
    return __cudaLaunchKernel(k, grid, block, args, 0, s);
}

/* What follows every case: the stream synchronised, the thread's last error, then a valid
 * GEMM C = A B on fresh inputs and its checksum (through a blocking copy). */
static void report(const char *name, int call)
{
    cudaError_t sync = cudaStreamSynchronize(S);
    cudaError_t last = cudaGetLastError();
    float h[N * N], sum = 0;
    for (int i = 0; i < N * N; i++)
        h[i] = (float)((i * 7) % 5) - 2.0f;
    cudaError_t up = cudaMemcpy(dA, h, sizeof h, cudaMemcpyHostToDevice);
    cudaError_t up2 = cudaMemcpy(dB, h, sizeof h, cudaMemcpyHostToDevice);
    const float one = 1, zero = 0;
    cublasStatus_t g = cublasSgemm(H, CUBLAS_OP_N, CUBLAS_OP_T, N, N, N, &one, dA, N, dB, N,
                                   &zero, dC, N);
    memset(h, 0, sizeof h);
    cudaError_t down = cudaMemcpy(h, dC, sizeof h, cudaMemcpyDeviceToHost);
    for (int i = 0; i < N * N; i++)
        sum += h[i] * (float)(i % 3 + 1);
    printf("%-28s call=%d sync=%d last=%d copies=%d,%d,%d gemm=%d sum=%.1f\n", name, call,
           (int)sync, (int)last, (int)up, (int)up2, (int)down, (int)g, sum);
    fflush(stdout);
}

static int lt_case(int ld_a)
{
    cublasLtHandle_t lt;
    if (cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS)
        return -1;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, N, N, ld_a);
    cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, N, N, N);
    cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, N, N, N);
    const float one = 1, zero = 0;
    cublasStatus_t st = cublasLtMatmul(lt, desc, &one, dA, la, dB, lb, &zero, dC, lc, dC, lc,
                                       NULL, NULL, 0, S);
    /* As PyTorch: the descriptors die right after the call. */
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatmulDescDestroy(desc);
    cublasLtDestroy(lt);
    return (int)st;
}

static void nccl_cases(void)
{
    ncclUniqueId id;
    ncclComm_t comm;
    if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess) {
        printf("nccl: no communicator\n");
        return;
    }
    report("nccl allreduce bad type",
           (int)ncclAllReduce(dA, dC, N, (ncclDataType_t)99, ncclSum, comm, S));
    report("nccl allreduce bad op",
           (int)ncclAllReduce(dA, dC, N, ncclFloat, (ncclRedOp_t)99, comm, S));
    report("nccl broadcast bad root", (int)ncclBroadcast(dA, dC, N, ncclFloat, 3, comm, S));
    report("nccl allreduce null buffer",
           (int)ncclAllReduce(NULL, dC, N, ncclFloat, ncclSum, comm, S));
    report("nccl allreduce valid", (int)ncclAllReduce(dA, dC, N, ncclFloat, ncclSum, comm, S));
    ncclCommDestroy(comm);
}

int main(int argc, char **argv)
{
    int with_nccl = argc > 1 && strcmp(argv[1], "--nccl") == 0;
    if (register_kernel())
        return 2;
    if (cudaSetDevice(0) != cudaSuccess || cudaStreamCreate(&S) != cudaSuccess ||
        cublasCreate(&H) != CUBLAS_STATUS_SUCCESS || cublasSetStream(H, S) != 0 ||
        cudaMalloc((void **)&dA, N * N * 4) || cudaMalloc((void **)&dB, N * N * 4) ||
        cudaMalloc((void **)&dC, N * N * 4)) {
        fprintf(stderr, "errprobe: set-up failed\n");
        return 2;
    }
    const float one = 1, zero = 0;
    report("start", 0);

    /* cuBLAS: arguments it checks at the call. */
    report("sgemm m=-1", (int)cublasSgemm(H, CUBLAS_OP_N, CUBLAS_OP_N, -1, N, N, &one, dA, N,
                                           dB, N, &zero, dC, N));
    report("sgemm lda<m", (int)cublasSgemm(H, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &one, dA,
                                            N - 1, dB, N, &zero, dC, N));
    report("sgemm ldc<m", (int)cublasSgemm(H, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &one, dA, N,
                                            dB, N, &zero, dC, 1));
    report("sgemm bad transpose", (int)cublasSgemm(H, (cublasOperation_t)9, CUBLAS_OP_N, N, N,
                                                   N, &one, dA, N, dB, N, &zero, dC, N));
    report("sgemm_strided batch=-1",
           (int)cublasSgemmStridedBatched(H, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &one, dA, N, 0,
                                          dB, N, 0, &zero, dC, N, 0, -1));
    report("gemmex i8,f16->f32",
           (int)cublasGemmEx(H, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &one, dA, CUDA_R_8I, N, dB,
                             CUDA_R_16F, N, &zero, dC, CUDA_R_32F, N, CUBLAS_COMPUTE_32F,
                             CUBLAS_GEMM_DEFAULT));
    report("gemmex f32 (learnt)",
           (int)cublasGemmEx(H, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &one, dA, CUDA_R_32F, N, dB,
                             CUDA_R_32F, N, &zero, dC, CUDA_R_32F, N, CUBLAS_COMPUTE_32F,
                             CUBLAS_GEMM_DEFAULT));
    report("gemmex f32 (again)",
           (int)cublasGemmEx(H, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &one, dA, CUDA_R_32F, N, dB,
                             CUDA_R_32F, N, &zero, dC, CUDA_R_32F, N, CUBLAS_COMPUTE_32F,
                             CUBLAS_GEMM_DEFAULT));
    report("gemmex lda<m", (int)cublasGemmEx(H, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &one, dA,
                                              CUDA_R_32F, 2, dB, CUDA_R_32F, N, &zero, dC,
                                              CUDA_R_32F, N, CUBLAS_COMPUTE_32F,
                                              CUBLAS_GEMM_DEFAULT));

    report("sgemm null handle", (int)cublasSgemm(NULL, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &one,
                                                  dA, N, dB, N, &zero, dC, N));

    /* cuBLASLt. */
    report("ltmatmul lda<rows", lt_case(N - 2));
    report("ltmatmul valid", lt_case(N));

    /* Launch configurations CUDA refuses, then a valid launch. */
    report("launch grid 0", (int)launch((dim3){0, 1, 1}, (dim3){1, 1, 1}, S, dC, N));
    report("launch block 2048", (int)launch((dim3){1, 1, 1}, (dim3){2048, 1, 1}, S, dC, N));
    report("launch block z 65", (int)launch((dim3){1, 1, 1}, (dim3){1, 1, 65}, S, dC, N));
    report("launch valid", (int)launch((dim3){1, 1, 1}, (dim3){32, 1, 1}, S, dC, N));
    report("handle launch block 2048",
           (int)launch_handle((dim3){1, 1, 1}, (dim3){2048, 1, 1}, S, dC, N));
    report("handle launch valid", (int)launch_handle((dim3){1, 1, 1}, (dim3){32, 1, 1}, S, dC, N));

    /* A stream that was destroyed. */
    cudaStream_t gone = NULL;
    if (cudaStreamCreate(&gone) == cudaSuccess && cudaStreamDestroy(gone) == cudaSuccess)
        report("launch destroyed stream", (int)launch((dim3){1, 1, 1}, (dim3){32, 1, 1}, gone, dC, N));

    /* Copies and memsets the runtime refuses. */
    report("memcpyasync bad kind",
           (int)cudaMemcpyAsync(dC, dA, 16, (enum cudaMemcpyKind)7, S));
    report("memsetasync bad pointer", (int)cudaMemsetAsync((void *)16, 0, 16, S));

    /* A stream of another device than the current one. */
    int ndev = 0;
    cudaStream_t other = NULL;
    if (cudaGetDeviceCount(&ndev) == cudaSuccess && ndev > 1 && cudaSetDevice(1) == cudaSuccess &&
        cudaStreamCreate(&other) == cudaSuccess && cudaSetDevice(0) == cudaSuccess) {
        report("launch other device stream",
               (int)launch((dim3){1, 1, 1}, (dim3){32, 1, 1}, other, dC, N));
        cublasSetStream(H, other);
        int st = (int)cublasSgemm(H, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &one, dA, N, dB, N,
                                  &zero, dC, N);
        cublasSetStream(H, S);
        report("sgemm other device stream", st);
    }

    if (with_nccl)
        nccl_cases();

    /* Last, since it poisons the device: a kernel that writes through a pointer into no
     * allocation succeeds at the call and fails when it runs (a sticky illegal address,
     * reported by every call after it). The shim must not lose it or change its type. */
    report("launch bad pointer (sticky)",
           (int)launch((dim3){1, 1, 1}, (dim3){32, 1, 1}, S, (float *)4096, N));
    report("after sticky", (int)cudaMemsetAsync(dC, 0, 16, S));
    report("end", 0);
    return 0;
}
