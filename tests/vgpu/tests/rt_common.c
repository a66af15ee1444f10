/*
 * rt_common.c: test kernels, assertion helpers and the child-process runner shared by the
 * runtime/driver behaviour tests (see rt_common.h).
 */
#include "rt_common.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

vgt_probe_seen_t vgt_probe_seen;

/* ---- names for messages ---- */

const char *vgt_rt_name(cudaError_t e)
{
    const char *n = cudaGetErrorName(e);
    return n ? n : "(null name)";
}

/* Resolved at run time: a driver without cuGetErrorName must not stop a test from
 * reporting what else it found. */
const char *vgt_cu_name(CUresult r)
{
    CUresult (*get)(CUresult, const char **) = NULL;
    *(void **)&get = dlsym(RTLD_DEFAULT, "cuGetErrorName");
    const char *n = NULL;
    if (!get || get(r, &n) != CUDA_SUCCESS || !n)
        return "(unnamed CUresult)";
    return n;
}

/* ---- host stubs: never called, only their addresses matter ---- */

void vgt_k_fill(float *dst, float value, unsigned long long n, double cost_ns) { abort(); }
void vgt_k_add(const float *a, const float *b, float *c, unsigned long long n, double cost_ns)
{
    abort();
}
void vgt_k_copy(const float *src, float *dst, unsigned long long n, double cost_ns) { abort(); }
void vgt_k_spin(double cost_ns, double sm_fraction) { abort(); }
void vgt_k_touch(void *p, unsigned long long len, int write, double cost_ns) { abort(); }
void vgt_k_probe(int a, double b, char c, void *d) { abort(); }
void vgt_k_unregistered(float *dst) { abort(); }

/* ---- implementations, costs and footprints ---- */

#define ARG(l, i, type) (*(type const *)(l)->args[i])

static void fill_impl(const vgpu_launch_t *l)
{
    float *dst = ARG(l, 0, float *);
    float v = ARG(l, 1, float);
    unsigned long long n = ARG(l, 2, unsigned long long);
    for (unsigned long long i = 0; i < n; i++)
        dst[i] = v;
}

static double fill_cost(const vgpu_launch_t *l, double *sm) { return ARG(l, 3, double); }

static int fill_fp(const vgpu_launch_t *l, vgpu_range_t *out, int max)
{
    if (max < 1)
        return 0;
    out[0].ptr = ARG(l, 0, float *);
    out[0].len = ARG(l, 2, unsigned long long) * sizeof(float);
    out[0].write = 1;
    return 1;
}

static void add_impl(const vgpu_launch_t *l)
{
    const float *a = ARG(l, 0, const float *);
    const float *b = ARG(l, 1, const float *);
    float *c = ARG(l, 2, float *);
    unsigned long long n = ARG(l, 3, unsigned long long);
    for (unsigned long long i = 0; i < n; i++)
        c[i] = a[i] + b[i];
}

static double add_cost(const vgpu_launch_t *l, double *sm) { return ARG(l, 4, double); }

static int add_fp(const vgpu_launch_t *l, vgpu_range_t *out, int max)
{
    size_t bytes = ARG(l, 3, unsigned long long) * sizeof(float);
    if (max < 3)
        return 0;
    out[0] = (vgpu_range_t){ARG(l, 0, const float *), bytes, 0};
    out[1] = (vgpu_range_t){ARG(l, 1, const float *), bytes, 0};
    out[2] = (vgpu_range_t){ARG(l, 2, float *), bytes, 1};
    return 3;
}

static void copy_impl(const vgpu_launch_t *l)
{
    const float *src = ARG(l, 0, const float *);
    float *dst = ARG(l, 1, float *);
    unsigned long long n = ARG(l, 2, unsigned long long);
    memmove(dst, src, n * sizeof(float));
}

static double copy_cost(const vgpu_launch_t *l, double *sm) { return ARG(l, 3, double); }

static int copy_fp(const vgpu_launch_t *l, vgpu_range_t *out, int max)
{
    size_t bytes = ARG(l, 2, unsigned long long) * sizeof(float);
    if (max < 2)
        return 0;
    out[0] = (vgpu_range_t){ARG(l, 0, const float *), bytes, 0};
    out[1] = (vgpu_range_t){ARG(l, 1, float *), bytes, 1};
    return 2;
}

static double spin_cost(const vgpu_launch_t *l, double *sm)
{
    *sm = ARG(l, 1, double);
    return ARG(l, 0, double);
}

static double touch_cost(const vgpu_launch_t *l, double *sm) { return ARG(l, 3, double); }

static int touch_fp(const vgpu_launch_t *l, vgpu_range_t *out, int max)
{
    if (max < 1)
        return 0;
    out[0].ptr = ARG(l, 0, void *);
    out[0].len = ARG(l, 1, unsigned long long);
    out[0].write = ARG(l, 2, int) != 0;
    return 1;
}

static void probe_impl(const vgpu_launch_t *l)
{
    vgt_probe_seen_t *s = &vgt_probe_seen;
    s->calls++;
    snprintf(s->name, sizeof(s->name), "%s", l->name ? l->name : "(null)");
    for (int i = 0; i < 3; i++) {
        s->grid[i] = l->grid[i];
        s->block[i] = l->block[i];
    }
    s->shmem = l->shmem;
    s->nargs = l->nargs;
    s->a = ARG(l, 0, int);
    s->b = ARG(l, 1, double);
    s->c = ARG(l, 2, char);
    s->d = ARG(l, 3, void *);
}

static void reg(const void *func, const char *name, int nparams, const size_t *sizes,
                vgpu_kernel_impl_fn impl, vgpu_kernel_cost_fn cost,
                vgpu_kernel_footprint_fn fp)
{
    vgpu_kernel_desc_t d;
    memset(&d, 0, sizeof(d));
    d.name = name;
    d.nparams = nparams;
    memcpy(d.param_sizes, sizes, (size_t)nparams * sizeof(size_t));
    d.impl = impl;
    d.cost = cost;
    d.footprint = fp;
    int rc = vgpu_register_kernel(func, &d);
    if (rc != 0)
        fail_msg("vgpu_register_kernel(%s): expected 0, got %d", name, rc);
}

void vgt_register_kernels(void)
{
    static const size_t fill_sz[] = {8, 4, 8, 8};
    static const size_t add_sz[] = {8, 8, 8, 8, 8};
    static const size_t copy_sz[] = {8, 8, 8, 8};
    static const size_t spin_sz[] = {8, 8};
    static const size_t touch_sz[] = {8, 8, 4, 8};
    static const size_t probe_sz[] = {4, 8, 1, 8};
    reg((const void *)vgt_k_fill, "vgt_fill", 4, fill_sz, fill_impl, fill_cost, fill_fp);
    reg((const void *)vgt_k_add, "vgt_add", 5, add_sz, add_impl, add_cost, add_fp);
    reg((const void *)vgt_k_copy, "vgt_copy", 4, copy_sz, copy_impl, copy_cost, copy_fp);
    reg((const void *)vgt_k_spin, "vgt_spin", 2, spin_sz, NULL, spin_cost, NULL);
    reg((const void *)vgt_k_touch, "vgt_touch", 4, touch_sz, NULL, touch_cost, touch_fp);
    reg((const void *)vgt_k_probe, "vgt_probe", 4, probe_sz, probe_impl, NULL, NULL);
}

/* ---- launch helpers ---- */

static dim3 grid_for(size_t n)
{
    size_t blocks = (n + 255) / 256;
    dim3 g = {(unsigned)(blocks ? blocks : 1), 1, 1};
    return g;
}

static const dim3 block256 = {256, 1, 1};

cudaError_t vgt_fill(float *dst, float value, size_t n, double cost_ns, cudaStream_t s)
{
    unsigned long long nn = n;
    void *args[] = {&dst, &value, &nn, &cost_ns};
    return cudaLaunchKernel((const void *)vgt_k_fill, grid_for(n), block256, args, 0, s);
}

cudaError_t vgt_add(const float *a, const float *b, float *c, size_t n, double cost_ns,
                    cudaStream_t s)
{
    unsigned long long nn = n;
    void *args[] = {&a, &b, &c, &nn, &cost_ns};
    return cudaLaunchKernel((const void *)vgt_k_add, grid_for(n), block256, args, 0, s);
}

cudaError_t vgt_copy(const float *src, float *dst, size_t n, double cost_ns, cudaStream_t s)
{
    unsigned long long nn = n;
    void *args[] = {&src, &dst, &nn, &cost_ns};
    return cudaLaunchKernel((const void *)vgt_k_copy, grid_for(n), block256, args, 0, s);
}

cudaError_t vgt_spin(double cost_ns, double sm_fraction, cudaStream_t s)
{
    void *args[] = {&cost_ns, &sm_fraction};
    dim3 g = {1, 1, 1};
    return cudaLaunchKernel((const void *)vgt_k_spin, g, block256, args, 0, s);
}

cudaError_t vgt_touch(void *p, size_t len, int write, double cost_ns, cudaStream_t s)
{
    unsigned long long ll = len;
    void *args[] = {&p, &ll, &write, &cost_ns};
    dim3 g = {1, 1, 1};
    return cudaLaunchKernel((const void *)vgt_k_touch, g, block256, args, 0, s);
}

double vgt_elapsed_ns(cudaEvent_t a, cudaEvent_t b)
{
    float ms = -1.0f;
    VGT_OK(cudaEventElapsedTime(&ms, a, b));
    return (double)ms * 1e6;
}

/* Copies back through pinned memory: the pageable cases have tests of their own. */
void vgt_expect_device_floats(const float *dev, size_t n, float v)
{
    float *h = NULL;
    VGT_OK(cudaMallocHost((void **)&h, n * sizeof(float)));
    VGT_OK(cudaMemcpy(h, dev, n * sizeof(float), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++) {
        if (h[i] != v) {
            float got = h[i];
            VGT_OK(cudaFreeHost(h));
            fail_msg("device element %zu of %zu: expected %g, got %g", i, n, (double)v,
                     (double)got);
        }
    }
    VGT_OK(cudaFreeHost(h));
}

/* ---- child processes ---- */

static char **make_env(const char *const *changes)
{
    size_t n = 0, m = 0;
    while (environ[n])
        n++;
    while (changes && changes[m])
        m++;
    char **env = calloc(n + m + 1, sizeof(char *));
    if (!env)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int drop = 0;
        for (size_t j = 0; j < m; j++) {
            const char *c = changes[j];
            size_t klen = strcspn(c, "=");
            if (strncmp(environ[i], c, klen) == 0 && environ[i][klen] == '=')
                drop = 1;
        }
        if (!drop)
            env[k++] = environ[i];
    }
    for (size_t j = 0; j < m; j++)
        if (strchr(changes[j], '='))
            env[k++] = (char *)changes[j];
    env[k] = NULL;
    return env;
}

static char *slurp_fd(int fd)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return NULL;
    size_t len = (size_t)st.st_size;
    char *buf = malloc(len + 1);
    if (!buf)
        return NULL;
    size_t got = 0;
    while (got < len) {
        ssize_t r = pread(fd, buf + got, len - got, (off_t)got);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    buf[got] = '\0';
    return buf;
}

static int temp_file(void)
{
    const char *dir = getenv("TMPDIR");
    char path[4096];
    snprintf(path, sizeof(path), "%s/vgt-child-XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = mkstemp(path);
    if (fd >= 0)
        unlink(path);
    return fd;
}

int vgt_run_child(const char *scenario, const char *const *env, double timeout_s,
                  vgt_child_t *res)
{
    memset(res, 0, sizeof(*res));
    char self[4096];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (sl <= 0)
        return -1;
    self[sl] = '\0';
    char **envp = make_env(env);
    int ofd = temp_file(), efd = temp_file();
    if (!envp || ofd < 0 || efd < 0) {
        free(envp);
        if (ofd >= 0)
            close(ofd);
        if (efd >= 0)
            close(efd);
        return -1;
    }
    char *argv[] = {self, (char *)"--vgt-scenario", (char *)scenario, NULL};
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(ofd, 1);
        dup2(efd, 2);
        execve(self, argv, envp);
        _exit(127);
    }
    free(envp);
    if (pid < 0) {
        close(ofd);
        close(efd);
        return -1;
    }
    int status = 0, done = 0;
    struct timespec nap = {0, 5 * 1000 * 1000};
    for (double waited = 0; waited < timeout_s; waited += 0.005) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid) {
            done = 1;
            break;
        }
        nanosleep(&nap, NULL);
    }
    if (!done) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        res->exited = 0;
        res->sig = SIGKILL;
    } else if (WIFEXITED(status)) {
        res->exited = 1;
        res->code = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
        res->sig = WTERMSIG(status);
    }
    res->out = slurp_fd(ofd);
    res->err = slurp_fd(efd);
    close(ofd);
    close(efd);
    if (!done) {
        const char note[] = "\n[vgt: child timed out and was killed]\n";
        size_t el = res->err ? strlen(res->err) : 0;
        char *e2 = realloc(res->err, el + sizeof(note));
        if (e2) {
            memcpy(e2 + el, note, sizeof(note));
            res->err = e2;
        }
    }
    return 0;
}

void vgt_child_free(vgt_child_t *res)
{
    free(res->out);
    free(res->err);
    res->out = res->err = NULL;
}

int vgt_count_lines(const char *text, const char *prefix)
{
    int n = 0;
    size_t pl = strlen(prefix);
    const char *p = text;
    while (p && *p) {
        if (strncmp(p, prefix, pl) == 0)
            n++;
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    return n;
}

int vgt_scenario_dispatch(int argc, char **argv, const vgt_scenario_t *table)
{
    if (argc < 3 || strcmp(argv[1], "--vgt-scenario") != 0)
        return -1;
    for (const vgt_scenario_t *t = table; t && t->name; t++)
        if (strcmp(t->name, argv[2]) == 0) {
            int rc = t->run();
            fflush(stdout);
            fflush(stderr);
            return rc;
        }
    fprintf(stderr, "unknown scenario %s\n", argv[2]);
    return 2;
}

void vgt_test_no_hazards(void **state)
{
    vgpu_counters_t c;
    memset(&c, 0, sizeof(c));
    vgpu_counters(&c);
    if (c.hazards != 0)
        fail_msg("hazards reported by this program's race-free tests: expected 0, got %llu",
                 (unsigned long long)c.hazards);
}
