/* shim.table: the one emitter's three renderings, exactly. */
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "common/table.h"

static const dh_col_t cols[] = {
    {"api", "API", DH_CELL_STR},
    {"calls", "CALLS", DH_CELL_NUM},
    {"note", "NOTE", DH_CELL_STR},
};

static dh_table_t *sample(void)
{
    dh_table_t *t;
    assert_int_equal(dh_table_new(&t, "demo", cols, 3), DH_OK);
    const char *r1[] = {"cudaMalloc", "3", "a|b"};
    const char *r2[] = {"x", "12345", NULL};
    const char *r3[] = {"q\"uote", "0", "tab\there"};
    assert_int_equal(dh_table_row(t, r1), DH_OK);
    assert_int_equal(dh_table_row(t, r2), DH_OK);
    assert_int_equal(dh_table_row(t, r3), DH_OK);
    return t;
}

static void expect_render(dh_table_t *t, dh_fmt_t fmt, const char *want)
{
    dh_strbuf_t out = DH_STRBUF_INIT;
    assert_int_equal(dh_table_render(t, fmt, &out), DH_OK);
    assert_string_equal(dh_strbuf_str(&out), want);
    dh_strbuf_free(&out);
}

static void test_text_is_aligned(void **state)
{
    (void)state;
    dh_table_t *t = sample();
    expect_render(t, DH_FMT_TEXT,
                  "API         CALLS  NOTE\n"
                  "cudaMalloc      3  a|b\n"
                  "x           12345  \n"
                  "q\"uote          0  tab\there\n");
    assert_int_equal(dh_table_meta(t, "pid", DH_CELL_NUM, "42"), DH_OK);
    assert_int_equal(dh_table_meta(t, "host", DH_CELL_STR, "n1"), DH_OK);
    expect_render(t, DH_FMT_TEXT,
                  "demo: pid=42 host=n1\n"
                  "API         CALLS  NOTE\n"
                  "cudaMalloc      3  a|b\n"
                  "x           12345  \n"
                  "q\"uote          0  tab\there\n");
    dh_table_free(t);
}

static void test_json_is_escaped_and_typed(void **state)
{
    (void)state;
    dh_table_t *t = sample();
    assert_int_equal(dh_table_meta(t, "pid", DH_CELL_NUM, "42"), DH_OK);
    assert_int_equal(dh_table_meta(t, "host", DH_CELL_STR, "n\x01"), DH_OK);
    expect_render(t, DH_FMT_JSON,
                  "{\"table\":\"demo\",\"meta\":{\"pid\":42,\"host\":\"n\\u0001\"},\"rows\":["
                  "{\"api\":\"cudaMalloc\",\"calls\":3,\"note\":\"a|b\"},"
                  "{\"api\":\"x\",\"calls\":12345,\"note\":null},"
                  "{\"api\":\"q\\\"uote\",\"calls\":0,\"note\":\"tab\\there\"}]}\n");
    dh_table_free(t);
}

static void test_markdown_escapes_pipes(void **state)
{
    (void)state;
    dh_table_t *t = sample();
    expect_render(t, DH_FMT_MARKDOWN,
                  "| API | CALLS | NOTE |\n"
                  "| --- | ---: | --- |\n"
                  "| cudaMalloc | 3 | a\\|b |\n"
                  "| x | 12345 |  |\n"
                  "| q\"uote | 0 | tab\there |\n");
    dh_table_free(t);
}

static void test_empty_and_invalid(void **state)
{
    (void)state;
    dh_table_t *t;
    assert_int_equal(dh_table_new(&t, "none", cols, 0), DH_ERR_INVALID);
    assert_null(t);
    assert_int_equal(dh_table_new(&t, "empty", cols, 1), DH_OK);
    expect_render(t, DH_FMT_JSON, "{\"table\":\"empty\",\"meta\":{},\"rows\":[]}\n");
    expect_render(t, DH_FMT_TEXT, "API\n");
    dh_strbuf_t out = DH_STRBUF_INIT;
    assert_int_equal(dh_table_render(t, (dh_fmt_t)99, &out), DH_ERR_INVALID);
    dh_strbuf_free(&out);
    dh_table_free(t);
    dh_table_free(NULL);
}

/* Many rows force the row array to grow several times. */
static void test_many_rows(void **state)
{
    (void)state;
    dh_table_t *t;
    assert_int_equal(dh_table_new(&t, "big", cols, 3), DH_OK);
    for (int i = 0; i < 1000; i++) {
        const char *r[] = {"row", "1", "n"};
        assert_int_equal(dh_table_row(t, r), DH_OK);
    }
    dh_strbuf_t out = DH_STRBUF_INIT;
    assert_int_equal(dh_table_render(t, DH_FMT_TEXT, &out), DH_OK);
    int lines = 0;
    for (const char *p = dh_strbuf_str(&out); *p; p++)
        lines += *p == '\n';
    assert_int_equal(lines, 1001);
    dh_strbuf_free(&out);
    dh_table_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text_is_aligned),
        cmocka_unit_test(test_json_is_escaped_and_typed),
        cmocka_unit_test(test_markdown_escapes_pipes),
        cmocka_unit_test(test_empty_and_invalid),
        cmocka_unit_test(test_many_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
