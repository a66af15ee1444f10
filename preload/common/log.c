/* log.c: the log sink, its one-time setup and the helpers for DHELIX_*_FILE outputs. */
#define _GNU_SOURCE
#include "common/log.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/config.h"

#define DH_TLS __thread __attribute__((tls_model("initial-exec")))
#define DH__LINE_MAX 2048

_Atomic uint32_t dh__log_word;

/* Where lines go. Written by dh__log_apply only (setup, or tests before they start
 * threads); read by every writer. */
static _Atomic int dh__log_fd = 2;
/* Identity shown in the prefix; written by dh__log_apply before it publishes the filter
 * word with a release store, read after the acquire load in dh_log_enabled. */
static char dh__host[64] = "?";
static char dh__rank[24] = "-";

static DH_TLS long dh__tid;          /* cached gettid(); reset in a forked child */
static DH_TLS int dh__quiet_depth;   /* see dh__log_quiet */
static pthread_once_t dh__log_once_ctl = PTHREAD_ONCE_INIT;

static const char *const dh__level_upper[] = {
#define DH__LEVEL_UPPER(id, name) #id,
    DH_LOG_LEVEL_LIST(DH__LEVEL_UPPER)
#undef DH__LEVEL_UPPER
};
static const char *const dh__level_names[] = {
#define DH__LEVEL_NAME(id, name) name,
    DH_LOG_LEVEL_LIST(DH__LEVEL_NAME)
#undef DH__LEVEL_NAME
};
static const char *const dh__subsys_names[] = {
#define DH__SUBSYS_NAME(id, name) name,
    DH_LOG_SUBSYS_LIST(DH__SUBSYS_NAME)
#undef DH__SUBSYS_NAME
};

_Static_assert(DH_SUB_COUNT <= 24, "subsystem mask must fit in the filter word");

const char *dh_log_level_name(dh_log_level_t lvl)
{
    return (unsigned)lvl < DH_LOG_LEVEL_COUNT ? dh__level_names[lvl] : "?";
}

const char *dh_log_subsys_name(dh_log_subsys_t sub)
{
    return (unsigned)sub < DH_SUB_COUNT ? dh__subsys_names[sub] : "?";
}

const char *dh_log_rank(void)
{
    return dh__rank;
}

void dh__log_quiet(int delta)
{
    dh__quiet_depth += delta;
}

/* ---- identity ---- */

static void dh__hostname(char *out, size_t n)
{
    if (gethostname(out, n) != 0)
        snprintf(out, n, "unknown");
    out[n - 1] = '\0';
    char *dot = strchr(out, '.');
    if (dot)
        *dot = '\0';
}

/* A rank variable counts only when it is a plain non-negative number. */
static int dh__is_rank(const char *s)
{
    if (s == NULL || *s == '\0' || strlen(s) > 10)
        return 0;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s))
            return 0;
    return 1;
}

static void dh__read_rank(char *out, size_t n)
{
    static const char *const vars[] = {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        const char *v = getenv(vars[i]);
        if (dh__is_rank(v)) {
            snprintf(out, n, "%s", v);
            return;
        }
    }
    snprintf(out, n, "-");
}

static long dh__gettid(void)
{
    if (dh__tid == 0)
        dh__tid = (long)gettid();
    return dh__tid;
}

static void dh__atfork_child(void)
{
    dh__tid = 0;
}

/* ---- outputs ---- */

dh_status_t dh_write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return DH_ERR_IO;
        buf += n;
        len -= (size_t)n;
    }
    return DH_OK;
}

int dh_launcher_rank(void)
{
    static const char *const names[] = {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK",
                                        "SLURM_PROCID", "VGPU_RANK"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *v = getenv(names[i]);
        char *end;
        long r = v && *v ? strtol(v, &end, 10) : -1;
        if (v && *v && *end == '\0' && r >= 0 && r < (1L << 24))
            return (int)r;
    }
    return 0;
}

dh_status_t dh_path_expand(const char *pattern, const char *host, long pid, dh_strbuf_t *out)
{
    for (const char *p = pattern; *p; p++) {
        if (*p != '%') {
            dh_strbuf_append(out, p, 1);
            continue;
        }
        switch (p[1]) {
        case 'h': dh_strbuf_puts(out, host); break;
        case 'p': dh_strbuf_printf(out, "%ld", pid); break;
        case 'r': dh_strbuf_printf(out, "%d", dh_launcher_rank()); break;
        case '%': dh_strbuf_puts(out, "%"); break;
        default: return DH_ERR_PARSE;
        }
        p++;
    }
    return dh_strbuf_status(out);
}

dh_status_t dh_path_expand_self(const char *pattern, dh_strbuf_t *out)
{
    char host[64];
    dh__hostname(host, sizeof(host));
    return dh_path_expand(pattern, host, (long)getpid(), out);
}

int dh_output_open(const char *value, dh_strbuf_t *path)
{
    if (value[0] == '\0' || strcmp(value, "stderr") == 0)
        return 2;
    if (strcmp(value, "stdout") == 0)
        return 1;
    dh_strbuf_t tmp = DH_STRBUF_INIT;
    dh_strbuf_t *p = path ? path : &tmp;
    int fd = -1;
    dh_status_t st = dh_path_expand_self(value, p);
    if (st == DH_OK)
        fd = open(dh_strbuf_str(p), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    else
        errno = st == DH_ERR_NOMEM ? ENOMEM : EINVAL;
    int saved = errno;
    dh_strbuf_free(&tmp);
    errno = saved;
    return fd;
}

/* ---- setup ---- */

dh_status_t dh__log_apply(const dh_config_t *cfg)
{
    dh__hostname(dh__host, sizeof(dh__host));
    dh__read_rank(dh__rank, sizeof(dh__rank));
    dh_strbuf_t path = DH_STRBUF_INIT;
    int fd = dh_output_open(cfg->log_file, &path);
    int open_errno = errno;
    int old = atomic_exchange(&dh__log_fd, fd >= 0 ? fd : 2);
    if (old > 2 && old != fd)
        close(old);
    uint32_t w = DH__LOG_READY | ((uint32_t)cfg->log_level & 0xfu) |
                 ((cfg->log_subsys & DH_LOG_SUBSYS_ALL) << DH__LOG_MASK_SHIFT);
    atomic_store_explicit(&dh__log_word, w, memory_order_release);
    dh_status_t st = DH_OK;
    if (fd < 0) {
        DH_WARN(CONF, "DHELIX_LOG_FILE=%s: cannot open '%s': %s; logging to stderr",
                cfg->log_file, dh_strbuf_str(&path), strerror(open_errno));
        st = DH_ERR_IO;
    }
    dh_strbuf_free(&path);
    return st;
}

static void dh__log_once(void)
{
    const dh_config_t *cfg = dh_config();
    pthread_atfork(NULL, NULL, dh__atfork_child);
    dh__log_apply(cfg);
    for (int i = 0; i < cfg->nwarnings; i++)
        DH_WARN(CONF, "%s", cfg->warnings[i]);
}

/* Logging that dh__log_apply already set up (tests do) is left alone. */
uint32_t dh__log_setup(void)
{
    uint32_t w = atomic_load_explicit(&dh__log_word, memory_order_acquire);
    if ((w & DH__LOG_READY) || dh__quiet_depth > 0)
        return w;
    pthread_once(&dh__log_once_ctl, dh__log_once);
    return atomic_load_explicit(&dh__log_word, memory_order_acquire);
}

void dh_log_init(void)
{
    (void)dh__log_setup();
}

/* ---- writing ---- */

static size_t dh__prefix(char *buf, size_t n)
{
    int k = snprintf(buf, n, "dhelix[%s %s:%ld:%ld] ", dh__rank, dh__host, (long)getpid(),
                     dh__gettid());
    return k < 0 ? 0 : (size_t)k < n ? (size_t)k : n - 1;
}

/* Terminates the line at len (or cuts it with "..." when vsnprintf wanted more) and
 * writes it. */
static void dh__emit(char *line, size_t len, int cut)
{
    if (cut || len > DH__LINE_MAX - 2) {
        len = DH__LINE_MAX - 5;
        memcpy(line + len, "...", 3);
        len += 3;
    }
    line[len++] = '\n';
    (void)dh_write_all(atomic_load_explicit(&dh__log_fd, memory_order_relaxed), line, len);
}

void dh__log(dh_log_level_t lvl, dh_log_subsys_t sub, const char *fmt, ...)
{
    char line[DH__LINE_MAX];
    size_t n = dh__prefix(line, sizeof(line) - 1);
    int k = snprintf(line + n, sizeof(line) - 1 - n, "%s %s: ",
                     (unsigned)lvl < DH_LOG_LEVEL_COUNT ? dh__level_upper[lvl] : "?",
                     dh_log_subsys_name(sub));
    n += k > 0 ? (size_t)k : 0;
    if (n >= sizeof(line) - 1)
        n = sizeof(line) - 2;
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof(line) - 1 - n, fmt, ap);
    va_end(ap);
    int cut = m > 0 && (size_t)m >= sizeof(line) - 1 - n;
    dh__emit(line, cut ? sizeof(line) - 2 : n + (m > 0 ? (size_t)m : 0), cut);
}

void dh_log_line(const char *text)
{
    dh_log_init();
    char line[DH__LINE_MAX];
    size_t n = dh__prefix(line, sizeof(line) - 1);
    int m = snprintf(line + n, sizeof(line) - 1 - n, "%s", text);
    int cut = m > 0 && (size_t)m >= sizeof(line) - 1 - n;
    dh__emit(line, cut ? sizeof(line) - 2 : n + (m > 0 ? (size_t)m : 0), cut);
}

/* ---- DHELIX_LOG_SUBSYS ---- */

/* The subsystem named by the n bytes at s, or -1 (DH_SUB_COUNT for "all"). */
static int dh__subsys_lookup(const char *s, size_t n)
{
    if (n == 3 && strncasecmp(s, "all", 3) == 0)
        return DH_SUB_COUNT;
    for (int i = 0; i < DH_SUB_COUNT; i++)
        if (strlen(dh__subsys_names[i]) == n && strncasecmp(s, dh__subsys_names[i], n) == 0)
            return i;
    return -1;
}

dh_status_t dh_log_parse_subsys(const char *list, uint32_t *mask, char *bad, size_t bad_len)
{
    uint32_t m = 0;
    int any = 0;
    for (const char *p = list; *p;) {
        while (*p == ' ' || *p == ',')
            p++;
        size_t n = strcspn(p, ", ");
        if (n == 0)
            break;
        int id = dh__subsys_lookup(p, n);
        if (id < 0) {
            if (bad_len)
                snprintf(bad, bad_len, "%.*s", (int)n, p);
            return DH_ERR_PARSE;
        }
        m |= id == DH_SUB_COUNT ? DH_LOG_SUBSYS_ALL : 1u << id;
        any = 1;
        p += n;
    }
    if (!any) {
        if (bad_len)
            snprintf(bad, bad_len, "%s", list);
        return DH_ERR_PARSE;
    }
    *mask = m;
    return DH_OK;
}
