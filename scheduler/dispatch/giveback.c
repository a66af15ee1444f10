/*
 * giveback.c: an allocation of the program that fails while the shim holds device memory
 * is retried after the shim gives that memory back (DESIGN.md invariant 11, issue 27;
 * declared in scheduler.h).
 *
 * What the shim may hold that the program would not: blocks whose free it captured and has
 * not issued (held for pairing, or released and not reached by the dispatcher), pool memory
 * those frees leave cached once issued, and strand 1's cuBLAS workspace. Each goes back in
 * a way that changes no order another rank could see:
 *
 *   - what is owed: frees the dispatcher may issue already. The program waits for them
 *     (a wait changes when the program gets on, never the order of the work).
 *   - what pairing holds: in plan mode, a pair this rank has not voted on yet is given up
 *     as DHELIX_MAX_EXTRA_MEM gives it up (memacct.c): this rank says no, every rank runs
 *     the rest of the iteration in program order, and what was held goes out with its
 *     frees. A pair already agreed keeps its memory: every rank issues it alike. In stress
 *     mode, which orders each rank's work on its own, everything held goes out.
 *   - what is cached: once the device has finished those frees, the pool's cached memory
 *     goes back to the device (cudaMemPoolTrimTo), as the program's own failed allocation
 *     would have found it without the shim.
 *   - the workspace (workspace.c): freed once the device is done with it, and not taken
 *     again; strand 1's GEMMs then run after strand 0's.
 *
 * Then the caller retries once. A failure of the retry is one the program would have met
 * without the shim: it gets it, at the same call, as the same error.
 */
#include "common/log.h"
#include "real.h"
#include "sched_int.h"
#include "sched_mode.h"

uint64_t dh__give_back_all(void)
{
    dh__flush_to(dh__s.next_seq);
    return dh__s.next_seq;
}

int dh_sched_alloc_failed(size_t size)
{
    const dh_real_t *R = dh_real();
    size_t free0 = 0, total = 0;
    if (R->cudaMemGetInfo == NULL || R->cudaMemGetInfo(&free0, &total) != cudaSuccess)
        free0 = 0;
    pthread_mutex_lock(&dh__s.lock);
    if (!dh__s.started || dh__s.stop) {
        pthread_mutex_unlock(&dh__s.lock);
        return 0;
    }
    uint64_t held0 = dh__s.held_free_bytes;
    const dh_mode_ops_t *m = dh__mode();
    uint64_t target = m->give_back != NULL ? m->give_back() : 0;
    if (target && m->queued != NULL)
        m->queued(); /* a "no" it owes goes out before this thread waits */
    pthread_cond_signal(&dh__s.work);
    /* What is owed: the flush just asked for, and the frees the dispatcher may issue but
     * has not (memacct.c waits for the same before fresh memory). */
    while (dh__s.started && !dh__s.stop && dh__s.low_water < dh__s.next_seq &&
           (dh__s.low_water < target || dh__s.held_free_bytes > dh__s.unc_bytes)) {
        pthread_cond_signal(&dh__s.work);
        pthread_cond_wait(&dh__s.done, &dh__s.lock);
    }
    uint64_t kept = dh__s.held_free_bytes;
    pthread_mutex_unlock(&dh__s.lock);
    uint64_t ws = dh__ws_give_back();
    int dev = 0;
    cudaMemPool_t pool;
    R->cudaDeviceSynchronize();
    if (R->cudaGetDevice(&dev) == cudaSuccess && R->cudaDeviceGetMemPool != NULL &&
        R->cudaMemPoolTrimTo != NULL && R->cudaDeviceGetMemPool(&pool, dev) == cudaSuccess)
        R->cudaMemPoolTrimTo(pool, 0);
    R->cudaGetLastError(); /* the failed allocation's error is the retry's to set or not */
    size_t free1 = 0;
    if (R->cudaMemGetInfo == NULL || R->cudaMemGetInfo(&free1, &total) != cudaSuccess)
        free1 = 0;
    pthread_mutex_lock(&dh__s.lock);
    dh__s.stats.mem_givebacks++;
    pthread_mutex_unlock(&dh__s.lock);
    DH_WARN_ONCE(SCHED, "device memory: an allocation of %zu bytes failed with %zu bytes free "
                 "(it lacked %zu) while the shim held %llu bytes of frees not issued and "
                 "%llu of workspace; gave back what it could (frees issued, pool trimmed, "
                 "workspace freed: %zu bytes free now, %llu bytes of an agreed pair's frees "
                 "kept) and retried%s", size, free0, size > free0 ? size - free0 : 0,
                 (unsigned long long)held0, (unsigned long long)ws, free1,
                 (unsigned long long)kept,
                 target && m->ranks_agree
                     ? "; this iteration runs in program order on every rank from here" : "");
    return 1;
}

void dh_sched_alloc_retried(int ok)
{
    pthread_mutex_lock(&dh__s.lock);
    if (!ok)
        dh__s.stats.mem_giveback_failed++;
    pthread_mutex_unlock(&dh__s.lock);
}
