/*
 * trace.c: the Chrome trace (VGPU_TRACE=path). One record per completed operation, written
 * at exit as {"traceEvents": [...]}: pid is the global rank, one lane (tid) per stream,
 * named "dev D stream S", and a counter "device memory (dev D)" (MiB in use after each
 * allocation and free, at the host's virtual time of the call); a stream named through
 * NVTX has its name after the lane's, and NVTX ranges and marks have lanes of their own
 * (nvtx_trace.c). Each op's args carry its place in the device's issue order ("issue"), the
 * host time it was issued ("issued") and its time alone ("solo"), so that a reader can match
 * ops to the program and tell waiting from slowing (scripts/bench.d/planstat.py). Times are
 * virtual microseconds. Nothing in it depends on host
 * addresses, so two runs of one program write identical files. In the path, %r becomes the
 * global rank and %p the pid; with several ranks and no %r, ".r<rank>" goes before the
 * extension so ranks do not overwrite each other.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core.h"

typedef struct trace_rec {
    const char *api;
    char name[64];
    char args[96];
    int dev, stream, cls;
    double t0, t1;
    uint64_t issue;     /* the op's place in the device's issue order */
    double t_issue;     /* host virtual time of its issue */
    double solo;        /* its time alone (the profile's cost) */
} trace_rec_t;

static trace_rec_t *recs; /* guarded by the device lock */
static size_t nrecs, caprecs;
static char lanes[VG_MAX_DEVICES][1024]; /* streams seen per device (bitmap) */

static const char *class_name(int c)
{
    static const char *n[] = {"marker", "compute", "comm", "copy", "host"};
    return c >= 0 && c < VG_NCLASS ? n[c] : "?";
}

void vg__trace_op(const vg_op_t *op)
{
    if (!vg_g.cfg.trace_path[0] || op->cls == VG_MARKER) {
        return;
    }
    if (nrecs == caprecs) {
        caprecs = caprecs ? caprecs * 2 : 4096;
        recs = realloc(recs, caprecs * sizeof *recs);
        if (!recs) {
            abort();
        }
    }
    trace_rec_t *r = &recs[nrecs++];
    r->api = op->api;
    memcpy(r->name, op->name, sizeof r->name);
    memcpy(r->args, op->trace_args, sizeof r->args);
    r->dev = op->dev;
    r->stream = op->stream->index;
    r->cls = op->cls;
    r->t0 = op->t_start;
    r->t1 = op->t_end;
    r->issue = op->seq;
    r->t_issue = op->t_issue;
    r->solo = op->solo_ns;
    if (r->stream < 8192) {
        lanes[r->dev][r->stream / 8] |= (char)(1 << (r->stream % 8));
    }
}

static void expand_path(char *out, size_t n, const char *in, int rank)
{
    size_t o = 0;
    int has_rank = 0;
    for (const char *p = in; *p && o + 16 < n; p++) {
        if (p[0] == '%' && p[1] == 'r') {
            o += (size_t)snprintf(out + o, n - o, "%d", rank);
            has_rank = 1;
            p++;
        } else if (p[0] == '%' && p[1] == 'p') {
            o += (size_t)snprintf(out + o, n - o, "%d", (int)getpid());
            p++;
        } else {
            out[o++] = *p;
        }
    }
    out[o] = 0;
    const char *ws = getenv("OMPI_COMM_WORLD_SIZE");
    if (!ws) {
        ws = getenv("WORLD_SIZE");
    }
    if (!has_rank && ws && atoi(ws) > 1) {
        char tmp[4200];
        char *dot = strrchr(out, '.');
        char *slash = strrchr(out, '/');
        if (dot && (!slash || dot > slash)) {
            snprintf(tmp, sizeof tmp, "%.*s.r%d%s", (int)(dot - out), out, rank, dot);
        } else {
            snprintf(tmp, sizeof tmp, "%s.r%d", out, rank);
        }
        snprintf(out, n, "%.4095s", tmp);
    }
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') {
            fputc('\\', f);
        }
        fputc((unsigned char)*s < 0x20 ? ' ' : *s, f);
    }
    fputc('"', f);
}

void vg__trace_write(void)
{
    vg_lock();
    if (!vg_g.cfg.trace_path[0]) {
        vg_unlock();
        return;
    }
    char path[4096];
    int rank = vg_g.global_rank;
    expand_path(path, sizeof path, vg_g.cfg.trace_path, rank);
    FILE *f = fopen(path, "w");
    if (!f) {
        vg_msg("VGPU_TRACE=%s: cannot write %s", vg_g.cfg.trace_path, path);
        vg_unlock();
        return;
    }
    fprintf(f, "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
    fprintf(f, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"rank %d (%s)\"}}",
            rank, rank, vg_g.dev[0].prof.name);
    for (int d = 0; d < vg_g.ndev; d++) {
        for (int s = 0; s < 8192; s++) {
            if (lanes[d][s / 8] & (1 << (s % 8))) {
                const char *nv = vg__nvtx_stream_name(d, s);
                fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
                        "\"args\":{\"name\":\"dev %d stream %d%s%s%s\"}}",
                        rank, d * 10000 + s, d, s, s == 0 ? " (legacy)" : "", nv ? ": " : "",
                        nv ? nv : "");
            }
        }
    }
    for (size_t i = 0; i < nrecs; i++) {
        const trace_rec_t *r = &recs[i];
        fprintf(f, ",\n{\"name\":");
        json_str(f, r->name[0] ? r->name : r->api);
        fprintf(f, ",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,"
                "\"args\":{\"api\":\"%s\",\"issue\":%llu,\"issued\":%.3f,\"solo\":%.3f%s%s}}",
                class_name(r->cls), rank, r->dev * 10000 + r->stream, r->t0 / 1e3,
                (r->t1 - r->t0) / 1e3, r->api, (unsigned long long)r->issue, r->t_issue / 1e3,
                r->solo / 1e3, r->args[0] ? "," : "", r->args);
    }
    vg__mem_trace_write(f, rank);
    vg__nvtx_trace_write(f, rank);
    fprintf(f, "\n]}\n");
    fclose(f);
    if (vg_g.cfg.verbose) {
        vg_msg("trace of %zu operations written to %s", nrecs, path);
    }
    vg_unlock();
}
