/*
 * test_spec.c: the pure parts of dhelix-pairs (scheduler/pairs/spec.c): op names, the
 * selection from a profile, the efficiency and the median.
 *
 * Usage: pairs_test_spec PROFILE (tests/pairs/profile_tp2.json)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pairs.h"

static const char *profile_path;

static void gemm_names(void **state)
{
    (void)state;
    dh_ovl_gemm_t g;
    const char *why;
    assert_int_equal(dh_ovl_parse_gemm("gemm t,n 3072x4096x1024 bf16", &g, &why), 0);
    assert_int_equal(g.ta, 't');
    assert_int_equal(g.tb, 'n');
    assert_int_equal(g.m, 3072);
    assert_int_equal(g.n, 4096);
    assert_int_equal(g.k, 1024);
    assert_int_equal(g.batch, 1);
    assert_int_equal(g.dtype, CUDA_R_16BF);
    assert_int_equal(g.esize, 2);
    assert_int_equal(g.lt, 0);
    assert_int_equal(dh_ovl_parse_gemm("lt n,t 16x32x64 f16 x12", &g, &why), 0);
    assert_int_equal(g.lt, 1);
    assert_int_equal(g.batch, 12);
    assert_int_equal(g.dtype, CUDA_R_16F);
    assert_int_equal(dh_ovl_parse_gemm("gemm n,n 5x6x7 f32", &g, &why), 0);
    assert_int_equal(g.dtype, CUDA_R_32F);
    assert_int_equal(g.esize, 4);
    static const char *const bad[] = {
        "gemm n,t 4096x1024x512",          /* no type */
        "gemm x,t 4x4x4 f32",              /* transposes */
        "gemm n,t 4x4 f32",                /* two sizes */
        "gemm n,t 4x4x4x4 f32",            /* four sizes */
        "gemm n,t 4x0x4 f32",              /* zero */
        "gemm n,t 4x-4x4 f32",             /* negative */
        "gemm n,t 4x4x4 f8",               /* type */
        "gemm n,t 4x4x4 f32 12",           /* batch without x */
        "gemm n,t 4x4x4 f32 x2 extra",     /* too many tokens */
        "matmul n,t 4x4x4 f32",            /* prefix */
        "",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        why = NULL;
        if (dh_ovl_parse_gemm(bad[i], &g, &why) == 0)
            fail_msg("\"%s\" parsed as a GEMM", bad[i]);
        assert_non_null(why);
    }
}

static void nccl_names(void **state)
{
    (void)state;
    dh_ovl_nccl_t c;
    const char *why;
    for (int i = 0; i < DH_OVL_COLL_COUNT; i++) {
        char name[64];
        snprintf(name, sizeof name, "nccl %s bf16 1000", dh_ovl_coll_name((dh_ovl_coll_t)i));
        assert_int_equal(dh_ovl_parse_nccl(name, &c, &why), 0);
        assert_int_equal(c.coll, i);
        assert_int_equal(c.dtype, ncclBfloat16);
        assert_int_equal(c.count, 1000);
        assert_int_equal(c.comm, -1);
    }
    assert_int_equal(dh_ovl_parse_nccl("nccl AlltoAll i64 7", &c, &why), 0);
    assert_int_equal(c.coll, DH_OVL_ALLTOALL);
    assert_int_equal(c.esize, 8);
    assert_int_equal(dh_ovl_parse_nccl("nccl AllReduce u8 3", &c, &why), 0);
    assert_int_equal(c.dtype, ncclUint8);
    static const char *const bad[] = {"nccl AllReduce f32", "nccl AllReduce f32 0",
                                      "nccl AllReduce f32 12k", "nccl AllReduce q7 12",
                                      "nccl Barrier f32 12", "gemm AllReduce f32 12",
                                      "nccl AllReduce f32 12 comm"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (dh_ovl_parse_nccl(bad[i], &c, &why) == 0)
            fail_msg("\"%s\" parsed as a collective", bad[i]);
    }
}

static void nccl_counts(void **state)
{
    (void)state;
    dh_ovl_nccl_t c = {.count = 10};
    size_t s, r;
    c.coll = DH_OVL_ALLGATHER;
    dh_ovl_nccl_counts(&c, 4, &s, &r);
    assert_true(s == 10 && r == 40);
    c.coll = DH_OVL_REDUCESCATTER;
    dh_ovl_nccl_counts(&c, 4, &s, &r);
    assert_true(s == 40 && r == 10);
    c.coll = DH_OVL_ALLTOALL;
    dh_ovl_nccl_counts(&c, 4, &s, &r);
    assert_true(s == 40 && r == 40);
    c.coll = DH_OVL_ALLREDUCE;
    dh_ovl_nccl_counts(&c, 4, &s, &r);
    assert_true(s == 10 && r == 10);
}

static dh_profile_t *load(void)
{
    dh_profile_t *p = NULL;
    char err[512] = "";
    if (dh_profile_load(profile_path, &p, err, sizeof err) != DH_OK)
        fail_msg("%s", err);
    return p;
}

/* Runs the selection with notes captured in *notes (caller frees). */
static void select_into(const dh_profile_t *p, int nprocs, int k, dh_ovl_sel_t *s, char **notes)
{
    size_t len = 0;
    FILE *f = open_memstream(notes, &len);
    assert_non_null(f);
    assert_int_equal(dh_ovl_select(p, nprocs, k, s, f), DH_OK);
    fclose(f);
}

static void selection(void **state)
{
    (void)state;
    dh_profile_t *p = load();
    dh_ovl_sel_t s;
    char *notes = NULL;
    select_into(p, 2, 6, &s, &notes);
    /* Totals over the profile's two layers, heaviest first; the 40 us f32 GEMM is sixth
     * and the 24 us batched one is left out. */
    static const char *const gemms[] = {
        "gemm t,n 4096x4096x1024 bf16", "gemm t,n 3072x4096x1024 bf16",
        "lt n,t 1024x3072x4096 bf16",   "gemm t,n 1024x4096x2048 bf16",
        "gemm t,n 1024x4096x1024 bf16", "gemm n,n 512x512x512 f32"};
    assert_int_equal(s.ncompute, 6);
    for (int i = 0; i < 6; i++)
        assert_string_equal(s.compute[i].name, gemms[i]);
    assert_int_equal(s.compute[0].prof_n, 2);
    assert_true(s.compute[0].prof_us == 200.0);
    assert_int_equal(s.compute[2].u.gemm.lt, 1);
    /* Send and Recv tie on time and count: first appearance decides. */
    static const char *const colls[] = {
        "nccl AllGather bf16 1048576", "nccl ReduceScatter bf16 2097152",
        "nccl AllReduce f32 262144", "nccl Send bf16 65536", "nccl Recv bf16 65536"};
    assert_int_equal(s.ncomm, 5);
    for (int i = 0; i < 5; i++) {
        assert_string_equal(s.comm[i].name, colls[i]);
        assert_int_equal(s.comm[i].u.nccl.nranks, 2);
        assert_int_equal(s.comm[i].u.nccl.comm, 0);
    }
    assert_int_equal(s.skipped, 2);
    if (!strstr(notes, "skipped 1 distinct op(s) of communicator 1 (dp, 4 ranks; this run "
                       "has 2), e.g. \"nccl AllReduce f32 1048576\"") ||
        !strstr(notes, "skipped \"gemm n,n big-shape f16\" (2 in the profile): sizes are not"))
        fail_msg("notes lack the skipped ops:\n%s", notes);
    uint64_t h = dh_ovl_sel_hash(&s);
    dh_ovl_op_t t = s.comm[0];
    s.comm[0] = s.comm[1];
    s.comm[1] = t;
    assert_true(dh_ovl_sel_hash(&s) != h);
    s.comm[1] = s.comm[0];
    s.comm[0] = t;
    assert_true(dh_ovl_sel_hash(&s) == h);
    s.comm[0].name[5] ^= 1; /* same sig and shape, another launch */
    assert_true(dh_ovl_sel_hash(&s) != h);
    dh_ovl_sel_free(&s);
    free(notes);

    /* With 4 processes only the data-parallel all-reduce is measurable. */
    select_into(p, 4, 2, &s, &notes);
    assert_int_equal(s.ncompute, 2);
    assert_int_equal(s.ncomm, 1);
    assert_string_equal(s.comm[0].name, "nccl AllReduce f32 1048576");
    assert_int_equal(s.comm[0].u.nccl.nranks, 4);
    /* All five tp collectives are summed up in one line. */
    if (!strstr(notes, "skipped 5 distinct op(s) of communicator 0 (tp, 2 ranks; this run has 4)"))
        fail_msg("notes lack the tp communicator's line:\n%s", notes);
    dh_ovl_sel_free(&s);
    free(notes);
    assert_int_equal(dh_ovl_select(p, 2, 0, &s, NULL), DH_ERR_INVALID);
    dh_profile_free(p);
}

static void arithmetic(void **state)
{
    (void)state;
    assert_float_equal(dh_ovl_efficiency(100, 50, 110), 0.8, 1e-12);
    assert_float_equal(dh_ovl_efficiency(50, 100, 150), 0.0, 1e-12);
    assert_float_equal(dh_ovl_efficiency(50, 100, 160), -0.2, 1e-12);
    assert_float_equal(dh_ovl_efficiency(0, 100, 100), 0.0, 1e-12);
    assert_float_equal(dh_ovl_efficiency(100, 50, 90), 1.0, 1e-12);    /* 1.2: noise */
    assert_float_equal(dh_ovl_efficiency(10, 100, 300), -10.0, 1e-12); /* -19 */
    double v[] = {5, 1, 4, 2, 3};
    assert_float_equal(dh_ovl_median(v, 5), 3, 0);
    double w[] = {4, 1, 3, 2};
    assert_float_equal(dh_ovl_median(w, 4), 2.5, 0);
    assert_float_equal(dh_ovl_median(NULL, 0), 0, 0);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s PROFILE\n", argv[0]);
        return 2;
    }
    profile_path = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gemm_names), cmocka_unit_test(nccl_names),
        cmocka_unit_test(nccl_counts), cmocka_unit_test(selection),
        cmocka_unit_test(arithmetic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
