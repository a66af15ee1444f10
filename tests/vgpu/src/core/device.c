/*
 * device.c: configuration, initialisation, devices, errors and the public clock/counter
 * functions of vgpu.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core.h"

vg_state_t vg_g = {.lock = PTHREAD_MUTEX_INITIALIZER};

static pthread_once_t vg_once = PTHREAD_ONCE_INIT;
static __thread int tls_dev = -1;
static __thread cudaError_t tls_last_error = cudaSuccess;

void vg_msg(const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    /* One write per line keeps lines of concurrent ranks from interleaving. */
    char line[1100];
    int n = snprintf(line, sizeof line, "vgpu: %s\n", buf);
    if (n > (int)sizeof line - 1) {
        n = (int)sizeof line - 1;
        line[n - 1] = '\n';
    }
    ssize_t w = write(2, line, (size_t)n);
    (void)w;
}

static long env_long(const char *name, long def, long lo, long hi)
{
    const char *s = getenv(name);
    if (!s || !*s) {
        return def;
    }
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi) {
        vg_msg("%s=%s is not an integer in [%ld, %ld]; using %ld", name, s, lo, hi, def);
        return def;
    }
    return v;
}

/* The global rank places this process on a node. VGPU_RANK overrides the launcher's
 * (representative-rank runs: one process stands for rank VGPU_RANK and its group). */
static int env_rank(void)
{
    static const char *names[] = {"VGPU_RANK", "OMPI_COMM_WORLD_RANK", "RANK", "PMI_RANK",
                                  "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *s = getenv(names[i]);
        if (s && *s) {
            return atoi(s);
        }
    }
    return 0;
}

static void read_config(vg_config_t *c)
{
    c->device_count = (int)env_long("VGPU_DEVICES", 8, 1, VG_MAX_DEVICES);
    c->max_connections = (int)env_long("CUDA_DEVICE_MAX_CONNECTIONS", 8, 1, VG_MAX_QUEUES);
    c->timing_only = (int)env_long("VGPU_TIMING_ONLY", 0, 0, 1);
    c->queue_depth = (int)env_long("VGPU_QUEUE_DEPTH", 1024, 16, 1 << 24);
    c->comm_timeout_s = (double)env_long("VGPU_COMM_TIMEOUT", 60, 1, 86400);
    c->verbose = (int)env_long("VGPU_VERBOSE", 0, 0, 3);
    const char *h = getenv("VGPU_HAZARD");
    c->hazard = VG_HAZARD_WARN;
    if (h && *h) {
        if (!strcmp(h, "off") || !strcmp(h, "0")) {
            c->hazard = VG_HAZARD_OFF;
        } else if (!strcmp(h, "abort")) {
            c->hazard = VG_HAZARD_ABORT;
        } else if (strcmp(h, "warn") && strcmp(h, "1")) {
            vg_msg("VGPU_HAZARD=%s: expected off, warn or abort; using warn", h);
        }
    }
    const char *t = getenv("VGPU_TRACE");
    snprintf(c->trace_path, sizeof c->trace_path, "%s", t ? t : "");
}

static void at_exit(void)
{
    vg_sync_all();
    vg__trace_write();
}

static void init_once(void)
{
    vg_state_t *g = &vg_g;
    read_config(&g->cfg);
    g->global_rank = env_rank();
    vgpu_profile_t prof;
    vg__profile_load(getenv("VGPU_DEVICE"), &prof);
    g->ndev = g->cfg.device_count;
    for (int i = 0; i < g->ndev; i++) {
        vg_device_t *d = &g->dev[i];
        d->id = i;
        d->prof = prof;
        d->legacy.magic = VG_STREAM_MAGIC;
        d->legacy.dev = i;
        d->legacy.legacy = 1;
        d->legacy.id = 0;
        d->nstreams_made = 1;
    }
    g->next_stream_id = 1;
    __atomic_store_n(&g->inited, 1, __ATOMIC_RELEASE); /* nvtx_trace.c reads it without the once */
    if (g->cfg.verbose) {
        vg_msg("device %s x%d, %d hardware queues%s", prof.name, g->ndev,
               g->cfg.max_connections, g->cfg.timing_only ? ", timing-only" : "");
    }
    atexit(at_exit);
}

void vg__ensure_init(void) { pthread_once(&vg_once, init_once); }
void vg_init(void) { vg__ensure_init(); }

const vg_config_t *vg_config(void)
{
    vg__ensure_init();
    return &vg_g.cfg;
}

int vg_global_rank(void)
{
    vg__ensure_init();
    return vg_g.global_rank;
}

void vg_lock(void)
{
    vg__ensure_init();
    pthread_mutex_lock(&vg_g.lock);
}

void vg_unlock(void) { pthread_mutex_unlock(&vg_g.lock); }

vg_device_t *vg__dev(int id) { return &vg_g.dev[id]; }

const vgpu_profile_t *vg_profile(int dev)
{
    vg__ensure_init();
    if (dev < 0 || dev >= vg_g.ndev) {
        dev = 0;
    }
    return &vg_g.dev[dev].prof;
}

int vg_current_device(void)
{
    vg__ensure_init();
    return tls_dev < 0 ? 0 : tls_dev;
}

cudaError_t vg_set_device(int dev)
{
    vg__ensure_init();
    if (dev < 0 || dev >= vg_g.ndev) {
        return cudaErrorInvalidDevice;
    }
    tls_dev = dev;
    vg_device_activate(dev);
    return cudaSuccess;
}

void vg_device_activate(int dev)
{
    vg__ensure_init();
    if (dev >= 0 && dev < vg_g.ndev) {
        __atomic_store_n(&vg_g.dev[dev].active, 1, __ATOMIC_RELAXED);
    }
}

int vg_device_active(int dev)
{
    vg__ensure_init();
    return dev >= 0 && dev < vg_g.ndev && __atomic_load_n(&vg_g.dev[dev].active, __ATOMIC_RELAXED);
}

cudaError_t vg_record_error(cudaError_t e)
{
    if (e != cudaSuccess) {
        tls_last_error = e;
    }
    return e;
}

cudaError_t vg_get_last_error(int reset)
{
    cudaError_t e = tls_last_error;
    if (reset) {
        tls_last_error = cudaSuccess;
    }
    return e;
}

cudaError_t vg_sticky_error(int dev)
{
    vg__ensure_init();
    if (dev < 0 || dev >= vg_g.ndev) {
        return cudaSuccess;
    }
    pthread_mutex_lock(&vg_g.lock);
    cudaError_t e = vg_g.dev[dev].sticky;
    pthread_mutex_unlock(&vg_g.lock);
    return e;
}

/* ---- vgpu.h ---- */

VG_API const vgpu_profile_t *vgpu_profile(void) { return vg_profile(vg_current_device()); }

VG_API int vgpu_timing_only(void) { return vg_config()->timing_only; }

VG_API double vgpu_host_time_ns(void)
{
    vg_lock();
    double t = vg_g.host_ns;
    vg_unlock();
    return t;
}

VG_API double vgpu_device_time_ns(void)
{
    vg_lock();
    double t = vg_g.now;
    vg_unlock();
    return t;
}

VG_API void vgpu_counters(vgpu_counters_t *c)
{
    vg_sync_all();
    vg_lock();
    memset(c, 0, sizeof *c);
    for (int i = 0; i < vg_g.ndev; i++) {
        const vgpu_counters_t *d = &vg_g.dev[i].ctr;
        c->busy_ns_compute += d->busy_ns_compute;
        c->busy_ns_comm += d->busy_ns_comm;
        c->busy_ns_copy += d->busy_ns_copy;
        c->overlap_ns += d->overlap_ns;
        c->ops_completed += d->ops_completed;
        c->hazards += d->hazards;
        c->bytes_copied += d->bytes_copied;
        c->bytes_communicated += d->bytes_communicated;
    }
    vg_unlock();
    for (int i = 0; i < vg_g.ndev; i++) {
        size_t now, peak;
        vg_mem_usage(i, &now, &peak);
        c->bytes_allocated += now;
        c->peak_bytes_allocated += peak;
    }
}

VG_API void vgpu_counters_reset(void)
{
    vg_sync_all();
    vg_lock();
    for (int i = 0; i < vg_g.ndev; i++) {
        memset(&vg_g.dev[i].ctr, 0, sizeof vg_g.dev[i].ctr);
    }
    vg_unlock();
}

static int (*represent_hook)(void *, int, int);

void vg_nccl_set_represent_hook(int (*fn)(void *, int, int))
{
    __atomic_store_n(&represent_hook, fn, __ATOMIC_RELEASE);
}

VG_API int vgpu_nccl_represent(void *id, int base_global_rank, int stride)
{
    int (*fn)(void *, int, int) = __atomic_load_n(&represent_hook, __ATOMIC_ACQUIRE);
    if (!fn) {
        vg_msg("vgpu_nccl_represent: the vgpu's libnccl.so.2 is not loaded");
        return -1;
    }
    return fn(id, base_global_rank, stride);
}
