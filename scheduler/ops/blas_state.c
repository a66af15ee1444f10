/*
 * blas_state.c: the shim's mirror of framework cuBLAS handles (op.h, dh_blas_state_*).
 *
 * PyTorch sets the stream, workspace and math mode of its handle before EVERY GEMM, so
 * the setters and the getter are on the hot path. Handles are few (one per thread and
 * device) and live long: entries are kept in a bucket array of singly linked lists that
 * only ever grow (a destroyed handle's entry is reset to the defaults, ready for the next
 * handle at that address). Lookups are lock-free; the first sighting of a handle inserts
 * under dh__bs_insert_lock; each entry's state is guarded by its own mutex, which is
 * uncontended unless two threads share one handle.
 *
 * Lock order: dh__bs_insert_lock is never held while an entry lock is taken.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/log.h"
#include "op.h"

typedef struct dh__bs_entry {
    struct dh__bs_entry *next; /* bucket chain; immutable once published */
    cublasHandle_t handle;
    pthread_mutex_t lock;
    dh_blas_state_t st;        /* guarded by lock */
} dh__bs_entry_t;

#define DH__BS_BITS 8
static _Atomic(dh__bs_entry_t *) dh__bs[1u << DH__BS_BITS];
static pthread_mutex_t dh__bs_insert_lock = PTHREAD_MUTEX_INITIALIZER;

/* What a new handle has, as cuBLAS documents: default math, host pointer mode, no atomics,
 * the default stream and the library's default workspace (no user workspace). */
static const dh_blas_state_t dh__bs_defaults = {
    .stream = NULL,
    .workspace = NULL,
    .workspace_size = 0,
    .math = CUBLAS_DEFAULT_MATH,
    .pointer = CUBLAS_POINTER_MODE_HOST,
    .atomics = CUBLAS_ATOMICS_NOT_ALLOWED,
    .emulation = CUBLAS_EMULATION_STRATEGY_DEFAULT,
};

static size_t dh__bs_hash(cublasHandle_t h)
{
    uint64_t x = (uint64_t)(uintptr_t)h * 0x9E3779B97F4A7C15ull;
    return (size_t)(x >> (64 - DH__BS_BITS));
}

static dh__bs_entry_t *dh__bs_find(size_t b, cublasHandle_t h)
{
    for (dh__bs_entry_t *e = atomic_load_explicit(&dh__bs[b], memory_order_acquire); e != NULL;
         e = e->next)
        if (e->handle == h)
            return e;
    return NULL;
}

/* The entry of h, inserted with the defaults when absent; NULL only when out of memory. */
static dh__bs_entry_t *dh__bs_get(cublasHandle_t h)
{
    size_t b = dh__bs_hash(h);
    dh__bs_entry_t *e = dh__bs_find(b, h);
    if (e != NULL)
        return e;
    pthread_mutex_lock(&dh__bs_insert_lock);
    e = dh__bs_find(b, h);
    if (e == NULL && (e = malloc(sizeof *e)) != NULL) {
        e->handle = h;
        pthread_mutex_init(&e->lock, NULL);
        e->st = dh__bs_defaults;
        e->next = atomic_load_explicit(&dh__bs[b], memory_order_relaxed);
        atomic_store_explicit(&dh__bs[b], e, memory_order_release);
    }
    pthread_mutex_unlock(&dh__bs_insert_lock);
    if (e == NULL)
        DH_WARN_ONCE(SCHED, "out of memory for the cuBLAS handle mirror: GEMMs of new handles "
                     "are captured with the default settings");
    return e;
}

void dh_blas_state_get(cublasHandle_t h, dh_blas_state_t *out)
{
    dh__bs_entry_t *e = dh__bs_find(dh__bs_hash(h), h);
    if (e == NULL) {
        *out = dh__bs_defaults;
        return;
    }
    pthread_mutex_lock(&e->lock);
    *out = e->st;
    pthread_mutex_unlock(&e->lock);
}

/* Runs `change` on h's state under its lock. */
#define DH__BS_UPDATE(h, change)                 \
    do {                                         \
        dh__bs_entry_t *e_ = dh__bs_get(h);      \
        if (e_ == NULL)                          \
            return;                              \
        pthread_mutex_lock(&e_->lock);           \
        dh_blas_state_t *st_ = &e_->st;          \
        change;                                  \
        pthread_mutex_unlock(&e_->lock);         \
    } while (0)

/* cublasSetStream drops the user workspace: cuBLAS goes back to its default pool. */
void dh_blas_state_set_stream(cublasHandle_t h, cudaStream_t s)
{
    DH__BS_UPDATE(h, (st_->stream = s, st_->workspace = NULL, st_->workspace_size = 0));
}

void dh_blas_state_set_workspace(cublasHandle_t h, void *ws, size_t size)
{
    DH__BS_UPDATE(h, (st_->workspace = ws, st_->workspace_size = size));
}

void dh_blas_state_set_math(cublasHandle_t h, cublasMath_t m)
{
    DH__BS_UPDATE(h, st_->math = m);
}

void dh_blas_state_set_pointer(cublasHandle_t h, cublasPointerMode_t m)
{
    DH__BS_UPDATE(h, st_->pointer = m);
}

void dh_blas_state_set_atomics(cublasHandle_t h, cublasAtomicsMode_t m)
{
    DH__BS_UPDATE(h, st_->atomics = m);
}

void dh_blas_state_set_emulation(cublasHandle_t h, cublasEmulationStrategy_t e)
{
    DH__BS_UPDATE(h, st_->emulation = e);
}

void dh_blas_state_forget(cublasHandle_t h)
{
    dh__bs_entry_t *e = dh__bs_find(dh__bs_hash(h), h);
    if (e == NULL)
        return;
    pthread_mutex_lock(&e->lock);
    e->st = dh__bs_defaults;
    pthread_mutex_unlock(&e->lock);
}
