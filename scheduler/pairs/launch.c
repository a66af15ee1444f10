/* launch.c: one op of the selection on a stream, and the gate (bench.h). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "vgpu.h" /* types only: the vgpu is reached through dlsym */

int dh__ovl_fail(const dh_ovl_bench_t *b, const char *file, int line, const char *what,
                 const char *why)
{
    const char *base = strrchr(file, '/');
    fprintf(stderr, "dhelix-pairs[%d]: %s:%d: %s failed: %s\n", b ? b->rank : 0,
            base ? base + 1 : file, line, what, why);
    return -1;
}

const char *dh__ovl_cublas_str(cublasStatus_t st)
{
    const char *s = cublasGetStatusString(st);
    return s ? s : "unknown cuBLAS status";
}

/* ---- buffers ---- */

static size_t dh__gemm_elems(const dh_ovl_gemm_t *g, int which)
{
    size_t m = (size_t)g->m, n = (size_t)g->n, k = (size_t)g->k;
    size_t e = which == 0 ? m * k : which == 1 ? k * n : m * n;
    return e * (size_t)g->batch;
}

int dh_ovl_bench_prepare(dh_ovl_bench_t *b, dh_ovl_op_t *op, int inst)
{
    if (op->buf[inst][0])
        return 0;
    size_t bytes[3] = {0, 0, 0};
    if (op->is_comm) {
        const dh_ovl_nccl_t *c = &op->u.nccl;
        size_t send, recv;
        dh_ovl_nccl_counts(c, b->nranks, &send, &recv);
        bytes[0] = send * c->esize;
        bytes[1] = recv * c->esize;
    } else {
        const dh_ovl_gemm_t *g = &op->u.gemm;
        if (g->m > INT_MAX || g->n > INT_MAX || g->k > INT_MAX || g->batch > INT_MAX)
            return dh__ovl_fail(b, __FILE__, __LINE__, op->name, "sizes exceed cuBLAS's int");
        for (int i = 0; i < 3; i++)
            bytes[i] = dh__gemm_elems(g, i) * g->esize;
    }
    for (int i = 0; i < 3 && bytes[i]; i++) {
        DH__CUDA(b, cudaMalloc(&op->buf[inst][i], bytes[i]));
        DH__CUDA(b, cudaMemset(op->buf[inst][i], 0, bytes[i]));
    }
    return 0;
}

void dh__ovl_free_op(dh_ovl_op_t *op)
{
    for (int inst = 0; inst < 2; inst++) {
        for (int i = 0; i < 3; i++) {
            if (op->buf[inst][i])
                cudaFree(op->buf[inst][i]);
            op->buf[inst][i] = NULL;
        }
    }
}

/* ---- GEMMs ---- */

static int dh__gemm(dh_ovl_bench_t *b, cublasHandle_t h, const dh_ovl_gemm_t *g,
                    void *const *buf)
{
    const float one = 1.0f, zero = 0.0f;
    const int m = (int)g->m, n = (int)g->n, k = (int)g->k;
    const cublasOperation_t ta = g->ta == 't' ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t tb = g->tb == 't' ? CUBLAS_OP_T : CUBLAS_OP_N;
    const int lda = g->ta == 'n' ? m : k, ldb = g->tb == 'n' ? k : n, ldc = m;
    const long long sa = (long long)m * k, sb = (long long)k * n, sc = (long long)m * n;
    if (g->batch == 1 && g->dtype == CUDA_R_32F) {
        DH__BLAS(b, cublasSgemm(h, ta, tb, m, n, k, &one, buf[0], lda, buf[1], ldb, &zero, buf[2],
                                ldc));
    } else if (g->batch == 1) {
        DH__BLAS(b, cublasGemmEx(h, ta, tb, m, n, k, &one, buf[0], g->dtype, lda, buf[1],
                                 g->dtype, ldb, &zero, buf[2], g->dtype, ldc, CUBLAS_COMPUTE_32F,
                                 CUBLAS_GEMM_DEFAULT));
    } else if (g->dtype == CUDA_R_32F) {
        DH__BLAS(b, cublasSgemmStridedBatched(h, ta, tb, m, n, k, &one, buf[0], lda, sa, buf[1],
                                              ldb, sb, &zero, buf[2], ldc, sc, (int)g->batch));
    } else {
        DH__BLAS(b, cublasGemmStridedBatchedEx(h, ta, tb, m, n, k, &one, buf[0], g->dtype, lda,
                                               sa, buf[1], g->dtype, ldb, sb, &zero, buf[2],
                                               g->dtype, ldc, sc, (int)g->batch,
                                               CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }
    return 0;
}

/* ---- collectives ---- */

static int dh__nccl(dh_ovl_bench_t *b, const dh_ovl_nccl_t *c, void *const *buf,
                    cudaStream_t s)
{
    void *sb = buf[0], *rb = buf[1];
    const ncclDataType_t dt = c->dtype;
    const size_t n = c->count;
    const int next = (b->rank + 1) % b->nranks, prev = (b->rank + b->nranks - 1) % b->nranks;
    switch (c->coll) {
    case DH_OVL_ALLREDUCE:
        DH__NCCL(b, ncclAllReduce(sb, rb, n, dt, ncclSum, b->comm, s));
        break;
    case DH_OVL_ALLGATHER:
        DH__NCCL(b, ncclAllGather(sb, rb, n, dt, b->comm, s));
        break;
    case DH_OVL_REDUCESCATTER:
        DH__NCCL(b, ncclReduceScatter(sb, rb, n, dt, ncclSum, b->comm, s));
        break;
    case DH_OVL_BROADCAST:
        DH__NCCL(b, ncclBroadcast(sb, rb, n, dt, 0, b->comm, s));
        break;
    case DH_OVL_REDUCE:
        DH__NCCL(b, ncclReduce(sb, rb, n, dt, ncclSum, 0, b->comm, s));
        break;
    case DH_OVL_ALLTOALL:
        DH__NCCL(b, ncclAlltoAll(sb, rb, n, dt, b->comm, s));
        break;
    case DH_OVL_GATHER:
        DH__NCCL(b, ncclGather(sb, rb, n, dt, 0, b->comm, s));
        break;
    case DH_OVL_SCATTER:
        DH__NCCL(b, ncclScatter(sb, rb, n, dt, 0, b->comm, s));
        break;
    case DH_OVL_SEND: case DH_OVL_RECV:
        /* A ring exchange: every rank sends to its successor and receives from its
         * predecessor, so each Send of the profile meets the Recv it had. */
        DH__NCCL(b, ncclGroupStart());
        DH__NCCL(b, ncclSend(sb, n, dt, next, b->comm, s));
        DH__NCCL(b, ncclRecv(rb, n, dt, prev, b->comm, s));
        DH__NCCL(b, ncclGroupEnd());
        break;
    default:
        return dh__ovl_fail(b, __FILE__, __LINE__, "collective", "unknown");
    }
    return 0;
}

int dh__ovl_launch(dh_ovl_bench_t *b, dh_ovl_op_t *op, int slot, int inst)
{
    if (op->is_comm)
        return dh__nccl(b, &op->u.nccl, op->buf[inst], b->s[slot]);
    return dh__gemm(b, b->h[slot], &op->u.gemm, op->buf[inst]);
}

/* ---- the gate ---- */

/* The vgpu's gate: a kernel without effect whose cost is its one argument (ns). Only its
 * address matters; the vgpu runs the registered description, never this function. */
static void dh__gate_stub(double ns)
{
    (void)ns;
}

static double dh__gate_cost(const vgpu_launch_t *l, double *sm_fraction)
{
    double ns;
    memcpy(&ns, l->args[0], sizeof ns);
    (void)sm_fraction;
    return ns;
}

typedef int (*dh__vgpu_register_fn)(const void *, const vgpu_kernel_desc_t *);

/* A gate GEMM on a GPU: big enough to be long (tens of us), small enough to add up to the
 * wanted length in a few steps. */
static const dh_ovl_gemm_t dh__gate_gemm = {'n', 'n', 4096, 4096, 1024, 1, CUDA_R_16F, 2, 0};

int dh__ovl_gate_init(dh_ovl_bench_t *b)
{
    dh__vgpu_register_fn reg = (dh__vgpu_register_fn)dlsym(RTLD_DEFAULT, "vgpu_register_kernel");
    b->vgpu = reg != NULL;
    b->gate_gemm |= !b->vgpu;
    b->data_moves = 1;
    if (b->vgpu) {
        int (*timing_only)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "vgpu_timing_only");
        b->data_moves = !(timing_only && timing_only());
        b->vg_host_ns = (double (*)(void))dlsym(RTLD_DEFAULT, "vgpu_host_time_ns");
    }
    if (!b->gate_gemm) {
        vgpu_kernel_desc_t d = {.name = "dhelix_pairs_gate", .nparams = 1,
                                .param_sizes = {sizeof(double)}, .cost = dh__gate_cost};
        if (reg((const void *)dh__gate_stub, &d) != 0)
            return dh__ovl_fail(b, __FILE__, __LINE__, "vgpu_register_kernel", "refused");
        return 0;
    }
    for (int i = 0; i < 3; i++) {
        size_t bytes = dh__gemm_elems(&dh__gate_gemm, i) * dh__gate_gemm.esize;
        DH__CUDA(b, cudaMalloc(&b->gate_buf[i], bytes));
        DH__CUDA(b, cudaMemset(b->gate_buf[i], 0, bytes));
    }
    /* One GEMM's time, after a warm-up (the first call picks and loads the kernel). */
    float best = 0;
    for (int i = 0; i < 4; i++) {
        DH__CUDA(b, cudaEventRecord(b->end[0], b->gate_s));
        if (dh__gemm(b, b->gate_h, &dh__gate_gemm, b->gate_buf) != 0)
            return -1;
        DH__CUDA(b, cudaEventRecord(b->end[1], b->gate_s));
        DH__CUDA(b, cudaEventSynchronize(b->end[1]));
        float ms;
        DH__CUDA(b, cudaEventElapsedTime(&ms, b->end[0], b->end[1]));
        if (i > 0 && (best == 0 || ms < best))
            best = ms;
    }
    b->gate_gemm_us = best > 0 ? best * 1e3 : 1.0;
    return 0;
}

int dh__ovl_gate(dh_ovl_bench_t *b)
{
    if (!b->gate_gemm) {
        double ns = b->gate_us * 1e3;
        void *args[1] = {&ns};
        dim3 one = {1, 1, 1};
        DH__CUDA(b, cudaLaunchKernel((const void *)dh__gate_stub, one, one, args, 0, b->gate_s));
        return 0;
    }
    int n = (int)ceil(b->gate_us / b->gate_gemm_us);
    for (int i = 0; i < (n > 0 ? n : 1); i++) {
        if (dh__gemm(b, b->gate_h, &dh__gate_gemm, b->gate_buf) != 0)
            return -1;
    }
    return 0;
}
