/*
 * fuzz_common.c: the checks and the scratch file the fuzz targets share (fuzz.h).
 */
#define _GNU_SOURCE
#include "fuzz.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int dh_fuzz_last_ok;

void dh_fuzz_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("fuzz: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    abort();
}

char *dh_fuzz_errbuf(size_t n)
{
    char *b = malloc(n);
    if (!b)
        dh_fuzz_fail("out of memory for a %zu-byte error buffer", n);
    memset(b, 'X', n);
    return b;
}

void dh_fuzz_check_err(const char *what, dh_status_t st, const char *err, size_t errlen,
                       const char *name)
{
    if ((int)st <= (int)DH_OK || (int)st >= (int)DH_STATUS_COUNT)
        dh_fuzz_fail("%s failed with status %d, which is not a failure status", what, (int)st);
    const char *nul = memchr(err, '\0', errlen);
    if (!nul)
        dh_fuzz_fail("%s failed (%s) and left err (%zu bytes) without a terminating NUL",
                     what, dh_status_name(st), errlen);
    if (nul == err)
        dh_fuzz_fail("%s failed (%s) with an empty message", what, dh_status_name(st));
    if (strchr(err, '\n') || strchr(err, '\r'))
        dh_fuzz_fail("%s failed (%s) with a message of more than one line: \"%s\"", what,
                     dh_status_name(st), err);
    /* The name is due only when the buffer has room for it and a few words more. */
    if (errlen > strlen(name) + 64 && !strstr(err, name))
        dh_fuzz_fail("%s failed (%s) with a message that does not name the input \"%s\": \"%s\"",
                     what, dh_status_name(st), name, err);
}

void dh_fuzz_check_short_err(const char *what, const char *full, const char *shrt,
                             size_t shortlen)
{
    const char *nul = memchr(shrt, '\0', shortlen);
    if (!nul)
        dh_fuzz_fail("%s: a %zu-byte err buffer was left without a terminating NUL", what,
                     shortlen);
    size_t n = (size_t)(nul - shrt);
    if (strncmp(full, shrt, n) != 0)
        dh_fuzz_fail("%s: the message in a %zu-byte buffer \"%.*s\" is not a prefix of the "
                     "full one \"%s\"", what, shortlen, (int)n, shrt, full);
}

/* One scratch file per process on a memory file system (/dev/shm, else $TMPDIR or /tmp):
 * the save functions write a temporary file next to it and rename it into place, so it
 * must be a real path in a writable directory. Removed when the process exits. */
static char scratch_path[4096];

static void scratch_remove(void)
{
    unlink(scratch_path);
}

const char *dh_fuzz_scratch_path(void)
{
    if (!scratch_path[0]) {
        struct stat sb;
        const char *dir = getenv("TMPDIR");
        if (stat("/dev/shm", &sb) == 0 && S_ISDIR(sb.st_mode) && access("/dev/shm", W_OK) == 0)
            dir = "/dev/shm";
        else if (!dir || !*dir)
            dir = "/tmp";
        snprintf(scratch_path, sizeof scratch_path, "%s/dh-fuzz-%ld.json", dir, (long)getpid());
        atexit(scratch_remove);
    }
    unlink(scratch_path);
    return scratch_path;
}

char *dh_fuzz_scratch_read(size_t *len)
{
    *len = 0;
    int fd = open(scratch_path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0)
        dh_fuzz_fail("cannot open the saved file %s", scratch_path);
    size_t n = (size_t)sb.st_size;
    char *buf = n ? malloc(n) : NULL;
    if (n && !buf)
        dh_fuzz_fail("out of memory reading back %zu bytes", n);
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r <= 0)
            dh_fuzz_fail("cannot read back the saved file %s", scratch_path);
        got += (size_t)r;
    }
    close(fd);
    *len = n;
    return buf;
}
