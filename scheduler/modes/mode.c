/*
 * mode.c: the index of the modes' tables (mode.h), by DHELIX_MODE, and the scheduler's
 * statistics with those of plan mode's tracker and of the ranks' agreement beside them
 * (scheduler.h dh_sched_stats), which only this layer can read.
 */
#include "agree.h"
#include "mode.h"
#include "sched_int.h"
#include "tracker.h"

static const dh_mode_ops_t *const dh__tables[DH_MODE_COUNT] = {
    [DH_MODE_PASSTHROUGH] = &dh_mode_passthrough,
    [DH_MODE_STRESS] = &dh_mode_stress,
    [DH_MODE_STRANDS] = &dh_mode_strands,
    [DH_MODE_PROFILE] = &dh_mode_profile,
    [DH_MODE_PLAN] = &dh_mode_plan,
    [DH_MODE_AUTO] = &dh_mode_auto,
};

const dh_mode_ops_t *dh_mode_table(dh_mode_t m)
{
    return (unsigned)m < DH_MODE_COUNT && dh__tables[m] ? dh__tables[m] : &dh_mode_passthrough;
}

void dh_sched_stats(dh_sched_stats_t *out)
{
    pthread_mutex_lock(&dh__s.lock);
    *out = dh__s.stats;
    dh_tracker_stats_t t;
    dh_tracker_stats(&t);
    out->plan_iterations = t.iterations;
    out->plan_desyncs = t.desyncs;
    out->plan_resyncs = t.resyncs;
    out->plan_matched_ops = t.matched_ops;
    out->plan_unmatched_ops = t.unmatched_ops;
    out->plan_refuted_phases = t.refuted;
    out->plan_vetoed = t.vetoed;
    out->plan_held_design = dh_tracker_hold_design();
    out->mem_program_peak = dh__s.live_peak;
    out->mem_device_peak = dh__s.devmem.peak;
    out->mem_device_at_program = dh__s.devmem.live;
    out->mem_device_at_program_peak = dh__s.devmem.live_peak;
    out->mem_device_at_paired = dh__s.devmem.paired;
    out->mem_device_at_unissued = dh__s.devmem.unissued;
    out->mem_device_at_ws = dh__s.devmem.ws;
    pthread_mutex_unlock(&dh__s.lock);
    dh_agree_stats_t a;
    dh_agree_stats(&a);
    out->agree_rounds = a.rounds;
    out->agree_no = a.no;
    out->agree_timeouts = a.timeouts;
    out->agree_waits = a.waits;
    out->agree_total_ns = a.total_ns;
    out->agree_max_ns = a.max_ns;
    out->agree_broken = a.broken;
}
