/*
 * workspace.c: the shim's own cuBLAS/cuBLASLt workspaces (DESIGN.md invariant 11, issue
 * 27; declared in sched_int.h). The dispatcher's, with the give-back of giveback.c.
 *
 * Strand 0 runs in program order on the framework's own stream, so its BLAS ops run on the
 * workspace the framework gave them, as they would without the shim: no op of the other
 * strand touches that buffer (strand 1 runs on a workspace of its own, or after strand 0,
 * below). The shim needs a workspace only for strand 1, and only once a strand-1 BLAS op is
 * replayed, which is when pairing needs it. It is allocated then, of the largest size the
 * framework gave a BLAS op so far (dh__ws_note), and only when the device has it free
 * beside what the program will still take up to its peak so far (the program-order count
 * of modes/memacct.c): a workspace that
 * pushed the program past the device would have to come back at the program's next failed
 * allocation anyway (giveback.c).
 *
 * Without a workspace of its own (no room, an op that needs more than the one allocated,
 * or given back), a strand-1 BLAS op runs on the framework's stream with the framework's
 * workspace, joined with strand 1 before and after (dispatch.c): after every strand-0 op
 * issued before it and every earlier op of its strand, before everything issued after it.
 * The results are the same bits (the library is told the same workspace size, so it
 * chooses the same algorithm); only that op's overlap is lost. A workspace given back is
 * not taken again: the memory it needs is what the program lacked.
 *
 * Thread-safety: dh__ws_lock guards the table. The dispatcher holds it from choosing a
 * workspace until the op using it is enqueued (dh__ws_bind .. dh__ws_done), so a give-back
 * that holds it knows that every op using the workspace is enqueued, waits for the device
 * and only then frees it. Lock order: dh__s.lock, then dh__ws_lock.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "common/log.h"
#include "real.h"
#include "sched_int.h"

typedef struct dh__ws {
    void *ptr;      /* strand 1's workspace on this device, or NULL */
    size_t size;
} dh__ws_t;

static pthread_mutex_t dh__ws_lock = PTHREAD_MUTEX_INITIALIZER;
static dh__ws_t dh__ws[DH_MAX_DEVICES]; /* guarded by dh__ws_lock */
static int dh__ws_given_back;           /* guarded by dh__ws_lock: none is taken again */
static _Atomic uint64_t dh__ws_now;     /* bytes allocated now (any thread reads) */
static _Atomic uint64_t dh__ws_serial;  /* strand-1 BLAS ops run after strand 0 */
static _Atomic uint64_t dh__ws_refused; /* allocations not made: the device had no room */
static _Atomic uint64_t dh__ws_peak;    /* most bytes allocated at once */
static _Atomic uint64_t dh__ws_max;     /* the largest workspace the framework gave a BLAS op
                                           submitted so far (program order) */

void dh__ws_note(const dh_op_t *op)
{
    const dh_op_kind_ops_t *k = dh_op_kind_ops(op->kind);
    uint64_t need = k != NULL && k->workspace != NULL ? k->workspace(op) : 0;
    uint64_t cur = atomic_load_explicit(&dh__ws_max, memory_order_relaxed);
    while (need > cur &&
           !atomic_compare_exchange_weak_explicit(&dh__ws_max, &cur, need, memory_order_relaxed,
                                                  memory_order_relaxed))
        ;
}

uint64_t dh__ws_seen(void) { return atomic_load_explicit(&dh__ws_max, memory_order_relaxed); }

uint64_t dh__sched_ws_bytes(void)
{
    return atomic_load_explicit(&dh__ws_now, memory_order_relaxed);
}

void dh__ws_stats(uint64_t *serialised, uint64_t *refused, uint64_t *peak)
{
    *peak = atomic_load_explicit(&dh__ws_peak, memory_order_relaxed);
    *serialised = atomic_load_explicit(&dh__ws_serial, memory_order_relaxed);
    *refused = atomic_load_explicit(&dh__ws_refused, memory_order_relaxed);
}

/* The highest the program held so far by the program-order count (with what pairing held
 * then): what it will take again. Lock NOT held. */
static int64_t dh__ws_program_top(void)
{
    pthread_mutex_lock(&dh__s.lock);
    int64_t top = dh__s.held_peak > dh__s.live_peak ? dh__s.held_peak : dh__s.live_peak;
    pthread_mutex_unlock(&dh__s.lock);
    return top;
}

/* Device dev's default pool: its reserved bytes and those in use (0 and 0 when unknown). */
static void dh__ws_pool(long dev, size_t *reserved, size_t *used)
{
    const dh_real_t *R = dh_real();
    cudaMemPool_t pool;
    unsigned long long res = 0, u = 0;
    *reserved = *used = 0;
    if (R->cudaDeviceGetMemPool == NULL || R->cudaMemPoolGetAttribute == NULL ||
        R->cudaDeviceGetMemPool(&pool, (int)dev) != cudaSuccess ||
        R->cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &res) != cudaSuccess ||
        R->cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &u) != cudaSuccess) {
        R->cudaGetLastError();
        return;
    }
    *reserved = (size_t)res;
    *used = (size_t)(u < res ? u : res);
}

static void dh__ws_pool_trim(long dev)
{
    const dh_real_t *R = dh_real();
    cudaMemPool_t pool;
    if (R->cudaDeviceGetMemPool != NULL && R->cudaMemPoolTrimTo != NULL &&
        R->cudaDeviceGetMemPool(&pool, (int)dev) == cudaSuccess)
        R->cudaMemPoolTrimTo(pool, 0);
    R->cudaGetLastError();
}

/* dh__ws_lock held. Allocates w (need bytes) when the device has them free now (the
 * stream-ordered pool's cache included: it goes back to the device first) and when they fit
 * beside the program at its peak so far (top, by the program-order count): the memory
 * outside the pool (cudaMalloc, the libraries' own) plus top plus need within the device.
 * The peak is the count's, not a reading of the device now: the device also holds frees the
 * dispatcher has not issued and frees issued that it has not run, which pass (memacct.c
 * makes a fresh allocation wait for the former; the pool reuses the latter in stream order);
 * counted as taken, they refused the workspace at gpt-6.7b-a40's baseline peak + 0.5% by
 * 14-20 MB of a 66 MiB headroom, and SI lost there. A device that runs short anyway gets the
 * workspace back at the program's failed allocation (giveback.c). Says once why not. */
static void dh__ws_alloc(dh__ws_t *w, size_t need, int64_t top)
{
    const dh_real_t *R = dh_real();
    long dev = (long)(w - dh__ws);
    size_t freeb = 0, total = 0, res = 0, used = 0;
    if (R->cudaMemGetInfo == NULL || R->cudaMemGetInfo(&freeb, &total) != cudaSuccess)
        return;
    dh__ws_pool(dev, &res, &used);
    size_t cache = res - used;
    double outside = (double)total - (double)freeb - (double)res;
    double lacked = (double)need - (double)freeb - (double)cache;
    double beside = outside + (double)top + (double)need - (double)total;
    if (beside > lacked)
        lacked = beside;
    if (lacked <= 0 && freeb < need) {
        dh__ws_pool_trim(dev);
        if (R->cudaMemGetInfo(&freeb, &total) != cudaSuccess)
            freeb = 0;
    }
    if (lacked > 0 || R->cudaMalloc(&w->ptr, need) != cudaSuccess) {
        R->cudaGetLastError(); /* the shim's failure is not the program's last error */
        w->ptr = NULL;
        atomic_fetch_add_explicit(&dh__ws_refused, 1, memory_order_relaxed);
        DH_WARN_ONCE(SCHED, "device memory: no room for strand 1's cuBLAS workspace (%zu bytes "
                     "needed; the device has %zu bytes, %zu free and %zu cached by the pool, "
                     "%.0f outside the pool, and the program's peak so far is %lld: it lacked "
                     "%.0f): strand 1's GEMMs run after strand 0's (exact; that overlap is "
                     "lost)", need, total, freeb, cache, outside, (long long)top,
                     lacked > 0 ? lacked : 0.0);
        return;
    }
    w->size = need;
    uint64_t now = atomic_fetch_add_explicit(&dh__ws_now, need, memory_order_relaxed) + need;
    if (now > atomic_load_explicit(&dh__ws_peak, memory_order_relaxed))
        atomic_store_explicit(&dh__ws_peak, now, memory_order_relaxed);
    DH_INFO(SCHED, "strand 1's cuBLAS workspace: %zu bytes (%zu were free)", need, freeb);
}

int dh__ws_bind(const dh_op_t *op, int strand, dh_replay_ctx_t *ctx)
{
    const dh_op_kind_ops_t *k = dh_op_kind_ops(op->kind);
    size_t need = k != NULL && k->workspace != NULL ? k->workspace(op) : 0;
    ctx->workspace = NULL;
    ctx->workspace_size = 0;
    int64_t top = strand == 1 && need > 0 ? dh__ws_program_top() : 0;
    pthread_mutex_lock(&dh__ws_lock);
    if (strand == 0 || need == 0)
        return 0; /* the framework's own workspace, or none */
    dh__ws_t *w = &dh__ws[op->device];
    /* As large as the largest the framework gave so far: a later op that needs more than
     * the first would otherwise run after strand 0 for good. */
    size_t most = (size_t)dh__ws_seen();
    if (w->ptr == NULL && !dh__ws_given_back)
        dh__ws_alloc(w, most > need ? most : need, top);
    if (w->ptr != NULL && w->size >= need) {
        ctx->workspace = w->ptr;
        ctx->workspace_size = w->size;
        return 0;
    }
    atomic_fetch_add_explicit(&dh__ws_serial, 1, memory_order_relaxed);
    return 1;
}

void dh__ws_done(void) { pthread_mutex_unlock(&dh__ws_lock); }

uint64_t dh__ws_give_back(void)
{
    const dh_real_t *R = dh_real();
    uint64_t bytes = 0;
    int cur = -1;
    pthread_mutex_lock(&dh__ws_lock);
    for (int dev = 0; dev < DH_MAX_DEVICES; dev++) {
        dh__ws_t *w = &dh__ws[dev];
        if (w->ptr == NULL)
            continue;
        if (cur < 0)
            R->cudaGetDevice(&cur);
        /* Every op that used it is enqueued (the lock): once the device is done with them,
         * nothing reads it. */
        R->cudaSetDevice(dev);
        R->cudaDeviceSynchronize();
        R->cudaFree(w->ptr);
        bytes += w->size;
        atomic_fetch_sub_explicit(&dh__ws_now, w->size, memory_order_relaxed);
        w->ptr = NULL;
        w->size = 0;
        /* The program lacked memory while this workspace held it: none is taken again. */
        dh__ws_given_back = 1;
    }
    if (cur >= 0)
        R->cudaSetDevice(cur);
    pthread_mutex_unlock(&dh__ws_lock);
    return bytes;
}
