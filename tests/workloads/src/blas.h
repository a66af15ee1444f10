/*
 * blas.h: GEMMs issued the way PyTorch issues them (aten/src/ATen/cuda/CUDABlas.cpp,
 * CublasHandlePool.cpp; REFERENCE.md).
 *
 * Each thread has its own cuBLAS and cuBLASLt handle (PyTorch's handle pool is per thread
 * and device). Before every cuBLAS GEMM: cublasSetStream (current stream),
 * cublasSetWorkspace (a workspace per handle and stream, allocated stream-ordered on first
 * use and kept) and cublasSetMathMode. fp32 goes through cublasSgemm_v2, bf16 through
 * cublasGemmEx with fp32 compute; alpha and beta live on the caller's stack. cuBLASLt calls
 * build the operation descriptor, the four layouts and the preference as locals, allocate
 * the algorithm's workspace for the call, and destroy everything right after the call.
 *
 * Linear algebra of a linear layer y = x W^T (+ b), x [T, in], W [out, in] row-major
 * (column-major in x out, ld in), y [T, out]. All calls use the current stream.
 * Thread-safety: the calling thread's handles only.
 */
#ifndef WL_BLAS_H
#define WL_BLAS_H

#include <stdint.h>

enum { WL_EPI_NONE = 0, WL_EPI_BIAS = 1, WL_EPI_GELU_AUX_BIAS = 2 };

/* y = x W^T through cublasSgemm_v2 / cublasGemmEx. */
void wl_linear_fwd(int dt, const void *x, const void *w, void *y, int64_t T, int64_t in,
                   int64_t out);
/* y = x W^T with y in ydt (fp32 output from bf16 inputs: an MoE router's logits). */
void wl_linear_fwd_out(int dt, int ydt, const void *x, const void *w, void *y, int64_t T, int64_t in,
                       int64_t out);
/* y = epilogue(x W^T + bias) through cuBLASLt. WL_EPI_GELU_AUX_BIAS also stores the GELU's
 * input to aux (ld out, which must be a multiple of 8). bias has out elements. */
void wl_linear_fwd_lt(int dt, const void *x, const void *w, const void *bias, void *y, void *aux,
                      int64_t T, int64_t in, int64_t out, int epilogue);
/* dx = dy W (beta = 0) or dx += dy W (beta = 1). */
void wl_linear_dgrad(int dt, const void *dy, const void *w, void *dx, int64_t T, int64_t in,
                     int64_t out, float beta);
/* main_grad (fp32, [out, in]) += dy^T x: Megatron's gradient-accumulation fusion
 * (cublasGemmEx with beta = 1 into the fp32 main_grad). */
void wl_linear_wgrad(int dt, const void *x, const void *dy, float *main_grad, int64_t T,
                     int64_t in, int64_t out);
/* The calling thread's handles are released (call before the thread ends). */
void wl_blas_thread_fini(void);

#endif
