/*
 * nccl.roles: the pure parts of NCCL interception: DHELIX_LAYOUT, a communicator's role from
 * its members, its position or its name, and the DHELIX_GROUPS grammar and decisions
 * (nccl_wrap/roles.h, nccl_wrap/policy.h).
 */
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "policy.h"
#include "roles.h"

static void expect_role(unsigned got, const char *want)
{
    char name[32];
    dh_role_name(got, name, sizeof name);
    if (strcmp(name, want) != 0)
        fail_msg("role %s, expected %s", name, want);
}

static void test_layout_parse(void **state)
{
    (void)state;
    dh_layout_t l;
    char err[160];
    assert_int_equal(dh_layout_parse("tp=8,cp=1,pp=2,dp=4", 0, &l, err, sizeof err), DH_OK);
    assert_true(l.set);
    assert_int_equal(l.tp, 8);
    assert_int_equal(l.dp, 4);
    assert_int_equal(l.pp, 2);
    assert_int_equal(l.world, 64);
    /* dp from the world size; spaces and case are fine. */
    assert_int_equal(dh_layout_parse(" TP=2 , pp=2", 16, &l, err, sizeof err), DH_OK);
    assert_int_equal(l.dp, 4);
    /* Empty: no layout. */
    assert_int_equal(dh_layout_parse("", 8, &l, err, sizeof err), DH_OK);
    assert_false(l.set);
    static const char *const bad[] = {"tp=0", "xx=2", "tp=2,dp", "tp=2,dp=3,pp=2",
                                      "tp=2,ep=3,dp=2", "tp=3"};
    static const int worlds[] = {0, 0, 0, 8, 0, 8};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (dh_layout_parse(bad[i], worlds[i], &l, err, sizeof err) != DH_ERR_PARSE)
            fail_msg("'%s' (world %d) parsed", bad[i], worlds[i]);
        assert_false(l.set);
        assert_true(err[0] != '\0');
    }
}

/* tp=2, cp=2, dp=2, pp=2 (16 ranks): global = tp + 2 cp + 4 dp + 8 pp. */
static void test_role_from_members(void **state)
{
    (void)state;
    dh_layout_t l;
    char err[160];
    assert_int_equal(dh_layout_parse("tp=2,cp=2,dp=2,pp=2", 16, &l, err, sizeof err), DH_OK);
    int tp[] = {6, 7}, cp[] = {5, 7}, dp[] = {3, 7}, pp[] = {7, 15}, cpdp[] = {1, 3, 5, 7};
    int tpdp[] = {8, 9, 12, 13}, odd[] = {0, 3}, dup[] = {1, 1};
    expect_role(dh_role_from_members(&l, tp, 2), "tp");
    expect_role(dh_role_from_members(&l, cp, 2), "cp");
    expect_role(dh_role_from_members(&l, dp, 2), "dp");
    expect_role(dh_role_from_members(&l, pp, 2), "pp");
    expect_role(dh_role_from_members(&l, cpdp, 4), "cp+dp");
    expect_role(dh_role_from_members(&l, tpdp, 4), "tp+dp");
    expect_role(dh_role_from_members(&l, odd, 2), "-");  /* not one group of the layout */
    expect_role(dh_role_from_members(&l, dup, 2), "-");
    int outside[] = {3, 16};
    expect_role(dh_role_from_members(&l, outside, 2), "-");
    /* Expert parallelism carved from the (cp, dp) index: ep=2 with cp=1, dp=4. */
    assert_int_equal(dh_layout_parse("tp=2,dp=4,ep=2", 8, &l, err, sizeof err), DH_OK);
    int ep[] = {4, 6}, dpg[] = {1, 3, 5, 7};
    expect_role(dh_role_from_members(&l, ep, 2), "ep");
    expect_role(dh_role_from_members(&l, dpg, 4), "dp");
}

/* Position: unique when sizes differ, ambiguous (0) when two groups fit. */
static void test_role_from_position(void **state)
{
    (void)state;
    dh_layout_t l;
    char err[160];
    int m[8];
    assert_int_equal(dh_layout_parse("tp=2,dp=4", 8, &l, err, sizeof err), DH_OK);
    /* global 5: tp index 1, dp index 2. */
    expect_role(dh_role_from_position(&l, 5, 2, 1, m), "tp");
    assert_int_equal(m[0], 4);
    assert_int_equal(m[1], 5);
    expect_role(dh_role_from_position(&l, 5, 4, 2, m), "dp");
    assert_int_equal(m[0], 1);
    assert_int_equal(m[3], 7);
    expect_role(dh_role_from_position(&l, 5, 4, 1, m), "-"); /* wrong index */
    expect_role(dh_role_from_position(&l, 5, 8, 5, m), "tp+dp");
    assert_int_equal(dh_layout_parse("tp=2,dp=2,pp=2", 8, &l, err, sizeof err), DH_OK);
    expect_role(dh_role_from_position(&l, 0, 2, 0, m), "-"); /* tp, dp and pp all fit */
}

static void test_role_from_name(void **state)
{
    (void)state;
    expect_role(dh_role_from_name("TENSOR_MODEL_PARALLEL_GROUP"), "tp");
    expect_role(dh_role_from_name("mcore:PIPELINE_MODEL_PARALLEL_GROUP"), "pp");
    expect_role(dh_role_from_name("DATA_PARALLEL_GROUP"), "dp");
    expect_role(dh_role_from_name("DATA_PARALLEL_GROUP_WITH_CP"), "cp+dp");
    expect_role(dh_role_from_name("CONTEXT_PARALLEL_GROUP"), "cp");
    expect_role(dh_role_from_name("EXPERT_MODEL_PARALLEL_GROUP"), "ep");
    expect_role(dh_role_from_name("TENSOR_AND_DATA_PARALLEL_GROUP"), "tp+dp");
    expect_role(dh_role_from_name("EXPERT_DATA_PARALLEL_GROUP"), "-");
    expect_role(dh_role_from_name("dp+tp"), "tp+dp");
    expect_role(dh_role_from_name("default_pg"), "-");
    expect_role(dh_role_from_name(""), "-");
    expect_role(dh_role_from_name(NULL), "-");
}

static int decide(const char *spec, const char *name, const char *role, int n)
{
    dh_policy_t p;
    char err[160];
    if (dh_policy_parse(spec, &p, err, sizeof err) != DH_OK)
        fail_msg("'%s' does not parse: %s", spec, err);
    return dh_policy_decide(&p, name, dh_role_parse(role), n, NULL);
}

static void test_policy_decisions(void **state)
{
    (void)state;
    assert_int_equal(decide("all", "", "dp", 4), 1);
    assert_int_equal(decide("", "", "dp", 4), 1);
    assert_int_equal(decide("none", "TENSOR_MODEL_PARALLEL_GROUP", "tp", 4), 0);
    assert_int_equal(decide("tp,cp", "", "tp", 2), 1);
    assert_int_equal(decide("tp,cp", "", "dp", 2), 0);
    assert_int_equal(decide("tp,cp", "", "cp+dp", 2), 0);   /* exact sets only */
    assert_int_equal(decide("role:cp+dp", "", "dp+cp", 2), 1);
    assert_int_equal(decide("all,!dp", "", "dp", 8), 0);
    assert_int_equal(decide("all,!dp", "", "tp", 8), 1);
    assert_int_equal(decide("!dp", "", "tp", 8), 1);         /* leading '!': refines all */
    assert_int_equal(decide("!dp", "", "dp", 8), 0);
    assert_int_equal(decide("TENSOR_MODEL_PARALLEL*", "TENSOR_MODEL_PARALLEL_GROUP", "-", 4), 1);
    assert_int_equal(decide("TENSOR_MODEL_PARALLEL*", "DATA_PARALLEL_GROUP", "-", 4), 0);
    assert_int_equal(decide("name:tp", "tp", "-", 4), 1);     /* forced reading as a name */
    assert_int_equal(decide("name:tp", "", "tp", 4), 0);
    assert_int_equal(decide("size<=8", "", "-", 8), 1);
    assert_int_equal(decide("size<=8", "", "-", 16), 0);
    assert_int_equal(decide("size>8", "", "-", 16), 1);
    assert_int_equal(decide("size=2", "", "-", 2), 1);
    assert_int_equal(decide("size:2", "", "-", 4), 0);
    assert_int_equal(decide("all,!size>=4,tp", "", "tp", 8), 1); /* the last match decides */
    assert_int_equal(decide("tp,!size>=4", "", "tp", 8), 0);
    int term = -2;
    dh_policy_t p;
    assert_int_equal(dh_policy_parse("tp,dp", &p, NULL, 0), DH_OK);
    dh_policy_decide(&p, "", DH_ROLE_PP, 2, &term);
    assert_int_equal(term, -1);
    dh_policy_decide(&p, "", DH_ROLE_DP, 2, &term);
    assert_int_equal(term, 1);
    assert_string_equal(p.terms[1].text, "dp");
}

static void test_policy_bad_specs(void **state)
{
    (void)state;
    static const char *const bad[] = {"tp,,dp", "size<x", "size", "role:xx", "!", "role:tp+",
                                      "tp, "};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        dh_policy_t p;
        char err[160] = "";
        if (dh_policy_parse(bad[i], &p, err, sizeof err) != DH_ERR_PARSE)
            fail_msg("'%s' parsed", bad[i]);
        assert_true(err[0] != '\0');
        /* A bad value means all. */
        assert_int_equal(dh_policy_decide(&p, "", DH_ROLE_DP, 4, NULL), 1);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout_parse),      cmocka_unit_test(test_role_from_members),
        cmocka_unit_test(test_role_from_position), cmocka_unit_test(test_role_from_name),
        cmocka_unit_test(test_policy_decisions),  cmocka_unit_test(test_policy_bad_specs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
