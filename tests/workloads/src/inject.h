/*
 * inject.h: divergence injection (WL_INJECT), for testing how a shim that follows a
 * recorded operation template copes with a program that changes under it.
 *
 *   WL_INJECT=none | SPEC[,SPEC...]   SPEC: KIND@ITER[:RANK][/POINT]
 *   KIND: extra | missing | shape | sync | query; ITER: 0-based iteration; RANK: the global
 *   rank that diverges (every rank without it); POINT: where in the iteration (fwd without
 *   it):
 *     first  before the iteration's first op (no scratch op here; missing is refused)
 *     start  right after the iteration's first op (its timing event)
 *     fwd0   after the first layer of the first micro-batch's forward (the warm-up)
 *     fwd    after the first layer of the second micro-batch's forward, the first's when
 *            there is only one (paired with the first backward in Strand Interleaving)
 *     bwd    after the first layer backward of the first micro-batch (the backward thread)
 *     end    after the optimizer step, before the loss is reduced and read
 *
 * With WL_INJECT set (any kind), every iteration issues one harmless scratch op at each
 * point but first (a 4 KiB cudaMemsetAsync of a private buffer per point on the current
 * stream). At the spec's point of iteration ITER: `extra` issues one more memset (of
 * another private buffer) right after it, `missing` skips it, `shape` issues it with half
 * the size, `sync` synchronises the stream after it (a host synchronisation), `query`
 * issues the extra memset and then queries the stream (cudaStreamQuery, as a logging rank
 * that polls). At first, every kind issues its divergent ops alone. `none` never injects:
 * the program with the scratch ops, for runs to compare against. Nothing the scratch ops
 * write is ever read, so losses do not depend on WL_INJECT; unset, the program issues
 * nothing extra.
 */
#ifndef WL_INJECT_H
#define WL_INJECT_H

/* The points, in the order they come in an iteration (bwd interleaves with fwd). */
enum { WL_INJ_FIRST, WL_INJ_START, WL_INJ_FWD0, WL_INJ_FWD, WL_INJ_BWD, WL_INJ_END,
       WL_INJ_NPOINTS };

/* Reads WL_INJECT once and allocates the scratch buffers (cudaMalloc). A malformed value
 * is fatal. rank: this process's global rank. Call after the device is set, from the main
 * thread. */
void wl_inject_init(int rank);

/* The start of iteration iter, before its first op (main thread): the point `first`. */
void wl_inject_begin(int iter);

/* Point `point` (not first) of the iteration begun last, in micro-batch mb (0-based) of M:
 * issues the scratch op (or its divergent form) on the current stream the first time the
 * point is reached in the iteration, where mb is the point's micro-batch; else nothing.
 * Callable from the backward thread (bwd) while the main thread waits for it. */
void wl_inject_point(int point, int mb, int M);

/* Frees the scratch buffers. */
void wl_inject_fini(void);

#endif
