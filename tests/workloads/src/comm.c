/*
 * comm.c: communicators, the event protocol of ProcessGroupNCCL and its watchdog (see
 * comm.h).
 *
 * Works are pooled. A work has two owners: the issuing side (until wl_wait, or at once for
 * a synchronous call) and the watchdog (until cudaEventQuery reports the end event done);
 * the last one returns it to the pool. Lock order: wd.lock, then pool.lock.
 */
#include "comm.h"

#include <pthread.h>
#include <string.h>
#include <time.h>

#include "emucomm.h"
#include "kernels.h"

struct wl_work {
    cudaEvent_t start, end;
    cudaStream_t stream; /* where the collective ran */
    int refs;            /* guarded by pool.lock */
    struct wl_work *next; /* free list (pool.lock) or watchdog list (wd.lock) */
};

static struct {
    pthread_mutex_t lock;
    wl_work_t *free; /* guarded by lock */
} pool = {PTHREAD_MUTEX_INITIALIZER, NULL};

static struct {
    pthread_mutex_t lock;
    pthread_t thread;
    wl_work_t *head;    /* works whose end the watchdog has not seen yet; guarded by lock */
    int stop;           /* guarded by lock */
    int running;
} wd = {PTHREAD_MUTEX_INITIALIZER, 0, NULL, 0, 0};

static int use_current; /* written once by wl_comm_init */

static wl_work_t *work_get(void)
{
    pthread_mutex_lock(&pool.lock);
    wl_work_t *w = pool.free;
    if (w) pool.free = w->next;
    pthread_mutex_unlock(&pool.lock);
    if (!w) {
        w = calloc(1, sizeof *w);
        if (!w) wl_fatal("out of memory");
        WL_CK(cudaEventCreateWithFlags(&w->start, cudaEventDisableTiming));
        WL_CK(cudaEventCreateWithFlags(&w->end, cudaEventDisableTiming));
    }
    w->refs = 2;
    w->next = NULL;
    return w;
}

static void work_put(wl_work_t *w)
{
    pthread_mutex_lock(&pool.lock);
    if (--w->refs == 0) {
        w->next = pool.free;
        pool.free = w;
    }
    pthread_mutex_unlock(&pool.lock);
}

/* ---- watchdog ---- */

static int watchdog_poll(void)
{
    pthread_mutex_lock(&wd.lock);
    wl_work_t **pp = &wd.head;
    while (*pp) {
        wl_work_t *w = *pp;
        cudaError_t e = cudaEventQuery(w->end);
        if (e == cudaErrorNotReady) {
            pp = &w->next;
            continue;
        }
        if (e != cudaSuccess) wl_die(__FILE__, __LINE__, "watchdog: cudaEventQuery", e);
        *pp = w->next;
        work_put(w);
    }
    int stop = wd.stop && !wd.head;
    pthread_mutex_unlock(&wd.lock);
    return stop;
}

static void *watchdog_main(void *arg)
{
    (void)arg;
    const struct timespec nap = {0, 1000 * 1000};
    while (!watchdog_poll()) nanosleep(&nap, NULL);
    return NULL;
}

static void watch(wl_work_t *w)
{
    pthread_mutex_lock(&wd.lock);
    w->next = wd.head;
    wd.head = w;
    pthread_mutex_unlock(&wd.lock);
}

void wl_comm_init(int current_stream)
{
    use_current = current_stream;
    if (pthread_create(&wd.thread, NULL, watchdog_main, NULL) != 0) wl_fatal("cannot start the watchdog");
    wd.running = 1;
}

void wl_comm_fini(wl_group_t *const *groups, int n)
{
    WL_CK(cudaDeviceSynchronize());
    if (wd.running) {
        pthread_mutex_lock(&wd.lock);
        wd.stop = 1;
        pthread_mutex_unlock(&wd.lock);
        pthread_join(wd.thread, NULL);
        wd.running = 0;
    }
    wl_emu_fini();
    for (int i = 0; i < n; i++)
        if (groups[i] && groups[i]->comm) {
            WL_CK(ncclCommDestroy(groups[i]->comm));
            groups[i]->comm = NULL;
        }
}

/* ---- communicators ---- */

static void config(ncclConfig_t *c, const char *name)
{
    ncclConfig_t init = NCCL_CONFIG_INITIALIZER;
    *c = init;
    c->commName = name;
}

ncclComm_t wl_world_comm(MPI_Comm world, int rank, int size)
{
    ncclUniqueId id;
    if (rank == 0) WL_CK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, world);
    ncclConfig_t c;
    config(&c, "default_pg");
    ncclComm_t comm;
    WL_CK(ncclCommInitRankConfig(&comm, size, id, rank, &c));
    return comm;
}

static void connect_represented(wl_group_t *g)
{
    wl_represent_fn rep = wl_vgpu_represent();
    if (!rep) wl_fatal("group %s spans ranks this job does not run: needs the vgpu's "
                       "representative mode", g->desc);
    ncclUniqueId id;
    WL_CK(ncclGetUniqueId(&id));
    int stride = g->size > 1 ? g->granks[1] - g->granks[0] : 1;
    if (rep(&id, g->granks[0], stride) != 0) wl_fatal("vgpu_nccl_represent failed for %s", g->desc);
    ncclConfig_t c;
    config(&c, g->desc);
    WL_CK(ncclCommInitRankConfig(&g->comm, g->size, id, g->rank, &c));
}

void wl_group_connect(wl_group_t *g, ncclComm_t world)
{
    ncclConfig_t c;
    config(&c, g->desc);
    if (world) { /* every rank of the world calls the split for every kind of group */
        WL_CK(ncclCommSplit(world, g->split_color, g->rank, &g->comm, &c));
    } else if (wl_emu_group(g)) {
        wl_emu_connect(g);
    } else if (g->size > 1 && !g->real) {
        connect_represented(g);
    } else if (g->size > 1) {
        ncclUniqueId id;
        if (g->rank == 0) WL_CK(ncclGetUniqueId(&id));
        MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, g->mpi);
        WL_CK(ncclCommInitRankConfig(&g->comm, g->size, id, g->rank, &c));
    }
    if (g->size > 1 && !g->stream) WL_CK(cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking));
}

/* ---- the event protocol ---- */

static cudaStream_t begin(wl_group_t *g, wl_work_t *w)
{
    cudaStream_t cur = wl_cur_stream();
    if (use_current) return cur;
    WL_CK(cudaEventRecord(w->start, cur));
    WL_CK(cudaStreamWaitEvent(g->stream, w->start, 0));
    return g->stream;
}

static wl_work_t *finish(wl_work_t *w, cudaStream_t s, int async)
{
    w->stream = s;
    WL_CK(cudaEventRecord(w->end, s));
    watch(w);
    if (async) return w;
    wl_wait(w);
    return NULL;
}

void wl_wait(wl_work_t *w)
{
    if (!w) return;
    cudaStream_t cur = wl_cur_stream();
    if (w->stream != cur) WL_CK(cudaStreamWaitEvent(cur, w->end, 0));
    work_put(w);
}

wl_work_t *wl_allreduce(wl_group_t *g, void *buf, size_t n, ncclDataType_t t, ncclRedOp_t op, int async)
{
    if (g->size == 1 || n == 0) return NULL;
    wl_work_t *w = work_get();
    cudaStream_t s = begin(g, w);
    if (wl_emu_group(g)) wl_emu_collective(g, WL_EMU_ALLREDUCE, buf, buf, n, t, op, s);
    else WL_CK(ncclAllReduce(buf, buf, n, t, op, g->comm, s));
    return finish(w, s, async);
}

wl_work_t *wl_allgather(wl_group_t *g, const void *in, void *out, size_t n, ncclDataType_t t, int async)
{
    if (g->size == 1 || n == 0) return NULL;
    wl_work_t *w = work_get();
    cudaStream_t s = begin(g, w);
    if (wl_emu_group(g)) wl_emu_collective(g, WL_EMU_ALLGATHER, in, out, n, t, ncclSum, s);
    else WL_CK(ncclAllGather(in, out, n, t, g->comm, s));
    return finish(w, s, async);
}

wl_work_t *wl_reduce_scatter(wl_group_t *g, const void *in, void *out, size_t n, ncclDataType_t t,
                             int async)
{
    if (g->size == 1 || n == 0) return NULL;
    wl_work_t *w = work_get();
    cudaStream_t s = begin(g, w);
    if (wl_emu_group(g)) wl_emu_collective(g, WL_EMU_REDUCE_SCATTER, in, out, n, t, ncclSum, s);
    else WL_CK(ncclReduceScatter(in, out, n, t, ncclSum, g->comm, s));
    return finish(w, s, async);
}

wl_work_t *wl_broadcast(wl_group_t *g, void *buf, size_t n, ncclDataType_t t, int root, int async)
{
    if (g->size == 1 || n == 0) return NULL;
    wl_work_t *w = work_get();
    cudaStream_t s = begin(g, w);
    if (wl_emu_group(g)) wl_emu_collective(g, WL_EMU_BROADCAST, buf, buf, n, t, ncclSum, s);
    else WL_CK(ncclBroadcast(buf, buf, n, t, root, g->comm, s));
    return finish(w, s, async);
}

wl_work_t *wl_batch_p2p(wl_group_t *g, const wl_p2p_t *ops, int nops, ncclDataType_t t, int async)
{
    if (g->size == 1 || nops == 0) return NULL;
    wl_work_t *w = work_get();
    cudaStream_t s = begin(g, w);
    if (wl_emu_group(g)) {
        wl_emu_p2p(g, ops, nops, t, s);
        return finish(w, s, async);
    }
    WL_CK(ncclGroupStart());
    for (int i = 0; i < nops; i++) {
        if (ops[i].send) WL_CK(ncclSend(ops[i].buf, ops[i].n, t, ops[i].peer, g->comm, s));
        else WL_CK(ncclRecv(ops[i].buf, ops[i].n, t, ops[i].peer, g->comm, s));
    }
    WL_CK(ncclGroupEnd());
    return finish(w, s, async);
}
