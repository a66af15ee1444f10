/*
 * rt_common.h: what the runtime/driver behaviour tests of the vgpu share.
 *
 * The tests are written as a user of the CUDA API would write them: they include only
 * cuda_runtime_api.h, cuda.h and vgpu.h, and they are linked against the real CUDA
 * libraries; CTest runs them with the vgpu in front. Kernels are host functions that the
 * program registers with vgpu_register_kernel for a host stub (any unique address).
 *
 * Contents: the test kernels (fill, add, copy, spin, touch, probe) with exact footprints
 * and caller-chosen costs, assertion macros that print both values, and a runner that
 * re-executes the test program as a child with a chosen environment to run one scenario
 * (for behaviour that ends a process: hazards in abort mode, sticky errors, profiles read
 * once at start).
 */
#ifndef VGPU_RT_COMMON_H
#define VGPU_RT_COMMON_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "vgpu.h"

/* ---- assertions ---- */

const char *vgt_rt_name(cudaError_t e);
const char *vgt_cu_name(CUresult r);

/* Fails the test unless the runtime call returns `expected`; prints both codes by name. */
#define VGT_EXPECT_RT(expected, call)                                                        \
    do {                                                                                     \
        cudaError_t vgt_e_ = (call);                                                         \
        cudaError_t vgt_x_ = (expected);                                                     \
        if (vgt_e_ != vgt_x_)                                                                \
            fail_msg("%s\n      expected %s (%d), got %s (%d)", #call, vgt_rt_name(vgt_x_), \
                     (int)vgt_x_, vgt_rt_name(vgt_e_), (int)vgt_e_);                         \
    } while (0)
#define VGT_OK(call) VGT_EXPECT_RT(cudaSuccess, call)

#define VGT_EXPECT_CU(expected, call)                                                        \
    do {                                                                                     \
        CUresult vgt_r_ = (call);                                                            \
        CUresult vgt_x_ = (expected);                                                        \
        if (vgt_r_ != vgt_x_)                                                                \
            fail_msg("%s\n      expected %s (%d), got %s (%d)", #call, vgt_cu_name(vgt_x_), \
                     (int)vgt_x_, vgt_cu_name(vgt_r_), (int)vgt_r_);                         \
    } while (0)
#define VGT_CU_OK(call) VGT_EXPECT_CU(CUDA_SUCCESS, call)

/* |got - expected| <= abs_tol + rel_tol * |expected|, printing both values. */
#define VGT_NEAR(what, expected, got, abs_tol, rel_tol)                                      \
    do {                                                                                     \
        double vgt_x_ = (double)(expected), vgt_g_ = (double)(got);                          \
        double vgt_t_ = (double)(abs_tol) + (double)(rel_tol) * (vgt_x_ < 0 ? -vgt_x_ : vgt_x_); \
        double vgt_d_ = vgt_g_ - vgt_x_;                                                     \
        if (!(vgt_d_ <= vgt_t_ && -vgt_d_ <= vgt_t_))                                        \
            fail_msg("%s: expected %.6f, got %.6f (difference %.6f, tolerance %.6f)", what, \
                     vgt_x_, vgt_g_, vgt_d_, vgt_t_);                                        \
    } while (0)

/* lo <= got <= hi, printing the bounds and the value. */
#define VGT_IN_RANGE(what, lo, hi, got)                                                      \
    do {                                                                                     \
        double vgt_l_ = (double)(lo), vgt_h_ = (double)(hi), vgt_g_ = (double)(got);         \
        if (!(vgt_g_ >= vgt_l_ && vgt_g_ <= vgt_h_))                                         \
            fail_msg("%s: expected in [%.6f, %.6f], got %.6f", what, vgt_l_, vgt_h_, vgt_g_); \
    } while (0)

/* got >= min for unsigned integers, printing both. */
#define VGT_GE(what, got, min)                                                               \
    do {                                                                                     \
        unsigned long long vgt_g_ = (unsigned long long)(got), vgt_m_ = (unsigned long long)(min); \
        if (vgt_g_ < vgt_m_)                                                                 \
            fail_msg("%s: expected >= %llu, got %llu", what, vgt_m_, vgt_g_);                \
    } while (0)

/* ---- test kernels ----
 * Host stubs: their addresses identify the kernels; calling one directly aborts.
 * Every kernel's last parameter except probe's is its solo device time in ns, which its
 * cost function returns unchanged (so tests know each kernel's exact cost). */

/* dst[i] = value for i < n. Writes [dst, dst + n). */
void vgt_k_fill(float *dst, float value, unsigned long long n, double cost_ns);
/* c[i] = a[i] + b[i]. Reads a and b, writes c. */
void vgt_k_add(const float *a, const float *b, float *c, unsigned long long n, double cost_ns);
/* dst[i] = src[i]. Reads src, writes dst. */
void vgt_k_copy(const float *src, float *dst, unsigned long long n, double cost_ns);
/* Touches nothing; occupies sm_fraction of the device for cost_ns. No host effect. */
void vgt_k_spin(double cost_ns, double sm_fraction);
/* Declares one range [p, p + len) (write when write != 0) and does nothing on the host:
 * for footprint-only checks (illegal addresses, exact hazard ranges). */
void vgt_k_touch(void *p, unsigned long long len, int write, double cost_ns);
/* No cost function (the device's minimum applies) and no footprint; records what its
 * implementation saw in vgt_probe_seen. */
void vgt_k_probe(int a, double b, char c, void *d);
/* Never registered. Exported (the test programs link with ENABLE_EXPORTS) so that the
 * device can name it. */
void vgt_k_unregistered(float *dst);

typedef struct vgt_probe_seen {
    int calls;
    char name[64];
    unsigned grid[3], block[3];
    size_t shmem;
    int nargs;
    int a;
    double b;
    char c;
    void *d;
} vgt_probe_seen_t;
extern vgt_probe_seen_t vgt_probe_seen;

/* Registers every kernel above (except vgt_k_unregistered); fails the test on error. */
void vgt_register_kernels(void);

/* Launch helpers: cudaLaunchKernel with a 1-D configuration; return its status. */
cudaError_t vgt_fill(float *dst, float value, size_t n, double cost_ns, cudaStream_t s);
cudaError_t vgt_add(const float *a, const float *b, float *c, size_t n, double cost_ns,
                    cudaStream_t s);
cudaError_t vgt_copy(const float *src, float *dst, size_t n, double cost_ns, cudaStream_t s);
cudaError_t vgt_spin(double cost_ns, double sm_fraction, cudaStream_t s);
cudaError_t vgt_touch(void *p, size_t len, int write, double cost_ns, cudaStream_t s);

/* Elapsed virtual time between two completed events, in ns (fails the test on error). */
double vgt_elapsed_ns(cudaEvent_t a, cudaEvent_t b);
/* Checks that every element of p[0..n) equals v (device memory, copied back). */
void vgt_expect_device_floats(const float *dev, size_t n, float v);

/* ---- child processes ---- */

typedef struct vgt_child {
    int exited;   /* 1: exited normally with status `code`; 0: killed by `sig` or timed out */
    int code;
    int sig;
    char *out;    /* its stdout, NUL-terminated */
    char *err;    /* its stderr */
} vgt_child_t;

typedef struct vgt_scenario {
    const char *name;
    int (*run)(void); /* the child's exit status */
} vgt_scenario_t;

/* Runs this program again as `prog --vgt-scenario name` with the environment changed by
 * env: each entry "K=V" sets K, "K" alone removes it. Waits at most timeout_s seconds
 * (then kills it). Returns 0, or -1 when it could not be started. */
int vgt_run_child(const char *scenario, const char *const *env, double timeout_s,
                  vgt_child_t *res);
void vgt_child_free(vgt_child_t *res);
/* Number of lines of text that begin with prefix. */
int vgt_count_lines(const char *text, const char *prefix);

/* In main: if argv asks for a scenario, runs it from table and returns its status;
 * otherwise returns -1. */
int vgt_scenario_dispatch(int argc, char **argv, const vgt_scenario_t *table);

/* Prints the child's status and output when a check on it fails. */
#define VGT_CHILD_INFO(c)                                                                    \
    print_message("child: exited=%d code=%d sig=%d\n--- stdout ---\n%s\n--- stderr ---\n%s\n", \
                  (c)->exited, (c)->code, (c)->sig, (c)->out ? (c)->out : "",                \
                  (c)->err ? (c)->err : "")

/* A test that checks the program so far caused no hazard (call it last in a group). */
void vgt_test_no_hazards(void **state);

#endif
