/*
 * kernel.c: the kernel registry behind vgpu_register_kernel, and kernel launches.
 *
 * A kernel is known by its host stub (what cudaLaunchKernel receives). The CUfunction
 * handed out for it by cudaGetFuncBySymbol is the registry entry's own address, so the
 * driver path (cuLaunchKernel) finds the same description. A launch copies the arguments
 * (sizes from the registration, as a real device knows them from the fatbin), asks the
 * kernel for its cost and footprint, and runs the host implementation at the op's start.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "core.h"

typedef struct kentry {
    const void *key;       /* host stub */
    vg_kernel_t k;
    UT_hash_handle hh;     /* by key */
    UT_hash_handle hh_self; /* by &k (CUfunction) */
    const void *self;
} kentry_t;

static pthread_mutex_t klock = PTHREAD_MUTEX_INITIALIZER; /* leaf lock */
static kentry_t *by_func, *by_handle;

VG_API int vgpu_register_kernel(const void *func, const vgpu_kernel_desc_t *desc)
{
    if (!func || !desc || desc->nparams < 0 || desc->nparams > VGPU_MAX_KERNEL_PARAMS) {
        return -1;
    }
    for (int i = 0; i < desc->nparams; i++) {
        if (desc->param_sizes[i] == 0 || desc->param_sizes[i] > 4096) {
            return -1;
        }
    }
    pthread_mutex_lock(&klock);
    kentry_t *e;
    HASH_FIND_PTR(by_func, &func, e);
    if (!e) {
        e = calloc(1, sizeof *e);
        if (!e) {
            pthread_mutex_unlock(&klock);
            return -1;
        }
        e->key = func;
        e->self = &e->k;
        HASH_ADD_PTR(by_func, key, e);
        HASH_ADD(hh_self, by_handle, self, sizeof(void *), e);
    }
    e->k.func = func;
    e->k.d = *desc;
    snprintf(e->k.name, sizeof e->k.name, "%s", desc->name ? desc->name : "kernel");
    e->k.d.name = e->k.name;
    pthread_mutex_unlock(&klock);
    return 0;
}

const vg_kernel_t *vg_kernel_find(const void *f)
{
    pthread_mutex_lock(&klock);
    kentry_t *e;
    HASH_FIND_PTR(by_func, &f, e);
    if (!e) {
        HASH_FIND(hh_self, by_handle, &f, sizeof(void *), e);
    }
    pthread_mutex_unlock(&klock);
    return e ? &e->k : NULL;
}

typedef struct launch_payload {
    vgpu_launch_t l;
    const vg_kernel_t *k;
    void *argv[VGPU_MAX_KERNEL_PARAMS];
    unsigned char buf[]; /* argument copies, 16-byte aligned each */
} launch_payload_t;

static void launch_exec(vg_op_t *op)
{
    launch_payload_t *p = op->payload;
    if (p->k->d.impl) {
        p->k->d.impl(&p->l);
    }
}

static void unknown_kernel(const void *func)
{
    Dl_info info;
    const char *name = NULL;
    if (dladdr(func, &info) && info.dli_sname) {
        name = info.dli_sname;
    }
    vg_msg("launch of unregistered kernel %s (%p): register it with vgpu_register_kernel",
           name ? name : "<unknown symbol>", func);
}

cudaError_t vg_launch(const void *func, dim3 grid, dim3 block, void **args, size_t shmem,
                      cudaStream_t s, const char *api)
{
    const vg_kernel_t *k = vg_kernel_find(func);
    if (!k) {
        unknown_kernel(func);
        return cudaErrorInvalidDeviceFunction;
    }
    if (!grid.x || !grid.y || !grid.z || !block.x || !block.y || !block.z ||
        (unsigned long)block.x * block.y * block.z > 1024 || block.x > 1024 || block.y > 1024 ||
        block.z > 64 || grid.y > 65535 || grid.z > 65535) {
        return cudaErrorInvalidConfiguration;
    }
    if (k->d.nparams && !args) {
        return cudaErrorInvalidValue;
    }
    cudaError_t se = vg_stream_check_current(s, api);
    if (se != cudaSuccess) {
        return se;
    }
    size_t total = 0;
    for (int i = 0; i < k->d.nparams; i++) {
        total += (k->d.param_sizes[i] + 15) & ~(size_t)15;
    }
    vg_op_t *op = vg_op_new(api, VG_COMPUTE);
    launch_payload_t *p = vg_op_payload(op, sizeof *p + total);
    size_t off = 0;
    for (int i = 0; i < k->d.nparams; i++) {
        memcpy(p->buf + off, args[i], k->d.param_sizes[i]);
        p->argv[i] = p->buf + off;
        off += (k->d.param_sizes[i] + 15) & ~(size_t)15;
    }
    p->k = k;
    p->l = (vgpu_launch_t){.name = k->name, .grid = {grid.x, grid.y, grid.z},
                           .block = {block.x, block.y, block.z}, .shmem = shmem,
                           .args = p->argv, .nargs = k->d.nparams, .prof = vg_profile(op->dev)};
    snprintf(op->name, sizeof op->name, "%.63s", k->name);
    double frac = 1.0;
    op->solo_ns = k->d.cost ? k->d.cost(&p->l, &frac) : p->l.prof->kernel_min_us * 1e3;
    op->sm_fraction = frac > 0 && frac <= 1 ? frac : 1.0;
    if (k->d.footprint) {
        vgpu_range_t r[VGPU_MAX_RANGES];
        int n = k->d.footprint(&p->l, r, VGPU_MAX_RANGES);
        for (int i = 0; i < n && i < VGPU_MAX_RANGES; i++) {
            vg_op_add_range(op, r[i].ptr, r[i].len, r[i].write);
        }
    }
    op->exec = launch_exec;
    /* Pointers are checked when the kernel runs (illegal address, sticky), as on a GPU. */
    return vg_submit_unchecked(s, op);
}

int vg_launch_attr_id_valid(int id, const char *api)
{
    if ((id >= 0 && id <= 14) || id == 16) {
        return 1;
    }
    vg_msg("%s: launch attribute %d is not a CUDA launch attribute", api, id);
    return 0;
}
