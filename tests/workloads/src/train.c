/*
 * train.c: the training program (pretrain_gpt.py's train loop, in C).
 *
 * Per iteration: zero the gradient buffers, run the micro-batches (schedule.c), finalize
 * the gradients (data-parallel and sequence-parallel reductions), Adam, and read the loss
 * to the host (cudaMemcpyAsync + cudaStreamSynchronize, PyTorch's .item()). The iteration
 * time is virtual on the vgpu (CUDA events), real on a GPU; TFLOP/s per GPU uses
 * Megatron's FLOP formula (report.h).
 *
 *   mpirun -n 4 workload --model gpt-tiny --tp 2 --pp 2 --iters 20
 *   mpirun -n 2 workload --preset gpt-30b-a40          (timing-only, representative ranks)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#include <mpi.h>
#include <string.h>
#include <time.h>

#include "blas.h"
#include "cli.h"
#include "inject.h"
#include "kernels.h"
#include "report.h"
#include "schedule.h"

typedef struct run {
    wl_cfg_t cfg;
    wl_ps_t ps;
    wl_model_state_t ms;
    wl_opt_t *opt;
    wl_sched_t *sched;
    float *iter_loss, *host_loss;
    cudaEvent_t t0, t1;
    wl_report_t rep;
} run_t;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* One iteration; returns the loss (the same on every process) and the time in ms (the
 * slowest process's). step = 0 leaves the weights alone (gradient check). */
static void iteration(run_t *r, int it, int step, double *loss, double *ms_out)
{
    cudaStream_t s = wl_cur_stream();
    wl_inject_begin(it); /* WL_INJECT's points (inject.h) */
    WL_CK(cudaEventRecord(r->t0, s));
    wl_inject_point(WL_INJ_START, 0, 1);
    WL_CK(cudaMemsetAsync(r->iter_loss, 0, sizeof(float), s));
    wl_opt_zero_grad(r->opt);
    wl_sched_run(r->sched, it, r->iter_loss);
    wl_opt_finalize(r->opt);
    if (step) wl_opt_step(r->opt, (float)r->cfg.lr);
    wl_inject_point(WL_INJ_END, 0, 1);
    /* Megatron reports the loss averaged over the data-parallel group. */
    if (r->ms.last) wl_allreduce(&r->ps.dp, r->iter_loss, 1, ncclFloat, ncclSum, 0);
    WL_CK(cudaMemcpyAsync(r->host_loss, r->iter_loss, sizeof(float), cudaMemcpyDeviceToHost, s));
    WL_CK(cudaStreamSynchronize(s));
    WL_CK(cudaEventRecord(r->t1, s));
    WL_CK(cudaEventSynchronize(r->t1));
    float ms = 0;
    WL_CK(cudaEventElapsedTime(&ms, r->t0, r->t1));
    double mine[2] = {-INFINITY, ms}, all[2];
    if (r->ms.last && r->ps.tp_rank == 0)
        mine[0] = (double)*r->host_loss / (wl_sched_microbatches(&r->cfg) * r->cfg.dp);
    MPI_Allreduce(mine, all, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    *loss = all[0];
    *ms_out = all[1];
}

/* ---- gradient check ---- */

/* The element of p with the largest |gradient| among its first 4096. */
static int64_t pick(run_t *r, const wl_param_t *p)
{
    int64_t n = p->rows * p->cols, best = 0;
    if (n > 4096) n = 4096;
    float *g = malloc(sizeof(float) * (size_t)n);
    if (!g) wl_fatal("out of memory");
    WL_CK(cudaMemcpy(g, p->grad, sizeof(float) * (size_t)n, cudaMemcpyDeviceToHost));
    for (int64_t i = 1; i < n; i++)
        if (fabsf(g[i]) > fabsf(g[best])) best = i;
    free(g);
    return best;
}

/* Central differences of the loss against main_grad for up to cfg.gradcheck parameters,
 * spread over the model (the element with the largest gradient of each). The loss is an
 * fp32 value, so each of L(+eps), L(-eps) carries up to 2 ulp of rounding: the difference
 * quotient is exact to 4 ulp(L) / (2 eps); 3% on top covers the O(eps^2) truncation.
 * Tolerance: |fd - g| <= 4 ulp(L) / (2 eps) + 0.03 |g|. */
static int gradcheck(run_t *r)
{
    const double eps = 1e-2;
    int n = r->ms.nparams, want = r->cfg.gradcheck < n ? r->cfg.gradcheck : n, bad = 0;
    double loss, ms;
    iteration(r, 0, 0, &loss, &ms);
    float lf = (float)loss;
    double quantum = 4.0 * (double)(nextafterf(lf, INFINITY) - lf) / (2 * eps);
    int64_t idx[want];
    float g[want];
    const wl_param_t *ps[want];
    for (int k = 0; k < want; k++) {
        ps[k] = &r->ms.params[(int64_t)k * n / want];
        idx[k] = pick(r, ps[k]);
        g[k] = wl_opt_get_grad(r->opt, ps[k], idx[k]);
    }
    for (int k = 0; k < want; k++) {
        float v = wl_opt_get_param(r->opt, ps[k], idx[k]);
        double lp, lm;
        wl_opt_set_param(r->opt, ps[k], idx[k], v + (float)eps);
        iteration(r, 0, 0, &lp, &ms);
        wl_opt_set_param(r->opt, ps[k], idx[k], v - (float)eps);
        iteration(r, 0, 0, &lm, &ms);
        wl_opt_set_param(r->opt, ps[k], idx[k], v);
        double fd = (lp - lm) / (2 * eps), err = fabs(fd - g[k]);
        int ok = err <= quantum + 3e-2 * fabs(g[k]);
        bad += !ok;
        if (r->ps.proc == 0 && !r->cfg.json)
            printf("gradcheck %-40s [%5lld]  analytic %+.6e  numeric %+.6e  %s\n", ps[k]->name,
                   (long long)idx[k], (double)g[k], fd, ok ? "ok" : "MISMATCH");
    }
    return bad;
}

/* ---- setup and teardown ---- */

static double peak_tflops(const wl_cfg_t *c, char *name, size_t len)
{
    const vgpu_profile_t *p = wl_vgpu_profile();
    if (p) {
        snprintf(name, len, "%s", p->name);
        return c->dtype == WL_DT_F32 ? p->fp32_tflops : p->bf16_tflops;
    }
    struct cudaDeviceProp prop;
    WL_CK(cudaGetDeviceProperties(&prop, 0));
    snprintf(name, len, "%.31s", prop.name);
    static const struct { const char *key; double tf; } table[] = {
        {"H200", 989.4}, {"H100", 989.4}, {"A800", 312}, {"A100", 312}, {"A40", 149.7}};
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strstr(prop.name, table[i].key)) return table[i].tf;
    return 0;
}

static void setup(run_t *r)
{
    wl_ps_init(&r->ps, &r->cfg); /* before any CUDA call */
    WL_CK(cudaSetDevice(0));
    r->rep.on_vgpu = wl_kernels_init();
    r->cfg.timing_only = wl_vgpu_timing_only();
    if (r->cfg.represent && !r->cfg.timing_only) wl_fatal("representative ranks need VGPU_TIMING_ONLY=1");
    wl_comm_init(r->cfg.nccl_current);
    wl_ps_connect(&r->ps, &r->cfg);
    wl_model_build(&r->ms, &r->cfg, &r->ps);
    wl_inject_init(r->ps.grank);
    r->opt = wl_opt_create(&r->ms);
    r->sched = wl_sched_create(&r->ms, r->opt);
    r->iter_loss = wl_alloc(sizeof(float));
    WL_CK(cudaMallocHost((void **)&r->host_loss, sizeof(float)));
    WL_CK(cudaEventCreate(&r->t0));
    WL_CK(cudaEventCreate(&r->t1));
    wl_report_t *rep = &r->rep;
    rep->cfg = &r->cfg;
    rep->world = r->ps.world;
    rep->nproc = r->ps.nproc;
    rep->flops = wl_megatron_flops(&r->cfg);
    rep->peak_tflops = r->cfg.peak_tflops > 0 ? r->cfg.peak_tflops : peak_tflops(&r->cfg, rep->device, sizeof rep->device);
}

/* The vgpu's busy-time counters over the last iteration (process 0's device), to say
 * where the time went: they are reset before it. */
static void vgpu_reset(void)
{
    void (*reset)(void) = NULL;
    *(void **)&reset = dlsym(RTLD_DEFAULT, "vgpu_counters_reset");
    if (reset) reset();
}

/* Hazards, operations and memory from the vgpu (summed over processes; memory: the max). */
static void vgpu_stats(run_t *r)
{
    void (*counters)(vgpu_counters_t *) = NULL;
    *(void **)&counters = dlsym(RTLD_DEFAULT, "vgpu_counters");
    if (!counters) return;
    vgpu_counters_t c;
    counters(&c);
    r->rep.compute_ms = c.busy_ns_compute / 1e6;
    r->rep.comm_ms = c.busy_ns_comm / 1e6;
    r->rep.overlap_ms = c.overlap_ns / 1e6;
    unsigned long long mine[2] = {c.hazards, c.ops_completed}, sum[2];
    double mem = (double)c.peak_bytes_allocated / (1u << 30), mem_max;
    MPI_Allreduce(mine, sum, 2, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&mem, &mem_max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    r->rep.hazards = sum[0];
    r->rep.ops = sum[1];
    r->rep.peak_mem_gib = mem_max;
    r->rep.peak_mem_bytes = mem_max * (1u << 30);
}

/* Memory as a GPU reports it (report.h: pool_used_high_mib, device_used_mib). */
static void device_memory(run_t *r)
{
    int dev = 0;
    double mine[2] = {-1, -1}, most[2];
    cudaMemPool_t pool;
    unsigned long long high = 0;
    size_t free_b = 0, total_b = 0;
    if (cudaGetDevice(&dev) == cudaSuccess && cudaDeviceGetDefaultMemPool(&pool, dev) == cudaSuccess &&
        cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &high) == cudaSuccess)
        mine[0] = (double)high / (1 << 20);
    if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess && total_b >= free_b)
        mine[1] = (double)(total_b - free_b) / (1 << 20);
    MPI_Allreduce(mine, most, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    r->rep.pool_used_high_mib = most[0];
    r->rep.device_used_mib = most[1];
}

static void teardown(run_t *r)
{
    wl_sched_destroy(r->sched);
    wl_inject_fini();
    wl_free(r->iter_loss);
    wl_opt_destroy(r->opt);
    WL_CK(cudaFreeHost(r->host_loss));
    WL_CK(cudaEventDestroy(r->t0));
    WL_CK(cudaEventDestroy(r->t1));
    wl_ps_fini(&r->ps);
    wl_blas_thread_fini();
    wl_model_free(&r->ms);
    free(r->rep.it);
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    static run_t r;
    wl_cli_parse(&r.cfg, argc, argv);
    double t0 = now_s();
    setup(&r);
    int failed = 0;
    if (r.cfg.gradcheck) {
        failed = gradcheck(&r);
        r.rep.gradcheck_done = 1;
        r.rep.gradcheck_failed = failed;
    }
    for (int it = 0; it < r.cfg.iters; it++) {
        double loss, ms;
        if (it == r.cfg.iters - 1) vgpu_reset();
        iteration(&r, it, 1, &loss, &ms);
        wl_report_add(&r.rep, loss, ms);
        if (r.ps.proc == 0) wl_report_iter(&r.rep);
    }
    vgpu_stats(&r);
    WL_CK(cudaDeviceSynchronize());
    device_memory(&r);
    r.rep.wall_s = now_s() - t0;
    if (r.ps.proc == 0) wl_report_final(&r.rep);
    teardown(&r);
    MPI_Finalize();
    return failed ? 1 : 0;
}
