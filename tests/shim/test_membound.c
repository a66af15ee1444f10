/* shim.membound: the extra-memory bound's values (DHELIX_MAX_EXTRA_MEM, `dhelix plan
 * --max-extra-mem`): sizes, percentages of the baseline peak, none, and what is refused. */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include <setjmp.h>
#include <cmocka.h>

#include "common/membound.h"

static void expect(const char *s, dh_membound_kind_t kind, double bytes, double pct)
{
    dh_membound_t b = {DH_MEMBOUND_BYTES, 123, 456};
    if (dh_mem_bound_parse(s, &b) != 0)
        fail_msg("'%s' did not parse", s);
    if (b.kind != kind || (kind == DH_MEMBOUND_BYTES && b.bytes != bytes) ||
        (kind == DH_MEMBOUND_PERCENT && b.pct != pct))
        fail_msg("'%s': kind %d bytes %.17g pct %.17g, expected kind %d bytes %.17g pct %.17g", s,
                 (int)b.kind, b.bytes, b.pct, (int)kind, bytes, pct);
}

static void test_sizes(void **state)
{
    (void)state;
    expect("0", DH_MEMBOUND_BYTES, 0, 0);
    expect("1048576", DH_MEMBOUND_BYTES, 1048576, 0);
    expect("512M", DH_MEMBOUND_BYTES, 512.0 * 1048576, 0);
    expect("512MiB", DH_MEMBOUND_BYTES, 512.0 * 1048576, 0);
    expect("2g", DH_MEMBOUND_BYTES, 2147483648.0, 0);
    expect("1.5K", DH_MEMBOUND_BYTES, 1536, 0);
    expect("1T", DH_MEMBOUND_BYTES, 1099511627776.0, 0);
    expect("64KB", DH_MEMBOUND_BYTES, 65536, 0);
}

static void test_percent(void **state)
{
    (void)state;
    expect("3%", DH_MEMBOUND_PERCENT, 0, 3);
    expect("0.5%", DH_MEMBOUND_PERCENT, 0, 0.5);
    expect("0%", DH_MEMBOUND_PERCENT, 0, 0);
    dh_membound_t b;
    assert_int_equal(dh_mem_bound_parse("3%", &b), 0);
    double got = dh_mem_bound_bytes(&b, 10737418240.0); /* 3% of 10 GiB */
    if (got != 322122547.0)
        fail_msg("3%% of 10 GiB: %.17g, expected 322122547", got);
    if (dh_mem_bound_bytes(&b, 0) != 0)
        fail_msg("3%% of an unknown peak: %.17g, expected 0", dh_mem_bound_bytes(&b, 0));
    assert_int_equal(dh_mem_bound_parse("512M", &b), 0);
    if (dh_mem_bound_bytes(&b, 1e12) != 536870912.0)
        fail_msg("512M: %.17g bytes", dh_mem_bound_bytes(&b, 1e12));
}

static void test_none(void **state)
{
    (void)state;
    const char *none[] = {"", "none", "NONE", NULL};
    for (int i = 0; i < 4; i++) {
        dh_membound_t b = {DH_MEMBOUND_BYTES, 1, 0};
        assert_int_equal(dh_mem_bound_parse(none[i], &b), 0);
        if (b.kind != DH_MEMBOUND_NONE || dh_mem_bound_bytes(&b, 1e9) != -1)
            fail_msg("'%s': kind %d, bytes %.17g; expected no bound", none[i] ? none[i] : "(null)",
                     (int)b.kind, dh_mem_bound_bytes(&b, 1e9));
    }
}

static void test_refused(void **state)
{
    (void)state;
    const char *bad[] = {"-1", "-3%", "abc", "3%%", "%", "12Q", "1MM", "inf", "nan", "0x10",
                         "1e3", "3% ", " 3%", "5000%", "1e30", "2 G", "G"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        dh_membound_t b = {DH_MEMBOUND_BYTES, 7, 8};
        int rc = dh_mem_bound_parse(bad[i], &b);
        if (rc != -1 || b.kind != DH_MEMBOUND_BYTES || b.bytes != 7)
            fail_msg("'%s' was taken (rc %d, kind %d, bytes %.17g); it is not a bound", bad[i], rc,
                     (int)b.kind, b.bytes);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_percent),
        cmocka_unit_test(test_none),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
