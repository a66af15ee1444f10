/*
 * head.h: the ends of the model: the vocabulary-parallel embedding (first pipeline stage)
 * and the output layer with Megatron's vocabulary-parallel cross entropy (last stage).
 *
 * Embedding (megatron/core/models/common/embeddings/language_model_embedding.py): a masked
 * lookup in this rank's vocabulary shard, then, with learned positions (GPT), an all-reduce
 * over tp, the position embedding and the sequence-parallel slice; without (Llama), a
 * reduce-scatter (sequence parallel) or all-reduce.
 * Loss (tensor_parallel/cross_entropy.py): all-reduce MAX of the logits' maxima, all-reduce
 * SUM of the target logits and of the exponential sums; with context parallelism the
 * (sum, count) pair is all-reduced over cp (pretrain_gpt.py loss_func).
 */
#ifndef WL_HEAD_H
#define WL_HEAD_H

#include "model.h"

/* mb->tokens -> mb->input [Tsp, h]. */
void wl_embed_fwd(wl_model_state_t *ms, wl_mb_t *mb);
/* Gradient at the first layer's input (consumed) -> embedding gradients. */
void wl_embed_bwd(wl_model_state_t *ms, wl_mb_t *mb, void *dx);
/* mb->output -> loss of the micro-batch, added to iter_loss[0] (device, fp32). */
void wl_head_fwd(wl_model_state_t *ms, wl_mb_t *mb, float *iter_loss);
/* Returns the gradient at mb->output [Tsp, h]; scale is cp / micro-batches. Frees what
 * wl_head_fwd kept, mb->output included. */
void *wl_head_bwd(wl_model_state_t *ms, wl_mb_t *mb, float scale);

#endif
