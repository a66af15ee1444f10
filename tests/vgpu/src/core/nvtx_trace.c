/*
 * nvtx_trace.c: what a program says through NVTX, in the Chrome trace (VGPU_TRACE). The
 * vgpu's NVTX injection library (src/nvtx/inject.c, libvgpu_nvtx.so, loaded by NVTX when
 * NVTX_INJECTION64_PATH names it) hands every call on to the functions below, which is how
 * a trace of the vgpu shows the names a real GPU's Nsight Systems timeline would:
 *   - a named stream's lane is called "dev D stream S: NAME";
 *   - ranges (push/pop) and marks become events on a lane of their own per host thread,
 *     "nvtx: NAME" (the thread's NVTX name, or "thread K" in order of first use), at the
 *     host's virtual time of the call: the device lanes' clock, so a range lines up with
 *     the work issued inside it.
 * Nothing is kept without VGPU_TRACE. Guarded by the device lock, like trace.c.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"

#define NT_MAX_DEPTH 64   /* open ranges per thread kept; deeper pushes are counted only */
#define NT_MAX_NAMES 256  /* named streams and threads */

typedef struct nt_rec {
    char name[96];
    char domain[24];
    int lane;      /* host lane (1-based) */
    int mark;      /* an instant, not a range */
    int open;      /* pushed, not popped yet */
    double t0, t1;
} nt_rec_t;

typedef struct nt_name {
    int dev, index;        /* a stream; dev -1: host lane `index` */
    char name[64];
} nt_name_t;

static nt_rec_t *recs;       /* guarded by the device lock */
static size_t nrecs, caprecs;
static nt_name_t names[NT_MAX_NAMES];
static int nnames;
static int nlanes;           /* host lanes handed out */

static __thread int tls_lane;                 /* this thread's host lane, 0 none yet */
static __thread char tls_name[64];            /* its NVTX name, until the lane exists */
static __thread size_t tls_stack[NT_MAX_DEPTH];
static __thread int tls_depth;                /* may exceed NT_MAX_DEPTH */

/* Only a process that uses the device writes a trace (device.c): NVTX calls alone do not
 * initialise the vgpu, or a launcher such as mpirun, which loads the same libraries and
 * never touches the device, would write an empty trace over rank 0's. */
static int tracing(void)
{
    return __atomic_load_n(&vg_g.inited, __ATOMIC_ACQUIRE) && vg_g.cfg.trace_path[0] != 0;
}

/* Lock held. Names and messages go into the JSON as they are: what would need escaping
 * becomes a space. */
static void clean(char *s)
{
    for (; *s; s++) {
        if (*s == '"' || *s == '\\' || (unsigned char)*s < 0x20) {
            *s = ' ';
        }
    }
}

/* Lock held. */
static void set_name(int dev, int index, const char *name)
{
    for (int i = 0; i < nnames; i++) {
        if (names[i].dev == dev && names[i].index == index) {
            snprintf(names[i].name, sizeof names[i].name, "%s", name);
            clean(names[i].name);
            return;
        }
    }
    if (nnames < NT_MAX_NAMES) {
        names[nnames].dev = dev;
        names[nnames].index = index;
        snprintf(names[nnames].name, sizeof names[nnames].name, "%s", name);
        clean(names[nnames].name);
        nnames++;
    }
}

/* Lock held. */
static int my_lane(void)
{
    if (!tls_lane) {
        tls_lane = ++nlanes;
        if (tls_name[0]) {
            set_name(-1, tls_lane, tls_name);
        }
    }
    return tls_lane;
}

void vg_trace_name_stream(cudaStream_t s, const char *name)
{
    if (!name || !tracing()) {
        return;
    }
    cudaError_t err = cudaSuccess;
    vg_lock();
    vg_stream_t *st = vg__stream_get(s, &err);
    if (st) {
        set_name(st->dev, st->index, name);
    }
    vg_unlock();
}

void vg_trace_name_thread(const char *name)
{
    if (!name) {
        return;
    }
    /* A thread usually names itself before the device is in use: the name waits for its
     * first range. */
    snprintf(tls_name, sizeof tls_name, "%s", name);
    if (tls_lane && tracing()) {
        vg_lock();
        set_name(-1, tls_lane, name);
        vg_unlock();
    }
}

int vg_trace_nvtx(vg_nvtx_kind_t kind, const char *domain, const char *msg)
{
    if (!tracing()) {
        return -1;
    }
    vg_lock();
    int lane = my_lane(), depth = tls_depth;
    if (kind == VG_NVTX_POP) {
        if (tls_depth == 0) {
            vg_unlock();
            return -1; /* NVTX: a pop without a push returns a negative value */
        }
        if (--tls_depth < NT_MAX_DEPTH) {
            nt_rec_t *r = &recs[tls_stack[tls_depth]];
            r->t1 = vg_g.host_ns;
            r->open = 0;
        }
        vg_unlock();
        return tls_depth;
    }
    if (nrecs == caprecs) {
        caprecs = caprecs ? caprecs * 2 : 1024;
        recs = realloc(recs, caprecs * sizeof *recs);
        if (!recs) {
            abort();
        }
    }
    nt_rec_t *r = &recs[nrecs];
    snprintf(r->name, sizeof r->name, "%s", msg && *msg ? msg : "(unnamed)");
    snprintf(r->domain, sizeof r->domain, "%s", domain ? domain : "");
    clean(r->name);
    clean(r->domain);
    r->lane = lane;
    r->mark = kind == VG_NVTX_MARK;
    r->open = !r->mark;
    r->t0 = r->t1 = vg_g.host_ns;
    if (kind == VG_NVTX_PUSH) {
        if (tls_depth < NT_MAX_DEPTH) {
            tls_stack[tls_depth] = nrecs;
        }
        tls_depth++;
    }
    nrecs++;
    vg_unlock();
    return depth;
}

const char *vg__nvtx_stream_name(int dev, int index)
{
    for (int i = 0; i < nnames; i++) {
        if (names[i].dev == dev && names[i].index == index) {
            return names[i].name;
        }
    }
    return NULL;
}

/* The tid of host lane k: apart from the streams' (dev * 10000 + stream). */
#define NT_TID(k) (1000000 + (k))

void vg__nvtx_trace_write(FILE *f, int rank)
{
    for (int k = 1; k <= nlanes; k++) {
        const char *n = vg__nvtx_stream_name(-1, k);
        char dflt[32];
        snprintf(dflt, sizeof dflt, "thread %d", k);
        fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
                "\"args\":{\"name\":\"nvtx: %s\"}}", rank, NT_TID(k), n ? n : dflt);
    }
    for (size_t i = 0; i < nrecs; i++) {
        const nt_rec_t *r = &recs[i];
        /* A range still open at exit ends where the host is then. */
        double t1 = r->open ? vg_g.host_ns : r->t1;
        fprintf(f, ",\n{\"name\":\"%s", r->name);
        if (r->mark) {
            fprintf(f, "\",\"cat\":\"nvtx\",\"ph\":\"i\",\"s\":\"t\",\"pid\":%d,\"tid\":%d,"
                    "\"ts\":%.3f,\"args\":{\"domain\":\"%s\"}}", rank, NT_TID(r->lane),
                    r->t0 / 1e3, r->domain);
        } else {
            fprintf(f, "\",\"cat\":\"nvtx\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,"
                    "\"dur\":%.3f,\"args\":{\"domain\":\"%s\"}}", rank, NT_TID(r->lane),
                    r->t0 / 1e3, (t1 - r->t0) / 1e3, r->domain);
        }
    }
}
