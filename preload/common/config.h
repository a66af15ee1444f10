/*
 * config.h: every DHELIX_* environment variable, declared once.
 *
 * DH_CONFIG_LIST is the only declaration of a variable: it generates the fields of
 * dh_config_t, the descriptor table that the parser, DHELIX_PRINT_CONFIG, `dhelix config`
 * and docs/configuration.md are made from. Defaults are written as the text a user would
 * set and go through the same parser (a test checks they parse cleanly).
 *
 * A variable that is unset or set to the empty string takes its default. A value that
 * does not parse or is out of range takes the default, and the configuration records one
 * warning for it (logging writes the warnings once, at its setup). DHELIX_* names that
 * are not in the table are also reported, since they are most likely typos.
 */
#ifndef DH_CONFIG_H
#define DH_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "common/log.h"
#include "common/status.h"
#include "common/strbuf.h"
#include "common/table.h"

/* X(id, name) */
#define DH_MODE_LIST(X)              \
    X(PASSTHROUGH, "passthrough")    \
    X(PROFILE, "profile")            \
    X(PLAN, "plan")                  \
    X(STRESS, "stress")              \
    X(STRANDS, "test-strands")       \
    X(AUTO, "auto")

typedef enum dh_mode {
#define DH__MODE_ENUM(id, name) DH_MODE_##id,
    DH_MODE_LIST(DH__MODE_ENUM)
#undef DH__MODE_ENUM
    DH_MODE_COUNT
} dh_mode_t;

/* X(id, name): DHELIX_STATS values. */
#define DH_STATS_LIST(X) \
    X(OFF, "0")          \
    X(TABLE, "1")        \
    X(JSON, "json")

typedef enum dh_stats {
#define DH__STATS_ENUM(id, name) DH_STATS_##id,
    DH_STATS_LIST(DH__STATS_ENUM)
#undef DH__STATS_ENUM
    DH_STATS_COUNT
} dh_stats_t;

/* Choice lists as "a|b|c|" string literals, built from the lists above. */
#define DH__CHOICE(id, name) name "|"
#define DH_MODE_CHOICES DH_MODE_LIST(DH__CHOICE)
#define DH_STATS_CHOICES DH_STATS_LIST(DH__CHOICE)
#define DH_LOG_LEVEL_CHOICES DH_LOG_LEVEL_LIST(DH__CHOICE)
#define DH_LOG_SUBSYS_CHOICES "all|" DH_LOG_SUBSYS_LIST(DH__CHOICE)

/* Value kinds; each has a field type and a parser in config.c. */
typedef enum dh_cfg_kind {
    DH_CFG_ENUM,   /* int: index into the "a|b|" choices; names are case-insensitive */
    DH_CFG_BOOL,   /* int: 0/1 (also false/true, no/yes, off/on) */
    DH_CFG_INT,    /* int64_t within [min, max] */
    DH_CFG_BYTES,  /* int64_t within [min, max]; suffixes K, M, G, T (powers of 1024) */
    DH_CFG_STR,    /* char[DH_CFG_STR_MAX]: free text, checked by later issues */
    DH_CFG_PATH,   /* char[DH_CFG_STR_MAX]: "", stderr, stdout or a file with %h, %p, %% */
    DH_CFG_MASK    /* uint32_t: DHELIX_LOG_SUBSYS list as a subsystem bit mask */
} dh_cfg_kind_t;

#define DH_CFG_STR_MAX 4096
#define DH__CFG_FIELD_ENUM(f) int f;
#define DH__CFG_FIELD_BOOL(f) int f;
#define DH__CFG_FIELD_INT(f) int64_t f;
#define DH__CFG_FIELD_BYTES(f) int64_t f;
#define DH__CFG_FIELD_STR(f) char f[DH_CFG_STR_MAX];
#define DH__CFG_FIELD_PATH(f) char f[DH_CFG_STR_MAX];
#define DH__CFG_FIELD_MASK(f) uint32_t f;


/* X(id, field, kind, default, choices or hint, min, max, description)
 * choices: ENUM and MASK "a|b|" lists; for STR and PATH a hint for the docs' Values
 * column; NULL otherwise. min and max are used by INT and BYTES only. */
#define DH_CONFIG_LIST(X)                                                                   \
    X(MODE, mode, ENUM, "passthrough", DH_MODE_CHOICES, 0, 0,                               \
      "What the shim does with intercepted calls. passthrough forwards each call at once "  \
      "and counts it. profile runs the program unchanged in order while recording every "   \
      "operation's signature, thread, stream and device time to `DHELIX_PROFILE`, the "     \
      "input of `dhelix plan`. plan executes the Strand Interleaving plan in "              \
      "`DHELIX_PLAN`. stress defers every operation it legally can and re-issues "          \
      "independent streams in a seeded random order (a test of exactness). test-strands "  \
      "runs two strands assigned by issuing-thread phases without a plan: a test-only "   \
      "switch for single-process tests, not exact on multi-rank jobs (no agreement "       \
      "between ranks; use plan or auto). auto "                                              \
      "profiles the first iterations, plans in the process, agrees with the other ranks " \
      "on the plan and the iteration to switch at, then runs it (and caches it in "      \
      "`DHELIX_PLAN_CACHE`). The default is plan when `DHELIX_PLAN` is set.")                                         \
    X(PLAN, plan, STR, "", "file path", 0, 0,                                               \
      "Strand Interleaving plan (JSON, docs/plan-format.md) that plan mode executes; "      \
      "setting it makes plan the default mode. A plan that cannot be used (bad file, "      \
      "another parallel layout, another program) is reported in one line and the job runs " \
      "in passthrough.")                                                                    \
    X(PROFILE, profile, PATH, "dhelix-profile.%r.json",                                     \
      "file path; `%h` host, `%p` pid, `%r` rank", 0, 0,                                    \
      "File that profile mode writes at exit (docs/plan-format.md), with a Chrome trace "   \
      "beside it (`.trace.json`).")                                                         \
    X(PLAN_CACHE, plan_cache, PATH, "", "empty (no cache) or a directory", 0, 0,             \
      "Auto mode: where plans are kept, one file per program (its command line), world "   \
      "size, `DHELIX_LAYOUT` and device; a start that finds its plan there skips "           \
      "profiling and switches at the first iteration.")                                    \
    X(AUTO_TIMEOUT_MS, auto_timeout_ms, INT, "60000", NULL, 100, 3600000,                   \
      "Auto mode: longest wait, in milliseconds, for every rank's profile at rank 0 and "   \
      "for the plan at the other ranks (on the shim's own thread, not the job's); past it " \
      "no rank uses a plan, one warning.")                                                  \
    X(AUTO_MIN_GAIN, auto_min_gain, INT, "1", NULL, 0, 1000,                                \
      "Auto mode: percent of speedup a plan must promise to be used (1: at least 1.01x), " \
      "and then show on rank 0's measurement over `DHELIX_AUTO_MEASURE_ITERS` iterations " \
      "to be kept; a plan that promises less is not used, one that shows less is left "    \
      "at one iteration boundary on every rank, and the log says so. Either way every "    \
      "rank runs passthrough from there.")                                                  \
    X(AUTO_MEASURE_ITERS, auto_measure_iters, INT, "2", NULL, 0, 64,                        \
      "Auto mode: iterations with Strand Interleaving that rank 0 times (device time from " \
      "one iteration boundary to the next, after the tracker's checking iteration) "       \
      "against as many program-order iterations before the switch; at the next boundary " \
      "every rank goes back to program order (passthrough) when the speedup is not above " \
      "`DHELIX_AUTO_MIN_GAIN`. 0: not measured. Not measured after a switch at the first " \
      "iteration (a cached plan).")                                                         \
    X(AUTO_SWITCH_WAIT_MS, auto_switch_wait_ms, INT, "3000", NULL, 0, 600000,               \
      "Auto mode: longest wait, in milliseconds, of each rank for the plan at the switch "  \
      "boundary (the iteration after the one at which its recording stopped), so that "    \
      "every rank switches there however fast its host plans; past it (a rank whose "      \
      "recording stops later, one that diverged while profiling) the ranks switch at the " \
      "first iteration at which all hold the plan. 0: no wait.")                            \
    X(PROFILE_OPS, profile_ops, INT, "4000000", NULL, 1000, 10000000,                       \
      "Most operations profile mode records if no iteration has repeated by then (it stops " \
      "by itself once one has); later ones run unrecorded.")                                 \
    X(PROFILE_STOP, profile_stop, BOOL, "1", NULL, 0, 0,                                    \
      "Whether profile mode stops recording once an iteration has repeated (what the "       \
      "planner needs); 0 records until exit or DHELIX_PROFILE_OPS, for a profile to cut or "  \
      "inspect.")                                                                           \
    X(COMM_KERNELS, comm_kernels, STR, "wl_emu_comm*",                                      \
      "comma list of kernel-name globs", 0, 0,                                              \
      "Kernels that stand for communication (an emulated collective, a custom all-reduce "  \
      "kernel): profiles and plans count them as communication, so the planner pairs them " \
      "with the other strand's compute.")                                                   \
    X(LOG, log_level, ENUM, "warn", DH_LOG_LEVEL_CHOICES, 0, 0,                             \
      "Least severe message written: error, warn, info or debug.")                          \
    X(LOG_SUBSYS, log_subsys, MASK, "all", DH_LOG_SUBSYS_CHOICES, 0, 0,                     \
      "Subsystems whose info and debug messages are written (errors and warnings always "   \
      "are): all, or a comma list.")                                                        \
    X(LOG_FILE, log_file, PATH, "", "empty (stderr), stderr, stdout or a file path; "       \
      "`%h` host, `%p` pid", 0, 0,                                                          \
      "Where log lines go; a file is appended to.")                                         \
    X(PRINT_CONFIG, print_config, BOOL, "0", NULL, 0, 0,                                    \
      "1: when the shim loads, log every `DHELIX_*` variable with the value in effect and " \
      "where it came from (default, env).")                                                 \
    X(STATS, stats, ENUM, "0", DH_STATS_CHOICES, 0, 0,                                      \
      "At exit, the number of calls of each intercepted API: 0 off, 1 as an aligned "       \
      "table, json as one JSON object.")                                                    \
    X(STATS_FILE, stats_file, PATH, "", "empty (stderr), stderr, stdout or a file path; "   \
      "`%h` host, `%p` pid", 0, 0,                                                          \
      "Where `DHELIX_STATS` output goes; a file is appended to.")                           \
    X(AGREE_TIMEOUT_MS, agree_timeout_ms, INT, "10000", NULL, 10, 600000,                  \
      "Longest wait, in milliseconds, for the ranks' decision on a pair of micro-batches "  \
      "before a rank issues it in plan order (twice that for the agreement channel to "     \
      "open); past it every rank runs program order for the rest of the job, one warning.") \
    X(AGREE_ADDR, agree_addr, STR, "", "empty, or host:port of rank 0's agreement channel", \
      0, 0,                                                                                 \
      "Where the ranks' agreement channel listens (rank 0). Empty: MASTER_ADDR and "        \
      "MASTER_PORT + DHELIX_AGREE_PORT_OFFSET (torchrun), else the loopback and a port "     \
      "from the launcher's job id when every rank runs on one host (mpirun, srun).")        \
    X(AGREE_PORT_OFFSET, agree_port_offset, INT, "17", NULL, 1, 1000,                        \
      "Added to MASTER_PORT for the agreement channel's port (torchrun's store keeps "      \
      "MASTER_PORT itself).")                                                               \
    X(SEED, seed, INT, "0", NULL, 0, 4294967295LL,                                          \
      "Seed of stress mode's random choice among legal reorderings; one seed, one order.")  \
    X(GROUPS, groups, STR, "all",                                                           \
      "comma list of terms: all, none, a role (tp, cp, dp, pp, ep, or joined: cp+dp), "     \
      "size=N (also <, <=, >, >=), a commName glob (TENSOR_MODEL_PARALLEL*); ! pins", 0, 0, \
      "Which NCCL communicators' operations may be interleaved with the other strand's "    \
      "work; the others are pinned (kept in program order, never beside the other "         \
      "strand). Terms are read left to right and the last one that matches a "              \
      "communicator decides: a plain term interleaves it, a term starting with `!` pins "   \
      "it; one no term matches is pinned, unless the first term starts with `!` (then the " \
      "list refines all). A role matches a communicator whose members differ in exactly "   \
      "those dimensions (see `DHELIX_LAYOUT`); `role:` and `name:` prefixes force the "     \
      "reading. Examples: `tp,cp`, `all,!dp`, `!TENSOR_MODEL_PARALLEL*`, `size<=8`. "       \
      "`dh_group_set_enabled(comm, on)` overrides it per communicator at run time. Every "  \
      "decision is logged at info level (subsystem nccl); a value that does not parse "     \
      "means all, with a warning.")                                                         \
    X(LAYOUT, layout, STR, "", "empty, or sizes such as tp=8,cp=1,pp=2,dp=4 (ep=N too)",    \
      0, 0,                                                                                 \
      "Parallel layout of the job in Megatron's rank order (tensor-parallel rank fastest, " \
      "then context, data, pipeline; expert groups carved from the context x data index), " \
      "which tells each communicator's role from its members' global ranks (learned by "    \
      "one all-gather over it when it is created) or from its size and this process's "     \
      "rank in it; without it, roles come from `ncclConfig_t.commName` (Megatron's group "  \
      "names). dp may be left out when the launcher gives the world size. A value that "    \
      "does not parse or does not match the world size is ignored, with a warning.")        \
    X(SHARE_MEM, share_mem, BOOL, "1", NULL, 0, 0,                                          \
      "Whether an allocation may take back memory whose cudaFreeAsync the shim captured "   \
      "but has not issued yet (in the strand's own order, or the other strand's behind a "  \
      "cross-strand barrier; scheduler/mem/mempool.h). 0 gives every allocation made while "    \
      "frees are held fresh memory, as before issue 15.")                                   \
    X(MAX_QUEUED_OPS, max_queued_ops, INT, "4096", NULL, 16, 1048576,                       \
      "Most operations held back for pairing (in groups the plan has not completed yet); "  \
      "past it they are issued without pairing. The program also waits while more than "   \
      "this many operations are not issued yet.")                                           \
    X(MAX_DEFERRED_FREE_BYTES, max_deferred_free_bytes, BYTES, "2G", NULL, 0,               \
      17592186044416LL,                                                                     \
      "Most device memory held by deferred frees in groups the plan has not completed yet " \
      "(held back for pairing); past it they are issued without pairing. The program also " \
      "waits while more than this is held by deferred frees in all.")                       \
    X(MAX_UNISSUED_FREE_BYTES, max_unissued_free_bytes, BYTES, "256M", NULL, 0,             \
      17592186044416LL,                                                                     \
      "Most device memory held by deferred frees the dispatcher may already issue (their "  \
      "group is complete) but has not yet; past it the program waits for the dispatcher. " \
      "Lower trades host waiting for device memory; the order of work does not change. "  \
      "In plan mode an allocation of fresh memory also waits for them wherever they "      \
      "would raise the device's peak past the plan's count (stats mem_fresh_waits).")      \
    X(MAX_EXTRA_MEM, max_extra_mem, STR, "", "empty, none, a size (512M) or a percent (3%)", \
      0, 0,                                                                                 \
      "Most extra peak device memory pairing may cost over the baseline: a size, or a "    \
      "percentage of the baseline's peak. `dhelix plan` takes it as its default "            \
      "`--max-extra-mem` (a percentage of the profile's peak); at run time it replaces the " \
      "plan's `max_extra_mem_bytes` (a percentage of the most memory the program held in " \
      "its own order so far). Past it a rank votes no on the pair it is capturing, so every " \
      "rank runs the rest of that iteration in program order (stats mem_bound_vetoes). "     \
      "Empty: the plan's bound; none: no bound at run time.")                              \
    X(TEST_BREAK, test_break, STR, "", "empty or a comma list of rule names", 0, 0,         \
      "Test only: disables the named deep copies or drain rules so tests can show each is " \
      "load-bearing (see scheduler/ops/breaks.h). Never set it in production.")                 \
    X(TEST_AGREE_SILENT, test_agree_silent, INT, "-1", NULL, -1, 1000000,                   \
      "Test only: the rank that stops answering the ranks' agreement after its second "     \
      "vote (-1 none), keeping its connection open, as a stuck peer would; in auto mode it " \
      "also sends rank 0 nothing in the profile exchange. Never set it in production.")     \
    X(TEST_DISPATCH_JITTER, test_dispatch_jitter, INT, "0", NULL, 0, 1000000,               \
      "Test only: the dispatcher sleeps a random 0..N microseconds (seeded by the process " \
      "id) before each round, so that ranks fall behind at different points; what is "     \
      "issued, and in what order, must not change. Never set it in production.")

typedef enum dh_cfg_id {
#define DH__CFG_ID(id, field, kind, def, choices, min, max, desc) DH_CFG_##id,
    DH_CONFIG_LIST(DH__CFG_ID)
#undef DH__CFG_ID
    DH_CFG_COUNT
} dh_cfg_id_t;

/* Where a value in effect came from. */
typedef enum dh_cfg_source {
    DH_SRC_DEFAULT,   /* unset or empty */
    DH_SRC_ENV,       /* parsed from the environment */
    DH_SRC_INVALID,   /* set but invalid: the default, with a warning */
    DH_SRC_DERIVED    /* a default that follows from another variable */
} dh_cfg_source_t;

#define DH_CFG_WARN_MAX (DH_CFG_COUNT + 5)
#define DH_CFG_WARN_LEN 320

typedef struct dh_config {
#define DH__CFG_FIELD(id, field, kind, def, choices, min, max, desc) DH__CFG_FIELD_##kind(field)
    DH_CONFIG_LIST(DH__CFG_FIELD)
#undef DH__CFG_FIELD
    dh_cfg_source_t source[DH_CFG_COUNT];
    int nwarnings;
    char warnings[DH_CFG_WARN_MAX][DH_CFG_WARN_LEN];
} dh_config_t;

typedef struct dh_cfg_desc {
    const char *name;       /* "DHELIX_MODE" */
    dh_cfg_kind_t kind;
    const char *def;        /* default as text */
    const char *choices;    /* see DH_CONFIG_LIST */
    int64_t min, max;
    const char *desc;
    size_t offset;          /* of the field in dh_config_t */
} dh_cfg_desc_t;

/* The process's configuration, parsed from the environment on the first call
 * (pthread_once); immutable afterwards. Never NULL. Thread-safe. */
const dh_config_t *dh_config(void);

/* Parses envp ("NAME=value" strings, NULL-terminated, as environ) into *cfg, which needs
 * no initialisation. Always fills every field; bad values become defaults with a
 * warning in cfg->warnings. Errors: DH_ERR_INTERNAL if a built-in default does not parse
 * (a bug the tests catch). Thread-safe (touches only *cfg). */
dh_status_t dh_config_parse(dh_config_t *cfg, char *const *envp);

/* The descriptor of variable id, or NULL outside the table. */
const dh_cfg_desc_t *dh_config_desc(dh_cfg_id_t id);

/* Appends the value of id in cfg as text a user could set ("debug", "2G", "hook,plan"). */
dh_status_t dh_config_value_str(const dh_config_t *cfg, dh_cfg_id_t id, dh_strbuf_t *out);

/* "default", "env", "default (invalid env)", "derived". */
const char *dh_config_source_name(dh_cfg_source_t src);

/* Renders the whole table through the one emitter (table.h):
 *   DH_FMT_TEXT: variable, value in effect, source, default (for people);
 *   DH_FMT_JSON: the same plus type, values and description (for programs);
 *   DH_FMT_MARKDOWN: the documentation section (docs/configuration.md): defaults, types,
 *     values and descriptions; cfg is not used and may be NULL.
 * Errors: DH_ERR_NOMEM, DH_ERR_INVALID. */
dh_status_t dh_config_render(const dh_config_t *cfg, dh_fmt_t fmt, dh_strbuf_t *out);

/* Names of the enum values, "?" outside the lists. */
const char *dh_mode_name(dh_mode_t mode);
const char *dh_stats_name(dh_stats_t stats);

#endif
