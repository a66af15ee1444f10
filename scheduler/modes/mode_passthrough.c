/*
 * mode_passthrough.c: DHELIX_MODE=passthrough, the default without a plan. Every call is
 * forwarded at once (no dispatcher thread): the overhead floor. Auto mode also ends here
 * when no plan is used; what was queued until then goes out first (dh__sched_passthrough),
 * and an op captured meanwhile by another thread is issued before its call returns.
 */
#include "mode.h"

const dh_mode_ops_t dh_mode_passthrough = {
    .mode = DH_MODE_PASSTHROUGH,
    .issues_each = 1,
    .order = DH_ORDER_PROGRAM,
};
