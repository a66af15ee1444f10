/*
 * attention.h: core attention (fused, flash-style, causal, grouped-query) on the fused QKV
 * tensor [T, (nq + 2 nkv) d], and its context-parallel form.
 *
 * With context parallelism the key/value blocks travel around the CONTEXT_PARALLEL_GROUP
 * ring (Transformer Engine's AttnFuncWithCPAndKVP2P, Megatron's --cp-comm-type p2p): at
 * step i a rank computes its queries against the block of rank r - i while the next block
 * is exchanged by a batched send/receive; partial results merge by log-sum-exp. The
 * backward re-circulates the key/value blocks and passes each block's dK/dV accumulator
 * along the ring with them, so it arrives complete at its owner after cp steps.
 */
#ifndef WL_ATTENTION_H
#define WL_ATTENTION_H

#include "model.h"

/* ctx [T, nq d] and lse (fp32 [b][nq][s_local]) from qkv. */
void wl_attn_fwd(wl_model_state_t *ms, const void *qkv, void *ctx, float *lse);
/* dqkv [T, qkv_out] from dctx, with the forward's qkv, ctx and lse. */
void wl_attn_bwd(wl_model_state_t *ms, const void *qkv, const void *ctx, const void *dctx,
                 const float *lse, void *dqkv);

#endif
