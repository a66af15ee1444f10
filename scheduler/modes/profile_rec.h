/*
 * profile_rec.h: profile mode's recorder. The framework side records each submitted op's
 * description in program order; the dispatcher brackets each replayed stream op with two
 * events; at exit the events are read (device time) and the profile is written as
 * docs/plan-format.md describes, with a Chrome trace beside it.
 *
 * Locking: dh_prof_record and dh_prof_sync are called with dh__s.lock held (program
 * order); dh_prof_bracket only by the dispatcher thread; dh_prof_finish once, after the
 * dispatcher stopped. The recorder's own state needs no other lock.
 */
#ifndef DH_PROFILE_REC_H
#define DH_PROFILE_REC_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#include "op.h"

/* Records op (described by d, allocations since the thread's previous op mem bytes in
 * sizes[0..nsizes), the record it must follow dep or -1, docs/plan-format.md);
 * returns the record's number plus one, 0 when not recorded (cap reached, no memory). */
uint64_t dh_prof_record(const dh_op_t *op, const dh_op_desc_t *d, int64_t mem,
                        const int64_t *sizes, size_t nsizes, int stream_ordinal, int64_t dep);
/* The host synchronised (a drain the program asked for): marks the next record. */
void dh_prof_sync(void);
/* Dispatcher: an event before (begin = 1) or after (0) the replay of record idx1 on the
 * physical stream s. */
void dh_prof_bracket(uint64_t idx1, cudaStream_t s, int begin);
/* Lock held: whether recording stopped (an iteration repeated). */
int dh_prof_stopped(void);
/* Lock held, once stopped: the iteration's length in segments (runs of ops between host
 * synchronisations, numbered from 0 at the program's first op), the index of the segment
 * after the last recorded one, where an iteration starts, and that iteration's number
 * (from 0; after set-up, the iterations before the stop rule's stretch are counted by how
 * they start). 0 before. */
int dh_prof_period(size_t *p, size_t *next, uint64_t *iter);
/* Lock held, once stopped: the signatures of the iteration's first op and of its last (the
 * ops on either side of the synchronisation recording stopped at); 0 before (or when the
 * stop came otherwise), 1 with them set. */
int dh_prof_period_edges(uint64_t *first, uint64_t *last);
/* Auto mode, once recording stopped and every recorded op was replayed (any thread, once):
 * reads the events and hands the profile over as JSON in *buf (malloc'ed, *len bytes), the
 * ops recorded in *nops; frees the recorder. 0, or -1 with err set. */
int dh_prof_take(char **buf, size_t *len, size_t *nops, char *err, size_t errlen);
/* Reads the events and writes the profile and its trace; logs where. */
void dh_prof_finish(void);

#endif
