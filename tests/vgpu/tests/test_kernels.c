/*
 * vgpu.kernels: registered host kernels through cudaLaunchKernel and cudaLaunchKernelExC,
 * argument capture at launch time, launch configuration checks, unregistered kernels,
 * cudaFuncGetParamInfo / cudaFuncGetAttributes, and kernels whose footprint lies outside
 * live memory (illegal address at execution, sticky; run in child processes).
 */
#include "rt_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const dim3 one = {1, 1, 1};
static const dim3 b256 = {256, 1, 1};

/* ---- child scenarios: each prints the codes it saw ---- */

static float outside[1024]; /* ordinary program memory, never a device allocation */

static int sc_illegal_static(void)
{
    vgt_register_kernels();
    for (int i = 0; i < 1024; i++)
        outside[i] = -1.0f;
    cudaError_t l = vgt_fill(outside, 5.0f, 1024, 10000, 0);
    cudaError_t s1 = cudaDeviceSynchronize();
    cudaError_t s2 = cudaDeviceSynchronize();
    cudaError_t le = cudaGetLastError();
    int untouched = 1;
    for (int i = 0; i < 1024; i++)
        if (outside[i] != -1.0f)
            untouched = 0;
    printf("launch=%d\nsync1=%d\nsync2=%d\nlast=%d\nuntouched=%d\n", (int)l, (int)s1, (int)s2,
           (int)le, untouched);
    return 0;
}

static int sc_illegal_straddle(void)
{
    vgt_register_kernels();
    char *d = NULL;
    if (cudaMalloc((void **)&d, 4096) != cudaSuccess)
        return 3;
    cudaError_t l = vgt_touch(d + 4096 - 8, 64, 1, 10000, 0);
    cudaError_t s1 = cudaDeviceSynchronize();
    cudaError_t s2 = cudaStreamSynchronize(0);
    printf("launch=%d\nsync1=%d\nsync2=%d\nuntouched=1\nlast=%d\n", (int)l, (int)s1, (int)s2,
           (int)cudaGetLastError());
    return 0;
}

static int sc_use_after_free_kernel(void)
{
    vgt_register_kernels();
    float *d = NULL;
    if (cudaMalloc((void **)&d, 4096) != cudaSuccess)
        return 3;
    if (cudaFree(d) != cudaSuccess)
        return 4;
    cudaError_t l = vgt_touch(d, 64, 0, 10000, 0);
    cudaError_t s1 = cudaDeviceSynchronize();
    cudaError_t s2 = cudaDeviceSynchronize();
    printf("launch=%d\nsync1=%d\nsync2=%d\nuntouched=1\nlast=%d\n", (int)l, (int)s1, (int)s2,
           (int)cudaGetLastError());
    return 0;
}

static int sc_unregistered(void)
{
    vgt_register_kernels();
    float *d = NULL;
    if (cudaMalloc((void **)&d, 4096) != cudaSuccess)
        return 3;
    void *args[] = {&d};
    cudaError_t l = cudaLaunchKernel((const void *)vgt_k_unregistered, one, b256, args, 0, 0);
    printf("launch=%d\n", (int)l);
    return 0;
}

static const vgt_scenario_t scenarios[] = {
    {"illegal_static", sc_illegal_static},
    {"illegal_straddle", sc_illegal_straddle},
    {"use_after_free_kernel", sc_use_after_free_kernel},
    {"unregistered", sc_unregistered},
    {NULL, NULL},
};

static int field_int(const char *out, const char *key)
{
    size_t kl = strlen(key);
    for (const char *p = out; p && *p;) {
        if (strncmp(p, key, kl) == 0 && p[kl] == '=')
            return atoi(p + kl + 1);
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    fail_msg("child output has no \"%s=\" line:\n%s", key, out ? out : "");
    return -1;
}

/* ---- tests ---- */

static int setup(void **state)
{
    vgt_register_kernels();
    return cudaSetDevice(0) == cudaSuccess ? 0 : -1;
}

static void test_launch_runs_implementation(void **state)
{
    const size_t n = 10000;
    float *a = NULL, *b = NULL, *c = NULL;
    VGT_OK(cudaMalloc((void **)&a, n * sizeof(float)));
    VGT_OK(cudaMalloc((void **)&b, n * sizeof(float)));
    VGT_OK(cudaMalloc((void **)&c, n * sizeof(float)));
    VGT_OK(vgt_fill(a, 1.5f, n, 5000, 0));
    VGT_OK(vgt_fill(b, 2.25f, n, 5000, 0));
    VGT_OK(vgt_add(a, b, c, n, 5000, 0));
    VGT_OK(cudaDeviceSynchronize());
    vgt_expect_device_floats(c, n, 3.75f);
    VGT_OK(vgt_copy(c, a, n, 5000, 0));
    VGT_OK(cudaDeviceSynchronize());
    vgt_expect_device_floats(a, n, 3.75f);
    VGT_OK(cudaGetLastError());
    VGT_OK(cudaFree(a));
    VGT_OK(cudaFree(b));
    VGT_OK(cudaFree(c));
}

static void test_arguments_copied_at_launch(void **state)
{
    const size_t n = 4096;
    float *d = NULL, *other = NULL;
    VGT_OK(cudaMalloc((void **)&d, n * sizeof(float)));
    VGT_OK(cudaMalloc((void **)&other, n * sizeof(float)));
    VGT_OK(cudaMemset(d, 0, n * sizeof(float)));
    VGT_OK(cudaMemset(other, 0, n * sizeof(float)));
    cudaStream_t s;
    VGT_OK(cudaStreamCreate(&s));
    VGT_OK(vgt_spin(2000000, 1.0, s)); /* the kernel will run well after the call returns */
    float *dst = d;
    float value = 7.0f;
    unsigned long long nn = n;
    double cost = 1000;
    void *args[] = {&dst, &value, &nn, &cost};
    VGT_OK(cudaLaunchKernel((const void *)vgt_k_fill, one, b256, args, 0, s));
    dst = other; /* the caller may reuse its argument storage at once */
    value = -7.0f;
    nn = 1;
    VGT_OK(cudaStreamSynchronize(s));
    vgt_expect_device_floats(d, n, 7.0f);
    vgt_expect_device_floats(other, n, 0.0f);
    VGT_OK(cudaStreamDestroy(s));
    VGT_OK(cudaFree(d));
    VGT_OK(cudaFree(other));
}

static void test_probe_sees_launch(void **state)
{
    memset(&vgt_probe_seen, 0, sizeof(vgt_probe_seen));
    int a = 42;
    double b = 2.5;
    char c = 'z';
    void *pd = (void *)0x1234;
    void *args[] = {&a, &b, &c, &pd};
    dim3 g = {3, 2, 1}, bl = {32, 4, 2};
    VGT_OK(cudaLaunchKernel((const void *)vgt_k_probe, g, bl, args, 128, 0));
    VGT_OK(cudaDeviceSynchronize());
    const vgt_probe_seen_t *s = &vgt_probe_seen;
    assert_int_equal(s->calls, 1);
    assert_string_equal(s->name, "vgt_probe");
    assert_int_equal(s->grid[0], 3);
    assert_int_equal(s->grid[1], 2);
    assert_int_equal(s->grid[2], 1);
    assert_int_equal(s->block[0], 32);
    assert_int_equal(s->block[1], 4);
    assert_int_equal(s->block[2], 2);
    assert_int_equal(s->shmem, 128);
    assert_int_equal(s->nargs, 4);
    assert_int_equal(s->a, 42);
    assert_true(s->b == 2.5);
    assert_int_equal(s->c, 'z');
    assert_ptr_equal(s->d, (void *)0x1234);
}

static void test_unregistered_kernel(void **state)
{
    float *d = NULL;
    VGT_OK(cudaMalloc((void **)&d, 4096));
    void *args[] = {&d};
    (void)cudaGetLastError(); /* start clean */
    VGT_EXPECT_RT(cudaErrorInvalidDeviceFunction,
                  cudaLaunchKernel((const void *)vgt_k_unregistered, one, b256, args, 0, 0));
    VGT_EXPECT_RT(cudaErrorInvalidDeviceFunction, cudaGetLastError());
    VGT_OK(cudaGetLastError());
    /* Not sticky. */
    VGT_OK(vgt_fill(d, 1.0f, 1024, 1000, 0));
    VGT_OK(cudaDeviceSynchronize());
    VGT_OK(cudaFree(d));

    /* The message names the kernel. */
    vgt_child_t c;
    assert_int_equal(vgt_run_child("unregistered", NULL, 60, &c), 0);
    if (!c.exited || c.code != 0 || !c.err || !strstr(c.err, "vgt_k_unregistered")) {
        VGT_CHILD_INFO(&c);
        fail_msg("launch of an unregistered kernel: expected exit 0 and a message naming "
                 "vgt_k_unregistered on stderr");
    }
    assert_int_equal(field_int(c.out, "launch"), cudaErrorInvalidDeviceFunction);
    vgt_child_free(&c);
}

static void test_launch_configuration_errors(void **state)
{
    float *d = NULL;
    VGT_OK(cudaMalloc((void **)&d, 4096));
    unsigned long long n = 16;
    float v = 1.0f;
    double cost = 1000;
    void *args[] = {&d, &v, &n, &cost};
    const void *f = (const void *)vgt_k_fill;
    /* Limits of every CUDA device since compute capability 3.0: 1024 threads per block,
     * block dimensions (1024, 1024, 64), grid dimensions (2^31 - 1, 65535, 65535). */
    static const struct {
        const char *what;
        dim3 grid, block;
    } bad[] = {
        {"block (0,1,1)", {1, 1, 1}, {0, 1, 1}},
        {"grid (0,1,1)", {0, 1, 1}, {256, 1, 1}},
        {"block (32,32,2): 2048 threads", {1, 1, 1}, {32, 32, 2}},
        {"block (1,1,65)", {1, 1, 1}, {1, 1, 65}},
        {"block (2048,1,1)", {1, 1, 1}, {2048, 1, 1}},
        {"grid (1,65536,1)", {1, 65536, 1}, {256, 1, 1}},
        {"grid (1,1,65536)", {1, 1, 65536}, {256, 1, 1}},
    };
    char report[1024] = "";
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cudaError_t e = cudaLaunchKernel(f, bad[i].grid, bad[i].block, args, 0, 0);
        if (e != cudaErrorInvalidConfiguration) {
            size_t l = strlen(report);
            snprintf(report + l, sizeof(report) - l, "  %s: got %s\n", bad[i].what,
                     vgt_rt_name(e));
        }
    }
    VGT_OK(cudaDeviceSynchronize());
    (void)cudaGetLastError();
    if (report[0])
        fail_msg("launches outside the device limits: expected cudaErrorInvalidConfiguration\n%s",
                 report);
    dim3 max_block = {1024, 1, 1};
    VGT_OK(cudaLaunchKernel(f, one, max_block, args, 0, 0));
    VGT_OK(cudaDeviceSynchronize());
    VGT_OK(cudaFree(d));
}

static void test_launch_kernel_ex(void **state)
{
    const size_t n = 2048;
    float *d = NULL;
    VGT_OK(cudaMalloc((void **)&d, n * sizeof(float)));
    cudaStream_t s;
    VGT_OK(cudaStreamCreate(&s));
    float v = 4.5f;
    unsigned long long nn = n;
    double cost = 2000;
    void *args[] = {&d, &v, &nn, &cost};
    cudaLaunchAttribute attr[1];
    memset(attr, 0, sizeof(attr));
    attr[0].id = cudaLaunchAttributePriority;
    attr[0].val.priority = 0;
    cudaLaunchConfig_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.gridDim = (dim3){8, 1, 1};
    cfg.blockDim = (dim3){256, 1, 1};
    cfg.dynamicSmemBytes = 0;
    cfg.stream = s;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    VGT_OK(cudaLaunchKernelExC(&cfg, (const void *)vgt_k_fill, args));
    VGT_OK(cudaStreamSynchronize(s));
    vgt_expect_device_floats(d, n, 4.5f);
    cfg.attrs = NULL;
    cfg.numAttrs = 0;
    v = 5.5f;
    VGT_OK(cudaLaunchKernelExC(&cfg, (const void *)vgt_k_fill, args));
    VGT_OK(cudaStreamSynchronize(s));
    vgt_expect_device_floats(d, n, 5.5f);
    VGT_EXPECT_RT(cudaErrorInvalidValue, cudaLaunchKernelExC(NULL, (const void *)vgt_k_fill, args));
    VGT_EXPECT_RT(cudaErrorInvalidDeviceFunction,
                  cudaLaunchKernelExC(&cfg, (const void *)vgt_k_unregistered, args));
    (void)cudaGetLastError();
    VGT_OK(cudaStreamDestroy(s));
    VGT_OK(cudaFree(d));
}

static void check_params(const void *f, const char *what, int n, const size_t *offs,
                         const size_t *sizes)
{
    for (int i = 0; i < n; i++) {
        size_t off = 999, sz = 999;
        VGT_OK(cudaFuncGetParamInfo(f, (size_t)i, &off, &sz));
        if (off != offs[i] || sz != sizes[i])
            fail_msg("%s parameter %d: expected offset %zu size %zu, got offset %zu size %zu",
                     what, i, offs[i], sizes[i], off, sz);
    }
    size_t off, sz;
    VGT_EXPECT_RT(cudaErrorInvalidValue, cudaFuncGetParamInfo(f, (size_t)n, &off, &sz));
    (void)cudaGetLastError();
}

static void test_func_get_param_info(void **state)
{
    static const size_t fill_off[] = {0, 8, 16, 24}, fill_sz[] = {8, 4, 8, 8};
    static const size_t add_off[] = {0, 8, 16, 24, 32}, add_sz[] = {8, 8, 8, 8, 8};
    static const size_t probe_off[] = {0, 8, 16, 24}, probe_sz[] = {4, 8, 1, 8};
    static const size_t spin_off[] = {0, 8}, spin_sz[] = {8, 8};
    check_params((const void *)vgt_k_fill, "vgt_fill", 4, fill_off, fill_sz);
    check_params((const void *)vgt_k_add, "vgt_add", 5, add_off, add_sz);
    check_params((const void *)vgt_k_probe, "vgt_probe", 4, probe_off, probe_sz);
    check_params((const void *)vgt_k_spin, "vgt_spin", 2, spin_off, spin_sz);
    size_t off, sz;
    cudaError_t e = cudaFuncGetParamInfo((const void *)vgt_k_unregistered, 0, &off, &sz);
    if (e == cudaSuccess)
        fail_msg("cudaFuncGetParamInfo of an unregistered kernel: expected an error, got "
                 "cudaSuccess");
    (void)cudaGetLastError();
}

static void test_func_get_attributes(void **state)
{
    struct cudaFuncAttributes fa;
    memset(&fa, 0, sizeof(fa));
    VGT_OK(cudaFuncGetAttributes(&fa, (const void *)vgt_k_fill));
    assert_true(fa.maxThreadsPerBlock > 0 && fa.maxThreadsPerBlock <= 1024);
    assert_true(fa.numRegs >= 0);
    VGT_EXPECT_RT(cudaErrorInvalidDeviceFunction,
                  cudaFuncGetAttributes(&fa, (const void *)vgt_k_unregistered));
    (void)cudaGetLastError();
}

/* A stub used only here, to check that registering again replaces the description. */
void vgt_k_swap(float *dst, unsigned long long n);
void vgt_k_swap(float *dst, unsigned long long n) { abort(); }

static void swap_impl_a(const vgpu_launch_t *l)
{
    float *d = *(float *const *)l->args[0];
    unsigned long long n = *(const unsigned long long *)l->args[1];
    for (unsigned long long i = 0; i < n; i++)
        d[i] = 100.0f;
}

static void swap_impl_b(const vgpu_launch_t *l)
{
    float *d = *(float *const *)l->args[0];
    unsigned long long n = *(const unsigned long long *)l->args[1];
    for (unsigned long long i = 0; i < n; i++)
        d[i] = 200.0f;
}

static void test_register_replaces_and_rejects(void **state)
{
    vgpu_kernel_desc_t desc;
    memset(&desc, 0, sizeof(desc));
    desc.name = "vgt_swap";
    desc.nparams = 2;
    desc.param_sizes[0] = 8;
    desc.param_sizes[1] = 8;
    desc.impl = swap_impl_a;
    assert_int_equal(vgpu_register_kernel((const void *)vgt_k_swap, &desc), 0);
    const size_t n = 64;
    float *d = NULL;
    VGT_OK(cudaMalloc((void **)&d, n * sizeof(float)));
    unsigned long long nn = n;
    void *args[] = {&d, &nn};
    VGT_OK(cudaLaunchKernel((const void *)vgt_k_swap, one, b256, args, 0, 0));
    VGT_OK(cudaDeviceSynchronize());
    vgt_expect_device_floats(d, n, 100.0f);
    desc.impl = swap_impl_b;
    assert_int_equal(vgpu_register_kernel((const void *)vgt_k_swap, &desc), 0);
    VGT_OK(cudaLaunchKernel((const void *)vgt_k_swap, one, b256, args, 0, 0));
    VGT_OK(cudaDeviceSynchronize());
    vgt_expect_device_floats(d, n, 200.0f);
    VGT_OK(cudaFree(d));

    assert_int_equal(vgpu_register_kernel(NULL, &desc), -1);
    assert_int_equal(vgpu_register_kernel((const void *)vgt_k_swap, NULL), -1);
    desc.nparams = VGPU_MAX_KERNEL_PARAMS + 1;
    assert_int_equal(vgpu_register_kernel((const void *)vgt_k_swap, &desc), -1);
    desc.nparams = -1;
    assert_int_equal(vgpu_register_kernel((const void *)vgt_k_swap, &desc), -1);
}

static void test_kernel_on_second_device(void **state)
{
    const size_t n = 512;
    VGT_OK(cudaSetDevice(1));
    float *d = NULL;
    VGT_OK(cudaMalloc((void **)&d, n * sizeof(float)));
    cudaStream_t s;
    VGT_OK(cudaStreamCreate(&s));
    VGT_OK(vgt_fill(d, 3.0f, n, 1000, s));
    VGT_OK(cudaStreamSynchronize(s));
    vgt_expect_device_floats(d, n, 3.0f);
    VGT_OK(cudaStreamDestroy(s));
    VGT_OK(cudaFree(d));
    VGT_OK(cudaSetDevice(0));
}

/* A launch into a stream of another device fails at the call with
 * cudaErrorInvalidResourceHandle, is the thread's last error and changes nothing; the same
 * stream still takes copies (CUDA allows those) and launches once its device is current. */
static void test_launch_into_other_device_stream(void **state)
{
    const size_t n = 256;
    VGT_OK(cudaSetDevice(1));
    float *d = NULL;
    VGT_OK(cudaMalloc((void **)&d, n * sizeof(float)));
    cudaStream_t s1;
    VGT_OK(cudaStreamCreate(&s1));
    VGT_OK(vgt_fill(d, 1.0f, n, 1000, s1));
    VGT_OK(cudaStreamSynchronize(s1));
    VGT_OK(cudaSetDevice(0));
    (void)cudaGetLastError();
    float v = 9.0f;
    unsigned long long nn = n;
    double cost = 1000;
    void *args[] = {&d, &v, &nn, &cost};
    VGT_EXPECT_RT(cudaErrorInvalidResourceHandle,
                  cudaLaunchKernel((const void *)vgt_k_fill, one, b256, args, 0, s1));
    VGT_EXPECT_RT(cudaErrorInvalidResourceHandle, cudaGetLastError());
    VGT_EXPECT_RT(cudaSuccess, cudaGetLastError());
    cudaLaunchConfig_t cfg = {.gridDim = one, .blockDim = b256, .stream = s1};
    VGT_EXPECT_RT(cudaErrorInvalidResourceHandle,
                  cudaLaunchKernelExC(&cfg, (const void *)vgt_k_fill, args));
    (void)cudaGetLastError();
    /* The current device's own streams are unaffected. */
    VGT_OK(vgt_spin(1000, 1.0, NULL));
    float two[2] = {2.0f, 2.0f};
    VGT_OK(cudaMemcpyAsync(d, two, sizeof two, cudaMemcpyHostToDevice, s1));
    VGT_OK(cudaStreamSynchronize(s1));
    float back[2] = {0, 0};
    VGT_OK(cudaMemcpy(back, d + 2, sizeof back, cudaMemcpyDeviceToHost));
    if (back[0] != 1.0f || back[1] != 1.0f)
        fail_msg("the failed launch wrote d[2..3]: expected 1.0 1.0, got %g %g", back[0],
                 back[1]);
    VGT_OK(cudaSetDevice(1));
    VGT_OK(cudaLaunchKernel((const void *)vgt_k_fill, one, b256, args, 0, s1));
    VGT_OK(cudaStreamSynchronize(s1));
    vgt_expect_device_floats(d, n, 9.0f);
    VGT_OK(cudaStreamDestroy(s1));
    VGT_OK(cudaFree(d));
    VGT_OK(cudaSetDevice(0));
}

static void run_illegal(const char *scenario, int expect_untouched)
{
    vgt_child_t c;
    assert_int_equal(vgt_run_child(scenario, NULL, 60, &c), 0);
    int ok = c.exited && c.code == 0;
    if (ok) {
        int l = field_int(c.out, "launch"), s1 = field_int(c.out, "sync1");
        int s2 = field_int(c.out, "sync2"), le = field_int(c.out, "last");
        int un = field_int(c.out, "untouched");
        if (l != cudaSuccess || s1 != cudaErrorIllegalAddress || s2 != cudaErrorIllegalAddress ||
            le != cudaErrorIllegalAddress || un != expect_untouched) {
            VGT_CHILD_INFO(&c);
            fail_msg("%s: expected launch=%d (asynchronous), sync1=sync2=last=%d "
                     "(cudaErrorIllegalAddress, sticky), untouched=%d; got launch=%d (%s) "
                     "sync1=%d (%s) sync2=%d (%s) last=%d untouched=%d",
                     scenario, cudaSuccess, cudaErrorIllegalAddress, expect_untouched, l,
                     vgt_rt_name((cudaError_t)l), s1, vgt_rt_name((cudaError_t)s1), s2,
                     vgt_rt_name((cudaError_t)s2), le, un);
        }
        if (!c.err || !strstr(c.err, "vgpu:")) {
            VGT_CHILD_INFO(&c);
            fail_msg("%s: expected a \"vgpu:\" message on stderr reporting the bad access",
                     scenario);
        }
    } else {
        VGT_CHILD_INFO(&c);
        fail_msg("%s: the child should exit 0, got exited=%d code=%d sig=%d", scenario,
                 c.exited, c.code, c.sig);
    }
    vgt_child_free(&c);
}

static void test_illegal_address_outside_allocations(void **state)
{
    run_illegal("illegal_static", 1);
}

static void test_illegal_address_straddling_end(void **state)
{
    run_illegal("illegal_straddle", 1);
}

static void test_kernel_use_after_free(void **state)
{
    run_illegal("use_after_free_kernel", 1);
}

int main(int argc, char **argv)
{
    int rc = vgt_scenario_dispatch(argc, argv, scenarios);
    if (rc >= 0)
        return rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_launch_runs_implementation),
        cmocka_unit_test(test_arguments_copied_at_launch),
        cmocka_unit_test(test_probe_sees_launch),
        cmocka_unit_test(test_unregistered_kernel),
        cmocka_unit_test(test_launch_configuration_errors),
        cmocka_unit_test(test_launch_kernel_ex),
        cmocka_unit_test(test_func_get_param_info),
        cmocka_unit_test(test_func_get_attributes),
        cmocka_unit_test(test_register_replaces_and_rejects),
        cmocka_unit_test(test_kernel_on_second_device),
        cmocka_unit_test(test_launch_into_other_device_stream),
        cmocka_unit_test(test_illegal_address_outside_allocations),
        cmocka_unit_test(test_illegal_address_straddling_end),
        cmocka_unit_test(test_kernel_use_after_free),
        cmocka_unit_test(vgt_test_no_hazards),
    };
    return cmocka_run_group_tests_name("vgpu.kernels", tests, setup, NULL);
}
