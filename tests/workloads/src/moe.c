/*
 * moe.c: the MoE MLP with the all-to-all token dispatcher (see moe.h).
 *
 * Row layouts: "perm" has T*k rows sorted by global expert (so by destination rank);
 * "source-major" is what an all-to-all delivers (for each source rank, its rows for each
 * local expert); "expert-major" is what the experts' GEMMs want (for each local expert, the
 * rows from every source rank). Experts are SwiGLU MLPs (Llama architecture).
 */
#include "moe.h"

#include <string.h>

#include "blas.h"
#include "comm.h"
#include "kernels.h"

/* Host view of one micro-batch's routing on this rank (kept in sv->splits). */
typedef struct plan {
    int ep, L;
    int64_t *in_split;  /* rows sent to each rank ([ep]) */
    int64_t *out_split; /* rows received from each rank ([ep]) */
    int64_t *c;         /* rows from source rank r for local expert e: c[r * L + e] */
    int64_t R;          /* rows received in total */
} plan_t;

static plan_t plan_of(const wl_model_state_t *ms, int64_t *mem)
{
    plan_t p = {.ep = ms->cfg->ep, .L = ms->local_experts};
    p.in_split = mem;
    p.out_split = mem + p.ep;
    p.c = mem + 2 * p.ep;
    for (int r = 0; r < p.ep; r++) p.R += p.out_split[r];
    return p;
}

static size_t row_bytes(const wl_model_state_t *ms, int64_t rows, int64_t cols)
{
    return (size_t)(rows * cols) * wl_dt_size(ms->dt);
}

/* ---- routing: counts exchange, host splits ---- */

/* The counts of every rank of the EP group reach the host: an all-gather of [E] counts,
 * then Megatron's device-to-host synchronisation point. Timing-only runs have no data and
 * route evenly instead. */
static int64_t *exchange_counts(wl_model_state_t *ms, const int32_t *counts)
{
    int ep = ms->cfg->ep, E = ms->cfg->m.experts, L = ms->local_experts, me = ms->ps->ep_rank;
    int32_t *all = wl_alloc(sizeof(int32_t) * (size_t)(ep * E)), *host;
    wl_group_t *g = (wl_group_t *)&ms->ps->ep;
    if (ep > 1) wl_allgather(g, counts, all, (size_t)E, ncclInt32, 0);
    else WL_CK(cudaMemcpyAsync(all, counts, sizeof(int32_t) * (size_t)E, cudaMemcpyDeviceToDevice, wl_cur_stream()));
    WL_CK(cudaMallocHost((void **)&host, sizeof(int32_t) * (size_t)(ep * E)));
    WL_CK(cudaMemcpyAsync(host, all, sizeof(int32_t) * (size_t)(ep * E), cudaMemcpyDeviceToHost, wl_cur_stream()));
    WL_CK(cudaStreamSynchronize(wl_cur_stream()));
    wl_free(all);
    if (ms->cfg->timing_only)
        for (int i = 0; i < ep * E; i++) host[i] = (int32_t)(ms->T * ms->cfg->m.topk / E);
    int64_t *mem = calloc((size_t)(2 * ep + ep * L), sizeof(int64_t));
    if (!mem) wl_fatal("out of memory");
    for (int r = 0; r < ep; r++)
        for (int e = 0; e < L; e++) {
            mem[r] += host[me * E + r * L + e];               /* what I send to r */
            mem[ep + r] += host[r * E + me * L + e];          /* what r sends me */
            mem[2 * ep + r * L + e] = host[r * E + me * L + e];
        }
    WL_CK(cudaFreeHost(host));
    return mem;
}

/* ---- data movement ---- */

/* The all-to-all as all_to_all_single with splits issues it: grouped send/receive with
 * every rank of the EP group (self included). send_split[r] rows go to r, recv_split[r]
 * rows come from r. */
static void *all_to_all(wl_model_state_t *ms, const void *send, const int64_t *send_split,
                        const int64_t *recv_split, int64_t recv_rows)
{
    wl_group_t *g = (wl_group_t *)&ms->ps->ep;
    void *recv = wl_alloc(row_bytes(ms, recv_rows, ms->h));
    if (g->size == 1) {
        WL_CK(cudaMemcpyAsync(recv, send, row_bytes(ms, recv_rows, ms->h), cudaMemcpyDeviceToDevice, wl_cur_stream()));
        return recv;
    }
    wl_p2p_t ops[2 * g->size];
    int64_t so = 0, ro = 0;
    for (int r = 0; r < g->size; r++) {
        ops[2 * r] = (wl_p2p_t){1, r, (char *)send + row_bytes(ms, so, ms->h), (size_t)(send_split[r] * ms->h)};
        ops[2 * r + 1] = (wl_p2p_t){0, r, (char *)recv + row_bytes(ms, ro, ms->h), (size_t)(recv_split[r] * ms->h)};
        so += send_split[r];
        ro += recv_split[r];
    }
    wl_batch_p2p(g, ops, 2 * g->size, wl_nccl_dt(ms->dt), 0);
    return recv;
}

/* Megatron's sort_chunks_by_idxs: source-major <-> expert-major (to_expert selects). */
static void *regroup(wl_model_state_t *ms, const plan_t *p, const void *in, int to_expert)
{
    void *out = wl_alloc(row_bytes(ms, p->R, ms->h));
    int64_t src = 0;
    for (int r = 0; r < p->ep; r++)
        for (int e = 0; e < p->L; e++) {
            int64_t n = p->c[r * p->L + e], exp_off = 0;
            for (int e2 = 0; e2 < e; e2++)
                for (int r2 = 0; r2 < p->ep; r2++) exp_off += p->c[r2 * p->L + e2];
            for (int r2 = 0; r2 < r; r2++) exp_off += p->c[r2 * p->L + e];
            if (n) {
                int64_t a = to_expert ? src : exp_off, b = to_expert ? exp_off : src;
                wl_copy_args_t c = {.src = (const char *)in + row_bytes(ms, a, ms->h),
                                    .dst = (char *)out + row_bytes(ms, b, ms->h), .rows = n, .cols = ms->h,
                                    .ld_src = ms->h, .ld_dst = ms->h, .src_dt = ms->dt, .dst_dt = ms->dt};
                WL_LAUNCH(COPY, c, n * ms->h);
            }
            src += n;
        }
    return out;
}

/* Rows of local expert e in the expert-major layout: first row and count. */
static int64_t expert_rows(const plan_t *p, int e, int64_t *first)
{
    int64_t off = 0, n = 0;
    for (int e2 = 0; e2 <= e; e2++)
        for (int r = 0; r < p->ep; r++) {
            if (e2 < e) off += p->c[r * p->L + e2];
            else n += p->c[r * p->L + e2];
        }
    *first = off;
    return n;
}

/* ---- experts (SequentialMLP) ---- */

static void *experts_fwd(wl_model_state_t *ms, const wl_layer_params_t *lp, wl_saved_t *sv, const plan_t *p)
{
    int64_t f = ms->cfg->m.ffn;
    sv->fc1 = wl_alloc(row_bytes(ms, p->R, 2 * f));
    sv->act = wl_alloc(row_bytes(ms, p->R, f));
    void *out = wl_alloc(row_bytes(ms, p->R, ms->h));
    for (int e = 0; e < p->L; e++) {
        int64_t r0, n = expert_rows(p, e, &r0);
        if (!n) continue;
        char *gu = (char *)sv->fc1 + row_bytes(ms, r0, 2 * f), *act = (char *)sv->act + row_bytes(ms, r0, f);
        wl_linear_fwd(ms->dt, (char *)sv->perm + row_bytes(ms, r0, ms->h), lp->exp_fc1[e]->data, gu, n, ms->h, 2 * f);
        wl_swiglu_args_t a = {.gu = gu, .out = act, .T = n, .f = f, .dt = ms->dt};
        WL_LAUNCH(SWIGLU_FWD, a, n * f);
        wl_linear_fwd(ms->dt, act, lp->exp_fc2[e]->data, (char *)out + row_bytes(ms, r0, ms->h), n, f, ms->h);
    }
    return out;
}

static void *experts_bwd(wl_model_state_t *ms, const wl_layer_params_t *lp, wl_saved_t *sv, const plan_t *p,
                         const void *dy)
{
    int64_t f = ms->cfg->m.ffn;
    void *dx = wl_alloc(row_bytes(ms, p->R, ms->h));
    void *dact = wl_alloc(row_bytes(ms, p->R, f)), *dgu = wl_alloc(row_bytes(ms, p->R, 2 * f));
    for (int e = 0; e < p->L; e++) {
        int64_t r0, n = expert_rows(p, e, &r0);
        if (!n) continue;
        const char *dye = (const char *)dy + row_bytes(ms, r0, ms->h);
        char *da = (char *)dact + row_bytes(ms, r0, f), *dg = (char *)dgu + row_bytes(ms, r0, 2 * f);
        char *act = (char *)sv->act + row_bytes(ms, r0, f), *gu = (char *)sv->fc1 + row_bytes(ms, r0, 2 * f);
        char *xin = (char *)sv->perm + row_bytes(ms, r0, ms->h);
        wl_linear_dgrad(ms->dt, dye, lp->exp_fc2[e]->data, da, n, f, ms->h, 0.0f);
        wl_linear_wgrad(ms->dt, act, dye, lp->exp_fc2[e]->grad, n, f, ms->h);
        wl_swiglu_args_t a = {.gu = gu, .dout = da, .dgu = dg, .T = n, .f = f, .dt = ms->dt};
        WL_LAUNCH(SWIGLU_BWD, a, n * f);
        wl_linear_dgrad(ms->dt, dg, lp->exp_fc1[e]->data, (char *)dx + row_bytes(ms, r0, ms->h), n, ms->h, 2 * f, 0.0f);
        wl_linear_wgrad(ms->dt, xin, dg, lp->exp_fc1[e]->grad, n, ms->h, 2 * f);
    }
    wl_free(dact);
    wl_free(dgu);
    wl_free(sv->act);
    wl_free(sv->fc1);
    return dx;
}

/* ---- the layer ---- */

static void route(wl_model_state_t *ms, const wl_layer_params_t *lp, wl_saved_t *sv, const void *ln2,
                  int32_t *counts)
{
    int E = ms->cfg->m.experts, k = ms->cfg->m.topk;
    sv->rlogits = wl_alloc(sizeof(float) * (size_t)(ms->T * E));
    wl_linear_fwd_out(ms->dt, WL_DT_F32, ln2, lp->router_w->data, sv->rlogits, ms->T, ms->h, E);
    sv->ridx = wl_alloc(sizeof(int32_t) * (size_t)(ms->T * k));
    sv->rw = wl_alloc(sizeof(float) * (size_t)(ms->T * k));
    sv->rowof = wl_alloc(sizeof(int32_t) * (size_t)(ms->T * k));
    WL_CK(cudaMemsetAsync(counts, 0, sizeof(int32_t) * (size_t)E, wl_cur_stream()));
    wl_topk_args_t t = {.logits = sv->rlogits, .idx = sv->ridx, .w = sv->rw, .counts = counts, .T = ms->T,
                        .E = E, .k = k};
    WL_LAUNCH(TOPK_FWD, t, ms->T);
    wl_perm_args_t r = {.idx = sv->ridx, .counts = counts, .rowof = sv->rowof, .T = ms->T, .E = E, .k = k};
    WL_LAUNCH(PERM_ROWS, r, 1);
}

void *wl_moe_fwd(wl_model_state_t *ms, const wl_layer_params_t *lp, wl_saved_t *sv, const void *ln2)
{
    int E = ms->cfg->m.experts, k = ms->cfg->m.topk;
    int32_t *counts = wl_alloc(sizeof(int32_t) * (size_t)E);
    route(ms, lp, sv, ln2, counts);
    void *perm = wl_alloc(row_bytes(ms, ms->T * k, ms->h));
    wl_perm_args_t pa = {.rowof = sv->rowof, .x = ln2, .out = perm, .T = ms->T, .h = ms->h, .E = E, .k = k, .dt = ms->dt};
    WL_LAUNCH(PERMUTE, pa, ms->T * k * ms->h);
    sv->splits = exchange_counts(ms, counts);
    wl_free(counts);
    plan_t p = plan_of(ms, sv->splits);
    void *recv = all_to_all(ms, perm, p.in_split, p.out_split, p.R);
    wl_free(perm);
    sv->perm = regroup(ms, &p, recv, 1); /* the experts' input, kept for their wgrad */
    wl_free(recv);
    void *eout = experts_fwd(ms, lp, sv, &p);
    void *back = regroup(ms, &p, eout, 0);
    wl_free(eout);
    sv->eout = all_to_all(ms, back, p.out_split, p.in_split, ms->T * k);
    wl_free(back);
    void *y = wl_alloc(row_bytes(ms, ms->T, ms->h));
    wl_perm_args_t u = {.rowof = sv->rowof, .x = sv->eout, .out = y, .w = sv->rw, .T = ms->T, .h = ms->h, .E = E,
                        .k = k, .dt = ms->dt};
    WL_LAUNCH(UNPERMUTE, u, ms->T * ms->h);
    return y;
}

/* Router backward: dlogits from the probabilities' gradient, then the router's GEMMs
 * (dln2 += dlogits Wr, accumulated onto the experts' path). */
static void router_bwd(wl_model_state_t *ms, const wl_layer_params_t *lp, wl_saved_t *sv, const float *dw,
                       void *dln2)
{
    int E = ms->cfg->m.experts, k = ms->cfg->m.topk;
    float *dlog = wl_alloc(sizeof(float) * (size_t)(ms->T * E));
    wl_topk_args_t t = {.idx = sv->ridx, .w = sv->rw, .dw = dw, .dlogits = dlog, .T = ms->T, .E = E, .k = k};
    WL_LAUNCH(TOPK_BWD, t, ms->T);
    void *dl = wl_alloc(row_bytes(ms, ms->T, E));
    wl_copy_args_t c = {.src = dlog, .dst = dl, .rows = ms->T, .cols = E, .ld_src = E, .ld_dst = E,
                        .src_dt = WL_DT_F32, .dst_dt = ms->dt};
    WL_LAUNCH(COPY, c, ms->T * E);
    wl_linear_dgrad(ms->dt, dl, lp->router_w->data, dln2, ms->T, ms->h, E, 1.0f);
    wl_linear_wgrad(ms->dt, sv->ln2, dl, lp->router_w->grad, ms->T, ms->h, E);
    wl_free(dl);
    wl_free(dlog);
}

void *wl_moe_bwd(wl_model_state_t *ms, const wl_layer_params_t *lp, wl_saved_t *sv, const void *dout)
{
    int E = ms->cfg->m.experts, k = ms->cfg->m.topk;
    plan_t p = plan_of(ms, sv->splits);
    void *deout = wl_alloc(row_bytes(ms, ms->T * k, ms->h));
    float *dw = wl_alloc(sizeof(float) * (size_t)(ms->T * k));
    wl_perm_args_t ub = {.rowof = sv->rowof, .x = dout, .aux = sv->eout, .out = deout, .w = sv->rw, .dw = dw,
                         .T = ms->T, .h = ms->h, .E = E, .k = k, .dt = ms->dt};
    WL_LAUNCH(UNPERMUTE_BWD, ub, ms->T * k * ms->h);
    wl_free(sv->eout);
    void *recv = all_to_all(ms, deout, p.in_split, p.out_split, p.R);
    wl_free(deout);
    void *dy = regroup(ms, &p, recv, 1);
    wl_free(recv);
    void *dxe = experts_bwd(ms, lp, sv, &p, dy);
    wl_free(dy);
    wl_free(sv->perm);
    void *back = regroup(ms, &p, dxe, 0);
    wl_free(dxe);
    void *dperm = all_to_all(ms, back, p.out_split, p.in_split, ms->T * k);
    wl_free(back);
    void *dln2 = wl_alloc(row_bytes(ms, ms->T, ms->h));
    wl_perm_args_t pb = {.rowof = sv->rowof, .x = dperm, .out = dln2, .T = ms->T, .h = ms->h, .E = E, .k = k,
                         .dt = ms->dt};
    WL_LAUNCH(PERMUTE_BWD, pb, ms->T * ms->h);
    wl_free(dperm);
    router_bwd(ms, lp, sv, dw, dln2);
    void *all[] = {dw, sv->rlogits, sv->ridx, sv->rw, sv->rowof};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) wl_free(all[i]);
    free(sv->splits);
    return dln2;
}
