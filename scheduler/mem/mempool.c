/* mempool.c: parked blocks of captured frees and their reuse in issue order (mempool.h). */
#include "mempool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include <uthash.h>

#include "breaks.h"
#include "common/log.h"
#include "real.h"

typedef enum { DH__BLK_PARKED, DH__BLK_TAKEN } dh__blk_state_t;

typedef struct dh__blk {
    void *ptr;
    size_t size;
    int device;
    cudaStream_t stream;          /* the framework stream of the free */
    int strand;
    uint64_t group;
    dh_op_t *op;                  /* the free op; alive while PARKED (its replay releases) */
    dh__blk_state_t state;
    struct dh__blk *prev, *next;  /* its size's parked list, newest first, while PARKED */
    struct dh__bucket *bucket;
} dh__blk_t;

/* The parked blocks of one size: an allocation only ever takes a block of its own size, so
 * it looks at these alone (the framework's temporaries come in a few sizes, and hundreds of
 * frees can be parked at once: a scan of all of them was on every cudaMallocAsync). */
typedef struct dh__bucket {
    size_t size;
    dh__blk_t *head;              /* newest first */
    UT_hash_handle hh;
} dh__bucket_t;

static pthread_mutex_t dh__mp_lock = PTHREAD_MUTEX_INITIALIZER;
static dh__bucket_t *dh__mp_sizes;   /* guarded by dh__mp_lock: buckets by size (kept when
                                        empty: a size comes back) */
static uint64_t dh__mp_parked;       /* guarded by dh__mp_lock: their bytes */
static dh_mpool_stats_t dh__mp_st;   /* guarded by dh__mp_lock */

int dh_mpool_rule(int strand, uint64_t group, cudaStream_t fstream, int device,
                  const dh_mpool_where_t *w)
{
    if (device != w->device || fstream != w->stream)
        return 0;
    if (strand == w->strand)
        return 1;
    /* The test break pool_barrier lets the other strand take it in the same group (no
     * barrier between the old uses and the new ones). */
    if (w->group_known && (w->group > group || dh_break(DH_BREAK_POOL_BARRIER)))
        return 2;
    return 0;
}

static void dh__unlink(dh__blk_t *b)
{
    if (b->prev)
        b->prev->next = b->next;
    else
        b->bucket->head = b->next;
    if (b->next)
        b->next->prev = b->prev;
    b->prev = b->next = NULL;
    dh__mp_parked -= b->size;
}

void dh_mpool_park(dh_op_t *op, void *ptr, size_t size)
{
    op->pool_blk = NULL;
    if (!ptr || !size)
        return;
    dh__blk_t *b = malloc(sizeof *b);
    if (!b)
        return;
    *b = (dh__blk_t){ptr, size, op->device, op->stream, op->strand, op->group, op,
                     DH__BLK_PARKED, NULL, NULL, NULL};
    pthread_mutex_lock(&dh__mp_lock);
    dh__bucket_t *k;
    HASH_FIND(hh, dh__mp_sizes, &size, sizeof size, k);
    if (!k) {
        if (!(k = calloc(1, sizeof *k))) {
            pthread_mutex_unlock(&dh__mp_lock);
            free(b);
            return;
        }
        k->size = size;
        HASH_ADD(hh, dh__mp_sizes, size, sizeof k->size, k);
    }
    b->bucket = k;
    b->next = k->head;
    if (k->head)
        k->head->prev = b;
    k->head = b;
    dh__mp_parked += size;
    if (dh__mp_parked > dh__mp_st.parked_bytes_peak)
        dh__mp_st.parked_bytes_peak = dh__mp_parked;
    pthread_mutex_unlock(&dh__mp_lock);
    op->pool_blk = b;
}

void *dh_mpool_take(size_t size, const dh_mpool_where_t *w, uint64_t *freed_bytes,
                    uint64_t *freed_group)
{
    *freed_bytes = 0;
    *freed_group = 0;
    pthread_mutex_lock(&dh__mp_lock);
    /* The newest block its own strand freed (the one a stream-ordered allocator would hand
     * back first), else the oldest the other strand may take (the furthest behind a
     * barrier). */
    dh__blk_t *same = NULL, *cross = NULL;
    int other = 0;
    dh__bucket_t *k;
    HASH_FIND(hh, dh__mp_sizes, &size, sizeof size, k);
    for (dh__blk_t *b = k ? k->head : NULL; b; b = b->next) {
        int r = dh_mpool_rule(b->strand, b->group, b->stream, b->device, w);
        if (r == 1) {
            same = b;
            break;
        }
        if (r == 2)
            cross = b;
        else if (b->device == w->device && b->stream == w->stream)
            other = 1;
    }
    dh__blk_t *b = same ? same : cross;
    void *p = NULL;
    if (b) {
        dh__unlink(b);
        b->state = DH__BLK_TAKEN;
        *freed_bytes = b->op->free_bytes;
        *freed_group = b->group;
        b->op->free_bytes = 0;
        p = b->ptr;
        if (same) {
            dh__mp_st.reuse_same++;
            dh__mp_st.reuse_same_bytes += size;
        } else {
            dh__mp_st.reuse_cross++;
            dh__mp_st.reuse_cross_bytes += size;
        }
    } else {
        dh__mp_st.fresh++;
        dh__mp_st.fresh_bytes += size;
        dh__mp_st.refused_cross += (uint64_t)other;
    }
    pthread_mutex_unlock(&dh__mp_lock);
    return p;
}

int dh_mpool_release(dh_op_t *op)
{
    dh__blk_t *b = op->pool_blk;
    if (!b)
        return 0;
    op->pool_blk = NULL;
    pthread_mutex_lock(&dh__mp_lock);
    int taken = b->state == DH__BLK_TAKEN;
    if (!taken)
        dh__unlink(b);
    pthread_mutex_unlock(&dh__mp_lock);
    free(b);
    return taken;
}

void dh_mpool_policy(int device)
{
    static _Atomic unsigned char done[256];
    if (device < 0 || device >= 256 || atomic_exchange(&done[device], 1))
        return;
    const dh_real_t *R = dh_real();
    cudaMemPool_t pool;
    int off = 0;
    if (!R->cudaDeviceGetMemPool || !R->cudaMemPoolSetAttribute ||
        R->cudaDeviceGetMemPool(&pool, device) != cudaSuccess ||
        R->cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowInternalDependencies, &off) !=
            cudaSuccess) {
        DH_WARN(SCHED, "device %d: could not turn off the memory pool's internal dependencies; "
                "an allocation may make one strand wait for the other", device);
        return;
    }
    DH_INFO(SCHED, "device %d: memory pool reuse without internal dependencies", device);
}

void dh_mpool_stats(dh_mpool_stats_t *out, uint64_t *parked_now)
{
    pthread_mutex_lock(&dh__mp_lock);
    *out = dh__mp_st;
    *parked_now = dh__mp_parked;
    pthread_mutex_unlock(&dh__mp_lock);
}
