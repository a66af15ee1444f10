/* cmd_show.c: `dhelix show PLAN [--json] [--svg OUT.svg] [--section K] [--all]`. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Groups listed per section unless --all: enough to see the pattern of a pair. */
#define DH__SHOW_GROUPS 40
/* Op names listed per strand in a group row. */
#define DH__SHOW_NAMES 3

static const char dh__show_usage[] =
    "usage: dhelix show PLAN [--json] [--svg OUT.svg] [--section K] [--all]\n"
    "\n"
    "Prints the plan's summary (one row per section, with its groups and paired groups) and\n"
    "its groups in execution order (predicted start and time, ops of strand a and strand b,\n"
    "the first op names); the first 40 groups of each section unless --all. --svg draws\n"
    "section K (default 0) on a time axis instead: strand a (backward) and strand b\n"
    "(forward), compute above communication.\n";

static const dh_col_t dh__group_cols[] = {
    {"group", "group", DH_CELL_NUM},
    {"start_us", "start us", DH_CELL_NUM},
    {"pred_us", "pred us", DH_CELL_NUM},
    {"a_ops", "a ops", DH_CELL_NUM},
    {"b_ops", "b ops", DH_CELL_NUM},
    {"order", "order", DH_CELL_STR},
    {"names", "first ops", DH_CELL_STR},
};
#define DH__NGROUPCOLS ((int)(sizeof(dh__group_cols) / sizeof(dh__group_cols[0])))

typedef struct dh__show_args {
    const char *plan, *svg;
    long section;
    int json, all, section_set;
} dh__show_args_t;

static int dh__show_parse_args(int argc, char **argv, dh__show_args_t *a)
{
    *a = (dh__show_args_t){NULL, NULL, 0, 0, 0, 0};
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(o, "--help") == 0 || strcmp(o, "-h") == 0) {
            fputs(dh__show_usage, stdout);
            return 1;
        } else if (strcmp(o, "--json") == 0) {
            a->json = 1;
        } else if (strcmp(o, "--all") == 0) {
            a->all = 1;
        } else if (strcmp(o, "--svg") == 0 && v) {
            a->svg = v;
            i++;
        } else if (strcmp(o, "--section") == 0 && v) {
            if (dh__cli_parse_int(v, 0, 1 << 20, &a->section) != 0) {
                fprintf(stderr, "dhelix show: --section '%s' is not a section number\n", v);
                return -1;
            }
            a->section_set = 1;
            i++;
        } else if (o[0] != '-' && a->plan == NULL) {
            a->plan = o;
        } else {
            fprintf(stderr, "dhelix show: unexpected '%s'\n%s", o, dh__show_usage);
            return -1;
        }
    }
    if (a->plan == NULL) {
        fprintf(stderr, "dhelix show: no plan given\n%s", dh__show_usage);
        return -1;
    }
    return 0;
}

/* "a: n1, n2, n3 +5 | b: n4" for a group. */
static void dh__group_names(const dh_plan_section_t *s, const dh_plan_group_t *g, char *buf,
                            size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int strand = 0; strand < 2; strand++) {
        size_t first = strand ? g->b_first : g->a_first, n = strand ? g->b_n : g->a_n;
        if (n == 0)
            continue;
        int w = snprintf(buf + at, len - at, "%s%c: ", at ? " | " : "", strand ? 'b' : 'a');
        at += w > 0 ? (size_t)w : 0;
        for (size_t k = 0; k < n && k < DH__SHOW_NAMES && at < len; k++) {
            const dh_plan_op_t *op = &s->ops[first + k];
            const char *name = op->name[0] ? op->name : op->kind;
            w = snprintf(buf + at, len - at, "%s%s", k ? ", " : "", name);
            at += w > 0 ? (size_t)w : 0;
        }
        if (n > DH__SHOW_NAMES && at < len) {
            w = snprintf(buf + at, len - at, " +%zu", n - DH__SHOW_NAMES);
            at += w > 0 ? (size_t)w : 0;
        }
        if (at >= len)
            break;
    }
}

static dh_status_t dh__group_row(dh_table_t *t, const dh_plan_section_t *s, int g)
{
    const dh_plan_group_t *gr = &s->groups[g];
    char c[6][32], order[32], names[320];
    snprintf(c[0], sizeof(c[0]), "%d", g);
    snprintf(c[1], sizeof(c[1]), "%.1f", gr->start_us);
    snprintf(c[2], sizeof(c[2]), "%.1f", gr->pred_us);
    snprintf(c[3], sizeof(c[3]), "%zu", gr->a_n);
    snprintf(c[4], sizeof(c[4]), "%zu", gr->b_n);
    /* The issue order is as long as the group; a prefix shows its pattern. */
    size_t olen = strlen(gr->order);
    snprintf(order, sizeof(order), "%.*s%s", olen > 16 ? 16 : (int)olen, gr->order,
             olen > 16 ? "..." : "");
    dh__group_names(s, gr, names, sizeof(names));
    const char *cells[DH__NGROUPCOLS] = {c[0], c[1], c[2], c[3], c[4], order, names};
    return dh_table_row(t, cells);
}

static dh_status_t dh__show_groups(const dh_plan_t *p, int sec, const dh__show_args_t *a)
{
    const dh_plan_section_t *s = &p->sections[sec];
    int shown = a->all || s->ngroups <= DH__SHOW_GROUPS ? s->ngroups : DH__SHOW_GROUPS;
    dh_table_t *t;
    char num[4][32];
    snprintf(num[0], sizeof(num[0]), "%d", sec);
    snprintf(num[1], sizeof(num[1]), "%d", s->ngroups);
    snprintf(num[2], sizeof(num[2]), "%d", dh__cli_paired_groups(s));
    snprintf(num[3], sizeof(num[3]), "%d", shown);
    DH_CHECK(dh_table_new(&t, "groups", dh__group_cols, DH__NGROUPCOLS));
    dh_status_t st = dh_table_meta(t, "section", DH_CELL_NUM, num[0]);
    if (st == DH_OK)
        st = dh_table_meta(t, "groups", DH_CELL_NUM, num[1]);
    if (st == DH_OK)
        st = dh_table_meta(t, "paired", DH_CELL_NUM, num[2]);
    if (st == DH_OK)
        st = dh_table_meta(t, "shown", DH_CELL_NUM, num[3]);
    for (int g = 0; g < shown && st == DH_OK; g++)
        st = dh__group_row(t, s, g);
    if (st == DH_OK)
        st = dh__cli_print_table(t, a->json ? DH_FMT_JSON : DH_FMT_TEXT);
    if (st == DH_OK && !a->json && shown < s->ngroups)
        printf("... %d more groups (--all lists them)\n", s->ngroups - shown);
    dh_table_free(t);
    return st;
}

static int dh__show_svg(const dh_plan_t *p, const dh__show_args_t *a)
{
    dh_strbuf_t b = DH_STRBUF_INIT;
    dh_status_t st = dh__cli_svg(p, (int)a->section, &b);
    FILE *f = st == DH_OK ? fopen(a->svg, "w") : NULL;
    int ok = f != NULL && fwrite(dh_strbuf_str(&b), 1, b.len, f) == b.len;
    if (f != NULL && fclose(f) != 0)
        ok = 0;
    dh_strbuf_free(&b);
    if (!ok) {
        fprintf(stderr, "dhelix show: %s: cannot write the drawing\n", a->svg);
        return DH_EXIT_USAGE;
    }
    printf("dhelix show: drew section %ld of %s (%d groups) in %s\n", a->section, a->plan,
           p->sections[a->section].ngroups, a->svg);
    return DH_EXIT_OK;
}

int dh__cmd_show(int argc, char **argv)
{
    dh__show_args_t a;
    int parsed = dh__show_parse_args(argc, argv, &a);
    if (parsed != 0)
        return parsed > 0 ? DH_EXIT_OK : DH_EXIT_USAGE;
    char err[1024] = "";
    dh_plan_t *p;
    if (dh_plan_load(a.plan, &p, err, sizeof(err)) != DH_OK) {
        fprintf(stderr, "dhelix show: %s\n", err);
        return DH_EXIT_USAGE;
    }
    int rc = DH_EXIT_OK;
    if (a.section >= p->nsections) {
        fprintf(stderr, "dhelix show: %s has %d sections; there is no section %ld\n", a.plan,
                p->nsections, a.section);
        rc = DH_EXIT_USAGE;
    } else if (a.svg) {
        rc = dh__show_svg(p, &a);
    } else {
        dh_table_t *t = NULL;
        dh_status_t st = dh__cli_summary(p, &t);
        if (st == DH_OK)
            st = dh__cli_print_table(t, a.json ? DH_FMT_JSON : DH_FMT_TEXT);
        dh_table_free(t);
        for (int s = 0; s < p->nsections && st == DH_OK; s++) {
            if (a.section_set && s != a.section)
                continue;
            if (!a.json)
                printf("\n");
            st = dh__show_groups(p, s, &a);
        }
        if (st != DH_OK || fflush(stdout) != 0) {
            fprintf(stderr, "dhelix show: %s\n", dh_strerror(st != DH_OK ? st : DH_ERR_IO));
            rc = DH_EXIT_USAGE;
        }
    }
    dh_plan_free(p);
    return rc;
}
