/* stats.c: the DHELIX_STATS report, through the one table emitter. */
#define _GNU_SOURCE
#include "stats.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "hooks.h"
#include "scheduler.h"

static const dh_col_t dh__stats_cols[] = {
    {"api", "API", DH_CELL_STR},
    {"lib", "LIB", DH_CELL_STR},
    {"calls", "CALLS", DH_CELL_NUM},
    {"nested", "NESTED", DH_CELL_NUM},
};

static const char *const dh__op_names[] = {
#define DH__OP_NAME(id, cls) #id,
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
    DH__META_NUM("cross_strand_barriers", st.cross_strand_barriers);
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
    /* The mode that ran: the deferring modes, or passthrough for anything else. */
    int deferring = cfg->mode == DH_MODE_STRESS || cfg->mode == DH_MODE_STRANDS;
    DH_CHECK(dh_table_meta(t, "mode", DH_CELL_STR,
                           dh_mode_name(deferring ? cfg->mode : DH_MODE_PASSTHROUGH)));
    DH_CHECK(dh_table_meta(t, "requested_mode", DH_CELL_STR, dh_mode_name(cfg->mode)));
    DH_CHECK(dh_table_meta(t, "rank", DH_CELL_STR, dh_log_rank()));
    DH_CHECK(dh_table_meta(t, "host", DH_CELL_STR, host));
    DH_CHECK(dh_table_meta(t, "pid", DH_CELL_NUM, pid));
    return deferring ? dh__sched_meta(t) : DH_OK;
}

static dh_status_t dh__stats_rows(dh_table_t *t)
{
    for (int id = 0; id < DH_HOOK_COUNT; id++) {
        char calls[24], nested[24];
        snprintf(calls, sizeof(calls), "%" PRIu64, dh_hook_calls((dh_hook_id_t)id));
        snprintf(nested, sizeof(nested), "%" PRIu64, dh_hook_nested((dh_hook_id_t)id));
        const char *cells[] = {dh_hook_name((dh_hook_id_t)id),
                               dh_hook_lib_name(dh_hook_lib((dh_hook_id_t)id)), calls, nested};
        DH_CHECK(dh_table_row(t, cells));
    }
    return DH_OK;
}

dh_status_t dh_stats_render(const dh_config_t *cfg, dh_fmt_t fmt, dh_strbuf_t *out)
{
    dh_table_t *t;
    dh_status_t st;
    DH_CHECK(dh_table_new(&t, "dhelix_stats", dh__stats_cols,
                          (int)(sizeof(dh__stats_cols) / sizeof(dh__stats_cols[0]))));
    DH_CHECK_GOTO(dh__stats_meta(t, cfg), st, out);
    DH_CHECK_GOTO(dh__stats_rows(t), st, out);
    st = dh_table_render(t, fmt, out);
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
