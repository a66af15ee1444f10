/*
 * test_nccl_single.c: the vgpu's NCCL within one process, without MPI (vgpu.nccl.single,
 * also run under the sanitizers): version and error strings, unique ids, argument errors
 * as NCCL returns them, groups that fail, one-rank communicators, ncclCommInitAll and
 * grouped ncclCommInitRank over two devices of one thread, representative mode (results
 * and times), and the names a trace gives collectives (in a child process, since the
 * trace is written at exit).
 */
#include "nccl_common.h"
#include "rt_common.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void test_version_and_strings(void **st)
{
    int v = 0;
    VNT_NCCL_OK(ncclGetVersion(&v));
    VNT_CHECK(v == NCCL_VERSION_CODE, "version: expected %d, got %d", NCCL_VERSION_CODE, v);
    VNT_NCCL(ncclInvalidArgument, ncclGetVersion(NULL));
    for (int r = 0; r <= ncclNumResults; r++)
        VNT_CHECK(ncclGetErrorString((ncclResult_t)r) && *ncclGetErrorString((ncclResult_t)r),
                  "no string for result %d", r);
    VNT_CHECK(strcmp(ncclGetErrorString(ncclSuccess), ncclGetErrorString(ncclInvalidUsage)),
              "success and invalid usage read alike");
    ncclUniqueId a, b;
    VNT_NCCL_OK(ncclGetUniqueId(&a));
    VNT_NCCL_OK(ncclGetUniqueId(&b));
    VNT_CHECK(memcmp(&a, &b, sizeof(a)) != 0, "two unique ids are equal");
    vnt_end();
}

static ncclComm_t one_rank_comm(void)
{
    ncclUniqueId id;
    ncclComm_t c = NULL;
    VNT_NCCL_OK(ncclGetUniqueId(&id));
    VNT_NCCL_OK(ncclCommInitRank(&c, 1, id, 0));
    return c;
}

/* Every check NCCL makes on arguments, and how a failing call spoils its group. */
static void test_argument_errors(void **st)
{
    ncclComm_t c = one_rank_comm();
    float *d = vnt_dev_alloc(64 * sizeof(float)), host[4] = {0};
    ncclUniqueId zero;
    memset(&zero, 0, sizeof(zero));
    ncclComm_t x = NULL;
    VNT_NCCL(ncclInvalidArgument, ncclCommInitRank(&x, 1, zero, 0));      /* not a vgpu id */
    VNT_NCCL(ncclInvalidArgument, ncclCommInitRank(NULL, 1, zero, 0));
    VNT_NCCL(ncclInvalidArgument, ncclCommInitRank(&x, 2, zero, 2));      /* rank >= nranks */
    VNT_NCCL(ncclInvalidArgument, ncclAllReduce(d, d, 4, ncclFloat32, ncclSum, NULL, 0));
    VNT_NCCL(ncclInvalidArgument, ncclAllReduce(NULL, d, 4, ncclFloat32, ncclSum, c, 0));
    VNT_NCCL(ncclInvalidArgument, ncclAllReduce(d, NULL, 4, ncclFloat32, ncclSum, c, 0));
    VNT_NCCL_OK(ncclAllReduce(NULL, NULL, 0, ncclFloat32, ncclSum, c, 0)); /* nothing to do */
    VNT_NCCL(ncclInvalidArgument, ncclAllReduce(d, d, 4, ncclNumTypes, ncclSum, c, 0));
    VNT_NCCL(ncclInvalidArgument, ncclAllReduce(d, d, 4, (ncclDataType_t)-1, ncclSum, c, 0));
    VNT_NCCL(ncclInvalidArgument, ncclAllReduce(d, d, 4, ncclFloat32, ncclNumOps, c, 0));
    VNT_NCCL(ncclInvalidArgument, ncclReduceScatter(d, d, 4, ncclFloat32, (ncclRedOp_t)-1, c, 0));
    VNT_NCCL(ncclInvalidArgument, ncclBroadcast(d, d, 4, ncclFloat32, 1, c, 0));
    VNT_NCCL(ncclInvalidArgument, ncclReduce(d, d, 4, ncclFloat32, ncclSum, -1, c, 0));
    VNT_NCCL(ncclInvalidArgument, ncclSend(d, 4, ncclFloat32, 1, c, 0));
    VNT_NCCL(ncclInvalidArgument, ncclRecv(d, 4, ncclFloat32, -1, c, 0));
    VNT_NCCL(ncclInvalidArgument, ncclAllGather(host, d, 4, ncclFloat32, c, 0)); /* pageable */
    float *gone = vnt_dev_alloc(16);
    VNT_CUDA_OK(cudaFree(gone));
    VNT_NCCL(ncclInvalidArgument, ncclAllReduce(gone, gone, 4, ncclFloat32, ncclSum, c, 0));
    VNT_CHECK(strstr(ncclGetLastError(c), "use after free") != NULL, "last error: %s",
              ncclGetLastError(c));
    VNT_NCCL(ncclInvalidUsage, ncclGroupEnd());

    /* A bad call inside a group: ncclGroupEnd returns its error and submits nothing. */
    VNT_CUDA_OK(cudaMemset(d, 0, 64 * sizeof(float)));
    VNT_CUDA_OK(cudaMemset(d, 0x3f, 4)); /* a nonzero source */
    VNT_NCCL_OK(ncclGroupStart());
    VNT_NCCL_OK(ncclAllReduce(d, d + 8, 1, ncclFloat32, ncclSum, c, 0));
    VNT_NCCL(ncclInvalidArgument, ncclAllReduce(d, d + 16, 1, ncclFloat32, ncclNumOps, c, 0));
    VNT_NCCL(ncclInvalidArgument, ncclGroupEnd());
    VNT_CUDA_OK(cudaDeviceSynchronize());
    vnt_from_dev(host, d + 8, sizeof(float));
    VNT_CHECK(host[0] == 0.0f, "a spoiled group still ran its valid call (got %g)",
              (double)host[0]);
    /* The communicator itself is fine afterwards. */
    VNT_NCCL_OK(ncclAllReduce(d, d + 8, 1, ncclFloat32, ncclSum, c, 0));
    VNT_CUDA_OK(cudaDeviceSynchronize());
    vnt_from_dev(host, d + 8, sizeof(float));
    VNT_CHECK(host[0] != 0.0f, "the call after the spoiled group did not run");
    VNT_NCCL_OK(ncclCommDestroy(c));
    VNT_CUDA_OK(cudaFree(d));
    vnt_end();
}

/* With one rank every collective is a copy; reductions of one value keep it (fp16 sum
 * and avg included: widened, divided by 1 and rounded back). */
static void test_one_rank_copies(void **st)
{
    enum { C = 10 };
    ncclComm_t c = one_rank_comm();
    uint16_t h[C], got[C];
    for (int i = 0; i < C; i++)
        vnt_store(&h[i], vnt_gen(0, (size_t)i, ncclFloat16, ncclSum) / 3, ncclFloat16);
    uint16_t *d = vnt_dev_alloc(8 * C * sizeof(uint16_t));
    vnt_to_dev(d, h, sizeof(h));
    VNT_NCCL_OK(ncclAllReduce(d, d + C, C, ncclFloat16, ncclAvg, c, 0));
    VNT_NCCL_OK(ncclAllReduce(d, d + 2 * C, C, ncclFloat16, ncclProd, c, 0));
    VNT_NCCL_OK(ncclAllGather(d, d + 3 * C, C, ncclFloat16, c, 0));
    VNT_NCCL_OK(ncclReduceScatter(d, d + 4 * C, C, ncclFloat16, ncclMax, c, 0));
    VNT_NCCL_OK(ncclAlltoAll(d, d + 5 * C, C, ncclFloat16, c, 0));
    VNT_NCCL_OK(ncclGroupStart());
    VNT_NCCL_OK(ncclSend(d, C, ncclFloat16, 0, c, 0));
    VNT_NCCL_OK(ncclRecv(d + 6 * C, C, ncclFloat16, 0, c, 0));
    VNT_NCCL_OK(ncclGroupEnd());
    VNT_NCCL_OK(ncclBroadcast(d, d + 7 * C, C, ncclFloat16, 0, c, 0));
    VNT_CUDA_OK(cudaDeviceSynchronize());
    for (int k = 1; k < 8; k++) {
        char what[32];
        snprintf(what, sizeof(what), "one-rank op %d", k);
        vnt_from_dev(got, d + k * C, sizeof(got));
        vnt_compare(what, h, got, C, ncclFloat16);
    }
    VNT_NCCL_OK(ncclCommDestroy(c));
    VNT_CUDA_OK(cudaFree(d));
    vnt_end();
}

/* Two devices of this thread: ncclCommInitAll (devlist reversed), then collectives and a
 * send/recv exchange between them in one group, issued without switching devices. */
static void check_two_devices(ncclComm_t *comms, const int *devs)
{
    enum { C = 5 };
    int32_t *buf[2], h[4 * C];
    cudaStream_t s[2];
    for (int i = 0; i < 2; i++) {
        int dev = -1, n = 0, r = -1;
        VNT_NCCL_OK(ncclCommCuDevice(comms[i], &dev));
        VNT_NCCL_OK(ncclCommCount(comms[i], &n));
        VNT_NCCL_OK(ncclCommUserRank(comms[i], &r));
        VNT_CHECK(dev == devs[i] && n == 2 && r == i, "comm %d: device %d count %d rank %d", i,
                  dev, n, r);
        VNT_CUDA_OK(cudaSetDevice(devs[i]));
        VNT_CUDA_OK(cudaStreamCreate(&s[i]));
        buf[i] = vnt_dev_alloc(sizeof(h));
        for (int j = 0; j < C; j++)
            h[j] = (i + 1) * 10 + j;
        vnt_to_dev(buf[i], h, C * sizeof(int32_t));
    }
    VNT_CUDA_OK(cudaSetDevice(0));
    VNT_NCCL_OK(ncclGroupStart());
    for (int i = 0; i < 2; i++) {
        VNT_NCCL_OK(ncclAllReduce(buf[i], buf[i] + C, C, ncclInt32, ncclSum, comms[i], s[i]));
        VNT_NCCL_OK(ncclSend(buf[i], C, ncclInt32, 1 - i, comms[i], s[i]));
        VNT_NCCL_OK(ncclRecv(buf[i] + 2 * C, C, ncclInt32, 1 - i, comms[i], s[i]));
    }
    VNT_NCCL_OK(ncclGroupEnd());
    for (int i = 0; i < 2; i++)
        VNT_CUDA_OK(cudaStreamSynchronize(s[i]));
    for (int i = 0; i < 2; i++) {
        vnt_from_dev(h, buf[i], sizeof(h));
        for (int j = 0; j < C; j++) {
            VNT_CHECK(h[C + j] == 30 + 2 * j, "dev %d allreduce[%d]: expected %d, got %d",
                      devs[i], j, 30 + 2 * j, h[C + j]);
            VNT_CHECK(h[2 * C + j] == (2 - i) * 10 + j, "dev %d recv[%d]: expected %d, got %d",
                      devs[i], j, (2 - i) * 10 + j, h[2 * C + j]);
        }
        VNT_CUDA_OK(cudaStreamDestroy(s[i]));
        VNT_CUDA_OK(cudaFree(buf[i]));
        VNT_NCCL_OK(ncclCommDestroy(comms[i]));
    }
}

static void test_init_all_two_devices(void **st)
{
    ncclComm_t comms[2] = {NULL, NULL};
    int devs[2] = {1, 0};
    VNT_NCCL_OK(ncclCommInitAll(comms, 2, devs));
    check_two_devices(comms, devs);
    vnt_end();
}

/* The same communicators made by hand: ncclCommInitRank per device inside a group (the
 * joins wait at ncclGroupEnd, so one thread cannot deadlock on itself). */
static void test_grouped_init_rank(void **st)
{
    ncclComm_t comms[2] = {NULL, NULL};
    int devs[2] = {0, 1};
    ncclUniqueId id;
    VNT_NCCL_OK(ncclGetUniqueId(&id));
    VNT_NCCL_OK(ncclGroupStart());
    for (int i = 0; i < 2; i++) {
        VNT_CUDA_OK(cudaSetDevice(devs[i]));
        VNT_NCCL_OK(ncclCommInitRank(&comms[i], 2, id, i));
    }
    VNT_NCCL_OK(ncclGroupEnd());
    VNT_CUDA_OK(cudaSetDevice(0));
    check_two_devices(comms, devs);
    vnt_end();
}

typedef int (*represent_fn)(void *, int, int);

static represent_fn find_represent(void)
{
    represent_fn f = NULL;
    *(void **)&f = dlsym(RTLD_DEFAULT, "vgpu_nccl_represent");
    VNT_CHECK(f != NULL, "vgpu_nccl_represent is not exported by the vgpu (libvgpu.so must "
              "forward it to libnccl's hook, vg_nccl_set_represent_hook)");
    return f;
}

static double elapsed_allreduce(ncclComm_t c, float *d, size_t count, cudaStream_t s)
{
    cudaEvent_t a, b;
    VNT_CUDA_OK(cudaEventCreate(&a));
    VNT_CUDA_OK(cudaEventCreate(&b));
    VNT_CUDA_OK(cudaEventRecord(a, s));
    VNT_NCCL_OK(ncclAllReduce(d, d, count, ncclFloat32, ncclSum, c, s));
    VNT_CUDA_OK(cudaEventRecord(b, s));
    VNT_CUDA_OK(cudaEventSynchronize(b));
    float ms = 0;
    VNT_CUDA_OK(cudaEventElapsedTime(&ms, a, b));
    VNT_CUDA_OK(cudaEventDestroy(a));
    VNT_CUDA_OK(cudaEventDestroy(b));
    return ms * 1e6;
}

/* One process stands for 8 ranks: nobody else joins, results treat every member as
 * holding this rank's input, and the time is the formula for 8 ranks on the link class of
 * the members' placement (stride 1: one node of the h100 profile; stride 8: eight nodes). */
static void test_representative(void **st)
{
    represent_fn represent = find_represent();
    if (!represent) {
        vnt_end();
        return;
    }
    ncclUniqueId bad;
    memset(&bad, 0, sizeof(bad));
    VNT_CHECK(represent(&bad, 0, 1) == -1, "a non-vgpu id must be refused");
    const vgpu_profile_t *p = vgpu_profile();
    enum { C = 1 << 16 };
    float *d = vnt_dev_alloc(16 * C * sizeof(float));
    float *h = malloc(16 * C * sizeof(float));
    cudaStream_t s;
    VNT_CUDA_OK(cudaStreamCreate(&s));
    for (int stride = 1; stride <= 8; stride *= 8) {
        ncclUniqueId id;
        ncclComm_t c = NULL;
        VNT_NCCL_OK(ncclGetUniqueId(&id));
        VNT_CHECK(represent(&id, 16, stride) == 0, "represent failed");
        double t0 = vnt_wall();
        VNT_NCCL_OK(ncclCommInitRank(&c, 8, id, 3));
        VNT_CHECK(vnt_wall() - t0 < 1.0, "a representative init waited for peers");
        for (int i = 0; i < C; i++)
            h[i] = 0.5f + (float)(i % 7);
        vnt_to_dev(d, h, C * sizeof(float));
        VNT_NCCL_OK(ncclAllGather(d, d + C, C, ncclFloat32, c, s));
        VNT_NCCL_OK(ncclAllReduce(d, d + 9 * C, C, ncclFloat32, ncclSum, c, s));
        VNT_CUDA_OK(cudaStreamSynchronize(s));
        vnt_from_dev(h, d, 10 * C * sizeof(float));
        for (int i = 0; i < C; i++) {
            VNT_CHECK(h[9 * C + i] == 8 * h[i], "allreduce[%d]: expected %g, got %g", i,
                      8.0 * h[i], (double)h[9 * C + i]);
            for (int k = 0; k < 8; k++)
                VNT_CHECK(h[(1 + k) * C + i] == h[i], "allgather block %d[%d]", k, i);
        }
        /* Stride 8 puts one member on each node: m = 1, B = inter_gbps (nccl_cost.c). */
        int inter = stride == 8 && p->gpus_per_node < 64;
        double a = (inter ? p->inter_lat_us : p->intra_lat_us) * 1e3;
        double B = (inter ? p->inter_gbps : p->intra_gbps) * p->link_eff;
        double S = 4.0 * C, ring = 14 * a + 2 * 7.0 / 8 * S / B, tree = 6 * a + 2 * S / B;
        double want = ring < tree ? ring : tree, got = elapsed_allreduce(c, d, C, s);
        /* Measured from an idle stream: the event before it is issued one launch earlier. */
        double launch = p->launch_us * 1e3;
        VNT_CHECK(fabs(got - (want + launch)) < 1e-6 * want + 1,
                  "stride %d: expected %.1f ns (+%.0f launch), got %.1f ns", stride, want,
                  launch, got);
        VNT_NCCL_OK(ncclCommDestroy(c));
    }
    VNT_CUDA_OK(cudaStreamDestroy(s));
    VNT_CUDA_OK(cudaFree(d));
    free(h);
    vnt_end();
}

/* ncclGroupSimulateEnd runs nothing and estimates the group with the cost model (an
 * 8-rank representative all-reduce on one node: the formula); registration is accepted;
 * a custom op only goes with its own data type. */
static void test_simulate_register_ops(void **st)
{
    represent_fn represent = find_represent();
    ncclUniqueId id;
    ncclComm_t c = NULL;
    VNT_NCCL_OK(ncclGetUniqueId(&id));
    if (represent)
        VNT_CHECK(represent(&id, 0, 1) == 0, "represent failed");
    VNT_NCCL_OK(ncclCommInitRank(&c, 8, id, 0));
    enum { C = 1 << 20 };
    float *d = vnt_dev_alloc(C * sizeof(float)), one = 1.0f, got = 0;
    vnt_to_dev(d, &one, sizeof(one));
    ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
    VNT_NCCL_OK(ncclGroupStart());
    VNT_NCCL_OK(ncclAllReduce(d, d, C, ncclFloat32, ncclSum, c, 0));
    VNT_NCCL_OK(ncclGroupSimulateEnd(&info));
    VNT_CUDA_OK(cudaDeviceSynchronize());
    vnt_from_dev(&got, d, sizeof(got));
    VNT_CHECK(got == 1.0f, "a simulated group ran (element 0 is %g)", (double)got);
    const vgpu_profile_t *p = vgpu_profile();
    double a = p->intra_lat_us * 1e3, B = p->intra_gbps * p->link_eff, S = 4.0 * C;
    double ring = 14 * a + 2 * 7.0 / 8 * S / B, tree = 6 * a + 2 * S / B;
    double want_us = (ring < tree ? ring : tree) / 1e3;
    VNT_CHECK(fabs(info.estimatedTime - want_us) < 1e-4 * want_us,
              "estimatedTime: expected %.3f us, got %.3f us", want_us, (double)info.estimatedTime);
    ncclSimInfo_t bad = NCCL_SIM_INFO_INITIALIZER;
    bad.magic = 0;
    VNT_NCCL(ncclInvalidArgument, ncclGroupSimulateEnd(&bad));
    VNT_NCCL(ncclInvalidUsage, ncclGroupSimulateEnd(&info));

    void *handle = NULL;
    ncclWindow_t win = NULL;
    VNT_NCCL_OK(ncclCommRegister(c, d, C * sizeof(float), &handle));
    VNT_NCCL_OK(ncclCommDeregister(c, handle));
    VNT_NCCL_OK(ncclCommWindowRegister(c, d, C * sizeof(float), &win, NCCL_WIN_DEFAULT));
    VNT_NCCL_OK(ncclCommWindowDeregister(c, win));
    void *m = NULL;
    VNT_NCCL_OK(ncclMemAlloc(&m, 4096));
    VNT_NCCL_OK(ncclMemFree(m));

    ncclRedOp_t op;
    float s = 0.5f;
    VNT_NCCL_OK(ncclRedOpCreatePreMulSum(&op, &s, ncclFloat32, ncclScalarHostImmediate, c));
    VNT_NCCL(ncclInvalidArgument, ncclAllReduce(d, d, 4, ncclInt32, op, c, 0));
    VNT_NCCL_OK(ncclRedOpDestroy(op, c));
    VNT_NCCL(ncclInvalidArgument, ncclRedOpDestroy(op, c));
    VNT_NCCL(ncclInvalidArgument, ncclAllReduce(d, d, 4, ncclFloat32, op, c, 0));
    VNT_NCCL_OK(ncclCommDestroy(c));
    VNT_CUDA_OK(cudaFree(d));
    vnt_end();
}

/* A collective declares what it reads and writes: a memset of its receive buffer on
 * another stream while it runs is a hazard; the same memset ordered after it is not. */
static void test_footprint_hazard(void **st)
{
    represent_fn represent = find_represent();
    ncclUniqueId id;
    ncclComm_t c = NULL;
    VNT_NCCL_OK(ncclGetUniqueId(&id));
    if (represent)
        VNT_CHECK(represent(&id, 0, 1) == 0, "represent failed");
    VNT_NCCL_OK(ncclCommInitRank(&c, 8, id, 0));
    enum { C = 1 << 20 };
    float *d = vnt_dev_alloc(2 * C * sizeof(float));
    cudaStream_t a, b;
    VNT_CUDA_OK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    VNT_CUDA_OK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    vgpu_counters_t k0, k1, k2;
    vgpu_counters(&k0);
    VNT_NCCL_OK(ncclAllReduce(d, d + C, C, ncclFloat32, ncclSum, c, a));
    VNT_CUDA_OK(cudaStreamSynchronize(a));
    VNT_CUDA_OK(cudaMemsetAsync(d + C, 0, C * sizeof(float), b));
    vgpu_counters(&k1);
    VNT_CHECK(k1.hazards == k0.hazards, "ordered use reported %llu hazard(s)",
              (unsigned long long)(k1.hazards - k0.hazards));
    VNT_NCCL_OK(ncclAllReduce(d, d + C, C, ncclFloat32, ncclSum, c, a));
    VNT_CUDA_OK(cudaMemsetAsync(d + C, 0, C * sizeof(float), b));
    vgpu_counters(&k2);
    VNT_CHECK(k2.hazards > k1.hazards, "a memset racing the all-reduce's output went unseen");
    VNT_CUDA_OK(cudaStreamDestroy(a));
    VNT_CUDA_OK(cudaStreamDestroy(b));
    VNT_NCCL_OK(ncclCommDestroy(c));
    VNT_CUDA_OK(cudaFree(d));
    vnt_end();
}

/* ---- the trace, from a child process ---- */

static int scenario_trace(void)
{
    ncclUniqueId id;
    ncclComm_t c = NULL;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.commName = "trace-me";
    int *d = NULL;
    if (ncclGetUniqueId(&id) || ncclCommInitRankConfig(&c, 1, id, 0, &cfg) ||
        cudaMalloc((void **)&d, 64) != cudaSuccess)
        return 3;
    if (ncclAllReduce(d, d, 4, ncclInt32, ncclSum, c, 0) || ncclGroupStart() ||
        ncclSend(d, 4, ncclInt32, 0, c, 0) || ncclRecv(d + 4, 4, ncclInt32, 0, c, 0) ||
        ncclGroupEnd() || ncclAllReduce(d, d, 4, ncclInt32, ncclSum, c, 0))
        return 4;
    if (cudaDeviceSynchronize() != cudaSuccess || ncclCommDestroy(c))
        return 5;
    return 0;
}

static void test_trace_names(void **st)
{
    char path[64], env[96];
    snprintf(path, sizeof(path), "/tmp/vgpu-nccl-trace-%d.json", (int)getpid());
    snprintf(env, sizeof(env), "VGPU_TRACE=%s", path);
    const char *const e[] = {env, NULL};
    vgt_child_t res;
    VNT_CHECK(vgt_run_child("trace", e, 30, &res) == 0, "cannot start the child");
    VNT_CHECK(res.exited && res.code == 0, "child: exited %d code %d sig %d\n%s", res.exited,
              res.code, res.sig, res.err ? res.err : "");
    FILE *f = fopen(path, "r");
    char buf[1 << 16] = "";
    size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    buf[n] = 0;
    if (f)
        fclose(f);
    unlink(path);
    const char *want[] = {"\"comm\":\"trace-me\",\"seq\":0", "\"comm\":\"trace-me\",\"seq\":1",
                          "allreduce", "send+recv"};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        VNT_CHECK(strstr(buf, want[i]) != NULL, "the trace lacks %s:\n%s", want[i], buf);
    vgt_child_free(&res);
    vnt_end();
}

int main(int argc, char **argv)
{
    static const vgt_scenario_t scenarios[] = {{"trace", scenario_trace}, {NULL, NULL}};
    int rc = vgt_scenario_dispatch(argc, argv, scenarios);
    if (rc >= 0)
        return rc;
    vnt.size = 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version_and_strings),
        cmocka_unit_test(test_argument_errors),
        cmocka_unit_test(test_one_rank_copies),
        cmocka_unit_test(test_init_all_two_devices),
        cmocka_unit_test(test_grouped_init_rank),
        cmocka_unit_test(test_representative),
        cmocka_unit_test(test_simulate_register_ops),
        cmocka_unit_test(test_footprint_hazard),
        cmocka_unit_test(test_trace_names),
    };
    return cmocka_run_group_tests_name("vgpu.nccl.single", tests, NULL, NULL);
}
