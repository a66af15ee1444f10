/* chain.c: program order among deferred NCCL ops (see chain.h). */
#include "chain.h"

#include <pthread.h>

#include "breaks.h"
#include "common/log.h"
#include "real.h"
#include "scheduler.h"

#define DH__CHAIN_DEVICES 16

static pthread_mutex_t dh__chain_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    cudaEvent_t ev;          /* lock: created on first use */
    cudaStream_t last;       /* lock: stream of the device's latest NCCL op */
    int have;                /* lock: there is one */
} dh__chain[DH__CHAIN_DEVICES];

/* Lock held. The device's chain event, created on that device; NULL on failure. */
static cudaEvent_t dh__chain_event(int dev)
{
    if (dh__chain[dev].ev != NULL)
        return dh__chain[dev].ev;
    const dh_real_t *r = dh_real();
    int saved = -1;
    if (r->cudaGetDevice(&saved) != cudaSuccess)
        return NULL;
    cudaEvent_t ev = NULL;
    if (r->cudaSetDevice(dev) == cudaSuccess &&
        r->cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess)
        ev = NULL;
    r->cudaSetDevice(saved);
    dh__chain[dev].ev = ev;
    return ev;
}

/* Lock held. Queues an event op of the chain on (dev, s); 0 on success. */
static int dh__chain_op(int record, int dev, cudaStream_t s, cudaEvent_t ev)
{
    dh_op_t *op = NULL;
    dh_status_t st = record ? dh_op_capture_event_record(&op, ev, s, 0)
                            : dh_op_capture_event_wait(&op, s, ev, 0);
    if (st != DH_OK)
        return -1;
    op->device = dev;
    op->issue_only = !record;
    dh_sched_submit(op);
    return 0;
}

void dh_nccl_submit(dh_op_t *op)
{
    int dev = op->device;
    cudaStream_t s = op->stream;
    if (dev < 0 || dev >= DH__CHAIN_DEVICES || dh_break(DH_BREAK_NCCL_ORDER)) {
        dh_sched_submit(op);
        return;
    }
    pthread_mutex_lock(&dh__chain_lock);
    cudaEvent_t ev = dh__chain_event(dev);
    if (ev == NULL) {
        /* No event, no chain: issue what is queued first, then this op, in order. */
        pthread_mutex_unlock(&dh__chain_lock);
        DH_WARN_ONCE(NCCL, "cannot create the event that keeps NCCL operations in order; "
                     "draining before each instead");
        dh_sched_drain(DH_DRAIN_UNCAPTURABLE);
        dh_sched_submit(op);
        return;
    }
    if (dh__chain[dev].have && dh__chain[dev].last != s)
        dh__chain_op(0, dev, s, ev);
    dh_sched_submit(op);
    dh__chain[dev].have = dh__chain_op(1, dev, s, ev) == 0;
    dh__chain[dev].last = s;
    pthread_mutex_unlock(&dh__chain_lock);
}
