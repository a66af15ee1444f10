/*
 * schedule_vpp.c: Megatron's interleaved 1F1B over virtual pipeline stages (--vpp V), as
 * NVIDIA/Megatron-LM megatron/core/pipeline_parallel/schedules.py
 * forward_backward_pipelining_with_interleaving and p2p_communication.py issue it (read at
 * the 2026-08 main; overlap_p2p_comm_warmup_flush, recomputation and the MoE combined
 * 1F1B are not modelled: their defaults are off).
 *
 * Each rank holds V model chunks; chunk c runs virtual stage c x pp + rank (model.h). The
 * iteration is a sequence of M x V "virtual micro-batches" k: the forward of virtual
 * micro-batch k runs chunk model_chunk(k) on micro-batch microbatch(k), taken from
 * Megatron's schedule table with microbatch_group_size_per_vp_stage = pp (its default):
 * groups of pp micro-batches, chunk 0 of the group, then chunk 1, .... Backward k runs the
 * chunk V - 1 - model_chunk(k) on its oldest outstanding micro-batch. Warm-up: (pp - rank
 * - 1) x 2 + (V - 1) x pp forwards; then one forward and one backward per step; then the
 * remaining backwards.
 *
 * Point-to-point, two forms, as Megatron's _communicate picks them:
 * - overlap_p2p_comm (the default): batch_p2p_comm is off, every isend/irecv is its own
 *   torch.distributed call (_p2p_ops, even pipeline ranks sending first, odd ones
 *   receiving first). ProcessGroupNCCL runs each on a two-rank communicator it creates
 *   lazily for the peer pair, with its own NCCL stream, in its own ncclGroupStart/End;
 *   with a two-rank pipeline group _p2p_ops sends one direction over the world group,
 *   i.e. a second pair communicator. In the steady state the receive for the next forward
 *   is posted right after the forward and waited (a stream wait on its end event) just
 *   before that forward; the gradient receive likewise around the backward: nothing blocks
 *   the host.
 * - --no-overlap-p2p-communication: batch_p2p_comm, one batch_isend_irecv for the forward
 *   and backward transfers of a step on the pipeline group's communicator, its waits and
 *   torch.cuda.synchronize() (batch_p2p_sync, default True).
 * Megatron's deallocate_pipeline_outputs (on in training): a sent output is freed once its
 * isend is done (the overlapped form waits for the send first).
 */
#include <mpi.h>
#include <string.h>

#include "schedule_int.h"

enum { PG_PP = 0, PG_WORLD = 1 };

/* A lazily created two-rank communicator of process group pg with one peer. */
typedef struct pair {
    wl_group_t g;
    int granks[2];
    int made;
} pair_t;

/* Per-chunk FIFO of tensors (inputs, gradients) or micro-batches. */
typedef struct fifo {
    void **v;
    int head, tail;
} fifo_t;

typedef struct wl_vpp {
    int V, P, r, M, total;
    int *mb_of, *chunk_of; /* schedule table, [total] */
    fifo_t *in, *grad, *mbs; /* [V] each */
    pair_t pair[2][2];       /* [pg][0: previous rank, 1: next rank] */
    /* outstanding works of the overlapped form (Megatron's wait handles) */
    wl_work_t *recv_prev[4], *recv_next[4];
    int nrp, nrn;
    wl_work_t *send_next, *send_prev;
    void *send_prev_buf;     /* the gradient that send_prev sends (freed after its wait) */
} wl_vpp_t;

static void push(fifo_t *f, void *x) { f->v[f->tail++] = x; }
static void *pop(fifo_t *f)
{
    if (f->head == f->tail) wl_fatal("interleaved schedule: pop from an empty queue");
    return f->v[f->head++];
}

/* ---- the schedule table (schedules.py get_schedule_table, get_pp_rank_microbatches) ---- */

static void table(wl_vpp_t *v)
{
    int n = 0, N = v->P;
    for (int g0 = 0; g0 < v->M; g0 += N) {
        int g1 = g0 + N >= v->M ? v->M : g0 + N;
        for (int c = 0; c < v->V; c++)
            for (int m = g0; m < g1; m++) {
                v->mb_of[n] = m;
                v->chunk_of[n++] = c;
            }
    }
}

static int chunk_id(const wl_vpp_t *v, int k, int forward)
{
    int c = v->chunk_of[k % v->total];
    return forward ? c : v->V - 1 - c;
}

/* recv_tensor_from_previous_stage: whether this rank receives a tensor for virtual
 * micro-batch k + 1, and for which chunk. The leading stage (the first rank forward, the
 * last backward) runs pp - 1 virtual micro-batches ahead of the ending one. */
static int recv_from_prev(const wl_vpp_t *v, int k, int forward, int *next_chunk)
{
    int leading = forward ? v->r == 0 : v->r == v->P - 1;
    int last_chunk = forward ? v->V - 1 : 0, recv = 1, c;
    if (leading) {
        if (k < v->P - 1) {
            recv = 0;
            c = chunk_id(v, k + 1, forward);
        } else {
            c = chunk_id(v, k - (v->P - 1), forward);
        }
        if (c == last_chunk) recv = 0;
        c += forward ? 1 : -1;
    } else {
        c = chunk_id(v, k + 1, forward);
    }
    *next_chunk = c;
    return recv;
}

/* ---- point-to-point ---- */

static size_t act_elems(const wl_sched_t *s) { return (size_t)(s->ms->Tsp * s->ms->h); }

/* Pipeline neighbours wrap around (p2p_communication.py: prev_rank, next_rank modulo the
 * group size): chunk c + 1 of the first rank takes its input from chunk c of the last. */
static int peer_of(const wl_vpp_t *v, int dir) { return (v->r + (dir ? 1 : v->P - 1)) % v->P; }

/* The pair communicator of pg with the previous (dir 0) or next (dir 1) pipeline rank (one
 * and the same peer, and communicator, when pp = 2: ProcessGroupNCCL keys it by the pair);
 * made on first use like ProcessGroupNCCL's getNCCLComm for a send/recv key: the lower
 * rank makes the unique id and hands it over (the store; here MPI on the pipeline
 * group's processes). */
static pair_t *pair(wl_sched_t *s, int pg, int dir)
{
    wl_vpp_t *v = s->vpp;
    pair_t *p = &v->pair[pg][v->P == 2 ? 0 : dir];
    if (p->made) return p;
    const wl_group_t *pp = &s->ms->ps->pp;
    int peer = peer_of(v, dir), me_low = pp->rank < peer;
    p->granks[0] = pp->granks[me_low ? pp->rank : peer];
    p->granks[1] = pp->granks[me_low ? peer : pp->rank];
    p->g = (wl_group_t){.desc = pg == PG_PP ? "PIPELINE_MODEL_PARALLEL_GROUP" : "default_pg",
                        .size = 2, .rank = !me_low, .granks = p->granks, .real = 1,
                        .mpi = MPI_COMM_NULL};
    ncclUniqueId id;
    if (me_low) {
        WL_CK(ncclGetUniqueId(&id));
        MPI_Send(&id, sizeof id, MPI_BYTE, peer, 0x7070 + pg, pp->mpi);
    } else {
        MPI_Recv(&id, sizeof id, MPI_BYTE, peer, 0x7070 + pg, pp->mpi, MPI_STATUS_IGNORE);
    }
    ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
    c.commName = p->g.desc;
    WL_CK(ncclCommInitRankConfig(&p->g.comm, 2, id, p->g.rank, &c));
    WL_CK(cudaStreamCreateWithFlags(&p->g.stream, cudaStreamNonBlocking));
    p->made = 1;
    return p;
}

/* One isend or irecv with the previous (dir 0) or next (dir 1) rank: its own group on the
 * pair communicator, asynchronous (the caller waits on the work). _p2p_ops: with a
 * two-rank pipeline group, even ranks send and odd ranks receive on the group, the other
 * direction goes over the world group. */
static wl_work_t *p2p_one(wl_sched_t *s, int send, int dir, void *buf)
{
    wl_vpp_t *v = s->vpp;
    int pg = PG_PP;
    if (v->P == 2 && (v->r % 2 == 0) != (send != 0)) pg = PG_WORLD;
    pair_t *p = pair(s, pg, dir);
    wl_p2p_t op = {send, !p->g.rank, buf, act_elems(s)};
    return wl_batch_p2p(&p->g, &op, 1, wl_nccl_dt(s->ms->dt), 1);
}

/* Megatron's _communicate with _p2p_ops: the sends and receives in its order (even ranks:
 * send next, recv prev, send prev, recv next; odd ranks: recv prev, send next, recv next,
 * send prev). Fills the works of what it issued; receive buffers are allocated first. */
typedef struct xfer {
    void *send_prev, *send_next;     /* in */
    int recv_prev, recv_next;        /* in */
    void *rbuf_prev, *rbuf_next;     /* out */
    wl_work_t *w_sp, *w_rp, *w_sn, *w_rn;
} xfer_t;

static void unbatched(wl_sched_t *s, xfer_t *x)
{
    size_t bytes = act_elems(s) * wl_dt_size(s->ms->dt);
    if (x->recv_prev) x->rbuf_prev = wl_alloc(bytes);
    if (x->recv_next) x->rbuf_next = wl_alloc(bytes);
    if (s->vpp->r % 2 == 0) {
        if (x->send_next) x->w_sn = p2p_one(s, 1, 1, x->send_next);
        if (x->recv_prev) x->w_rp = p2p_one(s, 0, 0, x->rbuf_prev);
        if (x->send_prev) x->w_sp = p2p_one(s, 1, 0, x->send_prev);
        if (x->recv_next) x->w_rn = p2p_one(s, 0, 1, x->rbuf_next);
    } else {
        if (x->recv_prev) x->w_rp = p2p_one(s, 0, 0, x->rbuf_prev);
        if (x->send_next) x->w_sn = p2p_one(s, 1, 1, x->send_next);
        if (x->recv_next) x->w_rn = p2p_one(s, 0, 1, x->rbuf_next);
        if (x->send_prev) x->w_sp = p2p_one(s, 1, 0, x->send_prev);
    }
}

/* _communicate with wait_on_reqs: every request waited (stream waits), then with
 * batch_p2p_comm one batch_isend_irecv (_batched_p2p_ops: send prev, recv prev, send
 * next, recv next) and torch.cuda.synchronize(). Sent tensors are freed after the waits. */
static void exchange(wl_sched_t *s, xfer_t *x)
{
    if (!x->send_prev && !x->send_next && !x->recv_prev && !x->recv_next) return;
    if (s->ms->cfg->overlap_p2p) {
        unbatched(s, x);
        wl_work_t *w[] = {x->w_sn, x->w_rp, x->w_sp, x->w_rn};
        for (int i = 0; i < 4; i++) wl_wait(w[i]);
    } else {
        wl_model_state_t *ms = s->ms;
        wl_group_t *pp = (wl_group_t *)&ms->ps->pp;
        size_t n = act_elems(s), bytes = n * wl_dt_size(ms->dt);
        wl_p2p_t ops[4];
        int k = 0;
        if (x->recv_prev) x->rbuf_prev = wl_alloc(bytes);
        if (x->recv_next) x->rbuf_next = wl_alloc(bytes);
        int prev = peer_of(s->vpp, 0), next = peer_of(s->vpp, 1);
        if (x->send_prev) ops[k++] = (wl_p2p_t){1, prev, x->send_prev, n};
        if (x->recv_prev) ops[k++] = (wl_p2p_t){0, prev, x->rbuf_prev, n};
        if (x->send_next) ops[k++] = (wl_p2p_t){1, next, x->send_next, n};
        if (x->recv_next) ops[k++] = (wl_p2p_t){0, next, x->rbuf_next, n};
        wl_batch_p2p(pp, ops, k, wl_nccl_dt(ms->dt), 0);
        if (ms->cfg->p2p_sync) WL_CK(cudaDeviceSynchronize()); /* batch_p2p_sync */
    }
    if (x->send_prev) wl_free(x->send_prev);
    if (x->send_next) wl_free(x->send_next); /* deallocate_output_tensor */
}

/* ---- the steps ---- */

static void forward_k(wl_sched_t *s, int k, int iter)
{
    wl_vpp_t *v = s->vpp;
    int c = chunk_id(v, k, 1);
    wl_mb_t *mb = wl_sched_mb_new(s, v->mb_of[k], c);
    void *in = wl_chunk_first(s->ms, c) ? NULL : pop(&v->in[c]);
    wl_sched_fwd(s, mb, in, iter);
    push(&v->mbs[c], mb);
}

/* What forward k sends: its output, handed over (NULL from the last virtual stage, whose
 * output the head's backward still reads and frees). */
static void *take_output(wl_sched_t *s, int k)
{
    wl_vpp_t *v = s->vpp;
    int c = chunk_id(v, k, 1);
    if (wl_chunk_last(s->ms, c)) return NULL;
    wl_mb_t *mb = v->mbs[c].v[v->mbs[c].tail - 1];
    void *out = mb->output;
    mb->output = NULL;
    return out;
}

/* Returns the gradient for the previous stage (NULL on the first virtual stage). */
static void *backward_k(wl_sched_t *s, int k)
{
    wl_vpp_t *v = s->vpp;
    int c = chunk_id(v, k, 0);
    void *dout = wl_chunk_last(s->ms, c) ? NULL : pop(&v->grad[c]);
    wl_mb_t *mb = pop(&v->mbs[c]);
    return wl_sched_bwd(s, mb, dout); /* the layers' backward frees dout */
}

static void wait_pop(wl_work_t **q, int *n)
{
    if (*n == 0) return;
    wl_wait(q[0]);
    memmove(q, q + 1, sizeof *q * (size_t)(*n - 1));
    (*n)--;
}

static void queue(wl_work_t **q, int *n, wl_work_t *w)
{
    if (!w) return;
    if (*n == 4) wl_fatal("interleaved schedule: too many outstanding receives");
    q[(*n)++] = w;
}

/* Overlapped form, after forward k: send its output, post the receive for the next
 * forward (send_forward_recv_forward with overlap_p2p_comm=True), wait for the previous
 * send and, deallocating outputs, for this one, and free the output. */
static void post_forward(wl_sched_t *s, int k, void *out, int no_recv)
{
    wl_vpp_t *v = s->vpp;
    int nc, rp = recv_from_prev(v, k, 1, &nc) && !no_recv;
    xfer_t x = {.send_next = out, .recv_prev = rp};
    unbatched(s, &x);
    wl_wait(v->send_next);
    v->send_next = x.w_sn;
    queue(v->recv_prev, &v->nrp, x.w_rp);
    wl_wait(v->send_next); /* deallocate_pipeline_outputs: the isend first */
    v->send_next = NULL;
    if (out) wl_free(out);
    if (rp) push(&v->in[nc], x.rbuf_prev);
}

/* After backward k: send its input gradient, post the receive of the next backward's
 * output gradient, wait for the previous gradient send (then free what it sent). */
static void post_backward(wl_sched_t *s, int k, void *din)
{
    wl_vpp_t *v = s->vpp;
    int nc, rn = recv_from_prev(v, k, 0, &nc);
    xfer_t x = {.send_prev = din, .recv_next = rn};
    unbatched(s, &x);
    if (v->send_prev) {
        wl_wait(v->send_prev);
        wl_free(v->send_prev_buf);
    }
    v->send_prev = x.w_sp;
    v->send_prev_buf = din;
    queue(v->recv_next, &v->nrn, x.w_rn);
    if (rn) push(&v->grad[nc], x.rbuf_next);
}

void wl_sched_run_vpp(wl_sched_t *s, int iter, float *iter_loss)
{
    wl_model_state_t *ms = s->ms;
    if (!s->vpp) {
        wl_vpp_t *v = s->vpp = calloc(1, sizeof *v);
        if (!v) wl_fatal("out of memory");
        v->V = ms->vpp;
        v->P = ms->cfg->pp;
        v->r = ms->ps->pp_rank;
        v->M = s->M;
        v->total = v->M * v->V;
        v->mb_of = calloc((size_t)v->total, sizeof(int));
        v->chunk_of = calloc((size_t)v->total, sizeof(int));
        v->in = calloc((size_t)v->V, sizeof *v->in);
        v->grad = calloc((size_t)v->V, sizeof *v->grad);
        v->mbs = calloc((size_t)v->V, sizeof *v->mbs);
        if (!v->mb_of || !v->chunk_of || !v->in || !v->grad || !v->mbs) wl_fatal("out of memory");
        for (int c = 0; c < v->V; c++) {
            v->in[c].v = calloc((size_t)v->M, sizeof(void *));
            v->grad[c].v = calloc((size_t)v->M, sizeof(void *));
            v->mbs[c].v = calloc((size_t)v->M, sizeof(void *));
            if (!v->in[c].v || !v->grad[c].v || !v->mbs[c].v) wl_fatal("out of memory");
        }
        table(v);
    }
    wl_vpp_t *v = s->vpp;
    for (int c = 0; c < v->V; c++) v->in[c].head = v->in[c].tail = v->grad[c].head = v->grad[c].tail =
        v->mbs[c].head = v->mbs[c].tail = 0;
    s->iter_loss = iter_loss;
    int overlap = ms->cfg->overlap_p2p, P = v->P, total = v->total;
    int warm = (P - v->r - 1) * 2 + (v->V - 1) * P; /* get_pp_rank_microbatches, N = pp */
    int all_warm = warm >= total;
    if (all_warm) warm = total;
    int rest = total - warm;

    /* recv_forward for the first forward: waited at once (wait_on_reqs). */
    if (!ms->first) { /* recv_forward: nothing on the very first virtual stage */
        xfer_t x = {.recv_prev = 1};
        exchange(s, &x);
        push(&v->in[0], x.rbuf_prev);
    }
    /* Warm-up forwards: send_forward_recv_forward, waited (both forms); the last one, when
     * backwards follow, also posts the first gradient receive. */
    for (int k = 0; k < warm; k++) {
        int nc, rp = recv_from_prev(v, k, 1, &nc);
        if (k == total - 1) rp = 0;
        forward_k(s, k, iter);
        int first_bwd = k == warm - 1 && !all_warm;
        xfer_t x = {.send_next = take_output(s, k), .recv_prev = rp};
        if (first_bwd && !overlap) x.recv_next = v->r != P - 1; /* one batch with it */
        exchange(s, &x);
        if (rp) push(&v->in[nc], x.rbuf_prev);
        if (x.recv_next) push(&v->grad[v->V - 1], x.rbuf_next);
        if (first_bwd && overlap && v->r != P - 1) {
            xfer_t y = {.recv_next = 1};
            unbatched(s, &y); /* send_backward_recv_backward(None, overlap_p2p_comm=True) */
            queue(v->recv_next, &v->nrn, y.w_rn);
            push(&v->grad[v->V - 1], y.rbuf_next);
        }
    }
    /* Steady 1F1B: forward warm + k, backward k. */
    for (int k = 0; k < rest; k++) {
        int fk = k + warm, fc = chunk_id(v, fk, 1), bc = chunk_id(v, k, 0);
        if (overlap) {
            if (!wl_chunk_first(ms, fc)) wait_pop(v->recv_prev, &v->nrp);
            forward_k(s, fk, iter);
            post_forward(s, fk, take_output(s, fk), k == rest - 1);
            if (!wl_chunk_last(ms, bc)) wait_pop(v->recv_next, &v->nrn);
            void *din = backward_k(s, k);
            post_backward(s, k, din);
        } else {
            forward_k(s, fk, iter);
            void *out = take_output(s, fk);
            void *din = backward_k(s, k);
            int ncf, ncb, rp = recv_from_prev(v, fk, 1, &ncf), rn = recv_from_prev(v, k, 0, &ncb);
            if (k == rest - 1) rp = 0;
            xfer_t x = {.send_next = out, .send_prev = din, .recv_prev = rp, .recv_next = rn};
            exchange(s, &x);
            if (rp) push(&v->in[ncf], x.rbuf_prev);
            if (rn) push(&v->grad[ncb], x.rbuf_next);
        }
    }
    /* Cool-down backwards: send_backward_recv_backward, waited (both forms). */
    if (all_warm && !wl_chunk_last(ms, v->V - 1)) {
        xfer_t x = {.recv_next = 1};
        exchange(s, &x);
        push(&v->grad[v->V - 1], x.rbuf_next);
    }
    for (int k = rest; k < total; k++) {
        int c = chunk_id(v, k, 0);
        if (!wl_chunk_last(ms, c) && k != 0) wait_pop(v->recv_next, &v->nrn);
        int nc, rn = recv_from_prev(v, k, 0, &nc);
        if (k == total - 1) rn = 0;
        void *din = backward_k(s, k);
        xfer_t x = {.send_prev = din, .recv_next = rn};
        exchange(s, &x);
        if (rn) push(&v->grad[nc], x.rbuf_next);
    }
    if (v->send_prev) {
        wl_wait(v->send_prev);
        wl_free(v->send_prev_buf);
        v->send_prev = NULL;
    }
    if (v->nrp || v->nrn) wl_fatal("interleaved schedule: receives left at the end of the step");
}

void wl_sched_vpp_destroy(wl_sched_t *s)
{
    wl_vpp_t *v = s->vpp;
    if (!v) return;
    WL_CK(cudaDeviceSynchronize());
    for (int pg = 0; pg < 2; pg++)
        for (int d = 0; d < 2; d++)
            if (v->pair[pg][d].made) {
                WL_CK(ncclCommDestroy(v->pair[pg][d].g.comm));
                WL_CK(cudaStreamDestroy(v->pair[pg][d].g.stream));
            }
    for (int c = 0; c < v->V; c++) {
        free(v->in[c].v);
        free(v->grad[c].v);
        free(v->mbs[c].v);
    }
    free(v->in);
    free(v->grad);
    free(v->mbs);
    free(v->mb_of);
    free(v->chunk_of);
    free(v);
    s->vpp = NULL;
}
