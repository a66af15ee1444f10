/*
 * profile.c: device profiles. Every number says where it comes from: a vendor datasheet,
 * the DHelix paper's setup (arXiv 2411.15871), or a modelling assumption stated as such.
 * A profile never changes per workload configuration; VGPU_DEVICE=path.json loads one with
 * the same keys as vgpu_profile_t (missing keys keep the h100 values, or those of the
 * built-in profile its "base" key names: {"base": "a40-pcie", "mem_gib": 13.1} is that
 * device with less memory).
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core.h"

/* Values common to every built-in profile (assumptions, not datasheet numbers):
 * - launch_us 4: host cost of one launch-type CUDA call (cudaLaunchKernel is 2-5 us on
 *   current drivers); the framework's own per-op overhead is not modelled.
 * - event_us 1: host cost of cudaEventRecord or cudaStreamWaitEvent, which only append a
 *   marker to a stream (about 1 us on current drivers, against 2-5 for a launch); to be
 *   measured by scripts/gpu-validate on a GPU.
 * - kernel_min_us 2: the shortest kernel a real GPU runs end to end.
 * - compute_slow_by_comm 0.109: the DHelix authors' corrected Hopper report, "co-run
 *   compute slows about 10.9%" (REFERENCE.md).
 * - comm_slow_by_compute 0.10: chosen inside the paper's GEMM||all-gather overlap
 *   efficiency range 0.85-0.99.
 * - comm_sm_fraction 0.15: NCCL kernels hold 16-24 channels (one block each) of >100 SMs.
 * - link_eff 0.8: NCCL bus bandwidth reaches about 80% of the link rate in nccl-tests.
 * - gemm_k_half 64, gemm_tile 128: shape efficiency, see vg_cost_gemm. */
#define VG_COMMON                                                                      \
    .launch_us = 4.0, .event_us = 1.0, .kernel_min_us = 2.0,                             \
    .compute_slow_by_comm = 0.109,                                                     \
    .comm_slow_by_compute = 0.10, .comm_sm_fraction = 0.15, .link_eff = 0.8,           \
    .gemm_k_half = 64.0, .gemm_tile = 128

static const vgpu_profile_t vg_builtin[] = {
    /* NVIDIA A40 datasheet: 84 SMs (GA102), 48 GB GDDR6 at 696 GB/s, FP32 37.4 TFLOPS,
     * TF32 74.8 / FP16 and BF16 149.7 dense tensor TFLOPS, PCIe Gen4 x16 (about 25 GB/s
     * achieved per direction). Paper setup: 64 GPUs, 100 Gb/s InfiniBand; the node topology
     * is not given. Calibrated once for the cluster against the paper's six Megatron
     * baselines (issue 25; tests/workloads/README.md, "calibration", says why each value):
     * 8 GPUs per node, GPU-to-GPU over PCIe Gen4 at its achieved 25 GB/s per direction,
     * one 100 Gb/s NIC per GPU (12.5 GB/s), GEMMs reach 85% of peak (as the A800's, the
     * same Ampere tensor cores and cuBLAS). */
    {.name = "a40", .sm_count = 84, .mem_bytes = 48ull << 30, .cc_major = 8, .cc_minor = 6,
     .fp32_tflops = 37.4, .tf32_tflops = 74.8, .fp16_tflops = 149.7, .bf16_tflops = 149.7,
     .gemm_eff_max = 0.85, .hbm_gbps = 696, .pcie_gbps = 25, .intra_gbps = 25,
     .intra_lat_us = 5, .inter_gbps = 12.5, .inter_lat_us = 10, .gpus_per_node = 8,
     VG_COMMON},
    /* NVIDIA A800 SXM4 80GB (A100 datasheet numbers; NVLink limited to 400 GB/s): 108 SMs,
     * HBM2e 2039 GB/s, FP32 19.5, TF32 156, FP16/BF16 312 dense TFLOPS, NVLink 200 GB/s
     * per direction. Network: NVIDIA's A800 SuperPOD reference architecture, the layout of
     * the A800 clusters of the paper's time: one 200 Gb/s HDR InfiniBand NIC per GPU
     * (GPU:NIC = 8:8), so the node's 8 x 25 GB/s shared by its 8 GPUs is 25 GB/s per GPU.
     * Assumption: GEMMs reach 85% of peak. */
    {.name = "a800", .sm_count = 108, .mem_bytes = 80ull << 30, .cc_major = 8, .cc_minor = 0,
     .fp32_tflops = 19.5, .tf32_tflops = 156, .fp16_tflops = 312, .bf16_tflops = 312,
     .gemm_eff_max = 0.85, .hbm_gbps = 2039, .pcie_gbps = 25, .intra_gbps = 200,
     .intra_lat_us = 3, .inter_gbps = 25, .inter_lat_us = 8, .gpus_per_node = 8,
     VG_COMMON},
    /* NVIDIA H100 SXM5 datasheet: 132 SMs, 80 GB HBM3 at 3350 GB/s, FP32 66.9, TF32 494.7,
     * FP16/BF16 989.4 dense TFLOPS, NVLink 4 900 GB/s bidirectional (450 per direction),
     * PCIe Gen5 (about 50 GB/s achieved). Assumptions: one 400 Gb/s NDR NIC per GPU (50
     * GB/s), GEMMs reach 75% of peak. */
    {.name = "h100", .sm_count = 132, .mem_bytes = 80ull << 30, .cc_major = 9, .cc_minor = 0,
     .fp32_tflops = 66.9, .tf32_tflops = 494.7, .fp16_tflops = 989.4, .bf16_tflops = 989.4,
     .gemm_eff_max = 0.75, .hbm_gbps = 3350, .pcie_gbps = 50, .intra_gbps = 450,
     .intra_lat_us = 3, .inter_gbps = 50, .inter_lat_us = 6, .gpus_per_node = 8, VG_COMMON},
    /* NVIDIA H200 SXM datasheet: as H100 with 141 GB HBM3e at 4800 GB/s. Same assumptions. */
    {.name = "h200", .sm_count = 132, .mem_bytes = 141ull << 30, .cc_major = 9, .cc_minor = 0,
     .fp32_tflops = 66.9, .tf32_tflops = 494.7, .fp16_tflops = 989.4, .bf16_tflops = 989.4,
     .gemm_eff_max = 0.75, .hbm_gbps = 4800, .pcie_gbps = 50, .intra_gbps = 450,
     .intra_lat_us = 3, .inter_gbps = 50, .inter_lat_us = 6, .gpus_per_node = 8, VG_COMMON},
    /* The A40 profile before the calibration (last, so that the indices above stay), kept
     * so that results can be compared on both: TP over PCIe at 20 GB/s, the node's one
     * 12.5 GB/s NIC shared by its 8 GPUs (1.5625 GB/s per GPU), GEMMs at 70% of peak (a
     * 300 W board). */
    {.name = "a40-pcie", .sm_count = 84, .mem_bytes = 48ull << 30, .cc_major = 8, .cc_minor = 6,
     .fp32_tflops = 37.4, .tf32_tflops = 74.8, .fp16_tflops = 149.7, .bf16_tflops = 149.7,
     .gemm_eff_max = 0.70, .hbm_gbps = 696, .pcie_gbps = 25, .intra_gbps = 20,
     .intra_lat_us = 5, .inter_gbps = 1.5625, .inter_lat_us = 10, .gpus_per_node = 8,
     VG_COMMON},
};

#define NBUILTIN (sizeof(vg_builtin) / sizeof(vg_builtin[0]))

/* One table of the JSON keys, so loading cannot forget a field. */
#define VG_PROFILE_DOUBLES(X)                                                          \
    X(fp32_tflops) X(tf32_tflops) X(fp16_tflops) X(bf16_tflops) X(gemm_eff_max)        \
    X(gemm_k_half) X(hbm_gbps) X(pcie_gbps) X(intra_gbps) X(intra_lat_us)              \
    X(inter_gbps) X(inter_lat_us) X(link_eff) X(launch_us) X(event_us) X(kernel_min_us)            \
    X(compute_slow_by_comm) X(comm_slow_by_compute) X(comm_sm_fraction)
#define VG_PROFILE_INTS(X) X(sm_count) X(cc_major) X(cc_minor) X(gpus_per_node) X(gemm_tile)

static int load_json(const char *path, vgpu_profile_t *p)
{
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root || !json_is_object(root)) {
        vg_msg("VGPU_DEVICE=%s: not a JSON object (%s at line %d)", path, jerr.text, jerr.line);
        json_decref(root);
        return -1;
    }
    *p = vg_builtin[2];
    json_t *base = json_object_get(root, "base");
    if (base != NULL) {
        size_t i = 0;
        while (i < NBUILTIN && !(json_is_string(base) &&
                                 !strcasecmp(json_string_value(base), vg_builtin[i].name)))
            i++;
        if (i == NBUILTIN) {
            vg_msg("VGPU_DEVICE=%s: \"base\" must name a built-in profile", path);
            json_decref(root);
            return -1;
        }
        *p = vg_builtin[i];
    }
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        int known = 0;
#define X(f)                                                                           \
    if (!strcmp(key, #f)) {                                                            \
        known = 1;                                                                     \
        if (!json_is_number(v)) goto bad;                                              \
        p->f = json_number_value(v);                                                   \
    }
        VG_PROFILE_DOUBLES(X)
        VG_PROFILE_INTS(X)
#undef X
        if (!strcmp(key, "name") && json_is_string(v)) {
            known = 1;
            snprintf(p->name, sizeof p->name, "%s", json_string_value(v));
        } else if (!strcmp(key, "mem_gib") && json_is_number(v)) {
            known = 1;
            p->mem_bytes = (size_t)(json_number_value(v) * (double)(1ull << 30));
        } else if (!strcmp(key, "source") || !strcmp(key, "base") || !strncmp(key, "_", 1)) {
            known = 1; /* documentation keys */
        }
        if (!known) {
            vg_msg("VGPU_DEVICE=%s: unknown key \"%s\" ignored", path, key);
        }
        continue;
    bad:
        vg_msg("VGPU_DEVICE=%s: key \"%s\" must be a number", path, key);
        json_decref(root);
        return -1;
    }
    json_decref(root);
    if (p->sm_count <= 0 || p->hbm_gbps <= 0 || p->gpus_per_node <= 0 || p->gemm_tile <= 0) {
        vg_msg("VGPU_DEVICE=%s: sm_count, hbm_gbps, gpus_per_node, gemm_tile must be > 0", path);
        return -1;
    }
    return 0;
}

int vg__profile_load(const char *spec, vgpu_profile_t *out)
{
    if (!spec || !*spec) {
        spec = "h100";
    }
    for (size_t i = 0; i < NBUILTIN; i++) {
        if (!strcasecmp(spec, vg_builtin[i].name)) {
            *out = vg_builtin[i];
            return 0;
        }
    }
    if (strchr(spec, '/') || strstr(spec, ".json")) {
        vgpu_profile_t p;
        if (load_json(spec, &p) == 0) {
            *out = p;
            return 0;
        }
        vg_msg("VGPU_DEVICE=%s: using the built-in h100 profile instead", spec);
        *out = vg_builtin[2];
        return -1;
    }
    vg_msg("VGPU_DEVICE=%s: unknown profile (a40, a800, h100, h200 or a JSON file); using h100",
           spec);
    *out = vg_builtin[2];
    return -1;
}
