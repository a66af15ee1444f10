/*
 * schedule.c: data, forward/backward steps, the 1F1B loop and the backward thread (see
 * schedule.h).
 */
#include "schedule_int.h"

#include <pthread.h>
#include <string.h>

#include "blas.h"
#include "head.h"
#include "inject.h"
#include "layers.h"

int wl_sched_microbatches(const wl_cfg_t *c) { return c->gbs / (c->mbs * c->dp); }

/* ---- data ---- */

/* A deterministic "language": each sample starts at a hashed token and follows
 * x' = (7x + 3) mod V, so the next token is a function of the current one and a model
 * can learn it. Token at global position p of sample id. */
static void sample_tokens(int64_t id, int64_t len, int vocab, int32_t *out)
{
    int64_t x = (int64_t)((wl_hash_uniform(0x5eedULL, (uint64_t)id) + 1.0f) * 0.5f * (float)vocab) % vocab;
    for (int64_t p = 0; p < len; p++) {
        out[p] = (int32_t)x;
        x = (7 * x + 3) % vocab;
    }
}

static int64_t local_pos(const wl_chunks_t *c, int64_t si)
{
    return si < c->clen ? c->c0 * c->clen + si : c->c1 * c->clen + (si - c->clen);
}

static void fill_batch(const wl_model_state_t *ms, int iter, int mbi, int32_t *host)
{
    const wl_cfg_t *c = ms->cfg;
    int64_t seq = c->m.seq;
    int32_t *buf = malloc(sizeof(int32_t) * (size_t)(seq + 1));
    if (!buf) wl_fatal("out of memory");
    for (int64_t bi = 0; bi < ms->b; bi++) {
        int64_t id = (int64_t)iter * c->gbs + (int64_t)ms->ps->dp_rank * wl_sched_microbatches(c) * c->mbs +
                     (int64_t)mbi * c->mbs + bi;
        sample_tokens(id, seq + 1, c->m.vocab, buf);
        for (int64_t si = 0; si < ms->s_local; si++) {
            int64_t p = local_pos(&ms->chunks, si);
            host[si * ms->b + bi] = buf[p];
            host[ms->T + si * ms->b + bi] = buf[p + 1];
        }
    }
    free(buf);
}

/* Only the first and the last virtual stage load data (NVIDIA/Megatron-LM pretrain_gpt.py
 * get_batch: is_first_or_last_pipeline_stage(vp_stage)). */
static void load_batch(wl_sched_t *s, wl_mb_t *mb, int iter)
{
    wl_model_state_t *ms = s->ms;
    if (!wl_chunk_first(ms, mb->chunk) && !wl_chunk_last(ms, mb->chunk)) return;
    size_t bytes = sizeof(int32_t) * 2 * (size_t)ms->T;
    int32_t *dev = wl_alloc(bytes);
    if (ms->ps->tp_rank == 0) {
        fill_batch(ms, iter, mb->index, s->pinned[mb->index]);
        WL_CK(cudaMemcpyAsync(dev, s->pinned[mb->index], bytes, cudaMemcpyHostToDevice, wl_cur_stream()));
    }
    wl_broadcast((wl_group_t *)&ms->ps->tp, dev, 2 * (size_t)ms->T, ncclInt32, 0, 0);
    mb->tokens = dev;
    mb->labels = dev + ms->T;
}

/* ---- pipeline point-to-point (Megatron's p2p_communication) ---- */

static void *p2p(wl_sched_t *s, void *send_prev, int recv_prev, void *send_next, int recv_next)
{
    wl_model_state_t *ms = s->ms;
    wl_group_t *pp = (wl_group_t *)&ms->ps->pp;
    size_t n = (size_t)(ms->Tsp * ms->h);
    void *recv = (recv_prev || recv_next) ? wl_alloc(n * wl_dt_size(ms->dt)) : NULL;
    wl_p2p_t ops[4] = {{0}}; /* at most two are used; sized for every branch */
    int k = 0;
    if (send_prev) ops[k++] = (wl_p2p_t){1, pp->rank - 1, send_prev, n};
    if (recv_prev) ops[k++] = (wl_p2p_t){0, pp->rank - 1, recv, n};
    if (send_next) ops[k++] = (wl_p2p_t){1, pp->rank + 1, send_next, n};
    if (recv_next) ops[k++] = (wl_p2p_t){0, pp->rank + 1, recv, n};
    wl_batch_p2p(pp, ops, k, wl_nccl_dt(ms->dt), 0);
    /* Megatron's _communicate: after batch_isend_irecv and the requests' waits,
     * torch.cuda.synchronize() when batch_p2p_sync (the default), "to protect against race
     * condition when using batch_isend_irecv()" (NVIDIA/Megatron-LM
     * megatron/core/pipeline_parallel/p2p_communication.py, REFERENCE.md). */
    if (k > 0 && pp->size > 1 && ms->cfg->p2p_sync)
        WL_CK(cudaDeviceSynchronize());
    if (send_prev) wl_free(send_prev);
    if (send_next) wl_free(send_next);
    return recv;
}

static void *recv_forward(wl_sched_t *s) { return s->ms->first ? NULL : p2p(s, NULL, 1, NULL, 0); }
static void *recv_backward(wl_sched_t *s) { return s->ms->last ? NULL : p2p(s, NULL, 0, NULL, 1); }

static void send_forward(wl_sched_t *s, wl_mb_t *mb)
{
    if (!s->ms->last) p2p(s, NULL, 0, mb->output, 0);
}

static void send_backward(wl_sched_t *s, void *din)
{
    if (!s->ms->first) p2p(s, din, 0, NULL, 0);
}

static void *send_forward_recv_backward(wl_sched_t *s, wl_mb_t *mb)
{
    return s->ms->last ? NULL : p2p(s, NULL, 0, mb->output, 1);
}

static void *send_backward_recv_forward(wl_sched_t *s, void *din)
{
    return s->ms->first ? NULL : p2p(s, din, 1, NULL, 0);
}

/* ---- steps ---- */

wl_mb_t *wl_sched_mb_new(wl_sched_t *s, int index, int chunk)
{
    wl_mb_t *mb = calloc(1, sizeof *mb);
    if (mb) mb->saved = calloc((size_t)s->ms->nlayers, sizeof *mb->saved);
    if (!mb || !mb->saved) wl_fatal("out of memory");
    mb->index = index;
    mb->chunk = chunk;
    return mb;
}

/* The forward of mb's model chunk (all of the stage without virtual stages). */
void wl_sched_fwd(wl_sched_t *s, wl_mb_t *mb, void *input, int iter)
{
    wl_model_state_t *ms = s->ms;
    int l0 = mb->chunk * ms->lchunk;
    load_batch(s, mb, iter);
    if (wl_chunk_first(ms, mb->chunk)) wl_embed_fwd(ms, mb);
    else mb->input = input;
    void *x = mb->input;
    for (int l = l0; l < l0 + ms->lchunk; l++) {
        x = wl_layer_fwd(ms, &ms->layers[l], &mb->saved[l], x);
        if (l == 0) { /* WL_INJECT: mid-iteration */
            wl_inject_point(WL_INJ_FWD0, mb->index, s->M);
            wl_inject_point(WL_INJ_FWD, mb->index, s->M);
        }
    }
    mb->output = x;
    if (wl_chunk_last(ms, mb->chunk)) wl_head_fwd(ms, mb, s->iter_loss);
}

/* Runs on the backward thread. Returns the gradient to send to the previous stage. */
static void *backward_step(wl_sched_t *s, wl_mb_t *mb, void *dout)
{
    wl_model_state_t *ms = s->ms;
    void *d = dout;
    int l0 = mb->chunk * ms->lchunk;
    if (wl_chunk_last(ms, mb->chunk)) {
        d = wl_head_bwd(ms, mb, (float)ms->cfg->cp / (float)s->M);
        wl_param_t *const hp[] = {ms->lnf_w, ms->lnf_b, ms->out_w};
        wl_opt_ready(s->opt, hp, 3);
    }
    for (int l = l0 + ms->lchunk - 1; l >= l0; l--) {
        d = wl_layer_bwd(ms, &ms->layers[l], &mb->saved[l], d);
        if (l == l0 + ms->lchunk - 1) wl_inject_point(WL_INJ_BWD, mb->index, s->M); /* WL_INJECT */
        wl_opt_ready_layer(s->opt, &ms->layers[l]);
    }
    if (wl_chunk_first(ms, mb->chunk)) {
        wl_embed_bwd(ms, mb, d);
        wl_param_t *const ep[] = {ms->wte, ms->wpe};
        wl_opt_ready(s->opt, ep, 2);
        d = NULL;
    }
    if (mb->tokens) wl_free(mb->tokens);
    return d;
}

static void *bwd_main(void *arg)
{
    wl_sched_t *s = arg;
    bwd_thread_t *t = &s->bt;
    WL_CK(cudaSetDevice(0)); /* the autograd device thread binds its device */
    pthread_mutex_lock(&t->lock);
    for (;;) {
        while (!t->job && !t->stop) pthread_cond_wait(&t->cv, &t->lock);
        if (t->stop) break;
        wl_mb_t *mb = t->mb;
        void *dout = t->dout;
        pthread_mutex_unlock(&t->lock);
        void *r = backward_step(s, mb, dout);
        pthread_mutex_lock(&t->lock);
        t->result = r;
        t->job = 0;
        t->done = 1;
        pthread_cond_broadcast(&t->cv);
    }
    pthread_mutex_unlock(&t->lock);
    wl_blas_thread_fini();
    return NULL;
}

/* The main thread hands the backward of mb to the backward thread and blocks until done.
 * The last micro-batch's backward of a model chunk reduces its gradients (Megatron enables
 * the chunk's grad sync there: is_last_microbatch_for_model_chunk). */
void *wl_sched_bwd(wl_sched_t *s, wl_mb_t *mb, void *dout)
{
    bwd_thread_t *t = &s->bt;
    wl_opt_arm(s->opt, mb->index == s->M - 1);
    pthread_mutex_lock(&t->lock);
    t->mb = mb;
    t->dout = dout;
    t->done = 0;
    t->job = 1;
    pthread_cond_broadcast(&t->cv);
    while (!t->done) pthread_cond_wait(&t->cv, &t->lock);
    void *r = t->result;
    pthread_mutex_unlock(&t->lock);
    free(mb->saved);
    free(mb);
    return r;
}

/* ---- 1F1B ---- */

void wl_sched_run(wl_sched_t *s, int iter, float *iter_loss)
{
    wl_model_state_t *ms = s->ms;
    const wl_cfg_t *c = ms->cfg;
    if (ms->vpp > 1) {
        wl_sched_run_vpp(s, iter, iter_loss);
        return;
    }
    int M = s->M, warm = c->pp - ms->ps->pp_rank - 1;
    if (warm > M) warm = M;
    int rest = M - warm, next_f = 0, next_b = 0;
    wl_mb_t *mbs[M];
    s->iter_loss = iter_loss;
    for (int i = 0; i < warm; i++) {
        wl_mb_t *mb = mbs[next_f] = wl_sched_mb_new(s, next_f, 0);
        next_f++;
        wl_sched_fwd(s, mb, recv_forward(s), iter);
        send_forward(s, mb);
    }
    void *input = rest > 0 ? recv_forward(s) : NULL;
    for (int i = 0; i < rest; i++) {
        wl_mb_t *mb = mbs[next_f] = wl_sched_mb_new(s, next_f, 0);
        next_f++;
        wl_sched_fwd(s, mb, input, iter);
        void *dout = send_forward_recv_backward(s, mb);
        void *din = wl_sched_bwd(s, mbs[next_b++], dout);
        if (i == rest - 1) {
            send_backward(s, din);
            input = NULL;
        } else {
            input = send_backward_recv_forward(s, din);
        }
    }
    for (int i = 0; i < warm; i++) {
        void *dout = recv_backward(s);
        send_backward(s, wl_sched_bwd(s, mbs[next_b++], dout));
    }
}

/* ---- lifetime ---- */

wl_sched_t *wl_sched_create(wl_model_state_t *ms, wl_opt_t *opt)
{
    wl_sched_t *s = calloc(1, sizeof *s);
    if (!s) wl_fatal("out of memory");
    s->ms = ms;
    s->opt = opt;
    s->M = wl_sched_microbatches(ms->cfg);
    s->pinned = calloc((size_t)s->M, sizeof *s->pinned);
    if (!s->pinned) wl_fatal("out of memory");
    for (int i = 0; i < s->M; i++)
        WL_CK(cudaMallocHost((void **)&s->pinned[i], sizeof(int32_t) * 2 * (size_t)ms->T));
    pthread_mutex_init(&s->bt.lock, NULL);
    pthread_cond_init(&s->bt.cv, NULL);
    if (pthread_create(&s->bt.thread, NULL, bwd_main, s) != 0) wl_fatal("cannot start the backward thread");
    return s;
}

void wl_sched_destroy(wl_sched_t *s)
{
    pthread_mutex_lock(&s->bt.lock);
    s->bt.stop = 1;
    pthread_cond_broadcast(&s->bt.cv);
    pthread_mutex_unlock(&s->bt.lock);
    pthread_join(s->bt.thread, NULL);
    wl_sched_vpp_destroy(s);
    for (int i = 0; i < s->M; i++) WL_CK(cudaFreeHost(s->pinned[i]));
    free(s->pinned);
    free(s);
}
