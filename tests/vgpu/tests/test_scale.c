/*
 * test_scale.c: the vgpu at the paper's scale. One training iteration of GPT-30B on 64
 * GPUs (DP=4, TP=8 with sequence parallelism, PP=2; the paper's (4,8,2) configuration),
 * timing-only, in representative-rank mode: one process per pipeline stage stands for the
 * 32 ranks of its TP x DP groups (vgpu_nccl_represent), the two stages exchange
 * activations and gradients for real (ncclSend/ncclRecv in groups, 1F1B schedule).
 *
 * Per layer and micro-batch it issues what Megatron issues with sequence parallelism
 * (REFERENCE.md): forward 2 all-gathers, 2 reduce-scatters, 4 GEMMs, attention, norms and
 * element-wise kernels; backward 4 all-gathers, 2 reduce-scatters, dgrad and wgrad GEMMs;
 * every activation through cudaMallocAsync/cudaFreeAsync as PyTorch's async allocator
 * does. Shapes: hidden 7168, 56 heads, 48 layers, sequence 2048, micro-batch 1, global
 * batch 128 (32 micro-batches per pipeline), bf16.
 *
 * It must finish in under a minute on 2 cores (CTest timeout) and prints the operation
 * count, the wall time and the virtual iteration time.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "vgpu.h"

#define CK(x)                                                                           \
    do {                                                                                \
        long _e = (long)(x);                                                            \
        if (_e) {                                                                       \
            fprintf(stderr, "%s:%d: %s failed (%ld)\n", __FILE__, __LINE__, #x, _e);    \
            MPI_Abort(MPI_COMM_WORLD, 1);                                               \
        }                                                                               \
    } while (0)

enum { TP = 8, DP = 4, PP = 2, LAYERS = 48, HIDDEN = 7168, SEQ = 2048, MICRO = 32 };

/* A kernel whose cost (ns) and sm share are its arguments; it touches one buffer. */
static void work_stub(void *buf, size_t bytes, double ns, int write) { (void)buf; (void)bytes; (void)ns; (void)write; }

static double work_cost(const vgpu_launch_t *l, double *frac)
{
    (void)frac;
    return *(double *)l->args[2];
}

static int work_fp(const vgpu_launch_t *l, vgpu_range_t *r, int max)
{
    (void)max;
    r[0] = (vgpu_range_t){*(void **)l->args[0], *(size_t *)l->args[1], *(int *)l->args[3]};
    return 1;
}

typedef struct stage {
    int rank;
    ncclComm_t tp, dp, pp;
    cudaStream_t s;
    long ops;
} stage_t;

static void kernel(stage_t *st, void *buf, size_t bytes, double ns, int write)
{
    void *args[] = {&buf, &bytes, &ns, &write};
    CK(cudaLaunchKernel((const void *)work_stub, (dim3){1, 1, 1}, (dim3){128, 1, 1}, args, 0, st->s));
    st->ops++;
}

static double gemm_ns(double m, double n, double k)
{
    /* 2mnk flops at bf16 peak and 75% efficiency: a stand-in; the real GEMM model is cuBLAS's. */
    return vgpu_cost_flops(2 * m * n * k / 0.75, 17);
}

static void *act(stage_t *st, size_t bytes)
{
    void *p;
    CK(cudaMallocAsync(&p, bytes, st->s));
    st->ops++;
    return p;
}

static void drop(stage_t *st, void *p)
{
    CK(cudaFreeAsync(p, st->s));
    st->ops++;
}

static void coll(stage_t *st, int gather, void *buf, size_t elems_per_rank)
{
    if (gather) {
        CK(ncclAllGather(buf, buf, elems_per_rank, ncclBfloat16, st->tp, st->s));
    } else {
        CK(ncclReduceScatter(buf, buf, elems_per_rank, ncclBfloat16, ncclSum, st->tp, st->s));
    }
    st->ops++;
}

/* One transformer layer, forward (bwd = 0) or backward (bwd = 1), for one micro-batch. */
static void layer(stage_t *st, int bwd)
{
    const double s = SEQ, h = HIDDEN, tok = SEQ / TP;
    size_t full = (size_t)SEQ * HIDDEN * 2, shard = full / TP;
    void *x = act(st, full), *y = act(st, full);
    int gathers = bwd ? 4 : 2;
    double mul = bwd ? 2.0 : 1.0; /* dgrad + wgrad */
    kernel(st, x, shard, vgpu_cost_bytes(3.0 * shard), 1);            /* layer norm */
    for (int g = 0; g < gathers / 2; g++) coll(st, 1, x, (size_t)tok * HIDDEN);
    kernel(st, y, full, mul * gemm_ns(s, 3 * h / TP, h), 1);          /* QKV */
    kernel(st, y, full, mul * vgpu_cost_flops(4.0 * s * s * h / TP, 17), 1); /* attention */
    kernel(st, x, full, mul * gemm_ns(s, h, h / TP), 1);              /* projection */
    coll(st, 0, x, (size_t)tok * HIDDEN);
    kernel(st, x, shard, vgpu_cost_bytes(4.0 * shard), 1);            /* dropout + residual */
    kernel(st, x, shard, vgpu_cost_bytes(3.0 * shard), 1);            /* layer norm */
    for (int g = 0; g < gathers / 2; g++) coll(st, 1, x, (size_t)tok * HIDDEN);
    void *z = act(st, full * 4 / TP * TP);
    kernel(st, z, full * 4, mul * gemm_ns(s, 4 * h / TP, h), 1);      /* FC1 */
    kernel(st, z, full * 4, vgpu_cost_bytes(2.0 * full * 4 / TP), 1); /* GELU */
    kernel(st, x, full, mul * gemm_ns(s, h, 4 * h / TP), 1);          /* FC2 */
    coll(st, 0, x, (size_t)tok * HIDDEN);
    kernel(st, x, shard, vgpu_cost_bytes(4.0 * shard), 1);            /* dropout + residual */
    drop(st, z);
    drop(st, y);
    drop(st, x);
}

/* Megatron's p2p: a send and/or a receive to the other stage, batched in one group
 * (send_forward_recv_backward and its mirror), so the stages never wait on each other. */
static void p2p(stage_t *st, void *sbuf, void *rbuf)
{
    size_t elems = (size_t)SEQ / TP * HIDDEN;
    int peer = 1 - st->rank;
    CK(ncclGroupStart());
    if (sbuf) CK(ncclSend(sbuf, elems, ncclBfloat16, peer, st->pp, st->s));
    if (rbuf) CK(ncclRecv(rbuf, elems, ncclBfloat16, peer, st->pp, st->s));
    CK(ncclGroupEnd());
    st->ops++;
}

static void compute(stage_t *st, int bwd)
{
    for (int l = 0; l < LAYERS / PP; l++) layer(st, bwd);
}

/* 1F1B on two stages. Stage 0 runs one forward ahead; in the steady state it sends the
 * activation of i+1 and receives the gradient of i in one group, as stage 1 mirrors. */
static void schedule(stage_t *st, void *act_buf, void *grad_buf)
{
    if (st->rank == 0) {
        compute(st, 0);
        p2p(st, act_buf, NULL);
        for (int i = 0; i + 1 < MICRO; i++) {
            compute(st, 0);
            p2p(st, act_buf, grad_buf);
            compute(st, 1);
        }
        p2p(st, NULL, grad_buf);
        compute(st, 1);
    } else {
        p2p(st, NULL, act_buf);
        for (int i = 0; i < MICRO; i++) {
            compute(st, 0);
            compute(st, 1);
            p2p(st, grad_buf, i + 1 < MICRO ? act_buf : NULL);
        }
    }
}

static void init_comms(stage_t *st)
{
    ncclUniqueId id;
    /* Megatron rank order: global = tp_rank + TP * (dp_rank + DP * pp_rank). */
    CK(ncclGetUniqueId(&id));
    CK(vgpu_nccl_represent(&id, st->rank * TP * DP, 1));
    CK(ncclCommInitRank(&st->tp, TP, id, 0));
    CK(ncclGetUniqueId(&id));
    CK(vgpu_nccl_represent(&id, st->rank * TP * DP, TP));
    CK(ncclCommInitRank(&st->dp, DP, id, 0));
    if (st->rank == 0) CK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    CK(ncclCommInitRank(&st->pp, PP, id, st->rank));
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    stage_t st = {0};
    int n;
    MPI_Comm_rank(MPI_COMM_WORLD, &st.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    if (n != PP || !vgpu_timing_only()) {
        fprintf(stderr, "run with mpirun -n %d and VGPU_TIMING_ONLY=1\n", PP);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    vgpu_kernel_desc_t kd = {.name = "work", .nparams = 4,
                             .param_sizes = {sizeof(void *), sizeof(size_t), sizeof(double), sizeof(int)},
                             .cost = work_cost, .footprint = work_fp};
    CK(vgpu_register_kernel((const void *)work_stub, &kd));
    init_comms(&st);
    CK(cudaStreamCreateWithFlags(&st.s, cudaStreamNonBlocking));
    void *boundary, *bgrad, *grads;
    size_t param_bytes = (size_t)LAYERS / PP * 12 * HIDDEN * HIDDEN / TP * 2;
    CK(cudaMalloc(&boundary, (size_t)SEQ / TP * HIDDEN * 2));
    CK(cudaMalloc(&bgrad, (size_t)SEQ / TP * HIDDEN * 2));
    CK(cudaMalloc(&grads, param_bytes));

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    double v0 = vgpu_host_time_ns();
    schedule(&st, boundary, bgrad);
    CK(ncclReduceScatter(grads, grads, param_bytes / 2 / DP, ncclBfloat16, ncclSum, st.dp, st.s));
    CK(cudaStreamSynchronize(st.s));
    double v1 = vgpu_host_time_ns();
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double wall = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    vgpu_counters_t c;
    vgpu_counters(&c);
    long ops = st.ops, total = 0;
    MPI_Reduce(&ops, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    printf("stage %d: %ld API operations (%llu device ops), virtual iteration %.1f ms, "
           "comm busy %.1f ms, compute busy %.1f ms, wall %.1f s\n",
           st.rank, ops, (unsigned long long)c.ops_completed, (v1 - v0) / 1e6,
           c.busy_ns_comm / 1e6, c.busy_ns_compute / 1e6, wall);
    /* Device operations the schedule must have produced: per layer, 10 kernels, 3 frees and
     * 4 (forward) or 6 (backward) collectives; one p2p group per exchange (stage 0: M + 1,
     * stage 1: M + 1); one gradient reduce-scatter. Allocations are not device operations. */
    unsigned long long want = (unsigned long long)MICRO * (LAYERS / PP) * ((10 + 3 + 4) + (10 + 3 + 6)) +
                              (MICRO + 1) + 1;
    if (c.ops_completed != want) {
        printf("stage %d: FAIL: %llu device operations completed, the schedule issues %llu\n",
               st.rank, (unsigned long long)c.ops_completed, want);
    }
    int ok = c.hazards == 0 && c.ops_completed == want && c.busy_ns_comm > 0;
    int all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (st.rank == 0) printf("%s: %ld operations in the iteration over both stages\n", all ? "ok" : "FAIL", total);
    MPI_Finalize();
    return all ? 0 : 1;
}
