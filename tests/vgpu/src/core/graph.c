/*
 * graph.c: CUDA graphs made by stream capture, and their launch.
 *
 * While a stream captures, every op submitted to it (kernels, copies, memsets, GEMMs,
 * host functions, stream memory operations) becomes a node of the graph instead of being
 * enqueued: the node keeps what its creator filled in (payload, ranges, cost), so a launch
 * replays exactly what was captured, with the arguments as they were at capture. The
 * nodes of one capture form a chain in capture order (one stream, no forks: event records
 * and waits on a capturing stream answer cudaErrorStreamCaptureUnsupported, as do a
 * synchronize or query of it).
 *
 * A launch is one op on its stream: its ranges are the union of the nodes', its device time
 * their sum, and its effect runs the nodes' effects in order. An executable graph holds a
 * reference to the captured graph, so destroying the graph after instantiating it is fine,
 * as in CUDA; so is destroying either while a launch is queued (the launch holds one too).
 *
 * Locking: graph contents are written only while capturing (device lock held); after the
 * capture ends they are read-only; references are atomics.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"

#define VG_GRAPH_MAGIC 0x76477068u /* "vGph" */

typedef struct vg_graph {
    uint32_t magic;
    int refs;                  /* atomic */
    int dev;
    vg_op_t **nodes;
    int n, cap;
} vg_graph_t;

static vg_graph_t *graph_get(void *h)
{
    vg_graph_t *g = h;
    return g && g->magic == VG_GRAPH_MAGIC ? g : NULL;
}

static void graph_unref(vg_graph_t *g)
{
    if (__atomic_sub_fetch(&g->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    for (int i = 0; i < g->n; i++)
        vg_op_discard(g->nodes[i]);
    free(g->nodes);
    g->magic = 0;
    free(g);
}

void vg__graph_add(vg_graph_t *g, vg_op_t *op)
{
    if (g->n == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 16;
        vg_op_t **p = realloc(g->nodes, (size_t)g->cap * sizeof *p);
        if (!p) {
            vg_msg("stream capture: out of memory");
            abort();
        }
        g->nodes = p;
    }
    g->nodes[g->n++] = op;
}

cudaError_t vg_capture_begin(cudaStream_t s)
{
    vg_lock();
    cudaError_t err = cudaSuccess;
    vg_stream_t *st = vg__stream_get(s, &err);
    if (st && st->legacy) {
        err = cudaErrorStreamCaptureUnsupported; /* the legacy stream cannot be captured */
    } else if (st && st->capture) {
        err = cudaErrorIllegalState;
    } else if (st) {
        vg_graph_t *g = calloc(1, sizeof *g);
        if (!g) {
            err = cudaErrorMemoryAllocation;
        } else {
            g->magic = VG_GRAPH_MAGIC;
            g->refs = 1;
            g->dev = st->dev;
            st->capture = g;
        }
    }
    vg_unlock();
    return err;
}

cudaError_t vg_capture_end(cudaStream_t s, void **graph)
{
    if (!graph)
        return cudaErrorInvalidValue;
    vg_lock();
    cudaError_t err = cudaSuccess;
    vg_stream_t *st = vg__stream_get(s, &err);
    if (st && !st->capture) {
        err = cudaErrorIllegalState;
    } else if (st) {
        *graph = st->capture;
        st->capture = NULL;
    }
    vg_unlock();
    return err;
}

int vg_capture_active(cudaStream_t s)
{
    vg_lock();
    cudaError_t err;
    vg_stream_t *st = vg__stream_get(s, &err);
    int r = st ? st->capture != NULL : -1;
    vg_unlock();
    return r;
}

cudaError_t vg_graph_instantiate(void **exec, void *graph)
{
    vg_graph_t *g = graph_get(graph);
    if (!exec || !g)
        return cudaErrorInvalidValue;
    __atomic_add_fetch(&g->refs, 1, __ATOMIC_RELAXED);
    *exec = g;
    return cudaSuccess;
}

cudaError_t vg_graph_release(void *graph)
{
    vg_graph_t *g = graph_get(graph);
    if (!g)
        return cudaErrorInvalidValue;
    graph_unref(g);
    return cudaSuccess;
}

typedef struct launch_payload {
    vg_graph_t *g;
} launch_payload_t;

static void launch_exec(vg_op_t *op)
{
    const launch_payload_t *p = op->payload;
    for (int i = 0; i < p->g->n && !op->failed; i++) {
        vg_op_t *node = p->g->nodes[i];
        node->dev = op->dev;
        node->stream = op->stream;
        node->t_start = op->t_start;
        node->failed = 0;
        if (node->exec && (!vg_config()->timing_only || node->exec_always))
            node->exec(node);
        if (node->failed)
            op->failed = 1;
    }
}

static void launch_release(vg_op_t *op)
{
    launch_payload_t *p = op->payload;
    if (p && p->g)
        graph_unref(p->g);
    free(p);
}

cudaError_t vg_graph_launch(void *exec, cudaStream_t s)
{
    vg_graph_t *g = graph_get(exec);
    if (!g)
        return cudaErrorInvalidResourceHandle;
    vg_op_t *op = vg_op_new("cudaGraphLaunch", VG_COMPUTE);
    double solo = 0;
    for (int i = 0; i < g->n; i++) {
        const vg_op_t *node = g->nodes[i];
        const vg_range_t *r = node->ranges ? node->ranges : node->range_inline;
        for (int k = 0; k < node->nranges; k++)
            vg_op_add_range(op, (const void *)r[k].lo, r[k].len, r[k].write);
        solo += node->solo_ns;
    }
    launch_payload_t *p = vg_op_payload(op, sizeof *p);
    __atomic_add_fetch(&g->refs, 1, __ATOMIC_RELAXED);
    p->g = g;
    op->release = launch_release;
    op->exec = launch_exec;
    op->solo_ns = solo;
    snprintf(op->name, sizeof op->name, "graph of %d nodes", g->n);
    return vg_submit(s, op);
}
