/*
 * head.c: embedding and output layer with the vocabulary-parallel loss (see head.h).
 */
#include "head.h"

#include "blas.h"
#include "comm.h"
#include "kernels.h"
#include "layers.h"

#define NORM_EPS 1e-5f

static size_t act(const wl_model_state_t *ms, int64_t rows, int64_t cols)
{
    return (size_t)(rows * cols) * wl_dt_size(ms->dt);
}

static wl_group_t *tp_group(wl_model_state_t *ms) { return (wl_group_t *)&ms->ps->tp; }

void wl_embed_fwd(wl_model_state_t *ms, wl_mb_t *mb)
{
    void *emb = wl_alloc(act(ms, ms->T, ms->h));
    wl_embed_args_t a = {.tokens = mb->tokens, .table = ms->wte->data, .out = emb, .T = ms->T, .h = ms->h,
                         .vstart = ms->vstart, .vend = ms->vstart + ms->v_l, .dt = ms->dt};
    WL_LAUNCH(EMBED_FWD, a, ms->T * ms->h);
    if (!ms->gpt) {
        mb->input = wl_tp_reduce(ms, emb);
        return;
    }
    wl_allreduce(tp_group(ms), emb, (size_t)(ms->T * ms->h), wl_nccl_dt(ms->dt), ncclSum, 0);
    mb->input = wl_alloc(act(ms, ms->Tsp, ms->h));
    int64_t row0 = ms->sp ? ms->ps->tp_rank * ms->Tsp : 0;
    wl_pos_args_t p = {.in = emb, .table = ms->wpe->data, .out = mb->input, .row0 = row0, .rows = ms->Tsp,
                       .h = ms->h, .b = ms->b, .ch = ms->chunks, .dt = ms->dt};
    WL_LAUNCH(POS_FWD, p, ms->Tsp * ms->h);
    wl_free(emb);
}

void wl_embed_bwd(wl_model_state_t *ms, wl_mb_t *mb, void *dx)
{
    int owned;
    void *dfull = wl_tp_gather(ms, dx, &owned, NULL);
    if (ms->gpt) {
        wl_pos_args_t p = {.in = dfull, .table = ms->wpe->data, .grad = ms->wpe->grad, .rows = ms->T,
                           .h = ms->h, .b = ms->b, .ch = ms->chunks, .dt = ms->dt};
        WL_LAUNCH(POS_BWD, p, ms->T * ms->h);
    }
    wl_embed_args_t a = {.tokens = mb->tokens, .dout = dfull, .grad = ms->wte->grad, .T = ms->T,
                         .h = ms->h, .vstart = ms->vstart, .vend = ms->vstart + ms->v_l, .dt = ms->dt};
    WL_LAUNCH(EMBED_BWD, a, ms->h);
    if (owned) wl_free(dfull);
    wl_free(dx);
}

/* The cross-entropy scratch: max, sumexp, pred ([T] each) and acc[2]. */
static wl_ce_args_t ce_args(wl_model_state_t *ms, wl_mb_t *mb)
{
    float *c = mb->ce;
    return (wl_ce_args_t){.logits = mb->logits, .T = ms->T, .V = ms->v_l, .ld = ms->v_l,
                          .targets = mb->labels, .vstart = ms->vstart, .max = c, .sumexp = c + ms->T,
                          .pred = c + 2 * ms->T, .dt = ms->dt};
}

static void cross_entropy(wl_model_state_t *ms, wl_mb_t *mb, float *iter_loss)
{
    wl_group_t *tp = tp_group(ms);
    size_t T = (size_t)ms->T;
    mb->ce = wl_alloc(sizeof(float) * (3 * T + 2));
    wl_ce_args_t a = ce_args(ms, mb);
    wl_ce_args_t m = {.logits = a.logits, .T = a.T, .V = a.V, .ld = a.ld, .max = a.max, .dt = a.dt};
    WL_LAUNCH(CE_MAX, m, ms->T);
    wl_allreduce(tp, a.max, T, ncclFloat, ncclMax, 0);
    wl_ce_args_t s = a;
    WL_LAUNCH(CE_STATS, s, ms->T);
    wl_allreduce(tp, a.pred, T, ncclFloat, ncclSum, 0);
    wl_allreduce(tp, a.sumexp, T, ncclFloat, ncclSum, 0);
    wl_ce_args_t l = {.T = a.T, .sumexp = a.sumexp, .pred = a.pred, .acc = mb->ce + 3 * T};
    WL_LAUNCH(CE_LOSS, l, 1);
    wl_allreduce((wl_group_t *)&ms->ps->cp, l.acc, 2, ncclFloat, ncclSum, 0);
    wl_ce_args_t f = {.acc = l.acc, .iter_loss = iter_loss};
    WL_LAUNCH(CE_LOSS, f, 1);
}

void wl_head_fwd(wl_model_state_t *ms, wl_mb_t *mb, float *iter_loss)
{
    mb->lnf = wl_alloc(act(ms, ms->Tsp, ms->h));
    const wl_param_t *w = ms->lnf_w, *b = ms->lnf_b;
    mb->lnf_mean = b ? wl_alloc(sizeof(float) * (size_t)ms->Tsp) : NULL;
    mb->lnf_rstd = wl_alloc(sizeof(float) * (size_t)ms->Tsp);
    wl_norm_args_t n = {.x = mb->output, .gamma = w->data, .beta = b ? b->data : NULL, .y = mb->lnf,
                        .mean = mb->lnf_mean, .rstd = mb->lnf_rstd, .T = ms->Tsp, .h = ms->h,
                        .eps = NORM_EPS, .rms = b == NULL, .dt = ms->dt};
    WL_LAUNCH(NORM_FWD, n, ms->Tsp);
    int owned;
    void *full = wl_tp_gather(ms, mb->lnf, &owned, NULL);
    mb->logits = wl_alloc(act(ms, ms->T, ms->v_l));
    wl_linear_fwd(ms->dt, full, ms->out_w->data, mb->logits, ms->T, ms->h, ms->v_l);
    if (owned) wl_free(full);
    cross_entropy(ms, mb, iter_loss);
}

void *wl_head_bwd(wl_model_state_t *ms, wl_mb_t *mb, float scale)
{
    void *dlogits = wl_alloc(act(ms, ms->T, ms->v_l));
    wl_ce_args_t a = ce_args(ms, mb);
    a.acc = mb->ce + 3 * ms->T;
    a.mult = scale;
    a.dlogits = dlogits;
    WL_LAUNCH(CE_BWD, a, ms->T * ms->v_l);
    wl_free(mb->ce);
    wl_free(mb->logits);
    void *dlnf = wl_column_bwd(ms, mb->lnf, dlogits, ms->out_w, ms->v_l);
    wl_free(dlogits);
    const wl_param_t *w = ms->lnf_w, *b = ms->lnf_b;
    void *dx = wl_alloc(act(ms, ms->Tsp, ms->h));
    wl_norm_args_t n = {.x = mb->output, .gamma = w->data, .beta = b ? b->data : NULL, .mean = mb->lnf_mean,
                        .rstd = mb->lnf_rstd, .dy = dlnf, .dx = dx, .dgamma = w->grad,
                        .dbeta = b ? b->grad : NULL, .T = ms->Tsp, .h = ms->h, .eps = NORM_EPS,
                        .rms = b == NULL, .dt = ms->dt};
    WL_LAUNCH(NORM_BWD, n, ms->Tsp);
    wl_free(dlnf);
    if (mb->lnf_mean) wl_free(mb->lnf_mean);
    wl_free(mb->lnf_rstd);
    wl_free(mb->lnf);
    wl_free(mb->output);
    mb->output = NULL;
    return dx;
}
