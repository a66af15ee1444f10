/*
 * agree.c: the ranks' agreement channel (see agree.h): the voter's side, the environment
 * and the connection helpers.
 *
 * Rounds are decided by a tree of relay threads (agree_tree.c): rank 0's decides, a rank
 * with children in the tree relays, so that rounds are decided whatever the ranks' programs
 * are doing. A voter holds one connection to its node (its own relay's through a
 * socketpair, or a leaf's to its parent) and exchanges two-word messages (agree_int.h):
 * (key, 1 or 2) for a yes, (key, 0) for "no from key on"; it gets every decision, (key, 0
 * or 1), and (DH__BROKEN, 0) when the channel gives up. Round key is decided yes once every
 * rank whose mask has the key's pair bit voted yes on it; no as soon as any rank said no
 * from a key at or below it in the same iteration (key >> 24). A voter waits for its own
 * round only, up to DHELIX_AGREE_TIMEOUT_MS; on a timeout it closes its connection, its
 * node sees the end of the stream and breaks the channel for everyone.
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

#include "agree_int.h"
#include "common/config.h"
#include "common/log.h"

static struct {
    pthread_once_t once;
    int rank, size, local;        /* from the launcher; local: every rank on this host */
    uint64_t mask;                /* this rank's pair bits (dh_agree_set_mask) */
    /* Used by the one voting thread at a time (agree.h): */
    int opened, broken, silent, fd; /* fd: this rank's connection to its node */
    uint64_t no_key;              /* the lowest key known decided no in its iteration, 0 */
    int sw_never[2];              /* a switch family was decided "never" (any round) */
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

int dh__agree_size(void)
{
    pthread_once(&dh__ag.once, dh__env);
    return dh__ag.size;
}

uint64_t dh__agree_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* Milliseconds left before deadline (ns), at least 0. */
int dh__agree_left_ms(uint64_t deadline)
{
    uint64_t now = dh__agree_now_ns();
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
    /* Below Linux's default ephemeral range (32768-60999): a port derived from the job id
     * in it was once held by some connection's own end ("Address already in use" under
     * ctest -j2), and the job ran program order. The channel takes this port and the next. */
    return any ? 20000 + (int)(h % 12700) : -1;
}

/* Where rank 0 listens; 0, or -1 with *why set when no address can be found. */
int dh__agree_address(char *host, size_t hn, int *port, const char **why)
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

int dh__agree_send_all(int fd, const void *buf, size_t n)
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
int dh__agree_recv_all(int fd, void *buf, size_t n, uint64_t deadline)
{
    char *p = buf;
    while (n > 0) {
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        int r = poll(&pf, 1, dh__agree_left_ms(deadline));
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


/* A TCP connection to host:port, retried until deadline (rank 0 may not listen yet); the
 * socket, or -1 (*resolved says whether the host resolved). */
int dh__agree_connect(const char *host, int port, uint64_t deadline, int *resolved)
{
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    *resolved = getaddrinfo(host, ps, &hints, &ai) == 0 && ai;
    if (!*resolved)
        return -1;
    int fd = -1;
    while (dh__agree_left_ms(deadline) > 1) {
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
            break;
        if (fd >= 0)
            close(fd);
        fd = -1;
        usleep(20000);
    }
    freeaddrinfo(ai);
    return fd;
}

/* Gives up for good: every later vote is a "no" without waiting. Closing the connection
 * tells its node at once, which tells every rank. */
static void dh__break(const char *why)
{
    if (!dh__ag.broken)
        DH_WARN(SCHED, "agreement between ranks failed (%s): every iteration runs in program "
                "order from here on", why);
    dh__ag.broken = 1;
    pthread_mutex_lock(&dh__ag.lock);
    dh__ag.st.broken = 1;
    pthread_mutex_unlock(&dh__ag.lock);
    if (dh__ag.fd >= 0)
        close(dh__ag.fd);
    dh__ag.fd = -1;
}

static int dh__open(void)
{
    char host[256];
    int port = 0;
    const char *why = NULL;
    if (dh__agree_address(host, sizeof host, &port, &why) < 0) {
        dh__break(why);
        return -1;
    }
    uint64_t deadline = dh__agree_now_ns() + (uint64_t)dh_config()->agree_timeout_ms * 2000000ull;
    dh__ag.fd = dh__agree_tree_open(host, port, dh__ag.rank, dh__ag.size, dh__ag.mask, deadline);
    if (dh__ag.fd < 0) {
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

/* One decision from the node: notes a no; returns 1 when it decides key (*d set). */
static int dh__take_decision(const uint64_t m[2], uint64_t key, int *d)
{
    if (m[0] == DH__BROKEN) {
        dh__break("the channel gave up: a rank did not vote in time or went away");
        *d = 0;
        return 1;
    }
    if (m[0] & DH__SW) {
        if (m[1] == DH__NEVER)
            dh__ag.sw_never[(m[0] & DH__BACK) != 0] = 1;
        if (m[0] != key)
            return 0; /* a switch round this rank did not wait for */
        *d = (int)m[1];
        return 1;
    }
    if (key & DH__SW)
        return 0;
    if (m[1] == 0 && (!dh__ag.no_key || (m[0] >> 24) > (dh__ag.no_key >> 24) ||
                      ((m[0] >> 24) == (dh__ag.no_key >> 24) && m[0] < dh__ag.no_key)))
        dh__ag.no_key = m[0];
    if (m[0] == key || (m[1] == 0 && dh__agree_covers(m[0], key))) {
        *d = m[0] == key ? (int)m[1] : 0;
        return 1;
    }
    return 0;
}

/* Reads what the node sent so far without waiting (decisions of rounds this rank did not
 * wait for). */
static void dh__poll_decisions(void)
{
    for (;;) {
        struct pollfd pf = {.fd = dh__ag.fd, .events = POLLIN};
        if (dh__ag.fd < 0 || poll(&pf, 1, 0) <= 0)
            return;
        uint64_t m[2];
        int d;
        if (dh__agree_recv_all(dh__ag.fd, m, sizeof m, dh__agree_now_ns() + 1000000000ull) < 0) {
            dh__break("its node closed the channel");
            return;
        }
        dh__take_decision(m, 0, &d);
    }
}

/* A vote of value v (1 yes, 2 drain) on key: the decision (v when every rank voted v), 0 a
 * no, -1 a timeout or a broken channel. */
static int dh__round(uint64_t key, int v)
{
    dh__poll_decisions();
    if (dh__ag.broken)
        return -1;
    if (dh__agree_covers(dh__ag.no_key, key))
        return 0;
    uint64_t m[2] = {key, (uint64_t)v};
    uint64_t deadline = dh__agree_now_ns() + (uint64_t)dh_config()->agree_timeout_ms * 1000000ull;
    if (dh__agree_send_all(dh__ag.fd, m, sizeof m) < 0) {
        dh__break("its node closed the channel");
        return -1;
    }
    for (;;) {
        int d;
        if (dh__agree_recv_all(dh__ag.fd, m, sizeof m, deadline) < 0) {
            char why[96];
            snprintf(why, sizeof why, "no decision within %lld ms",
                     (long long)dh_config()->agree_timeout_ms);
            dh__break(why);
            return -1;
        }
        if (dh__take_decision(m, key, &d))
            return dh__ag.broken ? -1 : d;
    }
}

int dh_agree_vote(uint64_t key, int yes)
{
    if (!dh_agree_needed())
        return yes != 0;
    uint64_t t0 = dh__agree_now_ns();
    int d = 0;
    if (dh_config()->test_agree_silent == dh__ag.rank && dh__ag.st.rounds >= 2 &&
        !dh__ag.silent) {
        /* A stuck peer: it says nothing more, and its connection stays open. */
        dh__ag.silent = 1;
        dh__ag.broken = 1;
        DH_WARN(SCHED, "DHELIX_TEST_AGREE_SILENT: this rank stops answering the agreement");
    }
    if (!dh__ag.broken && !dh__ag.silent && (dh__ag.opened || dh__open() == 0)) {
        dh__ag.opened = 1;
        if (yes) {
            d = dh__round(key, yes);
        } else {
            /* A no decides by itself: nobody waits for it, and it waits for nobody. */
            uint64_t m[2] = {key, 0};
            if (dh__agree_send_all(dh__ag.fd, m, sizeof m) < 0)
                dh__break("its node closed the channel");
        }
    }
    uint64_t dt = dh__agree_now_ns() - t0;
    DH_DEBUG(SCHED, "agreement: vote %d on iteration %llu pair %llu sub %llu: %d (%llu us)", yes,
             (unsigned long long)(key >> 24), (unsigned long long)(key >> 8 & 0xffff),
             (unsigned long long)(key & 0xff), d, (unsigned long long)(dt / 1000));
    pthread_mutex_lock(&dh__ag.lock);
    dh__ag.st.rounds++;
    if (d > 0)
        dh__ag.st.yes++;
    else
        dh__ag.st.no++;
    if (d < 0)
        dh__ag.st.timeouts++;
    if (yes) {
        dh__ag.st.waits++;
        dh__ag.st.total_ns += dt;
        if (dt > dh__ag.st.max_ns)
            dh__ag.st.max_ns = dt;
    }
    dh__ag.st.broken = dh__ag.broken;
    pthread_mutex_unlock(&dh__ag.lock);
    return d > 0 ? d : 0;
}

void dh_agree_set_mask(uint64_t mask)
{
    dh__ag.mask = mask;
    if (dh__ag.opened && !dh__ag.broken && dh__ag.fd >= 0) {
        uint64_t m[2] = {DH__MASK, mask};
        if (dh__agree_send_all(dh__ag.fd, m, sizeof m) < 0)
            dh__break("its node closed the channel");
    }
}

/* A switch round of family f (0 or DH__BACK) at boundary k with vote v: the decision 1, 0,
 * or DH__NEVER (also for a broken channel, which decides nothing more). */
static int dh__switch(uint64_t f, uint64_t k, int v)
{
    if (dh__ag.broken || dh__ag.silent || (!dh__ag.opened && dh__open() != 0))
        return DH__NEVER;
    dh__ag.opened = 1;
    dh__poll_decisions();
    if (dh__ag.broken || dh__ag.sw_never[f != 0])
        return DH__NEVER;
    uint64_t key = DH__SW | f | (k & ~(DH__SW | DH__MASK | DH__BACK));
    if (v != 1) {
        /* Not ready, or never, decides the round by itself: nobody waits for it, and it
         * waits for nobody. */
        uint64_t m[2] = {key, (uint64_t)v};
        if (dh__agree_send_all(dh__ag.fd, m, sizeof m) < 0)
            dh__break("its node closed the channel");
        return v == DH__NEVER ? DH__NEVER : 0;
    }
    int d = dh__round(key, 1);
    return d < 0 ? DH__NEVER : d;
}

int dh_agree_switch(uint64_t k, int ready)
{
    if (!dh_agree_needed())
        return ready == DH__NEVER ? -1 : ready != 0;
    int d = dh__switch(0, k, ready == DH__NEVER ? DH__NEVER : ready != 0);
    return d == DH__NEVER ? -1 : d;
}

int dh_agree_switch_back(uint64_t k, int yes)
{
    if (!dh_agree_needed())
        return yes != 0;
    return dh__switch(DH__BACK, k, yes != 0) == 1;
}

void dh_agree_open(void)
{
    if (dh_agree_needed() && !dh__ag.opened && !dh__ag.broken && dh__open() == 0)
        dh__ag.opened = 1;
}

void dh_agree_stats(dh_agree_stats_t *out)
{
    pthread_mutex_lock(&dh__ag.lock);
    *out = dh__ag.st;
    pthread_mutex_unlock(&dh__ag.lock);
}

void dh_agree_close(void)
{
    if (dh__ag.fd >= 0)
        close(dh__ag.fd);
    dh__ag.fd = -1;
}

int dh_agree_rank(void)
{
    pthread_once(&dh__ag.once, dh__env);
    return dh__ag.rank;
}
