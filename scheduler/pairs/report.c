/* report.c: pairs.json and the tables people read (pairs.h). Both are built from the same
 * results and the same class medians (dh__classes), so they cannot disagree. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/table.h"
#include "pairs.h"

/* The class pairs the planner asks about, in output order. */
static const struct {
    int a_comm, b_comm;
} dh__class_pairs[] = {{0, 1}, {0, 0}};
#define DH__NCLASSES (int)(sizeof dh__class_pairs / sizeof dh__class_pairs[0])

typedef struct dh__class {
    const char *a, *b;
    int n;
    double efficiency;  /* median over the class's pairs; meaningless when n == 0 */
} dh__class_t;

static const char *dh__cls(const dh_ovl_op_t *op)
{
    return op->is_comm ? "comm" : "compute";
}

static dh_status_t dh__classes(const dh_ovl_report_t *r, dh__class_t *out)
{
    double *v = malloc(((size_t)r->npairs + 1) * sizeof *v);
    if (!v)
        return DH_ERR_NOMEM;
    for (int c = 0; c < DH__NCLASSES; c++) {
        int n = 0;
        for (int i = 0; i < r->npairs; i++) {
            const dh_ovl_result_t *p = &r->pairs[i];
            if (p->a->is_comm == dh__class_pairs[c].a_comm &&
                p->b->is_comm == dh__class_pairs[c].b_comm)
                v[n++] = p->efficiency;
        }
        /* The planner reads a class efficiency in [-1, 1]. */
        double e = dh_ovl_median(v, n);
        out[c] = (dh__class_t){dh__class_pairs[c].a_comm ? "comm" : "compute",
                               dh__class_pairs[c].b_comm ? "comm" : "compute", n,
                               e < -1.0 ? -1.0 : e};
    }
    free(v);
    return DH_OK;
}

static void dh__hex(char *out, uint64_t v)
{
    snprintf(out, 17, "%016llx", (unsigned long long)v);
}

/* Rounds to 1 ns (µs with three decimals) so the file shows measured digits only. */
static json_t *dh__us(double us)
{
    return json_real((double)(long long)(us * 1e3 + (us >= 0 ? 0.5 : -0.5)) / 1e3);
}

static json_t *dh__eff(double e)
{
    return json_real((double)(long long)(e * 1e4 + (e >= 0 ? 0.5 : -0.5)) / 1e4);
}

static int dh__add_op(json_t *ops, const dh_ovl_op_t *op)
{
    char sig[17], shape[17];
    dh__hex(sig, op->sig);
    dh__hex(shape, op->shape);
    return json_array_append_new(
        ops, json_pack("{s:s, s:s, s:s, s:s, s:o, s:o, s:i}", "sig", sig, "shape", shape,
                       "name", op->name, "class", dh__cls(op), "solo_us", dh__us(op->solo_us),
                       "profiled_us", dh__us(op->prof_us), "profiled_n", op->prof_n));
}

static int dh__add_pair(json_t *pairs, const dh_ovl_result_t *p)
{
    char as[17], ash[17], bs[17], bsh[17];
    dh__hex(as, p->a->sig);
    dh__hex(ash, p->a->shape);
    dh__hex(bs, p->b->sig);
    dh__hex(bsh, p->b->shape);
    return json_array_append_new(
        pairs, json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:o, s:o, s:o, s:o}", "a_sig",
                         as, "a_shape", ash, "b_sig", bs, "b_shape", bsh, "a_name", p->a->name,
                         "b_name", p->b->name, "a_class", dh__cls(p->a), "b_class",
                         dh__cls(p->b), "a_us", dh__us(p->a->solo_us), "b_us",
                         dh__us(p->b->solo_us), "corun_us", dh__us(p->corun_us), "efficiency",
                         dh__eff(p->efficiency)));
}

static json_t *dh__doc(const dh_ovl_report_t *r, const dh__class_t *cls)
{
    json_t *root = json_pack("{s:s, s:i, s:s, s:i, s:i, s:i, s:s}", "format", DH_OVL_FORMAT,
                             "version", DH_OVL_VERSION, "device", r->device, "ranks", r->ranks,
                             "reps", r->reps, "max_connections", r->max_connections, "profile",
                             r->profile ? r->profile : "");
    json_t *classes = json_array(), *ops = json_array(), *pairs = json_array();
    int bad = !root || !classes || !ops || !pairs;
    for (int c = 0; !bad && c < DH__NCLASSES; c++) {
        if (cls[c].n == 0)
            continue; /* nothing measured: the planner keeps its default for the class */
        bad |= json_array_append_new(classes,
                                     json_pack("{s:s, s:s, s:o, s:i}", "a", cls[c].a, "b",
                                               cls[c].b, "efficiency",
                                               dh__eff(cls[c].efficiency), "n", cls[c].n));
    }
    for (int i = 0; !bad && i < r->sel->ncompute; i++)
        bad |= dh__add_op(ops, &r->sel->compute[i]);
    for (int i = 0; !bad && i < r->sel->ncomm; i++)
        bad |= dh__add_op(ops, &r->sel->comm[i]);
    for (int i = 0; !bad && i < r->npairs; i++)
        bad |= dh__add_pair(pairs, &r->pairs[i]);
    if (bad || json_object_set_new(root, "classes", classes) ||
        json_object_set_new(root, "ops", ops) || json_object_set_new(root, "pairs", pairs)) {
        json_decref(root);
        return NULL;
    }
    return root;
}

dh_status_t dh_ovl_write_json(const dh_ovl_report_t *r, const char *path, char *err,
                              size_t errlen)
{
    dh__class_t cls[DH__NCLASSES];
    DH_CHECK(dh__classes(r, cls));
    json_t *root = dh__doc(r, cls);
    if (!root) {
        snprintf(err, errlen, "%s: out of memory building the document", path);
        return DH_ERR_NOMEM;
    }
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int rc = json_dump_file(root, tmp, JSON_INDENT(1) | JSON_REAL_PRECISION(12));
    json_decref(root);
    if (rc != 0 || rename(tmp, path) != 0) {
        snprintf(err, errlen, "%s: cannot write the file", path);
        remove(tmp);
        return DH_ERR_IO;
    }
    return DH_OK;
}

/* ---- tables ---- */

static const dh_col_t dh__op_cols[] = {
    {"class", "class", DH_CELL_STR},   {"name", "op", DH_CELL_STR},
    {"n", "in profile", DH_CELL_NUM},  {"profiled_us", "profiled us", DH_CELL_NUM},
    {"solo_us", "solo us", DH_CELL_NUM},
};
static const dh_col_t dh__pair_cols[] = {
    {"a", "a", DH_CELL_STR},                {"b", "b", DH_CELL_STR},
    {"a_us", "a us", DH_CELL_NUM},          {"b_us", "b us", DH_CELL_NUM},
    {"corun_us", "co-run us", DH_CELL_NUM}, {"efficiency", "efficiency", DH_CELL_NUM},
};
static const dh_col_t dh__class_cols[] = {
    {"a", "a", DH_CELL_STR}, {"b", "b", DH_CELL_STR},
    {"n", "pairs", DH_CELL_NUM}, {"efficiency", "median efficiency", DH_CELL_NUM},
};

#define DH__NCOLS(c) (int)(sizeof(c) / sizeof((c)[0]))

/* Rounding noise of a serialised pair would print as "-0.000". */
static double dh__no_negzero(double e)
{
    return e < 0 && e > -5e-4 ? 0.0 : e;
}

static dh_status_t dh__ops_table(const dh_ovl_report_t *r, dh_strbuf_t *out)
{
    dh_table_t *t;
    DH_CHECK(dh_table_new(&t, "ops", dh__op_cols, DH__NCOLS(dh__op_cols)));
    char c[3][32];
    dh_status_t st = DH_OK;
    for (int i = 0; st == DH_OK && i < r->sel->ncompute + r->sel->ncomm; i++) {
        const dh_ovl_op_t *op = i < r->sel->ncompute ? &r->sel->compute[i]
                                                       : &r->sel->comm[i - r->sel->ncompute];
        snprintf(c[0], sizeof c[0], "%d", op->prof_n);
        snprintf(c[1], sizeof c[1], "%.1f", op->prof_us);
        snprintf(c[2], sizeof c[2], "%.1f", op->solo_us);
        const char *row[] = {dh__cls(op), op->name, c[0], c[1], c[2]};
        st = dh_table_row(t, row);
    }
    if (st == DH_OK)
        st = dh_table_render(t, DH_FMT_TEXT, out);
    dh_table_free(t);
    return st;
}

static dh_status_t dh__ovl_table(const dh_ovl_report_t *r, dh_strbuf_t *out)
{
    dh_table_t *t;
    DH_CHECK(dh_table_new(&t, "pairs", dh__pair_cols, DH__NCOLS(dh__pair_cols)));
    char c[4][32];
    dh_status_t st = DH_OK;
    for (int i = 0; st == DH_OK && i < r->npairs; i++) {
        const dh_ovl_result_t *p = &r->pairs[i];
        snprintf(c[0], sizeof c[0], "%.1f", p->a->solo_us);
        snprintf(c[1], sizeof c[1], "%.1f", p->b->solo_us);
        snprintf(c[2], sizeof c[2], "%.1f", p->corun_us);
        snprintf(c[3], sizeof c[3], "%.3f", dh__no_negzero(p->efficiency));
        const char *row[] = {p->a->name, p->b->name, c[0], c[1], c[2], c[3]};
        st = dh_table_row(t, row);
    }
    if (st == DH_OK)
        st = dh_table_render(t, DH_FMT_TEXT, out);
    dh_table_free(t);
    return st;
}

static dh_status_t dh__classes_table(const dh__class_t *cls, dh_strbuf_t *out)
{
    dh_table_t *t;
    DH_CHECK(dh_table_new(&t, "classes", dh__class_cols, DH__NCOLS(dh__class_cols)));
    dh_status_t st = DH_OK;
    for (int i = 0; st == DH_OK && i < DH__NCLASSES; i++) {
        char n[16], e[32];
        snprintf(n, sizeof n, "%d", cls[i].n);
        snprintf(e, sizeof e, "%.3f", dh__no_negzero(cls[i].efficiency));
        const char *row[] = {cls[i].a, cls[i].b, n, cls[i].n ? e : NULL};
        st = dh_table_row(t, row);
    }
    if (st == DH_OK)
        st = dh_table_render(t, DH_FMT_TEXT, out);
    dh_table_free(t);
    return st;
}

dh_status_t dh_ovl_print_table(const dh_ovl_report_t *r, FILE *out)
{
    dh__class_t cls[DH__NCLASSES];
    DH_CHECK(dh__classes(r, cls));
    dh_strbuf_t b = DH_STRBUF_INIT;
    dh_strbuf_printf(&b, "device: %s, ranks: %d, repetitions: %d (median), max connections: %d\n\n",
                     r->device, r->ranks, r->reps, r->max_connections);
    dh_status_t st = dh__ops_table(r, &b);
    if (st == DH_OK) {
        dh_strbuf_puts(&b, "\n");
        st = dh__ovl_table(r, &b);
    }
    if (st == DH_OK) {
        dh_strbuf_puts(&b, "\n");
        st = dh__classes_table(cls, &b);
    }
    if (st == DH_OK && (st = dh_strbuf_status(&b)) == DH_OK)
        fputs(dh_strbuf_str(&b), out);
    dh_strbuf_free(&b);
    return st;
}
