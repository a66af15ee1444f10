/* match.c: one template's ops matched to another's by signature (planner_int.h), with
 * Myers' O((N+M) D) difference algorithm: templates of one program on different ranks
 * differ by a handful of ops (rank 0 loads the data), so D is small; and the sections that
 * mirror section 0 that way. */
#include "planner_int.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* A diagonal that no path of d edits reaches inside the grid. */
#define DH__UNREACHED (LONG_MIN / 4)

/* The frontier: v[k + off] is the furthest x on diagonal k = x - y, for |k| <= max edits. */

/* Row d of the recorded frontiers holds diagonals -d-1..d+1 (2d + 3 entries, what step d
 * reads) and starts at d^2 + 2d: the trace grows with D^2, not with D times the bound. */
static size_t dh__row(long d) { return (size_t)(d * d + 2 * d); }

/* Walks the recorded frontiers back from (na, nb): matched pairs on the diagonals, -1 for
 * ops of b that a lacks. Row d of trace is the frontier before step d. */
static void dh__backtrack(size_t na, size_t nb, const long *trace, long d, long *match)
{
    long x = (long)na, y = (long)nb;
    for (; d > 0; d--) {
        const long *v = trace + dh__row(d) + d + 1;
        long k = x - y;
        long pk = k == -d || (k != d && v[k - 1] < v[k + 1]) ? k + 1 : k - 1;
        long px = v[pk], py = px - pk;
        /* The run of equal ops after the edit. */
        long sx = pk == k + 1 ? px : px + 1, sy = sx - k;
        while (x > sx && y > sy) {
            match[y - 1] = x - 1;
            x--;
            y--;
        }
        if (pk == k + 1)
            match[py] = -1;     /* b's op py is not in a */
        x = px;
        y = py;
    }
    while (x > 0 && y > 0) {
        match[y - 1] = x - 1;
        x--;
        y--;
    }
}

long dh__match_sigs(const uint64_t *a, size_t na, const uint64_t *b, size_t nb,
                    size_t max_edits, long *match)
{
    size_t width = 2 * max_edits + 3;
    long off = (long)max_edits + 1;
    long *frontier = calloc(width, sizeof(*frontier));
    long *trace = malloc(dh__row((long)max_edits + 1) * sizeof(*trace));
    if (frontier == NULL || trace == NULL) {
        free(frontier);
        free(trace);
        return -2;
    }
    long *v = frontier + off, found = -1;
    for (long d = 0; d <= (long)max_edits && found < 0; d++) {
        memcpy(trace + dh__row(d), v - d - 1, (size_t)(2 * d + 3) * sizeof(*frontier));
        for (long k = -d; k <= d; k += 2) {
            long x = k == -d || (k != d && v[k - 1] < v[k + 1]) ? v[k + 1] : v[k - 1] + 1;
            long y = x - k;
            if (x < 0 || x > (long)na || y < 0 || y > (long)nb) {
                v[k] = DH__UNREACHED;   /* off the grid, or from an unreached diagonal */
                continue;
            }
            while (x < (long)na && y < (long)nb && a[x] == b[y]) {
                x++;
                y++;
            }
            v[k] = x;
            if (x == (long)na && y == (long)nb) {
                found = d;
                break;
            }
        }
    }
    if (found >= 0)
        dh__backtrack(na, nb, trace, found, match);
    free(frontier);
    free(trace);
    return found;
}

void dh__mirror_free(dh__mirror_t *m)
{
    for (int k = 0; k < m->ns; k++) {
        if (m->match != NULL)
            free(m->match[k]);
        if (m->alone != NULL)
            free(m->alone[k]);
    }
    free(m->match);
    free(m->alone);
    free(m->root);
    memset(m, 0, sizeof(*m));
}

static uint64_t *dh__sigs(const dh__tmpl_t *t)
{
    uint64_t *s = malloc((t->it.n ? t->it.n : 1) * sizeof(*s));
    for (size_t i = 0; s != NULL && i < t->it.n; i++)
        s[i] = t->ops[i].sig;
    return s;
}

/* Matches section k to root r; 1 when close enough (m->match[k] set, r's lone ops marked),
 * 0 when not, -1 out of memory. */
static int dh__mirror_one(const dh__tmpl_t *const *tmpl, int r, int k, dh__mirror_t *m)
{
    size_t nr = tmpl[r]->it.n, n = tmpl[k]->it.n;
    size_t most = (nr + n) / DH__MIRROR_PER_EDIT;
    most = DH__MIRROR_EDITS + (most < DH__MIRROR_MAX_PER_EDIT ? most : DH__MIRROR_MAX_PER_EDIT);
    uint64_t *a = dh__sigs(tmpl[r]), *b = dh__sigs(tmpl[k]);
    long *match = malloc((n ? n : 1) * sizeof(*match));
    uint8_t *seen = calloc(nr ? nr : 1, 1);
    if (m->alone[r] == NULL)
        m->alone[r] = calloc(nr ? nr : 1, 1);
    long d = a && b && match && seen && m->alone[r] ? dh__match_sigs(a, nr, b, n, most, match)
                                                    : -2;
    free(a);
    free(b);
    if (d >= 0) {
        for (size_t j = 0; j < n; j++)
            if (match[j] >= 0)
                seen[match[j]] = 1;
        for (size_t i = 0; i < nr; i++)
            m->alone[r][i] |= !seen[i];
        m->match[k] = match;
        m->root[k] = r;
    } else {
        free(match);
    }
    free(seen);
    return d >= 0 ? 1 : d == -2 ? -1 : 0;
}

dh_status_t dh__mirror_build(const dh__tmpl_t *const *tmpl, int ns, dh__mirror_t *m)
{
    memset(m, 0, sizeof(*m));
    m->ns = ns;
    m->match = calloc((size_t)ns, sizeof(*m->match));
    m->alone = calloc((size_t)ns, sizeof(*m->alone));
    m->root = calloc((size_t)ns, sizeof(*m->root));
    dh_status_t st = m->match && m->alone && m->root ? DH_OK : DH_ERR_NOMEM;
    for (int k = 0; k < ns && st == DH_OK; k++) {
        m->root[k] = k;
        for (int r = 0; r < k && m->root[k] == k && st == DH_OK; r++)
            if (m->root[r] == r && dh__mirror_one(tmpl, r, k, m) < 0)
                st = DH_ERR_NOMEM;
    }
    if (st != DH_OK)
        dh__mirror_free(m);
    return st;
}
