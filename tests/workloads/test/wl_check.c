/*
 * wl_check.c: runs the workload in one scenario and judges it (one CTest entry each).
 *
 *   wl_check SCENARIO MPIEXEC WORKLOAD [SHIM]
 *
 * The workload runs with --json (summary on stdout) under the environment CTest gives
 * (the vgpu preloaded, VGPU_HAZARD=abort: a race ends the run with status 86). Every
 * check prints what it expected and what it got. Scenarios:
 *   loss-gpt, loss-llama     real math, 20 iterations: the loss goes down
 *   gradcheck-gpt, -llama, -moe  fp32 finite differences against main_grad
 *   repeat                   two identical 2-rank runs: losses and times bit-identical
 *   tp, tp-nosp, pp, pp-tp, cp, dp, ep, mixed, split-current
 *                            multi-rank runs, zero hazards, and (fp32) the same losses as
 *                            the one-rank run within REL_TOL
 *   preset:NAME              a paper configuration, timing-only, representative ranks
 *   preset-vpp:NAME          the same with its virtual stages (--vpp preset)
 *   vpp-*                    Megatron's interleaved 1F1B (--vpp): the same losses as the
 *                            non-interleaved run BIT FOR BIT (each layer computes the same
 *                            thing; the loss sums micro-batches in the same order, each
 *                            gradient accumulates them in the same order, and every other
 *                            reduction is elementwise), zero hazards; with SHIM, also in
 *                            DHELIX_MODE=stress with two seeds
 *   vpp-refused              configurations Megatron refuses: exit status not 0
 */
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

/* TP/PP/CP/DP against one rank, fp32: the runs differ only in the order of fp32 sums (a
 * GEMM's K split over tp ranks and added by the all-reduce/reduce-scatter, the data-
 * parallel average, the ring's log-sum-exp merges). One such reordering perturbs a result
 * by a few units of 2^-24 times the terms' magnitudes; through a few layers and 4 Adam
 * steps at lr 1e-3 that stays far below 1e-5 relative on the loss (observed: under 1e-7),
 * while any real error (a missing reduction, a wrong shard, a misplaced chunk) moves the
 * first loss by 1e-2 or more. */
#define REL_TOL 1e-5

static const char *mpiexec, *workload, *shim;
static int failures;

static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("FAIL: ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    failures++;
}

/* Runs the workload on np processes with args (env: "K=V ..." in front, or ""); returns its
 * JSON summary or NULL. */
static json_t *run_env(int np, const char *env, const char *args)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s%s%s%s -n %d --oversubscribe --allow-run-as-root %s %s --json", *env ? "env " : "",
             env, *env ? " " : "", mpiexec, np, workload, args);
    printf("$ %s\n", cmd);
    fflush(stdout);
    FILE *p = popen(cmd, "r");
    if (!p) {
        fail("cannot run the command");
        return NULL;
    }
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + len, 1, cap - len - 1, p)) > 0;) {
        len += got;
        if (len + 1 == cap) buf = realloc(buf, cap *= 2);
    }
    int status = pclose(p);
    if (!buf) return NULL;
    buf[len] = '\0';
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    char *brace = strchr(buf, '{');
    json_error_t err;
    json_t *j = brace ? json_loads(brace, JSON_DISABLE_EOF_CHECK, &err) : NULL;
    if (code != 0 || !j) {
        fail("exit status %d (86: a vgpu hazard), output:\n%s", code, buf);
        json_decref(j);
        j = NULL;
    }
    free(buf);
    return j;
}

static json_t *run(int np, const char *args) { return run_env(np, "", args); }

static double num(json_t *j, const char *key) { return json_number_value(json_object_get(j, key)); }

static int losses(json_t *j, double *out, int max)
{
    json_t *it = json_object_get(j, "iterations");
    int n = 0;
    for (size_t i = 0; i < json_array_size(it) && n < max; i++) out[n++] = num(json_array_get(it, i), "loss");
    return n;
}

static void expect_no_hazards(json_t *j)
{
    if (num(j, "hazards") != 0) fail("vgpu hazards: expected 0, got %.0f", num(j, "hazards"));
}

/* ---- scenarios ---- */

static void loss_down(const char *model)
{
    char args[256];
    snprintf(args, sizeof args, "--model %s --iters 20 --lr 3e-3", model);
    json_t *j = run(1, args);
    if (!j) return;
    double l[20];
    int n = losses(j, l, 20);
    double first = 0, last = 0;
    for (int i = 0; i < 5 && n == 20; i++) {
        first += l[i] / 5;
        last += l[15 + i] / 5;
    }
    printf("mean loss, iterations 1-5: %.4f, 16-20: %.4f\n", first, last);
    if (n != 20 || !(last < first - 0.3)) fail("loss: expected a drop of at least 0.3, got %.4f -> %.4f", first, last);
    expect_no_hazards(j);
    json_decref(j);
}

static void gradcheck(const char *model, const char *extra)
{
    char args[256];
    snprintf(args, sizeof args, "--model %s --dtype fp32 --iters 1 --gradcheck 12 %s", model, extra);
    json_t *j = run(1, args);
    if (!j) return;
    if (num(j, "gradcheck_failed") != 0) fail("gradcheck: %.0f mismatches", num(j, "gradcheck_failed"));
    json_decref(j);
}

static void repeat(void)
{
    const char *args = "--model llama-tiny --tp 2 --iters 3";
    json_t *a = run(2, args), *b = run(2, args);
    if (a && b) {
        char *sa = json_dumps(json_object_get(a, "iterations"), JSON_COMPACT | JSON_REAL_PRECISION(17));
        char *sb = json_dumps(json_object_get(b, "iterations"), JSON_COMPACT | JSON_REAL_PRECISION(17));
        printf("run 1: %s\nrun 2: %s\n", sa, sb);
        if (strcmp(sa, sb)) fail("two identical runs differ (losses or virtual times)");
        free(sa);
        free(sb);
    }
    json_decref(a);
    json_decref(b);
}

/* A multi-rank configuration against the same model on one rank (fp32). */
static void against_one_rank(int np, const char *model, const char *par, int gbs)
{
    char one[256], many[512];
    snprintf(one, sizeof one, "--model %s --dtype fp32 --iters 4 --gbs %d", model, gbs);
    snprintf(many, sizeof many, "%s %s", one, par);
    json_t *a = run(1, one), *b = run(np, many);
    if (a && b) {
        double la[8], lb[8];
        int na = losses(a, la, 8), nb = losses(b, lb, 8);
        if (na != nb) fail("iterations: %d vs %d", na, nb);
        for (int i = 0; i < na && i < nb; i++) {
            double rel = fabs(la[i] - lb[i]) / fabs(la[i]);
            printf("iter %d: one rank %.9f, %s %.9f, relative difference %.2e (tolerance %.0e)\n", i + 1, la[i],
                   par, lb[i], rel, REL_TOL);
            if (!(rel <= REL_TOL)) fail("iteration %d: loss %.9f vs %.9f", i + 1, la[i], lb[i]);
        }
        expect_no_hazards(b);
    }
    json_decref(a);
    json_decref(b);
}

/* Every iteration's loss, all bits ("loss_hex"), as one string. */
static char *hex_losses(json_t *j)
{
    json_t *it = json_object_get(j, "iterations"), *out = json_array();
    for (size_t i = 0; i < json_array_size(it); i++)
        json_array_append(out, json_object_get(json_array_get(it, i), "loss_hex"));
    char *s = json_dumps(out, JSON_COMPACT);
    json_decref(out);
    return s;
}

static void same_bits(json_t *ref, json_t *j, const char *what)
{
    char *a = hex_losses(ref), *b = hex_losses(j);
    printf("non-interleaved: %s\n%s: %s\n", a, what, b);
    if (json_array_size(json_object_get(ref, "iterations")) == 0 || strcmp(a, b))
        fail("%s: losses differ from the non-interleaved run's", what);
    expect_no_hazards(j);
    free(a);
    free(b);
}

/* The interleaved schedule (par: --vpp ...) against the non-interleaved one of the same
 * model and layout, bit for bit; through the shim in stress mode too when one is given. */
static void interleaved(int np, const char *base, const char *par)
{
    char many[512];
    snprintf(many, sizeof many, "%s %s", base, par);
    json_t *a = run(np, base), *b = a ? run(np, many) : NULL;
    if (a && b) same_bits(a, b, par);
    for (int seed = 1; shim && a && b && seed <= 2; seed++) {
        char env[2048], what[600];
        const char *cur = getenv("LD_PRELOAD");
        snprintf(env, sizeof env, "LD_PRELOAD='%s%s%s' DHELIX_MODE=stress DHELIX_SEED=%d", shim,
                 cur && *cur ? ":" : "", cur ? cur : "", seed);
        snprintf(what, sizeof what, "%s, shim stress seed %d", par, seed);
        json_t *c = run_env(np, env, many);
        if (c) same_bits(a, c, what);
        json_decref(c);
    }
    json_decref(a);
    json_decref(b);
}

/* A configuration the workload must refuse, as Megatron does. */
static void refused(int np, const char *args, const char *why)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s -n %d --oversubscribe --allow-run-as-root %s %s --json >/dev/null 2>&1",
             mpiexec, np, workload, args);
    printf("$ %s   (must fail: %s)\n", cmd, why);
    fflush(stdout);
    int st = system(cmd);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) fail("accepted: %s (%s)", args, why);
}

static void preset(const char *name, const char *extra)
{
    char args[256];
    snprintf(args, sizeof args, "--preset %s %s", name, extra);
    int np = 0;
    /* The process count is pp x cp: read it from the preset listing. */
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s --list-presets", workload);
    FILE *p = popen(cmd, "r");
    char line[512];
    while (p && fgets(line, sizeof line, p)) {
        char n[64];
        int dp, tp, pp, cp;
        if (sscanf(line, " %63s %*s dp %d tp %d pp %d cp %d", n, &dp, &tp, &pp, &cp) == 5 && !strcmp(n, name))
            np = pp * cp;
    }
    if (p) pclose(p);
    if (np == 0) {
        fail("unknown preset %s", name);
        return;
    }
    json_t *j = run(np, args);
    if (!j) return;
    expect_no_hazards(j);
    double tf = num(j, "tflops_per_gpu"), paper = num(j, "paper_megatron_tflops");
    printf("%s: %.2f TFLOP/s per GPU (Megatron's formula), paper's Megatron baseline %.1f, ratio %.3f\n", name, tf,
           paper, tf / paper);
    if (!(tf > 0)) fail("no throughput");
    json_decref(j);
}

int main(int argc, char **argv)
{
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: wl_check SCENARIO MPIEXEC WORKLOAD [SHIM]\n");
        return 2;
    }
    const char *s = argv[1];
    mpiexec = argv[2];
    workload = argv[3];
    shim = argc == 5 ? argv[4] : NULL;
    if (!strcmp(s, "loss-gpt")) loss_down("gpt-tiny");
    else if (!strcmp(s, "loss-llama")) loss_down("llama-tiny");
    else if (!strcmp(s, "gradcheck-gpt")) gradcheck("gpt-tiny", "");
    else if (!strcmp(s, "gradcheck-llama")) gradcheck("llama-tiny", "");
    /* Every expert chosen: top-k selection is piecewise, and a finite difference that
     * crosses a selection boundary measures a jump, not the router's gradient. */
    else if (!strcmp(s, "gradcheck-moe")) gradcheck("moe-tiny", "--topk 4");
    else if (!strcmp(s, "repeat")) repeat();
    else if (!strcmp(s, "tp")) against_one_rank(2, "gpt-tiny", "--tp 2", 4);
    else if (!strcmp(s, "tp-nosp")) against_one_rank(2, "llama-tiny", "--tp 2 --no-sp", 4);
    else if (!strcmp(s, "pp")) against_one_rank(4, "llama-tiny --layers 4", "--pp 4", 8);
    else if (!strcmp(s, "pp-tp")) against_one_rank(4, "gpt-tiny", "--pp 2 --tp 2", 4);
    else if (!strcmp(s, "cp")) against_one_rank(4, "llama-tiny", "--cp 4", 4);
    else if (!strcmp(s, "dp")) against_one_rank(4, "gpt-tiny", "--dp 4 --dist-opt --overlap-grad-reduce", 8);
    else if (!strcmp(s, "ep")) against_one_rank(4, "moe-tiny", "--dp 4 --ep 2 --dist-opt --overlap-grad-reduce", 8);
    else if (!strcmp(s, "mixed")) against_one_rank(8, "gpt-tiny", "--tp 2 --pp 2 --dp 2 --dist-opt --overlap-grad-reduce", 8);
    else if (!strcmp(s, "split-current"))
        against_one_rank(8, "llama-tiny", "--tp 2 --cp 2 --dp 2 --comm-split --nccl-current-stream", 8);
    else if (!strncmp(s, "preset:", 7)) preset(s + 7, "");
    else if (!strncmp(s, "preset-vpp:", 11)) preset(s + 11, "--vpp preset");
    /* Interleaved 1F1B: 4 model chunks' worth of layers per rank pair or 2 per rank of 4,
     * M = 2 pp (two micro-batch groups: the table's group boundary is crossed). */
    else if (!strcmp(s, "vpp-pp2-tp2"))
        interleaved(4, "--model gpt-tiny --layers 4 --tp 2 --pp 2 --gbs 4 --iters 3", "--vpp 2");
    else if (!strcmp(s, "vpp-pp2-v4"))
        interleaved(2, "--model llama-tiny --layers 8 --pp 2 --gbs 4 --iters 3 --dtype fp32", "--vpp 4");
    else if (!strcmp(s, "vpp-pp4"))
        interleaved(4, "--model gpt-tiny --layers 8 --pp 4 --gbs 8 --iters 3", "--vpp 2");
    else if (!strcmp(s, "vpp-pp4-nooverlap"))
        interleaved(4, "--model gpt-tiny --layers 8 --pp 4 --gbs 8 --iters 3", "--vpp 2 --no-overlap-p2p-communication");
    else if (!strcmp(s, "vpp-pp4-tp2"))
        interleaved(8, "--model gpt-tiny --layers 8 --tp 2 --pp 4 --gbs 8 --iters 2", "--vpp 2");
    else if (!strcmp(s, "vpp-pp4-tp2-nooverlap"))
        interleaved(8, "--model gpt-tiny --layers 8 --tp 2 --pp 4 --gbs 8 --iters 2",
                    "--vpp 2 --no-overlap-p2p-communication");
    else if (!strcmp(s, "vpp-dp"))
        interleaved(4, "--model gpt-tiny --layers 4 --pp 2 --dp 2 --dist-opt --overlap-grad-reduce --gbs 8 --iters 3",
                    "--vpp 2");
    else if (!strcmp(s, "vpp-refused")) {
        refused(2, "--model gpt-tiny --layers 4 --pp 2 --vpp 2 --no-overlap-p2p-communication",
                "no p2p overlap needs pp > 2");
        refused(2, "--model gpt-tiny --layers 4 --pp 2 --vpp 2 --gbs 3", "3 micro-batches, not a multiple of pp 2");
        refused(2, "--model gpt-tiny --layers 6 --pp 2 --vpp 2 --gbs 4", "6 layers do not split into 4 chunks");
        refused(1, "--model gpt-tiny --layers 4 --vpp 2 --gbs 4", "virtual stages without pipeline parallelism");
    }
    else {
        fprintf(stderr, "unknown scenario %s\n", s);
        return 2;
    }
    printf("%s: %s\n", s, failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
