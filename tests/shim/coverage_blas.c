/*
 * coverage_blas.c: the cuBLAS entry points the shim drains for and forwards (hook_list.h
 * DH_HOOKS_CUBLAS_SYNC): vector and matrix copies (plain, Async, 64-bit), fp64 GEMMs,
 * pointer-array batched GEMMs and the 64-bit-index GEMMs, each once per iteration on data
 * that deferred work has just produced, each result gathered on the host. A shim that let
 * one of them run before the work queued ahead of it would read stale weights and the
 * output would differ. See coverage.h.
 */
#include "coverage.h"

#include <string.h>

#define E 4                      /* matrices are E x E */
#define EE (E * E)

/* out[0..COV_BLAS_OUT) receives this iteration's results. w: COV_HID * COV_FFN weights the
 * optimizer step queued just before. */
void cov_blas_extra(cublasHandle_t h, cudaStream_t s, void *ws, size_t ws_size,
                    const float *w, float *out)
{
    float *fa, *fb, *fc;
    double *da, *db, *dc;
    void **parr;                 /* device: A, B, C pointer arrays (float then double) */
    CK_RT(cudaMalloc((void **)&fa, 3 * EE * sizeof(float)));
    CK_RT(cudaMalloc((void **)&da, 3 * EE * sizeof(double)));
    CK_RT(cudaMalloc((void **)&parr, 6 * sizeof(void *)));
    fb = fa + EE, fc = fb + EE;
    db = da + EE, dc = db + EE;
    memset(out, 0, COV_BLAS_OUT * sizeof(float));
    int o = 0;

    /* The weights, read through cuBLAS's copies: they must see the SGD step. */
    float hw[2 * EE], hm[EE];
    CK_BLAS(cublasGetVector(EE, sizeof(float), w, 1, hw, 1));
    CK_BLAS(cublasGetVector_64(EE, sizeof(float), w + EE, 1, hw + EE, 1));
    CK_BLAS(cublasSetMatrix(E, E, sizeof(float), hw, E, fa, E));
    CK_BLAS(cublasSetMatrix_64(E, E, sizeof(float), hw + EE, E, fb, E));
    CK_BLAS(cublasSetVectorAsync(EE, sizeof(float), hw, 1, fc, 1, s));
    CK_BLAS(cublasSetVectorAsync_64(2, sizeof(float), hw + EE, 1, fc, 1, s));
    CK_BLAS(cublasSetMatrixAsync(2, 2, sizeof(float), hw, E, fc + 4, E, s));
    CK_BLAS(cublasSetMatrixAsync_64(2, 2, sizeof(float), hw + EE, E, fc + 8, E, s));
    CK_BLAS(cublasSetVector(2, sizeof(float), hw + 2, 1, fc + 12, 1));
    CK_BLAS(cublasSetVector_64(2, sizeof(float), hw + 6, 1, fc + 14, 1));
    CK_BLAS(cublasGetMatrixAsync(E, E, sizeof(float), fc, E, hm, E, s));
    CK_RT(cudaStreamSynchronize(s));
    memcpy(out + o, hm, sizeof hm), o += EE;
    float hv[4];
    CK_BLAS(cublasGetVectorAsync(2, sizeof(float), fa, 1, hv, 1, s));
    CK_BLAS(cublasGetVectorAsync_64(2, sizeof(float), fb, 1, hv + 2, 1, s));
    CK_RT(cudaStreamSynchronize(s));
    memcpy(out + o, hv, sizeof hv), o += 4;
    float hg[3 * 4];
    CK_BLAS(cublasGetMatrix(2, 2, sizeof(float), fa, E, hg, 2));
    CK_BLAS(cublasGetMatrix_64(2, 2, sizeof(float), fb, E, hg + 4, 2));
    CK_BLAS(cublasGetMatrixAsync_64(2, 2, sizeof(float), fc, E, hg + 8, 2, s));
    CK_RT(cudaStreamSynchronize(s));
    memcpy(out + o, hg, sizeof hg), o += 12;

    /* fp32 GEMMs through the 64-bit-index, Ex and pointer-array entry points. */
    cov_blas_prepare(h, s, ws, ws_size);
    const float one = 1.0f, half = 0.5f;
    CK_BLAS(cublasSgemm_v2_64(h, CUBLAS_OP_N, CUBLAS_OP_T, E, E, E, &one, fa, E, fb, E, &half,
                              fc, E));
    CK_BLAS(cublasSgemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, E, E, E, &one, fa, CUDA_R_32F, E, fc,
                          CUDA_R_32F, E, &half, fb, CUDA_R_32F, E));
    CK_BLAS(cublasGemmEx_64(h, CUBLAS_OP_T, CUBLAS_OP_N, E, E, E, &one, fb, CUDA_R_32F, E, fc,
                            CUDA_R_32F, E, &half, fa, CUDA_R_32F, E, CUBLAS_COMPUTE_32F,
                            CUBLAS_GEMM_DEFAULT));
    CK_BLAS(cublasSgemmStridedBatched_64(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, fa, E, 8,
                                         fb, E, 8, &half, fc, E, 8, 2));
    CK_BLAS(cublasGemmStridedBatchedEx_64(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, fc,
                                          CUDA_R_32F, E, 8, fa, CUDA_R_32F, E, 8, &half, fb,
                                          CUDA_R_32F, E, 8, 2, CUBLAS_COMPUTE_32F,
                                          CUBLAS_GEMM_DEFAULT));
    void *hp[6] = {fa, fb, fc, da, db, dc};
    CK_RT(cudaMemcpy(parr, hp, sizeof hp, cudaMemcpyHostToDevice));
    CK_BLAS(cublasSgemmBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, E, E, E, &one,
                               (const float *const *)parr, E, (const float *const *)parr + 1,
                               E, &half, (float *const *)parr + 2, E, 1));
    CK_BLAS(cublasSgemmBatched_64(h, CUBLAS_OP_T, CUBLAS_OP_N, E, E, E, &one,
                                  (const float *const *)parr, E,
                                  (const float *const *)parr + 2, E, &half,
                                  (float *const *)parr + 1, E, 1));
    CK_BLAS(cublasGemmBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, E, E, E, &one,
                                (const void *const *)parr + 1, CUDA_R_32F, E,
                                (const void *const *)parr + 2, CUDA_R_32F, E, &half,
                                (void *const *)parr, CUDA_R_32F, E, 1, CUBLAS_COMPUTE_32F,
                                CUBLAS_GEMM_DEFAULT));
    CK_BLAS(cublasGemmBatchedEx_64(h, CUBLAS_OP_N, CUBLAS_OP_T, E, E, E, &one,
                                   (const void *const *)parr, CUDA_R_32F, E,
                                   (const void *const *)parr + 1, CUDA_R_32F, E, &half,
                                   (void *const *)parr + 2, CUDA_R_32F, E, 1,
                                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));

    /* fp64: the fp32 results widened on the host, then every Dgemm form. */
    float hf[3 * EE];
    CK_RT(cudaMemcpy(hf, fa, sizeof hf, cudaMemcpyDeviceToHost));
    memcpy(out + o, hf, sizeof hf), o += 3 * EE;
    double hd[3 * EE];
    for (int i = 0; i < 3 * EE; i++)
        hd[i] = (double)hf[i] * 0.25;
    CK_RT(cudaMemcpy(da, hd, sizeof hd, cudaMemcpyHostToDevice));
    const double d1 = 1.0, dh = 0.5;
    CK_BLAS(cublasDgemm_v2(h, CUBLAS_OP_N, CUBLAS_OP_N, E, E, E, &d1, da, E, db, E, &dh, dc, E));
    CK_BLAS(cublasDgemm_v2_64(h, CUBLAS_OP_T, CUBLAS_OP_N, E, E, E, &d1, dc, E, da, E, &dh, db,
                              E));
    CK_BLAS(cublasDgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &d1, da, E, 8, db,
                                      E, 8, &dh, dc, E, 8, 2));
    CK_BLAS(cublasDgemmStridedBatched_64(h, CUBLAS_OP_N, CUBLAS_OP_T, 2, 2, 2, &d1, dc, E, 8,
                                         da, E, 8, &dh, db, E, 8, 2));
    CK_BLAS(cublasDgemmBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, E, E, E, &d1,
                               (const double *const *)parr + 3, E,
                               (const double *const *)parr + 4, E, &dh,
                               (double *const *)parr + 5, E, 1));
    CK_BLAS(cublasDgemmBatched_64(h, CUBLAS_OP_T, CUBLAS_OP_T, E, E, E, &d1,
                                  (const double *const *)parr + 5, E,
                                  (const double *const *)parr + 3, E, &dh,
                                  (double *const *)parr + 4, E, 1));
    CK_RT(cudaMemcpy(hd, da, sizeof hd, cudaMemcpyDeviceToHost));
    for (int i = 0; i < 3 * EE; i++)
        out[o++] = (float)hd[i];

    CK_RT(cudaFree(parr));
    CK_RT(cudaFree(da));
    CK_RT(cudaFree(fa));
}
