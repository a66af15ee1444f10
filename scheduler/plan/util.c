/* util.c: error lines, the JSON member getters, files and hashes shared by dh_plan. */
#include "plan_int.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *const dh__class_names[] = {
#define DH__OPCLASS_NAME(id, name) name,
    DH_OPCLASS_LIST(DH__OPCLASS_NAME)
#undef DH__OPCLASS_NAME
};

const char *dh_opclass_name(dh_opclass_t c)
{
    if ((unsigned)c >= DH_CLS_COUNT)
        return "unknown";
    return dh__class_names[c];
}

int dh_opclass_parse(const char *name)
{
    if (name == NULL)
        return -1;
    for (int c = 0; c < DH_CLS_COUNT; c++)
        if (strcmp(name, dh__class_names[c]) == 0)
            return c;
    return -1;
}

/* ---- error lines ---- */

/* Appends to err from at, then makes the whole message one line: text quoted from the
 * input (a format string, a JSON token) may hold newlines or other control bytes. */
static void dh__vappend(char *err, size_t errlen, size_t at, const char *fmt, va_list ap)
{
    if (at < errlen)
        vsnprintf(err + at, errlen - at, fmt, ap);
    for (char *c = err; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = '?';
}

void dh__errf(char *err, size_t errlen, const char *file, const char *fmt, ...)
{
    if (err == NULL || errlen == 0)
        return;
    int n = snprintf(err, errlen, "%s: ", file ? file : "<buffer>");
    va_list ap;
    va_start(ap, fmt);
    dh__vappend(err, errlen, n > 0 ? (size_t)n : 0, fmt, ap);
    va_end(ap);
}

/* Appends one link after its parents; returns the new length. */
static size_t dh__jpath_put(const dh__jpath_t *p, char *buf, size_t n, size_t at)
{
    if (p == NULL)
        return at;
    at = dh__jpath_put(p->up, buf, n, at);
    if (at >= n)
        return at;
    int w;
    if (p->key != NULL)
        w = snprintf(buf + at, n - at, "%s%s", at > 0 ? "." : "", p->key);
    else
        w = snprintf(buf + at, n - at, "[%zu]", p->idx);
    return w > 0 ? at + (size_t)w : at;
}

void dh__jpath_str(const dh__jpath_t *path, char *buf, size_t n)
{
    if (n == 0)
        return;
    buf[0] = '\0';
    dh__jpath_put(path, buf, n, 0);
    buf[n - 1] = '\0';
}

dh_status_t dh__jerr(const dh__jr_t *r, const dh__jpath_t *path, const char *fmt, ...)
{
    if (r->err == NULL || r->errlen == 0)
        return DH_ERR_PARSE;
    char where[256];
    dh__jpath_str(path, where, sizeof(where));
    int n = snprintf(r->err, r->errlen, "%s: %s%s", r->file ? r->file : "<buffer>", where,
                     where[0] ? " " : "");
    va_list ap;
    va_start(ap, fmt);
    dh__vappend(r->err, r->errlen, n > 0 ? (size_t)n : 0, fmt, ap);
    va_end(ap);
    return DH_ERR_PARSE;
}

/* ---- parsing ---- */

/* 1 when buf holds only JSON whitespace. */
static int dh__blank(const char *buf, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (buf[i] != ' ' && buf[i] != '\t' && buf[i] != '\n' && buf[i] != '\r')
            return 0;
    return 1;
}

dh_status_t dh__jparse(const dh__jr_t *r, const char *buf, size_t len, json_t **out)
{
    *out = NULL;
    if (buf == NULL || len == 0 || dh__blank(buf, len)) {
        dh__errf(r->err, r->errlen, r->file, "truncated or empty");
        return DH_ERR_PARSE;
    }
    json_error_t je;
    json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
    if (root == NULL) {
        /* An error at the very end of the input means the text stopped early: a file cut
         * by a crash or a full disk, which deserves its own name. */
        if (je.position >= 0 && (size_t)je.position >= len &&
            (strstr(je.text, "premature end of input") || strstr(je.text, "near end of file") ||
             strstr(je.text, "invalid token")))
            dh__errf(r->err, r->errlen, r->file, "truncated or empty (line %d, column %d: %s)",
                     je.line, je.column, je.text);
        else
            dh__errf(r->err, r->errlen, r->file, "not JSON (line %d, column %d: %s)", je.line,
                     je.column, je.text);
        return DH_ERR_PARSE;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        dh__errf(r->err, r->errlen, r->file, "is not a JSON object");
        return DH_ERR_PARSE;
    }
    *out = root;
    return DH_OK;
}

static const char *dh__jtype(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE: return "true";
    case JSON_FALSE: return "false";
    case JSON_NULL: return "null";
    }
    return "something else";
}

dh_status_t dh__jcheck_header(const dh__jr_t *r, json_t *root, const char *format, int version,
                              const char *reader)
{
    return dh__jcheck_versions(r, root, format, version, version, reader, NULL);
}

dh_status_t dh__jcheck_versions(const dh__jr_t *r, json_t *root, const char *format, int vmin,
                                int vmax, const char *reader, int *version)
{
    json_t *f = json_object_get(root, "format");
    if (f == NULL || !json_is_string(f)) {
        dh__errf(r->err, r->errlen, r->file, "has no \"format\" string (expected \"%s\")", format);
        return DH_ERR_PARSE;
    }
    if (strcmp(json_string_value(f), format) != 0) {
        char got[64];
        dh__strlcpy(got, sizeof(got), json_string_value(f));
        dh__errf(r->err, r->errlen, r->file, "format is \"%s\", expected \"%s\"", got, format);
        return DH_ERR_PARSE;
    }
    json_t *v = json_object_get(root, "version");
    if (v == NULL) {
        dh__errf(r->err, r->errlen, r->file, "has no \"version\"");
        return DH_ERR_PARSE;
    }
    if (!json_is_integer(v)) {
        dh__errf(r->err, r->errlen, r->file, "version is %s, expected an integer", dh__jtype(v));
        return DH_ERR_PARSE;
    }
    json_int_t got = json_integer_value(v);
    if (got < vmin || got > vmax) {
        if (vmin == vmax)
            dh__errf(r->err, r->errlen, r->file, "version %lld is not supported (%s reads version %d)",
                     (long long)got, reader, vmax);
        else
            dh__errf(r->err, r->errlen, r->file,
                     "version %lld is not supported (%s reads versions %d to %d)", (long long)got,
                     reader, vmin, vmax);
        return DH_ERR_UNSUPPORTED;
    }
    if (version)
        *version = (int)got;
    return DH_OK;
}

/* Looks up key; a null value counts as absent. Errors only for a missing required key. */
static dh_status_t dh__jmember(const dh__jr_t *r, json_t *obj, const dh__jpath_t *at,
                               const char *key, int required, json_t **out)
{
    json_t *v = json_object_get(obj, key);
    if (v != NULL && json_is_null(v) && !required)
        v = NULL;
    *out = v;
    if (v == NULL && required)
        return dh__jerr(r, at, "has no key \"%s\"", key);
    return DH_OK;
}

dh_status_t dh__jint(const dh__jr_t *r, json_t *obj, const dh__jpath_t *at, const char *key,
                     int required, long long def, long long lo, long long hi, long long *out)
{
    json_t *v;
    *out = def;
    DH_CHECK(dh__jmember(r, obj, at, key, required, &v));
    if (v == NULL)
        return DH_OK;
    dh__jpath_t here = DH__JKEY(at, key);
    long long x;
    if (json_is_integer(v))
        x = json_integer_value(v);
    else if (json_is_boolean(v) && lo <= 0 && hi >= 1)
        x = json_is_true(v);
    else
        return dh__jerr(r, &here, "is %s, expected an integer", dh__jtype(v));
    if (x < lo || x > hi)
        return dh__jerr(r, &here, "is %lld, expected %lld..%lld", x, lo, hi);
    *out = x;
    return DH_OK;
}

dh_status_t dh__jnum(const dh__jr_t *r, json_t *obj, const dh__jpath_t *at, const char *key,
                     int required, double def, double lo, double hi, double *out)
{
    json_t *v;
    *out = def;
    DH_CHECK(dh__jmember(r, obj, at, key, required, &v));
    if (v == NULL)
        return DH_OK;
    dh__jpath_t here = DH__JKEY(at, key);
    if (!json_is_number(v))
        return dh__jerr(r, &here, "is %s, expected a number", dh__jtype(v));
    double x = json_number_value(v);
    if (!isfinite(x) || x < lo || x > hi)
        return dh__jerr(r, &here, "is %g, expected %g..%g", x, lo, hi);
    *out = x;
    return DH_OK;
}

dh_status_t dh__jstr(const dh__jr_t *r, json_t *obj, const dh__jpath_t *at, const char *key,
                     int required, const char *def, char *dst, size_t n)
{
    json_t *v;
    dh__strlcpy(dst, n, def);
    DH_CHECK(dh__jmember(r, obj, at, key, required, &v));
    if (v == NULL)
        return DH_OK;
    if (!json_is_string(v)) {
        dh__jpath_t here = DH__JKEY(at, key);
        return dh__jerr(r, &here, "is %s, expected a string", dh__jtype(v));
    }
    dh__strlcpy(dst, n, json_string_value(v));
    return DH_OK;
}

dh_status_t dh__jhex(const dh__jr_t *r, json_t *obj, const dh__jpath_t *at, const char *key,
                     int nullable, uint64_t *out, int *is_null)
{
    json_t *v;
    *out = 0;
    if (is_null)
        *is_null = 0;
    DH_CHECK(dh__jmember(r, obj, at, key, !nullable, &v));
    if (v == NULL) {
        if (is_null)
            *is_null = 1;
        return DH_OK;
    }
    dh__jpath_t here = DH__JKEY(at, key);
    if (!json_is_string(v))
        return dh__jerr(r, &here, "is %s, expected a string of 16 hex digits", dh__jtype(v));
    if (dh__parse_hex16(json_string_value(v), out) != 0)
        return dh__jerr(r, &here, "is not 16 hex digits");
    return DH_OK;
}

dh_status_t dh__jarr(const dh__jr_t *r, json_t *obj, const dh__jpath_t *at, const char *key,
                     int required, size_t max, json_t **out)
{
    json_t *v;
    *out = NULL;
    DH_CHECK(dh__jmember(r, obj, at, key, required, &v));
    if (v == NULL)
        return DH_OK;
    dh__jpath_t here = DH__JKEY(at, key);
    if (!json_is_array(v))
        return dh__jerr(r, &here, "is %s, expected an array", dh__jtype(v));
    if (json_array_size(v) > max)
        return dh__jerr(r, &here, "has %zu elements, more than the %zu this reader accepts",
                        json_array_size(v), max);
    *out = v;
    return DH_OK;
}

dh_status_t dh__jobj_at(const dh__jr_t *r, json_t *arr, const dh__jpath_t *elem, size_t i,
                        json_t **out)
{
    json_t *v = json_array_get(arr, i);
    *out = v;
    if (v == NULL || !json_is_object(v))
        return dh__jerr(r, elem, "is %s, expected an object", v ? dh__jtype(v) : "missing");
    return DH_OK;
}

dh_status_t dh__jrange(const dh__jr_t *r, json_t *obj, const dh__jpath_t *at, const char *key,
                       size_t max, size_t *first, size_t *count)
{
    json_t *v;
    *first = *count = 0;
    DH_CHECK(dh__jmember(r, obj, at, key, 1, &v));
    dh__jpath_t here = DH__JKEY(at, key);
    if (!json_is_array(v) || json_array_size(v) != 2 ||
        !json_is_integer(json_array_get(v, 0)) || !json_is_integer(json_array_get(v, 1)))
        return dh__jerr(r, &here, "is not a [first, count] pair of integers");
    long long f = json_integer_value(json_array_get(v, 0));
    long long c = json_integer_value(json_array_get(v, 1));
    if (f < 0 || c < 0 || (unsigned long long)f > max || (unsigned long long)c > max ||
        (unsigned long long)f + (unsigned long long)c > max)
        return dh__jerr(r, &here, "is [%lld, %lld], outside the %zu ops", f, c, max);
    *first = (size_t)f;
    *count = (size_t)c;
    return DH_OK;
}

/* ---- files ---- */

dh_status_t dh__read_file(const char *path, char **buf, size_t *len, char *err, size_t errlen)
{
    *buf = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        dh__errf(err, errlen, path, "cannot open (%s)", strerror(errno));
        return DH_ERR_IO;
    }
    size_t cap = 1 << 16, n = 0;
    char *data = malloc(cap + 1);
    dh_status_t st = data ? DH_OK : DH_ERR_NOMEM;
    while (st == DH_OK) {
        if (n == cap) {
            if (cap >= DH__MAX_FILE_BYTES) {
                dh__errf(err, errlen, path, "is larger than %llu bytes",
                         (unsigned long long)DH__MAX_FILE_BYTES);
                st = DH_ERR_RANGE;
                break;
            }
            char *grown = realloc(data, cap * 2 + 1);
            if (grown == NULL) {
                st = DH_ERR_NOMEM;
                break;
            }
            data = grown;
            cap *= 2;
        }
        size_t got = fread(data + n, 1, cap - n, f);
        n += got;
        if (got == 0) {
            if (ferror(f)) {
                dh__errf(err, errlen, path, "cannot read (%s)", strerror(errno));
                st = DH_ERR_IO;
            }
            break;
        }
    }
    fclose(f);
    if (st == DH_ERR_NOMEM)
        dh__errf(err, errlen, path, "out of memory reading it");
    if (st != DH_OK) {
        free(data);
        return st;
    }
    data[n] = '\0';
    *buf = data;
    *len = n;
    return DH_OK;
}

dh_status_t dh__write_file(const char *path, const char *data, size_t len, char *err,
                           size_t errlen)
{
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 32);
    if (tmp == NULL) {
        dh__errf(err, errlen, path, "out of memory");
        return DH_ERR_NOMEM;
    }
    snprintf(tmp, plen + 32, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    int ok = f != NULL;
    if (ok) {
        ok = fwrite(data, 1, len, f) == len;
        ok = (fclose(f) == 0) && ok;
    }
    if (ok)
        ok = rename(tmp, path) == 0;
    if (!ok) {
        dh__errf(err, errlen, path, "cannot write (%s)", strerror(errno));
        remove(tmp);
    }
    free(tmp);
    return ok ? DH_OK : DH_ERR_IO;
}

/* ---- small things ---- */

void dh__strlcpy(char *dst, size_t n, const char *src)
{
    if (n == 0)
        return;
    size_t len = src ? strlen(src) : 0;
    if (len >= n) {
        len = n - 1;
        /* Never cut a multi-byte character in half: a half character is invalid UTF-8,
         * which a JSON writer would then emit and every reader reject. */
        while (len > 0 && ((unsigned char)src[len] & 0xC0) == 0x80)
            len--;
    }
    if (len)
        memcpy(dst, src, len);
    dst[len] = '\0';
}

void dh__hex16(uint64_t v, char buf[17])
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 15; i >= 0; i--) {
        buf[i] = digits[v & 15];
        v >>= 4;
    }
    buf[16] = '\0';
}

int dh__parse_hex16(const char *s, uint64_t *out)
{
    uint64_t v = 0;
    for (int i = 0; i < 16; i++) {
        char c = s[i];
        unsigned d;
        if (c >= '0' && c <= '9')
            d = (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            d = (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            d = (unsigned)(c - 'A' + 10);
        else
            return -1;
        v = (v << 4) | d;
    }
    if (s[16] != '\0')
        return -1;
    *out = v;
    return 0;
}

void dh__json_num(dh_strbuf_t *b, double v)
{
    if (!isfinite(v)) {
        dh_strbuf_puts(b, "0");
        return;
    }
    if (v == 0) {
        dh_strbuf_puts(b, "0");
        return;
    }
    char buf[40];
    /* The shortest of %.15g..%.17g that reads back exactly: files stay readable and a
     * save/load round trip is exact. */
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, sizeof(buf), "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    dh_strbuf_puts(b, buf);
}

uint64_t dh__fnv_u64(uint64_t h, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        h ^= (v >> (8 * i)) & 0xff;
        h *= 0x100000001b3ull;
    }
    return h;
}

uint64_t dh_plan_fingerprint(const dh_plan_op_t *ops, size_t n)
{
    uint64_t h = DH__FNV_OFFSET;
    for (size_t i = 0; i < n; i++)
        h = dh__fnv_u64(h, ops[i].sig);
    return h;
}

double dh__now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
