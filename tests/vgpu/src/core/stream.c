/*
 * stream.c: streams, events and the calls that make the host wait.
 *
 * Handles are pointers to the structures below, kept in registries so that a stale or
 * foreign handle is an error (cudaErrorInvalidResourceHandle), never a crash. A destroyed
 * stream that still has work stays allocated until process exit, because its queued
 * operations point to it (CUDA lets a program destroy a stream with pending work).
 *
 * Waiting. A synchronising call runs the simulation until what it waits for is done and
 * moves the host clock to that moment. A query only lets the simulation catch up with the
 * host clock. A thread that issued work and then polls a query many times without issuing
 * more is waiting in a loop: after VG_SPIN_LIMIT not-ready answers in a row the query waits
 * for real, so such loops end, deterministically. Threads that never issue work (a
 * watchdog) never advance time by polling.
 */
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "core.h"

#define VG_SPIN_LIMIT 256

typedef struct handle_entry {
    const void *key;
    UT_hash_handle hh;
} handle_entry_t;

static handle_entry_t *live_streams, *live_events; /* guarded by the device lock */
static __thread vg_stream_t *tls_per_thread[VG_MAX_DEVICES];
static __thread uint64_t tls_spin_issue_mark;
static __thread unsigned tls_spins;

static void reg_add(handle_entry_t **set, const void *key)
{
    handle_entry_t *e = malloc(sizeof *e);
    if (!e) {
        abort();
    }
    e->key = key;
    HASH_ADD_PTR(*set, key, e);
}

static int reg_del(handle_entry_t **set, const void *key)
{
    handle_entry_t *e;
    HASH_FIND_PTR(*set, &key, e);
    if (!e) {
        return -1;
    }
    HASH_DEL(*set, e);
    free(e);
    return 0;
}

static int reg_has(handle_entry_t *set, const void *key)
{
    handle_entry_t *e;
    HASH_FIND_PTR(set, &key, e);
    return e != NULL;
}

static vg_stream_t *stream_new(int dev, unsigned flags, int priority)
{
    vg_device_t *d = vg__dev(dev);
    vg_stream_t *s = calloc(1, sizeof *s);
    if (!s) {
        return NULL;
    }
    s->magic = VG_STREAM_MAGIC;
    s->dev = dev;
    s->index = d->nstreams_made++;
    s->hwq = s->index % vg_g.cfg.max_connections;
    s->flags = flags;
    s->priority = priority;
    s->id = vg_g.next_stream_id++;
    s->next_all = d->streams;
    d->streams = s;
    reg_add(&live_streams, s);
    return s;
}

vg_stream_t *vg__stream_get(cudaStream_t h, cudaError_t *err)
{
    int dev = vg_current_device();
    if (h == NULL || h == cudaStreamLegacy) {
        return &vg__dev(dev)->legacy;
    }
    if (h == cudaStreamPerThread) {
        if (!tls_per_thread[dev]) {
            tls_per_thread[dev] = stream_new(dev, cudaStreamDefault, 0);
        }
        return tls_per_thread[dev];
    }
    if (!reg_has(live_streams, h)) {
        *err = cudaErrorInvalidResourceHandle;
        return NULL;
    }
    return (vg_stream_t *)h;
}

cudaError_t vg_stream_check(cudaStream_t s)
{
    cudaError_t err = cudaSuccess;
    vg_lock();
    vg_stream_t *st = vg__stream_get(s, &err);
    vg_unlock();
    return st ? cudaSuccess : err;
}

cudaError_t vg_stream_check_current(cudaStream_t s, const char *api)
{
    cudaError_t err = cudaSuccess;
    int cur = vg_current_device();
    vg_lock();
    vg_stream_t *st = vg__stream_get(s, &err);
    int dev = st ? st->dev : cur;
    vg_unlock();
    if (!st) {
        return err;
    }
    if (dev != cur) {
        vg_msg("%s: the stream belongs to device %d but the calling thread's current device "
               "is %d", api, dev, cur);
        return cudaErrorInvalidResourceHandle;
    }
    return cudaSuccess;
}

cudaError_t vg_stream_create(cudaStream_t *out, unsigned flags, int priority)
{
    if (!out || (flags & ~(unsigned)cudaStreamNonBlocking)) {
        return cudaErrorInvalidValue;
    }
    vg_lock();
    vg_stream_t *s = stream_new(vg_current_device(), flags, priority > 0 ? 0 : priority);
    vg_unlock();
    if (!s) {
        return cudaErrorMemoryAllocation;
    }
    *out = (cudaStream_t)s;
    return cudaSuccess;
}

cudaError_t vg_stream_destroy(cudaStream_t h)
{
    if (h == NULL || h == cudaStreamLegacy || h == cudaStreamPerThread) {
        return cudaErrorInvalidResourceHandle;
    }
    vg_lock();
    if (reg_del(&live_streams, h)) {
        vg_unlock();
        return cudaErrorInvalidResourceHandle;
    }
    vg_stream_t *s = (vg_stream_t *)h;
    vg_device_t *d = vg__dev(s->dev);
    for (vg_stream_t **pp = &d->streams; *pp; pp = &(*pp)->next_all) {
        if (*pp == s) {
            *pp = s->next_all;
            break;
        }
    }
    s->destroyed = 1;
    if (!s->last || vg__op_done(s->last)) {
        vg__op_unref(s->last);
        free(s);
    }
    vg_unlock();
    return cudaSuccess;
}

/* Lock held. Waits until op is done and moves the host clock to its completion. */
static cudaError_t wait_op(vg_op_t *op)
{
    if (!op) {
        return cudaSuccess;
    }
    if (!vg__op_done(op)) {
        vg__op_ref(op);
        int r = vg__sim_wait(vg__op_done, op);
        if (r) {
            vg_msg("internal: a wait can never complete (%s %s)", op->api, op->name);
            vg__op_unref(op);
            return cudaErrorUnknown;
        }
        vg__op_unref(op);
    }
    if (op->t_end > vg_g.host_ns) {
        vg_g.host_ns = op->t_end;
    }
    return cudaSuccess;
}

/* Lock held. Lets the simulation catch up with the host clock; then whether op is done,
 * turning a long run of not-ready answers to a work-issuing thread into a wait. */
static int query_op(vg_op_t *op)
{
    if (!op || vg__op_done(op)) {
        return 1;
    }
    int blocked;
    vg__sim_run(vg_g.host_ns, vg__op_done, op, &blocked);
    if (vg__op_done(op)) {
        tls_spins = 0;
        return 1;
    }
    uint64_t issued = vg__thread_issue_count();
    if (!issued) {
        return 0; /* an observer thread: polling costs no device time */
    }
    if (issued != tls_spin_issue_mark) {
        tls_spin_issue_mark = issued;
        tls_spins = 0;
    }
    if (++tls_spins < VG_SPIN_LIMIT) {
        return 0;
    }
    tls_spins = 0;
    return wait_op(op) == cudaSuccess;
}

cudaError_t vg_stream_sync(cudaStream_t h)
{
    cudaError_t err = cudaSuccess;
    vg_lock();
    vg_stream_t *s = vg__stream_get(h, &err);
    if (s && s->capture) {
        err = cudaErrorStreamCaptureUnsupported;
    } else if (s) {
        err = wait_op(s->last);
        if (err == cudaSuccess) {
            err = vg__dev(s->dev)->sticky;
        }
    }
    vg_unlock();
    return err;
}

cudaError_t vg_stream_query(cudaStream_t h)
{
    cudaError_t err = cudaSuccess;
    vg_lock();
    vg_stream_t *s = vg__stream_get(h, &err);
    if (s && s->capture) {
        err = cudaErrorStreamCaptureUnsupported;
    } else if (s) {
        err = query_op(s->last) ? vg__dev(s->dev)->sticky : cudaErrorNotReady;
    }
    vg_unlock();
    return err;
}

cudaError_t vg_stream_wait_event(cudaStream_t h, cudaEvent_t ev, unsigned flags)
{
    if (flags & ~(unsigned)cudaEventWaitExternal) {
        return cudaErrorInvalidValue;
    }
    vg_lock();
    cudaError_t err = cudaSuccess;
    vg_stream_t *s = vg__stream_get(h, &err);
    if (!s || !reg_has(live_events, ev)) {
        vg_unlock();
        return s ? cudaErrorInvalidResourceHandle : err;
    }
    if (s->capture) { /* event nodes are not modelled (graph.c) */
        vg_unlock();
        return cudaErrorStreamCaptureUnsupported;
    }
    vg_event_t *e = (vg_event_t *)ev;
    if (e->rec) { /* waiting on a never-recorded event is a no-op, as in CUDA */
        vg_op_t *op = vg_op_new("cudaStreamWaitEvent", VG_MARKER);
        op->dev = s->dev;
        vg__op_add_dep(op, e->rec);
        vg__sim_enqueue(s, op);
    }
    vg_unlock();
    return cudaSuccess;
}

#define STREAM_GETTER(fn, type, expr)                                                   \
    cudaError_t fn(cudaStream_t h, type *out)                                           \
    {                                                                                   \
        if (!out) {                                                                     \
            return cudaErrorInvalidValue;                                               \
        }                                                                               \
        cudaError_t err = cudaSuccess;                                                  \
        vg_lock();                                                                      \
        vg_stream_t *s = vg__stream_get(h, &err);                                       \
        if (s) {                                                                        \
            *out = (expr);                                                              \
        }                                                                               \
        vg_unlock();                                                                    \
        return err;                                                                     \
    }

STREAM_GETTER(vg_stream_get_flags, unsigned, s->flags)
STREAM_GETTER(vg_stream_get_priority, int, s->priority)
STREAM_GETTER(vg_stream_get_device, int, s->dev)
STREAM_GETTER(vg_stream_get_id, unsigned long long, s->id)

/* ---- events ---- */

static vg_event_t *event_get(cudaEvent_t h)
{
    return h && reg_has(live_events, h) ? (vg_event_t *)h : NULL;
}

cudaError_t vg_event_create(cudaEvent_t *out, unsigned flags)
{
    const unsigned known = cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess;
    if (!out || (flags & ~known)) {
        return cudaErrorInvalidValue;
    }
    if ((flags & cudaEventInterprocess) && !(flags & cudaEventDisableTiming)) {
        return cudaErrorInvalidValue; /* as documented: interprocess needs DisableTiming */
    }
    vg_event_t *e = calloc(1, sizeof *e);
    if (!e) {
        return cudaErrorMemoryAllocation;
    }
    e->magic = VG_EVENT_MAGIC;
    e->flags = flags;
    e->dev = vg_current_device();
    vg_lock();
    reg_add(&live_events, e);
    vg_unlock();
    *out = (cudaEvent_t)e;
    return cudaSuccess;
}

cudaError_t vg_event_destroy(cudaEvent_t h)
{
    vg_lock();
    if (!h || reg_del(&live_events, h)) {
        vg_unlock();
        return cudaErrorInvalidResourceHandle;
    }
    vg_event_t *e = (vg_event_t *)h;
    vg__op_unref(e->rec);
    e->magic = 0;
    free(e);
    vg_unlock();
    return cudaSuccess;
}

cudaError_t vg_event_record(cudaEvent_t h, cudaStream_t sh, unsigned flags)
{
    if (flags & ~(unsigned)cudaEventRecordExternal) {
        return cudaErrorInvalidValue;
    }
    vg_lock();
    cudaError_t err = cudaSuccess;
    vg_event_t *e = event_get(h);
    vg_stream_t *s = vg__stream_get(sh, &err);
    if (!e || !s) {
        vg_unlock();
        return !e ? cudaErrorInvalidResourceHandle : err;
    }
    if (s->capture) { /* event nodes are not modelled (graph.c) */
        vg_unlock();
        return cudaErrorStreamCaptureUnsupported;
    }
    vg_op_t *op = vg_op_new("cudaEventRecord", VG_MARKER);
    op->dev = s->dev;
    vg__op_ref(op);
    vg__op_unref(e->rec);
    e->rec = op;
    vg__sim_enqueue(s, op);
    vg_unlock();
    return cudaSuccess;
}

cudaError_t vg_event_query(cudaEvent_t h)
{
    vg_lock();
    vg_event_t *e = event_get(h);
    cudaError_t err = !e ? cudaErrorInvalidResourceHandle
                         : (query_op(e->rec) ? cudaSuccess : cudaErrorNotReady);
    vg_unlock();
    return err;
}

cudaError_t vg_event_sync(cudaEvent_t h)
{
    vg_lock();
    vg_event_t *e = event_get(h);
    cudaError_t err = e ? wait_op(e->rec) : cudaErrorInvalidResourceHandle;
    vg_unlock();
    return err;
}

cudaError_t vg_event_elapsed(float *ms, cudaEvent_t ha, cudaEvent_t hb)
{
    if (!ms) {
        return cudaErrorInvalidValue;
    }
    vg_lock();
    vg_event_t *a = event_get(ha), *b = event_get(hb);
    cudaError_t err = cudaSuccess;
    if (!a || !b || !a->rec || !b->rec ||
        ((a->flags | b->flags) & cudaEventDisableTiming)) {
        err = cudaErrorInvalidResourceHandle;
    } else if (!query_op(a->rec) || !query_op(b->rec)) {
        err = cudaErrorNotReady;
    } else {
        *ms = (float)((b->rec->t_end - a->rec->t_end) / 1e6);
    }
    vg_unlock();
    return err;
}

/* ---- device-wide waits ---- */

static int device_idle(void *arg) { return ((vg_device_t *)arg)->pending == 0; }

static int all_idle(void *arg)
{
    (void)arg;
    for (int i = 0; i < vg_g.ndev; i++) {
        if (vg_g.dev[i].pending) {
            return 0;
        }
    }
    return 1;
}

cudaError_t vg_device_sync(void)
{
    vg_lock();
    vg_device_t *d = vg__dev(vg_current_device());
    cudaError_t err = vg__sim_wait(device_idle, d) ? cudaErrorUnknown : d->sticky;
    if (d->last_end > vg_g.host_ns) {
        vg_g.host_ns = d->last_end;
    }
    vg_unlock();
    return err;
}

void vg_sync_all(void)
{
    vg_lock();
    if (vg__sim_wait(all_idle, NULL)) {
        vg_msg("internal: work that can never run is left on the device");
    }
    for (int i = 0; i < vg_g.ndev; i++) {
        if (vg_g.dev[i].last_end > vg_g.host_ns) {
            vg_g.host_ns = vg_g.dev[i].last_end;
        }
    }
    vg_unlock();
}
