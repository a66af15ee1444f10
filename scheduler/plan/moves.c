/* moves.c: point-to-point posts moved across communicators, and the proof (moves.h). */
#include "moves.h"
#include "planner_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int dh__is_nccl(const dh_prof_op_t *o)
{
    return o->comm >= 0 && (strcmp(o->kind, "NCCL") == 0 || strcmp(o->kind, "NCCL_GROUP") == 0);
}

/* Point-to-point: from the calls and peers the profile lists (dh_prof_op_t.p2p), else (a
 * profile without them) from the name, which names a group by its first call only. */
static int dh__p2p(const dh_prof_op_t *o)
{
    if (o->p2p[0] != '\0')
        return 1;
    return strstr(o->name, "Send") != NULL || strstr(o->name, "Recv") != NULL;
}

/* A communicator of the pipeline: its members may run other sections' plans. Megatron's
 * tensor-, context-, data- and expert-parallel groups lie within one pipeline stage. */
static int dh__cross(const dh_profile_t *p, int c)
{
    if (c < 0 || c >= p->ncomms)
        return 1;
    const char *r = p->comms[c].role;
    return r[0] == '\0' || strstr(r, "pp") != NULL;
}

size_t dh__move_len(const dh_profile_t *p, const dh_prof_op_t *ops, const dh_plan_phase_t *ph,
                    int nph, int k)
{
    if (k + 1 >= nph || ph[k].kind != 'B' || ph[k + 1].kind != 'F')
        return 0;
    const dh_plan_phase_t *f = &ph[k + 1];
    size_t end = f->first + f->n, i = f->first, last = 0;
    int have = 0;
    for (; i < end; i++) {
        const dh_prof_op_t *o = &ops[i];
        if (dh__is_nccl(o)) {
            if (!dh__p2p(o) || !dh__cross(p, o->comm))
                break;
            last = i;
            have = 1;
        } else if (strcmp(o->kind, "EVENT_RECORD") != 0 && strcmp(o->kind, "EVENT_WAIT") != 0 &&
                   strcmp(o->kind, "FREE_ASYNC") != 0) {
            break;
        }
    }
    if (!have)
        return 0;
    /* What the move lets go first: a collective of another communicator later in the
     * forward. (Without one, the forward's computation alone could go first too; measured
     * on si pp4_vpp, pipeline parallelism without tensor parallelism, the plan predicted
     * 1.002-1.004x and the run lost 0.3%: nothing to hide there but the posts.) */
    int gain = 0;
    for (size_t j = last + 1; j < end && !gain; j++)
        gain = dh__is_nccl(&ops[j]) && !dh__p2p(&ops[j]) && ops[j].comm != ops[last].comm;
    if (!gain)
        return 0;
    /* The records right after the post on its stream go with it: the chain's (nccl_wrap/
     * chain.h) and the work's end event. A record on another stream is the next
     * operation's start event, which the forward's own wait must find in the forward. */
    size_t m = last + 1;
    while (m < end && strcmp(ops[m].kind, "EVENT_RECORD") == 0 && ops[m].stream == ops[last].stream)
        m++;
    return m - f->first;
}

/* ---- the graph ---- */

typedef struct dh__node {
    int sec;
    size_t op;                      /* template op */
} dh__node_t;

typedef struct dh__g {
    const dh__mv_sect_t *x;
    int ns;
    size_t *base;                   /* [ns + 1]: first node of each section */
    long *nodeof;                   /* per section, per template op: node or -1 (flattened) */
    size_t *opbase;                 /* [ns]: offset of a section's ops in nodeof */
    dh__node_t *node;
    size_t n;
    size_t *uf;                     /* union-find parent */
    size_t ncalls;                  /* most point-to-point calls of any instance */
    int unmatched;                  /* a pipeline point-to-point op with no mirror */
    char unmatched_what[400];
    int *pairof;                    /* per section, per phase: pair ordinal or -1 (flattened) */
    size_t *phbase;
    int *npairs;                    /* [ns] */
} dh__g_t;

static size_t dh__find(size_t *uf, size_t a)
{
    while (uf[a] != a) {
        uf[a] = uf[uf[a]];
        a = uf[a];
    }
    return a;
}

static void dh__join(size_t *uf, size_t a, size_t b)
{
    a = dh__find(uf, a);
    b = dh__find(uf, b);
    if (a != b)
        uf[a < b ? b : a] = a < b ? a : b;
}

/* The collectives of instance s on communicator c, in template order, into out (room for
 * all of s's nodes); their number. */
static size_t dh__colls_on(const dh__g_t *g, int s, int c, size_t *out)
{
    size_t n = 0;
    for (size_t v = g->base[s]; v < g->base[s + 1]; v++) {
        const dh_prof_op_t *o = &g->x[s].tops[g->node[v].op];
        if (o->comm == c && !dh__p2p(o))
            out[n++] = v;
    }
    return n;
}

/* One point-to-point call: the node of its op, 's' or 'r', the peer's rank in the
 * communicator. */
typedef struct dh__pcall {
    size_t v;
    char dir;
    int peer;
} dh__pcall_t;

/* The point-to-point calls of instance s on communicator c in issue order (a group's in
 * call order), into out (room: g->ncalls); their number, or -1 with *what set when they
 * cannot be listed: a group that mixes them with collectives or another communicator, or a
 * profile without peers (then a two-rank communicator's peer is the other rank, and the
 * direction is the name's, which says a group's first call only). */
static long dh__calls_on(const dh__g_t *g, int s, int c, dh__pcall_t *out, const char **what)
{
    const dh_prof_comm_t *pc = &g->x[s].p->comms[c];
    long n = 0;
    for (size_t v = g->base[s]; v < g->base[s + 1]; v++) {
        const dh_prof_op_t *o = &g->x[s].tops[g->node[v].op];
        if (o->comm != c || !dh__p2p(o))
            continue;
        if (o->p2p[0] == '\0') {
            if (pc->nranks != 2) {
                *what = "are point-to-point on more than two ranks, and the profile does not "
                        "say to which peers";
                return -1;
            }
            out[n++] = (dh__pcall_t){v, strstr(o->name, "Send") ? 's' : 'r', 1 - pc->rank};
            continue;
        }
        const char *q = o->p2p;
        while (*q != '\0') {
            char *e;
            long peer = (*q == 's' || *q == 'r') ? strtol(q + 1, &e, 10) : -1;
            if (peer < 0 || peer >= pc->nranks || peer == pc->rank || (*e != ' ' && *e != '\0')) {
                *what = "include a group whose point-to-point calls cannot be matched (listed "
                        "as '?': mixed with collectives or other communicators, or too many)";
                return -1;
            }
            if ((size_t)n >= g->ncalls)
                return -1;
            out[n++] = (dh__pcall_t){v, *q, (int)peer};
            q = *e == ' ' ? e + 1 : e;
        }
    }
    return n;
}

/* 1 when instance s runs an NCCL operation on communicator c in the iteration. */
static int dh__uses(const dh__g_t *g, int s, int c)
{
    for (size_t v = g->base[s]; v < g->base[s + 1]; v++)
        if (g->x[s].tops[g->node[v].op].comm == c)
            return 1;
    return 0;
}

static void dh__unproven(dh__g_t *g, int s, int c, const char *what)
{
    if (g->unmatched)
        return;
    g->unmatched = 1;
    const dh_prof_comm_t *pc = &g->x[s].p->comms[c];
    snprintf(g->unmatched_what, sizeof(g->unmatched_what),
             "rank %d's operations on communicator '%s' (%d ranks) %s", g->x[s].p->rank,
             pc->name, pc->nranks, what);
}

/* The instance (and its communicator, *ct) that is rank `rank` of the communicator with
 * identity id; -1 none. */
static int dh__member(const dh__g_t *g, uint64_t id, int rank, int *ct)
{
    for (int t = 0; t < g->ns; t++) {
        const dh_profile_t *q = g->x[t].p;
        for (int c = 0; c < q->ncomms; c++)
            if (q->comms[c].ident == id && q->comms[c].rank == rank) {
                *ct = c;
                return t;
            }
    }
    return -1;
}

/* Joins the point-to-point calls of instance s on communicator c with their peers' (NCCL
 * pairs the i-th send of rank a to rank b with the i-th receive of b from a, per
 * communicator: NVIDIA/nccl src/enqueue.cc), a and b its ranks there. A group's calls are
 * one node, so a ring exchange (TE's context-parallel attention posts a send to the next
 * rank and a receive from the previous in one group) joins every member's i-th group into
 * one node: with one queue a group runs as one kernel that needs both neighbours to have
 * reached theirs, and the union asks that of every member, which covers it. */
static void dh__match_p2p(dh__g_t *g, int s, int c, dh__pcall_t *mine, dh__pcall_t *theirs)
{
    const dh_prof_comm_t *pc = &g->x[s].p->comms[c];
    const char *what = NULL;
    long n = dh__calls_on(g, s, c, mine, &what);
    if (n < 0) {
        dh__unproven(g, s, c, what ? what : "have more point-to-point calls than nodes");
        return;
    }
    for (long i = 0; i < n; i++) {
        int peer = mine[i].peer, ct = -1;
        int dup = 0;
        for (long j = 0; j < i && !dup; j++)
            dup = mine[j].peer == peer;
        if (dup)
            continue;   /* each peer once */
        int t = dh__member(g, pc->ident, peer, &ct);
        if (t < 0) {
            char why[160];
            snprintf(why, sizeof(why), "have no profile of the peer (rank %d of the "
                     "communicator)", peer);
            dh__unproven(g, s, c, why);
            return;
        }
        long m = dh__calls_on(g, t, ct, theirs, &what);
        if (m < 0) {
            dh__unproven(g, t, ct, what ? what : "have more point-to-point calls than nodes");
            return;
        }
        for (int d = 0; d < 2; d++) {
            char out = d ? 'r' : 's', in = d ? 's' : 'r';
            long a = 0, b = 0;
            for (;;) {
                while (a < n && !(mine[a].peer == peer && mine[a].dir == out))
                    a++;
                while (b < m && !(theirs[b].peer == pc->rank && theirs[b].dir == in))
                    b++;
                if (a >= n || b >= m)
                    break;
                dh__join(g->uf, mine[a++].v, theirs[b++].v);
            }
            if (a < n || b < m) {
                long na = 0, nb = 0;
                for (long i2 = 0; i2 < n; i2++)
                    na += mine[i2].peer == peer && mine[i2].dir == out;
                for (long i2 = 0; i2 < m; i2++)
                    nb += theirs[i2].peer == pc->rank && theirs[i2].dir == in;
                char why[200];
                snprintf(why, sizeof(why), "do not mirror the peer's: %ld %s %s rank %d of "
                         "the communicator, which %s %ld %s it", na, d ? "receive(s)" : "send(s)",
                         d ? "from" : "to", peer, d ? "sends" : "receives", nb,
                         d ? "to" : "from");
                dh__unproven(g, s, c, why);
                return;
            }
        }
    }
}

/* Joins the nodes that are one wait across the instances (moves.h): by the communicators'
 * identities (nccl_wrap/registry.h), the i-th collective of one communicator on every
 * member, and each point-to-point call with its peer's (dh__match_p2p). */
static dh_status_t dh__match(dh__g_t *g)
{
    size_t *c2 = malloc((g->n + 1) * sizeof(*c2) * 2);
    dh__pcall_t *mine = malloc((g->ncalls + 1) * sizeof(*mine) * 2);
    if (c2 == NULL || mine == NULL) {
        free(c2);
        free(mine);
        return DH_ERR_NOMEM;
    }
    size_t *d = c2 + g->n + 1;
    for (int s = 0; s < g->ns; s++) {
        const dh_profile_t *p = g->x[s].p;
        for (int c = 0; c < p->ncomms; c++) {
            if (!dh__uses(g, s, c))
                continue;
            const dh_prof_comm_t *pc = &p->comms[c];
            if (pc->ident == 0) {
                dh__unproven(g, s, c, "cannot be told apart from another process's (no "
                                      "identity in the profile)");
                continue;
            }
            size_t ncoll = dh__colls_on(g, s, c, c2);
            int members = 1;
            for (int t = 0; t < g->ns; t++) {
                const dh_profile_t *q = g->x[t].p;
                for (int c_ = 0; t != s && c_ < q->ncomms; c_++) {
                    if (q->comms[c_].ident != pc->ident)
                        continue;
                    members++;
                    size_t n = dh__colls_on(g, t, c_, d);
                    if (n != ncoll) {
                        dh__unproven(g, s, c, "differ in number from another member's");
                        continue;
                    }
                    for (size_t i = 0; i < n; i++)
                        dh__join(g->uf, c2[i], d[i]);
                }
            }
            dh__match_p2p(g, s, c, mine, mine + g->ncalls + 1);
            if (members < pc->nranks && dh__cross(p, c))
                dh__unproven(g, s, c, "involve ranks without a profile");
        }
    }
    free(c2);
    free(mine);
    return DH_OK;
}

static void dh__g_free(dh__g_t *g)
{
    free(g->base);
    free(g->nodeof);
    free(g->opbase);
    free(g->node);
    free(g->uf);
    free(g->pairof);
    free(g->phbase);
    free(g->npairs);
}

static dh_status_t dh__g_build(dh__g_t *g, const dh__mv_sect_t *x, int ns)
{
    memset(g, 0, sizeof(*g));
    g->x = x;
    g->ns = ns;
    g->base = calloc((size_t)ns + 1, sizeof(*g->base));
    g->opbase = calloc((size_t)ns + 1, sizeof(*g->opbase));
    g->phbase = calloc((size_t)ns + 1, sizeof(*g->phbase));
    g->npairs = calloc((size_t)ns + 1, sizeof(*g->npairs));
    if (!g->base || !g->opbase || !g->phbase || !g->npairs)
        return DH_ERR_NOMEM;
    size_t nops = 0, nph = 0;
    for (int s = 0; s < ns; s++) {
        g->opbase[s] = nops;
        g->phbase[s] = nph;
        nops += x[s].s->nops;
        nph += (size_t)x[s].s->nphases;
        size_t calls = 0;
        for (size_t i = 0; i < x[s].s->nops; i++) {
            const dh_prof_op_t *o = &x[s].tops[i];
            g->n += dh__is_nccl(o);
            if (dh__is_nccl(o) && dh__p2p(o)) {
                calls++;
                for (const char *q = o->p2p; *q != '\0'; q++)
                    calls += *q == ' ';
            }
        }
        g->ncalls = calls > g->ncalls ? calls : g->ncalls;
    }
    g->nodeof = malloc((nops + 1) * sizeof(*g->nodeof));
    g->node = malloc((g->n + 1) * sizeof(*g->node));
    g->uf = malloc((g->n + 1) * sizeof(*g->uf));
    g->pairof = malloc((nph + 1) * sizeof(*g->pairof));
    if (!g->nodeof || !g->node || !g->uf || !g->pairof)
        return DH_ERR_NOMEM;
    size_t v = 0;
    for (int s = 0; s < ns; s++) {
        g->base[s] = v;
        for (size_t i = 0; i < x[s].s->nops; i++) {
            g->nodeof[g->opbase[s] + i] = dh__is_nccl(&x[s].tops[i]) ? (long)v : -1;
            if (dh__is_nccl(&x[s].tops[i]))
                g->node[v++] = (dh__node_t){s, i};
        }
        const dh_plan_section_t *sp = x[s].s;
        for (int k = 0; k < sp->nphases; k++)
            g->pairof[g->phbase[s] + (size_t)k] = -1;
        for (int k = 0; k < sp->nphases; k++) {
            if (sp->phases[k].kind == 'B' && sp->phases[k].paired_with == k + 1) {
                g->pairof[g->phbase[s] + (size_t)k] = g->npairs[s];
                g->pairof[g->phbase[s] + (size_t)k + 1] = g->npairs[s]++;
            }
        }
    }
    g->base[ns] = v;
    for (size_t i = 0; i < g->n; i++)
        g->uf[i] = i;
    return dh__match(g);
}

/* The pair ordinal of template op i of section s, -1 when its phase is not paired. */
static int dh__pair_of(const dh__g_t *g, int s, size_t i)
{
    int ph = g->x[s].s->ops[i].phase;
    return ph < 0 || ph >= g->x[s].s->nphases ? -1 : g->pairof[g->phbase[s] + (size_t)ph];
}

/* Section s's NCCL nodes in issue order with its pairs below cut in plan order, the rest
 * in program order (a pair's B phase, then its F phase, at the place of its first op), into
 * seq; their number. done: room for the section's pair count. */
static size_t dh__sequence(const dh__g_t *g, int s, int cut, size_t *seq, uint8_t *done)
{
    const dh_plan_section_t *sp = g->x[s].s;
    size_t n = 0;
    memset(done, 0, (size_t)g->npairs[s] + 1);
    for (int k = 0; k < sp->ngroups; k++) {
        const dh_plan_group_t *gr = &sp->groups[k];
        size_t ia = gr->a_first, ib = gr->b_first, len = gr->a_n + gr->b_n;
        int two = gr->a_n > 0 && gr->b_n > 0 && gr->order != NULL;
        for (size_t j = 0; j < len; j++) {
            size_t i = two ? (gr->order[j] == 'a' ? ia++ : ib++) : j < gr->a_n ? ia + j : ib + (j - gr->a_n);
            int pr = dh__pair_of(g, s, i);
            if (pr >= 0 && pr >= cut) {
                if (done[pr])
                    continue;
                done[pr] = 1;
                int ph = sp->ops[i].phase;
                if (sp->phases[ph].kind != 'B')
                    ph = sp->phases[ph].paired_with;
                size_t a = sp->phases[ph].first;
                size_t e = sp->phases[ph + 1].first + sp->phases[ph + 1].n;
                for (size_t q = a; q < e; q++)
                    if (g->nodeof[g->opbase[s] + q] >= 0)
                        seq[n++] = (size_t)g->nodeof[g->opbase[s] + q];
                continue;
            }
            if (g->nodeof[g->opbase[s] + i] >= 0)
                seq[n++] = (size_t)g->nodeof[g->opbase[s] + i];
        }
    }
    return n;
}

/* One op of the report: "rank R (section S) op I 'NAME' (P2P) on 'COMM'", P2P its
 * point-to-point calls and peers where the profile lists them. */
static void dh__say_op(const dh__g_t *g, size_t v, char *out, size_t n)
{
    const dh__mv_sect_t *x = &g->x[g->node[v].sec];
    const dh_prof_op_t *o = &x->tops[g->node[v].op];
    const char *comm = o->comm >= 0 && o->comm < x->p->ncomms ? x->p->comms[o->comm].name : "?";
    int w = snprintf(out, n, "rank %d (section %d) op %zu '%s'%s%s%s on '%s'", x->p->rank,
                     x->sec, g->node[v].op, o->name, o->p2p[0] ? " (" : "", o->p2p,
                     o->p2p[0] ? ")" : "", comm);
    if (w < 0 && n > 0)
        out[0] = '\0';   /* a report cut short says less, never garbage */
}

/* Depth-first search for a cycle over the union-find representatives. Edges: each
 * section's consecutive nodes of seqs (the later waits for the earlier). Returns 1 and the
 * cycle's nodes (one per edge, the waiting side's representative chain) in cyc. */
typedef struct dh__adj {
    size_t *head, *next, *to, *from; /* from/to: the nodes the edge came from */
    size_t n;
} dh__adj_t;

static int dh__find_cycle(dh__g_t *g, const dh__adj_t *adj, size_t *cyc, size_t *ncyc)
{
    size_t N = g->n;
    unsigned char *col = calloc(N + 1, 1);
    size_t *stack = malloc((N + 1) * sizeof(*stack)), *it = malloc((N + 1) * sizeof(*it));
    size_t *via = malloc((N + 1) * sizeof(*via));
    int found = -1;
    if (!col || !stack || !it || !via)
        goto out;
    found = 0;
    for (size_t r = 0; r < N && !found; r++) {
        if (dh__find(g->uf, r) != r || col[r])
            continue;
        size_t sp = 0;
        stack[sp] = r;
        it[sp++] = adj->head[r];
        col[r] = 1;
        while (sp > 0 && !found) {
            size_t u = stack[sp - 1], e = it[sp - 1];
            if (e == SIZE_MAX) {
                col[u] = 2;
                sp--;
                continue;
            }
            it[sp - 1] = adj->next[e];
            size_t w = dh__find(g->uf, adj->to[e]);
            via[sp - 1] = e;
            if (col[w] == 1) {
                size_t k = sp;
                while (k > 0 && stack[k - 1] != w)
                    k--;
                *ncyc = 0;
                for (size_t q = k - 1; q < sp; q++)
                    cyc[(*ncyc)++] = via[q];
                found = 1;
            } else if (col[w] == 0) {
                col[w] = 1;
                stack[sp] = w;
                it[sp++] = adj->head[w];
            }
        }
    }
out:
    free(col);
    free(stack);
    free(it);
    free(via);
    return found;
}

/* Checks one mix: cut[s] the pair ordinal below which section s runs plan order. 1 and the
 * cycle's edges (cyc, *ncyc) on a cycle, 0 none, -1 no memory. */
static int dh__check_mix(dh__g_t *g, const int *cut, size_t *seq, uint8_t *done, dh__adj_t *adj,
                         size_t *cyc, size_t *ncyc)
{
    for (size_t v = 0; v < g->n; v++)
        adj->head[v] = SIZE_MAX;
    adj->n = 0;
    for (int s = 0; s < g->ns; s++) {
        size_t m = dh__sequence(g, s, cut[g->x[s].sec], seq, done);
        for (size_t i = 1; i < m; i++) {
            size_t u = dh__find(g->uf, seq[i - 1]), w = dh__find(g->uf, seq[i]);
            if (u == w)
                continue;
            /* u before w: w waits for u. The search walks "is waited for by" edges; a
             * cycle either way is the same cycle. */
            size_t e = adj->n++;
            adj->from[e] = seq[i - 1];
            adj->to[e] = seq[i];
            adj->next[e] = adj->head[u];
            adj->head[u] = e;
        }
    }
    return dh__find_cycle(g, adj, cyc, ncyc);
}

static void dh__say_cycle(const dh__g_t *g, const dh__adj_t *adj, const size_t *cyc,
                          size_t ncyc, const int *cut, int nsec, char *why, size_t n)
{
    size_t at = 0;
    char a[320], b[320];
    at += (size_t)snprintf(why, n, "a cycle of %zu waits (sections in plan order up to pair:",
                           ncyc);
    for (int s = 0; s < nsec && at < n; s++)
        at += (size_t)snprintf(why + at, n - at, " %d:%d", s, cut[s]);
    if (at < n)
        at += (size_t)snprintf(why + at, n - at, ")");
    for (size_t k = 0; k < ncyc && at < n; k++) {
        dh__say_op(g, adj->from[cyc[k]], a, sizeof(a));
        dh__say_op(g, adj->to[cyc[k]], b, sizeof(b));
        at += (size_t)snprintf(why + at, n - at, "; %s is issued after %s", b, a);
    }
}

/* The mixes the agreement can produce, as cutoffs per section (np[s] pairs), into *out
 * (malloc'ed, nmix x nsec): the job's ranks decide each pair ordinal together and a no
 * ends pairing for the rest of the iteration on every rank (agree.c), so every section
 * runs its pairs below one common ordinal in plan order and the rest in program order;
 * ordinal 0 is program order throughout (the probe, a vetoed or abandoned iteration, auto
 * mode before its switch), the last plan order throughout. */
static dh_status_t dh__mixes(const int *np, int nsec, int **out, size_t *nmix)
{
    int most = 0;
    for (int s = 0; s < nsec; s++)
        most = np[s] > most ? np[s] : most;
    size_t n = (size_t)most + 1, w = (size_t)nsec;
    int *m = malloc((n * w + 1) * sizeof(*m));
    if (m == NULL)
        return DH_ERR_NOMEM;
    for (int c = 0; c <= most; c++)
        for (int s = 0; s < nsec; s++)
            m[(size_t)c * w + (size_t)s] = c < np[s] ? c : np[s];
    *out = m;
    *nmix = n;
    return DH_OK;
}

/* Marks the sections to refuse for the cycle cyc. */
static void dh__blame(const dh__g_t *g, const dh__adj_t *adj, const size_t *cyc, size_t ncyc,
                      uint8_t *refuse)
{
    int any = 0;
    for (size_t k = 0; k < ncyc; k++)
        for (int end = 0; end < 2; end++) {
            size_t v = end ? adj->to[cyc[k]] : adj->from[cyc[k]];
            int s = g->node[v].sec;
            if (g->x[s].s->ops[g->node[v].op].moved) {
                refuse[g->x[s].sec] = 1;
                any = 1;
            }
        }
    for (size_t k = 0; k < ncyc && !any; k++) {
        int s = g->node[adj->to[cyc[k]]].sec;
        for (size_t i = 0; i < g->x[s].s->nops && !refuse[g->x[s].sec]; i++)
            refuse[g->x[s].sec] = g->x[s].s->ops[i].moved != 0;
    }
}

dh_status_t dh__moves_check(const dh__mv_sect_t *x, int ns, uint8_t *refuse, int *cycle,
                            char *why, size_t whylen)
{
    *cycle = 0;
    if (whylen)
        why[0] = '\0';
    int moved = 0;
    for (int s = 0; s < ns; s++)
        for (size_t i = 0; i < x[s].s->nops && !moved; i++)
            moved = x[s].s->ops[i].moved != 0;
    if (!moved)
        return DH_OK;   /* the program's cross-communicator order everywhere: nothing to prove */
    dh__g_t g;
    dh_status_t st = dh__g_build(&g, x, ns);
    if (st == DH_OK && g.unmatched) {
        *cycle = 1;
        snprintf(why, whylen, "cannot be proven: %s", g.unmatched_what);
        for (int s = 0; s < ns; s++)
            for (size_t i = 0; i < x[s].s->nops && !refuse[x[s].sec]; i++)
                refuse[x[s].sec] = x[s].s->ops[i].moved != 0;
        dh__g_free(&g);
        return DH_OK;
    }
    int *mix = NULL;
    size_t nmix = 0;
    size_t *seq = malloc((g.n + 1) * sizeof(*seq)), *cyc = malloc((g.n + 1) * sizeof(*cyc));
    int most = 0;
    for (int s = 0; st == DH_OK && s < ns; s++)
        most = g.npairs[s] > most ? g.npairs[s] : most;
    uint8_t *done = malloc((size_t)most + 1);
    dh__adj_t adj = {malloc((g.n + 1) * sizeof(size_t)), malloc((g.n + 1) * sizeof(size_t)),
                     malloc((g.n + 1) * sizeof(size_t)), malloc((g.n + 1) * sizeof(size_t)), 0};
    if (st == DH_OK && (!seq || !cyc || !done || !adj.head || !adj.next || !adj.to || !adj.from))
        st = DH_ERR_NOMEM;
    int nsec = 0;
    for (int s = 0; s < ns; s++)
        nsec = x[s].sec + 1 > nsec ? x[s].sec + 1 : nsec;
    int *np = calloc((size_t)nsec + 1, sizeof(*np));
    if (st == DH_OK && np == NULL)
        st = DH_ERR_NOMEM;
    for (int s = 0; st == DH_OK && s < ns; s++)
        np[x[s].sec] = g.npairs[s];
    if (st == DH_OK)
        st = dh__mixes(np, nsec, &mix, &nmix);
    for (size_t k = 0; k < nmix && st == DH_OK && !*cycle; k++) {
        size_t ncyc = 0;
        int r = dh__check_mix(&g, mix + k * (size_t)nsec, seq, done, &adj, cyc, &ncyc);
        if (r < 0)
            st = DH_ERR_NOMEM;
        else if (r > 0) {
            *cycle = 1;
            dh__say_cycle(&g, &adj, cyc, ncyc, mix + k * (size_t)nsec, nsec, why, whylen);
            dh__blame(&g, &adj, cyc, ncyc, refuse);
        }
    }
    free(mix);
    free(np);
    free(done);
    free(seq);
    free(cyc);
    free(adj.head);
    free(adj.next);
    free(adj.to);
    free(adj.from);
    dh__g_free(&g);
    return st;
}

/* ---- the planner's side ---- */

int dh__move_is_post(const dh_profile_t *p, const dh_prof_op_t *o)
{
    return dh__is_nccl(o) && dh__p2p(o) && dh__cross(p, o->comm);
}

int dh__moves_count(const dh_profile_t *p, const dh_prof_op_t *tops, const dh_plan_section_t *s)
{
    int n = 0;
    for (int k = 0; k + 1 < s->nphases; k++)
        n += s->phases[k].kind == 'B' && s->phases[k].paired_with == k + 1 &&
             dh__move_len(p, tops, s->phases, s->nphases, k) > 0;
    return n;
}

void dh__moves_apply(const dh_profile_t *p, const dh_prof_op_t *tops, dh_plan_section_t *s,
                     size_t *moved)
{
    for (int k = 0; k + 1 < s->nphases; k++) {
        dh_plan_phase_t *pb = &s->phases[k], *pf = &s->phases[k + 1];
        if (pb->kind != 'B' || pb->paired_with != k + 1)
            continue;
        size_t m = dh__move_len(p, tops, s->phases, s->nphases, k);
        pb->n += m;
        pf->first += m;
        pf->n -= m;
        moved[k] = m;
    }
}

void dh__moves_mark(dh_plan_section_t *s, const size_t *moved)
{
    for (int k = 0; k + 1 < s->nphases; k++) {
        if (moved[k] == 0 || s->phases[k].paired_with != k + 1)
            continue;   /* unpaired: it runs serially, in program order */
        size_t end = s->phases[k].first + s->phases[k].n;
        for (size_t i = end - moved[k]; i < end; i++)
            s->ops[i].moved = strcmp(s->ops[i].kind, "NCCL") == 0 ||
                              strcmp(s->ops[i].kind, "NCCL_GROUP") == 0;
        s->moves++;
    }
}

dh_status_t dh__moves_round(const dh_plan_t *plan, const dh_profile_t *const *prof,
                            const struct dh__tmpl *tmpl, const int *sec, int n,
                            dh_plan_warn_fn warn, void *ctx, uint8_t *refuse, int *again)
{
    int ns = plan->nsections;
    dh__mv_sect_t *mv = calloc((size_t)n + 1, sizeof(*mv));
    uint8_t *before = malloc((size_t)ns + 1);
    char why[1536], list[128] = "";
    dh_status_t st = mv && before ? DH_OK : DH_ERR_NOMEM;
    for (int k = 0; k < n && st == DH_OK; k++)
        mv[k] = (dh__mv_sect_t){&plan->sections[sec[k]], prof[k], tmpl[k].ops, sec[k]};
    if (st == DH_OK) {
        memcpy(before, refuse, (size_t)ns);
        st = dh__moves_check(mv, n, refuse, again, why, sizeof(why));
    }
    if (st == DH_OK && *again) {
        /* Each round refuses at least one more section, so that planning ends. */
        int more = 0;
        for (int s = 0; s < ns; s++)
            more |= refuse[s] && !before[s];
        for (int s = 0; s < ns && !more; s++)
            refuse[s] = 1;
        size_t at = 0;
        for (int s = 0; s < ns && at < sizeof(list); s++)
            if (refuse[s] && !before[s])
                at += (size_t)snprintf(list + at, sizeof(list) - at, " %d", s);
        if (warn != NULL) {
            char msg[sizeof(why) + sizeof(list) + 128];
            snprintf(msg, sizeof(msg), "section(s)%s: moves of point-to-point posts refused, "
                     "planned again without them: %s", list, why);
            warn(ctx, msg);
        }
    }
    free(before);
    free(mv);
    return st;
}
