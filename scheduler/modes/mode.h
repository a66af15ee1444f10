/*
 * scheduler/modes/: each DHELIX_MODE as one table of behaviours (dh_mode_ops_t,
 * dispatch/sched_mode.h), each defined in the mode's own file: mode_passthrough.c,
 * mode_stress.c, mode_strands.c, mode_profile.c, mode_plan.c, and mode_auto.c for auto
 * mode, which controls the others. It owns the machinery of the modes that need one: plan
 * mode's strand tracker (tracker.h), the ranks' agreement channel (agree.h) and its count
 * of device memory (memacct.h), auto mode (auto.h) and profile mode's recorder
 * (profile_rec.h). It may call dispatch/ (the
 * scheduler's state and flushes, sched_int.h; what an op must follow, deps.h; what held
 * pairing back, pairing.h), mem/, ops/, real/ and plan/. dispatch/ reaches it only through
 * the tables (dh_mode_table).
 *
 * mode.h: the tables, for modes/mode.c's index and for tests.
 */
#ifndef DH_MODE_H
#define DH_MODE_H

#include "sched_mode.h"

extern const dh_mode_ops_t dh_mode_passthrough;
extern const dh_mode_ops_t dh_mode_stress;
extern const dh_mode_ops_t dh_mode_strands;
extern const dh_mode_ops_t dh_mode_profile;
extern const dh_mode_ops_t dh_mode_plan;
/* Auto mode's controller table (sched_mode.h: asked before the mode in force). */
extern const dh_mode_ops_t dh_mode_auto;

#endif
