/*
 * coverage.c: the shim's coverage program, an unmodified framework in miniature.
 *
 *   coverage --out PATH [--iters N] [--mbs N] [--nccl] [--stream legacy|pool] [--tp2 IDFILE]
 *            [--timeout S]
 *
 * With --tp2 (under mpirun -n 2) it is one of two ranks, each writing PATH.RANK: inputs
 * differ per rank, every backward ends with an all-reduce of a gradient on a two-rank
 * communicator (coverage_nccl.c), and every forward calls the entry points of
 * coverage_entry.c on what it just computed, so that plan mode pairs the backward of
 * micro-batch i with the forward of i+1 around those calls (tests/shim/plan_cov.sh).
 *
 * It trains a two-layer model (GEMMs, elementwise kernels, reductions) for --iters
 * iterations of --mbs micro-batches with gradient accumulation, the way PyTorch and
 * Megatron issue the work (../shared/REFERENCE.md), on the legacy default stream as PyTorch
 * does unless told otherwise, or with --stream pool on a non-blocking stream of its own
 * (torch.cuda.Stream from PyTorch's pool; blocking copies are then preceded by a
 * synchronisation of that stream, as a correct program needs):
 *   - forward on the main thread; backward on a second thread while the main thread waits
 *     on a pthread condition (the autograd device thread), so that the backward of
 *     micro-batch i and the forward of i+1 follow each other with a thread switch;
 *   - cuBLAS (cublasSgemm_v2, cublasGemmEx, the strided batched pair) with
 *     cublasSetStream/SetWorkspace/SetMathMode (and pointer and atomics modes) before every
 *     GEMM, a handle and workspace per thread; Megatron's weight-gradient GEMM with
 *     beta = 1 into fp32 main_grad; host alpha/beta on the stack, scribbled over the moment
 *     the call returns; one GEMM in device pointer mode whose scalars kernels write just
 *     before and just after it;
 *   - cuBLASLt with a bias+GELU(+aux) epilogue and an explicit workspace shared by every
 *     Lt call of the process (Transformer Engine's habit); descriptors, layouts,
 *     preference and algo made for the call and destroyed (or stack storage scribbled
 *     over) right after it;
 *   - kernels through cudaLaunchKernel, nvcc 13's __cudaLaunchKernel (and _ptsz) with a
 *     cudaKernel_t from __cudaGetKernel, cudaLaunchKernelExC with launch attributes,
 *     cuLaunchKernel and cuLaunchKernelEx from cuGetProcAddress_v2 (default and per-thread
 *     flavours) and cuLaunchKernel from dlsym(RTLD_DEFAULT) with packed `extra` arguments;
 *     the arguments live in one reused buffer;
 *   - the input and parts of the target copied from pageable buffers (cudaMemcpyAsync, a
 *     pitched cudaMemcpy2DAsync, cuMemcpyHtoDAsync from a dlopen'ed libcuda handle), each
 *     overwritten as soon as the call returns;
 *   - an NCCL-style side stream: record on the compute stream, the side stream waits,
 *     runs the "collectives" (copy kernels, or with --nccl every NCCL entry point a job
 *     reaches, see coverage_nccl.c) and the averaging kernel, records, the compute stream
 *     waits;
 *   - a watchdog thread polling each micro-batch's end event with cudaEventQuery while the
 *     other threads issue; the main thread polls the last one until it is done and then
 *     reads pinned memory that a copy before the record filled;
 *   - cudaMallocAsync/cudaFreeAsync per tensor, with same-size reuse in a loop, and
 *     activations allocated in forward and freed by the backward thread;
 *   - once per iteration: blocking copies both ways in the middle of the iteration (runtime
 *     and driver; device-to-host reads of results, a host-to-device write of a buffer that
 *     queued work still reads), ".item()" (copy to pinned memory, cudaStreamSynchronize)
 *     whose value sets the learning rate, the same through the driver on the side stream,
 *     a pageable cudaMemcpyAsync device-to-host read at once, a host function on the
 *     stream, event timing, the optimizer step, zeroing of the gradients (cudaMemsetAsync,
 *     cuMemsetD8Async), weight snapshots through temporaries freed with cudaFree and
 *     cuMemFree while their copies are queued, on a stream destroyed with work pending;
 *     and the driver's synchronising calls (cuStreamSynchronize, per-thread flavour,
 *     cuStreamQuery, cuEventSynchronize, cuCtxSynchronize).
 * At the end it writes every output buffer (raw bytes, in named sections) and a checksum
 * to PATH, so that runs can be compared bit for bit. Exit status: 0; 1 on an API error;
 * 3 when an event never completes; 4 when a self-check failed (the output is written
 * first); 142 (SIGALRM) after --timeout seconds.
 */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "coverage.h"

#define HH (COV_HID * COV_HID)
#define XN (COV_HID * COV_TOK)   /* floats of an H x T activation */
#define FN (COV_FFN * COV_TOK)   /* floats of an F x T activation */
#define LT_WS_BYTES (4u << 20)
#define BUSY_N 4096
#define BLAS_WS_BYTES (1u << 20)

typedef struct act {
    float *x, *pre, *h1, *y, *tg;
} act_t;

static struct {
    int iters, mbs, nccl, nk;
    int tp2, rank;                            /* --tp2: one of two ranks, and which */
    const char *idfile;
    int pool;                                 /* --stream pool: G.s0 is a created stream */
    cudaStream_t s0;                          /* the compute stream (NULL: legacy) */
    float *w1, *b1, *w2, *b2, *gw1, *gw2, *gb1, *gb2;
    float *mbconst, *stats, *hstats, *losses, *loss_iter, *decoy, *wsnap, *scal;
    float *busy, *snapdev, *mbseen, *actsum;
    void *lt_ws, *ws_main, *ws_bwd;
    cublasLtHandle_t lt;
    cublasHandle_t h_main;
    cudaStream_t s_comm;
    cudaEvent_t *ev_ready, *ev_comm, *ev_end, *ev_start;
    float *marks_host, *loss_host, *drv_host; /* pinned */
    float *stage, *tile;                      /* pageable sources of the input copies */
    act_t *act;
    /* outputs gathered on the host */
    float *marks_seen, *loss_seen, *drv_seen, *snap, *snap_drv, *losses_copy;
    float *blas_out;                          /* iters x COV_BLAS_OUT (coverage_blas.c) */
    float *sync_out;                          /* iters x COV_SYNC_OUT (coverage_sync.c) */
    float *entry_out;                         /* (iters + nk with --tp2) x COV_ENTRY_OUT
                                                 (coverage_entry.c) */
    float *gtp;                               /* --tp2: sum of the all-reduced gradients */
    cudaEvent_t *ev_tp, *ev_tpd;              /* --tp2: around each all-reduce */
    int *hf_log;
    int hf_count;                             /* written by host functions, in stream order */
    /* backward thread */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int job, done;                            /* guarded by mu */
    /* watchdog */
    _Atomic int published, wd_stop;
    int wd_violations, wd_errors, wd_observed; /* watchdog thread only, read after join */
} G = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

/* The constants that forward adds to its input in the first half of an iteration
 * (mid_iteration sets those of the second half). */
static void set_mbconst(int it)
{
    float v[COV_HID];
    for (int h = 0; h < COV_HID; h++)
        v[h] = 0.01f * (float)(h + 1) * (float)(it + 1);
    CK_RT(cudaMemcpy(G.mbconst, v, sizeof(v), cudaMemcpyHostToDevice));
}

/* The tensors forward saved for backward die when the main thread drops the graph, which
 * happens at its next step: freed on the main thread after the backward thread's uses. */
static void release_saved(int k)
{
    if (k < 0 || G.act[k].pre == NULL)
        return;
    CK_RT(cudaFreeAsync(G.act[k].pre, G.s0));
    CK_RT(cudaFreeAsync(G.act[k].h1, G.s0));
    G.act[k].pre = G.act[k].h1 = NULL;
}

/* ---- forward (main thread) ---- */

static void forward(int it, int mb)
{
    int k = it * G.mbs + mb;
    act_t *a = &G.act[k];
    CK_RT(cudaMallocAsync((void **)&a->x, XN * sizeof(float), G.s0));
    CK_RT(cudaMallocAsync((void **)&a->pre, FN * sizeof(float), G.s0));
    CK_RT(cudaMallocAsync((void **)&a->h1, FN * sizeof(float), G.s0));
    CK_RT(cudaMallocAsync((void **)&a->y, XN * sizeof(float), G.s0));
    CK_RT(cudaMallocAsync((void **)&a->tg, XN * sizeof(float), G.s0));

    /* The input, from a pageable buffer that the next batch overwrites at once. Then the
     * previous micro-batch's saved tensors die (see release_saved). */
    cov_fill_lcg(G.stage, XN, (uint32_t)(1000 + k + 100003 * G.rank), 1.0f);
    CK_RT(cudaMemcpyAsync(a->x, G.stage, XN * sizeof(float), cudaMemcpyHostToDevice, G.s0));
    cov_fill_lcg(G.stage, XN, (uint32_t)(5000 + k), 9.0f);
    release_saved(k - 1);
    cov_launch(L_EXC, K_ADD_BCAST, G.s0, a->x, G.mbconst, COV_HID, COV_TOK);
    /* As PyTorch after every launch (C10_CUDA_KERNEL_LAUNCH_CHECK). */
    CK_RT(cudaPeekAtLastError());
    CK_RT(cudaGetLastError());

    /* A temporary per step, freed and allocated again with the same size and stream. */
    for (int r = 0; r < 3; r++) {
        float *tmp = NULL;
        CK_RT(cudaMallocAsync((void **)&tmp, XN * sizeof(float), G.s0));
        cov_launch(L_KH, K_SCALE, G.s0, tmp, a->x, 0.1f * (float)(r + 1), XN);
        cov_launch(L_RT, K_ADD, G.s0, a->x, tmp, XN);
        CK_RT(cudaFreeAsync(tmp, G.s0));
    }

    /* Layer 1: h1 = GELU(W1^T x + b1), pre-activation kept for backward (cuBLASLt). */
    cov_lt_t l1 = {.trans_a = 1, .m = COV_FFN, .n = COV_TOK, .k = COV_HID,
                   .a = G.w1, .a_rows = COV_HID, .a_cols = COV_FFN, .lda = COV_HID,
                   .b = a->x, .b_rows = COV_HID, .b_cols = COV_TOK, .ldb = COV_HID,
                   .d = a->h1, .ldd = COV_FFN, .alpha = 1.0f, .beta = 0.0f,
                   .epilogue = CUBLASLT_EPILOGUE_GELU_AUX_BIAS, .bias = G.b1, .aux = a->pre,
                   .aux_ld = COV_FFN};
    cov_lt_matmul(G.lt, &l1, G.lt_ws, LT_WS_BYTES, G.s0);
    /* Input statistics x x^T / T: contracts over tokens, so it uses the Lt workspace;
     * descriptors in stack storage. */
    cov_lt_t st = {.trans_b = 1, .m = COV_HID, .n = COV_HID, .k = COV_TOK,
                   .a = a->x, .a_rows = COV_HID, .a_cols = COV_TOK, .lda = COV_HID,
                   .b = a->x, .b_rows = COV_HID, .b_cols = COV_TOK, .ldb = COV_HID,
                   .d = G.stats + (size_t)k * HH, .ldd = COV_HID,
                   .alpha = 1.0f / COV_TOK, .beta = 0.0f,
                   .epilogue = CUBLASLT_EPILOGUE_DEFAULT, .on_stack = 1};
    cov_lt_matmul(G.lt, &st, G.lt_ws, LT_WS_BYTES, G.s0);
    /* The same per head (four heads of four rows), strided batched. */
    {
        float alpha = 1.0f / COV_TOK, beta = 0.0f;
        cov_blas_prepare(G.h_main, G.s0, G.ws_main, BLAS_WS_BYTES);
        CK_BLAS(cublasSgemmStridedBatched(G.h_main, CUBLAS_OP_N, CUBLAS_OP_T, 4, 4, COV_TOK,
                                          &alpha, a->x, COV_HID, 4, a->x, COV_HID, 4, &beta,
                                          G.hstats + (size_t)k * 128, 4, 16, 4));
        cov_scribble_f(&alpha, 9.0f);
        cov_scribble_f(&beta, 1.0f);
    }

    /* Layer 2: y = W2^T h1 + b2 (cublasGemmEx, then a bias kernel). */
    {
        float alpha = 1.0f, beta = 0.0f;
        cov_blas_prepare(G.h_main, G.s0, G.ws_main, BLAS_WS_BYTES);
        CK_BLAS(cublasGemmEx(G.h_main, CUBLAS_OP_T, CUBLAS_OP_N, COV_HID, COV_TOK, COV_FFN,
                             &alpha, G.w2, CUDA_R_32F, COV_FFN, a->h1, CUDA_R_32F, COV_FFN,
                             &beta, a->y, CUDA_R_32F, COV_HID, CUBLAS_COMPUTE_32F,
                             CUBLAS_GEMM_DEFAULT));
        cov_scribble_f(&alpha, 2.0f);
        cov_scribble_f(&beta, 1.0f);
    }
    cov_launch(L_CU, K_ADD_BCAST, G.s0, a->y, G.b2, COV_HID, COV_TOK);
    /* With --tp2, every entry point of coverage_entry.c (gemv, dot, stream memory
     * operations, 3D and symbol copies, the pointer-array batched GEMM, graph launches) on
     * the output this forward just computed: inside the forward that plan mode pairs with
     * the previous micro-batch's backward, so the shim drains the paired group for them. */
    if (G.tp2)
        cov_entry_extra(G.h_main, G.s0, G.ws_main, BLAS_WS_BYTES, a->y,
                        G.entry_out + (size_t)(G.iters + k) * COV_ENTRY_OUT);
    /* The target: generated, then partly replaced from pageable buffers overwritten at
     * once: a pitched tile (its first four rows) and, for odd micro-batches, its first 256
     * tokens through the driver's copy from a dlopen'ed handle. These come last in the
     * forward so that what precedes them can run beside the other strand's backward. */
    cov_launch(L_EXC, K_TARGET, G.s0, a->tg, XN, k);
    cov_fill_lcg(G.tile, 4 * COV_TOK, (uint32_t)(9000 + k), 0.5f);
    CK_RT(cudaMemcpy2DAsync(a->tg, COV_HID * sizeof(float), G.tile, 4 * sizeof(float),
                            4 * sizeof(float), COV_TOK, cudaMemcpyHostToDevice, G.s0));
    cov_fill_lcg(G.tile, 4 * COV_TOK, (uint32_t)(13000 + k), 7.0f);
    if (k % 2 == 1) {
        cov_fill_lcg(G.stage, 256 * COV_HID, (uint32_t)(17000 + k), 0.5f);
        CK_CU(cov_drv.memcpy_htod_async((CUdeviceptr)a->tg, G.stage,
                                        256 * COV_HID * sizeof(float), (CUstream)G.s0));
        cov_fill_lcg(G.stage, 256 * COV_HID, (uint32_t)(21000 + k), 5.0f);
    }
    cov_launch(L_CUEX, K_LOSS, G.s0, G.losses + k, a->y, a->tg, XN, 1.0f / COV_TOK);
}

/* ---- backward (backward thread) ---- */

static void host_log(void *arg);

static void backward(cublasHandle_t h, int it, int mb)
{
    int k = it * G.mbs + mb;
    act_t *a = &G.act[k];
    float *dy, *dh1, *dh1r, *dpre;
    CK_RT(cudaMallocAsync((void **)&dy, XN * sizeof(float), G.s0));
    CK_RT(cudaMallocAsync((void **)&dh1, FN * sizeof(float), G.s0));
    CK_RT(cudaMallocAsync((void **)&dh1r, FN * sizeof(float), G.s0));
    CK_RT(cudaMallocAsync((void **)&dpre, FN * sizeof(float), G.s0));
    /* Head statistics of the output, strided batched through cublasGemmStridedBatchedEx,
     * alpha/beta on the stack and scribbled over after the call (the shim defers it). */
    {
        float alpha = 1.0f, beta = 0.0f;
        cov_blas_prepare(h, G.s0, G.ws_bwd, BLAS_WS_BYTES);
        CK_BLAS(cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_T, 4, 4, COV_TOK, &alpha,
                                           a->y, CUDA_R_32F, COV_HID, 4, a->y, CUDA_R_32F,
                                           COV_HID, 4, &beta, G.hstats + (size_t)k * 128 + 64,
                                           CUDA_R_32F, 4, 16, 4, CUBLAS_COMPUTE_32F,
                                           CUBLAS_GEMM_DEFAULT));
        cov_scribble_f(&alpha, -1.0f);
        cov_scribble_f(&beta, 1.0f);
    }
    /* A check of the saved activation before using it, long enough on the device that
     * whatever the other strand does meanwhile overlaps it. */
    cov_launch(L_RT, K_SUM, G.s0, G.actsum + k, a->h1, FN, 200.0f);
    cov_launch(L_RT, K_MSE_GRAD, G.s0, dy, a->y, a->tg, XN, 1.0f / COV_TOK);
    /* With --tp2 the host function comes here instead of after the backward: the shim
     * orders a host function after all earlier work and all later work after it, so at the
     * end it would tie the next forward to this whole backward and nothing could pair. */
    if (G.tp2)
        CK_RT(cudaLaunchHostFunc(G.s0, host_log, (void *)(intptr_t)k));

    /* main_grad(W2) += h1 dy^T through cuBLASLt, beta = 1, the shared workspace. */
    cov_lt_t gw2 = {.trans_b = 1, .m = COV_FFN, .n = COV_HID, .k = COV_TOK,
                    .a = a->h1, .a_rows = COV_FFN, .a_cols = COV_TOK, .lda = COV_FFN,
                    .b = dy, .b_rows = COV_HID, .b_cols = COV_TOK, .ldb = COV_HID,
                    .d = G.gw2, .ldd = COV_FFN, .alpha = 1.0f, .beta = 1.0f,
                    .epilogue = CUBLASLT_EPILOGUE_DEFAULT};
    cov_lt_matmul(G.lt, &gw2, G.lt_ws, LT_WS_BYTES, G.s0);

    /* dh1 = W2 dy (cublasSgemm_v2) with alpha and beta in device memory, written by a
     * kernel just before (alpha = 0.5 + 0.5) and changed by one just after: they must be
     * read when the GEMM runs, not when it is called. */
    cov_launch(L_RT, K_SUM, G.s0, G.scal, G.scal + 2, 2, 0.0f);
    cov_blas_prepare(h, G.s0, G.ws_bwd, BLAS_WS_BYTES);
    CK_BLAS(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_DEVICE));
    CK_BLAS(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, COV_FFN, COV_TOK, COV_HID, G.scal, G.w2,
                        COV_FFN, dy, COV_HID, G.scal + 1, dh1, COV_FFN));
    CK_BLAS(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST));
    cov_launch(L_RT, K_SCALE, G.s0, G.scal, G.scal + 2, 5.0f, 1);

    /* The "collectives" on their own stream, ordered by events both ways: the input
     * gradient all-reduced (tensor parallelism), and dy through a chain of every other
     * collective (over one rank each is a copy) whose result feeds the bias gradient.
     * Without --nccl, copy kernels stand in. */
    float *ca, *cb;
    CK_RT(cudaMallocAsync((void **)&ca, XN * sizeof(float), G.s0));
    CK_RT(cudaMallocAsync((void **)&cb, XN * sizeof(float), G.s0));
    CK_RT(cudaEventRecord(G.ev_ready[k], G.s0));
    CK_RT(cudaStreamWaitEvent(G.s_comm, G.ev_ready[k], 0));
    if (G.nccl) {
        cov_nccl_backward(dh1, dh1r, FN, dy, ca, cb, XN, G.s_comm);
    } else {
        cov_launch(L_CU_PTSZ, K_COPY, G.s_comm, dh1r, dh1, FN);
        cov_launch(L_CU_PTSZ, K_COPY, G.s_comm, cb, dy, XN);
    }
    /* Averaging over the ranks (one). */
    cov_launch(L_CUEX_PTSZ, K_SCALE, G.s_comm, dh1r, dh1r, 1.0f, FN);
    cov_launch(L_RT_PTSZ, K_SCALE, G.s_comm, dh1r, dh1r, 1.0f, FN);
    cov_launch(L_EXC_PTSZ, K_SCALE, G.s_comm, dh1r, dh1r, 1.0f, FN);
    cov_launch(L_KH_PTSZ, K_SCALE, G.s_comm, dh1r, dh1r, 1.0f, FN);
    /* ProcessGroupNCCL's Work: an event recorded after the collective and destroyed as
     * soon as the work is let go, often before the shim has issued the record. */
    {
        cudaEvent_t done;
        CK_RT(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
        CK_RT(cudaEventRecord(done, G.s_comm));
        CK_RT(cudaEventDestroy(done));
    }
    CK_RT(cudaEventRecordWithFlags(G.ev_comm[k], G.s_comm, cudaEventRecordDefault));
    CK_RT(cudaStreamWaitEvent(G.s0, G.ev_comm[k], 0));

    cov_launch(L_EXTRA, K_GELU_BWD, G.s0, dpre, dh1r, a->pre, FN);

    /* main_grad(W1) += x dpre^T: Megatron's gradient accumulation fusion, beta = 1. */
    {
        float alpha = 1.0f, beta = 1.0f;
        cov_blas_prepare(h, G.s0, G.ws_bwd, BLAS_WS_BYTES);
        CK_BLAS(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_T, COV_HID, COV_FFN, COV_TOK, &alpha,
                             a->x, CUDA_R_32F, COV_HID, dpre, CUDA_R_32F, COV_FFN, &beta,
                             G.gw1, CUDA_R_32F, COV_HID, CUBLAS_COMPUTE_32F,
                             CUBLAS_GEMM_DEFAULT));
        cov_scribble_f(&alpha, 0.25f);
        cov_scribble_f(&beta, 0.0f);
    }
    cov_launch(L_EXC, K_ROWSUM, G.s0, G.gb1, dpre, COV_FFN, COV_TOK);
    cov_launch(L_CUEX, K_ROWSUM, G.s0, G.gb2, cb, COV_HID, COV_TOK);

    /* With --tp2: tensor parallelism's all-reduce of a gradient (dpre, averaged over the
     * two ranks into dh1, which is dead by now), at the end of the backward and large
     * enough that running it beside the next forward pays: the planner pairs them. */
    if (G.tp2) {
        CK_RT(cudaEventRecord(G.ev_tp[k], G.s0));
        CK_RT(cudaStreamWaitEvent(G.s_comm, G.ev_tp[k], 0));
        cov_tp2_allreduce(dpre, dh1, FN, G.s_comm);
        CK_RT(cudaEventRecord(G.ev_tpd[k], G.s_comm));
        CK_RT(cudaStreamWaitEvent(G.s0, G.ev_tpd[k], 0));
        cov_launch(L_RT, K_ROWSUM, G.s0, G.gtp, dh1, COV_FFN, COV_TOK);
    }

    /* The end of this micro-batch: a host function, a copy the watchdog checks, the
     * event it polls. */
    G.marks_host[k] = cov_sentinel();
    CK_RT(cudaMemcpyAsync(&G.marks_host[k], G.losses + k, sizeof(float),
                          cudaMemcpyDeviceToHost, G.s0));
    CK_RT(cudaEventRecord(G.ev_end[k], G.s0));
    atomic_store_explicit(&G.published, k + 1, memory_order_release);

    CK_RT(cudaFreeAsync(a->x, G.s0));
    CK_RT(cudaFreeAsync(a->y, G.s0));
    CK_RT(cudaFreeAsync(a->tg, G.s0));
    CK_RT(cudaFreeAsync(dy, G.s0));
    CK_RT(cudaFreeAsync(dh1, G.s0));
    CK_RT(cudaFreeAsync(dh1r, G.s0));
    CK_RT(cudaFreeAsync(dpre, G.s0));
    CK_RT(cudaFreeAsync(ca, G.s0));
    CK_RT(cudaFreeAsync(cb, G.s0));
}

static void host_log(void *arg)
{
    if (G.hf_count < G.nk)
        G.hf_log[G.hf_count] = (int)(intptr_t)arg;
    G.hf_count++;
}

static void *backward_thread(void *arg)
{
    (void)arg;
    cublasHandle_t h;
    CK_RT(cudaSetDevice(0));
    CK_BLAS(cublasCreate(&h));
    pthread_mutex_lock(&G.mu);
    for (;;) {
        while (G.job == -1)
            pthread_cond_wait(&G.cv, &G.mu);
        int k = G.job;
        if (k == -2)
            break;
        pthread_mutex_unlock(&G.mu);
        backward(h, k / G.mbs, k % G.mbs);
        if (!G.tp2)
            CK_RT(cudaLaunchHostFunc(G.s0, host_log, (void *)(intptr_t)k));
        pthread_mutex_lock(&G.mu);
        G.job = -1;
        G.done = k;
        pthread_cond_broadcast(&G.cv);
    }
    pthread_mutex_unlock(&G.mu);
    cov_lt_thread_done();
    CK_BLAS(cublasDestroy(h));
    return NULL;
}

/* Hands micro-batch k (or -2: stop) to the backward thread and waits, as the main thread
 * waits for autograd. */
static void run_backward(int k)
{
    pthread_mutex_lock(&G.mu);
    G.job = k;
    pthread_cond_broadcast(&G.cv);
    while (k >= 0 && G.done != k)
        pthread_cond_wait(&G.cv, &G.mu);
    pthread_mutex_unlock(&G.mu);
}

/* ---- watchdog ---- */

static void *watchdog_thread(void *arg)
{
    (void)arg;
    int seen = 0;
    for (;;) {
        int stop = atomic_load_explicit(&G.wd_stop, memory_order_acquire);
        int pub = atomic_load_explicit(&G.published, memory_order_acquire);
        while (seen < pub) {
            cudaError_t q = cudaEventQuery(G.ev_end[seen]);
            if (q == cudaErrorNotReady)
                break;
            if (q != cudaSuccess) {
                fprintf(stderr, "coverage: watchdog: cudaEventQuery(end %d) returned %d\n",
                        seen, (int)q);
                G.wd_errors++;
            } else if (cov_bits(G.marks_host[seen]) == COV_SENTINEL) {
                fprintf(stderr, "coverage: watchdog: end event %d reported done before the "
                        "copy recorded ahead of it ran\n", seen);
                G.wd_violations++;
            }
            G.wd_observed++;
            seen++;
        }
        if (G.nccl)
            G.wd_errors += cov_nccl_async_errors();
        if (stop && seen >= pub)
            break;
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

/* Polls an event until it is done, as code that waits without blocking does. */
static void poll_event(cudaEvent_t e, int k)
{
    double t0 = cov_now_s();
    for (long n = 0;; n++) {
        cudaError_t q = cudaEventQuery(e);
        if (q == cudaSuccess)
            return;
        if (q != cudaErrorNotReady)
            cov_die(__LINE__, "cudaEventQuery(end %d) returned %d (%s)", k, (int)q,
                    cudaGetErrorName(q));
        if ((n & 1023) == 1023 && cov_now_s() - t0 > 20.0) {
            fprintf(stderr, "coverage: end event %d still not done after %ld queries and 20 s\n",
                    k, n);
            fflush(NULL);
            _exit(3);
        }
    }
}

/* ---- one iteration ---- */

/* Queues n small kernels on the compute stream, so that what is issued next stays queued
 * for a while if the shim defers (a blocking call that forgot to drain then overtakes it). */
static void queue_work(int n)
{
    for (int i = 0; i < n; i++)
        cov_launch(L_RT, K_SCALE, G.s0, G.busy, G.busy, 1.0f, BUSY_N);
}

/* Blocking copies in the middle of an iteration: reads of a result that the work issued
 * just before produces, and a write of a buffer that the work issued just before still
 * reads (runtime, then driver). */
/* A correct program that computes on a non-blocking stream synchronises it before a
 * blocking copy on the legacy stream; on the legacy stream the copy itself waits. */
static void before_blocking_copy(void)
{
    if (G.pool)
        CK_RT(cudaStreamSynchronize(G.s0));
}

static void mid_iteration(int it, int k)
{
    queue_work(32);
    cov_launch(L_RT, K_COPY, G.s0, G.snapdev, G.stats + (size_t)(k - 1) * HH, HH);
    before_blocking_copy();
    CK_RT(cudaMemcpy(G.snap + (size_t)it * HH, G.snapdev, HH * sizeof(float),
                     cudaMemcpyDeviceToHost));
    queue_work(32);
    cov_launch(L_RT, K_COPY, G.s0, G.mbseen + (size_t)it * 2 * COV_HID, G.mbconst, COV_HID);
    float v[COV_HID];
    for (int h = 0; h < COV_HID; h++)
        v[h] = -0.01f * (float)(h + 1) * (float)(it + 1);
    before_blocking_copy();
    CK_RT(cudaMemcpy(G.mbconst, v, sizeof(v), cudaMemcpyHostToDevice));
    queue_work(32);
    before_blocking_copy();
    CK_CU(cov_drv.memcpy_dtoh(G.snap_drv + (size_t)it * G.mbs,
                              (CUdeviceptr)(G.losses + (size_t)it * G.mbs),
                              (size_t)(k - it * G.mbs) * sizeof(float)));
    queue_work(32);
    cov_launch(L_RT, K_COPY, G.s0, G.mbseen + (size_t)it * 2 * COV_HID + COV_HID, G.mbconst,
               COV_HID);
    for (int h = 0; h < COV_HID; h++)
        v[h] *= 2.0f;
    before_blocking_copy();
    CK_CU(cov_drv.memcpy_htod((CUdeviceptr)G.mbconst, v, sizeof(v)));
}


/* Snapshots of the updated weights through temporaries: one copied on a stream made for
 * the purpose and destroyed at once, freed with cudaFree; one freed with cuMemFree. */
static void snapshot(int it)
{
    float *ta = NULL, *tb = NULL;
    float *dst = G.wsnap + (size_t)it * 2 * COV_HID * COV_FFN;
    size_t bytes = COV_HID * COV_FFN * sizeof(float);
    cudaStream_t st;
    cudaEvent_t before, after;
    CK_RT(cudaMalloc((void **)&ta, bytes));
    CK_RT(cudaMalloc((void **)&tb, bytes));
    CK_RT(cudaStreamCreate(&st));
    CK_RT(cudaEventCreateWithFlags(&before, cudaEventDisableTiming));
    CK_RT(cudaEventCreateWithFlags(&after, cudaEventDisableTiming));
    cov_launch(L_RT, K_SCALE, G.s0, ta, G.w1, 2.0f, COV_HID * COV_FFN);
    CK_RT(cudaEventRecord(before, G.s0));
    CK_RT(cudaStreamWaitEvent(st, before, 0));
    CK_CU(cov_drv.memcpy_async((CUdeviceptr)dst, (CUdeviceptr)ta, bytes, (CUstream)st));
    CK_RT(cudaEventRecord(after, st));
    CK_RT(cudaStreamWaitEvent(G.s0, after, 0));
    CK_RT(cudaStreamDestroy(st));
    CK_RT(cudaEventDestroy(before));
    CK_RT(cudaEventDestroy(after));
    CK_RT(cudaFree(ta));
    cov_launch(L_RT, K_SCALE, G.s0, tb, G.w2, 2.0f, COV_FFN * COV_HID);
    CK_RT(cudaMemcpyAsync(dst + COV_HID * COV_FFN, tb, bytes, cudaMemcpyDeviceToDevice, G.s0));
    CK_CU(cov_drv.mem_free((CUdeviceptr)tb));
}

static void iteration(int it, float *lr)
{
    CK_RT(cudaMemset(G.losses + it * G.mbs, 0, (size_t)G.mbs * sizeof(float)));
    set_mbconst(it);
    CK_RT(cudaEventRecord(G.ev_start[it], G.s0));
    for (int mb = 0; mb < G.mbs; mb++) {
        int k = it * G.mbs + mb;
        if (mb == G.mbs / 2 && mb > 0)
            mid_iteration(it, k);
        forward(it, mb);
        run_backward(k);
    }
    int last = it * G.mbs + G.mbs - 1;
    release_saved(last);
    poll_event(G.ev_end[last], last);
    for (int mb = 0; mb < G.mbs; mb++)
        G.marks_seen[it * G.mbs + mb] = G.marks_host[it * G.mbs + mb];
    CK_RT(cudaEventSynchronize(G.ev_end[last]));
    CK_CU(cov_drv.event_sync((CUevent)G.ev_end[last]));
    float ms = -1;
    CK_RT(cudaEventElapsedTime(&ms, G.ev_start[it], G.ev_end[last]));
    if (!(ms >= 0))
        cov_die(__LINE__, "cudaEventElapsedTime: %g ms", (double)ms);

    /* loss.item(): the value steers the optimizer. */
    cov_launch(L_RT, K_SUM, G.s0, G.loss_iter + it, G.losses + it * G.mbs, G.mbs, 0.0f);
    G.loss_host[it] = cov_sentinel();
    CK_RT(cudaMemcpyAsync(&G.loss_host[it], G.loss_iter + it, sizeof(float),
                          cudaMemcpyDeviceToHost, G.s0));
    CK_RT(cudaStreamSynchronize(G.s0));
    float loss = G.loss_host[it];
    G.loss_seen[it] = loss;
    *lr = 0.05f / (1.0f + loss);
    /* The same through the driver, on the side stream after it waited for the sum. */
    G.drv_host[it] = cov_sentinel();
    CK_RT(cudaEventRecord(G.ev_start[it], G.s0));
    CK_RT(cudaStreamWaitEvent(G.s_comm, G.ev_start[it], 0));
    CK_CU(cov_drv.memcpy_dtoh_async(&G.drv_host[it], (CUdeviceptr)(G.loss_iter + it),
                                    sizeof(float), (CUstream)G.s_comm));
    CK_CU(cov_drv.stream_sync((CUstream)G.s_comm));
    G.drv_seen[it] = G.drv_host[it];
    /* Pageable destination: returns when the copy is done. */
    CK_RT(cudaMemcpyAsync(G.losses_copy + it * G.mbs, G.losses + it * G.mbs,
                          (size_t)G.mbs * sizeof(float), cudaMemcpyDeviceToHost, G.s0));

    cov_launch(L_CU, K_SGD, G.s0, G.w1, G.gw1, *lr, COV_HID * COV_FFN);
    cov_launch(L_CU, K_SGD, G.s0, G.w2, G.gw2, *lr, COV_FFN * COV_HID);
    cov_launch(L_CU, K_SGD, G.s0, G.b1, G.gb1, *lr, COV_FFN);
    cov_launch(L_CU, K_SGD, G.s0, G.b2, G.gb2, *lr, COV_HID);
    CK_RT(cudaMemsetAsync(G.gw1, 0, COV_HID * COV_FFN * sizeof(float), G.s0));
    CK_RT(cudaMemsetAsync(G.gw2, 0, COV_FFN * COV_HID * sizeof(float), G.s0));
    CK_CU(cov_drv.memset_d8_async((CUdeviceptr)G.gb1, 0, COV_FFN * sizeof(float),
                                  (CUstream)G.s0));
    CK_RT(cudaMemsetAsync(G.gb2, 0, COV_HID * sizeof(float), G.s0));
    cov_blas_extra(G.h_main, G.s0, G.ws_main, BLAS_WS_BYTES, G.w1,
                   G.blas_out + (size_t)it * COV_BLAS_OUT);
    cov_sync_extra(G.s0, G.s_comm, G.w1, G.sync_out + (size_t)it * COV_SYNC_OUT);
    cov_sync_driver_paths(G.s0, G.w2, G.sync_out + (size_t)it * COV_SYNC_OUT + 129);
    cov_entry_extra(G.h_main, G.s0, G.ws_main, BLAS_WS_BYTES, G.w1,
                    G.entry_out + (size_t)it * COV_ENTRY_OUT);
    snapshot(it);
    cudaError_t q = cudaStreamQuery(G.s_comm);
    if (q != cudaSuccess && q != cudaErrorNotReady)
        cov_die(__LINE__, "cudaStreamQuery(comm) returned %d", (int)q);
    CUresult cq = cov_drv.stream_query((CUstream)G.s_comm);
    if (cq != CUDA_SUCCESS && cq != CUDA_ERROR_NOT_READY)
        cov_die(__LINE__, "cuStreamQuery(comm) returned %d", (int)cq);
    CK_CU(cov_drv.stream_sync_ptsz((CUstream)G.s_comm));
}

/* ---- setup, output, main ---- */

static void setup(void)
{
    G.nk = G.iters * G.mbs;
    if (G.pool)
        CK_RT(cudaStreamCreateWithFlags(&G.s0, cudaStreamNonBlocking));
    G.job = G.done = -1;
    G.w1 = cov_dev_alloc(COV_HID * COV_FFN);
    G.b1 = cov_dev_alloc(COV_FFN);
    G.w2 = cov_dev_alloc(COV_FFN * COV_HID);
    G.b2 = cov_dev_alloc(COV_HID);
    G.gw1 = cov_dev_alloc(COV_HID * COV_FFN);
    G.gw2 = cov_dev_alloc(COV_FFN * COV_HID);
    G.gb1 = cov_dev_alloc(COV_FFN);
    G.gb2 = cov_dev_alloc(COV_HID);
    G.mbconst = cov_dev_alloc(COV_HID);
    G.stats = cov_dev_alloc((size_t)G.nk * HH);
    G.hstats = cov_dev_alloc((size_t)G.nk * 128);
    G.wsnap = cov_dev_alloc((size_t)G.iters * 2 * COV_HID * COV_FFN);
    G.scal = cov_dev_alloc(4);
    G.busy = cov_dev_alloc(BUSY_N);
    G.actsum = cov_dev_alloc((size_t)G.nk);
    G.snapdev = cov_dev_alloc(HH);
    G.mbseen = cov_dev_alloc((size_t)G.iters * 2 * COV_HID);
    G.losses = cov_dev_alloc((size_t)G.nk);
    G.loss_iter = cov_dev_alloc((size_t)G.iters);
    G.decoy = cov_dev_alloc(FN);
    CK_RT(cudaMalloc(&G.lt_ws, LT_WS_BYTES));
    CK_RT(cudaMalloc(&G.ws_main, BLAS_WS_BYTES));
    CK_RT(cudaMalloc(&G.ws_bwd, BLAS_WS_BYTES));
    cov_upload(G.w1, COV_HID * COV_FFN, 1, 0.25f);
    cov_upload(G.b1, COV_FFN, 2, 0.1f);
    cov_upload(G.w2, COV_FFN * COV_HID, 3, 0.25f);
    cov_upload(G.b2, COV_HID, 4, 0.1f);
    CK_RT(cudaMemsetAsync(G.gw1, 0, COV_HID * COV_FFN * sizeof(float), G.s0));
    CK_RT(cudaMemsetAsync(G.gw2, 0, COV_FFN * COV_HID * sizeof(float), G.s0));
    CK_RT(cudaMemsetAsync(G.gb1, 0, COV_FFN * sizeof(float), G.s0));
    CK_RT(cudaMemsetAsync(G.gb2, 0, COV_HID * sizeof(float), G.s0));
    CK_RT(cudaMemset(G.stats, 0, (size_t)G.nk * HH * sizeof(float)));
    CK_RT(cudaMemset(G.hstats, 0, (size_t)G.nk * 128 * sizeof(float)));
    CK_RT(cudaMemset(G.decoy, 0, FN * sizeof(float)));
    CK_RT(cudaMemset(G.busy, 0, BUSY_N * sizeof(float)));
    CK_RT(cudaMemset(G.mbseen, 0, (size_t)G.iters * 2 * COV_HID * sizeof(float)));
    static const float scal[4] = {0.0f, 0.0f, 0.5f, 0.5f};
    CK_RT(cudaMemcpy(G.scal, scal, sizeof(scal), cudaMemcpyHostToDevice));
    CK_RT(cudaStreamCreateWithFlags(&G.s_comm, cudaStreamNonBlocking));
    G.ev_ready = cov_host_alloc((size_t)G.nk * sizeof(cudaEvent_t));
    G.ev_comm = cov_host_alloc((size_t)G.nk * sizeof(cudaEvent_t));
    G.ev_end = cov_host_alloc((size_t)G.nk * sizeof(cudaEvent_t));
    G.ev_start = cov_host_alloc((size_t)G.iters * sizeof(cudaEvent_t));
    for (int k = 0; k < G.nk; k++) {
        CK_RT(cudaEventCreateWithFlags(&G.ev_ready[k], cudaEventDisableTiming));
        CK_RT(cudaEventCreateWithFlags(&G.ev_comm[k], cudaEventDisableTiming));
        CK_RT(cudaEventCreate(&G.ev_end[k]));
    }
    for (int it = 0; it < G.iters; it++)
        CK_RT(cudaEventCreate(&G.ev_start[it]));
    CK_RT(cudaMallocHost((void **)&G.marks_host, (size_t)G.nk * sizeof(float)));
    CK_RT(cudaMallocHost((void **)&G.loss_host, (size_t)G.iters * sizeof(float)));
    CK_RT(cudaMallocHost((void **)&G.drv_host, (size_t)G.iters * sizeof(float)));
    G.stage = cov_host_alloc(XN * sizeof(float));
    G.tile = cov_host_alloc(4 * COV_TOK * sizeof(float));
    G.drv_seen = cov_host_alloc((size_t)G.iters * sizeof(float));
    G.snap_drv = cov_host_alloc((size_t)G.nk * sizeof(float));
    G.act = cov_host_alloc((size_t)G.nk * sizeof(act_t));
    G.marks_seen = cov_host_alloc((size_t)G.nk * sizeof(float));
    G.loss_seen = cov_host_alloc((size_t)G.iters * sizeof(float));
    G.snap = cov_host_alloc((size_t)G.iters * HH * sizeof(float));
    G.losses_copy = cov_host_alloc((size_t)G.nk * sizeof(float));
    G.hf_log = cov_host_alloc((size_t)G.nk * sizeof(int));
    G.blas_out = cov_host_alloc((size_t)G.iters * COV_BLAS_OUT * sizeof(float));
    G.sync_out = cov_host_alloc((size_t)G.iters * COV_SYNC_OUT * sizeof(float));
    G.entry_out = cov_host_alloc((size_t)(G.iters + (G.tp2 ? G.nk : 0)) * COV_ENTRY_OUT *
                                 sizeof(float));
    if (G.tp2) {
        G.rank = cov_tp2_setup(G.idfile);
        G.gtp = cov_dev_alloc(COV_FFN);
        CK_RT(cudaMemset(G.gtp, 0, COV_FFN * sizeof(float)));
        G.ev_tp = cov_host_alloc((size_t)G.nk * sizeof(cudaEvent_t));
        G.ev_tpd = cov_host_alloc((size_t)G.nk * sizeof(cudaEvent_t));
        for (int k = 0; k < G.nk; k++) {
            CK_RT(cudaEventCreateWithFlags(&G.ev_tp[k], cudaEventDisableTiming));
            CK_RT(cudaEventCreateWithFlags(&G.ev_tpd[k], cudaEventDisableTiming));
        }
    }
    CK_BLAS(cublasLtCreate(&G.lt));
    CK_BLAS(cublasCreate(&G.h_main));
    if (G.nccl)
        cov_nccl_setup(G.s_comm);
    cov_dev_init(G.decoy);
}

static void teardown(void)
{
    if (G.nccl)
        cov_nccl_teardown();
    if (G.tp2) {
        for (int k = 0; k < G.nk; k++) {
            CK_RT(cudaEventDestroy(G.ev_tp[k]));
            CK_RT(cudaEventDestroy(G.ev_tpd[k]));
        }
        free(G.ev_tp);
        free(G.ev_tpd);
        CK_RT(cudaFree(G.gtp));
        cov_tp2_teardown();
    }
    cov_lt_thread_done();
    CK_BLAS(cublasDestroy(G.h_main));
    CK_BLAS(cublasLtDestroy(G.lt));
    for (int k = 0; k < G.nk; k++) {
        CK_RT(cudaEventDestroy(G.ev_ready[k]));
        CK_RT(cudaEventDestroy(G.ev_comm[k]));
        CK_RT(cudaEventDestroy(G.ev_end[k]));
    }
    for (int it = 0; it < G.iters; it++)
        CK_RT(cudaEventDestroy(G.ev_start[it]));
    CK_RT(cudaStreamDestroy(G.s_comm));
    if (G.pool)
        CK_RT(cudaStreamDestroy(G.s0));
    float *dev[] = {G.w1, G.b1, G.w2, G.b2, G.gw1, G.gw2, G.gb1, G.gb2, G.mbconst,
                    G.stats, G.hstats, G.wsnap, G.scal, G.losses, G.loss_iter, G.decoy,
                    G.busy, G.snapdev, G.mbseen, G.actsum};
    for (size_t i = 0; i < sizeof(dev) / sizeof(dev[0]); i++)
        CK_RT(cudaFree(dev[i]));
    CK_RT(cudaFree(G.lt_ws));
    CK_RT(cudaFree(G.ws_main));
    CK_RT(cudaFree(G.ws_bwd));
    CK_RT(cudaFreeHost(G.marks_host));
    CK_RT(cudaFreeHost(G.loss_host));
    CK_RT(cudaFreeHost(G.drv_host));
    void *host[] = {G.ev_ready, G.ev_comm, G.ev_end, G.ev_start, G.stage, G.tile, G.act,
                    G.marks_seen, G.loss_seen, G.drv_seen, G.snap, G.snap_drv,
                    G.losses_copy, G.hf_log};
    for (size_t i = 0; i < sizeof(host) / sizeof(host[0]); i++)
        free(host[i]);
}

static void write_output(const char *out)
{
    char path[4200];
    snprintf(path, sizeof(path), G.tp2 ? "%s.%d" : "%s", out, G.rank);
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        cov_die(__LINE__, "cannot write %s", path);
    cov_emit_begin();
    fprintf(f, "dhelix-coverage 1 iters=%d mbs=%d nccl=%d stream=%s hid=%d ffn=%d tok=%d%s\n",
            G.iters, G.mbs, G.nccl, G.pool ? "pool" : "legacy", COV_HID, COV_FFN, COV_TOK,
            G.tp2 ? (G.rank ? " tp2 rank=1" : " tp2 rank=0") : "");
    cov_emit_dev(f, "w1", G.w1, COV_HID * COV_FFN);
    cov_emit_dev(f, "b1", G.b1, COV_FFN);
    cov_emit_dev(f, "w2", G.w2, COV_FFN * COV_HID);
    cov_emit_dev(f, "b2", G.b2, COV_HID);
    cov_emit_dev(f, "main_grad_w1", G.gw1, COV_HID * COV_FFN);
    cov_emit_dev(f, "stats", G.stats, (size_t)G.nk * HH);
    cov_emit_dev(f, "head_stats", G.hstats, (size_t)G.nk * 128);
    cov_emit_dev(f, "weight_snapshots", G.wsnap, (size_t)G.iters * 2 * COV_HID * COV_FFN);
    cov_emit_dev(f, "device_scalars", G.scal, 4);
    cov_emit_dev(f, "constants_seen", G.mbseen, (size_t)G.iters * 2 * COV_HID);
    cov_emit_dev(f, "activation_sums", G.actsum, (size_t)G.nk);
    cov_emit_dev(f, "losses", G.losses, (size_t)G.nk);
    cov_emit_dev(f, "decoy", G.decoy, FN);
    cov_emit(f, "loss_item", G.loss_seen, (size_t)G.iters * sizeof(float));
    cov_emit(f, "loss_item_driver", G.drv_seen, (size_t)G.iters * sizeof(float));
    cov_emit(f, "losses_pageable", G.losses_copy, (size_t)G.nk * sizeof(float));
    cov_emit(f, "marks_after_poll", G.marks_seen, (size_t)G.nk * sizeof(float));
    cov_emit(f, "blocking_d2h", G.snap, (size_t)G.iters * HH * sizeof(float));
    cov_emit(f, "blocking_d2h_driver", G.snap_drv, (size_t)G.nk * sizeof(float));
    cov_emit(f, "cublas_forwarded", G.blas_out, (size_t)G.iters * COV_BLAS_OUT * sizeof(float));
    cov_emit(f, "runtime_driver_forwarded", G.sync_out,
             (size_t)G.iters * COV_SYNC_OUT * sizeof(float));
    cov_emit(f, "generated_drain_forwarded", G.entry_out,
             (size_t)(G.iters + (G.tp2 ? G.nk : 0)) * COV_ENTRY_OUT * sizeof(float));
    if (G.tp2)
        cov_emit_dev(f, "tp_allreduced_grad", G.gtp, COV_FFN);
    cov_emit(f, "host_func_order", G.hf_log, (size_t)G.nk * sizeof(int));
    cov_emit(f, "host_func_count", &G.hf_count, sizeof(int));
    cov_emit(f, "watchdog_violations", &G.wd_violations, sizeof(int));
    cov_emit(f, "watchdog_errors", &G.wd_errors, sizeof(int));
    fprintf(f, "checksum fnv1a64=%016llx\n", (unsigned long long)cov_emit_sum());
    if (fclose(f) != 0)
        cov_die(__LINE__, "cannot write %s", path);
    printf("coverage: wrote %s, fnv1a64=%016llx\n", path, (unsigned long long)cov_emit_sum());
}

/* What must hold in any correct run; a failure is reported and turns into exit 4. */
static int self_check(void)
{
    int bad = 0;
    for (int k = 0; k < G.nk; k++) {
        if (cov_bits(G.marks_seen[k]) == COV_SENTINEL) {
            fprintf(stderr, "coverage: micro-batch %d: its end event was done before the copy "
                    "recorded ahead of it ran\n", k);
            bad = 1;
        }
        if (k < G.hf_count && G.hf_log[k] != k) {
            fprintf(stderr, "coverage: host function %d ran as number %d: expected %d\n",
                    G.hf_log[k], k, k);
            bad = 1;
        }
    }
    if (G.hf_count != G.nk) {
        fprintf(stderr, "coverage: %d host functions ran, expected %d\n", G.hf_count, G.nk);
        bad = 1;
    }
    for (int it = 0; it < G.iters; it++) {
        if (!isfinite(G.loss_seen[it]) || cov_bits(G.loss_seen[it]) != cov_bits(G.drv_seen[it])) {
            fprintf(stderr, "coverage: iteration %d: loss.item() read %g (bits %08x) through "
                    "the runtime, %g (bits %08x) through the driver\n", it,
                    (double)G.loss_seen[it], cov_bits(G.loss_seen[it]), (double)G.drv_seen[it],
                    cov_bits(G.drv_seen[it]));
            bad = 1;
        }
    }
    if (G.wd_violations || G.wd_errors || G.wd_observed != G.nk) {
        fprintf(stderr, "coverage: watchdog: %d violations, %d errors, %d of %d events seen\n",
                G.wd_violations, G.wd_errors, G.wd_observed, G.nk);
        bad = 1;
    }
    return bad;
}

static int usage(void)
{
    fprintf(stderr, "usage: coverage --out PATH [--iters N] [--mbs N] [--nccl] "
                    "[--stream legacy|pool] [--tp2 IDFILE] [--timeout S]\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *out = NULL;
    int timeout = 60;
    cov_fatal_report();
    G.iters = 2;
    G.mbs = 4;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--out") == 0 && i + 1 < argc)
            out = argv[++i];
        else if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc)
            G.iters = atoi(argv[++i]);
        else if (strcmp(argv[i], "--mbs") == 0 && i + 1 < argc)
            G.mbs = atoi(argv[++i]);
        else if (strcmp(argv[i], "--timeout") == 0 && i + 1 < argc)
            timeout = atoi(argv[++i]);
        else if (strcmp(argv[i], "--nccl") == 0)
            G.nccl = 1;
        else if (strcmp(argv[i], "--tp2") == 0 && i + 1 < argc)
            G.idfile = argv[++i], G.tp2 = 1;
        else if (strcmp(argv[i], "--stream") == 0 && i + 1 < argc &&
                 (strcmp(argv[i + 1], "legacy") == 0 || strcmp(argv[i + 1], "pool") == 0))
            G.pool = strcmp(argv[++i], "pool") == 0;
        else
            return usage();
    }
    if (out == NULL || (G.tp2 && G.nccl) || G.iters < 1 || G.iters > 64 || G.mbs < 1 || G.mbs > 64 || timeout < 1)
        return usage();
    alarm((unsigned)timeout);
    CK_RT(cudaSetDevice(0));
    setup();
    pthread_t bwd, wd;
    if (pthread_create(&bwd, NULL, backward_thread, NULL) != 0 ||
        pthread_create(&wd, NULL, watchdog_thread, NULL) != 0)
        cov_die(__LINE__, "pthread_create failed");
    float lr = 0;
    for (int it = 0; it < G.iters; it++)
        iteration(it, &lr);
    run_backward(-2);
    pthread_join(bwd, NULL);
    CK_CU(cov_drv.ctx_sync());
    CK_RT(cudaDeviceSynchronize());
    atomic_store_explicit(&G.wd_stop, 1, memory_order_release);
    pthread_join(wd, NULL);
    write_output(out);
    int bad = self_check();
    teardown();
    cov_sync_reset();
    return bad ? 4 : 0;
}
