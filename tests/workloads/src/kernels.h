/*
 * kernels.h: finding and launching the workload's kernels (list in kargs.h).
 *
 * On the vgpu a kernel is a host function registered with vgpu_register_kernel, reached
 * through dlsym(RTLD_DEFAULT) so that the program has no link-time dependency on the
 * vgpu. On a real GPU that symbol is absent and the program loads the nvcc-built device
 * kernels from libwl_kernels_gpu.so (next to the executable, or WL_KERNELS_LIB).
 */
#ifndef WL_KERNELS_H
#define WL_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "kargs.h"
#include "vgpu.h"

/* Registers the host kernels with the vgpu or loads the device kernels. Returns 1 on the
 * vgpu, 0 on a real GPU; fails the job when neither is possible. Call once, before any
 * launch. */
int wl_kernels_init(void);

/* Launches kernel id (WL_K_*) with its argument block on the current stream. items is the
 * number of independent work items (grid size for the device code). */
void wl_launch(int id, const void *args, size_t size, int64_t items);
#define WL_LAUNCH(K, a, items) wl_launch(WL_K_##K, &(a), sizeof(a), (int64_t)(items))

/* The device profile when running on the vgpu (NULL on a GPU). */
const vgpu_profile_t *wl_vgpu_profile(void);
/* vgpu_nccl_represent when running on the vgpu, else NULL. */
typedef int (*wl_represent_fn)(void *id, int base, int stride);
wl_represent_fn wl_vgpu_represent(void);
/* Nonzero when the vgpu runs in timing-only mode. */
int wl_vgpu_timing_only(void);

/* ---- for the host implementations (kernels_*.c) ---- */

typedef struct wl_khost {
    int id;
    vgpu_kernel_impl_fn impl;
    vgpu_kernel_cost_fn cost;
    vgpu_kernel_footprint_fn footprint;
} wl_khost_t;

/* Tables of host kernels, each ended by id -1. */
extern const wl_khost_t wl_khost_basic[]; /* kernels_host.c */
extern const wl_khost_t wl_khost_nn[];    /* kernels_nn.c */
extern const wl_khost_t wl_khost_emu[];   /* emucomm.c */

/* The argument block of a launch. */
#define WL_ARGS(l, type) ((const type *)(l)->args[0])

/* Memory-bound time: bytes at the profile's HBM bandwidth plus the minimum kernel time
 * (the same rule as vgpu_cost_bytes). */
double wl__cost_bytes(const vgpu_launch_t *l, double bytes);
/* Compute-bound time: flops at the dtype's dense peak times the profile's GEMM efficiency,
 * plus the minimum kernel time. */
double wl__cost_flops(const vgpu_launch_t *l, double flops, int dt);

/* Element access for host implementations. */
static inline float wl__ld(const void *p, int64_t i, int dt)
{
    if (dt == WL_DT_F32) return ((const float *)p)[i];
    uint32_t u = (uint32_t)((const uint16_t *)p)[i] << 16;
    float f;
    __builtin_memcpy(&f, &u, 4);
    return f;
}
uint16_t wl__f32_to_bf16(float f);
static inline void wl__st(void *p, int64_t i, float v, int dt)
{
    if (dt == WL_DT_F32) ((float *)p)[i] = v;
    else ((uint16_t *)p)[i] = wl__f32_to_bf16(v);
}
/* Declares [p, p + bytes) read (w = 0) or written (w = 1) when p is non-NULL. */
static inline int wl__range(vgpu_range_t *r, int n, int max, const void *p, double bytes, int w)
{
    if (!p || bytes <= 0 || n >= max) return n;
    r[n] = (vgpu_range_t){p, (size_t)bytes, w};
    return n + 1;
}

#endif
