/*
 * test_nccl_timing.c: virtual time of the vgpu's collectives.
 * Run under mpirun with 4 ranks, timing-only: vgpu.nccl.timing (h100, 8 GPUs per node, so
 * every real communicator is intra-node) and vgpu.nccl.timing.inter (the same with 2 GPUs
 * per node, so the world spans two nodes with 2 members on each while {0,1} stays on one).
 * Representative communicators (vgpu_nccl_represent) add placements no 4-rank job has.
 *
 * The expected times are the documented alpha-beta formulas, written out again here from
 * the profile (vgpu_profile()): alpha = per-step latency, B = bandwidth x link_eff of the
 * link class the members' placement implies; across nodes, the ring-like collectives get
 * inter_gbps x m (m: members per node, the minimum over nodes: the node's NIC is shared by
 * gpus_per_node / m sibling rings), all-to-all and point-to-point get inter_gbps. Where
 * m > 1 the tests also check that the old model (inter_gbps for every inter-node
 * communicator) would have missed. An op is timed between two events around it while a
 * long all-reduce before it keeps the stream busy, so the op is ready on every rank at
 * that all-reduce's end (the same virtual time everywhere) and the elapsed time is exactly
 * its own duration; cudaEventElapsedTime's float milliseconds allow a relative error of
 * 1e-6.
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

/* Members of a communicator on each node, the minimum over the nodes it touches: written
 * with a per-node table, independently of the library's counting. */
static int members_per_node(const int *members, int n)
{
    int gpn = vgpu_profile()->gpus_per_node, count[1024] = {0}, m = n;
    for (int i = 0; i < n; i++) {
        if (members[i] < 0 || members[i] / gpn >= 1024) {
            VNT_CHECK(0, "member %d beyond the test's node table", members[i]);
            return 1;
        }
        count[members[i] / gpn]++;
    }
    for (int k = 0; k < 1024; k++)
        if (count[k] && count[k] < m)
            m = count[k];
    return m;
}

/* alpha (ns) and B (bytes/ns) for a communicator made of these world ranks; ring: 1 for
 * the ring-like collectives (m counts), 0 for all-to-all (one flow per member, m = 1). */
static void link_of(const int *members, int n, int ring, double *alpha, double *bw)
{
    const vgpu_profile_t *p = vgpu_profile();
    int inter = 0;
    for (int i = 1; i < n; i++)
        inter |= members[i] / p->gpus_per_node != members[0] / p->gpus_per_node;
    int m = inter && ring ? members_per_node(members, n) : 1;
    *alpha = (inter ? p->inter_lat_us : p->intra_lat_us) * 1e3;
    *bw = (inter ? p->inter_gbps * m : p->intra_gbps) * p->link_eff;
}

/* Do world ranks a and b sit on different nodes? */
static int apart(int a, int b)
{
    int g = vgpu_profile()->gpus_per_node;
    return a / g != b / g;
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

/* A case the old model (inter_gbps for every inter-node collective) would have passed
 * cannot tell the models apart: where m > 1, the two expectations must differ by far more
 * than the tolerance of expect_time. */
static void expect_differs_from_old(const char *what, double want, double old)
{
    VNT_CHECK(fabs(want - old) > 1e-3 * want, "%s: the new model (%.3f ns) should differ from "
              "the old one (%.3f ns)", what, want, old);
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

/* A grouped send/recv of b bytes each way with the partner r ^ 1 (on this rank's node in
 * both runs). */
static void i_partner(ncclComm_t c, size_t b)
{
    int r;
    ncclCommUserRank(c, &r);
    VNT_NCCL_OK(ncclGroupStart());
    VNT_NCCL_OK(ncclSend(g_buf, b, ncclInt8, r ^ 1, c, g_s));
    VNT_NCCL_OK(ncclRecv(g_buf + BIG, b, ncclInt8, r ^ 1, c, g_s));
    VNT_NCCL_OK(ncclGroupEnd());
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
 * latency steps beat the ring's 2(n-1)). In the .inter run the world has 2 members per
 * node: B = 2 x inter_gbps x link_eff. */
static void test_allreduce_formula(void **st)
{
    int m[64], n = vnt.size;
    double a, B;
    world_members(m);
    link_of(m, n, 1, &a, &B);
    expect_time("allreduce 64 MiB", f_allreduce(n, (double)BIG, a, B),
                timed(g_world, i_allreduce, BIG));
    expect_time("allreduce 4 KiB", f_allreduce(n, 4096.0, a, B), timed(g_world, i_allreduce, 4096));
    double ring = 2 * (n - 1) * a + 2.0 * (n - 1) / n * (double)BIG / B;
    VNT_CHECK(f_allreduce(n, (double)BIG, a, B) == ring, "64 MiB should be the ring's time");
    const vgpu_profile_t *p = vgpu_profile();
    if (n / p->gpus_per_node > 1) { /* spans nodes, 2 per node in the .inter run */
        VNT_CHECK(members_per_node(m, n) == p->gpus_per_node, "world: %d members per node, "
                  "expected %d", members_per_node(m, n), p->gpus_per_node);
        expect_differs_from_old("allreduce 64 MiB", f_allreduce(n, (double)BIG, a, B),
                                f_allreduce(n, (double)BIG, a, p->inter_gbps * p->link_eff));
    }
    vnt_end();
}

/* The ring-like collectives take the communicator's B; all-to-all and point-to-point take
 * one flow's (m = 1), and a send/recv pair on one node the intra-node link. Needs an even
 * number of ranks (run with 4). */
static void test_other_collectives(void **st)
{
    int m[64], n = vnt.size, r = vnt.rank;
    double a, B, a1, B1, S = 8 << 20;
    world_members(m);
    link_of(m, n, 1, &a, &B);
    link_of(m, n, 0, &a1, &B1);
    expect_time("allgather", f_gather_like(n, n * S, a, B), timed(g_world, i_allgather, (size_t)S));
    expect_time("reducescatter", f_gather_like(n, n * S, a, B),
                timed(g_world, i_reducescatter, (size_t)S));
    expect_time("broadcast", f_rooted(n, S, a, B), timed(g_world, i_broadcast, (size_t)S));
    expect_time("reduce", f_rooted(n, S, a, B), timed(g_world, i_reduce, (size_t)S));
    expect_time("alltoall", f_gather_like(n, n * S, a1, B1), timed(g_world, i_alltoall, (size_t)S));
    /* This rank sends to r + 1 and receives from r - 1: the op is on the inter-node link as
     * soon as one of the two peers is on another node. */
    const vgpu_profile_t *p = vgpu_profile();
    int inter = apart(r, (r + 1) % n) || apart((r + n - 1) % n, r);
    double ap = (inter ? p->inter_lat_us : p->intra_lat_us) * 1e3;
    double bp = (inter ? p->inter_gbps : p->intra_gbps) * p->link_eff;
    expect_time("send/recv ring", ap + S / bp, timed(g_world, i_ring, (size_t)S));
    /* The partner shares the node even where the world spans two: the pair's link counts,
     * not the communicator's. */
    VNT_CHECK(!apart(r, r ^ 1), "ranks %d and %d should share a node", r, r ^ 1);
    expect_time("send/recv with the node partner",
                p->intra_lat_us * 1e3 + S / (p->intra_gbps * p->link_eff),
                timed(g_world, i_partner, (size_t)S));
    vnt_end();
}

/* The halves {0,1} and {2,3}: on one node in both profiles (2 or 8 GPUs per node), while
 * the world spans two nodes with 2 per node: the same call takes the other link's time.
 * The parity split {0,2} and {1,3}: one node with 8 GPUs per node, one member on each of
 * two nodes with 2 (m = 1: half the world's B). */
static void test_split_link_class(void **st)
{
    ncclComm_t half = NULL, parity = NULL;
    VNT_NCCL_OK(ncclCommSplit(g_world, vnt.rank / 2, vnt.rank, &half, NULL));
    int m[2] = {vnt.rank / 2 * 2, vnt.rank / 2 * 2 + 1};
    double a, B;
    link_of(m, 2, 1, &a, &B);
    expect_time("allreduce on a half", f_allreduce(2, (double)BIG, a, B),
                timed(half, i_allreduce, BIG));
    VNT_NCCL_OK(ncclCommDestroy(half));
    VNT_NCCL_OK(ncclCommSplit(g_world, vnt.rank % 2, vnt.rank, &parity, NULL));
    int q[2] = {vnt.rank % 2, vnt.rank % 2 + 2};
    link_of(q, 2, 1, &a, &B);
    VNT_CHECK(members_per_node(q, 2) == (vgpu_profile()->gpus_per_node == 2 ? 1 : 2),
              "parity split: %d members per node", members_per_node(q, 2));
    expect_time("allreduce on a parity half", f_allreduce(2, (double)BIG, a, B),
                timed(parity, i_allreduce, BIG));
    VNT_NCCL_OK(ncclCommDestroy(parity));
    vnt_end();
}

/* Representative communicators (no peers) with layouts of a large job on this profile's
 * nodes (g GPUs each): the DP group of TP = g/2 (2 per node), one member per node, an
 * uneven layout (2 on the first node, 1 on the second: the minimum, 1, counts) and two
 * full nodes (m = g). Each rank builds its own; the expected m is written out. */
static void test_representative_placement(void **st)
{
    const vgpu_profile_t *p = vgpu_profile();
    int g = p->gpus_per_node;
    VNT_CHECK(g >= 2 && g % 2 == 0 && g <= 32, "the test needs an even gpus_per_node <= 32");
    struct { const char *what; int n, base, stride, m; } lay[] = {
        {"k=2: 4 members, stride g/2", 4, 0, g / 2, 2},
        {"k=1: 4 members, stride g", 4, g / 2, g, 1},
        {"uneven: 3 members, stride g/2", 3, 0, g / 2, 1},
        {"full nodes: 2g members, stride 1", 2 * g, 0, 1, g},
    };
    for (size_t i = 0; i < sizeof(lay) / sizeof(lay[0]); i++) {
        int mem[64], n = lay[i].n;
        for (int k = 0; k < n; k++)
            mem[k] = lay[i].base + k * lay[i].stride;
        VNT_CHECK(members_per_node(mem, n) == lay[i].m, "%s: the test counts %d per node, "
                  "expected %d", lay[i].what, members_per_node(mem, n), lay[i].m);
        ncclUniqueId id;
        ncclComm_t c = NULL;
        VNT_NCCL_OK(ncclGetUniqueId(&id));
        VNT_CHECK(vgpu_nccl_represent(&id, lay[i].base, lay[i].stride) == 0, "represent failed");
        VNT_NCCL_OK(ncclCommInitRank(&c, n, id, 0));
        double a, B, a1, B1, S = 8 << 20, old = p->inter_gbps * p->link_eff;
        link_of(mem, n, 1, &a, &B);
        link_of(mem, n, 0, &a1, &B1);
        VNT_CHECK(fabs(B - old * lay[i].m) <= 1e-12 * B, "%s: B %.3f, expected %d x %.3f",
                  lay[i].what, B, lay[i].m, old);
        char what[128];
        snprintf(what, sizeof(what), "%s: allreduce 64 MiB", lay[i].what);
        expect_time(what, f_allreduce(n, (double)BIG, a, B), timed(c, i_allreduce, BIG));
        if (lay[i].m > 1)
            expect_differs_from_old(what, f_allreduce(n, (double)BIG, a, B),
                                    f_allreduce(n, (double)BIG, a, old));
        snprintf(what, sizeof(what), "%s: allgather", lay[i].what);
        expect_time(what, f_gather_like(n, n * S, a, B), timed(c, i_allgather, (size_t)S));
        snprintf(what, sizeof(what), "%s: alltoall", lay[i].what);
        expect_time(what, f_gather_like(n, n * S, a1, B1), timed(c, i_alltoall, (size_t)S));
        VNT_NCCL_OK(ncclCommDestroy(c));
    }
    vnt_end();
}

/* Rank 1 runs a 1 ms kernel before the all-reduce: the all-reduce starts when rank 1
 * arrives, so on every rank it ends 1 ms plus its own time after the event before it. */
static void test_starts_when_last_rank_arrives(void **st)
{
    int m[64], n = vnt.size;
    double a, B;
    world_members(m);
    link_of(m, n, 1, &a, &B);
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
        cmocka_unit_test(test_representative_placement),
        cmocka_unit_test(test_starts_when_last_rank_arrives),
    };
    return vnt_run("vgpu.nccl.timing", tests, sizeof(tests) / sizeof(tests[0]), setup, teardown);
}
