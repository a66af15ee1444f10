/*
 * vgpu.h: the programmer's face of the CPU device.
 *
 * A program that runs on the vgpu is an ordinary CUDA program built against the real
 * headers. What the vgpu cannot know from the API alone it learns here: for every kernel,
 * a host implementation, a cost and a memory footprint. Programs that must also build for
 * a real GPU resolve these functions with dlsym(RTLD_DEFAULT, "vgpu_register_kernel") and
 * skip registration when the symbol is absent, so nothing here is a link-time dependency.
 *
 * All functions are thread-safe. Times are virtual nanoseconds.
 */
#ifndef VGPU_H
#define VGPU_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VGPU_MAX_KERNEL_PARAMS 32
#define VGPU_MAX_RANGES 16

/* Device profile: the numbers the cost model uses. Rates are per GPU. */
typedef struct vgpu_profile {
    char name[32];
    int sm_count;
    size_t mem_bytes;
    int cc_major, cc_minor;
    double fp32_tflops;      /* non-tensor FP32 peak */
    double tf32_tflops;      /* dense tensor-core TF32 peak */
    double fp16_tflops;      /* dense tensor-core FP16 peak (FP32 accumulate) */
    double bf16_tflops;      /* dense tensor-core BF16 peak (FP32 accumulate) */
    double gemm_eff_max;     /* best achievable fraction of peak for a large GEMM */
    double gemm_k_half;      /* K at which the K-efficiency factor is one half */
    int gemm_tile;           /* output tile edge used for wave quantisation */
    double hbm_gbps;         /* device memory bandwidth, GB/s */
    double pcie_gbps;        /* host<->device bandwidth per direction, GB/s */
    double intra_gbps;       /* bus bandwidth per GPU inside a node (NVLink/PCIe), GB/s */
    double intra_lat_us;     /* per-step latency inside a node */
    double inter_gbps;       /* network bandwidth per GPU between nodes, GB/s */
    double inter_lat_us;     /* per-step latency between nodes */
    double link_eff;         /* fraction of link bandwidth NCCL achieves */
    int gpus_per_node;
    double launch_us;        /* host time per launch-type API call */
    double event_us;         /* host time per event record or stream-wait call */
    double kernel_min_us;    /* device time of the smallest kernel */
    double compute_slow_by_comm; /* fractional slowdown of compute while comm co-runs */
    double comm_slow_by_compute; /* fractional slowdown of comm while compute co-runs */
    double comm_sm_fraction;     /* share of SMs a collective kernel occupies */
} vgpu_profile_t;

/* A byte range a kernel touches. */
typedef struct vgpu_range {
    const void *ptr;
    size_t len;
    int write; /* 0: read, 1: write (read-modify-write counts as write) */
} vgpu_range_t;

/* What a kernel's callbacks see: the launch as the device will run it. args[i] points to a
 * private copy of parameter i, taken at launch time (as a real device does). */
typedef struct vgpu_launch {
    const char *name;
    unsigned grid[3], block[3];
    size_t shmem;
    void *const *args;
    int nargs;
    const vgpu_profile_t *prof;
} vgpu_launch_t;

typedef void (*vgpu_kernel_impl_fn)(const vgpu_launch_t *l);
/* Returns the kernel's solo device time in ns; *sm_fraction (preset to 1) may be lowered
 * for kernels that do not fill the device. */
typedef double (*vgpu_kernel_cost_fn)(const vgpu_launch_t *l, double *sm_fraction);
/* Writes at most max ranges into out and returns how many. */
typedef int (*vgpu_kernel_footprint_fn)(const vgpu_launch_t *l, vgpu_range_t *out, int max);

typedef struct vgpu_kernel_desc {
    const char *name;                    /* copied */
    int nparams;
    size_t param_sizes[VGPU_MAX_KERNEL_PARAMS];
    vgpu_kernel_impl_fn impl;            /* may be NULL only for kernels with no effect */
    vgpu_kernel_cost_fn cost;            /* NULL: kernel_min_us */
    vgpu_kernel_footprint_fn footprint;  /* NULL: touches nothing the detector can see */
} vgpu_kernel_desc_t;

/* Registers the kernel whose host stub (the pointer passed to cudaLaunchKernel) is func.
 * The same kernel is reachable as a CUfunction through cudaGetFuncBySymbol. Registering
 * the same func twice replaces the description. Returns 0, or -1 on a bad description. */
int vgpu_register_kernel(const void *func, const vgpu_kernel_desc_t *desc);

/* The profile of the current device. */
const vgpu_profile_t *vgpu_profile(void);

/* Cost helpers for registered kernels. */
double vgpu_cost_bytes(double bytes);  /* memory-bound: bytes at HBM bandwidth + minimum */
double vgpu_cost_flops(double flops, int dtype_bits); /* compute-bound at peak for dtype */

/* Virtual clocks. The host clock advances by launch_us per enqueueing call and jumps to
 * the device's time when the host waits; the device clock is where the simulation is. */
double vgpu_host_time_ns(void);
double vgpu_device_time_ns(void);

typedef struct vgpu_counters {
    double busy_ns_compute;   /* union of time with any compute op running */
    double busy_ns_comm;      /* union of time with any communication op running */
    double busy_ns_copy;
    double overlap_ns;        /* time with compute and communication both running */
    uint64_t ops_completed;
    uint64_t hazards;
    uint64_t bytes_copied;
    uint64_t bytes_communicated;
    size_t bytes_allocated;      /* now */
    size_t peak_bytes_allocated; /* high-water mark */
} vgpu_counters_t;

/* Waits for all issued work on every device of this process, then fills *c. */
void vgpu_counters(vgpu_counters_t *c);
/* Resets the busy/overlap/op counters (not memory) so a program can measure one phase. */
void vgpu_counters_reset(void);

/* Representative-rank mode. Marks a unique id created by ncclGetUniqueId so that the
 * communicator initialised from it stands for a symmetric group: no other process joins,
 * collectives complete locally (timing-only: data is not moved) and are timed as if every
 * member had issued them at the same moment. Members are global ranks base + i * stride,
 * placed on nodes by gpus_per_node. Returns 0, or -1 if id is not a vgpu id. */
int vgpu_nccl_represent(void *nccl_unique_id, int base_global_rank, int stride);

/* Nonzero when running in timing-only mode (VGPU_TIMING_ONLY=1). */
int vgpu_timing_only(void);

#ifdef __cplusplus
}
#endif
#endif
