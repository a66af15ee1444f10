/*
 * mode_strands.c: DHELIX_MODE=strands, a test mode that pairs without a plan. Each maximal
 * run of ops from one thread is a phase; odd phases (the backward thread of micro-batch i)
 * run on strand 0, even phases (the forward of i+1) on strand 1, and phases 2k-1 and 2k form
 * co-execution group k. A group is complete once a later one has started. What strand 1
 * must follow is decided by the dependency rules alone (deps.h), from the last host
 * synchronisation on.
 */
#include "deps.h"
#include "mode.h"
#include "sched_int.h"

/* Lock held. */
static void dh__strands_assign(dh_op_t *op, const dh_op_desc_t *d, int *flush)
{
    (void)d;
    if (op->thread != dh__s.last_thread) {
        if (dh__s.last_thread >= 0)
            dh__s.phase++;
        dh__s.last_thread = op->thread;
    }
    op->strand = (dh__s.phase % 2 == 1) ? 0 : 1;
    op->group = (dh__s.phase + 1) / 2;
    if (op->group > dh__s.release)
        dh__s.release = op->group;
}

/* Lock held: the phase the calling thread's next op would start or continue. */
static int dh__strands_predict(void)
{
    uint64_t phase = dh__s.phase +
                     (dh__sched_thread_id() != dh__s.last_thread && dh__s.last_thread >= 0);
    return (phase % 2 == 1) ? 0 : 1;
}

/* Lock held: everything before a host synchronisation is issued, in program order. */
static void dh__strands_sync(void) { dh_deps_s0_reset(); }

const dh_mode_ops_t dh_mode_strands = {
    .mode = DH_MODE_STRANDS,
    .defers = 1,
    .two_strands = 1,
    .pools = 1,
    .footprints = 1,
    .order = DH_ORDER_GROUPS,
    .assign = dh__strands_assign,
    .sync = dh__strands_sync,
    .predict_strand = dh__strands_predict,
};
