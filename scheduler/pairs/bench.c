/* bench.c: set-up, repetitions and medians of the measurements (bench.h). */
#include "bench.h"

#include <stdlib.h>
#include <string.h>

/* The first gate by default: far longer than the host needs to issue a pair (a few
 * launches), short against the ops worth measuring. Doubled when a repetition shows it
 * was too short. */
#define DH__GATE_US 200.0
#define DH__GATE_MAX_US 2e5
#define DH__WORKSPACE ((size_t)32 << 20)

int dh_ovl_bench_init(dh_ovl_bench_t *b, const dh_ovl_world_t *w, const ncclUniqueId *id,
                      int reps, int warmup, int gate_gemm, double gate_us)
{
    memset(b, 0, sizeof *b);
    b->gate_gemm = gate_gemm;
    b->rank = w->rank;
    b->nranks = w->size;
    b->reps = reps;
    b->warmup = warmup;
    b->gate_us = gate_us > 0 ? gate_us : DH__GATE_US;
    int ndev = 0;
    DH__CUDA(b, cudaGetDeviceCount(&ndev));
    if (ndev < 1)
        return dh__ovl_fail(b, __FILE__, __LINE__, "cudaGetDeviceCount", "no device");
    b->device = w->local_rank % ndev;
    DH__CUDA(b, cudaSetDevice(b->device));
    struct cudaDeviceProp prop;
    DH__CUDA(b, cudaGetDeviceProperties(&prop, b->device));
    snprintf(b->device_name, sizeof b->device_name, "%s", prop.name);
    DH__CUDA(b, cudaStreamCreateWithFlags(&b->gate_s, cudaStreamNonBlocking));
    DH__BLAS(b, cublasCreate(&b->gate_h));
    DH__BLAS(b, cublasSetStream(b->gate_h, b->gate_s));
    for (int i = 0; i < 2; i++) {
        DH__CUDA(b, cudaStreamCreateWithFlags(&b->s[i], cudaStreamNonBlocking));
        DH__BLAS(b, cublasCreate(&b->h[i]));
        DH__BLAS(b, cublasSetStream(b->h[i], b->s[i]));
        /* As PyTorch does on Hopper: a workspace of its own per handle (cublasSetStream
         * would reset it, so it comes after). */
        DH__CUDA(b, cudaMalloc(&b->ws[i], DH__WORKSPACE));
        DH__BLAS(b, cublasSetWorkspace(b->h[i], b->ws[i], DH__WORKSPACE));
        DH__CUDA(b, cudaEventCreate(&b->end[i]));
    }
    DH__CUDA(b, cudaEventCreate(&b->start));
    DH__CUDA(b, cudaMalloc((void **)&b->xbuf, 64));
    DH__CUDA(b, cudaMemset(b->xbuf, 0, 64));
    DH__NCCL(b, ncclCommInitRank(&b->comm, b->nranks, *id, b->rank));
    return dh__ovl_gate_init(b);
}

/* Every rank gets the element-wise maximum of v (n <= 4 floats) where NCCL moves data. */
static int dh__max_over_ranks(dh_ovl_bench_t *b, float *v, int n)
{
    if (b->nranks == 1 || !b->data_moves)
        return 0; /* the vgpu in timing-only mode: every rank has the same values */
    size_t bytes = (size_t)n * sizeof *v;
    DH__CUDA(b, cudaMemcpyAsync(b->xbuf, v, bytes, cudaMemcpyHostToDevice, b->gate_s));
    DH__NCCL(b, ncclAllReduce(b->xbuf, b->xbuf, (size_t)n, ncclFloat, ncclMax, b->comm,
                              b->gate_s));
    DH__CUDA(b, cudaMemcpyAsync(v, b->xbuf, bytes, cudaMemcpyDeviceToHost, b->gate_s));
    DH__CUDA(b, cudaStreamSynchronize(b->gate_s));
    return 0;
}

typedef struct dh__slot {
    dh_ovl_op_t *op;
    int slot, inst;
} dh__slot_t;

/* One repetition: barrier, gate, start, the ops, their ends. *ms: start to the last end;
 * *late: the gate had ended before everything was issued. */
static int dh__rep(dh_ovl_bench_t *b, const dh__slot_t *run, int nrun, float *ms, int *late)
{
    if (b->nranks > 1)
        DH__NCCL(b, ncclAllReduce(b->xbuf + 8, b->xbuf + 8, 1, ncclFloat, ncclSum, b->comm,
                                  b->gate_s));
    if (dh__ovl_gate(b) != 0)
        return -1;
    DH__CUDA(b, cudaEventRecord(b->start, b->gate_s));
    for (int i = 0; i < nrun; i++) {
        DH__CUDA(b, cudaStreamWaitEvent(b->s[run[i].slot], b->start, 0));
        if (dh__ovl_launch(b, run[i].op, run[i].slot, run[i].inst) != 0)
            return -1;
    }
    /* The end events go last: with one hardware queue (CUDA_DEVICE_MAX_CONNECTIONS=1) an
     * end record waiting for the first op would hold back the launch of the second. */
    for (int i = 0; i < nrun; i++)
        DH__CUDA(b, cudaEventRecord(b->end[run[i].slot], b->s[run[i].slot]));
    if (b->vg_host_ns) {
        /* Waiting for the start moves the host clock to its time unless it was behind. */
        double issued = b->vg_host_ns();
        DH__CUDA(b, cudaEventSynchronize(b->start));
        *late = b->vg_host_ns() <= issued;
    } else {
        cudaError_t q = cudaEventQuery(b->start);
        if (q != cudaSuccess && q != cudaErrorNotReady)
            DH__CUDA(b, q);
        *late = q == cudaSuccess;
    }
    *ms = 0;
    for (int i = 0; i < nrun; i++) {
        float t;
        DH__CUDA(b, cudaEventSynchronize(b->end[run[i].slot]));
        DH__CUDA(b, cudaEventElapsedTime(&t, b->start, b->end[run[i].slot]));
        *ms = t > *ms ? t : *ms;
    }
    return 0;
}

/* The repetitions to run: a alone on slot 0, or a on slot 0 and b_op on slot 1 with the
 * communication op first (it must start first to get SMs when the GEMM fills the GPU). */
static int dh__plan_run(dh_ovl_op_t *a, dh_ovl_op_t *b_op, dh__slot_t *run)
{
    run[0] = (dh__slot_t){a, 0, 0};
    if (!b_op)
        return 1;
    run[1] = (dh__slot_t){b_op, 1, b_op == a ? 1 : 0};
    if (b_op->is_comm && !a->is_comm) {
        dh__slot_t t = run[0];
        run[0] = run[1];
        run[1] = t;
    }
    return 2;
}

int dh_ovl_measure(dh_ovl_bench_t *b, dh_ovl_op_t *a, dh_ovl_op_t *b_op, double *us)
{
    dh__slot_t run[2];
    int nrun = dh__plan_run(a, b_op, run);
    for (int i = 0; i < nrun; i++) {
        if (dh_ovl_bench_prepare(b, run[i].op, run[i].inst) != 0)
            return -1;
    }
    double *t = malloc((size_t)b->reps * sizeof *t);
    if (!t)
        return dh__ovl_fail(b, __FILE__, __LINE__, "malloc", "out of memory");
    int got = 0, rc = 0;
    for (int i = 0; i < b->warmup + b->reps + 64 && got < b->reps; i++) {
        float v[2];
        int late = 0;
        if ((rc = dh__rep(b, run, nrun, &v[0], &late)) != 0)
            break;
        if (i < b->warmup)
            continue;
        v[1] = (float)late;
        if ((rc = dh__max_over_ranks(b, v, 2)) != 0)
            break;
        if (v[1] > 0) {
            b->retries++;
            if (b->gate_us * 2 > DH__GATE_MAX_US) {
                rc = dh__ovl_fail(b, __FILE__, __LINE__, "gate",
                                  "the host cannot issue a pair within 200 ms");
                break;
            }
            b->gate_us *= 2;
            continue;
        }
        t[got++] = 1e3 * (double)v[0];
    }
    if (rc == 0 && got < b->reps)
        rc = dh__ovl_fail(b, __FILE__, __LINE__, "measure", "too many repetitions redone");
    if (rc == 0)
        *us = dh_ovl_median(t, got);
    free(t);
    return rc;
}

void dh_ovl_bench_fini(dh_ovl_bench_t *b, dh_ovl_sel_t *sel)
{
    if (sel) {
        for (int i = 0; i < sel->ncompute; i++)
            dh__ovl_free_op(&sel->compute[i]);
        for (int i = 0; i < sel->ncomm; i++)
            dh__ovl_free_op(&sel->comm[i]);
    }
    for (int i = 0; i < 3; i++) {
        if (b->gate_buf[i])
            cudaFree(b->gate_buf[i]);
    }
    if (b->comm)
        ncclCommDestroy(b->comm);
    for (int i = 0; i < 2; i++) {
        if (b->h[i])
            cublasDestroy(b->h[i]);
        if (b->ws[i])
            cudaFree(b->ws[i]);
        if (b->end[i])
            cudaEventDestroy(b->end[i]);
        if (b->s[i])
            cudaStreamDestroy(b->s[i]);
    }
    if (b->gate_h)
        cublasDestroy(b->gate_h);
    if (b->start)
        cudaEventDestroy(b->start);
    if (b->gate_s)
        cudaStreamDestroy(b->gate_s);
    if (b->xbuf)
        cudaFree(b->xbuf);
    memset(b, 0, sizeof *b);
}
