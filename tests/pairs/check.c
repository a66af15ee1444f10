/*
 * check.c: runs dhelix-pairs under mpirun on the vgpu and judges what it wrote.
 *
 * Usage: pairs_check MPIEXEC DHELIX_PAIRS PROFILE OUT.json NP [OPTION...]
 * (options are passed on to dhelix-pairs)
 *
 * The vgpu's device profiles model compute and communication slowing each other by about
 * 10% while they co-run (tests/vgpu/src/core/profile.c) and two GEMMs sharing the SMs, so
 * the compute||comm efficiency must come out in (0.5, 1] and compute||compute at or below
 * 0.1. The table dhelix-pairs prints goes to the test log.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static int failures;

#define CHECK(cond, ...)                                                                    \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                            \
            fprintf(stderr, __VA_ARGS__);                                                   \
            fputc('\n', stderr);                                                            \
            failures++;                                                                     \
        }                                                                                   \
    } while (0)

/* Runs the command, echoing its output; returns its exit status and keeps the output. */
static int run(const char *cmd, char **out)
{
    printf("$ %s\n", cmd);
    fflush(stdout);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    size_t n;
    while (buf && (n = fread(buf + len, 1, cap - len - 1, p)) > 0) {
        len += n;
        if (cap - len < 4096)
            buf = realloc(buf, cap *= 2);
    }
    int st = pclose(p);
    if (!buf)
        return -1;
    buf[len] = '\0';
    fputs(buf, stdout);
    *out = buf;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static double num(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : -1e300;
}

static void check_ops(json_t *ops)
{
    size_t i;
    json_t *op;
    CHECK(json_array_size(ops) == 11, "ops: %zu, want 6 GEMMs and 5 NCCL ops",
          json_array_size(ops));
    json_array_foreach(ops, i, op) {
        const char *name = json_string_value(json_object_get(op, "name"));
        CHECK(num(op, "solo_us") > 0, "op %zu (%s): solo_us %g, want > 0", i, name ? name : "?",
              num(op, "solo_us"));
    }
}

static void check_pairs(json_t *pairs)
{
    size_t i;
    json_t *p;
    CHECK(json_array_size(pairs) == 36, "pairs: %zu, want 6 x 5 compute||comm + 6 compute||compute",
          json_array_size(pairs));
    json_array_foreach(pairs, i, p) {
        double a = num(p, "a_us"), b = num(p, "b_us"), c = num(p, "corun_us");
        double e = num(p, "efficiency"), lo = a < b ? a : b, hi = a > b ? a : b;
        const char *sig = json_string_value(json_object_get(p, "a_sig"));
        CHECK(a > 0 && b > 0 && c > 0, "pair %zu: a %g b %g corun %g us, want all > 0", i, a, b, c);
        CHECK(c >= hi * 0.999, "pair %zu: corun %g us shorter than its longer op %g us", i, c, hi);
        double want = lo > 0 ? (a + b - c) / lo : 0;
        want = want > 1 ? 1 : want < -10 ? -10 : want;
        CHECK(lo > 0 && e > want - 1e-3 && e < want + 1e-3,
              "pair %zu: efficiency %g, want (a + b - corun) / min = %g", i, e, want);
        CHECK(sig && strlen(sig) == 16, "pair %zu: a_sig \"%s\", want 16 hex digits", i,
              sig ? sig : "(none)");
    }
}

static void check_classes(json_t *classes)
{
    size_t i;
    json_t *c;
    int seen = 0;
    json_array_foreach(classes, i, c) {
        const char *a = json_string_value(json_object_get(c, "a"));
        const char *b = json_string_value(json_object_get(c, "b"));
        double e = num(c, "efficiency");
        if (a && b && !strcmp(a, "compute") && !strcmp(b, "comm")) {
            seen |= 1;
            CHECK(e > 0.5 && e <= 1.0, "compute||comm efficiency %g, want in (0.5, 1]", e);
            CHECK(num(c, "n") == 30, "compute||comm pairs %g, want 30", num(c, "n"));
        } else if (a && b && !strcmp(a, "compute") && !strcmp(b, "compute")) {
            seen |= 2;
            CHECK(e <= 0.1, "compute||compute efficiency %g, want <= 0.1", e);
            CHECK(num(c, "n") == 6, "compute||compute pairs %g, want 6", num(c, "n"));
        }
    }
    CHECK(seen == 3, "classes: compute||comm %s, compute||compute %s", seen & 1 ? "yes" : "MISSING",
          seen & 2 ? "yes" : "MISSING");
}

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "usage: %s MPIEXEC DHELIX_PAIRS PROFILE OUT.json NP [OPTION...]\n",
                argv[0]);
        return 2;
    }
    char extra[1024] = "";
    for (int i = 6; i < argc; i++) {
        size_t n = strlen(extra);
        snprintf(extra + n, sizeof extra - n, " %s", argv[i]);
    }
    const char *out = argv[4];
    int np = atoi(argv[5]);
    char cmd[16384], *log = NULL;
    remove(out);
    /* stderr (notes, progress) apart from stdout (the tables): mpirun forwards the two
     * streams independently, so merged they would interleave at random. */
    char errpath[4200];
    snprintf(errpath, sizeof errpath, "%s.stderr", out);
    /* The preloaded libraries (the vgpu, a sanitizer runtime) go to the ranks only, not to
     * mpirun itself, whose own leaks a sanitizer build would report. */
    const char *pre = getenv("LD_PRELOAD");
    char prex[4600] = "";
    if (pre && *pre)
        snprintf(prex, sizeof prex, "-x LD_PRELOAD='%s'", pre);
    snprintf(cmd, sizeof cmd,
             "env -u LD_PRELOAD %s -n %d --oversubscribe --allow-run-as-root %s %s %s -o %s "
             "--rendezvous %s.rdv%s 2>%s",
             argv[1], np, prex, argv[2], argv[3], out, out, extra, errpath);
    int st = run(cmd, &log);
    char *errlog = NULL;
    snprintf(cmd, sizeof cmd, "cat %s", errpath);
    run(cmd, &errlog);
    CHECK(st == 0, "dhelix-pairs exited with %d", st);
    /* The profile's data-parallel all-reduce is over 4 ranks: skipped, and said so. */
    CHECK(log && strstr(log, "compute  comm"), "no class table on stdout");
    CHECK(errlog && strstr(errlog, "e.g. \"nccl AllReduce f32 1048576\""),
          "no note about the 4-rank communicator's all-reduce");
    CHECK(errlog && strstr(errlog, "skipped \"gemm n,n big-shape f16\""),
          "no note about the malformed GEMM name");
    CHECK(errlog && strstr(errlog, "pairs: 47/47"), "no progress lines (want 11 solo + 36 pairs)");
    /* A first gate shorter than the launches must be noticed and lengthened. */
    CHECK(!strstr(extra, "--gate-us") || (errlog && strstr(errlog, "repetitions redone")),
          "a short first gate (%s) was not redone", extra);
    free(log);
    free(errlog);
    json_error_t jerr;
    json_t *doc = json_load_file(out, 0, &jerr);
    CHECK(doc != NULL, "%s: %s (line %d)", out, jerr.text, jerr.line);
    if (doc) {
        const char *fmt = json_string_value(json_object_get(doc, "format"));
        CHECK(fmt && !strcmp(fmt, "dhelix-pairs"), "format \"%s\"", fmt ? fmt : "(none)");
        CHECK(num(doc, "version") == 1, "version %g, want 1", num(doc, "version"));
        CHECK(num(doc, "ranks") == np, "ranks %g, want %d", num(doc, "ranks"), np);
        CHECK(num(doc, "max_connections") == 1, "max_connections %g, want the profile's 1",
              num(doc, "max_connections"));
        check_ops(json_object_get(doc, "ops"));
        check_pairs(json_object_get(doc, "pairs"));
        check_classes(json_object_get(doc, "classes"));
        json_decref(doc);
    }
    printf("%s: %d failure(s)\n", failures ? "FAIL" : "ok", failures);
    return failures ? 1 : 0;
}
