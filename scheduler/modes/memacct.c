/*
 * memacct.c: what reordering costs in device memory, counted on the framework side under
 * dh__s.lock (DESIGN.md invariant 10, issue 15; memacct.h).
 *
 * The count. What pairing costs is counted in program order, so that every rank reaches
 * the same verdict at the same op whatever its dispatcher's speed: live_bytes is what the
 * program holds in its own order (each op adds the stream-ordered bytes its thread
 * allocated since its previous op, a captured free takes its bytes off), live_peak its peak
 * (the baseline's peak as far as the program has got), and what pairing holds on top is
 * unc_bytes, the captured frees of groups not released yet whose blocks no allocation took
 * back, plus the shim's cuBLAS workspace (strand 1's). extra = live + unc + workspaces - peak.
 *
 * The bound (DHELIX_MAX_EXTRA_MEM). When extra passes it while the rank holds a pair it has
 * not voted on, it votes "no" for that pair (dh_tracker_drain): every rank then runs the
 * rest of the iteration in program order (agree.h), and what is held goes out, its frees
 * with it. The verdict never depends on a device reading. Outside a pair there is nothing
 * of its own to give up: an agreed pair goes out as agreed.
 *
 * The device follows the count. The device holds more than the count: frees of released
 * groups that the dispatcher has not issued yet (it runs behind the program; up to
 * DHELIX_MAX_UNISSUED_FREE_BYTES). How many depends on the two threads' speeds, so no plan
 * can predict it, and it made most of what runs measured over the baseline (gpt-6.7b-a40:
 * 250 of 280 MiB; llama-8b-h200: 217 of 345). So an allocation that must take fresh memory
 * first waits for the dispatcher to issue those frees whenever, with them, the device would
 * pass the count's peak so far: the device's peak is then the count's (plus the
 * workspaces), which the planner computes from the profile (scheduler/plan/memsim.c). The
 * wait changes when the program gets on, never the order of the work; it costs host time
 * only where memory would otherwise grow.
 */
#include "common/membound.h"
#include "agree.h"
#include "common/log.h"
#include "memacct.h"
#include "plan.h"
#include "sched_int.h"
#include "tracker.h"

/* The shim's cuBLAS workspace (dispatch/workspace.c: strand 1's, of the largest size the
 * framework gave a GEMM so far; strand 0 runs on the framework's): device memory the
 * baseline does not hold. */
#define DH__WS_EXTRA ((double)dh__ws_seen())

/* The bound in bytes, < 0 none: DHELIX_MAX_EXTRA_MEM when set (a percentage of live_peak),
 * else the plan's max_extra_mem_bytes. */
static double dh__mem_bound(void)
{
    static int read;
    static dh_membound_t env;
    if (!read) {
        read = 1;
        const char *v = dh_config()->max_extra_mem;
        if (v[0] == '\0') {
            env.kind = DH_MEMBOUND_NONE;
            env.bytes = -2; /* unset: the plan's */
        } else if (dh_mem_bound_parse(v, &env) != 0) {
            DH_WARN(SCHED, "DHELIX_MAX_EXTRA_MEM='%s' is not a size (512M) or a percentage (3%%): "
                    "using the plan's bound", v);
            env.kind = DH_MEMBOUND_NONE;
            env.bytes = -2;
        }
    }
    if (env.kind == DH_MEMBOUND_NONE && env.bytes == -2)
        return dh_tracker_mem_bound();
    return dh_mem_bound_bytes(&env, (double)dh__s.live_peak);
}

/* The device's memory as the shim sees it: the program's own plus the frees it captured
 * and has not issued yet (those held for pairing, and those released that the dispatcher
 * has not got to) plus the workspaces; at its peak, what it was made of (DHELIX_STATS
 * mem_device_*: what a run measures over the baseline, taken apart). It reads how far the
 * dispatcher has got: for people, never for a decision. */
static void dh__devmem_note(void)
{
    int64_t ws = (int64_t)dh__sched_ws_bytes();
    int64_t dev = dh__s.live_bytes + (int64_t)dh__s.held_free_bytes + ws;
    struct dh_devmem *m = &dh__s.devmem;
    if (dev <= m->peak)
        return;
    int64_t unissued = (int64_t)dh__s.held_free_bytes - (int64_t)dh__s.unc_bytes;
    *m = (struct dh_devmem){dev, dh__s.live_bytes, dh__s.live_peak, (int64_t)dh__s.unc_bytes,
                            unissued > 0 ? unissued : 0, ws};
}

/* The count at one point: live (the program's memory there) plus what pairing holds; 1
 * when its extra passes the bound. */
static int dh__mem_point(int64_t live)
{
    int64_t peak = live > dh__s.live_peak ? live : dh__s.live_peak;
    double bound = dh__mem_bound();
    /* A job of one rank has no pair to vote on (its tracker agrees with nobody), so nothing
     * gave up what pairing holds past the bound: gpt-6.7b-a40 (one representative rank) on a
     * device of its baseline peak + 0.5% held 80 MiB over the program's peak under a bound
     * of 70 MiB, and its allocations failed. There what is held goes out here, as a kick of
     * the dispatcher issues it (giveback.c does the same), before it counts. */
    double over = (double)(live + (int64_t)dh__s.unc_bytes) + DH__WS_EXTRA - (double)peak;
    if (bound >= 0 && dh_tracker_planned() && !dh_agree_needed() && dh__s.unc_bytes > 0 &&
        over > bound) {
        DH_WARN_ONCE(SCHED, "device memory: pairing would hold %.0f bytes over the program's "
                     "peak so far (%llu of frees held, the workspace included), past the bound "
                     "of %.0f (it lacked %.0f): what it held goes out now and that pair runs "
                     "unpaired (exact); DHELIX_STATS mem_bound_vetoes counts them", over,
                     (unsigned long long)dh__s.unc_bytes, bound, over - bound);
        dh__flush_to(dh__s.next_seq);
        dh__s.stats.mem_bound_vetoes++;
        pthread_cond_signal(&dh__s.work);
    }
    int64_t held = live + (int64_t)dh__s.unc_bytes;
    if (held > dh__s.held_peak)
        dh__s.held_peak = held;
    dh__s.stats.mem_bound_bytes = bound < 0 ? -1 : (int64_t)bound;
    if (bound < 0 || !dh_tracker_planned())
        return 0;
    double extra = (double)held + DH__WS_EXTRA - (double)peak;
    if (extra > (double)dh__s.stats.mem_extra_peak)
        dh__s.stats.mem_extra_peak = (uint64_t)extra;
    return extra > bound;
}

int dh__mem_count(const dh_op_t *op, int64_t mem)
{
    dh__s.live_bytes += mem;
    if (op->kind == DH_OP_FREE_ASYNC)
        dh__s.live_bytes -= (int64_t)op->free_bytes;
    if (dh__s.live_bytes > dh__s.live_peak)
        dh__s.live_peak = dh__s.live_bytes;
    dh__devmem_note();
    int over = dh__mem_point(dh__s.live_bytes) || dh__s.mem_over_alloc;
    dh__s.mem_over_alloc = 0;
    return over && dh_tracker_pairing();
}

void dh__mem_before_fresh(size_t size, int64_t pending)
{
    if (!dh_tracker_planned())
        return;
    int waited = 0;
    for (;;) {
        int64_t now = dh__s.live_bytes + pending + (int64_t)size;
        int64_t counted = now + (int64_t)dh__s.unc_bytes;
        int64_t lim = counted > dh__s.held_peak ? counted : dh__s.held_peak;
        if (dh__s.held_free_bytes <= dh__s.unc_bytes ||
            now + (int64_t)dh__s.held_free_bytes <= lim || !dh__s.started || dh__s.stop ||
            dh__s.low_water >= dh__s.next_seq)
            break;
        /* The dispatcher may be asleep until its next poll: what it must issue is ready. */
        pthread_cond_signal(&dh__s.work);
        pthread_cond_wait(&dh__s.done, &dh__s.lock);
        waited = 1;
    }
    dh__s.stats.mem_fresh_waits += (uint64_t)waited;
    /* The memory peaks here, before the op that the allocation is for releases anything:
     * counted here too (planned alike, memsim.h); a pass of the bound is voted on at that
     * op. */
    dh__s.mem_over_alloc |= dh__mem_point(dh__s.live_bytes + pending + (int64_t)size);
}
