/*
 * inject.c: divergence injection (see inject.h).
 *
 * The scratch op is a memset because it is the smallest device op every API layer the
 * shim sees treats as ordinary queued work, it has a size (so a "changed shape" is a real
 * change of a data-dependent parameter, not of the op's kind) and it needs no kernel.
 * Both buffers are made with cudaMalloc at start-up, not stream-ordered, so that the
 * injection changes nothing but the one op.
 */
#include "inject.h"

#include <string.h>

#include "wl.h"

enum { INJ_OFF, INJ_NONE, INJ_EXTRA, INJ_MISSING, INJ_SHAPE, INJ_SYNC, INJ_QUERY };

#define SCRATCH_BYTES 4096
#define MAX_SPECS 8

static struct {
    int kind;       /* INJ_OFF, or INJ_NONE once WL_INJECT is set */
    int n;          /* divergences: */
    struct { int kind, iter, rank; } at[MAX_SPECS]; /* rank -1: every rank */
    int rank;       /* this process's global rank */
    void *scratch;  /* the every-iteration op's target */
    void *extra;    /* the extra op's target */
} inj = {INJ_OFF, 0, {{0, 0, 0}}, 0, NULL, NULL};

/* One KIND@ITER[:RANK]; 0, or -1 when malformed. */
static int parse_one(const char *v, size_t len)
{
    static const struct { const char *name; int kind; } kinds[] = {
        {"extra", INJ_EXTRA}, {"missing", INJ_MISSING}, {"shape", INJ_SHAPE},
        {"sync", INJ_SYNC}, {"query", INJ_QUERY}};
    char buf[64];
    if (len == 0 || len >= sizeof buf || inj.n == MAX_SPECS) return -1;
    memcpy(buf, v, len);
    buf[len] = '\0';
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
        inj.at[inj.n].kind = kinds[i].kind;
        inj.at[inj.n].iter = (int)it;
        inj.at[inj.n].rank = (int)rank;
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
        wl_fatal("WL_INJECT=%s: expected none or KIND@ITER[:RANK][,...] (KIND extra|missing|"
                 "shape|sync|query, ITER 0-based, RANK global; at most %d)", v, MAX_SPECS);
    inj.kind = INJ_NONE;
    inj.rank = rank;
    WL_CK(cudaMalloc(&inj.scratch, SCRATCH_BYTES));
    WL_CK(cudaMalloc(&inj.extra, SCRATCH_BYTES));
}

void wl_inject_point(int iter, int mb, int M)
{
    if (inj.kind == INJ_OFF || mb != (M > 1 ? 1 : 0)) return;
    int kind = INJ_NONE;
    for (int i = 0; i < inj.n; i++)
        if (inj.at[i].iter == iter && (inj.at[i].rank < 0 || inj.at[i].rank == inj.rank))
            kind = inj.at[i].kind;
    cudaStream_t s = wl_cur_stream();
    if (kind == INJ_MISSING) return;
    size_t bytes = kind == INJ_SHAPE ? SCRATCH_BYTES / 2 : SCRATCH_BYTES;
    WL_CK(cudaMemsetAsync(inj.scratch, 0, bytes, s));
    if (kind == INJ_EXTRA || kind == INJ_QUERY) WL_CK(cudaMemsetAsync(inj.extra, 0, SCRATCH_BYTES, s));
    if (kind == INJ_QUERY) {
        cudaError_t q = cudaStreamQuery(s);
        if (q != cudaSuccess && q != cudaErrorNotReady) WL_CK(q);
    }
    if (kind == INJ_SYNC) WL_CK(cudaStreamSynchronize(s));
}

void wl_inject_fini(void)
{
    if (inj.kind == INJ_OFF) return;
    WL_CK(cudaFree(inj.scratch));
    WL_CK(cudaFree(inj.extra));
    inj.scratch = inj.extra = NULL;
    inj.kind = INJ_OFF;
}
