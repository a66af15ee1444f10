/*
 * layers.c: the transformer layer (see layers.h). Attention's core is attention.c, the MoE
 * MLP moe.c.
 */
#include "layers.h"

#include <math.h>

#include "attention.h"
#include "blas.h"
#include "kernels.h"
#include "moe.h"

#define NORM_EPS 1e-5f

static size_t act_bytes(const wl_model_state_t *ms, int64_t rows, int64_t cols)
{
    return (size_t)(rows * cols) * wl_dt_size(ms->dt);
}

/* ---- tensor-parallel mappings ---- */

void *wl_tp_gather(wl_model_state_t *ms, const void *x, int *owned, struct wl_work **work)
{
    if (!ms->sp || ms->cfg->tp == 1) {
        *owned = 0;
        if (work) *work = NULL;
        return (void *)x;
    }
    void *full = wl_alloc(act_bytes(ms, ms->T, ms->h));
    wl_group_t *tp = (wl_group_t *)&ms->ps->tp;
    wl_work_t *w = wl_allgather(tp, x, full, (size_t)(ms->Tsp * ms->h), wl_nccl_dt(ms->dt), work != NULL);
    if (work) *work = w;
    *owned = 1;
    return full;
}

void *wl_tp_reduce(wl_model_state_t *ms, void *x)
{
    wl_group_t *tp = (wl_group_t *)&ms->ps->tp;
    if (ms->cfg->tp == 1) return x;
    if (!ms->sp) {
        wl_allreduce(tp, x, (size_t)(ms->T * ms->h), wl_nccl_dt(ms->dt), ncclSum, 0);
        return x;
    }
    void *part = wl_alloc(act_bytes(ms, ms->Tsp, ms->h));
    wl_reduce_scatter(tp, x, part, (size_t)(ms->Tsp * ms->h), wl_nccl_dt(ms->dt), 0);
    wl_free(x);
    return part;
}

void *wl_column_bwd(wl_model_state_t *ms, const void *x_saved, const void *dy, const wl_param_t *w,
                    int64_t out)
{
    wl_group_t *tp = (wl_group_t *)&ms->ps->tp;
    wl_work_t *gw = NULL;
    int owned;
    void *x_full = wl_tp_gather(ms, x_saved, &owned, &gw);
    void *dx_full = wl_alloc(act_bytes(ms, ms->T, ms->h));
    wl_linear_dgrad(ms->dt, dy, w->data, dx_full, ms->T, ms->h, out, 0.0f);
    wl_wait(gw);
    void *dx = dx_full;
    wl_work_t *rw = NULL;
    if (ms->cfg->tp > 1 && ms->sp) {
        dx = wl_alloc(act_bytes(ms, ms->Tsp, ms->h));
        rw = wl_reduce_scatter(tp, dx_full, dx, (size_t)(ms->Tsp * ms->h), wl_nccl_dt(ms->dt), 1);
    } else if (ms->cfg->tp > 1) {
        rw = wl_allreduce(tp, dx_full, (size_t)(ms->T * ms->h), wl_nccl_dt(ms->dt), ncclSum, 1);
    }
    wl_linear_wgrad(ms->dt, x_full, dy, w->grad, ms->T, ms->h, out);
    wl_wait(rw);
    if (owned) wl_free(x_full);
    if (dx != dx_full) wl_free(dx_full);
    return dx;
}

/* ---- kernels used here ---- */

static void norm_fwd(wl_model_state_t *ms, const void *x, const wl_param_t *w, const wl_param_t *b,
                     void *y, float **mean, float **rstd, int64_t rows)
{
    *mean = b ? wl_alloc(sizeof(float) * (size_t)rows) : NULL;
    *rstd = wl_alloc(sizeof(float) * (size_t)rows);
    wl_norm_args_t a = {.x = x, .gamma = w->data, .beta = b ? b->data : NULL, .y = y, .mean = *mean,
                        .rstd = *rstd, .T = rows, .h = ms->h, .eps = NORM_EPS, .rms = b == NULL,
                        .dt = ms->dt};
    WL_LAUNCH(NORM_FWD, a, rows);
}

/* dx = dres + norm backward of dy; frees mean and rstd. */
static void *norm_bwd(wl_model_state_t *ms, const void *dy, const void *x, const wl_param_t *w,
                      const wl_param_t *b, float *mean, float *rstd, const void *dres, int64_t rows)
{
    void *dx = wl_alloc(act_bytes(ms, rows, ms->h));
    wl_norm_args_t a = {.x = x, .gamma = w->data, .beta = b ? b->data : NULL, .mean = mean, .rstd = rstd,
                        .dy = dy, .dres = dres, .dx = dx, .dgamma = w->grad, .dbeta = b ? b->grad : NULL,
                        .T = rows, .h = ms->h, .eps = NORM_EPS, .rms = b == NULL, .dt = ms->dt};
    WL_LAUNCH(NORM_BWD, a, rows);
    if (mean) wl_free(mean);
    wl_free(rstd);
    return dx;
}

static void *residual_add(wl_model_state_t *ms, const void *a, const void *b, const wl_param_t *bias)
{
    void *out = wl_alloc(act_bytes(ms, ms->Tsp, ms->h));
    wl_add_args_t k = {.a = a, .b = b, .bias = bias ? bias->data : NULL, .out = out, .T = ms->Tsp,
                       .h = ms->h, .dt = ms->dt};
    WL_LAUNCH(ADD, k, ms->Tsp * ms->h);
    return out;
}

static void bias_grad(wl_model_state_t *ms, const void *dy, const wl_param_t *b, int64_t rows, int64_t n)
{
    if (!b) return;
    wl_bias_args_t a = {.dy = dy, .grad = b->grad, .T = rows, .n = n, .ld = n, .dt = ms->dt};
    WL_LAUNCH(BIAS_GRAD, a, n);
}

static void rope(wl_model_state_t *ms, void *qkv, int inverse)
{
    if (ms->gpt) return;
    wl_rope_args_t a = {.x = qkv, .T = ms->T, .b = ms->b, .ld = ms->qkv_out,
                        .nheads = (int32_t)(ms->nq_l + ms->nkv_l), .d = (int32_t)ms->d,
                        .ch = ms->chunks, .base = 10000.0f, .inverse = inverse, .dt = ms->dt};
    WL_LAUNCH(ROPE, a, ms->T * (ms->nq_l + ms->nkv_l));
}

/* ---- forward ---- */

static void *attention_fwd(wl_model_state_t *ms, const wl_layer_params_t *lp, wl_saved_t *sv)
{
    sv->ln1 = wl_alloc(act_bytes(ms, ms->Tsp, ms->h));
    norm_fwd(ms, sv->x, lp->ln1_w, lp->ln1_b, sv->ln1, &sv->mean1, &sv->rstd1, ms->Tsp);
    int owned;
    void *ln1_full = wl_tp_gather(ms, sv->ln1, &owned, NULL);
    sv->qkv = wl_alloc(act_bytes(ms, ms->T, ms->qkv_out));
    if (ms->gpt) /* QKV with its bias fused into the GEMM's epilogue (Transformer Engine) */
        wl_linear_fwd_lt(ms->dt, ln1_full, lp->qkv_w->data, lp->qkv_b->data, sv->qkv, NULL, ms->T, ms->h,
                         ms->qkv_out, WL_EPI_BIAS);
    else
        wl_linear_fwd(ms->dt, ln1_full, lp->qkv_w->data, sv->qkv, ms->T, ms->h, ms->qkv_out);
    if (owned) wl_free(ln1_full);
    rope(ms, sv->qkv, 0);
    sv->ctx = wl_alloc(act_bytes(ms, ms->T, ms->nq_l * ms->d));
    sv->lse = wl_alloc(sizeof(float) * (size_t)(ms->T * ms->nq_l));
    wl_attn_fwd(ms, sv->qkv, sv->ctx, sv->lse);
    void *proj = wl_alloc(act_bytes(ms, ms->T, ms->h));
    wl_linear_fwd(ms->dt, sv->ctx, lp->proj_w->data, proj, ms->T, ms->nq_l * ms->d, ms->h);
    proj = wl_tp_reduce(ms, proj);
    sv->x2 = residual_add(ms, sv->x, proj, lp->proj_b);
    wl_free(proj);
    return sv->x2;
}

/* Dense MLP on the gathered input: GPT fuses bias and GELU into FC1's cuBLASLt epilogue and
 * keeps the GELU input (aux) for the backward; Llama's FC1 (gate and up) feeds SwiGLU. */
static void *mlp_fwd(wl_model_state_t *ms, const wl_layer_params_t *lp, wl_saved_t *sv, const void *in)
{
    sv->act = wl_alloc(act_bytes(ms, ms->T, ms->f_l));
    if (ms->gpt) {
        sv->fc1 = wl_alloc(act_bytes(ms, ms->T, ms->f_l));
        wl_linear_fwd_lt(ms->dt, in, lp->fc1_w->data, lp->fc1_b->data, sv->act, sv->fc1, ms->T, ms->h,
                         ms->f_l, WL_EPI_GELU_AUX_BIAS);
    } else {
        sv->fc1 = wl_alloc(act_bytes(ms, ms->T, 2 * ms->f_l));
        wl_linear_fwd_lt(ms->dt, in, lp->fc1_w->data, NULL, sv->fc1, NULL, ms->T, ms->h, 2 * ms->f_l,
                         WL_EPI_NONE);
        wl_swiglu_args_t a = {.gu = sv->fc1, .out = sv->act, .T = ms->T, .f = ms->f_l, .dt = ms->dt};
        WL_LAUNCH(SWIGLU_FWD, a, ms->T * ms->f_l);
    }
    void *out = wl_alloc(act_bytes(ms, ms->T, ms->h));
    wl_linear_fwd(ms->dt, sv->act, lp->fc2_w->data, out, ms->T, ms->f_l, ms->h);
    return out;
}

void *wl_layer_fwd(wl_model_state_t *ms, const wl_layer_params_t *lp, wl_saved_t *sv, void *x)
{
    sv->x = x;
    attention_fwd(ms, lp, sv);
    sv->ln2 = wl_alloc(act_bytes(ms, ms->Tsp, ms->h));
    norm_fwd(ms, sv->x2, lp->ln2_w, lp->ln2_b, sv->ln2, &sv->mean2, &sv->rstd2, ms->Tsp);
    int owned;
    void *ln2_full = wl_tp_gather(ms, sv->ln2, &owned, NULL);
    void *mlp = ms->moe ? wl_moe_fwd(ms, lp, sv, ln2_full) : mlp_fwd(ms, lp, sv, ln2_full);
    if (owned) wl_free(ln2_full);
    mlp = wl_tp_reduce(ms, mlp);
    void *out = residual_add(ms, sv->x2, mlp, lp->fc2_b);
    wl_free(mlp);
    return out;
}

/* ---- backward ---- */

/* The MLP's backward from the gradient at FC2's (gathered) output to the gradient at its
 * input ln2 [Tsp, h]. */
static void *mlp_bwd(wl_model_state_t *ms, const wl_layer_params_t *lp, wl_saved_t *sv, const void *dfull)
{
    void *dact = wl_alloc(act_bytes(ms, ms->T, ms->f_l));
    wl_linear_dgrad(ms->dt, dfull, lp->fc2_w->data, dact, ms->T, ms->f_l, ms->h, 0.0f);
    wl_linear_wgrad(ms->dt, sv->act, dfull, lp->fc2_w->grad, ms->T, ms->f_l, ms->h);
    wl_free(sv->act);
    int64_t n1 = ms->gpt ? ms->f_l : 2 * ms->f_l;
    void *d1 = wl_alloc(act_bytes(ms, ms->T, n1));
    if (ms->gpt) {
        wl_gelu_args_t a = {.dact = dact, .pre = sv->fc1, .dpre = d1, .rows = ms->T, .cols = ms->f_l,
                            .ld_pre = ms->f_l, .dt = ms->dt};
        WL_LAUNCH(GELU_BWD, a, ms->T * ms->f_l);
        bias_grad(ms, d1, lp->fc1_b, ms->T, ms->f_l);
    } else {
        wl_swiglu_args_t a = {.gu = sv->fc1, .dout = dact, .dgu = d1, .T = ms->T, .f = ms->f_l, .dt = ms->dt};
        WL_LAUNCH(SWIGLU_BWD, a, ms->T * ms->f_l);
    }
    wl_free(dact);
    wl_free(sv->fc1);
    void *dln2 = wl_column_bwd(ms, sv->ln2, d1, lp->fc1_w, n1);
    wl_free(d1);
    return dln2;
}

static void *attention_bwd(wl_model_state_t *ms, const wl_layer_params_t *lp, wl_saved_t *sv, void *dx2)
{
    bias_grad(ms, dx2, lp->proj_b, ms->Tsp, ms->h);
    int owned;
    void *dfull = wl_tp_gather(ms, dx2, &owned, NULL);
    void *dctx = wl_alloc(act_bytes(ms, ms->T, ms->nq_l * ms->d));
    wl_linear_dgrad(ms->dt, dfull, lp->proj_w->data, dctx, ms->T, ms->nq_l * ms->d, ms->h, 0.0f);
    wl_linear_wgrad(ms->dt, sv->ctx, dfull, lp->proj_w->grad, ms->T, ms->nq_l * ms->d, ms->h);
    if (owned) wl_free(dfull);
    void *dqkv = wl_alloc(act_bytes(ms, ms->T, ms->qkv_out));
    wl_attn_bwd(ms, sv->qkv, sv->ctx, dctx, sv->lse, dqkv);
    wl_free(dctx);
    wl_free(sv->ctx);
    wl_free(sv->lse);
    rope(ms, dqkv, 1);
    bias_grad(ms, dqkv, lp->qkv_b, ms->T, ms->qkv_out);
    void *dln1 = wl_column_bwd(ms, sv->ln1, dqkv, lp->qkv_w, ms->qkv_out);
    wl_free(dqkv);
    wl_free(sv->qkv);
    void *dx = norm_bwd(ms, dln1, sv->x, lp->ln1_w, lp->ln1_b, sv->mean1, sv->rstd1, dx2, ms->Tsp);
    wl_free(dln1);
    wl_free(sv->ln1);
    return dx;
}

void *wl_layer_bwd(wl_model_state_t *ms, const wl_layer_params_t *lp, wl_saved_t *sv, void *dout)
{
    bias_grad(ms, dout, lp->fc2_b, ms->Tsp, ms->h);
    int owned;
    void *dfull = wl_tp_gather(ms, dout, &owned, NULL);
    void *dln2 = ms->moe ? wl_moe_bwd(ms, lp, sv, dfull) : mlp_bwd(ms, lp, sv, dfull);
    if (owned) wl_free(dfull);
    void *dx2 = norm_bwd(ms, dln2, sv->x2, lp->ln2_w, lp->ln2_b, sv->mean2, sv->rstd2, dout, ms->Tsp);
    wl_free(dln2);
    wl_free(dout);
    wl_free(sv->ln2);
    wl_free(sv->x2);
    void *dx = attention_bwd(ms, lp, sv, dx2);
    wl_free(dx2);
    wl_free(sv->x);
    return dx;
}
