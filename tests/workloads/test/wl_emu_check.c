/*
 * wl_emu_check.c: the workload's emulated communication (--emulate-comm, src/emucomm.h) on
 * one device, and the shim over it (CTest workloads.emulate_comm and workloads.emulate_plan
 * on the vgpu, gpu.workload_emulate on a GPU).
 *
 *   wl_emu_check vgpu|gpu emulate WORKLOAD SHIM
 *   wl_emu_check vgpu|gpu plan WORKLOAD SHIM DHELIX
 *
 * One process runs a TP=2 (sequence-parallel) GPT and a TP=2 x DP=2 one (distributed
 * optimizer, overlapped reduction) whose other ranks are emulated. "emulate" checks:
 *   - every run exits 0 with finite losses (and, on the vgpu, no hazard: the footprints of
 *     the emulated kernel are exact and VGPU_HAZARD=abort is set by CTest);
 *   - the emulated time is spent: with SMS:US the iteration is slower than with SMS:0 by at
 *     least half the time the emulation asked for (the collectives of a TP layer are
 *     synchronous, so their time is exposed), and what the kernels measured covers what
 *     was asked;
 *   - the data is well defined: losses do not depend on the emulated time, the kernel form
 *     and the NCCL form (a one-rank communicator per group) give the same losses bit for
 *     bit, and two identical runs agree (on the vgpu their times too);
 *   - the shim changes nothing: stress mode (two seeds, both forms) and two-strand
 *     execution give the losses of the run without it, bit for bit.
 * "plan" runs, for the kernel form, the NCCL form and the TP x DP configuration, the
 * profile -> plan -> SI path: DHELIX_MODE=profile gives the baseline's losses and a
 * profile, `dhelix plan` makes a plan of it, and DHELIX_PLAN runs give the losses bit for
 * bit, with the shim's DHELIX_STATS report saying plan mode ran, deferred operations and
 * put cross-strand barriers (so the strands were interleaved, not passed through). A shim
 * whose report says it ran profile mode as something else has no profile mode: the
 * scenario then exits 77 (skipped), never 0.
 * Losses are compared by "loss_hex" (every bit) when the workload prints it, else "loss".
 */
#define _GNU_SOURCE
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAXIT 8

static const char *workload, *shim, *dhelix;
static int on_vgpu, failures, skipped;
static char tmpdir[] = "/tmp/wl_emu_check.XXXXXX";

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
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

typedef struct result {
    int ok, n;
    char loss[MAXIT][48];   /* as printed: loss_hex, else loss */
    double lossv[MAXIT], ms[MAXIT];
    double hazards;         /* -1 when not reported (a GPU) */
    double target_us, device_us, collectives; /* the emulation's summary line */
    char mode[24];          /* the shim's report (runs with the shim): mode, */
    double deferred, barriers; /* operations deferred, cross-strand barriers */
} result_t;

static char *slurp(const char *path);

/* The DHELIX_STATS=json report of the process that made the most calls (helpers that
 * inherit LD_PRELOAD, such as an MPI singleton's daemon, append theirs to the same file). */
static void read_stats(result_t *r, const char *path)
{
    char *text = slurp(path);
    json_t *best = NULL;
    double best_calls = -1;
    for (const char *p = text; p && (p = strchr(p, '{')) != NULL;) {
        json_error_t je;
        json_t *o = json_loads(p, JSON_DISABLE_EOF_CHECK, &je);
        if (!o) break;
        p += je.position;
        json_t *rows = json_object_get(o, "rows"), *row;
        size_t i;
        double calls = 0;
        json_array_foreach(rows, i, row) calls += json_number_value(json_object_get(row, "calls"));
        if (rows && calls > best_calls) {
            json_decref(best);
            best = o;
            best_calls = calls;
        } else {
            json_decref(o);
        }
    }
    json_t *meta = json_object_get(best, "meta");
    const char *key;
    json_t *v;
    snprintf(r->mode, sizeof r->mode, "%s", meta ? json_string_value(json_object_get(meta, "mode")) : "none");
    json_object_foreach(meta, key, v) {
        if (!strncmp(key, "deferred_", 9)) r->deferred += json_number_value(v);
    }
    r->barriers = meta ? json_number_value(json_object_get(meta, "cross_strand_barriers")) : 0;
    json_decref(best);
    free(text);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return strdup("");
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + len, 1, cap - len - 1, f)) > 0;) {
        len += got;
        if (len + 1 == cap) buf = realloc(buf, cap *= 2);
    }
    fclose(f);
    if (buf) buf[len] = '\0';
    return buf;
}

static double num(json_t *j, const char *key)
{
    json_t *v = json_object_get(j, key);
    return json_is_null(v) ? NAN : v ? json_number_value(v) : -1;
}

/* printf writes a NaN as nan or -nan, which is not JSON: such a value becomes null. */
static void nan_to_null(char *s)
{
    for (char *p = s; (p = strstr(p, ": ")) != NULL; p += 2) {
        if (!strncmp(p + 2, "-nan", 4)) memcpy(p + 2, "null", 4);
        else if (!strncmp(p + 2, "nan", 3)) memcpy(p + 1, "null", 4);
    }
}

/* Runs the workload with args and env ("K=V ..." put in front, may be ""); with_shim puts
 * the shim first in LD_PRELOAD. */
static result_t run(const char *label, const char *args, const char *env, int with_shim)
{
    result_t r;
    memset(&r, 0, sizeof r);
    char out[600], err[600], stats[600], pre[5000] = "", cmd[9000];
    snprintf(out, sizeof out, "%s/out.json", tmpdir);
    snprintf(err, sizeof err, "%s/err.txt", tmpdir);
    snprintf(stats, sizeof stats, "%s/stats.json", tmpdir);
    unlink(stats);
    if (with_shim) {
        const char *cur = getenv("LD_PRELOAD");
        snprintf(pre, sizeof pre, "LD_PRELOAD='%s%s%s' DHELIX_STATS=json DHELIX_STATS_FILE='%s'", shim,
                 cur && *cur ? ":" : "", cur ? cur : "", stats);
    }
    snprintf(cmd, sizeof cmd, "env %s %s '%s' %s --json --quiet >'%s' 2>'%s'", pre, env, workload, args, out, err);
    printf("[%s] $ %s\n", label, cmd);
    fflush(stdout);
    int status = system(cmd);
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    char *o = slurp(out), *e = slurp(err);
    if (o) nan_to_null(o);
    char *brace = o ? strchr(o, '{') : NULL;
    json_error_t je;
    json_t *j = brace ? json_loads(brace, JSON_DISABLE_EOF_CHECK, &je) : NULL;
    const char *line = e ? strstr(e, "workload: emulated communication {") : NULL;
    json_t *emu = line ? json_loads(strchr(line, '{'), JSON_DISABLE_EOF_CHECK, &je) : NULL;
    if (code != 0 || !j) {
        fail("[%s] exit status %d (86: a vgpu hazard)%s, stderr:\n%s", label, code,
             code == 0 ? ", output not JSON" : "", e ? e : "");
    } else {
        json_t *it = json_object_get(j, "iterations");
        for (size_t i = 0; i < json_array_size(it) && r.n < MAXIT; i++, r.n++) {
            json_t *x = json_array_get(it, i);
            json_t *hex = json_object_get(x, "loss_hex");
            r.lossv[r.n] = num(x, "loss");
            r.ms[r.n] = num(x, "time_ms");
            if (hex) snprintf(r.loss[r.n], sizeof r.loss[r.n], "%s", json_string_value(hex));
            else snprintf(r.loss[r.n], sizeof r.loss[r.n], "%.17g", r.lossv[r.n]);
            if (!isfinite(r.lossv[r.n])) fail("[%s] iteration %zu: loss %g is not finite", label, i + 1, r.lossv[r.n]);
        }
        r.hazards = num(j, "hazards");
        if (r.hazards > 0) fail("[%s] vgpu hazards: expected 0, got %.0f", label, r.hazards);
        if (!emu) fail("[%s] no 'workload: emulated communication' line on stderr", label);
        r.ok = r.n > 0 && emu != NULL;
        if (with_shim) read_stats(&r, stats);
    }
    if (emu) {
        r.target_us = num(emu, "target_us");
        r.device_us = num(emu, "device_us");
        r.collectives = num(emu, "collectives");
        printf("[%s] %d iterations, first loss %s, last iteration %.3f ms; emulated: %.0f collectives, "
               "asked %.1f us, measured %.1f us\n", label, r.n, r.n ? r.loss[0] : "-", r.n ? r.ms[r.n - 1] : 0,
               r.collectives, r.target_us, r.device_us);
        if (with_shim)
            printf("[%s] the shim: mode %s, %.0f operations deferred, %.0f cross-strand barriers\n", label, r.mode,
                   r.deferred, r.barriers);
    }
    json_decref(j);
    json_decref(emu);
    free(o);
    free(e);
    return r;
}

static void same_losses(const result_t *a, const result_t *b, const char *what_a, const char *what_b)
{
    if (!a->ok || !b->ok) return;
    if (a->n != b->n) {
        fail("%s vs %s: %d vs %d iterations", what_a, what_b, a->n, b->n);
        return;
    }
    for (int i = 0; i < a->n; i++)
        if (strcmp(a->loss[i], b->loss[i]))
            fail("%s vs %s: iteration %d loss %s vs %s (expected bit-identical)", what_a, what_b, i + 1, a->loss[i],
                 b->loss[i]);
}

static void same_times(const result_t *a, const result_t *b, const char *what)
{
    for (int i = 0; a->ok && b->ok && i < a->n && i < b->n; i++)
        if (a->ms[i] != b->ms[i]) fail("%s: iteration %d time %.6f vs %.6f ms (virtual time must repeat)", what, i + 1,
                                       a->ms[i], b->ms[i]);
}

/* The emulated time must show: per iteration at least half of what was asked, and the
 * kernels' own measurement at least 90% of it. */
static void time_spent(const result_t *fast, const result_t *slow, const char *what)
{
    if (!fast->ok || !slow->ok || slow->n < 2) return;
    double asked = slow->target_us / slow->n / 1e3, d = 0;
    for (int i = 1; i < slow->n; i++) d += (slow->ms[i] - fast->ms[i]) / (slow->n - 1);
    printf("%s: emulation asked %.3f ms per iteration; the iteration got %.3f ms slower\n", what, asked, d);
    if (!(d >= 0.5 * asked)) fail("%s: expected at least %.3f ms more per iteration, got %.3f", what, 0.5 * asked, d);
    if (!(slow->device_us >= 0.9 * slow->target_us))
        fail("%s: the kernels measured %.1f us, expected at least 90%% of the %.1f asked", what, slow->device_us,
             slow->target_us);
}

/* profile -> dhelix plan -> plan mode for one configuration against its baseline. */
static void plan_path(const char *label, const char *args, const result_t *base)
{
    char prof[700], plan[700], env[1600], cmd[2400], what[200];
    snprintf(prof, sizeof prof, "%s/prof", tmpdir);
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", prof, prof);
    if (system(cmd) != 0) fail("cannot make %s", prof);
    snprintf(env, sizeof env, "DHELIX_MODE=profile DHELIX_PROFILE='%s/prof.%%p.json'", prof);
    snprintf(what, sizeof what, "%s, profile", label);
    result_t p = run(what, args, env, 1);
    same_losses(base, &p, label, what);
    if (p.ok && strcmp(p.mode, "profile")) { /* a shim from before profile mode */
        printf("[%s] SKIP: the shim ran DHELIX_MODE=profile as '%s': no profile mode to test\n", label, p.mode);
        skipped = 1;
        return;
    }
    /* The program's profile is the largest file that is a profile (helpers that inherit
     * LD_PRELOAD may write profiles too, and profile mode may write other files). */
    snprintf(plan, sizeof plan, "%s/plan.json", tmpdir);
    snprintf(cmd, sizeof cmd,
             "f=$(grep -l '\"dhelix-profile\"' '%s'/*.json 2>/dev/null | xargs -r ls -S | head -n 1); "
             "[ -n \"$f\" ] && '%s' plan \"$f\" -o '%s'", prof, dhelix, plan);
    printf("[%s] $ %s\n", label, cmd);
    fflush(stdout);
    if (system(cmd) != 0) {
        fail("[%s] no plan: profile mode wrote no profile in %s, or dhelix plan failed", label, prof);
        return;
    }
    snprintf(env, sizeof env, "DHELIX_MODE=plan DHELIX_PLAN='%s'", plan);
    snprintf(what, sizeof what, "%s, plan", label);
    result_t s = run(what, args, env, 1);
    same_losses(base, &s, label, what);
    if (s.ok && strcmp(s.mode, "plan"))
        fail("[%s] the shim reports mode %s, expected plan", what, s.mode);
    if (s.ok && !(s.deferred > 0)) fail("[%s] no operation deferred: the shim passed everything through", what);
    if (s.ok && !(s.barriers > 0))
        fail("[%s] no cross-strand barrier: the strands were never interleaved", what);
}

int main(int argc, char **argv)
{
    int plan = argc == 6 && !strcmp(argv[2], "plan");
    if ((argc != 5 && !plan) || (strcmp(argv[1], "vgpu") && strcmp(argv[1], "gpu")) ||
        (!plan && strcmp(argv[2], "emulate"))) {
        fprintf(stderr, "usage: wl_emu_check vgpu|gpu emulate WORKLOAD SHIM\n"
                        "       wl_emu_check vgpu|gpu plan WORKLOAD SHIM DHELIX\n");
        return 2;
    }
    on_vgpu = !strcmp(argv[1], "vgpu");
    workload = argv[3];
    shim = argv[4];
    dhelix = plan ? argv[5] : NULL;
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 2;
    }
    /* Large enough on a GPU for the emulated time to be measured against real kernels,
     * small enough for the vgpu's real math (fp32: the vgpu's and the GPU's losses are
     * each compared only with themselves). */
    const char *tp = on_vgpu ? "--model gpt-tiny --dtype fp32 --tp 2 --gbs 8 --iters 3"
                             : "--model gpt-tiny --dtype fp32 --hidden 512 --heads 8 --ffn 2048 --seq 256 --tp 2 "
                               "--gbs 8 --iters 4";
    const char *dp = on_vgpu ? "--model gpt-tiny --dtype fp32 --tp 2 --dp 2 --gbs 8 --iters 3 --dist-opt "
                               "--overlap-grad-reduce"
                             : "--model gpt-tiny --dtype fp32 --hidden 512 --heads 8 --ffn 2048 --seq 256 --tp 2 "
                               "--dp 2 --gbs 8 --iters 4 --dist-opt --overlap-grad-reduce";
    char a[1024];
#define ARGS(base, spec) (snprintf(a, sizeof a, "%s --emulate-comm %s", base, spec), a)

    if (plan) {
        result_t base = run("tp2, 8:200:50", ARGS(tp, "8:200:50"), "", 0);
        plan_path("tp2, 8:200:50", ARGS(tp, "8:200:50"), &base);
        result_t nccl = run("tp2, nccl", ARGS(tp, "nccl"), "", 0);
        plan_path("tp2, nccl", ARGS(tp, "nccl"), &nccl);
        result_t d0 = run("tp2 dp2, 8:50:100", ARGS(dp, "8:50:100"), "", 0);
        plan_path("tp2 dp2, 8:50:100", ARGS(dp, "8:50:100"), &d0);
    } else {
        result_t zero = run("tp2, 8:0", ARGS(tp, "8:0"), "", 0);
        result_t base = run("tp2, 8:200:50", ARGS(tp, "8:200:50"), "", 0);
        result_t again = run("tp2, 8:200:50, again", ARGS(tp, "8:200:50"), "", 0);
        result_t nccl = run("tp2, nccl", ARGS(tp, "nccl"), "", 0);
        time_spent(&zero, &base, "tp2 8:200:50 against 8:0");
        same_losses(&zero, &base, "8:0", "8:200:50");
        same_losses(&base, &again, "8:200:50", "8:200:50 again");
        if (on_vgpu) same_times(&base, &again, "two identical runs");
        same_losses(&base, &nccl, "the kernel form", "the nccl form");

        result_t s1 = run("tp2, stress seed 1", ARGS(tp, "8:200:50"), "DHELIX_MODE=stress DHELIX_SEED=1", 1);
        result_t s2 = run("tp2, stress seed 2", ARGS(tp, "8:200:50"), "DHELIX_MODE=stress DHELIX_SEED=2", 1);
        result_t sn = run("tp2, nccl, stress", ARGS(tp, "nccl"), "DHELIX_MODE=stress DHELIX_SEED=3", 1);
        same_losses(&base, &s1, "no shim", "stress seed 1");
        same_losses(&base, &s2, "no shim", "stress seed 2");
        /* Not DHELIX_MODE=test-strands: that test mode pairs by issuing thread with no plan, and
         * the emulation kernel's buffers are inside its struct argument, where the shim does
         * not look for pointers (scheduler/ops/op_desc.c); plan mode is checked by emulate_plan. */
        same_losses(&nccl, &sn, "nccl, no shim", "nccl, stress");

        result_t d0 = run("tp2 dp2, 8:50:100", ARGS(dp, "8:50:100"), "", 0);
        result_t dn = run("tp2 dp2, nccl", ARGS(dp, "nccl"), "", 0);
        result_t ds = run("tp2 dp2, stress seed 4", ARGS(dp, "8:50:100"), "DHELIX_MODE=stress DHELIX_SEED=4", 1);
        same_losses(&d0, &dn, "tp2 dp2 kernel form", "tp2 dp2 nccl form");
        same_losses(&d0, &ds, "tp2 dp2 no shim", "tp2 dp2 stress");
    }

    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    printf("emulate-comm %s (%s): %s\n", argv[2], argv[1], failures ? "FAILED" : skipped ? "skipped" : "ok");
    return failures ? 1 : skipped ? 77 : 0;
}
