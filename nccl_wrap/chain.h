/*
 * chain.h: deferred NCCL operations keep their program order among themselves.
 *
 * NCCL requires every rank to issue the operations of different communicators in the same
 * order: a GPU that runs them through a shared hardware queue (CUDA_DEVICE_MAX_CONNECTIONS=1,
 * as Megatron sets) deadlocks when rank 0 issues A then B and rank 1 issues B then A. The
 * dispatcher may reorder work of different framework streams (stress mode does so at
 * random), so the shim ties each deferred NCCL op to the previous one of its device when
 * they are on different streams: after every NCCL op it records a shim-owned event on that
 * op's stream, and an NCCL op on another stream first waits for the latest such record. The
 * dispatcher never issues a wait before its record (scheduler/dispatch/dispatch.c), so NCCL ops are
 * issued in program order on every rank; on the device the wait also orders them, which
 * NCCL does within a communicator anyway. With one hardware queue
 * (CUDA_DEVICE_MAX_CONNECTIONS=1) the device runs work in issue order, and the wait is not
 * replayed (op.h, issue_only): there it would hold every later op of every stream behind
 * the record, which the program without the shim does not do. Ops on one stream need
 * nothing: the dispatcher keeps each stream's program order.
 *
 * A plan may move NCCL ops across communicators (dh_plan_op_t.moved: point-to-point posts
 * the planner proved can go after the next forward's collectives without a cycle of waits,
 * over every rank's plan and every mix of plan and program order the agreement produces,
 * scheduler/plan/moves.h). In an iteration such a plan pairs, the chain keeps each
 * strand's NCCL ops in program order, and the order across the two strands is the plan's
 * (the dispatcher issues each group in its order, order.c): an op waits for the latest
 * NCCL op of its own strand; one event per strand carries the records. Chaining a
 * forward's collective to the backward's last NCCL op instead would hold it behind the
 * whole backward (and the runtime would move it to a later group on one rank and not on
 * its tensor-parallel peer, whose stream use differs: a collective mismatch). The event
 * ops are the same as in program order (the template, recorded by profile mode, still
 * matches); only which event each refers to differs. Outside plan mode, with a plan that
 * moves nothing, and in an iteration the rank does not pair (the probe, a vetoed or
 * desynchronised one), every NCCL op follows the latest one, as above.
 *
 * Thread-safety: dh_nccl_submit may be called from any thread; a process-wide lock (a leaf
 * but for the scheduler's, taken inside it) keeps the wait, the op and the record together
 * in program order.
 */
#ifndef DH_NCCL_CHAIN_H
#define DH_NCCL_CHAIN_H

#include "op.h"

/* Submits an NCCL op (DH_OP_NCCL or DH_OP_NCCL_GROUP) to the scheduler, with the chaining
 * above (dh_tracker_chain_class says which). Takes ownership of op. */
void dh_nccl_submit(dh_op_t *op);

#endif
