/* cmd_plan.c: `dhelix plan PROFILE... [-o PLAN] [options]`. */
#include "cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/config.h"
#include "common/membound.h"
#include "planner.h"
#include "policy.h"
#include "roles.h"

/* Progress lines start only when planning has taken this long, and repeat at most this
 * often: a fast plan prints nothing but its table. */
#define DH__PROGRESS_AFTER_S 0.5

static const char dh__plan_usage[] =
    "usage: dhelix plan PROFILE... [-o PLAN] [--pairs FILE] [--max-extra-mem BYTES]\n"
    "                   [--segment-max L] [--group-cost-us US] [--fold-below-us US]\n"
    "                   [--groups SPEC] [--microbatches N] [--json]\n"
    "\n"
    "Builds a Strand Interleaving plan from profiles (DHELIX_MODE=profile, one per rank) and\n"
    "prints one row per section: its ranks, ops per iteration, phases, paired phases,\n"
    "groups and paired groups, profiled and predicted iteration time, predicted extra\n"
    "memory, the share of exposed communication it hides, and its moves across\n"
    "communicators: the pairs whose point-to-point posts it issues after the next\n"
    "forward's collectives, and those a cycle of waits refused (a warning names the\n"
    "cycle: ranks, communicators, operations).\n"
    "\n"
    "  -o PLAN               where to write the plan (default plan.json)\n"
    "  --pairs FILE          measured co-run efficiencies (dhelix profile-pairs)\n"
    "  --max-extra-mem BYTES most extra device memory a pairing may cost; K, M, G, T\n"
    "                        suffixes (powers of 1024), a percentage of the profiles' peak\n"
    "                        (3%), or none (default DHELIX_MAX_EXTRA_MEM, else 2G)\n"
    "  --segment-max L       longest segment of units the alignment pairs, 1..16, or auto\n"
    "                        (default: 8 for phases of at most 400 units, else 4)\n"
    "  --group-cost-us US    host time of one cross-strand barrier between two groups (event\n"
    "                        records and waits on both streams of each framework stream);\n"
    "                        every paired group and strand switch pays it (default 10)\n"
    "  --fold-below-us US    events, frees and ops shorter than US ride with the next op of\n"
    "                        their phase as one unit of the alignment, or off (default 2)\n"
    "  --groups SPEC         DHELIX_GROUPS: communicators whose ops may be paired (all)\n"
    "  --microbatches N      warn when the iteration does not have N micro-batches\n"
    "                        (default: DHELIX_MICROBATCHES when set; the planner finds\n"
    "                        them without it)\n"
    "  --json                print the table as JSON\n";

typedef struct dh__plan_args {
    const char **profiles;
    int nprofiles;
    const char *out, *pairs, *groups;
    double max_extra, group_cost_us, fold_below_us;
    double max_extra_pct;           /* >= 0: max_extra is this percentage of the profiles' peak */
    long seg_max, microbatches;
    int json;
} dh__plan_args_t;

/* The memory bound from v (membound.h): 0, or -1 when v is not one. */
static int dh__plan_bound(const char *v, dh__plan_args_t *a)
{
    dh_membound_t b;
    if (dh_mem_bound_parse(v, &b) != 0)
        return -1;
    a->max_extra = b.kind == DH_MEMBOUND_BYTES ? b.bytes : -1;
    a->max_extra_pct = b.kind == DH_MEMBOUND_PERCENT ? b.pct : -1;
    return 0;
}

/* The most stream-ordered memory p's program held at once (its ops' mem summed from its
 * first op): the baseline peak a percentage bound is of. Read before trimming. */
static double dh__profile_peak(const dh_profile_t *p)
{
    double at = 0, peak = 0;
    for (size_t i = 0; i < p->nops; i++) {
        at += (double)p->ops[i].mem;
        peak = at > peak ? at : peak;
    }
    return peak;
}

/* -1 usage error (message printed), 0 parsed, 1 --help printed. */
static int dh__plan_parse_args(int argc, char **argv, dh__plan_args_t *a)
{
    *a = (dh__plan_args_t){NULL, 0, "plan.json", NULL, "all", 2147483648.0,
                           DH_PLAN_GROUP_COST_US, DH_PLAN_FOLD_BELOW_US, -1, 0, 0, 0};
    a->profiles = calloc((size_t)argc, sizeof(*a->profiles));
    if (a->profiles == NULL)
        return -1;
    /* The micro-batch count the job was launched with, when the launcher says it: a check
     * only, never needed (phases come from thread switches and the repeating sequence). */
    const char *env_bound = dh_config()->max_extra_mem;
    if (env_bound[0] && dh__plan_bound(env_bound, a) != 0) {
        fprintf(stderr, "dhelix plan: DHELIX_MAX_EXTRA_MEM='%s' is not a size (2G, 512M), a "
                "percentage (3%%) or none\n", env_bound);
        return -1;
    }
    const char *mb = getenv("DHELIX_MICROBATCHES");
    if (mb && *mb && dh__cli_parse_int(mb, 1, 1 << 20, &a->microbatches) != 0) {
        fprintf(stderr, "dhelix plan: DHELIX_MICROBATCHES='%s' is not a positive integer\n", mb);
        return -1;
    }
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int takes = 1;
        if (strcmp(o, "--help") == 0 || strcmp(o, "-h") == 0) {
            fputs(dh__plan_usage, stdout);
            return 1;
        } else if (strcmp(o, "--json") == 0) {
            a->json = 1;
            takes = 0;
        } else if (o[0] != '-' || strcmp(o, "-") == 0) {
            /* Profile mode writes a Chrome trace beside each profile; a glob such as
             * prof.*.json picks those up too. */
            size_t len = strlen(o);
            if (len > 11 && strcmp(o + len - 11, ".trace.json") == 0) {
                fprintf(stderr, "dhelix plan: %s is a profile's Chrome trace; skipped\n", o);
                continue;
            }
            a->profiles[a->nprofiles++] = o;
            takes = 0;
        } else if (v == NULL) {
            fprintf(stderr, "dhelix plan: %s needs a value\n%s", o, dh__plan_usage);
            return -1;
        } else if (strcmp(o, "-o") == 0 || strcmp(o, "--output") == 0) {
            a->out = v;
        } else if (strcmp(o, "--pairs") == 0) {
            a->pairs = v;
        } else if (strcmp(o, "--groups") == 0) {
            a->groups = v;
        } else if (strcmp(o, "--max-extra-mem") == 0) {
            if (dh__plan_bound(v, a) != 0) {
                fprintf(stderr, "dhelix plan: --max-extra-mem '%s' is not a size (2G, 512M), a "
                        "percentage (3%%) or none\n", v);
                return -1;
            }
        } else if (strcmp(o, "--segment-max") == 0) {
            if (strcmp(v, "auto") == 0)
                a->seg_max = 0;
            else if (dh__cli_parse_int(v, 1, DH_ALIGN_MAX_SEG, &a->seg_max) != 0) {
                fprintf(stderr, "dhelix plan: --segment-max '%s' is not 1..%d or auto\n", v,
                        DH_ALIGN_MAX_SEG);
                return -1;
            }
        } else if (strcmp(o, "--group-cost-us") == 0) {
            if (dh__cli_parse_num(v, 0, 1e6, &a->group_cost_us) != 0) {
                fprintf(stderr, "dhelix plan: --group-cost-us '%s' is not a time in us "
                                "(0..1e6)\n", v);
                return -1;
            }
        } else if (strcmp(o, "--fold-below-us") == 0) {
            if (strcmp(v, "off") == 0)
                a->fold_below_us = -1;
            else if (dh__cli_parse_num(v, 0, 1e6, &a->fold_below_us) != 0) {
                fprintf(stderr, "dhelix plan: --fold-below-us '%s' is not a time in us "
                                "(0..1e6) or off\n", v);
                return -1;
            }
        } else if (strcmp(o, "--microbatches") == 0) {
            if (dh__cli_parse_int(v, 1, 1 << 20, &a->microbatches) != 0) {
                fprintf(stderr, "dhelix plan: --microbatches '%s' is not a positive integer\n", v);
                return -1;
            }
        } else {
            fprintf(stderr, "dhelix plan: unknown option '%s'\n%s", o, dh__plan_usage);
            return -1;
        }
        i += takes;
    }
    if (a->nprofiles == 0) {
        fprintf(stderr, "dhelix plan: no profile given\n%s", dh__plan_usage);
        return -1;
    }
    return 0;
}

/* The callbacks' context: when planning started and when progress was last printed. */
typedef struct dh__plan_cb {
    double t0, last;
    dh_policy_t policy;
} dh__plan_cb_t;

static double dh__mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void dh__on_progress(void *ctx, const char *what, size_t done, size_t total)
{
    dh__plan_cb_t *cb = ctx;
    double now = dh__mono();
    if (now - cb->t0 < DH__PROGRESS_AFTER_S || now - cb->last < DH__PROGRESS_AFTER_S)
        return;
    cb->last = now;
    /* what already says how far along ("aligning pair 3 of 7"); done and total are for
     * callers that draw a bar. */
    fprintf(stderr, "dhelix plan: %s (%.1f s)\n", what, now - cb->t0);
}

static void dh__on_warn(void *ctx, const char *msg)
{
    (void)ctx;
    fprintf(stderr, "dhelix plan: warning: %s\n", msg);
}

static int dh__on_pinned(void *ctx, const dh_prof_comm_t *c)
{
    const dh__plan_cb_t *cb = ctx;
    unsigned role = dh_role_parse(c->role);
    if (role == 0)
        role = dh_role_from_name(c->name);
    int term;
    return !dh_policy_decide(&cb->policy, c->name, role, c->nranks, &term);
}

/* This process's peak resident memory in MiB (VmHWM: of this program alone, unlike
 * getrusage, which counts the process it was forked from), -1 unknown. */
static double dh__peak_rss_mib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0)
            kib = strtod(line + 6, NULL);
    if (f)
        fclose(f);
    return kib < 0 ? -1 : kib / 1024.0;
}

static int dh__plan_print(const dh_plan_t *plan, const dh__plan_args_t *a, double wall_s)
{
    dh_table_t *t = NULL;
    char secs[32], wall[32], rss[32];
    snprintf(secs, sizeof(secs), "%.3f", plan->planning_s);
    snprintf(wall, sizeof(wall), "%.3f", wall_s);
    snprintf(rss, sizeof(rss), "%.1f", dh__peak_rss_mib());
    dh_status_t st = dh__cli_summary(plan, &t);
    if (st == DH_OK)
        st = dh_table_meta(t, "file", DH_CELL_STR, a->out);
    if (st == DH_OK)
        st = dh_table_meta(t, "planning_s", DH_CELL_NUM, secs);
    /* reading the profiles, planning and writing the plan */
    if (st == DH_OK)
        st = dh_table_meta(t, "wall_s", DH_CELL_NUM, wall);
    if (st == DH_OK)
        st = dh_table_meta(t, "peak_rss_mib", DH_CELL_NUM, rss);
    if (st == DH_OK)
        st = dh__cli_print_table(t, a->json ? DH_FMT_JSON : DH_FMT_TEXT);
    dh_table_free(t);
    if (st != DH_OK || fflush(stdout) != 0) {
        fprintf(stderr, "dhelix plan: %s\n", dh_strerror(st != DH_OK ? st : DH_ERR_IO));
        return DH_EXIT_USAGE;
    }
    return DH_EXIT_OK;
}

static int dh__plan_run(const dh__plan_args_t *a, dh__plan_cb_t *cb)
{
    char err[1024] = "";
    int rc = DH_EXIT_USAGE;
    dh_pairs_t *pairs = NULL;
    dh_plan_t *plan = NULL;
    dh_profile_t **prof = calloc((size_t)a->nprofiles, sizeof(*prof));
    if (prof == NULL)
        return rc;
    if (a->pairs && dh_pairs_load(a->pairs, &pairs, err, sizeof(err)) != DH_OK)
        goto out;
    double peak = 0;
    for (int k = 0; k < a->nprofiles; k++) {
        char what[300];
        snprintf(what, sizeof(what), "reading %s (%d of %d)", a->profiles[k], k + 1,
                 a->nprofiles);
        dh__on_progress(cb, what, (size_t)k, (size_t)a->nprofiles);
        if (dh_profile_load(a->profiles[k], &prof[k], err, sizeof(err)) != DH_OK)
            goto out;
        /* Two iterations are all the planner reads: the next profile loads into the memory
         * the others no longer hold. A profile with no iteration stays whole, and the
         * planner reports it. */
        double pk = dh__profile_peak(prof[k]);
        peak = pk > peak ? pk : peak;
        char ignored[8];
        dh_profile_trim(prof[k], 2, a->profiles[k], ignored, sizeof(ignored));
    }
    dh_plan_opts_t o;
    dh_plan_opts_init(&o);
    o.names = a->profiles;
    o.pairs = pairs;
    o.max_extra_mem_bytes = a->max_extra;
    if (a->max_extra_pct >= 0)
        o.max_extra_mem_bytes = floor(a->max_extra_pct / 100.0 * peak);
    o.max_segment = (int)a->seg_max;
    o.group_cost_us = a->group_cost_us;
    o.fold_below_us = a->fold_below_us;
    o.policy = a->groups;
    o.pinned = dh__on_pinned;
    o.microbatches = (int)a->microbatches;
    o.progress = dh__on_progress;
    o.warn = dh__on_warn;
    o.ctx = cb;
    if (dh_plan_build((const dh_profile_t *const *)prof, a->nprofiles, &o, &plan, err,
                      sizeof(err)) != DH_OK)
        goto out;
    if (dh_plan_save(plan, a->out, err, sizeof(err)) != DH_OK)
        goto out;
    rc = dh__plan_print(plan, a, dh__mono() - cb->t0);
    err[0] = '\0';
out:
    if (rc != DH_EXIT_OK && err[0])
        fprintf(stderr, "dhelix plan: %s\n", err);
    else if (rc != DH_EXIT_OK && plan == NULL)
        fprintf(stderr, "dhelix plan: %s\n", dh_strerror(DH_ERR_NOMEM));
    dh_plan_free(plan);
    for (int k = 0; k < a->nprofiles; k++)
        dh_profile_free(prof[k]);
    free(prof);
    dh_pairs_free(pairs);
    return rc;
}

int dh__cmd_plan(int argc, char **argv)
{
    dh__plan_args_t a;
    int parsed = dh__plan_parse_args(argc, argv, &a);
    if (parsed != 0) {
        free(a.profiles);
        return parsed > 0 ? DH_EXIT_OK : DH_EXIT_USAGE;
    }
    dh__plan_cb_t cb = {dh__mono(), 0, {0}};
    char why[256];
    if (dh_policy_parse(a.groups, &cb.policy, why, sizeof(why)) != DH_OK) {
        fprintf(stderr, "dhelix plan: --groups '%s': %s\n", a.groups, why);
        free(a.profiles);
        return DH_EXIT_USAGE;
    }
    int rc = dh__plan_run(&a, &cb);
    free(a.profiles);
    return rc;
}
