/*
 * agree_tree.c: the agreement channel's tree of relays (agree.h, agree_int.h).
 *
 * Why a tree: with one hub that holds a connection per rank, a round costs the hub a message
 * from and to every rank and a look at every rank's vote, so its latency grows with the
 * ranks (measured in docs/agreement.md: 2.3 s a round with 1024 ranks on two cores). Here
 * rank r's parent is (r - 1) / DH__FANOUT, its children r * DH__FANOUT + 1 .. + DH__FANOUT:
 * each node hears its own voter and at most DH__FANOUT children and tells its parent only a
 * summary of its subtree, so that a round costs every node O(DH__FANOUT) messages and its
 * decision O(log ranks) hops up and down.
 *
 * The summary is what rank 0's decision rules need, folded over the subtree's ranks (a rank
 * not connected yet counts as one that voted on nothing, with every pair bit, as the hub
 * counted it):
 *   per pair bit b: the lowest latest-yes key among the ranks with b (min_vkey) and the set
 *     of their latest yes values (vset);
 *   per switch family f: the lowest 1 + last boundary voted (min_last) and the highest
 *     min(1 + last boundary, first ready boundary) (nr_max: below it some rank was there and
 *     not ready).
 * Besides, a node passes up once per key the rounds its subtree waits on (PEND), every "no"
 * and the first "never" per family; the root decides, as the hub did:
 *   pair key K of bit b: no when a "no" covers it (agree_int.h); else pending while
 *     min_vkey[b] < K; yes v when min_vkey[b] == K and vset[b] is {v}; else no (differing
 *     votes, or no rank with b voted on K itself);
 *   switch boundary k: never once a rank voted never; no when k < nr_max; yes when
 *     min_last >= k + 1; else pending.
 * These are functions of the votes alone, so no decision depends on timing: a summary that
 * is late only keeps a round pending longer. Decisions go down to every node and voter.
 *
 * Opening: every rank registers with rank 0's listener (its rank and, for a relay, the port
 * it listens on); rank 0 answers with the parent's address once the parent has registered
 * (a child of rank 0 keeps that connection as its link). A relay then listens until its
 * children connected, rank 0 until every rank registered: both bounded by the opening
 * deadline, past which the channel breaks as the hub's did.
 *
 * Breaking: a node that loses a link (a voter that timed out closes its connection; a
 * process that went away), hears DH__BROKEN from its parent, or misses the deadline, sends
 * DH__BROKEN to its voter and children and closes every link: the break floods the tree,
 * and every voter then answers "no" without waiting, as with the hub.
 *
 * Thread-safety: one node per process, used only by its thread once started (the opening
 * fills it before).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agree_int.h"
#include "common/log.h"

/* Children per node: 1024 ranks are four levels below rank 0, and a node's work per round
 * stays a few dozen messages. */
#define DH__FANOUT 8
#define DH__NLINK (DH__FANOUT + 1)
/* A registration: (DH__REG | rank, port the rank listens on, 0 for a leaf). */
#define DH__REG (1ull << 63)

/* Messages a relay sends its parent: three 64-bit words (tag << 8 | index, a, b). */
enum {
    DH__U_SUM = 1,    /* index bit b: a min_vkey[b], b vset[b] */
    DH__U_SW = 2,     /* index family f: a min_last[f], b nr_max[f] */
    DH__U_PEND = 3,   /* a: a pair key some rank of the subtree waits on */
    DH__U_SWPEND = 4, /* index f: a boundary k some rank waits on */
    DH__U_NO = 5,     /* a: a "no from a on" */
    DH__U_NEVER = 6,  /* index f: a rank voted never, at boundary a */
};

typedef struct dh__sum {
    uint64_t min_vkey[64];
    uint8_t vset[64];
    uint64_t min_last[2], nr_max[2];
} dh__sum_t;

/* A link: this rank's voter (link 0) or a child's subtree. A raw link is one rank's voter
 * (its votes kept as the hub kept them); a relay link sends summaries. */
/* Bytes read from a link and not yet a whole message: a pass takes everything that came. */
typedef struct dh__rbuf {
    size_t n;
    char b[4096];
} dh__rbuf_t;

typedef struct dh__link {
    int fd, rank, raw;
    dh__sum_t sum;
    uint64_t mask, vkey, vval, last[2], yes[2];
    dh__rbuf_t in;
} dh__link_t;

static struct {
    int rank, size, root;
    int ls, up;                   /* listening socket (until all came); parent link */
    int nlink, connected;         /* links: [0] own voter, [1..] children */
    dh__link_t link[DH__NLINK];
    dh__sum_t all, sent;          /* the subtree's summary; what the parent has of it */
    dh__rbuf_t upin;              /* from the parent */
    size_t nout;                  /* to the parent: one send per pass (dh__up, dh__flush) */
    uint64_t out[3 * 80];
    uint64_t pend[DH__PENDING];   /* pair keys passed up (relays) or undecided (root) */
    int npend;
    struct {
        uint64_t pend[DH__PENDING];
        int npend, never, never_up;
        uint64_t never_k;
    } sw[2];
    uint64_t no_key;              /* root: lowest key decided no in the newest iteration */
    uint64_t deadline;            /* for the connections */
    /* Root: the registry of where relays listen, and registrations waiting for a parent. */
    uint32_t *ip;
    uint16_t *port;
    uint8_t *reg;
    int nreg;
    int *park_fd, *park_rank, npark;
} dh__nd;

static int dh__first_child(int r)
{
    return r * DH__FANOUT + 1;
}

static int dh__nchildren(int r, int size)
{
    int c = dh__first_child(r);
    if (c >= size)
        return 0;
    return size - c < DH__FANOUT ? size - c : DH__FANOUT;
}

static int dh__bitidx(uint64_t key)
{
    uint64_t p = key >> 8 & 0xffff;
    return p < 63 ? (int)p : 63;
}

/* A rank that said nothing yet: every pair bit, no vote. */
static void dh__link_reset(dh__link_t *l)
{
    memset(l, 0, sizeof *l);
    l->fd = -1;
    l->raw = 1;
    l->mask = UINT64_MAX;
    l->yes[0] = l->yes[1] = UINT64_MAX;
}

static void dh__raw_sum(dh__link_t *l)
{
    for (int b = 0; b < 64; b++) {
        int has = (l->mask >> b) & 1;
        l->sum.min_vkey[b] = has ? l->vkey : UINT64_MAX;
        l->sum.vset[b] = has ? (uint8_t)(1u << (l->vval & 7)) : 0;
    }
    for (int f = 0; f < 2; f++) {
        l->sum.min_last[f] = l->last[f];
        l->sum.nr_max[f] = l->last[f] < l->yes[f] ? l->last[f] : l->yes[f];
    }
}

static void dh__combine(dh__sum_t *s)
{
    for (int b = 0; b < 64; b++) {
        s->min_vkey[b] = UINT64_MAX;
        s->vset[b] = 0;
    }
    for (int f = 0; f < 2; f++) {
        s->min_last[f] = UINT64_MAX;
        s->nr_max[f] = 0;
    }
    for (int i = 0; i < dh__nd.nlink; i++) {
        const dh__sum_t *c = &dh__nd.link[i].sum;
        for (int b = 0; b < 64; b++) {
            if (c->min_vkey[b] < s->min_vkey[b])
                s->min_vkey[b] = c->min_vkey[b];
            s->vset[b] |= c->vset[b];
        }
        for (int f = 0; f < 2; f++) {
            if (c->min_last[f] < s->min_last[f])
                s->min_last[f] = c->min_last[f];
            if (c->nr_max[f] > s->nr_max[f])
                s->nr_max[f] = c->nr_max[f];
        }
    }
}

/* Gives up for good: every voter and child hears it, every link closes (the parent sees
 * its end close), and the node's thread ends. */
static void dh__node_break(void)
{
    uint64_t m[2] = {DH__BROKEN, 0};
    for (int i = 0; i < dh__nd.nlink; i++)
        if (dh__nd.link[i].fd >= 0) {
            dh__agree_send_all(dh__nd.link[i].fd, m, sizeof m);
            close(dh__nd.link[i].fd);
            dh__nd.link[i].fd = -1;
        }
    if (dh__nd.up >= 0)
        close(dh__nd.up);
    if (dh__nd.ls >= 0)
        close(dh__nd.ls);
    dh__nd.up = dh__nd.ls = -1;
    for (int i = 0; i < dh__nd.npark; i++)
        close(dh__nd.park_fd[i]);
    dh__nd.npark = 0;
}

/* A decision (or a break) to this rank's voter and every child; 0, or -1 when a link
 * failed (the caller breaks). */
static int dh__down(uint64_t key, uint64_t d)
{
    uint64_t m[2] = {key, d};
    for (int i = 0; i < dh__nd.nlink; i++)
        if (dh__nd.link[i].fd >= 0 && dh__agree_send_all(dh__nd.link[i].fd, m, sizeof m) < 0)
            return -1;
    return 0;
}

/* Sends what dh__up gathered; 0, or -1 when the parent's link failed. */
static int dh__flush(void)
{
    size_t n = dh__nd.nout;
    dh__nd.nout = 0;
    return dh__nd.up >= 0 && n ? dh__agree_send_all(dh__nd.up, dh__nd.out, n * sizeof(uint64_t))
                               : 0;
}

/* A message to the parent, sent with the pass's others (a vote changes up to 64 bits of a
 * summary at once). */
static int dh__up(uint64_t tag, uint64_t a, uint64_t b)
{
    if (dh__nd.nout + 3 > sizeof dh__nd.out / sizeof dh__nd.out[0] && dh__flush() < 0)
        return -1;
    dh__nd.out[dh__nd.nout++] = tag;
    dh__nd.out[dh__nd.nout++] = a;
    dh__nd.out[dh__nd.nout++] = b;
    return 0;
}

static int dh__has(const uint64_t *set, int n, uint64_t key)
{
    for (int i = 0; i < n; i++)
        if (set[i] == key)
            return i;
    return -1;
}

/* Forgets a decided round; returns whether it was listed. */
static int dh__forget(uint64_t *set, int *n, uint64_t key)
{
    int i = dh__has(set, *n, key);
    if (i >= 0)
        set[i] = set[--*n];
    return i >= 0;
}

static int dh__decide(uint64_t key, uint64_t d)
{
    if (key & DH__SW)
        dh__forget(dh__nd.sw[(key & DH__BACK) != 0].pend, &dh__nd.sw[(key & DH__BACK) != 0].npend,
                   key & ~(DH__SW | DH__BACK));
    else
        dh__forget(dh__nd.pend, &dh__nd.npend, key);
    return dh__down(key, d);
}

/* Root: decides the pending rounds that can be (the rules at the top). */
static int dh__root_settle(void)
{
    const dh__sum_t *s = &dh__nd.all;
    for (int i = 0; i < dh__nd.npend;) {
        uint64_t key = dh__nd.pend[i];
        int b = dh__bitidx(key), d;
        if (dh__agree_covers(dh__nd.no_key, key))
            d = 0;
        else if (s->min_vkey[b] < key)
            d = -1;
        else if (s->min_vkey[b] > key)
            d = 0;
        else
            d = s->vset[b] == 2 ? 1 : s->vset[b] == 4 ? 2 : 0;
        if (d < 0) {
            i++;
            continue;
        }
        if (dh__decide(key, (uint64_t)d) < 0)
            return -1;
        i = 0; /* the list changed under the index */
    }
    for (int f = 0; f < 2; f++)
        for (int i = 0; i < dh__nd.sw[f].npend;) {
            uint64_t k = dh__nd.sw[f].pend[i];
            int d = dh__nd.sw[f].never            ? DH__NEVER
                    : k < s->nr_max[f]            ? 0
                    : s->min_last[f] >= k + 1     ? 1
                                                  : -1;
            if (d < 0) {
                i++;
                continue;
            }
            if (dh__decide(DH__SW | (f ? DH__BACK : 0) | k, (uint64_t)d) < 0)
                return -1;
            i = 0;
        }
    return 0;
}

/* A round some rank of this subtree waits on: the root lists it (or declines it when more
 * rounds are pending than any plan has, as the hub did); a relay passes it up once. */
static int dh__pend(int f, uint64_t k)
{
    uint64_t *set = f < 0 ? dh__nd.pend : dh__nd.sw[f].pend;
    int *n = f < 0 ? &dh__nd.npend : &dh__nd.sw[f].npend;
    if (dh__has(set, *n, k) >= 0)
        return 0;
    if (*n < DH__PENDING)
        set[(*n)++] = k;
    else if (dh__nd.root)
        return f < 0 ? dh__down(k, 0)
                     : dh__down(DH__SW | (f ? DH__BACK : 0) | k,
                                dh__nd.sw[f].never ? DH__NEVER : 0);
    if (dh__nd.root)
        return 0;
    return f < 0 ? dh__up(DH__U_PEND << 8, k, 0)
                 : dh__up((uint64_t)DH__U_SWPEND << 8 | (uint64_t)f, k, 0);
}

/* A "no from key on": the root decides it and the rest of its iteration (newer iterations
 * replace older ones; keys only grow) and tells everyone, also the ranks that wait on a
 * round of that iteration not listed yet; a relay passes it up. */
static int dh__no(uint64_t key)
{
    if (!dh__nd.root)
        return dh__up(DH__U_NO << 8, key, 0);
    uint64_t nk = dh__nd.no_key;
    if (!nk || (key >> 24) > (nk >> 24) || ((key >> 24) == (nk >> 24) && key < nk))
        dh__nd.no_key = key;
    return dh__root_settle() < 0 ? -1 : dh__down(key, 0);
}

/* A rank of this subtree voted never in family f: nobody waits for it from now on. The root
 * tells everyone at once (a rank still without a plan learns at its next vote that none
 * will be used); a relay passes it up once. */
static int dh__never(int f, uint64_t k)
{
    if (dh__nd.root) {
        if (dh__nd.sw[f].never)
            return 0;
        dh__nd.sw[f].never = 1;
        dh__nd.sw[f].never_k = k;
        return dh__down(DH__SW | (f ? DH__BACK : 0) | k, DH__NEVER);
    }
    if (dh__nd.sw[f].never_up)
        return 0;
    dh__nd.sw[f].never_up = 1;
    return dh__up((uint64_t)DH__U_NEVER << 8 | (uint64_t)f, k, 0);
}

/* A switch vote of one rank (a raw link), as the hub took it. */
static int dh__raw_switch(dh__link_t *l, int f, uint64_t k, uint64_t v)
{
    uint64_t key = DH__SW | (f ? DH__BACK : 0) | k;
    int known = dh__nd.sw[f].never || dh__nd.sw[f].never_up;
    if (k + 1 > l->last[f])
        l->last[f] = k + 1;
    if (v == DH__NEVER && !known) {
        if (dh__never(f, k) < 0)
            return -1;
    } else if (known && v != 1) {
        /* A rank that missed the news (it connected later, or its vote crossed it). */
        uint64_t m[2] = {key, DH__NEVER};
        if (dh__agree_send_all(l->fd, m, sizeof m) < 0)
            return -1;
    } else if (v == 1 && l->yes[f] == UINT64_MAX) {
        l->yes[f] = k;
    }
    return v == 1 ? dh__pend(f, k) : 0;
}

static int dh__raw_msg(dh__link_t *l, uint64_t key, uint64_t val)
{
    int rc = 0;
    if (key & DH__SW) {
        rc = dh__raw_switch(l, (key & DH__BACK) != 0, key & ~(DH__SW | DH__BACK), val);
    } else if (key == DH__MASK) {
        l->mask = val;
    } else if (!val) {
        rc = dh__no(key);
    } else {
        if (key >= l->vkey) {
            l->vkey = key;
            l->vval = val;
        }
        rc = dh__pend(-1, key);
    }
    dh__raw_sum(l);
    return rc;
}

static int dh__relay_msg(dh__link_t *l, const uint64_t m[3])
{
    int tag = (int)(m[0] >> 8), i = (int)(m[0] & 0xff);
    switch (tag) {
    case DH__U_SUM:
        l->sum.min_vkey[i & 63] = m[1];
        l->sum.vset[i & 63] = (uint8_t)m[2];
        return 0;
    case DH__U_SW:
        l->sum.min_last[i & 1] = m[1];
        l->sum.nr_max[i & 1] = m[2];
        return 0;
    case DH__U_PEND:
        return dh__pend(-1, m[1]);
    case DH__U_SWPEND:
        return dh__pend(i & 1, m[1]);
    case DH__U_NO:
        return dh__no(m[1]);
    case DH__U_NEVER:
        return dh__never(i & 1, m[1]);
    default:
        return -1; /* not this protocol: the link is not to be trusted */
    }
}

/* A relay: what its parent does not know yet of the subtree's summary. */
static int dh__send_summary(void)
{
    dh__sum_t *a = &dh__nd.all, *s = &dh__nd.sent;
    for (int b = 0; b < 64; b++)
        if (a->min_vkey[b] != s->min_vkey[b] || a->vset[b] != s->vset[b]) {
            if (dh__up((uint64_t)DH__U_SUM << 8 | (uint64_t)b, a->min_vkey[b], a->vset[b]) < 0)
                return -1;
            s->min_vkey[b] = a->min_vkey[b];
            s->vset[b] = a->vset[b];
        }
    for (int f = 0; f < 2; f++)
        if (a->min_last[f] != s->min_last[f] || a->nr_max[f] != s->nr_max[f]) {
            if (dh__up((uint64_t)DH__U_SW << 8 | (uint64_t)f, a->min_last[f], a->nr_max[f]) < 0)
                return -1;
            s->min_last[f] = a->min_last[f];
            s->nr_max[f] = a->nr_max[f];
        }
    return dh__flush();
}

/* A decision from the parent: to everyone below; a "never" noted for late comers. */
static int dh__from_parent(uint64_t key, uint64_t d)
{
    if (key == DH__BROKEN)
        return -1;
    if ((key & DH__SW) && d == DH__NEVER) {
        int f = (key & DH__BACK) != 0;
        dh__nd.sw[f].never = 1;
        dh__nd.sw[f].never_k = key & ~(DH__SW | DH__BACK);
    }
    return dh__decide(key, d);
}

/* Attaches child rank r on fd; a late comer hears what it missed that it cannot learn at
 * its next vote ("never"). */
static int dh__attach(int r, int fd)
{
    int i = r - dh__first_child(dh__nd.rank) + 1;
    if (i < 1 || i >= dh__nd.nlink || dh__nd.link[i].fd >= 0)
        return -1;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    dh__nd.link[i].fd = fd;
    dh__nd.link[i].rank = r;
    dh__nd.link[i].raw = dh__nchildren(r, dh__nd.size) == 0;
    dh__nd.connected++;
    for (int f = 0; f < 2; f++)
        if (dh__nd.sw[f].never) {
            uint64_t m[2] = {DH__SW | (f ? DH__BACK : 0) | dh__nd.sw[f].never_k, DH__NEVER};
            if (dh__agree_send_all(fd, m, sizeof m) < 0)
                return -1;
        }
    return 0;
}

/* Root: tells a registered rank where its parent listens, and closes. */
static void dh__tell_parent(int fd, int r)
{
    int p = (r - 1) / DH__FANOUT;
    uint64_t m[2] = {dh__nd.ip[p], dh__nd.port[p]};
    dh__agree_send_all(fd, m, sizeof m);
    close(fd);
}

/* Root: a registration (DH__REG | rank, port). A child of the root keeps the connection as
 * its link; any other rank learns its parent's address when the parent has registered. */
static int dh__register(int fd, const uint64_t m[2])
{
    uint64_t r = m[0] & ~DH__REG;
    struct sockaddr_in a;
    socklen_t al = sizeof a;
    if (r == 0 || r >= (uint64_t)dh__nd.size || dh__nd.reg[r] ||
        getpeername(fd, (struct sockaddr *)&a, &al) < 0)
        return -1;
    dh__nd.reg[r] = 1;
    dh__nd.nreg++;
    dh__nd.ip[r] = a.sin_addr.s_addr;
    dh__nd.port[r] = (uint16_t)m[1];
    if ((r - 1) / DH__FANOUT == 0) {
        uint64_t here[2] = {0, 0};
        if (dh__agree_send_all(fd, here, sizeof here) < 0 || dh__attach((int)r, fd) < 0)
            return -1;
    } else if (dh__nd.reg[(r - 1) / DH__FANOUT]) {
        dh__tell_parent(fd, (int)r);
    } else {
        dh__nd.park_fd[dh__nd.npark] = fd;
        dh__nd.park_rank[dh__nd.npark++] = (int)r;
    }
    for (int i = 0; i < dh__nd.npark;)
        if (dh__nd.reg[(dh__nd.park_rank[i] - 1) / DH__FANOUT]) {
            dh__tell_parent(dh__nd.park_fd[i], dh__nd.park_rank[i]);
            dh__nd.npark--;
            dh__nd.park_fd[i] = dh__nd.park_fd[dh__nd.npark];
            dh__nd.park_rank[i] = dh__nd.park_rank[dh__nd.npark];
        } else {
            i++;
        }
    return 0;
}

/* A new connection: a registration (root) or a child's hello (rank, 0). A connection that
 * says nothing sensible is dropped; the deadline then tells. */
static void dh__accept(void)
{
    int fd = accept4(dh__nd.ls, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
        return;
    uint64_t m[2];
    int ok = dh__agree_recv_all(fd, m, sizeof m, dh__agree_now_ns() + 2000000000ull) == 0;
    if (ok && dh__nd.root)
        ok = (m[0] & DH__REG) && dh__register(fd, m) == 0;
    else if (ok)
        ok = m[0] < (uint64_t)dh__nd.size && dh__attach((int)m[0], fd) == 0;
    if (!ok)
        close(fd);
}

static int dh__listening(void)
{
    return dh__nd.ls >= 0 && (dh__nd.connected < dh__nd.nlink - 1 ||
                              (dh__nd.root && dh__nd.nreg < dh__nd.size - 1));
}

/* Reads what fd has into in: 0, or -1 when the peer closed or the link failed. */
static int dh__fill(int fd, dh__rbuf_t *in)
{
    ssize_t k = recv(fd, in->b + in->n, sizeof in->b - in->n, MSG_DONTWAIT);
    if (k == 0)
        return -1;
    if (k < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
    in->n += (size_t)k;
    return 0;
}

/* Every whole message a link sent; -1 when it is gone or broken. */
static int dh__read_link(dh__link_t *l)
{
    size_t sz = (l->raw ? 2 : 3) * sizeof(uint64_t), off = 0;
    int rc = dh__fill(l->fd, &l->in);
    for (; rc == 0 && l->in.n - off >= sz; off += sz) {
        uint64_t m[3];
        memcpy(m, l->in.b + off, sz);
        rc = l->raw ? dh__raw_msg(l, m[0], m[1]) : dh__relay_msg(l, m);
    }
    memmove(l->in.b, l->in.b + off, l->in.n - off);
    l->in.n -= off;
    return rc;
}

/* Every whole decision the parent sent; -1 when it is gone or the channel broke. */
static int dh__read_up(void)
{
    dh__rbuf_t *in = &dh__nd.upin;
    size_t sz = 2 * sizeof(uint64_t), off = 0;
    int rc = dh__fill(dh__nd.up, in);
    for (; rc == 0 && in->n - off >= sz; off += sz) {
        uint64_t m[2];
        memcpy(m, in->b + off, sz);
        rc = dh__from_parent(m[0], m[1]);
    }
    memmove(in->b, in->b + off, in->n - off);
    in->n -= off;
    return rc;
}

/* One pass over what is ready; -1 to break. */
static int dh__node_pass(struct pollfd *pf, const int *who, int n)
{
    for (int i = 0; i < n; i++) {
        if (!pf[i].revents)
            continue;
        if (who[i] == -1) {
            dh__accept();
        } else if (who[i] == -2) {
            if (dh__read_up() < 0)
                return -1;
        } else if (dh__read_link(&dh__nd.link[who[i]]) < 0) {
            return -1;
        }
    }
    dh__combine(&dh__nd.all);
    return dh__nd.root ? dh__root_settle() : dh__send_summary();
}

static void *dh__node_main(void *arg)
{
    (void)arg;
    struct pollfd pf[DH__NLINK + 2];
    int who[DH__NLINK + 2];
    dh__combine(&dh__nd.all);
    if (!dh__nd.root && dh__send_summary() < 0) {
        dh__node_break();
        return NULL;
    }
    for (;;) {
        int n = 0, listening = dh__listening();
        if (listening) {
            pf[n] = (struct pollfd){.fd = dh__nd.ls, .events = POLLIN};
            who[n++] = -1;
        } else if (dh__nd.ls >= 0) {
            close(dh__nd.ls);
            dh__nd.ls = -1;
        }
        if (dh__nd.up >= 0) {
            pf[n] = (struct pollfd){.fd = dh__nd.up, .events = POLLIN};
            who[n++] = -2;
        }
        for (int i = 0; i < dh__nd.nlink; i++)
            if (dh__nd.link[i].fd >= 0) {
                pf[n] = (struct pollfd){.fd = dh__nd.link[i].fd, .events = POLLIN};
                who[n++] = i;
            }
        int wait = listening ? dh__agree_left_ms(dh__nd.deadline) : -1;
        if (listening && wait == 0) {
            /* Not every rank came in time: nobody waits for them. */
            DH_WARN(SCHED, "agreement channel: rank %d heard from %d of its %d children%s in "
                    "time", dh__nd.rank, dh__nd.connected, dh__nd.nlink - 1,
                    dh__nd.root ? " and not every rank registered" : "");
            break;
        }
        int k = poll(pf, (nfds_t)n, wait);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 || dh__node_pass(pf, who, n) < 0)
            break;
    }
    dh__node_break();
    return NULL;
}

/* Registers rank with rank 0 (myport: where it listens for children, 0 for a leaf) and
 * connects to its parent, before deadline; the link, or -1. A child of rank 0 keeps the
 * registration's connection; any other rank says hello (rank, 0) to its parent. */
static int dh__join(const char *host, int port, int rank, int myport, uint64_t deadline)
{
    int resolved, one = 1;
    int fd = dh__agree_connect(host, port, deadline, &resolved);
    uint64_t m[2] = {DH__REG | (uint64_t)rank, (uint64_t)myport};
    if (fd >= 0 && (dh__agree_send_all(fd, m, sizeof m) < 0 ||
                    dh__agree_recv_all(fd, m, sizeof m, deadline) < 0)) {
        close(fd);
        fd = -1;
    }
    if (fd >= 0 && (m[0] != 0 || m[1] != 0)) {
        close(fd);
        char ip[INET_ADDRSTRLEN];
        struct in_addr a = {.s_addr = (uint32_t)m[0]};
        inet_ntop(AF_INET, &a, ip, sizeof ip);
        fd = dh__agree_connect(ip, (int)m[1], deadline, &resolved);
        uint64_t hello[2] = {(uint64_t)rank, 0};
        if (fd >= 0 && dh__agree_send_all(fd, hello, sizeof hello) < 0) {
            close(fd);
            fd = -1;
        }
    }
    if (fd >= 0)
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

/* A leaf: joins, then tells its parent its pair bits; the link, or -1. */
static int dh__leaf_open(const char *host, int port, int rank, uint64_t mask, uint64_t deadline)
{
    int fd = dh__join(host, port, rank, 0, deadline);
    uint64_t mm[2] = {DH__MASK, mask};
    if (fd >= 0 && dh__agree_send_all(fd, mm, sizeof mm) < 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

static int dh__listen(int port, int backlog)
{
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (ls < 0)
        return -1;
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_ANY)};
    if (bind(ls, (struct sockaddr *)&a, sizeof a) < 0 || listen(ls, backlog) < 0) {
        DH_WARN(SCHED, "agreement channel: cannot listen on port %d: %s", port, strerror(errno));
        close(ls);
        return -1;
    }
    return ls;
}

/* The node's state before its thread starts; the voter's end of the socketpair, or -1. */
static int dh__node_init(int rank, int size, uint64_t mask, uint64_t deadline, int ls)
{
    int sp[2];
    dh__nd.rank = rank;
    dh__nd.size = size;
    dh__nd.root = rank == 0;
    dh__nd.ls = ls;
    dh__nd.up = -1;
    dh__nd.deadline = deadline;
    dh__nd.nlink = 1 + dh__nchildren(rank, size);
    for (int i = 0; i < dh__nd.nlink; i++) {
        dh__link_reset(&dh__nd.link[i]);
        dh__raw_sum(&dh__nd.link[i]);
    }
    /* The parent's picture of a relay not heard from yet: the same as a silent rank's. */
    dh__nd.sent = dh__nd.link[0].sum;
    dh__nd.link[0].mask = mask;
    dh__nd.link[0].rank = rank;
    dh__raw_sum(&dh__nd.link[0]);
    if (dh__nd.root) {
        size_t n = (size_t)size;
        dh__nd.ip = calloc(n, sizeof *dh__nd.ip);
        dh__nd.port = calloc(n, sizeof *dh__nd.port);
        dh__nd.reg = calloc(n, sizeof *dh__nd.reg);
        dh__nd.park_fd = calloc(n, sizeof *dh__nd.park_fd);
        dh__nd.park_rank = calloc(n, sizeof *dh__nd.park_rank);
        if (!dh__nd.ip || !dh__nd.port || !dh__nd.reg || !dh__nd.park_fd || !dh__nd.park_rank)
            return -1;
    }
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
        return -1;
    dh__nd.link[0].fd = sp[0];
    return sp[1];
}

static int dh__start(void *(*fn)(void *), void *arg)
{
    pthread_t t;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &at, fn, arg);
    pthread_attr_destroy(&at);
    return rc;
}

int dh__agree_tree_open(const char *host, int port, int rank, int size, uint64_t mask,
                        uint64_t deadline)
{
    if (rank != 0 && dh__nchildren(rank, size) == 0)
        return dh__leaf_open(host, port, rank, mask, deadline);
    /* Rank 0 listens where every rank registers; a relay where its children connect. */
    int ls = dh__listen(rank == 0 ? port : 0, rank == 0 ? (size < 4096 ? size : 4096) : 64);
    if (ls < 0)
        return -1;
    int myport = 0;
    struct sockaddr_in a;
    socklen_t al = sizeof a;
    if (rank != 0 && getsockname(ls, (struct sockaddr *)&a, &al) == 0)
        myport = ntohs(a.sin_port);
    int vfd = dh__node_init(rank, size, mask, deadline, ls);
    if (vfd >= 0 && rank != 0) {
        /* Joined before the first vote, as a leaf is: the opening is what may take twice the
         * timeout, the round itself has its own. Children queue in the backlog meanwhile. */
        dh__nd.up = dh__join(host, port, rank, myport, deadline);
        if (dh__nd.up < 0)
            DH_WARN(SCHED, "agreement channel: rank %d could not join its parent in time", rank);
    }
    if (vfd < 0 || (rank != 0 && dh__nd.up < 0) || dh__start(dh__node_main, NULL) != 0) {
        if (vfd >= 0)
            close(vfd);
        dh__node_break();
        return -1;
    }
    return vfd;
}
