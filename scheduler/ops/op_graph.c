/*
 * op_graph.c: the GRAPH_LAUNCH kind, a launch of an executable CUDA graph (cudaGraphLaunch,
 * cuGraphLaunch): PyTorch's CUDA-graph replay (torch.cuda.CUDAGraph), which Megatron-Core
 * and Transformer Engine's make_graphed_callables use.
 *
 * The shim cannot see inside an executable graph, so a launch has no footprint: it orders
 * like a barrier of its stream and of everything it may touch (dh_op_footprint answers
 * "anything"), and the planner never pairs it (class HOST, like a host function). Deferring
 * it still keeps a program that replays graphs in order without a drain per launch.
 *
 * Errors at the call: an executable graph's handle only the library can judge, so the first
 * launch of each one is forwarded (validate answers -1) and a success is remembered
 * (dh_op_accept); later launches of it are deferred. Whatever changes an executable graph
 * (cudaGraphExecUpdate, cudaGraphExec*SetParams, cudaGraphExecDestroy) drains first (the
 * generated wrappers), so a queued launch runs the graph as it was at the call.
 */
#include <stdio.h>
#include <string.h>

#include "breaks.h"
#include "op_internal.h"

typedef struct dh__graph_pl {
    void *exec;          /* cudaGraphExec_t or CUgraphExec */
    int driver;
} dh__graph_pl_t;

dh_status_t dh_op_capture_graph_launch(dh_op_t **out, void *exec, cudaStream_t s, int driver)
{
    *out = NULL;
    if (exec == NULL)
        return DH_ERR_INVALID;
    int dev;
    DH_CHECK(dh__op_device(dh_real(), &dev));
    dh_op_t *op = dh_op_alloc(DH_OP_GRAPH_LAUNCH, s, dev, sizeof(dh__graph_pl_t));
    if (op == NULL)
        return DH_ERR_NOMEM;
    *(dh__graph_pl_t *)op->payload = (dh__graph_pl_t){exec, driver};
    *out = op;
    return DH_OK;
}

static uint64_t dh__graph_key(const dh_op_t *op)
{
    const dh__graph_pl_t *p = (const dh__graph_pl_t *)op->payload;
    uint64_t h = dh_op_hash(DH_OP_HASH_INIT, "GRAPH_LAUNCH", 12);
    h = dh_op_hash_u64(h, (uint64_t)(uintptr_t)p->exec);
    return dh_op_hash_u64(h, (uint64_t)p->driver);
}

static int dh__graph_validate(const dh_op_t *op)
{
    return dh_op_accepted(dh__graph_key(op)) ? 0 : -1;
}

static void dh__graph_learn(const dh_op_t *op, int rc)
{
    if (rc == 0)
        dh_op_accept(dh__graph_key(op));
}

/* The signature is the kind alone: an executable graph's address differs from run to run,
 * and a plan made from a profile must match the next run. */
static void dh__graph_describe(const dh_op_t *op, dh_op_desc_t *d)
{
    const dh__graph_pl_t *p = (const dh__graph_pl_t *)op->payload;
    snprintf(d->name, sizeof d->name, "%s", p->driver ? "cuGraphLaunch" : "cudaGraphLaunch");
}

static int dh__graph_replay(dh_op_t *op, const dh_replay_ctx_t *ctx)
{
    const dh__graph_pl_t *p = (const dh__graph_pl_t *)op->payload;
    const dh_real_t *r = dh_real();
    if (p->driver) {
        dh_real_cuGraphLaunch_t fn = DH_REAL_FN(r, cuGraphLaunch);
        return fn != NULL ? (int)fn((CUgraphExec)p->exec, (CUstream)ctx->stream)
                          : (int)CUDA_ERROR_NOT_INITIALIZED;
    }
    dh_real_cudaGraphLaunch_t fn = DH_REAL_FN(r, cudaGraphLaunch);
    return fn != NULL ? (int)fn((cudaGraphExec_t)p->exec, ctx->stream)
                      : (int)cudaErrorInitializationError;
}

/* A graph may touch anything: the footprint is "anything" (over), which conflicts with
 * every op that touches memory, so the launch orders like a barrier. The test break
 * graph_barrier makes it touch nothing (shim.breaks proves the coverage program then
 * fails). */
static void dh__graph_footprint(const dh_op_t *op, dh_op_fp_t *fp)
{
    (void)op;
    if (!dh_break(DH_BREAK_GRAPH_BARRIER))
        fp->over = 1;
}

/* The replay's status is the runtime's or the driver's by the payload; both report their errors with the same codes here (op.c's
 * shared codes), so the kind is filed under the runtime. */
const dh_op_kind_ops_t dh__kind_graph = {
    .name = "GRAPH_LAUNCH",
    .cls = DH_CLS_HOST,
    .flags = DH_OPK_TIMED | DH_OPK_ON_DEVICE,
    .api = DH_OP_API_RUNTIME,
    .describe = dh__graph_describe,
    .validate = dh__graph_validate,
    .learn = dh__graph_learn,
    .replay = dh__graph_replay,
    .footprint = dh__graph_footprint,
};
