/*
 * replay.c: runs a fuzz target (LLVMFuzzerTestOneInput, fuzz.h) on every file of corpus
 * directories or single files, without libFuzzer, so that the normal build and the
 * sanitizer builds replay the checked-in corpus as a CTest.
 *
 *   fuzz_replay_plan [--timeout SECONDS] PATH...
 *
 * Each input is read into a heap buffer of exactly its size. An input that runs longer
 * than the timeout (default 10 s) is a hang: its name is printed and the process aborts.
 * Files named ok-* must parse and files named bad-* must be rejected (the hand-written
 * seeds); other names (inputs libFuzzer found) only have to pass the target's checks.
 * Under LeakSanitizer each input is leak-checked on its own so that a leak names its file
 * (up to the first leak; LeakSanitizer's check at exit covers the rest).
 * Exit status: 0 when every input passed, 1 otherwise (and when no input was found).
 */
#include "fuzz.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Provided by the sanitizer runtime when there is one. */
extern int __lsan_do_recoverable_leak_check(void) __attribute__((weak));

static char current[4096]; /* the input being run, for the hang report */

static void on_alarm(int sig)
{
    static const char msg[] = "\nreplay: hang: this input ran past the timeout: ";
    (void)sig;
    ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
    w = write(STDERR_FILENO, current, strlen(current));
    w = write(STDERR_FILENO, "\n", 1);
    (void)w;
    abort();
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0) {
        fclose(f);
        return NULL;
    }
    size_t n = (size_t)sb.st_size;
    /* Exactly n bytes: a parser that reads past the input is an AddressSanitizer report. */
    char *buf = malloc(n ? n : 1);
    if (buf && n && fread(buf, 1, n, f) != n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf && n == 0) {
        free(buf);
        buf = malloc(0);
    }
    *len = n;
    return buf;
}

struct tally {
    unsigned inputs, parsed, rejected, failed;
    int leak_checks; /* 1 until an input leaked */
};

static void run_one(const char *path, unsigned timeout, struct tally *t)
{
    size_t len = 0;
    errno = 0;
    char *buf = read_file(path, &len);
    if (!buf && (len > 0 || errno)) {
        fprintf(stderr, "replay: cannot read %s: %s\n", path, strerror(errno));
        t->failed++;
        return;
    }
    snprintf(current, sizeof current, "%s", path);
    fprintf(stderr, "replay: %-60s ", path);
    alarm(timeout);
    dh_fuzz_last_ok = 0;
    LLVMFuzzerTestOneInput((const uint8_t *)buf, len);
    alarm(0);
    free(buf);
    t->inputs++;
    if (dh_fuzz_last_ok)
        t->parsed++;
    else
        t->rejected++;
    fprintf(stderr, "%s", dh_fuzz_last_ok ? "parsed" : "rejected");

    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (strncmp(base, "ok-", 3) == 0 && !dh_fuzz_last_ok) {
        fprintf(stderr, "  FAILED: an ok-* seed must parse");
        t->failed++;
    } else if (strncmp(base, "bad-", 4) == 0 && dh_fuzz_last_ok) {
        fprintf(stderr, "  FAILED: a bad-* seed must be rejected");
        t->failed++;
    }
    /* A leak stays leaked, and every later check would report it again and blame the
     * wrong input: after the first one, only the check at exit remains. */
    if (t->leak_checks && __lsan_do_recoverable_leak_check &&
        __lsan_do_recoverable_leak_check()) {
        fprintf(stderr, "  FAILED: leaks (reported above; later inputs are not checked one "
                        "by one)");
        t->leak_checks = 0;
        t->failed++;
    }
    fputc('\n', stderr);
}

static int skip_entry(const struct dirent *e)
{
    return e->d_name[0] != '.';
}

static void run_path(const char *path, unsigned timeout, struct tally *t)
{
    struct stat sb;
    if (stat(path, &sb) != 0) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        t->failed++;
        return;
    }
    if (!S_ISDIR(sb.st_mode)) {
        run_one(path, timeout, t);
        return;
    }
    struct dirent **names;
    int n = scandir(path, &names, skip_entry, alphasort);
    if (n < 0) {
        fprintf(stderr, "replay: cannot list %s: %s\n", path, strerror(errno));
        t->failed++;
        return;
    }
    for (int i = 0; i < n; i++) {
        char child[4096];
        snprintf(child, sizeof child, "%s/%s", path, names[i]->d_name);
        if (stat(child, &sb) == 0 && S_ISREG(sb.st_mode))
            run_one(child, timeout, t);
        free(names[i]);
    }
    free(names);
}

int main(int argc, char **argv)
{
    unsigned timeout = 10;
    int first = 1;
    if (argc > 2 && strcmp(argv[1], "--timeout") == 0) {
        timeout = (unsigned)strtoul(argv[2], NULL, 10);
        first = 3;
    }
    if (first >= argc || timeout == 0) {
        fprintf(stderr, "usage: %s [--timeout SECONDS] CORPUS_DIR_OR_FILE...\n", argv[0]);
        return 1;
    }
    signal(SIGALRM, on_alarm);

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    struct tally t = {0, 0, 0, 0, 1};
    for (int i = first; i < argc; i++)
        run_path(argv[i], timeout, &t);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;

    fprintf(stderr, "replay: %u inputs (%u parsed, %u rejected) in %.2f s, %u failed\n",
            t.inputs, t.parsed, t.rejected, s, t.failed);
    if (t.inputs == 0) {
        fprintf(stderr, "replay: no input found: an empty corpus tests nothing\n");
        return 1;
    }
    return t.failed ? 1 : 0;
}
