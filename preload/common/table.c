/* table.c: one table, three renderings (text, JSON, markdown). */
#include "common/table.h"

#include <stdlib.h>
#include <string.h>

typedef struct dh__meta {
    char *key;
    char *value;
    dh_cell_kind_t kind;
} dh__meta_t;

struct dh_table {
    const char *name;
    const dh_col_t *cols;
    int ncols;
    char **cells;          /* nrows * ncols, row-major; NULL cells allowed */
    size_t nrows, cap_rows;
    dh__meta_t *meta;
    size_t nmeta, cap_meta;
};

dh_status_t dh_table_new(dh_table_t **out, const char *name, const dh_col_t *cols, int ncols)
{
    *out = NULL;
    if (ncols < 1 || cols == NULL)
        return DH_ERR_INVALID;
    dh_table_t *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return DH_ERR_NOMEM;
    t->name = name;
    t->cols = cols;
    t->ncols = ncols;
    *out = t;
    return DH_OK;
}

/* strdup that keeps NULL as NULL; *ok is cleared when a copy fails. */
static char *dh__dup(const char *s, int *ok)
{
    if (s == NULL)
        return NULL;
    char *d = strdup(s);
    if (d == NULL)
        *ok = 0;
    return d;
}

/* Grows an array of elem-sized items to hold one more. */
static dh_status_t dh__grow(void **arr, size_t *cap, size_t used, size_t elem)
{
    if (used < *cap)
        return DH_OK;
    size_t ncap = *cap ? *cap * 2 : 16;
    void *p = realloc(*arr, ncap * elem);
    if (p == NULL)
        return DH_ERR_NOMEM;
    *arr = p;
    *cap = ncap;
    return DH_OK;
}

dh_status_t dh_table_meta(dh_table_t *t, const char *key, dh_cell_kind_t kind, const char *value)
{
    DH_CHECK(dh__grow((void **)&t->meta, &t->cap_meta, t->nmeta, sizeof(*t->meta)));
    int ok = 1;
    dh__meta_t m = {dh__dup(key, &ok), dh__dup(value ? value : "", &ok), kind};
    if (!ok) {
        free(m.key);
        free(m.value);
        return DH_ERR_NOMEM;
    }
    t->meta[t->nmeta++] = m;
    return DH_OK;
}

dh_status_t dh_table_row(dh_table_t *t, const char *const *cells)
{
    size_t ncols = (size_t)t->ncols;
    DH_CHECK(dh__grow((void **)&t->cells, &t->cap_rows, t->nrows, ncols * sizeof(char *)));
    int ok = 1;
    char **row = t->cells + t->nrows * ncols;
    for (size_t c = 0; c < ncols; c++)
        row[c] = dh__dup(cells[c], &ok);
    if (!ok) {
        for (size_t c = 0; c < ncols; c++)
            free(row[c]);
        return DH_ERR_NOMEM;
    }
    t->nrows++;
    return DH_OK;
}

static const char *dh__cell(const dh_table_t *t, size_t r, int c)
{
    return t->cells[r * (size_t)t->ncols + (size_t)c];
}

/* ---- text ---- */

static void dh__text_meta(const dh_table_t *t, dh_strbuf_t *out)
{
    if (t->nmeta == 0)
        return;
    dh_strbuf_printf(out, "%s:", t->name);
    for (size_t i = 0; i < t->nmeta; i++)
        dh_strbuf_printf(out, " %s=%s", t->meta[i].key, t->meta[i].value);
    dh_strbuf_puts(out, "\n");
}

/* One aligned cell; the last column is not padded on the right. */
static void dh__text_cell(dh_strbuf_t *out, const char *s, size_t width, int right, int last)
{
    size_t len = strlen(s);
    size_t pad = width > len ? width - len : 0;
    if (right)
        dh_strbuf_pad(out, ' ', pad);
    dh_strbuf_puts(out, s);
    if (!right && !last)
        dh_strbuf_pad(out, ' ', pad);
    if (!last)
        dh_strbuf_puts(out, "  ");
}

static void dh__text_line(const dh_table_t *t, dh_strbuf_t *out, const size_t *w, long row)
{
    for (int c = 0; c < t->ncols; c++) {
        const char *s = row < 0 ? t->cols[c].title : dh__cell(t, (size_t)row, c);
        dh__text_cell(out, s ? s : "", w[c], t->cols[c].kind == DH_CELL_NUM, c == t->ncols - 1);
    }
    dh_strbuf_puts(out, "\n");
}

static dh_status_t dh__render_text(const dh_table_t *t, dh_strbuf_t *out)
{
    size_t *w = calloc((size_t)t->ncols, sizeof(*w));
    if (w == NULL)
        return DH_ERR_NOMEM;
    for (int c = 0; c < t->ncols; c++) {
        w[c] = strlen(t->cols[c].title);
        for (size_t r = 0; r < t->nrows; r++) {
            const char *s = dh__cell(t, r, c);
            if (s && strlen(s) > w[c])
                w[c] = strlen(s);
        }
    }
    dh__text_meta(t, out);
    for (long r = -1; r < (long)t->nrows; r++)
        dh__text_line(t, out, w, r);
    free(w);
    return dh_strbuf_status(out);
}

/* ---- JSON ---- */

static void dh__json_value(dh_strbuf_t *out, const char *s, dh_cell_kind_t kind)
{
    if (s == NULL)
        dh_strbuf_puts(out, "null");
    else if (kind == DH_CELL_NUM)
        dh_strbuf_puts(out, s);
    else
        dh_strbuf_json_str(out, s);
}

static dh_status_t dh__render_json(const dh_table_t *t, dh_strbuf_t *out)
{
    dh_strbuf_puts(out, "{\"table\":");
    dh_strbuf_json_str(out, t->name);
    dh_strbuf_puts(out, ",\"meta\":{");
    for (size_t i = 0; i < t->nmeta; i++) {
        dh_strbuf_puts(out, i ? "," : "");
        dh_strbuf_json_str(out, t->meta[i].key);
        dh_strbuf_puts(out, ":");
        dh__json_value(out, t->meta[i].value, t->meta[i].kind);
    }
    dh_strbuf_puts(out, "},\"rows\":[");
    for (size_t r = 0; r < t->nrows; r++) {
        dh_strbuf_puts(out, r ? ",{" : "{");
        for (int c = 0; c < t->ncols; c++) {
            dh_strbuf_puts(out, c ? "," : "");
            dh_strbuf_json_str(out, t->cols[c].key);
            dh_strbuf_puts(out, ":");
            dh__json_value(out, dh__cell(t, r, c), t->cols[c].kind);
        }
        dh_strbuf_puts(out, "}");
    }
    dh_strbuf_puts(out, "]}\n");
    return dh_strbuf_status(out);
}

/* ---- markdown ---- */

static void dh__md_cell(dh_strbuf_t *out, const char *s)
{
    dh_strbuf_puts(out, " ");
    for (const char *p = s ? s : ""; *p; p++) {
        if (*p == '|')
            dh_strbuf_puts(out, "\\|");
        else if (*p == '\n')
            dh_strbuf_puts(out, " ");
        else
            dh_strbuf_append(out, p, 1);
    }
    dh_strbuf_puts(out, " |");
}

static dh_status_t dh__render_md(const dh_table_t *t, dh_strbuf_t *out)
{
    dh_strbuf_puts(out, "|");
    for (int c = 0; c < t->ncols; c++)
        dh__md_cell(out, t->cols[c].title);
    dh_strbuf_puts(out, "\n|");
    for (int c = 0; c < t->ncols; c++)
        dh_strbuf_puts(out, t->cols[c].kind == DH_CELL_NUM ? " ---: |" : " --- |");
    dh_strbuf_puts(out, "\n");
    for (size_t r = 0; r < t->nrows; r++) {
        dh_strbuf_puts(out, "|");
        for (int c = 0; c < t->ncols; c++)
            dh__md_cell(out, dh__cell(t, r, c));
        dh_strbuf_puts(out, "\n");
    }
    return dh_strbuf_status(out);
}

dh_status_t dh_table_render(const dh_table_t *t, dh_fmt_t fmt, dh_strbuf_t *out)
{
    switch (fmt) {
    case DH_FMT_TEXT: return dh__render_text(t, out);
    case DH_FMT_JSON: return dh__render_json(t, out);
    case DH_FMT_MARKDOWN: return dh__render_md(t, out);
    }
    return DH_ERR_INVALID;
}

void dh_table_free(dh_table_t *t)
{
    if (t == NULL)
        return;
    for (size_t i = 0; i < t->nrows * (size_t)t->ncols; i++)
        free(t->cells[i]);
    for (size_t i = 0; i < t->nmeta; i++) {
        free(t->meta[i].key);
        free(t->meta[i].value);
    }
    free(t->cells);
    free(t->meta);
    free(t);
}
