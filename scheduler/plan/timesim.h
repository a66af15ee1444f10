/*
 * timesim.h: the planner's model of how long a run of ops takes on the device, replayed
 * the way the device runs them (the time counterpart of memsim.h).
 *
 * The DP's pair cost (align.h) is a fluid one: two segments co-run at an efficiency that
 * depends only on their shares of compute and communication. The device is not fluid, and
 * the runs part from it in three ways this model replays:
 *   - one hardware queue (CUDA_DEVICE_MAX_CONNECTIONS=1, Megatron's setting): the device
 *     starts work in issue order, and an op at the queue's head that cannot start yet (its
 *     stream is busy, or it waits for an event) holds back everything behind it, so what a
 *     paired group overlaps depends on its issue order;
 *   - a strand overlaps within itself: a collective on its own stream runs beside the next
 *     kernels of its strand (a backward's reduce-scatter beside its weight-gradient GEMM),
 *     so serial work takes less than the sum of its ops' times, and pairing can hide only
 *     what that overlap left exposed;
 *   - interference in each direction: compute slows while communication runs, and
 *     communication while compute runs (dh_tsim_t.slow_compute, slow_comm).
 *
 * Ops are replayed in issue order on physical streams (a framework stream and a strand):
 * each stream runs one op at a time in order; an event record completes once the work
 * issued before it on its stream has; an event wait holds its stream (and, at the head of
 * the one queue, the queue) until the last record its strand issued on another stream has
 * completed (the pattern of ProcessGroupNCCL: the collective's stream waits for the record
 * just made on the current stream, and the current stream for the collective's end);
 * running ops share the device as the vgpu's model does (tests/vgpu/src/core/sim.c: compute
 * ops split the SMs, collectives the link, copies the copy engine). Everything starts idle
 * (a group starts after a cross-strand barrier). Host issue cost and waiting for other
 * ranks are not replayed: the planner keeps the profiled baseline and predicts only what
 * pairing changes (planner.c).
 *
 * Pure functions of their arguments and the caller's scratch: thread-compatible (one
 * dh_tsim_t per thread).
 */
#ifndef DH_TIMESIM_H
#define DH_TIMESIM_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "plan.h"

/* One template op as the replay sees it. */
typedef struct dh_tsim_op {
    double us;              /* device time when running alone (< 0 unknown: 0) */
    dh_opclass_t cls;
    uint8_t event;          /* DH_TSIM_RECORD, DH_TSIM_WAIT or 0 */
    uint32_t stream;        /* framework stream */
} dh_tsim_op_t;

#define DH_TSIM_RECORD 1
#define DH_TSIM_WAIT 2

typedef struct dh_tsim {
    const dh_tsim_op_t *ops;    /* the template */
    size_t nops;
    int one_queue;              /* 1: one hardware queue; 0: one per stream */
    double slow_compute;        /* compute's rate is (1 - this) while communication runs */
    double slow_comm;           /* communication's rate is (1 - this) while compute runs */
    /* scratch, owned (dh_tsim_free) */
    void *work;
    size_t cap;
} dh_tsim_t;

/* The time from an idle device to the end of the last of n template ops idx[0..n) issued
 * in that order, op idx[k] on strand strand[k] (0 or 1; NULL: all strand 0). Indices must
 * be below ts->nops. Returns the time in us, or a negative value when out of memory. */
double dh_tsim_run(dh_tsim_t *ts, const size_t *idx, const uint8_t *strand, size_t n);

/* The time of template group g (its order letters say which strand issues next). */
double dh_tsim_group(dh_tsim_t *ts, const dh_plan_group_t *g);

/* The time of template ops [first, first + n) issued in program order on strand a. */
double dh_tsim_serial(dh_tsim_t *ts, size_t first, size_t n);

void dh_tsim_free(dh_tsim_t *ts);

#endif
