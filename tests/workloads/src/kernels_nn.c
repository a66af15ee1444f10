/*
 * kernels_nn.c: host implementations, costs and footprints of the rotary embedding, the
 * fused (flash-style) attention and the MoE router and permutation kernels.
 *
 * Attention cost: only unmasked (query, key) pairs are computed, as flash attention skips
 * masked tiles. Forward: 4 d flops per pair and head (Q K^T and P V); backward 2.5 times
 * that (it recomputes P and runs dV, dP, dQ, dK). Both run at the profile's GEMM
 * efficiency: an assumption (FlashAttention-2 reports fwd and bwd near cuBLAS efficiency on
 * A100 for head dim 128).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"

#define SZ(dt) ((dt) == WL_DT_F32 ? 4.0 : 2.0)

static int64_t pos_of(const wl_chunks_t *c, int64_t si)
{
    return si < c->clen ? c->c0 * c->clen + si : c->c1 * c->clen + (si - c->clen);
}

/* Bytes of a strided row block: rows of `cols` elements, `ld` apart. */
static double span(int64_t rows, int64_t ld, int64_t cols, int dt)
{
    return rows <= 0 ? 0 : ((double)(rows - 1) * ld + cols) * SZ(dt);
}

/* ---- rotary embedding ---- */

static void rope_impl(const vgpu_launch_t *l)
{
    const wl_rope_args_t *a = WL_ARGS(l, wl_rope_args_t);
    int half = a->d / 2;
    for (int64_t t = 0; t < a->T; t++) {
        float pos = (float)pos_of(&a->ch, t / a->b);
        for (int h = 0; h < a->nheads; h++) {
            int64_t o = t * a->ld + (int64_t)h * a->d;
            for (int i = 0; i < half; i++) {
                float ang = pos * powf(a->base, -2.0f * (float)i / (float)a->d);
                float c = cosf(ang), s = a->inverse ? -sinf(ang) : sinf(ang);
                float x1 = wl__ld(a->x, o + i, a->dt), x2 = wl__ld(a->x, o + i + half, a->dt);
                wl__st(a->x, o + i, x1 * c - x2 * s, a->dt);
                wl__st(a->x, o + i + half, x2 * c + x1 * s, a->dt);
            }
        }
    }
}

static double rope_cost(const vgpu_launch_t *l, double *sm)
{
    const wl_rope_args_t *a = WL_ARGS(l, wl_rope_args_t);
    return wl__cost_bytes(l, 2.0 * a->T * a->nheads * a->d * SZ(a->dt));
}

static int rope_fp(const vgpu_launch_t *l, vgpu_range_t *r, int max)
{
    const wl_rope_args_t *a = WL_ARGS(l, wl_rope_args_t);
    return wl__range(r, 0, max, a->x, span(a->T, a->ld, (int64_t)a->nheads * a->d, a->dt), 1);
}

/* ---- attention ---- */

/* Unmasked (query, key) pairs per (sample, head) between two chunked blocks. */
static double causal_pairs(const wl_chunks_t *q, const wl_chunks_t *k)
{
    const int32_t qc[2] = {q->c0, q->c1}, kc[2] = {k->c0, k->c1};
    double c = (double)q->clen, pairs = 0;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            if (kc[j] < qc[i]) pairs += c * (double)k->clen;
            else if (kc[j] == qc[i]) pairs += c * (c + 1) / 2;
        }
    return pairs;
}

typedef struct attn_row {
    int64_t bi, si;
    int j, g; /* query head, kv head */
} attn_row_t;

/* One query row of the forward block: partial softmax output into o (d floats); returns
 * the block's log-sum-exp (-inf when every key is masked). */
static float attn_fwd_row(const wl_attn_args_t *a, const attn_row_t *r, float *s, float *o)
{
    int64_t qpos = pos_of(&a->qch, r->si), qrow = r->si * a->b + r->bi;
    float m = -INFINITY;
    for (int64_t ki = 0; ki < a->sk; ki++) {
        s[ki] = -INFINITY;
        if (pos_of(&a->kch, ki) > qpos) continue;
        int64_t krow = ki * a->b + r->bi;
        double dot = 0;
        for (int c = 0; c < a->d; c++)
            dot += wl__ld(a->q, qrow * a->ldq + (int64_t)r->j * a->d + c, a->dt) *
                   wl__ld(a->k, krow * a->ldk + (int64_t)r->g * a->d + c, a->dt);
        s[ki] = (float)dot * a->scale;
        m = fmaxf(m, s[ki]);
    }
    memset(o, 0, sizeof(float) * (size_t)a->d);
    if (m == -INFINITY) return -INFINITY;
    double sum = 0;
    for (int64_t ki = 0; ki < a->sk; ki++) {
        if (s[ki] == -INFINITY) continue;
        float p = expf(s[ki] - m);
        sum += p;
        int64_t krow = ki * a->b + r->bi;
        for (int c = 0; c < a->d; c++) o[c] += p * wl__ld(a->v, krow * a->ldk + (int64_t)r->g * a->d + c, a->dt);
    }
    for (int c = 0; c < a->d; c++) o[c] = (float)(o[c] / sum);
    return m + logf((float)sum);
}

/* Merges a block's (o, lse) into the running acc/lse row by log-sum-exp. */
static void attn_merge(const wl_attn_args_t *a, const attn_row_t *r, const float *o, float lb)
{
    int64_t row = r->si * a->b + r->bi, li = (r->bi * a->nq + r->j) * a->sq + r->si;
    float *acc = a->acc + row * (int64_t)a->nq * a->d + (int64_t)r->j * a->d;
    float la = a->first ? -INFINITY : a->lse[li];
    float ln = fmaxf(la, lb);
    if (ln != -INFINITY) ln += logf(expf(la - ln) + expf(lb - ln));
    float wa = la == -INFINITY ? 0.0f : expf(la - ln), wb = lb == -INFINITY ? 0.0f : expf(lb - ln);
    for (int c = 0; c < a->d; c++) acc[c] = (a->first ? 0.0f : acc[c] * wa) + o[c] * wb;
    a->lse[li] = ln;
    if (a->last)
        for (int c = 0; c < a->d; c++) wl__st(a->o_out, row * a->ldo + (int64_t)r->j * a->d + c, acc[c], a->dt);
}

static void attn_fwd(const vgpu_launch_t *l)
{
    const wl_attn_args_t *a = WL_ARGS(l, wl_attn_args_t);
    float *s = malloc(sizeof(float) * (size_t)(a->sk + a->d));
    if (!s) abort();
    for (attn_row_t r = {0}; r.bi < a->b; r.bi++)
        for (r.j = 0; r.j < a->nq; r.j++) {
            r.g = r.j / (a->nq / a->nkv);
            for (r.si = 0; r.si < a->sq; r.si++) {
                float lb = attn_fwd_row(a, &r, s, s + a->sk);
                attn_merge(a, &r, s + a->sk, lb);
            }
        }
    free(s);
}

/* One query row of the backward: P from the final lse, dq += ..., dk/dv += ... */
static void attn_bwd_row(const wl_attn_args_t *a, const attn_row_t *r)
{
    int64_t qpos = pos_of(&a->qch, r->si), qrow = r->si * a->b + r->bi;
    const int64_t qo = qrow * a->ldq + (int64_t)r->j * a->d, oo = qrow * a->ldo + (int64_t)r->j * a->d;
    float lse = a->lse[(r->bi * a->nq + r->j) * a->sq + r->si];
    double di = 0;
    for (int c = 0; c < a->d; c++) di += wl__ld(a->dout, oo + c, a->dt) * wl__ld(a->o, oo + c, a->dt);
    float *dq = a->dq + qrow * (int64_t)a->nq * a->d + (int64_t)r->j * a->d;
    for (int64_t ki = 0; ki < a->sk; ki++) {
        if (pos_of(&a->kch, ki) > qpos) continue;
        int64_t krow = ki * a->b + r->bi, ko = krow * a->ldk + (int64_t)r->g * a->d;
        double dot = 0, dp = 0;
        for (int c = 0; c < a->d; c++) {
            dot += wl__ld(a->q, qo + c, a->dt) * wl__ld(a->k, ko + c, a->dt);
            dp += wl__ld(a->dout, oo + c, a->dt) * wl__ld(a->v, ko + c, a->dt);
        }
        float p = expf((float)dot * a->scale - lse), ds = p * (float)(dp - di);
        float *dk = a->dk + krow * (int64_t)a->nkv * a->d + (int64_t)r->g * a->d;
        float *dv = a->dv + krow * (int64_t)a->nkv * a->d + (int64_t)r->g * a->d;
        for (int c = 0; c < a->d; c++) {
            dq[c] += a->scale * ds * wl__ld(a->k, ko + c, a->dt);
            dk[c] += a->scale * ds * wl__ld(a->q, qo + c, a->dt);
            dv[c] += p * wl__ld(a->dout, oo + c, a->dt);
        }
    }
}

static void attn_bwd(const vgpu_launch_t *l)
{
    const wl_attn_args_t *a = WL_ARGS(l, wl_attn_args_t);
    for (attn_row_t r = {0}; r.bi < a->b; r.bi++)
        for (r.j = 0; r.j < a->nq; r.j++) {
            r.g = r.j / (a->nq / a->nkv);
            for (r.si = 0; r.si < a->sq; r.si++) attn_bwd_row(a, &r);
        }
}

static double attn_cost(const vgpu_launch_t *l, double *sm)
{
    const wl_attn_args_t *a = WL_ARGS(l, wl_attn_args_t);
    double flops = 4.0 * a->d * causal_pairs(&a->qch, &a->kch) * (double)a->b * a->nq;
    return wl__cost_flops(l, a->dout ? 2.5 * flops : flops, a->dt);
}

static int attn_fp(const vgpu_launch_t *l, vgpu_range_t *r, int max)
{
    const wl_attn_args_t *a = WL_ARGS(l, wl_attn_args_t);
    int64_t qr = a->sq * a->b, kr = a->sk * a->b, qd = (int64_t)a->nq * a->d, kd = (int64_t)a->nkv * a->d;
    double lse = 4.0 * a->b * a->nq * a->sq;
    int n = wl__range(r, 0, max, a->q, span(qr, a->ldq, qd, a->dt), 0);
    n = wl__range(r, n, max, a->k, span(kr, a->ldk, kd, a->dt), 0);
    n = wl__range(r, n, max, a->v, span(kr, a->ldk, kd, a->dt), 0);
    if (!a->dout) {
        n = wl__range(r, n, max, a->acc, 4.0 * qr * qd, 1);
        n = wl__range(r, n, max, a->lse, lse, 1);
        return a->last ? wl__range(r, n, max, a->o_out, span(qr, a->ldo, qd, a->dt), 1) : n;
    }
    n = wl__range(r, n, max, a->o, span(qr, a->ldo, qd, a->dt), 0);
    n = wl__range(r, n, max, a->dout, span(qr, a->ldo, qd, a->dt), 0);
    n = wl__range(r, n, max, a->lse, lse, 0);
    n = wl__range(r, n, max, a->dq, 4.0 * qr * qd, 1);
    n = wl__range(r, n, max, a->dk, 4.0 * kr * kd, 1);
    return wl__range(r, n, max, a->dv, 4.0 * kr * kd, 1);
}

/* ---- MoE router ---- */

static void topk_fwd(const vgpu_launch_t *l)
{
    const wl_topk_args_t *a = WL_ARGS(l, wl_topk_args_t);
    for (int64_t t = 0; t < a->T; t++) {
        const float *lg = a->logits + t * a->E;
        int32_t *idx = a->idx + t * a->k;
        float *w = a->w + t * a->k, m = -INFINITY, sum = 0;
        for (int j = 0; j < a->k; j++) { /* selection, ties to the lower expert */
            int best = -1;
            for (int e = 0; e < a->E; e++) {
                int taken = 0;
                for (int i = 0; i < j; i++) taken |= idx[i] == e;
                if (!taken && (best < 0 || lg[e] > lg[best])) best = e;
            }
            idx[j] = best;
            a->counts[best]++;
            m = fmaxf(m, lg[best]);
        }
        for (int j = 0; j < a->k; j++) sum += (w[j] = expf(lg[idx[j]] - m));
        for (int j = 0; j < a->k; j++) w[j] /= sum;
    }
}

static void topk_bwd(const vgpu_launch_t *l)
{
    const wl_topk_args_t *a = WL_ARGS(l, wl_topk_args_t);
    memset(a->dlogits, 0, sizeof(float) * (size_t)(a->T * a->E));
    for (int64_t t = 0; t < a->T; t++) {
        const float *w = a->w + t * a->k, *dw = a->dw + t * a->k;
        float dot = 0;
        for (int j = 0; j < a->k; j++) dot += w[j] * dw[j];
        for (int j = 0; j < a->k; j++) a->dlogits[t * a->E + a->idx[t * a->k + j]] = w[j] * (dw[j] - dot);
    }
}

static double topk_cost(const vgpu_launch_t *l, double *sm)
{
    const wl_topk_args_t *a = WL_ARGS(l, wl_topk_args_t);
    return wl__cost_bytes(l, (double)a->T * (4.0 * a->E * 2 + 8.0 * a->k));
}

static int topk_fp(const vgpu_launch_t *l, vgpu_range_t *r, int max)
{
    const wl_topk_args_t *a = WL_ARGS(l, wl_topk_args_t);
    double tk = 4.0 * a->T * a->k, te = 4.0 * a->T * a->E;
    int fwd = a->logits != NULL;
    int n = wl__range(r, 0, max, a->logits, te, 0);
    n = wl__range(r, n, max, a->idx, tk, fwd);
    n = wl__range(r, n, max, a->w, tk, fwd);
    n = wl__range(r, n, max, a->counts, 4.0 * a->E, 1);
    n = wl__range(r, n, max, a->dw, tk, 0);
    return wl__range(r, n, max, a->dlogits, te, 1);
}

/* ---- MoE permutation ---- */

static void perm_rows(const vgpu_launch_t *l)
{
    const wl_perm_args_t *a = WL_ARGS(l, wl_perm_args_t);
    int32_t off[a->E > 0 ? a->E : 1], run = 0;
    for (int e = 0; e < a->E; e++) {
        off[e] = run;
        run += a->counts[e];
    }
    for (int64_t i = 0; i < a->T * a->k; i++) a->rowof[i] = off[a->idx[i]]++;
}

static void permute(const vgpu_launch_t *l)
{
    const wl_perm_args_t *a = WL_ARGS(l, wl_perm_args_t);
    for (int64_t i = 0; i < a->T * a->k; i++)
        for (int64_t c = 0; c < a->h; c++)
            wl__st(a->out, a->rowof[i] * a->h + c, wl__ld(a->x, (i / a->k) * a->h + c, a->dt), a->dt);
}

static void permute_bwd(const vgpu_launch_t *l)
{
    const wl_perm_args_t *a = WL_ARGS(l, wl_perm_args_t);
    for (int64_t t = 0; t < a->T; t++)
        for (int64_t c = 0; c < a->h; c++) {
            float s = a->accumulate ? wl__ld(a->out, t * a->h + c, a->dt) : 0.0f;
            for (int j = 0; j < a->k; j++) s += wl__ld(a->x, a->rowof[t * a->k + j] * a->h + c, a->dt);
            wl__st(a->out, t * a->h + c, s, a->dt);
        }
}

static void unpermute(const vgpu_launch_t *l)
{
    const wl_perm_args_t *a = WL_ARGS(l, wl_perm_args_t);
    for (int64_t t = 0; t < a->T; t++)
        for (int64_t c = 0; c < a->h; c++) {
            float s = 0;
            for (int j = 0; j < a->k; j++)
                s += a->w[t * a->k + j] * wl__ld(a->x, a->rowof[t * a->k + j] * a->h + c, a->dt);
            wl__st(a->out, t * a->h + c, s, a->dt);
        }
}

static void unpermute_bwd(const vgpu_launch_t *l)
{
    const wl_perm_args_t *a = WL_ARGS(l, wl_perm_args_t);
    for (int64_t i = 0; i < a->T * a->k; i++) {
        int64_t t = i / a->k, row = a->rowof[i];
        double dot = 0;
        for (int64_t c = 0; c < a->h; c++) {
            float dy = wl__ld(a->x, t * a->h + c, a->dt);
            dot += dy * wl__ld(a->aux, row * a->h + c, a->dt);
            wl__st(a->out, row * a->h + c, a->w[i] * dy, a->dt);
        }
        a->dw[i] = (float)dot;
    }
}

static double perm_cost(const vgpu_launch_t *l, double *sm)
{
    const wl_perm_args_t *a = WL_ARGS(l, wl_perm_args_t);
    if (!a->x) return wl__cost_bytes(l, 12.0 * a->T * a->k);
    return wl__cost_bytes(l, 2.0 * a->T * a->k * a->h * SZ(a->dt) * (a->aux ? 1.5 : 1.0));
}

static int perm_fp(const vgpu_launch_t *l, vgpu_range_t *r, int max)
{
    const wl_perm_args_t *a = WL_ARGS(l, wl_perm_args_t);
    double tk = 4.0 * a->T * a->k, rows = (double)a->T * a->k * a->h * SZ(a->dt);
    int n = wl__range(r, 0, max, a->rowof, tk, a->x == NULL);
    if (!a->x) {
        n = wl__range(r, n, max, a->idx, tk, 0);
        return wl__range(r, n, max, a->counts, 4.0 * a->E, 0);
    }
    n = wl__range(r, n, max, a->w, tk, 0);
    n = wl__range(r, n, max, a->dw, tk, 1);
    n = wl__range(r, n, max, a->aux, rows, 0);
    return n;
}

/* The x/out ranges depend on the direction; each kernel adds its own. */
static int permute_fp(const vgpu_launch_t *l, vgpu_range_t *r, int max)
{
    const wl_perm_args_t *a = WL_ARGS(l, wl_perm_args_t);
    int n = perm_fp(l, r, max);
    n = wl__range(r, n, max, a->x, (double)a->T * a->h * SZ(a->dt), 0);
    return wl__range(r, n, max, a->out, (double)a->T * a->k * a->h * SZ(a->dt), 1);
}

static int gather_fp(const vgpu_launch_t *l, vgpu_range_t *r, int max)
{
    const wl_perm_args_t *a = WL_ARGS(l, wl_perm_args_t);
    int n = perm_fp(l, r, max);
    n = wl__range(r, n, max, a->x, (double)a->T * a->k * a->h * SZ(a->dt), 0);
    return wl__range(r, n, max, a->out, (double)a->T * a->h * SZ(a->dt), 1);
}

static int unpermute_bwd_fp(const vgpu_launch_t *l, vgpu_range_t *r, int max)
{
    const wl_perm_args_t *a = WL_ARGS(l, wl_perm_args_t);
    int n = perm_fp(l, r, max);
    n = wl__range(r, n, max, a->x, (double)a->T * a->h * SZ(a->dt), 0);
    return wl__range(r, n, max, a->out, (double)a->T * a->k * a->h * SZ(a->dt), 1);
}

const wl_khost_t wl_khost_nn[] = {
    {WL_K_ROPE, rope_impl, rope_cost, rope_fp},
    {WL_K_ATTN_FWD, attn_fwd, attn_cost, attn_fp},
    {WL_K_ATTN_BWD, attn_bwd, attn_cost, attn_fp},
    {WL_K_TOPK_FWD, topk_fwd, topk_cost, topk_fp},
    {WL_K_TOPK_BWD, topk_bwd, topk_cost, topk_fp},
    {WL_K_PERM_ROWS, perm_rows, perm_cost, perm_fp},
    {WL_K_PERMUTE, permute, perm_cost, permute_fp},
    {WL_K_PERMUTE_BWD, permute_bwd, perm_cost, gather_fp},
    {WL_K_UNPERMUTE, unpermute, perm_cost, gather_fp},
    {WL_K_UNPERMUTE_BWD, unpermute_bwd, perm_cost, unpermute_bwd_fp},
    {-1, NULL, NULL, NULL},
};
