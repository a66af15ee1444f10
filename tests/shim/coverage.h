/*
 * coverage.h: what the two halves of the coverage program share (coverage.c: the model,
 * its threads and its output; coverage_dev.c: kernels, launch paths, GEMM helpers).
 *
 * The coverage program is an "unmodified framework" in miniature: it is linked against the
 * real CUDA libraries and issues its GPU work the way PyTorch and Megatron do (see
 * ../shared/REFERENCE.md), including every habit that makes deferring a call dangerous:
 * arguments, scalars, descriptors and pageable sources that the caller overwrites or
 * destroys the moment the call returns. Each of those habits is done on purpose here, with
 * the overwritten values chosen so that a deferred operation that read them late would
 * produce different bytes (or touch a decoy buffer that ends up in the output).
 *
 * Errors: every API call is checked; a failure prints the call, its status and the source
 * line on stderr and ends the process with exit status 1 (_exit: the other threads may
 * still be issuing work).
 */
#ifndef DH_COVERAGE_H
#define DH_COVERAGE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_runtime_api.h>

/* Model dimensions: hidden, feed-forward and tokens per micro-batch. TOK reaches the
 * vgpu's split-K threshold, so GEMMs that contract over tokens use their workspace. */
enum { COV_HID = 16, COV_FFN = 64, COV_TOK = 1024 };

/* Kernels, each registered with the vgpu under a host stub. */
typedef enum cov_kernel {
    K_SCALE,      /* (float *dst, const float *src, float c, int n): dst = c * src */
    K_ADD,        /* (float *x, const float *y, int n): x += y */
    K_ADD_BCAST,  /* (float *x, const float *v, int rows, int cols): x[r, c] += v[r] */
    K_TARGET,     /* (float *t, int n, int seed): a deterministic regression target */
    K_LOSS,       /* (float *slot, const float *y, const float *t, int n, float inv):
                     slot[0] = 0.5 * inv * sum (y - t)^2, summed in order */
    K_MSE_GRAD,   /* (float *dy, const float *y, const float *t, int n, float inv) */
    K_COPY,       /* (float *dst, const float *src, int n) */
    K_GELU_BWD,   /* (float *dpre, const float *dh, const float *pre, int n) */
    K_ROWSUM,     /* (float *g, const float *m, int rows, int cols): g[r] += sum_c m[r, c] */
    K_SUM,        /* (float *out, const float *in, int n, float us): out[0] = sum in, in
                     order; the device time is us microseconds more than its bytes take */
    K_SGD,        /* (float *w, const float *g, float lr, int n): w -= lr * g */
    K_COUNT
} cov_kernel_t;

/* ---- coverage_dev.c ---- */

void cov_die(int line, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
void cov_ck_rt(cudaError_t e, const char *what, int line);
void cov_ck_cu(CUresult e, const char *what, int line);
void cov_ck_blas(cublasStatus_t e, const char *what, int line);
/* Installs the fatal-signal report (a backtrace and the last checked call). */
void cov_fatal_report(void);
#define CK_RT(call) cov_ck_rt((call), #call, __LINE__)
#define CK_CU(call) cov_ck_cu((call), #call, __LINE__)
#define CK_BLAS(call) cov_ck_blas((call), #call, __LINE__)

/* Registers the kernels with the vgpu (vgpu_register_kernel through dlsym), fetches the
 * driver launch entry points (cuGetProcAddress_v2 and dlsym(RTLD_DEFAULT)), the
 * CUfunctions (cudaGetFuncBySymbol) and the parameter layouts (cudaFuncGetParamInfo).
 * decoy: a device buffer of at least COV_FFN * COV_TOK floats that stale arguments point
 * into. Dies when not running on the vgpu. */
void cov_dev_init(float *decoy);

/* Launch paths. Every one takes the arguments from ONE reused buffer and overwrites the
 * buffer (values, the array of pointers to them, the packed `extra` block) with decoy
 * values as soon as the call returns, as a framework reusing its argument storage would. */
typedef enum cov_path {
    L_RT,         /* cudaLaunchKernel */
    L_EXC,        /* cudaLaunchKernelExC with launch attributes in a page made
                     inaccessible when the call returns */
    L_CU,         /* cuLaunchKernel from cuGetProcAddress_v2 */
    L_EXTRA,      /* cuLaunchKernel from dlsym(RTLD_DEFAULT), arguments packed in `extra` */
    L_CU_PTSZ,    /* cuLaunchKernel from cuGetProcAddress_v2, per-thread default stream */
    L_CUEX,       /* cuLaunchKernelEx from cuGetProcAddress_v2, with an attribute */
    L_CUEX_PTSZ,  /* the same, per-thread default stream */
    L_RT_PTSZ,    /* cudaLaunchKernel_ptsz (the shim drains for it and forwards) */
    L_EXC_PTSZ,   /* cudaLaunchKernelExC_ptsz, likewise */
    L_KH,         /* __cudaLaunchKernel with the kernel's cudaKernel_t from __cudaGetKernel:
                     what nvcc 13 generates for kernel<<<...>>> */
    L_KH_PTSZ     /* __cudaLaunchKernel_ptsz (the shim drains for it and forwards) */
} cov_path_t;

/* Launches kernel k on s; the arguments follow its signature (pointers, float as double,
 * int). The per-thread paths are used with explicit streams only. */
void cov_launch(cov_path_t path, cov_kernel_t k, cudaStream_t s, ...);

/* Driver entry points as a framework fetches them: cuGetProcAddress_v2 (most), the old
 * cuGetProcAddress found with dlsym (stream_sync), the per-thread variant
 * (stream_sync_ptsz), and dlsym on a dlopen'ed libcuda.so.1 (memcpy_htod_async). */
typedef struct cov_drv {
    CUresult (*stream_sync)(CUstream);
    CUresult (*stream_sync_ptsz)(CUstream);
    CUresult (*stream_query)(CUstream);
    CUresult (*ctx_sync)(void);
    CUresult (*event_sync)(CUevent);
    CUresult (*memcpy_htod)(CUdeviceptr, const void *, size_t);
    CUresult (*memcpy_dtoh)(void *, CUdeviceptr, size_t);
    CUresult (*memcpy_async)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
    CUresult (*memcpy_htod_async)(CUdeviceptr, const void *, size_t, CUstream);
    CUresult (*memcpy_dtoh_async)(void *, CUdeviceptr, size_t, CUstream);
    CUresult (*memset_d8_async)(CUdeviceptr, unsigned char, size_t, CUstream);
    CUresult (*mem_free)(CUdeviceptr);
} cov_drv_t;
extern cov_drv_t cov_drv;   /* filled by cov_dev_init */

/* One cuBLASLt matmul, column-major fp32: D = epilogue(alpha * op(A) op(B) + beta * D).
 * Descriptors, layouts and the preference are made for the call and destroyed (or, with
 * on_stack, initialised in stack storage and scribbled over) right after it; decoy
 * descriptors with other settings are created at once so that freed ones are reused. */
typedef struct cov_lt {
    int trans_a, trans_b;
    int m, n, k;
    const float *a;
    int a_rows, a_cols, lda;       /* A as stored */
    const float *b;
    int b_rows, b_cols, ldb;       /* B as stored */
    float *d;
    int ldd;
    float alpha, beta;
    cublasLtEpilogue_t epilogue;
    const float *bias;             /* BIAS epilogues */
    float *aux;                    /* AUX epilogues */
    int64_t aux_ld;
    int on_stack;
} cov_lt_t;
void cov_lt_matmul(cublasLtHandle_t lt, const cov_lt_t *p, void *ws, size_t ws_size,
                   cudaStream_t s);
/* Destroys this thread's decoy descriptors (call before the thread ends). */
void cov_lt_thread_done(void);

/* What PyTorch does before each cuBLAS call on a handle: stream, workspace, math mode;
 * and host pointer mode, atomics not allowed. */
void cov_blas_prepare(cublasHandle_t h, cudaStream_t s, void *ws, size_t ws_size);

/* coverage_blas.c: the cuBLAS entry points the shim forwards after a drain, once each on
 * weights w that deferred work just wrote; COV_BLAS_OUT floats of results into out. */
#define COV_BLAS_OUT 128

/* coverage_sync.c: the runtime and driver entry points the shim forwards after a drain,
 * on s0's weights w through side stream sc; COV_SYNC_OUT floats into out. cov_sync_reset:
 * cudaDeviceReset and cuDevicePrimaryCtxReset, at the very end. */
#define COV_SYNC_OUT 132
void cov_sync_extra(cudaStream_t s0, cudaStream_t sc, const float *w, float *out);
void cov_sync_reset(void);
/* Through the driver pointers cudaGetDriverEntryPoint hands out: on a new stream after s0,
 * a copy of src[0]; that stream and its event are destroyed through the driver; out[0..2)
 * the result. */
void cov_sync_driver_paths(cudaStream_t s0, const float *src, float *out);
void cov_blas_extra(cublasHandle_t h, cudaStream_t s, void *ws, size_t ws_size,
                    const float *w, float *out);

/* coverage_entry.c: entry points the shim drains for through its generated wrappers
 * (gemv, dot, stream memory operations, 3D and symbol copies, a batched GEMM with arrays
 * copied just before), each on data work queued just before wrote, on stream s; w: the
 * weights the optimizer step just wrote; COV_ENTRY_OUT floats into out. */
#define COV_ENTRY_OUT 128
void cov_entry_extra(cublasHandle_t h, cudaStream_t s, void *ws, size_t ws_size,
                     const float *w, float *out);

/* A NaN no computation produces: what host buffers hold until a copy fills them. */
#define COV_SENTINEL 0x7fc0deadu
uint32_t cov_bits(float f);
float cov_sentinel(void);
double cov_now_s(void);
/* Deterministic values in [-scale, scale) from seed. */
void cov_fill_lcg(float *p, size_t n, uint32_t seed, float scale);
/* Zeroed host memory, device memory (cudaMalloc), device memory filled by cov_fill_lcg
 * (blocking cudaMemcpy); all die on failure. */
void *cov_host_alloc(size_t bytes);
float *cov_dev_alloc(size_t floats);
void cov_upload(float *dst, size_t floats, uint32_t seed, float scale);

/* The output file: sections "name bytes\n<bytes>\n", and a running FNV-1a of the bytes. */
void cov_emit_begin(void);
void cov_emit(FILE *f, const char *name, const void *data, size_t bytes);
void cov_emit_dev(FILE *f, const char *name, const float *dev, size_t floats); /* cudaMemcpy */
uint64_t cov_emit_sum(void);

/* ---- coverage_nccl.c (--nccl) ---- */

/* Communicators, NCCL memory and registrations, a simulated group (side: its stream). */
void cov_nccl_setup(cudaStream_t side);
/* On stream s: dh1r = all-reduce(dh1) then a pre-multiplied all-reduce in place (nh
 * floats); dy through every other collective and a grouped send/recv into cb, using ca
 * (ny floats each). */
void cov_nccl_backward(const float *dh1, float *dh1r, size_t nh, const float *dy, float *ca,
                       float *cb, size_t ny, cudaStream_t s);
/* ncclCommGetAsyncError on every communicator (the watchdog's poll); the number that
 * report an error. */
int cov_nccl_async_errors(void);
void cov_nccl_teardown(void);

/* --tp2 IDFILE: this process is one of two ranks (mpirun -n 2; the rank from the
 * launcher's environment); rank 0 writes the NCCL unique id to IDFILE, which must not exist
 * yet, and rank 1 reads it. cov_tp2_setup returns the rank; cov_tp2_allreduce averages n
 * floats of src over both ranks into dst on stream s (ncclAvg on a communicator named
 * TENSOR_MODEL_PARALLEL_GROUP). */
int cov_tp2_setup(const char *idfile);
void cov_tp2_allreduce(const float *src, float *dst, size_t n, cudaStream_t s);
void cov_tp2_teardown(void);

/* Stores that the compiler must keep even though the object is dead afterwards. */
void cov_scribble(void *p, size_t n);
void cov_scribble_f(float *p, float v);

#endif
