/* exchange.c: the member exchange (see exchange.h and registry.h). */
#define _GNU_SOURCE
#include "exchange.h"

#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "common/log.h"
#include "nccl_real.h"
#include "real.h"
#include "registry.h"
#include "scheduler.h"

typedef struct dh__xstate {
    cudaStream_t s;
    int32_t *dev;      /* [0] this rank's input, [1..nranks] the answers */
    int32_t *host;     /* the same on the host */
    int me;            /* this process's rank in the communicator */
    int issued;
} dh__xstate_t;

static double dh__now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Waits for s's work, polling, until deadline. */
static cudaError_t dh__wait(const dh_real_t *r, cudaStream_t s, double deadline)
{
    long us = 50;
    for (;;) {
        cudaError_t e = r->cudaStreamQuery(s);
        if (e != cudaErrorNotReady || dh__now() > deadline)
            return e;
        struct timespec ts = {0, us * 1000};
        nanosleep(&ts, NULL);
        us = us < 20000 ? us * 2 : us;
    }
}

static int dh__valid(const int32_t *got, int n, int me, int grank, int world)
{
    if (me < 0 || me >= n || got[me] != grank)
        return 0;
    for (int i = 0; i < n; i++) {
        if (got[i] < 0 || (world > 0 && got[i] >= world))
            return 0;
        for (int j = i + 1; j < n; j++)
            if (got[i] == got[j])
                return 0;
    }
    return 1;
}

/* Prepares x's private stream and buffers and puts grank in place; 0 on success. */
static int dh__prepare(const dh_real_t *r, const dh_nccl_xchg_t *x, dh__xstate_t *st, int grank)
{
    __typeof__(&ncclCommUserRank) user = DH_NCCL_REAL(ncclCommUserRank);
    size_t bytes = sizeof(int32_t) * ((size_t)x->nranks + 1);
    if (user == NULL || user(x->comm, &st->me) != ncclSuccess ||
        (st->host = calloc((size_t)x->nranks + 1, sizeof(int32_t))) == NULL ||
        r->cudaSetDevice(x->device) != cudaSuccess ||
        r->cudaStreamCreateWithFlags(&st->s, cudaStreamNonBlocking) != cudaSuccess ||
        r->cudaMallocAsync((void **)&st->dev, bytes, st->s) != cudaSuccess)
        return -1;
    st->host[0] = grank;
    return r->cudaMemcpyAsync(st->dev, st->host, sizeof(int32_t), cudaMemcpyHostToDevice,
                              st->s) == cudaSuccess ? 0 : -1;
}

static void dh__finish(const dh_real_t *r, dh_nccl_xchg_t *x, dh__xstate_t *st, int grank,
                       double deadline)
{
    if (st->issued && dh__wait(r, st->s, deadline) != cudaSuccess) {
        DH_WARN(NCCL, "the member exchange on communicator %p did not complete in %d s (a "
                "member without the shim, or with another DHELIX_LAYOUT?); going on without "
                "its members' ranks", (void *)x->comm, DH_NCCL_EXCHANGE_S);
    } else if (st->issued && r->cudaSetDevice(x->device) == cudaSuccess &&
               r->cudaMemcpyAsync(st->host + 1, st->dev + 1, sizeof(int32_t) * (size_t)x->nranks,
                                  cudaMemcpyDeviceToHost, st->s) == cudaSuccess &&
               r->cudaStreamSynchronize(st->s) == cudaSuccess) {
        x->ok = dh__valid(st->host + 1, x->nranks, st->me, grank, dh_nccl_world_size());
        for (int i = 0; x->ok && i < x->nranks; i++)
            x->members[i] = st->host[1 + i];
        if (!x->ok)
            DH_DEBUG(NCCL, "member exchange on %p: the answers are not %d distinct ranks",
                     (void *)x->comm, x->nranks);
    }
    r->cudaSetDevice(x->device);
    if (st->dev != NULL) /* stream-ordered: released after the gather, even a late one */
        r->cudaFreeAsync(st->dev, st->s);
    if (st->s != NULL)
        r->cudaStreamDestroy(st->s);
    free(st->host); /* a gather still waiting writes device memory only */
}

void dh_nccl_exchange(dh_nccl_xchg_t *x, int n, int grank, int timeout_s)
{
    const dh_real_t *r = dh_real();
    __typeof__(&ncclAllGather) gather = DH_NCCL_REAL(ncclAllGather);
    __typeof__(&ncclGroupStart) start = DH_NCCL_REAL(ncclGroupStart);
    __typeof__(&ncclGroupEnd) end = DH_NCCL_REAL(ncclGroupEnd);
    int saved = -1;
    for (int i = 0; i < n; i++)
        x[i].ok = 0;
    if (n < 1 || gather == NULL || start == NULL || end == NULL ||
        r->cudaPeekAtLastError == NULL || r->cudaPeekAtLastError() != cudaSuccess ||
        r->cudaGetDevice(&saved) != cudaSuccess)
        return; /* a pending runtime error is the framework's to read: leave it */
    dh__xstate_t *st = calloc((size_t)n, sizeof *st);
    if (st == NULL)
        return;
    if (dh_sched_deferring())
        dh_sched_drain(DH_DRAIN_UNCAPTURABLE);
    double t0 = dh__now();
    int ready = 1;
    for (int i = 0; i < n && ready; i++)
        ready = dh__prepare(r, &x[i], &st[i], grank) == 0;
    if (ready) {
        if (n > 1)
            start();
        for (int i = 0; i < n; i++) {
            r->cudaSetDevice(x[i].device);
            st[i].issued =
                gather(st[i].dev, st[i].dev + 1, 1, ncclInt32, x[i].comm, st[i].s) == ncclSuccess;
        }
        if (n > 1 && end() != ncclSuccess)
            for (int i = 0; i < n; i++)
                st[i].issued = 0;
    }
    double deadline = t0 + timeout_s;
    for (int i = 0; i < n; i++)
        dh__finish(r, &x[i], &st[i], grank, deadline);
    DH_DEBUG(NCCL, "member exchange over %d communicator(s): %.1f ms", n, (dh__now() - t0) * 1e3);
    free(st);
    r->cudaSetDevice(saved);
    r->cudaGetLastError(); /* what the shim's own calls left behind */
}
