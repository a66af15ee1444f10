/*
 * memtab.h: the live stream-ordered allocations (cudaMallocAsync and friends), so that a
 * pointer argument of a kernel can be widened to the allocation it points into. Two
 * strands' operations may run concurrently only where they touch disjoint memory; the
 * dispatcher learns what a kernel touches from this table (op_desc.c).
 *
 * The table is a sorted array searched by bisection: allocations are few (one per live
 * tensor under PyTorch's cudaMallocAsync backend) and lookups, one per pointer-sized
 * kernel argument, are far more frequent than changes.
 *
 * Thread-safety: every function takes the table's own leaf lock.
 */
#ifndef DH_MEMTAB_H
#define DH_MEMTAB_H

#include <stddef.h>
#include <stdint.h>

/* Records [p, p + size), stamped with born (the scheduler's op count when it was made) and
 * the strand whose work it was made for (-1 unknown). A range that overlaps recorded ones replaces them (the allocator
 * reused freed memory before the shim saw the free). */
void dh_memtab_add(uintptr_t p, size_t size, uint64_t born, int strand);
/* Forgets the allocation that starts at p; returns its size, 0 when unknown. */
size_t dh_memtab_remove(uintptr_t p);
/* The allocation containing p into lo and len, and the stamp and strand it was added with
 * (born, strand: may be NULL): 1 found, 0 not. */
int dh_memtab_find(uintptr_t p, uintptr_t *lo, size_t *len, uint64_t *born, int *strand);
/* Number of live allocations (statistics, tests). */
size_t dh_memtab_count(void);

#endif
