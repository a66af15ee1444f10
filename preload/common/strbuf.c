/* strbuf.c: growable strings with sticky allocation failure. */
#include "common/strbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Makes room for n more bytes plus the NUL. Doubling keeps appends amortised O(1). */
static dh_status_t dh__strbuf_reserve(dh_strbuf_t *b, size_t n)
{
    if (b->failed)
        return DH_ERR_NOMEM;
    if (b->len + n + 1 <= b->cap)
        return DH_OK;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + n + 1) {
        if (cap > ((size_t)-1) / 2)
            goto fail;
        cap *= 2;
    }
    char *p = realloc(b->data, cap);
    if (p == NULL)
        goto fail;
    b->data = p;
    b->cap = cap;
    return DH_OK;
fail:
    b->failed = 1;
    return DH_ERR_NOMEM;
}

dh_status_t dh_strbuf_append(dh_strbuf_t *b, const char *s, size_t n)
{
    DH_CHECK(dh__strbuf_reserve(b, n));
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
    return DH_OK;
}

dh_status_t dh_strbuf_puts(dh_strbuf_t *b, const char *s)
{
    return dh_strbuf_append(b, s, strlen(s));
}

dh_status_t dh_strbuf_pad(dh_strbuf_t *b, char c, size_t n)
{
    DH_CHECK(dh__strbuf_reserve(b, n));
    memset(b->data + b->len, c, n);
    b->len += n;
    b->data[b->len] = '\0';
    return DH_OK;
}

dh_status_t dh_strbuf_vprintf(dh_strbuf_t *b, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0)
        return DH_ERR_INVALID;
    DH_CHECK(dh__strbuf_reserve(b, (size_t)n));
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
    return DH_OK;
}

dh_status_t dh_strbuf_printf(dh_strbuf_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    dh_status_t st = dh_strbuf_vprintf(b, fmt, ap);
    va_end(ap);
    return st;
}

/* The JSON escape of one byte, or NULL when it is copied as is. */
static const char *dh__json_escape(unsigned char c, char tmp[8])
{
    switch (c) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    default: break;
    }
    if (c >= 0x20)
        return NULL;
    snprintf(tmp, 8, "\\u%04x", c);
    return tmp;
}

dh_status_t dh_strbuf_json_str(dh_strbuf_t *b, const char *s)
{
    char tmp[8];
    DH_CHECK(dh_strbuf_append(b, "\"", 1));
    const char *run = s;
    for (const char *p = s; *p; p++) {
        const char *esc = dh__json_escape((unsigned char)*p, tmp);
        if (esc == NULL)
            continue;
        DH_CHECK(dh_strbuf_append(b, run, (size_t)(p - run)));
        DH_CHECK(dh_strbuf_puts(b, esc));
        run = p + 1;
    }
    DH_CHECK(dh_strbuf_puts(b, run));
    return dh_strbuf_append(b, "\"", 1);
}

const char *dh_strbuf_str(const dh_strbuf_t *b)
{
    return b->data ? b->data : "";
}

dh_status_t dh_strbuf_status(const dh_strbuf_t *b)
{
    return b->failed ? DH_ERR_NOMEM : DH_OK;
}

void dh_strbuf_free(dh_strbuf_t *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
    b->failed = 0;
}
