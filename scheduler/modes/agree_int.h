/*
 * agree_int.h: what the agreement channel (agree.c) shares with its byte exchange
 * (agree_x.c, dh_agree_exchange). Nothing here leaves the scheduler.
 *
 * Thread-safety: every function here may be called from any thread; none keeps state.
 */
#ifndef DH_AGREE_INT_H
#define DH_AGREE_INT_H

#include <stddef.h>
#include <stdint.h>

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
