/*
 * synth.h: synthetic profiles of a Megatron-shaped training loop, for the planner's tests.
 *
 * One iteration: for each micro-batch m, its forward F(m) on thread 0, then its backward
 * B(m) on thread 1 (PyTorch's autograd thread); then the optimizer on thread 0. The next
 * iteration's first op follows a host synchronisation (loss.item()). Per layer, forward and
 * backward ops follow fixed patterns (norm, tensor-parallel all-gather, GEMMs, attention,
 * reduce-scatter, events, copies; backward frees what forward allocated), so signatures
 * repeat per layer, micro-batch and iteration. Ops run back to back on one timeline.
 */
#ifndef DH_TEST_SYNTH_H
#define DH_TEST_SYNTH_H

#include "plan.h"

typedef struct dh_synth {
    int layers;
    int mb;               /* micro-batches per iteration */
    int iters;
    int fwd_per_layer;    /* forward ops per layer (the pattern repeats) */
    int bwd_per_layer;
    int moe_sync_mb;      /* forward of this micro-batch has a sync in layer 0; -1 none, -2
                             every micro-batch's (MoE routing in every forward) */
    int sync_first_mb;    /* forward of this micro-batch starts with a sync; -1 none */
    int dyn_shape;        /* 1: op 2 of F(0) changes shape every iteration */
    int warmup_ops;       /* extra ops at the start of the first iteration */
    int variant;          /* 1: op 2 of F(1) has another signature (another program) */
    int no_times;         /* 1: every us and start_us is -1 */
    int data_copy;        /* 1: each forward starts with an H2D copy (what rank 0 does) */
    unsigned jitter;      /* != 0: op times vary by up to +-30 %, seeded by it */
    int no_comm;          /* 1: collectives and copies are compute kernels of the same time
                             (one GPU, nothing to hide) */
    int rank, world;
} dh_synth_t;

/* layers 2, mb 3, iters 4, 16 forward and 24 backward ops per layer, no extras, rank 0 of 1. */
void dh_synth_defaults(dh_synth_t *s);

/* A new profile (free with dh_profile_free); NULL when out of memory. */
dh_profile_t *dh_synth_profile(const dh_synth_t *s);

/* Ops per iteration (without warm-up ops), and the number of optimizer ops in it. */
size_t dh_synth_iter_ops(const dh_synth_t *s);
#define DH_SYNTH_OPT_OPS 5

#endif
