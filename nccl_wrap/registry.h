/*
 * registry.h: every communicator the process made through the shim, what it is, and what
 * the policy says about it.
 *
 * An entry is made when a wrapper creates a communicator (ncclCommInitRank*, InitAll,
 * Split, Shrink) or, for a handle the shim never saw created, on its first use (the library
 * is then asked for its size, rank and device; a handle the library does not know gets no
 * entry). Entries are never freed: ops hold pointers to them, and the exit report lists
 * communicators that are gone. A destroyed or aborted communicator's entry is marked dead
 * and is no longer found by its handle (the library may reuse the address).
 *
 * What an entry knows and how:
 *   nranks, rank, device  the creating call's arguments, else ncclCommCount/UserRank/CuDevice
 *                         (asked again on first use when a non-blocking creation was still
 *                         in progress);
 *   name                  ncclConfig_t.commName when the creating call passed one (copied);
 *   parent, color, key    the ncclCommSplit that made it (ncclCommShrink: the parent);
 *   order                 creation order in this process, from 1;
 *   members               the global ranks of its members (see dh_nccl_reg_learn below);
 *   role                  roles.h: from the members and DHELIX_LAYOUT, else from the
 *                         position (nranks, rank, own global rank) when one layout group
 *                         fits, else from the name;
 *   enabled               DHELIX_GROUPS's decision (policy.h), or dh_group_set_enabled's.
 *
 * Locking: dh__reg_lock (registry.c) guards the table and every field marked "lock"; it is a
 * leaf (nothing else is taken under it, no NCCL or CUDA call is made under it). Fields
 * marked "const" are written before the entry is published and never again. Counters and
 * flags marked "atomic" are read and written without the lock.
 */
#ifndef DH_NCCL_REGISTRY_H
#define DH_NCCL_REGISTRY_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <nccl.h>

#include "roles.h"

#define DH_NCCL_NAME_MAX 128
#define DH_NCCL_PREMUL_MAX 16

/* How a communicator was made. */
#define DH_NCCL_ORIGINS(X) \
    X(INIT, "init")        \
    X(SPLIT, "split")      \
    X(SHRINK, "shrink")    \
    X(ALL, "init_all")     \
    X(SEEN, "first_use")

typedef enum dh_nccl_origin {
#define DH__ORIGIN_ENUM(id, name) DH_NCCL_FROM_##id,
    DH_NCCL_ORIGINS(DH__ORIGIN_ENUM)
#undef DH__ORIGIN_ENUM
} dh_nccl_origin_t;

typedef struct dh_nccl_comm dh_nccl_comm_t;

struct dh_nccl_comm {
    ncclComm_t comm;                  /* const: the handle (key while live) */
    uint64_t order;                   /* const */
    dh_nccl_origin_t origin;          /* const */
    char name[DH_NCCL_NAME_MAX];      /* const: commName or "" */
    dh_nccl_comm_t *parent;           /* const: split/shrink parent or NULL */
    int color, key;                   /* const: of the split */
    uint64_t ident;                   /* const: the same on every member, different for
                                         every other communicator of the job; 0 unknown
                                         (dh_nccl_ident below) */
    int nderived;                     /* lock: splits and shrinks made of it so far */
    _Atomic int ready;                /* nranks, rank, device are valid (release) */
    int nranks, rank, device;         /* lock; read without it once ready */
    int *members;                     /* lock: global ranks, [nranks], or NULL */
    const char *members_how;          /* lock: "exchange", "layout", "self" or NULL */
    unsigned role;                    /* lock: roles.h mask, 0 unknown */
    const char *role_how;             /* lock: "members", "position", "name" or NULL */
    int decided;                      /* lock: the policy decision was made and logged */
    int live;                         /* lock: not destroyed or aborted */
    int premul[DH_NCCL_PREMUL_MAX];   /* lock: live ncclRedOpCreatePreMulSum ops */
    int npremul;                      /* lock */
    _Atomic int enabled;              /* may be interleaved (0: pinned) */
    _Atomic int aborting;             /* ncclCommAbort: queued ops of it are cancelled */
    _Atomic int async_err;            /* first failure of a deferred op (ncclResult_t) */
    _Atomic uint64_t ops;             /* the program's collective/p2p calls */
    _Atomic uint64_t bytes;           /* their count x element size */
    _Atomic uint64_t deferred;        /* calls replayed by the dispatcher */
    _Atomic uint64_t interleaved;     /* ... in two-strand execution, not pinned */
    _Atomic uint64_t pinned;          /* ... pinned */
    _Atomic uint64_t errors;          /* replays that failed or were cancelled */
    dh_nccl_comm_t *next;             /* lock: creation order */
};

/* What a creating wrapper knows (fields it does not know: -1 / NULL). */
typedef struct dh_nccl_birth {
    dh_nccl_origin_t origin;
    int nranks, rank, device;
    const char *name;                 /* commName, copied */
    ncclComm_t parent;
    int color, key;
    uint64_t ident;                   /* InitRank*: dh_nccl_ident of the unique ids; 0 else */
} dh_nccl_birth_t;

/* ---- lifetime (any thread) ---- */

/* Records comm, made as b says; returns its entry, or NULL on no memory. A live entry of
 * the same handle is replaced (the library reused the address). */
dh_nccl_comm_t *dh_nccl_reg_add(ncclComm_t comm, const dh_nccl_birth_t *b);
/* The live entry of comm, registering it from the library's answers when the shim has none
 * (origin first_use); also completes an entry that is not ready. NULL when comm is NULL or
 * the library does not know it (then the caller forwards the call and the library answers).
 * Cost: a thread-local cache hit, else the lock and a hash lookup. */
dh_nccl_comm_t *dh_nccl_reg_get(ncclComm_t comm);
/* The live entry of comm, or NULL; registers nothing. */
dh_nccl_comm_t *dh_nccl_reg_find(ncclComm_t comm);
/* comm was destroyed (aborted = 0) or aborted: its entry no longer answers to the handle. */
void dh_nccl_reg_gone(ncclComm_t comm, int aborted);

/* ---- what it is ---- */

/* Learns the members' global ranks of ready entries es[0..n) (made together, e.g. by one
 * ncclCommInitAll or inside one group) when DHELIX_LAYOUT is set and they are not known
 * yet, by ONE small exchange right after the members created them: an ncclAllGather of each
 * member's global rank over the communicator itself, on a private stream (exchange.c).
 * Why it cannot hang: every member makes the same creating call at the same point of the
 * program (NCCL requires it), the layout setting is the same for the whole job, and the
 * exchange is the communicator's first operation, so every member makes it and it meets;
 * the queue is drained first, so it never waits behind held work; and the wait is bounded
 * (DH_NCCL_EXCHANGE_S seconds, then the shim goes on without the members). Without
 * DHELIX_LAYOUT nothing is exchanged: the members come from the layout position or stay
 * unknown. A one-rank communicator's member is the process itself. Then decides each one's
 * role and policy (logged once at info level). Call with no NCCL group open on this thread. */
void dh_nccl_reg_learn(dh_nccl_comm_t **es, int n);
#define DH_NCCL_EXCHANGE_S 10

/* A consistent copy of what profiles record about e: its name, role ("tp", "cp+dp", or ""
 * when unknown), size and this process's rank in it. */
void dh_nccl_reg_describe(const dh_nccl_comm_t *e, char *name, size_t len, char *role,
                          size_t rlen, int *nranks, int *rank);
/* The identity of a communicator made by ncclCommInitRank* from the n unique ids ids[0..n):
 * a hash of their bytes, which every member passes alike. A split or shrink's child gets a
 * hash of its parent's identity, the colour and how many children the parent had before
 * (members split a communicator in one order, NCCL requires it), so the members of one
 * child agree and those of its siblings differ. The planner tells communicators apart
 * across processes by it (scheduler/plan/moves.h). Never 0. Thread-safe, pure. */
uint64_t dh_nccl_ident(const void *ids, size_t n);
/* e's identity (above), 0 unknown (a communicator first seen in use, or made by
 * ncclCommInitAll: its members are this process's devices). */
uint64_t dh_nccl_reg_ident(const dh_nccl_comm_t *e);

/* The process's global rank from the launcher (RANK, OMPI_COMM_WORLD_RANK, PMI_RANK,
 * SLURM_PROCID) and the job's size (WORLD_SIZE, OMPI_COMM_WORLD_SIZE, PMI_SIZE,
 * SLURM_NTASKS); -1 / 0 when unknown. */
int dh_nccl_global_rank(void);
int dh_nccl_world_size(void);
/* DHELIX_LAYOUT, parsed once (a bad value: warned once, unset). */
const dh_layout_t *dh_nccl_layout(void);

/* ---- policy ---- */

/* Sets whether comm's operations may be interleaved; returns the previous setting (0/1),
 * or -1 when the library does not know comm. Logged at info level. Ops captured later use
 * the new setting; ops already queued keep theirs. */
int dh_nccl_reg_set_enabled(ncclComm_t comm, int enabled);

/* ---- custom reduction ops (lock inside) ---- */
void dh_nccl_reg_premul_add(dh_nccl_comm_t *e, ncclRedOp_t op);
void dh_nccl_reg_premul_del(dh_nccl_comm_t *e, ncclRedOp_t op);
int dh_nccl_reg_premul_known(dh_nccl_comm_t *e, ncclRedOp_t op);

/* ---- errors ---- */

/* Records r as e's asynchronous error unless one is recorded already. */
void dh_nccl_reg_fail(dh_nccl_comm_t *e, ncclResult_t r);

/* ---- the exit report ---- */

typedef struct dh_nccl_comm_stats {
    uint64_t order;
    char name[DH_NCCL_NAME_MAX];
    char role[32];
    const char *origin;
    int nranks, rank, device, live, enabled;
    uint64_t ops, bytes, deferred, interleaved, pinned, errors;
} dh_nccl_comm_stats_t;

/* Every entry in creation order into *out (malloc'd, the caller frees); returns how many
 * (0 with *out NULL when none or out of memory). */
size_t dh_nccl_reg_stats(dh_nccl_comm_stats_t **out);

#endif
