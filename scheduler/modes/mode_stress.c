/*
 * mode_stress.c: DHELIX_MODE=stress, a test mode that defers everything it legally can (one
 * strand, nothing released until a drain) and lets the dispatcher issue what is held in a
 * seeded random order that keeps every dependency (order.c, dh__order_stress). It exists to
 * show that deferral alone never changes a result. Captured frees park their blocks for
 * reuse as in the modes that pair.
 */
#include "mode.h"

const dh_mode_ops_t dh_mode_stress = {
    .mode = DH_MODE_STRESS,
    .defers = 1,
    .pools = 1,
    .order = DH_ORDER_STRESS,
};
