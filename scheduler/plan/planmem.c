/*
 * planmem.c: what the planner needs to know about memory (planner_int.h): the template's
 * memory as the DP and the simulation see it, the DP of one pair kept within the bound as
 * the runtime would hold it, and what the runtime holds back for pairing.
 *
 * The DP bounds each state with its own account (align.h, "Memory"), which covers what the
 * runtime holds when ranks need not agree. When they must (a job of several processes), a
 * pair's two-strand groups wait for the ranks' vote until the last of them is complete, so
 * the pair holds more than any one state of the DP says. So the pair as chosen is simulated
 * as the runtime holds it (memsim.h), and when it passes the bound the DP runs again under
 * lower bounds until one keeps it.
 */
#include "planner_int.h"
#include "plan_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The DP again under lower bounds: this many tries of a bisection. */
#define DH__FIT_TRIES 7

dh_status_t dh__mem_ops(const dh_profile_t *p, const dh_prof_op_t *tops,
                        const dh_plan_section_t *s, dh_align_op_t *aops, dh_memsim_op_t **mops,
                        double *fixed)
{
    size_t n = s->nops;
    dh_memsim_op_t *m = calloc(n ? n : 1, sizeof *m);
    int64_t *kept = malloc((n ? n : 1) * sizeof *kept), *re = malloc((n ? n : 1) * sizeof *re);
    uint32_t *from = malloc((n ? n : 1) * sizeof *from);
    dh_status_t st = m && kept && re && from ? DH_OK : DH_ERR_NOMEM;
    *fixed = 0;
    for (size_t i = 0; st == DH_OK && i < n; i++) {
        const dh_prof_op_t *src = &tops[i];
        int64_t bytes, freed;
        m[i].nsizes = dh_prof_allocs(p, src, &m[i].sizes, &bytes, &freed);
        m[i].freed = freed;
        m[i].stream = src->stream;
        m[i].blas = strcmp(src->kind, "GEMM") == 0 || strcmp(src->kind, "LT_MATMUL") == 0;
        /* Strand 1's workspace, once the section pairs (memsim.c counts what it uses), of the
         * size the framework gave its GEMMs (a profile from before issue 27 does not say:
         * the most the runtime ever gave, DH_PLAN_BLAS_WS_BYTES). */
        m[i].ws_bytes = p->blas_ws_bytes >= 0 ? p->blas_ws_bytes : (int64_t)DH_PLAN_BLAS_WS_BYTES;
        if (m[i].blas)
            *fixed = (double)m[i].ws_bytes;
        aops[i].mem = bytes - freed;
        aops[i].freed = freed;
    }
    for (int k = 0; st == DH_OK && k < s->nphases; k++) {
        const dh_plan_phase_t *ph = &s->phases[k];
        st = dh_memsim_reuse(m + ph->first, ph->n, kept, re, from);
        for (size_t i = 0; st == DH_OK && i < ph->n; i++) {
            dh_align_op_t *a = &aops[ph->first + i];
            a->kept = kept[i];
            a->retaken = re[i];
            a->retaken_from = from[i];
        }
    }
    free(kept);
    free(re);
    free(from);
    if (st != DH_OK) {
        free(m);
        m = NULL;
    }
    *mops = m;
    return st;
}

dh_status_t dh__align_fit(const dh_align_op_t *a, size_t na, const dh_align_op_t *b, size_t nb,
                          const dh_memsim_op_t *mops, int agree, const dh_align_model_t *m,
                          const dh_align_params_t *p, dh_align_result_t *r, int *fits)
{
    *fits = 1;
    dh_status_t st = dh_align(a, na, b, nb, m, p, r);
    dh_memsim_result_t ms;
    if (st != DH_OK || p->max_extra_mem < 0 || r->npairs == 0)
        return st;
    DH_CHECK(dh_memsim_pair(mops, na, nb, r, agree, &ms));
    if (ms.held <= p->max_extra_mem)
        return DH_OK;
    /* What the pair holds grows with the DP's bound: the largest bound in [0, the bound)
     * whose alignment keeps it, by bisection (the DP at 0 first: when even that one passes,
     * no bound does). */
    dh_align_params_t q = *p;
    dh_align_result_t best = {0}, cur = {0};
    double lo = 0, hi = p->max_extra_mem;
    int found = 0;
    for (int t = 0; t <= DH__FIT_TRIES && st == DH_OK; t++) {
        q.max_extra_mem = t == 0 ? 0 : (lo + hi) / 2;
        st = dh_align(a, na, b, nb, m, &q, &cur);
        if (st == DH_OK)
            st = dh_memsim_pair(mops, na, nb, &cur, agree, &ms);
        if (st != DH_OK)
            break;
        if (cur.npairs == 0 || ms.held <= p->max_extra_mem) {
            dh_align_result_free(&best);
            best = cur;
            found = 1;
            lo = q.max_extra_mem;
        } else {
            dh_align_result_free(&cur);
            hi = q.max_extra_mem;
            if (t == 0)
                break;
        }
        memset(&cur, 0, sizeof cur);
    }
    dh_align_result_free(&cur);
    if (st != DH_OK || !found) {
        dh_align_result_free(&best);
        *fits = st == DH_OK ? 0 : 1;
        return st;
    }
    dh_align_result_free(r);
    *r = best;
    return DH_OK;
}

dh_status_t dh__held(const dh_prof_op_t *src, dh_plan_section_t *s)
{
    size_t *ra = dh_plan_release_marks(s);
    double *ops = calloc((size_t)s->ngroups, sizeof *ops), *bytes = calloc((size_t)s->ngroups, sizeof *bytes);
    if (!ra || !ops || !bytes) {
        free(ra);
        free(ops);
        free(bytes);
        return DH_ERR_NOMEM;
    }
    double hops = 0, hbytes = 0;
    size_t r = 0;
    for (size_t c = 0; c < s->nops; c++) {
        int g = s->ops[c].group;
        double freed = src[c].mem < 0 ? -(double)src[c].mem : 0;
        ops[g] += 1;
        bytes[g] += freed;
        hops += 1;
        hbytes += freed;
        for (; r < ra[c]; r++) {
            hops -= ops[r];
            hbytes -= bytes[r];
            ops[r] = bytes[r] = 0;
        }
        /* A group of one strand with every group before it complete goes out op by op. */
        const dh_plan_group_t *gr = &s->groups[g];
        if ((gr->a_n == 0 || gr->b_n == 0) && r == (size_t)g) {
            hops -= ops[g];
            hbytes -= bytes[g];
            ops[g] = bytes[g] = 0;
        }
        s->held_ops = fmax(s->held_ops, hops);
        s->held_free_bytes = fmax(s->held_free_bytes, hbytes);
    }
    free(ra);
    free(ops);
    free(bytes);
    return DH_OK;
}
