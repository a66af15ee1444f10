/*
 * shim.c: what happens when libdhelix_shim.so is loaded and unloaded.
 *
 * Load: read the configuration, set logging up (which writes the configuration's
 * warnings), print the configuration when asked, say which mode runs, and make PyTorch
 * use the stream-ordered allocator (DESIGN.md invariant 5). Unload: the DHELIX_STATS
 * report. The wrappers themselves resolve their libraries lazily (hooks.c), so nothing
 * here depends on the order in which the dynamic linker runs constructors.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/config.h"
#include "common/log.h"
#include "hooks.h"
#include "scheduler.h"
#include "stats.h"

#define DH__ALLOC_CONF "PYTORCH_CUDA_ALLOC_CONF"
#define DH__ALLOC_CONF_NEW "PYTORCH_ALLOC_CONF"
#define DH__ALLOC_ASYNC "backend:cudaMallocAsync"

extern int dh__dlsym_ready; /* dlsym_entry.c */

/* pid of the process that loaded the shim; a forked child reports only its own calls. */
static pid_t dh__load_pid;

/* Logs the configuration table, one log line per row, for DHELIX_PRINT_CONFIG=1. */
static void dh__print_config(const dh_config_t *cfg)
{
    dh_strbuf_t text = DH_STRBUF_INIT;
    if (dh_config_render(cfg, DH_FMT_TEXT, &text) != DH_OK) {
        DH_ERROR(CONF, "DHELIX_PRINT_CONFIG: out of memory");
        dh_strbuf_free(&text);
        return;
    }
    char *save = NULL;
    for (char *line = strtok_r(text.data, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
        dh_log_line(line);
    dh_strbuf_free(&text);
}

/* Invariant 5: with PyTorch's caching allocator a freed block is reused with no CUDA call,
 * so a shim that reorders work could not see the reuse. The stream-ordered backend turns
 * every reuse into cudaMallocAsync/cudaFreeAsync. A user's own setting is kept. */
static void dh__alloc_conf(void)
{
    const char *mine = getenv(DH__ALLOC_CONF);
    const char *theirs = getenv(DH__ALLOC_CONF_NEW);
    const char *set = mine && *mine ? mine : theirs && *theirs ? theirs : NULL;
    if (set == NULL) {
        if (setenv(DH__ALLOC_CONF, DH__ALLOC_ASYNC, 1) == 0)
            DH_INFO(CORE, "set %s=%s (the stream-ordered allocator makes every memory reuse "
                    "visible to the shim)", DH__ALLOC_CONF, DH__ALLOC_ASYNC);
        else
            DH_WARN(CORE, "cannot set %s=%s", DH__ALLOC_CONF, DH__ALLOC_ASYNC);
        return;
    }
    if (strstr(set, DH__ALLOC_ASYNC) == NULL) {
        DH_INFO(CORE, "%s=%s kept; without %s the reordering modes will refuse to reorder",
                set == mine ? DH__ALLOC_CONF : DH__ALLOC_CONF_NEW, set, DH__ALLOC_ASYNC);
        dh_sched_set_reorder_allowed(0, "the framework chose an allocator other than the "
                                        "stream-ordered one (" DH__ALLOC_ASYNC "), whose "
                                        "memory reuse the shim cannot see");
    }
}

static void dh__atfork_child(void)
{
    dh_hook_reset_counts();
}

__attribute__((constructor)) static void dh__shim_load(void)
{
    const dh_config_t *cfg = dh_config();
    dh__load_pid = getpid();
    dh_log_init();
    if (cfg->print_config)
        dh__print_config(cfg);
    dh_sched_init();
    DH_INFO(CORE, "dhelix %s: mode=%s (%s %s), %d entry points wrapped, stats=%s", dh_version(),
            dh_mode_name(dh_sched_mode()), dh_mode_name(cfg->mode),
            dh_config_source_name(cfg->source[DH_CFG_MODE]), (int)DH_HOOK_COUNT,
            dh_stats_name(cfg->stats));
    dh__alloc_conf();
    /* From here on dlsym may hand out the shim's wrappers (instrumented code may run). */
    __atomic_store_n(&dh__dlsym_ready, 1, __ATOMIC_RELEASE);
    pthread_atfork(NULL, NULL, dh__atfork_child);
}

/* A forked child that made no calls of its own stays quiet instead of repeating a report
 * of zeros. */
static int dh__has_calls(void)
{
    for (int id = 0; id < DH_HOOK_COUNT; id++)
        if (dh_hook_calls((dh_hook_id_t)id) || dh_hook_nested((dh_hook_id_t)id))
            return 1;
    return 0;
}

__attribute__((destructor)) static void dh__shim_unload(void)
{
    const dh_config_t *cfg = dh_config();
    if (getpid() == dh__load_pid || dh__has_calls())
        dh_stats_emit(cfg);
}
