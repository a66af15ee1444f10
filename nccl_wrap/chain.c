/* chain.c: program order among deferred NCCL ops, but for the ones a plan moves (see
 * chain.h). */
#include "chain.h"

#include <pthread.h>

#include "breaks.h"
#include "common/log.h"
#include "real.h"
#include "scheduler.h"
#include "tracker.h"

#define DH__CHAIN_DEVICES 16

static pthread_mutex_t dh__chain_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    cudaEvent_t ev[2];       /* lock: created on first use; ev[t] is recorded after the NCCL
                                ops of plan strand t (all ops are strand 0 without a plan) */
    int has[2];              /* lock: ev[t] has a record */
    cudaStream_t last;       /* lock: stream of the device's latest NCCL op */
    int have;                /* lock: there is one */
    int last_t;              /* lock: its strand (the event of its record) */
} dh__chain[DH__CHAIN_DEVICES];

/* Lock held. The device's chain event of strand t, created on that device; NULL on
 * failure. */
static cudaEvent_t dh__chain_event(int dev, int t)
{
    if (dh__chain[dev].ev[t] != NULL)
        return dh__chain[dev].ev[t];
    const dh_real_t *r = dh_real();
    int saved = -1;
    if (r->cudaGetDevice(&saved) != cudaSuccess)
        return NULL;
    cudaEvent_t ev = NULL;
    if (r->cudaSetDevice(dev) == cudaSuccess &&
        r->cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess)
        ev = NULL;
    r->cudaSetDevice(saved);
    dh__chain[dev].ev[t] = ev;
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
    if (dh__chain_event(dev, 0) == NULL || dh__chain_event(dev, 1) == NULL) {
        /* No event, no chain: issue what is queued first, then this op, in order. */
        pthread_mutex_unlock(&dh__chain_lock);
        DH_WARN_ONCE(NCCL, "cannot create the event that keeps NCCL operations in order; "
                     "draining before each instead");
        dh_sched_drain(DH_DRAIN_UNCAPTURABLE);
        dh_sched_submit(op);
        return;
    }
    /* The same event ops as in program order (profile mode recorded them in the template:
     * a wait when the previous NCCL op was on another stream, a record after each); only
     * their events differ. In program order the wait is on the latest op's record. In a
     * paired iteration of a plan that moves NCCL ops it is on the latest record of the
     * op's own strand (one of an earlier pair when the strand has none in this one, which
     * orders nothing new): each strand keeps program order, the plan orders the two. */
    int wait = dh__chain[dev].have && dh__chain[dev].last != s;
    int t = 0;
    int per_strand = dh_tracker_chain_class(wait, &t);
    t = t == 1;
    if (wait) {
        int on = per_strand && dh__chain[dev].has[t] ? t : dh__chain[dev].last_t;
        DH_DEBUG(NCCL, "chain: wait on strand %d's latest NCCL op (op of strand %d%s)", on, t,
                 per_strand ? ", strands chained apart" : "");
        dh__chain_op(0, dev, s, dh__chain[dev].ev[on]);
    }
    dh_sched_submit(op);
    dh__chain[dev].have = dh__chain_op(1, dev, s, dh__chain[dev].ev[t]) == 0;
    dh__chain[dev].has[t] |= dh__chain[dev].have;
    dh__chain[dev].last = s;
    dh__chain[dev].last_t = t;
    pthread_mutex_unlock(&dh__chain_lock);
}
