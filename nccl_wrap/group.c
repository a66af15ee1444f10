/* group.c: ncclGroupStart..ncclGroupEnd batches (see group.h). */
#include "group.h"

#include <stdlib.h>

#include "chain.h"
#include "nccl_real.h"
#include "scheduler.h"
#include "wrap.h"

typedef struct dh__group {
    dh_nccl_group_mode_t mode;
    int depth;                 /* starts not yet ended */
    ncclResult_t err;          /* CAPTURE: the first failed call; ncclGroupEnd returns it */
    dh_nccl_call_t *calls;     /* CAPTURE: the batch, markers included */
    int n, cap, members;
    dh_nccl_comm_t **fresh;    /* FORWARD: communicators created inside */
    int nfresh, capfresh;
} dh__group_t;

static __thread dh__group_t dh__grp;

dh_nccl_group_mode_t dh_nccl_group_mode(void) { return dh__grp.mode; }

static int dh__grow(void **arr, int *cap, int need, size_t elem)
{
    if (need <= *cap)
        return 0;
    int ncap = *cap ? *cap * 2 : 16;
    while (ncap < need)
        ncap *= 2;
    void *p = realloc(*arr, (size_t)ncap * elem);
    if (p == NULL)
        return -1;
    *arr = p;
    *cap = ncap;
    return 0;
}

static int dh__push(const dh_nccl_call_t *c)
{
    if (dh__grow((void **)&dh__grp.calls, &dh__grp.cap, dh__grp.n + 1, sizeof *c))
        return -1;
    dh__grp.calls[dh__grp.n++] = *c;
    return 0;
}

static int dh__push_marker(dh_nccl_kind_t k)
{
    return dh__push(&(dh_nccl_call_t){.kind = k});
}

/* Forgets the batch (the arrays go too, so a finished thread leaves nothing behind). */
static void dh__reset_batch(void)
{
    free(dh__grp.calls);
    dh__grp.calls = NULL;
    dh__grp.n = dh__grp.cap = dh__grp.members = 0;
    dh__grp.err = ncclSuccess;
}

/* The outermost end of a forwarded group: what was created inside is learned now. */
static void dh__forward_done(ncclResult_t rc)
{
    dh__grp.mode = DH_GROUP_NONE;
    dh__grp.depth = 0;
    if (rc == ncclSuccess && dh__grp.nfresh > 0)
        dh_nccl_reg_learn(dh__grp.fresh, dh__grp.nfresh);
    free(dh__grp.fresh);
    dh__grp.fresh = NULL;
    dh__grp.nfresh = dh__grp.capfresh = 0;
}

void dh_nccl_group_release(void)
{
    if (dh__grp.mode != DH_GROUP_CAPTURE)
        return;
    dh_sched_drain(DH_DRAIN_UNCAPTURABLE);
    ncclResult_t rc = dh_nccl_calls_issue(dh__grp.calls, dh__grp.n);
    ncclResult_t err = dh__grp.err != ncclSuccess ? dh__grp.err : rc;
    dh__reset_batch();
    dh__grp.err = err; /* unused from here: the library's ncclGroupEnd answers */
    dh__grp.mode = DH_GROUP_FORWARD;
}

void dh_nccl_group_note_new(dh_nccl_comm_t *e)
{
    if (e == NULL || dh__grow((void **)&dh__grp.fresh, &dh__grp.capfresh, dh__grp.nfresh + 1,
                              sizeof *dh__grp.fresh))
        return; /* not learned: the role then comes from its position or name */
    dh__grp.fresh[dh__grp.nfresh++] = e;
}

ncclResult_t dh_nccl_group_start(void)
{
    __typeof__(&ncclGroupStart) start = DH_NCCL_REAL(ncclGroupStart);
    switch (dh__grp.mode) {
    case DH_GROUP_NONE:
        if (dh__may_defer()) {
            dh__reset_batch();
            if (dh__push_marker(DH_NCCL_GROUP_START) == 0) {
                dh__grp.mode = DH_GROUP_CAPTURE;
                dh__grp.depth = 1;
                return ncclSuccess;
            }
        }
        break;
    case DH_GROUP_CAPTURE:
        if (dh__push_marker(DH_NCCL_GROUP_START) == 0) {
            dh__grp.depth++;
            return ncclSuccess;
        }
        dh_nccl_group_release();
        break;
    case DH_GROUP_FORWARD:
        break;
    }
    if (start == NULL)
        return ncclInternalError;
    ncclResult_t rc = start();
    if (rc == ncclSuccess) {
        dh__grp.mode = DH_GROUP_FORWARD;
        dh__grp.depth++;
    }
    return rc;
}

/* The outermost end of a capturing batch. */
static ncclResult_t dh__capture_done(void)
{
    dh__grp.mode = DH_GROUP_NONE;
    dh__grp.depth = 0;
    ncclResult_t rc = dh__grp.err;
    if (rc != ncclSuccess || dh__grp.members == 0) {
        dh__reset_batch(); /* a failed batch issues nothing, as NCCL's does */
        return rc;
    }
    dh_op_t *op = NULL;
    if (dh_sched_deferring() && dh_nccl_op_make(&op, dh__grp.calls, dh__grp.n, 1) == DH_OK) {
        dh_nccl_submit(op);
    } else {
        dh_sched_drain(DH_DRAIN_UNCAPTURABLE);
        rc = dh_nccl_calls_issue(dh__grp.calls, dh__grp.n);
    }
    dh__reset_batch();
    return rc;
}

ncclResult_t dh_nccl_group_end(void)
{
    __typeof__(&ncclGroupEnd) end = DH_NCCL_REAL(ncclGroupEnd);
    if (dh__grp.mode == DH_GROUP_CAPTURE) {
        if (dh__push_marker(DH_NCCL_GROUP_END) == 0) {
            if (--dh__grp.depth > 0)
                return ncclSuccess;
            return dh__capture_done();
        }
        dh_nccl_group_release();
    }
    if (end == NULL)
        return ncclInternalError;
    if (dh__grp.mode == DH_GROUP_FORWARD && dh__grp.depth == 1 && dh_sched_deferring())
        dh_sched_drain(DH_DRAIN_UNCAPTURABLE);
    ncclResult_t rc = end();
    if (dh__grp.mode == DH_GROUP_FORWARD && --dh__grp.depth == 0)
        dh__forward_done(rc);
    return rc;
}

ncclResult_t dh_nccl_group_simulate_end(ncclSimInfo_t *sim)
{
    __typeof__(&ncclGroupSimulateEnd) simulate = DH_NCCL_REAL(ncclGroupSimulateEnd);
    dh_nccl_group_release();
    if (simulate == NULL)
        return ncclInternalError;
    ncclResult_t rc = simulate(sim);
    /* The library ends a group level unless it refused the call outright. */
    if (dh__grp.mode == DH_GROUP_FORWARD && rc != ncclInvalidArgument && --dh__grp.depth == 0)
        dh__forward_done(rc);
    return rc;
}

ncclResult_t dh_nccl_group_call(dh_nccl_call_t *c)
{
    ncclResult_t err = ncclSuccess;
    switch (dh_nccl_call_check(c, &err)) {
    case DH_NCCL_CAPTURE:
        if (dh__push(c) == 0) {
            dh__grp.members++;
            return ncclSuccess;
        }
        break;
    case DH_NCCL_FAILED:
        if (dh__grp.err == ncclSuccess)
            dh__grp.err = err;
        return err;
    case DH_NCCL_FORWARD:
        break;
    }
    dh_nccl_group_release();
    return dh_nccl_call_issue(c, NULL, 1);
}
