/*
 * cli.h: what the `dhelix` subcommands share (not a library API: the CLI's own modules).
 *
 * Exit statuses: 0 success, 1 usage error or bad input (one line on stderr naming the file
 * and the problem), 2 command not available yet.
 */
#ifndef DH_CLI_H
#define DH_CLI_H

#include <stddef.h>
#include <stdint.h>

#include "common/strbuf.h"
#include "common/table.h"
#include "plan.h"

enum { DH_EXIT_OK = 0, DH_EXIT_USAGE = 1, DH_EXIT_NOT_YET = 2 };

int dh__cmd_plan(int argc, char **argv);
int dh__cmd_show(int argc, char **argv);
int dh__cmd_validate(int argc, char **argv);

/* The per-section summary of a plan (one row per section), the table `dhelix plan` and
 * `dhelix show` both print. Errors: DH_ERR_NOMEM. */
dh_status_t dh__cli_summary(const dh_plan_t *p, dh_table_t **out);

/* Groups of s with ops on both strands. */
int dh__cli_paired_groups(const dh_plan_section_t *s);

/* Renders t in fmt and writes it to stdout. Errors: DH_ERR_NOMEM, DH_ERR_IO. */
dh_status_t dh__cli_print_table(const dh_table_t *t, dh_fmt_t fmt);

/* Writes the ranks as "0-3,8" ("all" for none) into buf. */
void dh__cli_ranks(const int *ranks, int n, char *buf, size_t len);

/* Parses a whole decimal integer within [lo, hi]. 0 on success. */
int dh__cli_parse_int(const char *s, long lo, long hi, long *out);

/* Parses a finite decimal number within [lo, hi]. 0 on success. */
int dh__cli_parse_num(const char *s, double lo, double hi, double *out);

/* An SVG drawing of section sec's groups on a time axis (two lanes per strand: compute above
 * communication), self-contained and valid XML. Errors: DH_ERR_NOMEM. */
dh_status_t dh__cli_svg(const dh_plan_t *p, int sec, dh_strbuf_t *out);

#endif
