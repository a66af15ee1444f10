/* cli_common.c: the plan summary table and the small parsers the subcommands share. */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const dh_col_t dh__summary_cols[] = {
    {"section", "section", DH_CELL_NUM},
    {"ranks", "ranks", DH_CELL_STR},
    {"ops", "ops/iter", DH_CELL_NUM},
    {"f_phases", "F", DH_CELL_NUM},
    {"b_phases", "B", DH_CELL_NUM},
    {"o_phases", "O", DH_CELL_NUM},
    {"pairs", "pairs", DH_CELL_NUM},
    {"groups", "groups", DH_CELL_NUM},
    {"paired_groups", "paired groups", DH_CELL_NUM},
    {"baseline_ms", "baseline ms", DH_CELL_NUM},
    {"predicted_ms", "predicted ms", DH_CELL_NUM},
    {"speedup", "speedup x", DH_CELL_NUM},
    {"extra_mem_mib", "extra MiB", DH_CELL_NUM},
    {"hidden_comm_pct", "hidden comm %", DH_CELL_NUM},
    {"moves", "moves", DH_CELL_NUM},
    {"moves_refused", "refused", DH_CELL_NUM},
};
#define DH__NSUMMARY ((int)(sizeof(dh__summary_cols) / sizeof(dh__summary_cols[0])))

void dh__cli_ranks(const int *ranks, int n, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    if (n == 0) {
        snprintf(buf, len, "all");
        return;
    }
    for (int i = 0; i < n && at < len; i++) {
        int j = i;
        while (j + 1 < n && ranks[j + 1] == ranks[j] + 1)
            j++;
        int w = j > i ? snprintf(buf + at, len - at, "%s%d-%d", i ? "," : "", ranks[i], ranks[j])
                      : snprintf(buf + at, len - at, "%s%d", i ? "," : "", ranks[i]);
        at += w > 0 ? (size_t)w : 0;
        i = j;
    }
}

int dh__cli_paired_groups(const dh_plan_section_t *s)
{
    int n = 0;
    for (int g = 0; g < s->ngroups; g++)
        n += s->groups[g].a_n > 0 && s->groups[g].b_n > 0;
    return n;
}

static dh_status_t dh__summary_row(dh_table_t *t, const dh_plan_t *p, int sec)
{
    const dh_plan_section_t *s = &p->sections[sec];
    int nf = 0, nb = 0, no = 0, pairs = 0;
    for (int k = 0; k < s->nphases; k++) {
        char kind = s->phases[k].kind;
        nf += kind == 'F';
        nb += kind == 'B';
        no += kind == 'O';
        pairs += kind == 'B' && s->phases[k].paired_with >= 0;
    }
    char c[DH__NSUMMARY][64];
    char ranks[64];
    dh__cli_ranks(s->ranks, s->nranks, ranks, sizeof(ranks));
    int k = 0;
    snprintf(c[k++], sizeof(c[0]), "%d", sec);
    snprintf(c[k++], sizeof(c[0]), "%s", ranks);
    snprintf(c[k++], sizeof(c[0]), "%zu", s->nops);
    snprintf(c[k++], sizeof(c[0]), "%d", nf);
    snprintf(c[k++], sizeof(c[0]), "%d", nb);
    snprintf(c[k++], sizeof(c[0]), "%d", no);
    snprintf(c[k++], sizeof(c[0]), "%d", pairs);
    snprintf(c[k++], sizeof(c[0]), "%d", s->ngroups);
    snprintf(c[k++], sizeof(c[0]), "%d", dh__cli_paired_groups(s));
    snprintf(c[k++], sizeof(c[0]), "%.3f", s->baseline_us / 1000);
    snprintf(c[k++], sizeof(c[0]), "%.3f", s->si_us / 1000);
    snprintf(c[k++], sizeof(c[0]), "%.3f", s->si_us > 0 ? s->baseline_us / s->si_us : 1.0);
    snprintf(c[k++], sizeof(c[0]), "%.1f", s->extra_mem_bytes / 1048576.0);
    snprintf(c[k++], sizeof(c[0]), "%.1f", s->hidden_comm_fraction * 100);
    snprintf(c[k++], sizeof(c[0]), "%d", s->moves);
    snprintf(c[k++], sizeof(c[0]), "%d", s->moves_refused);
    const char *cells[DH__NSUMMARY];
    for (int i = 0; i < DH__NSUMMARY; i++)
        cells[i] = c[i];
    return dh_table_row(t, cells);
}

dh_status_t dh__cli_summary(const dh_plan_t *p, dh_table_t **out)
{
    dh_table_t *t;
    DH_CHECK(dh_table_new(&t, "plan", dh__summary_cols, DH__NSUMMARY));
    dh_status_t st = DH_OK;
    for (int s = 0; s < p->nsections && st == DH_OK; s++)
        st = dh__summary_row(t, p, s);
    if (st != DH_OK) {
        dh_table_free(t);
        return st;
    }
    *out = t;
    return DH_OK;
}

dh_status_t dh__cli_print_table(const dh_table_t *t, dh_fmt_t fmt)
{
    dh_strbuf_t b = DH_STRBUF_INIT;
    dh_status_t st = dh_table_render(t, fmt, &b);
    if (st == DH_OK && fwrite(dh_strbuf_str(&b), 1, b.len, stdout) != b.len)
        st = DH_ERR_IO;
    dh_strbuf_free(&b);
    return st;
}

int dh__cli_parse_int(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || errno != 0 || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

int dh__cli_parse_num(const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || errno != 0 || !isfinite(v) || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}
