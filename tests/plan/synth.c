/* synth.c: synthetic profiles (synth.h). */
#include "synth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct dh__pat {
    const char *kind;
    dh_opclass_t cls;
    const char *name;
    double us;
    int comm;             /* -1 none, 0 tp, 1 dp */
    int64_t mem;
} dh__pat_t;

#define MIB (1024 * 1024)

static const dh__pat_t dh__fwd[] = {
    {"KERNEL", DH_CLS_COMPUTE, "layernorm_fwd", 20, -1, 0},
    {"NCCL", DH_CLS_COMM, "all_gather tp", 60, 0, 0},
    {"GEMM", DH_CLS_COMPUTE, "gemm n,t qkv", 120, -1, 4 * MIB},
    {"KERNEL", DH_CLS_COMPUTE, "flash_attn_fwd", 150, -1, 2 * MIB},
    {"GEMM", DH_CLS_COMPUTE, "gemm n,t proj", 60, -1, 0},
    {"NCCL", DH_CLS_COMM, "reduce_scatter tp", 60, 0, 0},
    {"KERNEL", DH_CLS_COMPUTE, "dropout_add", 10, -1, 0},
    {"KERNEL", DH_CLS_COMPUTE, "layernorm_fwd", 20, -1, 0},
    {"NCCL", DH_CLS_COMM, "all_gather tp", 60, 0, 0},
    {"GEMM", DH_CLS_COMPUTE, "gemm n,t fc1", 160, -1, 8 * MIB},
    {"KERNEL", DH_CLS_COMPUTE, "gelu_fwd", 20, -1, 0},
    {"GEMM", DH_CLS_COMPUTE, "gemm n,t fc2", 160, -1, 2 * MIB},
    {"NCCL", DH_CLS_COMM, "reduce_scatter tp", 60, 0, 0},
    {"KERNEL", DH_CLS_COMPUTE, "dropout_add", 10, -1, 0},
    {"EVENT_RECORD", DH_CLS_EVENT, "", 0, -1, 0},
    {"MEMCPY", DH_CLS_COPY, "copy d2d", 5, -1, 0},
};

static const dh__pat_t dh__bwd[] = {
    {"KERNEL", DH_CLS_COMPUTE, "dropout_add_bwd", 10, -1, 0},
    {"NCCL", DH_CLS_COMM, "all_gather tp", 60, 0, 0},
    {"GEMM", DH_CLS_COMPUTE, "gemm n,n fc2 dgrad", 160, -1, 0},
    {"GEMM", DH_CLS_COMPUTE, "gemm t,n fc2 wgrad", 160, -1, 0},
    {"FREE_ASYNC", DH_CLS_FREE, "", 0, -1, -2 * MIB},
    {"KERNEL", DH_CLS_COMPUTE, "gelu_bwd", 20, -1, 0},
    {"GEMM", DH_CLS_COMPUTE, "gemm n,n fc1 dgrad", 160, -1, 0},
    {"NCCL", DH_CLS_COMM, "reduce_scatter tp", 60, 0, 0},
    {"GEMM", DH_CLS_COMPUTE, "gemm t,n fc1 wgrad", 160, -1, 0},
    {"FREE_ASYNC", DH_CLS_FREE, "", 0, -1, -8 * MIB},
    {"KERNEL", DH_CLS_COMPUTE, "layernorm_bwd", 30, -1, 0},
    {"NCCL", DH_CLS_COMM, "all_gather tp", 60, 0, 0},
    {"GEMM", DH_CLS_COMPUTE, "gemm n,n proj dgrad", 60, -1, 0},
    {"GEMM", DH_CLS_COMPUTE, "gemm t,n proj wgrad", 60, -1, 0},
    {"KERNEL", DH_CLS_COMPUTE, "flash_attn_bwd", 300, -1, 0},
    {"FREE_ASYNC", DH_CLS_FREE, "", 0, -1, -2 * MIB},
    {"GEMM", DH_CLS_COMPUTE, "gemm n,n qkv dgrad", 120, -1, 0},
    {"NCCL", DH_CLS_COMM, "reduce_scatter tp", 60, 0, 0},
    {"GEMM", DH_CLS_COMPUTE, "gemm t,n qkv wgrad", 120, -1, 0},
    {"FREE_ASYNC", DH_CLS_FREE, "", 0, -1, -4 * MIB},
    {"KERNEL", DH_CLS_COMPUTE, "layernorm_bwd", 30, -1, 0},
    {"EVENT_RECORD", DH_CLS_EVENT, "", 0, -1, 0},
    {"KERNEL", DH_CLS_COMPUTE, "add_grad", 10, -1, 0},
    {"EVENT_WAIT", DH_CLS_EVENT, "", 0, -1, 0},
};

static const dh__pat_t dh__opt[DH_SYNTH_OPT_OPS] = {
    {"NCCL", DH_CLS_COMM, "all_reduce dp grads", 400, 1, 0},
    {"KERNEL", DH_CLS_COMPUTE, "multi_tensor_adam", 200, -1, 0},
    {"KERNEL", DH_CLS_COMPUTE, "multi_tensor_scale", 50, -1, 0},
    {"MEMCPY", DH_CLS_COPY, "copy d2h loss", 5, -1, 0},
    {"HOST_FUNC", DH_CLS_HOST, "host callback", 2, -1, 0},
};

#define NFWD (sizeof(dh__fwd) / sizeof(dh__fwd[0]))
#define NBWD (sizeof(dh__bwd) / sizeof(dh__bwd[0]))

void dh_synth_defaults(dh_synth_t *s)
{
    memset(s, 0, sizeof(*s));
    s->layers = 2;
    s->mb = 3;
    s->iters = 4;
    s->fwd_per_layer = (int)NFWD;
    s->bwd_per_layer = (int)NBWD;
    s->moe_sync_mb = -1;
    s->sync_first_mb = -1;
    s->rank = 0;
    s->world = 1;
}

size_t dh_synth_iter_ops(const dh_synth_t *s)
{
    return (size_t)s->mb * ((size_t)s->layers * (size_t)(s->fwd_per_layer + s->bwd_per_layer) +
                            (size_t)(s->data_copy != 0)) +
           DH_SYNTH_OPT_OPS;
}

static uint64_t dh__mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

typedef struct dh__gen {
    dh_profile_t *p;
    double t;             /* the timeline */
    int no_times;
    int no_comm;
    uint64_t jitter;
    size_t per_iter;      /* ops per iteration, for the jitter's position */
} dh__gen_t;

static dh_prof_op_t *dh__put(dh__gen_t *g, const dh__pat_t *pat, uint64_t sig_seed,
                             uint32_t thread)
{
    dh_prof_op_t *op = &g->p->ops[g->p->nops++];
    dh__pat_t local;
    if (g->no_comm && (pat->cls == DH_CLS_COMM || pat->cls == DH_CLS_COPY)) {
        local = *pat;
        local.kind = "KERNEL";
        local.cls = DH_CLS_COMPUTE;
        local.comm = -1;
        pat = &local;
    }
    memset(op, 0, sizeof(*op));
    op->thread = thread;
    op->stream = thread;
    snprintf(op->kind, sizeof(op->kind), "%s", pat->kind);
    op->cls = pat->cls;
    op->sig = dh__mix(sig_seed);
    op->shape = dh__mix(sig_seed ^ 0x5bd1e995ull);
    snprintf(op->name, sizeof(op->name), "%s", pat->name);
    op->comm = pat->comm;
    op->bytes = pat->cls == DH_CLS_COMM ? 1u << 22 : 0;
    op->flops = strcmp(pat->kind, "GEMM") == 0 ? pat->us * 1e8 : 0;
    double us = pat->us;
    if (g->jitter) {
        /* The same op position gets the same factor in every iteration. */
        uint64_t h = dh__mix(sig_seed ^ g->jitter ^ ((uint64_t)(g->p->nops % g->per_iter) << 32));
        us *= 0.7 + 0.6 * (double)(h % 1000) / 1000.0;
    }
    op->us = g->no_times ? -1 : us;
    op->start_us = g->no_times ? -1 : g->t;
    op->mem = pat->mem;
    g->t += us + 1;
    return op;
}

static const dh__pat_t dh__copy = {"MEMCPY", DH_CLS_COPY, "memcpy h2d 1024", 3, -1, 0};

static void dh__phase(dh__gen_t *g, const dh_synth_t *s, int bwd, int mb, int iter)
{
    if (!bwd && s->data_copy)
        dh__put(g, &dh__copy, 0xc0b1ull, 0);
    const dh__pat_t *pat = bwd ? dh__bwd : dh__fwd;
    size_t npat = bwd ? NBWD : NFWD;
    int per = bwd ? s->bwd_per_layer : s->fwd_per_layer;
    for (int l = 0; l < s->layers; l++) {
        for (int k = 0; k < per; k++) {
            uint64_t seed = ((uint64_t)bwd << 40) | ((uint64_t)(k % (int)npat) << 8) |
                            (uint64_t)(k / (int)npat);
            if (!bwd && s->variant && mb == 1 && l == 0 && k == 2)
                seed ^= 0xabcdefull << 20;
            dh_prof_op_t *op = dh__put(g, &pat[k % (int)npat], seed, bwd ? 1 : 0);
            if (!bwd && s->dyn_shape && mb == 0 && l == 0 && k == 2)
                op->shape = dh__mix(0x77ull + (uint64_t)iter);
            if (!bwd && (mb == s->moe_sync_mb || s->moe_sync_mb == -2) && l == 0 && k == per / 2)
                op->sync_before = 1;
            if (!bwd && mb == s->sync_first_mb && l == 0 && k == 0)
                op->sync_before = 1;
        }
    }
}

dh_profile_t *dh_synth_profile(const dh_synth_t *s)
{
    dh_profile_t *p = calloc(1, sizeof(*p));
    size_t cap = dh_synth_iter_ops(s) * (size_t)s->iters + (size_t)s->warmup_ops;
    if (p == NULL || (p->ops = calloc(cap ? cap : 1, sizeof(*p->ops))) == NULL ||
        (p->comms = calloc(2, sizeof(*p->comms))) == NULL) {
        dh_profile_free(p);
        return NULL;
    }
    p->version = DH_PROFILE_VERSION;
    p->rank = s->rank;
    p->world = s->world;
    snprintf(p->layout, sizeof(p->layout), "tp=%d", s->world);
    snprintf(p->host, sizeof(p->host), "synth");
    snprintf(p->device, sizeof(p->device), "vgpu h100");
    p->max_connections = 1;
    p->ncomms = 2;
    p->comms[0] = (dh_prof_comm_t){"TENSOR_MODEL_PARALLEL_GROUP", "tp", s->world, s->rank, 0x7470};
    p->comms[1] = (dh_prof_comm_t){"DATA_PARALLEL_GROUP", "dp", 1, 0, 0x6470ull + (uint64_t)s->rank};
    p->sync_at_end = 1;
    dh__gen_t g = {p, 0, s->no_times, s->no_comm, s->jitter, dh_synth_iter_ops(s)};
    static const dh__pat_t warm = {"KERNEL", DH_CLS_COMPUTE, "warmup_init", 30, -1, 0};
    for (int it = 0; it < s->iters; it++) {
        size_t first = p->nops;
        for (int w = 0; it == 0 && w < s->warmup_ops; w++)
            dh__put(&g, &warm, 0xfeed0000ull + (uint64_t)w, 0);
        for (int m = 0; m < s->mb; m++) {
            dh__phase(&g, s, 0, m, it);
            dh__phase(&g, s, 1, m, it);
        }
        for (int k = 0; k < DH_SYNTH_OPT_OPS; k++)
            dh__put(&g, &dh__opt[k], 0x0b7000ull + (uint64_t)k, 0);
        if (it > 0)
            p->ops[first].sync_before = 1;
        g.t += 50;   /* the host waits for loss.item() */
    }
    return p;
}
