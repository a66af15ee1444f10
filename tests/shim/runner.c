/* runner.c: see runner.h. */
#define _GNU_SOURCE
#include "runner.h"

#include <dirent.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

extern char **environ;

void dh_tmpdir_make(char *dir, size_t n)
{
    snprintf(dir, n, "%s/dh_shim_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (mkdtemp(dir) == NULL)
        fail_msg("mkdtemp(%s) failed", dir);
}

void dh_tmpdir_remove(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

const char *dh_test_env(const char *name, int required)
{
    const char *v = getenv(name);
    if ((v == NULL || *v == '\0') && required)
        fail_msg("%s is not set (run the test through ctest)", name);
    return v && *v ? v : NULL;
}

static int dh__env_dropped(const char *e)
{
    static const char *const drop[] = {"DHELIX_", "LD_PRELOAD=", "LD_LIBRARY_PATH=",
                                       "PYTORCH_CUDA_ALLOC_CONF=", "PYTORCH_ALLOC_CONF="};
    for (size_t i = 0; i < sizeof(drop) / sizeof(drop[0]); i++)
        if (strncmp(e, drop[i], strlen(drop[i])) == 0)
            return 1;
    return 0;
}

/* The child's environment; strings other than the added ones belong to environ. */
static char **dh__child_env(const char *preload, const char *const *env_add, char **owned,
                            int *nowned)
{
    size_t n = 0, k = 0;
    while (environ[n])
        n++;
    for (const char *const *a = env_add; a && *a; a++)
        n++;
    char **env = calloc(n + 3, sizeof(char *));
    assert_non_null(env);
    for (char **e = environ; *e; e++)
        if (!dh__env_dropped(*e))
            env[k++] = *e;
    const char *libdir = dh_test_env("DH_TEST_LIBDIR", 0);
    if (preload && asprintf(&owned[(*nowned)++], "LD_PRELOAD=%s", preload) > 0)
        env[k++] = owned[*nowned - 1];
    if (libdir && asprintf(&owned[(*nowned)++], "LD_LIBRARY_PATH=%s", libdir) > 0)
        env[k++] = owned[*nowned - 1];
    for (const char *const *a = env_add; a && *a; a++)
        env[k++] = (char *)*a;
    return env;
}

void dh_run(dh_run_t *r, const char *dir, char *const argv[], const char *preload,
            const char *const *env_add)
{
    char out[4096], err[4096], *owned[2] = {NULL, NULL};
    int nowned = 0;
    snprintf(out, sizeof(out), "%s/stdout", dir);
    snprintf(err, sizeof(err), "%s/stderr", dir);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    char **env = dh__child_env(preload, env_add, owned, &nowned);
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, env);
    posix_spawn_file_actions_destroy(&fa);
    free(env);
    for (int i = 0; i < nowned; i++)
        free(owned[i]);
    if (rc != 0)
        fail_msg("posix_spawn(%s): %s", argv[0], strerror(rc));
    int ws = 0;
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    r->pid = (long)pid;
    r->status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
    r->out = dh_read_file(out);
    r->err = dh_read_file(err);
    assert_non_null(r->out);
    assert_non_null(r->err);
}

void dh_run_free(dh_run_t *r)
{
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

char *dh_read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    for (size_t n; buf && (n = fread(buf + len, 1, cap - len - 1, f)) > 0;) {
        len += n;
        if (cap - len - 1 == 0) {
            char *nb = realloc(buf, cap *= 2);
            if (nb == NULL)
                free(buf);
            buf = nb;
        }
    }
    fclose(f);
    if (buf)
        buf[len] = '\0';
    return buf;
}

int dh_count_lines(const char *text, const char *needle)
{
    int count = 0;
    for (const char *line = text; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        const char *hit = memmem(line, len, needle, strlen(needle));
        count += hit != NULL;
        line = end ? end + 1 : NULL;
    }
    return count;
}

json_t *dh_stats_parse(const char *text)
{
    json_error_t e;
    json_t *root = json_loads(text, 0, &e);
    if (root == NULL)
        fail_msg("stats report is not one JSON object (%s at line %d): '%.200s'", e.text,
                 e.line, text);
    json_t *name = json_object_get(root, "table");
    if (!json_is_string(name) || strcmp(json_string_value(name), "dhelix_stats") != 0)
        fail_msg("stats report has no \"table\":\"dhelix_stats\": '%.200s'", text);
    if (!json_is_array(json_object_get(root, "rows")))
        fail_msg("stats report has no rows array");
    return root;
}

long long dh_stats_get(json_t *stats, const char *api, const char *field)
{
    size_t i;
    json_t *row;
    json_array_foreach(json_object_get(stats, "rows"), i, row) {
        const char *name = json_string_value(json_object_get(row, "api"));
        json_t *v = json_object_get(row, field);
        if (name && strcmp(name, api) == 0)
            return json_is_integer(v) ? (long long)json_integer_value(v) : -1;
    }
    return -1;
}

const char *dh_stats_meta(json_t *stats, const char *key)
{
    return json_string_value(json_object_get(json_object_get(stats, "meta"), key));
}

size_t dh_stats_rows(json_t *stats)
{
    return json_array_size(json_object_get(stats, "rows"));
}
