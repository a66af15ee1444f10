/*
 * fuzz.h: what the fuzz targets of tests/fuzz share.
 *
 * Each target (fuzz_plan.c, fuzz_profile.c) defines LLVMFuzzerTestOneInput. It is linked
 * either with libFuzzer (scripts/fuzz, clang) or with replay.c, a plain main that runs it
 * on every file of a corpus (the CTests fuzz.plan_corpus and fuzz.profile_corpus). A
 * target reports a broken contract by printing one line that starts "fuzz: " and calling
 * abort(), which both drivers treat as a failure with the input named.
 */
#ifndef DH_FUZZ_H
#define DH_FUZZ_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

/* The libFuzzer entry point: parses data[0..size) (not NUL-terminated), checks the
 * contracts of plan.h and releases everything. Always returns 0. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* 1 when the last LLVMFuzzerTestOneInput parsed its input successfully, else 0. The
 * replay driver uses it to hold the seed files named ok-* and bad-* to their verdicts. */
extern int dh_fuzz_last_ok;

/* The error-text contract of plan.h for one failed parse: st is a known status other than
 * DH_OK; err (errlen bytes) holds a NUL-terminated, non-empty, single line that names the
 * input (name) when errlen leaves room for it. Aborts, printing what is wrong, otherwise. */
void dh_fuzz_check_err(const char *what, dh_status_t st, const char *err, size_t errlen,
                       const char *name);

/* The same failure reported into a short buffer must be a prefix of the full message:
 * aborts otherwise. */
void dh_fuzz_check_short_err(const char *what, const char *full, const char *shrt,
                             size_t shortlen);

/* Prints "fuzz: <what>" with printf arguments to stderr and aborts. */
void dh_fuzz_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* A heap buffer of exactly n bytes filled with a non-NUL byte, so that AddressSanitizer
 * sees a write past its end and a missing terminator is visible. Aborts when out of memory. */
char *dh_fuzz_errbuf(size_t n);

/* A scratch file for the save half of the round trip, on a memory file system where there
 * is one: its path for the save functions (the file is removed first, and at exit), and
 * what they wrote, read back. */
const char *dh_fuzz_scratch_path(void);
/* The scratch file's contents in a new heap buffer of exactly *len bytes (the caller frees
 * it); NULL with *len 0 when it is empty. Aborts when it is missing or cannot be read. */
char *dh_fuzz_scratch_read(size_t *len);

#endif
