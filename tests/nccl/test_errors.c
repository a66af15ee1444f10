/*
 * nccl.errors: the error contract (docs/shim.md, "NCCL"), shown with the vgpu's
 * fault injection (VGPU_NCCL_FAIL, tests/vgpu/src/nccl/nccl_fault.c) on 2 ranks.
 *
 * nccl_prog errors calls: three all-reduces of which the third fails, a stream
 * synchronisation, ncclCommGetAsyncError, one more all-reduce. Without the shim and in
 * passthrough the program sees exactly the same results. When the shim defers the call, it
 * returns ncclSuccess and the failure is reported the way NCCL reports asynchronous ones:
 * after the synchronisation ncclCommGetAsyncError gives the library's error and the next
 * call on the communicator returns it, both as without the shim; the stream itself is not
 * in error. A failure injected as asynchronous (the call succeeds, the operation fails)
 * looks the same in every mode.
 *
 * nccl_prog errors abort: rank 0 aborts a communicator while an all-reduce whose peer never
 * comes is in flight (without the shim, passthrough) or still queued (stress, two strands):
 * ncclCommAbort returns ncclSuccess within the stated bound, 1 s (the shim only issues what
 * is queued before it, and the aborted communicator's queued work is cancelled), far below
 * the 20 s after which the vgpu would give up on the missing peer.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "drive.h"

#define NP 2
#define ABORT_BOUND_MS 1000.0

typedef struct seen {
    int calls[3], sync, async, next;
} seen_t;

static void run_calls(const char *fail, int shim, const char *mode, seen_t out[NP])
{
    char dir[512], fail_env[128], mode_env[64], what[160];
    dh_tmpdir_make(dir, sizeof dir);
    snprintf(fail_env, sizeof fail_env, "VGPU_NCCL_FAIL=%s", fail);
    snprintf(mode_env, sizeof mode_env, "DHELIX_MODE=%s", mode);
    snprintf(what, sizeof what, "VGPU_NCCL_FAIL=%s, %s", fail, shim ? mode : "without the shim");
    const char *env[] = {fail_env, mode_env, "VGPU_HAZARD=abort", NULL};
    static const char *const args[] = {"errors", "calls", NULL};
    dh_run_t r;
    nd_run(&r, dir, NP, shim, args, env);
    nd_expect_clean(&r, what);
    for (int k = 0; k < NP; k++) {
        const char *l = nd_line(r.out, "errors ", k);
        seen_t *s = &out[k];
        if (l == NULL || sscanf(l, "errors rank=%*d calls=%d,%d,%d sync=%d async=%d next=%d",
                                &s->calls[0], &s->calls[1], &s->calls[2], &s->sync, &s->async,
                                &s->next) != 6)
            fail_msg("%s: no result line from rank %d:\n%s\n%s", what, k, r.out, r.err);
    }
    dh_run_free(&r);
    dh_tmpdir_remove(dir);
}

static void expect_same(const seen_t *a, const seen_t *b, int deferred, const char *what)
{
    for (int k = 0; k < NP; k++) {
        int ok = a[k].calls[0] == b[k].calls[0] && a[k].calls[1] == b[k].calls[1] &&
                 a[k].async == b[k].async && a[k].next == b[k].next &&
                 (deferred ? (b[k].calls[2] == a[k].calls[2] || b[k].calls[2] == 0) &&
                                 b[k].sync == 0
                           : b[k].calls[2] == a[k].calls[2] && b[k].sync == a[k].sync);
        if (!ok)
            fail_msg("%s, rank %d: calls %d,%d,%d sync %d async %d next %d; without the shim: "
                     "calls %d,%d,%d sync %d async %d next %d", what, k, b[k].calls[0],
                     b[k].calls[1], b[k].calls[2], b[k].sync, b[k].async, b[k].next,
                     a[k].calls[0], a[k].calls[1], a[k].calls[2], a[k].sync, a[k].async,
                     a[k].next);
    }
}

static void contract(const char *fail, int want_call, int want_async)
{
    seen_t base[NP], got[NP];
    run_calls(fail, 0, "passthrough", base);
    for (int k = 0; k < NP; k++)
        if (base[k].calls[2] != want_call || base[k].async != want_async ||
            base[k].next != want_async)
            fail_msg("VGPU_NCCL_FAIL=%s without the shim, rank %d: call 3 gave %d, async %d, "
                     "next %d; expected %d, %d, %d (is fault injection working?)", fail, k,
                     base[k].calls[2], base[k].async, base[k].next, want_call, want_async,
                     want_async);
    static const char *const modes[] = {"passthrough", "stress", "strands"};
    for (int m = 0; m < 3; m++) {
        char what[128];
        snprintf(what, sizeof what, "VGPU_NCCL_FAIL=%s, DHELIX_MODE=%s", fail, modes[m]);
        run_calls(fail, 1, modes[m], got);
        expect_same(base, got, m > 0, what);
    }
}

/* The third call fails with ncclSystemError (and the communicator with it). */
static void test_failing_call(void **state)
{
    (void)state;
    contract("allreduce:3:system", 2 /* ncclSystemError */, 2);
}

/* The third call succeeds but its operation fails: ncclRemoteError, asynchronously. */
static void test_failing_operation(void **state)
{
    (void)state;
    contract("allreduce:3:async", 0, 6 /* ncclRemoteError */);
}

static void test_abort_with_queued_work(void **state)
{
    (void)state;
    static const struct {
        int shim;
        const char *mode;
    } runs[] = {{0, "passthrough"}, {1, "passthrough"}, {1, "stress"}, {1, "strands"}};
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        char dir[512], mode_env[64], what[96];
        dh_tmpdir_make(dir, sizeof dir);
        snprintf(mode_env, sizeof mode_env, "DHELIX_MODE=%s", runs[i].mode);
        snprintf(what, sizeof what, "abort, %s", runs[i].shim ? runs[i].mode : "without the shim");
        const char *env[] = {mode_env, NULL};
        static const char *const args[] = {"errors", "abort", NULL};
        dh_run_t r;
        nd_run(&r, dir, NP, runs[i].shim, args, env);
        nd_expect_clean(&r, what);
        const char *l = nd_line(r.out, "abort ", 0);
        double ms = -1;
        int rc = -1;
        if (l == NULL || sscanf(l, "abort rank=0 ms=%lf rc=%d", &ms, &rc) != 2)
            fail_msg("%s: no result line:\n%s\n%s", what, r.out, r.err);
        if (rc != 0 || ms < 0 || ms > ABORT_BOUND_MS)
            fail_msg("%s: ncclCommAbort returned %d after %.1f ms; expected 0 within %.0f ms",
                     what, rc, ms, ABORT_BOUND_MS);
        printf("%-28s ncclCommAbort took %.1f ms\n", what, ms);
        dh_run_free(&r);
        dh_tmpdir_remove(dir);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_failing_call),
        cmocka_unit_test(test_failing_operation),
        cmocka_unit_test(test_abort_with_queued_work),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
