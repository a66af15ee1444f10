/*
 * sched_error.c: errors that come back later than the call (DESIGN.md invariant 8). A
 * deferred call returns at the call what the real call would; a failure the replay meets
 * is kept until a call that reports such failures takes it (cudaGetLastError,
 * cudaPeekAtLastError, a synchronisation), as the runtime's own sticky and pending errors.
 */
#include <stdatomic.h>

#include "sched_int.h"

/* Nonzero while an error is pending: the wrappers' fast path reads it without the lock
 * (cudaGetLastError follows every kernel launch in PyTorch). */
static _Atomic int dh__error_flag;

void dh__sched_error_note(int cuda_err, const char *what)
{
    if (!dh__s.pending_error) {
        dh__s.pending_error = cuda_err;
        dh__s.pending_what = what;
        atomic_store_explicit(&dh__error_flag, 1, memory_order_release);
    }
}

static int dh__error_get(int take)
{
    if (!atomic_load_explicit(&dh__error_flag, memory_order_acquire))
        return 0;
    pthread_mutex_lock(&dh__s.lock);
    int err = dh__s.pending_error;
    if (take) {
        dh__s.pending_error = 0;
        atomic_store_explicit(&dh__error_flag, 0, memory_order_relaxed);
    }
    pthread_mutex_unlock(&dh__s.lock);
    return err;
}

int dh_sched_error_take(void) { return dh__error_get(1); }

void dh_sched_count_rejected(int invalid)
{
    pthread_mutex_lock(&dh__s.lock);
    if (invalid)
        dh__s.stats.call_rejects++;
    else
        dh__s.stats.call_learns++;
    pthread_mutex_unlock(&dh__s.lock);
}

int dh_sched_error_peek(void) { return dh__error_get(0); }

/* Whether CUDA returns e from every call after it (the context is lost): the shim then
 * forwards everything (dh_sched_poisoned). */
int dh_sched_sticky_error(int e)
{
    switch (e) {
    case cudaErrorIllegalAddress: case cudaErrorLaunchFailure: case cudaErrorLaunchTimeout:
    case cudaErrorHardwareStackError: case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress: case cudaErrorInvalidAddressSpace: case cudaErrorInvalidPc:
    case cudaErrorAssert: case cudaErrorECCUncorrectable: case cudaErrorContextIsDestroyed:
        return 1;
    default:
        return 0;
    }
}
