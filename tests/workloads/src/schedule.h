/*
 * schedule.h: one training iteration's forward and backward passes over the micro-batches
 * (megatron/core/pipeline_parallel/schedules.py forward_backward_pipelining_without_
 * interleaving; with one stage it degenerates to forward_backward_no_pipelining).
 *
 * 1F1B: stage r runs min(pp - r - 1, M) warm-up forwards, then alternates one forward and
 * one backward, then drains the remaining backwards. Activations and gradients between
 * stages go by batched point-to-point over PIPELINE_MODEL_PARALLEL_GROUP (send and receive
 * in one group, as Megatron's batch_isend_irecv path). Forwards run on the calling (main)
 * thread; every backward runs on a second thread while the main thread blocks, as the
 * PyTorch autograd engine runs CUDA backward on its device thread. Data: Megatron's
 * get_batch, i.e. tensor-parallel rank 0 copies the micro-batch (tokens, labels, this
 * context-parallel rank's chunks) from pinned host memory and broadcasts it over
 * TENSOR_MODEL_PARALLEL_GROUP, on the first and last stages.
 */
#ifndef WL_SCHEDULE_H
#define WL_SCHEDULE_H

#include "optimizer.h"

typedef struct wl_sched wl_sched_t;

wl_sched_t *wl_sched_create(wl_model_state_t *ms, wl_opt_t *opt);
void wl_sched_destroy(wl_sched_t *s);
/* Micro-batches per iteration on this data-parallel rank: gbs / (mbs x dp). */
int wl_sched_microbatches(const wl_cfg_t *c);
/* Runs iteration `iter`: every micro-batch forward and backward; on the last stage adds each
 * micro-batch's loss to iter_loss[0] (device). Weight gradients accumulate in main_grad;
 * the last backward arms the overlapped gradient reduction. */
void wl_sched_run(wl_sched_t *s, int iter, float *iter_loss);

#endif
