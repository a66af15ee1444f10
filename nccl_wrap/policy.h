/*
 * policy.h: DHELIX_GROUPS, which communicators' operations may be interleaved with the
 * other strand's work. The others are pinned: kept in program order and fenced so that they
 * never run beside the other strand (op->pinned; scheduler/dispatch/dispatch.c).
 *
 * Grammar (also in the configuration table, preload/common/config.h):
 *     spec  := term { ',' term }
 *     term  := [ '!' ] sel
 *     sel   := 'all' | 'none'
 *            | 'role:' roles | roles               roles: tp|cp|dp|pp|ep joined by '+'
 *            | 'size' cmp N                         cmp: = < <= > >= (':' is '=')
 *            | 'name:' glob | glob                  glob: fnmatch(3) on commName
 * Terms are read left to right and the last one that matches a communicator decides:
 * a plain term interleaves it, a '!' term pins it. A communicator no term matches is pinned,
 * unless the first term is a '!' term (then the list refines "all"). A role term matches a
 * communicator whose role is exactly that set ("dp" is not "cp+dp"). Examples: "all" (the
 * default), "none", "tp,cp", "all,!dp", "TENSOR_MODEL_PARALLEL*,size<=8", "!pp".
 *
 * Thread-safety: parse fills a caller-owned struct; decide only reads it.
 */
#ifndef DH_NCCL_POLICY_H
#define DH_NCCL_POLICY_H

#include <stddef.h>

#include "common/status.h"

#define DH_POLICY_MAX_TERMS 32
#define DH_POLICY_PATTERN_MAX 96

typedef enum dh_policy_sel {
    DH_SEL_ALL,
    DH_SEL_ROLE,
    DH_SEL_SIZE,
    DH_SEL_NAME
} dh_policy_sel_t;

typedef enum dh_policy_cmp { DH_CMP_EQ, DH_CMP_LT, DH_CMP_LE, DH_CMP_GT, DH_CMP_GE } dh_policy_cmp_t;

typedef struct dh_policy_term {
    int pin;                  /* a '!' term */
    dh_policy_sel_t sel;
    unsigned role;            /* DH_SEL_ROLE */
    dh_policy_cmp_t cmp;      /* DH_SEL_SIZE */
    int size;
    char text[DH_POLICY_PATTERN_MAX]; /* the term as written (the glob for DH_SEL_NAME) */
} dh_policy_term_t;

typedef struct dh_policy {
    int nterms;
    int start_enabled;        /* the first term is a '!' term */
    dh_policy_term_t terms[DH_POLICY_MAX_TERMS];
} dh_policy_t;

/* Parses spec (NULL or empty: "all"). Errors: DH_ERR_PARSE with the reason in err (a term
 * too long or empty, a bad size, too many terms); *p is then "all". */
dh_status_t dh_policy_parse(const char *spec, dh_policy_t *p, char *err, size_t errlen);

/* Whether a communicator named name (may be "" or NULL), of role role (0: unknown) and
 * nranks members may be interleaved (1) or is pinned (0). *term receives the index of the
 * deciding term, or -1 when none matched. */
int dh_policy_decide(const dh_policy_t *p, const char *name, unsigned role, int nranks,
                     int *term);

#endif
