/*
 * vgpu.driver: the driver API face of the device: cuInit, versions, device queries,
 * current and primary contexts (and how the runtime follows them), cuGetProcAddress over
 * every entry point the vgpu's libcuda exports, cuLaunchKernel / cuLaunchKernelEx on
 * CUfunctions from cudaGetFuncBySymbol, cuFuncGetParamInfo, error names.
 */
#define _GNU_SOURCE
#include "rt_common.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static int setup(void **state)
{
    vgt_register_kernels();
    return 0;
}

/* Runs first: nothing has touched the last device yet, so its primary context is
 * inactive (PyTorch relies on this to avoid creating contexts on every device). */
static void test_primary_context_state_untouched(void **state)
{
    VGT_CU_OK(cuInit(0));
    int n = 0;
    VGT_CU_OK(cuDeviceGetCount(&n));
    assert_true(n >= 2);
    unsigned flags = 99;
    int active = 99;
    VGT_CU_OK(cuDevicePrimaryCtxGetState(n - 1, &flags, &active));
    if (active != 0)
        fail_msg("cuDevicePrimaryCtxGetState of device %d, never used: expected active 0, "
                 "got %d",
                 n - 1, active);
    CUcontext c = NULL;
    VGT_CU_OK(cuDevicePrimaryCtxRetain(&c, n - 1));
    assert_non_null(c);
    VGT_CU_OK(cuDevicePrimaryCtxGetState(n - 1, &flags, &active));
    assert_int_equal(active, 1);
    VGT_CU_OK(cuDevicePrimaryCtxRelease(n - 1));
}

static void test_init_and_version(void **state)
{
    VGT_CU_OK(cuInit(0));
    VGT_EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuInit(1)); /* flags must be 0 */
    int v = -1, rv = -1;
    VGT_CU_OK(cuDriverGetVersion(&v));
    VGT_OK(cudaDriverGetVersion(&rv));
    assert_int_equal(v, rv);
    if (v < CUDA_VERSION)
        fail_msg("cuDriverGetVersion: expected >= %d, got %d", CUDA_VERSION, v);
    VGT_EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuDriverGetVersion(NULL));
}

static void test_device_queries(void **state)
{
    int n = -1, rn = -1;
    VGT_CU_OK(cuDeviceGetCount(&n));
    VGT_OK(cudaGetDeviceCount(&rn));
    assert_int_equal(n, rn);
    for (int i = 0; i < n; i++) {
        CUdevice d = -1;
        VGT_CU_OK(cuDeviceGet(&d, i));
        struct cudaDeviceProp p;
        memset(&p, 0, sizeof(p));
        VGT_OK(cudaGetDeviceProperties(&p, i));
        char name[256];
        VGT_CU_OK(cuDeviceGetName(name, sizeof(name), d));
        assert_string_equal(name, p.name);
        int v = -1;
        VGT_CU_OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d));
        assert_int_equal(v, p.multiProcessorCount);
        VGT_CU_OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d));
        assert_int_equal(v, p.major);
        VGT_CU_OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d));
        assert_int_equal(v, p.minor);
        VGT_CU_OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, d));
        assert_int_equal(v, 32);
        size_t mem = 0;
        VGT_CU_OK(cuDeviceTotalMem(&mem, d));
        assert_int_equal(mem, p.totalGlobalMem);
        CUuuid u;
        VGT_CU_OK(cuDeviceGetUuid(&u, d));
        assert_memory_equal(u.bytes, p.uuid.bytes, sizeof(u.bytes));
    }
    CUuuid u0, u1;
    VGT_CU_OK(cuDeviceGetUuid(&u0, 0));
    VGT_CU_OK(cuDeviceGetUuid(&u1, 1));
    if (memcmp(u0.bytes, u1.bytes, sizeof(u0.bytes)) == 0)
        fail_msg("devices 0 and 1 have the same UUID");
    CUdevice d;
    VGT_EXPECT_CU(CUDA_ERROR_INVALID_DEVICE, cuDeviceGet(&d, n));
    VGT_EXPECT_CU(CUDA_ERROR_INVALID_DEVICE, cuDeviceGet(&d, -1));
    int v;
    VGT_EXPECT_CU(CUDA_ERROR_INVALID_DEVICE,
                  cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, n));
    VGT_EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuDeviceGetCount(NULL));
}

static void test_contexts_follow_runtime(void **state)
{
    VGT_OK(cudaSetDevice(0));
    VGT_OK(cudaFree(NULL)); /* the runtime makes device 0's primary context current */
    CUcontext cur = NULL, prim0 = NULL, prim2 = NULL;
    VGT_CU_OK(cuCtxGetCurrent(&cur));
    assert_non_null(cur);
    VGT_CU_OK(cuDevicePrimaryCtxRetain(&prim0, 0));
    assert_ptr_equal(cur, prim0);
    CUcontext again = NULL;
    VGT_CU_OK(cuDevicePrimaryCtxRetain(&again, 0));
    assert_ptr_equal(again, prim0); /* one primary context per device */
    VGT_CU_OK(cuDevicePrimaryCtxRelease(0));
    unsigned flags;
    int active = 0;
    VGT_CU_OK(cuDevicePrimaryCtxGetState(0, &flags, &active));
    assert_int_equal(active, 1);

    /* cudaSetDevice switches the current context to that device's primary context. */
    VGT_OK(cudaSetDevice(2));
    VGT_CU_OK(cuCtxGetCurrent(&cur));
    VGT_CU_OK(cuDevicePrimaryCtxRetain(&prim2, 2));
    assert_ptr_equal(cur, prim2);
    assert_ptr_not_equal(prim0, prim2);

    /* cuCtxSetCurrent to a primary context switches the runtime's current device. */
    VGT_CU_OK(cuCtxSetCurrent(prim0));
    int rd = -1;
    VGT_OK(cudaGetDevice(&rd));
    assert_int_equal(rd, 0);
    VGT_CU_OK(cuCtxGetCurrent(&cur));
    assert_ptr_equal(cur, prim0);

    VGT_EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuCtxGetCurrent(NULL));
    VGT_CU_OK(cuDevicePrimaryCtxRelease(0));
    VGT_CU_OK(cuDevicePrimaryCtxRelease(2));
    VGT_EXPECT_CU(CUDA_ERROR_INVALID_DEVICE, cuDevicePrimaryCtxRetain(&cur, 4096));

    /* No current context: cuCtxSetCurrent(NULL) unbinds it. */
    VGT_CU_OK(cuCtxSetCurrent(NULL));
    cur = (CUcontext)0x1;
    VGT_CU_OK(cuCtxGetCurrent(&cur));
    CUcontext after_unbind = cur;
    VGT_OK(cudaSetDevice(0)); /* back to a current context for the tests below */
    VGT_OK(cudaFree(NULL));
    if (after_unbind != NULL)
        fail_msg("cuCtxGetCurrent after cuCtxSetCurrent(NULL): expected NULL, got %p",
                 (void *)after_unbind);
}

/* ---- cuGetProcAddress ---- */

typedef struct syms {
    char **names;
    size_t n, cap;
    char path[4096];
} syms_t;

static int find_libcuda(struct dl_phdr_info *info, size_t size, void *arg)
{
    syms_t *s = arg;
    const char *name = info->dlpi_name;
    const char *base = name ? strrchr(name, '/') : NULL;
    if (base && strcmp(base + 1, "libcuda.so.1") == 0 && !s->path[0])
        snprintf(s->path, sizeof(s->path), "%s", name);
    return 0;
}

static void add_sym(syms_t *s, const char *n)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 256;
        s->names = realloc(s->names, s->cap * sizeof(char *));
        assert_non_null(s->names);
    }
    s->names[s->n++] = strdup(n);
}

/* Every defined function symbol starting with "cu" in the loaded libcuda.so.1. */
static void list_exports(syms_t *s)
{
    memset(s, 0, sizeof(*s));
    dl_iterate_phdr(find_libcuda, s);
    if (!s->path[0])
        fail_msg("libcuda.so.1 is not loaded");
    int fd = open(s->path, O_RDONLY);
    assert_true(fd >= 0);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    const unsigned char *img = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    assert_true(img != MAP_FAILED);
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)img;
    assert_int_equal(memcmp(eh->e_ident, ELFMAG, SELFMAG), 0);
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(img + eh->e_shoff);
    for (int i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_type != SHT_DYNSYM)
            continue;
        const Elf64_Sym *sym = (const Elf64_Sym *)(img + sh[i].sh_offset);
        const char *str = (const char *)(img + sh[sh[i].sh_link].sh_offset);
        size_t count = sh[i].sh_size / sizeof(Elf64_Sym);
        for (size_t k = 0; k < count; k++) {
            int bind = ELF64_ST_BIND(sym[k].st_info), type = ELF64_ST_TYPE(sym[k].st_info);
            const char *nm = str + sym[k].st_name;
            if (sym[k].st_shndx != SHN_UNDEF && type == STT_FUNC &&
                (bind == STB_GLOBAL || bind == STB_WEAK) && strncmp(nm, "cu", 2) == 0)
                add_sym(s, nm);
        }
    }
    munmap((void *)img, (size_t)st.st_size);
}

/* Splits "cuX_v3_ptsz" into base "cuX", version 3 and per-thread 1. */
static void split_name(const char *full, char *base, size_t cap, int *ver, int *ptsz)
{
    snprintf(base, cap, "%s", full);
    *ver = 1;
    *ptsz = 0;
    size_t l = strlen(base);
    if (l > 5 && (strcmp(base + l - 5, "_ptsz") == 0 || strcmp(base + l - 5, "_ptds") == 0)) {
        base[l - 5] = '\0';
        *ptsz = 1;
        l -= 5;
    }
    char *u = strrchr(base, '_');
    if (u && u[1] == 'v' && u[2] >= '0' && u[2] <= '9') {
        char *end = NULL;
        long v = strtol(u + 2, &end, 10);
        if (end && *end == '\0') {
            *ver = (int)v;
            *u = '\0';
        }
    }
}

static void test_get_proc_address_every_export(void **state)
{
    syms_t s;
    list_exports(&s);
    if (!strstr(s.path, "vgpu"))
        fail_msg("libcuda.so.1 in this process is %s, not the vgpu's", s.path);
    assert_true(s.n >= 10);
    void *h = dlopen(s.path, RTLD_NOW | RTLD_NOLOAD);
    assert_non_null(h);
    size_t bad = 0;
    char report[4096] = "";
    for (size_t i = 0; i < s.n; i++) {
        char base[256];
        int ver, ptsz;
        split_name(s.names[i], base, sizeof(base), &ver, &ptsz);
        cuuint64_t flags =
            ptsz ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : CU_GET_PROC_ADDRESS_DEFAULT;
        void *pfn = NULL;
        CUdriverProcAddressQueryResult qs = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
        CUresult r = cuGetProcAddress(base, &pfn, CUDA_VERSION, flags, &qs);
        const char *why = NULL;
        if (r != CUDA_SUCCESS || !pfn || qs != CU_GET_PROC_ADDRESS_SUCCESS)
            why = "not resolvable";
        if (!why && !ptsz) {
            /* The highest exported version of a legacy-stream entry point is the one
             * CUDA 13 code gets. */
            int best = 0;
            char bestname[256] = "";
            for (size_t j = 0; j < s.n; j++) {
                char b2[256];
                int v2, p2;
                split_name(s.names[j], b2, sizeof(b2), &v2, &p2);
                if (!p2 && strcmp(b2, base) == 0 && v2 > best) {
                    best = v2;
                    snprintf(bestname, sizeof(bestname), "%s", s.names[j]);
                }
            }
            if (pfn != dlsym(h, bestname))
                why = "resolves to another function than its highest version";
        }
        if (why) {
            bad++;
            size_t rl = strlen(report);
            snprintf(report + rl, sizeof(report) - rl, "  %s (asked as %s): %s, rc %d status %d\n",
                     s.names[i], base, why, (int)r, (int)qs);
        }
    }
    if (bad)
        fail_msg("%zu of %zu exported driver entry points fail through cuGetProcAddress:\n%s",
                 bad, s.n, report);
    dlclose(h);
    for (size_t i = 0; i < s.n; i++)
        free(s.names[i]);
    free(s.names);
}

static void test_get_proc_address_known(void **state)
{
    static const char *const need[] = {
        "cuInit", "cuDriverGetVersion", "cuDeviceGet", "cuDeviceGetCount",
        "cuDeviceGetAttribute", "cuDeviceGetName", "cuCtxGetCurrent", "cuCtxSetCurrent",
        "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxGetState", "cuGetProcAddress",
        "cuLaunchKernel", "cuLaunchKernelEx", "cuFuncGetParamInfo",
    };
    for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++) {
        void *pfn = NULL;
        CUdriverProcAddressQueryResult qs = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        CUresult r = cuGetProcAddress(need[i], &pfn, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &qs);
        if (r != CUDA_SUCCESS || !pfn || qs != CU_GET_PROC_ADDRESS_SUCCESS)
            fail_msg("cuGetProcAddress(%s): expected success, got rc %d (%s) pfn %p status %d",
                     need[i], (int)r, vgt_cu_name(r), pfn, (int)qs);
    }
    /* A resolved pointer is callable and behaves as the direct call. */
    CUresult (*get_count)(int *) = NULL;
    VGT_CU_OK(cuGetProcAddress("cuDeviceGetCount", (void **)&get_count, CUDA_VERSION,
                               CU_GET_PROC_ADDRESS_DEFAULT, NULL));
    int a = -1, b = -2;
    VGT_CU_OK(get_count(&a));
    VGT_CU_OK(cuDeviceGetCount(&b));
    assert_int_equal(a, b);
    /* Unknown symbols. */
    void *pfn = (void *)0x1;
    CUdriverProcAddressQueryResult qs = CU_GET_PROC_ADDRESS_SUCCESS;
    VGT_EXPECT_CU(CUDA_ERROR_NOT_FOUND,
                  cuGetProcAddress("cuNoSuchFunctionInAnyDriver", &pfn, CUDA_VERSION,
                                   CU_GET_PROC_ADDRESS_DEFAULT, &qs));
    assert_null(pfn);
    assert_int_equal(qs, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    VGT_EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
                  cuGetProcAddress(NULL, &pfn, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &qs));
    VGT_EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGetProcAddress("cuInit", NULL, CUDA_VERSION,
                                                              CU_GET_PROC_ADDRESS_DEFAULT, &qs));
}

/* ---- launches through the driver ---- */

static void test_cu_launch_kernel(void **state)
{
    VGT_OK(cudaSetDevice(0));
    cudaFunction_t fn = NULL;
    VGT_OK(cudaGetFuncBySymbol(&fn, (const void *)vgt_k_fill));
    assert_non_null(fn);
    cudaFunction_t fn2 = NULL;
    VGT_OK(cudaGetFuncBySymbol(&fn2, (const void *)vgt_k_fill));
    assert_ptr_equal(fn, fn2);
    const size_t n = 3000;
    float *d = NULL;
    VGT_OK(cudaMalloc((void **)&d, n * sizeof(float)));
    cudaStream_t s;
    VGT_OK(cudaStreamCreate(&s));
    float v = 6.25f;
    unsigned long long nn = n;
    double cost = 5000;
    void *args[] = {&d, &v, &nn, &cost};
    VGT_CU_OK(cuLaunchKernel((CUfunction)fn, 12, 1, 1, 256, 1, 1, 0, (CUstream)s, args, NULL));
    VGT_OK(cudaStreamSynchronize(s));
    vgt_expect_device_floats(d, n, 6.25f);

    CUlaunchAttribute at[1];
    memset(at, 0, sizeof(at));
    at[0].id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
    at[0].value.priority = 0;
    CUlaunchConfig cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.gridDimX = 12;
    cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = 256;
    cfg.blockDimY = cfg.blockDimZ = 1;
    cfg.hStream = (CUstream)s;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    v = 7.25f;
    VGT_CU_OK(cuLaunchKernelEx(&cfg, (CUfunction)fn, args, NULL));
    VGT_OK(cudaStreamSynchronize(s));
    vgt_expect_device_floats(d, n, 7.25f);
    cfg.numAttrs = 0;
    cfg.attrs = NULL;
    v = 8.25f;
    VGT_CU_OK(cuLaunchKernelEx(&cfg, (CUfunction)fn, args, NULL));
    VGT_OK(cudaStreamSynchronize(s));
    vgt_expect_device_floats(d, n, 8.25f);
    VGT_EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuLaunchKernelEx(NULL, (CUfunction)fn, args, NULL));
    VGT_EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
                  cuLaunchKernel((CUfunction)fn, 1, 1, 1, 0, 1, 1, 0, (CUstream)s, args, NULL));
    /* A stream of another device: the launch fails with CUDA_ERROR_INVALID_HANDLE (see
     * vg_stream_check_current for the sources) and writes nothing. */
    VGT_OK(cudaSetDevice(1));
    cudaStream_t other;
    VGT_OK(cudaStreamCreate(&other));
    VGT_OK(cudaSetDevice(0));
    v = 9.5f;
    VGT_EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuLaunchKernel((CUfunction)fn, 12, 1, 1, 256, 1, 1,
                                                            0, (CUstream)other, args, NULL));
    cfg.hStream = (CUstream)other;
    VGT_EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuLaunchKernelEx(&cfg, (CUfunction)fn, args, NULL));
    VGT_OK(cudaDeviceSynchronize());
    vgt_expect_device_floats(d, n, 8.25f);
    VGT_OK(cudaStreamDestroy(other));
    (void)cudaGetLastError();
    VGT_OK(cudaStreamDestroy(s));
    VGT_OK(cudaFree(d));

    cudaFunction_t none = NULL;
    if (cudaGetFuncBySymbol(&none, (const void *)vgt_k_unregistered) == cudaSuccess)
        fail_msg("cudaGetFuncBySymbol of an unregistered stub: expected an error, got "
                 "cudaSuccess (function %p)",
                 (void *)none);
    (void)cudaGetLastError();
}

static void test_cu_func_get_param_info(void **state)
{
    cudaFunction_t fn = NULL;
    VGT_OK(cudaGetFuncBySymbol(&fn, (const void *)vgt_k_probe));
    static const size_t off[] = {0, 8, 16, 24}, sz[] = {4, 8, 1, 8};
    for (size_t i = 0; i < 4; i++) {
        size_t o = 999, z = 999;
        VGT_CU_OK(cuFuncGetParamInfo((CUfunction)fn, i, &o, &z));
        if (o != off[i] || z != sz[i])
            fail_msg("vgt_probe parameter %zu: expected offset %zu size %zu, got %zu %zu", i,
                     off[i], sz[i], o, z);
    }
    size_t o, z;
    VGT_EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuFuncGetParamInfo((CUfunction)fn, 4, &o, &z));
}

/* Resolved with dlsym so that a driver without them fails this test, not the program. */
static void test_error_names(void **state)
{
    CUresult (*get_name)(CUresult, const char **) = NULL;
    CUresult (*get_string)(CUresult, const char **) = NULL;
    *(void **)&get_name = dlsym(RTLD_DEFAULT, "cuGetErrorName");
    *(void **)&get_string = dlsym(RTLD_DEFAULT, "cuGetErrorString");
    if (!get_name || !get_string)
        fail_msg("the driver does not export cuGetErrorName (%p) / cuGetErrorString (%p)",
                 *(void **)&get_name, *(void **)&get_string);
    const char *s = NULL;
    VGT_CU_OK(get_name(CUDA_ERROR_INVALID_VALUE, &s));
    assert_string_equal(s, "CUDA_ERROR_INVALID_VALUE");
    VGT_CU_OK(get_string(CUDA_ERROR_INVALID_VALUE, &s));
    assert_string_equal(s, "invalid argument");
    VGT_CU_OK(get_name(CUDA_ERROR_NOT_FOUND, &s));
    assert_string_equal(s, "CUDA_ERROR_NOT_FOUND");
    VGT_CU_OK(get_name(CUDA_SUCCESS, &s));
    assert_string_equal(s, "CUDA_SUCCESS");
    s = (const char *)0x1;
    VGT_EXPECT_CU(CUDA_ERROR_INVALID_VALUE, get_name((CUresult)987654, &s));
    assert_null(s);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_primary_context_state_untouched),
        cmocka_unit_test(test_init_and_version),
        cmocka_unit_test(test_device_queries),
        cmocka_unit_test(test_contexts_follow_runtime),
        cmocka_unit_test(test_get_proc_address_every_export),
        cmocka_unit_test(test_get_proc_address_known),
        cmocka_unit_test(test_cu_launch_kernel),
        cmocka_unit_test(test_cu_func_get_param_info),
        cmocka_unit_test(test_error_names),
        cmocka_unit_test(vgt_test_no_hazards),
    };
    return cmocka_run_group_tests_name("vgpu.driver", tests, setup, NULL);
}
