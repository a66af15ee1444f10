/*
 * mode_auto.c: DHELIX_MODE=auto as a controller (sched_mode.h): it starts the job in
 * profile mode and, at an iteration boundary every rank agrees on, switches it to plan mode
 * or to passthrough (auto.h says how and why that is safe). Its hooks are asked before
 * those of the mode in force.
 */
#include "auto.h"
#include "mode.h"

static dh_mode_t dh__auto_start(void) { return (dh_mode_t)dh_auto_init(); }

static int dh__auto_first_call(void)
{
    dh_auto_first_call();
    return 0;
}

static void dh__auto_submit(dh_op_t *op, const dh_op_desc_t *d) { dh_auto_submit(op, d); }

const dh_mode_ops_t dh_mode_auto = {
    .mode = DH_MODE_AUTO,
    .controls = 1,
    .start = dh__auto_start,
    .first_call = dh__auto_first_call,
    .submit = dh__auto_submit,
    .sync = dh_auto_synced,
    .drained = dh_auto_drained,
    .finish = dh_auto_fini,
};
