/*
 * shim.config: the DHELIX_* table: defaults, good values, out-of-range and malformed
 * values (default plus exactly one warning), unknown enum values and variables, the mode
 * derived from DHELIX_PLAN, printing values back, and the three renderings.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include <jansson.h>

#include "common/config.h"

/* 25 KiB: kept off the stack. */
static dh_config_t cfg;

static void parse(const char *const *env)
{
    assert_int_equal(dh_config_parse(&cfg, (char *const *)env), DH_OK);
}

/* Exactly one warning, and it mentions every needle given. */
static void expect_one_warning(const char *a, const char *b)
{
    if (cfg.nwarnings != 1)
        fail_msg("expected 1 warning, got %d (first: '%s')", cfg.nwarnings,
                 cfg.nwarnings ? cfg.warnings[0] : "");
    if (!strstr(cfg.warnings[0], a) || (b && !strstr(cfg.warnings[0], b)))
        fail_msg("warning '%s' lacks '%s' or '%s'", cfg.warnings[0], a, b ? b : "");
}

static void test_defaults(void **state)
{
    (void)state;
    const char *env[] = {"PATH=/bin", "DHELIX_LOG=", NULL}; /* empty means unset */
    parse(env);
    assert_int_equal(cfg.nwarnings, 0);
    for (int i = 0; i < DH_CFG_COUNT; i++)
        assert_int_equal(cfg.source[i], DH_SRC_DEFAULT);
    assert_int_equal(cfg.mode, DH_MODE_PASSTHROUGH);
    assert_int_equal(cfg.log_level, DH_LOG_WARN);
    assert_int_equal(cfg.log_subsys, DH_LOG_SUBSYS_ALL);
    assert_string_equal(cfg.log_file, "");
    assert_int_equal(cfg.print_config, 0);
    assert_int_equal(cfg.stats, DH_STATS_OFF);
    assert_int_equal(cfg.seed, 0);
    assert_string_equal(cfg.groups, "all");
    assert_int_equal(cfg.max_queued_ops, 4096);
    assert_int_equal(cfg.max_deferred_free_bytes, 2LL << 30);
    parse(NULL);
    assert_int_equal(cfg.nwarnings, 0);
}

/* Printing a default gives back the text of the default: what the docs show is what
 * the parser does. */
static void test_defaults_print_as_declared(void **state)
{
    (void)state;
    parse(NULL);
    for (int i = 0; i < DH_CFG_COUNT; i++) {
        dh_strbuf_t b = DH_STRBUF_INIT;
        assert_int_equal(dh_config_value_str(&cfg, (dh_cfg_id_t)i, &b), DH_OK);
        assert_string_equal(dh_strbuf_str(&b), dh_config_desc((dh_cfg_id_t)i)->def);
        dh_strbuf_free(&b);
    }
    assert_null(dh_config_desc(DH_CFG_COUNT));
}

static void test_good_values(void **state)
{
    (void)state;
    const char *env[] = {"DHELIX_MODE=Stress", "DHELIX_LOG=DEBUG", "DHELIX_LOG_SUBSYS=hook, plan",
                         "DHELIX_LOG_FILE=/tmp/x.%h.%p.%%", "DHELIX_PRINT_CONFIG=yes",
                         "DHELIX_STATS=json", "DHELIX_SEED=4294967295",
                         "DHELIX_MAX_QUEUED_OPS=16", "DHELIX_MAX_DEFERRED_FREE_BYTES=512M",
                         "DHELIX_LAYOUT=dp=2,tp=4", NULL};
    parse(env);
    assert_int_equal(cfg.nwarnings, 0);
    assert_int_equal(cfg.mode, DH_MODE_STRESS);
    assert_int_equal(cfg.log_level, DH_LOG_DEBUG);
    assert_int_equal(cfg.log_subsys, (1u << DH_SUB_HOOK) | (1u << DH_SUB_PLAN));
    assert_string_equal(cfg.log_file, "/tmp/x.%h.%p.%%");
    assert_int_equal(cfg.print_config, 1);
    assert_int_equal(cfg.stats, DH_STATS_JSON);
    assert_int_equal(cfg.seed, 4294967295LL);
    assert_int_equal(cfg.max_queued_ops, 16);
    assert_int_equal(cfg.max_deferred_free_bytes, 512LL << 20);
    assert_string_equal(cfg.layout, "dp=2,tp=4");
    assert_int_equal(cfg.source[DH_CFG_MODE], DH_SRC_ENV);
    assert_int_equal(cfg.source[DH_CFG_MAX_QUEUED_OPS], DH_SRC_ENV);
    assert_int_equal(cfg.source[DH_CFG_PLAN], DH_SRC_DEFAULT);
}

static void test_sizes(void **state)
{
    (void)state;
    static const struct { const char *v; long long want; } cases[] = {
        {"0", 0}, {"1536", 1536}, {"3K", 3 << 10}, {"3KB", 3 << 10}, {"1GiB", 1LL << 30},
        {"16T", 16LL << 40}, {"2g", 2LL << 30},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char var[64];
        snprintf(var, sizeof(var), "DHELIX_MAX_DEFERRED_FREE_BYTES=%s", cases[i].v);
        const char *env[] = {var, NULL};
        parse(env);
        assert_int_equal(cfg.nwarnings, 0);
        assert_int_equal(cfg.max_deferred_free_bytes, cases[i].want);
    }
    const char *env[] = {"DHELIX_MAX_DEFERRED_FREE_BYTES=1536M", NULL};
    parse(env);
    dh_strbuf_t b = DH_STRBUF_INIT;
    dh_config_value_str(&cfg, DH_CFG_MAX_DEFERRED_FREE_BYTES, &b);
    assert_string_equal(dh_strbuf_str(&b), "1536M");
    dh_strbuf_free(&b);
}

/* Each bad value: the default, source "invalid", and one warning naming it and why. */
static void test_bad_values_take_the_default(void **state)
{
    (void)state;
    static const struct { const char *env; dh_cfg_id_t id; const char *why; } cases[] = {
        {"DHELIX_MAX_QUEUED_OPS=15", DH_CFG_MAX_QUEUED_OPS, "out of range 16..1048576"},
        {"DHELIX_MAX_QUEUED_OPS=1048577", DH_CFG_MAX_QUEUED_OPS, "out of range"},
        {"DHELIX_MAX_QUEUED_OPS=-1", DH_CFG_MAX_QUEUED_OPS, "out of range"},
        {"DHELIX_MAX_QUEUED_OPS=99999999999999999999", DH_CFG_MAX_QUEUED_OPS, "out of range"},
        {"DHELIX_MAX_QUEUED_OPS=12abc", DH_CFG_MAX_QUEUED_OPS, "not an integer"},
        {"DHELIX_MAX_QUEUED_OPS= 64", DH_CFG_MAX_QUEUED_OPS, "not an integer"},
        {"DHELIX_MAX_QUEUED_OPS=0x40", DH_CFG_MAX_QUEUED_OPS, "not an integer"},
        {"DHELIX_SEED=4294967296", DH_CFG_SEED, "out of range 0..4294967295"},
        {"DHELIX_MAX_DEFERRED_FREE_BYTES=17T", DH_CFG_MAX_DEFERRED_FREE_BYTES,
         "out of range 0..16T"},
        {"DHELIX_MAX_DEFERRED_FREE_BYTES=9999999999T", DH_CFG_MAX_DEFERRED_FREE_BYTES,
         "out of range"},
        {"DHELIX_MAX_DEFERRED_FREE_BYTES=5X", DH_CFG_MAX_DEFERRED_FREE_BYTES, "not a size"},
        {"DHELIX_MAX_DEFERRED_FREE_BYTES=K", DH_CFG_MAX_DEFERRED_FREE_BYTES, "not a size"},
        {"DHELIX_MODE=fast", DH_CFG_MODE, "not one of passthrough, profile, plan, stress"},
        {"DHELIX_LOG=verbose", DH_CFG_LOG, "not one of error, warn, info, debug"},
        {"DHELIX_STATS=yes", DH_CFG_STATS, "not one of 0, 1, json"},
        {"DHELIX_PRINT_CONFIG=maybe", DH_CFG_PRINT_CONFIG, "not a boolean"},
        {"DHELIX_LOG_SUBSYS=hook,zz", DH_CFG_LOG_SUBSYS, "unknown subsystem 'zz'"},
        {"DHELIX_LOG_SUBSYS=,", DH_CFG_LOG_SUBSYS, "unknown subsystem"},
        {"DHELIX_LOG_FILE=/tmp/log.%q", DH_CFG_LOG_FILE, "bad pattern"},
        {"DHELIX_STATS_FILE=/tmp/stats.%", DH_CFG_STATS_FILE, "bad pattern"},
    };
    dh_config_t def;
    assert_int_equal(dh_config_parse(&def, NULL), DH_OK);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *env[] = {cases[i].env, NULL};
        parse(env);
        char name[64];
        snprintf(name, sizeof(name), "%.*s", (int)strcspn(cases[i].env, "="), cases[i].env);
        expect_one_warning(name, cases[i].why);
        assert_int_equal(cfg.source[cases[i].id], DH_SRC_INVALID);
        dh_strbuf_t got = DH_STRBUF_INIT, want = DH_STRBUF_INIT;
        dh_config_value_str(&cfg, cases[i].id, &got);
        dh_config_value_str(&def, cases[i].id, &want);
        assert_string_equal(dh_strbuf_str(&got), dh_strbuf_str(&want));
        dh_strbuf_free(&got);
        dh_strbuf_free(&want);
    }
}

static void test_too_long_string(void **state)
{
    (void)state;
    static char var[DH_CFG_STR_MAX + 64];
    int n = snprintf(var, sizeof(var), "DHELIX_PLAN=");
    memset(var + n, 'p', DH_CFG_STR_MAX);
    var[n + DH_CFG_STR_MAX] = '\0';
    const char *env[] = {var, NULL};
    parse(env);
    expect_one_warning("DHELIX_PLAN=ppp", "longer than 4095 bytes");
    assert_string_equal(cfg.plan, "");
    assert_int_equal(cfg.mode, DH_MODE_PASSTHROUGH);
}

static void test_mode_follows_plan(void **state)
{
    (void)state;
    const char *with_plan[] = {"DHELIX_PLAN=plan.json", NULL};
    parse(with_plan);
    assert_int_equal(cfg.mode, DH_MODE_PLAN);
    assert_int_equal(cfg.source[DH_CFG_MODE], DH_SRC_DERIVED);
    assert_int_equal(cfg.nwarnings, 0);
    const char *explicit_mode[] = {"DHELIX_PLAN=plan.json", "DHELIX_MODE=passthrough", NULL};
    parse(explicit_mode);
    assert_int_equal(cfg.mode, DH_MODE_PASSTHROUGH);
    assert_int_equal(cfg.source[DH_CFG_MODE], DH_SRC_ENV);
    const char *bad_mode[] = {"DHELIX_PLAN=plan.json", "DHELIX_MODE=autopilot", NULL};
    parse(bad_mode);
    assert_int_equal(cfg.mode, DH_MODE_PASSTHROUGH); /* a bad value is not "unset" */
    expect_one_warning("DHELIX_MODE=autopilot", NULL);
}

static void test_unknown_variables(void **state)
{
    (void)state;
    const char *one[] = {"DHELIX_LOGLEVEL=debug", "DHELIXFOO=1", "XDHELIX_LOG=1", NULL};
    parse(one);
    expect_one_warning("unknown variable DHELIX_LOGLEVEL", NULL);
    const char *many[] = {"DHELIX_A=1", "DHELIX_B=1", "DHELIX_C=1", "DHELIX_D=1",
                          "DHELIX_E=1", "DHELIX_F=1", NULL};
    parse(many);
    assert_int_equal(cfg.nwarnings, 5);
    assert_non_null(strstr(cfg.warnings[3], "DHELIX_D"));
    assert_non_null(strstr(cfg.warnings[4], "2 more unknown"));
}

static void test_every_variable_bad_at_once(void **state)
{
    (void)state;
    const char *env[DH_CFG_COUNT + 1];
    static char vars[DH_CFG_COUNT][80];
    int n = 0;
    for (int i = 0; i < DH_CFG_COUNT; i++) {
        const dh_cfg_desc_t *d = dh_config_desc((dh_cfg_id_t)i);
        if (d->kind == DH_CFG_STR)
            continue; /* free text: nothing is malformed */
        snprintf(vars[n], sizeof(vars[n]), "%s=%s", d->name,
                 d->kind == DH_CFG_PATH ? "%z" : "~bad~");
        env[n] = vars[n];
        n++;
    }
    env[n] = NULL;
    parse(env);
    assert_int_equal(cfg.nwarnings, n);
}

static void test_render_text_and_json(void **state)
{
    (void)state;
    const char *env[] = {"DHELIX_LOG=info", "DHELIX_SEED=x", NULL};
    parse(env);
    dh_strbuf_t text = DH_STRBUF_INIT, js = DH_STRBUF_INIT;
    assert_int_equal(dh_config_render(&cfg, DH_FMT_TEXT, &text), DH_OK);
    assert_int_equal(dh_config_render(&cfg, DH_FMT_JSON, &js), DH_OK);
    for (int i = 0; i < DH_CFG_COUNT; i++)
        assert_non_null(strstr(dh_strbuf_str(&text), dh_config_desc((dh_cfg_id_t)i)->name));
    assert_non_null(strstr(dh_strbuf_str(&text), "default (invalid env)"));
    json_error_t e;
    json_t *root = json_loads(dh_strbuf_str(&js), 0, &e);
    assert_non_null(root);
    json_t *rows = json_object_get(root, "rows");
    assert_int_equal(json_array_size(rows), DH_CFG_COUNT);
    json_t *log = json_array_get(rows, DH_CFG_LOG);
    assert_string_equal(json_string_value(json_object_get(log, "name")), "DHELIX_LOG");
    assert_string_equal(json_string_value(json_object_get(log, "value")), "info");
    assert_string_equal(json_string_value(json_object_get(log, "source")), "env");
    assert_string_equal(json_string_value(json_object_get(log, "default")), "warn");
    json_decref(root);
    assert_int_equal(dh_config_render(NULL, DH_FMT_TEXT, &text), DH_ERR_INVALID);
    dh_strbuf_free(&text);
    dh_strbuf_free(&js);
}

/* The docs table: one row per variable, and no value from the environment in it. */
static void test_render_markdown(void **state)
{
    (void)state;
    dh_strbuf_t md = DH_STRBUF_INIT;
    assert_int_equal(dh_config_render(NULL, DH_FMT_MARKDOWN, &md), DH_OK);
    int rows = 0;
    for (const char *p = dh_strbuf_str(&md); (p = strstr(p, "\n| `DHELIX_")) != NULL; p++)
        rows++;
    assert_int_equal(rows, DH_CFG_COUNT);
    assert_non_null(strstr(dh_strbuf_str(&md), "## Configuration"));
    dh_strbuf_free(&md);
}

static void test_process_config_is_read_once(void **state)
{
    (void)state;
    const dh_config_t *a = dh_config();
    setenv("DHELIX_SEED", "77", 1);
    const dh_config_t *b = dh_config();
    assert_ptr_equal(a, b);
    assert_int_equal(b->seed, 0); /* the value at the first call, not 77 */
}

int main(void)
{
    unsetenv("DHELIX_SEED");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_defaults_print_as_declared),
        cmocka_unit_test(test_good_values),
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_bad_values_take_the_default),
        cmocka_unit_test(test_too_long_string),
        cmocka_unit_test(test_mode_follows_plan),
        cmocka_unit_test(test_unknown_variables),
        cmocka_unit_test(test_every_variable_bad_at_once),
        cmocka_unit_test(test_render_text_and_json),
        cmocka_unit_test(test_render_markdown),
        cmocka_unit_test(test_process_config_is_read_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
