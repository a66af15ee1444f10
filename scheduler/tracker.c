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

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "common/config.h"
#include "common/log.h"
#include "deps.h"
#include "plan.h"
#include "registry.h"
#include "sched_int.h"

typedef enum { DH__T_SEARCH, DH__T_TRACK, DH__T_DESYNC, DH__T_OFF } dh__tstate_t;

static struct {
    dh_plan_t *plan;                  /* immutable once loaded */
    const dh_plan_section_t *sec;
    char path[512];
    size_t *release_after;            /* [nops]: groups complete once op c is consumed */
    /* guarded by dh__s.lock: */
    dh__tstate_t state;
    size_t cursor;
    uint64_t base, next_group, open_group;
    uint64_t floor1;                  /* strand-1 ops go to groups >= floor1 */
    uint64_t pair_stamp;              /* allocation stamp when the current pair began */
    int open;                         /* open_group holds unpaired ops */
    int sync_seen, first_op, warned_episode, new_iter;
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
} dh__t;

static __thread char dh__t_report[768];

int dh_tracker_load(const char *path)
{
    char err[400];
    snprintf(dh__t.path, sizeof dh__t.path, "%s", path);
    dh_plan_t *p = NULL;
    if (dh_plan_load(path, &p, err, sizeof err) != DH_OK) {
        DH_ERROR(PLAN, "%s; running passthrough", err);
        return -1;
    }
    int world = dh_nccl_world_size(), rank = dh_nccl_global_rank();
    const char *layout = dh_config()->layout;
    if (p->world > 0 && world > 0 && p->world != world) {
        DH_ERROR(PLAN, "%s: the plan is for %d ranks and this job has %d (another parallel "
                 "layout); running passthrough", path, p->world, world);
    } else if (p->layout[0] && layout[0] && strcmp(p->layout, layout) != 0) {
        DH_ERROR(PLAN, "%s: the plan is for layout %s and DHELIX_LAYOUT is %s; running "
                 "passthrough", path, p->layout, layout);
    } else if (!(dh__t.sec = dh_plan_section_for(p, rank < 0 ? 0 : rank))) {
        DH_ERROR(PLAN, "%s: no section of the plan is for rank %d; running passthrough", path,
                 rank < 0 ? 0 : rank);
    } else if (dh__t.sec->nops == 0 || dh__t.sec->ngroups == 0) {
        DH_ERROR(PLAN, "%s: the plan's template for rank %d is empty; running passthrough",
                 path, rank < 0 ? 0 : rank);
        dh__t.sec = NULL;
    } else {
        const dh_plan_section_t *s = dh__t.sec;
        size_t *ra = dh_plan_release_marks(s);
        dh__t.refuted = calloc((size_t)s->nphases + 1, 1);
        if (!ra || !dh__t.refuted) {
            free(ra);
            free(dh__t.refuted);
            dh__t.refuted = NULL;
            dh__t.sec = NULL;
            dh_plan_free(p);
            DH_ERROR(PLAN, "%s: out of memory; running passthrough", path);
            return -1;
        }
        dh__t.release_after = ra;
        dh__t.plan = p;
        dh__t.state = DH__T_SEARCH;
        dh__t.first_op = 1;
        DH_INFO(PLAN, "%s: rank %d, template of %zu ops in %d groups, predicted %.3f ms -> "
                "%.3f ms per iteration", path, rank, s->nops, s->ngroups, s->baseline_us / 1e3,
                s->si_us / 1e3);
        return 0;
    }
    dh__t.sec = NULL;
    dh_plan_free(p);
    return -1;
}

static int dh__match(size_t c, const dh_op_desc_t *d)
{
    const dh_plan_op_t *t = &dh__t.sec->ops[c];
    return t->sig == d->sig && (t->shape_dynamic || t->shape == d->shape);
}

static void dh__set_release(uint64_t r)
{
    if (r > dh__s.release)
        dh__s.release = r;
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

/* The probe's view of template op c (op is its match). Lock held. */
static void dh__probe(const dh_op_t *op, const dh_op_desc_t *d, size_t c)
{
    const dh_plan_section_t *s = dh__t.sec;
    const dh_plan_op_t *t = &s->ops[c];
    int p = t->phase; /* -1 only in a plan without phases (plan_check.c) */
    if (t->strand == 0) {
        if (p >= 0 && s->phases[p].paired_with >= 0 && p != dh__t.probe_src) {
            dh__t.probe_src = p;
            dh_deps_taint_reset(&dh__t.probe_pair, dh_sched_stamp());
        }
        if (p >= 0 && p == dh__t.probe_src)
            dh_deps_taint_add(&dh__t.probe_pair, op);
        dh_deps_taint_add(&dh__t.probe_iter, op);
        return;
    }
    int unit = p >= 0 ? p : s->nphases;
    if (dh__t.refuted[unit])
        return;
    /* Paired with the strand-a phase just seen, as the planner writes it; any other layout
     * is checked against all of the iteration's strand-a work. */
    int pw = p >= 0 ? s->phases[p].paired_with : -1;
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
    const dh_plan_section_t *s = dh__t.sec;
    size_t c = dh__t.cursor;
    if (c == 0) {
        /* Tensors made from here on belong to this iteration's micro-batches (op.h). */
        atomic_store_explicit(&dh__s.young_from, dh_sched_stamp(), memory_order_relaxed);
        dh__t.new_iter = 1;
        dh__t.open = 0;
        dh__t.base = dh__t.next_group;
        dh__t.next_group += (uint64_t)s->ngroups;
        dh__t.probing = !dh__t.checked;
        dh__t.probe_src = -1;
        dh_deps_taint_reset(&dh__t.probe_iter, dh_sched_stamp());
    }
    /* The first op of a paired backward phase starts a pair. */
    const dh_plan_phase_t *ph = s->ops[c].phase >= 0 && s->ops[c].phase < s->nphases
                                    ? &s->phases[s->ops[c].phase] : NULL;
    if (ph && ph->first == c && ph->kind == 'B' && ph->paired_with >= 0)
        dh__t.pair_stamp = dh_sched_stamp();
    if (dh__t.probing) {
        /* Program order on one strand, released as it comes, like unmatched work. */
        dh__probe(op, d, c);
        if (!dh__t.open) {
            dh__t.open_group = dh__t.next_group++;
            dh__t.open = 1;
        }
        op->strand = 0;
        op->lgroup = -1;
        op->group = dh__t.open_group;
        dh__set_release(dh__t.open_group + 1);
        dh__t.st.matched_ops++;
        if (++dh__t.cursor == s->nops) {
            dh__t.cursor = 0;
            dh__t.st.iterations++;
            dh__t.iters_tracked++;
            dh__probe_done();
        }
        return 0;
    }
    op->strand = s->ops[c].strand;
    op->lgroup = s->ops[c].group;
    op->group = dh__t.base + (uint64_t)s->ops[c].group;
    if (op->strand == 1 && dh__t.refuted[ph ? s->ops[c].phase : s->nphases])
        dh__after_strand_a(op);
    if (op->strand == 1 && op->group < dh__t.floor1) {
        /* Behind a strand-1 op that was moved after strand-0 work it depends on: same
         * group, and after that group's strand-0 ops on every rank alike. */
        op->group = dh__t.floor1;
        op->after0 = 1;
    }
    dh__set_release(dh__t.base + dh__t.release_after[c]);
    const dh_plan_group_t *g = &s->groups[s->ops[c].group];
    int out = !op->after0 && (g->a_n == 0 || g->b_n == 0) && dh__s.release == op->group ? 2 : 0;
    dh__t.st.matched_ops++;
    if (++dh__t.cursor == s->nops) {
        dh__t.cursor = 0;
        dh__t.st.iterations++;
        dh__t.iters_tracked++;
    }
    return out;
}

static void dh__note_desync(const dh_op_desc_t *d, const dh_op_t *op)
{
    const dh_plan_op_t *t = &dh__t.sec->ops[dh__t.cursor];
    snprintf(dh__t_report, sizeof dh__t_report,
             "%.300s: desync at op %zu of the template (iteration %llu): expected %s '%s', got %s "
             "'%s'", dh__t.path, dh__t.cursor, (unsigned long long)dh__t.st.iterations, t->kind,
             t->name, dh_op_kind_name(op->kind), d->name);
}

void dh_tracker_assign(dh_op_t *op, const dh_op_desc_t *d, int *flush)
{
    *flush = 0;
    if (!dh__t.sec || dh__t.state == DH__T_OFF) {
        dh__unpaired(op);
        return;
    }
    /* Whether op directly follows a host synchronisation (or starts the program). */
    int boundary = dh__t.sync_seen || dh__t.first_op;
    dh__t.sync_seen = 0;
    dh__t.first_op = 0;
    if (dh__t.state == DH__T_TRACK) {
        if (dh__match(dh__t.cursor, d)) {
            *flush = dh__take(op, d);
            return;
        }
        /* Mid-iteration mismatch: what is held is issued now, in a legal order. */
        *flush = 1;
        /* At an iteration boundary the program may simply have left the loop (evaluation,
         * cleanup), and a first iteration may differ from the steady state (lazy set-up):
         * only a mismatch inside an iteration after a matched one is a desync. */
        if (dh__t.cursor > 0 && dh__t.iters_tracked > 0) {
            if (!dh__t.warned_episode) {
                dh__note_desync(d, op);
                dh__t.warned_episode = 1;
            }
            dh__t.st.desyncs++;
            dh__t.state = DH__T_DESYNC;
        } else {
            DH_INFO(PLAN, "op %zu of the template does not match in the first iteration "
                    "followed (%s '%s'); looking for the next iteration boundary", dh__t.cursor,
                    dh_op_kind_name(op->kind), d->name);
            dh__t.state = DH__T_SEARCH;
        }
        dh__t.cursor = 0;
        dh__t.iters_tracked = 0;
    }
    DH_DEBUG(PLAN, "searching: %s '%s' sig %016llx%s", dh_op_kind_name(op->kind), d->name,
             (unsigned long long)d->sig, boundary ? " (after a synchronisation)" : "");
    if (boundary && dh__match(0, d)) {
        if (dh__t.state == DH__T_DESYNC)
            dh__t.st.resyncs++;
        DH_INFO(PLAN, "following the plan from op %llu of the program (%llu unmatched before)",
                (unsigned long long)(dh__t.st.matched_ops + dh__t.st.unmatched_ops),
                (unsigned long long)dh__t.st.unmatched_ops);
        dh__t.state = DH__T_TRACK;
        dh__t.warned_episode = 0;
        dh__t.iters_tracked = 0;
        *flush = dh__take(op, d);
        return;
    }
    dh__unpaired(op);
    if (dh__t.st.iterations == 0 && ++dh__t.searched > 3 * dh__t.sec->nops + 64) {
        const dh_plan_op_t *t0 = &dh__t.sec->ops[0];
        snprintf(dh__t_report, sizeof dh__t_report,
                 "!%.300s: this program does not match the plan (no iteration of its %zu-op "
                 "template matched in %llu operations; it starts with %s '%s'): a plan for "
                 "another model or another parallel layout? running passthrough", dh__t.path, dh__t.sec->nops,
                 (unsigned long long)dh__t.searched, t0->kind, t0->name);
        dh__t.state = DH__T_OFF;
    }
}

int dh_tracker_predict_strand(void)
{
    if (!dh__t.sec || dh__t.state != DH__T_TRACK)
        return 0;
    return dh__t.sec->ops[dh__t.cursor].strand;
}

void dh_tracker_planned_hold(uint64_t *ops, uint64_t *bytes)
{
    *ops = *bytes = 0;
    if (dh__t.sec && dh__t.state == DH__T_TRACK) {
        *ops = (uint64_t)dh__t.sec->held_ops;
        *bytes = (uint64_t)dh__t.sec->held_free_bytes;
    }
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
    /* Work forwarded or drained now runs in program order; the next unpaired op starts a
     * fresh group. */
    dh__t.open = 0;
}

const char *dh_tracker_order(int lgroup)
{
    if (!dh__t.sec || lgroup < 0 || lgroup >= dh__t.sec->ngroups)
        return NULL;
    return dh__t.sec->groups[lgroup].order;
}

void dh_tracker_stats(dh_tracker_stats_t *out) { *out = dh__t.st; }

/* The first frame outside the shim and the CUDA/NCCL libraries (or the vgpu standing in
 * for them): where the program made the call. */
static void dh__call_site(char *buf, size_t len)
{
    snprintf(buf, len, "unknown");
    Dl_info self;
    if (!dladdr((void *)dh__call_site, &self))
        return;
    unw_context_t ctx;
    unw_cursor_t cur;
    if (unw_getcontext(&ctx) || unw_init_local(&cur, &ctx))
        return;
    for (int depth = 0; depth < 64 && unw_step(&cur) > 0; depth++) {
        unw_word_t ip = 0;
        unw_get_reg(&cur, UNW_REG_IP, &ip);
        Dl_info di;
        if (!ip || !dladdr((void *)ip, &di) || !di.dli_fname)
            continue;
        if (di.dli_fbase == self.dli_fbase)
            continue;
        const char *base = strrchr(di.dli_fname, '/');
        base = base ? base + 1 : di.dli_fname;
        static const char *const libs[] = {"libcudart", "libcuda.", "libcublas", "libnccl",
                                           "libvgpu"};
        int lib = 0;
        for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++)
            lib |= strncmp(base, libs[i], strlen(libs[i])) == 0;
        if (lib)
            continue;
        char sym[128] = "";
        unw_word_t off = 0;
        if (unw_get_proc_name(&cur, sym, sizeof sym, &off) == 0)
            snprintf(buf, len, "%s+0x%lx (%s)", sym, (unsigned long)off, base);
        else
            snprintf(buf, len, "%s+0x%lx", base,
                     (unsigned long)(ip - (unw_word_t)(uintptr_t)di.dli_fbase));
        return;
    }
}

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
    }
    dh__t_report[0] = '\0';
}

void dh_tracker_finish(void)
{
    pthread_mutex_lock(&dh__s.lock);
    int never = dh__t.sec && dh__t.st.iterations == 0 && dh__t.state != DH__T_OFF &&
                dh__t.st.unmatched_ops > 0;
    size_t nops = dh__t.sec ? dh__t.sec->nops : 0;
    unsigned long long seen = (unsigned long long)dh__t.st.unmatched_ops;
    dh__t.state = DH__T_OFF;
    pthread_mutex_unlock(&dh__s.lock);
    if (never)
        DH_ERROR(PLAN, "%s: this program does not match the plan (no iteration of its %zu-op "
                 "template matched in %llu operations): a plan for another model or another "
                 "parallel layout?",
                 dh__t.path, nops, seen);
}
