/*
 * coverage_entry.c: entry points the shim has no deferred kind for and drains for through
 * its generated wrappers (scripts/gen-entries; issue 28): cuBLAS level 1 and 2 (gemv, dot
 * with a host and a device result), stream memory operations (cuStreamWriteValue32/64,
 * cuStreamWaitValue32/64, and the pre-11.7 forms of the 32-bit ones fetched with
 * cuGetProcAddress for an old version), 3D copies, copies to and from a __device__ variable, and a
 * pointer-array batched GEMM whose arrays an asynchronous copy fills just before the call
 * (NVIDIA's gemmBatched sample); and CUDA graphs (captured once, launched through the
 * runtime and the driver: a deferred kind of its own, ordered as a barrier). Each is called once per iteration on data that a kernel or
 * memset queued just before it wrote, so a shim that let the call run ahead of that work
 * would read stale bytes (or, for a wait, find its condition unmet: the vgpu then fails the
 * device), and the output would differ. See coverage.h.
 */
#define _GNU_SOURCE
#include "coverage.h"

#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

/* What nvcc's host stub calls for a __device__ variable (crt/host_runtime.h); the vgpu
 * gives the variable its device copy. */
void __cudaRegisterVar(void **fatCubinHandle, char *hostVar, char *deviceAddress,
                       const char *deviceName, int ext, size_t size, int constant, int global);

#define DRV(name) ((__typeof__(&name))drv_sym(#name))

static void *drv_sym(const char *name)
{
    void *p = dlsym(RTLD_DEFAULT, name);
    if (p == NULL)
        cov_die(__LINE__, "dlsym(%s) found nothing", name);
    return p;
}

enum { V = 16 };                 /* vectors of V floats, A is V x V */

/* The host shadow of a __device__ float[V]. */
static float cov_symbol[V];

static void register_symbol(void)
{
    static int done;
    if (!done) {
        __cudaRegisterVar(NULL, (char *)cov_symbol, (char *)cov_symbol, "cov_symbol", 0,
                          sizeof cov_symbol, 0, 0);
        done = 1;
    }
}

/* gemv and dot on vectors scaled from w by kernels queued just before. */
static int blas12(cublasHandle_t h, cudaStream_t s, void *ws, size_t ws_size, const float *w,
                  float *buf, float *out)
{
    float *a = buf, *x = a + V * V, *y = x + V, *r = y + V;
    int o = 0;
    cov_blas_prepare(h, s, ws, ws_size);
    cov_launch(L_RT, K_SCALE, s, a, w, 1.5, V * V);
    cov_launch(L_RT, K_SCALE, s, x, w + V * V, 0.5, V);
    cov_launch(L_RT, K_SCALE, s, y, w + V * V + V, -1.0, V);
    float alpha = 0.75f, beta = 0.25f;
    CK_BLAS(cublasSgemv_v2(h, CUBLAS_OP_N, V, V, &alpha, a, V, x, 1, &beta, y, 1));
    cov_scribble_f(&alpha, 9.0f);
    cov_launch(L_RT, K_SCALE, s, x, y, 2.0, V);
    CK_BLAS(cublasSgemv_v2(h, CUBLAS_OP_T, V, V, &alpha, a, V, x, 1, &beta, y, 1));
    float d = cov_sentinel();
    CK_BLAS(cublasSdot_v2(h, V, x, 1, y, 1, &d)); /* host result: the call blocks */
    out[o++] = d;
    cov_launch(L_RT, K_SCALE, s, x, y, -0.5, V);
    CK_BLAS(cublasSetPointerMode_v2(h, CUBLAS_POINTER_MODE_DEVICE));
    CK_BLAS(cublasSdot_v2(h, V, x, 1, y, 1, r));
    CK_BLAS(cublasSetPointerMode_v2(h, CUBLAS_POINTER_MODE_HOST));
    CK_RT(cudaMemcpyAsync(out + o, y, V * sizeof(float), cudaMemcpyDeviceToHost, s));
    o += V;
    CK_RT(cudaMemcpyAsync(out + o, r, sizeof(float), cudaMemcpyDeviceToHost, s));
    o += 1;
    return o;
}

/* cuStreamWriteValue32 / cuStreamWaitValue32 in the ABI before CUDA 11.7, as a program
 * built against an older toolkit gets them: cuGetProcAddress_v2 with version 11000 (the
 * driver picks the plain-named v1 export, cudaTypedefs.h PFN_cuStreamWriteValue32_v8000).
 * Under the shim the address must be its wrapper of that very export (wrap_gen_oldabi.c),
 * not the driver's function and not the wrapper of the _v2 form. */
typedef CUresult (*memop32_fn_t)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

static memop32_fn_t old_memop(const char *name)
{
    void *f = NULL, *cur = NULL;
    CUdriverProcAddressQueryResult q;
    CK_CU(cuGetProcAddress_v2(name, &f, 11000, CU_GET_PROC_ADDRESS_DEFAULT, &q));
    CK_CU(cuGetProcAddress_v2(name, &cur, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &q));
    if (f == NULL || f == cur)
        cov_die(__LINE__, "cuGetProcAddress_v2(%s, 11000): %p, the current form %p", name, f,
                cur);
    if (dlsym(RTLD_DEFAULT, "dh_group_set_enabled") != NULL) { /* under the shim */
        Dl_info info;
        if (dladdr(f, &info) == 0 || info.dli_fname == NULL ||
            strstr(info.dli_fname, "libdhelix_shim") == NULL ||
            info.dli_sname == NULL || strcmp(info.dli_sname, name) != 0)
            cov_die(__LINE__, "cuGetProcAddress_v2(%s, 11000) gave %s in %s, not the shim's "
                    "old-ABI wrapper", name, info.dli_sname ? info.dli_sname : "?",
                    info.dli_fname ? info.dli_fname : "?");
    }
    return (memop32_fn_t)f;
}

/* Stream memory operations on words that queued memsets set first. */
static int memops(cudaStream_t s, uint32_t *words, float *out)
{
    CUdeviceptr wd = (CUdeviceptr)words;
    CK_RT(cudaMemset(words, 0, 8 * sizeof(uint32_t)));
    CK_RT(cudaMemsetAsync(words, 0xff, 4 * sizeof(uint32_t), s));
    CK_CU(DRV(cuStreamWriteValue32_v2)((CUstream)s, wd, 7u, 0));
    CK_CU(DRV(cuStreamWriteValue64_v2)((CUstream)s, wd + 8, 0x0123456789abcdefull, 0));
    CK_CU(DRV(cuStreamWaitValue32_v2)((CUstream)s, wd, 7u, CU_STREAM_WAIT_VALUE_EQ));
    CK_RT(cudaMemsetAsync(words + 4, 0x01, sizeof(uint32_t), s));
    CK_CU(DRV(cuStreamWaitValue32_v2)((CUstream)s, wd + 16, 0x01010101u,
                                      CU_STREAM_WAIT_VALUE_EQ));
    /* The old ABI: word 5 is memset and then written, and waited on, through the v1 forms. */
    CK_RT(cudaMemsetAsync(words + 5, 0x03, sizeof(uint32_t), s));
    CK_CU(old_memop("cuStreamWriteValue32")((CUstream)s, wd + 20, 9u, 0));
    CK_CU(old_memop("cuStreamWaitValue32")((CUstream)s, wd + 20, 9u, CU_STREAM_WAIT_VALUE_EQ));
    CK_RT(cudaMemsetAsync(words + 6, 0x02, 2 * sizeof(uint32_t), s));
    CK_CU(DRV(cuStreamWaitValue64_v2)((CUstream)s, wd + 24, 0x0202020202020202ull,
                                      CU_STREAM_WAIT_VALUE_GEQ));
    uint32_t host[8];
    CK_RT(cudaMemcpyAsync(host, words, sizeof host, cudaMemcpyDeviceToHost, s));
    memcpy(out, host, sizeof host); /* the bits, not values */
    return 8;
}

/* A 3D copy between pitched regions, of a region a kernel queued just before wrote. */
static int copy3d(cudaStream_t s, const float *w, float *src, float *dst, float *out)
{
    enum { W = 6, PS = 8, PD = 10, H = 3, D = 2 };  /* width, pitches (floats), height, depth */
    cov_launch(L_RT, K_SCALE, s, src, w, 3.0, PS * H * D);
    struct cudaMemcpy3DParms p;
    memset(&p, 0, sizeof p);
    p.srcPtr = (struct cudaPitchedPtr){src, PS * sizeof(float), PS, H};
    p.dstPtr = (struct cudaPitchedPtr){dst, PD * sizeof(float), PD, H};
    p.srcPos = (struct cudaPos){sizeof(float), 0, 0};
    p.extent = (struct cudaExtent){W * sizeof(float), H, D};
    p.kind = cudaMemcpyDeviceToDevice;
    CK_RT(cudaMemcpy3DAsync(&p, s));
    memset(&p, 0x5a, sizeof p); /* the caller reuses its parameter block */
    float host[PD * H * D];
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++)
        host[i] = cov_sentinel();
    struct cudaMemcpy3DParms q;
    memset(&q, 0, sizeof q);
    q.srcPtr = (struct cudaPitchedPtr){dst, PD * sizeof(float), PD, H};
    q.dstPtr = (struct cudaPitchedPtr){host, PD * sizeof(float), PD, H};
    q.extent = (struct cudaExtent){W * sizeof(float), H, D};
    q.kind = cudaMemcpyDeviceToHost;
    CK_RT(cudaMemcpy3D(&q));
    int o = 0;
    for (int z = 0; z < D; z++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++)
                out[o++] = host[(z * H + y) * PD + x];
    return o;
}

/* Copies to and from the __device__ variable, of data kernels queued just before wrote. */
static int symbol(cudaStream_t s, const float *w, float *buf, float *out)
{
    register_symbol();
    cov_launch(L_RT, K_SCALE, s, buf, w, -2.0, V);
    CK_RT(cudaMemcpyToSymbolAsync(cov_symbol, buf, V * sizeof(float), 0,
                                  cudaMemcpyDeviceToDevice, s));
    cov_launch(L_RT, K_SCALE, s, buf, w + V, 0.25, V);
    CK_RT(cudaMemcpyFromSymbolAsync(buf + V, cov_symbol, 8 * sizeof(float), 0,
                                    cudaMemcpyDeviceToDevice, s));
    cov_launch(L_RT, K_SCALE, s, buf + 2 * V, buf + V, 2.0, 8);
    CK_RT(cudaMemcpyToSymbol(cov_symbol, buf + 2 * V, 8 * sizeof(float), 8 * sizeof(float),
                             cudaMemcpyDeviceToDevice));
    float host[V];
    CK_RT(cudaMemcpyFromSymbol(host, cov_symbol, sizeof host, 0, cudaMemcpyDeviceToHost));
    memcpy(out, host, sizeof host);
    CK_RT(cudaMemcpyAsync(out + V, buf, V * sizeof(float), cudaMemcpyDeviceToHost, s));
    return 2 * V;
}

/* cublasSgemmBatched whose pointer arrays an asynchronous copy on the same stream fills
 * just before the call, on matrices a kernel queued just before wrote. */
static int batched(cublasHandle_t h, cudaStream_t s, void *ws, size_t ws_size, const float *w,
                   float *m, void **parr, float *out)
{
    enum { E = 4 };
    cov_blas_prepare(h, s, ws, ws_size);
    cov_launch(L_RT, K_SCALE, s, m, w, 0.5, 2 * E * E);
    CK_RT(cudaMemsetAsync(parr, 0, 3 * sizeof(void *), s));
    void *hp[3] = {m, m + E * E, m + 2 * E * E};
    CK_RT(cudaMemcpyAsync(parr, hp, sizeof hp, cudaMemcpyHostToDevice, s));
    memset(hp, 0, sizeof hp); /* a pageable source, reused at once */
    float one = 1.0f, zero = 0.0f;
    CK_BLAS(cublasSgemmBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, E, E, E, &one,
                               (const float *const *)parr, E, (const float *const *)parr + 1,
                               E, &zero, (float *const *)parr + 2, E, 1));
    CK_RT(cudaMemcpyAsync(out, m + 2 * E * E, E * E * sizeof(float), cudaMemcpyDeviceToHost,
                          s));
    return E * E;
}

/* Two executable graphs, captured once on a stream of their own: through the runtime (a
 * kernel, a copy, a second kernel) and through the driver (one kernel). While a capture is
 * under way the shim passes everything through. */
enum { GN = 64 };
static struct {
    cudaStream_t s;
    float *src, *dst;             /* src: GN floats; dst: 2 * GN */
    cudaGraphExec_t rt;
    CUgraphExec drv;
} GR;

static void graphs_setup(void)
{
    if (GR.s)
        return;
    CK_RT(cudaStreamCreateWithFlags(&GR.s, cudaStreamNonBlocking));
    GR.src = cov_dev_alloc(GN);
    GR.dst = cov_dev_alloc(2 * GN);
    cudaGraph_t g;
    CK_RT(cudaStreamBeginCapture(GR.s, cudaStreamCaptureModeThreadLocal));
    cov_launch(L_RT, K_SCALE, GR.s, GR.dst, GR.src, 2.0, GN);
    CK_RT(cudaMemcpyAsync(GR.dst + GN, GR.src, GN * sizeof(float), cudaMemcpyDeviceToDevice,
                          GR.s));
    cov_launch(L_RT, K_ADD, GR.s, GR.dst, GR.dst + GN, GN);
    CK_RT(cudaStreamEndCapture(GR.s, &g));
    CK_RT(cudaGraphInstantiate(&GR.rt, g, 0));
    CK_RT(cudaGraphDestroy(g)); /* the executable graph keeps what it needs */
    CUgraph dg;
    CK_CU(DRV(cuStreamBeginCapture_v2)((CUstream)GR.s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    cov_launch(L_RT, K_SCALE, GR.s, GR.dst + GN, GR.dst, -0.5, GN);
    CK_CU(DRV(cuStreamEndCapture)((CUstream)GR.s, &dg));
    CK_CU(DRV(cuGraphInstantiateWithFlags)(&GR.drv, dg, 0));
    CK_CU(DRV(cuGraphDestroy)(dg));
}

/* The first launch comes from a thread of its own (one thread for the whole run, like a
 * framework's worker; the main thread waits for it, so the program's order is unchanged):
 * under two-strand execution a thread switch starts a phase, so the launch and the kernels
 * around it fall in different strands, and only the launch's barrier footprint orders them
 * (the test break graph_barrier removes it: shim.breaks). */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned asked, done;        /* guarded by mu */
    cudaStream_t s;              /* guarded by mu */
    int started;                 /* the main thread's */
} GT = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, NULL, 0};

static void *graph_worker(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&GT.mu);
    for (;;) {
        while (GT.asked == GT.done)
            pthread_cond_wait(&GT.cv, &GT.mu);
        cudaStream_t s = GT.s;
        pthread_mutex_unlock(&GT.mu);
        CK_RT(cudaGraphLaunch(GR.rt, s));
        pthread_mutex_lock(&GT.mu);
        GT.done = GT.asked;
        pthread_cond_broadcast(&GT.cv);
    }
    return NULL;
}

static void graph_launch_on_worker(cudaStream_t s)
{
    if (!GT.started) {
        pthread_t t;
        if (pthread_create(&t, NULL, graph_worker, NULL) != 0 || pthread_detach(t) != 0)
            cov_die(__LINE__, "the graph-launch thread could not start");
        GT.started = 1;
    }
    pthread_mutex_lock(&GT.mu);
    GT.s = s;
    GT.asked++;
    pthread_cond_broadcast(&GT.cv);
    while (GT.done != GT.asked)
        pthread_cond_wait(&GT.cv, &GT.mu);
    pthread_mutex_unlock(&GT.mu);
}

/* Graph launches on s between kernels queued just before and after them. */
static int graphs(cudaStream_t s, const float *w, float *tmp, float *out)
{
    graphs_setup();
    cov_launch(L_RT, K_SCALE, s, GR.src, w, 0.5, GN);
    graph_launch_on_worker(s);
    cov_launch(L_RT, K_SCALE, s, tmp, GR.dst, -1.0, 2 * GN);
    cov_launch(L_RT, K_SCALE, s, GR.src, w + GN, 0.25, GN);
    CK_RT(cudaGraphLaunch(GR.rt, s));
    CK_CU(DRV(cuGraphLaunch)(GR.drv, (CUstream)s));
    cov_launch(L_RT, K_ADD, s, tmp, GR.dst, 2 * GN);
    CK_RT(cudaMemcpyAsync(out, tmp + GN - 8, 16 * sizeof(float), cudaMemcpyDeviceToHost, s));
    return 16;
}

void cov_entry_extra(cublasHandle_t h, cudaStream_t s, void *ws, size_t ws_size,
                     const float *w, float *out)
{
    float *buf = cov_dev_alloc(1024);
    void **parr = NULL;
    CK_RT(cudaMalloc((void **)&parr, 3 * sizeof(void *)));
    for (int i = 0; i < COV_ENTRY_OUT; i++)
        out[i] = cov_sentinel();
    int o = 0;
    o += blas12(h, s, ws, ws_size, w, buf, out + o);
    o += memops(s, (uint32_t *)(buf + 512), out + o);
    o += copy3d(s, w, buf + 256, buf + 320, out + o);
    o += symbol(s, w, buf + 400, out + o);
    o += batched(h, s, ws, ws_size, w, buf + 600, parr, out + o);
    o += graphs(s, w, buf + 700, out + o);
    if (o > COV_ENTRY_OUT)
        cov_die(__LINE__, "cov_entry_extra wrote %d floats, room for %d", o, COV_ENTRY_OUT);
    CK_RT(cudaStreamSynchronize(s));
    CK_RT(cudaFree(parr));
    CK_RT(cudaFree(buf));
}
