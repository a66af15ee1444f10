/*
 * layers.h: one transformer layer, forward and backward, as Megatron-Core issues it
 * (megatron/core/transformer/transformer_layer.py, tensor_parallel/layers.py and
 * mappings.py; REFERENCE.md).
 *
 * With sequence parallelism, per layer: forward 2 all-gathers (before QKV and FC1) and 2
 * reduce-scatters (after the projection and FC2); backward 4 all-gathers (the gradients at
 * the row-parallel outputs, and the re-gathered LayerNorm outputs the column-parallel
 * weight gradients need) and 2 reduce-scatters (the column-parallel input gradients, each
 * overlapped with its weight-gradient GEMM). Without it: 2 all-reduces forward, 2 backward.
 *
 * Every tensor is a stream-ordered allocation on the current stream; the backward frees
 * what the forward saved.
 */
#ifndef WL_LAYERS_H
#define WL_LAYERS_H

#include "model.h"

/* x: the layer's input [Tsp, h] (kept in sv for the backward, which frees it). Returns
 * the output [Tsp, h]. */
void *wl_layer_fwd(wl_model_state_t *ms, const wl_layer_params_t *lp, wl_saved_t *sv, void *x);
/* dout: gradient of the output [Tsp, h] (consumed). Accumulates every weight gradient into
 * main_grad and returns the input gradient [Tsp, h]. */
void *wl_layer_bwd(wl_model_state_t *ms, const wl_layer_params_t *lp, wl_saved_t *sv, void *dout);

/* ---- tensor-parallel mappings shared with head.c and moe.c ---- */

/* Sequence-parallel all-gather of [Tsp, h] into a new [T, h]; without sequence parallelism
 * returns x itself (*owned = 0). async: the gather's work goes to *work. */
void *wl_tp_gather(wl_model_state_t *ms, const void *x, int *owned, struct wl_work **work);
/* Reduction of a row-parallel output [T, h]: reduce-scatter into a new [Tsp, h] (x is
 * freed) or all-reduce in place. */
void *wl_tp_reduce(wl_model_state_t *ms, void *x);
/* Backward of a column-parallel input (Megatron's LinearWithGradAccumulationAndAsync-
 * Communication): re-gathers the saved input while computing dx = dy W, then reduces dx
 * (reduce-scatter or all-reduce) while the weight-gradient GEMM runs. Returns the input
 * gradient [Tsp, h]; x_saved is not freed. */
void *wl_column_bwd(wl_model_state_t *ms, const void *x_saved, const void *dy, const wl_param_t *w,
                    int64_t out);

#endif
