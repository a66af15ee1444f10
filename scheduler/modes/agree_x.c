/*
 * agree_x.c: the agreement channel's byte exchange (agree.h, dh_agree_exchange): every
 * rank's bytes to rank 0, rank 0's answer to every rank.
 *
 * Its own connections, on the channel's port + 1, made by the calling thread (auto mode's
 * planning thread, never the job's), so that a transfer of megabytes never holds up a
 * vote. A message is (rank or length, 64 bits) then the bytes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agree.h"
#include "agree_int.h"
#include "common/config.h"

static int dh__xsend(int fd, uint64_t head, const char *buf, size_t len)
{
    uint64_t h[2] = {head, (uint64_t)len};
    return dh__agree_send_all(fd, h, sizeof h) < 0 ||
                   (len && dh__agree_send_all(fd, buf, len) < 0)
               ? -1
               : 0;
}

/* Reads (head, length, bytes) before deadline into *buf (malloc'ed); -1 on failure. */
static int dh__xrecv(int fd, uint64_t *head, char **buf, size_t *len, uint64_t deadline)
{
    uint64_t h[2];
    *buf = NULL;
    if (dh__agree_recv_all(fd, h, sizeof h, deadline) < 0 || h[1] > ((uint64_t)1 << 34))
        return -1;
    char *b = malloc(h[1] + 1);
    if (!b || dh__agree_recv_all(fd, b, h[1], deadline) < 0) {
        free(b);
        return -1;
    }
    b[h[1]] = '\0';
    *head = h[0];
    *buf = b;
    *len = h[1];
    return 0;
}

static int dh__x_rank0(int port, const char *buf, size_t len, dh_agree_answer_fn fn, void *ctx,
                       char **reply, size_t *rlen, char *why, size_t whylen, uint64_t deadline)
{
    int n = dh__agree_size(), got = 1, rc = -1;
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int *fd = malloc((size_t)n * sizeof *fd);
    char **in = calloc((size_t)n, sizeof *in);
    size_t *inlen = calloc((size_t)n, sizeof *inlen);
    int one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_ANY)};
    if (ls >= 0)
        setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (ls < 0 || !fd || !in || !inlen || bind(ls, (struct sockaddr *)&a, sizeof a) < 0 ||
        listen(ls, 128) < 0) {
        snprintf(why, whylen, "rank 0 cannot listen on port %d: %s", port, strerror(errno));
        n = 0;
    }
    for (int r = 0; r < n; r++)
        fd[r] = -1;
    if (n > 0) {
        in[0] = (char *)buf;
        inlen[0] = len;
    }
    while (n > 0 && got < n) {
        struct pollfd pf = {.fd = ls, .events = POLLIN};
        int k = poll(&pf, 1, dh__agree_left_ms(deadline));
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            snprintf(why, whylen, "%d of %d ranks delivered their profile within %lld ms", got,
                     n, (long long)dh_config()->auto_timeout_ms);
            break;
        }
        int c = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
        uint64_t r;
        char *b;
        size_t bl;
        if (c < 0)
            continue;
        if (dh__xrecv(c, &r, &b, &bl, deadline) < 0 || r == 0 || r >= (uint64_t)n || fd[r] >= 0) {
            free(b);
            close(c);
            continue;
        }
        fd[r] = c;
        in[r] = b;
        inlen[r] = bl;
        got++;
    }
    if (n > 0 && got == n) {
        rc = fn(ctx, (const char *const *)in, inlen, n, reply, rlen) == 0 ? 0 : -1;
        if (rc < 0)
            snprintf(why, whylen, "rank 0 made no answer");
    }
    /* Everyone connected hears the answer, or that there is none (length 0). */
    for (int r = 1; r < n; r++) {
        if (fd[r] < 0)
            continue;
        dh__xsend(fd[r], 0, rc == 0 ? *reply : NULL, rc == 0 ? *rlen : 0);
        close(fd[r]);
        free(in[r]);
    }
    if (ls >= 0)
        close(ls);
    free(fd);
    free(in);
    free(inlen);
    return rc;
}

static int dh__x_peer(const char *host, int port, const char *buf, size_t len, char **reply,
                      size_t *rlen, char *why, size_t whylen, uint64_t deadline)
{
    int resolved;
    int fd = dh__agree_connect(host, port, deadline, &resolved);
    if (!resolved) {
        snprintf(why, whylen, "cannot resolve %s", host);
        return -1;
    }
    uint64_t head = 0;
    /* DHELIX_TEST_AGREE_SILENT: a stuck peer connects and sends nothing. */
    int silent = dh_config()->test_agree_silent == dh_agree_rank();
    if (fd < 0 || (!silent && dh__xsend(fd, (uint64_t)dh_agree_rank(), buf, len) < 0)) {
        snprintf(why, whylen, "cannot reach rank 0 on %s:%d", host, port);
        if (fd >= 0)
            close(fd);
        return -1;
    }
    /* Rank 0 waits up to the timeout for the last profile, then plans. */
    int rc = dh__xrecv(fd, &head, reply, rlen, deadline + (uint64_t)dh_config()->auto_timeout_ms *
                                                              1000000ull);
    close(fd);
    if (rc < 0 || *rlen == 0) {
        snprintf(why, whylen, rc < 0 ? "no answer from rank 0 in time"
                                     : "rank 0 did not get every rank's profile in time");
        free(*reply);
        *reply = NULL;
        return -1;
    }
    return 0;
}

int dh_agree_exchange(const char *buf, size_t len, dh_agree_answer_fn fn, void *ctx,
                      char **reply, size_t *rlen, char *why, size_t whylen)
{
    *reply = NULL;
    *rlen = 0;
    if (!dh_agree_needed()) {
        const char *in[1] = {buf};
        size_t inlen[1] = {len};
        return fn(ctx, in, inlen, 1, reply, rlen) == 0 ? 0 : -1;
    }
    char host[256];
    int port = 0;
    const char *w = NULL;
    if (dh__agree_address(host, sizeof host, &port, &w) < 0) {
        snprintf(why, whylen, "%s", w);
        return -1;
    }
    uint64_t deadline = dh__agree_now_ns() + (uint64_t)dh_config()->auto_timeout_ms * 1000000ull;
    return dh_agree_rank() == 0
               ? dh__x_rank0(port + 1, buf, len, fn, ctx, reply, rlen, why, whylen, deadline)
               : dh__x_peer(host, port + 1, buf, len, reply, rlen, why, whylen, deadline);
}

