/*
 * emucomm.c: emulated communication (see emucomm.h): the --emulate-comm specification, the
 * replacement of each collective, the vgpu's host form of the kernel (implementation, cost,
 * footprint) and the summary line. The device form is cuda/emucomm.cu.
 */
#include "emucomm.h"

#include <math.h>
#include <mpi.h>
#include <string.h>

#include "kernels.h"

/* Launches measured one by one; later ones run unmeasured. */
#define EMU_SLOTS 65536
/* Flags: one per block, for up to this many blocks. */
#define EMU_MAX_SMS 1024

enum { EMU_OFF, EMU_KERNEL, EMU_NCCL };

/* Written by wl_emu_parse before any thread; the device buffers by the first
 * wl_emu_connect; the counters by the issuing threads, one at a time (emucomm.h). */
static struct {
    int mode, sms;
    double us, gbps;
    unsigned long long *flags;          /* device, EMU_MAX_SMS */
    unsigned long long *t_start, *t_end; /* device, EMU_SLOTS each */
    long long collectives, measured;
    double bytes, target_ns;
} E;

int wl_emu_parse(const char *spec, char *err, size_t errlen)
{
    memset(&E, 0, sizeof E);
    if (!strcmp(spec, "nccl")) {
        E.mode = EMU_NCCL;
        return 0;
    }
    char *end = NULL;
    long sms = strtol(spec, &end, 10);
    double us = -1, gbps = 0;
    if (end != spec && *end == ':') {
        const char *p = end + 1;
        us = strtod(p, &end);
        if (end == p) us = -1;
        if (us >= 0 && *end == ':') {
            p = end + 1;
            gbps = strtod(p, &end);
            if (end == p) gbps = -1;
        }
    }
    if (sms < 1 || sms > EMU_MAX_SMS || !(us >= 0) || !(gbps >= 0) || !isfinite(us) ||
        !isfinite(gbps) || *end) {
        snprintf(err, errlen, "--emulate-comm %s: expected nccl or SMS:US[:GBPS] (SMS 1..%d, US >= 0, "
                 "GBPS >= 0)", spec, EMU_MAX_SMS);
        return -1;
    }
    E.mode = EMU_KERNEL;
    E.sms = (int)sms;
    E.us = us;
    E.gbps = gbps;
    return 0;
}

int wl_emu_group(const wl_group_t *g) { return E.mode != EMU_OFF && g->size > 1 && !g->real; }

void wl_emu_connect(wl_group_t *g)
{
    if (E.mode == EMU_NCCL) {
        ncclUniqueId id;
        ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
        c.commName = g->desc;
        WL_CK(ncclGetUniqueId(&id));
        WL_CK(ncclCommInitRankConfig(&g->comm, 1, id, 0, &c));
        return;
    }
    if (E.flags) return;
    WL_CK(cudaMalloc((void **)&E.flags, EMU_MAX_SMS * sizeof(unsigned long long)));
    WL_CK(cudaMemset(E.flags, 0, EMU_MAX_SMS * sizeof(unsigned long long)));
    if (wl_vgpu_timing_only()) return; /* no memory behind allocations: nothing to read back */
    WL_CK(cudaMalloc((void **)&E.t_start, EMU_SLOTS * sizeof(unsigned long long)));
    WL_CK(cudaMalloc((void **)&E.t_end, EMU_SLOTS * sizeof(unsigned long long)));
    WL_CK(cudaMemset(E.t_start, 0xff, EMU_SLOTS * sizeof(unsigned long long)));
    WL_CK(cudaMemset(E.t_end, 0, EMU_SLOTS * sizeof(unsigned long long)));
}

/* ---- kernel mode ---- */

static size_t dt_size(ncclDataType_t t)
{
    switch (t) {
    case ncclFloat32: case ncclInt32: case ncclUint32: return 4;
    case ncclFloat64: case ncclInt64: case ncclUint64: return 8;
    case ncclInt8: case ncclUint8: return 1;
    default: return 2; /* the 16-bit floats */
    }
}

/* One launch on s with the segments in a, moving payload bytes at the emulated speed
 * (factor: NCCL's bus factor of the collective). */
static void launch(wl_emu_args_t *a, double payload, double factor, cudaStream_t s)
{
    double target = E.us * 1e3 + (E.gbps > 0 ? payload * factor / E.gbps : 0);
    a->sms = E.sms;
    a->target_ns = (int64_t)llround(target);
    a->flags = E.flags;
    if (E.t_start && E.collectives < EMU_SLOTS) {
        a->t_start = E.t_start + E.collectives;
        a->t_end = E.t_end + E.collectives;
        E.measured++;
    }
    E.collectives++;
    E.bytes += payload;
    E.target_ns += (double)a->target_ns;
    cudaStream_t cur = wl_cur_stream();
    wl_set_cur_stream(s);
    WL_LAUNCH(EMU_COMM, *a, (int64_t)E.sms * 256); /* 256 threads a block: E.sms blocks */
    wl_set_cur_stream(cur);
}

static void seg(wl_emu_args_t *a, const void *src, void *dst, size_t bytes)
{
    if (bytes == 0) return;
    a->seg[a->nseg++] = (wl_emu_seg_t){src, dst, (int64_t)bytes};
}

static void kernel_collective(wl_group_t *g, wl_emu_coll_t kind, const void *in, void *out, size_t n,
                              ncclDataType_t t, cudaStream_t s)
{
    size_t chunk = n * dt_size(t), N = (size_t)g->size, r = (size_t)g->rank;
    double ring = (double)(N - 1) / (double)N;
    wl_emu_args_t a;
    memset(&a, 0, sizeof a);
    switch (kind) {
    case WL_EMU_ALLREDUCE:
        seg(&a, out, out, chunk);
        launch(&a, (double)chunk, 2 * ring, s);
        break;
    case WL_EMU_BROADCAST:
        seg(&a, out, out, chunk);
        launch(&a, (double)chunk, 1, s);
        break;
    case WL_EMU_ALLGATHER:
        seg(&a, in, (char *)out + r * chunk, chunk);
        seg(&a, NULL, out, r * chunk);
        seg(&a, NULL, (char *)out + (r + 1) * chunk, (N - r - 1) * chunk);
        launch(&a, (double)(N * chunk), ring, s);
        break;
    case WL_EMU_REDUCE_SCATTER:
        seg(&a, (const char *)in + r * chunk, out, chunk);
        launch(&a, (double)(N * chunk), ring, s);
        break;
    }
}

/* ---- nccl mode ---- */

static void zero(void *p, size_t bytes, cudaStream_t s)
{
    if (bytes) WL_CK(cudaMemsetAsync(p, 0, bytes, s));
}

static void nccl_collective(wl_group_t *g, wl_emu_coll_t kind, const void *in, void *out, size_t n,
                            ncclDataType_t t, ncclRedOp_t op, cudaStream_t s)
{
    size_t chunk = n * dt_size(t), N = (size_t)g->size, r = (size_t)g->rank;
    E.collectives++;
    switch (kind) {
    case WL_EMU_ALLREDUCE:
        E.bytes += (double)chunk;
        WL_CK(ncclAllReduce(out, out, n, t, op, g->comm, s));
        break;
    case WL_EMU_BROADCAST:
        E.bytes += (double)chunk;
        WL_CK(ncclBroadcast(out, out, n, t, 0, g->comm, s));
        break;
    case WL_EMU_ALLGATHER:
        E.bytes += (double)(N * chunk);
        WL_CK(ncclAllGather(in, (char *)out + r * chunk, n, t, g->comm, s));
        zero(out, r * chunk, s);
        zero((char *)out + (r + 1) * chunk, (N - r - 1) * chunk, s);
        break;
    case WL_EMU_REDUCE_SCATTER:
        E.bytes += (double)(N * chunk);
        WL_CK(ncclReduceScatter((const char *)in + r * chunk, out, n, t, ncclSum, g->comm, s));
        break;
    }
}

void wl_emu_collective(wl_group_t *g, wl_emu_coll_t kind, const void *in, void *out, size_t n,
                       ncclDataType_t t, ncclRedOp_t op, cudaStream_t s)
{
    if (E.mode == EMU_NCCL) nccl_collective(g, kind, in, out, n, t, op, s);
    else kernel_collective(g, kind, in, out, n, t, s);
}

void wl_emu_p2p(wl_group_t *g, const wl_p2p_t *ops, int nops, ncclDataType_t t, cudaStream_t s)
{
    (void)g;
    double payload = 0;
    for (int i = 0; i < nops; i++) payload += (double)(ops[i].n * dt_size(t));
    wl_emu_args_t a;
    memset(&a, 0, sizeof a);
    int first = 1;
    for (int i = 0; i < nops; i++) {
        if (ops[i].send) continue;
        size_t bytes = ops[i].n * dt_size(t);
        if (E.mode == EMU_NCCL) {
            zero(ops[i].buf, bytes, s);
            continue;
        }
        if (a.nseg == WL_EMU_SEGS) { /* more receives than one launch holds */
            launch(&a, first ? payload : 0, 1, s);
            memset(&a, 0, sizeof a);
            first = 0;
        }
        seg(&a, NULL, ops[i].buf, bytes);
    }
    if (E.mode == EMU_NCCL) {
        E.collectives++;
        E.bytes += payload;
    } else if (a.nseg || first) {
        launch(&a, first ? payload : 0, 1, s);
    }
}

/* ---- summary ---- */

static double measured_us(void)
{
    if (!E.t_start || E.measured == 0) return E.mode == EMU_NCCL ? -1 : 0;
    size_t n = (size_t)E.measured;
    unsigned long long *st = malloc(n * sizeof *st), *en = malloc(n * sizeof *en);
    if (!st || !en) wl_fatal("out of memory");
    WL_CK(cudaMemcpy(st, E.t_start, n * sizeof *st, cudaMemcpyDeviceToHost));
    WL_CK(cudaMemcpy(en, E.t_end, n * sizeof *en, cudaMemcpyDeviceToHost));
    double ns = 0;
    for (size_t i = 0; i < n; i++)
        if (en[i] >= st[i]) ns += (double)(en[i] - st[i]);
    free(st);
    free(en);
    return ns / 1e3;
}

void wl_emu_fini(void)
{
    if (E.mode == EMU_OFF) return;
    double dev = measured_us();
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0)
        fprintf(stderr, "workload: emulated communication {\"mode\": \"%s\", \"sms\": %d, \"us\": %g, "
                "\"gbps\": %g, \"collectives\": %lld, \"bytes\": %.0f, \"target_us\": %.3f, "
                "\"device_us\": %.3f, \"measured\": %lld}\n",
                E.mode == EMU_NCCL ? "nccl" : "kernel", E.sms, E.us, E.gbps, E.collectives, E.bytes,
                E.target_ns / 1e3, dev, E.mode == EMU_NCCL ? 0 : E.measured);
    if (E.flags) WL_CK(cudaFree(E.flags));
    if (E.t_start) WL_CK(cudaFree(E.t_start));
    if (E.t_end) WL_CK(cudaFree(E.t_end));
    E.flags = E.t_start = E.t_end = NULL;
}

/* ---- the vgpu's form of the kernel ---- */

static double emu_traffic(const wl_emu_args_t *a)
{
    double bytes = 0;
    for (int i = 0; i < a->nseg; i++) bytes += (double)a->seg[i].bytes * (a->seg[i].src ? 2 : 1);
    return bytes;
}

static double emu_cost(const vgpu_launch_t *l, double *sm)
{
    const wl_emu_args_t *a = WL_ARGS(l, wl_emu_args_t);
    double copy = wl__cost_bytes(l, emu_traffic(a));
    *sm = l->prof->sm_count > 0 && a->sms < l->prof->sm_count ? (double)a->sms / l->prof->sm_count : 1.0;
    return copy > (double)a->target_ns ? copy : (double)a->target_ns;
}

static void emu_impl(const vgpu_launch_t *l)
{
    const wl_emu_args_t *a = WL_ARGS(l, wl_emu_args_t);
    for (int i = 0; i < a->nseg; i++) {
        const wl_emu_seg_t *s = &a->seg[i];
        if (!s->src) memset(s->dst, 0, (size_t)s->bytes);
        else if (s->src != s->dst) memmove(s->dst, s->src, (size_t)s->bytes);
    }
    if (a->t_start) { /* the modelled solo time stands for the measured one */
        double sm;
        *a->t_start = 0;
        *a->t_end = (unsigned long long)llround(emu_cost(l, &sm));
    }
}

static int emu_fp(const vgpu_launch_t *l, vgpu_range_t *r, int max)
{
    const wl_emu_args_t *a = WL_ARGS(l, wl_emu_args_t);
    int n = 0;
    for (int i = 0; i < a->nseg; i++) {
        const wl_emu_seg_t *s = &a->seg[i];
        if (s->src && s->src != s->dst) n = wl__range(r, n, max, s->src, (double)s->bytes, 0);
        n = wl__range(r, n, max, s->dst, (double)s->bytes, 1);
    }
    return n;
}

const wl_khost_t wl_khost_emu[] = {
    {WL_K_EMU_COMM, emu_impl, emu_cost, emu_fp},
    {-1, NULL, NULL, NULL},
};
