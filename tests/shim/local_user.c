/*
 * local_user.c: liblocal_user.so, a library that uses CUDA, cuBLAS and NCCL and is itself
 * dlopened with RTLD_LOCAL (local_scope.c), as Python loads PyTorch's libtorch_cuda.so.
 * Its CUDA libraries then live outside the global scope: the shim, preloaded, still gets
 * the calls, and must find the real definitions without dlsym(RTLD_NEXT) (real.h,
 * dh_real_lookup_loaded). Seen on a GPU under PyTorch 2.11 on 2026-11-26.
 */
#include <stdio.h>
#include <stdlib.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#define N 64

int local_user_run(FILE *out);

#define CK(what, call)                                                                   \
    do {                                                                                 \
        int rc_ = (int)(call);                                                           \
        if (rc_ != 0) {                                                                  \
            fprintf(out, "%s: status %d\n", what, rc_);                                  \
            return 1;                                                                    \
        }                                                                                \
    } while (0)

__attribute__((visibility("default"))) int local_user_run(FILE *out)
{
    static float a[N * N], b[N * N], c[N * N];
    for (int i = 0; i < N * N; i++) {
        a[i] = (float)((i * 7) % 13) / 8.0f;
        b[i] = (float)((i * 5) % 11) / 4.0f;
    }
    int version = 0;
    CK("ncclGetVersion", ncclGetVersion(&version));
    fprintf(out, "nccl version known: %d\n", version > 0);
    cudaStream_t s;
    float *da, *db, *dc;
    CK("cudaStreamCreate", cudaStreamCreate(&s));
    CK("cudaMalloc a", cudaMalloc((void **)&da, sizeof a));
    CK("cudaMalloc b", cudaMalloc((void **)&db, sizeof b));
    CK("cudaMalloc c", cudaMalloc((void **)&dc, sizeof c));
    CK("cudaMemcpy a", cudaMemcpy(da, a, sizeof a, cudaMemcpyHostToDevice));
    CK("cudaMemcpy b", cudaMemcpy(db, b, sizeof b, cudaMemcpyHostToDevice));
    cublasHandle_t h;
    CK("cublasCreate", cublasCreate(&h));
    CK("cublasSetStream", cublasSetStream(h, s));
    float alpha = 1.0f, beta = 0.0f;
    for (int r = 0; r < 3; r++) {
        /* Deferred where the mode defers: a memset, then a GEMM that accumulates. */
        if (r == 0)
            CK("cudaMemsetAsync", cudaMemsetAsync(dc, 0, sizeof c, s));
        CK("cublasSgemm", cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, N, N, N, &alpha, da, N, db,
                                      N, &beta, dc, N));
        beta = 1.0f;
    }
    CK("cudaMemcpyAsync c", cudaMemcpyAsync(c, dc, sizeof c, cudaMemcpyDeviceToHost, s));
    CK("cudaStreamSynchronize", cudaStreamSynchronize(s));
    double sum = 0;
    for (int i = 0; i < N * N; i++)
        sum += c[i] * (double)((i % 17) + 1);
    fprintf(out, "checksum %.17g\n", sum);
    CK("cublasDestroy", cublasDestroy(h));
    CK("cudaFree", cudaFree(da) | cudaFree(db) | cudaFree(dc));
    CK("cudaStreamDestroy", cudaStreamDestroy(s));
    return 0;
}
