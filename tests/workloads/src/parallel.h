/*
 * parallel.h: Megatron's parallel state (megatron/core/parallel_state.py).
 *
 * Rank order "tp-cp-ep-dp-pp": global rank g = tp + TP * (cp + CP * (dp + DP * pp)) for the
 * dense part; the expert part orders tp-ep-dp-pp (expert tensor parallel = TP, cp = 1):
 * g = tp + TP * (ep + EP * (edp + EDP * pp)), so an expert-parallel group is a run of data-
 * parallel ranks. Groups are created in Megatron's order with its descriptions:
 * DATA_PARALLEL_GROUP_WITH_CP, DATA_PARALLEL_GROUP, CONTEXT_PARALLEL_GROUP,
 * TENSOR_MODEL_PARALLEL_GROUP, PIPELINE_MODEL_PARALLEL_GROUP, EXPERT_MODEL_PARALLEL_GROUP,
 * EXPERT_DATA_PARALLEL_GROUP.
 *
 * Representative mode: the job runs one process per (pipeline stage, context-parallel
 * rank, expert-parallel rank) with tp rank 0 and expert-data-parallel rank 0; groups whose
 * other members are not processes (tp, dp, dp-cp, edp) become vgpu representative
 * communicators (vgpu_nccl_represent), the rest (pp, cp, ep) connect the processes for real.
 * --emulate-comm uses the same processes and emulates the collectives of the groups whose
 * other members are not processes, on any device (emucomm.h).
 */
#ifndef WL_PARALLEL_H
#define WL_PARALLEL_H

#include "comm.h"

typedef struct wl_ps {
    int world;          /* tp * cp * dp * pp */
    int grank;          /* this process's (virtual) global rank */
    int nproc, proc;    /* MPI world */
    int tp_rank, cp_rank, dp_rank, pp_rank, ep_rank, edp_rank;
    wl_group_t dp_cp, dp, cp, tp, pp, ep, edp;
    ncclComm_t world_comm; /* split variant only */
} wl_ps_t;

/* Computes this process's ranks from the MPI world and cfg (fails the job on a mismatch
 * between the number of processes and the configuration) and builds the MPI side of every
 * group. Must run before any CUDA call: in representative mode it tells the vgpu the
 * global rank this process stands for. */
void wl_ps_init(wl_ps_t *ps, const wl_cfg_t *cfg);
/* Creates the NCCL communicators in Megatron's order (collective over the job). */
void wl_ps_connect(wl_ps_t *ps, const wl_cfg_t *cfg);
/* Destroys the communicators (after wl_comm_fini's synchronisation). */
void wl_ps_fini(wl_ps_t *ps);

/* Processes a configuration needs: world, or pp * cp * ep in representative mode. */
int wl_ps_processes(const wl_cfg_t *cfg);

#endif
