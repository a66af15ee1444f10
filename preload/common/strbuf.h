/*
 * strbuf.h: a growable NUL-terminated string, used to build output (tables, JSON, log
 * file names) before it is written in one piece.
 *
 * Failure is sticky: after an allocation fails every later append is a no-op and
 * dh_strbuf_status reports DH_ERR_NOMEM, so a builder can append freely and check once.
 * A dh_strbuf_t is not thread-safe; each owner uses its own.
 */
#ifndef DH_STRBUF_H
#define DH_STRBUF_H

#include <stdarg.h>
#include <stddef.h>

#include "common/status.h"

typedef struct dh_strbuf {
    char *data;   /* NUL-terminated when len > 0; NULL until the first append */
    size_t len;   /* bytes in data, excluding the NUL */
    size_t cap;   /* bytes allocated */
    int failed;   /* an append ran out of memory; data holds what fitted before it */
} dh_strbuf_t;

#define DH_STRBUF_INIT {NULL, 0, 0, 0}

/* Appends n bytes of s (which need not be NUL-terminated). */
dh_status_t dh_strbuf_append(dh_strbuf_t *b, const char *s, size_t n);
/* Appends the NUL-terminated string s. */
dh_status_t dh_strbuf_puts(dh_strbuf_t *b, const char *s);
/* Appends c repeated n times (padding for aligned tables). */
dh_status_t dh_strbuf_pad(dh_strbuf_t *b, char c, size_t n);
/* Appends printf-formatted text. */
dh_status_t dh_strbuf_printf(dh_strbuf_t *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
dh_status_t dh_strbuf_vprintf(dh_strbuf_t *b, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
/* Appends s as a JSON string literal: quoted, with ", \ and control characters escaped.
 * Bytes >= 0x80 are copied unchanged (UTF-8 passes through). */
dh_status_t dh_strbuf_json_str(dh_strbuf_t *b, const char *s);
/* The contents as a C string; "" when empty. Valid until the next append or free. */
const char *dh_strbuf_str(const dh_strbuf_t *b);
/* DH_OK, or DH_ERR_NOMEM when any append failed. */
dh_status_t dh_strbuf_status(const dh_strbuf_t *b);
/* Releases the memory and resets b to empty (it may be reused). */
void dh_strbuf_free(dh_strbuf_t *b);

#endif
