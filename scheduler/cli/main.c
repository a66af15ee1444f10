/*
 * main.c: the `dhelix` command-line tool.
 *
 * Subcommands are listed once, in dh__commands; one that has no implementation yet is
 * still listed (so the usage shows what is coming) and answers "not available yet" with
 * exit status 2, distinct from a usage error or bad input (1). plan, show and validate live
 * in cmd_plan.c, cmd_show.c and cmd_validate.c (cli.h).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "common/config.h"
#include "common/log.h"
#include "common/status.h"

typedef int (*dh_cmd_fn)(int argc, char **argv);

typedef struct dh_cmd {
    const char *name;
    const char *args;
    const char *summary;
    dh_cmd_fn run;      /* NULL: not available yet */
} dh_cmd_t;

static int dh__cmd_config(int argc, char **argv);
static int dh__cmd_help(int argc, char **argv);
static int dh__cmd_pairs(int argc, char **argv);

static const dh_cmd_t dh__commands[] = {
    {"config", "[--markdown|--json]",
     "print every DHELIX_* variable with the value in effect and its source", dh__cmd_config},
    {"plan", "PROFILE... [-o PLAN] [options]", "build a Strand Interleaving plan from profiles",
     dh__cmd_plan},
    {"show", "PLAN [--json] [--svg OUT.svg]", "print a plan as tables, or draw it as SVG",
     dh__cmd_show},
    {"validate", "PLAN [PROFILE...]", "check a plan file, and that it fits the profiles",
     dh__cmd_validate},
    {"profile-pairs", "PROFILE -o PAIRS",
     "time operator pairs alone and co-running (runs dhelix-pairs; one process per rank)",
     dh__cmd_pairs},
    {"bench", "", "baseline against SI on the vgpu device profiles (scripts/bench)", NULL},
    {"help", "", "print this text", dh__cmd_help},
};
#define DH__NCOMMANDS (sizeof(dh__commands) / sizeof(dh__commands[0]))

static void dh__usage(FILE *out)
{
    fprintf(out, "usage: dhelix <command> [options]\n       dhelix --version\n\ncommands:\n");
    int width = 0;
    for (size_t i = 0; i < DH__NCOMMANDS; i++) {
        int w = (int)(strlen(dh__commands[i].name) + 1 + strlen(dh__commands[i].args));
        width = w > width ? w : width;
    }
    for (size_t i = 0; i < DH__NCOMMANDS; i++) {
        const dh_cmd_t *c = &dh__commands[i];
        char head[96];
        snprintf(head, sizeof(head), "%s %s", c->name, c->args);
        fprintf(out, "  %-*s  %s%s\n", width, head, c->summary,
                c->run ? "" : " (not available yet)");
    }
    fprintf(out, "\nconfig formats: text (default) for people, --json for programs, --markdown\n"
                 "for docs/configuration.md. `dhelix <command> --help` describes a command.\n"
                 "exit status: 0 success, 1 usage error or bad input, 2 command not available "
                 "yet.\n");
}

/* `dhelix profile-pairs ARGS` is `dhelix-pairs ARGS`, the program beside this one: it links
 * the CUDA libraries, which this tool does not. */
static int dh__cmd_pairs(int argc, char **argv)
{
    char self[4096], path[4200];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        fprintf(stderr, "dhelix profile-pairs: cannot find where dhelix is installed\n");
        return DH_EXIT_USAGE;
    }
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (slash)
        *slash = '\0';
    snprintf(path, sizeof path, "%s/dhelix-pairs", self);
    argv[0] = path;
    (void)argc;
    execv(path, argv);
    fprintf(stderr, "dhelix profile-pairs: cannot run %s: %s\n", path, strerror(errno));
    return DH_EXIT_USAGE;
}

static int dh__cmd_help(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    dh__usage(stdout);
    return DH_EXIT_OK;
}

/* Parses config's single option; -1 on a usage error. */
static int dh__config_format(int argc, char **argv, dh_fmt_t *fmt)
{
    *fmt = DH_FMT_TEXT;
    if (argc > 2)
        return -1;
    if (argc < 2 || strcmp(argv[1], "--text") == 0)
        return 0;
    if (strcmp(argv[1], "--json") == 0)
        *fmt = DH_FMT_JSON;
    else if (strcmp(argv[1], "--markdown") == 0)
        *fmt = DH_FMT_MARKDOWN;
    else
        return -1;
    return 0;
}

static int dh__cmd_config(int argc, char **argv)
{
    dh_fmt_t fmt;
    if (dh__config_format(argc, argv, &fmt) != 0) {
        fprintf(stderr, "usage: dhelix config [--text|--json|--markdown]\n");
        return DH_EXIT_USAGE;
    }
    /* Logging setup writes the configuration's warnings (to stderr by default). */
    dh_log_init();
    dh_strbuf_t out = DH_STRBUF_INIT;
    dh_status_t st = dh_config_render(dh_config(), fmt, &out);
    if (st == DH_OK && fwrite(dh_strbuf_str(&out), 1, out.len, stdout) != out.len)
        st = DH_ERR_IO;
    dh_strbuf_free(&out);
    if (st != DH_OK || fflush(stdout) != 0) {
        fprintf(stderr, "dhelix config: %s\n", dh_strerror(st != DH_OK ? st : DH_ERR_IO));
        return DH_EXIT_USAGE;
    }
    return DH_EXIT_OK;
}

static const dh_cmd_t *dh__find(const char *name)
{
    for (size_t i = 0; i < DH__NCOMMANDS; i++)
        if (strcmp(dh__commands[i].name, name) == 0)
            return &dh__commands[i];
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        dh__usage(stderr);
        return DH_EXIT_USAGE;
    }
    const char *name = argv[1];
    if (strcmp(name, "--version") == 0 || strcmp(name, "-V") == 0) {
        printf("dhelix %s\n", dh_version());
        return DH_EXIT_OK;
    }
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0)
        return dh__cmd_help(argc - 1, argv + 1);
    const dh_cmd_t *c = dh__find(name);
    if (c == NULL) {
        fprintf(stderr, "dhelix: unknown command '%s' (dhelix help lists them)\n", name);
        return DH_EXIT_USAGE;
    }
    if (c->run == NULL) {
        fprintf(stderr, "dhelix %s: not available yet (a later issue adds it)\n", name);
        return DH_EXIT_NOT_YET;
    }
    return c->run(argc - 1, argv + 1);
}
