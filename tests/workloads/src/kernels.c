/*
 * kernels.c: registration of the host kernels with the vgpu, loading of the device
 * kernels on a real GPU, and the launch path (cudaLaunchKernel with one argument block, as
 * PyTorch's launches of functor kernels look to the runtime).
 */
#define _GNU_SOURCE
#include "kernels.h"

#include <dlfcn.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include "wl.h"

/* Host stubs: only their addresses matter (they identify kernels to the vgpu). Each body
 * differs so that no linker folds two into one address. */
static volatile int wl_stub_seen;
#define WL_STUB(e, n, t)                                                                  \
    static void wl_stub_##e(t a)                                                          \
    {                                                                                     \
        (void)a;                                                                          \
        wl_stub_seen = WL_K_##e + 1;                                                      \
    }
WL_KERNELS(WL_STUB)
#undef WL_STUB

static const char *const names[WL_K_COUNT] = {
#define WL_NAME(e, n, t) n,
    WL_KERNELS(WL_NAME)
#undef WL_NAME
};
static const size_t arg_sizes[WL_K_COUNT] = {
#define WL_SIZE(e, n, t) sizeof(t),
    WL_KERNELS(WL_SIZE)
#undef WL_SIZE
};

/* What cudaLaunchKernel receives for each kernel: a stub (vgpu) or a __global__ (GPU).
 * Written once by wl_kernels_init before any launch, read-only afterwards. */
static const void *kfunc[WL_K_COUNT];
static const vgpu_profile_t *(*get_profile)(void);
static wl_represent_fn represent;
static int (*timing_only)(void);

const vgpu_profile_t *wl_vgpu_profile(void) { return get_profile ? get_profile() : NULL; }
wl_represent_fn wl_vgpu_represent(void) { return represent; }
int wl_vgpu_timing_only(void) { return timing_only ? timing_only() : 0; }

double wl__cost_bytes(const vgpu_launch_t *l, double bytes)
{
    return l->prof->kernel_min_us * 1e3 + bytes / l->prof->hbm_gbps;
}

double wl__cost_flops(const vgpu_launch_t *l, double flops, int dt)
{
    const vgpu_profile_t *p = l->prof;
    double peak = dt == WL_DT_F32 ? p->fp32_tflops : p->bf16_tflops;
    double eff = p->gemm_eff_max > 0 ? p->gemm_eff_max : 1.0;
    return p->kernel_min_us * 1e3 + flops / (peak * 1e3 * eff);
}

uint16_t wl__f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static void register_host(int (*reg)(const void *, const vgpu_kernel_desc_t *))
{
    const void *stubs[WL_K_COUNT] = {
#define WL_PTR(e, n, t) (const void *)wl_stub_##e,
        WL_KERNELS(WL_PTR)
#undef WL_PTR
    };
    const wl_khost_t *tabs[] = {wl_khost_basic, wl_khost_nn, wl_khost_emu};
    for (size_t t = 0; t < sizeof tabs / sizeof tabs[0]; t++) {
        for (const wl_khost_t *k = tabs[t]; k->id >= 0; k++) {
            vgpu_kernel_desc_t d = {.name = names[k->id], .nparams = 1,
                                    .param_sizes = {arg_sizes[k->id]}, .impl = k->impl,
                                    .cost = k->cost, .footprint = k->footprint};
            if (reg(stubs[k->id], &d) != 0) wl_fatal("vgpu_register_kernel(%s) failed", names[k->id]);
            kfunc[k->id] = stubs[k->id];
        }
    }
    for (int i = 0; i < WL_K_COUNT; i++)
        if (!kfunc[i]) wl_fatal("kernel %s has no host implementation", names[i]);
}

/* The device kernels live in their own library because the vgpu's runtime does not
 * provide the fat-binary registration entry points nvcc's code calls at load time. */
static void load_device(void)
{
    char path[PATH_MAX];
    const char *env = getenv("WL_KERNELS_LIB");
    if (env && *env) {
        snprintf(path, sizeof path, "%s", env);
    } else {
        ssize_t n = readlink("/proc/self/exe", path, sizeof path - 64);
        if (n <= 0) wl_fatal("cannot locate the program to find libwl_kernels_gpu.so");
        path[n] = '\0';
        char *slash = strrchr(path, '/');
        snprintf(slash ? slash + 1 : path, 64, "libwl_kernels_gpu.so");
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) wl_fatal("no vgpu and no device kernels: %s", dlerror());
    const void *const *(*table)(int *) = NULL;
    *(void **)&table = dlsym(h, "wl_gpu_kernel_table");
    int n = 0;
    const void *const *t = table ? table(&n) : NULL;
    if (!t || n != WL_K_COUNT) wl_fatal("%s: kernel table missing or of the wrong size", path);
    for (int i = 0; i < WL_K_COUNT; i++) kfunc[i] = t[i];
}

int wl_kernels_init(void)
{
    int (*reg)(const void *, const vgpu_kernel_desc_t *) = NULL;
    *(void **)&reg = dlsym(RTLD_DEFAULT, "vgpu_register_kernel");
    if (reg) {
        *(void **)&get_profile = dlsym(RTLD_DEFAULT, "vgpu_profile");
        *(void **)&represent = dlsym(RTLD_DEFAULT, "vgpu_nccl_represent");
        *(void **)&timing_only = dlsym(RTLD_DEFAULT, "vgpu_timing_only");
        register_host(reg);
        return 1;
    }
    load_device();
    return 0;
}

void wl_launch(int id, const void *args, size_t size, int64_t items)
{
    if (id < 0 || id >= WL_K_COUNT || size != arg_sizes[id]) wl_fatal("bad launch of kernel %d", id);
    int64_t blocks = (items + 255) / 256;
    if (blocks < 1) blocks = 1;
    if (blocks > 65535) blocks = 65535; /* the device code loops over the rest */
    dim3 grid = {(unsigned)blocks, 1, 1}, block = {256, 1, 1};
    void *argv[1] = {(void *)args};
    WL_CK(cudaLaunchKernel(kfunc[id], grid, block, argv, 0, wl_cur_stream()));
}
