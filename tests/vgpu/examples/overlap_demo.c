/*
 * overlap_demo.c: what strand interleaving buys, shown by hand on the vgpu.
 *
 * Each rank runs M micro-batches of a tensor-parallel row-parallel layer: a bf16 GEMM
 * (cublasGemmEx, fp32 accumulate) followed by an all-reduce of its fp32 output over the
 * ranks (ncclAllReduce). The baseline issues everything on one stream, so every
 * all-reduce waits for its GEMM and the next GEMM waits for the all-reduce. The
 * interleaved run alternates micro-batches between two streams, so the all-reduce of
 * micro-batch i runs under the GEMM of i+1: the overlap the DHelix shim will arrange for an
 * unmodified program. Both runs' outputs are compared bit for bit.
 *
 * Usage: mpirun -n R overlap_demo [--microbatches M] [--tokens T] [--hidden H] [--trace P]
 * Prints: exact: yes|NO, the two iteration times in virtual microseconds, the speedup.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#define CK(x)                                                                           \
    do {                                                                                \
        long _e = (long)(x);                                                            \
        if (_e) {                                                                       \
            fprintf(stderr, "%s:%d: %s failed (%ld)\n", __FILE__, __LINE__, #x, _e);    \
            MPI_Abort(MPI_COMM_WORLD, 1);                                               \
        }                                                                               \
    } while (0)

typedef struct demo {
    int rank, nranks, m, tokens, hidden;
    ncclComm_t comm;
    cublasHandle_t blas;
    uint16_t *x, *w; /* bf16 inputs */
    float *y;        /* M outputs, tokens x hidden each */
} demo_t;

static uint16_t to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

/* One micro-batch: y_i = x_i * w (bf16 in, fp32 out), then all-reduce y_i. */
static void layer(demo_t *d, int i, cudaStream_t s)
{
    const float one = 1.0f, zero = 0.0f;
    size_t tok = (size_t)d->tokens, h = (size_t)d->hidden;
    CK(cublasSetStream(d->blas, s));
    CK(cublasGemmEx(d->blas, CUBLAS_OP_N, CUBLAS_OP_N, d->hidden, d->tokens, d->hidden, &one,
                    d->w, CUDA_R_16BF, d->hidden, d->x + (size_t)i * tok * h, CUDA_R_16BF,
                    d->hidden, &zero, d->y + (size_t)i * tok * h, CUDA_R_32F, d->hidden,
                    CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    CK(ncclAllReduce(d->y + (size_t)i * tok * h, d->y + (size_t)i * tok * h, tok * h, ncclFloat,
                     ncclSum, d->comm, s));
}

/* Runs all micro-batches on nstreams streams; returns the elapsed virtual time in us. */
static double run(demo_t *d, cudaStream_t *st, int nstreams)
{
    cudaEvent_t a, b, join;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    CK(cudaEventCreate(&join));
    CK(cudaMemset(d->y, 0, sizeof(float) * (size_t)d->m * d->tokens * d->hidden));
    MPI_Barrier(MPI_COMM_WORLD);
    CK(cudaEventRecord(a, st[0]));
    for (int k = 1; k < nstreams; k++) {
        CK(cudaStreamWaitEvent(st[k], a, 0));
    }
    for (int i = 0; i < d->m; i++) {
        layer(d, i, st[i % nstreams]);
    }
    for (int k = 1; k < nstreams; k++) {
        CK(cudaEventRecord(join, st[k]));
        CK(cudaStreamWaitEvent(st[0], join, 0));
    }
    CK(cudaEventRecord(b, st[0]));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    cudaEventDestroy(join);
    return ms * 1e3;
}

static void parse(int argc, char **argv, demo_t *d, const char **trace)
{
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--microbatches")) d->m = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--tokens")) d->tokens = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--hidden")) d->hidden = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--trace")) *trace = argv[i + 1];
        else {
            fprintf(stderr, "unknown option %s\n", argv[i]);
            exit(2);
        }
    }
    if (d->m < 2 || d->tokens < 1 || d->hidden < 1) {
        fprintf(stderr, "need --microbatches >= 2 and positive sizes\n");
        exit(2);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    demo_t d = {.m = 8, .tokens = 512, .hidden = 512};
    const char *trace = NULL;
    parse(argc, argv, &d, &trace);
    MPI_Comm_rank(MPI_COMM_WORLD, &d.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &d.nranks);
    CK(cudaSetDevice(0));
    ncclUniqueId id;
    if (d.rank == 0) CK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    CK(ncclCommInitRank(&d.comm, d.nranks, id, d.rank));
    CK(cublasCreate(&d.blas));

    size_t per = (size_t)d.tokens * d.hidden, wn = (size_t)d.hidden * d.hidden;
    uint16_t *hx = malloc(per * d.m * 2), *hw = malloc(wn * 2);
    for (size_t i = 0; i < per * d.m; i++) hx[i] = to_bf16((float)((i * 7 + d.rank * 13) % 17) / 16 - 0.5f);
    for (size_t i = 0; i < wn; i++) hw[i] = to_bf16((float)((i * 5) % 11) / 10 - 0.5f);
    CK(cudaMalloc((void **)&d.x, per * d.m * 2));
    CK(cudaMalloc((void **)&d.w, wn * 2));
    CK(cudaMalloc((void **)&d.y, per * d.m * sizeof(float)));
    CK(cudaMemcpy(d.x, hx, per * d.m * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d.w, hw, wn * 2, cudaMemcpyHostToDevice));

    cudaStream_t st[2];
    CK(cudaStreamCreateWithFlags(&st[0], cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&st[1], cudaStreamNonBlocking));
    float *base = malloc(per * d.m * sizeof(float)), *si = malloc(per * d.m * sizeof(float));
    double t_base = run(&d, st, 1);
    CK(cudaMemcpy(base, d.y, per * d.m * sizeof(float), cudaMemcpyDeviceToHost));
    double t_si = run(&d, st, 2);
    CK(cudaMemcpy(si, d.y, per * d.m * sizeof(float), cudaMemcpyDeviceToHost));

    int exact = !memcmp(base, si, per * d.m * sizeof(float)), all = 0;
    MPI_Allreduce(&exact, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (d.rank == 0) {
        printf("ranks: %d, micro-batches: %d, layer: %dx%d bf16 GEMM + fp32 all-reduce\n",
               d.nranks, d.m, d.tokens, d.hidden);
        printf("exact: %s\n", all ? "yes" : "NO");
        printf("baseline (one stream):        %10.1f us\n", t_base);
        printf("interleaved (two streams):    %10.1f us\n", t_si);
        printf("speedup: %.3fx\n", t_base / t_si);
        if (trace) printf("trace: %s\n", trace);
    }
    ncclCommDestroy(d.comm);
    cublasDestroy(d.blas);
    MPI_Finalize();
    return all ? 0 : 1;
}
