/*
 * shim.agree_scale: the agreement channel (scheduler/modes/agree.h) with many ranks, as
 * processes of this test on the loopback (no launcher, no device work), and what one round
 * costs.
 *
 *   shim_test_agree_scale N [K]     N ranks, K pair rounds each (default 40)
 *
 * Every rank opens the channel, takes two switch rounds (one where the last rank is not
 * ready: 0 for all; one where all are: 1), K pair rounds, and one switch-back round. The pair
 * rounds cycle through four kinds so that every decision rule is exercised at scale:
 *   all yes (twice)          1 on every rank;
 *   one rank votes "drain"   (2 where the others vote 1): 0 on every rank;
 *   one rank votes "no"      (it does not wait): 0 on every rank that waits.
 * Pair p of round j is j % 8; every seventh rank's plan leaves pair 5 serial (its mask lacks
 * the bit): it does not vote there and the round is decided without it.
 *
 * A rank whose decision differs from the expected one says so (both values) and the test
 * fails; so does a run that has not finished in DH_AGREE_SCALE_LIMIT_S seconds (default 120:
 * a round that never completes). Prints one line of figures per run (and, with
 * DH_AGREE_SCALE_JSON=1, one JSON object): the round latency (rounds run back to back: from
 * one round's last decision to the next one's; median and 90th percentile), the mean period
 * (the rounds' wall time / rounds), and the CPU time per pair round (the opening and the
 * switch rounds left out) of the busiest process and of all of them together: the channel's
 * serial work, which bounds a round's latency where every rank has a core of its own, and
 * its total work, which bounds it from below on a machine with fewer cores than ranks.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agree.h"

static int g_rank, g_n, g_bad, g_said;
static double *g_t;   /* shared: [rank][round][2] enter, leave (ms) */
static double *g_cpu; /* shared: [rank] CPU time of the rounds (ms), its relay thread's too */
static int g_k;

static double clock_ms(clockid_t c)
{
    struct timespec t;
    clock_gettime(c, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static double now_ms(void)
{
    return clock_ms(CLOCK_MONOTONIC);
}

static void expect(const char *what, long j, long got, long want)
{
    if (got != want && g_said++ >= 3) {
        g_bad = 1;
    } else if (got != want) {
        fprintf(stderr, "rank %d: %s (round %ld): got %ld, want %ld\n", g_rank, what, j, got,
                want);
        g_bad = 1;
    }
}

/* The masks: every seventh rank leaves pair 5 serial. */
static int has_pair(int r, int p)
{
    return !(p == 5 && r % 7 == 3);
}

/* Round j: the kind, and the one rank that votes differently (drain or no). */
enum { ALL_YES, ONE_DRAIN, ONE_NO };
static int kind_of(int j)
{
    static const int kinds[4] = {ALL_YES, ALL_YES, ONE_DRAIN, ONE_NO};
    return kinds[j % 4];
}

static int odd_rank(int j)
{
    int r = (int)(((long)j * 37 + 11) % g_n);
    while (!has_pair(r, j % 8))
        r = (r + 1) % g_n;
    return r;
}

static void rank_main(void)
{
    uint64_t mask = UINT64_MAX;
    if (!has_pair(g_rank, 5))
        mask &= ~(1ull << 5);
    dh_agree_set_mask(mask);
    dh_agree_open();
    expect("switch round 0, the last rank not ready", 0,
           dh_agree_switch(0, g_rank != g_n - 1), 0);
    expect("switch round 1, all ready", 1, dh_agree_switch(1, 1), 1);
    double cpu0 = clock_ms(CLOCK_PROCESS_CPUTIME_ID);
    for (int j = 0; j < g_k; j++) {
        int p = j % 8;
        uint64_t key = (uint64_t)(j + 1) << 24 | (uint64_t)p << 8;
        double *t = g_t + ((size_t)g_rank * (size_t)g_k + (size_t)j) * 2;
        t[0] = now_ms();
        if (!has_pair(g_rank, p)) {
            t[1] = t[0];
            continue;
        }
        int k = kind_of(j), odd = odd_rank(j) == g_rank;
        if (k == ONE_NO && odd) {
            expect("a no", j, dh_agree_vote(key, 0), 0);
        } else {
            int vote = k == ONE_DRAIN && odd ? 2 : 1;
            expect("a pair round", j, dh_agree_vote(key, vote), k == ALL_YES ? 1 : 0);
        }
        t[1] = now_ms();
    }
    g_cpu[g_rank] = clock_ms(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
    expect("switch-back round, all yes", 0, dh_agree_switch_back((uint64_t)g_k + 10, 1), 1);
    dh_agree_stats_t st;
    dh_agree_stats(&st);
    expect("channel broken", 0, st.broken, 0);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Round latency: rounds run back to back (a rank votes on a round once it has the previous
 * one's decision), so a round takes from the previous round's last decision to its own last
 * decision; the median and 90th percentile over the rounds. */
static void latency(double *med, double *p90)
{
    double *lat = calloc((size_t)g_k, sizeof *lat), prev = 0;
    int m = 0;
    for (int j = 0; j < g_k; j++) {
        double out = 0;
        for (int r = 0; r < g_n; r++) {
            const double *t = g_t + ((size_t)r * (size_t)g_k + (size_t)j) * 2;
            out = t[1] > out ? t[1] : out;
        }
        if (j > 0)
            lat[m++] = out - prev;
        prev = out;
    }
    qsort(lat, (size_t)m, sizeof *lat, cmp_double);
    *med = m ? lat[m / 2] : 0;
    *p90 = m ? lat[(m * 9) / 10 < m ? (m * 9) / 10 : m - 1] : 0;
    free(lat);
}

int main(int argc, char **argv)
{
    if (argc < 2 || atoi(argv[1]) < 1) {
        fprintf(stderr, "usage: %s RANKS [ROUNDS]\n", argv[0]);
        return 2;
    }
    g_n = atoi(argv[1]);
    g_k = argc > 2 && atoi(argv[2]) > 0 ? atoi(argv[2]) : 40;
    const char *ls = getenv("DH_AGREE_SCALE_LIMIT_S");
    int limit_s = ls && atoi(ls) > 0 ? atoi(ls) : 120;
    static const char *const launcher[] = {"RANK", "WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS",
                                           "OMPI_COMM_WORLD_LOCAL_SIZE", "DHELIX_TEST_AGREE_SILENT",
                                           "MASTER_ADDR", "MASTER_PORT"};
    for (size_t i = 0; i < sizeof launcher / sizeof launcher[0]; i++)
        unsetenv(launcher[i]);
    /* Every rank holds a few descriptors; the parent one pipe end per rank. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    size_t tbytes = (size_t)g_n * (size_t)g_k * 2 * sizeof(double);
    g_t = mmap(NULL, tbytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    g_cpu = mmap(NULL, (size_t)g_n * sizeof *g_cpu, PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    pid_t *pid = calloc((size_t)g_n, sizeof *pid);
    int done[2], release[2];
    if (g_t == MAP_FAILED || g_cpu == MAP_FAILED || !pid || pipe(done) != 0 || pipe(release) != 0) {
        perror("setup");
        return 1;
    }
    int port = 20000 + (int)(getpid() % 12000);
    char v[64];
    snprintf(v, sizeof v, "%d", g_n);
    setenv("OMPI_COMM_WORLD_SIZE", v, 1);
    snprintf(v, sizeof v, "127.0.0.1:%d", port);
    setenv("DHELIX_AGREE_ADDR", v, 1);
    /* Long enough for a thousand processes on two cores to connect; no round waits on it
     * unless one breaks. */
    if (!getenv("DHELIX_AGREE_TIMEOUT_MS"))
        setenv("DHELIX_AGREE_TIMEOUT_MS", "30000", 1);
    if (!getenv("DHELIX_LOG"))
        setenv("DHELIX_LOG", "error", 1);
    double t0 = now_ms();
    int forked = 0;
    fflush(stdout);
    for (int r = 0; r < g_n; r++, forked++) {
        if ((pid[r] = fork()) == 0) {
            close(done[0]);
            close(release[1]);
            snprintf(v, sizeof v, "%d", r);
            setenv("OMPI_COMM_WORLD_RANK", v, 1);
            g_rank = r;
            alarm((unsigned)limit_s);
            rank_main();
            char c = 1, x;
            if (write(done[1], &c, 1) != 1 || read(release[0], &x, 1) != 0)
                g_bad = 1;
            dh_agree_close();
            _exit(g_bad);
        }
        if (pid[r] < 0) {
            perror("fork");
            break;
        }
    }
    close(done[1]);
    close(release[0]);
    /* No rank exits before every rank is done (a rank that went away would break the
     * channel for the others). */
    for (int r = 0; r < forked; r++) {
        char c;
        if (read(done[0], &c, 1) != 1)
            break;
    }
    double wall = now_ms() - t0;
    close(release[1]);
    close(done[0]);
    int bad = forked < g_n;
    double cpu_max = 0, cpu_sum = 0;
    for (int r = 0; r < forked; r++) {
        int st = 0;
        waitpid(pid[r], &st, 0);
        double cpu = g_cpu[r];
        cpu_sum += cpu;
        cpu_max = cpu > cpu_max ? cpu : cpu_max;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM)
                fprintf(stderr, "rank %d: not done within %d s\n", r, limit_s);
            else
                fprintf(stderr, "rank %d failed (status 0x%x)\n", r, st);
            bad = 1;
        }
    }
    double med = 0, p90 = 0;
    if (!bad)
        latency(&med, &p90);
    double period = 0;
    if (!bad) {
        double first = 1e300, last = 0;
        for (int r = 0; r < g_n; r++) {
            const double *t = g_t + (size_t)r * (size_t)g_k * 2;
            first = t[0] < first ? t[0] : first;
            last = t[(g_k - 1) * 2 + 1] > last ? t[(g_k - 1) * 2 + 1] : last;
        }
        period = (last - first) / g_k;
    }
    printf("agree_scale: %d ranks, %d rounds: %s; round latency median %.3f ms, p90 %.3f ms; "
           "period %.3f ms; CPU per round: busiest process %.3f ms, all %.3f ms; wall %.1f s\n",
           g_n, g_k, bad ? "FAILED" : "ok", med, p90, period, cpu_max / g_k, cpu_sum / g_k,
           wall * 1e-3);
    if (getenv("DH_AGREE_SCALE_JSON"))
        printf("{\"ranks\": %d, \"rounds\": %d, \"ok\": %s, \"latency_ms\": %.3f, "
               "\"latency_p90_ms\": %.3f, \"period_ms\": %.3f, \"cpu_busiest_ms\": %.3f, "
               "\"cpu_all_ms\": %.3f}\n",
               g_n, g_k, bad ? "false" : "true", med, p90, period, cpu_max / g_k, cpu_sum / g_k);
    free(pid);
    munmap(g_t, tbytes);
    munmap(g_cpu, (size_t)g_n * sizeof *g_cpu);
    return bad;
}
