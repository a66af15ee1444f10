/*
 * inject.c: divergence injection (see inject.h).
 *
 * The scratch op is a memset because it is the smallest device op every API layer the
 * shim sees treats as ordinary queued work, it has a size (so a "changed shape" is a real
 * change of a data-dependent parameter, not of the op's kind) and it needs no kernel.
 * The buffers are made with cudaMalloc at start-up, not stream-ordered, so that the
 * injection changes nothing but the ops; one pair per point, so that scratch ops of two
 * points (the forward's and the backward's, which Strand Interleaving may run side by
 * side) never touch the same bytes.
 */
#include "inject.h"

#include <string.h>

#include "wl.h"

enum { INJ_OFF, INJ_NONE, INJ_EXTRA, INJ_MISSING, INJ_SHAPE, INJ_SYNC, INJ_QUERY };

#define SCRATCH_BYTES 4096
#define MAX_SPECS 16

static const char *const point_names[WL_INJ_NPOINTS] = {"first", "start", "fwd0", "fwd", "bwd",
                                                        "end"};

static struct {
    int kind;       /* INJ_OFF, or INJ_NONE once WL_INJECT is set */
    int n;          /* divergences: */
    struct { int kind, iter, rank, point; } at[MAX_SPECS]; /* rank -1: every rank */
    int rank;       /* this process's global rank */
    int iter;       /* the iteration begun last (wl_inject_begin) */
    int fired[WL_INJ_NPOINTS]; /* reached in that iteration */
    void *scratch[WL_INJ_NPOINTS]; /* each point's every-iteration op's target */
    void *extra[WL_INJ_NPOINTS];   /* ... and its extra op's */
} inj = {.kind = INJ_OFF};

/* The point named s (len bytes), or -1. */
static int point_of(const char *s, size_t len)
{
    for (int p = 0; p < WL_INJ_NPOINTS; p++)
        if (strlen(point_names[p]) == len && strncmp(s, point_names[p], len) == 0) return p;
    return -1;
}

/* One KIND@ITER[:RANK][/POINT]; 0, or -1 when malformed. */
static int parse_one(const char *v, size_t len)
{
    static const struct { const char *name; int kind; } kinds[] = {
        {"extra", INJ_EXTRA}, {"missing", INJ_MISSING}, {"shape", INJ_SHAPE},
        {"sync", INJ_SYNC}, {"query", INJ_QUERY}};
    char buf[64];
    if (len == 0 || len >= sizeof buf || inj.n == MAX_SPECS) return -1;
    memcpy(buf, v, len);
    buf[len] = '\0';
    int point = WL_INJ_FWD;
    char *slash = strchr(buf, '/');
    if (slash) {
        *slash = '\0';
        if ((point = point_of(slash + 1, strlen(slash + 1))) < 0) return -1;
    }
    char *at = strchr(buf, '@');
    if (!at || !at[1]) return -1;
    *at = '\0';
    char *end = NULL;
    long it = strtol(at + 1, &end, 10), rank = -1;
    if (end == at + 1 || it < 0 || it > 1000000) return -1;
    if (*end == ':') {
        char *e2 = NULL;
        rank = strtol(end + 1, &e2, 10);
        if (e2 == end + 1 || *e2 || rank < 0) return -1;
    } else if (*end) {
        return -1;
    }
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        if (strcmp(buf, kinds[i].name)) continue;
        if (point == WL_INJ_FIRST && kinds[i].kind == INJ_MISSING) return -1;
        inj.at[inj.n].kind = kinds[i].kind;
        inj.at[inj.n].iter = (int)it;
        inj.at[inj.n].rank = (int)rank;
        inj.at[inj.n].point = point;
        inj.n++;
        return 0;
    }
    return -1;
}

static int parse(const char *v)
{
    if (strcmp(v, "none") == 0) return 0;
    while (*v) {
        const char *comma = strchr(v, ',');
        size_t len = comma ? (size_t)(comma - v) : strlen(v);
        if (parse_one(v, len) < 0) return -1;
        v += len + (comma ? 1 : 0);
    }
    return inj.n > 0 ? 0 : -1;
}

void wl_inject_init(int rank)
{
    const char *v = getenv("WL_INJECT");
    if (!v || !*v) return;
    if (parse(v) < 0)
        wl_fatal("WL_INJECT=%s: expected none or KIND@ITER[:RANK][/POINT][,...] (KIND extra|"
                 "missing|shape|sync|query, ITER 0-based, RANK global, POINT first|start|fwd0|"
                 "fwd|bwd|end, missing not at first; at most %d)", v, MAX_SPECS);
    inj.kind = INJ_NONE;
    inj.rank = rank;
    inj.iter = -1;
    for (int p = 0; p < WL_INJ_NPOINTS; p++) {
        WL_CK(cudaMalloc(&inj.scratch[p], SCRATCH_BYTES));
        WL_CK(cudaMalloc(&inj.extra[p], SCRATCH_BYTES));
    }
}

void wl_inject_begin(int iter)
{
    if (inj.kind == INJ_OFF) return;
    inj.iter = iter;
    memset(inj.fired, 0, sizeof inj.fired);
    wl_inject_point(WL_INJ_FIRST, 0, 1);
}

void wl_inject_point(int point, int mb, int M)
{
    if (inj.kind == INJ_OFF || inj.fired[point]) return;
    int want = point == WL_INJ_FWD ? (M > 1 ? 1 : 0) : 0; /* the point's micro-batch */
    if (mb != want) return;
    inj.fired[point] = 1;
    int kind = INJ_NONE;
    for (int i = 0; i < inj.n; i++)
        if (inj.at[i].iter == inj.iter && inj.at[i].point == point &&
            (inj.at[i].rank < 0 || inj.at[i].rank == inj.rank))
            kind = inj.at[i].kind;
    cudaStream_t s = wl_cur_stream();
    if (kind == INJ_MISSING || (point == WL_INJ_FIRST && kind == INJ_NONE)) return;
    size_t bytes = kind == INJ_SHAPE ? SCRATCH_BYTES / 2 : SCRATCH_BYTES;
    /* At first there is no scratch op: the divergence is the extra op alone. */
    if (point != WL_INJ_FIRST) WL_CK(cudaMemsetAsync(inj.scratch[point], 0, bytes, s));
    if (kind == INJ_EXTRA || kind == INJ_QUERY || (point == WL_INJ_FIRST && kind != INJ_NONE))
        WL_CK(cudaMemsetAsync(inj.extra[point], 0, point == WL_INJ_FIRST ? bytes : SCRATCH_BYTES, s));
    if (kind == INJ_QUERY) {
        cudaError_t q = cudaStreamQuery(s);
        if (q != cudaSuccess && q != cudaErrorNotReady) WL_CK(q);
    }
    if (kind == INJ_SYNC) WL_CK(cudaStreamSynchronize(s));
}

void wl_inject_fini(void)
{
    if (inj.kind == INJ_OFF) return;
    for (int p = 0; p < WL_INJ_NPOINTS; p++) {
        WL_CK(cudaFree(inj.scratch[p]));
        WL_CK(cudaFree(inj.extra[p]));
        inj.scratch[p] = inj.extra[p] = NULL;
    }
    inj.kind = INJ_OFF;
}
