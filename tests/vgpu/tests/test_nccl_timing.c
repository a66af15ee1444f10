/*
 * test_nccl_timing.c: virtual time of the vgpu's collectives.
 * Run under mpirun with 4 ranks, timing-only: vgpu.nccl.timing (h100, 8 GPUs per node, so
 * every communicator is intra-node) and vgpu.nccl.timing.inter (the same with 2 GPUs per
 * node, so the world spans two nodes while {0,1} stays on one).
 *
 * The expected times are the documented alpha-beta formulas, written out again here from
 * the profile (vgpu_profile()): alpha = per-step latency, B = bandwidth x link_eff of the
 * link class the members' placement implies. An op is timed between two events around it
 * while a long all-reduce before it keeps the stream busy, so the op is ready on every rank
 * at that all-reduce's end (the same virtual time everywhere) and the elapsed time is
 * exactly its own duration; cudaEventElapsedTime's float milliseconds allow a relative
 * error of 1e-6.
 */
#include "nccl_common.h"
#include "rt_common.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static ncclComm_t g_world;
static cudaStream_t g_s;
static char *g_buf; /* 512 MiB of unbacked device memory (timing-only) */

#define BIG ((size_t)64 << 20)

/* alpha (ns) and B (bytes/ns) for a communicator made of these world ranks. */
static void link_of(const int *members, int n, double *alpha, double *bw)
{
    const vgpu_profile_t *p = vgpu_profile();
    int inter = 0;
    for (int i = 1; i < n; i++)
        inter |= members[i] / p->gpus_per_node != members[0] / p->gpus_per_node;
    *alpha = (inter ? p->inter_lat_us : p->intra_lat_us) * 1e3;
    *bw = (inter ? p->inter_gbps : p->intra_gbps) * p->link_eff;
}

static double f_allreduce(int n, double S, double a, double B)
{
    double ring = 2 * (n - 1) * a + 2.0 * (n - 1) / n * S / B;
    double tree = 2 * ceil(log2(n)) * a + 2 * S / B;
    return ring < tree ? ring : tree;
}

static double f_gather_like(int n, double S_total, double a, double B)
{
    return (n - 1) * a + (double)(n - 1) / n * S_total / B;
}

static double f_rooted(int n, double S, double a, double B) { return (n - 1) * a + S / B; }

typedef void (*issue_fn)(ncclComm_t c, size_t bytes);

/* Elapsed virtual ns of issue(c, bytes), measured as described at the top. */
static double timed(ncclComm_t c, issue_fn issue, size_t bytes)
{
    cudaEvent_t a, b;
    VNT_CUDA_OK(cudaEventCreate(&a));
    VNT_CUDA_OK(cudaEventCreate(&b));
    VNT_NCCL_OK(ncclAllReduce(g_buf, g_buf, BIG / 4, ncclFloat32, ncclSum, c, g_s));
    VNT_CUDA_OK(cudaEventRecord(a, g_s));
    issue(c, bytes);
    VNT_CUDA_OK(cudaEventRecord(b, g_s));
    VNT_CUDA_OK(cudaStreamSynchronize(g_s));
    float ms = -1;
    VNT_CUDA_OK(cudaEventElapsedTime(&ms, a, b));
    VNT_CUDA_OK(cudaEventDestroy(a));
    VNT_CUDA_OK(cudaEventDestroy(b));
    return ms * 1e6;
}

static void expect_time(const char *what, double want, double got)
{
    VNT_CHECK(fabs(got - want) <= 1e-6 * want + 1e-3, "%s: expected %.3f ns, got %.3f ns", what,
              want, got);
}

static void i_allreduce(ncclComm_t c, size_t b)
{
    VNT_NCCL_OK(ncclAllReduce(g_buf, g_buf, b / 4, ncclFloat32, ncclSum, c, g_s));
}
static void i_allgather(ncclComm_t c, size_t b)
{
    VNT_NCCL_OK(ncclAllGather(g_buf, g_buf + BIG, b / 2, ncclBfloat16, c, g_s));
}
static void i_reducescatter(ncclComm_t c, size_t b)
{
    VNT_NCCL_OK(ncclReduceScatter(g_buf + BIG, g_buf, b / 2, ncclBfloat16, ncclSum, c, g_s));
}
static void i_broadcast(ncclComm_t c, size_t b)
{
    VNT_NCCL_OK(ncclBroadcast(g_buf, g_buf, b, ncclUint8, 1, c, g_s));
}
static void i_reduce(ncclComm_t c, size_t b)
{
    VNT_NCCL_OK(ncclReduce(g_buf, g_buf, b / 8, ncclFloat64, ncclMax, 0, c, g_s));
}
static void i_alltoall(ncclComm_t c, size_t b)
{
    VNT_NCCL_OK(ncclAlltoAll(g_buf, g_buf + BIG, b / 4, ncclInt32, c, g_s));
}

/* A ring of grouped send/recv of b bytes each way. */
static void i_ring(ncclComm_t c, size_t b)
{
    int n, r;
    ncclCommCount(c, &n);
    ncclCommUserRank(c, &r);
    VNT_NCCL_OK(ncclGroupStart());
    VNT_NCCL_OK(ncclSend(g_buf, b, ncclInt8, (r + 1) % n, c, g_s));
    VNT_NCCL_OK(ncclRecv(g_buf + BIG, b, ncclInt8, (r + n - 1) % n, c, g_s));
    VNT_NCCL_OK(ncclGroupEnd());
}

static void world_members(int *m)
{
    for (int i = 0; i < vnt.size; i++)
        m[i] = i;
}

/* All-reduce at two sizes: 64 MiB (ring wins) and 4 KiB (with 4 ranks the tree's 2 log2 n
 * latency steps beat the ring's 2(n-1)). */
static void test_allreduce_formula(void **st)
{
    int m[64], n = vnt.size;
    double a, B;
    world_members(m);
    link_of(m, n, &a, &B);
    expect_time("allreduce 64 MiB", f_allreduce(n, (double)BIG, a, B),
                timed(g_world, i_allreduce, BIG));
    expect_time("allreduce 4 KiB", f_allreduce(n, 4096.0, a, B), timed(g_world, i_allreduce, 4096));
    double ring = 2 * (n - 1) * a + 2.0 * (n - 1) / n * (double)BIG / B;
    VNT_CHECK(f_allreduce(n, (double)BIG, a, B) == ring, "64 MiB should be the ring's time");
    vnt_end();
}

static void test_other_collectives(void **st)
{
    int m[64], n = vnt.size;
    double a, B, S = 8 << 20;
    world_members(m);
    link_of(m, n, &a, &B);
    expect_time("allgather", f_gather_like(n, n * S, a, B), timed(g_world, i_allgather, (size_t)S));
    expect_time("reducescatter", f_gather_like(n, n * S, a, B),
                timed(g_world, i_reducescatter, (size_t)S));
    expect_time("broadcast", f_rooted(n, S, a, B), timed(g_world, i_broadcast, (size_t)S));
    expect_time("reduce", f_rooted(n, S, a, B), timed(g_world, i_reduce, (size_t)S));
    expect_time("alltoall", f_gather_like(n, n * S, a, B), timed(g_world, i_alltoall, (size_t)S));
    expect_time("send/recv ring", a + S / B, timed(g_world, i_ring, (size_t)S));
    vnt_end();
}

/* The halves {0,1} and {2,3}: on one node in both profiles (2 or 8 GPUs per node), while
 * the world spans two nodes with 2 per node: the same call takes the other link's time. */
static void test_split_link_class(void **st)
{
    ncclComm_t half = NULL;
    VNT_NCCL_OK(ncclCommSplit(g_world, vnt.rank / 2, vnt.rank, &half, NULL));
    int m[2] = {vnt.rank / 2 * 2, vnt.rank / 2 * 2 + 1};
    double a, B;
    link_of(m, 2, &a, &B);
    expect_time("allreduce on a half", f_allreduce(2, (double)BIG, a, B),
                timed(half, i_allreduce, BIG));
    VNT_NCCL_OK(ncclCommDestroy(half));
    vnt_end();
}

/* Rank 1 runs a 1 ms kernel before the all-reduce: the all-reduce starts when rank 1
 * arrives, so on every rank it ends 1 ms plus its own time after the event before it. */
static void test_starts_when_last_rank_arrives(void **st)
{
    int m[64], n = vnt.size;
    double a, B;
    world_members(m);
    link_of(m, n, &a, &B);
    VNT_NCCL_OK(ncclAllReduce(g_buf, g_buf, BIG / 4, ncclFloat32, ncclSum, g_world, g_s));
    VNT_CUDA_OK(cudaStreamSynchronize(g_s)); /* every host clock now at the same end time */
    cudaEvent_t e0, e1;
    VNT_CUDA_OK(cudaEventCreate(&e0));
    VNT_CUDA_OK(cudaEventCreate(&e1));
    VNT_CUDA_OK(cudaEventRecord(e0, g_s));
    if (vnt.rank == 1)
        VNT_CUDA_OK(vgt_spin(1e6, 1.0, g_s));
    VNT_NCCL_OK(ncclAllReduce(g_buf, g_buf, 1 << 20, ncclFloat32, ncclSum, g_world, g_s));
    VNT_CUDA_OK(cudaEventRecord(e1, g_s));
    VNT_CUDA_OK(cudaStreamSynchronize(g_s));
    float ms = 0;
    VNT_CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
    double want = 1e6 + f_allreduce(n, 4.0 * (1 << 20), a, B), got = ms * 1e6;
    /* Launch costs add a few microseconds: the event and the kernel are issued at
     * different host times on rank 1 and the others. */
    VNT_CHECK(got >= want - 10 && got <= want + 20e3, "rank %d: expected %.0f ns (1 ms of rank "
              "1's kernel plus the all-reduce), got %.0f ns", vnt.rank, want, got);
    VNT_CUDA_OK(cudaEventDestroy(e0));
    VNT_CUDA_OK(cudaEventDestroy(e1));
    vnt_end();
}

static int setup(void **st)
{
    vgt_register_kernels();
    ncclUniqueId id = vnt_shared_id(MPI_COMM_WORLD);
    VNT_NCCL_OK(ncclCommInitRank(&g_world, vnt.size, id, vnt.rank));
    VNT_CUDA_OK(cudaStreamCreate(&g_s));
    g_buf = vnt_dev_alloc(8 * BIG);
    VNT_CHECK(vgpu_timing_only(), "run with VGPU_TIMING_ONLY=1");
    return 0;
}

static int teardown(void **st)
{
    VNT_CUDA_OK(cudaFree(g_buf));
    VNT_NCCL_OK(ncclCommDestroy(g_world));
    return 0;
}

int main(int argc, char **argv)
{
    vnt_init(&argc, &argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allreduce_formula),
        cmocka_unit_test(test_other_collectives),
        cmocka_unit_test(test_split_link_class),
        cmocka_unit_test(test_starts_when_last_rank_arrives),
    };
    return vnt_run("vgpu.nccl.timing", tests, sizeof(tests) / sizeof(tests[0]), setup, teardown);
}
