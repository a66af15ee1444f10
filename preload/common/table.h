/*
 * table.h: the one emitter for output people read and output programs read.
 *
 * A caller fills a table (named columns, rows of strings, optional key/value metadata)
 * and renders it as an aligned text table, a JSON object or a markdown table. Because
 * every format is rendered from the same rows, the formats cannot disagree.
 *
 * JSON form, on one line, ending in a newline:
 *   {"table":"<name>","meta":{"<key>":<value>,...},"rows":[{"<col key>":<cell>,...},...]}
 * where numeric columns and metadata are written as bare JSON numbers (the caller
 * guarantees they are valid numbers) and others as JSON strings.
 *
 * A table is not thread-safe; each owner builds and renders its own.
 */
#ifndef DH_TABLE_H
#define DH_TABLE_H

#include "common/status.h"
#include "common/strbuf.h"

typedef enum dh_fmt {
    DH_FMT_TEXT,      /* aligned columns, a header row, numbers right-aligned */
    DH_FMT_JSON,      /* one JSON object per table, see above */
    DH_FMT_MARKDOWN   /* GitHub markdown table; '|' in cells is escaped */
} dh_fmt_t;

typedef enum dh_cell_kind {
    DH_CELL_STR,      /* text: JSON string, left-aligned */
    DH_CELL_NUM       /* number: bare in JSON, right-aligned */
} dh_cell_kind_t;

typedef struct dh_col {
    const char *key;      /* JSON member name */
    const char *title;    /* header in text and markdown */
    dh_cell_kind_t kind;
} dh_col_t;

typedef struct dh_table dh_table_t;

/* Creates an empty table named name with ncols columns described by cols (both are
 * referenced, not copied: they must outlive the table, as static arrays do).
 * Errors: DH_ERR_INVALID (ncols < 1), DH_ERR_NOMEM. */
dh_status_t dh_table_new(dh_table_t **out, const char *name, const dh_col_t *cols, int ncols);
/* Adds a metadata member (copied). Text renders metadata as one "name: k=v ..." line
 * above the table; markdown leaves it out. Errors: DH_ERR_NOMEM. */
dh_status_t dh_table_meta(dh_table_t *t, const char *key, dh_cell_kind_t kind, const char *value);
/* Appends a row of ncols cells (copied; NULL is rendered as an empty cell, JSON null).
 * Errors: DH_ERR_NOMEM. */
dh_status_t dh_table_row(dh_table_t *t, const char *const *cells);
/* Appends the rendering of t in fmt to out. Errors: DH_ERR_NOMEM, DH_ERR_INVALID (fmt). */
dh_status_t dh_table_render(const dh_table_t *t, dh_fmt_t fmt, dh_strbuf_t *out);
/* Frees t and everything it copied; NULL is a no-op. */
void dh_table_free(dh_table_t *t);

#endif
