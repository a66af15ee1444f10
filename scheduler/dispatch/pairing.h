/*
 * pairing.h: what held pairing back, for the exit summary (DHELIX_STATS, preload/stats.c)
 * and the one line plan mode logs at exit when little of the plan's pairing happened.
 *
 * The strand tracker (tracker.c) says how each template iteration it followed ended: run as
 * planned (paired), or in program order and why (the reasons below). The scheduler reports
 * the drains that came in the middle of a followed iteration, by cause; the first one of
 * each cause, and the first desync, keep the program's call site (libunwind), found once
 * per cause so that the cost stays off the hot path.
 *
 * Locking: every function here but dh_pairing_stats and dh__call_site runs with dh__s.lock
 * held; dh_pairing_stats takes it (call it with no lock held). No lock of its own.
 */
#ifndef DH_PAIRING_H
#define DH_PAIRING_H

#include <stddef.h>
#include <stdint.h>

#include "scheduler.h"

/* Why a followed template iteration ran unpaired (in program order, on one strand). */
#define DH_UNPAIRED_REASONS(X)                                                             \
    X(PROBE, probe, "the first iteration followed checks the plan's pairs (by design)")     \
    X(DESYNC, desync, "the program left the plan's template mid-iteration")                \
    X(VETOED, vetoed, "another rank said no in the vote on a pair")                        \
    X(DRAIN, drain, "a host synchronisation mid-pair that not every rank made")            \
    X(MEM_BOUND, mem_bound, "the pair would pass the memory bound (DHELIX_MAX_EXTRA_MEM)")  \
    X(LAG, lag, "bounded lag issued held work mid-pair (DHELIX_MAX_QUEUED_OPS / bytes)")  \
    X(MEM_DEVICE, mem_device, "an allocation of the program failed while the pair held memory")

typedef enum dh_unpaired {
#define DH__UNPAIRED_ENUM(id, key, d) DH_UNPAIRED_##id,
    DH_UNPAIRED_REASONS(DH__UNPAIRED_ENUM)
#undef DH__UNPAIRED_ENUM
    DH_UNPAIRED_COUNT
} dh_unpaired_t;

/* The JSON key and the sentence of reason r (r < DH_UNPAIRED_COUNT). */
const char *dh_unpaired_key(dh_unpaired_t r);
const char *dh_unpaired_text(dh_unpaired_t r);

typedef struct dh_pairing_stats {
    uint64_t planned_per_iter;            /* two-strand groups in the template */
    uint64_t iterations_paired;           /* followed iterations run as planned */
    uint64_t unpaired[DH_UNPAIRED_COUNT]; /* followed iterations run unpaired, by reason */
    uint64_t drains[DH_DRAIN_COUNT];      /* drains in the middle of a followed iteration */
    char drain_site[DH_DRAIN_COUNT][160]; /* the program's call site of the first of each */
    char desync[600];                     /* the first desync and its call site, "" none */
    int attached;                         /* a plan was attached */
    double followed_s;                    /* seconds since the plan was attached, 0 none */
} dh_pairing_stats_t;

/* Lock held: a plan was attached; its template has groups two-strand groups. */
void dh_pairing_planned(uint64_t groups);
/* Lock held: a followed template iteration ended: paired when paired is nonzero, else
 * unpaired for reason why. */
void dh_pairing_iteration(int paired, dh_unpaired_t why);
/* Lock held: a drain for cause why in the middle of a followed iteration; the first of a
 * cause records the program's call site (unwinds the calling thread's stack). */
void dh_pairing_drain(dh_drain_reason_t why);
/* Lock held: the first desync's warning text and call site (later ones are ignored). */
void dh_pairing_desync(const char *what, const char *site);
/* Lock NOT held: a copy of everything recorded. */
void dh_pairing_stats(dh_pairing_stats_t *out);

/* At exit, lock NOT held: one warning when fewer than half the planned two-strand groups
 * formed over two iterations or more, with the main reason, pointing to DHELIX_STATS. */
void dh_pairing_finish(void);

/* The first frame of the calling thread's stack outside the shim and the CUDA/NCCL
 * libraries (or the vgpu standing in for them): where the program made the call, as
 * "symbol+0xoff (object)" or "object+0xoff"; "unknown" when it cannot be found. Any thread,
 * any lock state. */
void dh__call_site(char *buf, size_t len);

#endif
