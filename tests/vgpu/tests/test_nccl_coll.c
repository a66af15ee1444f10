/*
 * test_nccl_coll.c: every collective and point-to-point pattern of the vgpu's NCCL, for
 * every data type and reduction op, against references computed from all ranks' inputs.
 * CTest runs it under mpirun with 2, 4 and 8 ranks (vgpu.nccl.coll.np2/np4/np8).
 *
 * Inputs are deterministic in (rank, index) (vnt_gen), so each rank computes what every
 * other rank contributed and the exact expected output. Comparisons are bit for bit with no
 * tolerance: the vgpu reduces in rank order (fp32 accumulation for narrow floats, one
 * rounding), and the reference does the same with its own conversions; fp32/fp64 inputs
 * carry fractions so that a different order would show. In-place and out-of-place calls
 * alternate over the cases; non-root receive buffers must stay untouched.
 */
#include "nccl_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { AR, AG, RS, BC, RD, A2A, GA, SC } kind_t;
static const char *const kind_names[] = {"allreduce", "allgather", "reducescatter",
                                         "broadcast", "reduce", "alltoall", "gather",
                                         "scatter"};

static ncclComm_t g_comm;
static cudaStream_t g_s;

typedef struct ccase {
    kind_t kind;
    ncclDataType_t dt;
    ncclRedOp_t op;
    int root, inplace;
    size_t count;
    void *alloc[2];      /* device allocations */
    const void *send;    /* what the call gets */
    void *recv;
    void *check;         /* device region holding this rank's output, NULL if none */
    size_t check_elems;
    void *untouched;     /* a non-root receive buffer that must keep its poison */
    size_t untouched_bytes;
} ccase_t;

static int reducing(kind_t k) { return k == AR || k == RS || k == RD; }

static size_t in_elems(kind_t k, size_t count)
{
    return (k == RS || k == A2A || k == SC) ? count * (size_t)vnt.size : count;
}

static size_t out_elems(kind_t k, size_t count)
{
    return (k == AG || k == A2A || k == GA) ? count * (size_t)vnt.size : count;
}

static void make_input(int r, const ccase_t *c, char *host)
{
    size_t sz = vnt_size(c->dt);
    for (size_t j = 0; j < in_elems(c->kind, c->count); j++)
        vnt_store(host + j * sz, vnt_gen(r, j, c->dt, c->op), c->dt);
}

/* This rank's expected output, from the inputs of all ranks. */
static void expected(const ccase_t *c, char *exp)
{
    int n = vnt.size, me = vnt.rank;
    size_t sz = vnt_size(c->dt), blk = c->count * sz;
    char **ins = calloc((size_t)n, sizeof(char *));
    const void **ptrs = calloc((size_t)n, sizeof(void *));
    for (int k = 0; k < n; k++) {
        ins[k] = malloc(in_elems(c->kind, c->count) * sz);
        make_input(k, c, ins[k]);
        ptrs[k] = ins[k];
    }
    switch (c->kind) {
    case AR: case RD:
        vnt_ref_reduce(exp, ptrs, n, c->count, c->dt, c->op);
        break;
    case RS:
        for (int k = 0; k < n; k++)
            ptrs[k] = ins[k] + (size_t)me * blk;
        vnt_ref_reduce(exp, ptrs, n, c->count, c->dt, c->op);
        break;
    case AG: case GA:
        for (int k = 0; k < n; k++)
            memcpy(exp + (size_t)k * blk, ins[k], blk);
        break;
    case A2A:
        for (int k = 0; k < n; k++)
            memcpy(exp + (size_t)k * blk, ins[k] + (size_t)me * blk, blk);
        break;
    case BC:
        memcpy(exp, ins[c->root], blk);
        break;
    case SC:
        memcpy(exp, ins[c->root] + (size_t)me * blk, blk);
        break;
    }
    for (int k = 0; k < n; k++)
        free(ins[k]);
    free(ins);
    free(ptrs);
}

static void *poisoned(size_t bytes)
{
    void *d = vnt_dev_alloc(bytes);
    VNT_CUDA_OK(cudaMemset(d, 0xab, bytes));
    return d;
}

/* Allocates and fills the buffers, arranged in place or not as NCCL defines it. */
static void setup(ccase_t *c)
{
    int n = vnt.size, me = vnt.rank, root = me == c->root;
    size_t sz = vnt_size(c->dt), blk = c->count * sz, nin = in_elems(c->kind, c->count) * sz;
    size_t nout = out_elems(c->kind, c->count) * sz;
    char *in = malloc(nin);
    make_input(me, c, in);
    char *a, *b;
    c->check_elems = out_elems(c->kind, c->count);
    switch (c->kind) {
    case AR:
        c->alloc[0] = a = vnt_dev_alloc(nin);
        vnt_to_dev(a, in, nin);
        c->send = a;
        c->recv = c->inplace ? a : (c->alloc[1] = poisoned(nout));
        break;
    case AG:
        if (c->inplace) { /* sendbuff == recvbuff + rank * sendcount */
            c->alloc[0] = a = poisoned(nout);
            vnt_to_dev(a + (size_t)me * blk, in, blk);
            c->send = a + (size_t)me * blk;
            c->recv = a;
        } else {
            c->alloc[0] = a = vnt_dev_alloc(nin);
            vnt_to_dev(a, in, nin);
            c->send = a;
            c->recv = c->alloc[1] = poisoned(nout);
        }
        break;
    case RS:
        c->alloc[0] = a = vnt_dev_alloc(nin);
        vnt_to_dev(a, in, nin);
        c->send = a; /* in place: recvbuff == sendbuff + rank * recvcount */
        c->recv = c->inplace ? a + (size_t)me * blk : (c->alloc[1] = poisoned(nout));
        break;
    case BC:
        c->alloc[0] = a = poisoned(blk);
        if (root)
            vnt_to_dev(a, in, blk);
        if (c->inplace) {
            c->send = c->recv = a;
        } else { /* non-root sendbuff is not used: NULL must be accepted */
            c->recv = c->alloc[1] = poisoned(blk);
            c->send = root ? a : NULL;
        }
        break;
    case RD: case GA:
        b = NULL;
        if (root && c->inplace) { /* reduce: send == recv; gather: send == recv + root*count */
            c->alloc[0] = a = poisoned(nout);
            b = c->kind == RD ? a : a + (size_t)me * blk;
            vnt_to_dev(b, in, blk);
            c->send = b;
            c->recv = a;
        } else {
            c->alloc[0] = a = vnt_dev_alloc(blk);
            vnt_to_dev(a, in, blk);
            c->send = a;
            c->recv = c->alloc[1] = poisoned(nout);
        }
        if (!root) { /* recvbuff is unused off the root: inplace passes NULL, else checks it */
            c->check_elems = 0;
            c->recv = c->inplace ? NULL : c->recv;
            c->untouched = c->inplace ? NULL : c->recv;
            c->untouched_bytes = nout;
        }
        break;
    case A2A:
        c->alloc[0] = a = vnt_dev_alloc(nin);
        vnt_to_dev(a, in, nin);
        c->send = a;
        c->recv = c->alloc[1] = poisoned(nout);
        break;
    case SC:
        if (root) {
            c->alloc[0] = a = vnt_dev_alloc(nin);
            vnt_to_dev(a, in, nin);
            c->send = a; /* in place: recvbuff == sendbuff + root * count */
            c->recv = c->inplace ? a + (size_t)me * blk : (c->alloc[1] = poisoned(blk));
        } else {
            c->send = NULL;
            c->recv = c->alloc[0] = poisoned(blk);
        }
        break;
    }
    c->check = c->check_elems ? c->recv : NULL;
    (void)n;
    free(in);
}

static void issue(const ccase_t *c)
{
    switch (c->kind) {
    case AR:
        VNT_NCCL_OK(ncclAllReduce(c->send, c->recv, c->count, c->dt, c->op, g_comm, g_s));
        break;
    case AG: VNT_NCCL_OK(ncclAllGather(c->send, c->recv, c->count, c->dt, g_comm, g_s)); break;
    case RS:
        VNT_NCCL_OK(ncclReduceScatter(c->send, c->recv, c->count, c->dt, c->op, g_comm, g_s));
        break;
    case BC:
        if (c->inplace)
            VNT_NCCL_OK(ncclBcast(c->recv, c->count, c->dt, c->root, g_comm, g_s));
        else
            VNT_NCCL_OK(ncclBroadcast(c->send, c->recv, c->count, c->dt, c->root, g_comm, g_s));
        break;
    case RD:
        VNT_NCCL_OK(ncclReduce(c->send, c->recv, c->count, c->dt, c->op, c->root, g_comm, g_s));
        break;
    case A2A: VNT_NCCL_OK(ncclAlltoAll(c->send, c->recv, c->count, c->dt, g_comm, g_s)); break;
    case GA:
        VNT_NCCL_OK(ncclGather(c->send, c->recv, c->count, c->dt, c->root, g_comm, g_s));
        break;
    case SC:
        VNT_NCCL_OK(ncclScatter(c->send, c->recv, c->count, c->dt, c->root, g_comm, g_s));
        break;
    }
}

static void verify(const ccase_t *c)
{
    char what[128];
    snprintf(what, sizeof(what), "%s %s %s root %d %s count %zu", kind_names[c->kind],
             vnt_type_name(c->dt), reducing(c->kind) ? vnt_op_name(c->op) : "-", c->root,
             c->inplace ? "in-place" : "out-of-place", c->count);
    size_t sz = vnt_size(c->dt);
    if (c->check) {
        char *exp = malloc(c->check_elems * sz), *got = malloc(c->check_elems * sz);
        expected(c, exp);
        vnt_from_dev(got, c->check, c->check_elems * sz);
        vnt_compare(what, exp, got, c->check_elems, c->dt);
        free(exp);
        free(got);
    }
    if (c->untouched) {
        unsigned char *got = malloc(c->untouched_bytes);
        vnt_from_dev(got, c->untouched, c->untouched_bytes);
        for (size_t i = 0; i < c->untouched_bytes; i++)
            if (got[i] != 0xab) {
                vnt_fail(__FILE__, __LINE__, "%s: non-root recvbuff byte %zu was written", what, i);
                break;
            }
        free(got);
    }
    for (int i = 0; i < 2; i++)
        if (c->alloc[i])
            VNT_CUDA_OK(cudaFree(c->alloc[i]));
}

/* Issues every (type, op) case of one collective back to back, then checks them all. */
static void run_kind(kind_t kind, size_t count)
{
    ccase_t cases[ncclNumTypes * ncclNumOps];
    int m = 0, nops = reducing(kind) ? ncclNumOps : 1;
    for (int t = 0; t < ncclNumTypes; t++)
        for (int o = 0; o < nops; o++) {
            ccase_t *c = &cases[m++];
            memset(c, 0, sizeof(*c));
            c->kind = kind;
            c->dt = vnt_all_types[t];
            c->op = vnt_all_ops[o];
            c->root = (t * 5 + o) % vnt.size;
            c->inplace = kind != A2A && (t + o + (int)count) % 2;
            c->count = count;
            setup(c);
            issue(c);
        }
    VNT_CUDA_OK(cudaStreamSynchronize(g_s));
    for (int i = 0; i < m; i++)
        verify(&cases[i]);
    vnt_end();
}

static void test_allreduce(void **st) { run_kind(AR, 37); run_kind(AR, 3001); }
static void test_allgather(void **st) { run_kind(AG, 37); run_kind(AG, 2); }
static void test_reducescatter(void **st) { run_kind(RS, 37); run_kind(RS, 1000); }
static void test_broadcast(void **st) { run_kind(BC, 37); run_kind(BC, 4); }
static void test_reduce(void **st) { run_kind(RD, 37); run_kind(RD, 6); }
static void test_alltoall(void **st) { run_kind(A2A, 37); }
static void test_gather(void **st) { run_kind(GA, 37); run_kind(GA, 8); }
static void test_scatter(void **st) { run_kind(SC, 37); run_kind(SC, 8); }

/* 70 collectives in one group (more than the 64 a rank's ring holds) become one op whose
 * slots must be recycled while it waits; then a group mixing collectives and a group
 * nested three deep. */
static void test_grouped_collectives(void **st)
{
    enum { M = 70, C = 5 };
    int n = vnt.size, me = vnt.rank;
    int32_t *d = vnt_dev_alloc(2 * M * C * sizeof(int32_t)), h[2 * M * C];
    for (int j = 0; j < M; j++)
        for (int i = 0; i < C; i++)
            h[j * C + i] = me * 100 + j + i;
    vnt_to_dev(d, h, M * C * sizeof(int32_t));
    VNT_NCCL_OK(ncclGroupStart());
    VNT_NCCL_OK(ncclGroupStart());
    for (int j = 0; j < M; j++)
        VNT_NCCL_OK(ncclAllReduce(d + j * C, d + (M + j) * C, C, ncclInt32, ncclSum, g_comm, g_s));
    VNT_NCCL_OK(ncclGroupEnd());
    VNT_NCCL_OK(ncclGroupEnd());
    VNT_CUDA_OK(cudaStreamSynchronize(g_s));
    vnt_from_dev(h, d, sizeof(h));
    for (int j = 0; j < M; j++)
        for (int i = 0; i < C; i++) {
            int32_t want = 0;
            for (int r = 0; r < n; r++)
                want += r * 100 + j + i;
            VNT_CHECK(h[(M + j) * C + i] == want, "allreduce #%d element %d: expected %d, got %d",
                      j, i, want, h[(M + j) * C + i]);
        }
    VNT_CUDA_OK(cudaFree(d));
    vnt_end();
}

/* Literal expectations for the documented arithmetic. bf16 sum of 1 and three 2^-8 (ranks
 * 1-3; more ranks add 0): in fp32 1 + 3*2^-8 is a tie between 1+2^-7 and 1+2^-6, which
 * rounds to even 1.015625 (0x3f82); rounding after each step would give 1.0. With two
 * ranks 1 + 2^-8 ties to 1.0 (0x3f80). e4m3 has no infinity: 2 x 288 saturates to 448. */
static void test_literal_rounding(void **st)
{
    int me = vnt.rank;
    uint16_t hb = me == 0 ? 0x3f80 : me <= 3 ? 0x3b80 : 0; /* 1.0, 2^-8, 0 */
    uint8_t h8 = 0x79;                                       /* e4m3 288 */
    uint16_t *db = vnt_dev_alloc(2);
    uint8_t *d8 = vnt_dev_alloc(1);
    vnt_to_dev(db, &hb, 2);
    vnt_to_dev(d8, &h8, 1);
    VNT_NCCL_OK(ncclAllReduce(db, db, 1, ncclBfloat16, ncclSum, g_comm, g_s));
    VNT_NCCL_OK(ncclAllReduce(d8, d8, 1, ncclFloat8e4m3, ncclSum, g_comm, g_s));
    VNT_CUDA_OK(cudaStreamSynchronize(g_s));
    vnt_from_dev(&hb, db, 2);
    vnt_from_dev(&h8, d8, 1);
    uint16_t want = vnt.size == 2 ? 0x3f80 : 0x3f82;
    VNT_CHECK(hb == want, "bf16 sum: expected 0x%04x, got 0x%04x", want, hb);
    VNT_CHECK(h8 == 0x7e, "e4m3 sum of 288s: expected 0x7e (448), got 0x%02x", h8);
    VNT_CUDA_OK(cudaFree(db));
    VNT_CUDA_OK(cudaFree(d8));
    vnt_end();
}

/* Custom pre-multiply-sum ops: a host scalar is captured at creation (the op is
 * destroyed right after the call, which NCCL allows, and the variable is then changed); a
 * device scalar is read when the collective starts, so an asynchronous copy into it that
 * the stream runs before the collective is what counts. */
static void test_premulsum(void **st)
{
    enum { C = 29 };
    static const ncclDataType_t types[] = {ncclInt32, ncclUint8, ncclFloat16, ncclBfloat16,
                                           ncclFloat32, ncclFloat64, ncclFloat8e4m3};
    enum { NT = sizeof(types) / sizeof(types[0]) };
    int n = vnt.size, me = vnt.rank;
    char *in = malloc((size_t)n * C * 8), *exp = malloc(C * 8), *got = malloc(C * 8);
    char *d = vnt_dev_alloc((size_t)NT * 4 * C * 8), host[NT][8], late[NT][8], early[8];
    const void *ins[8];
    for (int t = 0; t < NT; t++) {
        ncclDataType_t dt = types[t];
        size_t sz = vnt_size(dt);
        char *base = d + (size_t)t * 4 * C * 8, *dscalar = base + 3 * C * 8;
        ncclRedOp_t op;
        vnt_store(host[t], vnt_is_float(dt) ? 0.5 : 3, dt);
        vnt_store(late[t], vnt_is_float(dt) ? 0.25 : 2, dt);
        vnt_store(early, 7, dt);
        for (int i = 0; i < C; i++)
            vnt_store(in + i * sz, vnt_gen(me, (size_t)i, dt, ncclSum), dt);
        vnt_to_dev(base, in, C * sz);
        char scalar[8];
        memcpy(scalar, host[t], 8);
        VNT_NCCL_OK(ncclRedOpCreatePreMulSum(&op, scalar, dt, ncclScalarHostImmediate, g_comm));
        VNT_NCCL_OK(ncclAllReduce(base, base + C * sz, C, dt, op, g_comm, g_s));
        VNT_NCCL_OK(ncclRedOpDestroy(op, g_comm));
        memcpy(scalar, early, 8);
        vnt_to_dev(dscalar, early, sz);
        VNT_NCCL_OK(ncclRedOpCreatePreMulSum(&op, dscalar, dt, ncclScalarDevice, g_comm));
        VNT_CUDA_OK(cudaMemcpyAsync(dscalar, late[t], sz, cudaMemcpyHostToDevice, g_s));
        VNT_NCCL_OK(ncclAllReduce(base, base + 2 * C * sz, C, dt, op, g_comm, g_s));
        VNT_NCCL_OK(ncclRedOpDestroy(op, g_comm));
    }
    VNT_CUDA_OK(cudaStreamSynchronize(g_s));
    for (int t = 0; t < NT; t++) {
        ncclDataType_t dt = types[t];
        size_t sz = vnt_size(dt);
        char *base = d + (size_t)t * 4 * C * 8, what[64];
        for (int k = 0; k < n; k++) {
            for (int i = 0; i < C; i++)
                vnt_store(in + ((size_t)k * C + i) * sz, vnt_gen(k, (size_t)i, dt, ncclSum), dt);
            ins[k] = in + (size_t)k * C * sz;
        }
        for (int pass = 0; pass < 2; pass++) {
            snprintf(what, sizeof(what), "premulsum %s %s scalar", vnt_type_name(dt),
                     pass ? "device" : "host");
            vnt_ref_premul(exp, ins, n, C, dt, pass ? late[t] : host[t]);
            vnt_from_dev(got, base + (1 + pass) * C * sz, C * sz);
            vnt_compare(what, exp, got, C, dt);
        }
    }
    free(in);
    free(exp);
    free(got);
    VNT_CUDA_OK(cudaFree(d));
    vnt_end();
}

/* ---- point-to-point ---- */

static void fill_gen(void *host, int r, size_t count, ncclDataType_t dt, size_t salt)
{
    for (size_t i = 0; i < count; i++)
        vnt_store((char *)host + i * vnt_size(dt), vnt_gen(r, i + salt, dt, ncclSum), dt);
}

/* A ring of every data type inside one group: 12 sends to one peer, more than a pair's
 * 8 slots, all in one rendezvous. */
static void test_p2p_ring_all_types(void **st)
{
    enum { C = 37 };
    int n = vnt.size, me = vnt.rank, next = (me + 1) % n, prev = (me + n - 1) % n;
    void *sb[ncclNumTypes], *rb[ncclNumTypes];
    char host[C * 8], exp[C * 8];
    VNT_NCCL_OK(ncclGroupStart());
    for (int t = 0; t < ncclNumTypes; t++) {
        ncclDataType_t dt = vnt_all_types[t];
        sb[t] = vnt_dev_alloc(C * vnt_size(dt));
        rb[t] = vnt_dev_alloc(C * vnt_size(dt));
        fill_gen(host, me, C, dt, (size_t)t);
        vnt_to_dev(sb[t], host, C * vnt_size(dt));
        VNT_NCCL_OK(ncclSend(sb[t], C, dt, next, g_comm, g_s));
        VNT_NCCL_OK(ncclRecv(rb[t], C, dt, prev, g_comm, g_s));
    }
    VNT_NCCL_OK(ncclGroupEnd());
    VNT_CUDA_OK(cudaStreamSynchronize(g_s));
    for (int t = 0; t < ncclNumTypes; t++) {
        ncclDataType_t dt = vnt_all_types[t];
        char what[64];
        snprintf(what, sizeof(what), "ring recv %s from rank %d", vnt_type_name(dt), prev);
        fill_gen(exp, prev, C, dt, (size_t)t);
        vnt_from_dev(host, rb[t], C * vnt_size(dt));
        vnt_compare(what, exp, host, C, dt);
        VNT_CUDA_OK(cudaFree(sb[t]));
        VNT_CUDA_OK(cudaFree(rb[t]));
    }
    vnt_end();
}

/* Only the outermost ncclGroupEnd submits: if an inner End submitted its send alone, the
 * receive would queue behind it on the same stream and the ring would deadlock. */
static void test_p2p_nested_groups(void **st)
{
    enum { C = 11 };
    int n = vnt.size, me = vnt.rank, next = (me + 1) % n, prev = (me + n - 1) % n;
    float h[C], *s = vnt_dev_alloc(sizeof(h)), *r = vnt_dev_alloc(sizeof(h));
    for (int i = 0; i < C; i++)
        h[i] = (float)(me * 1000 + i);
    vnt_to_dev(s, h, sizeof(h));
    VNT_NCCL_OK(ncclGroupStart());
    VNT_NCCL_OK(ncclGroupStart());
    VNT_NCCL_OK(ncclSend(s, C, ncclFloat32, next, g_comm, g_s));
    VNT_NCCL_OK(ncclGroupEnd());
    VNT_CUDA_OK(cudaStreamQuery(g_s)); /* nothing submitted yet: the stream is idle */
    VNT_NCCL_OK(ncclGroupStart());
    VNT_NCCL_OK(ncclRecv(r, C, ncclFloat32, prev, g_comm, g_s));
    VNT_NCCL_OK(ncclGroupEnd());
    VNT_NCCL_OK(ncclGroupEnd());
    VNT_CUDA_OK(cudaStreamSynchronize(g_s));
    vnt_from_dev(h, r, sizeof(h));
    for (int i = 0; i < C; i++)
        VNT_CHECK(h[i] == (float)(prev * 1000 + i), "element %d: expected %g, got %g", i,
                  (double)(prev * 1000 + i), (double)h[i]);
    VNT_CUDA_OK(cudaFree(s));
    VNT_CUDA_OK(cudaFree(r));
    vnt_end();
}

/* Ungrouped pairs in a safe order (the lower rank sends first, the upper receives first),
 * three rounds each way, so the per-pair numbering matches the k-th send to the k-th
 * receive. A last odd rank talks to itself inside a group. */
static void test_p2p_pairs_ungrouped(void **st)
{
    enum { C = 9, ROUNDS = 3 };
    int me = vnt.rank, peer = me ^ 1;
    int64_t h[C], *s = vnt_dev_alloc(sizeof(h)), *r = vnt_dev_alloc(ROUNDS * sizeof(h));
    if (peer >= vnt.size)
        peer = me;
    for (int k = 0; k < ROUNDS; k++) {
        for (int i = 0; i < C; i++)
            h[i] = (int64_t)me * 1000000 + k * 1000 + i;
        vnt_to_dev(s, h, sizeof(h));
        if (peer == me) {
            VNT_NCCL_OK(ncclGroupStart());
            VNT_NCCL_OK(ncclSend(s, C, ncclInt64, me, g_comm, g_s));
            VNT_NCCL_OK(ncclRecv(r + k * C, C, ncclInt64, me, g_comm, g_s));
            VNT_NCCL_OK(ncclGroupEnd());
        } else if (me < peer) {
            VNT_NCCL_OK(ncclSend(s, C, ncclInt64, peer, g_comm, g_s));
            VNT_NCCL_OK(ncclRecv(r + k * C, C, ncclInt64, peer, g_comm, g_s));
        } else {
            VNT_NCCL_OK(ncclRecv(r + k * C, C, ncclInt64, peer, g_comm, g_s));
            VNT_NCCL_OK(ncclSend(s, C, ncclInt64, peer, g_comm, g_s));
        }
        VNT_CUDA_OK(cudaStreamSynchronize(g_s)); /* s is refilled next round */
    }
    int64_t got[ROUNDS * C];
    vnt_from_dev(got, r, sizeof(got));
    for (int k = 0; k < ROUNDS; k++)
        for (int i = 0; i < C; i++) {
            int64_t want = (int64_t)peer * 1000000 + k * 1000 + i;
            VNT_CHECK(got[k * C + i] == want, "round %d element %d: expected %lld, got %lld", k,
                      i, (long long)want, (long long)got[k * C + i]);
        }
    VNT_CUDA_OK(cudaFree(s));
    VNT_CUDA_OK(cudaFree(r));
    vnt_end();
}

/* An all-to-all written with grouped send/recv, ten messages per ordered pair (self
 * included), on the legacy stream. */
static void test_p2p_alltoall_grouped(void **st)
{
    enum { C = 3, MSG = 10 };
    int n = vnt.size, me = vnt.rank;
    size_t per = (size_t)MSG * C;
    uint32_t *h = malloc((size_t)n * per * sizeof(uint32_t));
    uint32_t *s = vnt_dev_alloc((size_t)n * per * sizeof(uint32_t));
    uint32_t *r = vnt_dev_alloc((size_t)n * per * sizeof(uint32_t));
    for (int p = 0; p < n; p++)
        for (size_t i = 0; i < per; i++)
            h[p * per + i] = (uint32_t)(me * 100000 + p * 1000 + (int)i);
    vnt_to_dev(s, h, (size_t)n * per * sizeof(uint32_t));
    VNT_NCCL_OK(ncclGroupStart());
    for (int p = 0; p < n; p++)
        for (int m = 0; m < MSG; m++) {
            VNT_NCCL_OK(ncclSend(s + p * per + m * C, C, ncclUint32, p, g_comm, 0));
            VNT_NCCL_OK(ncclRecv(r + p * per + m * C, C, ncclUint32, p, g_comm, 0));
        }
    VNT_NCCL_OK(ncclGroupEnd());
    VNT_CUDA_OK(cudaDeviceSynchronize());
    vnt_from_dev(h, r, (size_t)n * per * sizeof(uint32_t));
    for (int p = 0; p < n; p++)
        for (size_t i = 0; i < per; i++) {
            uint32_t want = (uint32_t)(p * 100000 + me * 1000 + (int)i);
            VNT_CHECK(h[p * per + i] == want, "from rank %d element %zu: expected %u, got %u", p,
                      i, want, h[p * per + i]);
        }
    free(h);
    VNT_CUDA_OK(cudaFree(s));
    VNT_CUDA_OK(cudaFree(r));
    vnt_end();
}

static int setup_comm(void **st)
{
    ncclUniqueId id = vnt_shared_id(MPI_COMM_WORLD);
    VNT_NCCL_OK(ncclCommInitRank(&g_comm, vnt.size, id, vnt.rank));
    VNT_CUDA_OK(cudaStreamCreate(&g_s));
    return g_comm ? 0 : -1;
}

static int teardown_comm(void **st)
{
    VNT_NCCL_OK(ncclCommDestroy(g_comm));
    VNT_CUDA_OK(cudaStreamDestroy(g_s));
    return 0;
}

int main(int argc, char **argv)
{
    vnt_init(&argc, &argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_allreduce, setup_comm),
        cmocka_unit_test(test_allgather),
        cmocka_unit_test(test_reducescatter),
        cmocka_unit_test(test_broadcast),
        cmocka_unit_test(test_reduce),
        cmocka_unit_test(test_alltoall),
        cmocka_unit_test(test_gather),
        cmocka_unit_test(test_scatter),
        cmocka_unit_test(test_grouped_collectives),
        cmocka_unit_test(test_literal_rounding),
        cmocka_unit_test(test_premulsum),
        cmocka_unit_test(test_p2p_ring_all_types),
        cmocka_unit_test(test_p2p_nested_groups),
        cmocka_unit_test(test_p2p_pairs_ungrouped),
        cmocka_unit_test_teardown(test_p2p_alltoall_grouped, teardown_comm),
    };
    return vnt_run("vgpu.nccl.coll", tests, sizeof(tests) / sizeof(tests[0]), NULL, NULL);
}
