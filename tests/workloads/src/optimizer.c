/*
 * optimizer.c: gradient buffers, buckets, data-parallel reduction and Adam (see
 * optimizer.h).
 */
#include "optimizer.h"

#include <math.h>
#include <string.h>

#include "comm.h"
#include "kernels.h"

#define PARAM_ALIGN 64 /* elements: Megatron pads each parameter's start */

typedef struct bucket {
    int64_t off, len;   /* in the buffer, len padded to a multiple of 128 x group size */
    int64_t moff;       /* start of this bucket's master shard (distributed optimizer) */
    int total, pending; /* parameters, and those whose gradient is not ready yet */
    int launched;
    wl_work_t *work;
} bucket_t;

typedef struct buffer {
    wl_group_t *group;  /* the reduction group */
    int64_t n, nmaster;
    float *grad, *master, *m, *v;
    void *param;
    bucket_t *b;
    int nb;
} buffer_t;

struct wl_opt {
    wl_model_state_t *ms;
    const wl_cfg_t *cfg;
    buffer_t buf[2];     /* dense, expert */
    int *pbucket;        /* bucket of each parameter (in its buffer) */
    int64_t sp_off, sp_len;
    int step, armed;
};

static int64_t numel(const wl_param_t *p) { return p->rows * p->cols; }
static size_t dsz(const wl_opt_t *o) { return wl_dt_size(o->ms->dt); }

/* ---- layout ---- */

static void close_bucket(buffer_t *bf, int64_t start, int64_t *off, int total)
{
    int64_t pad = 128LL * bf->group->size, len = *off - start;
    len = (len + pad - 1) / pad * pad;
    bucket_t *nb = realloc(bf->b, sizeof *nb * (size_t)(bf->nb + 1));
    if (!nb) wl_fatal("out of memory");
    bf->b = nb;
    bf->b[bf->nb++] = (bucket_t){.off = start, .len = len, .total = total};
    *off = start + len;
}

/* One pass over the parameters of buffer k in backward order; sequence-parallel ones
 * (when sp is 1) go last. */
static void place(wl_opt_t *o, int k, int sp, int64_t *off, int64_t *start, int *count, int64_t cap)
{
    wl_model_state_t *ms = o->ms;
    buffer_t *bf = &o->buf[k];
    for (int i = ms->nparams - 1; i >= 0; i--) {
        wl_param_t *p = &ms->params[i];
        if (p->expert != k || (p->sp_partial != 0) != sp) continue;
        if (sp && o->sp_len == 0) o->sp_off = *off;
        p->off = *off;
        *off += (numel(p) + PARAM_ALIGN - 1) / PARAM_ALIGN * PARAM_ALIGN;
        o->pbucket[i] = bf->nb;
        (*count)++;
        if (sp) o->sp_len = *off - o->sp_off;
        if (*off - *start >= cap) {
            close_bucket(bf, *start, off, *count);
            *start = *off;
            *count = 0;
        }
    }
}

static void layout(wl_opt_t *o, int k)
{
    buffer_t *bf = &o->buf[k];
    const wl_cfg_t *c = o->cfg;
    int64_t cap = (int64_t)c->bucket_mb * 1000000, off = 0, start = 0;
    int64_t floor = 1000000LL * bf->group->size; /* Megatron: max(40M, 1M x dp) */
    if (cap < floor) cap = floor;
    int count = 0;
    place(o, k, 0, &off, &start, &count, cap);
    place(o, k, 1, &off, &start, &count, cap);
    if (count) close_bucket(bf, start, &off, count);
    bf->n = off;
}

static void allocate(wl_opt_t *o, buffer_t *bf)
{
    if (bf->n == 0) return;
    int shard = o->cfg->dist_opt;
    bf->nmaster = shard ? bf->n / bf->group->size : bf->n;
    int64_t moff = 0;
    for (int i = 0; i < bf->nb; i++) {
        bf->b[i].moff = moff;
        moff += bf->b[i].len / bf->group->size;
    }
    bf->grad = wl_alloc(sizeof(float) * (size_t)bf->n);
    bf->param = wl_alloc(dsz(o) * (size_t)bf->n);
    bf->master = wl_alloc(sizeof(float) * (size_t)bf->nmaster);
    bf->m = wl_alloc(sizeof(float) * (size_t)bf->nmaster);
    bf->v = wl_alloc(sizeof(float) * (size_t)bf->nmaster);
}

/* ---- initial values ---- */

/* The first element of this rank's shard of bucket b. */
static int64_t shard_start(const buffer_t *bf, const bucket_t *b)
{
    return b->off + bf->group->rank * (b->len / bf->group->size);
}

static void init_values(wl_opt_t *o, buffer_t *bf, int k)
{
    float *host = calloc((size_t)bf->n, sizeof(float));
    uint16_t *h16 = calloc((size_t)bf->n, sizeof(uint16_t));
    if (!host || !h16) wl_fatal("out of memory for the initial weights");
    for (int i = 0; i < o->ms->nparams; i++)
        if (o->ms->params[i].expert == k) wl_param_init_host(&o->ms->params[i], host + o->ms->params[i].off);
    for (int64_t i = 0; i < bf->n; i++) h16[i] = wl_f32_to_bf16(host[i]);
    const char *src = o->ms->dt == WL_DT_F32 ? (const char *)host : (const char *)h16;
    if (o->cfg->init_per_param) {
        /* As PyTorch's model.to("cuda") after a host-side init: per parameter a fill, an
         * asynchronous copy and a stream synchronisation, the same few operations again
         * and again from the program's first one on (what stopped the shim's profile
         * recorder after 4 operations under PyTorch on an H100). Same values. */
        for (int i = 0; i < o->ms->nparams; i++) {
            const wl_param_t *p = &o->ms->params[i];
            if (p->expert != k) continue;
            char *dst = (char *)bf->param + (size_t)p->off * dsz(o);
            size_t bytes = dsz(o) * (size_t)(p->rows * p->cols);
            WL_CK(cudaMemsetAsync(dst, 0, bytes, 0));
            WL_CK(cudaMemcpyAsync(dst, src + (size_t)p->off * dsz(o), bytes, cudaMemcpyHostToDevice, 0));
            WL_CK(cudaStreamSynchronize(0));
        }
    } else {
        WL_CK(cudaMemcpy(bf->param, src, dsz(o) * (size_t)bf->n, cudaMemcpyHostToDevice));
    }
    if (o->cfg->dist_opt) {
        for (int i = 0; i < bf->nb; i++)
            WL_CK(cudaMemcpy(bf->master + bf->b[i].moff, host + shard_start(bf, &bf->b[i]),
                             sizeof(float) * (size_t)(bf->b[i].len / bf->group->size), cudaMemcpyHostToDevice));
    } else {
        WL_CK(cudaMemcpy(bf->master, host, sizeof(float) * (size_t)bf->n, cudaMemcpyHostToDevice));
    }
    WL_CK(cudaMemset(bf->m, 0, sizeof(float) * (size_t)bf->nmaster));
    WL_CK(cudaMemset(bf->v, 0, sizeof(float) * (size_t)bf->nmaster));
    free(host);
    free(h16);
}

wl_opt_t *wl_opt_create(wl_model_state_t *ms)
{
    wl_opt_t *o = calloc(1, sizeof *o);
    if (!o) wl_fatal("out of memory");
    o->ms = ms;
    o->cfg = ms->cfg;
    o->pbucket = calloc((size_t)ms->nparams, sizeof(int));
    if (!o->pbucket) wl_fatal("out of memory");
    o->buf[0].group = (wl_group_t *)&ms->ps->dp_cp;
    o->buf[1].group = (wl_group_t *)&ms->ps->edp;
    for (int k = 0; k < 2; k++) {
        layout(o, k);
        allocate(o, &o->buf[k]);
        for (int i = 0; i < ms->nparams; i++) {
            wl_param_t *p = &ms->params[i];
            if (p->expert != k) continue;
            p->data = (char *)o->buf[k].param + (size_t)p->off * dsz(o);
            p->grad = o->buf[k].grad + p->off;
        }
        if (o->buf[k].n && !wl_vgpu_timing_only()) init_values(o, &o->buf[k], k);
    }
    return o;
}

void wl_opt_destroy(wl_opt_t *o)
{
    for (int k = 0; k < 2; k++) {
        buffer_t *bf = &o->buf[k];
        if (bf->n) {
            void *all[] = {bf->grad, bf->param, bf->master, bf->m, bf->v};
            for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) wl_free(all[i]);
        }
        free(bf->b);
    }
    free(o->pbucket);
    free(o);
}

/* ---- gradient reduction ---- */

/* A bucket launches once per iteration: with virtual stages several backwards are armed
 * (each model chunk's last), and one must not restart the buckets an earlier one launched. */
void wl_opt_zero_grad(wl_opt_t *o)
{
    for (int k = 0; k < 2; k++) {
        if (o->buf[k].n)
            WL_CK(cudaMemsetAsync(o->buf[k].grad, 0, sizeof(float) * (size_t)o->buf[k].n, wl_cur_stream()));
        for (int i = 0; i < o->buf[k].nb; i++) o->buf[k].b[i].launched = 0;
    }
}

/* Counts start afresh for each backward: a bucket launches when one armed backward has
 * produced all of its gradients. A bucket that spans two model chunks (or holds the
 * sequence-parallel gradients of several) never does and launches in finalize. */
void wl_opt_arm(wl_opt_t *o, int armed)
{
    o->armed = armed;
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < o->buf[k].nb; i++) o->buf[k].b[i].pending = o->buf[k].b[i].total;
}

/* Scales the bucket by 1 / (dp x cp) (Megatron's gradient_scaling_factor, the same for
 * expert gradients, which sum over the smaller expert-data-parallel group) and starts its
 * reduction on the NCCL stream. */
static void launch(wl_opt_t *o, buffer_t *bf, bucket_t *b)
{
    b->launched = 1;
    wl_group_t *g = bf->group;
    int scale_by = o->ms->ps->dp_cp.size;
    if (scale_by > 1) {
        wl_scale_args_t s = {.x = bf->grad + b->off, .n = b->len, .s = 1.0f / (float)scale_by};
        WL_LAUNCH(SCALE, s, b->len);
    }
    if (g->size == 1) return;
    if (o->cfg->dist_opt)
        b->work = wl_reduce_scatter(g, bf->grad + b->off, bf->grad + shard_start(bf, b),
                                    (size_t)(b->len / g->size), ncclFloat, 1);
    else
        b->work = wl_allreduce(g, bf->grad + b->off, (size_t)b->len, ncclFloat, ncclSum, 1);
}

void wl_opt_ready(wl_opt_t *o, wl_param_t *const *params, int n)
{
    for (int i = 0; i < n; i++) {
        if (!params[i]) continue;
        buffer_t *bf = &o->buf[params[i]->expert];
        bf->b[o->pbucket[params[i] - o->ms->params]].pending--;
    }
    if (!o->armed || !o->cfg->overlap_grad) return;
    /* Buckets that filled start in buffer order (the backward's order). */
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < o->buf[k].nb; i++) {
            bucket_t *b = &o->buf[k].b[i];
            if (b->pending == 0 && !b->launched) launch(o, &o->buf[k], b);
        }
}

void wl_opt_ready_layer(wl_opt_t *o, const wl_layer_params_t *lp)
{
    wl_param_t *const ps[] = {lp->ln1_w, lp->ln1_b, lp->qkv_w, lp->qkv_b, lp->proj_w, lp->proj_b,
                              lp->ln2_w, lp->ln2_b, lp->fc1_w, lp->fc1_b, lp->fc2_w, lp->fc2_b, lp->router_w};
    wl_opt_ready(o, ps, (int)(sizeof ps / sizeof ps[0]));
    wl_opt_ready(o, lp->exp_fc1, o->ms->local_experts);
    wl_opt_ready(o, lp->exp_fc2, o->ms->local_experts);
}

void wl_opt_finalize(wl_opt_t *o)
{
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < o->buf[k].nb; i++)
            if (!o->buf[k].b[i].launched) launch(o, &o->buf[k], &o->buf[k].b[i]);
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < o->buf[k].nb; i++) {
            wl_wait(o->buf[k].b[i].work);
            o->buf[k].b[i].work = NULL;
        }
    wl_group_t *tp = (wl_group_t *)&o->ms->ps->tp;
    if (o->sp_len && o->ms->sp)
        wl_allreduce(tp, o->buf[0].grad + o->sp_off, (size_t)o->sp_len, ncclFloat, ncclSum, 0);
}

/* ---- Adam ---- */

static void adam(wl_opt_t *o, buffer_t *bf, int64_t moff, int64_t goff, int64_t n, float lr)
{
    const float b1 = 0.9f, b2 = 0.95f; /* Megatron's GPT/Llama recipes: --adam-beta2 0.95 */
    wl_adam_args_t a = {.p = bf->master + moff, .m = bf->m + moff, .v = bf->v + moff, .g = bf->grad + goff,
                        .pm = (char *)bf->param + (size_t)goff * dsz(o), .n = n, .lr = lr, .b1 = b1,
                        .b2 = b2, .eps = 1e-8f, .c1 = 1.0f / (1.0f - powf(b1, (float)o->step)),
                        .c2 = 1.0f / (1.0f - powf(b2, (float)o->step)), .dt = o->ms->dt};
    WL_LAUNCH(ADAM, a, n);
}

static void step_buffer(wl_opt_t *o, buffer_t *bf, float lr)
{
    if (!bf->n) return;
    if (!o->cfg->dist_opt || bf->group->size == 1) {
        adam(o, bf, 0, 0, bf->n, lr);
        return;
    }
    for (int i = 0; i < bf->nb; i++)
        adam(o, bf, bf->b[i].moff, shard_start(bf, &bf->b[i]), bf->b[i].len / bf->group->size, lr);
    for (int i = 0; i < bf->nb; i++) {
        bucket_t *b = &bf->b[i];
        size_t shard = (size_t)(b->len / bf->group->size);
        char *base = (char *)bf->param + (size_t)b->off * dsz(o);
        b->work = wl_allgather(bf->group, base + (size_t)bf->group->rank * shard * dsz(o), base, shard,
                               wl_nccl_dt(o->ms->dt), 1);
    }
    for (int i = 0; i < bf->nb; i++) {
        wl_wait(bf->b[i].work);
        bf->b[i].work = NULL;
    }
}

void wl_opt_step(wl_opt_t *o, float lr)
{
    o->step++;
    for (int k = 0; k < 2; k++) step_buffer(o, &o->buf[k], lr);
}

/* ---- host access ---- */

float wl_opt_get_grad(wl_opt_t *o, const wl_param_t *p, int64_t i)
{
    float v;
    WL_CK(cudaMemcpy(&v, p->grad + i, sizeof v, cudaMemcpyDeviceToHost));
    return v;
}

float wl_opt_get_param(wl_opt_t *o, const wl_param_t *p, int64_t i)
{
    if (o->ms->dt == WL_DT_F32) {
        float v;
        WL_CK(cudaMemcpy(&v, (float *)p->data + i, sizeof v, cudaMemcpyDeviceToHost));
        return v;
    }
    uint16_t h;
    WL_CK(cudaMemcpy(&h, (uint16_t *)p->data + i, sizeof h, cudaMemcpyDeviceToHost));
    return wl_bf16_to_f32(h);
}

void wl_opt_set_param(wl_opt_t *o, const wl_param_t *p, int64_t i, float v)
{
    if (o->ms->dt != WL_DT_F32) wl_fatal("the gradient check needs --dtype fp32");
    WL_CK(cudaMemcpy((float *)p->data + i, &v, sizeof v, cudaMemcpyHostToDevice));
}
