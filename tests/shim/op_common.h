/*
 * op_common.h: what the shim.op_* tests share.
 *
 * The tests link dh_sched and call the capture functions directly, the way a wrapper
 * would, then change or free everything the framework owns, replay on a context of their
 * own (stream, cuBLAS and cuBLASLt handles, workspace, events: what the dispatcher would
 * hand over), and compare the result bit for bit with the same call made directly.
 * Kernels are host functions registered with the vgpu; on a backend without
 * vgpu_register_kernel the kernel tests skip (exit 77).
 */
#ifndef DH_OP_COMMON_H
#define DH_OP_COMMON_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <setjmp.h>
#include <cmocka.h>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_runtime_api.h>

#include "op.h"
#include "op_break.h"

/* Assertions that print the call, the status and its name. */
#define OPT_OK(call)                                                                      \
    do {                                                                                  \
        cudaError_t e_ = (call);                                                          \
        if (e_ != cudaSuccess)                                                            \
            fail_msg("%s: expected cudaSuccess, got %d (%s)", #call, (int)e_,             \
                     cudaGetErrorName(e_));                                               \
    } while (0)
#define OPT_CU_OK(call)                                                                   \
    do {                                                                                  \
        CUresult e_ = (call);                                                             \
        if (e_ != CUDA_SUCCESS)                                                           \
            fail_msg("%s: expected CUDA_SUCCESS, got %d", #call, (int)e_);                \
        } while (0)
#define OPT_BLAS_OK(call)                                                                 \
    do {                                                                                  \
        cublasStatus_t e_ = (call);                                                       \
        if (e_ != CUBLAS_STATUS_SUCCESS)                                                  \
            fail_msg("%s: expected CUBLAS_STATUS_SUCCESS, got %d", #call, (int)e_);       \
    } while (0)
#define OPT_DH_OK(call)                                                                   \
    do {                                                                                  \
        dh_status_t e_ = (call);                                                          \
        if (e_ != DH_OK)                                                                  \
            fail_msg("%s: expected DH_OK, got %s", #call, dh_status_name(e_));            \
    } while (0)
#define OPT_DH_IS(call, want)                                                             \
    do {                                                                                  \
        dh_status_t e_ = (call);                                                          \
        if (e_ != (want))                                                                 \
            fail_msg("%s: expected %s, got %s", #call, dh_status_name(want),              \
                     dh_status_name(e_));                                                 \
    } while (0)

/* A replay context as the dispatcher builds one: its own non-blocking stream, cuBLAS
 * handle, cuBLASLt handle, a workspace of ws_size bytes, and the shim-owned events of
 * record/wait ops. Fails the test on error. */
void opt_ctx_init(dh_replay_ctx_t *c, size_t ws_size);
void opt_ctx_fini(dh_replay_ctx_t *c);

/* Replays op on c, waits for c's stream, frees op; returns the replay's status. */
int opt_replay_sync(dh_op_t *op, const dh_replay_ctx_t *c);

/* Device buffers. */
void *opt_dev_alloc(size_t n);
void *opt_dev_upload(const void *host, size_t n);
void opt_download(void *host, const void *dev, size_t n);

/* n deterministic pseudo-random floats in [-1, 1) with full mantissas. */
void opt_fill_random(float *h, size_t n, unsigned seed);

/* Bitwise comparison: 1 when equal; otherwise 0, with *first set to the first differing
 * byte offset. */
int opt_same(const void *a, const void *b, size_t n, size_t *first);
/* Fails the test, naming what and the first differing float, unless a == b bitwise. */
void opt_assert_same_floats(const float *a, const float *b, size_t n, const char *what);

/* Monotonic time in nanoseconds. */
double opt_now_ns(void);

/* ---- kernels (host stubs; their implementations are registered with the vgpu) ---- */

typedef struct opt_triple {
    float v[3];
} opt_triple_t;

/* y[i] += a * x[i] for i < n. */
void opt_k_axpy(float *y, const float *x, float a, unsigned long long n);
/* out[i] = c + t.v[0] * i + t.v[1] - t.v[2] * d + h, for i < n: every parameter (of sizes
 * 8, 1, 12, 8, 2, 8, at offsets 0, 8, 12, 24, 32, 40) shows in the result. */
void opt_k_mix(float *out, char c, opt_triple_t t, double d, short h, unsigned long long n);
/* out[i] *= s, for i < n; used only by the test that needs an uncached kernel. */
void opt_k_scale(float *out, float s, unsigned long long n);
/* Never registered. */
void opt_k_unregistered(float *out);

/* Registers the kernels above; 0 when the backend is not the vgpu (tests then skip). */
int opt_register_kernels(void);

#endif
