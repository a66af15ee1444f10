/*
 * shim.agree: auto mode's rounds on the ranks' agreement channel (scheduler/modes/agree.h), with
 * the ranks as processes of this test on the loopback (no launcher, no device):
 *
 *   never   a rank that will hold no plan votes "never" (2) while the others are ready:
 *           every rank's round answers -1, and a later ready vote answers -1 at once (a
 *           rank waiting for the votes of a rank that stopped voting would hang until the
 *           timeout and break the channel);
 *   never_unready  the same while nobody is ready: the others' later "not ready" votes
 *           answer -1 (a rank still waiting for its plan gives up too);
 *   back    the switch-back rounds are their own: every rank was ready in the switch
 *           rounds, yet rank 0's no decides the switch-back round no for all; all yes: yes;
 *   late    a rank that never comes to the switch-back round: the others answer no within
 *           about DHELIX_AGREE_TIMEOUT_MS, and the channel is broken after (-1);
 *   alone   one rank: ready 1 switches, never answers -1, a switch back is its own yes.
 * never, back and late run again with 20 ranks, whose channel has relays (agree_tree.c).
 *
 * Each rank checks what it got and exits 1 on a mismatch (both values printed).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agree.h"

static int g_rank, g_bad, g_timeout_ms;

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static void expect(const char *what, long got, long want)
{
    if (got != want) {
        fprintf(stderr, "rank %d: %s: got %ld, want %ld\n", g_rank, what, got, want);
        g_bad = 1;
    }
}

static void expect_ms(const char *what, double ms, double lo, double hi)
{
    if (ms < lo || ms > hi) {
        fprintf(stderr, "rank %d: %s took %.0f ms, want %.0f..%.0f ms\n", g_rank, what, ms, lo,
                hi);
        g_bad = 1;
    }
}

static void scenario_never(void)
{
    /* No round 0 where nobody is ready: a rank slower to get there than rank 2 to vote
     * never may already be told never there (-1), which is right but not what to check. */
    double t0 = now_ms();
    expect("switch round 1, rank 2 votes never", dh_agree_switch(1, g_rank == 2 ? 2 : 1), -1);
    expect_ms("switch round 1", now_ms() - t0, 0, 2500); /* the channel opens here */
    if (g_rank < 2) {
        t0 = now_ms();
        expect("switch round 2 after a never", dh_agree_switch(2, 1), -1);
        expect_ms("switch round 2 after a never", now_ms() - t0, 0, 500);
    }
}

/* Nobody is ready when rank 2 votes never: the others learn it at a later vote all the
 * same (their own plans may never come: they must not wait for them to give up). */
static void scenario_never_unready(void)
{
    if (g_rank == 2) {
        expect("switch round 0, rank 2 votes never", dh_agree_switch(0, 2), -1);
        return;
    }
    int got = 0;
    double t0 = now_ms();
    for (uint64_t k = 0; got == 0 && now_ms() - t0 < 2000; k++) {
        got = dh_agree_switch(k, 0);
        usleep(20 * 1000);
    }
    expect("a not-ready rank's vote after rank 2's never", got, -1);
}

static void scenario_back(void)
{
    expect("switch round 0", dh_agree_switch(0, 0), 0);
    expect("switch round 1, all ready", dh_agree_switch(1, 1), 1);
    expect("switch-back round 4, rank 0 says no", dh_agree_switch_back(4, g_rank != 0), 0);
    expect("switch-back round 5, all yes", dh_agree_switch_back(5, 1), 1);
}

static void scenario_late(void)
{
    expect("switch round 0, all ready", dh_agree_switch(0, 1), 1);
    if (g_rank == 0)
        return; /* never comes to round 3 (and keeps the hub up until the others are done) */
    double t0 = now_ms();
    expect("switch-back round 3 without rank 0", dh_agree_switch_back(3, 1), 0);
    /* about the timeout: not sooner, and later only by a loaded host's scheduling */
    expect_ms("switch-back round 3 without rank 0", now_ms() - t0, 0.8 * g_timeout_ms,
              4.0 * g_timeout_ms + 800);
    expect("a switch round after the timeout", dh_agree_switch(4, 1), -1);
}

static void scenario_alone(void)
{
    expect("one rank, not ready", dh_agree_switch(0, 0), 0);
    expect("one rank, ready", dh_agree_switch(1, 1), 1);
    expect("one rank, never", dh_agree_switch(2, 2), -1);
    expect("one rank, switch back yes", dh_agree_switch_back(3, 1), 1);
    expect("one rank, switch back no", dh_agree_switch_back(4, 0), 0);
}

/* Runs fn on n ranks (processes) of one job; 0 when every rank was content. No rank exits
 * before every rank is done: a job's ranks live until its end, and a rank that went away
 * would break the channel for the others (the hub is rank 0's). */
static int job(const char *name, int n, int timeout_ms, void (*fn)(void))
{
    static int port_step;
    int port = 20000 + (int)(getpid() % 20000) + 2 * port_step++;
    pid_t pid[32];
    int done[2], release[2];
    if (pipe(done) != 0 || pipe(release) != 0)
        return 1;
    fflush(stdout); /* or every rank prints what the parent printed so far again */
    for (int r = 0; r < n; r++) {
        if ((pid[r] = fork()) == 0) {
            close(done[0]);
            close(release[1]);
            char v[64];
            snprintf(v, sizeof v, "%d", r);
            setenv("OMPI_COMM_WORLD_RANK", v, 1);
            snprintf(v, sizeof v, "%d", n);
            setenv("OMPI_COMM_WORLD_SIZE", v, 1);
            snprintf(v, sizeof v, "127.0.0.1:%d", port);
            setenv("DHELIX_AGREE_ADDR", v, 1);
            snprintf(v, sizeof v, "%d", timeout_ms);
            setenv("DHELIX_AGREE_TIMEOUT_MS", v, 1);
            setenv("DHELIX_LOG", getenv("DH_TEST_AGREE_LOG") ? getenv("DH_TEST_AGREE_LOG") : "error", 1);
            g_rank = r;
            g_timeout_ms = timeout_ms;
            fn();
            char c = 1, x;
            if (write(done[1], &c, 1) != 1 || read(release[0], &x, 1) != 0)
                g_bad = 1;
            dh_agree_close();
            _exit(g_bad);
        }
    }
    close(done[1]);
    close(release[0]);
    for (int r = 0; r < n; r++) {
        char c;
        if (read(done[0], &c, 1) != 1)
            break; /* a rank died: the others are released all the same */
    }
    close(release[1]);
    close(done[0]);
    int bad = 0;
    for (int r = 0; r < n; r++) {
        int st = 0;
        waitpid(pid[r], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "%s: rank %d failed (status 0x%x)\n", name, r, st);
            bad = 1;
        }
    }
    printf("%s: %s\n", name, bad ? "FAILED" : "ok");
    return bad;
}

int main(void)
{
    static const char *const launcher[] = {"RANK", "WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS",
                                           "OMPI_COMM_WORLD_LOCAL_SIZE", "DHELIX_TEST_AGREE_SILENT"};
    for (size_t i = 0; i < sizeof launcher / sizeof launcher[0]; i++)
        unsetenv(launcher[i]);
    int bad = job("never", 3, 3000, scenario_never);
    bad |= job("never_unready", 3, 3000, scenario_never_unready);
    bad |= job("back", 3, 3000, scenario_back);
    bad |= job("late", 2, 300, scenario_late);
    bad |= job("alone", 1, 3000, scenario_alone);
    /* 20 ranks: rank 0 decides, ranks 1 and 2 relay for ranks 9..19 (agree_tree.c), so
     * that the rules hold across relays: a never from a relay, a switch back decided at the
     * root for leaves two levels down, a timeout that breaks the tree for everyone. */
    bad |= job("never_tree", 20, 3000, scenario_never);
    bad |= job("never_unready_tree", 20, 3000, scenario_never_unready);
    bad |= job("back_tree", 20, 3000, scenario_back);
    /* Every round has the timeout, the first (the tree's 20 connections) too: 300 ms was
     * too short for it on a 2-core host at a load average of 50 under ThreadSanitizer. */
    bad |= job("late_tree", 20, 2000, scenario_late);
    return bad;
}
