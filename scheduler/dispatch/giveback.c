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
 *   - the workspace (workspace.c), in a second round only, when the retry after the
 *     above failed too: freed once the device is done with it, and not taken again;
 *     strand 1's GEMMs then run after strand 0's.
 *
 * The caller retries after each round (DH_SCHED_RETRY_ALLOC). A failure of the retry is one the program would have met
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

/* Round 1: the workspaces (workspace.c), which the program needs more than pairing does.
 * Round 0 keeps them: most failures on a full device come from the frees the device still
 * holds (owed, or issued and not run yet), and a workspace given back is not taken again. */
static int dh__give_back_ws(size_t size)
{
    uint64_t ws = dh__ws_give_back();
    if (!ws)
        return 0;
    const dh_real_t *R = dh_real();
    R->cudaGetLastError();
    size_t free1 = 0, total = 0;
    if (R->cudaMemGetInfo == NULL || R->cudaMemGetInfo(&free1, &total) != cudaSuccess)
        free1 = 0;
    pthread_mutex_lock(&dh__s.lock);
    dh__s.stats.mem_giveback_ws++;
    pthread_mutex_unlock(&dh__s.lock);
    DH_WARN_ONCE(SCHED, "device memory: an allocation of %zu bytes failed again after the "
                 "shim gave back its frees and the pool's cache: strand 1's cuBLAS workspace "
                 "(%llu bytes) given back for good (%zu bytes free now) and retried; strand "
                 "1's GEMMs run after strand 0's from here (exact; that overlap is lost)",
                 size, (unsigned long long)ws, free1);
    return 1;
}

/* Waits for the device, then gives the pool's cache back to it (cudaMemPoolTrimTo):
 * issued frees return to the pool only when the device runs them, as the program's own
 * failed allocation would have found them without the shim. */
static void dh__settle_device(void)
{
    const dh_real_t *R = dh_real();
    int dev = 0;
    cudaMemPool_t pool;
    R->cudaDeviceSynchronize();
    if (R->cudaGetDevice(&dev) == cudaSuccess && R->cudaDeviceGetMemPool != NULL &&
        R->cudaMemPoolTrimTo != NULL && R->cudaDeviceGetMemPool(&pool, dev) == cudaSuccess)
        R->cudaMemPoolTrimTo(pool, 0);
    R->cudaGetLastError(); /* the failed allocation's error is the retry's to set or not */
}

static size_t dh__free_now(void)
{
    const dh_real_t *R = dh_real();
    size_t f = 0, total = 0;
    if (R->cudaMemGetInfo == NULL || R->cudaMemGetInfo(&f, &total) != cudaSuccess)
        f = 0;
    return f;
}

/* Lock held: waits until the dispatcher has replayed every op below target and every free
 * it may issue (those of released groups: what is owed; memacct.c waits for the same
 * before fresh memory). */
static void dh__wait_owed(uint64_t target)
{
    while (dh__s.started && !dh__s.stop && dh__s.low_water < dh__s.next_seq &&
           (dh__s.low_water < target || dh__s.held_free_bytes > dh__s.unc_bytes)) {
        pthread_cond_signal(&dh__s.work);
        pthread_cond_wait(&dh__s.done, &dh__s.lock);
    }
}

/* Round 0: what is owed, then the device and the pool. Changes nothing any rank could
 * see: the program waits (for the dispatcher, for the device), the order stays. On a
 * device filled to the baseline's peak + 0.5..2% (gpt-6.7b-a40), almost every failure is
 * of this kind (frees the dispatcher had not issued, or the device had not run), and a
 * give-back that also gave up the pair under way paired next to nothing (1.000x). */
static int dh__give_back_owed(size_t size)
{
    size_t free0 = dh__free_now();
    pthread_mutex_lock(&dh__s.lock);
    if (!dh__s.started || dh__s.stop) {
        pthread_mutex_unlock(&dh__s.lock);
        return 0;
    }
    uint64_t held0 = dh__s.held_free_bytes;
    pthread_cond_signal(&dh__s.work);
    dh__wait_owed(0);
    uint64_t kept = dh__s.held_free_bytes;
    pthread_mutex_unlock(&dh__s.lock);
    dh__settle_device();
    size_t free1 = dh__free_now();
    pthread_mutex_lock(&dh__s.lock);
    dh__s.stats.mem_givebacks++;
    pthread_mutex_unlock(&dh__s.lock);
    DH_WARN_ONCE(SCHED, "device memory: an allocation of %zu bytes failed with %zu bytes free "
                 "(it lacked %zu) while the shim held %llu bytes of frees not issued and "
                 "%llu of workspace; gave back what it owed (frees issued, device "
                 "synchronised, pool trimmed: %zu bytes free now, %llu bytes held for "
                 "pairing kept) and retried (if that fails: the pair under way, then the "
                 "workspace)", size, free0, size > free0 ? size - free0 : 0,
                 (unsigned long long)held0, (unsigned long long)dh__sched_ws_bytes(), free1,
                 (unsigned long long)kept);
    return 1;
}

/* Round 1: what pairing holds (the mode's give_back: a pair not agreed yet is given up by
 * a "no", a job of one rank and stress mode issue all they hold). 0 when it held
 * nothing it could give. */
static int dh__give_back_pair(size_t size)
{
    size_t free0 = dh__free_now();
    pthread_mutex_lock(&dh__s.lock);
    if (!dh__s.started || dh__s.stop) {
        pthread_mutex_unlock(&dh__s.lock);
        return 0;
    }
    uint64_t held0 = dh__s.held_free_bytes;
    const dh_mode_ops_t *m = dh__mode();
    uint64_t target = m->give_back != NULL ? m->give_back() : 0;
    if (!target) {
        pthread_mutex_unlock(&dh__s.lock);
        return 0;
    }
    if (m->queued != NULL)
        m->queued(); /* a "no" it owes goes out before this thread waits */
    pthread_cond_signal(&dh__s.work);
    dh__wait_owed(target);
    uint64_t kept = dh__s.held_free_bytes;
    dh__s.stats.mem_giveback_pair++;
    pthread_mutex_unlock(&dh__s.lock);
    dh__settle_device();
    DH_WARN_ONCE(SCHED, "device memory: an allocation of %zu bytes failed again (%zu bytes "
                 "free, it lacked %zu) after the shim gave back what it owed: gave up the "
                 "pairing under way (%llu bytes of frees held; %llu kept by a pair already "
                 "agreed, %zu bytes free now) and retried%s", size, free0,
                 size > free0 ? size - free0 : 0, (unsigned long long)held0,
                 (unsigned long long)kept, dh__free_now(),
                 m->ranks_agree ? "; this iteration runs in program order on every rank "
                                  "from here" : "");
    return 1;
}

int dh_sched_alloc_failed(size_t size, int round)
{
    if (!dh_sched_mirroring())
        return 0;
    switch (round) {
    case 0:
        return dh__give_back_owed(size);
    case 1:
        if (dh__give_back_pair(size))
            return 1;
        return dh__give_back_ws(size);
    case 2:
        return dh__give_back_ws(size);
    default:
        return 0;
    }
}

void dh_sched_alloc_retried(int ok)
{
    pthread_mutex_lock(&dh__s.lock);
    if (!ok)
        dh__s.stats.mem_giveback_failed++;
    pthread_mutex_unlock(&dh__s.lock);
}
