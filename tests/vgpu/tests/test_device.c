/*
 * vgpu.device: device enumeration and properties (per VGPU_DEVICE profile), the current
 * device, the runtime's error reporting and versions, cudaMemGetInfo.
 */
#include "rt_common.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- child scenarios ---- */

/* Prints what the device says about itself, one key=value per line. */
static int sc_profile(void)
{
    struct cudaDeviceProp p;
    memset(&p, 0, sizeof(p));
    if (cudaGetDeviceProperties(&p, 0) != cudaSuccess)
        return 3;
    int sm = -1, major = -1, minor = -1;
    cudaDeviceGetAttribute(&sm, cudaDevAttrMultiProcessorCount, 0);
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0);
    size_t fr = 0, total = 0;
    if (cudaMemGetInfo(&fr, &total) != cudaSuccess)
        return 4;
    const vgpu_profile_t *pr = vgpu_profile();
    printf("name=%s\n", p.name);
    printf("sm=%d\nsm_attr=%d\n", p.multiProcessorCount, sm);
    printf("mem=%zu\nmem_info=%zu\n", p.totalGlobalMem, total);
    printf("cc=%d.%d\ncc_attr=%d.%d\n", p.major, p.minor, major, minor);
    printf("prof_name=%s\nprof_sm=%d\nprof_mem=%zu\nprof_cc=%d.%d\n", pr ? pr->name : "",
           pr ? pr->sm_count : -1, pr ? pr->mem_bytes : 0, pr ? pr->cc_major : -1,
           pr ? pr->cc_minor : -1);
    return 0;
}

static int sc_two_devices(void)
{
    int n = -1;
    if (cudaGetDeviceCount(&n) != cudaSuccess)
        return 3;
    printf("count=%d\n", n);
    printf("set1=%d\n", (int)cudaSetDevice(1));
    printf("set2=%d\n", (int)cudaSetDevice(2));
    return 0;
}

static const vgt_scenario_t scenarios[] = {
    {"profile", sc_profile},
    {"two_devices", sc_two_devices},
    {NULL, NULL},
};

/* Value of "key=" in a child's output (static buffer); fails the test when absent. */
static const char *field(const char *out, const char *key)
{
    static char val[256];
    size_t kl = strlen(key);
    for (const char *p = out; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (strncmp(p, key, kl) == 0 && p[kl] == '=') {
            size_t vl = strcspn(p + kl + 1, "\n");
            if (vl >= sizeof(val))
                vl = sizeof(val) - 1;
            memcpy(val, p + kl + 1, vl);
            val[vl] = '\0';
            return val;
        }
    }
    fail_msg("child output has no \"%s=\" line:\n%s", key, out ? out : "");
    return "";
}

static int contains_ci(const char *hay, const char *needle)
{
    size_t nl = strlen(needle);
    for (const char *p = hay; *p; p++) {
        size_t i = 0;
        while (i < nl && p[i] && tolower((unsigned char)p[i]) == tolower((unsigned char)needle[i]))
            i++;
        if (i == nl)
            return 1;
    }
    return 0;
}

/* ---- tests ---- */

static void test_device_count(void **state)
{
    int n = -1;
    VGT_OK(cudaGetDeviceCount(&n));
    const char *env = getenv("VGPU_DEVICES");
    int want = env && *env ? atoi(env) : 8;
    assert_int_equal(n, want);
    VGT_EXPECT_RT(cudaErrorInvalidValue, cudaGetDeviceCount(NULL));
    (void)cudaGetLastError();
}

static void test_set_get_device(void **state)
{
    int n = 0, d = -1;
    VGT_OK(cudaGetDeviceCount(&n));
    for (int i = 0; i < n; i++) {
        VGT_OK(cudaSetDevice(i));
        VGT_OK(cudaGetDevice(&d));
        assert_int_equal(d, i);
    }
    VGT_OK(cudaSetDevice(1));
    VGT_EXPECT_RT(cudaErrorInvalidDevice, cudaSetDevice(n));
    VGT_EXPECT_RT(cudaErrorInvalidDevice, cudaSetDevice(-1));
    VGT_OK(cudaGetDevice(&d));
    assert_int_equal(d, 1); /* a failed cudaSetDevice leaves the current device alone */
    VGT_EXPECT_RT(cudaErrorInvalidValue, cudaGetDevice(NULL));
    (void)cudaGetLastError();
    VGT_OK(cudaSetDevice(0));
}

static void test_properties_match_profile(void **state)
{
    int n = 0;
    VGT_OK(cudaGetDeviceCount(&n));
    VGT_OK(cudaSetDevice(0));
    const vgpu_profile_t *pr = vgpu_profile();
    assert_non_null(pr);
    struct cudaDeviceProp p;
    memset(&p, 0, sizeof(p));
    VGT_OK(cudaGetDeviceProperties(&p, 0));
    assert_true(p.name[0] != '\0');
    assert_int_equal(p.multiProcessorCount, pr->sm_count);
    assert_int_equal(p.totalGlobalMem, pr->mem_bytes);
    assert_int_equal(p.major, pr->cc_major);
    assert_int_equal(p.minor, pr->cc_minor);
    assert_int_equal(p.warpSize, 32);
    assert_int_equal(p.maxThreadsPerBlock, 1024);

    int v = -1;
    VGT_OK(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, 0));
    assert_int_equal(v, p.multiProcessorCount);
    VGT_OK(cudaDeviceGetAttribute(&v, cudaDevAttrComputeCapabilityMajor, 0));
    assert_int_equal(v, p.major);
    VGT_OK(cudaDeviceGetAttribute(&v, cudaDevAttrComputeCapabilityMinor, 0));
    assert_int_equal(v, p.minor);
    VGT_OK(cudaDeviceGetAttribute(&v, cudaDevAttrWarpSize, 0));
    assert_int_equal(v, 32);
    VGT_OK(cudaDeviceGetAttribute(&v, cudaDevAttrMaxThreadsPerBlock, 0));
    assert_int_equal(v, p.maxThreadsPerBlock);
    /* PyTorch's cudaMallocAsync backend refuses devices without memory pools. */
    VGT_OK(cudaDeviceGetAttribute(&v, cudaDevAttrMemoryPoolsSupported, 0));
    assert_int_equal(v, 1);

    /* Every device of the process has the same profile. */
    struct cudaDeviceProp q;
    memset(&q, 0, sizeof(q));
    VGT_OK(cudaGetDeviceProperties(&q, n - 1));
    assert_string_equal(q.name, p.name);
    assert_int_equal(q.multiProcessorCount, p.multiProcessorCount);

    VGT_EXPECT_RT(cudaErrorInvalidDevice, cudaGetDeviceProperties(&q, n));
    VGT_EXPECT_RT(cudaErrorInvalidDevice, cudaDeviceGetAttribute(&v, cudaDevAttrWarpSize, n));
    (void)cudaGetLastError();
}

static void test_profiles(void **state)
{
    struct {
        const char *env, *marker;
        int sm_lo, sm_hi, major, minor;
        double mem_lo, mem_hi;
    } want[] = {
        {"a40", "A40", 84, 84, 8, 6, 44e9, 52e9},
        {"a800", "A800", 108, 108, 8, 0, 76e9, 86e9},
        {"h100", "H100", 114, 132, 9, 0, 76e9, 86e9},
        {"h200", "H200", 132, 132, 9, 0, 135e9, 152e9},
        {VGT_PROFILE_DIR "/h100-pcie-example.json", "h100-pcie", 114, 114, 9, 0, 76e9, 86e9},
    };
    enum { NPROF = sizeof want / sizeof want[0] };
    char names[NPROF][256];
    for (int i = 0; i < NPROF; i++) {
        char envv[512];
        snprintf(envv, sizeof(envv), "VGPU_DEVICE=%s", want[i].env);
        const char *env[] = {envv, NULL};
        vgt_child_t c;
        assert_int_equal(vgt_run_child("profile", env, 60, &c), 0);
        if (!c.exited || c.code != 0) {
            VGT_CHILD_INFO(&c);
            fail_msg("profile child for %s: expected exit 0, got exited=%d code=%d", envv,
                     c.exited, c.code);
        }
        const char *name = field(c.out, "name");
        assert_non_null(name);
        snprintf(names[i], sizeof(names[i]), "%s", name);
        if (!contains_ci(name, want[i].marker))
            fail_msg("%s: device name \"%s\" does not name the %s", envv, name, want[i].marker);
        int sm = atoi(field(c.out, "sm"));
        if (sm < want[i].sm_lo || sm > want[i].sm_hi)
            fail_msg("%s: SM count expected %d..%d, got %d", envv, want[i].sm_lo,
                     want[i].sm_hi, sm);
        assert_int_equal(atoi(field(c.out, "sm_attr")), sm);
        assert_int_equal(atoi(field(c.out, "prof_sm")), sm);
        double mem = strtod(field(c.out, "mem"), NULL);
        VGT_IN_RANGE(envv, want[i].mem_lo, want[i].mem_hi, mem);
        assert_true(strtod(field(c.out, "mem_info"), NULL) == mem);
        assert_true(strtod(field(c.out, "prof_mem"), NULL) == mem);
        char cc[16];
        snprintf(cc, sizeof(cc), "%d.%d", want[i].major, want[i].minor);
        assert_string_equal(field(c.out, "cc"), cc);
        assert_string_equal(field(c.out, "cc_attr"), cc);
        assert_string_equal(field(c.out, "prof_cc"), cc);
        vgt_child_free(&c);
    }
    for (int i = 0; i < NPROF; i++)
        for (int j = i + 1; j < NPROF; j++)
            if (strcmp(names[i], names[j]) == 0)
                fail_msg("profiles %s and %s give the same device name \"%s\"", want[i].env,
                         want[j].env, names[i]);
}

static void test_device_count_from_env(void **state)
{
    const char *env[] = {"VGPU_DEVICES=2", NULL};
    vgt_child_t c;
    assert_int_equal(vgt_run_child("two_devices", env, 60, &c), 0);
    if (!c.exited || c.code != 0)
        VGT_CHILD_INFO(&c);
    assert_true(c.exited);
    assert_int_equal(c.code, 0);
    assert_string_equal(field(c.out, "count"), "2");
    assert_int_equal(atoi(field(c.out, "set1")), cudaSuccess);
    assert_int_equal(atoi(field(c.out, "set2")), cudaErrorInvalidDevice);
    vgt_child_free(&c);
}

static void test_last_error(void **state)
{
    int n = 0, d = -1;
    VGT_OK(cudaGetDeviceCount(&n));
    VGT_OK(cudaGetLastError()); /* start clean */
    VGT_EXPECT_RT(cudaErrorInvalidDevice, cudaSetDevice(n + 3));
    VGT_EXPECT_RT(cudaErrorInvalidDevice, cudaPeekAtLastError());
    VGT_EXPECT_RT(cudaErrorInvalidDevice, cudaPeekAtLastError()); /* peek does not reset */
    VGT_OK(cudaGetDevice(&d));                                     /* success keeps it */
    VGT_EXPECT_RT(cudaErrorInvalidDevice, cudaGetLastError());
    VGT_OK(cudaGetLastError()); /* get resets */
    VGT_OK(cudaPeekAtLastError());

    /* The most recent error wins. */
    VGT_EXPECT_RT(cudaErrorInvalidDevice, cudaSetDevice(-5));
    VGT_EXPECT_RT(cudaErrorInvalidValue, cudaGetDevice(NULL));
    VGT_EXPECT_RT(cudaErrorInvalidValue, cudaGetLastError());
    VGT_OK(cudaGetLastError());
}

static void test_error_names_and_strings(void **state)
{
    static const struct {
        cudaError_t e;
        const char *name, *str;
    } t[] = {
        {cudaSuccess, "cudaSuccess", "no error"},
        {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
        {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
        {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
        {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle",
         "invalid resource handle"},
        {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
        {cudaErrorIllegalAddress, "cudaErrorIllegalAddress",
         "an illegal memory access was encountered"},
        {cudaErrorInvalidDeviceFunction, "cudaErrorInvalidDeviceFunction",
         "invalid device function"},
        {cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration",
         "invalid configuration argument"},
    };
    /* The strings are those of the real libcudart.so.13 (checked against it). */
    char report[4096] = "";
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        const char *name = cudaGetErrorName(t[i].e);
        const char *str = cudaGetErrorString(t[i].e);
        if (!name || strcmp(name, t[i].name) != 0 || !str || strcmp(str, t[i].str) != 0) {
            size_t l = strlen(report);
            snprintf(report + l, sizeof(report) - l,
                     "  %d: expected \"%s\" / \"%s\", got \"%s\" / \"%.50s\"\n", (int)t[i].e,
                     t[i].name, t[i].str, name ? name : "(null)", str ? str : "(null)");
        }
    }
    const char *un = cudaGetErrorName((cudaError_t)987654);
    const char *us = cudaGetErrorString((cudaError_t)987654);
    if (!un || strcmp(un, "unrecognized error code") != 0 || !us ||
        strcmp(us, "unrecognized error code") != 0) {
        size_t l = strlen(report);
        snprintf(report + l, sizeof(report) - l,
                 "  987654: expected \"unrecognized error code\" for both, got \"%s\" / \"%s\"\n",
                 un ? un : "(null)", us ? us : "(null)");
    }
    if (report[0])
        fail_msg("cudaGetErrorName / cudaGetErrorString:\n%s", report);
}

static void test_versions(void **state)
{
    int rt = -1, drv = -1, cu = -1;
    VGT_OK(cudaRuntimeGetVersion(&rt));
    VGT_OK(cudaDriverGetVersion(&drv));
    assert_int_equal(rt, CUDART_VERSION);
    if (drv < rt)
        fail_msg("driver version %d is older than the runtime %d", drv, rt);
    VGT_CU_OK(cuDriverGetVersion(&cu));
    assert_int_equal(cu, drv);
    VGT_EXPECT_RT(cudaErrorInvalidValue, cudaRuntimeGetVersion(NULL));
    VGT_EXPECT_RT(cudaErrorInvalidValue, cudaDriverGetVersion(NULL));
    (void)cudaGetLastError();
}

static void test_mem_get_info(void **state)
{
    VGT_OK(cudaSetDevice(0));
    VGT_OK(cudaFree(NULL)); /* the usual way to initialise the context */
    struct cudaDeviceProp p;
    memset(&p, 0, sizeof(p));
    VGT_OK(cudaGetDeviceProperties(&p, 0));
    size_t f0 = 0, t0 = 0, f1 = 0, t1 = 0, f2 = 0, t2 = 0;
    VGT_OK(cudaMemGetInfo(&f0, &t0));
    assert_int_equal(t0, p.totalGlobalMem);
    assert_true(f0 <= t0);
    const size_t sz = 64u << 20;
    void *d = NULL;
    VGT_OK(cudaMalloc(&d, sz));
    VGT_OK(cudaMemGetInfo(&f1, &t1));
    assert_int_equal(t1, t0);
    if (f1 + sz > f0)
        fail_msg("free memory after cudaMalloc(%zu): expected <= %zu, got %zu", sz, f0 - sz, f1);
    VGT_OK(cudaFree(d));
    VGT_OK(cudaMemGetInfo(&f2, &t2));
    assert_int_equal(f2, f0);
    VGT_EXPECT_RT(cudaErrorInvalidValue, cudaMemGetInfo(NULL, &t2));
    (void)cudaGetLastError();
}

static void test_device_synchronize_idle(void **state)
{
    VGT_OK(cudaDeviceSynchronize());
    VGT_OK(cudaGetLastError());
}

int main(int argc, char **argv)
{
    int rc = vgt_scenario_dispatch(argc, argv, scenarios);
    if (rc >= 0)
        return rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_device_count),
        cmocka_unit_test(test_set_get_device),
        cmocka_unit_test(test_properties_match_profile),
        cmocka_unit_test(test_profiles),
        cmocka_unit_test(test_device_count_from_env),
        cmocka_unit_test(test_last_error),
        cmocka_unit_test(test_error_names_and_strings),
        cmocka_unit_test(test_versions),
        cmocka_unit_test(test_mem_get_info),
        cmocka_unit_test(test_device_synchronize_idle),
        cmocka_unit_test(vgt_test_no_hazards),
    };
    return cmocka_run_group_tests_name("vgpu.device", tests, NULL, NULL);
}
