/*
 * nvtx.c: the dispatcher's NVTX ranges and stream names (nvtx.h). NVTX 3 is header-only
 * (the CUDA toolkit's include/nvtx3): its calls are no-ops until a tool's injection library
 * is found on the first call (NVTX_INJECTION64_PATH; nvtx3/nvtxDetail/nvtxInit.h), so the
 * shim needs no library for it. The headers are included here only, so that the rest of the
 * scheduler neither sees nor pays for them.
 *
 * Whether a tool listens is asked once: nvtxDomainCreateA returns NULL when none does (its
 * no-op answers 0), and from then on every function returns after one load. Only then is
 * any text formatted.
 */
#define _GNU_SOURCE
#include "nvtx.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/config.h"

#if DH_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtCudaRt.h>

static pthread_once_t dh__nvtx_once = PTHREAD_ONCE_INIT;
static _Atomic int dh__nvtx_on = -1; /* -1 not asked yet, 0 no tool, 1 a tool listens */
static nvtxDomainHandle_t dh__nvtx_domain;
/* Dispatcher thread only: */
static uint64_t dh__group;      /* the group of the latest op replayed in this batch */
static int dh__group_seen;       /* dh__group is set */
static int dh__pair_open;        /* a pair range is open (for dh__group) */
static int dh__phase = -1;       /* auto mode's phase range: the mode it stands for, -1 none */

static void dh__nvtx_init(void)
{
    dh__nvtx_domain = nvtxDomainCreateA("dhelix");
    atomic_store(&dh__nvtx_on, dh__nvtx_domain != NULL);
}

static int dh__on(void)
{
    int on = atomic_load_explicit(&dh__nvtx_on, memory_order_acquire); /* then the domain */
    if (on < 0) {
        pthread_once(&dh__nvtx_once, dh__nvtx_init);
        on = atomic_load(&dh__nvtx_on);
    }
    return on;
}

static void dh__range_push(const char *msg)
{
    nvtxEventAttributes_t a = {0};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = msg;
    nvtxDomainRangePushEx(dh__nvtx_domain, &a);
}

static void dh__range_mark(const char *msg)
{
    nvtxEventAttributes_t a = {0};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = msg;
    nvtxDomainMarkEx(dh__nvtx_domain, &a);
}

void dh__nvtx_thread_start(void)
{
    if (dh__on())
        nvtxNameOsThreadA((uint32_t)syscall(SYS_gettid), "dhelix dispatcher");
}

void dh__nvtx_thread_stop(void)
{
    if (!dh__on())
        return;
    dh__nvtx_batch_end();
    if (dh__phase >= 0)
        nvtxDomainRangePop(dh__nvtx_domain);
    dh__phase = -1;
}

void dh__nvtx_name_strands(cudaStream_t a, cudaStream_t b)
{
    if (!dh__on())
        return;
    if (a != NULL && a != cudaStreamLegacy && a != cudaStreamPerThread)
        nvtxNameCudaStreamA(a, "dhelix strand a");
    nvtxNameCudaStreamA(b, "dhelix strand b");
}

static const char *dh__phase_name(int mode)
{
    switch (mode) {
    case DH_MODE_PROFILE:
        return "profiling";
    case DH_MODE_PLAN:
        return "strand interleaving";
    case DH_MODE_PASSTHROUGH:
        return "program order";
    default:
        return dh_mode_name((dh_mode_t)mode);
    }
}

void dh__nvtx_mode(int mode, int is_auto)
{
    if (!is_auto || mode == dh__phase || !dh__on())
        return;
    char msg[96];
    if (dh__phase >= 0) {
        nvtxDomainRangePop(dh__nvtx_domain);
        snprintf(msg, sizeof msg, "dhelix auto: switch to %s", dh__phase_name(mode));
        dh__range_mark(msg);
    }
    snprintf(msg, sizeof msg, "dhelix auto: %s", dh__phase_name(mode));
    dh__range_push(msg);
    dh__phase = mode;
}

void dh__nvtx_item(const dh_batch_t *b, size_t i)
{
    const dh_op_t *op = b->items[i].op;
    if (!op || !dh__on() || (dh__group_seen && op->group == dh__group))
        return;
    /* A new group starts here: its ops run until the next op of another group (the
     * barriers between them belong to it). */
    dh__nvtx_batch_end();
    dh__group = op->group;
    dh__group_seen = 1;
    unsigned n[2] = {0, 0};
    for (size_t j = i; j < b->n; j++) {
        const dh_item_t *it = &b->items[j];
        if (it->op && it->op->group != op->group)
            break;
        if (it->op)
            n[it->strand == 1]++;
    }
    if (!n[0] || !n[1])
        return;
    char msg[96];
    snprintf(msg, sizeof msg, "dhelix pair %llu (a %u || b %u)", (unsigned long long)op->group,
             n[0], n[1]);
    dh__range_push(msg);
    dh__pair_open = 1;
}

void dh__nvtx_batch_end(void)
{
    if (dh__pair_open)
        nvtxDomainRangePop(dh__nvtx_domain);
    dh__pair_open = dh__group_seen = 0;
}

#else /* no NVTX headers: nothing to tell */

void dh__nvtx_thread_start(void) {}
void dh__nvtx_thread_stop(void) {}
void dh__nvtx_name_strands(cudaStream_t a, cudaStream_t b) { (void)a, (void)b; }
void dh__nvtx_mode(int mode, int is_auto) { (void)mode, (void)is_auto; }
void dh__nvtx_item(const dh_batch_t *b, size_t i) { (void)b, (void)i; }
void dh__nvtx_batch_end(void) {}

#endif
