/*
 * report.c: FLOPs, throughput and the output of a run (see report.h).
 */
#include "report.h"

#include <string.h>

static const char *dtype_name(int dt) { return dt == WL_DT_F32 ? "fp32" : "bf16"; }

double wl_megatron_flops(const wl_cfg_t *c)
{
    const wl_model_t *m = &c->m;
    double B = c->gbs, s = m->seq, L = m->layers, h = m->hidden;
    double gqa = (double)m->kv_heads / m->heads;
    double k = m->experts ? m->topk : 1, g = m->arch == WL_LLAMA ? 1.5 : 1.0;
    double mult = 128.0 * c->tp, V = ((double)m->vocab + mult - 1) / mult;
    V = (double)(long long)V * mult; /* Megatron's padded vocabulary */
    double attn = (1.0 + gqa + s / h) * 1.0, mlp = (double)m->ffn / h * k * g, logit = V / (2.0 * L * h);
    return 12.0 * B * s * L * h * h * (attn + mlp + logit);
}

void wl_report_add(wl_report_t *r, double loss, double time_ms)
{
    wl_iter_stat_t *it = realloc(r->it, sizeof *it * (size_t)(r->n + 1));
    if (!it) wl_fatal("out of memory");
    r->it = it;
    wl_iter_stat_t *s = &r->it[r->n++];
    s->loss = loss;
    s->time_ms = time_ms;
    s->tflops = time_ms > 0 ? r->flops / (time_ms * 1e-3) / r->world / 1e12 : 0;
    s->mfu = r->peak_tflops > 0 ? s->tflops / r->peak_tflops : 0;
}

void wl_report_iter(const wl_report_t *r)
{
    const wl_iter_stat_t *s = &r->it[r->n - 1];
    if (r->cfg->json || r->cfg->quiet) return;
    printf("iter %3d/%-3d  loss %9.5f  time %10.2f ms  %7.2f TFLOP/s/GPU  MFU %5.1f%%\n", r->n,
           r->cfg->iters, s->loss, s->time_ms, s->tflops, 100 * s->mfu);
    fflush(stdout);
}

double wl_report_mean_tflops(const wl_report_t *r)
{
    int from = r->n > 1 ? 1 : 0;
    double t = 0;
    for (int i = from; i < r->n; i++) t += r->it[i].time_ms;
    t /= (r->n - from);
    return t > 0 ? r->flops / (t * 1e-3) / r->world / 1e12 : 0;
}

static void text(const wl_report_t *r)
{
    const wl_cfg_t *c = r->cfg;
    double tf = wl_report_mean_tflops(r);
    printf("summary: %s%s%s  dp %d tp %d pp %d cp %d ep %d  mbs %d gbs %d seq %d  %s on %s%s\n",
           c->preset[0] ? c->preset : "", c->preset[0] ? " " : "", c->m.name, c->dp, c->tp, c->pp,
           c->cp, c->ep, c->mbs, c->gbs, c->m.seq, dtype_name(c->dtype), r->device,
           c->timing_only ? " (timing-only)" : "");
    printf("  %d GPUs (%d processes%s), %.3e FLOP per iteration (Megatron's formula)\n", r->world,
           r->nproc, c->represent ? ", representative ranks" : "", r->flops);
    printf("  %.2f TFLOP/s per GPU, MFU %.1f%% of %.1f TFLOP/s", tf, 100 * tf / r->peak_tflops, r->peak_tflops);
    if (c->paper_tflops > 0)
        printf("; paper Megatron %.1f TFLOP/s, ratio %.3f", c->paper_tflops, tf / c->paper_tflops);
    printf("\n");
    if (r->on_vgpu) {
        printf("  vgpu: %llu hazards, %llu device ops, peak memory %.2f GiB, wall %.1f s\n",
               (unsigned long long)r->hazards, (unsigned long long)r->ops, r->peak_mem_gib, r->wall_s);
        printf("  last iteration, process 0: compute busy %.1f ms, communication busy %.1f ms, both %.1f ms\n",
               r->compute_ms, r->comm_ms, r->overlap_ms);
    }
    if (r->gradcheck_done)
        printf("  gradcheck: %s\n", r->gradcheck_failed ? "FAILED" : "passed");
}

static void json(const wl_report_t *r)
{
    const wl_cfg_t *c = r->cfg;
    double tf = wl_report_mean_tflops(r);
    printf("{\"preset\": \"%s\", \"model\": \"%s\", \"arch\": \"%s\", \"dtype\": \"%s\", \"device\": \"%s\",\n",
           c->preset, c->m.name, c->m.arch == WL_GPT ? "gpt" : "llama", dtype_name(c->dtype), r->device);
    printf(" \"dp\": %d, \"tp\": %d, \"pp\": %d, \"cp\": %d, \"ep\": %d, \"sp\": %d, \"mbs\": %d, \"gbs\": %d, "
           "\"seq\": %d, \"layers\": %d, \"hidden\": %d,\n",
           c->dp, c->tp, c->pp, c->cp, c->ep, c->sp, c->mbs, c->gbs, c->m.seq, c->m.layers, c->m.hidden);
    printf(" \"vpp\": %d, \"gpus\": %d, \"processes\": %d, \"represent\": %d, \"timing_only\": %d, "
           "\"flops_per_iter\": %.6e,\n",
           c->vpp, r->world, r->nproc, c->represent, c->timing_only, r->flops);
    printf(" \"iterations\": [");
    for (int i = 0; i < r->n; i++)
        printf("%s\n  {\"iter\": %d, \"loss\": %.9g, \"loss_hex\": \"%a\", \"time_ms\": %.6f, "
               "\"tflops_per_gpu\": %.4f, \"mfu\": %.5f}",
               i ? "," : "", i + 1, r->it[i].loss, r->it[i].loss, r->it[i].time_ms, r->it[i].tflops, r->it[i].mfu);
    printf("],\n \"tflops_per_gpu\": %.4f, \"mfu\": %.5f, \"peak_tflops\": %.2f", tf, tf / r->peak_tflops,
           r->peak_tflops);
    if (c->paper_tflops > 0)
        printf(", \"paper_megatron_tflops\": %.2f, \"ratio\": %.4f", c->paper_tflops, tf / c->paper_tflops);
    printf(",\n \"pool_used_high_mib\": %.3f, \"device_used_mib\": %.3f", r->pool_used_high_mib,
           r->device_used_mib);
    if (r->on_vgpu)
        printf(",\n \"hazards\": %llu, \"device_ops\": %llu, \"peak_mem_gib\": %.3f, \"peak_mem_bytes\": %.0f, "
               "\"compute_busy_ms\": %.3f, \"comm_busy_ms\": %.3f, \"overlap_ms\": %.3f",
               (unsigned long long)r->hazards, (unsigned long long)r->ops, r->peak_mem_gib, r->peak_mem_bytes,
               r->compute_ms, r->comm_ms, r->overlap_ms);
    if (r->gradcheck_done) printf(",\n \"gradcheck_failed\": %d", r->gradcheck_failed);
    printf(",\n \"wall_s\": %.3f}\n", r->wall_s);
}

void wl_report_final(const wl_report_t *r)
{
    if (r->cfg->json) json(r);
    else text(r);
    fflush(stdout);
}
