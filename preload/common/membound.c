/* membound.c: parsing the extra-memory bound (membound.h). */
#include "common/membound.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <strings.h>

int dh_mem_bound_parse(const char *s, dh_membound_t *out)
{
    if (s == NULL || *s == '\0' || strcasecmp(s, "none") == 0) {
        *out = (dh_membound_t){DH_MEMBOUND_NONE, -1, 0};
        return 0;
    }
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    /* strtod takes "inf", "nan" and hex floats: only plain decimals are sizes here. */
    if (end == s || errno != 0 || !isfinite(v) || v < 0 || (s[0] != '.' && (s[0] < '0' || s[0] > '9')))
        return -1;
    for (const char *c = s; c < end; c++)
        if (*c == 'x' || *c == 'X' || *c == 'e' || *c == 'E' || *c == 'p' || *c == 'P')
            return -1;
    if (end[0] == '%' && end[1] == '\0') {
        if (v > 1000)
            return -1;
        *out = (dh_membound_t){DH_MEMBOUND_PERCENT, -1, v};
        return 0;
    }
    double scale = 1;
    switch (*end) {
    case 'k': case 'K': scale = 1024.0; end++; break;
    case 'm': case 'M': scale = 1048576.0; end++; break;
    case 'g': case 'G': scale = 1073741824.0; end++; break;
    case 't': case 'T': scale = 1099511627776.0; end++; break;
    default: break;
    }
    if (scale > 1 && (*end == 'i' || *end == 'I'))
        end++;
    if (*end == 'b' || *end == 'B')
        end++;
    if (*end != '\0' || v * scale > 1e18)
        return -1;
    *out = (dh_membound_t){DH_MEMBOUND_BYTES, floor(v * scale), 0};
    return 0;
}

double dh_mem_bound_bytes(const dh_membound_t *b, double base_peak)
{
    switch (b->kind) {
    case DH_MEMBOUND_BYTES: return b->bytes;
    case DH_MEMBOUND_PERCENT: return base_peak > 0 ? floor(b->pct / 100.0 * base_peak) : 0;
    default: return -1;
    }
}
