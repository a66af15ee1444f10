/* config.c: parsing, printing and documenting the DHELIX_* table (config.h). */
#include "common/config.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

extern char **environ;

#define DH__PREFIX "DHELIX_"
#define DH__UNKNOWN_MAX 4

static const dh_cfg_desc_t dh__cfg_desc[DH_CFG_COUNT] = {
#define DH__CFG_DESC(id, field, kind, def, choices, min, max, desc) \
    {DH__PREFIX #id, DH_CFG_##kind, def, choices, min, max, desc, offsetof(dh_config_t, field)},
    DH_CONFIG_LIST(DH__CFG_DESC)
#undef DH__CFG_DESC
};

static const char *const dh__mode_names[] = {
#define DH__NAME(id, name) name,
    DH_MODE_LIST(DH__NAME)
};
static const char *const dh__stats_names[] = {DH_STATS_LIST(DH__NAME)};
#undef DH__NAME

static const char *const dh__source_names[] = {"default", "env", "default (invalid env)",
                                               "derived"};
static const char *const dh__kind_names[] = {"enum", "bool", "integer", "bytes",
                                             "string", "path", "list"};

const dh_cfg_desc_t *dh_config_desc(dh_cfg_id_t id)
{
    return (unsigned)id < DH_CFG_COUNT ? &dh__cfg_desc[id] : NULL;
}

const char *dh_config_source_name(dh_cfg_source_t src)
{
    return (unsigned)src < 4 ? dh__source_names[src] : "?";
}

const char *dh_mode_name(dh_mode_t mode)
{
    return (unsigned)mode < DH_MODE_COUNT ? dh__mode_names[mode] : "?";
}

const char *dh_stats_name(dh_stats_t stats)
{
    return (unsigned)stats < DH_STATS_COUNT ? dh__stats_names[stats] : "?";
}

/* ---- value parsers; each writes the reason for a failure into why ---- */

/* Index of v in a "a|b|" choice list (case-insensitive), or -1. */
static int dh__choice_index(const char *choices, const char *v)
{
    size_t vlen = strlen(v);
    int i = 0;
    for (const char *p = choices; *p; i++) {
        size_t n = strcspn(p, "|");
        if (n == vlen && strncasecmp(p, v, n) == 0)
            return i;
        p += n + (p[n] == '|');
    }
    return -1;
}

/* "a|b|" -> "a, b" */
static void dh__choices_text(const char *choices, dh_strbuf_t *out)
{
    for (const char *p = choices; *p;) {
        size_t n = strcspn(p, "|");
        dh_strbuf_append(out, p, n);
        p += n + (p[n] == '|');
        if (*p)
            dh_strbuf_puts(out, ", ");
    }
}

static dh_status_t dh__parse_enum(const dh_cfg_desc_t *d, const char *v, void *f, char *why,
                                  size_t n)
{
    int idx = dh__choice_index(d->choices, v);
    if (idx < 0) {
        dh_strbuf_t c = DH_STRBUF_INIT;
        dh__choices_text(d->choices, &c);
        snprintf(why, n, "not one of %s", dh_strbuf_str(&c));
        dh_strbuf_free(&c);
        return DH_ERR_PARSE;
    }
    *(int *)f = idx;
    return DH_OK;
}

static dh_status_t dh__parse_bool(const char *v, void *f, char *why, size_t n)
{
    static const char *const yes[] = {"1", "true", "yes", "on"};
    static const char *const no[] = {"0", "false", "no", "off"};
    for (int i = 0; i < 4; i++) {
        if (strcasecmp(v, yes[i]) == 0 || strcasecmp(v, no[i]) == 0) {
            *(int *)f = strcasecmp(v, yes[i]) == 0;
            return DH_OK;
        }
    }
    snprintf(why, n, "not a boolean (0 or 1)");
    return DH_ERR_PARSE;
}

/* The multiplier of a size suffix (K, M, G, T, optionally followed by B or iB), 1 for
 * none, 0 for anything else. */
static int64_t dh__suffix_scale(const char *s)
{
    static const char units[] = "KMGT";
    if (*s == '\0')
        return 1;
    const char *u = strchr(units, toupper((unsigned char)*s));
    if (u == NULL || *u == '\0')
        return 0;
    const char *rest = s + 1;
    if (*rest != '\0' && strcasecmp(rest, "B") != 0 && strcasecmp(rest, "iB") != 0)
        return 0;
    return (int64_t)1 << (10 * (u - units + 1));
}

static void dh__range_text(const dh_cfg_desc_t *d, dh_strbuf_t *out);

static dh_status_t dh__parse_number(const dh_cfg_desc_t *d, const char *v, void *f,
                                    char *why, size_t n)
{
    int bytes = d->kind == DH_CFG_BYTES;
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    int64_t scale = bytes ? dh__suffix_scale(end) : (*end == '\0');
    if (end == v || scale == 0 || !isdigit((unsigned char)v[v[0] == '-' || v[0] == '+'])) {
        snprintf(why, n, bytes ? "not a size (a number with an optional K, M, G or T suffix)"
                               : "not an integer");
        return DH_ERR_PARSE;
    }
    int over = errno == ERANGE || (x > 0 && x > INT64_MAX / scale) ||
               (x < 0 && x < INT64_MIN / scale);
    int64_t val = over ? 0 : (int64_t)x * scale;
    if (over || val < d->min || val > d->max) {
        dh_strbuf_t range = DH_STRBUF_INIT;
        dh__range_text(d, &range);
        snprintf(why, n, "out of range %s", dh_strbuf_str(&range));
        dh_strbuf_free(&range);
        return DH_ERR_RANGE;
    }
    *(int64_t *)f = val;
    return DH_OK;
}

static dh_status_t dh__parse_str(const dh_cfg_desc_t *d, const char *v, void *f, char *why,
                                 size_t n)
{
    if (strlen(v) >= DH_CFG_STR_MAX) {
        snprintf(why, n, "longer than %d bytes", DH_CFG_STR_MAX - 1);
        return DH_ERR_RANGE;
    }
    if (d->kind == DH_CFG_PATH) {
        dh_strbuf_t tmp = DH_STRBUF_INIT;
        dh_status_t st = dh_path_expand(v, "host", 1, &tmp);
        dh_strbuf_free(&tmp);
        if (st != DH_OK) {
            snprintf(why, n, "bad pattern: only %%h, %%p and %%%% are expanded");
            return DH_ERR_PARSE;
        }
    }
    memcpy(f, v, strlen(v) + 1);
    return DH_OK;
}

static dh_status_t dh__parse_mask(const char *v, void *f, char *why, size_t n)
{
    char bad[64];
    if (dh_log_parse_subsys(v, (uint32_t *)f, bad, sizeof(bad)) == DH_OK)
        return DH_OK;
    dh_strbuf_t c = DH_STRBUF_INIT;
    dh__choices_text(DH_LOG_SUBSYS_CHOICES, &c);
    snprintf(why, n, "unknown subsystem '%s' (known: %s)", bad, dh_strbuf_str(&c));
    dh_strbuf_free(&c);
    return DH_ERR_PARSE;
}

static dh_status_t dh__parse_value(const dh_cfg_desc_t *d, const char *v, void *f, char *why,
                                   size_t n)
{
    switch (d->kind) {
    case DH_CFG_ENUM: return dh__parse_enum(d, v, f, why, n);
    case DH_CFG_BOOL: return dh__parse_bool(v, f, why, n);
    case DH_CFG_INT:
    case DH_CFG_BYTES: return dh__parse_number(d, v, f, why, n);
    case DH_CFG_STR:
    case DH_CFG_PATH: return dh__parse_str(d, v, f, why, n);
    case DH_CFG_MASK: return dh__parse_mask(v, f, why, n);
    }
    return DH_ERR_INTERNAL;
}

static size_t dh__field_size(dh_cfg_kind_t kind)
{
    switch (kind) {
    case DH_CFG_ENUM:
    case DH_CFG_BOOL: return sizeof(int);
    case DH_CFG_INT:
    case DH_CFG_BYTES: return sizeof(int64_t);
    case DH_CFG_MASK: return sizeof(uint32_t);
    default: return DH_CFG_STR_MAX;
    }
}

/* ---- the environment ---- */

static const char *dh__env_get(char *const *envp, const char *name)
{
    size_t n = strlen(name);
    for (char *const *e = envp; e && *e; e++)
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
            return *e + n + 1;
    return NULL;
}

static void dh__warn(dh_config_t *cfg, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void dh__warn(dh_config_t *cfg, const char *fmt, ...)
{
    if (cfg->nwarnings >= DH_CFG_WARN_MAX)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cfg->warnings[cfg->nwarnings++], DH_CFG_WARN_LEN, fmt, ap);
    va_end(ap);
}

/* Parses one variable: its default, then its environment value if set and non-empty. */
static dh_status_t dh__parse_one(dh_config_t *cfg, dh_cfg_id_t id, char *const *envp)
{
    union { char s[DH_CFG_STR_MAX]; int64_t i; } tmp;
    const dh_cfg_desc_t *d = &dh__cfg_desc[id];
    char why[192];
    void *field = (char *)cfg + d->offset;
    if (dh__parse_value(d, d->def, field, why, sizeof(why)) != DH_OK)
        return DH_ERR_INTERNAL;
    cfg->source[id] = DH_SRC_DEFAULT;
    const char *v = dh__env_get(envp, d->name);
    if (v == NULL || *v == '\0')
        return DH_OK;
    if (dh__parse_value(d, v, &tmp, why, sizeof(why)) != DH_OK) {
        cfg->source[id] = DH_SRC_INVALID;
        dh__warn(cfg, "%s=%.64s%s: %s; using the default '%s'", d->name, v,
                 strlen(v) > 64 ? "..." : "", why, d->def);
        return DH_OK;
    }
    memcpy(field, &tmp, dh__field_size(d->kind));
    cfg->source[id] = DH_SRC_ENV;
    return DH_OK;
}

static int dh__known(const char *entry)
{
    size_t n = strcspn(entry, "=");
    for (int i = 0; i < DH_CFG_COUNT; i++)
        if (strlen(dh__cfg_desc[i].name) == n && strncmp(dh__cfg_desc[i].name, entry, n) == 0)
            return 1;
    return 0;
}

static void dh__check_unknown(dh_config_t *cfg, char *const *envp)
{
    int unknown = 0;
    for (char *const *e = envp; e && *e; e++) {
        if (strncmp(*e, DH__PREFIX, strlen(DH__PREFIX)) != 0 || dh__known(*e))
            continue;
        if (++unknown <= DH__UNKNOWN_MAX)
            dh__warn(cfg, "unknown variable %.*s ignored (`dhelix config` lists the known ones)",
                     (int)strcspn(*e, "="), *e);
    }
    if (unknown > DH__UNKNOWN_MAX)
        dh__warn(cfg, "%d more unknown DHELIX_* variables ignored", unknown - DH__UNKNOWN_MAX);
}

dh_status_t dh_config_parse(dh_config_t *cfg, char *const *envp)
{
    dh_status_t st = DH_OK;
    dh__log_quiet(1);
    memset(cfg, 0, sizeof(*cfg));
    for (int i = 0; i < DH_CFG_COUNT && st == DH_OK; i++)
        st = dh__parse_one(cfg, (dh_cfg_id_t)i, envp);
    if (st == DH_OK && cfg->source[DH_CFG_MODE] == DH_SRC_DEFAULT && cfg->plan[0] != '\0') {
        cfg->mode = DH_MODE_PLAN;
        cfg->source[DH_CFG_MODE] = DH_SRC_DERIVED;
    }
    if (st == DH_OK)
        dh__check_unknown(cfg, envp);
    dh__log_quiet(-1);
    return st;
}

static dh_config_t dh__config;
static pthread_once_t dh__config_once = PTHREAD_ONCE_INIT;

static void dh__config_load(void)
{
    if (dh_config_parse(&dh__config, environ) != DH_OK)
        dh__warn(&dh__config, "internal error: a built-in default does not parse");
}

const dh_config_t *dh_config(void)
{
    pthread_once(&dh__config_once, dh__config_load);
    return &dh__config;
}

/* ---- printing ---- */

/* Sizes print with the largest suffix that divides them exactly ("2G", "1536M"). */
static void dh__bytes_text(int64_t v, char *out, size_t n)
{
    static const char units[] = "TGMK";
    for (int i = 0; i < 4; i++) {
        int64_t scale = (int64_t)1 << (10 * (4 - i));
        if (v != 0 && v % scale == 0) {
            snprintf(out, n, "%lld%c", (long long)(v / scale), units[i]);
            return;
        }
    }
    snprintf(out, n, "%lld", (long long)v);
}

static void dh__mask_text(uint32_t m, dh_strbuf_t *out)
{
    if ((m & DH_LOG_SUBSYS_ALL) == DH_LOG_SUBSYS_ALL) {
        dh_strbuf_puts(out, "all");
        return;
    }
    const char *sep = "";
    for (int i = 0; i < DH_SUB_COUNT; i++) {
        if (m & (1u << i)) {
            dh_strbuf_printf(out, "%s%s", sep, dh_log_subsys_name((dh_log_subsys_t)i));
            sep = ",";
        }
    }
}

dh_status_t dh_config_value_str(const dh_config_t *cfg, dh_cfg_id_t id, dh_strbuf_t *out)
{
    const dh_cfg_desc_t *d = dh_config_desc(id);
    if (d == NULL)
        return DH_ERR_INVALID;
    const void *f = (const char *)cfg + d->offset;
    char num[32];
    switch (d->kind) {
    case DH_CFG_ENUM: {
        const char *p = d->choices;
        for (int i = 0; i < *(const int *)f && *p; i++)
            p += strcspn(p, "|") + 1;
        dh_strbuf_append(out, p, strcspn(p, "|"));
        break;
    }
    case DH_CFG_BOOL: dh_strbuf_puts(out, *(const int *)f ? "1" : "0"); break;
    case DH_CFG_INT: dh_strbuf_printf(out, "%lld", (long long)*(const int64_t *)f); break;
    case DH_CFG_BYTES:
        dh__bytes_text(*(const int64_t *)f, num, sizeof(num));
        dh_strbuf_puts(out, num);
        break;
    case DH_CFG_STR:
    case DH_CFG_PATH: dh_strbuf_puts(out, (const char *)f); break;
    case DH_CFG_MASK: dh__mask_text(*(const uint32_t *)f, out); break;
    }
    return dh_strbuf_status(out);
}


/* The Values column: what a variable accepts. */
static void dh__range_text(const dh_cfg_desc_t *d, dh_strbuf_t *out)
{
    char lo[32], hi[32];
    switch (d->kind) {
    case DH_CFG_ENUM: dh__choices_text(d->choices, out); break;
    case DH_CFG_BOOL: dh_strbuf_puts(out, "0, 1"); break;
    case DH_CFG_INT:
        dh_strbuf_printf(out, "%lld..%lld", (long long)d->min, (long long)d->max);
        break;
    case DH_CFG_BYTES:
        dh__bytes_text(d->min, lo, sizeof(lo));
        dh__bytes_text(d->max, hi, sizeof(hi));
        dh_strbuf_printf(out, "%s..%s (suffix K, M, G, T)", lo, hi);
        break;
    case DH_CFG_STR:
    case DH_CFG_PATH: dh_strbuf_puts(out, d->choices); break;
    case DH_CFG_MASK:
        dh_strbuf_puts(out, "all, or a comma list of ");
        dh__choices_text(strchr(d->choices, '|') + 1, out);
        break;
    }
}

/* ---- rendering through the emitter ---- */

enum { DH__C_NAME, DH__C_VALUE, DH__C_SOURCE, DH__C_DEFAULT, DH__C_TYPE, DH__C_VALUES,
       DH__C_DESC, DH__C_COUNT };

static const dh_col_t dh__cols_all[DH__C_COUNT] = {
    {"name", "Variable", DH_CELL_STR},   {"value", "Value", DH_CELL_STR},
    {"source", "Source", DH_CELL_STR},   {"default", "Default", DH_CELL_STR},
    {"type", "Type", DH_CELL_STR},       {"values", "Values", DH_CELL_STR},
    {"description", "Description", DH_CELL_STR},
};

/* Which of the columns above each format shows, in order. */
static const int dh__cols_text[] = {DH__C_NAME, DH__C_VALUE, DH__C_SOURCE, DH__C_DEFAULT};
static const int dh__cols_md[] = {DH__C_NAME, DH__C_TYPE, DH__C_DEFAULT, DH__C_VALUES,
                                  DH__C_DESC};

static const char dh__md_intro[] =
    "<!-- Generated by `dhelix config --markdown`; the docs.config test fails when this\n"
    "     file and the generator differ. Regenerate it with\n"
    "     `build/bin/dhelix config --markdown > docs/configuration.md`. -->\n"
    "## Configuration\n"
    "\n"
    "The shim and the `dhelix` tool read these environment variables once, when they\n"
    "start. An unset or empty variable takes its default. A value that does not parse or\n"
    "is out of range also takes the default, with one logged warning; unknown\n"
    "`DHELIX_*` names are reported the same way. `DHELIX_PRINT_CONFIG=1` logs the\n"
    "values in effect when the shim loads; `dhelix config` prints them for the current\n"
    "environment (`--json` for programs).\n"
    "\n";

/* Fills cell c of variable id; text forms show an empty value as "(empty)", markdown
 * quotes names and values as code. */
static void dh__cell_text(const dh_config_t *cfg, dh_cfg_id_t id, int c, dh_fmt_t fmt,
                          dh_strbuf_t *b)
{
    const dh_cfg_desc_t *d = &dh__cfg_desc[id];
    const char *q = fmt == DH_FMT_MARKDOWN ? "`" : "";
    const char *empty = fmt == DH_FMT_JSON ? "" : "(empty)";
    size_t start = b->len;
    switch (c) {
    case DH__C_NAME: dh_strbuf_printf(b, "%s%s%s", q, d->name, q); return;
    case DH__C_VALUE: dh_config_value_str(cfg, id, b); break;
    case DH__C_SOURCE: dh_strbuf_puts(b, dh_config_source_name(cfg->source[id])); return;
    case DH__C_DEFAULT:
        dh_strbuf_printf(b, "%s%s%s", *d->def ? q : "", d->def, *d->def ? q : "");
        break;
    case DH__C_TYPE: dh_strbuf_puts(b, dh__kind_names[d->kind]); return;
    case DH__C_VALUES: dh__range_text(d, b); return;
    case DH__C_DESC: dh_strbuf_puts(b, d->desc); return;
    }
    if (b->len == start)
        dh_strbuf_puts(b, empty);
}

static dh_status_t dh__config_row(dh_table_t *t, const dh_config_t *cfg, dh_cfg_id_t id,
                                  const int *cols, int ncols, dh_fmt_t fmt)
{
    dh_strbuf_t b[DH__C_COUNT] = {DH_STRBUF_INIT};
    const char *cells[DH__C_COUNT];
    dh_status_t st = DH_OK;
    for (int i = 0; i < ncols; i++) {
        dh__cell_text(cfg, id, cols[i], fmt, &b[i]);
        cells[i] = dh_strbuf_str(&b[i]);
        if (dh_strbuf_status(&b[i]) != DH_OK)
            st = DH_ERR_NOMEM;
    }
    if (st == DH_OK)
        st = dh_table_row(t, cells);
    for (int i = 0; i < ncols; i++)
        dh_strbuf_free(&b[i]);
    return st;
}

/* The columns fmt shows, in order; returns how many. */
static int dh__pick_cols(dh_fmt_t fmt, const int **pick)
{
    static const int all[DH__C_COUNT] = {0, 1, 2, 3, 4, 5, 6};
    switch (fmt) {
    case DH_FMT_TEXT: *pick = dh__cols_text; return 4;
    case DH_FMT_MARKDOWN: *pick = dh__cols_md; return 5;
    default: *pick = all; return DH__C_COUNT;
    }
}

dh_status_t dh_config_render(const dh_config_t *cfg, dh_fmt_t fmt, dh_strbuf_t *out)
{
    const int *pick;
    int ncols = dh__pick_cols(fmt, &pick);
    dh_col_t cols[DH__C_COUNT];
    for (int i = 0; i < ncols; i++)
        cols[i] = dh__cols_all[pick[i]];
    if (cfg == NULL && fmt != DH_FMT_MARKDOWN)
        return DH_ERR_INVALID;
    dh_table_t *t;
    dh_status_t st = DH_OK;
    DH_CHECK(dh_table_new(&t, "config", cols, ncols));
    if (fmt == DH_FMT_JSON)
        DH_CHECK_GOTO(dh_table_meta(t, "version", DH_CELL_STR, dh_version()), st, out);
    for (int i = 0; i < DH_CFG_COUNT; i++)
        DH_CHECK_GOTO(dh__config_row(t, cfg, (dh_cfg_id_t)i, pick, ncols, fmt), st, out);
    if (fmt == DH_FMT_MARKDOWN)
        dh_strbuf_puts(out, dh__md_intro);
    st = dh_table_render(t, fmt, out);
out:
    dh_table_free(t);
    return st;
}
