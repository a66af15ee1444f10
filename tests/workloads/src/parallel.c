/*
 * parallel.c: ranks and process groups in Megatron's order (see parallel.h).
 */
#include "parallel.h"

#include <string.h>

/* One process per (pp, cp, ep) cell: representative ranks, or emulated communication. */
static int cells(const wl_cfg_t *c) { return c->represent || c->emulate_comm[0]; }

int wl_ps_processes(const wl_cfg_t *c)
{
    return cells(c) ? c->pp * c->cp * c->ep : c->tp * c->cp * c->dp * c->pp;
}

/* Is global rank g one of this job's processes? */
static int is_process(const wl_cfg_t *c, int g)
{
    if (!cells(c)) return 1;
    int rest = g / c->tp, dp = (rest / c->cp) % c->dp;
    return g % c->tp == 0 && dp / c->ep == 0;
}

/* A group: members base + i * stride for i < size, this rank at index rank. */
static void group(wl_group_t *g, const wl_cfg_t *c, const char *desc, int base, int stride,
                  int size, int rank)
{
    memset(g, 0, sizeof *g);
    g->desc = desc;
    g->size = size;
    g->rank = rank;
    g->granks = malloc(sizeof(int) * (size_t)size);
    if (!g->granks) wl_fatal("out of memory");
    g->real = 1;
    for (int i = 0; i < size; i++) {
        g->granks[i] = base + i * stride;
        g->real &= is_process(c, g->granks[i]);
    }
    g->split_color = base;
    /* Collective over all processes, in the same order everywhere. */
    MPI_Comm_split(MPI_COMM_WORLD, g->real && size > 1 ? base : MPI_UNDEFINED, rank, &g->mpi);
}

static void ranks(wl_ps_t *ps, const wl_cfg_t *c)
{
    int g = ps->grank, rest = g / c->tp;
    ps->tp_rank = g % c->tp;
    ps->cp_rank = rest % c->cp;
    ps->dp_rank = (rest / c->cp) % c->dp;
    ps->pp_rank = rest / (c->cp * c->dp);
    ps->ep_rank = ps->dp_rank % c->ep; /* cp == 1 whenever ep > 1 */
    ps->edp_rank = ps->dp_rank / c->ep;
}

/* The global rank a process stands for: itself, or in representative mode the member with
 * tp rank 0 and expert-data-parallel rank 0 of its (pp, cp, ep) cell. */
static int virtual_rank(const wl_cfg_t *c, int proc)
{
    if (!cells(c)) return proc;
    int cp = proc % c->cp, ep = (proc / c->cp) % c->ep, pp = proc / (c->cp * c->ep);
    return c->tp * (cp + c->cp * (ep + c->dp * pp));
}

/* The vgpu places a real communicator's members on nodes by the global rank it reads at
 * initialisation (VGPU_RANK, else the launcher's). A process standing for another global
 * rank says so before its first CUDA call, so that, e.g., pipeline stages 32 ranks apart
 * talk across nodes as they would in the full job. On a real GPU the variable is unused. */
static void tell_vgpu_rank(const wl_cfg_t *c, int grank)
{
    if (!cells(c)) return;
    char buf[16];
    snprintf(buf, sizeof buf, "%d", grank);
    setenv("VGPU_RANK", buf, 1); /* read by the vgpu at its first call */
}

void wl_ps_init(wl_ps_t *ps, const wl_cfg_t *c)
{
    memset(ps, 0, sizeof *ps);
    MPI_Comm_size(MPI_COMM_WORLD, &ps->nproc);
    MPI_Comm_rank(MPI_COMM_WORLD, &ps->proc);
    ps->world = c->tp * c->cp * c->dp * c->pp;
    if (ps->nproc != wl_ps_processes(c))
        wl_fatal("this configuration needs %d processes (%s), the job has %d", wl_ps_processes(c),
                 cells(c) ? "pp x cp x ep, one per cell" : "tp x cp x dp x pp", ps->nproc);
    ps->grank = virtual_rank(c, ps->proc);
    tell_vgpu_rank(c, ps->grank);
    ranks(ps, c);
    int g = ps->grank, TP = c->tp, CP = c->cp, DP = c->dp;
    int dpcp_base = ps->tp_rank + TP * CP * DP * ps->pp_rank;
    group(&ps->dp_cp, c, "DATA_PARALLEL_GROUP_WITH_CP", dpcp_base, TP, CP * DP, ps->cp_rank + CP * ps->dp_rank);
    group(&ps->dp, c, "DATA_PARALLEL_GROUP", g - TP * CP * ps->dp_rank, TP * CP, DP, ps->dp_rank);
    group(&ps->cp, c, "CONTEXT_PARALLEL_GROUP", g - TP * ps->cp_rank, TP, CP, ps->cp_rank);
    group(&ps->tp, c, "TENSOR_MODEL_PARALLEL_GROUP", g - ps->tp_rank, 1, TP, ps->tp_rank);
    group(&ps->pp, c, "PIPELINE_MODEL_PARALLEL_GROUP", g - TP * CP * DP * ps->pp_rank, TP * CP * DP,
          c->pp, ps->pp_rank);
    group(&ps->ep, c, "EXPERT_MODEL_PARALLEL_GROUP", g - TP * ps->ep_rank, TP, c->ep, ps->ep_rank);
    group(&ps->edp, c, "EXPERT_DATA_PARALLEL_GROUP", g - TP * c->ep * ps->edp_rank, TP * c->ep,
          DP / c->ep, ps->edp_rank);
}

void wl_ps_connect(wl_ps_t *ps, const wl_cfg_t *c)
{
    wl_group_t *all[] = {&ps->dp_cp, &ps->dp, &ps->cp, &ps->tp, &ps->pp, &ps->ep, &ps->edp};
    if (c->comm_split) {
        if (cells(c)) wl_fatal("--comm-split needs every rank as a process (not with representative ranks "
                               "or emulated communication)");
        ps->world_comm = wl_world_comm(MPI_COMM_WORLD, ps->proc, ps->nproc);
    }
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (c->m.experts == 0 && (all[i] == &ps->ep || all[i] == &ps->edp)) continue; /* dense */
        wl_group_connect(all[i], ps->world_comm);
    }
}

void wl_ps_fini(wl_ps_t *ps)
{
    wl_group_t *all[] = {&ps->dp_cp, &ps->dp, &ps->cp, &ps->tp, &ps->pp, &ps->ep, &ps->edp};
    wl_comm_fini(all, (int)(sizeof all / sizeof all[0]));
    if (ps->world_comm) WL_CK(ncclCommDestroy(ps->world_comm));
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (all[i]->mpi != MPI_COMM_NULL) MPI_Comm_free(&all[i]->mpi);
        if (all[i]->stream) WL_CK(cudaStreamDestroy(all[i]->stream));
        free(all[i]->granks);
    }
}
