/*
 * comm_wrap.c: the wrappers of communicator lifetime (hook_list.h, class COMM).
 *
 * Every one first releases the thread's captured group and drains the queue when the mode
 * defers: creating, splitting or shrinking a communicator waits for peers, and a peer may
 * be waiting for work this process still holds; destroying, finalising, revoking or
 * aborting one must come after the work queued on it. A communicator made here enters the
 * registry with what the call says about it, and is learned (registry.h) once it is ready:
 * at once, or at the end of the NCCL group it was created in.
 *
 * ncclCommAbort marks the communicator's queued work as cancelled before the drain, so the
 * drain only issues other work (enqueueing never waits for peers) and the abort returns
 * promptly even when peers are gone. ncclCommGetAsyncError adds the asynchronous errors of
 * deferred operations to the library's own.
 */
#include <stddef.h>

#include <nccl.h>

#include "group.h"
#include "nccl_real.h"
#include "real.h"
#include "registry.h"
#include "wrap.h"

static void dh__settle(void)
{
    if (dh__hook_depth != 1)
        return;
    dh_nccl_group_release();
    if (dh_sched_deferring())
        dh_sched_drain(DH_DRAIN_UNCAPTURABLE);
}

static int dh__current_device(void)
{
    int d = -1;
    dh_real_cudaGetDevice_t get = DH_REAL_FN(dh_real(), cudaGetDevice);
    if (get == NULL || get(&d) != cudaSuccess)
        d = -1;
    return d;
}

/* commName of a config the library accepts (NCCL_CONFIG_INITIALIZER's magic and a size
 * that covers the field), else NULL. */
static const char *dh__config_name(const ncclConfig_t *cfg)
{
    if (cfg == NULL || cfg->magic != 0xcafebeefu ||
        cfg->size < offsetof(ncclConfig_t, commName) + sizeof(cfg->commName))
        return NULL;
    return cfg->commName;
}

/* A communicator was made: learn it now, or at the end of the open group. A non-blocking
 * creation still in progress is learned on first use instead (position and name only). */
static void dh__created(dh_nccl_comm_t **es, int n, ncclResult_t rc)
{
    if (rc != ncclSuccess || dh__hook_depth != 1)
        return;
    if (dh_nccl_group_mode() == DH_GROUP_FORWARD) {
        for (int i = 0; i < n; i++)
            dh_nccl_group_note_new(es[i]);
        return;
    }
    dh_nccl_reg_learn(es, n);
}

static ncclResult_t dh__init(ncclComm_t *comm, int nranks, int rank, const ncclConfig_t *cfg,
                             uint64_t ident, ncclResult_t rc)
{
    if ((rc == ncclSuccess || rc == ncclInProgress) && comm != NULL && *comm != NULL) {
        dh_nccl_birth_t b = {DH_NCCL_FROM_INIT, nranks, rank, dh__current_device(),
                             dh__config_name(cfg), NULL, -1, -1, ident};
        dh_nccl_comm_t *e = dh_nccl_reg_add(*comm, &b);
        dh__created(&e, 1, rc);
    }
    return rc;
}

#define DH__FORWARD(name, args)                                                         \
    __typeof__(&name) fn_ = DH_NCCL_REAL(name);                                         \
    ncclResult_t rc_ = fn_ != NULL ? fn_ args : ncclInternalError

DH_HOOK_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId,
                                             int rank)
{
    DH_WRAP_ENTER(NCCL, ncclResult_t, ncclCommInitRank);
    dh__settle();
    DH__FORWARD(ncclCommInitRank, (comm, nranks, commId, rank));
    rc_ = dh__init(comm, nranks, rank, NULL, dh_nccl_ident(&commId, sizeof commId), rc_);
    dh__hook_leave();
    return rc_;
}

DH_HOOK_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks,
                                                   ncclUniqueId commId, int rank,
                                                   ncclConfig_t *config)
{
    DH_WRAP_ENTER(NCCL, ncclResult_t, ncclCommInitRankConfig);
    dh__settle();
    DH__FORWARD(ncclCommInitRankConfig, (comm, nranks, commId, rank, config));
    rc_ = dh__init(comm, nranks, rank, config, dh_nccl_ident(&commId, sizeof commId), rc_);
    dh__hook_leave();
    return rc_;
}

DH_HOOK_EXPORT ncclResult_t ncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank,
                                                     int nId, ncclUniqueId *commIds,
                                                     ncclConfig_t *config)
{
    DH_WRAP_ENTER(NCCL, ncclResult_t, ncclCommInitRankScalable);
    dh__settle();
    DH__FORWARD(ncclCommInitRankScalable, (newcomm, nranks, myrank, nId, commIds, config));
    uint64_t id_ = nId > 0 && commIds != NULL ? dh_nccl_ident(commIds, (size_t)nId * sizeof *commIds)
                                              : 0;
    rc_ = dh__init(newcomm, nranks, myrank, config, id_, rc_);
    dh__hook_leave();
    return rc_;
}

DH_HOOK_EXPORT ncclResult_t ncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist)
{
    DH_WRAP_ENTER(NCCL, ncclResult_t, ncclCommInitAll);
    dh__settle();
    DH__FORWARD(ncclCommInitAll, (comm, ndev, devlist));
    if (rc_ == ncclSuccess && comm != NULL && ndev > 0) {
        dh_nccl_comm_t *es[64];
        int n = ndev < 64 ? ndev : 64;
        for (int i = 0; i < n; i++) {
            dh_nccl_birth_t b = {DH_NCCL_FROM_ALL, ndev, i, devlist ? devlist[i] : i, NULL,
                                 NULL, -1, -1, 0};
            es[i] = dh_nccl_reg_add(comm[i], &b);
        }
        dh__created(es, n, rc_);
    }
    dh__hook_leave();
    return rc_;
}

static void dh__derived(ncclComm_t parent, ncclComm_t *newcomm, dh_nccl_origin_t origin,
                        int color, int key, const ncclConfig_t *cfg, ncclResult_t rc)
{
    if ((rc != ncclSuccess && rc != ncclInProgress) || newcomm == NULL || *newcomm == NULL)
        return;
    dh_nccl_birth_t b = {origin, -1, -1, -1, dh__config_name(cfg), parent, color, key, 0};
    dh_nccl_comm_t *e = dh_nccl_reg_add(*newcomm, &b);
    dh__created(&e, 1, rc);
}

DH_HOOK_EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key,
                                          ncclComm_t *newcomm, ncclConfig_t *config)
{
    DH_WRAP_ENTER(NCCL, ncclResult_t, ncclCommSplit);
    dh__settle();
    DH__FORWARD(ncclCommSplit, (comm, color, key, newcomm, config));
    dh__derived(comm, newcomm, DH_NCCL_FROM_SPLIT, color, key, config, rc_);
    dh__hook_leave();
    return rc_;
}

DH_HOOK_EXPORT ncclResult_t ncclCommShrink(ncclComm_t comm, int *excludeRanksList,
                                           int excludeRanksCount, ncclComm_t *newcomm,
                                           ncclConfig_t *config, int shrinkFlags)
{
    DH_WRAP_ENTER(NCCL, ncclResult_t, ncclCommShrink);
    dh__settle();
    DH__FORWARD(ncclCommShrink,
                (comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags));
    dh__derived(comm, newcomm, DH_NCCL_FROM_SHRINK, -1, -1, config, rc_);
    dh__hook_leave();
    return rc_;
}

DH_HOOK_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    DH_WRAP_ENTER(NCCL, ncclResult_t, ncclCommDestroy);
    dh__settle();
    dh_nccl_reg_gone(comm, 0);
    DH__FORWARD(ncclCommDestroy, (comm));
    dh__hook_leave();
    return rc_;
}

DH_HOOK_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    DH_WRAP_ENTER(NCCL, ncclResult_t, ncclCommAbort);
    dh_nccl_comm_t *e = dh_nccl_reg_find(comm);
    if (e != NULL)
        atomic_store(&e->aborting, 1);
    dh__settle();
    dh_nccl_reg_gone(comm, 1);
    DH__FORWARD(ncclCommAbort, (comm));
    dh__hook_leave();
    return rc_;
}

DH_HOOK_EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
    DH_WRAP_ENTER(NCCL, ncclResult_t, ncclCommGetAsyncError);
    DH__FORWARD(ncclCommGetAsyncError, (comm, asyncError));
    if (rc_ == ncclSuccess && asyncError != NULL && *asyncError == ncclSuccess) {
        dh_nccl_comm_t *e = dh_nccl_reg_find(comm);
        int mine = e != NULL ? atomic_load(&e->async_err) : ncclSuccess;
        if (mine != ncclSuccess)
            *asyncError = (ncclResult_t)mine;
    }
    dh__hook_leave();
    return rc_;
}
