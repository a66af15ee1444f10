/*
 * stats.h: the shim's exit report (DHELIX_STATS): calls of each intercepted API.
 */
#ifndef DH_STATS_H
#define DH_STATS_H

#include "common/config.h"
#include "common/status.h"
#include "common/strbuf.h"
#include "common/table.h"

/* Appends the report in fmt (DH_FMT_TEXT table or DH_FMT_JSON object, see table.h) to
 * out: one row per entry point and metadata (version, mode, requested_mode, rank, host,
 * pid). calls: the program's calls forwarded to the real API; nested: calls made while a
 * wrapper was already running on the thread (a library calling a wrapped API inside);
 * a call with no real definition to forward to is in neither. The JSON form is
 *   {"table":"dhelix_stats","meta":{...},"rows":[{"api":"cudaMalloc","lib":"cudart",
 *    "calls":3,"nested":0},...]}
 * and, when the process made NCCL communicators, one row per communicator (its role, its
 * policy, operations, bytes, how many the dispatcher replayed, interleaved or pinned,
 * errors): in JSON as the member "nccl" of the same object ({"table":"dhelix_nccl",...}),
 * in text as a second table after the first.
 * Errors: DH_ERR_NOMEM. Thread-safe; counts are a relaxed snapshot. */
dh_status_t dh_stats_render(const dh_config_t *cfg, dh_fmt_t fmt, dh_strbuf_t *out);

/* Writes the report that cfg->stats asks for to cfg->stats_file (stderr by default) in
 * one write; does nothing when stats are off. Failures are logged, not returned. */
void dh_stats_emit(const dh_config_t *cfg);

#endif
