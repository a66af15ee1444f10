/*
 * main.c: dhelix-pairs, the overlap profiler (`dhelix profile-pairs` runs it).
 *
 *   [scripts/vgpu-run] mpirun -n R dhelix-pairs PROFILE -o pairs.json [options]
 *
 * One process per rank. Every rank reads the same profile, chooses the same ops (pairs.h,
 * dh_ovl_select), joins one NCCL communicator over all ranks and makes the same calls;
 * rank 0 writes pairs.json and prints the tables. Exit status: 0, 1 on a failure, 2 on a
 * usage error.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "pairs.h"
#include "rdv.h"

typedef struct dh__args {
    const char *profile, *out, *rdv_dir;
    int k, kcc, reps, warmup, functional, gate_gemm;
    double timeout_s, gate_us;
} dh__args_t;

static void dh__usage(FILE *f)
{
    fprintf(f,
            "usage: [scripts/vgpu-run] mpirun -n R dhelix-pairs PROFILE -o OUT [options]\n"
            "Times the profile's heaviest GEMMs and collectives alone and co-running on two\n"
            "streams; efficiency = (a + b - corun) / min(a, b). Rank 0 writes OUT (JSON).\n"
            "  -o, --output OUT      the pair profile to write (required)\n"
            "  --max-shapes K        distinct ops per class, heaviest first (default 6)\n"
            "  --max-cc K            compute||compute pairs among the top K GEMMs (default 3)\n"
            "  --reps N              timed repetitions, median reported (default 5)\n"
            "  --warmup N            untimed repetitions first (default 2)\n"
            "  --rendezvous DIR      where rank 0 leaves the NCCL id (default\n"
            "                        /tmp/dhelix-pairs-<uid>-<ppid>; must be shared by all ranks)\n"
            "  --timeout S           seconds to wait for rank 0's id (default 120)\n"
            "  --functional          on the vgpu, compute values too (default: timing only)\n"
            "  --gate-gemm           on the vgpu, gate with GEMMs as on a GPU (tests that path)\n"
            "  --gate-us US          first gate length (default 200; doubled when too short)\n");
}

static int dh__int_arg(const char *s, int lo, int hi, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || end == s || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

/* 0, or 2 (usage) after a message. */
static int dh__parse(int argc, char **argv, dh__args_t *a)
{
    *a = (dh__args_t){.k = 6, .kcc = 3, .reps = 5, .warmup = 2, .timeout_s = 120, .gate_us = 200};
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0, t;
        if (strcmp(o, "-h") == 0 || strcmp(o, "--help") == 0) {
            dh__usage(stdout);
            exit(0);
        } else if (strcmp(o, "--functional") == 0) {
            a->functional = 1;
            continue;
        } else if (strcmp(o, "--gate-gemm") == 0) {
            a->gate_gemm = 1;
            continue;
        } else if (o[0] != '-') {
            if (a->profile) {
                fprintf(stderr, "dhelix-pairs: one profile only (got %s and %s)\n", a->profile, o);
                return 2;
            }
            a->profile = o;
            continue;
        } else if (!v) {
            bad = 1;
        } else if (strcmp(o, "-o") == 0 || strcmp(o, "--output") == 0) {
            a->out = v;
        } else if (strcmp(o, "--max-shapes") == 0) {
            bad = dh__int_arg(v, 1, 64, &a->k);
        } else if (strcmp(o, "--max-cc") == 0) {
            bad = dh__int_arg(v, 0, 64, &a->kcc);
        } else if (strcmp(o, "--reps") == 0) {
            bad = dh__int_arg(v, 1, 1000, &a->reps);
        } else if (strcmp(o, "--warmup") == 0) {
            bad = dh__int_arg(v, 0, 1000, &a->warmup);
        } else if (strcmp(o, "--rendezvous") == 0) {
            a->rdv_dir = v;
        } else if (strcmp(o, "--gate-us") == 0) {
            bad = dh__int_arg(v, 1, 100000, &t);
            a->gate_us = t;
        } else if (strcmp(o, "--timeout") == 0) {
            bad = dh__int_arg(v, 1, 86400, &t);
            a->timeout_s = t;
        } else {
            bad = 1;
        }
        if (bad) {
            fprintf(stderr, "dhelix-pairs: bad option %s%s%s\n", o, v ? " " : "", v ? v : "");
            dh__usage(stderr);
            return 2;
        }
        i++;
    }
    if (!a->profile || !a->out) {
        fprintf(stderr, "dhelix-pairs: need a PROFILE and -o OUT\n");
        dh__usage(stderr);
        return 2;
    }
    return 0;
}

/* Environment that must be in place before CUDA initialises. Returns the hardware queue
 * count in effect. */
static int dh__early_env(const dh_profile_t *p, const dh__args_t *a, int rank)
{
    char v[32];
    if (!getenv("CUDA_DEVICE_MAX_CONNECTIONS") && p->max_connections > 0) {
        snprintf(v, sizeof v, "%d", p->max_connections);
        setenv("CUDA_DEVICE_MAX_CONNECTIONS", v, 1);
    }
    const char *mc = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
    int conns = mc ? atoi(mc) : 8;
    /* On the vgpu only the times matter: skipping the math makes real-size GEMMs cheap. */
    if (dlsym(RTLD_DEFAULT, "vgpu_register_kernel") && !a->functional &&
        !getenv("VGPU_TIMING_ONLY")) {
        setenv("VGPU_TIMING_ONLY", "1", 1);
        if (rank == 0)
            fprintf(stderr, "pairs: vgpu: timing only (values are not computed; --functional "
                            "computes them)\n");
    }
    return conns > 0 ? conns : 8;
}

typedef struct dh__run {
    dh_ovl_bench_t bench;
    dh_ovl_sel_t sel;
    dh_ovl_result_t *pairs;
    int npairs, done, total, rank;
} dh__run_t;

static void dh__progress(dh__run_t *r, const char *what, const dh_ovl_op_t *a,
                         const dh_ovl_op_t *b, double us)
{
    r->done++;
    if (r->rank != 0)
        return;
    if (b)
        fprintf(stderr, "pairs: %d/%d co-run %s || %s: %.1f us\n", r->done, r->total, a->name,
                b->name, us);
    else
        fprintf(stderr, "pairs: %d/%d %s %s: %.1f us\n", r->done, r->total, what, a->name, us);
}

static int dh__measure_all(dh__run_t *r, int kcc)
{
    dh_ovl_sel_t *s = &r->sel;
    int cc = kcc < s->ncompute ? kcc : s->ncompute;
    int cap = s->ncompute * s->ncomm + cc * (cc + 1) / 2;
    r->pairs = calloc((size_t)(cap > 0 ? cap : 1), sizeof *r->pairs);
    if (!r->pairs)
        return -1;
    r->total = s->ncompute + s->ncomm + cap;
    for (int i = 0; i < s->ncompute + s->ncomm; i++) {
        dh_ovl_op_t *op = i < s->ncompute ? &s->compute[i] : &s->comm[i - s->ncompute];
        if (dh_ovl_measure(&r->bench, op, NULL, &op->solo_us) != 0)
            return -1;
        dh__progress(r, "solo", op, NULL, op->solo_us);
    }
    for (int i = 0; i < s->ncompute; i++) {
        for (int j = 0; j < s->ncomm + (i < cc ? cc : 0); j++) {
            dh_ovl_op_t *a = &s->compute[i];
            dh_ovl_op_t *b = j < s->ncomm ? &s->comm[j] : &s->compute[j - s->ncomm];
            if (!b->is_comm && b < a)
                continue; /* each unordered compute pair once, itself included */
            dh_ovl_result_t *p = &r->pairs[r->npairs++];
            p->a = a;
            p->b = b;
            if (dh_ovl_measure(&r->bench, a, b, &p->corun_us) != 0)
                return -1;
            p->efficiency = dh_ovl_efficiency(a->solo_us, b->solo_us, p->corun_us);
            dh__progress(r, "co-run", a, b, p->corun_us);
        }
    }
    return 0;
}

static int dh__report(dh__run_t *r, const dh__args_t *a, int ranks, int conns)
{
    dh_ovl_report_t rep = {.ranks = ranks, .reps = a->reps, .max_connections = conns,
                             .profile = a->profile, .sel = &r->sel, .pairs = r->pairs,
                             .npairs = r->npairs};
    /* The vgpu says which profile it models; make sure the file says it is the vgpu. */
    int mark = r->bench.vgpu && strncmp(r->bench.device_name, "vgpu", 4) != 0;
    snprintf(rep.device, sizeof rep.device, "%s%.240s", mark ? "vgpu " : "",
             r->bench.device_name);
    char err[512];
    if (dh_ovl_write_json(&rep, a->out, err, sizeof err) != DH_OK) {
        fprintf(stderr, "dhelix-pairs: %s\n", err);
        return -1;
    }
    if (dh_ovl_print_table(&rep, stdout) != DH_OK)
        return -1;
    fflush(stdout);
    if (r->bench.retries)
        fprintf(stderr, "pairs: %d repetitions redone with a longer gate (now %.0f us)\n",
                r->bench.retries, r->bench.gate_us);
    fprintf(stderr, "pairs: wrote %s\n", a->out);
    return 0;
}

/* The NCCL id (with the agreement on the selection), then the bench. */
static int dh__start(dh__run_t *r, const dh_ovl_world_t *w, const dh__args_t *a)
{
    char dir[4096], err[512];
    if (a->rdv_dir)
        snprintf(dir, sizeof dir, "%s", a->rdv_dir);
    else
        dh_ovl_rdv_default_dir(dir, sizeof dir);
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (w->rank == 0 && ncclGetUniqueId(&id) != ncclSuccess) {
        fprintf(stderr, "dhelix-pairs[0]: ncclGetUniqueId failed\n");
        return -1;
    }
    if (dh_ovl_rdv_exchange(w, dir, &id, dh_ovl_sel_hash(&r->sel), a->timeout_s, err,
                            sizeof err) != 0) {
        fprintf(stderr, "dhelix-pairs[%d]: %s\n", w->rank, err);
        return -1;
    }
    if (dh_ovl_bench_init(&r->bench, w, &id, a->reps, a->warmup, a->gate_gemm, a->gate_us) != 0)
        return -1;
    dh_ovl_rdv_cleanup(w, dir); /* every rank is in the communicator */
    return 0;
}

int main(int argc, char **argv)
{
    dh__args_t a;
    int rc = dh__parse(argc, argv, &a);
    if (rc)
        return rc;
    dh_ovl_world_t w;
    dh_ovl_world_get(&w);
    dh_profile_t *p = NULL;
    char err[512];
    if (dh_profile_load(a.profile, &p, err, sizeof err) != DH_OK) {
        fprintf(stderr, "dhelix-pairs: %s\n", err);
        return 1;
    }
    int conns = dh__early_env(p, &a, w.rank);
    dh__run_t r = {.rank = w.rank};
    if (dh_ovl_select(p, w.size, a.k, &r.sel, w.rank == 0 ? stderr : NULL) != DH_OK) {
        dh_profile_free(p);
        return 1;
    }
    dh_profile_free(p);
    if (r.sel.ncompute + r.sel.ncomm == 0) {
        fprintf(stderr, "dhelix-pairs: %s has no GEMM or NCCL op this run can measure\n",
                a.profile);
        dh_ovl_sel_free(&r.sel);
        return 1;
    }
    if (w.rank == 0)
        fprintf(stderr, "pairs: %d rank(s), %d GEMM and %d NCCL op(s), %d repetitions\n", w.size,
                r.sel.ncompute, r.sel.ncomm, a.reps);
    rc = dh__start(&r, &w, &a) == 0 && dh__measure_all(&r, a.kcc) == 0 ? 0 : 1;
    if (rc == 0 && w.rank == 0)
        rc = dh__report(&r, &a, w.size, conns) == 0 ? 0 : 1;
    dh_ovl_bench_fini(&r.bench, &r.sel);
    dh_ovl_sel_free(&r.sel);
    free(r.pairs);
    return rc;
}
