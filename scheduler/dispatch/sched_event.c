/*
 * sched_event.c: the scheduler's event table. Each framework event maps to the instance its
 * latest captured record made (a shim-owned CUDA event per instance, created by the
 * dispatcher), so that a wait waits for exactly the work recorded before it in program
 * order (DESIGN.md invariant 2), whenever the dispatcher replays the record. An event the
 * program destroys while its record is still queued is destroyed once the record is issued
 * (ProcessGroupNCCL does that to each Work's events).
 *
 * Locking: everything here runs with dh__s.lock held, but for the functions that take it
 * themselves (dh_sched_event_*) and dh__destroy_doomed (never under it: the real
 * cudaEventDestroy calls the driver's entry point through the shim's own wrapper).
 */
#include <stdlib.h>

#include "real.h"
#include "sched_int.h"

/* ---- event instances (lock held) ---- */

static dh_evinst_t *dh__inst_new(int device)
{
    dh_evinst_t *i = dh__s.free_inst;
    if (i && i->device == device) {
        dh__s.free_inst = i->next_free;
    } else {
        i = calloc(1, sizeof *i);
        if (!i)
            return NULL;
        i->device = device;
    }
    i->refs = 0;
    i->recorded = 0;
    i->rec_run = 0;
    i->next_free = NULL;
    return i;
}

void dh__inst_unref(dh_evinst_t *inst)
{
    if (inst && --inst->refs == 0) {
        /* The dispatcher created its CUDA event; it stays with the instance for reuse. */
        inst->next_free = dh__s.free_inst;
        dh__s.free_inst = inst;
    }
}

static dh_evrec_t *dh__evrec(cudaEvent_t e, int create)
{
    dh_evrec_t *r;
    HASH_FIND_PTR(dh__s.events, &e, r);
    if (!r && create) {
        r = calloc(1, sizeof *r);
        if (!r)
            return NULL;
        r->key = e;
        HASH_ADD_PTR(dh__s.events, key, r);
    }
    return r;
}

int dh__sched_bind_event(dh_op_t *op)
{
    if (op->kind == DH_OP_EVENT_RECORD) {
        dh_evrec_t *r = dh__evrec(op->event, 1);
        dh_evinst_t *i = r ? dh__inst_new(op->device) : NULL;
        if (!i)
            return -2;
        i->refs = 2; /* the table's "latest" and the pending record */
        dh__inst_unref(r->latest);
        r->latest = i;
        op->shim_event = i;
    } else if (op->kind == DH_OP_EVENT_WAIT) {
        dh_evrec_t *r = dh__evrec(op->event, 0);
        if (!r || !r->latest)
            return -1;
        r->latest->refs++;
        op->shim_event = r->latest;
    }
    return 0;
}

void dh_sched_event_forget(cudaEvent_t e)
{
    pthread_mutex_lock(&dh__s.lock);
    dh_evrec_t *r = dh__evrec(e, 0);
    if (r) {
        dh__inst_unref(r->latest);
        HASH_DEL(dh__s.events, r);
        free(r);
    }
    pthread_mutex_unlock(&dh__s.lock);
}

int dh_sched_event_destroy_later(cudaEvent_t e, int driver)
{
    pthread_mutex_lock(&dh__s.lock);
    dh_evrec_t *r = dh__evrec(e, 0);
    int later = r && r->latest && !r->latest->recorded;
    if (later) {
        r->doomed = driver ? 2 : 1;
        dh__s.stats.events_destroyed_later++;
    }
    pthread_mutex_unlock(&dh__s.lock);
    return later;
}

void dh__event_recorded(cudaEvent_t e, dh_evinst_t *i)
{
    dh_evrec_t *r = dh__evrec(e, 0);
    if (!r || !r->doomed || r->latest != i)
        return;
    if (dh__s.ndoomed == dh__s.capdoomed) {
        size_t cap = dh__s.capdoomed ? 2 * dh__s.capdoomed : 64;
        struct dh_doomed *d = realloc(dh__s.doomed, cap * sizeof *d);
        if (d == NULL)
            return; /* kept doomed: the next record retired retries; else it leaks */
        dh__s.doomed = d;
        dh__s.capdoomed = cap;
    }
    dh__s.doomed[dh__s.ndoomed++] = (struct dh_doomed){e, r->doomed == 2};
    dh__inst_unref(r->latest);
    HASH_DEL(dh__s.events, r);
    free(r);
}

void dh__destroy_doomed(void)
{
    pthread_mutex_lock(&dh__s.lock);
    struct dh_doomed *d = dh__s.doomed;
    size_t n = dh__s.ndoomed;
    dh__s.doomed = NULL;
    dh__s.ndoomed = dh__s.capdoomed = 0;
    pthread_mutex_unlock(&dh__s.lock);
    if (n == 0) {
        free(d);
        return;
    }
    const dh_real_t *R = dh_real();
    for (size_t k = 0; k < n; k++) {
        if (d[k].driver && DH_REAL_FN(R, cuEventDestroy_v2) != NULL)
            (void)R->cuEventDestroy_v2((CUevent)d[k].ev);
        else if (DH_REAL_FN(R, cudaEventDestroy) != NULL)
            (void)R->cudaEventDestroy(d[k].ev);
    }
    free(d);
}

int dh_sched_event_pending(cudaEvent_t e)
{
    pthread_mutex_lock(&dh__s.lock);
    dh_evrec_t *r = dh__evrec(e, 0);
    int pending = r && r->latest && !r->latest->recorded;
    pthread_mutex_unlock(&dh__s.lock);
    return pending;
}
