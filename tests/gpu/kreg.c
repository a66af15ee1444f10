/*
 * kreg.c: libdh_gpu_kreg.so, which lets the shim's vgpu test programs (the coverage
 * program, nccl_prog) run unchanged on a real GPU.
 *
 * Those programs launch kernels through host stubs that they register with the vgpu
 * (vgpu_register_kernel, found with dlsym; tests/vgpu/include/vgpu.h). Preloaded in front
 * of the shim (LD_PRELOAD=libdh_gpu_kreg.so:libdhelix_shim.so, or alone for the runs
 * without the shim), this library
 *   - defines vgpu_register_kernel: the kernel is looked up by the registered name in the
 *     device code of test_kernels.cu (same parameter list), and the stub is remembered as
 *     standing for that __global__ function; a name it does not know fails (-1), and so
 *     does a parameter count that differs;
 *   - defines vgpu_cost_bytes and vgpu_cost_flops (the programs fetch them; a GPU has no
 *     use for costs);
 *   - interposes the runtime entry points that take a kernel by its host pointer
 *     (cudaLaunchKernel, cudaLaunchKernelExC and their _ptsz forms, cudaGetFuncBySymbol, cudaFuncGetParamInfo,
 *     cudaFuncGetAttributes, cudaFuncGetName, and __cudaGetKernel, whose cudaKernel_t the
 *     programs then launch with __cudaLaunchKernel as nvcc 13 code does) and replaces a registered stub by its device
 *     function before calling the next definition (the shim, else the runtime).
 * The driver paths (cuLaunchKernel, cuLaunchKernelEx) need nothing: the programs take their
 * CUfunction from cudaGetFuncBySymbol. So the shim sees exactly what it would see from a
 * program with real device kernels.
 *
 * Thread-safe: registrations and lookups take one mutex (a test program registers before
 * it launches; the cost is a lock per launch).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "vgpu.h"

typedef struct gk_entry {
    const char *name;
    const void *func;
    int nparams;
} gk_entry_t;

const void *dh__gk_table(int *n); /* test_kernels.cu */

#define GK_MAX 64

static struct {
    pthread_mutex_t lock;
    const void *stub[GK_MAX], *dev[GK_MAX]; /* guarded by lock */
    int n;                                  /* guarded by lock */
} G = {PTHREAD_MUTEX_INITIALIZER, {0}, {0}, 0};

#define EXPORT __attribute__((visibility("default")))

EXPORT int vgpu_register_kernel(const void *func, const vgpu_kernel_desc_t *desc);
EXPORT double vgpu_cost_bytes(double bytes);
EXPORT double vgpu_cost_flops(double flops, int dtype_bits);

int vgpu_register_kernel(const void *func, const vgpu_kernel_desc_t *desc)
{
    int n = 0;
    const gk_entry_t *t = dh__gk_table(&n), *hit = NULL;
    for (int i = 0; desc && desc->name && i < n; i++)
        if (!strcmp(t[i].name, desc->name)) hit = &t[i];
    if (!func || !hit || hit->nparams != desc->nparams) {
        fprintf(stderr, "libdh_gpu_kreg: no device code for kernel %s (%d parameters)\n",
                desc && desc->name ? desc->name : "(null)", desc ? desc->nparams : -1);
        return -1;
    }
    int rc = 0;
    pthread_mutex_lock(&G.lock);
    int k = 0;
    while (k < G.n && G.stub[k] != func) k++;
    if (k == GK_MAX) {
        rc = -1;
    } else {
        G.stub[k] = func;
        G.dev[k] = hit->func;
        if (k == G.n) G.n++;
    }
    pthread_mutex_unlock(&G.lock);
    return rc;
}

double vgpu_cost_bytes(double bytes) { return bytes > 0 ? 0.0 : 0.0; }
double vgpu_cost_flops(double flops, int dtype_bits) { return flops > 0 && dtype_bits > 0 ? 0.0 : 0.0; }

/* The device function a registered stub stands for; anything else unchanged. */
static const void *dev_of(const void *func)
{
    const void *r = func;
    pthread_mutex_lock(&G.lock);
    for (int k = 0; k < G.n; k++)
        if (G.stub[k] == func) r = G.dev[k];
    pthread_mutex_unlock(&G.lock);
    return r;
}

/* The next definitions after this library (the shim, else the runtime), resolved once. */
typedef cudaError_t (*launch_fn)(const void *, dim3, dim3, void **, size_t, cudaStream_t);
typedef cudaError_t (*launch_ex_fn)(const cudaLaunchConfig_t *, const void *, void **);
typedef cudaError_t (*by_symbol_fn)(cudaFunction_t *, const void *);
typedef cudaError_t (*param_info_fn)(const void *, size_t, size_t *, size_t *);
typedef cudaError_t (*attributes_fn)(struct cudaFuncAttributes *, const void *);
typedef cudaError_t (*name_fn)(const char **, const void *);
typedef cudaError_t (*get_kernel_fn)(cudaKernel_t *, const void *);

static struct {
    pthread_once_t once;
    launch_fn launch;
    launch_ex_fn launch_ex;
    by_symbol_fn by_symbol;
    param_info_fn param_info;
    attributes_fn attributes;
    name_fn name;
    get_kernel_fn get_kernel;
    launch_fn launch_ptsz;
    launch_ex_fn launch_ex_ptsz;
} R = {PTHREAD_ONCE_INIT, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};

static void *next(const char *name)
{
    void *f = dlsym(RTLD_NEXT, name);
    if (!f) fprintf(stderr, "libdh_gpu_kreg: %s has no next definition\n", name);
    return f;
}

static void resolve(void)
{
    *(void **)&R.launch = next("cudaLaunchKernel");
    *(void **)&R.launch_ex = next("cudaLaunchKernelExC");
    *(void **)&R.by_symbol = next("cudaGetFuncBySymbol");
    *(void **)&R.param_info = next("cudaFuncGetParamInfo");
    *(void **)&R.attributes = next("cudaFuncGetAttributes");
    *(void **)&R.name = next("cudaFuncGetName");
    *(void **)&R.get_kernel = next("__cudaGetKernel");
    *(void **)&R.launch_ptsz = next("cudaLaunchKernel_ptsz");
    *(void **)&R.launch_ex_ptsz = next("cudaLaunchKernelExC_ptsz");
}

#define REAL(f) (pthread_once(&R.once, resolve), R.f)

EXPORT cudaError_t cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args, size_t shmem,
                                    cudaStream_t s)
{
    launch_fn f = REAL(launch);
    return f ? f(dev_of(func), grid, block, args, shmem, s) : cudaErrorNotSupported;
}

EXPORT cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 grid, dim3 block, void **args,
                                         size_t shmem, cudaStream_t s);
EXPORT cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 grid, dim3 block, void **args,
                                         size_t shmem, cudaStream_t s)
{
    launch_fn f = REAL(launch_ptsz);
    return f ? f(dev_of(func), grid, block, args, shmem, s) : cudaErrorNotSupported;
}

EXPORT cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t *cfg, const void *func,
                                            void **args);
EXPORT cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t *cfg, const void *func,
                                            void **args)
{
    launch_ex_fn f = REAL(launch_ex_ptsz);
    return f ? f(cfg, dev_of(func), args) : cudaErrorNotSupported;
}

EXPORT cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *cfg, const void *func, void **args)
{
    launch_ex_fn f = REAL(launch_ex);
    return f ? f(cfg, dev_of(func), args) : cudaErrorNotSupported;
}

EXPORT cudaError_t cudaGetFuncBySymbol(cudaFunction_t *fn, const void *func)
{
    by_symbol_fn f = REAL(by_symbol);
    return f ? f(fn, dev_of(func)) : cudaErrorNotSupported;
}

EXPORT cudaError_t cudaFuncGetParamInfo(const void *func, size_t index, size_t *offset, size_t *size)
{
    param_info_fn f = REAL(param_info);
    return f ? f(dev_of(func), index, offset, size) : cudaErrorNotSupported;
}

EXPORT cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes *attr, const void *func)
{
    attributes_fn f = REAL(attributes);
    return f ? f(attr, dev_of(func)) : cudaErrorNotSupported;
}

EXPORT cudaError_t cudaFuncGetName(const char **name, const void *func)
{
    name_fn f = REAL(name);
    return f ? f(name, dev_of(func)) : cudaErrorNotSupported;
}

EXPORT cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *func);
EXPORT cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *func)
{
    get_kernel_fn f = REAL(get_kernel);
    return f ? f(kernel, dev_of(func)) : cudaErrorNotSupported;
}
