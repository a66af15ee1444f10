/*
 * agree_int.h: what the agreement channel's voters (agree.c) share with its tree of relays
 * (agree_tree.c) and its byte exchange (agree_x.c, dh_agree_exchange). Nothing here leaves
 * the scheduler.
 *
 * Thread-safety: every function here may be called from any thread; none keeps state.
 */
#ifndef DH_AGREE_INT_H
#define DH_AGREE_INT_H

#include <stddef.h>
#include <stdint.h>

/* Messages between a voter and its node are two 64-bit words (key, value). A voter sends
 * (key, 1 or 2) for a yes ("pair" or "drain"), (key, 0) for "no from key on", (DH__MASK,
 * mask) when its pair bits change; it gets (key, decision) for every decided round and
 * (DH__BROKEN, 0) when the channel gave up. Switch rounds: key DH__SW | k, k the iteration
 * boundary (dh_agree_switch), DH__SW | DH__BACK | k for the switch back; votes 0 (not
 * ready), 1 (ready), DH__NEVER (no round of the family will be decided yes; a decision
 * DH__NEVER says so). Pair keys: iteration << 24 | pair << 8 | sub (agree.h). */
#define DH__BROKEN UINT64_MAX
#define DH__SW (1ull << 62)
#define DH__MASK (1ull << 61)
#define DH__BACK (1ull << 60)
#define DH__NEVER 2
#define DH__PENDING 64 /* undecided rounds a node tracks at once */

/* Whether a no from no_key decides key too: the same iteration, at or after it. */
static inline int dh__agree_covers(uint64_t no_key, uint64_t key)
{
    return no_key && (no_key >> 24) == (key >> 24) && key >= no_key;
}

/* Opens this rank's end of the channel's tree (agree_tree.c), bounded by deadline (ns): rank
 * 0 starts the root's thread, a rank with children a relay thread of its own, both reached
 * by the voter through a socketpair; a leaf connects to its parent itself. host:port is
 * where rank 0 listens; mask the rank's pair bits. Returns the voter's descriptor, or -1
 * (the channel cannot open: the caller breaks it). Called once per process, by the voting
 * thread. */
int dh__agree_tree_open(const char *host, int port, int rank, int size, uint64_t mask,
                        uint64_t deadline);

/* The job's size as the launcher says (1 without one). */
int dh__agree_size(void);
/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t dh__agree_now_ns(void);
/* Milliseconds left before deadline (ns), at least 0. */
int dh__agree_left_ms(uint64_t deadline);
/* Where rank 0 listens; 0, or -1 with *why set when no address can be found. */
int dh__agree_address(char *host, size_t hn, int *port, const char **why);
/* Sends n bytes; 0, or -1 when the connection failed. */
int dh__agree_send_all(int fd, const void *buf, size_t n);
/* Reads n bytes before deadline; -1 on a timeout, an error or the peer closing. */
int dh__agree_recv_all(int fd, void *buf, size_t n, uint64_t deadline);
/* A TCP connection to host:port, retried until deadline (rank 0 may not listen yet); the
 * socket, or -1 (*resolved says whether the host resolved). */
int dh__agree_connect(const char *host, int port, uint64_t deadline, int *resolved);

#endif
