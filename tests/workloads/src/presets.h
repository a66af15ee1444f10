/*
 * presets.h: model shapes and the paper's configurations (presets.c says where every
 * number comes from).
 */
#ifndef WL_PRESETS_H
#define WL_PRESETS_H

#include <stdio.h>

#include "wl.h"

typedef struct wl_model_preset {
    const char *name;
    wl_model_t m;
    const char *source;
} wl_model_preset_t;

typedef struct wl_run_preset {
    const char *name;
    const char *model;
    int dp, tp, pp, cp, mbs, gbs, seq;
    const char *device;     /* vgpu profile */
    double megatron, dhelix; /* the paper's TFLOP/s per GPU; 0 where it gives none */
    const char *source;
    double mfu_gain_lo, mfu_gain_hi; /* MFU points gained, where the paper gives only that */
    int vpp;                /* virtual stages per pipeline rank that `--vpp preset` selects
                               (0: the preset has no pipeline parallelism); presets.c */
} wl_run_preset_t;

/* NULL when unknown. */
const wl_model_preset_t *wl_find_model(const char *name);
const wl_run_preset_t *wl_find_preset(const char *name);
/* The paper's configurations, in the order of its table, then the Hopper ones; *n gets
 * their number. */
const wl_run_preset_t *wl_paper_presets(int *n);
/* Prints every model and preset with its source. */
void wl_list_presets(FILE *f);

#endif
