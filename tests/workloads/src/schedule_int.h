/*
 * schedule_int.h: what schedule.c (1F1B, steps, the backward thread) shares with
 * schedule_vpp.c (the interleaved 1F1B).
 */
#ifndef WL_SCHEDULE_INT_H
#define WL_SCHEDULE_INT_H

#include <pthread.h>

#include "schedule.h"

/* The autograd device thread: runs one backward at a time for the main thread. */
typedef struct bwd_thread {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cv;
    int job, done, stop;   /* guarded by lock */
    wl_mb_t *mb;           /* the job; guarded by lock */
    void *dout, *result;   /* guarded by lock */
} bwd_thread_t;

struct wl_vpp;

struct wl_sched {
    wl_model_state_t *ms;
    wl_opt_t *opt;
    int M;
    int32_t **pinned;      /* per micro-batch slot: tokens then labels, [2 T] */
    float *iter_loss;      /* the current iteration's loss accumulator (device) */
    bwd_thread_t bt;
    struct wl_vpp *vpp;    /* the interleaved schedule's state (schedule_vpp.c), or NULL */
};

/* A micro-batch of model chunk `chunk`. */
wl_mb_t *wl_sched_mb_new(wl_sched_t *s, int index, int chunk);
/* Forward of mb's chunk on the calling thread; input: the received activation (ignored on
 * the first virtual stage). mb->output is what goes to the next stage. */
void wl_sched_fwd(wl_sched_t *s, wl_mb_t *mb, void *input, int iter);
/* Backward of mb's chunk on the backward thread while the caller blocks; frees mb and
 * returns the gradient for the previous stage (NULL on the first virtual stage). */
void *wl_sched_bwd(wl_sched_t *s, wl_mb_t *mb, void *dout);

/* The interleaved 1F1B (schedule_vpp.c). */
void wl_sched_run_vpp(wl_sched_t *s, int iter, float *iter_loss);
void wl_sched_vpp_destroy(wl_sched_t *s);

#endif
