/*
 * attention.c: core attention and the context-parallel ring (see attention.h).
 */
#include "attention.h"

#include <math.h>

#include "comm.h"
#include "kernels.h"

static size_t bytes(const wl_model_state_t *ms, int64_t rows, int64_t cols, int dt)
{
    (void)ms;
    return (size_t)(rows * cols) * wl_dt_size(dt);
}

/* The chunks of the rank `step` places before this one on the ring. */
static wl_chunks_t owner_chunks(const wl_model_state_t *ms, int step)
{
    int cp = ms->cfg->cp, o = (ms->ps->cp_rank - step + cp) % cp;
    return (wl_chunks_t){o, 2 * cp - 1 - o, ms->chunks.clen};
}

static wl_attn_args_t base_args(const wl_model_state_t *ms, const void *qkv)
{
    int64_t qd = ms->nq_l * ms->d;
    wl_attn_args_t a = {.q = qkv, .k = (const char *)qkv + bytes(ms, 1, qd, ms->dt),
                        .ldq = ms->qkv_out, .ldk = ms->qkv_out, .ldo = qd, .b = ms->b,
                        .sq = ms->s_local, .sk = ms->s_local, .nq = (int32_t)ms->nq_l,
                        .nkv = (int32_t)ms->nkv_l, .d = (int32_t)ms->d,
                        .scale = 1.0f / sqrtf((float)ms->d), .qch = ms->chunks, .kch = ms->chunks,
                        .first = 1, .last = 1, .dt = ms->dt};
    a.v = (const char *)a.k + bytes(ms, 1, ms->nkv_l * ms->d, ms->dt);
    return a;
}

/* Columns [col0, col0 + cols) of src (rows x ld_src) into dst (rows x ld_dst), cast and
 * optionally accumulated. */
static void copy_cols(const wl_model_state_t *ms, const void *src, int sdt, int64_t ld_src, void *dst,
                      int ddt, int64_t ld_dst, int64_t cols, int acc)
{
    wl_copy_args_t c = {.src = src, .dst = dst, .rows = ms->T, .cols = cols, .ld_src = ld_src,
                        .ld_dst = ld_dst, .src_dt = sdt, .dst_dt = ddt, .accumulate = acc};
    WL_LAUNCH(COPY, c, ms->T * cols);
}

/* Sends `send` to the next rank of the ring and receives into `recv` from the previous. */
static wl_work_t *ring_exchange(wl_model_state_t *ms, void *send, void *recv, size_t n)
{
    wl_group_t *g = (wl_group_t *)&ms->ps->cp;
    int next = (g->rank + 1) % g->size, prev = (g->rank + g->size - 1) % g->size;
    wl_p2p_t ops[2] = {{1, next, send, n}, {0, prev, recv, n}};
    return wl_batch_p2p(g, ops, 2, wl_nccl_dt(ms->dt), 1);
}

void wl_attn_fwd(wl_model_state_t *ms, const void *qkv, void *ctx, float *lse)
{
    int cp = ms->cfg->cp;
    int64_t qd = ms->nq_l * ms->d, kvd = 2 * ms->nkv_l * ms->d;
    float *acc = wl_alloc(sizeof(float) * (size_t)(ms->T * qd));
    wl_attn_args_t a = base_args(ms, qkv);
    a.o_out = ctx;
    a.acc = acc;
    a.lse = lse;
    void *kv = NULL, *nxt = NULL;
    if (cp > 1) { /* the local block, packed so it can travel */
        kv = wl_alloc(bytes(ms, ms->T, kvd, ms->dt));
        nxt = wl_alloc(bytes(ms, ms->T, kvd, ms->dt));
        copy_cols(ms, a.k, ms->dt, ms->qkv_out, kv, ms->dt, kvd, kvd, 0);
    }
    for (int i = 0; i < cp; i++) {
        wl_work_t *w = i + 1 < cp ? ring_exchange(ms, kv, nxt, (size_t)(ms->T * kvd)) : NULL;
        if (cp > 1) {
            a.k = kv;
            a.v = (const char *)kv + bytes(ms, 1, kvd / 2, ms->dt);
            a.ldk = kvd;
            a.kch = owner_chunks(ms, i);
        }
        a.first = i == 0;
        a.last = i == cp - 1;
        WL_LAUNCH(ATTN_FWD, a, ms->b * ms->nq_l * ms->s_local);
        wl_wait(w);
        void *t = kv;
        kv = nxt;
        nxt = t;
    }
    if (kv) wl_free(kv);
    if (nxt) wl_free(nxt);
    wl_free(acc);
}

/* dq (fp32) and this rank's own dk, dv (type kv_dt, rows ld apart) into dqkv. */
static void scatter_grads(wl_model_state_t *ms, const float *dq, const void *dk, const void *dv, int kv_dt,
                          int64_t ld, void *dqkv)
{
    int64_t qd = ms->nq_l * ms->d, kd = ms->nkv_l * ms->d;
    char *out = dqkv;
    copy_cols(ms, dq, WL_DT_F32, qd, out, ms->dt, ms->qkv_out, qd, 0);
    copy_cols(ms, dk, kv_dt, ld, out + bytes(ms, 1, qd, ms->dt), ms->dt, ms->qkv_out, kd, 0);
    copy_cols(ms, dv, kv_dt, ld, out + bytes(ms, 1, qd + kd, ms->dt), ms->dt, ms->qkv_out, kd, 0);
}

/* Backward without context parallelism: one block. */
static void attn_bwd_local(wl_model_state_t *ms, wl_attn_args_t *a, float *dq, void *dqkv)
{
    int64_t kd = ms->nkv_l * ms->d;
    float *dkv = wl_alloc(sizeof(float) * (size_t)(ms->T * 2 * kd));
    WL_CK(cudaMemsetAsync(dkv, 0, sizeof(float) * (size_t)(ms->T * 2 * kd), wl_cur_stream()));
    a->dk = dkv;
    a->dv = dkv + ms->T * kd;
    WL_LAUNCH(ATTN_BWD, *a, ms->b * ms->nq_l * ms->s_local);
    scatter_grads(ms, dq, a->dk, a->dv, WL_DT_F32, kd, dqkv);
    wl_free(dkv);
}

typedef struct ring {
    void *kv, *nxt, *acc, *recv;
    float *dk, *dv;
    wl_work_t *dkv_work;
} ring_t;

/* One step of the backward ring: block i's gradients, folded into the accumulator that
 * arrived with it, which then moves on. */
static void ring_bwd_step(wl_model_state_t *ms, wl_attn_args_t *a, ring_t *r, int i)
{
    int cp = ms->cfg->cp;
    int64_t kd = ms->nkv_l * ms->d, n = ms->T * 2 * kd;
    wl_work_t *w = i + 1 < cp ? ring_exchange(ms, r->kv, r->nxt, (size_t)n) : NULL;
    a->k = r->kv;
    a->v = (const char *)r->kv + bytes(ms, 1, kd, ms->dt);
    a->ldk = 2 * kd;
    a->kch = owner_chunks(ms, i);
    WL_CK(cudaMemsetAsync(r->dk, 0, sizeof(float) * (size_t)(2 * ms->T * kd), wl_cur_stream()));
    WL_LAUNCH(ATTN_BWD, *a, ms->b * ms->nq_l * ms->s_local);
    wl_wait(r->dkv_work); /* the previous accumulator has arrived and left */
    r->dkv_work = NULL;
    if (i > 0) copy_cols(ms, r->recv, ms->dt, 2 * kd, r->acc, ms->dt, 2 * kd, 2 * kd, 0);
    copy_cols(ms, r->dk, WL_DT_F32, kd, r->acc, ms->dt, 2 * kd, kd, i > 0);
    copy_cols(ms, r->dv, WL_DT_F32, kd, (char *)r->acc + bytes(ms, 1, kd, ms->dt), ms->dt, 2 * kd, kd, i > 0);
    r->dkv_work = ring_exchange(ms, r->acc, r->recv, (size_t)n);
    wl_wait(w);
    void *t = r->kv;
    r->kv = r->nxt;
    r->nxt = t;
}

static void attn_bwd_ring(wl_model_state_t *ms, wl_attn_args_t *a, float *dq, void *dqkv)
{
    int64_t kd = ms->nkv_l * ms->d;
    size_t blk = bytes(ms, ms->T, 2 * kd, ms->dt);
    ring_t r = {.kv = wl_alloc(blk), .nxt = wl_alloc(blk), .acc = wl_alloc(blk), .recv = wl_alloc(blk)};
    r.dk = wl_alloc(sizeof(float) * (size_t)(2 * ms->T * kd)); /* dk, then dv */
    r.dv = r.dk + ms->T * kd;
    a->dk = r.dk;
    a->dv = r.dv;
    copy_cols(ms, (const char *)a->q + bytes(ms, 1, ms->nq_l * ms->d, ms->dt), ms->dt, ms->qkv_out, r.kv,
              ms->dt, 2 * kd, 2 * kd, 0);
    for (int i = 0; i < ms->cfg->cp; i++) ring_bwd_step(ms, a, &r, i);
    wl_wait(r.dkv_work); /* recv now holds this rank's own block, complete */
    scatter_grads(ms, dq, r.recv, (char *)r.recv + bytes(ms, 1, kd, ms->dt), ms->dt, 2 * kd, dqkv);
    void *all[] = {r.kv, r.nxt, r.acc, r.recv, r.dk};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) wl_free(all[i]);
}

void wl_attn_bwd(wl_model_state_t *ms, const void *qkv, const void *ctx, const void *dctx,
                 const float *lse, void *dqkv)
{
    int64_t qd = ms->nq_l * ms->d;
    float *dq = wl_alloc(sizeof(float) * (size_t)(ms->T * qd));
    WL_CK(cudaMemsetAsync(dq, 0, sizeof(float) * (size_t)(ms->T * qd), wl_cur_stream()));
    wl_attn_args_t a = base_args(ms, qkv);
    a.o = ctx;
    a.dout = dctx;
    a.lse = (float *)lse;
    a.dq = dq;
    if (ms->cfg->cp > 1) attn_bwd_ring(ms, &a, dq, dqkv);
    else attn_bwd_local(ms, &a, dq, dqkv);
    wl_free(dq);
}
