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

enum { INJ_OFF, INJ_NONE, INJ_EXTRA, INJ_MISSING, INJ_SHAPE };

#define SCRATCH_BYTES 4096

static struct {
    int kind;       /* INJ_* */
    int iter;       /* the iteration that diverges; -1: none */
    void *scratch;  /* the every-iteration op's target */
    void *extra;    /* the extra op's target */
} inj = {INJ_OFF, -1, NULL, NULL};

static int parse(const char *v, int *iter)
{
    static const struct { const char *name; int kind; } kinds[] = {
        {"none", INJ_NONE}, {"extra", INJ_EXTRA}, {"missing", INJ_MISSING}, {"shape", INJ_SHAPE}};
    const char *at = strchr(v, '@');
    size_t len = at ? (size_t)(at - v) : strlen(v);
    *iter = -1;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        if (strlen(kinds[i].name) != len || strncmp(v, kinds[i].name, len)) continue;
        if (kinds[i].kind == INJ_NONE) return at ? -1 : INJ_NONE;
        if (!at || !at[1]) return -1;
        char *end = NULL;
        long it = strtol(at + 1, &end, 10);
        if (*end || it < 0 || it > 1000000) return -1;
        *iter = (int)it;
        return kinds[i].kind;
    }
    return -1;
}

void wl_inject_init(void)
{
    const char *v = getenv("WL_INJECT");
    if (!v || !*v) return;
    int kind = parse(v, &inj.iter);
    if (kind < 0) wl_fatal("WL_INJECT=%s: expected none or extra|missing|shape@ITER (0-based iteration)", v);
    inj.kind = kind;
    WL_CK(cudaMalloc(&inj.scratch, SCRATCH_BYTES));
    WL_CK(cudaMalloc(&inj.extra, SCRATCH_BYTES));
}

void wl_inject_point(int iter, int mb, int M)
{
    if (inj.kind == INJ_OFF || mb != (M > 1 ? 1 : 0)) return;
    cudaStream_t s = wl_cur_stream();
    int here = iter == inj.iter;
    if (here && inj.kind == INJ_MISSING) return;
    size_t bytes = here && inj.kind == INJ_SHAPE ? SCRATCH_BYTES / 2 : SCRATCH_BYTES;
    WL_CK(cudaMemsetAsync(inj.scratch, 0, bytes, s));
    if (here && inj.kind == INJ_EXTRA) WL_CK(cudaMemsetAsync(inj.extra, 0, SCRATCH_BYTES, s));
}

void wl_inject_fini(void)
{
    if (inj.kind == INJ_OFF) return;
    WL_CK(cudaFree(inj.scratch));
    WL_CK(cudaFree(inj.extra));
    inj.scratch = inj.extra = NULL;
    inj.kind = INJ_OFF;
}
