/* memtab.c: live stream-ordered allocations as a sorted array (see memtab.h). */
#include "memtab.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct dh__alloc {
    uintptr_t lo;
    size_t len;
    uint64_t born;
    int strand;
} dh__alloc_t;

static pthread_mutex_t dh__mt_lock = PTHREAD_MUTEX_INITIALIZER;
static dh__alloc_t *dh__mt;  /* guarded by dh__mt_lock, sorted by lo, disjoint */
static size_t dh__mt_n, dh__mt_cap;

/* Lock held: index of the first entry with lo > p. */
static size_t dh__upper(uintptr_t p)
{
    size_t a = 0, b = dh__mt_n;
    while (a < b) {
        size_t m = a + (b - a) / 2;
        if (dh__mt[m].lo <= p)
            a = m + 1;
        else
            b = m;
    }
    return a;
}

void dh_memtab_add(uintptr_t p, size_t size, uint64_t born, int strand)
{
    if (!p || !size)
        return;
    pthread_mutex_lock(&dh__mt_lock);
    size_t i = dh__upper(p);
    /* Drop stale entries the new range overlaps. */
    size_t first = i > 0 && dh__mt[i - 1].lo + dh__mt[i - 1].len > p ? i - 1 : i, last = i;
    while (last < dh__mt_n && dh__mt[last].lo < p + size)
        last++;
    if (last > first) {
        memmove(dh__mt + first, dh__mt + last, (dh__mt_n - last) * sizeof *dh__mt);
        dh__mt_n -= last - first;
        i = first;
    }
    if (dh__mt_n == dh__mt_cap) {
        size_t cap = dh__mt_cap ? dh__mt_cap * 2 : 1024;
        dh__alloc_t *g = realloc(dh__mt, cap * sizeof *g);
        if (!g) {
            pthread_mutex_unlock(&dh__mt_lock);
            return; /* unknown memory is only compared by pointer: still safe for copies */
        }
        dh__mt = g;
        dh__mt_cap = cap;
    }
    memmove(dh__mt + i + 1, dh__mt + i, (dh__mt_n - i) * sizeof *dh__mt);
    dh__mt[i] = (dh__alloc_t){p, size, born, strand};
    dh__mt_n++;
    pthread_mutex_unlock(&dh__mt_lock);
}

size_t dh_memtab_remove(uintptr_t p)
{
    size_t n = 0;
    pthread_mutex_lock(&dh__mt_lock);
    size_t i = dh__upper(p);
    if (i > 0 && dh__mt[i - 1].lo == p) {
        n = dh__mt[i - 1].len;
        memmove(dh__mt + i - 1, dh__mt + i, (dh__mt_n - i) * sizeof *dh__mt);
        dh__mt_n--;
    }
    pthread_mutex_unlock(&dh__mt_lock);
    return n;
}

int dh_memtab_find(uintptr_t p, uintptr_t *lo, size_t *len, uint64_t *born, int *strand)
{
    int found = 0;
    pthread_mutex_lock(&dh__mt_lock);
    size_t i = dh__upper(p);
    if (i > 0 && p - dh__mt[i - 1].lo < dh__mt[i - 1].len) {
        *lo = dh__mt[i - 1].lo;
        *len = dh__mt[i - 1].len;
        if (born)
            *born = dh__mt[i - 1].born;
        if (strand)
            *strand = dh__mt[i - 1].strand;
        found = 1;
    }
    pthread_mutex_unlock(&dh__mt_lock);
    return found;
}

size_t dh_memtab_count(void)
{
    pthread_mutex_lock(&dh__mt_lock);
    size_t n = dh__mt_n;
    pthread_mutex_unlock(&dh__mt_lock);
    return n;
}
