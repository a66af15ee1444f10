/* profile_io.c: profiles (docs/plan-format.md) from and to JSON. */
#include "plan_int.h"

#include <stdlib.h>
#include <string.h>

#define DH__READER "this shim"

static dh_status_t dh__comm_parse(const dh__jr_t *r, json_t *arr, const dh__jpath_t *at,
                                  size_t i, dh_prof_comm_t *c)
{
    dh__jpath_t here = DH__JIDX(at, i);
    json_t *o;
    long long v;
    DH_CHECK(dh__jobj_at(r, arr, &here, i, &o));
    DH_CHECK(dh__jstr(r, o, &here, "name", 0, "", c->name, sizeof(c->name)));
    DH_CHECK(dh__jstr(r, o, &here, "role", 0, "", c->role, sizeof(c->role)));
    DH_CHECK(dh__jint(r, o, &here, "nranks", 0, -1, -1, 1 << 24, &v));
    c->nranks = (int)v;
    DH_CHECK(dh__jint(r, o, &here, "rank", 0, -1, -1, 1 << 24, &v));
    c->rank = (int)v;
    DH_CHECK(dh__jhex(r, o, &here, "ident", 1, &c->ident, NULL));
    if (c->nranks > 0 && c->rank >= c->nranks)
        return dh__jerr(r, &here, "has rank %d in a communicator of %d", c->rank, c->nranks);
    return DH_OK;
}

/* The class member: a name from DH_OPCLASS_LIST. */
static dh_status_t dh__class_parse(const dh__jr_t *r, json_t *o, const dh__jpath_t *at,
                                   dh_opclass_t *out)
{
    char cls[16];
    DH_CHECK(dh__jstr(r, o, at, "c", 1, "", cls, sizeof(cls)));
    int c = dh_opclass_parse(cls);
    if (c < 0) {
        dh__jpath_t here = DH__JKEY(at, "c");
        return dh__jerr(r, &here, "is \"%s\", not an op class (compute, comm, copy, event, "
                                  "free, host)", cls);
    }
    *out = (dh_opclass_t)c;
    return DH_OK;
}

dh_status_t dh__prof_op_parse(const dh__jr_t *r, json_t *arr, const dh__jpath_t *at, size_t i,
                              int ncomms, dh_prof_op_t *op)
{
    dh__jpath_t here = DH__JIDX(at, i);
    json_t *o;
    long long v;
    DH_CHECK(dh__jobj_at(r, arr, &here, i, &o));
    DH_CHECK(dh__jint(r, o, &here, "t", 1, 0, 0, 0xffffffffLL, &v));
    op->thread = (uint32_t)v;
    DH_CHECK(dh__jint(r, o, &here, "s", 0, 0, 0, 0xffffffffLL, &v));
    op->stream = (uint32_t)v;
    DH_CHECK(dh__jstr(r, o, &here, "k", 1, "", op->kind, sizeof(op->kind)));
    DH_CHECK(dh__class_parse(r, o, &here, &op->cls));
    DH_CHECK(dh__jhex(r, o, &here, "sig", 0, &op->sig, NULL));
    int no_shape;
    DH_CHECK(dh__jhex(r, o, &here, "shape", 1, &op->shape, &no_shape));
    DH_CHECK(dh__jstr(r, o, &here, "name", 0, "", op->name, sizeof(op->name)));
    DH_CHECK(dh__jint(r, o, &here, "comm", 0, -1, -1, ncomms - 1, &v));
    op->comm = (int)v;
    DH_CHECK(dh__jint(r, o, &here, "bytes", 0, 0, 0, 1LL << 62, &v));
    op->bytes = (uint64_t)v;
    DH_CHECK(dh__jnum(r, o, &here, "flops", 0, 0, 0, 1e30, &op->flops));
    DH_CHECK(dh__jstr(r, o, &here, "p2p", 0, "", op->p2p, sizeof(op->p2p)));
    DH_CHECK(dh__jnum(r, o, &here, "us", 0, -1, -1e300, 1e15, &op->us));
    DH_CHECK(dh__jnum(r, o, &here, "start_us", 0, -1, -1e300, 1e15, &op->start_us));
    DH_CHECK(dh__jint(r, o, &here, "mem", 0, 0, -(1LL << 60), 1LL << 60, &v));
    op->mem = (int64_t)v;
    DH_CHECK(dh__jint(r, o, &here, "sync", 0, 0, 0, 1, &v));
    op->sync_before = (int)v;
    DH_CHECK(dh__jint(r, o, &here, "dep", 0, -1, -1, (long long)i - 1, &v));
    op->dep1 = (int64_t)v + 1;
    op->nallocs = 0;
    op->alloc_first = 0;
    /* Negative times of any size mean "unknown"; one spelling keeps the planner simple. */
    if (op->us < 0)
        op->us = -1;
    if (op->start_us < 0)
        op->start_us = -1;
    return DH_OK;
}

static dh_status_t dh__profile_fill(const dh__jr_t *r, json_t *root, int version, dh_profile_t *p)
{
    long long v;
    p->version = version;
    DH_CHECK(dh__jint(r, root, NULL, "rank", 0, -1, -1, 1 << 24, &v));
    p->rank = (int)v;
    DH_CHECK(dh__jint(r, root, NULL, "world", 0, -1, -1, 1 << 24, &v));
    p->world = v == 0 ? -1 : (int)v;
    DH_CHECK(dh__jstr(r, root, NULL, "layout", 0, "", p->layout, sizeof(p->layout)));
    DH_CHECK(dh__jstr(r, root, NULL, "host", 0, "", p->host, sizeof(p->host)));
    DH_CHECK(dh__jstr(r, root, NULL, "device", 0, "", p->device, sizeof(p->device)));
    DH_CHECK(dh__jint(r, root, NULL, "max_connections", 0, 8, 1, 1024, &v));
    p->max_connections = (int)v;
    DH_CHECK(dh__jint(r, root, NULL, "blas_workspace_bytes", 0, -1, -1, 1ll << 40, &v));
    p->blas_ws_bytes = v;
    DH_CHECK(dh__jint(r, root, NULL, "device_free_bytes", 0, -1, -1, 1ll << 50, &v));
    p->device_free_bytes = v;
    DH_CHECK(dh__jint(r, root, NULL, "sync_at_end", 0, 0, 0, 1, &v));
    p->sync_at_end = (int)v;
    if (p->world > 0 && p->rank >= p->world) {
        dh__jpath_t here = DH__JKEY(NULL, "rank");
        return dh__jerr(r, &here, "is %d in a world of %d", p->rank, p->world);
    }

    json_t *comms, *ops;
    dh__jpath_t comms_at = DH__JKEY(NULL, "comms");
    DH_CHECK(dh__jarr(r, root, NULL, "comms", 0, DH__MAX_COMMS, &comms));
    size_t nc = comms ? json_array_size(comms) : 0;
    if (nc > 0 && (p->comms = calloc(nc, sizeof(*p->comms))) == NULL)
        return DH_ERR_NOMEM;
    for (size_t i = 0; i < nc; i++) {
        DH_CHECK(dh__comm_parse(r, comms, &comms_at, i, &p->comms[i]));
        p->ncomms++;
    }
    if (version != DH_PROFILE_VERSION_FLAT)
        return dh__profile_read2(r, root, p);

    dh__jpath_t ops_at = DH__JKEY(NULL, "ops");
    DH_CHECK(dh__jarr(r, root, NULL, "ops", 1, DH__MAX_OPS, &ops));
    size_t n = json_array_size(ops);
    if (n > 0 && (p->ops = calloc(n, sizeof(*p->ops))) == NULL)
        return DH_ERR_NOMEM;
    int64_t sizes[DH__MAX_ALLOCS];
    for (size_t i = 0; i < n; i++) {
        DH_CHECK(dh__prof_op_parse(r, ops, &ops_at, i, p->ncomms, &p->ops[i]));
        dh__jpath_t here = DH__JIDX(&ops_at, i), al_at = DH__JKEY(&here, "allocs");
        size_t na;
        DH_CHECK(dh__allocs_parse(r, json_object_get(json_array_get(ops, i), "allocs"), &al_at,
                                  &p->ops[i], sizes, &na));
        DH_CHECK(dh__prof_allocs_add(p, &p->ops[i], sizes, na));
        p->nops++;
    }
    return DH_OK;
}

dh_status_t dh__allocs_parse(const dh__jr_t *r, json_t *v, const dh__jpath_t *at,
                             const dh_prof_op_t *op, int64_t *sizes, size_t *n)
{
    *n = 0;
    if (v == NULL || (json_is_integer(v) && json_integer_value(v) == 0))
        return DH_OK;
    if (!json_is_array(v) || json_array_size(v) > DH__MAX_ALLOCS)
        return dh__jerr(r, at, "is not a list of at most %u allocation sizes", DH__MAX_ALLOCS);
    int64_t sum = 0;
    for (size_t k = 0; k < json_array_size(v); k++) {
        json_t *e = json_array_get(v, k);
        if (!json_is_integer(e) || json_integer_value(e) <= 0 ||
            json_integer_value(e) > (1LL << 50)) {
            dh__jpath_t here = DH__JIDX(at, k);
            return dh__jerr(r, &here, "is not an allocation size (1 to 2^50 bytes)");
        }
        sizes[k] = (int64_t)json_integer_value(e);
        sum += sizes[k];
    }
    *n = json_array_size(v);
    if (op->cls != DH_CLS_FREE && *n > 0 && sum != op->mem)
        return dh__jerr(r, at, "sums to %lld bytes, but the op's mem is %lld", (long long)sum,
                        (long long)op->mem);
    return DH_OK;
}

dh_status_t dh_profile_parse(const char *buf, size_t len, const char *name, dh_profile_t **out,
                             char *err, size_t errlen)
{
    dh__jr_t r = {name ? name : "<buffer>", err, errlen};
    *out = NULL;
    if (err && errlen)
        err[0] = '\0';
    json_t *root;
    DH_CHECK(dh__jparse(&r, buf, len, &root));
    int version = 0;
    dh_status_t st = dh__jcheck_versions(&r, root, "dhelix-profile", DH_PROFILE_VERSION_FLAT,
                                         DH_PROFILE_VERSION, DH__READER, &version);
    dh_profile_t *p = NULL;
    if (st == DH_OK && (p = calloc(1, sizeof(*p))) == NULL)
        st = DH_ERR_NOMEM;
    if (st == DH_OK)
        st = dh__profile_fill(&r, root, version, p);
    json_decref(root);
    if (st == DH_ERR_NOMEM)
        dh__errf(err, errlen, r.file, "out of memory");
    if (st != DH_OK) {
        dh_profile_free(p);
        return st;
    }
    *out = p;
    return DH_OK;
}

dh_status_t dh_profile_load(const char *path, dh_profile_t **out, char *err, size_t errlen)
{
    char *buf;
    size_t len;
    *out = NULL;
    DH_CHECK(dh__read_file(path, &buf, &len, err, errlen));
    dh_status_t st = dh_profile_parse(buf, len, path, out, err, errlen);
    free(buf);
    return st;
}

void dh_profile_free(dh_profile_t *p)
{
    if (p == NULL)
        return;
    free(p->comms);
    free(p->ops);
    free(p->alloc_sizes);
    free(p);
}

size_t dh_prof_allocs(const dh_profile_t *p, const dh_prof_op_t *op, const int64_t **sizes,
                      int64_t *bytes_out, int64_t *freed_out)
{
    int is_free = op->cls == DH_CLS_FREE;
    int64_t freed = is_free && op->mem < 0 ? -op->mem : 0, bytes = 0;
    size_t n = 0;
    *sizes = NULL;
    if (op->nallocs > 0 && p != NULL && op->alloc_first + op->nallocs <= p->nalloc_sizes) {
        *sizes = p->alloc_sizes + op->alloc_first;
        n = op->nallocs;
    } else if (!is_free && op->mem > 0) {
        *sizes = &op->mem;
        n = 1;
    }
    for (size_t k = 0; k < n; k++)
        bytes += (*sizes)[k];
    if (bytes_out)
        *bytes_out = bytes;
    if (freed_out)
        *freed_out = freed;
    return n;
}

/* Appends n sizes to p's pool for op (nallocs, alloc_first). DH_ERR_NOMEM. */
dh_status_t dh__prof_allocs_add(dh_profile_t *p, dh_prof_op_t *op, const int64_t *sizes, size_t n)
{
    op->nallocs = 0;
    op->alloc_first = 0;
    if (n == 0)
        return DH_OK;
    /* The pool only grows: its capacity is the power of two at or above its size. */
    size_t need = p->nalloc_sizes + n, cap = 64;
    while (cap < p->nalloc_sizes)
        cap *= 2;
    if (p->alloc_sizes == NULL || need > cap) {
        while (cap < need)
            cap *= 2;
        int64_t *v = realloc(p->alloc_sizes, cap * sizeof *v);
        if (v == NULL)
            return DH_ERR_NOMEM;
        p->alloc_sizes = v;
    }
    memcpy(p->alloc_sizes + p->nalloc_sizes, sizes, n * sizeof *sizes);
    op->alloc_first = p->nalloc_sizes;
    op->nallocs = (uint32_t)n;
    p->nalloc_sizes += n;
    return DH_OK;
}

/* ---- writing ---- */

void dh__profile_op_head_json(dh_strbuf_t *b, const dh_prof_op_t *op)
{
    char sig[17], shape[17];
    dh__hex16(op->sig, sig);
    dh__hex16(op->shape, shape);
    dh_strbuf_printf(b, "    {\"t\": %u, \"s\": %u, \"k\": ", op->thread, op->stream);
    dh_strbuf_json_str(b, op->kind);
    dh_strbuf_printf(b, ", \"c\": \"%s\", \"sig\": \"%s\", \"shape\": \"%s\", \"name\": ",
                     dh_opclass_name(op->cls), sig, shape);
    dh_strbuf_json_str(b, op->name);
    dh_strbuf_printf(b, ", \"comm\": %d, \"bytes\": %llu, \"flops\": ", op->comm,
                     (unsigned long long)op->bytes);
    dh__json_num(b, op->flops);
    if (op->p2p[0] != '\0') {
        dh_strbuf_puts(b, ", \"p2p\": ");
        dh_strbuf_json_str(b, op->p2p);
    }
}

static void dh__op_json(dh_strbuf_t *b, const dh_profile_t *p, const dh_prof_op_t *op)
{
    dh__profile_op_head_json(b, op);
    dh_strbuf_puts(b, ", \"us\": ");
    dh__json_num(b, op->us);
    dh_strbuf_puts(b, ", \"start_us\": ");
    dh__json_num(b, op->start_us);
    dh_strbuf_printf(b, ", \"mem\": %lld, \"sync\": %d", (long long)op->mem, op->sync_before);
    if (op->dep1 > 0)
        dh_strbuf_printf(b, ", \"dep\": %lld", (long long)op->dep1 - 1);
    if (op->nallocs > 0 && op->alloc_first + op->nallocs <= p->nalloc_sizes) {
        dh_strbuf_puts(b, ", \"allocs\": ");
        dh__allocs_json(b, p->alloc_sizes + op->alloc_first, op->nallocs);
    }
    dh_strbuf_puts(b, "}");
}

void dh__allocs_json(dh_strbuf_t *b, const int64_t *sizes, size_t n)
{
    for (size_t k = 0; k < n; k++)
        dh_strbuf_printf(b, k ? ",%lld" : "[%lld", (long long)sizes[k]);
    dh_strbuf_puts(b, n ? "]" : "0");
}

static void dh__profile_json(dh_strbuf_t *b, const dh_profile_t *p)
{
    dh__profile_header_json(b, p, DH_PROFILE_VERSION_FLAT);
    dh_strbuf_puts(b, "  \"ops\": [");
    for (size_t i = 0; i < p->nops; i++) {
        dh_strbuf_puts(b, i ? ",\n" : "\n");
        dh__op_json(b, p, &p->ops[i]);
    }
    dh_strbuf_printf(b, "%s],\n  \"sync_at_end\": %d\n}\n", p->nops ? "\n  " : "", p->sync_at_end);
}

dh_status_t dh_profile_save(const dh_profile_t *p, const char *path, char *err, size_t errlen)
{
    dh_strbuf_t b = DH_STRBUF_INIT;
    dh__profile_json(&b, p);
    dh_status_t st = dh_strbuf_status(&b);
    if (st != DH_OK)
        dh__errf(err, errlen, path, "out of memory");
    else
        st = dh__write_file(path, dh_strbuf_str(&b), b.len, err, errlen);
    dh_strbuf_free(&b);
    return st;
}
