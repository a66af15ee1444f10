/* transfer.c: the times the DP sees for transfers between pipeline stages (planner_int.h). */
#include "planner_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* 1 when communicator c joins pipeline stages: role "pp" (one of the '+'-separated roles),
 * or, with no role recorded, a name that says so. */
static int dh__is_pipeline(const dh_prof_comm_t *c)
{
    if (c->role[0] == '\0')
        return strstr(c->name, "PIPELINE") != NULL;
    for (const char *r = c->role; *r;) {
        size_t n = strcspn(r, "+");
        if (n == 2 && strncmp(r, "pp", 2) == 0)
            return 1;
        r += n + (r[n] == '+');
    }
    return 0;
}

/* What co-running can hide of a transfer between pipeline stages is the transfer, not the
 * time it waited for the other stage to post its side (a stage's send blocks until the next
 * stage receives), and a profiled send or receive holds both: many times the transfer, and
 * that wait is set by the other stage, which pairing this stage's strands does not move.
 * So the DP sees each collective of a pipeline communicator at most at the lower envelope
 * of them, lat + bytes * per_byte, with lat the fastest one and per_byte the least time per
 * byte above lat among them. (The collectives of the other communicators run in lockstep:
 * their profiled times are what they cost.) */
dh_status_t dh__transfer_times(const dh_profile_t *p, const dh__tmpl_t *t, dh_align_op_t *aops,
                               size_t n)
{
    if (p->ncomms <= 0)
        return DH_OK;
    double *lat = malloc((size_t)p->ncomms * sizeof(*lat));
    double *per = malloc((size_t)p->ncomms * sizeof(*per));
    if (lat == NULL || per == NULL) {
        free(lat);
        free(per);
        return DH_ERR_NOMEM;
    }
    for (int c = 0; c < p->ncomms; c++)
        lat[c] = per[c] = INFINITY;
    for (size_t i = 0; i < n; i++) {
        int c = t->ops[i].comm;
        if (aops[i].cls == DH_CLS_COMM && c >= 0 && c < p->ncomms && aops[i].us > 0 &&
            aops[i].us < lat[c])
            lat[c] = aops[i].us;
    }
    for (size_t i = 0; i < n; i++) {
        int c = t->ops[i].comm;
        if (aops[i].cls == DH_CLS_COMM && c >= 0 && c < p->ncomms && aops[i].us > 0 &&
            t->ops[i].bytes > 0 && (aops[i].us - lat[c]) / (double)t->ops[i].bytes < per[c])
            per[c] = (aops[i].us - lat[c]) / (double)t->ops[i].bytes;
    }
    for (size_t i = 0; i < n; i++) {
        int c = t->ops[i].comm;
        if (aops[i].cls != DH_CLS_COMM || c < 0 || c >= p->ncomms || t->ops[i].bytes == 0 ||
            isinf(per[c]) || !dh__is_pipeline(&p->comms[c]))
            continue;
        double env = lat[c] + per[c] * (double)t->ops[i].bytes;
        if (env < aops[i].us)
            aops[i].us = env;
    }
    free(lat);
    free(per);
    return DH_OK;
}
