/*
 * core.h: state shared by the files of libvgpu.so. Nothing here leaves the core.
 *
 * Lock: vg_state.lock (the device lock of vg.h) guards every field below unless the field
 * says otherwise. Lock order: the device lock is the only lock of the core that is held
 * while calling out (exec, rdv, host functions); the kernel registry's lock and the
 * allocation table's lock are leaves.
 */
#ifndef VG_CORE_H
#define VG_CORE_H

#include <stdatomic.h>
#include <stdio.h>

#include "vg.h"

#define VG_MAX_DEVICES 16
#define VG_MAX_QUEUES 32
#define VG_STREAM_MAGIC 0x76537472u /* "vStr" */
#define VG_EVENT_MAGIC 0x76457674u  /* "vEvt" */

enum { VG_ST_QUEUED, VG_ST_POSTED, VG_ST_TIMED, VG_ST_RUNNING, VG_ST_DONE };

typedef struct vg_stream {
    uint32_t magic;
    int dev;
    int index;          /* creation order on its device; legacy stream is 0 */
    int hwq;            /* hardware queue */
    unsigned flags;
    int priority;
    int legacy;         /* the NULL / cudaStreamLegacy stream */
    int destroyed;
    unsigned long long id;
    vg_op_t *last;      /* last op issued, reference held */
    int inflight;       /* started and not completed ops */
    vg_op_t *records;   /* event records waiting for this stream's running op (FIFO) */
    struct vg_graph *capture; /* the graph being captured on this stream, or NULL */
    struct vg_stream *next_all; /* device's list of streams */
} vg_stream_t;

typedef struct vg_event {
    uint32_t magic;
    unsigned flags;
    int dev;
    vg_op_t *rec;       /* op of the last record, reference held; NULL if never recorded */
} vg_event_t;

typedef struct vg_device {
    int id;
    vgpu_profile_t prof;
    vg_stream_t legacy;
    vg_stream_t *streams;       /* every live stream but legacy */
    int nstreams_made;
    vg_op_t *qhead[VG_MAX_QUEUES], *qtail[VG_MAX_QUEUES];
    vg_op_t **running;
    int nrunning, cap_running;
    int rates_dirty;
    uint64_t pending;           /* issued, not completed */
    double last_end;            /* completion time of the latest completed op */
    cudaError_t sticky;
    int active;                 /* primary context in use (atomic) */
    vgpu_counters_t ctr;
} vg_device_t;

typedef struct vg_state {
    pthread_mutex_t lock;
    int inited;
    vg_config_t cfg;
    int ndev;
    vg_device_t dev[VG_MAX_DEVICES];
    double host_ns;     /* host virtual clock */
    double now;         /* simulation clock */
    uint64_t seq;
    int global_rank;
    unsigned long long next_stream_id;
} vg_state_t;

extern vg_state_t vg_g;

/* device.c */
void vg__ensure_init(void);
vg_device_t *vg__dev(int id);

/* profile.c */
int vg__profile_load(const char *spec, vgpu_profile_t *out); /* 0 ok, -1 error (reported) */

/* sim.c (device lock held) */
typedef int (*vg_done_fn)(void *arg);
/* Runs the simulation until done(arg) (if done is non-NULL), until the next event lies past
 * bound, or until nothing can happen. Returns 1 when done, 0 otherwise; *blocked tells
 * whether it stopped waiting for peers. */
int vg__sim_run(double bound, vg_done_fn done, void *arg, int *blocked);
/* Waits (releasing the lock while peers are awaited) until done(arg); then moves the host
 * clock to the simulation clock. Returns 0, or -1 if the simulation ran dry first. */
int vg__sim_wait(vg_done_fn done, void *arg);
void vg__sim_enqueue(vg_stream_t *s, vg_op_t *op);
void vg__op_ref(vg_op_t *op);
void vg__op_unref(vg_op_t *op);
void vg__op_add_dep(vg_op_t *op, vg_op_t *dep);
int vg__op_done(void *op);          /* vg_done_fn: op completed */
/* How many operations the calling thread has issued (a query spinning without issuing
 * work in between is a wait in disguise; see stream.c). */
uint64_t vg__thread_issue_count(void);

/* graph.c (device lock held): takes op into the graph captured on its stream. */
struct vg_graph;
void vg__graph_add(struct vg_graph *g, vg_op_t *op);

/* stream.c */
vg_stream_t *vg__stream_get(cudaStream_t s, cudaError_t *err); /* lock held */

/* mem.c */
void vg__mem_on_free_op(vg_op_t *op); /* executes a stream-ordered free */
/* With VGPU_TRACE: writes the "device memory" counter samples (",\n{...}" each). */
void vg__mem_trace_write(FILE *f, int rank);
int vg__mem_check_exec(vg_op_t *op);  /* at start: 0 ok, else reports and returns -1 */

/* trace.c */
void vg__trace_op(const vg_op_t *op);
void vg__trace_write(void);

/* nvtx_trace.c (device lock held) */
/* The NVTX name of stream `index` of device dev (dev -1: host lane `index`), or NULL. */
const char *vg__nvtx_stream_name(int dev, int index);
/* Writes the host lanes' names and the ranges and marks (",\n{...}" each). */
void vg__nvtx_trace_write(FILE *f, int rank);

/* kernel.c */
void vg__kernel_fini(void);

#endif
