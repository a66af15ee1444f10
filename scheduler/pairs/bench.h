/*
 * bench.h: the measurements of dhelix-pairs, with the real CUDA runtime, cuBLAS and NCCL
 * (on a GPU, or on the vgpu when scripts/vgpu-run puts it in front).
 *
 * One measurement: every rank passes an NCCL barrier on the gate stream, then a gate (an
 * op of known length on that stream: a registered no-op kernel with a declared cost on the
 * vgpu, cuBLAS GEMMs on a GPU), then records the start event; the op(s) under test wait on
 * that event on their own non-blocking streams, so they start together when the gate ends
 * and none of the host's launch time is measured. The time is the span from the start
 * event to the last end event. If the start event had already completed when the host had
 * issued everything, the gate was too short: the repetition is discarded and the gate
 * doubled. On a GPU the ranks agree on that, and take the largest time over the ranks,
 * through NCCL. On the vgpu the question is answered in virtual time (the host clock after
 * the launches against the start event's time), which every rank computes alike, so no
 * data needs to move (in timing-only mode NCCL moves none). A measurement is the median of
 * the repetitions after warm-up.
 *
 * Errors: functions returning int give 0, or -1 after printing one line to stderr.
 */
#ifndef DH_OVL_BENCH_H
#define DH_OVL_BENCH_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "pairs.h"
#include "rdv.h"

typedef struct dh_ovl_bench {
    int rank, nranks, device;
    int vgpu;                   /* the vgpu is in front (vgpu_register_kernel resolves) */
    int gate_gemm;              /* the gate is cuBLAS GEMMs (a GPU, or asked for) */
    int data_moves;             /* 0 on the vgpu in timing-only mode: NCCL moves no data */
    double (*vg_host_ns)(void); /* the vgpu's host clock (vgpu_host_time_ns), else NULL */
    char device_name[256];
    cudaStream_t gate_s, s[2];  /* non-blocking; s[slot] carries the op in that slot */
    cublasHandle_t h[2];        /* one per slot: concurrent GEMMs never share a workspace */
    void *ws[2];                /* their workspaces */
    cublasHandle_t gate_h;
    ncclComm_t comm;            /* all ranks of the run */
    cudaEvent_t start, end[2];
    float *xbuf;                /* device, 16 floats: [0, 4) agreement, [8] barrier */
    double gate_us;             /* current gate length */
    double gate_gemm_us;        /* GPU: one gate GEMM, measured */
    void *gate_buf[3];          /* GPU: the gate GEMM's operands */
    int reps, warmup;
    int retries;                /* repetitions redone because the gate ended too early */
} dh_ovl_bench_t;

/* Selects the device (local rank modulo the count), creates streams, handles, events and
 * the communicator over every rank from id, and sizes the gate. gate_gemm: gate with GEMMs
 * on the vgpu too (the GPU's way, so that it is tested without one); gate_us: the first
 * gate's length. */
int dh_ovl_bench_init(dh_ovl_bench_t *b, const dh_ovl_world_t *w, const ncclUniqueId *id,
                      int reps, int warmup, int gate_gemm, double gate_us);
/* Allocates and zeroes op's buffers for instance inst (0; 1 for a GEMM co-run with itself). */
int dh_ovl_bench_prepare(dh_ovl_bench_t *b, dh_ovl_op_t *op, int inst);
/* Times op a alone (b_op NULL) or a and b_op co-running (a on slot 0, b_op on slot 1; the
 * communication op is issued first). *us: median over the repetitions. Collective: every
 * rank must make the same calls in the same order. */
int dh_ovl_measure(dh_ovl_bench_t *b, dh_ovl_op_t *a, dh_ovl_op_t *b_op, double *us);
/* Frees op buffers of the selection and everything init made. */
void dh_ovl_bench_fini(dh_ovl_bench_t *b, dh_ovl_sel_t *sel);

/* launch.c: issue op (instance inst) on stream slot; the gate on the gate stream. */
int dh__ovl_launch(dh_ovl_bench_t *b, dh_ovl_op_t *op, int slot, int inst);
int dh__ovl_gate(dh_ovl_bench_t *b);
/* Sets up the gate: registers the vgpu's gate kernel, or allocates and times the GEMM. */
int dh__ovl_gate_init(dh_ovl_bench_t *b);
void dh__ovl_free_op(dh_ovl_op_t *op);

/* Prints "dhelix-pairs[rank]: file:line: what failed: why" and returns -1. */
int dh__ovl_fail(const dh_ovl_bench_t *b, const char *file, int line, const char *what,
                 const char *why);
const char *dh__ovl_cublas_str(cublasStatus_t st);

#define DH__CUDA(b, call)                                                                   \
    do {                                                                                    \
        cudaError_t dh__e_ = (call);                                                        \
        if (dh__e_ != cudaSuccess)                                                          \
            return dh__ovl_fail((b), __FILE__, __LINE__, #call, cudaGetErrorString(dh__e_)); \
    } while (0)
#define DH__BLAS(b, call)                                                                   \
    do {                                                                                    \
        cublasStatus_t dh__e_ = (call);                                                     \
        if (dh__e_ != CUBLAS_STATUS_SUCCESS)                                                \
            return dh__ovl_fail((b), __FILE__, __LINE__, #call, dh__ovl_cublas_str(dh__e_)); \
    } while (0)
#define DH__NCCL(b, call)                                                                   \
    do {                                                                                    \
        ncclResult_t dh__e_ = (call);                                                       \
        if (dh__e_ != ncclSuccess)                                                          \
            return dh__ovl_fail((b), __FILE__, __LINE__, #call, ncclGetErrorString(dh__e_)); \
    } while (0)

#endif
