/*
 * kargs.h: the workload's GPU kernels: their list and the argument block of each.
 *
 * Every kernel takes ONE argument, a struct passed by value (as many PyTorch kernels take
 * a functor or an offset calculator by value). This header is the contract between the
 * host implementations registered with the vgpu (kernels_host.c, kernels_nn.c) and the
 * device code compiled by nvcc (cuda/kernels.cu): both read the same struct, so the C and
 * CUDA sides cannot disagree on parameter layout. Plain C, no C11-only syntax, so nvcc's
 * C++ front end accepts it.
 *
 * Layouts: activations are [s, b, features] row-major (Megatron's sequence-first layout),
 * i.e. token t = si * b + bi, each token's features contiguous. "ld" is a row stride in
 * elements. dt is WL_DT_F32 or WL_DT_BF16 and applies to every pointer declared void *;
 * float * pointers are always fp32.
 */
#ifndef WL_KARGS_H
#define WL_KARGS_H

#include <stdint.h>

#define WL_DT_F32 0
#define WL_DT_BF16 1

/* Context-parallel chunking (Megatron's load balancing): a rank's local sequence is two
 * chunks of clen positions, global chunk ids c0 and c1; local position si sits at global
 * position c0 * clen + si for si < clen, else c1 * clen + (si - clen). Without context
 * parallelism c0 = 0, c1 = 1 and clen = seq / 2, which is the identity. */
typedef struct wl_chunks {
    int32_t c0, c1;
    int64_t clen;
} wl_chunks_t;

/* Vocabulary-parallel embedding lookup (fwd: out[t] = table[tok - vstart] when the token
 * falls in [vstart, vend), else 0) and its gradient (grad[tok - vstart] += dout[t], tokens
 * in order, so the sum is deterministic). */
typedef struct wl_embed_args {
    const int32_t *tokens;
    const void *table;
    void *out;
    const void *dout;
    float *grad;
    int64_t T, h, vstart, vend;
    int32_t dt;
} wl_embed_args_t;

/* Learned absolute positions. fwd: out[i] = in[row0 + i] + table[pos(row0 + i)] for
 * i < rows (adds the position embedding and keeps this rank's sequence-parallel slice).
 * bwd: grad[pos(t)] += in[t] for t < rows (row0 = 0). Token t has local position t / b. */
typedef struct wl_pos_args {
    const void *in;
    const void *table;
    void *out;
    float *grad;
    int64_t row0, rows, h, b;
    wl_chunks_t ch;
    int32_t dt;
} wl_pos_args_t;

/* LayerNorm (rms = 0) or RMSNorm (rms = 1) over rows of h. fwd: y, mean (LayerNorm only)
 * and rstd. bwd: dx = dres + d(norm)/dx . dy (dres may be NULL), dgamma += ..., dbeta +=
 * ... (fp32, rows in order). beta/dbeta are NULL for RMSNorm. */
typedef struct wl_norm_args {
    const void *x, *gamma, *beta;
    void *y;
    float *mean, *rstd;
    const void *dy, *dres;
    void *dx;
    float *dgamma, *dbeta;
    int64_t T, h;
    float eps;
    int32_t rms, dt;
} wl_norm_args_t;

/* Rotary embedding (rotate-half form), in place on the first nheads heads of each row
 * (queries, then keys, in the fused QKV layout). inverse = 1 rotates by -theta (backward). */
typedef struct wl_rope_args {
    void *x;
    int64_t T, b, ld;
    int32_t nheads, d;
    wl_chunks_t ch;
    float base;
    int32_t inverse, dt;
} wl_rope_args_t;

/* Causal attention of one query block against one key/value block (flash-attention style,
 * grouped-query: query head j reads kv head j / (nq / nkv)).
 * fwd: merges the block into acc (fp32 [sq*b, nq*d], un-normalised by nothing: it holds
 * the normalised output so far) and lse (fp32 [b][nq][sq]) by log-sum-exp; first
 * initialises them; last writes o_out = acc in dt.
 * bwd: with the final o and lse, adds the block's dq to dq (fp32 [sq*b, nq*d]) and its dk,
 * dv to dk, dv (fp32 [sk*b, nkv*d]; the caller zeroes them: a GPU accumulates them with
 * atomics from many query rows). */
typedef struct wl_attn_args {
    const void *q, *k, *v;
    int64_t ldq, ldk;
    const void *o;
    void *o_out;
    int64_t ldo;
    float *acc, *lse;
    const void *dout;
    float *dq, *dk, *dv;
    int64_t b, sq, sk;
    int32_t nq, nkv, d;
    float scale;
    wl_chunks_t qch, kch;
    int32_t first, last, dt;
} wl_attn_args_t;

/* dst[r][c] (=|+=) src[r][c] for r < rows, c < cols, with type conversion (fp32
 * accumulation, one rounding). Packs and unpacks column ranges and casts buffers. */
typedef struct wl_copy_args {
    const void *src;
    void *dst;
    int64_t rows, cols, ld_src, ld_dst;
    int32_t src_dt, dst_dt, accumulate;
} wl_copy_args_t;

/* SwiGLU on rows [gate(f) | up(f)]: out = silu(gate) * up; bwd: dgu from dout. */
typedef struct wl_swiglu_args {
    const void *gu;
    void *out;
    const void *dout;
    void *dgu;
    int64_t T, f;
    int32_t dt;
} wl_swiglu_args_t;

/* GELU (tanh form) backward: dpre = dact * gelu'(pre); pre has row stride ld_pre. */
typedef struct wl_gelu_args {
    const void *dact, *pre;
    void *dpre;
    int64_t rows, cols, ld_pre;
    int32_t dt;
} wl_gelu_args_t;

/* Bias gradient: grad[j] += sum over rows t (in order) of dy[t][j]. */
typedef struct wl_bias_args {
    const void *dy;
    float *grad;
    int64_t T, n, ld;
    int32_t dt;
} wl_bias_args_t;

/* out = a + b (+ bias broadcast over rows): the bias-dropout-add of Megatron's layer with
 * dropout 0. out may alias a. */
typedef struct wl_add_args {
    const void *a, *b, *bias;
    void *out;
    int64_t T, h;
    int32_t dt;
} wl_add_args_t;

/* Vocabulary-parallel cross entropy (Megatron's _VocabParallelCrossEntropy), in steps:
 * MAX: max[t] = max_j logits[t][j] (then all-reduce MAX over tp);
 * STATS: sumexp[t] = sum exp(l - max), pred[t] = target logit if this rank holds it else 0
 *        (then all-reduce SUM of both);
 * LOSS: acc[0] = sum_t (log sumexp + max - pred), acc[1] = T (then all-reduce over cp);
 *       iter_loss[0] += acc[0] / acc[1];
 * BWD: dlogits = (softmax - onehot) * mult / acc[1]. */
typedef struct wl_ce_args {
    const void *logits;
    int64_t T, V, ld;
    const int32_t *targets;
    int64_t vstart;
    float *max, *sumexp, *pred, *acc, *iter_loss;
    float mult;
    void *dlogits;
    int32_t dt;
} wl_ce_args_t;

/* x *= s (gradient scaling before the data-parallel reduction). */
typedef struct wl_scale_args {
    float *x;
    int64_t n;
    float s;
} wl_scale_args_t;

/* Adam on fp32 master weights p with moments m, v and gradient g; writes the model copy pm
 * (dt) when non-NULL. c1 = 1 / (1 - b1^t), c2 = 1 / (1 - b2^t). */
typedef struct wl_adam_args {
    float *p, *m, *v;
    const float *g;
    void *pm;
    int64_t n;
    float lr, b1, b2, eps, c1, c2;
    int32_t dt;
} wl_adam_args_t;

/* MoE router: top-k of logits (fp32 [T][E]) per token, softmax over the k selected
 * (Megatron's default, pre-softmax off). fwd writes idx (int32 [T][k]), w (fp32 [T][k]) and
 * adds to counts (int32 [E], tokens per expert; zeroed by the caller). bwd: dlogits[t][idx] from dw (softmax backward over
 * the k; other entries 0). */
typedef struct wl_topk_args {
    const float *logits;
    int32_t *idx;
    float *w;
    int32_t *counts;
    const float *dw;
    float *dlogits;
    int64_t T;
    int32_t E, k;
} wl_topk_args_t;

/* MoE token (un)permutation. Assignment a = t * k + j goes to row rowof[a] of the permuted
 * buffer (rows sorted by expert, tokens in order within an expert).
 * ROWS: computes rowof from idx (needs counts' prefix sums; sequential).
 * PERMUTE: out[rowof[a]] = x[a / k]; PERMUTE_BWD: dx[t] = sum_j dperm[rowof[t*k+j]] (+=
 * into dx when accumulate).
 * UNPERMUTE: y[t] = sum_j w[t*k+j] * eout[rowof[t*k+j]];
 * UNPERMUTE_BWD (x = dy, aux = eout): deout[rowof[a]] = w[a] * dy[a / k],
 * dw[a] = dot(dy[a / k], eout[rowof[a]]). */
typedef struct wl_perm_args {
    const int32_t *idx;
    const int32_t *counts;
    int32_t *rowof;
    const void *x, *aux;
    void *out;
    const float *w;
    float *dw;
    int64_t T, h;
    int32_t E, k, accumulate, dt;
} wl_perm_args_t;

/* Emulated communication (--emulate-comm, emucomm.h): one kernel in place of one collective
 * of a group whose other members this job does not run. Launched with sms blocks (the SMs
 * an NCCL ring kernel holds); block i copies chunks i, i + sms, ... of every segment
 * (dst[j] = src[j], or 0 when src is NULL) and raises its flag after each chunk, as a ring
 * step reads a chunk, writes it and signals the peer; a block that is done before target_ns
 * have passed since it started spins until they have. t_start and t_end (NULL: not
 * measured) receive the kernel's device start (min over blocks) and end (max) in ns. */
#define WL_EMU_SEGS 4
typedef struct wl_emu_seg {
    const void *src; /* NULL: zero fill */
    void *dst;       /* may equal src (in place) */
    int64_t bytes;
} wl_emu_seg_t;

typedef struct wl_emu_args {
    wl_emu_seg_t seg[WL_EMU_SEGS];
    int32_t nseg, sms;
    int64_t target_ns;
    unsigned long long *flags;            /* one per block: chunks done (never read) */
    unsigned long long *t_start, *t_end;  /* this launch's measurement, or NULL */
} wl_emu_args_t;

/* The kernel list: X(enum suffix, name, argument type). */
#define WL_KERNELS(X)                                                                    \
    X(EMBED_FWD, "embedding_fwd", wl_embed_args_t)                                       \
    X(EMBED_BWD, "embedding_bwd", wl_embed_args_t)                                       \
    X(POS_FWD, "position_add_fwd", wl_pos_args_t)                                        \
    X(POS_BWD, "position_bwd", wl_pos_args_t)                                            \
    X(NORM_FWD, "norm_fwd", wl_norm_args_t)                                              \
    X(NORM_BWD, "norm_bwd", wl_norm_args_t)                                              \
    X(ROPE, "rope", wl_rope_args_t)                                                      \
    X(ATTN_FWD, "flash_attn_fwd", wl_attn_args_t)                                        \
    X(ATTN_BWD, "flash_attn_bwd", wl_attn_args_t)                                        \
    X(COPY, "copy_cast", wl_copy_args_t)                                                 \
    X(SWIGLU_FWD, "swiglu_fwd", wl_swiglu_args_t)                                        \
    X(SWIGLU_BWD, "swiglu_bwd", wl_swiglu_args_t)                                        \
    X(GELU_BWD, "gelu_bwd", wl_gelu_args_t)                                              \
    X(BIAS_GRAD, "bias_grad", wl_bias_args_t)                                            \
    X(ADD, "bias_residual_add", wl_add_args_t)                                           \
    X(CE_MAX, "ce_max", wl_ce_args_t)                                                    \
    X(CE_STATS, "ce_stats", wl_ce_args_t)                                                \
    X(CE_LOSS, "ce_loss", wl_ce_args_t)                                                  \
    X(CE_BWD, "ce_bwd", wl_ce_args_t)                                                    \
    X(SCALE, "scale", wl_scale_args_t)                                                   \
    X(ADAM, "adam", wl_adam_args_t)                                                      \
    X(TOPK_FWD, "router_topk_fwd", wl_topk_args_t)                                       \
    X(TOPK_BWD, "router_topk_bwd", wl_topk_args_t)                                       \
    X(PERM_ROWS, "permute_rows", wl_perm_args_t)                                         \
    X(PERMUTE, "permute", wl_perm_args_t)                                                \
    X(PERMUTE_BWD, "permute_bwd", wl_perm_args_t)                                        \
    X(UNPERMUTE, "unpermute", wl_perm_args_t)                                            \
    X(UNPERMUTE_BWD, "unpermute_bwd", wl_perm_args_t)                                   \
    X(EMU_COMM, "wl_emu_comm", wl_emu_args_t)

#define WL_K_ENUM(e, n, t) WL_K_##e,
enum { WL_KERNELS(WL_K_ENUM) WL_K_COUNT };
#undef WL_K_ENUM

#endif
