/*
 * coverage_nccl.c: the NCCL side of the coverage program (--nccl). Every NCCL entry point a
 * PyTorch/Megatron job reaches, over one rank (each collective is then a copy, so the
 * results equal those of the copy kernels used without --nccl):
 *   - communicators as ProcessGroupNCCL makes them: lazily inside a group with a name
 *     (ncclCommInitRankConfig), split from it (ncclCommSplit), plus ncclCommInitRank,
 *     ncclCommInitRankScalable and ncclCommInitAll + ncclCommShrink for the other groups;
 *     queries (count, rank, device, version, error strings, the last error); teardown with
 *     ncclCommFinalize, ncclCommDestroy and ncclCommAbort;
 *   - memory from ncclMemAlloc, registered (ncclCommRegister, ncclCommWindowRegister);
 *   - every collective and a grouped send/recv in one chain, an all-reduce with a
 *     pre-multiplied sum whose custom op is destroyed and whose host scalar is overwritten
 *     right after the call (as PyTorch's AVG does), and a group that is only simulated;
 *   - ncclCommGetAsyncError polled by the watchdog thread (cov_nccl_async_errors).
 * Errors: an NCCL call that fails ends the process (cov_die), as in coverage_dev.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nccl.h>

#include "coverage.h"

static void ck_nccl(ncclResult_t r, const char *what, int line)
{
    if (r != ncclSuccess)
        cov_die(line, "%s returned %d (%s)", what, (int)r, ncclGetErrorString(r));
}
#define CK_NCCL(call) ck_nccl((call), #call, __LINE__)

/* The groups: tensor, data, pipeline, expert and context parallel. Written by setup and
 * teardown on the main thread, used by the backward thread in between (ordered by the
 * thread handoff) and read by the watchdog (ncclCommGetAsyncError only). */
enum { TP, DP, PP, EP, CP, NCOMMS };
static ncclComm_t comms[NCOMMS];
static float *nbuf;            /* from ncclMemAlloc: the gather/scatter intermediate */
static void *nbuf_handle;
static ncclWindow_t nbuf_win;

static ncclComm_t comm_init(ncclComm_t *out, const char *name)
{
    ncclUniqueId id;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.commName = name;
    CK_NCCL(ncclGetUniqueId(&id));
    CK_NCCL(ncclGroupStart());
    CK_NCCL(ncclCommInitRankConfig(out, 1, id, 0, &cfg));
    CK_NCCL(ncclGroupEnd());
    return *out;
}

void cov_nccl_setup(cudaStream_t side)
{
    int version = 0, count = -1, rank = -1, device = -1;
    CK_NCCL(ncclGetVersion(&version));
    if (version < 22800)
        cov_die(__LINE__, "ncclGetVersion: %d, expected at least 22800 (NCCL 2.28)", version);
    if (ncclGetErrorString(ncclSuccess) == NULL)
        cov_die(__LINE__, "ncclGetErrorString(ncclSuccess) is NULL");

    comm_init(&comms[TP], "TENSOR_MODEL_PARALLEL_GROUP");
    ncclConfig_t dp = NCCL_CONFIG_INITIALIZER;
    dp.commName = "DATA_PARALLEL_GROUP";
    CK_NCCL(ncclCommSplit(comms[TP], 0, 0, &comms[DP], &dp));
    ncclUniqueId id;
    CK_NCCL(ncclGetUniqueId(&id));
    CK_NCCL(ncclCommInitRank(&comms[PP], 1, id, 0));
    ncclConfig_t ep = NCCL_CONFIG_INITIALIZER;
    ep.commName = "EXPERT_MODEL_PARALLEL_GROUP";
    CK_NCCL(ncclGetUniqueId(&id));
    CK_NCCL(ncclCommInitRankScalable(&comms[EP], 1, 0, 1, &id, &ep));
    /* A world communicator for one device, split into the context group, then aborted as a
     * process group's shutdown does. A shrink must exclude a rank (NCCL refuses an empty
     * list), so on one rank it fails: the wrapper must hand that status back. */
    ncclComm_t world = NULL, none = NULL;
    int devs[1] = {0};
    CK_NCCL(ncclCommInitAll(&world, 1, devs));
    CK_NCCL(ncclCommSplit(world, 0, 0, &comms[CP], NULL));
    ncclResult_t shrunk = ncclCommShrink(world, NULL, 0, &none, NULL, NCCL_SHRINK_DEFAULT);
    if (shrunk != ncclInvalidArgument)
        cov_die(__LINE__, "ncclCommShrink excluding no rank: %d, expected ncclInvalidArgument",
                (int)shrunk);
    CK_NCCL(ncclCommAbort(world));

    CK_NCCL(ncclCommCount(comms[TP], &count));
    CK_NCCL(ncclCommUserRank(comms[TP], &rank));
    CK_NCCL(ncclCommCuDevice(comms[TP], &device));
    if (count != 1 || rank != 0 || device != 0)
        cov_die(__LINE__, "TP communicator: %d ranks, rank %d, device %d; expected 1, 0, 0",
                count, rank, device);
    if (ncclGetLastError(comms[TP]) == NULL)
        cov_die(__LINE__, "ncclGetLastError returned NULL");

    size_t bytes = (size_t)COV_HID * COV_TOK * sizeof(float);
    CK_NCCL(ncclMemAlloc((void **)&nbuf, bytes));
    CK_NCCL(ncclCommRegister(comms[CP], nbuf, bytes, &nbuf_handle));
    CK_NCCL(ncclCommWindowRegister(comms[CP], nbuf, bytes, &nbuf_win, 0));

    /* A group that is only simulated: nothing may run. */
    ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
    CK_NCCL(ncclGroupStart());
    CK_NCCL(ncclAllReduce(nbuf, nbuf, (size_t)COV_HID * COV_TOK, ncclFloat32, ncclSum,
                          comms[TP], side));
    CK_NCCL(ncclGroupSimulateEnd(&sim));
    /* NCCL 2.28.3 on an H100 left the initializer's NCCL_UNDEF_FLOAT (-1) for a one-rank
     * communicator (nothing to move); the vgpu estimates a time. */
    if (!(sim.estimatedTime > 0 || sim.estimatedTime == -1.0f))
        cov_die(__LINE__, "ncclGroupSimulateEnd: estimated time %g us", (double)sim.estimatedTime);
}

void cov_nccl_backward(const float *dh1, float *dh1r, size_t nh, const float *dy, float *ca,
                       float *cb, size_t ny, cudaStream_t s)
{
    /* The tensor-parallel all-reduce of the input gradient, then PyTorch's AVG: a
     * pre-multiplied sum whose op and host scalar die right after the call. */
    CK_NCCL(ncclAllReduce(dh1, dh1r, nh, ncclFloat32, ncclSum, comms[TP], s));
    float scale = 1.0f;
    ncclRedOp_t avg;
    CK_NCCL(ncclRedOpCreatePreMulSum(&avg, &scale, ncclFloat32, ncclScalarHostImmediate,
                                     comms[TP]));
    CK_NCCL(ncclAllReduce(dh1r, dh1r, nh, ncclFloat32, avg, comms[TP], s));
    CK_NCCL(ncclRedOpDestroy(avg, comms[TP]));
    cov_scribble_f(&scale, 7.0f);

    /* dy through every other collective; the result ends in cb. */
    CK_NCCL(ncclReduceScatter(dy, ca, ny, ncclFloat32, ncclSum, comms[DP], s));
    CK_NCCL(ncclAllGather(ca, cb, ny, ncclFloat32, comms[DP], s));
    CK_NCCL(ncclBroadcast(cb, ca, ny, ncclFloat32, 0, comms[DP], s));
    CK_NCCL(ncclBcast(ca, ny, ncclFloat32, 0, comms[EP], s));
    CK_NCCL(ncclReduce(ca, cb, ny, ncclFloat32, ncclSum, 0, comms[DP], s));
    CK_NCCL(ncclAlltoAll(cb, ca, ny, ncclFloat32, comms[EP], s));
    CK_NCCL(ncclGather(ca, nbuf, ny, ncclFloat32, 0, comms[CP], s));
    CK_NCCL(ncclScatter(nbuf, ca, ny, ncclFloat32, 0, comms[CP], s));
    CK_NCCL(ncclGroupStart());
    CK_NCCL(ncclSend(ca, ny, ncclFloat32, 0, comms[PP], s));
    CK_NCCL(ncclRecv(cb, ny, ncclFloat32, 0, comms[PP], s));
    CK_NCCL(ncclGroupEnd());
}

int cov_nccl_async_errors(void)
{
    int bad = 0;
    for (int i = 0; i < NCOMMS; i++) {
        ncclResult_t e = ncclSuccess;
        if (comms[i] == NULL)
            continue;
        CK_NCCL(ncclCommGetAsyncError(comms[i], &e));
        if (e != ncclSuccess) {
            fprintf(stderr, "coverage: watchdog: communicator %d reports %d (%s)\n", i, (int)e,
                    ncclGetErrorString(e));
            bad++;
        }
    }
    return bad;
}

void cov_nccl_teardown(void)
{
    CK_NCCL(ncclCommWindowDeregister(comms[CP], nbuf_win));
    CK_NCCL(ncclCommDeregister(comms[CP], nbuf_handle));
    CK_NCCL(ncclMemFree(nbuf));
    CK_NCCL(ncclCommFinalize(comms[TP]));
    for (int i = NCOMMS - 1; i >= 0; i--) {
        CK_NCCL(ncclCommDestroy(comms[i]));
        comms[i] = NULL;
    }
}

/* ---- --tp2: two ranks (one process each, under mpirun) ---- */

static ncclComm_t tp2;

/* The launcher's rank: Open MPI, then the PMI names of MPICH and Slurm. */
static int launcher_int(const char *const *names, int def)
{
    for (const char *const *n = names; *n; n++) {
        const char *v = getenv(*n);
        if (v && *v)
            return atoi(v);
    }
    return def;
}

int cov_tp2_setup(const char *idfile)
{
    static const char *const rank_vars[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK",
                                            NULL};
    static const char *const size_vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", NULL};
    int rank = launcher_int(rank_vars, -1), size = launcher_int(size_vars, -1);
    if (rank < 0 || rank > 1 || size != 2)
        cov_die(__LINE__, "--tp2 needs two ranks under mpirun: rank %d of %d", rank, size);
    /* The unique id travels through idfile: rank 0 writes it (renamed into place, so that it
     * appears whole), rank 1 polls for it. The file must not exist before the run. */
    ncclUniqueId id;
    if (rank == 0) {
        char tmp[4200];
        snprintf(tmp, sizeof(tmp), "%s.tmp%ld", idfile, (long)getpid());
        CK_NCCL(ncclGetUniqueId(&id));
        FILE *f = fopen(tmp, "wb");
        if (f == NULL || fwrite(&id, sizeof(id), 1, f) != 1 || fclose(f) != 0 ||
            rename(tmp, idfile) != 0)
            cov_die(__LINE__, "--tp2: cannot write %s (%s)", idfile, strerror(errno));
    } else {
        double waited = 0;
        for (;;) {
            FILE *f = fopen(idfile, "rb");
            if (f != NULL) {
                size_t got = fread(&id, sizeof(id), 1, f);
                fclose(f);
                if (got == 1)
                    break;
            }
            if (waited > 60.0)
                cov_die(__LINE__, "--tp2: rank 0 wrote no id to %s within 60 s", idfile);
            struct timespec ts = {0, 2000000};
            nanosleep(&ts, NULL);
            waited += 0.002;
        }
    }
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.commName = "TENSOR_MODEL_PARALLEL_GROUP";
    CK_NCCL(ncclCommInitRankConfig(&tp2, 2, id, rank, &cfg));
    int count = -1, me = -1;
    CK_NCCL(ncclCommCount(tp2, &count));
    CK_NCCL(ncclCommUserRank(tp2, &me));
    if (count != 2 || me != rank)
        cov_die(__LINE__, "--tp2 communicator: %d ranks, rank %d; expected 2, %d", count, me,
                rank);
    return rank;
}

void cov_tp2_allreduce(const float *src, float *dst, size_t n, cudaStream_t s)
{
    CK_NCCL(ncclAllReduce(src, dst, n, ncclFloat32, ncclAvg, tp2, s));
}

void cov_tp2_teardown(void)
{
    CK_NCCL(ncclCommDestroy(tp2));
    tp2 = NULL;
}
