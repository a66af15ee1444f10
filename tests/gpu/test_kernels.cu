/*
 * test_kernels.cu: device code for the kernels that the shim's test programs register with
 * the vgpu as host functions (tests/shim/coverage_dev.c, tests/nccl/prog_common.c), with
 * the same parameter lists, so that those unchanged programs run on a real GPU under
 * libdh_gpu_kreg.so (kreg.c). Every kernel is a grid-stride loop (any launch shape works:
 * the coverage program launches 1 x 256 threads, nccl_prog 1 x 1), and every sum is taken
 * by one thread in a fixed order, so results are bitwise repeatable run to run: the test
 * programs compare runs with and without the shim bit for bit.
 */
#include <math.h>
#include <stdint.h>

#define LOOP(i, n) for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += blockDim.x * gridDim.x)
#define FIRST (blockIdx.x == 0 && threadIdx.x == 0)

__device__ static void spin_us(float us)
{
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while ((double)(t - t0) < 1e3 * (double)us);
}

/* ---- tests/shim/coverage_dev.c ---- */

extern "C" __global__ void gk_cov_scale(float *d, const float *s, float c, int n)
{
    LOOP(i, n) d[i] = c * s[i];
}

extern "C" __global__ void gk_cov_add(float *x, const float *y, int n)
{
    LOOP(i, n) x[i] += y[i];
}

extern "C" __global__ void gk_cov_add_bcast(float *x, const float *v, int rows, int cols)
{
    LOOP(i, rows * cols) x[i] += v[i % rows];
}

extern "C" __global__ void gk_cov_target(float *t, int n, int seed)
{
    LOOP(i, n) t[i] = 0.5f * sinf(0.01f * (float)(i % 997) + 0.37f * (float)seed);
}

extern "C" __global__ void gk_cov_loss(float *slot, const float *y, const float *t, int n, float inv)
{
    if (!FIRST) return;
    double acc = 0;
    for (int i = 0; i < n; i++) acc += (double)(y[i] - t[i]) * (double)(y[i] - t[i]);
    slot[0] = (float)(0.5 * acc * (double)inv);
}

extern "C" __global__ void gk_cov_mse_grad(float *dy, const float *y, const float *t, int n, float inv)
{
    LOOP(i, n) dy[i] = (y[i] - t[i]) * inv;
}

/* memmove: overlapping ranges are copied by one thread in the safe direction. */
extern "C" __global__ void gk_cov_copy(float *d, const float *s, int n)
{
    if (d + n <= s || s + n <= d) {
        LOOP(i, n) d[i] = s[i];
    } else if (FIRST && d != s) {
        if (d < s)
            for (int i = 0; i < n; i++) d[i] = s[i];
        else
            for (int i = n - 1; i >= 0; i--) d[i] = s[i];
    }
}

extern "C" __global__ void gk_cov_gelu_bwd(float *dp, const float *dh, const float *pre, int n)
{
    const float c = 0.7978845608f, a = 0.044715f;
    LOOP(i, n) {
        float x = pre[i], th = tanhf(c * (x + a * x * x * x));
        dp[i] = dh[i] * (0.5f * (1 + th) + 0.5f * x * (1 - th * th) * c * (1 + 3 * a * x * x));
    }
}

extern "C" __global__ void gk_cov_rowsum(float *g, const float *m, int rows, int cols)
{
    LOOP(r, rows) {
        float s = 0;
        for (int c = 0; c < cols; c++) s += m[(size_t)c * rows + r];
        g[r] += s;
    }
}

/* Takes us microseconds longer than its bytes, like its vgpu cost. */
extern "C" __global__ void gk_cov_sum(float *out, const float *in, int n, float us)
{
    if (!FIRST) return;
    float s = 0;
    for (int i = 0; i < n; i++) s += in[i];
    out[0] = s;
    if (us > 0) spin_us(us);
}

extern "C" __global__ void gk_cov_sgd(float *w, const float *g, float lr, int n)
{
    LOOP(i, n) w[i] -= lr * g[i];
}

/* ---- tests/nccl/prog_common.c ---- */

extern "C" __global__ void gk_np_axpy(float *y, const float *x, float a, int n)
{
    LOOP(i, n) y[i] = a * x[i] + y[i];
}

extern "C" __global__ void gk_np_fill(float *y, int n, float base, float step)
{
    LOOP(i, n) y[i] = base + step * (float)i;
}

/* ---- the table kreg.c reads ---- */

typedef struct gk_entry {
    const char *name; /* as registered with vgpu_register_kernel */
    const void *func;
    int nparams;
} gk_entry_t;

static const gk_entry_t table[] = {
    {"cov_scale", (const void *)gk_cov_scale, 4},       {"cov_add", (const void *)gk_cov_add, 3},
    {"cov_add_bcast", (const void *)gk_cov_add_bcast, 4}, {"cov_target", (const void *)gk_cov_target, 3},
    {"cov_loss", (const void *)gk_cov_loss, 5},         {"cov_mse_grad", (const void *)gk_cov_mse_grad, 5},
    {"cov_copy", (const void *)gk_cov_copy, 3},         {"cov_gelu_bwd", (const void *)gk_cov_gelu_bwd, 4},
    {"cov_rowsum", (const void *)gk_cov_rowsum, 4},     {"cov_sum", (const void *)gk_cov_sum, 4},
    {"cov_sgd", (const void *)gk_cov_sgd, 4},           {"np_axpy", (const void *)gk_np_axpy, 4},
    {"np_fill", (const void *)gk_np_fill, 4},
};

extern "C" const void *dh__gk_table(int *n)
{
    *n = (int)(sizeof table / sizeof table[0]);
    return table;
}
