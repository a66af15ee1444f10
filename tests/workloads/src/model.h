/*
 * model.h: the model's shape on this rank, its parameters and the per-micro-batch state.
 *
 * GPT (LayerNorm, GELU MLP with biases, learned positions) and Llama (RMSNorm, SwiGLU, RoPE,
 * grouped-query attention, no biases), dense or with an MoE MLP. Input and output
 * embeddings are untied (Megatron's --untie-embeddings-and-output-weights), dropout is 0.
 * Tensor parallelism splits heads and FFN columns (column-parallel QKV and FC1,
 * row-parallel projection and FC2) and the vocabulary; with sequence parallelism the
 * residual stream is split along the sequence.
 *
 * Parameters are initialised by global element from a hash (wl_hash_uniform), so every
 * parallel layout of the same model starts from the same weights.
 */
#ifndef WL_MODEL_H
#define WL_MODEL_H

#include "parallel.h"

#define WL_MAX_SEG 3
#define WL_MAX_LOCAL_EXPERTS 64

enum { WL_INIT_NORMAL = 0, WL_INIT_ONE = 1, WL_INIT_ZERO = 2 };

typedef struct wl_param {
    char name[48];
    int64_t rows, cols;  /* local shape, row-major [rows, cols] (a weight is [out, in]) */
    int64_t off;         /* element offset in its buffer (optimizer.c) */
    int expert;          /* lives in the expert buffer (reduced over the expert-dp group) */
    int sp_partial;      /* its gradient is partial per sequence shard: all-reduced over tp */
    int init;            /* WL_INIT_* */
    float std;
    uint64_t seed;
    int64_t gcols, col0; /* global columns and this shard's first (row-parallel weights) */
    int nseg;            /* local row ranges and where they sit in the global rows */
    int64_t seg_local[WL_MAX_SEG], seg_global[WL_MAX_SEG], seg_len[WL_MAX_SEG];
    void *data;          /* model weight (dt) */
    float *grad;         /* fp32 main_grad */
} wl_param_t;

typedef struct wl_layer_params {
    wl_param_t *ln1_w, *ln1_b, *qkv_w, *qkv_b, *proj_w, *proj_b;
    wl_param_t *ln2_w, *ln2_b, *fc1_w, *fc1_b, *fc2_w, *fc2_b;
    wl_param_t *router_w;
    wl_param_t *exp_fc1[WL_MAX_LOCAL_EXPERTS], *exp_fc2[WL_MAX_LOCAL_EXPERTS];
} wl_layer_params_t;

typedef struct wl_model_state {
    const wl_cfg_t *cfg;
    const wl_ps_t *ps;
    int dt, gpt, moe, sp;
    int64_t h, d, nq_l, nkv_l, qkv_out, f_l, vpad, v_l, vstart;
    int64_t b, s_local, T, Tsp; /* micro-batch, local sequence, tokens, sequence-parallel tokens */
    int nlayers, layer0;        /* layers on this stage and the global index of the first */
    int vpp, lchunk;            /* model chunks on this stage (virtual stages) and layers in
                                   each: local layer l is in chunk l / lchunk; chunk c holds
                                   the layers of virtual stage c x pp + pp_rank (Megatron) */
    int first, last;            /* first / last pipeline stage */
    int local_experts;
    wl_chunks_t chunks;
    wl_param_t *params;
    int nparams, cap;
    wl_layer_params_t *layers;
    wl_param_t *wte, *wpe, *lnf_w, *lnf_b, *out_w;
} wl_model_state_t;

/* Derives the sizes and registers every parameter of this rank's stage, in forward order
 * (fails the job on a shape the parallel layout cannot split). */
void wl_model_build(wl_model_state_t *ms, const wl_cfg_t *cfg, const wl_ps_t *ps);
/* Fills host[] (local parameter p's fp32 values) from the global initialisation. */
void wl_param_init_host(const wl_param_t *p, float *host);
void wl_model_free(wl_model_state_t *ms);
/* Global index of local layer l. Megatron's get_transformer_layer_offset with virtual
 * stages: chunk c of pipeline rank r starts at (c x pp + r) x layers / (pp x vpp)
 * (NVIDIA/Megatron-LM megatron/core/transformer/transformer_layer.py). */
static inline int wl_layer_global(const wl_model_state_t *ms, int l)
{
    return (l / ms->lchunk * ms->cfg->pp + ms->ps->pp_rank) * ms->lchunk + l % ms->lchunk;
}
/* The first (last) virtual stage of the whole model: embedding (head) lives there. */
static inline int wl_chunk_first(const wl_model_state_t *ms, int c) { return ms->first && c == 0; }
static inline int wl_chunk_last(const wl_model_state_t *ms, int c) { return ms->last && c == ms->vpp - 1; }

/* ---- per-micro-batch activations kept for the backward pass ---- */

typedef struct wl_saved {
    void *x, *ln1, *qkv, *ctx, *x2, *ln2, *fc1, *act;
    float *mean1, *rstd1, *mean2, *rstd2, *lse;
    /* MoE */
    float *rlogits, *rw;
    int32_t *ridx, *rowof;
    void *perm, *eout;
    int64_t *splits; /* host: per-expert-rank counts sent and received (2 * ep), per-expert rows */
} wl_saved_t;

typedef struct wl_mb {
    int index;
    int chunk;                /* model chunk (virtual stage on this rank), 0 without vpp */
    int32_t *tokens, *labels; /* device, [T] */
    void *input;              /* stage input [Tsp, h] (embedding output or received) */
    void *output;             /* stage output [Tsp, h] (sent to the next stage) */
    wl_saved_t *saved;        /* [nlayers] */
    void *lnf, *logits;
    float *lnf_mean, *lnf_rstd, *ce; /* ce: max, sumexp, pred [T] each, then acc[2] */
} wl_mb_t;

#endif
