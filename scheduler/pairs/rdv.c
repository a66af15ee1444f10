/* rdv.c: ranks from the launcher's environment and the NCCL id through a file (rdv.h). */
#include "rdv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define DH__RDV_FILE "ncclid"
#define DH__RDV_MAGIC "dhelix-pairs-id 2"

/* A non-negative integer from the first of names that is set and well formed; -1 none. */
static int dh__env_int(const char *const *names)
{
    for (; *names; names++) {
        const char *v = getenv(*names);
        if (!v || !*v)
            continue;
        char *end;
        errno = 0;
        long x = strtol(v, &end, 10);
        if (!*end && !errno && x >= 0 && x < (1L << 30))
            return (int)x;
    }
    return -1;
}

void dh_ovl_world_get(dh_ovl_world_t *w)
{
    static const char *const ranks[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK",
                                        "RANK", "SLURM_PROCID", NULL};
    static const char *const sizes[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "WORLD_SIZE",
                                        "SLURM_NTASKS", NULL};
    static const char *const locals[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                                         "LOCAL_RANK", "SLURM_LOCALID", NULL};
    static const char *const jobs[] = {"OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE",
                                       "TORCHELASTIC_RUN_ID", NULL};
    memset(w, 0, sizeof *w);
    w->rank = dh__env_int(ranks);
    w->size = dh__env_int(sizes);
    if (w->rank < 0 || w->size < 1 || w->rank >= w->size) {
        w->rank = 0;
        w->size = 1;
    }
    w->local_rank = dh__env_int(locals);
    if (w->local_rank < 0)
        w->local_rank = w->rank;
    for (const char *const *j = jobs; *j && !w->token[0]; j++) {
        const char *v = getenv(*j);
        if (v)
            snprintf(w->token, sizeof w->token, "%s", v);
    }
    const char *job = getenv("SLURM_JOB_ID"), *step = getenv("SLURM_STEP_ID");
    if (!w->token[0] && job)
        snprintf(w->token, sizeof w->token, "slurm %s.%s", job, step ? step : "");
}

void dh_ovl_rdv_default_dir(char *out, size_t len)
{
    snprintf(out, len, "/tmp/dhelix-pairs-%lu-%lu", (unsigned long)getuid(),
             (unsigned long)getppid());
}

static void dh__path(char *out, size_t len, const char *dir, const char *name)
{
    snprintf(out, len, "%s/%s", dir, name);
}

static int dh__publish(const dh_ovl_world_t *w, const char *dir, const ncclUniqueId *id,
                       uint64_t tag, char *err, size_t errlen)
{
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "rendezvous: cannot create %s: %s", dir, strerror(errno));
        return -1;
    }
    char tmp[4200], dst[4200];
    snprintf(tmp, sizeof tmp, "%s/.%s.%ld", dir, DH__RDV_FILE, (long)getpid());
    dh__path(dst, sizeof dst, dir, DH__RDV_FILE);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        snprintf(err, errlen, "rendezvous: cannot write %s: %s", tmp, strerror(errno));
        return -1;
    }
    fprintf(f, "%s\n%s\n%016llx\n", DH__RDV_MAGIC, w->token, (unsigned long long)tag);
    const unsigned char *b = (const unsigned char *)id->internal;
    for (size_t i = 0; i < sizeof id->internal; i++)
        fprintf(f, "%02x", b[i]);
    fputc('\n', f);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad || rename(tmp, dst) != 0) {
        snprintf(err, errlen, "rendezvous: cannot publish %s: %s", dst, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* 1: read this run's id and rank 0's tag; 0: no file yet, or an earlier run's. */
static int dh__try_read(const dh_ovl_world_t *w, const char *path, ncclUniqueId *id,
                        unsigned long long *tag)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char magic[64] = "", token[sizeof w->token + 2] = "", hex[2 * sizeof id->internal + 4] = "";
    char tagline[32] = "";
    int ok = fgets(magic, sizeof magic, f) && fgets(token, sizeof token, f) &&
             fgets(tagline, sizeof tagline, f) && fgets(hex, sizeof hex, f) &&
             sscanf(tagline, "%llx", tag) == 1;
    fclose(f);
    magic[strcspn(magic, "\n")] = '\0';
    token[strcspn(token, "\n")] = '\0';
    if (!ok || strcmp(magic, DH__RDV_MAGIC) != 0 || strcmp(token, w->token) != 0 ||
        strlen(hex) < 2 * sizeof id->internal)
        return 0;
    unsigned char *b = (unsigned char *)id->internal;
    for (size_t i = 0; i < sizeof id->internal; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1)
            return 0;
        b[i] = (unsigned char)v;
    }
    return 1;
}

int dh_ovl_rdv_exchange(const dh_ovl_world_t *w, const char *dir, ncclUniqueId *id,
                        uint64_t tag, double timeout_s, char *err, size_t errlen)
{
    if (w->size == 1)
        return 0;
    if (w->rank == 0)
        return dh__publish(w, dir, id, tag, err, errlen);
    char path[4200];
    dh__path(path, sizeof path, dir, DH__RDV_FILE);
    const struct timespec tick = {0, 20 * 1000 * 1000};
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        unsigned long long theirs = 0;
        if (dh__try_read(w, path, id, &theirs)) {
            if (theirs == tag)
                return 0;
            snprintf(err, errlen,
                     "rank 0 chose other ops to measure (selection %016llx, here %016llx): do "
                     "all ranks read the same profile?", theirs, (unsigned long long)tag);
            return -1;
        }
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((double)(t.tv_sec - t0.tv_sec) + 1e-9 * (double)(t.tv_nsec - t0.tv_nsec) > timeout_s) {
            snprintf(err, errlen,
                     "rendezvous: no id from rank 0 in %s after %.0f s (all ranks need the "
                     "same --rendezvous directory%s%s)",
                     path, timeout_s, w->token[0] ? "; job " : "", w->token);
            return -1;
        }
        nanosleep(&tick, NULL);
    }
}

void dh_ovl_rdv_cleanup(const dh_ovl_world_t *w, const char *dir)
{
    if (w->size == 1 || w->rank != 0)
        return;
    char path[4200];
    dh__path(path, sizeof path, dir, DH__RDV_FILE);
    unlink(path);
    rmdir(dir); /* fails harmlessly when someone else keeps files there */
}
