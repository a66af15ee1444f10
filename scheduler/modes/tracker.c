/*
 * tracker.c: plan mode's strand tracker (see tracker.h).
 *
 * Group numbers: each matched iteration takes a fresh block of ngroups numbers (base +
 * the template's group); unpaired ops (before the first match, during a desync) share one
 * open group at a time, released as they come. Numbers only grow, and within one strand
 * they never decrease in program order, which is what the dispatcher's per-strand queues
 * need.
 */
#define _GNU_SOURCE
#include "tracker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "common/log.h"
#include "agree.h"
#include "deps.h"
#include "pairing.h"
#include "plan.h"
#include "registry.h"
#include "sched_int.h"

typedef enum { DH__T_SEARCH, DH__T_TRACK, DH__T_DESYNC, DH__T_OFF } dh__tstate_t;

/* An iteration starts at the template's first op among the first DH__START_SLACK ops after
 * a host synchronisation (or the program's start), not only at the very first: a rank that
 * issues an op or two of its own there (a logging rank's memset and stream query, issue 27)
 * must start the iteration where its peers do, or it counts iterations differently and the
 * ranks' votes (keyed by that count) no longer meet. Small, because an op of the template's
 * first kind a few ops after a synchronisation inside an iteration would start one falsely. */
#define DH__START_SLACK 4

static struct {
    dh_plan_walk_t *w;                /* this rank's template; immutable once loaded */
    size_t nops;
    uint64_t last_sig;                /* the template's last op's signature */
    int ngroups, nphases;
    int has_moves;                    /* the section moves NCCL ops (dh_tracker_chain_class) */
    uint64_t held_ops, held_bytes;    /* what the plan holds back at most */
    double max_extra;                 /* the plan's max_extra_mem_bytes */
    char path[512];
    /* guarded by dh__s.lock: */
    dh__tstate_t state;
    dh_plan_cursor_t cur;             /* the next template op expected */
    uint64_t base, next_group, open_group;
    uint64_t floor1;                  /* strand-1 ops go to groups >= floor1 */
    uint64_t pair_stamp;              /* allocation stamp when the current pair began */
    int open;                         /* open_group holds unpaired ops */
    int sync_seen, first_op, warned_episode, new_iter;
    int since_sync;                   /* ops since the last host synchronisation */
    uint64_t prev_sig;                /* the last op's signature */
    int ends_iter;                    /* the op before the last synchronisation was the
                                         template's last */
    int win_started;                  /* an iteration started since that synchronisation */
    uint64_t iters_tracked, searched;
    dh_tracker_stats_t st;
    /* The plan's pairs, checked against the program (see dh__probe): */
    int checked;                      /* a whole template iteration ran as the probe */
    int probing;                      /* the current template iteration is the probe */
    unsigned char *refuted;           /* [nphases + 1]: that phase's strand-b ops (the last
                                         entry: those of no phase) depend on strand-a work */
    int probe_src;                    /* the paired phase whose writes probe_pair holds, -1 */
    dh_deps_taint_t probe_pair;       /* old allocations probe_src's strand-a ops wrote */
    dh_deps_taint_t probe_iter;       /* ... that every strand-a op of the iteration wrote */
    /* The ranks' agreement (agree.h; "agreement" below). Immutable once loaded: */
    int agree;                        /* there are ranks to agree with and pairs to vote on */
    int nvp;                          /* vote points per iteration */
    dh_plan_vp_t *vp;                 /* the vote points (plan.h) */
    uint64_t held_capped;             /* what the plan holds at most with the caps */
    /* guarded by dh__s.lock: */
    uint64_t iter_no;                 /* template iterations started (the keys' high bits) */
    int vpi;                          /* the next vote point of this iteration */
    int sub;                          /* rounds of that pair so far (drains agreed on) */
    int settled;                      /* the rest of this iteration runs in program order */
    dh_unpaired_t why;                /* ... because of this (pairing.h) */
    uint64_t no_due;                  /* 1 + the key of a "no" to cast, 0 none */
    uint64_t start_op;                /* ops of the program before the last counted start */
    int start_open;                   /* that start's iteration is iter_no's (a false start
                                         uncounted it: 0); see dh__restart_same */
    int seq_due;                      /* what is held must go out in program order */
} dh__t;

static __thread char dh__t_report[768];

static int dh__vote_points(const dh_plan_section_t *s);

int dh_tracker_load(const char *path)
{
    char err[400];
    dh_plan_t *p = NULL;
    if (dh_plan_load(path, &p, err, sizeof err) != DH_OK) {
        snprintf(dh__t.path, sizeof dh__t.path, "%s", path);
        DH_ERROR(PLAN, "%s; running passthrough", err);
        return -1;
    }
    return dh_tracker_attach(p, path);
}

int dh_tracker_attach(dh_plan_t *p, const char *path)
{
    snprintf(dh__t.path, sizeof dh__t.path, "%s", path);
    int world = dh_nccl_world_size(), rank = dh_nccl_global_rank();
    if (rank < 0)
        rank = dh_agree_rank(); /* attached before NCCL started (auto mode, a cached plan) */
    const char *layout = dh_config()->layout;
    const dh_plan_section_t *s = NULL;
    /* A plan that pairs nothing on any rank would only defer: every rank runs passthrough
     * (all load the same plan, so all decide alike). Under PyTorch on an H100 a serial plan
     * deferred 24,362 operations for nothing and the step took 1.145x as long. */
    int paired = 0;
    for (int i = 0; i < p->nsections && !paired; i++)
        for (int g = 0; g < p->sections[i].ngroups && !paired; g++)
            paired = p->sections[i].groups[g].a_n > 0 && p->sections[i].groups[g].b_n > 0;
    if (!paired) {
        DH_WARN(PLAN, "%s: the plan pairs nothing on any rank (every section serial): running "
                "passthrough, nothing deferred", path);
        dh_plan_free(p);
        return -1;
    }
    if (p->world > 0 && world > 0 && p->world != world) {
        DH_ERROR(PLAN, "%s: the plan is for %d ranks and this job has %d (another parallel "
                 "layout); running passthrough", path, p->world, world);
    } else if (p->layout[0] && layout[0] && strcmp(p->layout, layout) != 0) {
        DH_ERROR(PLAN, "%s: the plan is for layout %s and DHELIX_LAYOUT is %s; running "
                 "passthrough", path, p->layout, layout);
    } else if (!(s = dh_plan_section_for(p, rank < 0 ? 0 : rank))) {
        DH_ERROR(PLAN, "%s: no section of the plan is for rank %d; running passthrough", path,
                 rank < 0 ? 0 : rank);
    } else if (s->nops == 0 || s->ngroups == 0) {
        DH_ERROR(PLAN, "%s: the plan's template for rank %d is empty; running passthrough",
                 path, rank < 0 ? 0 : rank);
    } else if (!(dh__t.w = dh_plan_walk_new(s))) {
        DH_ERROR(PLAN, "%s: out of memory; running passthrough", path);
    } else {
        /* The walker holds each repeated block once: the plan itself is not kept. The
         * probe's refuted phases are the first repetition's (a block's repetitions are the
         * same pair: refuting one refutes all). */
        dh__t.nops = s->nops;
        dh__t.ngroups = s->ngroups;
        dh__t.nphases = s->nphases;
        dh__t.held_ops = (uint64_t)s->held_ops;
        dh__t.held_bytes = (uint64_t)s->held_free_bytes;
        dh__t.has_moves = 0;
        for (size_t i = 0; i < s->nops; i++)
            dh__t.has_moves |= s->ops[i].moved != 0;
        dh__t.max_extra = p->max_extra_mem_bytes;
        free(dh__t.refuted);
        if (!(dh__t.refuted = calloc((size_t)s->nphases + 1, 1))) {
            dh_plan_walk_free(dh__t.w);
            dh__t.w = NULL;
            dh_plan_free(p);
            DH_ERROR(PLAN, "%s: out of memory; running passthrough", path);
            return -1;
        }
        if (dh__vote_points(s) < 0) {
            dh_plan_walk_free(dh__t.w);
            dh__t.w = NULL;
            dh_plan_free(p);
            DH_ERROR(PLAN, "%s: out of memory; running passthrough", path);
            return -1;
        }
        dh__t.state = DH__T_SEARCH;
        dh__t.first_op = 1;
        dh_plan_cursor_t c = {0, 0, 0, 0};
        for (size_t i = 0; i + 1 < s->nops; i++)
            dh_plan_walk_next(dh__t.w, &c);
        dh_plan_here_t last;
        dh_plan_walk_at(dh__t.w, &c, &last);
        dh__t.last_sig = last.op->sig;
        int two = 0;
        for (int g = 0; g < s->ngroups; g++)
            two += s->groups[g].a_n > 0 && s->groups[g].b_n > 0;
        dh_pairing_planned((uint64_t)two);
        /* Attached while the program runs (auto mode): group numbers go on from the ones
         * the scheduler has used, which are all released. */
        if (dh__t.next_group < dh__s.release)
            dh__t.next_group = dh__s.release;
        DH_INFO(PLAN, "%s: rank %d, template of %zu ops in %d groups (%d blocks, %zu bytes "
                "held), predicted %.3f ms -> %.3f ms per iteration", path, rank, s->nops,
                s->ngroups, dh_plan_walk_nblocks(dh__t.w), dh_plan_walk_bytes(dh__t.w),
                s->baseline_us / 1e3, s->si_us / 1e3);
        dh_plan_free(p);
        return 0;
    }
    dh_plan_free(p);
    return -1;
}

static const dh_plan_cursor_t dh__first;  /* template op 0 */

/* ---- agreement (DESIGN.md invariant 9, agree.h) ----
 * A rank issues work out of program order only in two-strand groups. Each pair of
 * micro-batches (the backward of i beside the forward of i+1) is one round: its two-strand
 * groups are held until the rank has captured every op of them and matched the template
 * (the release mark stops at the pair's first two-strand group, "cap"), then the rank votes
 * yes on (iteration, pair) and waits for the round. All yes: the pair goes out in the plan's
 * order on every rank. A rank that desyncs, or must drain (a host synchronisation, an
 * uncapturable call, bounded lag) before its vote, casts "no" for the round it is in,
 * waiting for nobody, before anything of the drain waits; a no decides the round and the
 * rest of the iteration for everyone: what each rank holds and everything after it goes
 * out in program order, and every rank starts again at the next template iteration. So each
 * communicator's calls come in the same order on every rank: everything agreed went out in
 * the plan's order everywhere (orders.c makes the pairs' orders of collectives agree across
 * sections), everything after in program order everywhere. Rounds are named by the
 * backward's micro-batch, the same on every section; a section whose plan leaves a pair
 * serial does not vote on it (the masks, agree.h).
 *
 * No deadlock: only a yes waits. A yes-voter has issued everything agreed before and holds
 * only its current pair. A peer gets to the same vote point, or casts "no" first, without
 * needing that held work: the host only blocks on the device in a drain (or bounded lag),
 * and both cast the no before waiting for anything. The vote runs on the framework thread
 * without dh__s.lock (sched.c): the dispatcher goes on issuing what is released; it never
 * votes and never waits for the framework thread. A wait is bounded (agree.h): past it
 * every rank runs program order.
 *
 * Keys: iteration << 16 | pair, the iteration counted at each template iteration this rank
 * starts. A divergence that keeps a rank from resynchronising at the next iteration
 * (it starts one iteration later than its peers) makes the keys differ: the yes-voters
 * time out and every rank runs program order from then on (bounded, not hung). */

/* The vote points of s (load time, no lock): per pair of micro-batches with two-strand
 * groups, where its last two-strand group is complete and where its first one is. 0, or -1
 * out of memory. */
static int dh__vote_points(const dh_plan_section_t *s)
{
    free(dh__t.vp);
    dh__t.vp = NULL;
    dh__t.nvp = 0;
    dh__t.agree = 0;
    int n = dh_plan_vote_points(s, &dh__t.vp, &dh__t.held_capped);
    if (n < 0)
        return -1;
    uint64_t mask = 0;
    for (int k = 0; k < n; k++)
        mask |= 1ull << (dh__t.vp[k].pair < 63 ? dh__t.vp[k].pair : 63);
    dh__t.nvp = n;
    dh__t.agree = n > 0 && dh_agree_needed();
    dh_agree_set_mask(mask);
    return 0;
}

static uint64_t dh__key(uint64_t iter, int k)
{
    return iter << 24 | dh__t.vp[k < dh__t.nvp ? k : dh__t.nvp - 1].pair << 8 |
           (uint64_t)(dh__t.sub < 255 ? dh__t.sub : 255);
}

/* Lock held: the rest of this iteration runs in program order; with cast, this rank says no
 * from its current round on (sched.c casts it once the lock is released). */
static void dh__settle(int cast, dh_unpaired_t why)
{
    if (!dh__t.agree || dh__t.settled)
        return;
    dh__t.settled = 1;
    dh__t.why = why;
    dh__t.seq_due = 1;
    if (cast && dh__t.vpi < dh__t.nvp)
        dh__t.no_due = 1 + dh__key(dh__t.iter_no, dh__t.vpi);
}

static const dh_plan_op_t *dh__op_at(const dh_plan_cursor_t *p)
{
    dh_plan_here_t h;
    dh_plan_walk_at(dh__t.w, p, &h);
    return h.op;
}

static int dh__match(const dh_plan_cursor_t *p, const dh_op_desc_t *d)
{
    const dh_plan_op_t *t = dh__op_at(p);
    return t->sig == d->sig && (t->shape_dynamic || t->shape == d->shape);
}

/* Ops of the program the tracker has seen, this one not yet counted. Lock held. */
static uint64_t dh__ops_seen(void) { return dh__t.st.matched_ops + dh__t.st.unmatched_ops; }

static void dh__set_release(uint64_t r)
{
    if (r > dh__s.release)
        dh__s.release = r;
}

/* Lock held: op takes the next place of an iteration that runs in program order, on one
 * strand, released as it comes (the probe, an iteration a rank vetoed). */
static void dh__in_order(dh_op_t *op)
{
    if (!dh__t.open) {
        dh__t.open_group = dh__t.next_group++;
        dh__t.open = 1;
    }
    op->strand = 0;
    op->lgroup = -1;
    op->group = dh__t.open_group;
    dh__set_release(dh__t.open_group + 1);
}

static void dh__unpaired(dh_op_t *op)
{
    if (!dh__t.open) {
        dh__t.open_group = dh__t.next_group++;
        dh__t.open = 1;
    }
    op->strand = 0;
    op->group = dh__t.open_group;
    op->lgroup = -1;
    dh__set_release(dh__t.open_group + 1);
    dh__t.st.unmatched_ops++;
}

/* ---- checking the plan's pairs (the probe) ----
 * A plan says which work may run beside which: strand b is the forward of micro-batch i+1,
 * which uses nothing the backward of i (strand a) makes. The runtime checks that claim op by
 * op where it sees what an op touches (deps.c), but it cannot see inside kernels whose
 * buffers sit in struct arguments, and an op that shows a dependency may come after such
 * kernels of its phase, already issued beside the work they depend on. A plan made from a
 * profile whose iteration was cut at the wrong synchronisation pairs the last backward with
 * the gradient reduction and the optimizer step: the first op (a kernel scaling the
 * gradients) shows nothing, the reduction after it reads the gradient buffer.
 * So the first template iteration the tracker follows runs in program order, one strand,
 * while each strand-b op is checked against the old allocations the strand-a ops of the
 * phase it is paired with certainly wrote (dh_deps_taint_t: a forward never touches what a
 * backward accumulates). A phase with such an op is refuted: from then on, each of its
 * strand-b ops waits for all strand-a work before it (the pair runs one after the other,
 * in program order). Decided from program order alone, so every rank decides alike. */

/* The refuted-phase slot of a template op: its phase (the first repetition's, see
 * dh_tracker_load), or the last slot for an op of no phase. */
static int dh__unit(const dh_plan_here_t *h)
{
    return h->phase >= 0 && h->phase < dh__t.nphases ? h->phase : dh__t.nphases;
}

/* The probe's view of template op c (op is its match, h where the walker finds it). Lock
 * held. */
static void dh__probe(const dh_op_t *op, const dh_op_desc_t *d, const dh_plan_here_t *h,
                      size_t c)
{
    int p = h->phase; /* -1 only in a plan without phases (plan_check.c) */
    if (h->op->strand == 0) {
        if (p >= 0 && h->paired_with >= 0 && p != dh__t.probe_src) {
            dh__t.probe_src = p;
            dh_deps_taint_reset(&dh__t.probe_pair, dh_sched_stamp());
        }
        if (p >= 0 && p == dh__t.probe_src)
            dh_deps_taint_add(&dh__t.probe_pair, op);
        dh_deps_taint_add(&dh__t.probe_iter, op);
        return;
    }
    int unit = dh__unit(h);
    if (dh__t.refuted[unit])
        return;
    /* Paired with the strand-a phase just seen, as the planner writes it; any other layout
     * (a pair across blocks) is checked against all of the iteration's strand-a work. */
    int pw = p >= 0 ? h->paired_with : -1;
    const dh_deps_taint_t *src = pw >= 0 && pw == dh__t.probe_src ? &dh__t.probe_pair
                                                                  : &dh__t.probe_iter;
    /* An op that may touch anything shows no dependency: deps.c orders it alone. */
    int j = op->nacc > 0 ? dh_deps_taint_hit(src, op) : -1;
    if (j < 0)
        return;
    dh__t.refuted[unit] = 1;
    dh__t.st.refuted++;
    DH_INFO(PLAN, "%s: template op %zu (%s '%s', strand b of phase %d) touches an allocation "
            "[%#lx, made at op %llu] that strand a wrote in %s: phase %d runs after the "
            "strand-a work before it", dh__t.path, c, dh_op_kind_name(op->kind), d->name, p,
            (unsigned long)op->acc[j].abase, (unsigned long long)op->acc[j].born,
            src == &dh__t.probe_pair ? "the phase it is paired with" : "this iteration", p);
}

/* After a probe iteration: the plan's pairs are known; says once what was refuted. */
static void dh__probe_done(void)
{
    dh__t.probing = 0;
    dh__t.checked = 1;
    if (dh__t.st.refuted)
        DH_WARN(PLAN, "%s: the plan pairs work with strand-a work it depends on (%llu "
                "phase(s), DHELIX_LOG=info names them): those run after it, unpaired; a plan "
                "made from a profile whose iterations were not alike?", dh__t.path,
                (unsigned long long)dh__t.st.refuted);
}

/* A strand-b op of a refuted phase: after all strand-a work so far (the region's log,
 * deps.c), in the first group not released yet at the earliest (sched.c says why). */
static void dh__after_strand_a(dh_op_t *op)
{
    int64_t last0 = dh_deps_s0_last();
    if (last0 < (int64_t)op->group)
        return; /* all of it is in earlier groups, behind a barrier */
    uint64_t g = (uint64_t)last0 < dh__s.release ? dh__s.release : (uint64_t)last0;
    op->group = g;
    op->after0 = 1;
    dh_tracker_floor(g);
}

/* Matches op to the template's next op; returns 2 when op may go out before its group is
 * complete (a group of one strand, every group before it complete: nothing of the other
 * strand can join it), else 0. */
static int dh__take(dh_op_t *op, const dh_op_desc_t *d)
{
    if (dh__t.cur.c == 0) {
        dh__t.win_started = 1;
        /* Tensors made from here on belong to this iteration's micro-batches (op.h). */
        atomic_store_explicit(&dh__s.young_from, dh_sched_stamp(), memory_order_relaxed);
        dh__t.new_iter = 1;
        dh__t.open = 0;
        dh__t.base = dh__t.next_group;
        dh__t.next_group += (uint64_t)dh__t.ngroups;
        dh__t.probing = !dh__t.checked;
        dh__t.probe_src = -1;
        dh__t.iter_no++;
        dh__t.start_op = dh__ops_seen();
        dh__t.start_open = 1;
        dh__t.vpi = 0;
        dh__t.sub = 0;
        dh__t.settled = 0;
        /* The probe runs in program order: its peers learn so at once. Nothing of the
         * iteration is held yet. */
        if (dh__t.probing) {
            dh__settle(1, DH_UNPAIRED_PROBE);
            dh__t.seq_due = 0;
        }
        dh_deps_taint_reset(&dh__t.probe_iter, dh_sched_stamp());
    }
    dh_plan_here_t h;
    dh_plan_walk_at(dh__t.w, &dh__t.cur, &h);
    /* The first op of a paired backward phase starts a pair. */
    if (h.starts_paired_b)
        dh__t.pair_stamp = dh_sched_stamp();
    if (dh__t.probing || dh__t.settled) {
        /* Program order on one strand, released as it comes, like unmatched work. */
        if (dh__t.probing)
            dh__probe(op, d, &h, dh__t.cur.c);
        dh__in_order(op);
        dh__t.st.matched_ops++;
        dh_plan_walk_next(dh__t.w, &dh__t.cur);
        if (dh__t.cur.c == 0) {
            dh__t.st.iterations++;
            dh__t.iters_tracked++;
            dh_pairing_iteration(0, dh__t.probing ? DH_UNPAIRED_PROBE : dh__t.why);
            if (dh__t.probing)
                dh__probe_done();
        }
        return 0;
    }
    op->strand = h.op->strand;
    op->lgroup = h.group;
    op->group = dh__t.base + (uint64_t)h.group;
    if (op->strand == 1 && dh__t.refuted[dh__unit(&h)])
        dh__after_strand_a(op);
    if (op->strand == 1 && op->group < dh__t.floor1) {
        /* Behind a strand-1 op that was moved after strand-0 work it depends on: same
         * group, and after that group's strand-0 ops on every rank alike. */
        op->group = dh__t.floor1;
        op->after0 = 1;
    }
    /* The pair's two-strand groups wait for its vote (agreement, above). */
    size_t rel = h.release;
    if (dh__t.agree && dh__t.vpi < dh__t.nvp && dh__t.cur.c < dh__t.vp[dh__t.vpi].c &&
        rel > dh__t.vp[dh__t.vpi].cap)
        rel = dh__t.vp[dh__t.vpi].cap;
    dh__set_release(dh__t.base + rel);
    int out = !op->after0 && h.single_strand && dh__s.release == op->group ? 2 : 0;
    dh__t.st.matched_ops++;
    dh_plan_walk_next(dh__t.w, &dh__t.cur);
    if (dh__t.cur.c == 0) {
        dh__t.st.iterations++;
        dh__t.iters_tracked++;
        dh_pairing_iteration(1, DH_UNPAIRED_PROBE);
    }
    return out;
}

/* Lock held, op d does not match the template at cur (> 0): whether the iteration just
 * started was a false start (the program matched the template's first op one step early,
 * see dh_tracker_assign). Keys count the template iterations a rank starts, so every rank
 * must count a false start alike, whatever else it knows about the iteration: the probe
 * (dh__take) settles its iteration at its first op, and a rank whose probe came later than
 * its peers' (it diverged in its first one) meets the false start while probing where they
 * meet it while following the plan, or not at all. Left uncounted there, its keys ran one
 * ahead of its peers' from then on: a "no" of its own landed on a round of their next
 * iteration and their yes votes matched its votes of the iteration before, so the two
 * issued different iterations' collectives (issue 27). Nothing of the iteration was held
 * or voted on yet (no pair began: at most the probe's own "no", which the restart casts
 * again on the same key). Only an op that directly follows a host synchronisation
 * (boundary) restarts the iteration at once; anywhere else (a rank's extra op right after
 * the iteration's first one, of that first op's kind) the iteration did start, and counts:
 * the mismatch is a desync, whose "no" its peers are waiting for. */
static int dh__false_start(const dh_op_desc_t *d, int boundary)
{
    return boundary && dh__t.agree && dh__t.cur.c > 0 && dh__t.nvp > 0 && dh__t.vpi == 0 &&
           dh__t.sub == 0 && (!dh__t.settled || dh__t.probing) &&
           dh__t.cur.c <= dh__t.vp[0].c0 && dh__match(&dh__first, d);
}

/* Lock held, following the plan at an iteration boundary (cur at op 0): the iteration
 * starts here and differs from the template at its first op. Counts it and says no to it
 * (dh__take's start, without the op). */
static void dh__begin_diverged(void)
{
    dh__t.iter_no++;
    dh__t.vpi = 0;
    dh__t.sub = 0;
    dh__t.settled = 0;
    dh__settle(1, DH_UNPAIRED_DESYNC);
    /* The template's first op may still come after a host synchronisation of the same
     * iteration (a rank that synchronises before its loop's first op): that restart is this
     * iteration again (dh__restart_same). */
    dh__t.start_op = dh__ops_seen();
    dh__t.start_open = 1;
}

/* Lock held, resynchronising at a boundary: 1 when the iteration that starts here is the
 * one counted last (already counted, and said no to when it was abandoned), not a new one.
 *
 * The rule for where an iteration starts, which keys the ranks' votes (issues 27 and 29):
 * a start right after an iteration this rank followed to its end, or at the program's start
 * (or auto mode's switch), counts at once, on every rank alike; so does a start while
 * searching (after a desync, or after a first iteration that differed) that comes at least
 * half a template's worth of ops after the last counted start. A start while searching
 * that comes sooner cannot be the next iteration (the program's iterations are the
 * template's length, within the few ops a divergence adds or removes): it is a
 * synchronisation inside the iteration counted last whose next op looks like the
 * template's first (pipeline stages synchronise at different points: the last op of the
 * interleaved template is an event record, which ends many exchanges), or that iteration
 * restarted after ops of this rank's own (dh__begin_diverged). Either way it is that
 * iteration again: it keeps its number and, when it was abandoned after a "no" (a desync,
 * the probe), runs in program order without a vote. Counted as new, they put stages 0, 1
 * and 3 of a 4-stage interleaved pipeline (si.pp4_tp_vpp) one iteration ahead of stage 2
 * from their first iteration on: the first vote timed out, and nothing paired after it. A
 * false start late in an iteration (past half a template) counts and says no to its number;
 * the real start that follows comes within half a template of it and is that number again,
 * so the keys stay alike and that iteration runs unpaired. A start only confirmed
 * by the ops that follow it (5dedf45: 64 ops) cannot serve here: a rank that diverges
 * early in an iteration its peers follow (si.sweep_tpdp_*_a: right after its first op, or
 * after the first layer) must count it where they do. */
static int dh__restart_same(void)
{
    return dh__t.start_open && dh__ops_seen() - dh__t.start_op < dh__t.nops / 2;
}

static void dh__note_desync(const dh_op_desc_t *d, const dh_op_t *op)
{
    const dh_plan_op_t *t = dh__op_at(&dh__t.cur);
    snprintf(dh__t_report, sizeof dh__t_report,
             "%.300s: desync at op %zu of the template (iteration %llu): expected %s '%s', got %s "
             "'%s'", dh__t.path, dh__t.cur.c, (unsigned long long)dh__t.st.iterations, t->kind,
             t->name, dh_op_kind_name(op->kind), d->name);
}

void dh_tracker_assign(dh_op_t *op, const dh_op_desc_t *d, int *flush)
{
    *flush = 0;
    if (!dh__t.w || dh__t.state == DH__T_OFF) {
        dh__unpaired(op);
        return;
    }
    /* Whether op directly follows a host synchronisation (or starts the program). */
    if (dh__t.sync_seen || dh__t.first_op) {
        dh__t.since_sync = 0;
        dh__t.win_started = 0; /* one start per window: a rank that desynced at the
                                  iteration's second op must not restart at a later op of
                                  the first kind in the same window (auto_a's d2.start) */
    }
    if (dh__t.first_op)
        dh__t.ends_iter = 1; /* the program's start, or auto mode's switch boundary */
    dh__t.sync_seen = 0;
    dh__t.first_op = 0;
    int boundary = dh__t.since_sync < DH__START_SLACK;
    if (dh__t.since_sync < DH__START_SLACK)
        dh__t.since_sync++;
    dh__t.prev_sig = d->sig;
    /* Where an iteration may start when not following one: among the first ops after a
     * synchronisation that came right after the template's last op (an iteration's end),
     * or at the program's start. A synchronisation inside an iteration (a rank's own, a
     * pipeline's exchange) is no start even when an op of the template's first kind
     * follows it: a rank that searches would count an iteration there that its peers,
     * following the plan, do not, and their votes would no longer meet (issue 27). */
    int start = boundary && dh__t.ends_iter && !dh__t.win_started;
    if (dh__t.state == DH__T_TRACK) {
        if (dh__match(&dh__t.cur, d)) {
            *flush = dh__take(op, d);
            return;
        }
        if (dh__t.cur.c == 0 && boundary && dh__t.iters_tracked > 0) {
            /* Between two followed iterations, right after the synchronisation that ended
             * the last: an op of this rank's own before its next iteration's first (a rank
             * that logs). It runs now, in program order; the iteration starts at the
             * template's first op as on every other rank, and pairs. */
            dh__unpaired(op);
            *flush = 1;
            return;
        }
        /* Mid-iteration mismatch: what is held is issued now, in a legal order. */
        *flush = 1;
        /* At an iteration boundary the program may simply have left the loop (evaluation,
         * cleanup), and a first iteration may differ from the steady state (lazy set-up):
         * only a mismatch inside an iteration after a matched one is a desync. */
        if (dh__false_start(d, start)) {
            /* The iteration just started did not get as far as any pair, and the op that
             * ends it starts the template again: the program matched the template's first
             * op one step early (a template whose first op also ends the previous
             * iteration). The next match counts it again, so that the keys stay alike. An
             * iteration that differs from the template anywhere else (MoE whose op counts
             * vary with the data) is one, and its peers may wait for this rank's vote on
             * it: it says no (below), and every rank runs it in program order. */
            dh__t.iter_no--;
            dh__t.start_open = 0; /* the restart is a new start, counted as such */
        } else if (dh__t.cur.c > 0) {
            dh__settle(1, DH_UNPAIRED_DESYNC);
        } else if (dh__t.agree && dh__t.iters_tracked > 0) {
            /* The iteration after a followed one differs from its first op on (a rank that
             * logs, at the top of its loop, an op its peers do not issue). Its peers start
             * the iteration and will vote on its pairs: it counts as started here, and
             * this rank says no to it at once, as for a desync inside it. Were it not
             * counted, this rank would cast nothing and its peers would wait for its vote
             * until the timeout. A program that left its loop does the same on every rank
             * (each says no to an iteration nobody runs, and counts it alike). */
            dh__begin_diverged();
        }
        if (dh__t.cur.c > 0 && dh__t.iters_tracked > 0) {
            /* An iteration abandoned (a false start is none): it ran as planned up to here
             * at most. */
            dh_pairing_iteration(0, dh__t.probing   ? DH_UNPAIRED_PROBE
                                    : dh__t.settled ? dh__t.why
                                                    : DH_UNPAIRED_DESYNC);
            if (!dh__t.warned_episode) {
                dh__note_desync(d, op);
                dh__t.warned_episode = 1;
            }
            dh__t.st.desyncs++;
            dh__t.state = DH__T_DESYNC;
        } else {
            DH_INFO(PLAN, "op %zu of the template does not match in the first iteration "
                    "followed (%s '%s'); looking for the next iteration boundary", dh__t.cur.c,
                    dh_op_kind_name(op->kind), d->name);
            dh__t.state = DH__T_SEARCH;
        }
        dh__t.cur = dh__first;
        dh__t.iters_tracked = 0;
    }
    DH_DEBUG(PLAN, "searching: %s '%s' sig %016llx%s", dh_op_kind_name(op->kind), d->name,
             (unsigned long long)d->sig, boundary ? " (after a synchronisation)" : "");
    if (start && dh__match(&dh__first, d)) {
        if (dh__t.state == DH__T_DESYNC)
            dh__t.st.resyncs++;
        DH_INFO(PLAN, "following the plan from op %llu of the program (%llu unmatched before)",
                (unsigned long long)(dh__t.st.matched_ops + dh__t.st.unmatched_ops),
                (unsigned long long)dh__t.st.unmatched_ops);
        dh__t.state = DH__T_TRACK;
        dh__t.warned_episode = 0;
        dh__t.iters_tracked = 0;
        int same = dh__restart_same(), was_settled = dh__t.settled;
        dh_unpaired_t why = dh__t.why;
        uint64_t start_op = dh__t.start_op;
        if (same)
            dh__t.iter_no--; /* dh__take counts it again */
        *flush = dh__take(op, d);
        if (same) {
            dh__t.start_op = start_op; /* the window stays the first start's */
            /* Its peers heard this rank's no on it already (the probe's dh__take casts it
             * again, on the same key): program order, no vote. */
            if (was_settled)
                dh__settle(0, why);
        }
        return;
    }
    dh__unpaired(op);
    if (dh__t.st.iterations == 0 && ++dh__t.searched > 3 * dh__t.nops + 64) {
        const dh_plan_op_t *t0 = dh__op_at(&dh__first);
        snprintf(dh__t_report, sizeof dh__t_report,
                 "!%.300s: this program does not match the plan (no iteration of its %zu-op "
                 "template matched in %llu operations; it starts with %s '%s'): a plan for "
                 "another model or another parallel layout? running passthrough", dh__t.path, dh__t.nops,
                 (unsigned long long)dh__t.searched, t0->kind, t0->name);
        dh__t.state = DH__T_OFF;
    }
}

int dh_tracker_vote_due(const dh_op_desc_t *d, uint64_t *key)
{
    if (!dh__t.w || !dh__t.agree || dh__t.state != DH__T_TRACK || dh__t.settled ||
        dh__t.probing || dh__t.vpi >= dh__t.nvp || dh__t.cur.c != dh__t.vp[dh__t.vpi].c ||
        dh__t.cur.c == 0 || !dh__match(&dh__t.cur, d))
        return 0;
    *key = dh__key(dh__t.iter_no, dh__t.vpi);
    return 1;
}

void dh_tracker_vote_set(int yes)
{
    if (yes) {
        dh__t.vpi++;
        dh__t.sub = 0;
        return;
    }
    dh__t.st.vetoed++;
    dh__settle(0, DH_UNPAIRED_VETOED);
}

/* Lock held: ops of the current pair's held groups have been taken (work not agreed yet). */
static int dh__mid_pair(void)
{
    return dh__t.w && dh__t.agree && dh__t.state == DH__T_TRACK && dh__t.cur.c > 0 &&
           !dh__t.probing && !dh__t.settled && dh__t.vpi < dh__t.nvp &&
           dh__t.cur.c > dh__t.vp[dh__t.vpi].c0;
}

void dh_tracker_drain(dh_unpaired_t why)
{
    /* Held work of a pair not agreed yet would go out in an order only this rank follows. */
    if (dh__mid_pair())
        dh__settle(1, why);
}

int dh_tracker_mid_iteration(void)
{
    return dh__t.w && dh__t.state == DH__T_TRACK && dh__t.cur.c > 0 && !dh__t.probing &&
           !dh__t.settled;
}

int dh_tracker_drain_due(uint64_t *key)
{
    if (!dh__mid_pair())
        return 0;
    *key = dh__key(dh__t.iter_no, dh__t.vpi);
    return 1;
}

void dh_tracker_drain_set(int d)
{
    if (d == 2) {
        dh__t.sub++; /* every rank drains here: the pair goes on as planned */
        return;
    }
    dh__t.st.vetoed++;
    dh__settle(0, DH_UNPAIRED_DRAIN);
}

uint64_t dh_tracker_no_due(void)
{
    uint64_t k = dh__t.no_due;
    dh__t.no_due = 0;
    return k;
}

int dh_tracker_seq_due(void)
{
    int s = dh__t.seq_due;
    dh__t.seq_due = 0;
    return s;
}

int dh_tracker_chain_class(int ahead, int *strand)
{
    pthread_mutex_lock(&dh__s.lock);
    int free_ = 0;
    *strand = 0;
    if (dh__t.w && dh__t.state == DH__T_TRACK) {
        dh_plan_cursor_t c = dh__t.cur;
        for (int k = 0; k < ahead; k++)
            dh_plan_walk_next(dh__t.w, &c);
        *strand = dh__op_at(&c)->strand;
        /* An iteration starting at c (op 0) is not known to pair yet: program order. */
        free_ = dh__t.has_moves && c.c != 0 && dh__t.cur.c != 0 && !dh__t.probing &&
                !dh__t.settled;
    }
    pthread_mutex_unlock(&dh__s.lock);
    return free_;
}

int dh_tracker_predict_strand(void)
{
    if (!dh__t.w || dh__t.state != DH__T_TRACK)
        return 0;
    return dh__op_at(&dh__t.cur)->strand;
}

int dh_tracker_predict_where(int *strand, uint64_t *group)
{
    if (!dh__t.w || dh__t.state != DH__T_TRACK)
        return 0;
    /* dh__take starts an iteration at op 0: its base and whether it checks are set there. */
    int start = dh__t.cur.c == 0;
    if (start ? !dh__t.checked : dh__t.probing || dh__t.settled)
        return 0;
    dh_plan_here_t h;
    dh_plan_walk_at(dh__t.w, &dh__t.cur, &h);
    uint64_t g = (start ? dh__t.next_group : dh__t.base) + (uint64_t)h.group;
    if (h.op->strand == 1 && g < dh__t.floor1)
        g = dh__t.floor1;
    *strand = h.op->strand;
    *group = g;
    return 1;
}

void dh_tracker_planned_hold(uint64_t *ops, uint64_t *bytes)
{
    *ops = *bytes = 0;
    if (dh__t.w && dh__t.state == DH__T_TRACK) {
        *ops = dh__t.agree && dh__t.held_capped > dh__t.held_ops ? dh__t.held_capped
                                                                 : dh__t.held_ops;
        *bytes = dh__t.held_bytes;
    }
}

int dh_tracker_planned(void) { return dh__t.w != NULL; }

double dh_tracker_mem_bound(void) { return dh__t.w ? dh__t.max_extra : -1; }

int dh_tracker_pairing(void) { return dh__mid_pair(); }

uint64_t dh_tracker_hold_design(void)
{
    if (!dh__t.w)
        return 0;
    return dh__t.agree && dh__t.held_capped > dh__t.held_ops ? dh__t.held_capped : dh__t.held_ops;
}

uint64_t dh_tracker_pair_stamp(void) { return dh__t.state == DH__T_TRACK ? dh__t.pair_stamp : 0; }

int dh_tracker_new_iteration(void)
{
    int n = dh__t.new_iter;
    dh__t.new_iter = 0;
    return n;
}

void dh_tracker_floor(uint64_t g)
{
    if (g > dh__t.floor1)
        dh__t.floor1 = g;
    if (g >= dh__t.next_group)
        dh__t.next_group = g + 1;
}

void dh_tracker_sync(void)
{
    dh__t.sync_seen = 1;
    dh__t.ends_iter = dh__t.w && dh__t.prev_sig == dh__t.last_sig;
    /* Work forwarded or drained now runs in program order; the next unpaired op starts a
     * fresh group. */
    dh__t.open = 0;
}

const char *dh_tracker_order(int lgroup)
{
    if (!dh__t.w)
        return NULL;
    return dh_plan_walk_order(dh__t.w, lgroup);
}

void dh_tracker_stats(dh_tracker_stats_t *out) { *out = dh__t.st; }

void dh_tracker_report(void)
{
    if (!dh__t_report[0])
        return;
    if (dh__t_report[0] == '!') {
        DH_ERROR(PLAN, "%s", dh__t_report + 1);
    } else {
        char site[200];
        dh__call_site(site, sizeof site);
        DH_WARN(PLAN, "%s, called from %s; draining and passing through until the next "
                "iteration", dh__t_report, site);
        pthread_mutex_lock(&dh__s.lock);
        dh_pairing_desync(dh__t_report, site);
        pthread_mutex_unlock(&dh__s.lock);
    }
    dh__t_report[0] = '\0';
}

void dh_tracker_finish(void)
{
    pthread_mutex_lock(&dh__s.lock);
    int never = dh__t.w && dh__t.st.iterations == 0 && dh__t.state != DH__T_OFF &&
                dh__t.st.unmatched_ops > 0;
    size_t nops = dh__t.w ? dh__t.nops : 0;
    unsigned long long seen = (unsigned long long)dh__t.st.unmatched_ops;
    dh__t.state = DH__T_OFF;
    pthread_mutex_unlock(&dh__s.lock);
    if (never)
        DH_ERROR(PLAN, "%s: this program does not match the plan (no iteration of its %zu-op "
                 "template matched in %llu operations): a plan for another model or another "
                 "parallel layout?",
                 dh__t.path, nops, seen);
}
