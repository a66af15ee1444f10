/* stats.c: the DHELIX_STATS report, through the one table emitter. */
#define _GNU_SOURCE
#include "stats.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "hooks.h"
#include "registry.h"
#include "auto.h"
#include "mempool.h"
#include "pairing.h"
#include "scheduler.h"

static const dh_col_t dh__stats_cols[] = {
    {"api", "API", DH_CELL_STR},
    {"lib", "LIB", DH_CELL_STR},
    {"calls", "CALLS", DH_CELL_NUM},
    {"nested", "NESTED", DH_CELL_NUM},
};

static const char *const dh__op_names[] = {
#define DH__OP_NAME(id) #id,
    DH_OP_KINDS(DH__OP_NAME)
#undef DH__OP_NAME
};
static const char *const dh__drain_names[] = {
#define DH__DRAIN_NAME(id, d) #id,
    DH_DRAIN_REASONS(DH__DRAIN_NAME)
#undef DH__DRAIN_NAME
};

/* The scheduler's summary: operations deferred per kind, drains per cause, the deepest the
 * queues got, the most memory deferred frees held, replay errors, barriers. */
static dh_status_t dh__sched_meta(dh_table_t *t)
{
    dh_sched_stats_t st;
    dh_sched_stats(&st);
    char key[64], val[24];
#define DH__META_NUM(k, v)                                                              \
    do {                                                                                \
        snprintf(val, sizeof(val), "%" PRIu64, (uint64_t)(v));                          \
        DH_CHECK(dh_table_meta(t, k, DH_CELL_NUM, val));                                \
    } while (0)
    for (int k = 0; k < DH_OP_KIND_COUNT; k++) {
        snprintf(key, sizeof(key), "deferred_%s", dh__op_names[k]);
        DH__META_NUM(key, st.ops[k]);
    }
    for (int r = 0; r < DH_DRAIN_COUNT; r++) {
        snprintf(key, sizeof(key), "drains_%s", dh__drain_names[r]);
        DH__META_NUM(key, st.drains[r]);
    }
    DH__META_NUM("max_queue_depth", st.max_queue_depth);
    DH__META_NUM("max_deferred_free_bytes", st.max_deferred_bytes);
    DH__META_NUM("replay_errors", st.replay_errors);
    DH__META_NUM("call_rejects", st.call_rejects);
    DH__META_NUM("call_learns", st.call_learns);
    DH__META_NUM("cross_strand_barriers", st.cross_strand_barriers);
    DH__META_NUM("paired_groups", st.paired_groups);
    DH__META_NUM("dependency_moves", st.dependency_moves);
    DH__META_NUM("order_fallbacks", st.order_fallbacks);
    DH__META_NUM("kick_flushes", st.kick_flushes);
    DH__META_NUM("lag_waits", st.lag_waits);
    DH__META_NUM("max_held_back", st.max_held_back);
    DH__META_NUM("events_destroyed_later", st.events_destroyed_later);
    /* The shim's reuse of captured frees (scheduler/mem/mempool.h). */
    dh_mpool_stats_t mp;
    uint64_t parked_now;
    dh_mpool_stats(&mp, &parked_now);
    DH__META_NUM("pool_parked_peak_bytes", mp.parked_bytes_peak);
    DH__META_NUM("pool_reuse_same_strand", mp.reuse_same);
    DH__META_NUM("pool_reuse_same_strand_bytes", mp.reuse_same_bytes);
    DH__META_NUM("pool_reuse_cross_strand", mp.reuse_cross);
    DH__META_NUM("pool_reuse_cross_strand_bytes", mp.reuse_cross_bytes);
    DH__META_NUM("pool_fresh_allocs", mp.fresh);
    DH__META_NUM("pool_fresh_bytes", mp.fresh_bytes);
    DH__META_NUM("pool_cross_refused", mp.refused_cross);
    /* A device the program fills (scheduler/dispatch/giveback.c, workspace.c). */
    DH__META_NUM("mem_givebacks", st.mem_givebacks);
    DH__META_NUM("mem_giveback_failed", st.mem_giveback_failed);
    DH__META_NUM("mem_giveback_pair", st.mem_giveback_pair);
    DH__META_NUM("mem_giveback_ws", st.mem_giveback_ws);
    DH__META_NUM("mem_device_vetoes", st.mem_device_vetoes);
    DH__META_NUM("workspace_peak_bytes", st.ws_bytes_peak);
    DH__META_NUM("workspace_serialised_ops", st.ws_serialised);
    DH__META_NUM("workspace_refused", st.ws_refused);
    dh_auto_stats_t a;
    if (dh_auto_on())
        dh_auto_stats(&a);
    /* A plan ran: plan mode, or auto mode until it switched back. */
    if (dh_sched_mode() == DH_MODE_PLAN || (dh_auto_on() && a.switched)) {
        DH__META_NUM("plan_iterations", st.plan_iterations);
        DH__META_NUM("plan_desyncs", st.plan_desyncs);
        DH__META_NUM("plan_resyncs", st.plan_resyncs);
        DH__META_NUM("plan_matched_ops", st.plan_matched_ops);
        DH__META_NUM("plan_unmatched_ops", st.plan_unmatched_ops);
        DH__META_NUM("plan_refuted_phases", st.plan_refuted_phases);
        DH__META_NUM("plan_vetoed_rounds", st.plan_vetoed);
        DH__META_NUM("mem_bound_vetoes", st.mem_bound_vetoes);
        DH__META_NUM("mem_extra_peak_bytes", st.mem_extra_peak);
        DH__META_NUM("mem_fresh_waits", st.mem_fresh_waits);
        if (st.mem_bound_bytes >= 0)
            DH__META_NUM("mem_bound_bytes", st.mem_bound_bytes);
        DH__META_NUM("plan_held_design", st.plan_held_design);
        DH__META_NUM("mem_program_peak_bytes", (uint64_t)st.mem_program_peak);
        DH__META_NUM("mem_device_peak_bytes", (uint64_t)st.mem_device_peak);
        DH__META_NUM("mem_device_peak_program_bytes", (uint64_t)st.mem_device_at_program);
        DH__META_NUM("mem_device_peak_program_peak_bytes", (uint64_t)st.mem_device_at_program_peak);
        DH__META_NUM("mem_device_peak_paired_bytes", (uint64_t)st.mem_device_at_paired);
        DH__META_NUM("mem_device_peak_unissued_bytes", (uint64_t)(st.mem_device_at_unissued > 0 ? st.mem_device_at_unissued : 0));
        DH__META_NUM("mem_device_peak_workspace_bytes", (uint64_t)st.mem_device_at_ws);
        DH__META_NUM("agree_rounds", st.agree_rounds);
        DH__META_NUM("agree_no", st.agree_no);
        DH__META_NUM("agree_timeouts", st.agree_timeouts);
        DH__META_NUM("agree_broken", (uint64_t)st.agree_broken);
        DH__META_NUM("agree_waits", st.agree_waits);
        DH__META_NUM("agree_wait_us", st.agree_total_ns / 1000);
        DH__META_NUM("agree_max_us", st.agree_max_ns / 1000);
        DH__META_NUM("agree_mean_us", st.agree_waits ? st.agree_total_ns / st.agree_waits / 1000 : 0);
    }
    if (dh_auto_on()) {
        char v[32];
        DH_CHECK(dh_table_meta(t, "auto_status", DH_CELL_STR, a.status));
        DH_CHECK(dh_table_meta(t, "auto_cache", DH_CELL_STR,
                               !dh_config()->plan_cache[0] ? "off" : a.cache_hit ? "hit" : "miss"));
        snprintf(v, sizeof v, "%lld", (long long)a.switch_iteration);
        DH_CHECK(dh_table_meta(t, "auto_switch_iteration", DH_CELL_NUM, v));
        snprintf(v, sizeof v, "%lld", (long long)a.switch_due);
        DH_CHECK(dh_table_meta(t, "auto_switch_due", DH_CELL_NUM, v));
        snprintf(v, sizeof v, "%.3f", a.switch_wait_ms);
        DH_CHECK(dh_table_meta(t, "auto_switch_wait_ms", DH_CELL_NUM, v));
        snprintf(v, sizeof v, "%.3f", a.planning_ms);
        DH_CHECK(dh_table_meta(t, "auto_planning_ms", DH_CELL_NUM, v));
        snprintf(v, sizeof v, "%.3f", a.ready_ms);
        DH_CHECK(dh_table_meta(t, "auto_ready_ms", DH_CELL_NUM, v));
        snprintf(v, sizeof v, "%.4f", a.predicted);
        DH_CHECK(dh_table_meta(t, "auto_predicted_speedup", DH_CELL_NUM, v));
        DH__META_NUM("auto_profile_ops", a.profile_ops);
        snprintf(v, sizeof v, "%lld", (long long)a.passthrough_iteration);
        DH_CHECK(dh_table_meta(t, "auto_passthrough_iteration", DH_CELL_NUM, v));
        DH__META_NUM("auto_deferred_after_passthrough", a.deferred_after);
        snprintf(v, sizeof v, "%.4f", a.measured);
        DH_CHECK(dh_table_meta(t, "auto_measured_speedup", DH_CELL_NUM, v));
        snprintf(v, sizeof v, "%.4f", a.measured_base_ms);
        DH_CHECK(dh_table_meta(t, "auto_measured_program_order_ms", DH_CELL_NUM, v));
        snprintf(v, sizeof v, "%.4f", a.measured_si_ms);
        DH_CHECK(dh_table_meta(t, "auto_measured_si_ms", DH_CELL_NUM, v));
    }
#undef DH__META_NUM
    return DH_OK;
}

static dh_status_t dh__stats_meta(dh_table_t *t, const dh_config_t *cfg)
{
    char host[64], pid[24];
    if (gethostname(host, sizeof(host)) != 0)
        snprintf(host, sizeof(host), "unknown");
    host[sizeof(host) - 1] = '\0';
    snprintf(pid, sizeof(pid), "%ld", (long)getpid());
    DH_CHECK(dh_table_meta(t, "version", DH_CELL_STR, dh_version()));
    /* The mode that ran (passthrough when a plan could not be used); auto mode's counts
     * stay when it went passthrough (what it deferred before, and that nothing after). */
    int deferring = dh_sched_mode() != DH_MODE_PASSTHROUGH || dh_auto_on();
    DH_CHECK(dh_table_meta(t, "mode", DH_CELL_STR, dh_mode_name(dh_sched_mode())));
    DH_CHECK(dh_table_meta(t, "requested_mode", DH_CELL_STR, dh_mode_name(cfg->mode)));
    DH_CHECK(dh_table_meta(t, "rank", DH_CELL_STR, dh_log_rank()));
    DH_CHECK(dh_table_meta(t, "host", DH_CELL_STR, host));
    DH_CHECK(dh_table_meta(t, "pid", DH_CELL_NUM, pid));
    return deferring ? dh__sched_meta(t) : DH_OK;
}

/* One row per hand-wrapped entry point, and one per generated drain-and-forward wrapper
 * (wrap_gen.h) that was called: there are about a thousand of those, nearly all unused. */
static dh_status_t dh__stats_rows(dh_table_t *t)
{
    for (int id = 0; id < DH_HOOK_COUNT; id++) {
        char calls[24], nested[24];
        uint64_t c = dh_hook_calls((dh_hook_id_t)id), n = dh_hook_nested((dh_hook_id_t)id);
        if (id >= (int)DH_HOOK_HAND_COUNT && c == 0 && n == 0)
            continue;
        snprintf(calls, sizeof(calls), "%" PRIu64, c);
        snprintf(nested, sizeof(nested), "%" PRIu64, n);
        const char *cells[] = {dh_hook_name((dh_hook_id_t)id),
                               dh_hook_lib_name(dh_hook_lib((dh_hook_id_t)id)), calls, nested};
        DH_CHECK(dh_table_row(t, cells));
    }
    return DH_OK;
}

/* ---- NCCL: one row per communicator (nccl_wrap/registry.h) ---- */

static const dh_col_t dh__nccl_cols[] = {
    {"comm", "COMM", DH_CELL_NUM},         {"name", "NAME", DH_CELL_STR},
    {"origin", "ORIGIN", DH_CELL_STR},     {"role", "ROLE", DH_CELL_STR},
    {"nranks", "RANKS", DH_CELL_NUM},      {"rank", "RANK", DH_CELL_NUM},
    {"device", "DEV", DH_CELL_NUM},        {"policy", "POLICY", DH_CELL_STR},
    {"state", "STATE", DH_CELL_STR},       {"ops", "OPS", DH_CELL_NUM},
    {"bytes", "BYTES", DH_CELL_NUM},       {"deferred", "DEFERRED", DH_CELL_NUM},
    {"interleaved", "INTERLEAVED", DH_CELL_NUM}, {"pinned", "PINNED", DH_CELL_NUM},
    {"errors", "ERRORS", DH_CELL_NUM},
};

/* The communicators' table in fmt into out; nothing when the process made none. ops and
 * bytes: the program's collective and point-to-point calls and their count x element size
 * (counted when the mode defers or DHELIX_STATS is on); deferred: those the dispatcher
 * replayed; interleaved / pinned: of those, the ones two-strand execution could pair with
 * the other strand / kept apart from it; errors: replays that failed or were cancelled. */
static dh_status_t dh__nccl_render(dh_fmt_t fmt, dh_strbuf_t *out)
{
    dh_nccl_comm_stats_t *s;
    size_t n = dh_nccl_reg_stats(&s);
    if (n == 0)
        return DH_OK;
    dh_table_t *t;
    dh_status_t st = dh_table_new(&t, "dhelix_nccl", dh__nccl_cols,
                                  (int)(sizeof(dh__nccl_cols) / sizeof(dh__nccl_cols[0])));
    for (size_t i = 0; i < n && st == DH_OK; i++) {
        char num[9][24];
        uint64_t v[9] = {s[i].order, (uint64_t)s[i].nranks, (uint64_t)s[i].rank,
                         (uint64_t)s[i].device, s[i].ops, s[i].bytes, s[i].deferred,
                         s[i].interleaved, s[i].pinned};
        for (int k = 0; k < 9; k++)
            snprintf(num[k], sizeof num[k], "%" PRIu64, v[k]);
        char err[24];
        snprintf(err, sizeof err, "%" PRIu64, s[i].errors);
        const char *cells[] = {num[0], s[i].name, s[i].origin, s[i].role, num[1], num[2],
                               num[3], s[i].enabled ? "interleaved" : "pinned",
                               s[i].live ? "live" : "gone", num[4], num[5], num[6], num[7],
                               num[8], err};
        st = dh_table_row(t, cells);
    }
    if (st == DH_OK)
        st = dh_table_render(t, fmt, out);
    dh_table_free(t);
    free(s);
    return st;
}

/* ---- pairing: what held it back (scheduler/dispatch/pairing.h), plan mode ---- */

static const dh_col_t dh__pairing_cols[] = {
    {"kind", "KIND", DH_CELL_STR},
    {"cause", "CAUSE", DH_CELL_STR},
    {"count", "COUNT", DH_CELL_NUM},
    {"detail", "DETAIL", DH_CELL_STR},
};

static dh_status_t dh__pairing_rows(dh_table_t *t, const dh_pairing_stats_t *p)
{
    char n[24];
    for (int r = 0; r < DH_UNPAIRED_COUNT; r++) {
        if (!p->unpaired[r])
            continue;
        snprintf(n, sizeof n, "%" PRIu64, p->unpaired[r]);
        /* A desync names its first occurrence: the op and where the program called it. */
        const char *detail = r == DH_UNPAIRED_DESYNC && p->desync[0] ? p->desync
                                                                     : dh_unpaired_text(r);
        const char *cells[] = {"unpaired_iterations", dh_unpaired_key(r), n, detail};
        DH_CHECK(dh_table_row(t, cells));
    }
    /* Drains in the middle of followed iterations, most frequent first. */
    int done[DH_DRAIN_COUNT] = {0};
    for (;;) {
        int best = -1;
        for (int r = 0; r < DH_DRAIN_COUNT; r++)
            if (!done[r] && p->drains[r] && (best < 0 || p->drains[r] > p->drains[best]))
                best = r;
        if (best < 0)
            return DH_OK;
        done[best] = 1;
        char site[200];
        snprintf(n, sizeof n, "%" PRIu64, p->drains[best]);
        snprintf(site, sizeof site, "first from %s", p->drain_site[best]);
        const char *cells[] = {"drains_mid_iteration", dh__drain_names[best], n, site};
        DH_CHECK(dh_table_row(t, cells));
    }
}

/* The pairing table in fmt into out; nothing unless a plan was attached. Its metadata:
 * planned_groups (the template's two-strand groups x the iterations followed),
 * formed_groups (groups issued with both strands), formed_share, iterations followed run
 * paired and unpaired, the agreement's cost. Its rows: unpaired iterations by reason, drains
 * in the middle of followed iterations by cause with the first one's call site. */
static dh_status_t dh__pairing_render(dh_fmt_t fmt, dh_strbuf_t *out)
{
    if (dh_sched_mode() != DH_MODE_PLAN && !dh_auto_on())
        return DH_OK;
    dh_pairing_stats_t p;
    dh_pairing_stats(&p);
    if (!p.attached)
        return DH_OK;
    dh_sched_stats_t st;
    dh_sched_stats(&st);
    uint64_t unpaired = 0;
    for (int r = 0; r < DH_UNPAIRED_COUNT; r++)
        unpaired += p.unpaired[r];
    uint64_t planned = p.planned_per_iter * (p.iterations_paired + unpaired);
    double share = planned ? (double)st.paired_groups / (double)planned : 0;
    dh_table_t *t;
    DH_CHECK(dh_table_new(&t, "dhelix_pairing", dh__pairing_cols,
                          (int)(sizeof(dh__pairing_cols) / sizeof(dh__pairing_cols[0]))));
    dh_status_t rc = DH_OK;
    char v[32];
#define DH__PMETA(k, fmtstr, val)                                                       \
    do {                                                                                \
        snprintf(v, sizeof v, fmtstr, val);                                             \
        DH_CHECK_GOTO(dh_table_meta(t, k, DH_CELL_NUM, v), rc, out);                    \
    } while (0)
    DH__PMETA("planned_groups", "%" PRIu64, planned);
    DH__PMETA("formed_groups", "%" PRIu64, st.paired_groups);
    DH__PMETA("formed_share", "%.3f", share > 1 ? 1.0 : share);
    DH__PMETA("iterations_paired", "%" PRIu64, p.iterations_paired);
    DH__PMETA("iterations_unpaired", "%" PRIu64, unpaired);
    DH__PMETA("agree_rounds", "%" PRIu64, st.agree_rounds);
    DH__PMETA("agree_no", "%" PRIu64, st.agree_no);
    DH__PMETA("agree_mean_us", "%" PRIu64,
              st.agree_waits ? st.agree_total_ns / st.agree_waits / 1000 : 0);
    DH__PMETA("agree_max_us", "%" PRIu64, st.agree_max_ns / 1000);
    DH__PMETA("agree_wait_us", "%" PRIu64, st.agree_total_ns / 1000);
    DH__PMETA("agree_wall_share", "%.4f",
              p.followed_s > 0 ? (double)st.agree_total_ns / 1e9 / p.followed_s : 0.0);
#undef DH__PMETA
    DH_CHECK_GOTO(dh__pairing_rows(t, &p), rc, out);
    rc = dh_table_render(t, fmt, out);
out:
    dh_table_free(t);
    return rc;
}

/* Adds a second table (render) to a rendered report: in JSON as the member key of the one
 * object (its own table object), in text after the first, a blank line between. */
static dh_status_t dh__append(dh_fmt_t fmt, dh_strbuf_t *out, const char *key,
                              dh_status_t (*render)(dh_fmt_t, dh_strbuf_t *))
{
    dh_strbuf_t nccl = DH_STRBUF_INIT;
    dh_status_t st = render(fmt, &nccl);
    if (st != DH_OK || nccl.len == 0) {
        dh_strbuf_free(&nccl);
        return st;
    }
    if (fmt == DH_FMT_JSON) {
        /* The report's object ends with "}" and a newline: reopen it for one more member. */
        size_t end = out->len;
        while (end > 0 && out->data[end - 1] == '\n')
            end--;
        if (end == 0 || out->data[end - 1] != '}') {
            dh_strbuf_free(&nccl);
            return DH_ERR_INTERNAL;
        }
        out->len = end - 1;
        out->data[out->len] = '\0';
        while (nccl.len > 0 && nccl.data[nccl.len - 1] == '\n')
            nccl.data[--nccl.len] = '\0';
        dh_strbuf_printf(out, ",\"%s\":", key);
        dh_strbuf_append(out, nccl.data, nccl.len);
        dh_strbuf_puts(out, "}\n");
    } else {
        dh_strbuf_puts(out, "\n");
        dh_strbuf_append(out, nccl.data, nccl.len);
    }
    dh_strbuf_free(&nccl);
    return dh_strbuf_status(out);
}

dh_status_t dh_stats_render(const dh_config_t *cfg, dh_fmt_t fmt, dh_strbuf_t *out)
{
    dh_table_t *t;
    dh_status_t st;
    DH_CHECK(dh_table_new(&t, "dhelix_stats", dh__stats_cols,
                          (int)(sizeof(dh__stats_cols) / sizeof(dh__stats_cols[0]))));
    DH_CHECK_GOTO(dh__stats_meta(t, cfg), st, out);
    DH_CHECK_GOTO(dh__stats_rows(t), st, out);
    DH_CHECK_GOTO(dh_table_render(t, fmt, out), st, out);
    DH_CHECK_GOTO(dh__append(fmt, out, "pairing", dh__pairing_render), st, out);
    st = dh__append(fmt, out, "nccl", dh__nccl_render);
out:
    dh_table_free(t);
    return st;
}

void dh_stats_emit(const dh_config_t *cfg)
{
    if (cfg->stats == DH_STATS_OFF)
        return;
    dh_strbuf_t text = DH_STRBUF_INIT, path = DH_STRBUF_INIT;
    dh_fmt_t fmt = cfg->stats == DH_STATS_JSON ? DH_FMT_JSON : DH_FMT_TEXT;
    dh_status_t st = dh_stats_render(cfg, fmt, &text);
    int fd = st == DH_OK ? dh_output_open(cfg->stats_file, &path) : -1;
    if (st != DH_OK)
        DH_ERROR(CORE, "DHELIX_STATS: cannot build the report: %s", dh_strerror(st));
    else if (fd < 0)
        DH_ERROR(CORE, "DHELIX_STATS_FILE=%s: cannot open '%s': %s", cfg->stats_file,
                 dh_strbuf_str(&path), strerror(errno));
    else if (dh_write_all(fd, dh_strbuf_str(&text), text.len) != DH_OK)
        DH_ERROR(CORE, "DHELIX_STATS: write failed: %s", strerror(errno));
    if (fd > 2)
        close(fd);
    dh_strbuf_free(&text);
    dh_strbuf_free(&path);
}
