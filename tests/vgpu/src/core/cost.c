/*
 * cost.c: solo device times shared by the API libraries. Each formula is stated where it
 * is computed; the numbers come from the device profile (profile.c).
 */
#include <math.h>

#include "core.h"

static double peak_tflops(const vgpu_profile_t *p, int dtype_bits)
{
    switch (dtype_bits) {
    case 16: return p->fp16_tflops;
    case 17: return p->bf16_tflops;
    case 19: return p->tf32_tflops;
    /* fp64 (64): profiles carry no fp64 peak. The data-centre parts they model (A100-class
     * A800, H100, H200) have an fp64 tensor-core peak equal to their fp32 non-tensor one, so
     * fp32's is used; on an A40 (fp64 at 1/32 of fp32) fp64 GEMMs are modelled far too fast,
     * a known gap that only fp64 timings feel. */
    default: return p->fp32_tflops;
    }
}

/* time = kernel_min + 2*m*n*k*batch / (peak * eff), where
 * eff = gemm_eff_max * wave * k / (k + gemm_k_half),
 * wave = tiles / (ceil(tiles / sm_count) * sm_count) with tiles = ceil(m/T)*ceil(n/T)*batch:
 * the last wave of output tiles leaves SMs idle (wave quantisation), and a short K cannot
 * amortise loading the tiles. */
double vg_cost_gemm(const vgpu_profile_t *p, double m, double n, double k, double batch,
                    int dtype_bits)
{
    if (m <= 0 || n <= 0 || k <= 0 || batch <= 0) {
        return p->kernel_min_us * 1e3;
    }
    double t = p->gemm_tile;
    double tiles = ceil(m / t) * ceil(n / t) * batch;
    double waves = ceil(tiles / p->sm_count);
    double wave = tiles / (waves * p->sm_count);
    double eff = p->gemm_eff_max * wave * (k / (k + p->gemm_k_half));
    double flops = 2.0 * m * n * k * batch;
    return p->kernel_min_us * 1e3 + flops / (peak_tflops(p, dtype_bits) * 1e12 * eff) * 1e9;
}

/* A memory-bound kernel: its bytes at HBM bandwidth, plus the minimum kernel time. */
double vg_cost_mem(const vgpu_profile_t *p, double bytes)
{
    return p->kernel_min_us * 1e3 + bytes / (p->hbm_gbps * 1e9) * 1e9;
}

/* Copies: device to device reads and writes every byte through HBM (2 * bytes / hbm);
 * across PCIe the host link limits (bytes / pcie); host to host at 10 GB/s (a memcpy). */
double vg_cost_copy(const vgpu_profile_t *p, double bytes, int kind)
{
    switch (kind) {
    case cudaMemcpyDeviceToDevice: return 2.0 * bytes / (p->hbm_gbps * 1e9) * 1e9;
    case cudaMemcpyHostToHost: return bytes / (10.0 * 1e9) * 1e9;
    default: return bytes / (p->pcie_gbps * 1e9) * 1e9;
    }
}

VG_API double vgpu_cost_bytes(double bytes) { return vg_cost_mem(vgpu_profile(), bytes); }

VG_API double vgpu_cost_flops(double flops, int dtype_bits)
{
    const vgpu_profile_t *p = vgpu_profile();
    return p->kernel_min_us * 1e3 + flops / (peak_tflops(p, dtype_bits) * 1e12) * 1e9;
}
