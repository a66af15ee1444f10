/*
 * cli.c: the workload's options (one table: name, what it sets, help).
 *
 *   --preset NAME       a configuration of the paper (presets.c): model, parallelism,
 *                       batch, sequence, device profile, representative ranks, timing-only
 *   --model NAME        a model shape (presets.c); --arch, --layers, --hidden, --heads,
 *                       --kv-heads, --ffn, --vocab, --seq, --experts, --topk override it
 *   --tp --pp --dp --cp --ep --mbs --gbs --iters
 *   --device-profile P  sets VGPU_DEVICE for the run unless the environment sets it
 *   --timing-only       sets VGPU_TIMING_ONLY=1 unless the environment sets it
 *   --emulate-comm S    one process per pp x cp x ep cell, the other groups' collectives
 *                       emulated on this device (emucomm.h)
 */
#include "cli.h"

#include <string.h>

#include "emucomm.h"
#include "presets.h"

enum { O_INT, O_DBL, O_FLAG, O_STR };

typedef struct opt {
    const char *name;
    int kind;
    size_t off;  /* into wl_cfg_t */
    int value;   /* for flags */
    const char *help;
} opt_t;

#define F(field) offsetof(wl_cfg_t, field)
static const opt_t opts[] = {
    {"--tp", O_INT, F(tp), 0, "tensor-parallel size"},
    {"--pp", O_INT, F(pp), 0, "pipeline-parallel size (1F1B)"},
    {"--dp", O_INT, F(dp), 0, "data-parallel size"},
    {"--cp", O_INT, F(cp), 0, "context-parallel size (ring attention)"},
    {"--ep", O_INT, F(ep), 0, "expert-parallel size (MoE, a divisor of dp)"},
    {"--mbs", O_INT, F(mbs), 0, "micro-batch size"},
    {"--gbs", O_INT, F(gbs), 0, "global batch size"},
    {"--iters", O_INT, F(iters), 0, "iterations"},
    {"--layers", O_INT, F(m.layers), 0, "layers"},
    {"--hidden", O_INT, F(m.hidden), 0, "hidden size"},
    {"--heads", O_INT, F(m.heads), 0, "attention heads"},
    {"--kv-heads", O_INT, F(m.kv_heads), 0, "key/value heads (grouped-query attention)"},
    {"--ffn", O_INT, F(m.ffn), 0, "FFN size (per expert for MoE)"},
    {"--vocab", O_INT, F(m.vocab), 0, "vocabulary"},
    {"--seq", O_INT, F(m.seq), 0, "sequence length"},
    {"--experts", O_INT, F(m.experts), 0, "MoE experts (0: dense)"},
    {"--topk", O_INT, F(m.topk), 0, "experts per token"},
    {"--sp", O_FLAG, F(sp), 1, "sequence parallelism (default with tp > 1)"},
    {"--no-sp", O_FLAG, F(sp), 0, "no sequence parallelism"},
    {"--dist-opt", O_FLAG, F(dist_opt), 1, "distributed optimizer"},
    {"--overlap-grad-reduce", O_FLAG, F(overlap_grad), 1, "overlap the dp reduction with the last backward"},
    {"--nccl-current-stream", O_FLAG, F(nccl_current), 1, "collectives on the current stream"},
    {"--vpp", O_INT, F(vpp), 0, "virtual stages per pipeline rank (Megatron's interleaved 1F1B); "
                                "'preset': the preset's count (presets.c)"},
    {"--no-overlap-p2p-communication", O_FLAG, F(overlap_p2p), 0,
     "interleaved 1F1B with batched p2p and a device sync (needs pp > 2)"},
    {"--comm-split", O_FLAG, F(comm_split), 1, "communicators by ncclCommSplit of the world"},
    {"--no-batch-p2p-sync", O_FLAG, F(p2p_sync), 0,
     "no device synchronisation after batched pipeline p2p (Megatron's batch_p2p_sync=False)"},
    {"--represent", O_FLAG, F(represent), 1, "representative ranks (timing-only)"},
    {"--init-per-param", O_FLAG, F(init_per_param), 1,
     "initial weights copied one parameter at a time, each with a stream sync (PyTorch's "
     "model.to(\"cuda\"))"},
    {"--json", O_FLAG, F(json), 1, "JSON summary on stdout"},
    {"--quiet", O_FLAG, F(quiet), 1, "no per-iteration lines"},
    {"--gradcheck", O_INT, F(gradcheck), 0, "finite-difference check of N parameters (fp32)"},
    {"--bucket-mb", O_INT, F(bucket_mb), 0, "DDP bucket, millions of elements"},
    {"--lr", O_DBL, F(lr), 0, "Adam learning rate"},
    {"--peak-tflops", O_DBL, F(peak_tflops), 0, "peak for MFU (default: the device's bf16)"},
    {"--paper-tflops", O_DBL, F(paper_tflops), 0, "a Megatron baseline to compare with"},
};
#undef F

static void usage(FILE *f)
{
    fprintf(f, "usage: workload [--preset NAME | --model NAME] [options]\n"
               "  --preset NAME, --model NAME, --list-presets, --arch gpt|llama, --dtype bf16|fp32,\n"
               "  --device-profile a40|a800|h100|h200|file.json, --timing-only, --seed N,\n"
               "  --emulate-comm SMS:US[:GBPS]|nccl   one process per pp x cp x ep cell; the other\n"
               "                         groups' collectives emulated on this device (tests/workloads/README.md)\n");
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
        fprintf(f, "  %-22s %s\n", opts[i].name, opts[i].help);
}

static void defaults(wl_cfg_t *c)
{
    memset(c, 0, sizeof *c);
    c->m = wl_find_model("gpt-tiny")->m;
    c->tp = c->pp = c->dp = c->cp = c->ep = c->mbs = 1;
    c->gbs = 4;
    c->iters = 3;
    c->sp = -1;
    c->dtype = WL_DT_BF16;
    c->lr = 1e-3;
    c->seed = 1234;
    c->bucket_mb = 40; /* Megatron's default bucket: 40M elements */
    c->vpp = 1;
    c->overlap_p2p = 1; /* Megatron's --overlap-p2p-communication default (arguments.py) */
    c->p2p_sync = 1;   /* Megatron's ModelParallelConfig.batch_p2p_sync default */
}

static void apply_preset(wl_cfg_t *c, const wl_run_preset_t *p)
{
    c->m = wl_find_model(p->model)->m;
    c->m.seq = p->seq;
    c->dp = p->dp;
    c->tp = p->tp;
    c->pp = p->pp;
    c->cp = p->cp;
    c->mbs = p->mbs;
    c->gbs = p->gbs;
    c->iters = 2;
    c->represent = 1;
    c->dist_opt = 1;
    c->overlap_grad = 1;
    c->paper_tflops = p->megatron;
    snprintf(c->preset, sizeof c->preset, "%s", p->name);
    snprintf(c->device_profile, sizeof c->device_profile, "%s", p->device);
    setenv("VGPU_TIMING_ONLY", "1", 0);
}

static int set_opt(wl_cfg_t *c, const opt_t *o, const char *v)
{
    char *end = NULL;
    void *dst = (char *)c + o->off;
    if (o->kind == O_FLAG) {
        *(int *)dst = o->value;
        return 0;
    }
    if (!v) return -1;
    if (o->kind == O_INT) *(int *)dst = (int)strtol(v, &end, 10);
    else *(double *)dst = strtod(v, &end);
    return *end ? -1 : 1;
}

/* Options with their own handling; returns the arguments consumed, 0 if not one. */
static int special(wl_cfg_t *c, const char *a, const char *v)
{
    if (!strcmp(a, "--list-presets")) {
        wl_list_presets(stdout);
        exit(0);
    }
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
        usage(stdout);
        exit(0);
    }
    if (!strcmp(a, "--timing-only")) {
        setenv("VGPU_TIMING_ONLY", "1", 0);
        return 1;
    }
    if (!v) return 0;
    if (!strcmp(a, "--preset")) {
        const wl_run_preset_t *p = wl_find_preset(v);
        if (!p) wl_fatal("unknown preset %s (--list-presets)", v);
        apply_preset(c, p);
    } else if (!strcmp(a, "--model")) {
        const wl_model_preset_t *m = wl_find_model(v);
        if (!m) wl_fatal("unknown model %s (--list-presets)", v);
        c->m = m->m;
    } else if (!strcmp(a, "--arch")) {
        c->m.arch = !strcmp(v, "llama") ? WL_LLAMA : WL_GPT;
    } else if (!strcmp(a, "--dtype")) {
        c->dtype = !strcmp(v, "fp32") ? WL_DT_F32 : WL_DT_BF16;
    } else if (!strcmp(a, "--device-profile")) {
        snprintf(c->device_profile, sizeof c->device_profile, "%s", v);
    } else if (!strcmp(a, "--seed")) {
        c->seed = (unsigned)strtoul(v, NULL, 10);
    } else if (!strcmp(a, "--vpp") && !strcmp(v, "preset")) {
        c->vpp = -1; /* resolved once every option is read (check_vpp) */
    } else if (!strcmp(a, "--emulate-comm")) {
        char err[160];
        if (wl_emu_parse(v, err, sizeof err) != 0) wl_fatal("%s", err);
        snprintf(c->emulate_comm, sizeof c->emulate_comm, "%s", v);
    } else {
        return 0;
    }
    return 2;
}

/* The interleaved schedule's requirements, as Megatron states them (NVIDIA/Megatron-LM
 * megatron/training/arguments.py validate_args; megatron/core/pipeline_parallel/
 * schedules.py forward_backward_pipelining_with_interleaving; model_parallel_config.py
 * sets microbatch_group_size_per_vp_stage to pp). */
static void check_vpp(wl_cfg_t *c)
{
    if (c->vpp == -1) {
        const wl_run_preset_t *p = c->preset[0] ? wl_find_preset(c->preset) : NULL;
        if (!p || p->vpp < 1) wl_fatal("--vpp preset: %s has no virtual-stage count", p ? p->name : "no --preset");
        c->vpp = p->vpp;
    }
    if (c->vpp < 1) wl_fatal("--vpp must be at least 1");
    if (c->vpp == 1) return; /* Megatron: a virtual size of 1 is no interleaving */
    if (c->pp < 2) wl_fatal("the interleaved schedule needs pp > 1 (Megatron's arguments.py)");
    if (!c->overlap_p2p && c->pp < 3)
        wl_fatal("the interleaved schedule without p2p overlap needs pp > 2: Megatron's "
                 "arguments.py, \"to avoid having multiple p2p sends and recvs between same 2 "
                 "ranks per communication batch\"");
    if (c->m.layers % (c->pp * c->vpp))
        wl_fatal("layers %d must divide by pp x vpp = %d", c->m.layers, c->pp * c->vpp);
    /* microbatch_group_size_per_vp_stage = pp: M must be at least pp and a multiple of it
     * (schedules.py: "The remainder of M ... divided by N ... should be 0, or larger than or
     * equal to the pipeline-parallel size"; with N = pp only 0 qualifies). */
    int M = c->gbs / (c->mbs * c->dp);
    if (M < c->pp || M % c->pp)
        wl_fatal("the interleaved schedule needs the micro-batches (%d) to be a multiple of pp (%d), "
                 "as Megatron", M, c->pp);
}

void wl_cli_parse(wl_cfg_t *c, int argc, char **argv)
{
    defaults(c);
    for (int i = 1; i < argc;) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int used = special(c, a, v);
        for (size_t k = 0; !used && k < sizeof opts / sizeof opts[0]; k++) {
            if (strcmp(a, opts[k].name)) continue;
            int r = set_opt(c, &opts[k], v);
            if (r < 0) wl_fatal("bad value for %s", a);
            used = 1 + r;
        }
        if (!used) {
            usage(stderr);
            wl_fatal("unknown option %s", a);
        }
        i += used;
    }
    if (c->sp < 0) c->sp = c->tp > 1;
    if (c->tp == 1) c->sp = 0;
    if (c->m.kv_heads == 0) c->m.kv_heads = c->m.heads;
    if (c->gbs % (c->mbs * c->dp)) wl_fatal("gbs %d must divide by mbs x dp", c->gbs);
    check_vpp(c);
    if (c->device_profile[0]) setenv("VGPU_DEVICE", c->device_profile, 0);
    /* Megatron (arguments.py) requires one hardware queue with tp > 1 or cp > 1. */
    if (c->tp > 1 || c->cp > 1) setenv("CUDA_DEVICE_MAX_CONNECTIONS", "1", 0);
}
