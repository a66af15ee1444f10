/*
 * nccl_fault.c: fault injection, so that tests can show what an application sees when NCCL
 * fails (VGPU_NCCL_FAIL, docs/vgpu.md "Configuration").
 *
 *     VGPU_NCCL_FAIL=<call>:<n>[:<how>][@<rank>]
 *
 * The n-th call (from 1, counted per process) of <call> (allreduce, allgather,
 * reducescatter, broadcast (ncclBcast too), reduce, alltoall, gather, scatter, send, recv,
 * or any; an "nccl" prefix and case are ignored) fails, on global rank <rank> only or on
 * every rank. <how>:
 *   system, internal, invalid, usage, remote  the call returns that ncclResult_t
 *            (ncclSystemError, ...) and enqueues nothing; the error becomes the
 *            communicator's asynchronous error, so every later call on it returns it
 *            (default: system);
 *   async    the call returns ncclSuccess but the operation fails when it would run: it
 *            enqueues nothing, the communicator's asynchronous error becomes ncclRemoteError
 *            (as when a peer's process fails), its outputs are not written;
 *   exit     the process exits at once with status 3 (a rank that dies mid-job).
 * A failing call consumes no sequence number: ranks that fail the same call stay in step;
 * a rank whose peers do not fail leaves them waiting until VGPU_COMM_TIMEOUT. A value that
 * does not parse is reported once and ignored.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "nccl_int.h"

typedef enum { FAULT_RESULT, FAULT_ASYNC, FAULT_EXIT } fault_how_t;

static struct {
    int on;
    int kind;            /* vgn_kind_t, or -1 for any */
    unsigned long n;
    fault_how_t how;
    ncclResult_t result;
    int rank;            /* -1: every rank */
} g_fault;
static unsigned long g_calls[VGN_NKINDS + 1]; /* atomic; [VGN_NKINDS]: any */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static int parse_how(const char *s, size_t len)
{
    static const struct {
        const char *name;
        fault_how_t how;
        ncclResult_t r;
    } hows[] = {{"system", FAULT_RESULT, ncclSystemError},
                {"internal", FAULT_RESULT, ncclInternalError},
                {"invalid", FAULT_RESULT, ncclInvalidArgument},
                {"usage", FAULT_RESULT, ncclInvalidUsage},
                {"remote", FAULT_RESULT, ncclRemoteError},
                {"async", FAULT_ASYNC, ncclRemoteError},
                {"exit", FAULT_EXIT, ncclSuccess}};
    for (size_t i = 0; i < sizeof hows / sizeof hows[0]; i++)
        if (len == strlen(hows[i].name) && strncasecmp(s, hows[i].name, len) == 0) {
            g_fault.how = hows[i].how;
            g_fault.result = hows[i].r;
            return 0;
        }
    return -1;
}

static int parse(const char *v)
{
    char call[32];
    const char *colon = strchr(v, ':');
    if (!colon || (size_t)(colon - v) >= sizeof call)
        return -1;
    memcpy(call, v, (size_t)(colon - v));
    call[colon - v] = 0;
    const char *name = strncasecmp(call, "nccl", 4) == 0 ? call + 4 : call;
    g_fault.kind = -2;
    if (strcasecmp(name, "any") == 0)
        g_fault.kind = -1;
    else if (strcasecmp(name, "bcast") == 0)
        g_fault.kind = VGN_BROADCAST;
    for (int k = 0; k < VGN_NKINDS; k++)
        if (strcasecmp(name, vgn_kind_name((vgn_kind_t)k)) == 0)
            g_fault.kind = k;
    char *end;
    g_fault.n = strtoul(colon + 1, &end, 10);
    if (g_fault.kind == -2 || end == colon + 1 || g_fault.n == 0)
        return -1;
    g_fault.how = FAULT_RESULT;
    g_fault.result = ncclSystemError;
    g_fault.rank = -1;
    if (*end == ':') {
        const char *h = end + 1;
        size_t len = strcspn(h, "@");
        if (parse_how(h, len))
            return -1;
        end = (char *)h + len;
    }
    if (*end == '@') {
        char *e2;
        long r = strtol(end + 1, &e2, 10);
        if (e2 == end + 1 || *e2 || r < 0)
            return -1;
        g_fault.rank = (int)r;
        end = e2;
    }
    return *end ? -1 : 0;
}

static void load(void)
{
    const char *v = getenv("VGPU_NCCL_FAIL");
    if (!v || !*v)
        return;
    if (parse(v) != 0) {
        vg_msg("VGPU_NCCL_FAIL=%s: expected <call>:<n>[:system|internal|invalid|usage|remote|"
               "async|exit][@<rank>]; ignored", v);
        return;
    }
    g_fault.on = g_fault.rank < 0 || g_fault.rank == vg_global_rank();
}

ncclResult_t vgn_fault(vgn_kind_t kind, ncclComm_t c, int *skip)
{
    *skip = 0;
    pthread_once(&g_once, load);
    if (!g_fault.on || (g_fault.kind >= 0 && g_fault.kind != (int)kind))
        return ncclSuccess;
    int slot = g_fault.kind < 0 ? VGN_NKINDS : (int)kind;
    if (__atomic_add_fetch(&g_calls[slot], 1, __ATOMIC_RELAXED) != g_fault.n)
        return ncclSuccess;
    switch (g_fault.how) {
    case FAULT_EXIT:
        vg_msg("VGPU_NCCL_FAIL: %s call %lu on communicator %s: this process exits now",
               vgn_kind_name(kind), g_fault.n, c->name);
        _exit(3);
    case FAULT_ASYNC:
        vgn_error("nccl: VGPU_NCCL_FAIL: %s call %lu on communicator %s fails while it runs",
                  vgn_kind_name(kind), g_fault.n, c->name);
        vgn_set_async(c, g_fault.result);
        *skip = 1;
        return ncclSuccess;
    case FAULT_RESULT:
        break;
    }
    vgn_error("nccl: VGPU_NCCL_FAIL: %s call %lu on communicator %s returns %d",
              vgn_kind_name(kind), g_fault.n, c->name, (int)g_fault.result);
    vgn_set_async(c, g_fault.result);
    return g_fault.result;
}
