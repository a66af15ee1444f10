/*
 * ops.c: the operations the runtime and the driver share: copies, memsets and host
 * functions.
 *
 * Copies follow the CUDA documentation on synchronous behaviour: a host-to-device copy from
 * pageable memory is staged at the call (the caller may reuse its buffer at once); a
 * device-to-host copy into pageable memory returns when it is done; copies involving
 * pinned memory read or write it when they run on the device.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"

typedef struct copy_payload {
    unsigned char *dst;
    const unsigned char *src;
    size_t width, height, dpitch, spitch;
    unsigned char *staged; /* owned copy of a pageable source */
} copy_payload_t;

static void copy_release(vg_op_t *op)
{
    copy_payload_t *c = op->payload;
    free(c->staged);
    free(c);
}

static void copy_exec(vg_op_t *op)
{
    copy_payload_t *c = op->payload;
    const unsigned char *src = c->staged ? c->staged : c->src;
    size_t sp = c->staged ? c->width : c->spitch;
    for (size_t r = 0; r < c->height; r++) {
        memmove(c->dst + r * c->dpitch, src + r * sp, c->width);
    }
}

/* Declares the range of one side of a copy: 2 device memory, 1 pinned host memory (both
 * device-visible), 0 pageable host memory, -1 invalid (freed, or running past an end). */
static int side(const void *p, size_t span, int must_be_device, vg_op_t *op, int write)
{
    vg_alloc_info_t info;
    int f = vg_mem_find(p, span, &info);
    if (f < 0 || (f == 0 && (must_be_device || vg_mem_find(p, 1, NULL) != 0))) {
        return -1;
    }
    if (f == 0) {
        return 0;
    }
    vg_op_add_range(op, p, span, write);
    return info.kind == VG_MEM_HOST ? 1 : 2;
}

cudaError_t vg_memcpy2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                          size_t height, enum cudaMemcpyKind kind, cudaStream_t s, int blocking,
                          const char *api)
{
    if (!width || !height) return cudaSuccess;
    if (!dst || !src || dpitch < width || spitch < width || kind > cudaMemcpyDefault)
        return cudaErrorInvalidValue;
    cudaError_t se = vg_stream_check(s);
    if (se) return se;
    size_t dspan = dpitch * (height - 1) + width, sspan = spitch * (height - 1) + width;
    vg_op_t *op = vg_op_new(api, VG_COPY);
    int ddev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    int sdev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    int dk = side(dst, dspan, ddev, op, 1), sk = side(src, sspan, sdev, op, 0);
    if (dk < 0 || sk < 0) {
        vg_msg("%s: %s pointer is not %s", api, dk < 0 ? "destination" : "source",
               (dk < 0 ? ddev : sdev) ? "inside a live device allocation" : "valid");
        vg_op_discard(op);
        return cudaErrorInvalidValue;
    }
    /* The direction follows where the bytes are, whatever kind says (UVA semantics). */
    enum cudaMemcpyKind eff = dk == 2 && sk == 2 ? cudaMemcpyDeviceToDevice
                              : dk == 2          ? cudaMemcpyHostToDevice
                              : sk == 2          ? cudaMemcpyDeviceToHost
                                                 : cudaMemcpyHostToHost;
    copy_payload_t *c = vg_op_payload(op, sizeof *c);
    op->release = copy_release;
    *c = (copy_payload_t){dst, src, width, height, dpitch, spitch, NULL};
    if (!sk && !vg_config()->timing_only) { /* pageable source: staged now */
        c->staged = malloc(width * height);
        if (!c->staged) {
            vg_op_discard(op);
            return cudaErrorMemoryAllocation;
        }
        for (size_t r = 0; r < height; r++) {
            memcpy(c->staged + r * width, (const unsigned char *)src + r * spitch, width);
        }
    }
    op->link = eff;
    op->bytes = width * height;
    op->solo_ns = vg_cost_copy(vg_profile(vg_current_device()), (double)(width * height), eff);
    op->exec = copy_exec;
    snprintf(op->name, sizeof op->name, "memcpy %s %zuB",
             eff == cudaMemcpyHostToDevice ? "HtoD" : eff == cudaMemcpyDeviceToHost ? "DtoH"
             : eff == cudaMemcpyDeviceToDevice ? "DtoD" : "HtoH", width * height);
    cudaError_t e = vg_submit_unchecked(s, op);
    if (e == cudaSuccess && (blocking || (dk == 0 && eff == cudaMemcpyDeviceToHost))) {
        e = vg_stream_sync(s); /* pageable destination: returns when the copy is done */
    }
    return e;
}

typedef struct set_payload {
    unsigned char *dst;
    int value;
    size_t n;
} set_payload_t;

static void set_exec(vg_op_t *op)
{
    set_payload_t *p = op->payload;
    memset(p->dst, p->value, p->n);
}

cudaError_t vg_memset(void *d, int v, size_t n, cudaStream_t s, int blocking, const char *api)
{
    if (!n) return cudaSuccess;
    vg_op_t *op = vg_op_new(api, VG_COMPUTE);
    set_payload_t *p = vg_op_payload(op, sizeof *p);
    *p = (set_payload_t){d, v, n};
    vg_op_add_range(op, d, n, 1);
    op->solo_ns = vg_cost_mem(vg_profile(vg_current_device()), (double)n);
    op->exec = set_exec;
    snprintf(op->name, sizeof op->name, "memset %zuB", n);
    cudaError_t e = vg_submit(s, op);
    return e == cudaSuccess && blocking ? vg_stream_sync(s) : e;
}

typedef struct host_payload {
    cudaHostFn_t fn;
    void *data;
} host_payload_t;

/* Runs on whichever thread advances the simulation, with the device lock held: like CUDA,
 * a host function must not call the CUDA API. */
static void host_exec(vg_op_t *op)
{
    host_payload_t *h = op->payload;
    h->fn(h->data);
}

cudaError_t vg_host_func(cudaStream_t s, cudaHostFn_t fn, void *data)
{
    if (!fn) return cudaErrorInvalidValue;
    vg_op_t *op = vg_op_new("cudaLaunchHostFunc", VG_HOST);
    host_payload_t *h = vg_op_payload(op, sizeof *h);
    h->fn = fn;
    h->data = data;
    op->exec = host_exec;
    op->exec_always = 1;
    op->solo_ns = 1000; /* the device-side cost of handing control to the host */
    snprintf(op->name, sizeof op->name, "host function");
    return vg_submit_unchecked(s, op);
}
