/*
 * gen.c: plan_synth, a test helper that writes a synthetic profile (synth.h) to a file, so
 * that the CLI tests have profiles without running a training job.
 *
 *   plan_synth OUT.json [--rank R] [--world W] [--layers N] [--mb N] [--iters N]
 *                       [--fwd-per-layer N] [--bwd-per-layer N] [--moe-sync MB] [--variant]
 *                       [--no-times] [--no-comm]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "synth.h"

static int dh__num(const char *s, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || v < -1 || v > 1000000)
        return -1;
    *out = (int)v;
    return 0;
}

int main(int argc, char **argv)
{
    dh_synth_t s;
    dh_synth_defaults(&s);
    const char *out = NULL;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int *field = NULL;
        if (strcmp(o, "--variant") == 0)
            s.variant = 1;
        else if (strcmp(o, "--no-times") == 0)
            s.no_times = 1;
        else if (strcmp(o, "--no-comm") == 0)
            s.no_comm = 1;
        else if (strcmp(o, "--fwd-per-layer") == 0)
            field = &s.fwd_per_layer;
        else if (strcmp(o, "--bwd-per-layer") == 0)
            field = &s.bwd_per_layer;
        else if (strcmp(o, "--rank") == 0)
            field = &s.rank;
        else if (strcmp(o, "--world") == 0)
            field = &s.world;
        else if (strcmp(o, "--layers") == 0)
            field = &s.layers;
        else if (strcmp(o, "--mb") == 0)
            field = &s.mb;
        else if (strcmp(o, "--iters") == 0)
            field = &s.iters;
        else if (strcmp(o, "--moe-sync") == 0)
            field = &s.moe_sync_mb;
        else if (o[0] != '-' && out == NULL)
            out = o;
        else {
            fprintf(stderr, "plan_synth: unexpected '%s'\n", o);
            return 1;
        }
        if (field != NULL) {
            if (v == NULL || dh__num(v, field) != 0) {
                fprintf(stderr, "plan_synth: %s needs a number\n", o);
                return 1;
            }
            i++;
        }
    }
    if (out == NULL) {
        fprintf(stderr, "usage: plan_synth OUT.json [--rank R] [--world W] [--layers N] [--mb N] "
                        "[--iters N] [--fwd-per-layer N] [--bwd-per-layer N] [--moe-sync MB] "
                        "[--variant] [--no-times] [--no-comm]\n");
        return 1;
    }
    dh_profile_t *p = dh_synth_profile(&s);
    char err[512];
    if (p == NULL || dh_profile_save(p, out, err, sizeof(err)) != DH_OK) {
        fprintf(stderr, "plan_synth: %s\n", p ? err : "out of memory");
        dh_profile_free(p);
        return 1;
    }
    dh_profile_free(p);
    return 0;
}
