/*
 * memacct.h: plan mode's count of what reordering costs in device memory, on the framework
 * side under dh__s.lock (memacct.c says how and why). Both functions run with the lock held.
 */
#ifndef DH_MEMACCT_H
#define DH_MEMACCT_H

#include <stddef.h>
#include <stdint.h>

#include "op.h"

/* Counts op (mem: the stream-ordered bytes its thread allocated since its previous op;
 * after op's free is in unc_bytes and held_free_bytes). 1 when what pairing holds passes
 * the extra-memory bound and the rank holds a pair it could still give up. */
int dh__mem_count(const dh_op_t *op, int64_t mem);
/* Before an allocation of size bytes that takes fresh memory, by a thread that allocated
 * pending bytes since its last op: waits (releasing the lock) while frees the dispatcher
 * may issue but has not would make the device pass the count's peak. */
void dh__mem_before_fresh(size_t size, int64_t pending);


#endif
