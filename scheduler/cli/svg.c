/* svg.c: a plan section drawn on a time axis (`dhelix show --svg`). Plain SVG 1.1 with
 * generic font families and no scripts, so any viewer (and rsvg-convert) renders it alone. */
#include "cli.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define DH__W 1400.0
#define DH__LEFT 150.0
#define DH__RIGHT 30.0
#define DH__LANE_H 26.0
#define DH__TOP 74.0

/* Lane tops: strand a compute, strand a comm, strand b compute, strand b comm. */
static const double dh__lane_y[4] = {DH__TOP, DH__TOP + 32, DH__TOP + 80, DH__TOP + 112};
static const char *const dh__lane_name[4] = {"strand a compute", "strand a comm",
                                             "strand b compute", "strand b comm"};
#define DH__AXIS_Y (DH__TOP + 112 + DH__LANE_H + 10)
#define DH__H (DH__AXIS_Y + 76)

static const char *dh__color(dh_opclass_t c)
{
    switch (c) {
    case DH_CLS_COMPUTE: return "#4e79a7";
    case DH_CLS_COMM: return "#e15759";
    case DH_CLS_COPY: return "#f28e2b";
    case DH_CLS_HOST: return "#9c755f";
    default: return "#bab0ac";
    }
}

/* Appends s as XML character data: markup characters escaped, control characters (not
 * allowed in XML 1.0) replaced. */
static void dh__xml(dh_strbuf_t *b, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '&')
            dh_strbuf_puts(b, "&amp;");
        else if (c == '<')
            dh_strbuf_puts(b, "&lt;");
        else if (c == '>')
            dh_strbuf_puts(b, "&gt;");
        else if (c == '"')
            dh_strbuf_puts(b, "&quot;");
        else if (c < 0x20 || c == 0x7f)
            dh_strbuf_puts(b, "?");
        else
            dh_strbuf_append(b, s, 1);
    }
}

/* A tick step of 1, 2 or 5 times a power of ten giving about 8 ticks over span_ms. */
static double dh__tick(double span_ms)
{
    double raw = span_ms / 8, p = pow(10, floor(log10(raw)));
    double steps[] = {1, 2, 5, 10};
    for (int i = 0; i < 4; i++)
        if (steps[i] * p >= raw)
            return steps[i] * p;
    return 10 * p;
}

static void dh__axis(dh_strbuf_t *b, double total_us)
{
    double plot_w = DH__W - DH__LEFT - DH__RIGHT, span_ms = total_us / 1000;
    double step = dh__tick(span_ms);
    dh_strbuf_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>\n",
                     DH__LEFT, DH__AXIS_Y, DH__LEFT + plot_w, DH__AXIS_Y);
    for (int k = 0; k * step <= span_ms * (1 + 1e-9) && k < 1000; k++) {
        double x = DH__LEFT + k * step / span_ms * plot_w;
        dh_strbuf_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                            "stroke=\"#333\"/><text x=\"%.1f\" y=\"%.1f\" "
                            "text-anchor=\"middle\">%g</text>\n",
                         x, DH__AXIS_Y, x, DH__AXIS_Y + 5, x, DH__AXIS_Y + 18, k * step);
    }
    dh_strbuf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">time (ms)</text>\n",
                     DH__LEFT - 8, DH__AXIS_Y + 18);
}

static void dh__legend(dh_strbuf_t *b)
{
    static const dh_opclass_t cls[] = {DH_CLS_COMPUTE, DH_CLS_COMM, DH_CLS_COPY, DH_CLS_HOST,
                                       DH_CLS_EVENT};
    static const char *const label[] = {"compute", "communication", "copy", "host",
                                        "event / free"};
    double x = DH__LEFT, y = DH__AXIS_Y + 40;
    for (int i = 0; i < 5; i++) {
        dh_strbuf_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"%s\"/>"
                            "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n",
                         x, y, dh__color(cls[i]), x + 16, y + 10, label[i]);
        x += 140;
    }
    dh_strbuf_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"#f1f1e6\" "
                        "stroke=\"#ccc\"/><text x=\"%.1f\" y=\"%.1f\">paired group</text>\n",
                     x, y, x + 16, y + 10);
}

/* The ops of one strand range of a group, each at its predicted start within the group. */
static void dh__strand(dh_strbuf_t *b, const dh_plan_section_t *s, int g, size_t first, size_t n,
                       int strand, double scale)
{
    double t = s->groups[g].start_us;
    for (size_t k = first; k < first + n; k++) {
        const dh_plan_op_t *op = &s->ops[k];
        double us = op->us > 0 ? op->us : 0;
        if (us > 0) {
            int lane = strand * 2 + (op->cls == DH_CLS_COMM || op->cls == DH_CLS_COPY);
            double w = us * scale;
            dh_strbuf_printf(b, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" "
                                "fill=\"%s\"><title>",
                             DH__LEFT + t * scale, dh__lane_y[lane], w < 0.4 ? 0.4 : w, DH__LANE_H,
                             dh__color(op->cls));
            dh__xml(b, op->name[0] ? op->name : op->kind);
            dh_strbuf_printf(b, " (");
            dh__xml(b, op->kind);
            dh_strbuf_printf(b, ", %.1f us, group %d)</title></rect>\n", us, g);
        }
        t += us;
    }
}

static void dh__header(dh_strbuf_t *b, const dh_plan_t *p, int sec)
{
    const dh_plan_section_t *s = &p->sections[sec];
    char ranks[64];
    dh__cli_ranks(s->ranks, s->nranks, ranks, sizeof(ranks));
    dh_strbuf_printf(b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                        "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" "
                        "width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
                        "font-family=\"sans-serif\" font-size=\"11\">\n"
                        "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
                     DH__W, DH__H, DH__W, DH__H);
    dh_strbuf_printf(b, "<text x=\"%.1f\" y=\"26\" font-size=\"16\" font-weight=\"bold\">"
                        "DHelix plan, section %d (ranks ", DH__LEFT, sec);
    dh__xml(b, ranks);
    dh_strbuf_printf(b, "): baseline %.3f ms, predicted %.3f ms (%.3fx)</text>\n",
                     s->baseline_us / 1000, s->si_us / 1000,
                     s->si_us > 0 ? s->baseline_us / s->si_us : 1.0);
    dh_strbuf_printf(b, "<text x=\"%.1f\" y=\"46\">%zu ops, %d groups; strand a: backward of "
                        "micro-batch i and serial work, strand b: forward of i+1; predicted "
                        "extra memory %.1f MiB, %.0f%% of exposed communication hidden. ",
                     DH__LEFT, s->nops, s->ngroups, s->extra_mem_bytes / 1048576.0,
                     s->hidden_comm_fraction * 100);
    dh__xml(b, p->created_by);
    dh_strbuf_puts(b, "</text>\n");
    for (int l = 0; l < 4; l++)
        dh_strbuf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
                         DH__LEFT - 8, dh__lane_y[l] + DH__LANE_H / 2 + 4, dh__lane_name[l]);
}

dh_status_t dh__cli_svg(const dh_plan_t *p, int sec, dh_strbuf_t *b)
{
    if (sec < 0 || sec >= p->nsections)
        return DH_ERR_INVALID;
    const dh_plan_section_t *s = &p->sections[sec];
    double total = 0;
    for (int g = 0; g < s->ngroups; g++) {
        const dh_plan_group_t *gr = &s->groups[g];
        if (gr->start_us + gr->pred_us > total)
            total = gr->start_us + gr->pred_us;
    }
    if (total <= 0)
        total = 1;
    double scale = (DH__W - DH__LEFT - DH__RIGHT) / total;
    dh__header(b, p, sec);
    for (int g = 0; g < s->ngroups; g++) {
        const dh_plan_group_t *gr = &s->groups[g];
        if (gr->a_n && gr->b_n)
            dh_strbuf_printf(b, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" "
                                "fill=\"#f1f1e6\" stroke=\"#ccc\" stroke-width=\"0.5\"/>\n",
                             DH__LEFT + gr->start_us * scale, DH__TOP - 4, gr->pred_us * scale,
                             dh__lane_y[3] + DH__LANE_H + 8 - DH__TOP);
    }
    for (int g = 0; g < s->ngroups; g++) {
        const dh_plan_group_t *gr = &s->groups[g];
        dh__strand(b, s, g, gr->a_first, gr->a_n, 0, scale);
        dh__strand(b, s, g, gr->b_first, gr->b_n, 1, scale);
    }
    dh__axis(b, total);
    dh__legend(b);
    dh_strbuf_puts(b, "</svg>\n");
    return dh_strbuf_status(b);
}
