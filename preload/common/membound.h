/*
 * membound.h: the extra-memory bound's value (DHELIX_MAX_EXTRA_MEM, `dhelix plan
 * --max-extra-mem`): a size ("512M", "2G", "1048576") or a percentage of the baseline's
 * peak device memory ("3%"), or "none".
 */
#ifndef DH_MEMBOUND_H
#define DH_MEMBOUND_H

/* What a value says. kind NONE: no bound; BYTES: bytes holds it; PERCENT: pct holds the
 * percentage (0..1000), to be applied to a baseline peak by dh_mem_bound_bytes. */
typedef enum { DH_MEMBOUND_NONE, DH_MEMBOUND_BYTES, DH_MEMBOUND_PERCENT } dh_membound_kind_t;
typedef struct dh_membound {
    dh_membound_kind_t kind;
    double bytes;   /* BYTES: whole bytes, >= 0 */
    double pct;     /* PERCENT: 0..1000 */
} dh_membound_t;

/* Parses s ("" and "none" are no bound; K, M, G, T with optional "i" and "B" are powers of
 * 1024; a trailing "%" a percentage). 0 and *out set, or -1 (out untouched) when s is not
 * one of those. Pure, thread-safe. */
int dh_mem_bound_parse(const char *s, dh_membound_t *out);
/* The bound in bytes for a baseline peak of base_peak bytes: -1 for none, the bytes, or
 * floor(pct / 100 * base_peak) (0 when base_peak is not positive). Pure. */
double dh_mem_bound_bytes(const dh_membound_t *b, double base_peak);

#endif
