/*
 * plan.h: profiles (what profile mode recorded) and Strand Interleaving plans (what plan
 * mode executes), their files, and the planner that turns the one into the other.
 *
 * File formats: docs/plan-format.md (the contract; this header mirrors it).
 *
 * Everything here is plain data and pure functions of their arguments: thread-safe for
 * distinct objects; a loaded plan is read-only and may be shared between threads.
 * Errors: every loader and the planner return a status and write one line to err that
 * names the file (or "<buffer>") and the problem, e.g.
 *     "plan.json: version 7 is not supported (this shim reads version 1)".
 */
#ifndef DH_PLAN_H
#define DH_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

/* Profiles: version 2 is the compact form profile mode writes (each distinct op and each
 * distinct phase once, the program as phase references); version 1, one record per op, is
 * still read, and written by dh_profile_save. */
#define DH_PROFILE_VERSION 2
#define DH_PROFILE_VERSION_FLAT 1
/* Plans: version 2 writes each section's template as blocks, each written once with a repeat
 * count (the steady pair of every micro-batch once); version 1, flat, is still read. */
#define DH_PLAN_VERSION 2
#define DH_PLAN_VERSION_FLAT 1
#define DH_PLAN_NAME_MAX 64
#define DH_PLAN_P2P_MAX 40
/* The cuBLAS workspace the runtime gave each strand's handle before issue 27 (now: strand 1
 * only, of the framework's size, scheduler/dispatch/workspace.c), what the planner assumes for a
 * profile that does not say the framework's size: device
 * memory the baseline does not hold, which the planner counts in a plan's extra memory. */
#define DH_PLAN_BLAS_WS_BYTES (64u << 20)

/* X(id, name): what an operation is, for the cost model and the legality rules. */
#define DH_OPCLASS_LIST(X) \
    X(COMPUTE, "compute")  \
    X(COMM, "comm")        \
    X(COPY, "copy")        \
    X(EVENT, "event")      \
    X(FREE, "free")        \
    X(HOST, "host")

typedef enum dh_opclass {
#define DH__OPCLASS_ENUM(id, name) DH_CLS_##id,
    DH_OPCLASS_LIST(DH__OPCLASS_ENUM)
#undef DH__OPCLASS_ENUM
    DH_CLS_COUNT
} dh_opclass_t;

const char *dh_opclass_name(dh_opclass_t c);
/* -1 when name is not a class name. */
int dh_opclass_parse(const char *name);

/* ---- profiles ---- */

typedef struct dh_prof_comm {
    char name[DH_PLAN_NAME_MAX];    /* commName, may be "" */
    char role[16];                  /* "tp", "cp+dp", ... or "" (unknown) */
    int nranks, rank;
    uint64_t ident;                 /* the same in every member's profile, 0 unknown
                                       (nccl_wrap/registry.h, dh_nccl_ident) */
} dh_prof_comm_t;

typedef struct dh_prof_op {
    uint32_t thread;                /* issuing thread, ordinal in the process (0: first) */
    uint32_t stream;                /* framework stream, ordinal (0: the legacy stream) */
    char kind[16];                  /* op kind name: "GEMM", "KERNEL", "NCCL", ... */
    dh_opclass_t cls;
    uint64_t sig;                   /* kind + static parameters */
    uint64_t shape;                 /* data-dependent sizes (m,n,k, counts, grid) */
    char name[DH_PLAN_NAME_MAX];    /* for people: kernel name, "gemm 4096x1024x512", ... */
    int comm;                       /* index into comms, -1 none */
    uint64_t bytes;                 /* COMM: this rank's payload; COPY: bytes moved */
    double flops;                   /* COMPUTE GEMMs: 2mnk x batch; 0 otherwise */
    char p2p[DH_PLAN_P2P_MAX];      /* NCCL: its point-to-point calls and their peers,
                                       "s1 r3" (dh_op_desc_t.p2p); "" none or unknown (a
                                       profile without the field) */
    double us;                      /* device duration in microseconds, < 0 unknown */
    double start_us;                /* device start relative to the profile's first op, < 0 unknown */
    int64_t mem;                    /* bytes the issuing thread allocated (stream-ordered)
                                       since its previous op (>= 0), or, for FREE ops, minus
                                       the bytes freed */
    uint32_t nallocs;               /* 0: those allocations are mem alone (one, or none);
                                       else their sizes, in order, are the profile's
                                       alloc_sizes[alloc_first..+nallocs): several (summing
                                       to mem), or those made before a FREE op (dh_prof_allocs) */
    size_t alloc_first;
    int sync_before;                /* 1: the host synchronised (a drain) right before it */
    int64_t dep1;                   /* 1 + the index of the latest op of the previous run of
                                       another thread this one must follow (an event it
                                       waits for, memory that run made or wrote); 0 none */
} dh_prof_op_t;

typedef struct dh_profile {
    int version;
    int rank, world;                /* global rank and world size (-1 unknown) */
    char layout[DH_PLAN_NAME_MAX];  /* DHELIX_LAYOUT in effect, "" none */
    char host[DH_PLAN_NAME_MAX];
    char device[DH_PLAN_NAME_MAX];  /* device name as the runtime reports it */
    int max_connections;            /* CUDA_DEVICE_MAX_CONNECTIONS in effect (8 when unset) */
    int64_t blas_ws_bytes;          /* the largest cuBLAS/cuBLASLt workspace the framework gave a
                                       GEMM (bytes; -1 unknown: a profile without the key) */
    int64_t device_free_bytes;      /* the least device memory free while the profile was
                                       recorded (after the program's allocations; bytes; -1 or
                                       0 unknown): what pairing may cost at most there */
    int ncomms;
    dh_prof_comm_t *comms;
    size_t nops;
    dh_prof_op_t *ops;
    int sync_at_end;                /* the profile ends right after a host synchronisation */
    size_t trimmed_n;               /* dh_profile_trim kept whole iterations of this many ops
                                       (the iteration found before trimming), 0 untrimmed */
    int64_t *alloc_sizes;           /* the ops' allocation sizes (dh_prof_op_t.nallocs) */
    size_t nalloc_sizes;
} dh_profile_t;

/* The stream-ordered allocations op's thread made since its previous op, each a size in
 * bytes (the shim's pool reuses a freed block for an allocation of exactly its size, so
 * sizes matter, not only their sum): *sizes points at them (into p, or at op->mem), and
 * the count is returned. bytes_out (may be NULL) gets their sum; freed_out (may be NULL)
 * the bytes op frees (FREE ops, else 0). Pure. */
size_t dh_prof_allocs(const dh_profile_t *p, const dh_prof_op_t *op, const int64_t **sizes,
                      int64_t *bytes_out, int64_t *freed_out);

/* Parse a profile from memory (name is used in messages) or from a file. */
dh_status_t dh_profile_parse(const char *buf, size_t len, const char *name, dh_profile_t **out,
                             char *err, size_t errlen);
dh_status_t dh_profile_load(const char *path, dh_profile_t **out, char *err, size_t errlen);
/* Parsing either version gives the same flat list of ops: a compact profile's ops are its
 * phases' ops in sequence, with each position's mean device time and each occurrence's own
 * start. Errors: one line naming the file and the problem (a version other than 1 or 2:
 * "version 7 is not supported (this shim reads versions 1 to 2)"). */
/* Writes p as JSON, one record per op (version 1, lossless). */
dh_status_t dh_profile_save(const dh_profile_t *p, const char *path, char *err, size_t errlen);
/* Writes p in the compact form (version 2): device times become the means per phase
 * position, the rest is kept. */
dh_status_t dh_profile_save_compact(const dh_profile_t *p, const char *path, char *err,
                                    size_t errlen);
void dh_profile_free(dh_profile_t *p);

/* A compact profile built one op at a time (profile mode's recorder): it keeps each
 * distinct op once and, per op, only what varies (40 bytes). Not thread-safe. */
typedef struct dh_prof_builder dh_prof_builder_t;
dh_prof_builder_t *dh_prof_builder_new(void); /* NULL out of memory */
void dh_prof_builder_free(dh_prof_builder_t *b);
/* Appends op (every field used but nallocs and alloc_first; dep1 beyond the ops so far is
 * dropped) with the sizes of the allocations its thread made since its previous op
 * (nsizes of them; sizes may be NULL when nsizes is 0: mem alone says them). DH_ERR_NOMEM. */
dh_status_t dh_prof_builder_add(dh_prof_builder_t *b, const dh_prof_op_t *op,
                                const int64_t *sizes, size_t nsizes);
/* Sets op i's device duration and start (< 0 unknown). */
void dh_prof_builder_time(dh_prof_builder_t *b, size_t i, double us, double start_us);
size_t dh_prof_builder_nops(const dh_prof_builder_t *b);
size_t dh_prof_builder_ndistinct(const dh_prof_builder_t *b);
/* Op i's static description (its us, start_us, mem, sync and dep fields are not op i's)
 * and, when not NULL, its times; NULL when i is out of range. */
const dh_prof_op_t *dh_prof_builder_op(const dh_prof_builder_t *b, size_t i, double *us,
                                       double *start_us);
/* Writes the ops added so far as a version-2 profile with hdr's header fields (rank, world,
 * layout, host, device, max_connections, comms, sync_at_end). Errors as dh_profile_save. */
dh_status_t dh_prof_builder_save(const dh_prof_builder_t *b, const dh_profile_t *hdr,
                                 const char *path, char *err, size_t errlen);
/* The same JSON in memory: *buf (malloc'ed, NUL-terminated, *len bytes). */
dh_status_t dh_prof_builder_render(const dh_prof_builder_t *b, const dh_profile_t *hdr,
                                   char **buf, size_t *len, char *err, size_t errlen);

/* ---- plans ---- */

typedef struct dh_plan_op {
    uint64_t sig;
    uint64_t shape;
    int shape_dynamic;              /* the shape varied in the profile: not matched */
    char kind[16];
    dh_opclass_t cls;
    char name[DH_PLAN_NAME_MAX];
    int32_t phase;                  /* index into phases */
    int8_t strand;                  /* 0 (strand a: backward of i, or unpaired) or 1 (b) */
    int32_t group;                  /* index into groups */
    double us;                      /* profiled device time */
    int8_t moved;                   /* an NCCL op the plan issues where its group's order
                                       puts it, not in program order among the NCCL ops of
                                       other communicators (plan/moves.h, nccl_wrap/chain.h) */
} dh_plan_op_t;

typedef struct dh_plan_phase {
    size_t first, n;                /* template op range */
    char kind;                      /* 'F' forward, 'B' backward, 'O' other (optimizer, ...) */
    int mb;                         /* micro-batch ordinal within the iteration, -1 for 'O' */
    uint32_t thread;
    int paired_with;                /* the phase it co-executes with, -1 none */
} dh_plan_phase_t;

typedef struct dh_plan_group {
    /* Template ops of strand a and strand b in this group. Each strand's ops of one group
     * are consecutive in the template; a group has at least one op. */
    size_t a_first, a_n, b_first, b_n;
    char *order;                    /* issue order, a_n + b_n letters 'a'/'b', NUL-ended */
    double pred_us;                 /* predicted time of the group */
    double start_us;                /* predicted start within the iteration */
} dh_plan_group_t;

typedef struct dh_plan_section {
    int *ranks;                     /* global ranks this section is for */
    int nranks;
    uint64_t fingerprint;           /* hash of the template's signatures */
    size_t nops;
    dh_plan_op_t *ops;              /* the template: one iteration, in program order */
    int nphases;
    dh_plan_phase_t *phases;
    int ngroups;
    dh_plan_group_t *groups;        /* in execution order */
    double baseline_us;             /* profiled iteration time */
    double si_us;                   /* predicted iteration time with the plan */
    double extra_mem_bytes;         /* predicted extra peak device memory */
    double hidden_comm_fraction;    /* predicted share of exposed communication hidden */
    double held_ops;                /* most ops the runtime holds back for pairing at once
                                       (in groups not complete yet), 0 unknown */
    double held_free_bytes;         /* most bytes of frees it holds back so, 0 unknown */
    int moves;                      /* pairs whose point-to-point posts moved (moves.h) */
    int moves_refused;              /* pairs whose move the cycle check refused */
} dh_plan_section_t;

typedef struct dh_plan {
    int version;
    char created_by[DH_PLAN_NAME_MAX];
    int world;                      /* world size the plan is for (-1: any) */
    char layout[DH_PLAN_NAME_MAX];  /* "" when unknown */
    char policy[256];               /* DHELIX_GROUPS grammar, "all" by default */
    double max_extra_mem_bytes;
    double planning_s;
    int nsections;
    dh_plan_section_t *sections;
} dh_plan_t;

dh_status_t dh_plan_parse(const char *buf, size_t len, const char *name, dh_plan_t **out,
                          char *err, size_t errlen);
dh_status_t dh_plan_load(const char *path, dh_plan_t **out, char *err, size_t errlen);
/* Writes p in version 2, or in version 1 when p was read from a version-1 file. */
dh_status_t dh_plan_save(const dh_plan_t *p, const char *path, char *err, size_t errlen);
/* What dh_plan_save writes, in memory: *buf (malloc'ed, NUL-terminated, *len bytes).
 * DH_ERR_NOMEM. */
dh_status_t dh_plan_render(const dh_plan_t *p, char **buf, size_t *len);
void dh_plan_free(dh_plan_t *p);
/* Checks the rules of docs/plan-format.md that JSON types cannot express: every op in
 * exactly one group with matching group and strand fields, order letters, ranges inside
 * the template, phase references, the fingerprint, ranks in at most one section. The
 * loaders call it; the planner checks its own output with it. On a violation returns
 * DH_ERR_PARSE and writes one line "<name>: <path> <problem>" to err. Thread-safe. */
dh_status_t dh_plan_check(const dh_plan_t *p, const char *name, char *err, size_t errlen);
/* The section for global rank (the first one listing it), or the only section when there
 * is one and it lists no ranks; NULL when none applies. */
const dh_plan_section_t *dh_plan_section_for(const dh_plan_t *p, int rank);

/* The release marks of s, as the runtime follows them: ra[c] (s->nops entries) is the
 * number of leading groups complete once template op c has arrived (every op of each is at
 * or before c). Groups go out in order, so this is what may be issued then. Returns a
 * malloc'ed array, NULL out of memory. */
size_t *dh_plan_release_marks(const dh_plan_section_t *s);

/* Where ranks that must agree vote (scheduler/modes/tracker.c, "agreement"): one point per pair
 * of micro-batches with two-strand groups, in template order. Until op c has arrived, the
 * release mark stops at cap, the pair's first two-strand group (the pair goes out whole,
 * once agreed). */
typedef struct dh_plan_vp {
    size_t c;                       /* the template op after which the pair's last
                                       two-strand group is complete: the vote */
    size_t cap;                     /* the pair's first two-strand group */
    size_t c0;                      /* the first template op of a group from cap on */
    uint64_t pair;                  /* the pair's key (its backward's micro-batch) */
} dh_plan_vp_t;
/* s's vote points: *out (malloc'ed, NULL when none) and their number, or -1 out of memory.
 * *held gets the most ops the caps hold back at once (release marks stopped at each cap
 * until its vote). */
int dh_plan_vote_points(const dh_plan_section_t *s, dh_plan_vp_t **out, uint64_t *held);

/* A section's template as the runtime walks it: each block of repeated phases (plan
 * version 2) held once, so that its memory follows the distinct blocks, not the
 * micro-batches; each step O(1). Built from a checked section, which may be freed after.
 * Read-only once built: thread-safe for readers. */
typedef struct dh_plan_walk dh_plan_walk_t;
/* NULL out of memory, or when s has no op or no group. */
dh_plan_walk_t *dh_plan_walk_new(const dh_plan_section_t *s);
void dh_plan_walk_free(dh_plan_walk_t *w);
size_t dh_plan_walk_nops(const dh_plan_walk_t *w);
int dh_plan_walk_ngroups(const dh_plan_walk_t *w);
int dh_plan_walk_nblocks(const dh_plan_walk_t *w);
size_t dh_plan_walk_bytes(const dh_plan_walk_t *w);   /* memory it holds */

/* A position in the template: c the op (0..nops-1); b, r, k where the walker finds it.
 * All zero is op 0. */
typedef struct dh_plan_cursor {
    size_t c, b, r, k;
} dh_plan_cursor_t;
/* The next op, back to op 0 after the last. */
void dh_plan_walk_next(const dh_plan_walk_t *w, dh_plan_cursor_t *p);

typedef struct dh_plan_here {
    const dh_plan_op_t *op;         /* sig, shape, shape_dynamic, kind, name, strand, us
                                       (its phase and group fields are not the template's) */
    int group;                      /* the op's template group */
    size_t release;                 /* leading groups complete once this op has arrived */
    int single_strand;              /* its group has ops of one strand only */
    int starts_paired_b;            /* first op of a backward phase paired with a forward */
    int phase;                      /* its phase in the block's first repetition, -1 none */
    int paired_with;                /* that phase's pair (the same numbering), -1 none */
} dh_plan_here_t;
void dh_plan_walk_at(const dh_plan_walk_t *w, const dh_plan_cursor_t *p, dh_plan_here_t *out);
/* The issue order of template group g, NULL when there is none. O(log blocks). */
const char *dh_plan_walk_order(const dh_plan_walk_t *w, int group);

/* The signature fingerprint of a template (FNV-1a over the sigs). */
uint64_t dh_plan_fingerprint(const dh_plan_op_t *ops, size_t n);

#endif
