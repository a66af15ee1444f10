/*
 * wl.h: what every part of the Megatron-shaped reference workload shares.
 *
 * The workload is a training program written the way PyTorch + Megatron-LM drive a GPU
 * (REFERENCE.md): it knows nothing about the DHelix shim. It runs on the vgpu (the CPU
 * device in tests/vgpu) when the vgpu libraries are preloaded, and on a real GPU otherwise.
 * Names start with wl_ (the workload is a stand-in for an outside framework, so it keeps
 * out of the project's dh_ namespace, as the vgpu keeps to vg_).
 *
 * Files: cli.c (options), presets.c (the paper's configurations), parallel.c (Megatron's
 * rank order and process groups), comm.c (ProcessGroupNCCL-style collectives, watchdog),
 * blas.c (cuBLAS/cuBLASLt as PyTorch calls them), kernels*.c (host kernels for the vgpu,
 * their launches), model.c (parameters), layers.c (transformer layer), attention.c (core
 * attention and the context-parallel ring), head.c (embedding and loss), moe.c (experts),
 * optimizer.c (gradient buffers, data-parallel reduction, Adam), schedule.c (1F1B and the
 * backward thread), train.c (main), report.c (FLOPs, MFU, JSON).
 */
#ifndef WL_H
#define WL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "kargs.h"

/* Fails the whole job (every rank) with the call, where and the status. CUDA, cuBLAS and
 * NCCL all report success as 0. */
void wl_die(const char *file, int line, const char *what, long code) __attribute__((noreturn));
#define WL_CK(x)                                                                          \
    do {                                                                                  \
        long wl_rc_ = (long)(x);                                                          \
        if (wl_rc_) wl_die(__FILE__, __LINE__, #x, wl_rc_);                               \
    } while (0)
/* A failed program invariant: message and abort (all ranks). */
void wl_fatal(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

typedef enum { WL_GPT = 0, WL_LLAMA = 1 } wl_arch_t;

/* Model shape: Megatron's arguments of the same names. */
typedef struct wl_model {
    char name[32];
    wl_arch_t arch;
    int layers, hidden, heads, kv_heads, ffn, vocab, seq;
    int experts, topk; /* experts == 0: dense MLP */
} wl_model_t;

/* Everything a run is configured with (cli.c fills it, presets.c can preset it). */
typedef struct wl_cfg {
    wl_model_t m;
    char preset[48];
    int tp, pp, dp, cp, ep;
    int mbs, gbs, iters;
    int sp;             /* sequence parallelism (default: on when tp > 1) */
    int dtype;          /* WL_DT_BF16 or WL_DT_F32 */
    int timing_only;    /* set from the vgpu (VGPU_TIMING_ONLY=1) */
    int represent;      /* representative ranks: one process per pp x cp x ep peer */
    int dist_opt;       /* distributed optimizer (shards over the dp x cp group) */
    int overlap_grad;   /* --overlap-grad-reduce */
    int nccl_current;   /* collectives on the current stream (newer PyTorch) */
    int comm_split;     /* communicators by ncclCommSplit of the world */
    int vpp;            /* virtual stages per pipeline rank (Megatron's --num-virtual-stages-
                           per-pipeline-rank); > 1: the interleaved 1F1B (schedule_vpp.c) */
    int overlap_p2p;    /* Megatron's overlap_p2p_comm (default on for the interleaved
                           schedule; --no-overlap-p2p-communication turns it off) */
    int init_per_param; /* initial weights copied one parameter at a time, each followed by
                           a stream synchronisation, as PyTorch's model.to("cuda") after a
                           host-side init does: the program's first operations repeat */
    int p2p_sync;       /* Megatron's batch_p2p_sync (default True, no command-line flag in
                           Megatron): torch.cuda.synchronize() after every batched pipeline
                           exchange; --no-batch-p2p-sync leaves it out, as a config can */
    int json;           /* JSON summary on stdout */
    int quiet;          /* no per-iteration lines */
    int gradcheck;      /* finite-difference checks of this many parameters (fp32) */
    int bucket_mb;      /* DDP bucket size in millions of elements */
    double lr;
    unsigned seed;
    char device_profile[64];
    double paper_tflops; /* Megatron baseline from the paper, 0 when none */
    double peak_tflops;  /* override of the device's dense bf16 peak */
    char emulate_comm[32]; /* --emulate-comm (emucomm.h), "" when off */
} wl_cfg_t;

/* ---- runtime state shared by the parts ---- */

struct wl_ps;
struct wl_model_state;
struct wl_opt;

/* The current stream of the calling thread (PyTorch's getCurrentCUDAStream): the legacy
 * default stream unless a thread set another. */
cudaStream_t wl_cur_stream(void);
void wl_set_cur_stream(cudaStream_t s);

/* Stream-ordered tensors, as PyTorch's cudaMallocAsync backend makes them: allocated and
 * freed on the current stream. wl_alloc never returns NULL for bytes > 0. */
void *wl_alloc(size_t bytes);
void wl_free(void *p);
/* Element size of a workload dtype. */
static inline size_t wl_dt_size(int dt) { return dt == WL_DT_F32 ? 4 : 2; }

/* Host-side conversions for values read back and initial weights. */
float wl_bf16_to_f32(uint16_t h);
uint16_t wl_f32_to_bf16(float f);

/* Deterministic hash-based uniform in [-1, 1): same (seed, index) gives the same value on
 * every rank and every parallel layout (the model is initialised by global element). */
float wl_hash_uniform(uint64_t seed, uint64_t index);

int wl_gcd(int a, int b);

#endif
