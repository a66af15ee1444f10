/*
 * plan_int.h: helpers shared by the modules of dh_plan (not part of its API).
 *
 * The JSON readers report one line, "<file>: <path> <problem>", where path is the JSON
 * path of the offending value ("sections[0].groups[3].order"). A path is a chain of
 * dh__jpath_t links on the caller's stack, formatted only when an error is written, so
 * that reading a million ops costs no formatting at all.
 *
 * Everything here is a pure function of its arguments (no global state): thread-safe.
 */
#ifndef DH_PLAN_INT_H
#define DH_PLAN_INT_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "common/strbuf.h"
#include "plan.h"

/* Caps that keep a hostile or corrupt file from asking for absurd memory. */
#define DH__MAX_OPS 10000000u
#define DH__MAX_COMMS 4096u
#define DH__MAX_SECTIONS 4096u
#define DH__MAX_RANKS 1048576u
#define DH__MAX_FILE_BYTES (4ull << 30)

/* One step of a JSON path: a member (key != NULL) or an array element (key == NULL). */
typedef struct dh__jpath {
    const struct dh__jpath *up;
    const char *key;
    size_t idx;
} dh__jpath_t;

#define DH__JKEY(parent, k) {(parent), (k), 0}
#define DH__JIDX(parent, i) {(parent), NULL, (i)}

/* A reader: the file name for messages and where the first error goes. */
typedef struct dh__jr {
    const char *file;
    char *err;
    size_t errlen;
} dh__jr_t;

/* Writes "<file>: <message>" to err (when err is not NULL). */
void dh__errf(char *err, size_t errlen, const char *file, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Writes "<file>: <path> <message>" and returns DH_ERR_PARSE. */
dh_status_t dh__jerr(const dh__jr_t *r, const dh__jpath_t *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Formats path into buf ("sections[0].ops[3].sig"); "" for the root. */
void dh__jpath_str(const dh__jpath_t *path, char *buf, size_t n);

/* Parses buf[0..len) as one JSON object. Errors (written to r): "truncated or empty",
 * "not JSON (line L, column C: why)", "is not a JSON object". */
dh_status_t dh__jparse(const dh__jr_t *r, const char *buf, size_t len, json_t **out);
/* Checks "format" and "version" of a parsed root object against the expected ones. */
dh_status_t dh__jcheck_header(const dh__jr_t *r, json_t *root, const char *format,
                              int version, const char *reader);
/* The same for a reader of versions vmin..vmax; *version (may be NULL) gets the file's. */
dh_status_t dh__jcheck_versions(const dh__jr_t *r, json_t *root, const char *format, int vmin,
                                int vmax, const char *reader, int *version);

/* Member getters. A missing member: required -> error "<path> has no key \"k\"";
 * otherwise the default is stored and DH_OK returned. A null member counts as missing
 * for optional members. Wrong type or range -> error naming the member's path. */
dh_status_t dh__jint(const dh__jr_t *r, json_t *obj, const dh__jpath_t *at, const char *key,
                     int required, long long def, long long lo, long long hi, long long *out);
dh_status_t dh__jnum(const dh__jr_t *r, json_t *obj, const dh__jpath_t *at, const char *key,
                     int required, double def, double lo, double hi, double *out);
/* Copies a string member into dst[n], truncated at a UTF-8 character boundary. */
dh_status_t dh__jstr(const dh__jr_t *r, json_t *obj, const dh__jpath_t *at, const char *key,
                     int required, const char *def, char *dst, size_t n);
/* A 16-hex-digit hash string. *is_null (may be NULL when nullable is 0) is set when the
 * member is absent or null and nullable is 1. */
dh_status_t dh__jhex(const dh__jr_t *r, json_t *obj, const dh__jpath_t *at, const char *key,
                     int nullable, uint64_t *out, int *is_null);
/* An array member of at most max elements; *out NULL (and DH_OK) when optional and absent. */
dh_status_t dh__jarr(const dh__jr_t *r, json_t *obj, const dh__jpath_t *at, const char *key,
                     int required, size_t max, json_t **out);
/* Element i of arr, which must be an object. */
dh_status_t dh__jobj_at(const dh__jr_t *r, json_t *arr, const dh__jpath_t *elem, size_t i,
                        json_t **out);
/* A [first, count] pair of non-negative integers. */
dh_status_t dh__jrange(const dh__jr_t *r, json_t *obj, const dh__jpath_t *at, const char *key,
                       size_t max, size_t *first, size_t *count);

/* Reads a whole file into a malloc'ed buffer (NUL-terminated; len excludes the NUL).
 * Errors: DH_ERR_IO ("<path>: cannot open (...)"), DH_ERR_RANGE (larger than the cap),
 * DH_ERR_NOMEM. */
dh_status_t dh__read_file(const char *path, char **buf, size_t *len, char *err, size_t errlen);
/* Writes data to path through a temporary file in the same directory and a rename, so a
 * reader never sees half a file. Errors: DH_ERR_IO with "<path>: cannot write (...)". */
dh_status_t dh__write_file(const char *path, const char *data, size_t len, char *err,
                           size_t errlen);

/* Copies src into dst[n] (n >= 1), truncated at a UTF-8 boundary, always NUL-ended. */
void dh__strlcpy(char *dst, size_t n, const char *src);
/* 16 lower-case hex digits of v into buf[17]. */
void dh__hex16(uint64_t v, char buf[17]);
/* Parses exactly 16 hex digits (either case); 0 on success. */
int dh__parse_hex16(const char *s, uint64_t *out);
/* Appends the shortest decimal that reads back as v (non-finite values as 0). */
void dh__json_num(dh_strbuf_t *b, double v);

/* FNV-1a 64 over the 8 little-endian bytes of v, continuing from h. */
uint64_t dh__fnv_u64(uint64_t h, uint64_t v);
#define DH__FNV_OFFSET 0xcbf29ce484222325ull

/* One op of a profile's "ops" array (profile_io.c): element i of arr. */
dh_status_t dh__prof_op_parse(const dh__jr_t *r, json_t *arr, const dh__jpath_t *at, size_t i,
                              int ncomms, dh_prof_op_t *op);
/* The ops of a compact profile (version 2; profile_read2.c), expanded into p->ops. */
dh_status_t dh__profile_read2(const dh__jr_t *r, json_t *root, dh_profile_t *p);
/* Most allocations one op may list ("allocs", docs/plan-format.md). */
#define DH__MAX_ALLOCS 4096u
/* An op's optional "allocs" (v, NULL when absent; 0 reads as none) into sizes (room for
 * DH__MAX_ALLOCS), *n of them; they must sum to op's mem unless op is a free. */
dh_status_t dh__allocs_parse(const dh__jr_t *r, json_t *v, const dh__jpath_t *at,
                             const dh_prof_op_t *op, int64_t *sizes, size_t *n);
/* Gives op sizes[0..n) (appended to p's pool; none when n is 0). DH_ERR_NOMEM. */
dh_status_t dh__prof_allocs_add(dh_profile_t *p, dh_prof_op_t *op, const int64_t *sizes,
                                size_t n);
/* Writes sizes as a JSON list ("0" when n is 0). */
void dh__allocs_json(dh_strbuf_t *b, const int64_t *sizes, size_t n);

/* Frees what a section owns and zeroes it (the section itself is not freed). */
void dh__plan_section_clear(dh_plan_section_t *s);
/* Appends p as JSON (docs/plan-format.md), in the current version or in the given one.
 * Errors: DH_ERR_NOMEM. */
dh_status_t dh__plan_render(const dh_plan_t *p, dh_strbuf_t *b);
dh_status_t dh__plan_render_version(const dh_plan_t *p, dh_strbuf_t *b, int version);

/* Plan elements (plan_io.c). The parsers read element i of arr, ranges checked against
 * nops; the writers append one element with its indices made relative: op indices less
 * op0, phase indices less ph0, group indices less g0, micro-batches less mb0 (-1 stays),
 * start times less t0. */
dh_status_t dh__plan_phase_parse(const dh__jr_t *r, json_t *arr, const dh__jpath_t *at,
                                 size_t i, size_t nops, dh_plan_phase_t *ph);
dh_status_t dh__plan_op_parse(const dh__jr_t *r, json_t *arr, const dh__jpath_t *at, size_t i,
                              dh_plan_op_t *op);
dh_status_t dh__plan_group_parse(const dh__jr_t *r, json_t *arr, const dh__jpath_t *at,
                                 size_t i, size_t nops, dh_plan_group_t *g);
void dh__plan_phase_json(dh_strbuf_t *b, const dh_plan_phase_t *ph, size_t op0, int ph0, int mb0);
void dh__plan_op_json(dh_strbuf_t *b, const dh_plan_op_t *op, int ph0, int g0);
void dh__plan_group_json(dh_strbuf_t *b, const dh_plan_group_t *g, size_t op0, double t0);
/* A section's keys before its template, and its template in version 1 (flat arrays). */
void dh__plan_section_head_json(dh_strbuf_t *b, const dh_plan_section_t *s);
void dh__plan_flat_json(dh_strbuf_t *b, const dh_plan_section_t *s);
/* A section's "ops", "phases" and "groups" (version 1) into s. */
dh_status_t dh__plan_flat_parse(const dh__jr_t *r, json_t *o, const dh__jpath_t *at,
                                dh_plan_section_t *s);

/* A run of whole phases of a section's template and the groups that cover exactly their
 * ops (plan_blocks.c). */
typedef struct dh__chunk {
    size_t op0, op1;
    int g0, g1, ph0, ph1;
    int mb0;                        /* the smallest micro-batch of its phases, 0 if none */
    double t0;                      /* its first group's start */
} dh__chunk_t;

/* A block: chunk c (its first repetition) and the repeat - 1 chunks after it that repeat it,
 * each mb_step micro-batches and dt microseconds further. */
typedef struct dh__blk {
    dh__chunk_t c;
    size_t repeat;
    int mb_step;
    double dt;
} dh__blk_t;

/* The blocks of s, in template order, covering it; *out malloc'ed (none when s has no
 * groups). Errors: DH_ERR_NOMEM. */
dh_status_t dh__plan_blocks_find(const dh_plan_section_t *s, dh__blk_t **out, int *nout);

/* plan_blocks.c: the template of version 2, as blocks each written once with a repeat
 * count. Errors: DH_ERR_NOMEM (writer); the reader's as the other readers'. */
dh_status_t dh__plan_blocks_json(dh_strbuf_t *b, const dh_plan_section_t *s);
dh_status_t dh__plan_blocks_parse(const dh__jr_t *r, json_t *o, const dh__jpath_t *at,
                                  dh_plan_section_t *s);

/* Monotonic seconds, for planning_s and progress. */
double dh__now_s(void);

/* A profile's JSON up to and including its "comms" array and the comma after it: the format,
 * version, rank, world, layout, host, device and max_connections of p. Both versions'
 * writers (profile_io.c, profile_build.c) start with it. */
void dh__profile_header_json(dh_strbuf_t *s, const dh_profile_t *p, int version);
/* An op's record up to its "flops" (thread, stream, kind, class, sig, shape, name, comm,
 * bytes), without the closing brace: version 2's distinct op, version 1's record's start. */
void dh__profile_op_head_json(dh_strbuf_t *s, const dh_prof_op_t *op);

#endif
