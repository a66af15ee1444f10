/* shim.status: the status list, dh_strerror, DH_CHECK and DH_CHECK_GOTO. */
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "common/status.h"

static void test_every_status_has_a_message_and_a_name(void **state)
{
    (void)state;
    for (int i = 0; i < DH_STATUS_COUNT; i++) {
        const char *msg = dh_strerror((dh_status_t)i);
        const char *name = dh_status_name((dh_status_t)i);
        assert_true(strlen(msg) > 0);
        assert_int_equal(strncmp(name, "DH_", 3), 0);
        for (int j = 0; j < i; j++)
            assert_string_not_equal(msg, dh_strerror((dh_status_t)j));
    }
    assert_string_equal(dh_strerror(DH_OK), "success");
    assert_string_equal(dh_status_name(DH_ERR_NOMEM), "DH_ERR_NOMEM");
    assert_string_equal(dh_strerror(DH_STATUS_COUNT), "unknown status");
    assert_string_equal(dh_strerror((dh_status_t)-1), "unknown status");
    assert_string_equal(dh_status_name(DH_STATUS_COUNT), "DH_STATUS_UNKNOWN");
}

static int calls;

static dh_status_t step(dh_status_t st)
{
    calls++;
    return st;
}

static dh_status_t two_steps(dh_status_t first, dh_status_t second)
{
    DH_CHECK(step(first));
    DH_CHECK(step(second));
    return DH_OK;
}

static void test_check_returns_the_first_failure(void **state)
{
    (void)state;
    calls = 0;
    assert_int_equal(two_steps(DH_OK, DH_OK), DH_OK);
    assert_int_equal(calls, 2);
    calls = 0;
    assert_int_equal(two_steps(DH_ERR_IO, DH_OK), DH_ERR_IO);
    assert_int_equal(calls, 1); /* evaluated once, and the second step never ran */
    calls = 0;
    assert_int_equal(two_steps(DH_OK, DH_ERR_PARSE), DH_ERR_PARSE);
    assert_int_equal(calls, 2);
}

static int cleaned;

static dh_status_t with_cleanup(dh_status_t first, dh_status_t second)
{
    dh_status_t rc = DH_OK;
    DH_CHECK_GOTO(step(first), rc, out);
    DH_CHECK_GOTO(step(second), rc, out);
out:
    cleaned++;
    return rc;
}

static void test_check_goto_runs_the_cleanup(void **state)
{
    (void)state;
    calls = cleaned = 0;
    assert_int_equal(with_cleanup(DH_ERR_NOMEM, DH_OK), DH_ERR_NOMEM);
    assert_int_equal(calls, 1);
    assert_int_equal(cleaned, 1);
    calls = cleaned = 0;
    assert_int_equal(with_cleanup(DH_OK, DH_OK), DH_OK);
    assert_int_equal(calls, 2);
    assert_int_equal(cleaned, 1);
}

static void test_version(void **state)
{
    (void)state;
    assert_non_null(strchr(dh_version(), '.'));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_status_has_a_message_and_a_name),
        cmocka_unit_test(test_check_returns_the_first_failure),
        cmocka_unit_test(test_check_goto_runs_the_cleanup),
        cmocka_unit_test(test_version),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
