/*
 * test_nccl_comm.c: communicators of the vgpu's NCCL: ncclCommSplit (colours, keys,
 * NCCL_SPLIT_NOCOLOR, repeated splits), ncclCommInitRankConfig (commName kept as a copy,
 * config checks), queries, concurrent use of parent and children, finalize/destroy/abort.
 * Run under mpirun with 4 ranks (vgpu.nccl.comm).
 */
#include "nccl_common.h"

#include <stdio.h>
#include <string.h>

static ncclComm_t g_world;

/* Gathers every member's world rank over c, in c's rank order. */
static void gather_world_ranks(ncclComm_t c, int *out, int n)
{
    int *d = vnt_dev_alloc((size_t)(n + 1) * sizeof(int));
    vnt_to_dev(d, &vnt.rank, sizeof(int));
    VNT_NCCL_OK(ncclAllGather(d, d + 1, 1, ncclInt32, c, 0));
    VNT_CUDA_OK(cudaDeviceSynchronize());
    vnt_from_dev(out, d + 1, (size_t)n * sizeof(int));
    VNT_CUDA_OK(cudaFree(d));
}

static void expect_members(ncclComm_t c, const int *want, int n)
{
    int count = -1, rank = -1, dev = -1, cur = -2, got[8] = {0};
    VNT_NCCL_OK(ncclCommCount(c, &count));
    VNT_NCCL_OK(ncclCommUserRank(c, &rank));
    VNT_NCCL_OK(ncclCommCuDevice(c, &dev));
    VNT_CUDA_OK(cudaGetDevice(&cur));
    VNT_CHECK(count == n, "count: expected %d, got %d", n, count);
    VNT_CHECK(dev == cur, "device: expected %d, got %d", cur, dev);
    VNT_CHECK(rank >= 0 && rank < n && want[rank] == vnt.rank,
              "user rank %d does not hold world rank %d", rank, vnt.rank);
    gather_world_ranks(c, got, n);
    for (int i = 0; i < n; i++)
        VNT_CHECK(got[i] == want[i], "member %d: expected world rank %d, got %d", i, want[i],
                  got[i]);
}

/* Colour = parity, key = -rank: the members of each colour in decreasing world rank. */
static void test_split_colors_keys(void **st)
{
    ncclComm_t c = NULL;
    VNT_NCCL_OK(ncclCommSplit(g_world, vnt.rank % 2, -vnt.rank, &c, NULL));
    int want[2] = {vnt.rank % 2 + 2, vnt.rank % 2};
    expect_members(c, want, 2);
    VNT_NCCL_OK(ncclCommDestroy(c));
    vnt_end();
}

/* Rank 3 opts out: it gets NULL, the others a 3-rank communicator in key order. */
static void test_split_nocolor(void **st)
{
    ncclComm_t c = (ncclComm_t)&c;
    int color = vnt.rank == 3 ? NCCL_SPLIT_NOCOLOR : 7;
    VNT_NCCL_OK(ncclCommSplit(g_world, color, vnt.rank, &c, NULL));
    if (vnt.rank == 3) {
        VNT_CHECK(c == NULL, "NOCOLOR must give a NULL communicator, got %p", (void *)c);
    } else {
        int want[3] = {0, 1, 2};
        expect_members(c, want, 3);
        VNT_NCCL_OK(ncclCommDestroy(c));
    }
    VNT_NCCL(ncclInvalidArgument, ncclCommSplit(g_world, -5, 0, &c, NULL));
    vnt_end();
}

/* Three splits in a row, then the parent and two children all-reduce at the same time on
 * three streams: each result sums exactly its members. */
static void test_split_repeated_concurrent(void **st)
{
    ncclComm_t pair = NULL, odd_even = NULL, one = NULL;
    VNT_NCCL_OK(ncclCommSplit(g_world, vnt.rank / 2, 0, &pair, NULL));
    VNT_NCCL_OK(ncclCommSplit(g_world, vnt.rank % 2, 0, &odd_even, NULL));
    VNT_NCCL_OK(ncclCommSplit(g_world, vnt.rank, 0, &one, NULL));
    cudaStream_t s[4];
    ncclComm_t cs[4] = {g_world, pair, odd_even, one};
    int want[4] = {0 + 1 + 2 + 3, vnt.rank / 2 * 4 + 1, vnt.rank % 2 * 2 + 2, vnt.rank};
    int *d = vnt_dev_alloc(8 * sizeof(int)), h[8];
    for (int i = 0; i < 4; i++)
        h[i] = vnt.rank;
    vnt_to_dev(d, h, 4 * sizeof(int));
    for (int i = 0; i < 4; i++) {
        VNT_CUDA_OK(cudaStreamCreate(&s[i]));
        VNT_NCCL_OK(ncclAllReduce(d + i, d + 4 + i, 1, ncclInt32, ncclSum, cs[i], s[i]));
    }
    VNT_CUDA_OK(cudaDeviceSynchronize());
    vnt_from_dev(h, d, sizeof(h));
    for (int i = 0; i < 4; i++) {
        VNT_CHECK(h[4 + i] == want[i], "communicator %d: expected %d, got %d", i, want[i],
                  h[4 + i]);
        VNT_CUDA_OK(cudaStreamDestroy(s[i]));
    }
    int n1 = 0;
    VNT_NCCL_OK(ncclCommCount(one, &n1));
    VNT_CHECK(n1 == 1, "a colour of its own: expected 1 rank, got %d", n1);
    VNT_NCCL_OK(ncclCommDestroy(pair));
    VNT_NCCL_OK(ncclCommDestroy(odd_even));
    VNT_NCCL_OK(ncclCommDestroy(one));
    VNT_CUDA_OK(cudaFree(d));
    vnt_end();
}

/* commName is copied at init (the caller's buffer is reused right after) and names the
 * communicator in messages; a split with a config takes that config's name. */
static void test_config_comm_name(void **st)
{
    char name[32];
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    snprintf(name, sizeof(name), "tp-group-%d", 7);
    cfg.commName = name;
    cfg.blocking = 0;
    ncclComm_t c = NULL, child = NULL;
    ncclUniqueId id = vnt_shared_id(MPI_COMM_WORLD);
    VNT_NCCL_OK(ncclCommInitRankConfig(&c, vnt.size, id, vnt.rank, &cfg));
    memset(name, 'x', sizeof(name) - 1);
    VNT_NCCL(ncclInvalidArgument, ncclAllReduce(NULL, NULL, 4, ncclFloat32, ncclSum, c, 0));
    VNT_CHECK(strstr(ncclGetLastError(c), "tp-group-7") != NULL,
              "the message should name tp-group-7: %s", ncclGetLastError(c));
    snprintf(name, sizeof(name), "dp-replica");
    VNT_NCCL_OK(ncclCommSplit(c, 0, vnt.rank, &child, &cfg));
    VNT_NCCL(ncclInvalidArgument, ncclBroadcast(NULL, NULL, 4, ncclInt8, 0, child, 0));
    VNT_CHECK(strstr(ncclGetLastError(child), "dp-replica") != NULL,
              "the message should name dp-replica: %s", ncclGetLastError(child));
    /* The communicator still works after argument errors (they are not asynchronous). */
    int *d = vnt_dev_alloc(sizeof(int)), h = 1;
    vnt_to_dev(d, &h, sizeof(h));
    VNT_NCCL_OK(ncclAllReduce(d, d, 1, ncclInt32, ncclSum, child, 0));
    VNT_CUDA_OK(cudaDeviceSynchronize());
    vnt_from_dev(&h, d, sizeof(h));
    VNT_CHECK(h == vnt.size, "allreduce after errors: expected %d, got %d", vnt.size, h);
    VNT_CUDA_OK(cudaFree(d));
    VNT_NCCL_OK(ncclCommDestroy(child));
    VNT_NCCL_OK(ncclCommDestroy(c));

    ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
    bad.magic = 0; /* not from NCCL_CONFIG_INITIALIZER */
    id = vnt_shared_id(MPI_COMM_WORLD);
    VNT_NCCL(ncclInvalidArgument, ncclCommInitRankConfig(&c, vnt.size, id, vnt.rank, &bad));
    vnt_end();
}

/* Rank 3 is excluded and does not call: ranks 0-2 form a 3-rank communicator in parent
 * order; a second shrink of that one drops its rank 0. */
static void test_shrink(void **st)
{
    if (vnt.rank != 3) {
        ncclComm_t c = NULL, c2 = NULL;
        int ex = 3, ex2 = 0;
        VNT_NCCL_OK(ncclCommShrink(g_world, &ex, 1, &c, NULL, NCCL_SHRINK_DEFAULT));
        int want[3] = {0, 1, 2};
        expect_members(c, want, 3);
        VNT_NCCL(ncclInvalidArgument,
                 ncclCommShrink(c, &ex2, vnt.rank == 0 ? 1 : -1, &c2, NULL, 0));
        if (vnt.rank != 0) {
            VNT_NCCL_OK(ncclCommShrink(c, &ex2, 1, &c2, NULL, NCCL_SHRINK_DEFAULT));
            int want2[2] = {1, 2};
            expect_members(c2, want2, 2);
            VNT_NCCL_OK(ncclCommDestroy(c2));
        }
        VNT_NCCL_OK(ncclCommDestroy(c));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    vnt_end();
}

/* ncclGroupSimulateEnd is local to a rank: rank 0 simulating a group alone leaves the
 * numbering of the communicator as the others have it, so the next all-reduce matches. */
static void test_simulate_is_local(void **st)
{
    int *d = vnt_dev_alloc(2 * sizeof(int)), h = vnt.rank + 1;
    vnt_to_dev(d, &h, sizeof(h));
    if (vnt.rank == 0) {
        ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
        VNT_NCCL_OK(ncclGroupStart());
        VNT_NCCL_OK(ncclAllReduce(d, d + 1, 1, ncclInt32, ncclSum, g_world, 0));
        VNT_NCCL_OK(ncclSend(d, 1, ncclInt32, 1, g_world, 0));
        VNT_NCCL_OK(ncclGroupSimulateEnd(&info));
        VNT_CHECK(info.estimatedTime > 0, "estimatedTime %g", (double)info.estimatedTime);
    }
    VNT_NCCL_OK(ncclAllReduce(d, d + 1, 1, ncclInt32, ncclSum, g_world, 0));
    VNT_CUDA_OK(cudaDeviceSynchronize());
    vnt_from_dev(&h, d + 1, sizeof(h));
    VNT_CHECK(h == 10, "allreduce after a local simulation: expected 10, got %d", h);
    VNT_CUDA_OK(cudaFree(d));
    vnt_end();
}

/* Finalize then destroy; finalize twice is misuse; abort of a healthy communicator. */
static void test_teardown(void **st)
{
    ncclComm_t a = NULL, b = NULL;
    VNT_NCCL_OK(ncclCommSplit(g_world, 0, 0, &a, NULL));
    VNT_NCCL_OK(ncclCommSplit(g_world, 0, 0, &b, NULL));
    VNT_NCCL_OK(ncclCommFinalize(a));
    VNT_NCCL(ncclInvalidUsage, ncclCommFinalize(a));
    VNT_NCCL_OK(ncclCommDestroy(a));
    VNT_NCCL_OK(ncclCommAbort(b));
    VNT_NCCL_OK(ncclCommDestroy(NULL));
    int n = 0;
    VNT_NCCL(ncclInvalidArgument, ncclCommCount(NULL, &n));
    VNT_NCCL(ncclInvalidArgument, ncclCommCount(g_world, NULL));
    vnt_end();
}

static int setup(void **st)
{
    ncclUniqueId id = vnt_shared_id(MPI_COMM_WORLD);
    VNT_NCCL_OK(ncclCommInitRank(&g_world, vnt.size, id, vnt.rank));
    return 0;
}

static int teardown(void **st)
{
    VNT_NCCL_OK(ncclCommDestroy(g_world));
    return 0;
}

int main(int argc, char **argv)
{
    vnt_init(&argc, &argv);
    if (vnt.size != 4) {
        fprintf(stderr, "vgpu.nccl.comm needs 4 ranks\n");
        MPI_Finalize();
        return 2;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_colors_keys),
        cmocka_unit_test(test_split_nocolor),
        cmocka_unit_test(test_split_repeated_concurrent),
        cmocka_unit_test(test_config_comm_name),
        cmocka_unit_test(test_shrink),
        cmocka_unit_test(test_simulate_is_local),
        cmocka_unit_test(test_teardown),
    };
    return vnt_run("vgpu.nccl.comm", tests, sizeof(tests) / sizeof(tests[0]), setup, teardown);
}
