/*
 * inject.h: divergence injection (WL_INJECT), for testing how a shim that follows a
 * recorded operation template copes with a program that changes under it.
 *
 *   WL_INJECT=none | SPEC[,SPEC...]   SPEC: KIND@ITER[:RANK]
 *   KIND: extra | missing | shape | sync | query; ITER: 0-based iteration; RANK: the global
 *   rank that diverges (every rank without it)
 *
 * With WL_INJECT set (any kind), every iteration issues one harmless scratch op in the
 * middle of the iteration (a cudaMemsetAsync of a private buffer on the current stream, in
 * the forward of the second micro-batch, the first when there is one, right after its
 * first layer). In iteration ITER: `extra` issues one more memset (of another private
 * buffer) right after it, `missing` skips it, `shape` issues it with half the size, `sync`
 * synchronises the stream after it (a host synchronisation), `query` issues the extra memset
 * and then queries the stream (cudaStreamQuery). `none`
 * never injects: the program with the scratch op, for runs to compare against. Nothing
 * the scratch op writes is ever read, so losses do not depend on WL_INJECT; unset, the
 * program issues nothing extra.
 */
#ifndef WL_INJECT_H
#define WL_INJECT_H

/* Reads WL_INJECT once and allocates the scratch buffers (cudaMalloc). A malformed value
 * is fatal. rank: this process's global rank. Call after the device is set, from the main
 * thread. */
void wl_inject_init(int rank);

/* The injection point: call after the first layer's forward of micro-batch mb (0-based) of
 * iteration iter, where M is the number of micro-batches. Issues the scratch op (or its
 * divergent form) on the current stream when this is the point; otherwise nothing. */
void wl_inject_point(int iter, int mb, int M);

/* Frees the scratch buffers. */
void wl_inject_fini(void);

#endif
