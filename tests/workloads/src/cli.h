/*
 * cli.h: command-line options of the workload (cli.c lists them).
 */
#ifndef WL_CLI_H
#define WL_CLI_H

#include "wl.h"

/* Fills c from the defaults, a preset and the options; sets the environment the run needs
 * (VGPU_DEVICE, VGPU_TIMING_ONLY, CUDA_DEVICE_MAX_CONNECTIONS) unless the user set it.
 * Must run before any CUDA call. Fails the job on a bad option. */
void wl_cli_parse(wl_cfg_t *c, int argc, char **argv);

#endif
