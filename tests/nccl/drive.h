/*
 * drive.h: what the NCCL drivers (test_exact.c, test_groups.c, test_pin.c, test_errors.c)
 * share: running nccl_prog under mpirun on the vgpu, with or without the shim, and reading
 * what it printed.
 *
 * The drivers run without the shim. Their environment (tests/nccl.cmake) names:
 * DH_TEST_PROG (nccl_prog), DH_TEST_MPIEXEC (mpirun), DH_TEST_PRELOAD (the LD_PRELOAD list
 * of a run with the shim: sanitizer runtime if any, the shim, the vgpu libraries),
 * DH_TEST_VGPU_PRELOAD (the same without the shim) and DH_TEST_LIBDIR. LD_PRELOAD reaches
 * the ranks only (through env(1) in front of the program), never mpirun itself.
 */
#ifndef NCCL_DRIVE_H
#define NCCL_DRIVE_H

#include "runner.h"

#define ND_MAX_RANKS 16

/* Runs nccl_prog with the scenario arguments args (NULL-terminated) on np ranks, with the
 * shim or not, with env added ("K=V", NULL-terminated). Output in r (runner.h). */
void nd_run(dh_run_t *r, const char *dir, int np, int shim, const char *const *args,
            const char *const *env);

/* Fails the test (with what, and the output) unless the run exited 0 and printed no
 * "FAIL" line and no vgpu hazard. */
void nd_expect_clean(const dh_run_t *r, const char *what);

/* The digest each rank printed, into d[rank] (17 bytes each); fails unless all np did. */
void nd_digests(const dh_run_t *r, int np, char d[][17], const char *what);

/* Fails unless the two runs' digests agree on every rank. */
void nd_same_digests(char a[][17], char b[][17], int np, const char *what_a,
                     const char *what_b);

/* The line of text that starts with prefix and contains "rank=<rank> " (or ends with it);
 * NULL when there is none. Points into text. */
const char *nd_line(const char *text, const char *prefix, int rank);

#endif
