/*
 * nccl_int.h: internals of the vgpu's libnccl.so.2.
 *
 * Files: nccl_api.c (communicators: init, split, shrink, destroy, queries, errors),
 * nccl_shm.c (the shared-memory segment of a communicator and the per-op data segments),
 * nccl_coll.c (collective and point-to-point entry points, groups, op building),
 * nccl_rdv.c (the rendezvous callbacks post/poll/exec), nccl_deadlock.c (a cycle of
 * waiting ops across ranks, reported within seconds), nccl_reduce.c (data types and
 * reductions), nccl_ops.c (custom pre-multiply-sum ops), nccl_cost.c (the alpha-beta
 * cost model).
 *
 * Model. A communicator's members meet in one POSIX shared-memory segment named after a
 * 64-bit key drawn from the unique id (docs in nccl_shm.c). Every collective, every
 * point-to-point call and every ncclGroupStart..End batch (per stream) becomes ONE vgpu
 * operation of class VG_COMM whose rendezvous callbacks publish this rank's inputs and
 * wait, without blocking, for its peers'.
 *
 * Locking. The rendezvous callbacks run with the core's device lock held; every field of
 * vgn_batch_t / vgn_item_t after submission is guarded by it. A communicator's host-side
 * state (coll_seq, send_seq/recv_seq, split_epoch, shrink_epoch, premul) belongs to the
 * thread that issues calls on it
 * (NCCL forbids concurrent calls on one communicator). Fields read by the callbacks are
 * immutable after init, except async_err and aborted (atomics) and the shared segment
 * (process-shared atomics, see nccl_shm.c). Lock order: the core's device lock, then
 * g_last_lock (nccl_api.c); nothing of ours is held across a call into the core.
 */
#ifndef VGN_NCCL_INT_H
#define VGN_NCCL_INT_H

#include <stddef.h>
#include <stdint.h>

#include <nccl.h>

#include "vg.h"

/* nccl.h declares these without a prototype; C11 code needs one. */
ncclResult_t pncclGroupStart(void);
ncclResult_t pncclGroupEnd(void);
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);
void pncclResetDebugInit(void);
void ncclResetDebugInit(void);

/* ---- unique id ---- */
#define VGN_ID_MAGIC 0x4e436756u /* "VgCN" little-endian */
#define VGN_ID_REPRESENT 0x1u

/* The vgpu's view of the 128-byte ncclUniqueId. key is random (getrandom) and names the
 * communicator's shared segment; rep_* describe representative mode. */
typedef struct vgn_id {
    uint32_t magic;
    uint32_t flags;      /* VGN_ID_* */
    int32_t rep_base;    /* global rank of member 0 (representative mode) */
    int32_t rep_stride;  /* global-rank distance between members */
    uint64_t key[2];
} vgn_id_t;
_Static_assert(sizeof(vgn_id_t) <= sizeof(ncclUniqueId), "vgn_id_t must fit a unique id");

/* ---- shared segment (layout in nccl_shm.c) ---- */
#define VGN_COLL_SLOTS 64 /* collectives in flight per rank before a post waits */
#define VGN_P2P_SLOTS 8   /* sends in flight per ordered pair before a post waits */

typedef struct vgn_member {
    uint32_t joined;  /* 1 once the fields below are valid (atomic, release) */
    int32_t grank;    /* vg_global_rank() of the member's process */
    int32_t pid;
    int32_t dev;
} vgn_member_t;

typedef struct vgn_split_ent {
    uint64_t epoch;   /* split number the fields belong to (atomic, release) */
    int32_t color, key;
} vgn_split_ent_t;

/* One collective posted by one rank: slot seq % VGN_COLL_SLOTS of that rank's ring. */
typedef struct vgn_cslot {
    uint64_t tag;      /* seq + 1 once posted, 0 while empty (atomic, release) */
    uint32_t left;     /* peers that have not consumed it yet (atomic) */
    uint32_t call;     /* vgn_kind_t */
    uint64_t count;
    int32_t dtype, redop, root, has_data;
    double t_ready;
} vgn_cslot_t;

/* The k-th send from src to dst meets the k-th receive at dst from src in slot
 * k % VGN_P2P_SLOTS of the pair. Each side owns its half and the other side's done mark. */
typedef struct vgn_pslot {
    uint64_t send_tag, recv_tag;   /* k + 1 once that side posted (atomic, release) */
    uint64_t send_done, recv_done; /* k + 1 once the other side consumed the half */
    uint64_t send_count, recv_count;
    int32_t send_dtype, recv_dtype;
    int32_t has_data, pad;
    double t_send, t_recv;
} vgn_pslot_t;

typedef struct vgn_shm_hdr {
    uint32_t nranks;   /* set by the first member (compare-and-swap from 0) */
    uint32_t njoined;  /* atomic */
    uint32_t nleft;    /* atomic: members that destroyed or aborted their communicator */
    uint32_t pad;
} vgn_shm_hdr_t;

typedef struct vgn_shm {
    void *base;
    size_t size;
    int n;
    vgn_shm_hdr_t *hdr;
    vgn_member_t *members;     /* [n] */
    vgn_split_ent_t *split;    /* [2][n]: epoch % 2 */
    vgn_cslot_t *coll;         /* [n][VGN_COLL_SLOTS] */
    vgn_pslot_t *p2p;          /* [n * n][VGN_P2P_SLOTS], pair index src * n + dst */
} vgn_shm_t;

/* ---- communicator ---- */
#define VGN_COMM_MAGIC 0x636f6d6d6e67765full

struct ncclComm {
    uint64_t magic;
    uint64_t key;           /* names the segment and the data segments */
    int rank, nranks, dev;
    int link;               /* 0: all members on one node, 1: spans nodes */
    int per_node;           /* link 1: members on each node, the minimum (nccl_cost.c) */
    int represent;          /* representative mode: no peers, no segment */
    int ready;              /* 1 once every member joined (init complete) */
    int blocking;           /* config->blocking, 1 when unset */
    char name[64];          /* commName (copied, truncated) or "c<key>" */
    int *granks;            /* [nranks] global rank of each member */
    vgn_shm_t shm;          /* unused in representative mode */
    int refs;               /* atomic: user handle + one per op in flight */
    int async_err;          /* atomic ncclResult_t */
    int aborted;            /* atomic */
    int finalized;
    uint64_t coll_seq;      /* next collective sequence number */
    uint64_t *send_seq;     /* [nranks] next send to each peer */
    uint64_t *recv_seq;     /* [nranks] next receive from each peer */
    uint64_t split_epoch;   /* splits done on this communicator */
    uint64_t shrink_epoch;  /* shrinks (only the remaining ranks count them) */
    struct vgn_premul *premul; /* ncclRedOpCreatePreMulSum ops: id ncclNumOps + index */
    int npremul;
    double t_init_wall;     /* wall clock when the join started (for the timeout) */
};

/* ---- operation records ---- */
typedef enum {
    VGN_ALLREDUCE = 0, VGN_ALLGATHER, VGN_REDUCESCATTER, VGN_BROADCAST, VGN_REDUCE,
    VGN_ALLTOALL, VGN_GATHER, VGN_SCATTER, VGN_SEND, VGN_RECV, VGN_NKINDS
} vgn_kind_t;

/* The reduction of a call's item: built-in ops keep their value; every custom
 * (pre-multiply-sum) op becomes VGN_PREMUL, with its scalar captured at the call. */
#define VGN_PREMUL ((ncclRedOp_t)ncclNumOps)

typedef struct vgn_premul {
    int live;
    ncclDataType_t dtype;
    int on_device;          /* ncclScalarDevice: read at the collective's start */
    const void *dev;
    unsigned char value[8]; /* ncclScalarHostImmediate: copied at creation */
} vgn_premul_t;

typedef struct vgn_item {
    vgn_kind_t kind;
    ncclComm_t comm;        /* holds a reference while the op lives */
    const void *sendbuff;
    void *recvbuff;
    size_t count;           /* the count the API call was given */
    ncclDataType_t dtype;
    ncclRedOp_t redop;
    const void *scalar_dev; /* VGN_PREMUL: the scalar in device memory, or NULL */
    unsigned char scalar[8];/* VGN_PREMUL: the scalar's value when held on the host */
    int root;               /* rooted collectives; peer for send/recv */
    uint64_t seq;           /* collective seq, or per-pair seq for send/recv */
    cudaStream_t stream;
    /* Rendezvous state (guarded by the device lock). */
    int posted;             /* published into the segment */
    int posted_data;        /* ... with a data segment of this rank's input */
    int done;               /* every counterpart has posted (and its slot was released) */
    int peer_data;          /* the counterparts this rank reads posted data segments */
    int data_done;          /* the counterparts' data segments released */
    double t_peers;         /* latest t_ready among the counterparts, once done */
    void *own;              /* this rank's input snapshot (mapping or heap) */
    size_t own_len;
    int own_is_map;
} vgn_item_t;

typedef struct vgn_batch {
    double t_ready;         /* from post */
    double wall_posted;     /* CLOCK_MONOTONIC seconds at post: the timeout counts from it */
    double dl_checked;      /* when the deadlock detector last looked (nccl_deadlock.c) */
    int nitems;
    vgn_item_t items[];
} vgn_batch_t;

/* ---- nccl_reduce.c ---- */
/* Bytes per element, or 0 for a value that is not a ncclDataType_t. */
size_t vgn_dtype_size(int dtype);
const char *vgn_dtype_name(int dtype);
const char *vgn_redop_name(int op);
const char *vgn_kind_name(vgn_kind_t k);
/* out[i] = in[0][i] op in[1][i] op ... op in[n-1][i], in that order, for i < count,
 * accumulated in fp32 for 16- and 8-bit floats (fp64 for fp64, wrapping integer arithmetic
 * for integers) and rounded once to nearest even; ncclAvg is the sum divided by n;
 * VGN_PREMUL sums scalar * in[k][i] (scalar: one element of type dt). out may alias any
 * in[k] element for element. */
void vgn_reduce(void *out, const void *const *in, int n, size_t count, ncclDataType_t dt,
                ncclRedOp_t op, const void *scalar);

/* ---- nccl_ops.c ---- */
/* Resolves a call's op for item it (dtype set): built-in ops pass; a live custom op of the
 * item's communicator and type becomes VGN_PREMUL with its scalar. ncclInvalidArgument
 * (with a message) otherwise. */
ncclResult_t vgn_resolve_op(vgn_item_t *it, ncclRedOp_t op, const char *api);
void vgn_premul_free(ncclComm_t c);

/* ---- nccl_cost.c (formulas and placement rules there) ---- */
/* Sets c->link and c->per_node from c->granks[0..nranks) (filled by the caller) placed on
 * nodes of gpus_per_node GPUs (values < 1 count as 1). Never fails. */
void vgn_comm_place(ncclComm_t c, int gpus_per_node);
/* Link class of point-to-point traffic between this rank of c and member peer: 1 when the
 * two sit on different nodes; c->link for a peer out of range. */
int vgn_pair_link(ncclComm_t c, int peer, int gpus_per_node);
/* Solo time in ns of collective k over n ranks on link class link (0 intra-node, 1
 * inter-node) with per_node members on each node (used for link 1 by the ring-like
 * collectives). bytes: S (all-reduce, broadcast, reduce), S_total = n x per-rank bytes
 * (all-gather, reduce-scatter, gather, scatter) or the per-rank send size (all-to-all). */
VG_API double vg_nccl_cost_coll(const vgpu_profile_t *p, vgn_kind_t k, int n, int link,
                                int per_node, double bytes);
/* Solo time in ns of point-to-point traffic of `bytes` in the busier direction on link
 * class link (one flow per GPU pair). */
VG_API double vg_nccl_cost_p2p(const vgpu_profile_t *p, int link, double bytes);
/* Bytes rank puts on the wire for collective k (the ring algorithm), for the counters. */
VG_API double vg_nccl_cost_bytes_sent(vgn_kind_t k, int n, int rank, int root, double bytes);

/* ---- nccl_shm.c ---- */
/* Opens (creating when first) the communicator's segment for n members and publishes this
 * member. Never waits for peers. Returns ncclSuccess, ncclInvalidUsage (nranks disagree,
 * rank joined twice) or ncclSystemError (with a message). */
ncclResult_t vgn_shm_join(ncclComm_t c);
/* Waits until every member joined, up to the configured timeout; on timeout prints which
 * ranks are missing and returns ncclSystemError. Fills c->granks and c->link. */
ncclResult_t vgn_shm_wait(ncclComm_t c);
void vgn_shm_unmap(vgn_shm_t *s);
/* Segment names: "/vgn-<key>-c<rank>-<seq>" (collective data), "/vgn-<key>-p<src>-<dst>-<k>"
 * (point-to-point data). */
void vgn_data_name(char *buf, size_t len, uint64_t key, int p2p, int a, int b, uint64_t seq);
/* A data segment is a 64-byte header (the number of readers that have not released it)
 * followed by the data. */
#define VGN_DATA_HDR 64
/* Creates a data segment holding a copy of src[0..len) (len > 0) for `readers` readers.
 * With map_out, keeps the mapping (the data starts VGN_DATA_HDR bytes in) for the caller
 * to munmap(len + VGN_DATA_HDR). Returns 0, or -1 with a message. */
int vgn_data_put(const char *name, const void *src, size_t len, uint32_t readers,
                 void **map_out);
/* Maps a peer's data segment (header included); NULL with a message when it is gone. */
void *vgn_data_map(const char *name, size_t len);
/* Releases one reader's hold on a mapped data segment and unmaps it; the last reader
 * unlinks it. map may be NULL: the segment is then opened only to be released. */
void vgn_data_release(const char *name, void *map, size_t len);
/* At ncclCommDestroy/Abort: unlinks the data segments still named in this member's rings
 * when nobody will read them (failed is set: the communicator failed or is aborted), and,
 * for the last member to leave, those of every member. */
void vgn_shm_leave(ncclComm_t c, int failed);
/* Seconds on CLOCK_MONOTONIC. */
double vgn_wall(void);

/* ---- nccl_api.c ---- */
/* References keep a communicator's memory alive for the ops that use it; the last unref
 * unmaps its segment and frees it. Atomic: any thread. */
void vgn_comm_ref(ncclComm_t c);
void vgn_comm_unref(ncclComm_t c);
/* Records the first asynchronous error of c (later ones are kept out). */
void vgn_set_async(ncclComm_t c, ncclResult_t r);
/* Validates a handle: ncclInvalidArgument for NULL or a non-communicator, the async error
 * of a failed communicator, ncclInvalidUsage once aborted or before init completed. */
ncclResult_t vgn_comm_check(ncclComm_t c);
/* Remembers msg as ncclGetLastError's answer and prints it as a vgpu message. */
void vgn_error(const char *fmt, ...) VG_PRINTF(1, 2);
/* VGPU_COMM_TIMEOUT in seconds (from the core's configuration). */
double vgn_timeout_s(void);

/* ---- nccl_coll.c ---- */
/* Nonzero inside ncclGroupStart..ncclGroupEnd on this thread. */
int vgn_in_group(void);
/* Queues a communicator whose join must complete at the outermost ncclGroupEnd. */
ncclResult_t vgn_group_defer_init(ncclComm_t c);

/* ---- nccl_fault.c ---- */
/* VGPU_NCCL_FAIL: ncclSuccess for a call that goes ahead; otherwise the result the call
 * returns. *skip is set when the call returns success but must enqueue nothing. */
ncclResult_t vgn_fault(vgn_kind_t kind, ncclComm_t c, int *skip);

/* ---- nccl_rdv.c ---- */
/* The callbacks of every communication op (payload: a vgn_batch_t the op owns). */
extern const vg_rdv_ops_t vgn_rdv_ops;
void vgn_exec(vg_op_t *op);          /* op->exec: computes this rank's outputs */
void vgn_batch_release(vg_op_t *op); /* op->release: undoes what was left, frees the batch */
/* The global ranks a posted item still waits for (who[0..max)); how many. 0 for an item that
 * is done, not posted yet (its own slot is held) or has no peers. Device lock held. */
int vgn_item_waits(const vgn_item_t *it, int *who, int max);

/* ---- nccl_deadlock.c ---- */
/* Called by the poll of op with the device lock held: waiting 1 while it waits for peers
 * in other processes (*checked is its last look: at most one every 100 ms), 0 when every
 * peer has posted and it is about to start. Publishes this rank's waiting heads for the
 * job and returns 1 when op is on a cycle of waits that none can leave, found by this rank
 * or another (the cycle is printed once per process, the last error set): the caller fails
 * the op. 0 otherwise, and always when there is no job to look at (one rank,
 * VGPU_DEADLOCK_S=0). */
int vgn_deadlock(vg_op_t *op, int waiting, double *checked);

#endif
