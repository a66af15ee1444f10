/* spec.c: op names to launchable specs, the selection from a profile, medians (pairs.h).
 * Pure functions: no CUDA call is made here (the headers only give the type enums). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pairs.h"

static const char *const dh__coll_names[DH_OVL_COLL_COUNT] = {
#define DH__OVL_COLL_NAME(id, name) name,
    DH_OVL_COLL_LIST(DH__OVL_COLL_NAME)
#undef DH__OVL_COLL_NAME
};

const char *dh_ovl_coll_name(dh_ovl_coll_t c)
{
    return c >= 0 && c < DH_OVL_COLL_COUNT ? dh__coll_names[c] : "?";
}

typedef struct dh__dtype_name {
    const char *name;
    int value;      /* cudaDataType_t or ncclDataType_t */
    size_t esize;
} dh__dtype_name_t;

/* GEMM operand types the measurement can launch (cuBLAS with fp32 accumulate). */
static const dh__dtype_name_t dh__gemm_types[] = {
    {"f32", CUDA_R_32F, 4}, {"fp32", CUDA_R_32F, 4}, {"float", CUDA_R_32F, 4},
    {"f16", CUDA_R_16F, 2}, {"fp16", CUDA_R_16F, 2}, {"half", CUDA_R_16F, 2},
    {"bf16", CUDA_R_16BF, 2},
};

/* Every NCCL 2.28 data type, under the short names profile mode writes and the long ones. */
static const dh__dtype_name_t dh__nccl_types[] = {
    {"i8", ncclInt8, 1},        {"int8", ncclInt8, 1},     {"char", ncclChar, 1},
    {"u8", ncclUint8, 1},       {"uint8", ncclUint8, 1},   {"i32", ncclInt32, 4},
    {"int32", ncclInt32, 4},    {"int", ncclInt, 4},       {"u32", ncclUint32, 4},
    {"uint32", ncclUint32, 4},  {"i64", ncclInt64, 8},     {"int64", ncclInt64, 8},
    {"u64", ncclUint64, 8},     {"uint64", ncclUint64, 8}, {"f16", ncclFloat16, 2},
    {"fp16", ncclFloat16, 2},   {"half", ncclHalf, 2},     {"f32", ncclFloat32, 4},
    {"fp32", ncclFloat32, 4},   {"float", ncclFloat, 4},   {"f64", ncclFloat64, 8},
    {"fp64", ncclFloat64, 8},   {"double", ncclDouble, 8}, {"bf16", ncclBfloat16, 2},
    {"f8e4m3", ncclFloat8e4m3, 1}, {"fp8e4m3", ncclFloat8e4m3, 1},
    {"f8e5m2", ncclFloat8e5m2, 1}, {"fp8e5m2", ncclFloat8e5m2, 1},
};

static const dh__dtype_name_t *dh__find_type(const dh__dtype_name_t *t, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++) {
        if (strcmp(t[i].name, s) == 0)
            return &t[i];
    }
    return NULL;
}

/* Splits a copy of name at blanks into at most max tokens; returns how many (max + 1 when
 * there are more). */
static int dh__split(const char *name, char *copy, size_t cap, char **tok, int max)
{
    snprintf(copy, cap, "%s", name);
    int n = 0;
    char *save = NULL;
    for (char *t = strtok_r(copy, " \t", &save); t; t = strtok_r(NULL, " \t", &save)) {
        if (n == max)
            return max + 1;
        tok[n++] = t;
    }
    return n;
}

/* A positive decimal integer filling all of s; -1 otherwise. */
static long dh__positive(const char *s)
{
    if (*s < '0' || *s > '9')
        return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    return (*end || errno || v <= 0) ? -1 : v;
}

int dh_ovl_parse_gemm(const char *name, dh_ovl_gemm_t *out, const char **why)
{
    char copy[DH_PLAN_NAME_MAX * 2], *tok[6];
    int n = dh__split(name, copy, sizeof copy, tok, 5);
    memset(out, 0, sizeof *out);
    *why = "not \"gemm TA,TB MxNxK TYPE [xBATCH]\"";
    if (n < 4 || n > 5)
        return -1;
    if (strcmp(tok[0], "gemm") == 0)
        out->lt = 0;
    else if (strcmp(tok[0], "lt") == 0)
        out->lt = 1;
    else
        return -1;
    const char *t = tok[1];
    if (strlen(t) != 3 || t[1] != ',' || (t[0] != 'n' && t[0] != 't') ||
        (t[2] != 'n' && t[2] != 't')) {
        *why = "transposes are not \"n\"/\"t\" pairs";
        return -1;
    }
    out->ta = t[0];
    out->tb = t[2];
    char dims[64], *p1, *p2;
    snprintf(dims, sizeof dims, "%s", tok[2]);
    p1 = strchr(dims, 'x');
    p2 = p1 ? strchr(p1 + 1, 'x') : NULL;
    if (!p1 || !p2 || strchr(p2 + 1, 'x')) {
        *why = "sizes are not MxNxK";
        return -1;
    }
    *p1 = *p2 = '\0';
    out->m = dh__positive(dims);
    out->n = dh__positive(p1 + 1);
    out->k = dh__positive(p2 + 1);
    if (out->m < 0 || out->n < 0 || out->k < 0) {
        *why = "sizes are not positive integers";
        return -1;
    }
    const dh__dtype_name_t *dt =
        dh__find_type(dh__gemm_types, sizeof dh__gemm_types / sizeof dh__gemm_types[0], tok[3]);
    if (!dt) {
        *why = "type is not f32, f16 or bf16";
        return -1;
    }
    out->dtype = (cudaDataType_t)dt->value;
    out->esize = dt->esize;
    out->batch = 1;
    if (n == 5) {
        out->batch = tok[4][0] == 'x' ? dh__positive(tok[4] + 1) : -1;
        if (out->batch < 0) {
            *why = "batch is not xN";
            return -1;
        }
    }
    *why = NULL;
    return 0;
}

int dh_ovl_parse_nccl(const char *name, dh_ovl_nccl_t *out, const char **why)
{
    char copy[DH_PLAN_NAME_MAX * 2], *tok[5];
    int n = dh__split(name, copy, sizeof copy, tok, 4);
    memset(out, 0, sizeof *out);
    out->comm = -1;
    *why = "not \"nccl OP TYPE COUNT\"";
    if (n != 4 || strcmp(tok[0], "nccl") != 0)
        return -1;
    int coll = -1;
    for (int i = 0; i < DH_OVL_COLL_COUNT; i++) {
        if (strcmp(tok[1], dh__coll_names[i]) == 0)
            coll = i;
    }
    if (coll < 0 && strcmp(tok[1], "AlltoAll") == 0)
        coll = DH_OVL_ALLTOALL; /* NCCL's own spelling */
    if (coll < 0) {
        *why = "unknown collective";
        return -1;
    }
    out->coll = (dh_ovl_coll_t)coll;
    const dh__dtype_name_t *dt =
        dh__find_type(dh__nccl_types, sizeof dh__nccl_types / sizeof dh__nccl_types[0], tok[2]);
    if (!dt) {
        *why = "unknown NCCL data type";
        return -1;
    }
    out->dtype = (ncclDataType_t)dt->value;
    out->esize = dt->esize;
    long c = dh__positive(tok[3]);
    if (c < 0) {
        *why = "count is not a positive integer";
        return -1;
    }
    out->count = (size_t)c;
    *why = NULL;
    return 0;
}

void dh_ovl_nccl_counts(const dh_ovl_nccl_t *c, int nranks, size_t *send, size_t *recv)
{
    size_t n = c->count, all = c->count * (size_t)(nranks > 0 ? nranks : 1);
    *send = n;
    *recv = n;
    switch (c->coll) {
    case DH_OVL_ALLGATHER: case DH_OVL_GATHER:
        *recv = all;
        break;
    case DH_OVL_REDUCESCATTER: case DH_OVL_SCATTER:
        *send = all;
        break;
    case DH_OVL_ALLTOALL:
        *send = *recv = all;
        break;
    default:
        break;
    }
}

/* ---- selection ---- */

typedef struct dh__ent {
    uint64_t sig, shape;
    size_t first;       /* first occurrence in the profile */
    double us;
    int n;
    int is_comm;
} dh__ent_t;

static int dh__cmp_key(const void *x, const void *y)
{
    const dh__ent_t *a = x, *b = y;
    if (a->is_comm != b->is_comm)
        return a->is_comm - b->is_comm;
    if (a->sig != b->sig)
        return a->sig < b->sig ? -1 : 1;
    if (a->shape != b->shape)
        return a->shape < b->shape ? -1 : 1;
    return a->first < b->first ? -1 : a->first > b->first;
}

/* Longest total first; ties by more occurrences, then by first appearance. */
static int dh__cmp_rank(const void *x, const void *y)
{
    const dh__ent_t *a = x, *b = y;
    if (a->us != b->us)
        return a->us > b->us ? -1 : 1;
    if (a->n != b->n)
        return b->n - a->n;
    return a->first < b->first ? -1 : a->first > b->first;
}

static int dh__candidate(const dh_prof_op_t *o)
{
    if (o->cls == DH_CLS_COMPUTE &&
        (strcmp(o->kind, "GEMM") == 0 || strcmp(o->kind, "LT_MATMUL") == 0))
        return 0;
    if (o->cls == DH_CLS_COMM && strcmp(o->kind, "NCCL") == 0)
        return 1;
    return -1;
}

/* Fills op from the profile op it stands for. 0; -1 with a reason (the name); -2 when its
 * communicator's size is not the run's. */
static int dh__make_op(const dh_profile_t *p, const dh__ent_t *e, int nprocs, dh_ovl_op_t *op,
                       const char **why)
{
    const dh_prof_op_t *o = &p->ops[e->first];
    memset(op, 0, sizeof *op);
    op->is_comm = e->is_comm;
    op->sig = e->sig;
    op->shape = e->shape;
    op->prof_us = e->us;
    op->prof_n = e->n;
    op->solo_us = -1;
    snprintf(op->name, sizeof op->name, "%s", o->name);
    if (!e->is_comm)
        return dh_ovl_parse_gemm(o->name, &op->u.gemm, why);
    if (dh_ovl_parse_nccl(o->name, &op->u.nccl, why) != 0)
        return -1;
    if (o->comm < 0 || o->comm >= p->ncomms) {
        *why = "no communicator in the profile";
        return -1;
    }
    op->u.nccl.comm = o->comm;
    op->u.nccl.nranks = p->comms[o->comm].nranks;
    return op->u.nccl.nranks == nprocs ? 0 : -2;
}

/* One line per communicator whose ops were left out for its size. */
static void dh__note_comms(const dh_profile_t *p, const int *left, const size_t *example,
                           int nprocs, FILE *notes)
{
    for (int c = 0; notes && c < p->ncomms; c++) {
        if (!left[c])
            continue;
        const dh_prof_comm_t *pc = &p->comms[c];
        fprintf(notes,
                "pairs: skipped %d distinct op(s) of communicator %d (%s, %d ranks; this run has "
                "%d), e.g. \"%s\"\n",
                left[c], c, pc->role[0] ? pc->role : pc->name[0] ? pc->name : "no role",
                pc->nranks, nprocs, p->ops[example[c]].name);
    }
}

/* Groups the candidates by (class, sig, shape); returns the number of groups in ent. */
static size_t dh__group(const dh_profile_t *p, dh__ent_t *ent)
{
    size_t n = 0;
    for (size_t i = 0; i < p->nops; i++) {
        int c = dh__candidate(&p->ops[i]);
        if (c < 0)
            continue;
        ent[n++] = (dh__ent_t){p->ops[i].sig, p->ops[i].shape, i,
                               p->ops[i].us > 0 ? p->ops[i].us : 0, 1, c};
    }
    qsort(ent, n, sizeof *ent, dh__cmp_key);
    size_t g = 0;
    for (size_t i = 0; i < n; i++) {
        if (g > 0 && ent[g - 1].is_comm == ent[i].is_comm && ent[g - 1].sig == ent[i].sig &&
            ent[g - 1].shape == ent[i].shape) {
            ent[g - 1].us += ent[i].us;
            ent[g - 1].n++;
        } else {
            ent[g++] = ent[i];
        }
    }
    qsort(ent, g, sizeof *ent, dh__cmp_rank);
    return g;
}

dh_status_t dh_ovl_select(const dh_profile_t *p, int nprocs, int k, dh_ovl_sel_t *out,
                          FILE *notes)
{
    memset(out, 0, sizeof *out);
    if (k < 1)
        return DH_ERR_INVALID;
    dh__ent_t *ent = malloc((p->nops ? p->nops : 1) * sizeof *ent);
    out->compute = calloc((size_t)k, sizeof *out->compute);
    out->comm = calloc((size_t)k, sizeof *out->comm);
    if (!ent || !out->compute || !out->comm) {
        free(ent);
        dh_ovl_sel_free(out);
        return DH_ERR_NOMEM;
    }
    int *left = calloc((size_t)p->ncomms + 1, sizeof *left);
    size_t *example = calloc((size_t)p->ncomms + 1, sizeof *example);
    if (!left || !example) {
        free(ent);
        free(left);
        free(example);
        dh_ovl_sel_free(out);
        return DH_ERR_NOMEM;
    }
    size_t g = dh__group(p, ent);
    for (size_t i = 0; i < g; i++) {
        int *cnt = ent[i].is_comm ? &out->ncomm : &out->ncompute;
        if (*cnt == k)
            continue;
        dh_ovl_op_t *dst = ent[i].is_comm ? &out->comm[*cnt] : &out->compute[*cnt];
        const char *why = NULL;
        int rc = dh__make_op(p, &ent[i], nprocs, dst, &why);
        if (rc == 0) {
            (*cnt)++;
            continue;
        }
        out->skipped++;
        if (rc == -2) {
            if (left[dst->u.nccl.comm]++ == 0)
                example[dst->u.nccl.comm] = ent[i].first;
        } else if (notes) {
            fprintf(notes, "pairs: skipped \"%s\" (%d in the profile): %s\n",
                    p->ops[ent[i].first].name, ent[i].n, why);
        }
    }
    dh__note_comms(p, left, example, nprocs, notes);
    free(left);
    free(example);
    free(ent);
    return DH_OK;
}

void dh_ovl_sel_free(dh_ovl_sel_t *s)
{
    free(s->compute);
    free(s->comm);
    memset(s, 0, sizeof *s);
}

static uint64_t dh__fnv(uint64_t h, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        h ^= (v >> (8 * i)) & 0xff;
        h *= 0x100000001b3ull;
    }
    return h;
}

/* The name is what the launch is made from: it goes in with the sig and shape. */
static uint64_t dh__fnv_op(uint64_t h, const dh_ovl_op_t *op)
{
    h = dh__fnv(dh__fnv(h, op->sig), op->shape);
    for (const unsigned char *c = (const unsigned char *)op->name; *c; c++) {
        h ^= *c;
        h *= 0x100000001b3ull;
    }
    return h;
}

uint64_t dh_ovl_sel_hash(const dh_ovl_sel_t *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    h = dh__fnv(h, (uint64_t)s->ncompute << 32 | (uint32_t)s->ncomm);
    for (int i = 0; i < s->ncompute; i++)
        h = dh__fnv_op(h, &s->compute[i]);
    for (int i = 0; i < s->ncomm; i++)
        h = dh__fnv_op(h, &s->comm[i]);
    return h;
}

/* ---- arithmetic ---- */

double dh_ovl_efficiency(double a_us, double b_us, double corun_us)
{
    double lo = a_us < b_us ? a_us : b_us;
    if (lo <= 0)
        return 0.0;
    double e = (a_us + b_us - corun_us) / lo;
    /* Above 1 the pair ran faster together than its longer op alone: noise on a GPU, not
     * overlap. Below -10 it is a pathology the planner reads as "never". */
    return e > 1.0 ? 1.0 : e < -10.0 ? -10.0 : e;
}

static int dh__cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

double dh_ovl_median(double *v, int n)
{
    if (n <= 0)
        return 0.0;
    qsort(v, (size_t)n, sizeof *v, dh__cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
