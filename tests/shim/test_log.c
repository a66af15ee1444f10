/*
 * shim.log: the log line format, level and subsystem filtering, DHELIX_LOG_FILE patterns,
 * the rank in the prefix, DH_WARN_ONCE, truncation, a destination that cannot be opened,
 * and whole lines from several threads at once (run under TSan too).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "common/config.h"
#include "common/log.h"

static char dir[256];
static char path[512];
static dh_config_t cfg;
static char host[64];

/* Points logging at a fresh file (through the real parser) with the given level and
 * subsystems. */
static void log_to_file(const char *level, const char *subsys)
{
    char v_level[64], v_subsys[128], v_file[600];
    snprintf(path, sizeof(path), "%s/log.%ld.%d", dir, (long)getpid(), rand());
    snprintf(v_level, sizeof(v_level), "DHELIX_LOG=%s", level);
    snprintf(v_subsys, sizeof(v_subsys), "DHELIX_LOG_SUBSYS=%s", subsys);
    snprintf(v_file, sizeof(v_file), "DHELIX_LOG_FILE=%s", path);
    const char *env[] = {v_level, v_subsys, v_file, NULL};
    assert_int_equal(dh_config_parse(&cfg, (char *const *)env), DH_OK);
    assert_int_equal(cfg.nwarnings, 0);
    assert_int_equal(dh__log_apply(&cfg), DH_OK);
}

static char *slurp(const char *p)
{
    FILE *f = fopen(p, "r");
    assert_non_null(f);
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static int count_lines(const char *text)
{
    int n = 0;
    for (; *text; text++)
        n += *text == '\n';
    return n;
}

static void test_line_format_and_rank(void **state)
{
    (void)state;
    setenv("RANK", "7", 1);
    log_to_file("warn", "all");
    DH_WARN(CONF, "value %d of %s", 42, "x");
    char want[512];
    snprintf(want, sizeof(want), "dhelix[7 %s:%ld:%ld] WARN conf: value 42 of x\n", host,
             (long)getpid(), (long)gettid());
    assert_string_equal(slurp(path), want);

    unsetenv("RANK");
    setenv("OMPI_COMM_WORLD_RANK", "3", 1);
    log_to_file("warn", "all");
    assert_string_equal(dh_log_rank(), "3");
    setenv("RANK", "not-a-number", 1);
    unsetenv("OMPI_COMM_WORLD_RANK");
    setenv("PMI_RANK", "5", 1);
    log_to_file("warn", "all");
    assert_string_equal(dh_log_rank(), "5");
    unsetenv("RANK");
    unsetenv("PMI_RANK");
    log_to_file("warn", "all");
    assert_string_equal(dh_log_rank(), "-");
}

static int evaluated;

static int side_effect(void)
{
    return ++evaluated;
}

static void test_level_filter(void **state)
{
    (void)state;
    log_to_file("warn", "all");
    evaluated = 0;
    DH_ERROR(CORE, "e");
    DH_WARN(CORE, "w");
    DH_INFO(CORE, "i %d", side_effect());
    DH_DEBUG(CORE, "d %d", side_effect());
    assert_int_equal(evaluated, 0); /* disabled messages do not evaluate their arguments */
    const char *text = slurp(path);
    assert_int_equal(count_lines(text), 2);
    assert_non_null(strstr(text, "ERROR core: e\n"));
    assert_non_null(strstr(text, "WARN core: w\n"));

    log_to_file("error", "all");
    DH_WARN(CORE, "w");
    DH_ERROR(CORE, "e");
    assert_int_equal(count_lines(slurp(path)), 1);

    log_to_file("debug", "all");
    DH_DEBUG(SCHED, "d %d", side_effect());
    assert_int_equal(evaluated, 1);
    assert_non_null(strstr(slurp(path), "DEBUG sched: d 1\n"));
}

/* Subsystems filter info and debug; errors and warnings always pass. */
static void test_subsystem_filter(void **state)
{
    (void)state;
    log_to_file("debug", "hook,plan");
    DH_INFO(HOOK, "hook info");
    DH_DEBUG(PLAN, "plan debug");
    DH_INFO(SCHED, "sched info");
    DH_DEBUG(NCCL, "nccl debug");
    DH_WARN(SCHED, "sched warn");
    DH_ERROR(NCCL, "nccl error");
    const char *text = slurp(path);
    assert_int_equal(count_lines(text), 4);
    assert_null(strstr(text, "sched info"));
    assert_null(strstr(text, "nccl debug"));
    assert_true(dh_log_enabled(DH_LOG_INFO, DH_SUB_HOOK));
    assert_false(dh_log_enabled(DH_LOG_INFO, DH_SUB_MEM));
}

static void test_parse_subsys(void **state)
{
    (void)state;
    uint32_t m = 0;
    char bad[32] = "";
    assert_int_equal(dh_log_parse_subsys("all", &m, bad, sizeof(bad)), DH_OK);
    assert_int_equal(m, DH_LOG_SUBSYS_ALL);
    assert_int_equal(dh_log_parse_subsys(" HOOK , sched ", &m, bad, sizeof(bad)), DH_OK);
    assert_int_equal(m, (1u << DH_SUB_HOOK) | (1u << DH_SUB_SCHED));
    assert_int_equal(dh_log_parse_subsys("hook,bogus", &m, bad, sizeof(bad)), DH_ERR_PARSE);
    assert_string_equal(bad, "bogus");
    assert_int_equal(dh_log_parse_subsys("", &m, bad, sizeof(bad)), DH_ERR_PARSE);
}

static void test_path_expansion(void **state)
{
    (void)state;
    dh_strbuf_t b = DH_STRBUF_INIT;
    assert_int_equal(dh_path_expand("/l/%h-%p-%%.log", "node1", 42, &b), DH_OK);
    assert_string_equal(dh_strbuf_str(&b), "/l/node1-42-%.log");
    dh_strbuf_free(&b);
    assert_int_equal(dh_path_expand("plain", "h", 1, &b), DH_OK);
    assert_string_equal(dh_strbuf_str(&b), "plain");
    dh_strbuf_free(&b);
    assert_int_equal(dh_path_expand("x%d", "h", 1, &b), DH_ERR_PARSE);
    dh_strbuf_free(&b);
    assert_int_equal(dh_path_expand("x%", "h", 1, &b), DH_ERR_PARSE);
    dh_strbuf_free(&b);

    char want[512];
    snprintf(want, sizeof(want), "%s/%s.%ld", dir, host, (long)getpid());
    assert_int_equal(dh_path_expand_self("%h.%p", &b), DH_OK);
    assert_non_null(strstr(want, dh_strbuf_str(&b)));
    dh_strbuf_free(&b);

    /* A log file named with the pattern lands where the pattern says. */
    char v_file[600];
    snprintf(v_file, sizeof(v_file), "DHELIX_LOG_FILE=%s/%%h.%%p", dir);
    const char *env[] = {v_file, NULL};
    assert_int_equal(dh_config_parse(&cfg, (char *const *)env), DH_OK);
    assert_int_equal(dh__log_apply(&cfg), DH_OK);
    DH_WARN(CORE, "to the pattern");
    assert_non_null(strstr(slurp(want), "WARN core: to the pattern\n"));
    unlink(want);
}

static void test_warn_once_and_log_line(void **state)
{
    (void)state;
    log_to_file("error", "all");
    for (int i = 0; i < 3; i++)
        DH_WARN_ONCE(CORE, "filtered %d", i);
    dh_log_line("asked for"); /* whatever the level */
    char want[256];
    snprintf(want, sizeof(want), "dhelix[- %s:%ld:%ld] asked for\n", host, (long)getpid(),
             (long)gettid());
    assert_string_equal(slurp(path), want);

    log_to_file("warn", "all");
    for (int i = 0; i < 3; i++)
        DH_WARN_ONCE(CORE, "once %d", i);
    const char *text = slurp(path);
    assert_int_equal(count_lines(text), 1);
    assert_non_null(strstr(text, "WARN core: once 0\n"));
}

static void test_long_message_is_cut(void **state)
{
    (void)state;
    log_to_file("warn", "all");
    static char big[5000];
    memset(big, 'x', sizeof(big) - 1);
    DH_WARN(CORE, "%s", big);
    const char *text = slurp(path);
    size_t len = strlen(text);
    assert_int_equal(count_lines(text), 1);
    assert_true(len <= 2048);
    assert_string_equal(text + len - 5, "x...\n");
}

/* An output that cannot be opened: stderr instead, with a warning there. */
static void test_unopenable_file_falls_back_to_stderr(void **state)
{
    (void)state;
    char errpath[600];
    snprintf(errpath, sizeof(errpath), "%s/stderr.txt", dir);
    fflush(stderr);
    int saved = dup(2);
    FILE *f = fopen(errpath, "w");
    assert_non_null(f);
    dup2(fileno(f), 2);
    const char *env[] = {"DHELIX_LOG_FILE=/nonexistent-dir/x.log", NULL};
    assert_int_equal(dh_config_parse(&cfg, (char *const *)env), DH_OK);
    assert_int_equal(dh__log_apply(&cfg), DH_ERR_IO);
    DH_WARN(CORE, "after");
    dup2(saved, 2);
    close(saved);
    fclose(f);
    const char *text = slurp(errpath);
    assert_non_null(strstr(text, "cannot open '/nonexistent-dir/x.log'"));
    assert_non_null(strstr(text, "WARN core: after\n"));
    unlink(errpath);
}

#define THREADS 4
#define LINES 250

static void *writer(void *arg)
{
    long t = (long)arg;
    for (int i = 0; i < LINES; i++)
        DH_INFO(SCHED, "thread %ld line %d %s", t, i, "payload-payload-payload-payload");
    return NULL;
}

/* Lines from several threads never mix: each is whole and carries its thread's id. */
static void test_threads_write_whole_lines(void **state)
{
    (void)state;
    log_to_file("info", "sched");
    pthread_t th[THREADS];
    for (long t = 0; t < THREADS; t++)
        assert_int_equal(pthread_create(&th[t], NULL, writer, (void *)t), 0);
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    char *text = slurp(path);
    assert_int_equal(count_lines(text), THREADS * LINES);
    int seen[THREADS] = {0};
    char *save = NULL;
    for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        long pid, tid, t;
        int i;
        char h[64];
        int n = sscanf(l, "dhelix[- %63[^:]:%ld:%ld] INFO sched: thread %ld line %d "
                       "payload-payload-payload-payload", h, &pid, &tid, &t, &i);
        if (n != 5 || pid != (long)getpid() || tid == pid || t < 0 || t >= THREADS)
            fail_msg("malformed line: '%s'", l);
        seen[t]++;
    }
    for (int t = 0; t < THREADS; t++)
        assert_int_equal(seen[t], LINES);
}

static int group_setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/dh_log_XXXXXX");
    if (mkdtemp(dir) == NULL)
        return -1;
    gethostname(host, sizeof(host));
    host[sizeof(host) - 1] = '\0';
    host[strcspn(host, ".")] = '\0';
    unsetenv("RANK");
    unsetenv("OMPI_COMM_WORLD_RANK");
    unsetenv("PMI_RANK");
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_line_format_and_rank),
        cmocka_unit_test(test_level_filter),
        cmocka_unit_test(test_subsystem_filter),
        cmocka_unit_test(test_parse_subsys),
        cmocka_unit_test(test_path_expansion),
        cmocka_unit_test(test_warn_once_and_log_line),
        cmocka_unit_test(test_long_message_is_cut),
        cmocka_unit_test(test_unopenable_file_falls_back_to_stderr),
        cmocka_unit_test(test_threads_write_whole_lines),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
