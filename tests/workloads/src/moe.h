/*
 * moe.h: the MoE MLP with Megatron's all-to-all token dispatcher
 * (megatron/core/transformer/moe/token_dispatcher.py MoEAlltoAllTokenDispatcher).
 *
 * Router: a replicated [E, h] linear, top-k of the logits, softmax over the k chosen.
 * Dispatch: tokens are permuted into expert order; the per-expert counts are exchanged
 * first (an all-to-all over EXPERT_MODEL_PARALLEL_GROUP) and copied to the host (the
 * dispatcher's device-to-host synchronisation point), because the token all-to-all's split
 * sizes and the experts' GEMM shapes depend on them; then the tokens go to their experts'
 * ranks (grouped ncclSend/ncclRecv, as all_to_all_single with splits does), are regrouped
 * by local expert, run through each local expert's MLP (sequential GEMMs) and come back
 * the same way, weighted by the router's probabilities. Runs with tp = cp = 1.
 */
#ifndef WL_MOE_H
#define WL_MOE_H

#include "model.h"

/* ln2 [T, h] -> MLP output [T, h] (new). */
void *wl_moe_fwd(wl_model_state_t *ms, const wl_layer_params_t *lp, wl_saved_t *sv, const void *ln2);
/* dout [T, h] -> gradient at ln2 [T, h] (new); frees what wl_moe_fwd saved. */
void *wl_moe_bwd(wl_model_state_t *ms, const wl_layer_params_t *lp, wl_saved_t *sv, const void *dout);

#endif
