/*
 * agree.c: the ranks' agreement channel (see agree.h).
 *
 * A hub thread in rank 0 holds one TCP connection per rank (rank 0's own voter reaches it
 * through a socketpair), so that rounds are decided whatever rank 0's program is doing.
 * Messages are two 64-bit words. A voter sends (rank, mask) once, then (key, 1) for a yes or
 * (key, 0) for "no from key on"; the hub sends every decision, (key, 0 or 1), to every rank,
 * and (DH__BROKEN, 0) when it gives up. Round key is decided yes once every rank whose
 * mask has the key's pair bit voted yes on it; no as soon as any rank said no from a key
 * at or below it in the same iteration (key >> 16). A voter waits for its own round only,
 * up to DHELIX_AGREE_TIMEOUT_MS; on a timeout it closes its connection, the hub sees the
 * end of the stream and breaks the channel for everyone.
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

#define DH__BROKEN UINT64_MAX
/* Auto mode's switch rounds: key DH__SW | k, k the iteration boundary (dh_agree_switch),
 * and DH__SW | DH__BACK | k for the switch back (dh_agree_switch_back): two families of
 * rounds with their own state at the hub. Votes 0 (not ready), 1 (ready), 2 (never: no
 * round of the family will be decided yes, DH__NEVER, and a decision 2 says so).
 * DH__MASK: (DH__MASK, mask) replaces the sender's pair bits (a plan attached later). */
#define DH__SW (1ull << 62)
#define DH__MASK (1ull << 61)
#define DH__BACK (1ull << 60)
#define DH__NEVER 2
#define DH__PENDING 64            /* undecided rounds the hub tracks at once */

static struct {
    pthread_once_t once;
    int rank, size, local;        /* from the launcher; local: every rank on this host */
    uint64_t mask;                /* this rank's pair bits (dh_agree_set_mask) */
    /* Used by the one voting thread at a time (agree.h): */
    int opened, broken, silent, fd; /* fd: this rank's connection to the hub */
    uint64_t no_key;              /* the lowest key known decided no in its iteration, 0 */
    int sw_never[2];              /* a switch family was decided "never" (any round) */
    /* guarded by lock: */
    pthread_mutex_t lock;
    dh_agree_stats_t st;
} dh__ag = {.once = PTHREAD_ONCE_INIT, .fd = -1, .lock = PTHREAD_MUTEX_INITIALIZER};

/* The hub (rank 0's thread only, once started). */
static struct {
    int ls, n;                    /* listening socket; connections so far */
    int *fd;                      /* [size]: rank r's connection, -1 none */
    uint64_t *mask;               /* [size]: rank r's pair bits (all until it says) */
    uint64_t *vkey, *vval;        /* [size]: rank r's latest vote (key, value) */
    uint64_t no_key;              /* lowest key decided no in the newest iteration with one */
    uint64_t pend[DH__PENDING];   /* keys with a yes and no decision */
    int npend;
    uint64_t deadline;            /* for the connections */
    /* Switch rounds, per family (0: to SI, 1: back): every rank votes at every boundary k
     * of the family, in order; a rank, once ready, stays ready. last[r]: 1 + the last k
     * rank r voted on (0 none); yes[r]: the first k it voted ready on (UINT64_MAX none).
     * pend: boundaries with a waiting ready vote. never: a rank voted never. */
    struct dh__swf {
        uint64_t *last, *yes;
        uint64_t pend[DH__PENDING];
        int npend, never;
    } sw[2];
} dh__hub;

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


/* A vote's key (agree.h): iteration << 24 | pair << 8 | sub; the pair's bit in the masks
 * (pairs from 63 on share the last bit). */
static uint64_t dh__bit(uint64_t key)
{
    uint64_t p = key >> 8 & 0xffff;
    return 1ull << (p < 63 ? p : 63);
}

/* Whether a no from no_key decides key too: the same iteration, at or after it. */
static int dh__covers(uint64_t no_key, uint64_t key)
{
    return no_key && (no_key >> 24) == (key >> 24) && key >= no_key;
}

static void dh__hub_send(int r, uint64_t key, uint64_t d)
{
    uint64_t m[2] = {key, d};
    if (dh__hub.fd[r] >= 0 && dh__agree_send_all(dh__hub.fd[r], m, sizeof m) < 0) {
        close(dh__hub.fd[r]);
        dh__hub.fd[r] = -1;
    }
}

static void dh__hub_send_all(uint64_t key, uint64_t d)
{
    for (int r = 0; r < dh__ag.size; r++)
        dh__hub_send(r, key, d);
}

/* Decides what can be decided among the pending rounds. */
static void dh__hub_settle(void)
{
    for (int i = 0; i < dh__hub.npend;) {
        uint64_t key = dh__hub.pend[i];
        int d = -1;
        if (dh__covers(dh__hub.no_key, key)) {
            d = 0;
        } else {
            /* Every rank with the pair voted, all the same value: that value; else no. */
            d = 0;
            for (int r = 0; r < dh__ag.size && d >= 0; r++) {
                if (!(dh__hub.mask[r] & dh__bit(key)))
                    continue;
                if (dh__hub.vkey[r] < key)
                    d = -1; /* rank r has this pair and has not voted on it yet */
                else if (dh__hub.vkey[r] > key)
                    d = -3; /* it went past without voting: it counts iterations otherwise,
                               and its yes was for another one (a no, not a mismatch) */
                else if (d == 0)
                    d = (int)dh__hub.vval[r];
            }
            for (int r = 0; r < dh__ag.size && d > 0; r++)
                if ((dh__hub.mask[r] & dh__bit(key)) && dh__hub.vval[r] != (uint64_t)d)
                    d = -2;
            if (d == -2 || d == -3)
                d = 0;
        }
        if (d < 0) {
            i++;
            continue;
        }
        dh__hub_send_all(key, (uint64_t)d);
        dh__hub.pend[i] = dh__hub.pend[--dh__hub.npend];
    }
}

static void dh__hub_vote(int r, uint64_t key, uint64_t yes)
{
    if (!yes) {
        /* A no decides its round and the rest of its iteration; newer iterations replace
         * older ones (keys only grow). */
        if (!dh__hub.no_key || (key >> 24) > (dh__hub.no_key >> 24) ||
            ((key >> 24) == (dh__hub.no_key >> 24) && key < dh__hub.no_key))
            dh__hub.no_key = key;
        dh__hub_settle();
        /* Ranks that wait on a round of that iteration not pending yet learn it too. */
        dh__hub_send_all(key, 0);
        return;
    }
    if (key >= dh__hub.vkey[r]) {
        dh__hub.vkey[r] = key;
        dh__hub.vval[r] = yes;
    }
    int known = 0;
    for (int i = 0; i < dh__hub.npend; i++)
        known |= dh__hub.pend[i] == key;
    if (!known && dh__hub.npend < DH__PENDING)
        dh__hub.pend[dh__hub.npend++] = key;
    else if (!known)
        dh__hub_send_all(key, 0); /* more rounds at once than any plan has: decline */
    dh__hub_settle();
}

/* Decides the switch rounds of family f that can be: never once a rank voted never (on
 * any k: it will not be ready, so nobody must wait for it), no once a rank voted "not
 * ready" on k, yes once every rank voted ready on k. */
static void dh__hub_sw_settle(int f)
{
    struct dh__swf *w = &dh__hub.sw[f];
    for (int i = 0; i < w->npend;) {
        uint64_t k = w->pend[i];
        int d = w->never ? DH__NEVER : 1;
        for (int r = 0; r < dh__ag.size && d == 1; r++) {
            if (w->last[r] < k + 1)
                d = -1; /* rank r has not got to boundary k yet */
            else if (w->yes[r] > k)
                d = 0;  /* it was not ready there */
        }
        for (int r = 0; r < dh__ag.size && d < 0; r++)
            if (w->last[r] >= k + 1 && w->yes[r] > k)
                d = 0;
        if (d < 0) {
            i++;
            continue;
        }
        dh__hub_send_all(DH__SW | (f ? DH__BACK : 0) | k, (uint64_t)d);
        w->pend[i] = w->pend[--w->npend];
    }
}

static void dh__hub_sw_vote(int f, int r, uint64_t k, uint64_t v)
{
    struct dh__swf *w = &dh__hub.sw[f];
    if (k + 1 > w->last[r])
        w->last[r] = k + 1;
    if (v == DH__NEVER && !w->never) {
        /* Every rank hears it now, not only the ready ones that wait: a rank still without
         * a plan (its own may never come) learns at its next vote that none will be used;
         * one that connects later, or missed it, at its first vote after (below). */
        w->never = 1;
        dh__hub_send_all(DH__SW | (f ? DH__BACK : 0) | k, DH__NEVER);
    } else if (w->never && v != 1) {
        dh__hub_send(r, DH__SW | (f ? DH__BACK : 0) | k, DH__NEVER);
    } else if (v && v != DH__NEVER && w->yes[r] == UINT64_MAX)
        w->yes[r] = k;
    int known = 0;
    for (int i = 0; i < w->npend; i++)
        known |= w->pend[i] == k;
    if (v == 1 && !known && w->npend < DH__PENDING)
        w->pend[w->npend++] = k;
    else if (v == 1 && !known)
        dh__hub_send_all(DH__SW | (f ? DH__BACK : 0) | k, w->never ? DH__NEVER : 0);
    dh__hub_sw_settle(f);
}

static void dh__hub_msg(int r, uint64_t key, uint64_t val)
{
    if (key & DH__SW) {
        int f = (key & DH__BACK) != 0;
        dh__hub_sw_vote(f, r, key & ~(DH__SW | DH__BACK), val);
    } else if (key == DH__MASK) {
        dh__hub.mask[r] = val;
        dh__hub_settle();
    } else {
        dh__hub_vote(r, key, val);
    }
}

static void dh__hub_break(void)
{
    dh__hub_send_all(DH__BROKEN, 0);
    for (int r = 0; r < dh__ag.size; r++)
        if (dh__hub.fd[r] >= 0) {
            close(dh__hub.fd[r]);
            dh__hub.fd[r] = -1;
        }
}

/* A new connection: the rank and its mask first. */
static void dh__hub_accept(void)
{
    int fd = accept4(dh__hub.ls, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
        return;
    uint64_t m[2];
    if (dh__agree_recv_all(fd, m, sizeof m, dh__agree_now_ns() + 2000000000ull) < 0 ||
        m[0] == 0 || m[0] >= (uint64_t)dh__ag.size || dh__hub.fd[m[0]] >= 0) {
        close(fd);
        return;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    dh__hub.fd[m[0]] = fd;
    dh__hub.mask[m[0]] = m[1];
    dh__hub.n++;
    dh__hub_settle();
}

static void *dh__hub_main(void *arg)
{
    (void)arg;
    struct pollfd *pf = calloc((size_t)dh__ag.size + 1, sizeof *pf);
    int *who = calloc((size_t)dh__ag.size + 1, sizeof *who);
    if (!pf || !who) {
        dh__hub_break();
        free(pf);
        free(who);
        return NULL;
    }
    for (;;) {
        int n = 0, live = 0;
        int listening = dh__hub.ls >= 0 && dh__hub.n < dh__ag.size;
        if (listening) {
            pf[n] = (struct pollfd){.fd = dh__hub.ls, .events = POLLIN};
            who[n++] = -1;
        }
        for (int r = 0; r < dh__ag.size; r++)
            if (dh__hub.fd[r] >= 0) {
                pf[n] = (struct pollfd){.fd = dh__hub.fd[r], .events = POLLIN};
                who[n++] = r;
                live++;
            }
        if (live == 0 && !listening)
            break;
        int wait = listening ? dh__agree_left_ms(dh__hub.deadline) : -1;
        if (listening && wait == 0) {
            /* Not every rank connected in time: nobody waits for them. */
            close(dh__hub.ls);
            dh__hub.ls = -1;
            dh__hub_break();
            break;
        }
        int k = poll(pf, (nfds_t)n, wait);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            break;
        int lost = 0;
        for (int i = 0; i < n; i++) {
            if (!pf[i].revents)
                continue;
            if (who[i] < 0) {
                dh__hub_accept();
                continue;
            }
            uint64_t m[2];
            uint64_t until = dh__agree_now_ns() + 1000000000ull;
            if (dh__agree_recv_all(pf[i].fd, m, sizeof m, until) < 0) {
                lost = 1;
                break;
            }
            dh__hub_msg(who[i], m[0], m[1]);
        }
        if (lost) {
            /* A rank gave up (its own timeout) or went away: everyone falls back. */
            dh__hub_break();
            break;
        }
    }
    if (dh__hub.ls >= 0)
        close(dh__hub.ls);
    dh__hub.ls = -1;
    free(pf);
    free(who);
    return NULL;
}

/* Rank 0: listens, starts the hub and joins it through a socketpair. */
static int dh__open_rank0(int port, uint64_t deadline)
{
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
    int sp[2];
    size_t n = (size_t)dh__ag.size;
    dh__hub.fd = malloc(n * sizeof *dh__hub.fd);
    dh__hub.mask = malloc(n * sizeof *dh__hub.mask);
    dh__hub.vkey = calloc(n, sizeof *dh__hub.vkey);
    dh__hub.vval = calloc(n, sizeof *dh__hub.vval);
    int sw_ok = 1;
    for (int f = 0; f < 2; f++) {
        dh__hub.sw[f].last = calloc(n, sizeof *dh__hub.sw[f].last);
        dh__hub.sw[f].yes = malloc(n * sizeof *dh__hub.sw[f].yes);
        sw_ok &= dh__hub.sw[f].last && dh__hub.sw[f].yes;
    }
    if (!dh__hub.fd || !dh__hub.mask || !dh__hub.vkey || !dh__hub.vval || !sw_ok ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0) {
        close(ls);
        return -1;
    }
    for (size_t r = 0; r < n; r++) {
        dh__hub.fd[r] = -1;
        dh__hub.mask[r] = UINT64_MAX; /* a rank not connected yet may vote on anything */
        dh__hub.sw[0].yes[r] = dh__hub.sw[1].yes[r] = UINT64_MAX;
    }
    dh__hub.fd[0] = sp[0];
    dh__hub.mask[0] = dh__ag.mask;
    dh__hub.n = 1;
    dh__hub.ls = ls;
    dh__hub.deadline = deadline;
    pthread_t t;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &at, dh__hub_main, NULL);
    pthread_attr_destroy(&at);
    if (rc != 0) {
        close(ls);
        close(sp[0]);
        close(sp[1]);
        return -1;
    }
    dh__ag.fd = sp[1];
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

static int dh__open_peer(const char *host, int port, uint64_t deadline)
{
    int resolved;
    int fd = dh__agree_connect(host, port, deadline, &resolved);
    if (fd < 0)
        return -1;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    uint64_t me[2] = {(uint64_t)dh__ag.rank, dh__ag.mask};
    if (dh__agree_send_all(fd, me, sizeof me) < 0) {
        close(fd);
        return -1;
    }
    dh__ag.fd = fd;
    return 0;
}

/* Gives up for good: every later vote is a "no" without waiting. Closing the connection
 * tells the hub at once, which tells every rank. */
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
    int rc = dh__ag.rank == 0 ? dh__open_rank0(port, deadline)
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

/* One decision from the hub: notes a no; returns 1 when it decides key (*d set). */
static int dh__take_decision(const uint64_t m[2], uint64_t key, int *d)
{
    if (m[0] == DH__BROKEN) {
        dh__break("the hub gave up: a rank did not vote in time or went away");
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
    if (m[0] == key || (m[1] == 0 && dh__covers(m[0], key))) {
        *d = m[0] == key ? (int)m[1] : 0;
        return 1;
    }
    return 0;
}

/* Reads what the hub sent so far without waiting (decisions of rounds this rank did not
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
            dh__break("the hub closed the channel");
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
    if (dh__covers(dh__ag.no_key, key))
        return 0;
    uint64_t m[2] = {key, (uint64_t)v};
    uint64_t deadline = dh__agree_now_ns() + (uint64_t)dh_config()->agree_timeout_ms * 1000000ull;
    if (dh__agree_send_all(dh__ag.fd, m, sizeof m) < 0) {
        dh__break("the hub closed the channel");
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
                dh__break("the hub closed the channel");
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
            dh__break("the hub closed the channel");
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
            dh__break("the hub closed the channel");
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

int dh_agree_switch_never(void)
{
    if (!dh_agree_needed() || !dh__ag.opened)
        return 0;
    if (!dh__ag.broken && !dh__ag.silent)
        dh__poll_decisions();
    return dh__ag.broken || dh__ag.silent || dh__ag.sw_never[0];
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
