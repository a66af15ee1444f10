/*
 * mem.c: the allocation table, device memory and the stream-ordered pool.
 *
 * Every device-visible allocation is a record in one array sorted by base address. Freed
 * allocations stay in the table for a while as tombstones, so that a later access is
 * reported as a use after free rather than as an unknown pointer. Pool blocks freed with
 * cudaFreeAsync wait in a per-device free list; cudaMallocAsync reuses a block freed on the
 * same stream at once (stream order makes that safe, as in CUDA's default pool) and a block
 * freed on another stream once its free has executed, so memory aliasing across streams
 * happens here as it does on a GPU and the hazard detector can see misuse of it.
 *
 * Lock: mem_lock guards everything in this file. It is a leaf: it may be taken with the
 * device lock held, never the other way round.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core.h"

#define VG_TOMBSTONES 8192
#define VG_POOL_ROUND 512
#define VG_RESERVE_CHUNK (64ull << 30) /* address space only (MAP_NORESERVE) */

typedef struct vg_alloc {
    uintptr_t base;
    size_t size;
    vg_mem_kind_t kind;
    int dev;
    uint64_t serial;
    int live;          /* 0: freed (tombstone or pooled) */
    int pooled;        /* in a device's pool free list */
    uint64_t gen;      /* pool: bumped at each reuse, so a stale free is a no-op */
    cudaStream_t free_stream;
    vg_op_t *free_op;  /* pooled: the cudaFreeAsync op, reference held */
} vg_alloc_t;

typedef struct vg_pool_state {
    vg_alloc_t **free;   /* pooled blocks */
    int nfree, cap;
    size_t reserved;     /* device bytes held: live allocations of every kind + pooled */
    size_t live, peak;   /* device bytes in live allocations, all kinds (counters) */
    size_t pool_reserved, pool_reserved_peak; /* the default pool: in use + cached */
    size_t pool_used, pool_used_peak;         /* the default pool: in use */
    int no_opportunistic;  /* cudaMemPoolReuseAllowOpportunistic set to 0 */
    int no_internal;       /* cudaMemPoolReuseAllowInternalDependencies set to 0 */
    int no_events;         /* cudaMemPoolReuseFollowEventDependencies set to 0 */
} vg_pool_state_t;

static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;
static vg_alloc_t **tab;  /* sorted by base */
static size_t ntab, captab;
static vg_alloc_t *tomb[VG_TOMBSTONES];
static size_t ntomb, tomb_next;
static uint64_t serial;
static vg_pool_state_t pools[VG_MAX_DEVICES];
/* Address space for every allocation: reserved PROT_NONE, made accessible per allocation. */
static uintptr_t rsv_next, rsv_end;

/* Index of the last record with base <= p, or -1. */
static long tab_floor(uintptr_t p)
{
    long lo = 0, hi = (long)ntab - 1, best = -1;
    while (lo <= hi) {
        long mid = (lo + hi) / 2;
        if (tab[mid]->base <= p) {
            best = mid;
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    return best;
}

static void tab_remove_at(size_t i)
{
    memmove(&tab[i], &tab[i + 1], (ntab - i - 1) * sizeof *tab);
    ntab--;
}

static void tomb_forget(vg_alloc_t *a)
{
    for (size_t i = 0; i < ntomb; i++) {
        if (tomb[i] == a) {
            tomb[i] = NULL;
        }
    }
}

/* Inserts a; tombstones it overlaps (the address was recycled by the host allocator) go. */
static void tab_insert(vg_alloc_t *a)
{
    long i = tab_floor(a->base + a->size - 1);
    while (i >= 0 && tab[i]->base + tab[i]->size > a->base) {
        vg_alloc_t *old = tab[i];
        if (old->live || old->pooled) {
            vg_msg("internal: allocation #%llu overlaps live #%llu",
                   (unsigned long long)a->serial, (unsigned long long)old->serial);
            abort();
        }
        tab_remove_at((size_t)i);
        tomb_forget(old);
        free(old);
        i--;
    }
    if (ntab == captab) {
        captab = captab ? captab * 2 : 256;
        tab = realloc(tab, captab * sizeof *tab);
        if (!tab) {
            abort();
        }
    }
    size_t pos = (size_t)(tab_floor(a->base) + 1);
    memmove(&tab[pos + 1], &tab[pos], (ntab - pos) * sizeof *tab);
    tab[pos] = a;
    ntab++;
}

/* Gives the pages back but keeps the addresses reserved, so a tombstone never aliases memory
 * the host allocator hands out later (a pointer into it is then a true use after free). */
static void release_backing(vg_alloc_t *a)
{
    size_t len = (a->size + 4095) & ~(size_t)4095;
    mmap((void *)a->base, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED,
         -1, 0);
}

/* Makes a a tombstone; the oldest tombstone beyond the limit leaves the table. */
static void tombstone(vg_alloc_t *a)
{
    a->live = 0;
    vg_alloc_t *old = tomb[tomb_next];
    if (old) {
        long i = tab_floor(old->base);
        if (i >= 0 && tab[i] == old) {
            tab_remove_at((size_t)i);
        }
        free(old);
    } else {
        ntomb = ntomb < VG_TOMBSTONES ? ntomb + 1 : ntomb;
    }
    tomb[tomb_next] = a;
    tomb_next = (tomb_next + 1) % VG_TOMBSTONES;
}

static void *reserve(size_t size)
{
    size = (size + 4095) & ~(size_t)4095;
    if (rsv_next + size > rsv_end) {
        size_t chunk = size > VG_RESERVE_CHUNK ? size : VG_RESERVE_CHUNK;
        void *p = mmap(NULL, chunk, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) {
            return NULL;
        }
        rsv_next = (uintptr_t)p;
        rsv_end = rsv_next + chunk;
    }
    void *r = (void *)rsv_next;
    rsv_next += size;
    return r;
}

/* Every allocation gets fresh addresses from the reservation; real pages unless the memory
 * is device memory in timing-only mode. Zero-filled (deterministic contents). */
static void *backing(size_t size, vg_mem_kind_t kind)
{
    void *p = reserve(size);
    if (!p || (kind != VG_MEM_HOST && vg_config()->timing_only)) {
        return p;
    }
    size_t len = (size + 4095) & ~(size_t)4095;
    return mprotect(p, len, PROT_READ | PROT_WRITE) ? NULL : p;
}

static int counts_on_device(vg_mem_kind_t k) { return k == VG_MEM_DEVICE || k == VG_MEM_POOL || k == VG_MEM_MANAGED; }

/* With VGPU_TRACE: device memory in use after every change, at the host's virtual time of
 * the call that changed it (what the trace's "device memory" counter shows). */
typedef struct mem_sample {
    double t_ns;
    size_t live;
    int dev;
} mem_sample_t;
static mem_sample_t *samples;
static size_t nsamples, capsamples;
static double last_sample_ns;

static void sample(int dev, size_t live, double t_ns)
{
    if (!vg_g.cfg.trace_path[0]) {
        return;
    }
    if (t_ns < 0) {
        t_ns = last_sample_ns; /* cudaMalloc/cudaFree: no clock at hand without the device lock */
    }
    last_sample_ns = t_ns;
    if (nsamples == capsamples) {
        capsamples = capsamples ? capsamples * 2 : 4096;
        samples = realloc(samples, capsamples * sizeof *samples);
        if (!samples) {
            abort();
        }
    }
    samples[nsamples++] = (mem_sample_t){t_ns, live, dev};
}

void vg__mem_trace_write(FILE *f, int rank)
{
    pthread_mutex_lock(&mem_lock);
    for (size_t i = 0; i < nsamples; i++) {
        fprintf(f, ",\n{\"name\":\"device memory (dev %d)\",\"ph\":\"C\",\"pid\":%d,\"ts\":%.3f,"
                "\"args\":{\"MiB\":%.4f}}", samples[i].dev, rank, samples[i].t_ns / 1e3,
                (double)samples[i].live / (1 << 20));
    }
    pthread_mutex_unlock(&mem_lock);
}

/* t_ns: the host's virtual time of the call, < 0 when the caller cannot read it. */
static void account(vg_alloc_t *a, int sign, double t_ns)
{
    if (!counts_on_device(a->kind)) {
        return;
    }
    vg_pool_state_t *ps = &pools[a->dev];
    if (sign > 0) {
        ps->live += a->size;
        ps->peak = ps->live > ps->peak ? ps->live : ps->peak;
    } else {
        ps->live -= a->size;
    }
    sample(a->dev, ps->live, t_ns);
    if (a->kind == VG_MEM_POOL) {
        if (sign > 0) {
            ps->pool_used += a->size;
            ps->pool_used_peak = ps->pool_used > ps->pool_used_peak ? ps->pool_used : ps->pool_used_peak;
        } else {
            ps->pool_used -= a->size;
        }
    }
}

/* Releases pooled blocks whose free has executed until at most keep bytes of the pool stay
 * cached (blocks still awaiting their stream-ordered free are in use by the device). */
static size_t pool_trim(int dev, size_t keep)
{
    vg_pool_state_t *ps = &pools[dev];
    size_t freed = 0;
    for (int i = ps->nfree - 1; i >= 0 && ps->pool_reserved - ps->pool_used > keep; i--) {
        vg_alloc_t *a = ps->free[i];
        if (__atomic_load_n(&a->free_op->state, __ATOMIC_ACQUIRE) != VG_ST_DONE) {
            continue;
        }
        ps->free[i] = ps->free[--ps->nfree];
        a->pooled = 0;
        ps->reserved -= a->size;
        ps->pool_reserved -= a->size;
        freed += a->size;
        vg__op_unref(a->free_op);
        a->free_op = NULL;
        release_backing(a);
        tombstone(a);
    }
    return freed;
}

/* t_ns as account(). */
static cudaError_t alloc_record(void **p, size_t size, vg_mem_kind_t kind, int dev, double t_ns)
{
    const vgpu_profile_t *prof = vg_profile(dev);
    vg_pool_state_t *ps = &pools[dev];
    if (counts_on_device(kind) && ps->reserved + size > prof->mem_bytes) {
        pool_trim(dev, 0);
        if (ps->reserved + size > prof->mem_bytes) {
            return cudaErrorMemoryAllocation;
        }
    }
    vg_device_activate(dev);
    vg_alloc_t *a = calloc(1, sizeof *a);
    void *mem = a ? backing(size, kind) : NULL;
    if (!mem) {
        free(a);
        return cudaErrorMemoryAllocation;
    }
    a->base = (uintptr_t)mem;
    a->size = size;
    a->kind = kind;
    a->dev = dev;
    a->serial = ++serial;
    a->live = 1;
    tab_insert(a);
    if (counts_on_device(kind)) {
        ps->reserved += size;
    }
    if (kind == VG_MEM_POOL) {
        ps->pool_reserved += size;
        if (ps->pool_reserved > ps->pool_reserved_peak) {
            ps->pool_reserved_peak = ps->pool_reserved;
        }
    }
    account(a, +1, t_ns);
    *p = mem;
    return cudaSuccess;
}

cudaError_t vg_mem_alloc(void **p, size_t size, vg_mem_kind_t kind, int dev)
{
    vg__ensure_init();
    if (!p) {
        return cudaErrorInvalidValue;
    }
    if (size == 0) {
        *p = NULL;
        return cudaSuccess;
    }
    pthread_mutex_lock(&mem_lock);
    cudaError_t e = alloc_record(p, size, kind, dev, -1);
    pthread_mutex_unlock(&mem_lock);
    return e;
}

cudaError_t vg_mem_free(void *p, vg_mem_kind_t kind)
{
    if (!p) {
        return cudaSuccess;
    }
    pthread_mutex_lock(&mem_lock);
    long i = tab_floor((uintptr_t)p);
    vg_alloc_t *a = i >= 0 ? tab[i] : NULL;
    if (!a || a->base != (uintptr_t)p || !a->live || (kind && a->kind != kind)) {
        pthread_mutex_unlock(&mem_lock);
        return cudaErrorInvalidValue;
    }
    account(a, -1, -1);
    if (counts_on_device(a->kind)) {
        pools[a->dev].reserved -= a->size;
    }
    if (a->kind == VG_MEM_POOL) {
        pools[a->dev].pool_reserved -= a->size;
    }
    release_backing(a);
    tombstone(a);
    pthread_mutex_unlock(&mem_lock);
    return cudaSuccess;
}

int vg_mem_find(const void *p, size_t len, vg_alloc_info_t *info)
{
    uintptr_t lo = (uintptr_t)p;
    if (len == 0) {
        len = 1;
    }
    pthread_mutex_lock(&mem_lock);
    long i = tab_floor(lo);
    int r = 0;
    if (i >= 0) {
        vg_alloc_t *a = tab[i];
        if (lo < a->base + a->size) {
            r = (a->live ? 1 : -1);
            if (lo + len > a->base + a->size) {
                r = a->live ? 0 : -1; /* runs past the end of the allocation */
            }
            if (info) {
                *info = (vg_alloc_info_t){a->base, a->size, a->kind, a->dev, a->serial};
            }
        }
    }
    pthread_mutex_unlock(&mem_lock);
    return r;
}

void vg_mem_usage(int dev, size_t *now, size_t *peak)
{
    pthread_mutex_lock(&mem_lock);
    *now = pools[dev].live;
    *peak = pools[dev].peak;
    pthread_mutex_unlock(&mem_lock);
}

/* ---- stream-ordered pool ---- */

typedef struct free_payload {
    vg_alloc_t *a;
    uint64_t gen;
} free_payload_t;

/* Runs when the cudaFreeAsync executes in stream order: unless the block was reused in the
 * meantime (same stream), it becomes a freed block, so later access is a use after free. */
void vg__mem_on_free_op(vg_op_t *op)
{
    free_payload_t *fp = op->payload;
    pthread_mutex_lock(&mem_lock);
    if (fp->a->gen == fp->gen && fp->a->pooled) {
        fp->a->live = 0;
    }
    pthread_mutex_unlock(&mem_lock);
}

cudaError_t vg_pool_alloc(void **p, size_t size, cudaStream_t s)
{
    vg__ensure_init();
    if (!p) {
        return cudaErrorInvalidValue;
    }
    if (size == 0) {
        *p = NULL;
        return cudaSuccess;
    }
    size_t rsize = (size + VG_POOL_ROUND - 1) / VG_POOL_ROUND * VG_POOL_ROUND;
    vg_lock();
    cudaError_t err;
    vg_stream_t *st = vg__stream_get(s, &err);
    if (!st) {
        vg_unlock();
        return err;
    }
    pthread_mutex_lock(&mem_lock);
    vg_pool_state_t *ps = &pools[st->dev];
    for (int i = ps->nfree - 1; i >= 0; i--) {
        vg_alloc_t *a = ps->free[i];
        /* The same stream, or (opportunistic) a free that has executed. Event dependencies
         * and internal dependencies are not modelled: the vgpu never reuses through them,
         * which is the pool with both off (vg_pool_policy). */
        if (a->size != rsize ||
            !(a->free_stream == s || (!ps->no_opportunistic && a->free_op->state == VG_ST_DONE))) {
            continue;
        }
        ps->free[i] = ps->free[--ps->nfree];
        a->pooled = 0;
        a->live = 1;
        a->gen++;
        vg__op_unref(a->free_op);
        a->free_op = NULL;
        account(a, +1, vg_g.host_ns); /* the device lock is held */
        *p = (void *)a->base;
        pthread_mutex_unlock(&mem_lock);
        vg_unlock();
        return cudaSuccess;
    }
    err = alloc_record(p, rsize, VG_MEM_POOL, st->dev, vg_g.host_ns);
    pthread_mutex_unlock(&mem_lock);
    vg_unlock();
    return err;
}

cudaError_t vg_pool_free(void *p, cudaStream_t s)
{
    if (!p) {
        return cudaSuccess;
    }
    pthread_mutex_lock(&mem_lock);
    long i = tab_floor((uintptr_t)p);
    vg_alloc_t *a = i >= 0 ? tab[i] : NULL;
    if (!a || a->base != (uintptr_t)p || !a->live || a->pooled) {
        pthread_mutex_unlock(&mem_lock);
        return cudaErrorInvalidValue;
    }
    pthread_mutex_unlock(&mem_lock);

    vg_op_t *op = vg_op_new("cudaFreeAsync", VG_MARKER);
    snprintf(op->name, sizeof op->name, "free #%llu", (unsigned long long)a->serial);
    free_payload_t *fp = vg_op_payload(op, sizeof *fp);
    fp->a = a;
    fp->gen = a->gen;
    op->exec = vg__mem_on_free_op;
    op->exec_always = 1;
    /* The free counts as a write of the block: work of another stream still touching it
     * when the free executes is a hazard (the memory may be handed out again). */
    vg_op_add_range(op, p, a->size, 1);
    vg__op_ref(op);
    cudaError_t e = vg_submit_unchecked(s, op);
    if (e != cudaSuccess) {
        vg__op_unref(op);
        return e;
    }
    pthread_mutex_lock(&mem_lock);
    vg_pool_state_t *ps = &pools[a->dev];
    if (ps->nfree == ps->cap) {
        ps->cap = ps->cap ? ps->cap * 2 : 64;
        ps->free = realloc(ps->free, (size_t)ps->cap * sizeof *ps->free);
        if (!ps->free) {
            abort();
        }
    }
    ps->free[ps->nfree++] = a;
    a->pooled = 1;
    a->free_stream = s;
    a->free_op = op; /* keeps the reference taken above */
    account(a, -1, op->t_issue); /* set by this thread's submit above */
    pthread_mutex_unlock(&mem_lock);
    return cudaSuccess;
}

int vg_pool_policy(int dev, int attr, int set, int value)
{
    if (dev < 0 || dev >= VG_MAX_DEVICES) {
        return -1;
    }
    pthread_mutex_lock(&mem_lock);
    vg_pool_state_t *ps = &pools[dev];
    int *f = attr == 0 ? &ps->no_opportunistic : attr == 1 ? &ps->no_internal : &ps->no_events;
    if (set) {
        *f = !value;
    }
    int v = !*f;
    pthread_mutex_unlock(&mem_lock);
    return v;
}

void vg_pool_trim(int dev, size_t keep)
{
    vg_lock();
    pthread_mutex_lock(&mem_lock);
    pool_trim(dev, keep);
    pthread_mutex_unlock(&mem_lock);
    vg_unlock();
}

void vg_pool_stats(int dev, vg_pool_stats_t *st)
{
    pthread_mutex_lock(&mem_lock);
    const vg_pool_state_t *ps = &pools[dev];
    *st = (vg_pool_stats_t){ps->reserved, ps->pool_reserved, ps->pool_reserved_peak,
                            ps->pool_used, ps->pool_used_peak};
    pthread_mutex_unlock(&mem_lock);
}

void vg_pool_reset_peak(int dev, int reserved)
{
    pthread_mutex_lock(&mem_lock);
    vg_pool_state_t *ps = &pools[dev];
    if (reserved) {
        ps->pool_reserved_peak = ps->pool_reserved;
    } else {
        ps->pool_used_peak = ps->pool_used;
    }
    pthread_mutex_unlock(&mem_lock);
}

/* At an op's start: every declared range must lie in live memory; otherwise the device
 * takes a sticky illegal-address error, as a real one does. */
int vg__mem_check_exec(vg_op_t *op)
{
    for (int i = 0; i < op->nranges; i++) {
        const vg_range_t *r = &op->ranges[i];
        if (r->len == 0) {
            continue;
        }
        vg_alloc_info_t info;
        int f = vg_mem_find((void *)r->lo, r->len, &info);
        if (f == 1) {
            continue;
        }
        if (f == -1) {
            vg_msg("use after free: %s %s %s %zu bytes of allocation #%llu (%zu bytes) after it "
                   "was freed", op->api, op->name, r->write ? "writes" : "reads", r->len,
                   (unsigned long long)info.serial, info.size);
        } else {
            vg_msg("illegal address: %s %s %s %zu bytes at an address outside every live "
                   "allocation", op->api, op->name, r->write ? "writes" : "reads", r->len);
        }
        return -1;
    }
    return 0;
}
