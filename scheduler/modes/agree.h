/*
 * agree.h: the ranks' agreement channel (DESIGN.md invariant 9).
 *
 * Before a rank issues work out of program order it asks every rank of the job whether they
 * do the same: one vote per decision, the decision is the AND of the votes. The channel is
 * a TCP tree the shim opens itself over the launcher's rendezvous (no MPI, no NCCL): rank
 * 0 listens, every rank registers there and connects to its parent in the tree (at most 8
 * children a rank, agree_tree.c), so that a round costs O(log ranks) hops and no rank more
 * than a few dozen messages (docs/agreement.md has the figures). Rank and size come from Open MPI (OMPI_COMM_WORLD_RANK /
 * SIZE), torchrun (RANK / WORLD_SIZE) or srun (SLURM_PROCID / SLURM_NTASKS); the address from
 * DHELIX_AGREE_ADDR (host:port), else MASTER_ADDR and MASTER_PORT + DHELIX_AGREE_PORT_OFFSET
 * (torchrun), else, when every rank runs on this host, the loopback and a port derived from
 * the launcher's job id.
 *
 * Rounds (DESIGN.md invariant 9, tracker.c "agreement"): a rank votes once per pair of
 * micro-batches it would issue out of program order, on key (iteration, pair, sub). A
 * "yes" waits for the round's decision; a "no" means "from this pair on, this iteration runs
 * in program order here" and waits for nothing: it decides its round and every later round
 * of its iteration for all ranks at once. A round is decided yes when every rank whose
 * pair mask (dh_agree_set_mask) has the pair voted yes on it; a rank whose plan leaves that
 * pair serial issues it in program order, which the plan's order of collectives for that
 * pair then is on every rank (plan/orders.c), so it need not vote.
 *
 * Every wait is bounded by DHELIX_AGREE_TIMEOUT_MS: a yes not answered in time is a "no",
 * and the channel is then broken for good: the rank closes its connection, the tree tells
 * every rank, and every later vote of every rank answers "no" without waiting. So a peer
 * that stops answering makes everyone fall back to program order, never hang. While every
 * rank answers in time, no decision depends on timing.
 *
 * Thread-safety: dh_agree_vote is called from one thread at a time and never with the
 * scheduler lock held (sched.c); dh_agree_stats may be called from any thread. Rank 0 and
 * every rank with children in the tree run a thread of their own that decides (rank 0) or
 * relays, started by the first vote.
 */
#ifndef DH_AGREE_H
#define DH_AGREE_H

#include <stddef.h>
#include <stdint.h>

/* Whether there is anyone to agree with: the launcher says the job has more than one rank.
 * Reads the environment once. */
int dh_agree_needed(void);

/* This rank's vote on key (iteration << 24 | pair << 8 | sub). yes 1 ("pair as planned") or
 * 2 ("drain here"): waits (bounded) for the round's decision and returns yes when every
 * rank with the pair voted the same, 0 otherwise (a no, differing votes, a timeout, a
 * broken or unavailable channel). yes 0: casts "no from key on" without waiting and returns
 * 0. The first call opens the channel
 * (bounded by twice the timeout). With one rank returns yes at once. */
int dh_agree_vote(uint64_t key, int yes);

/* This rank's pairs: bit p set when its plan pairs pair p (pairs from 63 on: bit 63). Sent
 * to the channel when it opens, or at once when it is open already (auto mode attaches
 * its plan after the switch round; until then its mask is all pairs, so that no round is
 * decided without it). */
void dh_agree_set_mask(uint64_t mask);

typedef struct dh_agree_stats {
    uint64_t rounds, yes, no, timeouts;
    uint64_t waits;              /* yes votes: the rounds this rank waited for */
    uint64_t total_ns, max_ns;   /* time those waits took, the connection included */
    int broken;                  /* the channel gave up (a timeout, or it never opened) */
} dh_agree_stats_t;
void dh_agree_stats(dh_agree_stats_t *out);

/* Opens the channel now (bounded by twice the timeout) if it is not open: a rank whose plan
 * has no pair to vote on still tells the channel so (its mask), or its peers would wait for its
 * votes. Same thread rules as dh_agree_vote. */
void dh_agree_open(void);

/* Auto mode's switch (DESIGN.md invariant 9): every rank calls it at every iteration
 * boundary k (0, 1, 2, ... in its program order) until it returns 1 or -1, with ready 1
 * once it holds the plan (and from then on). ready 0 waits for nobody and returns 0;
 * ready 1 waits (bounded by DHELIX_AGREE_TIMEOUT_MS) until every rank has voted on k and
 * returns 1 when all were ready there, so that every rank attaches the plan at the same
 * boundary. ready 2, "never" (this rank will hold no plan), waits for nobody, returns -1,
 * and decides every switch round of every rank from then on: a rank that waits gets -1
 * at once, and every other rank at its next vote, ready or not, so that nobody waits for
 * the votes of a rank that stopped voting, nor for a plan of its own that cannot be used.
 * -1 also when the channel is broken (a timeout breaks it as dh_agree_vote does): no rank
 * can switch any more. One rank: 1 ready, 0 not, -1 never. Same thread rules as
 * dh_agree_vote. */
int dh_agree_switch(uint64_t k, int ready);

/* Auto mode's switch back to program order: every rank calls it once at the same
 * iteration boundary k (a fixed number of boundaries after the switch), rank 0 with yes 1
 * when the ranks are to switch back (it measured no gain) and 0 otherwise, the others
 * with yes 1. A yes waits (bounded by DHELIX_AGREE_TIMEOUT_MS) for every rank's vote on
 * k; returns 1 when every rank voted yes, 0 otherwise (a no, a timeout, a broken
 * channel): every rank that returns 1 switches back at k; one that timed out instead runs
 * program order anyway (its channel is broken: every later vote of its is a no).
 * Rounds of their own: no vote of dh_agree_switch counts here. One rank: yes. Same thread
 * rules as dh_agree_vote. */
int dh_agree_switch_back(uint64_t k, int yes);

/* Rank 0's answer to every rank's bytes: in[r] (inlen[r] bytes) for r in [0, n); *out
 * (malloc'ed) and *outlen; 0, or -1 for no answer. */
typedef int (*dh_agree_answer_fn)(void *ctx, const char *const *in, const size_t *inlen, int n,
                                  char **out, size_t *outlen);
/* Sends buf to rank 0; rank 0 calls fn once every rank's bytes are there and sends its
 * answer to every rank; *reply (malloc'ed, NUL-terminated) is that answer on every rank.
 * Bounded: rank 0 waits DHELIX_AUTO_TIMEOUT_MS for the last rank's bytes, a peer that long
 * plus as long again for the answer; then -1 with why set, on every rank (a rank that
 * delivered nothing in time makes the answer "none" for all). Blocking: call it from a
 * thread of the shim's own. One rank: fn on buf alone. Uses the channel's port + 1. */
int dh_agree_exchange(const char *buf, size_t len, dh_agree_answer_fn fn, void *ctx,
                      char **reply, size_t *rlen, char *why, size_t whylen);

/* This process's rank as the launcher says (0 without one). */
int dh_agree_rank(void);

/* Closes the channel (at exit). */
void dh_agree_close(void);

#endif
