/*
 * nvtx.h: what the dispatcher tells a profiler (Nsight Systems, or the vgpu's trace)
 * through NVTX 3, so that a timeline shows what Strand Interleaving did:
 *   - the physical streams of a framework stream that pairs are named "dhelix strand a"
 *     (strand 0: the framework's own stream, which strand a runs on) and "dhelix strand b"
 *     (strand 1: the stream the shim made);
 *   - every co-execution group whose two strands both issue work is a range "dhelix pair G
 *     (a N || b M)" (G the plan's group, N and M its ops per strand) on the dispatcher
 *     thread, from its first op to the last op or barrier before the next group;
 *   - auto mode's phases are ranges ("dhelix auto: profiling", "dhelix auto: strand
 *     interleaving", "dhelix auto: program order") with a mark at each switch;
 *   - the dispatcher thread is named "dhelix dispatcher".
 * Everything is in the NVTX domain "dhelix". With no tool attached (NVTX_INJECTION64_PATH
 * unset) NVTX itself answers every call with nothing; this file asks once and afterwards
 * each function below costs one load and a branch, and formats no text.
 * Without the NVTX headers at build time (DH_HAVE_NVTX 0) every function is that branch.
 */
#ifndef DH_NVTX_H
#define DH_NVTX_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#include "dispatch_int.h"

/* Names the two physical streams of a framework stream (a, its strand-1 stream b) once b
 * exists. a is not named when it is a default stream (legacy or per-thread): those are
 * every library's. Any thread; lock NOT held (a tool may call back into CUDA). */
void dh__nvtx_name_strands(cudaStream_t a, cudaStream_t b);

/* Dispatcher thread, lock NOT held, before a batch is replayed: the mode in effect (the
 * scheduler's dh__s.mode) and whether the job runs auto mode; opens auto mode's phase
 * range on a change. */
void dh__nvtx_mode(int mode, int is_auto);

/* Dispatcher thread, lock NOT held, before item i of b is replayed: opens a pair range
 * where a paired group starts, closes the previous one where it ends. b's items i.. must
 * be alive (not yet retired). */
void dh__nvtx_item(const dh_batch_t *b, size_t i);

/* Dispatcher thread, lock NOT held: the batch is replayed; closes an open pair range. */
void dh__nvtx_batch_end(void);

/* Dispatcher thread, at its start: names it, and asks NVTX once whether a tool listens. */
void dh__nvtx_thread_start(void);
/* Dispatcher thread, as it ends: closes the ranges still open. */
void dh__nvtx_thread_stop(void);

#endif
