/* cmd_validate.c: `dhelix validate PLAN [PROFILE...]`. */
#include "cli.h"

#include <stdio.h>
#include <string.h>

#include "planner.h"

static const char dh__validate_usage[] =
    "usage: dhelix validate PLAN [PROFILE...]\n"
    "\n"
    "Loads PLAN and checks every rule of docs/plan-format.md (exit 0: \"ok\"; exit 1: one\n"
    "line naming the file and the problem). With profiles, also checks that each profile's\n"
    "iteration is the template of the plan's section for its rank, as plan mode will.\n";

static void dh__plan_totals(const dh_plan_t *p, size_t *ops, long *groups, long *pairs)
{
    *ops = 0;
    *groups = *pairs = 0;
    for (int s = 0; s < p->nsections; s++) {
        *ops += p->sections[s].nops;
        *groups += p->sections[s].ngroups;
        for (int k = 0; k < p->sections[s].nphases; k++) {
            const dh_plan_phase_t *ph = &p->sections[s].phases[k];
            *pairs += ph->kind == 'B' && ph->paired_with >= 0;
        }
    }
}

/* "rank 1's" or "the" (a profile of unknown rank). */
static void dh__whose(const dh_profile_t *prof, char *buf, size_t len)
{
    if (prof->rank >= 0)
        snprintf(buf, len, "rank %d's", prof->rank);
    else
        snprintf(buf, len, "the");
}

/* 0 when the profile fits the plan; otherwise prints why and returns 1. */
static int dh__validate_profile(const dh_plan_t *plan, const char *plan_path, const char *path)
{
    char err[1024] = "";
    dh_profile_t *prof;
    if (dh_profile_load(path, &prof, err, sizeof(err)) != DH_OK) {
        fprintf(stderr, "dhelix validate: %s\n", err);
        return 1;
    }
    int bad = 1;
    char whose[32], diff[512];
    dh__whose(prof, whose, sizeof(whose));
    dh_iteration_t it;
    const dh_plan_section_t *s = dh_plan_section_for(plan, prof->rank);
    if (plan->world > 0 && prof->world > 0 && plan->world != prof->world)
        fprintf(stderr, "dhelix validate: %s: world %d, but %s is for a world of %d\n", path,
                prof->world, plan_path, plan->world);
    else if (plan->layout[0] && prof->layout[0] && strcmp(plan->layout, prof->layout) != 0)
        fprintf(stderr, "dhelix validate: %s: layout \"%s\", but %s is for \"%s\"\n", path,
                prof->layout, plan_path, plan->layout);
    else if (dh_profile_find_iteration(prof, path, &it, err, sizeof(err)) != DH_OK)
        fprintf(stderr, "dhelix validate: %s\n", err);
    else if (s == NULL)
        fprintf(stderr, "dhelix validate: %s: rank %d has no section in %s\n", path, prof->rank,
                plan_path);
    else if (dh_plan_template_diff(s, &prof->ops[it.first], it.n, diff, sizeof(diff)) != 0)
        fprintf(stderr, "dhelix validate: %s: %s iteration (%zu ops) does not match section %d "
                        "(%zu ops): %s\n",
                path, whose, it.n, (int)(s - plan->sections), s->nops, diff);
    else
        bad = 0;
    if (!bad)
        printf("%s: ok, %s iteration (%zu ops, %d repetitions) matches section %d\n", path, whose,
               it.n, it.reps, (int)(s - plan->sections));
    dh_profile_free(prof);
    return bad;
}

int dh__cmd_validate(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "dhelix validate: no plan given\n%s", dh__validate_usage);
        return DH_EXIT_USAGE;
    }
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(dh__validate_usage, stdout);
            return DH_EXIT_OK;
        }
        if (argv[i][0] == '-' && argv[i][1] != '\0') {
            fprintf(stderr, "dhelix validate: unknown option '%s'\n%s", argv[i],
                    dh__validate_usage);
            return DH_EXIT_USAGE;
        }
    }
    char err[1024] = "";
    dh_plan_t *p;
    if (dh_plan_load(argv[1], &p, err, sizeof(err)) != DH_OK) {
        fprintf(stderr, "dhelix validate: %s\n", err);
        return DH_EXIT_USAGE;
    }
    size_t ops;
    long groups, pairs;
    dh__plan_totals(p, &ops, &groups, &pairs);
    char world[32];
    if (p->world > 0)
        snprintf(world, sizeof(world), "%d", p->world);
    else
        snprintf(world, sizeof(world), "any");
    printf("%s: ok, version %d, %d section%s, %zu ops, %ld groups, %ld pairs, world %s, "
           "layout \"%s\"\n",
           argv[1], p->version, p->nsections, p->nsections == 1 ? "" : "s", ops, groups, pairs,
           world, p->layout);
    int bad = 0;
    for (int i = 2; i < argc; i++)
        bad += dh__validate_profile(p, argv[1], argv[i]);
    dh_plan_free(p);
    fflush(stdout);
    return bad ? DH_EXIT_USAGE : DH_EXIT_OK;
}
