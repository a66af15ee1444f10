/*
 * pairs.h: overlap profiling of operator pairs (`dhelix-pairs`, `dhelix profile-pairs`).
 *
 * The paper's method (DHelix, arXiv 2411.15871): time op a alone, op b alone and both
 * co-running on two streams; efficiency = (a + b - corun) / min(a, b), 1 when the shorter
 * op hides completely under the longer one, 0 when they serialise, negative when running
 * them together is worse than one after the other. The planner reads the per-class medians
 * (compute||comm, compute||compute) and the concrete pairs.
 *
 * Parts: spec.c (pure: op names to launchable specs, the selection from a profile,
 * medians), bench.c (the measurements, real CUDA/cuBLAS/NCCL), launch.c (one op on a
 * stream), rdv.c (ranks and the NCCL unique id), report.c (pairs.json and the table),
 * main.c (the program). Nothing here is thread-safe unless it says so; the program is
 * single-threaded.
 */
#ifndef DH_OVL_H
#define DH_OVL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <library_types.h>
#include <nccl.h>

#include "common/status.h"
#include "plan/plan.h"

#define DH_OVL_FORMAT "dhelix-pairs"
#define DH_OVL_VERSION 1

/* ---- op specs: what the profile's op names say ---- */

typedef struct dh_ovl_gemm {
    char ta, tb;                /* 'n' or 't' (cuBLAS, column-major) */
    long m, n, k;
    long batch;                 /* 1: a plain GEMM; > 1: strided-batched */
    cudaDataType_t dtype;       /* CUDA_R_32F, CUDA_R_16F or CUDA_R_16BF (A, B and C) */
    size_t esize;               /* bytes per element */
    int lt;                     /* the name said "lt" (cuBLASLt in the profile) */
} dh_ovl_gemm_t;

/* X(id, profile name) */
#define DH_OVL_COLL_LIST(X)       \
    X(ALLREDUCE, "AllReduce")       \
    X(ALLGATHER, "AllGather")       \
    X(REDUCESCATTER, "ReduceScatter") \
    X(BROADCAST, "Broadcast")       \
    X(REDUCE, "Reduce")             \
    X(ALLTOALL, "AllToAll")         \
    X(GATHER, "Gather")             \
    X(SCATTER, "Scatter")           \
    X(SEND, "Send")                 \
    X(RECV, "Recv")

typedef enum dh_ovl_coll {
#define DH__OVL_COLL_ENUM(id, name) DH_OVL_##id,
    DH_OVL_COLL_LIST(DH__OVL_COLL_ENUM)
#undef DH__OVL_COLL_ENUM
    DH_OVL_COLL_COUNT
} dh_ovl_coll_t;

typedef struct dh_ovl_nccl {
    dh_ovl_coll_t coll;
    ncclDataType_t dtype;
    size_t esize;
    size_t count;               /* elements as given to the API */
    int comm;                   /* index into the profile's comms */
    int nranks;                 /* that communicator's size */
} dh_ovl_nccl_t;

/* Parses "gemm TA,TB MxNxK TYPE [xBATCH]" (or "lt ..."). Returns 0, or -1 with a reason
 * in why (static string). */
int dh_ovl_parse_gemm(const char *name, dh_ovl_gemm_t *out, const char **why);
/* Parses "nccl OP TYPE COUNT". comm and nranks are left to the caller. */
int dh_ovl_parse_nccl(const char *name, dh_ovl_nccl_t *out, const char **why);
const char *dh_ovl_coll_name(dh_ovl_coll_t c);

/* Element counts of a collective's send and receive buffers on this rank. */
void dh_ovl_nccl_counts(const dh_ovl_nccl_t *c, int nranks, size_t *send, size_t *recv);

/* ---- the selection ---- */

typedef struct dh_ovl_op {
    int is_comm;                /* 0: a GEMM (class compute), 1: NCCL (class comm) */
    uint64_t sig, shape;        /* from the profile */
    char name[DH_PLAN_NAME_MAX];
    double prof_us;             /* total profiled time of its occurrences (unknown: 0) */
    int prof_n;                 /* occurrences in the profile */
    union {
        dh_ovl_gemm_t gemm;
        dh_ovl_nccl_t nccl;
    } u;
    double solo_us;             /* measured; < 0 until then */
    void *buf[2][3];            /* device buffers per stream slot (bench.c) */
} dh_ovl_op_t;

typedef struct dh_ovl_sel {
    dh_ovl_op_t *compute;     /* ranked by total profiled time, longest first */
    int ncompute;
    dh_ovl_op_t *comm;
    int ncomm;
    int skipped;                /* distinct ops left out (a note each went to notes) */
} dh_ovl_sel_t;

/* Chooses the top k distinct GEMM/LT_MATMUL ops (class compute) and the top k NCCL ops
 * (class comm) of p, distinct by (sig, shape), ranked by total profiled time. NCCL ops of
 * a communicator whose size is not nprocs, and names that do not parse, are skipped with
 * one line each on notes (may be NULL). Errors: DH_ERR_NOMEM, DH_ERR_INVALID (k < 1). */
dh_status_t dh_ovl_select(const dh_profile_t *p, int nprocs, int k, dh_ovl_sel_t *out,
                          FILE *notes);
void dh_ovl_sel_free(dh_ovl_sel_t *s);
/* FNV-1a over the selection's sigs, shapes, names and order: ranks compare it to know they
 * measure the same list. */
uint64_t dh_ovl_sel_hash(const dh_ovl_sel_t *s);

/* ---- results ---- */

typedef struct dh_ovl_result {
    const dh_ovl_op_t *a, *b;
    double corun_us;
    double efficiency;
} dh_ovl_result_t;

/* (a + b - corun) / min(a, b), limited to [-10, 1] (the range the planner reads); 0 when
 * min(a, b) <= 0. */
double dh_ovl_efficiency(double a_us, double b_us, double corun_us);
/* Median of n values (sorts v in place); 0 when n == 0. */
double dh_ovl_median(double *v, int n);

typedef struct dh_ovl_report {
    char device[256];
    int ranks, reps, max_connections;
    const char *profile;        /* path, for people */
    const dh_ovl_sel_t *sel;
    const dh_ovl_result_t *pairs;
    int npairs;
} dh_ovl_report_t;

/* Writes pairs.json (format: scheduler/pairs/README.md). */
dh_status_t dh_ovl_write_json(const dh_ovl_report_t *r, const char *path, char *err,
                              size_t errlen);
/* Prints the solo times, the pairs and the class medians as aligned tables. */
dh_status_t dh_ovl_print_table(const dh_ovl_report_t *r, FILE *out);

#endif
