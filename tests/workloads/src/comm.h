/*
 * comm.h: process groups and collectives the way PyTorch's ProcessGroupNCCL issues them
 * (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp; REFERENCE.md).
 *
 * Each group owns one NCCL communicator (commName = Megatron's group description) and one
 * NCCL stream. A collective records an event on the caller's current stream, makes the
 * NCCL stream wait on it, runs there and records an end event; a synchronous collective
 * (and wl_wait for an asynchronous one) makes the current stream wait on the end event.
 * With the current-stream variant (newer PyTorch for blocking collectives) the collective
 * runs on the current stream itself. Every end event goes to a watchdog thread that polls
 * it with cudaEventQuery, as PyTorch's watchdog does.
 *
 * Groups of one member issue nothing (Megatron skips them). Calls on one group come from
 * one thread at a time (the forward and backward threads never run together). On a group
 * whose other members are not processes of the job, --emulate-comm replaces each NCCL call
 * by its emulation, inside the same event protocol (emucomm.h).
 */
#ifndef WL_COMM_H
#define WL_COMM_H

#include <mpi.h>
#include <nccl.h>

#include "wl.h"

typedef struct wl_group {
    const char *desc;   /* Megatron's group_desc, e.g. TENSOR_MODEL_PARALLEL_GROUP */
    int size, rank;     /* in the group */
    int *granks;        /* global (virtual) rank of each member */
    int real;           /* every member is a process of this job; else represented */
    MPI_Comm mpi;       /* the member processes (real groups), for the unique id */
    int split_color;    /* colour for the ncclCommSplit variant */
    ncclComm_t comm;    /* NULL when size == 1 */
    cudaStream_t stream;
} wl_group_t;

typedef struct wl_work wl_work_t;

/* Starts the watchdog and remembers the variant (current stream or side stream). */
void wl_comm_init(int current_stream);
/* Waits for all work, stops the watchdog, destroys the groups' communicators. */
void wl_comm_fini(wl_group_t *const *groups, int n);

/* Creates g's communicator (collective over the members): ncclCommInitRankConfig with the
 * unique id from member 0 (by MPI), or, for a represented group, a vgpu representative
 * communicator; world, when non-NULL, selects the ncclCommSplit variant instead. */
void wl_group_connect(wl_group_t *g, ncclComm_t world);
/* The world communicator for the split variant ("default_pg"). */
ncclComm_t wl_world_comm(MPI_Comm world, int rank, int size);

/* Collectives. Counts are elements of type t; all-gather and reduce-scatter take the
 * per-rank count. async = 0: the current stream waits before the call returns (NULL is
 * returned); async = 1: the caller passes the returned work to wl_wait later. */
wl_work_t *wl_allreduce(wl_group_t *g, void *buf, size_t n, ncclDataType_t t, ncclRedOp_t op,
                        int async);
wl_work_t *wl_allgather(wl_group_t *g, const void *in, void *out, size_t n, ncclDataType_t t,
                        int async);
wl_work_t *wl_reduce_scatter(wl_group_t *g, const void *in, void *out, size_t n,
                             ncclDataType_t t, int async);
wl_work_t *wl_broadcast(wl_group_t *g, void *buf, size_t n, ncclDataType_t t, int root, int async);

/* One entry of a batched point-to-point exchange (torch.distributed.batch_isend_irecv):
 * send (1) or receive (0) n elements with the member of group rank peer. */
typedef struct wl_p2p {
    int send, peer;
    void *buf;
    size_t n;
} wl_p2p_t;
wl_work_t *wl_batch_p2p(wl_group_t *g, const wl_p2p_t *ops, int nops, ncclDataType_t t, int async);

/* The current stream waits for w; w is released. NULL is allowed. */
void wl_wait(wl_work_t *w);

/* NCCL type of a workload dtype. */
static inline ncclDataType_t wl_nccl_dt(int dt) { return dt == WL_DT_F32 ? ncclFloat : ncclBfloat16; }

#endif
