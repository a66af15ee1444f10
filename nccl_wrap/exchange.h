/*
 * exchange.h: the one small exchange that tells communicators' members their global
 * ranks (why and when: registry.h, dh_nccl_reg_learn).
 */
#ifndef DH_NCCL_EXCHANGE_H
#define DH_NCCL_EXCHANGE_H

#include <nccl.h>

typedef struct dh_nccl_xchg {
    ncclComm_t comm;
    int device, nranks;
    int *members;   /* [nranks], the caller's: filled when ok */
    int ok;         /* out */
} dh_nccl_xchg_t;

/* All-gathers grank over each x[i].comm, the n gathers inside one NCCL group (so that one
 * thread can serve several communicators, as ncclCommInitAll's), each on a private
 * non-blocking stream of its device, waiting at most timeout_s seconds in all. First drains
 * the shim's queue when the mode defers (the exchange must not overtake work queued before
 * it, which peers may be waiting for). x[i].ok is set when the answers are nranks distinct
 * global ranks with grank at the caller's rank; a timeout leaves the gathers running (their
 * memory is released by the stream after them). Never touches the framework's streams or
 * its pending runtime error. Call outside any NCCL group on this thread. */
void dh_nccl_exchange(dh_nccl_xchg_t *x, int n, int grank, int timeout_s);

#endif
