/*
 * kernels_host.c: host implementations, costs and footprints of the element-wise, norm,
 * embedding, loss and optimizer kernels (argument blocks in kargs.h).
 *
 * Every implementation is sequential and sums in a fixed order, so results are bitwise
 * repeatable. Costs are memory-bound (bytes moved at HBM bandwidth); footprints declare
 * every byte range read or written, so the vgpu's hazard detector sees the real accesses.
 */
#include <math.h>
#include <string.h>

#include "kernels.h"

#define SZ(dt) ((dt) == WL_DT_F32 ? 4.0 : 2.0)

/* ---- embedding ---- */

static void embed_fwd(const vgpu_launch_t *l)
{
    const wl_embed_args_t *a = WL_ARGS(l, wl_embed_args_t);
    for (int64_t t = 0; t < a->T; t++) {
        int64_t tok = a->tokens[t];
        int in = tok >= a->vstart && tok < a->vend;
        for (int64_t j = 0; j < a->h; j++) {
            float v = in ? wl__ld(a->table, (tok - a->vstart) * a->h + j, a->dt) : 0.0f;
            wl__st(a->out, t * a->h + j, v, a->dt);
        }
    }
}

static void embed_bwd(const vgpu_launch_t *l)
{
    const wl_embed_args_t *a = WL_ARGS(l, wl_embed_args_t);
    for (int64_t t = 0; t < a->T; t++) {
        int64_t tok = a->tokens[t];
        if (tok < a->vstart || tok >= a->vend) continue;
        for (int64_t j = 0; j < a->h; j++)
            a->grad[(tok - a->vstart) * a->h + j] += wl__ld(a->dout, t * a->h + j, a->dt);
    }
}

static double embed_cost(const vgpu_launch_t *l, double *sm)
{
    const wl_embed_args_t *a = WL_ARGS(l, wl_embed_args_t);
    double row = (double)a->T * a->h;
    return wl__cost_bytes(l, a->out ? 2 * row * SZ(a->dt) : row * (SZ(a->dt) + 8));
}

static int embed_fp(const vgpu_launch_t *l, vgpu_range_t *r, int max)
{
    const wl_embed_args_t *a = WL_ARGS(l, wl_embed_args_t);
    double rows = (double)(a->vend - a->vstart) * a->h;
    int n = wl__range(r, 0, max, a->tokens, 4.0 * a->T, 0);
    if (a->out) {
        n = wl__range(r, n, max, a->table, rows * SZ(a->dt), 0);
        return wl__range(r, n, max, a->out, (double)a->T * a->h * SZ(a->dt), 1);
    }
    n = wl__range(r, n, max, a->dout, (double)a->T * a->h * SZ(a->dt), 0);
    return wl__range(r, n, max, a->grad, rows * 4, 1);
}

/* ---- learned positions ---- */

static int64_t pos_of(const wl_chunks_t *c, int64_t si)
{
    return si < c->clen ? c->c0 * c->clen + si : c->c1 * c->clen + (si - c->clen);
}

static void pos_fwd(const vgpu_launch_t *l)
{
    const wl_pos_args_t *a = WL_ARGS(l, wl_pos_args_t);
    for (int64_t i = 0; i < a->rows; i++) {
        int64_t t = a->row0 + i, p = pos_of(&a->ch, t / a->b);
        for (int64_t j = 0; j < a->h; j++) {
            float v = wl__ld(a->in, t * a->h + j, a->dt) + wl__ld(a->table, p * a->h + j, a->dt);
            wl__st(a->out, i * a->h + j, v, a->dt);
        }
    }
}

static void pos_bwd(const vgpu_launch_t *l)
{
    const wl_pos_args_t *a = WL_ARGS(l, wl_pos_args_t);
    for (int64_t t = 0; t < a->rows; t++) {
        int64_t p = pos_of(&a->ch, t / a->b);
        for (int64_t j = 0; j < a->h; j++) a->grad[p * a->h + j] += wl__ld(a->in, t * a->h + j, a->dt);
    }
}

static double pos_cost(const vgpu_launch_t *l, double *sm)
{
    const wl_pos_args_t *a = WL_ARGS(l, wl_pos_args_t);
    return wl__cost_bytes(l, 3.0 * a->rows * a->h * SZ(a->dt));
}

static int pos_fp(const vgpu_launch_t *l, vgpu_range_t *r, int max)
{
    const wl_pos_args_t *a = WL_ARGS(l, wl_pos_args_t);
    double rows = (double)a->rows * a->h * SZ(a->dt);
    /* Positions are a function of chunks: declare the table rows this rank can touch. */
    double table = (double)((a->ch.c0 > a->ch.c1 ? a->ch.c0 : a->ch.c1) + 1) * a->ch.clen * a->h;
    int n = wl__range(r, 0, max, (const char *)a->in + (a->out ? a->row0 * a->h * (int64_t)SZ(a->dt) : 0), rows, 0);
    if (a->out) {
        n = wl__range(r, n, max, a->table, table * SZ(a->dt), 0);
        return wl__range(r, n, max, a->out, rows, 1);
    }
    return wl__range(r, n, max, a->grad, table * 4, 1);
}

/* ---- LayerNorm / RMSNorm ---- */

static void norm_fwd(const vgpu_launch_t *l)
{
    const wl_norm_args_t *a = WL_ARGS(l, wl_norm_args_t);
    for (int64_t t = 0; t < a->T; t++) {
        const int64_t o = t * a->h;
        double mean = 0, var = 0;
        if (!a->rms) {
            for (int64_t j = 0; j < a->h; j++) mean += wl__ld(a->x, o + j, a->dt);
            mean /= (double)a->h;
        }
        for (int64_t j = 0; j < a->h; j++) {
            double d = wl__ld(a->x, o + j, a->dt) - mean;
            var += d * d;
        }
        float rstd = (float)(1.0 / sqrt(var / (double)a->h + a->eps));
        for (int64_t j = 0; j < a->h; j++) {
            float xh = (float)(wl__ld(a->x, o + j, a->dt) - mean) * rstd;
            float y = xh * wl__ld(a->gamma, j, a->dt) + (a->beta ? wl__ld(a->beta, j, a->dt) : 0.0f);
            wl__st(a->y, o + j, y, a->dt);
        }
        if (a->mean) a->mean[t] = (float)mean;
        a->rstd[t] = rstd;
    }
}

/* One row of the backward: dx = rstd * (dxh - mean(dxh) - xh * mean(dxh * xh)) (the mean
 * term only for LayerNorm), with dxh = dy * gamma. */
static void norm_bwd_row(const wl_norm_args_t *a, int64_t t)
{
    const int64_t o = t * a->h;
    float mean = a->mean ? a->mean[t] : 0.0f, rstd = a->rstd[t];
    double s1 = 0, s2 = 0;
    for (int64_t j = 0; j < a->h; j++) {
        float xh = (wl__ld(a->x, o + j, a->dt) - mean) * rstd;
        float dxh = wl__ld(a->dy, o + j, a->dt) * wl__ld(a->gamma, j, a->dt);
        s1 += dxh;
        s2 += dxh * xh;
    }
    float m1 = a->rms ? 0.0f : (float)(s1 / (double)a->h), m2 = (float)(s2 / (double)a->h);
    for (int64_t j = 0; j < a->h; j++) {
        float dy = wl__ld(a->dy, o + j, a->dt);
        float xh = (wl__ld(a->x, o + j, a->dt) - mean) * rstd;
        float dx = rstd * (dy * wl__ld(a->gamma, j, a->dt) - m1 - xh * m2);
        if (a->dres) dx += wl__ld(a->dres, o + j, a->dt);
        wl__st(a->dx, o + j, dx, a->dt);
        a->dgamma[j] += dy * xh;
        if (a->dbeta) a->dbeta[j] += dy;
    }
}

static void norm_bwd(const vgpu_launch_t *l)
{
    const wl_norm_args_t *a = WL_ARGS(l, wl_norm_args_t);
    for (int64_t t = 0; t < a->T; t++) norm_bwd_row(a, t);
}

static double norm_cost(const vgpu_launch_t *l, double *sm)
{
    const wl_norm_args_t *a = WL_ARGS(l, wl_norm_args_t);
    double act = (double)a->T * a->h * SZ(a->dt);
    return wl__cost_bytes(l, a->y ? 2 * act : (a->dres ? 4 : 3) * act);
}

static int norm_fp(const vgpu_launch_t *l, vgpu_range_t *r, int max)
{
    const wl_norm_args_t *a = WL_ARGS(l, wl_norm_args_t);
    double act = (double)a->T * a->h * SZ(a->dt), vec = (double)a->h * SZ(a->dt);
    int fwd = a->y != NULL;
    int n = wl__range(r, 0, max, a->x, act, 0);
    n = wl__range(r, n, max, a->gamma, vec, 0);
    n = wl__range(r, n, max, a->beta, vec, 0);
    n = wl__range(r, n, max, a->mean, 4.0 * a->T, fwd);
    n = wl__range(r, n, max, a->rstd, 4.0 * a->T, fwd);
    if (fwd) return wl__range(r, n, max, a->y, act, 1);
    n = wl__range(r, n, max, a->dy, act, 0);
    if (a->dres != a->dx) n = wl__range(r, n, max, a->dres, act, 0);
    n = wl__range(r, n, max, a->dx, act, 1);
    n = wl__range(r, n, max, a->dgamma, 4.0 * a->h, 1);
    return wl__range(r, n, max, a->dbeta, 4.0 * a->h, 1);
}

/* ---- copies and casts ---- */

static void copy_impl(const vgpu_launch_t *l)
{
    const wl_copy_args_t *a = WL_ARGS(l, wl_copy_args_t);
    for (int64_t i = 0; i < a->rows; i++)
        for (int64_t j = 0; j < a->cols; j++) {
            float v = wl__ld(a->src, i * a->ld_src + j, a->src_dt);
            if (a->accumulate) v += wl__ld(a->dst, i * a->ld_dst + j, a->dst_dt);
            wl__st(a->dst, i * a->ld_dst + j, v, a->dst_dt);
        }
}

static double copy_cost(const vgpu_launch_t *l, double *sm)
{
    const wl_copy_args_t *a = WL_ARGS(l, wl_copy_args_t);
    double n = (double)a->rows * a->cols;
    return wl__cost_bytes(l, n * (SZ(a->src_dt) + SZ(a->dst_dt) * (a->accumulate ? 2 : 1)));
}

static int copy_fp(const vgpu_launch_t *l, vgpu_range_t *r, int max)
{
    const wl_copy_args_t *a = WL_ARGS(l, wl_copy_args_t);
    if (a->rows <= 0 || a->cols <= 0) return 0;
    int n = wl__range(r, 0, max, a->src, ((double)(a->rows - 1) * a->ld_src + a->cols) * SZ(a->src_dt), 0);
    return wl__range(r, n, max, a->dst, ((double)(a->rows - 1) * a->ld_dst + a->cols) * SZ(a->dst_dt), 1);
}

/* ---- activations ---- */

static float silu(float x) { return x / (1.0f + expf(-x)); }

static void swiglu_fwd(const vgpu_launch_t *l)
{
    const wl_swiglu_args_t *a = WL_ARGS(l, wl_swiglu_args_t);
    for (int64_t t = 0; t < a->T; t++)
        for (int64_t j = 0; j < a->f; j++) {
            float g = wl__ld(a->gu, t * 2 * a->f + j, a->dt), u = wl__ld(a->gu, t * 2 * a->f + a->f + j, a->dt);
            wl__st(a->out, t * a->f + j, silu(g) * u, a->dt);
        }
}

static void swiglu_bwd(const vgpu_launch_t *l)
{
    const wl_swiglu_args_t *a = WL_ARGS(l, wl_swiglu_args_t);
    for (int64_t t = 0; t < a->T; t++)
        for (int64_t j = 0; j < a->f; j++) {
            int64_t gi = t * 2 * a->f + j;
            float g = wl__ld(a->gu, gi, a->dt), u = wl__ld(a->gu, gi + a->f, a->dt);
            float d = wl__ld(a->dout, t * a->f + j, a->dt), sg = 1.0f / (1.0f + expf(-g));
            wl__st(a->dgu, gi, d * u * sg * (1.0f + g * (1.0f - sg)), a->dt);
            wl__st(a->dgu, gi + a->f, d * g * sg, a->dt);
        }
}

static double swiglu_cost(const vgpu_launch_t *l, double *sm)
{
    const wl_swiglu_args_t *a = WL_ARGS(l, wl_swiglu_args_t);
    double n = (double)a->T * a->f * SZ(a->dt);
    return wl__cost_bytes(l, a->out ? 3 * n : 5 * n);
}

static int swiglu_fp(const vgpu_launch_t *l, vgpu_range_t *r, int max)
{
    const wl_swiglu_args_t *a = WL_ARGS(l, wl_swiglu_args_t);
    double n = (double)a->T * a->f * SZ(a->dt);
    int k = wl__range(r, 0, max, a->gu, 2 * n, 0);
    if (a->out) return wl__range(r, k, max, a->out, n, 1);
    k = wl__range(r, k, max, a->dout, n, 0);
    return wl__range(r, k, max, a->dgu, 2 * n, 1);
}

/* d/dx of 0.5 x (1 + tanh(k (x + 0.044715 x^3))), the form cuBLASLt's GELU epilogue uses. */
static float gelu_grad(float x)
{
    const float k = 0.7978845608028654f, c = 0.044715f;
    float th = tanhf(k * (x + c * x * x * x));
    return 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * k * (1.0f + 3.0f * c * x * x);
}

static void gelu_bwd(const vgpu_launch_t *l)
{
    const wl_gelu_args_t *a = WL_ARGS(l, wl_gelu_args_t);
    for (int64_t i = 0; i < a->rows; i++)
        for (int64_t j = 0; j < a->cols; j++) {
            float x = wl__ld(a->pre, i * a->ld_pre + j, a->dt);
            wl__st(a->dpre, i * a->cols + j, wl__ld(a->dact, i * a->cols + j, a->dt) * gelu_grad(x), a->dt);
        }
}

static double gelu_cost(const vgpu_launch_t *l, double *sm)
{
    const wl_gelu_args_t *a = WL_ARGS(l, wl_gelu_args_t);
    return wl__cost_bytes(l, 3.0 * a->rows * a->cols * SZ(a->dt));
}

static int gelu_fp(const vgpu_launch_t *l, vgpu_range_t *r, int max)
{
    const wl_gelu_args_t *a = WL_ARGS(l, wl_gelu_args_t);
    double n = (double)a->rows * a->cols * SZ(a->dt);
    int k = wl__range(r, 0, max, a->dact, n, 0);
    k = wl__range(r, k, max, a->pre, (double)a->rows * a->ld_pre * SZ(a->dt), 0);
    return wl__range(r, k, max, a->dpre, n, 1);
}

/* ---- bias gradient and residual add ---- */

static void bias_grad(const vgpu_launch_t *l)
{
    const wl_bias_args_t *a = WL_ARGS(l, wl_bias_args_t);
    for (int64_t t = 0; t < a->T; t++)
        for (int64_t j = 0; j < a->n; j++) a->grad[j] += wl__ld(a->dy, t * a->ld + j, a->dt);
}

static double bias_cost(const vgpu_launch_t *l, double *sm)
{
    const wl_bias_args_t *a = WL_ARGS(l, wl_bias_args_t);
    return wl__cost_bytes(l, (double)a->T * a->n * SZ(a->dt));
}

static int bias_fp(const vgpu_launch_t *l, vgpu_range_t *r, int max)
{
    const wl_bias_args_t *a = WL_ARGS(l, wl_bias_args_t);
    int k = wl__range(r, 0, max, a->dy, ((double)(a->T - 1) * a->ld + a->n) * SZ(a->dt), 0);
    return wl__range(r, k, max, a->grad, 4.0 * a->n, 1);
}

static void add_impl(const vgpu_launch_t *l)
{
    const wl_add_args_t *a = WL_ARGS(l, wl_add_args_t);
    for (int64_t t = 0; t < a->T; t++)
        for (int64_t j = 0; j < a->h; j++) {
            int64_t i = t * a->h + j;
            float v = wl__ld(a->a, i, a->dt) + wl__ld(a->b, i, a->dt);
            if (a->bias) v += wl__ld(a->bias, j, a->dt);
            wl__st(a->out, i, v, a->dt);
        }
}

static double add_cost(const vgpu_launch_t *l, double *sm)
{
    const wl_add_args_t *a = WL_ARGS(l, wl_add_args_t);
    return wl__cost_bytes(l, 3.0 * a->T * a->h * SZ(a->dt));
}

static int add_fp(const vgpu_launch_t *l, vgpu_range_t *r, int max)
{
    const wl_add_args_t *a = WL_ARGS(l, wl_add_args_t);
    double n = (double)a->T * a->h * SZ(a->dt);
    int k = a->a == a->out ? 0 : wl__range(r, 0, max, a->a, n, 0);
    k = wl__range(r, k, max, a->b, n, 0);
    k = wl__range(r, k, max, a->bias, a->h * SZ(a->dt), 0);
    return wl__range(r, k, max, a->out, n, 1);
}

/* ---- vocabulary-parallel cross entropy ---- */

static void ce_max(const vgpu_launch_t *l)
{
    const wl_ce_args_t *a = WL_ARGS(l, wl_ce_args_t);
    for (int64_t t = 0; t < a->T; t++) {
        float m = -INFINITY;
        for (int64_t j = 0; j < a->V; j++) m = fmaxf(m, wl__ld(a->logits, t * a->ld + j, a->dt));
        a->max[t] = m;
    }
}

static void ce_stats(const vgpu_launch_t *l)
{
    const wl_ce_args_t *a = WL_ARGS(l, wl_ce_args_t);
    for (int64_t t = 0; t < a->T; t++) {
        double s = 0;
        for (int64_t j = 0; j < a->V; j++) s += expf(wl__ld(a->logits, t * a->ld + j, a->dt) - a->max[t]);
        int64_t k = a->targets[t] - a->vstart;
        a->sumexp[t] = (float)s;
        a->pred[t] = k >= 0 && k < a->V ? wl__ld(a->logits, t * a->ld + k, a->dt) - a->max[t] : 0.0f;
    }
}

static void ce_loss(const vgpu_launch_t *l)
{
    const wl_ce_args_t *a = WL_ARGS(l, wl_ce_args_t);
    if (a->iter_loss) { /* the finishing step, after the context-parallel reduction */
        a->iter_loss[0] += a->acc[0] / a->acc[1];
        return;
    }
    double s = 0;
    for (int64_t t = 0; t < a->T; t++) s += logf(a->sumexp[t]) - a->pred[t];
    a->acc[0] = (float)s;
    a->acc[1] = (float)a->T;
}

static void ce_bwd(const vgpu_launch_t *l)
{
    const wl_ce_args_t *a = WL_ARGS(l, wl_ce_args_t);
    float scale = a->mult / a->acc[1];
    for (int64_t t = 0; t < a->T; t++) {
        int64_t k = a->targets[t] - a->vstart;
        for (int64_t j = 0; j < a->V; j++) {
            float p = expf(wl__ld(a->logits, t * a->ld + j, a->dt) - a->max[t]) / a->sumexp[t];
            wl__st(a->dlogits, t * a->ld + j, (p - (j == k ? 1.0f : 0.0f)) * scale, a->dt);
        }
    }
}

static double ce_cost(const vgpu_launch_t *l, double *sm)
{
    const wl_ce_args_t *a = WL_ARGS(l, wl_ce_args_t);
    if (a->iter_loss || (!a->logits)) return l->prof->kernel_min_us * 1e3;
    double n = (double)a->T * a->V * SZ(a->dt);
    return wl__cost_bytes(l, a->dlogits ? 2 * n : n);
}

static int ce_fp(const vgpu_launch_t *l, vgpu_range_t *r, int max)
{
    const wl_ce_args_t *a = WL_ARGS(l, wl_ce_args_t);
    double v = 4.0 * a->T, lg = ((double)(a->T - 1) * a->ld + a->V) * SZ(a->dt);
    if (a->iter_loss) {
        int k = wl__range(r, 0, max, a->acc, 8, 0);
        return wl__range(r, k, max, a->iter_loss, 4, 1);
    }
    int k = wl__range(r, 0, max, a->targets, v, 0);
    if (a->logits) k = wl__range(r, k, max, a->logits, lg, 0);
    if (a->dlogits) {
        k = wl__range(r, k, max, a->max, v, 0);
        k = wl__range(r, k, max, a->sumexp, v, 0);
        k = wl__range(r, k, max, a->acc, 8, 0);
        return wl__range(r, k, max, a->dlogits, lg, 1);
    }
    if (a->acc) { /* LOSS */
        k = wl__range(r, k, max, a->sumexp, v, 0);
        k = wl__range(r, k, max, a->pred, v, 0);
        return wl__range(r, k, max, a->acc, 8, 1);
    }
    if (a->sumexp) { /* STATS */
        k = wl__range(r, k, max, a->max, v, 0);
        k = wl__range(r, k, max, a->sumexp, v, 1);
        return wl__range(r, k, max, a->pred, v, 1);
    }
    return wl__range(r, k, max, a->max, v, 1);
}

/* ---- optimizer ---- */

static void scale_impl(const vgpu_launch_t *l)
{
    const wl_scale_args_t *a = WL_ARGS(l, wl_scale_args_t);
    for (int64_t i = 0; i < a->n; i++) a->x[i] *= a->s;
}

static double scale_cost(const vgpu_launch_t *l, double *sm)
{
    return wl__cost_bytes(l, 8.0 * WL_ARGS(l, wl_scale_args_t)->n);
}

static int scale_fp(const vgpu_launch_t *l, vgpu_range_t *r, int max)
{
    const wl_scale_args_t *a = WL_ARGS(l, wl_scale_args_t);
    return wl__range(r, 0, max, a->x, 4.0 * a->n, 1);
}

static void adam_impl(const vgpu_launch_t *l)
{
    const wl_adam_args_t *a = WL_ARGS(l, wl_adam_args_t);
    for (int64_t i = 0; i < a->n; i++) {
        float g = a->g[i];
        a->m[i] = a->b1 * a->m[i] + (1.0f - a->b1) * g;
        a->v[i] = a->b2 * a->v[i] + (1.0f - a->b2) * g * g;
        float mh = a->m[i] * a->c1, vh = a->v[i] * a->c2;
        a->p[i] -= a->lr * mh / (sqrtf(vh) + a->eps);
        if (a->pm) wl__st(a->pm, i, a->p[i], a->dt);
    }
}

static double adam_cost(const vgpu_launch_t *l, double *sm)
{
    const wl_adam_args_t *a = WL_ARGS(l, wl_adam_args_t);
    return wl__cost_bytes(l, (double)a->n * (4 * 7 + (a->pm ? SZ(a->dt) : 0)));
}

static int adam_fp(const vgpu_launch_t *l, vgpu_range_t *r, int max)
{
    const wl_adam_args_t *a = WL_ARGS(l, wl_adam_args_t);
    double n = 4.0 * a->n;
    int k = wl__range(r, 0, max, a->p, n, 1);
    k = wl__range(r, k, max, a->m, n, 1);
    k = wl__range(r, k, max, a->v, n, 1);
    k = wl__range(r, k, max, a->g, n, 0);
    return wl__range(r, k, max, a->pm, (double)a->n * SZ(a->dt), 1);
}

const wl_khost_t wl_khost_basic[] = {
    {WL_K_EMBED_FWD, embed_fwd, embed_cost, embed_fp},
    {WL_K_EMBED_BWD, embed_bwd, embed_cost, embed_fp},
    {WL_K_POS_FWD, pos_fwd, pos_cost, pos_fp},
    {WL_K_POS_BWD, pos_bwd, pos_cost, pos_fp},
    {WL_K_NORM_FWD, norm_fwd, norm_cost, norm_fp},
    {WL_K_NORM_BWD, norm_bwd, norm_cost, norm_fp},
    {WL_K_COPY, copy_impl, copy_cost, copy_fp},
    {WL_K_SWIGLU_FWD, swiglu_fwd, swiglu_cost, swiglu_fp},
    {WL_K_SWIGLU_BWD, swiglu_bwd, swiglu_cost, swiglu_fp},
    {WL_K_GELU_BWD, gelu_bwd, gelu_cost, gelu_fp},
    {WL_K_BIAS_GRAD, bias_grad, bias_cost, bias_fp},
    {WL_K_ADD, add_impl, add_cost, add_fp},
    {WL_K_CE_MAX, ce_max, ce_cost, ce_fp},
    {WL_K_CE_STATS, ce_stats, ce_cost, ce_fp},
    {WL_K_CE_LOSS, ce_loss, ce_cost, ce_fp},
    {WL_K_CE_BWD, ce_bwd, ce_cost, ce_fp},
    {WL_K_SCALE, scale_impl, scale_cost, scale_fp},
    {WL_K_ADAM, adam_impl, adam_cost, adam_fp},
    {-1, NULL, NULL, NULL},
};
