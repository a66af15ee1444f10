/*
 * test_interference.c: the cost model's concurrency rules, measured with events.
 *
 * 1. Compute and communication co-running slow each other by the profile's coefficients:
 *    a kernel of solo time K on one stream and an all-reduce of solo time C < K on another,
 *    started together, end at C' = C / (1 - comm_slow) for the all-reduce and at
 *    C' + (K - C' * (1 - compute_slow)) for the kernel (processor sharing).
 * 2. Two compute kernels co-running share the device: both of solo time K end at 2K.
 * 3. A compute kernel and a copy do not interfere.
 * The all-reduce runs on an 8-rank communicator in representative-rank mode, so one
 * process suffices and its solo time is the ring/tree formula's.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "vgpu.h"

#define CK(x)                                                                           \
    do {                                                                                \
        long _e = (long)(x);                                                            \
        if (_e) {                                                                       \
            fprintf(stderr, "%s:%d: %s failed (%ld)\n", __FILE__, __LINE__, #x, _e);    \
            exit(1);                                                                    \
        }                                                                               \
    } while (0)

static void spin_stub(double ns) { (void)ns; }
static double spin_cost(const vgpu_launch_t *l, double *f) { (void)f; return *(double *)l->args[0]; }

static int failures;

static void expect_near(const char *what, double got, double want)
{
    double tol = 1e-4 * want + 1.0; /* ns; events are float milliseconds */
    int ok = fabs(got - want) <= tol;
    printf("%-48s got %12.1f ns, want %12.1f ns  %s\n", what, got, want, ok ? "ok" : "FAIL");
    failures += !ok;
}

typedef struct rig {
    cudaStream_t a, b, gate;
    cudaEvent_t start, end_a, end_b;
    ncclComm_t comm;
    float *buf, *src, *dst;
} rig_t;

static void spin(cudaStream_t s, double ns)
{
    void *args[] = {&ns};
    CK(cudaLaunchKernel((const void *)spin_stub, (dim3){1, 1, 1}, (dim3){1, 1, 1}, args, 0, s));
}

/* Runs fa on a and fb on b, both released at the same virtual instant by a gate kernel
 * that outlasts the host's launch costs; returns their end times after the gate, in ns. */
static void measure(rig_t *r, void (*fa)(rig_t *), void (*fb)(rig_t *), double *ta, double *tb)
{
    CK(cudaDeviceSynchronize());
    spin(r->gate, 1e6);
    CK(cudaEventRecord(r->start, r->gate));
    CK(cudaStreamWaitEvent(r->a, r->start, 0));
    CK(cudaStreamWaitEvent(r->b, r->start, 0));
    if (fa) fa(r);
    if (fb) fb(r);
    CK(cudaEventRecord(r->end_a, r->a));
    CK(cudaEventRecord(r->end_b, r->b));
    CK(cudaDeviceSynchronize());
    float ma, mb;
    CK(cudaEventElapsedTime(&ma, r->start, r->end_a));
    CK(cudaEventElapsedTime(&mb, r->start, r->end_b));
    *ta = ma * 1e6;
    *tb = mb * 1e6;
}

static const double K = 2e6; /* 2 ms kernel */

static void kern_a(rig_t *r) { spin(r->a, K); }
static void kern_b(rig_t *r) { spin(r->b, K); }
static void ar_b(rig_t *r) { CK(ncclAllReduce(r->buf, r->buf, 1 << 20, ncclFloat, ncclSum, r->comm, r->b)); }
static void copy_b(rig_t *r) { CK(cudaMemcpyAsync(r->dst, r->src, 64 << 20, cudaMemcpyDeviceToDevice, r->b)); }

int main(void)
{
    vgpu_kernel_desc_t kd = {.name = "spin", .nparams = 1, .param_sizes = {sizeof(double)}, .cost = spin_cost};
    CK(vgpu_register_kernel((const void *)spin_stub, &kd));
    rig_t r;
    CK(cudaStreamCreateWithFlags(&r.a, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&r.b, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&r.gate, cudaStreamNonBlocking));
    CK(cudaEventCreate(&r.start));
    CK(cudaEventCreate(&r.end_a));
    CK(cudaEventCreate(&r.end_b));
    CK(cudaMalloc((void **)&r.buf, 4 << 20));
    CK(cudaMalloc((void **)&r.src, 64 << 20));
    CK(cudaMalloc((void **)&r.dst, 64 << 20));
    ncclUniqueId id;
    CK(ncclGetUniqueId(&id));
    CK(vgpu_nccl_represent(&id, 0, 1));
    CK(ncclCommInitRank(&r.comm, 8, id, 0));
    const vgpu_profile_t *p = vgpu_profile();

    double ka, dummy, cb, kb2, cpb;
    measure(&r, kern_a, NULL, &ka, &dummy);
    expect_near("kernel alone", ka, K);
    measure(&r, NULL, ar_b, &dummy, &cb);
    measure(&r, NULL, copy_b, &dummy, &cpb);
    printf("all-reduce alone: %.1f ns; copy alone: %.1f ns\n", cb, cpb);
    if (!(cb > 1e4 && cb < K)) {
        printf("FAIL: the all-reduce must be shorter than the kernel for this test (%.1f)\n", cb);
        return 1;
    }

    double ta, tb;
    measure(&r, kern_a, ar_b, &ta, &tb);
    double c_end = cb / (1.0 - p->comm_slow_by_compute);
    double k_end = c_end + (K - c_end * (1.0 - p->compute_slow_by_comm));
    expect_near("all-reduce under a kernel ends at C/(1-cs)", tb, c_end);
    expect_near("kernel under an all-reduce ends as predicted", ta, k_end);

    measure(&r, kern_a, kern_b, &ta, &kb2);
    expect_near("two kernels co-running: first ends at 2K", ta, 2 * K);
    expect_near("two kernels co-running: second ends at 2K", kb2, 2 * K);

    measure(&r, kern_a, copy_b, &ta, &tb);
    expect_near("kernel beside a copy is not slowed", ta, K);
    expect_near("copy beside a kernel is not slowed", tb, cpb);

    CK(ncclCommDestroy(r.comm));
    printf("%d failed\n", failures);
    return failures ? 1 : 0;
}
