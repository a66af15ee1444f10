/*
 * scheduler/mem/: the shim's device memory. It owns the reuse of blocks whose free is
 * captured but not yet issued (this header): parked blocks, the pool policy of each
 * device. It may call ops/ and real/. (Plan mode's count of what pairing holds, its bound
 * and the device's peak are plan mode's: modes/memacct.h.)
 *
 * mempool.h: the shim's stream-ordered reuse of memory whose free is captured but not yet
 * issued (DESIGN.md invariant 10, issue 15).
 *
 * When the mode defers, a cudaFreeAsync becomes an op that the dispatcher issues much
 * later (after every use of the block the plan holds back). Without this module the
 * program's next allocation of the same size takes fresh memory from the real pool, since
 * the real free has not happened: a backward holds every temporary of every layer at once.
 * Here the captured free parks the block; an allocation made later in program order takes
 * it back, without calling the real allocator, when the issue order already puts every
 * use of the new allocation after every use of the old one:
 *
 *   - same strand and same framework stream: both run on one physical stream, in program
 *     order (what the stream-ordered allocator allows for a free on the allocating stream);
 *   - the other strand, same framework stream, plan mode only: the allocation's first op is
 *     in a co-execution group after the free's group. The dispatcher issues groups in
 *     order and puts a cross-strand barrier between a strand's work and the other strand's
 *     first op of a later group (order.c), so every use of the new allocation follows that
 *     barrier, which follows every use of the old block (the free's group is at least that
 *     of every earlier op of its strand: groups never decrease within a strand).
 *
 * Otherwise the allocation takes fresh memory. When the dispatcher replays a parked free,
 * the block either was taken (the real free is skipped: the memory lives on as the new
 * allocation) or leaves the pool and is really freed.
 *
 * Which block an allocation gets depends on how far the dispatcher got, as with the real
 * allocator; no ordering decision depends on it (deps.c tells allocations apart by their
 * stamp, not by address).
 *
 * Thread-safety: one leaf lock. dh_mpool_park and dh_mpool_take are called with dh__s.lock
 * held (lock order: dh__s.lock, then this one); dh_mpool_release from the dispatcher
 * without it.
 */
#ifndef DH_MEMPOOL_H
#define DH_MEMPOOL_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "op.h"

/* Counters for DHELIX_STATS (all since the start). */
typedef struct dh_mpool_stats {
    uint64_t parked_bytes_peak;    /* most bytes parked at once (captured frees not issued) */
    uint64_t reuse_same, reuse_same_bytes;   /* taken back by the strand that freed them */
    uint64_t reuse_cross, reuse_cross_bytes; /* taken by the other strand after a barrier */
    uint64_t fresh, fresh_bytes;   /* allocations that went to the real allocator */
    uint64_t refused_cross;        /* a block of the size was parked by the other strand but
                                      no barrier would follow its free: fresh memory */
} dh_mpool_stats_t;

/* Where an allocation's first op will be issued: its strand, and its co-execution group
 * when known (plan mode following its plan; cross-strand reuse needs it). */
typedef struct dh_mpool_where {
    int device;
    cudaStream_t stream;          /* the framework stream */
    int strand;
    int group_known;
    uint64_t group;
} dh_mpool_where_t;

/* Parks free op's block (ptr, size bytes) after its strand and group are final. Lock
 * dh__s.lock held. Sets op->pool_blk; on no memory, leaves it NULL (then the free is an
 * ordinary deferred free). */
void dh_mpool_park(dh_op_t *op, void *ptr, size_t size);
/* A parked block of exactly size bytes that the rules above let an allocation at w use,
 * or NULL (then count a fresh allocation). The block's free op will skip the real free.
 * Lock dh__s.lock held (it guards the free op's free_bytes, which becomes 0: the taken
 * block is no longer held by a deferred free); *freed_bytes gets what it was and
 * *freed_group the free op's group. */
void *dh_mpool_take(size_t size, const dh_mpool_where_t *w, uint64_t *freed_bytes,
                    uint64_t *freed_group);
/* The dispatcher replays op's free: 1 when the block was taken (skip the real free), 0
 * when it must really be freed (it has left the pool). Clears op->pool_blk. Safe to call
 * on an op without a block (answers 0). */
int dh_mpool_release(dh_op_t *op);
/* Sets, once per device, the reuse policies of the device's current pool (the one
 * cudaMallocAsync allocates from) that the shim runs with: no internal dependencies (the
 * driver would make the allocating strand's stream wait for the other strand's pending
 * free: the strands would run one after the other); opportunistic reuse and event
 * dependencies stay as CUDA sets them (docs/shim.md, "Pool reuse policies on real CUDA").
 * Any thread. */
void dh_mpool_policy(int device);
/* Counters, and the bytes parked now. */
void dh_mpool_stats(dh_mpool_stats_t *out, uint64_t *parked_now);
/* Pure rule (exposed for tests): may a block parked by (strand, group) on fstream be used
 * by an allocation at w? 1 same strand, 2 other strand after a barrier, 0 not. */
int dh_mpool_rule(int strand, uint64_t group, cudaStream_t fstream, int device,
                  const dh_mpool_where_t *w);

#endif
