/*
 * fuzz_profile.c: the fuzz target of dh_profile_parse.
 *
 * The same contract checks as fuzz_plan.c: the input is a heap buffer of exactly its size
 * with no terminator; a failure leaves one terminated line naming the input (a prefix of
 * it in a short buffer) and repeats with the same status; a success holds the invariants
 * the planner indexes by and survives save, parse, compare, save with the same bytes.
 */
#include "fuzz.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan.h"

#define NAME "fuzz-profile.json"
#define ERRLEN 512

static dh_profile_t *parse_checked(const char *buf, size_t len, const char *what)
{
    char *err = dh_fuzz_errbuf(ERRLEN);
    dh_profile_t *p = NULL;
    dh_status_t st = dh_profile_parse(buf, len, NAME, &p, err, ERRLEN);
    if (st == DH_OK) {
        if (!p)
            dh_fuzz_fail("%s: DH_OK without a profile", what);
        free(err);
        return p;
    }
    dh_fuzz_check_err(what, st, err, ERRLEN, NAME);
    if (p)
        dh_fuzz_fail("%s failed (%s: %s) but set *out", what, dh_status_name(st), err);

    size_t shortlen = 1 + len % 32;
    char *shrt = dh_fuzz_errbuf(shortlen);
    dh_profile_t *q = NULL;
    dh_status_t st2 = dh_profile_parse(buf, len, NAME, &q, shrt, shortlen);
    if (st2 != st)
        dh_fuzz_fail("%s: the same input gave %s, then %s", what, dh_status_name(st),
                     dh_status_name(st2));
    if (q)
        dh_fuzz_fail("%s failed (%s) but set *out", what, dh_status_name(st2));
    dh_fuzz_check_short_err(what, err, shrt, shortlen);
    free(shrt);
    free(err);
    return NULL;
}

static void check_str(const char *what, const char *s, size_t cap)
{
    if (!memchr(s, '\0', cap))
        dh_fuzz_fail("accepted profile: %s is not terminated within its %zu bytes", what, cap);
}

static void check_profile(const dh_profile_t *p)
{
    check_str("layout", p->layout, sizeof p->layout);
    check_str("host", p->host, sizeof p->host);
    check_str("device", p->device, sizeof p->device);
    if (p->ncomms < 0 || (p->ncomms > 0 && !p->comms) || (p->nops > 0 && !p->ops))
        dh_fuzz_fail("accepted profile: ncomms %d, comms %p, nops %zu, ops %p", p->ncomms,
                     (void *)p->comms, p->nops, (void *)p->ops);
    for (int i = 0; i < p->ncomms; i++) {
        check_str("a comm's name", p->comms[i].name, sizeof p->comms[i].name);
        check_str("a comm's role", p->comms[i].role, sizeof p->comms[i].role);
    }
    for (size_t i = 0; i < p->nops; i++) {
        const dh_prof_op_t *op = &p->ops[i];
        check_str("an op's kind", op->kind, sizeof op->kind);
        check_str("an op's name", op->name, sizeof op->name);
        if ((int)op->cls < 0 || op->cls >= DH_CLS_COUNT)
            dh_fuzz_fail("accepted profile: op %zu class %d", i, (int)op->cls);
        if (op->comm < -1 || op->comm >= p->ncomms)
            dh_fuzz_fail("accepted profile: op %zu comm %d of %d", i, op->comm, p->ncomms);
    }
}

#define SAME(field, fmt)                                                                   \
    do {                                                                                   \
        if ((a)->field != (b)->field)                                                      \
            dh_fuzz_fail("round trip changed %s: " fmt " became " fmt, #field, (a)->field,   \
                         (b)->field);                                                      \
    } while (0)
#define SAME_STR(field)                                                                    \
    do {                                                                                   \
        if (strcmp((a)->field, (b)->field) != 0)                                           \
            dh_fuzz_fail("round trip changed %s: \"%s\" became \"%s\"", #field, (a)->field,  \
                         (b)->field);                                                      \
    } while (0)

static void same_profile(const dh_profile_t *a, const dh_profile_t *b)
{
    SAME(version, "%d");
    SAME(rank, "%d");
    SAME(world, "%d");
    SAME_STR(layout);
    SAME_STR(host);
    SAME_STR(device);
    SAME(max_connections, "%d");
    SAME(sync_at_end, "%d");
    SAME(ncomms, "%d");
    SAME(nops, "%zu");
    for (int i = 0; i < a->ncomms; i++) {
        SAME_STR(comms[i].name);
        SAME_STR(comms[i].role);
        SAME(comms[i].nranks, "%d");
        SAME(comms[i].rank, "%d");
    }
    for (size_t i = 0; i < a->nops; i++) {
        SAME(ops[i].thread, "%" PRIu32);
        SAME(ops[i].stream, "%" PRIu32);
        SAME_STR(ops[i].kind);
        SAME(ops[i].cls, "%d");
        SAME(ops[i].sig, "%016" PRIx64);
        SAME(ops[i].shape, "%016" PRIx64);
        SAME_STR(ops[i].name);
        SAME(ops[i].comm, "%d");
        SAME(ops[i].bytes, "%" PRIu64);
        SAME(ops[i].flops, "%.17g");
        SAME(ops[i].us, "%.17g");
        SAME(ops[i].start_us, "%.17g");
        SAME(ops[i].mem, "%" PRId64);
        SAME(ops[i].sync_before, "%d");
    }
}

static char *save_checked(const dh_profile_t *p, size_t *len)
{
    char *err = dh_fuzz_errbuf(ERRLEN);
    dh_status_t st = dh_profile_save(p, dh_fuzz_scratch_path(), err, ERRLEN);
    if (st != DH_OK) {
        dh_fuzz_check_err("dh_profile_save", st, err, ERRLEN, "");
        dh_fuzz_fail("dh_profile_save of an accepted profile failed (%s): %s",
                     dh_status_name(st), err);
    }
    free(err);
    return dh_fuzz_scratch_read(len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* Both drivers pass a heap buffer of exactly size bytes with no terminator. */
    dh_profile_t *p = parse_checked((const char *)data, size, "dh_profile_parse");
    dh_fuzz_last_ok = p != NULL;
    if (!p)
        return 0;
    check_profile(p);

    size_t n1, n2;
    char *t1 = save_checked(p, &n1);
    dh_profile_t *q = parse_checked(t1, n1, "dh_profile_parse of the saved profile");
    if (!q)
        dh_fuzz_fail("the saved text of an accepted profile does not parse:\n%.*s", (int)n1,
                     t1);
    same_profile(p, q);
    char *t2 = save_checked(q, &n2);
    if (n1 != n2 || (n1 && memcmp(t1, t2, n1) != 0))
        dh_fuzz_fail("saving the reloaded profile gave other text:\n%.*s\n----\n%.*s", (int)n1,
                     t1, (int)n2, t2);
    free(t1);
    free(t2);
    dh_profile_free(q);
    dh_profile_free(p);
    return 0;
}
