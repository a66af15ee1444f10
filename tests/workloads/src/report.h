/*
 * report.h: Megatron's FLOP count, TFLOP/s per GPU, MFU, and the run's output (aligned text
 * and JSON from one set of numbers).
 */
#ifndef WL_REPORT_H
#define WL_REPORT_H

#include <stdint.h>

#include "wl.h"

typedef struct wl_iter_stat {
    double loss, time_ms, tflops, mfu;
} wl_iter_stat_t;

typedef struct wl_report {
    const wl_cfg_t *cfg;
    int world, nproc, on_vgpu;
    char device[32];
    double flops;          /* model FLOPs of one iteration (the whole global batch) */
    double peak_tflops;    /* dense bf16 peak per GPU, for MFU */
    wl_iter_stat_t *it;
    int n;
    uint64_t hazards, ops;
    double compute_ms, comm_ms, overlap_ms; /* vgpu busy time in the last iteration (process 0) */
    double peak_mem_gib, wall_s;
    double peak_mem_bytes;   /* the same, in bytes (the max over processes) */
    /* On any device (a GPU too): the default memory pool's high-water mark of memory in use
     * (cudaMemPoolAttrUsedMemHigh, what cudaMallocAsync handed out) and the device memory in
     * use at the end (cudaMemGetInfo: total - free, the shim's own buffers included), MiB,
     * the largest over the processes; -1 when the device does not say */
    double pool_used_high_mib, device_used_mib;
    int gradcheck_failed, gradcheck_done;
} wl_report_t;

/* Megatron's num_floating_point_operations (megatron/training/training.py, 2024 form, from
 * Narayanan et al. 2021 appendix): 12 B s L h^2 [ (1 + G/N + s/h) q/h + (F/h) k g + V/(2 L h) ]
 * with B the global batch, G/N the kv/query head ratio, q the query projection size (= h),
 * F the FFN (per expert), k the experts per token (1 dense), g 3/2 with SwiGLU else 1, V the
 * padded vocabulary. 12 = 3 (fwd, wgrad, dgrad) x 2 (two GEMMs per block) x 2 (mul+add). */
double wl_megatron_flops(const wl_cfg_t *c);

/* Fills one iteration's derived numbers from its time and loss. */
void wl_report_add(wl_report_t *r, double loss, double time_ms);
/* One line per iteration (text mode, not --quiet). */
void wl_report_iter(const wl_report_t *r);
/* The summary: aligned text, or JSON with --json. */
void wl_report_final(const wl_report_t *r);
/* The iterations the summary averages: all but the first when there are several. */
double wl_report_mean_tflops(const wl_report_t *r);

#endif
