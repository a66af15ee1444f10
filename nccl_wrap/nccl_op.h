/*
 * nccl_op.h: NCCL calls as operation records (DH_OP_NCCL for one collective or
 * point-to-point call, DH_OP_NCCL_GROUP for an ncclGroupStart..ncclGroupEnd batch).
 *
 * A call is kept as a dh_nccl_call_t: which API, communicator, stream, count, data type,
 * reduction op, root or peer, and the exact bytes it reads and writes on this rank. Nothing
 * it points at is copied: its buffers are device memory, ordered by the stream like any
 * kernel's, and a custom reduction op (ncclRedOpCreatePreMulSum) stays valid because
 * ncclRedOpDestroy drains first. A group op is the batch's list in call order with a
 * marker for every ncclGroupStart and ncclGroupEnd, so nesting is replayed as it was made.
 *
 * Replay (dispatcher thread, through the kinds' table this file registers with
 * scheduler/ops/op.h dh_op_kind_register): the real pncclX on the
 * dispatcher's physical stream; a group op replays pncclGroupStart, its members and
 * pncclGroupEnd, always balanced, so a failing member never leaves the dispatcher's
 * thread inside a group. Errors (the NCCL contract, docs/shim.md "NCCL"): a replay that
 * fails records the failure as its communicator's asynchronous error (registry.h), which
 * ncclCommGetAsyncError reports and the next call on that communicator returns; the
 * dispatcher is told success, since the CUDA stream itself is not in error. Ops of a
 * communicator being aborted are not replayed (counted as errors).
 *
 * Thread-safety: a call record belongs to one thread at a time; see op.h for ops.
 */
#ifndef DH_NCCL_OP_H
#define DH_NCCL_OP_H

#include <stddef.h>
#include <stdint.h>

#include <nccl.h>

#include "common/status.h"
#include "op.h"

struct dh_nccl_comm;

#define DH_NCCL_KINDS(X)                  \
    X(ALLREDUCE, "ncclAllReduce")         \
    X(ALLGATHER, "ncclAllGather")         \
    X(REDUCESCATTER, "ncclReduceScatter") \
    X(BROADCAST, "ncclBroadcast")         \
    X(BCAST, "ncclBcast")                 \
    X(REDUCE, "ncclReduce")               \
    X(ALLTOALL, "ncclAlltoAll")           \
    X(GATHER, "ncclGather")               \
    X(SCATTER, "ncclScatter")             \
    X(SEND, "ncclSend")                   \
    X(RECV, "ncclRecv")                   \
    X(GROUP_START, "ncclGroupStart")      \
    X(GROUP_END, "ncclGroupEnd")

typedef enum dh_nccl_kind {
#define DH__NCCL_KIND_ENUM(id, api) DH_NCCL_##id,
    DH_NCCL_KINDS(DH__NCCL_KIND_ENUM)
#undef DH__NCCL_KIND_ENUM
    DH_NCCL_KIND_COUNT
} dh_nccl_kind_t;

typedef struct dh_nccl_range {
    uintptr_t lo;
    size_t len;                       /* 0: none */
} dh_nccl_range_t;

typedef struct dh_nccl_call {
    dh_nccl_kind_t kind;
    ncclDataType_t dtype;
    ncclRedOp_t redop;
    int root;                         /* root of rooted collectives, peer of send/recv */
    const void *sendbuff;
    void *recvbuff;
    size_t count;                     /* as the API call was given */
    ncclComm_t comm;
    cudaStream_t stream;
    struct dh_nccl_comm *reg;         /* registry entry (set by dh_nccl_call_check) */
    dh_nccl_range_t read, write;      /* this rank's bytes (set by dh_nccl_call_check) */
} dh_nccl_call_t;

/* The API name of a kind ("ncclAllReduce"). */
const char *dh_nccl_kind_api(dh_nccl_kind_t k);
/* Bytes per element of t, 0 outside ncclDataType_t. */
size_t dh_nccl_dtype_size(ncclDataType_t t);

/* What a wrapper may do with a collective or point-to-point call in a deferring mode. */
typedef enum dh_nccl_verdict {
    DH_NCCL_CAPTURE,   /* checked: c->reg and the ranges are set */
    DH_NCCL_FORWARD,   /* the shim cannot vouch for it: drain and let the library answer */
    DH_NCCL_FAILED     /* the communicator has an asynchronous error: return *err */
} dh_nccl_verdict_t;

/* Checks c as NCCL would before enqueueing it (a known communicator, data type, op, root
 * or peer within the communicator, buffers present) and computes its byte ranges; counts
 * the call in the communicator's statistics when capturing. */
dh_nccl_verdict_t dh_nccl_call_check(dh_nccl_call_t *c, ncclResult_t *err);

/* Calls the real pncclX for c on stream s (c->stream when s is NULL and use_own is set) on
 * this thread. Markers call pncclGroupStart/End. ncclInternalError when the library lacks
 * the function. */
ncclResult_t dh_nccl_call_issue(const dh_nccl_call_t *c, cudaStream_t s, int use_own);

/* Issues calls[0..n) in order on this thread on their own streams (a batch the shim could
 * not defer), markers included; returns the first failure, else the last group end's
 * result. The group markers stay balanced only as far as the list is. */
ncclResult_t dh_nccl_calls_issue(const dh_nccl_call_t *calls, int n);

/* Makes the op of one call (group = 0, n = 1) or of a group batch (group = 1, markers
 * included); *out receives it. The first call installs the NCCL kinds' tables (describe:
 * sig from the calls' kinds, data types, reduction ops and communicators' creation order;
 * shape from the counts and peers; name "nccl OP TYPE COUNT", a group "nccl Group N OP
 * ...", its first member; footprint: each member's exact byte ranges on this rank). pinned is set when any member's communicator is pinned.
 * Errors: DH_ERR_NOMEM; DH_ERR_UNSUPPORTED for a batch whose members use more than one
 * (device, stream) (issued at once instead). */
dh_status_t dh_nccl_op_make(dh_op_t **out, const dh_nccl_call_t *calls, int n, int group);

/* Counts a call forwarded at once (passthrough, or one the shim could not defer) in its
 * communicator's statistics; looks the communicator up. */
void dh_nccl_count_forwarded(const dh_nccl_call_t *c);

#endif
