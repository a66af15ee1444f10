/*
 * gpu_probe.c: is there a real CUDA GPU here, and what is it? The gate of the "gpu" CTest
 * label and of scripts/gpu-validate.
 *
 *   gpu_probe [--json] [--min-devices N] [-- CMD [ARGS...]]
 *
 * Loads the real driver (libcuda.so.1), runtime (libcudart.so.13) and NCCL (libnccl.so.2)
 * with dlopen, so that it runs, and answers, on any machine: cuInit, cuDeviceGetCount and
 * device 0's name, compute capability, SM count and memory; cudaGetDeviceCount and the
 * runtime's version; ncclGetVersion. It refuses when the vgpu is loaded in the process (its
 * libraries have the real sonames), since the label is about the real libraries.
 *
 * Without a usable GPU (or with fewer than N devices) it prints
 *   gpu_probe: no CUDA GPU (<reason>)
 * on stderr and exits 77 (CTest's skip code), also with --json (which then reports
 * "gpu": false and the reason). With one it prints the JSON (--json) and, given a command,
 * replaces itself with it (execvp), so a test runs only where a GPU is; else exits 0.
 *
 * No CUDA header is needed: the few entry points it calls are declared here, so
 * scripts/gpu-validate can build it with a bare C compiler before anything else.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef DH_CUDA_LIBDIR
#define DH_CUDA_LIBDIR "/usr/local/cuda/lib64"
#endif

/* Driver attributes (cuda.h's CUdevice_attribute values). */
enum { ATTR_SM_COUNT = 16, ATTR_CC_MAJOR = 75, ATTR_CC_MINOR = 76 };

typedef struct info {
    int gpu, devices, cc_major, cc_minor, sms, driver, runtime, nccl;
    double mem_gib;
    char name[256], reason[1024], cudart_path[600], nccl_path[600];
} info_t;

static void why(info_t *in, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void why(info_t *in, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(in->reason, sizeof in->reason, fmt, ap);
    va_end(ap);
}

/* dlopen by soname, else from the toolkit's library directory; records the path used. */
static void *open_lib(const char *soname, char *path, size_t n)
{
    void *h = dlopen(soname, RTLD_NOW | RTLD_GLOBAL);
    snprintf(path, n, "%s", soname);
    if (!h) {
        snprintf(path, n, "%s/%s", DH_CUDA_LIBDIR, soname);
        h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    }
    return h;
}

static const char *cu_error(void *drv, int rc)
{
    int (*str)(int, const char **) = NULL;
    const char *s = NULL;
    *(void **)&str = dlsym(drv, "cuGetErrorString");
    return str && str(rc, &s) == 0 && s ? s : "?";
}

static void probe_driver(info_t *in)
{
    void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!drv) {
        why(in, "libcuda.so.1 (the NVIDIA driver) cannot be loaded: %s", dlerror());
        return;
    }
    int (*init)(unsigned) = NULL, (*count)(int *) = NULL, (*get)(int *, int) = NULL;
    int (*name)(char *, int, int) = NULL, (*attr)(int *, int, int) = NULL;
    int (*mem)(size_t *, int) = NULL, (*ver)(int *) = NULL;
    *(void **)&init = dlsym(drv, "cuInit");
    *(void **)&count = dlsym(drv, "cuDeviceGetCount");
    *(void **)&get = dlsym(drv, "cuDeviceGet");
    *(void **)&name = dlsym(drv, "cuDeviceGetName");
    *(void **)&attr = dlsym(drv, "cuDeviceGetAttribute");
    *(void **)&mem = dlsym(drv, "cuDeviceTotalMem_v2");
    *(void **)&ver = dlsym(drv, "cuDriverGetVersion");
    if (!init || !count || !get || !name || !attr || !mem || !ver) {
        why(in, "libcuda.so.1 lacks the basic driver entry points");
        return;
    }
    int rc = init(0), dev = 0;
    if (rc != 0) {
        why(in, "cuInit failed: CUresult %d (%s)", rc, cu_error(drv, rc));
        return;
    }
    ver(&in->driver);
    if ((rc = count(&in->devices)) != 0 || in->devices < 1) {
        why(in, "cuDeviceGetCount: CUresult %d, %d devices", rc, in->devices);
        return;
    }
    get(&dev, 0);
    name(in->name, (int)sizeof in->name, dev);
    attr(&in->cc_major, ATTR_CC_MAJOR, dev);
    attr(&in->cc_minor, ATTR_CC_MINOR, dev);
    attr(&in->sms, ATTR_SM_COUNT, dev);
    size_t bytes = 0;
    mem(&bytes, dev);
    in->mem_gib = (double)bytes / (1024.0 * 1024 * 1024);
    in->gpu = 1;
}

/* The runtime's answer, appended to the driver's reason when that already failed. */
static void probe_runtime(info_t *in)
{
    char prev[sizeof in->reason + 2];
    snprintf(prev, sizeof prev, "%s%s", in->reason, in->reason[0] ? "; " : "");
    void *rt = open_lib("libcudart.so.13", in->cudart_path, sizeof in->cudart_path);
    if (!rt) {
        in->gpu = 0;
        why(in, "%slibcudart.so.13 (the CUDA runtime) cannot be loaded: %s", prev, dlerror());
        return;
    }
    int (*count)(int *) = NULL, (*ver)(int *) = NULL;
    const char *(*ename)(int) = NULL;
    *(void **)&count = dlsym(rt, "cudaGetDeviceCount");
    *(void **)&ver = dlsym(rt, "cudaRuntimeGetVersion");
    *(void **)&ename = dlsym(rt, "cudaGetErrorName");
    int n = 0, rc = count ? count(&n) : -1;
    if (ver) ver(&in->runtime);
    if (rc != 0 || n < 1) {
        in->gpu = 0;
        why(in, "%scudaGetDeviceCount: error %d (%s), %d devices", prev, rc, ename && rc > 0 ? ename(rc) : "?", n);
    }
}

static void probe_nccl(info_t *in)
{
    void *h = open_lib("libnccl.so.2", in->nccl_path, sizeof in->nccl_path);
    int (*ver)(int *) = NULL;
    if (h) *(void **)&ver = dlsym(h, "ncclGetVersion");
    if (!ver || ver(&in->nccl) != 0) in->nccl = 0;
}

static void json_str(const char *k, const char *v, int last)
{
    printf("\"%s\": \"", k);
    for (const char *p = v; *p; p++) {
        if (*p == '"' || *p == '\\') putchar('\\');
        if ((unsigned char)*p >= 0x20) putchar(*p);
    }
    printf("\"%s", last ? "" : ", ");
}

static void print_json(const info_t *in)
{
    printf("{\"gpu\": %s, ", in->gpu ? "true" : "false");
    json_str("reason", in->reason, 0);
    json_str("name", in->name, 0);
    printf("\"devices\": %d, \"cc\": \"%d.%d\", \"sm_arch\": \"%d%d\", \"sm_count\": %d, \"memory_gib\": %.1f, ",
           in->devices, in->cc_major, in->cc_minor, in->cc_major, in->cc_minor, in->sms, in->mem_gib);
    printf("\"driver_version\": %d, \"runtime_version\": %d, \"nccl_version\": %d, ", in->driver, in->runtime,
           in->nccl);
    json_str("cudart", in->cudart_path, 0);
    json_str("nccl", in->nccl_path, 1);
    printf("}\n");
}

int main(int argc, char **argv)
{
    int json = 0, min_devices = 1, i = 1;
    for (; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = 1;
        else if (!strcmp(argv[i], "--min-devices") && i + 1 < argc) min_devices = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--")) {
            i++;
            break;
        } else {
            fprintf(stderr, "usage: gpu_probe [--json] [--min-devices N] [-- CMD [ARGS...]]\n");
            return 2;
        }
    }
    static info_t in;
    if (dlsym(RTLD_DEFAULT, "vgpu_register_kernel") || dlsym(RTLD_DEFAULT, "vgpu_profile")) {
        why(&in, "the vgpu is loaded in this process (LD_PRELOAD); the gpu label runs on the real libraries");
    } else {
        probe_driver(&in);
        probe_runtime(&in);
        probe_nccl(&in);
        if (in.gpu && in.devices < min_devices) {
            in.gpu = 0;
            why(&in, "%d device(s), this needs %d", in.devices, min_devices);
        }
    }
    if (json) print_json(&in);
    fflush(stdout);
    if (!in.gpu) {
        fprintf(stderr, "gpu_probe: no CUDA GPU (%s)\n", in.reason);
        return 77;
    }
    if (i < argc) {
        execvp(argv[i], argv + i);
        fprintf(stderr, "gpu_probe: cannot run %s\n", argv[i]);
        return 127;
    }
    return 0;
}
