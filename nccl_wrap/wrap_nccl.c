/*
 * wrap_nccl.c: the NCCL wrappers, by the classes of hook_list.h. Each forwards to the
 * library's pncclX (nccl_real.h).
 *
 * Passthrough costs what a forwarded call costs anywhere in the shim plus one thread-local
 * read: a collective takes the slow path only when the mode defers, when this thread is
 * capturing a group, or when DHELIX_STATS counts per communicator.
 */
#include <stddef.h>
#include <string.h>

#include <nccl.h>

#include "chain.h"
#include "common/config.h"
#include "dhelix_nccl.h"
#include "group.h"
#include "nccl_op.h"
#include "nccl_real.h"
#include "real.h"
#include "registry.h"
#include "wrap.h"

/* DHELIX_STATS is on: forwarded calls are counted per communicator. Set once at load. */
static int dh__nccl_counting;

__attribute__((constructor)) static void dh__nccl_load(void)
{
    dh__nccl_counting = dh_config()->stats != DH_STATS_OFF;
}

/* ---- CAPTURE ---- */

/* A collective or point-to-point call on the slow path (see the file comment). */
static ncclResult_t dh__nccl_call(dh_nccl_call_t *c)
{
    dh_nccl_group_mode_t mode = dh_nccl_group_mode();
    if (mode == DH_GROUP_CAPTURE)
        return dh_nccl_group_call(c);
    if (!dh__may_defer() || mode == DH_GROUP_FORWARD) {
        /* Inside the library's own group nothing runs before its end, which drains. */
        if (dh__nccl_counting)
            dh_nccl_count_forwarded(c);
        return dh_nccl_call_issue(c, NULL, 1);
    }
    ncclResult_t err = ncclSuccess;
    dh_op_t *op = NULL;
    switch (dh_nccl_call_check(c, &err)) {
    case DH_NCCL_FAILED:
        return err;
    case DH_NCCL_CAPTURE:
        if (dh_nccl_op_make(&op, c, 1, 0) == DH_OK) {
            dh_nccl_submit(op);
            return ncclSuccess;
        }
        break;
    case DH_NCCL_FORWARD:
        break;
    }
    dh_sched_drain(DH_DRAIN_UNCAPTURABLE);
    return dh_nccl_call_issue(c, NULL, 1);
}

#define DH_NCCL_SLOW() \
    (__builtin_expect(dh__may_defer() || dh__nccl_counting, 0) || \
     dh_nccl_group_mode() == DH_GROUP_CAPTURE)

/* One collective wrapper: KIND, then the call's fields as designated initialisers. */
#define DH_NCCL_COLL(name, params, args, KIND, ...)                                     \
    DH_HOOK_EXPORT ncclResult_t name params                                             \
    {                                                                                   \
        DH_WRAP_ENTER(NCCL, ncclResult_t, name);                                        \
        ncclResult_t rc_;                                                               \
        if (!DH_NCCL_SLOW()) {                                                          \
            __typeof__(&name) fn_ = DH_NCCL_REAL(name);                                 \
            rc_ = fn_ != NULL ? fn_ args : ncclInternalError;                           \
        } else {                                                                        \
            dh_nccl_call_t c_ = {.kind = DH_NCCL_##KIND, __VA_ARGS__};                  \
            rc_ = dh__nccl_call(&c_);                                                   \
        }                                                                               \
        dh__hook_leave();                                                               \
        return rc_;                                                                     \
    }

DH_NCCL_COLL(ncclAllReduce,
             (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
              ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream),
             (sendbuff, recvbuff, count, datatype, op, comm, stream), ALLREDUCE,
             .sendbuff = sendbuff, .recvbuff = recvbuff, .count = count, .dtype = datatype,
             .redop = op, .comm = comm, .stream = stream)

DH_NCCL_COLL(ncclAllGather,
             (const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,
              ncclComm_t comm, cudaStream_t stream),
             (sendbuff, recvbuff, sendcount, datatype, comm, stream), ALLGATHER,
             .sendbuff = sendbuff, .recvbuff = recvbuff, .count = sendcount, .dtype = datatype,
             .comm = comm, .stream = stream)

DH_NCCL_COLL(ncclReduceScatter,
             (const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype,
              ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream),
             (sendbuff, recvbuff, recvcount, datatype, op, comm, stream), REDUCESCATTER,
             .sendbuff = sendbuff, .recvbuff = recvbuff, .count = recvcount, .dtype = datatype,
             .redop = op, .comm = comm, .stream = stream)

DH_NCCL_COLL(ncclBroadcast,
             (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
              int root, ncclComm_t comm, cudaStream_t stream),
             (sendbuff, recvbuff, count, datatype, root, comm, stream), BROADCAST,
             .sendbuff = sendbuff, .recvbuff = recvbuff, .count = count, .dtype = datatype,
             .root = root, .comm = comm, .stream = stream)

DH_NCCL_COLL(ncclBcast,
             (void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
              cudaStream_t stream),
             (buff, count, datatype, root, comm, stream), BCAST, .sendbuff = buff,
             .recvbuff = buff, .count = count, .dtype = datatype, .root = root, .comm = comm,
             .stream = stream)

DH_NCCL_COLL(ncclReduce,
             (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
              ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream),
             (sendbuff, recvbuff, count, datatype, op, root, comm, stream), REDUCE,
             .sendbuff = sendbuff, .recvbuff = recvbuff, .count = count, .dtype = datatype,
             .redop = op, .root = root, .comm = comm, .stream = stream)

DH_NCCL_COLL(ncclAlltoAll,
             (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
              ncclComm_t comm, cudaStream_t stream),
             (sendbuff, recvbuff, count, datatype, comm, stream), ALLTOALL, .sendbuff = sendbuff,
             .recvbuff = recvbuff, .count = count, .dtype = datatype, .comm = comm,
             .stream = stream)

DH_NCCL_COLL(ncclGather,
             (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
              int root, ncclComm_t comm, cudaStream_t stream),
             (sendbuff, recvbuff, count, datatype, root, comm, stream), GATHER,
             .sendbuff = sendbuff, .recvbuff = recvbuff, .count = count, .dtype = datatype,
             .root = root, .comm = comm, .stream = stream)

DH_NCCL_COLL(ncclScatter,
             (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
              int root, ncclComm_t comm, cudaStream_t stream),
             (sendbuff, recvbuff, count, datatype, root, comm, stream), SCATTER,
             .sendbuff = sendbuff, .recvbuff = recvbuff, .count = count, .dtype = datatype,
             .root = root, .comm = comm, .stream = stream)

DH_NCCL_COLL(ncclSend,
             (const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
              ncclComm_t comm, cudaStream_t stream),
             (sendbuff, count, datatype, peer, comm, stream), SEND, .sendbuff = sendbuff,
             .count = count, .dtype = datatype, .root = peer, .comm = comm, .stream = stream)

DH_NCCL_COLL(ncclRecv,
             (void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
              cudaStream_t stream),
             (recvbuff, count, datatype, peer, comm, stream), RECV, .recvbuff = recvbuff,
             .count = count, .dtype = datatype, .root = peer, .comm = comm, .stream = stream)

/* ---- GROUP ---- */

DH_HOOK_EXPORT ncclResult_t ncclGroupStart(void)
{
    DH_WRAP_ENTER(NCCL, ncclResult_t, ncclGroupStart);
    ncclResult_t rc = dh__hook_depth == 1 ? dh_nccl_group_start() : real_();
    dh__hook_leave();
    return rc;
}

DH_HOOK_EXPORT ncclResult_t ncclGroupEnd(void)
{
    DH_WRAP_ENTER(NCCL, ncclResult_t, ncclGroupEnd);
    ncclResult_t rc = dh__hook_depth == 1 ? dh_nccl_group_end() : real_();
    dh__hook_leave();
    return rc;
}

DH_HOOK_EXPORT ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t *simInfo)
{
    DH_WRAP_ENTER(NCCL, ncclResult_t, ncclGroupSimulateEnd);
    ncclResult_t rc = dh__hook_depth == 1 ? dh_nccl_group_simulate_end(simInfo) : real_(simInfo);
    dh__hook_leave();
    return rc;
}

/* ---- SYNC and FORWARD ---- */

/* A call that changes a communicator or memory queued work may use: the thread's captured
 * batch is released and the queue drained before the library sees it. */
static void dh__nccl_settle(void)
{
    if (dh__hook_depth != 1)
        return;
    dh_nccl_group_release();
    if (dh_sched_deferring())
        dh_sched_drain(DH_DRAIN_UNCAPTURABLE);
}

#define DH_NCCL_FORWARD_BODY(name, args)                                               \
    __typeof__(&name) fn_ = DH_NCCL_REAL(name);                                        \
    ncclResult_t rc_ = fn_ != NULL ? fn_ args : ncclInternalError

#define DH_NCCL_SYNC_WRAPPER(lib, ret, name, params, args)                             \
    DH_HOOK_EXPORT ret name params                                                     \
    {                                                                                  \
        DH_WRAP_ENTER(lib, ret, name);                                                 \
        dh__nccl_settle();                                                             \
        DH_NCCL_FORWARD_BODY(name, args);                                              \
        dh__hook_leave();                                                              \
        return rc_;                                                                    \
    }

#define DH_NCCL_FORWARD_WRAPPER(lib, ret, name, params, args)                          \
    DH_HOOK_EXPORT ret name params                                                     \
    {                                                                                  \
        DH_WRAP_ENTER(lib, ret, name);                                                 \
        DH_NCCL_FORWARD_BODY(name, args);                                              \
        dh__hook_leave();                                                              \
        return rc_;                                                                    \
    }

DH_HOOKS_NCCL_FORWARD(DH_NCCL_FORWARD_WRAPPER)

/* Custom reduction ops: remembered per communicator, so that a deferred collective using
 * one can be checked; a destroy drains first, so no queued op outlives its reduction. */
DH_HOOK_EXPORT ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar,
                                                     ncclDataType_t datatype,
                                                     ncclScalarResidence_t residence,
                                                     ncclComm_t comm)
{
    DH_WRAP_ENTER(NCCL, ncclResult_t, ncclRedOpCreatePreMulSum);
    dh__nccl_settle();
    DH_NCCL_FORWARD_BODY(ncclRedOpCreatePreMulSum, (op, scalar, datatype, residence, comm));
    dh_nccl_comm_t *e = rc_ == ncclSuccess && op != NULL ? dh_nccl_reg_find(comm) : NULL;
    if (e != NULL)
        dh_nccl_reg_premul_add(e, *op);
    dh__hook_leave();
    return rc_;
}

DH_HOOK_EXPORT ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm)
{
    DH_WRAP_ENTER(NCCL, ncclResult_t, ncclRedOpDestroy);
    dh__nccl_settle();
    dh_nccl_comm_t *e = dh_nccl_reg_find(comm);
    if (e != NULL)
        dh_nccl_reg_premul_del(e, op);
    DH_NCCL_FORWARD_BODY(ncclRedOpDestroy, (op, comm));
    dh__hook_leave();
    return rc_;
}

#define DH_NCCL_SYNC_PLAIN(X)                                                          \
    X(NCCL, ncclResult_t, ncclCommRegister,                                            \
      (const ncclComm_t comm, void *buff, size_t size, void **handle),                 \
      (comm, buff, size, handle))                                                      \
    X(NCCL, ncclResult_t, ncclCommDeregister, (const ncclComm_t comm, void *handle),   \
      (comm, handle))                                                                  \
    X(NCCL, ncclResult_t, ncclCommWindowRegister,                                      \
      (ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win, int winFlags),     \
      (comm, buff, size, win, winFlags))                                               \
    X(NCCL, ncclResult_t, ncclCommWindowDeregister, (ncclComm_t comm, ncclWindow_t win), \
      (comm, win))                                                                     \
    X(NCCL, ncclResult_t, ncclMemFree, (void *ptr), (ptr))                             \
    X(NCCL, ncclResult_t, ncclDevCommCreate,                                           \
      (ncclComm_t comm, const struct ncclDevCommRequirements *reqs,                    \
       struct ncclDevComm *outDevComm),                                                \
      (comm, reqs, outDevComm))                                                        \
    X(NCCL, ncclResult_t, ncclDevCommDestroy,                                          \
      (ncclComm_t comm, const struct ncclDevComm *devComm), (comm, devComm))           \
    X(NCCL, ncclResult_t, ncclCommFinalize, (ncclComm_t comm), (comm))                 \
    X(NCCL, ncclResult_t, ncclCommRevoke, (ncclComm_t comm, int revokeFlags),          \
      (comm, revokeFlags))

DH_NCCL_SYNC_PLAIN(DH_NCCL_SYNC_WRAPPER)

/* ---- STRING ---- */

DH_HOOK_EXPORT const char *ncclGetErrorString(ncclResult_t result)
{
    void *real_ = dh__hook_enter(DH_HOOK_ncclGetErrorString, DH_HOOK_LIB_NCCL);
    if (real_ == NULL) {
        dh__hook_missing(DH_HOOK_ncclGetErrorString);
        return "libnccl.so.2 is not loaded";
    }
    __typeof__(&ncclGetErrorString) fn = DH_NCCL_REAL(ncclGetErrorString);
    const char *s = fn != NULL ? fn(result) : "?";
    dh__hook_leave();
    return s;
}

DH_HOOK_EXPORT const char *ncclGetLastError(ncclComm_t comm)
{
    void *real_ = dh__hook_enter(DH_HOOK_ncclGetLastError, DH_HOOK_LIB_NCCL);
    if (real_ == NULL) {
        dh__hook_missing(DH_HOOK_ncclGetLastError);
        return "libnccl.so.2 is not loaded";
    }
    __typeof__(&ncclGetLastError) fn = DH_NCCL_REAL(ncclGetLastError);
    const char *s = fn != NULL ? fn(comm) : "";
    dh__hook_leave();
    return s;
}

/* ---- the program's C interface ---- */

DH_HOOK_EXPORT int dh_group_set_enabled(ncclComm_t comm, int enabled)
{
    return dh_nccl_reg_set_enabled(comm, enabled);
}
