/*
 * model.c: sizes on this rank and the parameter registry (see model.h).
 */
#include "model.h"

#include <math.h>
#include <string.h>

/* The registry never moves: the model keeps pointers into it (wte, the layers' weights).
 * wl_model_build counts the parameters first (params NULL: add hands out a scratch record),
 * then fills an array of exactly that size. */
static wl_param_t *add(wl_model_state_t *ms, const char *name, int layer, int64_t rows, int64_t cols)
{
    static wl_param_t scratch;
    wl_param_t *p = &scratch;
    if (ms->params) {
        if (ms->nparams == ms->cap) wl_fatal("model: more parameters than counted");
        p = &ms->params[ms->nparams];
    }
    ms->nparams++;
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->rows = rows;
    p->cols = cols;
    p->gcols = cols;
    p->nseg = 1;
    p->seg_len[0] = rows;
    p->std = 0.02f; /* Megatron's --init-method-std default */
    /* The seed names the parameter in the whole model: global layer and name. */
    uint64_t s = 1469598103934665603ull ^ (uint64_t)(layer + 7) * 0x9e3779b97f4a7c15ull;
    for (const char *c = name; *c; c++) s = (s ^ (uint64_t)(unsigned char)*c) * 1099511628211ull;
    p->seed = s ^ (uint64_t)ms->cfg->seed * 0xbf58476d1ce4e5b9ull;
    return p;
}

/* Column-parallel rows: this rank holds rows [rank * rows, (rank + 1) * rows) of a global
 * matrix made of n parts of part_len[i] rows each (fused QKV, fused gate/up): local part i
 * starts at the sum of the local parts before it. */
static void split_rows(wl_param_t *p, int n, const int64_t *part_local, const int64_t *part_global,
                       int rank)
{
    int64_t local = 0, global = 0;
    p->nseg = n;
    for (int i = 0; i < n; i++) {
        p->seg_local[i] = local;
        p->seg_global[i] = global + rank * part_local[i];
        p->seg_len[i] = part_local[i];
        local += part_local[i];
        global += part_global[i];
    }
}

static void split_cols(wl_param_t *p, int tp, int rank)
{
    p->gcols = p->cols * tp;
    p->col0 = p->cols * rank;
}

static wl_param_t *vec(wl_model_state_t *ms, const char *name, int layer, int64_t n, int init, int sp)
{
    wl_param_t *p = add(ms, name, layer, 1, n);
    p->init = init;
    p->sp_partial = sp && ms->sp;
    return p;
}

static void attention_params(wl_model_state_t *ms, wl_layer_params_t *lp, int gl)
{
    const wl_cfg_t *c = ms->cfg;
    int tr = ms->ps->tp_rank, norm_bias = ms->gpt;
    float out_std = 0.02f / sqrtf(2.0f * (float)c->m.layers); /* Megatron's scaled init */
    lp->ln1_w = vec(ms, "input_layernorm.weight", gl, ms->h, WL_INIT_ONE, 1);
    if (norm_bias) lp->ln1_b = vec(ms, "input_layernorm.bias", gl, ms->h, WL_INIT_ZERO, 1);
    lp->qkv_w = add(ms, "self_attention.linear_qkv.weight", gl, ms->qkv_out, ms->h);
    int64_t pl[3] = {ms->nq_l * ms->d, ms->nkv_l * ms->d, ms->nkv_l * ms->d};
    int64_t pg[3] = {pl[0] * c->tp, pl[1] * c->tp, pl[2] * c->tp};
    split_rows(lp->qkv_w, 3, pl, pg, tr);
    if (ms->gpt) lp->qkv_b = vec(ms, "self_attention.linear_qkv.bias", gl, ms->qkv_out, WL_INIT_ZERO, 0);
    lp->proj_w = add(ms, "self_attention.linear_proj.weight", gl, ms->h, ms->nq_l * ms->d);
    lp->proj_w->std = out_std;
    split_cols(lp->proj_w, c->tp, tr);
    if (ms->gpt) lp->proj_b = vec(ms, "self_attention.linear_proj.bias", gl, ms->h, WL_INIT_ZERO, 1);
    lp->ln2_w = vec(ms, "pre_mlp_layernorm.weight", gl, ms->h, WL_INIT_ONE, 1);
    if (norm_bias) lp->ln2_b = vec(ms, "pre_mlp_layernorm.bias", gl, ms->h, WL_INIT_ZERO, 1);
}

/* Dense MLP: FC1 column-parallel (GPT: f rows; Llama: gate and up, f rows each), FC2
 * row-parallel. An expert's MLP has the same shape with the expert's own seed. */
static void mlp_params(wl_model_state_t *ms, wl_param_t **fc1, wl_param_t **fc2, const char *pre,
                       int gl, int64_t f_l, int split)
{
    const wl_cfg_t *c = ms->cfg;
    char name[48];
    int tp = split ? c->tp : 1, tr = split ? ms->ps->tp_rank : 0;
    snprintf(name, sizeof name, "%s.linear_fc1.weight", pre);
    *fc1 = add(ms, name, gl, ms->gpt ? f_l : 2 * f_l, ms->h);
    int64_t pl[2] = {f_l, f_l}, pg[2] = {f_l * tp, f_l * tp};
    split_rows(*fc1, ms->gpt ? 1 : 2, pl, pg, tr);
    snprintf(name, sizeof name, "%s.linear_fc2.weight", pre);
    *fc2 = add(ms, name, gl, ms->h, f_l);
    (*fc2)->std = 0.02f / sqrtf(2.0f * (float)c->m.layers);
    split_cols(*fc2, tp, tr);
}

static void layer_params(wl_model_state_t *ms, wl_layer_params_t *lp, int gl)
{
    attention_params(ms, lp, gl);
    if (!ms->moe) {
        mlp_params(ms, &lp->fc1_w, &lp->fc2_w, "mlp", gl, ms->f_l, 1);
        if (ms->gpt) {
            /* Biases start at zero, so their sharding needs no global map. */
            lp->fc1_b = vec(ms, "mlp.linear_fc1.bias", gl, ms->f_l, WL_INIT_ZERO, 0);
            lp->fc2_b = vec(ms, "mlp.linear_fc2.bias", gl, ms->h, WL_INIT_ZERO, 1);
        }
        return;
    }
    lp->router_w = add(ms, "mlp.router.weight", gl, ms->cfg->m.experts, ms->h);
    for (int e = 0; e < ms->local_experts; e++) {
        char pre[40];
        snprintf(pre, sizeof pre, "mlp.experts.%d", ms->ps->ep_rank * ms->local_experts + e);
        mlp_params(ms, &lp->exp_fc1[e], &lp->exp_fc2[e], pre, gl, ms->cfg->m.ffn, 0);
        lp->exp_fc1[e]->expert = lp->exp_fc2[e]->expert = 1;
    }
}

static void check_shape(const wl_cfg_t *c, const wl_model_state_t *ms)
{
    const wl_model_t *m = &c->m;
    if (m->hidden % m->heads || m->heads % c->tp || m->kv_heads % c->tp || m->heads % m->kv_heads)
        wl_fatal("heads %d / kv heads %d must divide by tp %d (and hidden by heads)", m->heads, m->kv_heads, c->tp);
    if (m->ffn % c->tp) wl_fatal("ffn %d must divide by tp %d", m->ffn, c->tp);
    if (m->seq % (2 * c->cp * (c->sp ? c->tp : 1)))
        wl_fatal("seq %d must divide by 2 x cp%s", m->seq, c->sp ? " x tp" : "");
    if (m->layers % c->pp) wl_fatal("layers %d must divide by pp %d", m->layers, c->pp);
    if (ms->gpt && ms->f_l % 8) wl_fatal("ffn / tp must be a multiple of 8 (cuBLASLt aux)");
    if (ms->moe && (c->tp != 1 || c->cp != 1 || m->experts % c->ep || c->dp % c->ep || ms->gpt))
        wl_fatal("MoE runs with the Llama architecture, tp = cp = 1, and experts, dp divisible by ep");
    if (!ms->moe && c->ep != 1) wl_fatal("--ep needs an MoE model (--experts)");
    if (ms->local_experts > WL_MAX_LOCAL_EXPERTS) wl_fatal("too many local experts");
}

static void sizes(wl_model_state_t *ms, const wl_cfg_t *c, const wl_ps_t *ps)
{
    const wl_model_t *m = &c->m;
    ms->dt = c->dtype;
    ms->gpt = m->arch == WL_GPT;
    ms->moe = m->experts > 0;
    ms->sp = c->sp;
    ms->h = m->hidden;
    ms->d = m->hidden / m->heads;
    ms->nq_l = m->heads / c->tp;
    ms->nkv_l = m->kv_heads / c->tp;
    ms->qkv_out = (ms->nq_l + 2 * ms->nkv_l) * ms->d;
    ms->f_l = m->ffn / c->tp;
    /* Megatron pads the vocabulary to a multiple of 128 x tp (make-vocab-size-divisible-by). */
    int64_t mult = 128LL * c->tp;
    ms->vpad = (m->vocab + mult - 1) / mult * mult;
    ms->v_l = ms->vpad / c->tp;
    ms->vstart = ms->v_l * ps->tp_rank;
    ms->b = c->mbs;
    ms->s_local = m->seq / c->cp;
    ms->T = ms->b * ms->s_local;
    ms->Tsp = c->sp ? ms->T / c->tp : ms->T;
    ms->nlayers = m->layers / c->pp;
    ms->vpp = c->vpp > 1 ? c->vpp : 1;
    ms->lchunk = ms->nlayers / ms->vpp;
    ms->layer0 = ms->lchunk * ps->pp_rank; /* chunk 0's first layer */
    ms->first = ps->pp_rank == 0;
    ms->last = ps->pp_rank == c->pp - 1;
    ms->local_experts = ms->moe ? m->experts / c->ep : 0;
    /* Megatron's load-balanced context-parallel split: chunks r and 2cp - 1 - r. */
    ms->chunks = (wl_chunks_t){ps->cp_rank, 2 * c->cp - 1 - ps->cp_rank, m->seq / (2 * c->cp)};
}

static void build(wl_model_state_t *ms, const wl_cfg_t *c, const wl_ps_t *ps, int cap);

void wl_model_build(wl_model_state_t *ms, const wl_cfg_t *c, const wl_ps_t *ps)
{
    build(ms, c, ps, 0);
    int n = ms->nparams;
    free(ms->layers);
    build(ms, c, ps, n);
}

static void build(wl_model_state_t *ms, const wl_cfg_t *c, const wl_ps_t *ps, int cap)
{
    memset(ms, 0, sizeof *ms);
    if (cap > 0) {
        ms->params = calloc((size_t)cap, sizeof *ms->params);
        if (!ms->params) wl_fatal("out of memory");
        ms->cap = cap;
    }
    ms->cfg = c;
    ms->ps = ps;
    sizes(ms, c, ps);
    check_shape(c, ms);
    ms->layers = calloc((size_t)ms->nlayers, sizeof *ms->layers);
    if (!ms->layers) wl_fatal("out of memory");
    if (ms->first) {
        ms->wte = add(ms, "embedding.word_embeddings.weight", -1, ms->v_l, ms->h);
        int64_t vl = ms->v_l, vg = ms->vpad;
        split_rows(ms->wte, 1, &vl, &vg, ps->tp_rank);
        if (ms->gpt) ms->wpe = add(ms, "embedding.position_embeddings.weight", -1, c->m.seq, ms->h);
    }
    /* Forward order on this rank: chunk 0's layers, then chunk 1's, ... */
    for (int l = 0; l < ms->nlayers; l++) layer_params(ms, &ms->layers[l], wl_layer_global(ms, l));
    if (ms->last) {
        ms->lnf_w = vec(ms, "final_layernorm.weight", -2, ms->h, WL_INIT_ONE, 1);
        if (ms->gpt) ms->lnf_b = vec(ms, "final_layernorm.bias", -2, ms->h, WL_INIT_ZERO, 1);
        ms->out_w = add(ms, "output_layer.weight", -2, ms->v_l, ms->h);
        int64_t vl = ms->v_l, vg = ms->vpad;
        split_rows(ms->out_w, 1, &vl, &vg, ps->tp_rank);
    }
}

void wl_param_init_host(const wl_param_t *p, float *host)
{
    float a = p->std * sqrtf(3.0f); /* uniform with the normal init's standard deviation */
    for (int s = 0; s < p->nseg; s++)
        for (int64_t r = 0; r < p->seg_len[s]; r++) {
            int64_t lr = p->seg_local[s] + r, gr = p->seg_global[s] + r;
            for (int64_t col = 0; col < p->cols; col++) {
                float v = p->init == WL_INIT_ONE ? 1.0f : 0.0f;
                if (p->init == WL_INIT_NORMAL)
                    v = a * wl_hash_uniform(p->seed, (uint64_t)(gr * p->gcols + p->col0 + col));
                host[lr * p->cols + col] = v;
            }
        }
}

void wl_model_free(wl_model_state_t *ms)
{
    free(ms->params);
    free(ms->layers);
    memset(ms, 0, sizeof *ms);
}
