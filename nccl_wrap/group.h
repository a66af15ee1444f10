/*
 * group.h: the calling thread's ncclGroupStart..ncclGroupEnd batch (NCCL keeps group state
 * per thread, and so does the shim).
 *
 * When the mode defers, the outermost ncclGroupStart starts CAPTURING: the batch's calls are
 * checked and kept (with a marker for every nested start and end) and nothing reaches the
 * library; the outermost ncclGroupEnd makes them ONE op (DH_OP_NCCL_GROUP) and returns
 * success. A batch the shim cannot defer (members on several streams or devices, no memory,
 * the mode stopped deferring) is issued at once at its end, after a drain, in program order.
 *
 * A call inside a capturing batch that cannot join it (a communicator being created, a
 * split, a call the shim cannot check, ncclGroupSimulateEnd) RELEASES the batch first: a
 * drain, then what was captured so far is issued on this thread, starts included, so the
 * library's group is open to the same depth; from there on the group is FORWARDED: calls
 * go to the library at once, and its outermost end drains first (work captured since must
 * be issued before the library launches the group). A group started while the mode does
 * not defer is forwarded from the start.
 *
 * Communicators created inside a forwarded group are ready only after its outermost end;
 * dh_nccl_group_note_new() keeps them until then, when the registry learns what they are.
 *
 * Thread-safety: all state is the calling thread's.
 */
#ifndef DH_NCCL_GROUP_H
#define DH_NCCL_GROUP_H

#include <nccl.h>

#include "nccl_op.h"
#include "registry.h"

typedef enum dh_nccl_group_mode {
    DH_GROUP_NONE,       /* no group open on this thread */
    DH_GROUP_CAPTURE,    /* the batch is being captured */
    DH_GROUP_FORWARD     /* the library's group is open on this thread */
} dh_nccl_group_mode_t;

/* This thread's mode: a thread-local read. */
dh_nccl_group_mode_t dh_nccl_group_mode(void);

/* The wrappers' bodies of ncclGroupStart, ncclGroupEnd and ncclGroupSimulateEnd. */
ncclResult_t dh_nccl_group_start(void);
ncclResult_t dh_nccl_group_end(void);
ncclResult_t dh_nccl_group_simulate_end(ncclSimInfo_t *sim);

/* A collective or point-to-point call inside a capturing batch: checks it and keeps it
 * (ncclSuccess), returns the communicator's asynchronous error (which also fails the batch),
 * or releases the batch and forwards the call, returning the library's answer. */
ncclResult_t dh_nccl_group_call(dh_nccl_call_t *c);

/* Releases a capturing batch (see above); nothing when the thread is not capturing. */
void dh_nccl_group_release(void);

/* e was created inside the forwarded group of this thread: learn it at the group's end. */
void dh_nccl_group_note_new(dh_nccl_comm_t *e);

#endif
