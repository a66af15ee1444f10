/*
 * optimizer.h: Megatron's contiguous gradient buffer, data-parallel gradient reduction and
 * the Adam step (megatron/core/distributed/param_and_grad_buffer.py,
 * distributed_data_parallel.py, optimizer/distrib_optimizer.py).
 *
 * Parameters live in one model-dtype buffer and their gradients in one fp32 main_grad
 * buffer of the same layout (an expert buffer apart, reduced over EXPERT_DATA_PARALLEL_
 * GROUP). The layout is the reverse of the forward order, so buckets fill in the order the
 * backward produces gradients; sequence-parallel (partial) gradients sit together at the
 * end so one all-reduce over tp completes them. Each bucket is scaled by 1 / (dp x cp) and
 * reduced over DATA_PARALLEL_GROUP_WITH_CP: all-reduce, or reduce-scatter with the
 * distributed optimizer, which keeps fp32 master weights and moments only for its shard of
 * each bucket and all-gathers the updated parameters afterwards. With --overlap-grad-reduce
 * a bucket's reduction starts, asynchronously on the group's NCCL stream, as soon as the
 * last micro-batch's backward has produced all its gradients.
 */
#ifndef WL_OPTIMIZER_H
#define WL_OPTIMIZER_H

#include "model.h"

typedef struct wl_opt wl_opt_t;

/* Lays out the buffers, points every parameter's data and grad into them and, unless the
 * vgpu runs timing-only, initialises weights (model.c's global init), masters and moments. */
wl_opt_t *wl_opt_create(wl_model_state_t *ms);
void wl_opt_destroy(wl_opt_t *o);

/* Zeroes the gradient buffers (start of an iteration). */
void wl_opt_zero_grad(wl_opt_t *o);
/* Arms the bucket counters for the backward that reduces (the last micro-batch's). */
void wl_opt_arm(wl_opt_t *o, int armed);
/* The backward has produced the gradients of these parameters; with --overlap-grad-reduce
 * and armed, full buckets start reducing. */
void wl_opt_ready(wl_opt_t *o, wl_param_t *const *params, int n);
/* Every gradient of this layer / of the non-layer parameter p. */
void wl_opt_ready_layer(wl_opt_t *o, const wl_layer_params_t *lp);
/* Megatron's finalize_model_grads: finishes (or runs) the data-parallel reductions, then
 * all-reduces the sequence-parallel gradients over tp. */
void wl_opt_finalize(wl_opt_t *o);
/* Adam on the (shard of the) fp32 masters, copy to the model weights, and the distributed
 * optimizer's parameter all-gather. */
void wl_opt_step(wl_opt_t *o, float lr);

/* Host access for the gradient check (fp32 models; synchronising). */
float wl_opt_get_grad(wl_opt_t *o, const wl_param_t *p, int64_t i);
float wl_opt_get_param(wl_opt_t *o, const wl_param_t *p, int64_t i);
void wl_opt_set_param(wl_opt_t *o, const wl_param_t *p, int64_t i, float v);

#endif
