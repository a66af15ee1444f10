/*
 * prog_exact.c: the scenarios that must give bit-identical results with and without the
 * shim, in every mode.
 *
 *   exact        every collective and point-to-point call of NCCL, ungrouped and grouped
 *                (nested groups, point-to-point rings and all-to-all, a custom
 *                pre-multiply-sum op, three data types), issued by two threads that take
 *                turns as PyTorch's forward and backward threads do (micro-batch 0 and 1,
 *                two steps each), on a compute stream and a communication stream joined by
 *                events; prints its digest.
 *   pin [api]    two threads, one framework stream (compute and the collectives on the
 *                same stream, as newer PyTorch issues blocking collectives), a
 *                TENSOR_MODEL_PARALLEL_GROUP communicator (ncclCommInitRankConfig with
 *                commName): per phase a long kernel, an all-reduce of 1 MiB, another
 *                kernel. With "api" the program
 *                switches the communicator to pinned through dh_group_set_enabled (found
 *                with dlsym; without the shim there is none) and prints
 *                "set_enabled previous=<p>". Prints its digest.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prog.h"

/* ---- two threads taking turns ---- */

typedef void (*np_phase_fn)(int mb, int step, void *ctx);

typedef struct np_turns {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int turn, phases;
    np_phase_fn fn;
    void *ctx;
} np_turns_t;

typedef struct np_worker {
    np_turns_t *t;
    int id;
} np_worker_t;

static void *np_worker_main(void *arg)
{
    np_worker_t *w = arg;
    np_turns_t *t = w->t;
    for (int p = w->id; p < t->phases; p += 2) {
        pthread_mutex_lock(&t->lock);
        while (t->turn != p)
            pthread_cond_wait(&t->cond, &t->lock);
        pthread_mutex_unlock(&t->lock);
        t->fn(p % 2, p / 2, t->ctx);
        pthread_mutex_lock(&t->lock);
        t->turn++;
        pthread_cond_broadcast(&t->cond);
        pthread_mutex_unlock(&t->lock);
    }
    return NULL;
}

/* Phase p runs on thread p % 2 as micro-batch p % 2, step p / 2, one phase at a time. */
static void np_alternate(int phases, np_phase_fn fn, void *ctx)
{
    np_turns_t t = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, phases, fn, ctx};
    pthread_t th[2];
    np_worker_t w[2] = {{&t, 0}, {&t, 1}};
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, np_worker_main, &w[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
}

/* ---- exact ---- */

#define N 256 /* elements per rank's chunk */

enum { B_X, B_AR, B_AG, B_RS, B_BR, B_BC, B_RD, B_A2A, B_GA, B_SC, B_P2P, B_AR2, B_AG2, B_P2P2,
       B_AR3, B_RS2, B_A2A2, B_AR4, B_ACC, B_COUNT };

typedef struct mb {
    float *b[B_COUNT];          /* each N * P floats */
    int32_t *xi, *ari;          /* int32 product */
    uint16_t *xb, *arb;         /* bf16 minimum */
    cudaEvent_t to_comm, to_compute;
} mb_t;

typedef struct exact {
    ncclComm_t comm;
    cudaStream_t compute, comm_s;
    ncclRedOp_t premul;
    mb_t mb[2];
} exact_t;

static void handoff(cudaStream_t from, cudaStream_t to, cudaEvent_t e)
{
    NP_RT(cudaEventRecord(e, from));
    NP_RT(cudaStreamWaitEvent(to, e, 0));
}

/* Every collective and an ungrouped point-to-point ring (even ranks send first). */
static void step_ungrouped(exact_t *x, mb_t *m)
{
    int P = np.size, r = np.rank;
    ncclComm_t c = x->comm;
    cudaStream_t s = x->comm_s;
    float **b = m->b;
    NP_NCCL(ncclAllReduce(b[B_X], b[B_AR], N, ncclFloat32, ncclSum, c, s));
    NP_NCCL(ncclAllGather(b[B_X], b[B_AG], N, ncclFloat32, c, s));
    NP_NCCL(ncclReduceScatter(b[B_X], b[B_RS], N, ncclFloat32, ncclAvg, c, s));
    NP_NCCL(ncclBroadcast(b[B_X], b[B_BR], N, ncclFloat32, 1 % P, c, s));
    NP_NCCL(ncclBcast(b[B_BC], N, ncclFloat32, 0, c, s));
    NP_NCCL(ncclReduce(b[B_X], b[B_RD], N, ncclFloat32, ncclMax, P - 1, c, s));
    NP_NCCL(ncclAlltoAll(b[B_X], b[B_A2A], N, ncclFloat32, c, s));
    NP_NCCL(ncclGather(b[B_X], b[B_GA], N, ncclFloat32, 0, c, s));
    NP_NCCL(ncclScatter(b[B_X], b[B_SC], N, ncclFloat32, 1 % P, c, s));
    if (P > 1 && r % 2 == 0) {
        NP_NCCL(ncclSend(b[B_X], N, ncclFloat32, (r + 1) % P, c, s));
        NP_NCCL(ncclRecv(b[B_P2P], N, ncclFloat32, (r + P - 1) % P, c, s));
    } else if (P > 1) {
        NP_NCCL(ncclRecv(b[B_P2P], N, ncclFloat32, (r + P - 1) % P, c, s));
        NP_NCCL(ncclSend(b[B_X], N, ncclFloat32, (r + 1) % P, c, s));
    }
}

/* Groups: mixed collectives with a ring, a nested group, a point-to-point all-to-all, then
 * the custom op and the integer and bf16 reductions. */
static void step_grouped(exact_t *x, mb_t *m)
{
    int P = np.size, r = np.rank;
    ncclComm_t c = x->comm;
    cudaStream_t s = x->comm_s;
    float **b = m->b;
    NP_NCCL(ncclGroupStart());
    NP_NCCL(ncclAllReduce(b[B_X], b[B_AR2], N, ncclFloat32, ncclSum, c, s));
    NP_NCCL(ncclAllGather(b[B_X], b[B_AG2], N, ncclFloat32, c, s));
    NP_NCCL(ncclSend(b[B_X], N, ncclFloat32, (r + 1) % P, c, s));
    NP_NCCL(ncclRecv(b[B_P2P2], N, ncclFloat32, (r + P - 1) % P, c, s));
    NP_NCCL(ncclGroupEnd());
    NP_NCCL(ncclGroupStart());
    NP_NCCL(ncclAllReduce(b[B_X], b[B_AR3], N, ncclFloat32, ncclMin, c, s));
    NP_NCCL(ncclGroupStart());
    NP_NCCL(ncclReduceScatter(b[B_X], b[B_RS2], N, ncclFloat32, ncclSum, c, s));
    NP_NCCL(ncclGroupEnd());
    NP_NCCL(ncclGroupEnd());
    NP_NCCL(ncclGroupStart());
    for (int p = 0; p < P; p++) {
        NP_NCCL(ncclSend(b[B_X] + (size_t)p * N, N, ncclFloat32, p, c, s));
        NP_NCCL(ncclRecv(b[B_A2A2] + (size_t)p * N, N, ncclFloat32, p, c, s));
    }
    NP_NCCL(ncclGroupEnd());
    NP_NCCL(ncclAllReduce(b[B_X], b[B_AR4], N, ncclFloat32, x->premul, c, s));
    NP_NCCL(ncclAllReduce(m->xi, m->ari, N, ncclInt32, ncclProd, c, s));
    NP_NCCL(ncclAllReduce(m->xb, m->arb, N, ncclBfloat16, ncclMin, c, s));
}

static void exact_phase(int mbi, int step, void *ctx)
{
    exact_t *x = ctx;
    mb_t *m = &x->mb[mbi];
    float base = (float)(np.rank * 100 + mbi * 10 + step) * 0.25f;
    np_fill(m->b[B_X], N * np.size, base, 0.125f, x->compute);
    np_fill(m->b[B_BC], N, base + 3.0f, -0.5f, x->compute);
    handoff(x->compute, x->comm_s, m->to_comm);
    if (step == 0)
        step_ungrouped(x, m);
    else
        step_grouped(x, m);
    handoff(x->comm_s, x->compute, m->to_compute);
    static const int consume[] = {B_AR, B_RS, B_BR, B_P2P, B_AR2, B_AR3, B_AR4};
    for (size_t i = 0; i < sizeof consume / sizeof consume[0]; i++)
        np_axpy(m->b[B_ACC], m->b[consume[i]], 0.5f + (float)i, N, x->compute);
}

void np_exact(int argc, char **argv)
{
    (void)argc, (void)argv;
    exact_t x;
    memset(&x, 0, sizeof x);
    size_t fb = (size_t)N * np.size * sizeof(float);
    NP_NCCL(ncclCommInitRank(&x.comm, np.size, np_shared_id(MPI_COMM_WORLD), np.rank));
    NP_RT(cudaStreamCreate(&x.compute));
    NP_RT(cudaStreamCreateWithFlags(&x.comm_s, cudaStreamNonBlocking));
    float scalar = 0.5f;
    NP_NCCL(ncclRedOpCreatePreMulSum(&x.premul, &scalar, ncclFloat32, ncclScalarHostImmediate,
                                     x.comm));
    int32_t hi[N];
    uint16_t hb[N];
    for (int k = 0; k < 2; k++) {
        mb_t *m = &x.mb[k];
        for (int i = 0; i < B_COUNT; i++)
            m->b[i] = np_dev(fb);
        m->xi = np_dev(N * sizeof(int32_t));
        m->ari = np_dev(N * sizeof(int32_t));
        m->xb = np_dev(N * sizeof(uint16_t));
        m->arb = np_dev(N * sizeof(uint16_t));
        for (int i = 0; i < N; i++) {
            hi[i] = (np.rank + k + i) % 3 + 1;
            float f = (float)(np.rank * 7 - i + k) * 0.375f; /* bf16: the top half of fp32 */
            uint32_t u;
            memcpy(&u, &f, sizeof u);
            hb[i] = (uint16_t)(u >> 16);
        }
        NP_RT(cudaMemcpy(m->xi, hi, sizeof hi, cudaMemcpyHostToDevice));
        NP_RT(cudaMemcpy(m->xb, hb, sizeof hb, cudaMemcpyHostToDevice));
        NP_RT(cudaEventCreateWithFlags(&m->to_comm, cudaEventDisableTiming));
        NP_RT(cudaEventCreateWithFlags(&m->to_compute, cudaEventDisableTiming));
    }
    np_alternate(4, exact_phase, &x);
    NP_RT(cudaDeviceSynchronize());
    uint64_t h = NP_HASH_INIT;
    for (int k = 0; k < 2; k++) {
        mb_t *m = &x.mb[k];
        for (int i = 0; i < B_COUNT; i++)
            h = np_hash_dev(h, m->b[i], fb);
        h = np_hash_dev(h, m->ari, N * sizeof(int32_t));
        h = np_hash_dev(h, m->arb, N * sizeof(uint16_t));
    }
    np_print_digest(h);
    NP_NCCL(ncclRedOpDestroy(x.premul, x.comm));
    NP_NCCL(ncclCommDestroy(x.comm));
}

/* ---- pin ---- */

#define PIN_N (1 << 18) /* 1 MiB of floats */

typedef struct pin {
    ncclComm_t tp;
    cudaStream_t s;
    float *x[2], *y[2], *z[2], *w[2];
} pin_t;

static void pin_phase(int mbi, int step, void *ctx)
{
    pin_t *p = ctx;
    np_fill(p->x[mbi], PIN_N, (float)(np.rank + mbi + step), 0.001f, p->s);
    np_axpy(p->w[mbi], p->z[mbi], 1.5f, PIN_N, p->s);
    NP_NCCL(ncclAllReduce(p->x[mbi], p->y[mbi], PIN_N, ncclFloat32, ncclSum, p->tp, p->s));
    np_axpy(p->z[mbi], p->y[mbi], 0.25f, PIN_N, p->s);
}

void np_pin(int argc, char **argv)
{
    pin_t p;
    memset(&p, 0, sizeof p);
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.commName = "TENSOR_MODEL_PARALLEL_GROUP";
    NP_NCCL(ncclCommInitRankConfig(&p.tp, np.size, np_shared_id(MPI_COMM_WORLD), np.rank, &cfg));
    NP_RT(cudaStreamCreate(&p.s));
    for (int k = 0; k < 2; k++) {
        p.x[k] = np_dev(PIN_N * sizeof(float));
        p.y[k] = np_dev(PIN_N * sizeof(float));
        p.z[k] = np_dev(PIN_N * sizeof(float));
        p.w[k] = np_dev(PIN_N * sizeof(float));
    }
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "api") != 0)
            continue;
        int (*set)(ncclComm_t, int) = NULL;
        *(void **)&set = dlsym(RTLD_DEFAULT, "dh_group_set_enabled");
        printf("set_enabled previous=%d\n", set != NULL ? set(p.tp, 0) : -2);
    }
    np_alternate(8, pin_phase, &p);
    NP_RT(cudaDeviceSynchronize());
    uint64_t h = NP_HASH_INIT;
    for (int k = 0; k < 2; k++) {
        h = np_hash_dev(h, p.y[k], PIN_N * sizeof(float));
        h = np_hash_dev(h, p.z[k], PIN_N * sizeof(float));
        h = np_hash_dev(h, p.w[k], PIN_N * sizeof(float));
    }
    np_print_digest(h);
    NP_NCCL(ncclCommDestroy(p.tp));
}
