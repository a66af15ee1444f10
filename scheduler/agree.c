/*
 * agree.c: the ranks' agreement channel (see agree.h).
 *
 * One round: every rank sends rank 0 (key, vote); rank 0 collects them, answers each with
 * (key, decision). Messages are two little-endian 64-bit words on a blocking TCP socket read
 * under poll() deadlines. Rank 0 waits DHELIX_AGREE_TIMEOUT_MS from its own arrival; the
 * others wait twice that from theirs (rank 0 may arrive later than they do, then needs up to
 * the timeout itself), so that, while the ranks arrive within the timeout of each other,
 * a rank never gives up on a round that rank 0 then decides yes.
 */
#define _GNU_SOURCE
#include "agree.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/config.h"
#include "common/log.h"

static struct {
    pthread_once_t once;
    int rank, size, local;        /* from the launcher; local: every rank on this host */
    /* Used by the one voting thread at a time (agree.h): */
    int opened, broken, *fds, fd; /* fds: rank 0's per-peer sockets; fd: a peer's */
    /* guarded by lock: */
    pthread_mutex_t lock;
    dh_agree_stats_t st;
} dh__ag = {.once = PTHREAD_ONCE_INIT, .fd = -1, .lock = PTHREAD_MUTEX_INITIALIZER};

static int dh__env_int(const char *a, const char *b, const char *c, int def)
{
    const char *names[] = {a, b, c};
    for (int i = 0; i < 3; i++) {
        const char *v = names[i] ? getenv(names[i]) : NULL;
        if (v && *v)
            return atoi(v);
    }
    return def;
}

static void dh__env(void)
{
    dh__ag.rank = dh__env_int("OMPI_COMM_WORLD_RANK", "RANK", "SLURM_PROCID", 0);
    dh__ag.size = dh__env_int("OMPI_COMM_WORLD_SIZE", "WORLD_SIZE", "SLURM_NTASKS", 1);
    int local = dh__env_int("OMPI_COMM_WORLD_LOCAL_SIZE", "LOCAL_WORLD_SIZE", NULL, -1);
    const char *nodes = getenv("SLURM_NNODES");
    dh__ag.local = local == dh__ag.size || (nodes && atoi(nodes) == 1);
}

int dh_agree_needed(void)
{
    pthread_once(&dh__ag.once, dh__env);
    return dh__ag.size > 1;
}

static uint64_t dh__now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* Milliseconds left before deadline (ns), at least 0. */
static int dh__left_ms(uint64_t deadline)
{
    uint64_t now = dh__now_ns();
    return now >= deadline ? 0 : (int)((deadline - now) / 1000000ull) + 1;
}

/* The port from the launcher's job id (every rank of one job computes the same). */
static int dh__job_port(void)
{
    static const char *ids[] = {"DHELIX_AGREE_JOB", "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE",
                                "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID"};
    uint64_t h = 1469598103934665603ull;
    int any = 0;
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        const char *v = getenv(ids[i]);
        for (; v && *v; v++, any = 1)
            h = (h ^ (unsigned char)*v) * 1099511628211ull;
    }
    const char *step = getenv("SLURM_STEP_ID");
    for (; step && *step; step++)
        h = (h ^ (unsigned char)*step) * 1099511628211ull;
    return any ? 20000 + (int)(h % 30000) : -1;
}

/* Where rank 0 listens; 0, or -1 with *why set when no address can be found. */
static int dh__address(char *host, size_t hn, int *port, const char **why)
{
    const dh_config_t *cfg = dh_config();
    const char *ma = getenv("MASTER_ADDR"), *mp = getenv("MASTER_PORT");
    if (cfg->agree_addr[0]) {
        const char *colon = strrchr(cfg->agree_addr, ':');
        if (!colon || atoi(colon + 1) <= 0) {
            *why = "DHELIX_AGREE_ADDR is not host:port";
            return -1;
        }
        snprintf(host, hn, "%.*s", (int)(colon - cfg->agree_addr), cfg->agree_addr);
        *port = atoi(colon + 1);
    } else if (ma && *ma && mp && atoi(mp) > 0) {
        snprintf(host, hn, "%s", ma);
        *port = atoi(mp) + (int)cfg->agree_port_offset;
    } else if (dh__ag.local && (*port = dh__job_port()) > 0) {
        snprintf(host, hn, "127.0.0.1");
    } else {
        *why = "no rendezvous address (set DHELIX_AGREE_ADDR=host:port, or MASTER_ADDR and "
               "MASTER_PORT)";
        return -1;
    }
    return 0;
}

static int dh__send_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* Reads n bytes before deadline; -1 on a timeout, an error or the peer closing. */
static int dh__recv_all(int fd, void *buf, size_t n, uint64_t deadline)
{
    char *p = buf;
    while (n > 0) {
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        int r = poll(&pf, 1, dh__left_ms(deadline));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        ssize_t k = recv(fd, p, n, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static int dh__open_rank0(const char *host, int port, uint64_t deadline)
{
    (void)host;
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (ls < 0)
        return -1;
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_ANY)};
    if (bind(ls, (struct sockaddr *)&a, sizeof a) < 0 || listen(ls, 128) < 0) {
        DH_WARN(SCHED, "agreement channel: cannot listen on port %d: %s", port, strerror(errno));
        close(ls);
        return -1;
    }
    dh__ag.fds = calloc((size_t)dh__ag.size, sizeof(int));
    if (!dh__ag.fds) {
        close(ls);
        return -1;
    }
    for (int r = 0; r < dh__ag.size; r++)
        dh__ag.fds[r] = -1;
    int got = 0;
    while (got < dh__ag.size - 1) {
        struct pollfd pf = {.fd = ls, .events = POLLIN};
        int r = poll(&pf, 1, dh__left_ms(deadline));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        int fd = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        uint32_t peer = 0;
        if (dh__recv_all(fd, &peer, sizeof peer, deadline) < 0 || peer == 0 ||
            (int)peer >= dh__ag.size || dh__ag.fds[peer] >= 0) {
            close(fd);
            continue;
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        dh__ag.fds[peer] = fd;
        got++;
    }
    close(ls);
    return got == dh__ag.size - 1 ? 0 : -1;
}

static int dh__open_peer(const char *host, int port, uint64_t deadline)
{
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    if (getaddrinfo(host, ps, &hints, &ai) != 0 || !ai)
        return -1;
    int fd = -1;
    while (dh__left_ms(deadline) > 1) {
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
            break;
        if (fd >= 0)
            close(fd);
        fd = -1;
        usleep(20000); /* rank 0 may not listen yet */
    }
    freeaddrinfo(ai);
    if (fd < 0)
        return -1;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    uint32_t me = (uint32_t)dh__ag.rank;
    if (dh__send_all(fd, &me, sizeof me) < 0) {
        close(fd);
        return -1;
    }
    dh__ag.fd = fd;
    return 0;
}

static void dh__close_all(void)
{
    if (dh__ag.fds) {
        for (int r = 0; r < dh__ag.size; r++)
            if (dh__ag.fds[r] >= 0)
                close(dh__ag.fds[r]);
        free(dh__ag.fds);
        dh__ag.fds = NULL;
    }
    if (dh__ag.fd >= 0)
        close(dh__ag.fd);
    dh__ag.fd = -1;
}

/* Gives up for good: every later vote is a "no" without waiting. Closing the sockets tells
 * the peers at once (they read the end of the stream) instead of after their timeout. */
static void dh__break(const char *why)
{
    if (!dh__ag.broken)
        DH_WARN(SCHED, "agreement between ranks failed (%s): every iteration runs in program "
                "order from here on", why);
    dh__ag.broken = 1;
    dh__close_all();
}

static int dh__open(void)
{
    char host[256];
    int port = 0;
    const char *why = NULL;
    if (dh__address(host, sizeof host, &port, &why) < 0) {
        dh__break(why);
        return -1;
    }
    uint64_t deadline = dh__now_ns() + (uint64_t)dh_config()->agree_timeout_ms * 2000000ull;
    int rc = dh__ag.rank == 0 ? dh__open_rank0(host, port, deadline)
                              : dh__open_peer(host, port, deadline);
    if (rc < 0) {
        char m[400];
        snprintf(m, sizeof m, "the channel on %s:%d did not open within %lld ms", host, port,
                 (long long)dh_config()->agree_timeout_ms * 2);
        dh__break(m);
        return -1;
    }
    DH_INFO(SCHED, "agreement channel open on %s:%d (rank %d of %d)", host, port, dh__ag.rank,
            dh__ag.size);
    return 0;
}

/* Rank 0's side of a round. */
static int dh__round0(uint64_t key, int yes)
{
    uint64_t deadline = dh__now_ns() + (uint64_t)dh_config()->agree_timeout_ms * 1000000ull;
    int decision = yes, lost = 0;
    for (int r = 1; r < dh__ag.size; r++) {
        uint64_t m[2];
        if (dh__ag.fds[r] < 0 || dh__recv_all(dh__ag.fds[r], m, sizeof m, deadline) < 0) {
            lost = r;
            decision = 0;
            break;
        }
        decision &= m[0] == key && m[1] != 0;
    }
    if (lost) {
        char why[96];
        snprintf(why, sizeof why, "rank %d did not vote within %lld ms", lost,
                 (long long)dh_config()->agree_timeout_ms);
        dh__break(why);
        return -1;
    }
    uint64_t a[2] = {key, (uint64_t)decision};
    for (int r = 1; r < dh__ag.size; r++)
        if (dh__send_all(dh__ag.fds[r], a, sizeof a) < 0) {
            dh__break("a rank closed the channel");
            return -1;
        }
    return decision;
}

static int dh__round_peer(uint64_t key, int yes)
{
    uint64_t m[2] = {key, (uint64_t)(yes != 0)};
    uint64_t deadline = dh__now_ns() + (uint64_t)dh_config()->agree_timeout_ms * 2000000ull;
    if (dh__send_all(dh__ag.fd, m, sizeof m) < 0 ||
        dh__recv_all(dh__ag.fd, m, sizeof m, deadline) < 0) {
        dh__break("rank 0 did not answer in time");
        return -1;
    }
    return m[0] == key && m[1] != 0;
}

int dh_agree_vote(uint64_t key, int yes)
{
    if (!dh_agree_needed())
        return yes != 0;
    uint64_t t0 = dh__now_ns();
    int d = 0;
    if (dh_config()->test_agree_silent == dh__ag.rank && dh__ag.st.rounds >= 2 && !dh__ag.broken) {
        /* A stuck peer: it says nothing more, and its socket stays open. */
        dh__ag.broken = 1;
        DH_WARN(SCHED, "DHELIX_TEST_AGREE_SILENT: this rank stops answering the agreement");
    }
    if (!dh__ag.broken && (dh__ag.opened || dh__open() == 0)) {
        dh__ag.opened = 1;
        d = dh__ag.rank == 0 ? dh__round0(key, yes) : dh__round_peer(key, yes);
    }
    uint64_t dt = dh__now_ns() - t0;
    pthread_mutex_lock(&dh__ag.lock);
    dh__ag.st.rounds++;
    if (d > 0)
        dh__ag.st.yes++;
    else
        dh__ag.st.no++;
    if (d < 0)
        dh__ag.st.timeouts++;
    dh__ag.st.total_ns += dt;
    if (dt > dh__ag.st.max_ns)
        dh__ag.st.max_ns = dt;
    dh__ag.st.broken = dh__ag.broken;
    pthread_mutex_unlock(&dh__ag.lock);
    return d > 0;
}

void dh_agree_stats(dh_agree_stats_t *out)
{
    pthread_mutex_lock(&dh__ag.lock);
    *out = dh__ag.st;
    pthread_mutex_unlock(&dh__ag.lock);
}

void dh_agree_close(void) { dh__close_all(); }
