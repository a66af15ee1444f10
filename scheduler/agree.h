/*
 * agree.h: the ranks' agreement channel (DESIGN.md invariant 9).
 *
 * Before a rank issues work out of program order it asks every rank of the job whether they
 * do the same: one vote per decision, the decision is the AND of the votes. The channel is
 * a TCP star the shim opens itself over the launcher's rendezvous (no MPI, no NCCL): rank
 * 0 listens, the others connect. Rank and size come from Open MPI (OMPI_COMM_WORLD_RANK /
 * SIZE), torchrun (RANK / WORLD_SIZE) or srun (SLURM_PROCID / SLURM_NTASKS); the address from
 * DHELIX_AGREE_ADDR (host:port), else MASTER_ADDR and MASTER_PORT + DHELIX_AGREE_PORT_OFFSET
 * (torchrun), else, when every rank runs on this host, the loopback and a port derived from
 * the launcher's job id.
 *
 * Every wait is bounded by DHELIX_AGREE_TIMEOUT_MS: a vote not answered in time is a "no",
 * and the channel is then broken for good: every later vote of every rank answers "no"
 * without waiting (rank 0 stops waiting for a peer that missed one deadline; a rank that
 * timed out waiting for rank 0 stops asking). So a peer that stops answering makes
 * everyone fall back to program order, never hang. The decision never depends on timing
 * while every rank answers in time.
 *
 * Keys: each vote carries a 64-bit key (the caller's iteration ordinal, or a plan
 * fingerprint for DHELIX_MODE=auto); rank 0 answers "no" when the keys of one round differ,
 * so ranks that lost step fall back together instead of pairing on different iterations.
 *
 * Thread-safety: dh_agree_vote is called from one thread at a time (the caller serialises:
 * the tracker calls it with dh__s.lock held); dh_agree_stats may be called from any thread.
 */
#ifndef DH_AGREE_H
#define DH_AGREE_H

#include <stdint.h>

/* Whether there is anyone to agree with: the launcher says the job has more than one rank.
 * Reads the environment once. */
int dh_agree_needed(void);

/* One round: this rank's vote (yes nonzero) on key; returns 1 when every rank voted yes on
 * the same key, 0 otherwise (a no, differing keys, a timeout, a broken or unavailable
 * channel). The first call opens the channel (bounded by the same timeout). With one rank
 * returns yes at once. */
int dh_agree_vote(uint64_t key, int yes);

typedef struct dh_agree_stats {
    uint64_t rounds, yes, no, timeouts;
    uint64_t total_ns, max_ns;   /* time spent in dh_agree_vote, connection included */
    int broken;                  /* the channel gave up (a timeout, or it never opened) */
} dh_agree_stats_t;
void dh_agree_stats(dh_agree_stats_t *out);

/* Closes the channel (at exit). */
void dh_agree_close(void);

#endif
