/* prog_common.c: MPI, kernels and digests of the NCCL test program (see prog.h). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prog.h"
#include "vgpu.h"

np_world_t np;

void np_fail(const char *file, int line, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (np.failures++ < 20) {
        printf("FAIL rank %d: %s:%d: %s\n", np.rank, file, line, buf);
        fflush(stdout);
    }
}

/* ---- kernels ---- */

static void s_axpy(float *y, const float *x, float a, int n) { (void)y, (void)x, (void)a, (void)n; }
static void s_fill(float *y, int n, float base, float step) { (void)y, (void)n, (void)base, (void)step; }

#define ARG(l, i, T) (*(T *)(l)->args[i])

static void i_axpy(const vgpu_launch_t *l)
{
    float *y = ARG(l, 0, float *);
    const float *x = ARG(l, 1, const float *);
    float a = ARG(l, 2, float);
    for (int i = 0; i < ARG(l, 3, int); i++)
        y[i] = a * x[i] + y[i];
}

static void i_fill(const vgpu_launch_t *l)
{
    float *y = ARG(l, 0, float *);
    for (int i = 0; i < ARG(l, 1, int); i++)
        y[i] = ARG(l, 2, float) + ARG(l, 3, float) * (float)i;
}

static int fp_axpy(const vgpu_launch_t *l, vgpu_range_t *o, int max)
{
    size_t b = (size_t)ARG(l, 3, int) * sizeof(float);
    o[0] = (vgpu_range_t){ARG(l, 0, float *), b, 1};
    o[1] = (vgpu_range_t){ARG(l, 1, const float *), b, 0};
    return max >= 2 ? 2 : 0;
}

static int fp_fill(const vgpu_launch_t *l, vgpu_range_t *o, int max)
{
    o[0] = (vgpu_range_t){ARG(l, 0, float *), (size_t)ARG(l, 1, int) * sizeof(float), 1};
    return max >= 1 ? 1 : 0;
}

static double (*g_cost_bytes)(double);

/* Long enough to overlap a collective of the same size (20x the bytes at HBM speed). */
static double c_axpy(const vgpu_launch_t *l, double *sm)
{
    (void)sm;
    return g_cost_bytes(20.0 * 3 * (double)ARG(l, 3, int) * sizeof(float));
}

static double c_fill(const vgpu_launch_t *l, double *sm)
{
    (void)sm;
    return g_cost_bytes((double)ARG(l, 1, int) * sizeof(float));
}

static void reg(const void *stub, const char *name, const char *sig, vgpu_kernel_impl_fn impl,
                vgpu_kernel_cost_fn cost, vgpu_kernel_footprint_fn fp)
{
    int (*r)(const void *, const vgpu_kernel_desc_t *) =
        (int (*)(const void *, const vgpu_kernel_desc_t *))dlsym(RTLD_DEFAULT,
                                                                  "vgpu_register_kernel");
    vgpu_kernel_desc_t d;
    memset(&d, 0, sizeof d);
    d.name = name;
    d.nparams = (int)strlen(sig);
    for (int i = 0; i < d.nparams; i++)
        d.param_sizes[i] = sig[i] == 'p' ? sizeof(void *) : 4;
    d.impl = impl;
    d.cost = cost;
    d.footprint = fp;
    if (r == NULL || r(stub, &d) != 0) {
        fprintf(stderr, "nccl_prog: cannot register %s (not on the vgpu?)\n", name);
        exit(2);
    }
}

void np_axpy(float *y, const float *x, float a, int n, cudaStream_t s)
{
    void *args[] = {&y, &x, &a, &n};
    dim3 g = {1, 1, 1};
    NP_RT(cudaLaunchKernel((const void *)s_axpy, g, g, args, 0, s));
}

void np_fill(float *y, int n, float base, float step, cudaStream_t s)
{
    void *args[] = {&y, &n, &base, &step};
    dim3 g = {1, 1, 1};
    NP_RT(cudaLaunchKernel((const void *)s_fill, g, g, args, 0, s));
}

/* ---- setup ---- */

void np_init(int *argc, char ***argv)
{
    int provided;
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &np.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np.size);
    setvbuf(stdout, NULL, _IOLBF, 0);
    NP_RT(cudaSetDevice(0));
    *(void **)&g_cost_bytes = dlsym(RTLD_DEFAULT, "vgpu_cost_bytes");
    if (g_cost_bytes == NULL) {
        fprintf(stderr, "nccl_prog: vgpu_cost_bytes not found (not on the vgpu?)\n");
        exit(2);
    }
    reg((const void *)s_axpy, "np_axpy", "ppfi", i_axpy, c_axpy, fp_axpy);
    reg((const void *)s_fill, "np_fill", "piff", i_fill, c_fill, fp_fill);
}

int np_finish(void)
{
    int any = 0, mine = np.failures != 0;
    MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return any ? 1 : 0;
}

ncclUniqueId np_shared_id(MPI_Comm comm)
{
    ncclUniqueId id;
    int r;
    memset(&id, 0, sizeof id);
    MPI_Comm_rank(comm, &r);
    if (r == 0)
        NP_NCCL(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, comm);
    return id;
}

void *np_dev(size_t bytes)
{
    void *p = NULL;
    NP_RT(cudaMalloc(&p, bytes));
    NP_RT(cudaMemset(p, 0, bytes));
    return p;
}

uint64_t np_hash_dev(uint64_t h, const void *dev, size_t n)
{
    unsigned char *buf = malloc(n);
    if (buf == NULL)
        return h;
    NP_RT(cudaMemcpy(buf, dev, n, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++) {
        h ^= buf[i];
        h *= 0x100000001b3ull;
    }
    free(buf);
    return h;
}

void np_print_digest(uint64_t h)
{
    printf("digest rank=%d %016llx\n", np.rank, (unsigned long long)h);
}

int main(int argc, char **argv)
{
    np_init(&argc, &argv);
    static const struct {
        const char *name;
        void (*fn)(int, char **);
    } scen[] = {{"exact", np_exact}, {"pin", np_pin}, {"groups", np_groups},
                {"errors", np_errors}, {"order", np_order}};
    int done = 0;
    for (size_t i = 0; argc > 1 && i < sizeof scen / sizeof scen[0]; i++)
        if (strcmp(argv[1], scen[i].name) == 0) {
            scen[i].fn(argc - 2, argv + 2);
            done = 1;
        }
    if (!done)
        NP_CHECK(0, "usage: nccl_prog exact|pin|groups|errors|order [args]");
    return np_finish();
}
