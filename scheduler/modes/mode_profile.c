/*
 * mode_profile.c: DHELIX_MODE=profile. Every op is issued at once in program order (as in
 * passthrough) but through the dispatcher, which brackets each stream op with two events;
 * the recorder (profile_rec.h) keeps each op's description, footprint, the allocations made
 * before it and what it must follow, and cuts iterations at the program's synchronisations.
 * At exit the profile is written, the input of `dhelix plan`; under auto mode the recorder
 * serves auto mode's planning instead, which writes nothing here.
 */
#include "auto.h"
#include "deps.h"
#include "mode.h"
#include "profile_rec.h"
#include "sched_int.h"

/* Lock held: the op's record, and what it must follow by plan mode's rules. */
static void dh__profile_queue(dh_op_t *op, const dh_op_desc_t *d, const dh_mode_alloc_t *a)
{
    op->prof = dh_prof_record(op, d, a->bytes, a->sizes, a->nsizes,
                              dh__stream_ordinal(op->stream), dh_deps_prof(op));
    if (!op->prof)
        return;
    dh_deps_prof_add(op, op->prof - 1);
    if (op->kind == DH_OP_EVENT_RECORD) {
        dh_evinst_t *i = op->shim_event;
        i->rec_group = op->prof - 1;
        i->rec_run = dh_deps_prof_run();
    }
}

static void dh__profile_finish(void)
{
    if (!dh_auto_on())
        dh_prof_finish();
}

const dh_mode_ops_t dh_mode_profile = {
    .mode = DH_MODE_PROFILE,
    .defers = 1,
    .describes = 1,
    .footprints = 1,
    .issues_each = 1,
    .order = DH_ORDER_PROGRAM,
    .queue = dh__profile_queue,
    .sync = dh_prof_sync,
    .finish = dh__profile_finish,
};
