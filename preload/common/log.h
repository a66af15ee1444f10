/*
 * log.h: levelled, per-subsystem logging for the shim, the planner and the CLI.
 *
 * Configuration (read once, on the first message or dh_log_init): DHELIX_LOG sets the
 * least severe level written (default warn); DHELIX_LOG_SUBSYS selects the subsystems
 * whose info and debug messages are written (errors and warnings are always written);
 * DHELIX_LOG_FILE names the destination (default stderr; %h host, %p pid).
 *
 * Every line is written with one write() and looks like
 *   dhelix[<rank> <host>:<pid>:<tid>] WARN conf: <message>
 * where rank comes from RANK, OMPI_COMM_WORLD_RANK or PMI_RANK ('-' when none is set).
 *
 * Cost: a disabled message costs one atomic load and a compare; the arguments are not
 * evaluated. All functions are thread-safe unless a comment says otherwise.
 */
#ifndef DH_LOG_H
#define DH_LOG_H

#include <stdatomic.h>
#include <stdint.h>

#include "common/status.h"
#include "common/strbuf.h"

/* X(id, name): DHELIX_LOG values, most severe first. */
#define DH_LOG_LEVEL_LIST(X) \
    X(ERROR, "error")        \
    X(WARN, "warn")          \
    X(INFO, "info")          \
    X(DEBUG, "debug")

/* X(id, name): DHELIX_LOG_SUBSYS names. At most 24 (they share a word with the level). */
#define DH_LOG_SUBSYS_LIST(X) \
    X(CORE, "core")           \
    X(CONF, "conf")           \
    X(HOOK, "hook")           \
    X(SCHED, "sched")         \
    X(PLAN, "plan")           \
    X(NCCL, "nccl")           \
    X(PROF, "prof")           \
    X(MEM, "mem")

typedef enum dh_log_level {
#define DH__LOG_LEVEL_ENUM(id, name) DH_LOG_##id,
    DH_LOG_LEVEL_LIST(DH__LOG_LEVEL_ENUM)
#undef DH__LOG_LEVEL_ENUM
    DH_LOG_LEVEL_COUNT
} dh_log_level_t;

typedef enum dh_log_subsys {
#define DH__LOG_SUBSYS_ENUM(id, name) DH_SUB_##id,
    DH_LOG_SUBSYS_LIST(DH__LOG_SUBSYS_ENUM)
#undef DH__LOG_SUBSYS_ENUM
    DH_SUB_COUNT
} dh_log_subsys_t;

#define DH_LOG_SUBSYS_ALL ((1u << DH_SUB_COUNT) - 1u)

/* The filter word: bit 31 set once logging is set up, bits 0-3 the level, bits 8.. the
 * subsystem mask. One word so that the hot check is one load. */
extern _Atomic uint32_t dh__log_word;
#define DH__LOG_READY 0x80000000u
#define DH__LOG_MASK_SHIFT 8

/* Slow path of dh_log_enabled: sets logging up from dh_config() once and returns the
 * filter word (without DH__LOG_READY while logging cannot be set up yet, because the
 * calling thread is itself reading the configuration). */
uint32_t dh__log_setup(void);

/* Nonzero when a message of level lvl from subsystem sub would be written. */
static inline int dh_log_enabled(dh_log_level_t lvl, dh_log_subsys_t sub)
{
    uint32_t w = atomic_load_explicit(&dh__log_word, memory_order_acquire);
    if (__builtin_expect(!(w & DH__LOG_READY), 0)) {
        w = dh__log_setup();
        if (!(w & DH__LOG_READY))
            return 0;
    }
    if ((uint32_t)lvl > (w & 0xfu))
        return 0;
    return lvl <= DH_LOG_WARN || ((w >> DH__LOG_MASK_SHIFT) & (1u << sub)) != 0;
}

/* Formats and writes one line (see above); callers go through the macros, which check
 * dh_log_enabled first. Messages longer than a line buffer (2 KiB) are cut with "...". */
void dh__log(dh_log_level_t lvl, dh_log_subsys_t sub, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define DH_LOG(lvl, sub, ...)                                       \
    do {                                                            \
        if (dh_log_enabled((lvl), DH_SUB_##sub))                    \
            dh__log((lvl), DH_SUB_##sub, __VA_ARGS__);              \
    } while (0)
#define DH_ERROR(sub, ...) DH_LOG(DH_LOG_ERROR, sub, __VA_ARGS__)
#define DH_WARN(sub, ...) DH_LOG(DH_LOG_WARN, sub, __VA_ARGS__)
#define DH_INFO(sub, ...) DH_LOG(DH_LOG_INFO, sub, __VA_ARGS__)
#define DH_DEBUG(sub, ...) DH_LOG(DH_LOG_DEBUG, sub, __VA_ARGS__)

/* Warns the first time this statement runs in the process, never again (per call site). */
#define DH_WARN_ONCE(sub, ...)                                                     \
    do {                                                                           \
        static atomic_flag dh__warned_ = ATOMIC_FLAG_INIT;                         \
        if (!atomic_flag_test_and_set_explicit(&dh__warned_, memory_order_relaxed)) \
            DH_WARN(sub, __VA_ARGS__);                                             \
    } while (0)

/* Sets logging up now (normally done by the first message): reads the configuration,
 * opens DHELIX_LOG_FILE, and writes the configuration's warnings once. Idempotent. */
void dh_log_init(void);

/* Writes text as one line with the usual prefix whatever the level (for output the user
 * asked for, such as DHELIX_PRINT_CONFIG). */
void dh_log_line(const char *text);

/* Level and subsystem names ("warn", "hook"); "?" outside the lists. */
const char *dh_log_level_name(dh_log_level_t lvl);
const char *dh_log_subsys_name(dh_log_subsys_t sub);

/* Parses a DHELIX_LOG_SUBSYS value ("all" or "hook,sched", spaces around names allowed)
 * into a bit mask. Errors: DH_ERR_PARSE with the first unknown name copied to bad
 * (bad_len bytes, may be 0). */
dh_status_t dh_log_parse_subsys(const char *list, uint32_t *mask, char *bad, size_t bad_len);

/* The process's global rank as the launcher gives it (RANK, OMPI_COMM_WORLD_RANK, PMI_RANK,
 * SLURM_PROCID, VGPU_RANK), 0 when none says. */
int dh_launcher_rank(void);

/* Expands %h (host name up to its first dot), %p (pid), %r (launcher rank) and %% in pattern, appending the
 * result to out. Errors: DH_ERR_PARSE for any other '%' sequence, DH_ERR_NOMEM. */
dh_status_t dh_path_expand(const char *pattern, const char *host, long pid, dh_strbuf_t *out);
/* dh_path_expand with this process's host and pid. */
dh_status_t dh_path_expand_self(const char *pattern, dh_strbuf_t *out);

/* Opens an output named by a DHELIX_*_FILE value: "" or "stderr" -> 2, "stdout" -> 1,
 * anything else is expanded (dh_path_expand_self) and opened for appending (created 0644,
 * close-on-exec). Returns the descriptor, or -1 with errno set (EINVAL for a bad pattern);
 * *path receives the expanded name when non-NULL. */
int dh_output_open(const char *value, dh_strbuf_t *path);

/* Writes all len bytes to fd, retrying on EINTR and short writes. Errors: DH_ERR_IO. */
dh_status_t dh_write_all(int fd, const char *buf, size_t len);

/* The rank shown in log lines ("-" when unknown); static string, thread-safe. */
const char *dh_log_rank(void);

struct dh_config;
/* For tests and for the constructor: (re)applies level, subsystems, destination and the
 * identity (host, rank from the environment) from cfg. Not safe while other threads log. */
dh_status_t dh__log_apply(const struct dh_config *cfg);

/* While a thread is inside (depth > 0), dh__log_setup does not read the configuration
 * (config.c holds it while parsing, so that a message there cannot recurse into it). */
void dh__log_quiet(int delta);

#endif
