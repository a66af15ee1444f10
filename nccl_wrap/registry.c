/* registry.c: the communicator registry (see registry.h). */
#define _GNU_SOURCE
#include "registry.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "common/config.h"
#include "common/log.h"
#include "exchange.h"
#include "nccl_real.h"
#include "policy.h"

typedef struct dh__reg_key {
    ncclComm_t comm;
    dh_nccl_comm_t *e;
    UT_hash_handle hh;
} dh__reg_key_t;

static pthread_mutex_t dh__reg_lock = PTHREAD_MUTEX_INITIALIZER;
static dh__reg_key_t *dh__reg_table;           /* lock: live handles */
static dh_nccl_comm_t *dh__reg_head, *dh__reg_tail; /* lock: every entry, creation order */
static uint64_t dh__reg_order;                 /* lock */
/* Bumped whenever a handle stops naming its entry: invalidates the threads' caches. */
static _Atomic uint64_t dh__reg_gen = 1;

static __thread struct {
    ncclComm_t comm;
    dh_nccl_comm_t *e;
    uint64_t gen;
} dh__reg_cache;

/* ---- the job: global rank, world size, layout, policy ---- */

static int dh__env_int(const char *const *names, int dflt)
{
    for (; *names; names++) {
        const char *v = getenv(*names);
        char *end;
        if (v == NULL || *v == '\0')
            continue;
        long x = strtol(v, &end, 10);
        if (*end == '\0' && x >= 0 && x < 1 << 24)
            return (int)x;
    }
    return dflt;
}

int dh_nccl_global_rank(void)
{
    static const char *const names[] = {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK",
                                        "SLURM_PROCID", NULL};
    return dh__env_int(names, -1);
}

int dh_nccl_world_size(void)
{
    static const char *const names[] = {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
                                        "SLURM_NTASKS", NULL};
    return dh__env_int(names, 0);
}

static dh_layout_t dh__layout;
static dh_policy_t dh__policy;
static pthread_once_t dh__job_once = PTHREAD_ONCE_INIT;

static void dh__job_init(void)
{
    const dh_config_t *cfg = dh_config();
    char err[160];
    if (dh_layout_parse(cfg->layout, dh_nccl_world_size(), &dh__layout, err, sizeof err) != DH_OK)
        DH_WARN(NCCL, "DHELIX_LAYOUT=%s: %s; roles come from names only", cfg->layout, err);
    if (dh_policy_parse(cfg->groups, &dh__policy, err, sizeof err) != DH_OK)
        DH_WARN(NCCL, "DHELIX_GROUPS=%s: %s; using all", cfg->groups, err);
}

const dh_layout_t *dh_nccl_layout(void)
{
    pthread_once(&dh__job_once, dh__job_init);
    return &dh__layout;
}

static const dh_policy_t *dh__policy_get(void)
{
    pthread_once(&dh__job_once, dh__job_init);
    return &dh__policy;
}

/* ---- lookup ---- */

static dh_nccl_comm_t *dh__find_locked(ncclComm_t comm)
{
    dh__reg_key_t *k;
    HASH_FIND_PTR(dh__reg_table, &comm, k);
    return k ? k->e : NULL;
}

dh_nccl_comm_t *dh_nccl_reg_find(ncclComm_t comm)
{
    if (comm == NULL)
        return NULL;
    pthread_mutex_lock(&dh__reg_lock);
    dh_nccl_comm_t *e = dh__find_locked(comm);
    pthread_mutex_unlock(&dh__reg_lock);
    return e;
}

void dh_nccl_reg_describe(const dh_nccl_comm_t *e, char *name, size_t len, char *role,
                          size_t rlen, int *nranks, int *rank)
{
    pthread_mutex_lock(&dh__reg_lock);
    snprintf(name, len, "%s", e->name);
    dh_role_name(e->role, role, rlen);
    *nranks = e->nranks;
    *rank = e->rank;
    pthread_mutex_unlock(&dh__reg_lock);
}

uint64_t dh_nccl_ident(const void *ids, size_t n)
{
    const unsigned char *p = ids;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h ? h : 1;
}

uint64_t dh_nccl_reg_ident(const dh_nccl_comm_t *e)
{
    pthread_mutex_lock(&dh__reg_lock);
    uint64_t id = e->ident;
    pthread_mutex_unlock(&dh__reg_lock);
    return id;
}

/* Lock held: forgets the live handle of e. */
static void dh__unlink_locked(ncclComm_t comm)
{
    dh__reg_key_t *k;
    HASH_FIND_PTR(dh__reg_table, &comm, k);
    if (k == NULL)
        return;
    k->e->live = 0;
    HASH_DEL(dh__reg_table, k);
    free(k);
    atomic_fetch_add_explicit(&dh__reg_gen, 1, memory_order_release);
}

static const char *const dh__origin_names[] = {
#define DH__ORIGIN_NAME(id, name) name,
    DH_NCCL_ORIGINS(DH__ORIGIN_NAME)
#undef DH__ORIGIN_NAME
};

dh_nccl_comm_t *dh_nccl_reg_add(ncclComm_t comm, const dh_nccl_birth_t *b)
{
    if (comm == NULL)
        return NULL;
    dh_nccl_comm_t *e = calloc(1, sizeof *e);
    dh__reg_key_t *k = malloc(sizeof *k);
    if (e == NULL || k == NULL) {
        free(e);
        free(k);
        return NULL;
    }
    e->comm = comm;
    e->origin = b->origin;
    e->nranks = b->nranks;
    e->rank = b->rank;
    e->device = b->device;
    e->color = b->color;
    e->key = b->key;
    e->ident = b->ident;
    snprintf(e->name, sizeof e->name, "%s", b->name ? b->name : "");
    e->live = 1;
    atomic_init(&e->enabled, 1);
    atomic_init(&e->ready, b->nranks > 0 && b->rank >= 0 && b->device >= 0);
    k->comm = comm;
    k->e = e;
    pthread_mutex_lock(&dh__reg_lock);
    e->parent = b->parent ? dh__find_locked(b->parent) : NULL;
    if (e->parent != NULL && e->parent->ident != 0) {
        /* A child's identity: its parent's, the colour, the parent's children so far. */
        uint64_t w[3] = {e->parent->ident, (uint64_t)(int64_t)b->color,
                         (uint64_t)e->parent->nderived};
        e->ident = dh_nccl_ident(w, sizeof w);
    }
    if (e->parent != NULL)
        e->parent->nderived++;
    e->order = ++dh__reg_order;
    dh__unlink_locked(comm);
    HASH_ADD_PTR(dh__reg_table, comm, k);
    if (dh__reg_tail)
        dh__reg_tail->next = e;
    else
        dh__reg_head = e;
    dh__reg_tail = e;
    pthread_mutex_unlock(&dh__reg_lock);
    DH_DEBUG(NCCL, "communicator #%llu (%s) registered: %p", (unsigned long long)e->order,
             dh__origin_names[e->origin], (void *)comm);
    return e;
}

void dh_nccl_reg_gone(ncclComm_t comm, int aborted)
{
    if (comm == NULL)
        return;
    pthread_mutex_lock(&dh__reg_lock);
    dh_nccl_comm_t *e = dh__find_locked(comm);
    if (e != NULL && aborted)
        atomic_store(&e->aborting, 1);
    dh__unlink_locked(comm);
    pthread_mutex_unlock(&dh__reg_lock);
}

/* Asks the library for what an entry lacks; 0 when it answered. No lock held. */
static int dh__query(ncclComm_t comm, int *nranks, int *rank, int *device)
{
    __typeof__(&ncclCommCount) count = DH_NCCL_REAL(ncclCommCount);
    __typeof__(&ncclCommUserRank) user = DH_NCCL_REAL(ncclCommUserRank);
    __typeof__(&ncclCommCuDevice) dev = DH_NCCL_REAL(ncclCommCuDevice);
    if (count == NULL || user == NULL || dev == NULL)
        return -1;
    if (count(comm, nranks) != ncclSuccess || user(comm, rank) != ncclSuccess ||
        dev(comm, device) != ncclSuccess)
        return -1;
    return *nranks > 0 && *rank >= 0 && *rank < *nranks ? 0 : -1;
}

static void dh__decide(dh_nccl_comm_t *e);

/* Completes an entry that is not ready from the library's answers; 0 when it is ready. */
static int dh__fill(dh_nccl_comm_t *e)
{
    if (atomic_load_explicit(&e->ready, memory_order_acquire))
        return 0;
    int n, r, d;
    if (dh__query(e->comm, &n, &r, &d) != 0)
        return -1;
    pthread_mutex_lock(&dh__reg_lock);
    e->nranks = n;
    e->rank = r;
    e->device = d;
    pthread_mutex_unlock(&dh__reg_lock);
    atomic_store_explicit(&e->ready, 1, memory_order_release);
    return 0;
}

dh_nccl_comm_t *dh_nccl_reg_get(ncclComm_t comm)
{
    if (comm == NULL)
        return NULL;
    uint64_t gen = atomic_load_explicit(&dh__reg_gen, memory_order_acquire);
    if (dh__reg_cache.comm == comm && dh__reg_cache.gen == gen)
        return dh__reg_cache.e;
    dh_nccl_comm_t *e = dh_nccl_reg_find(comm);
    if (e == NULL) {
        int n, r, d;
        if (dh__query(comm, &n, &r, &d) != 0)
            return NULL;
        dh_nccl_birth_t b = {DH_NCCL_FROM_SEEN, n, r, d, NULL, NULL, -1, -1, 0};
        if ((e = dh_nccl_reg_add(comm, &b)) == NULL)
            return NULL;
    } else if (dh__fill(e) != 0) {
        return NULL;
    }
    pthread_mutex_lock(&dh__reg_lock);
    int decided = e->decided;
    pthread_mutex_unlock(&dh__reg_lock);
    if (!decided)
        dh__decide(e);
    dh__reg_cache.comm = comm;
    dh__reg_cache.e = e;
    dh__reg_cache.gen = gen;
    return e;
}

/* ---- role and policy ---- */

static void dh__members_text(const int *m, int n, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    if (m == NULL) {
        snprintf(buf, len, "unknown");
        return;
    }
    for (int i = 0; i < n && used + 16 < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%d", i ? "," : "", m[i]);
    if (n > 0 && used + 16 >= len)
        snprintf(buf + used, len - used, ",...");
}

/* Works out the role from what is known and applies DHELIX_GROUPS once; logs the decision.
 * exchanged: members learned by the exchange (or NULL). */
static void dh__decide_with(dh_nccl_comm_t *e, int *exchanged)
{
    const dh_layout_t *l = dh_nccl_layout();
    const dh_policy_t *p = dh__policy_get();
    int grank = dh_nccl_global_rank();
    pthread_mutex_lock(&dh__reg_lock);
    if (e->decided) {
        pthread_mutex_unlock(&dh__reg_lock);
        free(exchanged);
        return;
    }
    int n = e->nranks;
    if (exchanged != NULL && e->members == NULL) {
        e->members = exchanged;
        e->members_how = "exchange";
        exchanged = NULL;
    }
    if (e->members == NULL && n == 1 && grank >= 0 && (e->members = malloc(sizeof(int)))) {
        e->members[0] = grank;
        e->members_how = "self";
    }
    unsigned role = dh_role_from_members(l, e->members, n);
    const char *how = role ? "members" : NULL;
    int *pos = role || n < 2 ? NULL : malloc(sizeof(int) * (size_t)n);
    if (pos != NULL && (role = dh_role_from_position(l, grank, n, e->rank, pos)) != 0) {
        how = "position";
        if (e->members == NULL) {
            e->members = pos;
            e->members_how = "layout";
            pos = NULL;
        }
    }
    free(pos);
    if (role == 0 && (role = dh_role_from_name(e->name)) != 0)
        how = "name";
    e->role = role;
    e->role_how = how;
    int term;
    int on = dh_policy_decide(p, e->name, role, n, &term);
    atomic_store(&e->enabled, on);
    e->decided = 1;
    char roles[32], members[160], from[96] = "";
    if (e->parent != NULL && e->origin == DH_NCCL_FROM_SPLIT)
        snprintf(from, sizeof from, " of #%llu (colour %d, key %d)",
                 (unsigned long long)e->parent->order, e->color, e->key);
    else if (e->parent != NULL)
        snprintf(from, sizeof from, " of #%llu", (unsigned long long)e->parent->order);
    dh_role_name(role, roles, sizeof roles);
    dh__members_text(e->members, n, members, sizeof members);
    const char *members_how = e->members_how ? e->members_how : "-";
    pthread_mutex_unlock(&dh__reg_lock);
    free(exchanged);
    DH_INFO(NCCL,
            "communicator #%llu '%s' (%s%s, %d ranks, rank %d, device %d; members %s from %s; "
            "role %s from %s): %s (DHELIX_GROUPS %s)",
            (unsigned long long)e->order, e->name[0] ? e->name : "-",
            dh__origin_names[e->origin], from, n, e->rank, e->device, members, members_how, roles,
            how ? how : "nothing", on ? "interleaved" : "pinned",
            term >= 0 ? p->terms[term].text : "no term matched");
}

static void dh__decide(dh_nccl_comm_t *e) { dh__decide_with(e, NULL); }

void dh_nccl_reg_learn(dh_nccl_comm_t **es, int n)
{
    const dh_layout_t *l = dh_nccl_layout();
    int grank = dh_nccl_global_rank();
    dh_nccl_xchg_t *x = n > 0 ? calloc((size_t)n, sizeof *x) : NULL;
    int nx = 0;
    for (int i = 0; i < n && x != NULL; i++) {
        dh_nccl_comm_t *e = es[i];
        if (e == NULL || dh__fill(e) != 0)
            continue;
        pthread_mutex_lock(&dh__reg_lock);
        int want = !e->decided && e->members == NULL && e->nranks > 1 && l->set && grank >= 0;
        x[nx] = (dh_nccl_xchg_t){e->comm, e->device, e->nranks, NULL, 0};
        pthread_mutex_unlock(&dh__reg_lock);
        if (want && (x[nx].members = malloc(sizeof(int) * (size_t)x[nx].nranks)) != NULL)
            nx++;
    }
    if (nx > 0)
        dh_nccl_exchange(x, nx, grank, DH_NCCL_EXCHANGE_S);
    for (int i = 0; i < n; i++) {
        dh_nccl_comm_t *e = es[i];
        int *members = NULL;
        for (int j = 0; j < nx && e != NULL; j++)
            if (x[j].comm == e->comm) {
                members = x[j].ok ? x[j].members : NULL;
                if (!x[j].ok)
                    free(x[j].members);
                x[j].members = NULL;
            }
        if (e != NULL && atomic_load_explicit(&e->ready, memory_order_acquire))
            dh__decide_with(e, members);
        else
            free(members);
    }
    free(x);
}

int dh_nccl_reg_set_enabled(ncclComm_t comm, int enabled)
{
    dh_nccl_comm_t *e = dh_nccl_reg_get(comm);
    if (e == NULL)
        return -1;
    pthread_mutex_lock(&dh__reg_lock);
    e->decided = 1;
    pthread_mutex_unlock(&dh__reg_lock);
    int old = atomic_exchange(&e->enabled, enabled != 0);
    DH_INFO(NCCL, "communicator #%llu '%s': %s (dh_group_set_enabled; was %s)",
            (unsigned long long)e->order, e->name[0] ? e->name : "-",
            enabled ? "interleaved" : "pinned", old ? "interleaved" : "pinned");
    return old;
}

/* ---- custom reduction ops ---- */

void dh_nccl_reg_premul_add(dh_nccl_comm_t *e, ncclRedOp_t op)
{
    pthread_mutex_lock(&dh__reg_lock);
    if (e->npremul < DH_NCCL_PREMUL_MAX)
        e->premul[e->npremul++] = (int)op;
    pthread_mutex_unlock(&dh__reg_lock);
}

void dh_nccl_reg_premul_del(dh_nccl_comm_t *e, ncclRedOp_t op)
{
    pthread_mutex_lock(&dh__reg_lock);
    for (int i = 0; i < e->npremul; i++)
        if (e->premul[i] == (int)op) {
            e->premul[i] = e->premul[--e->npremul];
            break;
        }
    pthread_mutex_unlock(&dh__reg_lock);
}

int dh_nccl_reg_premul_known(dh_nccl_comm_t *e, ncclRedOp_t op)
{
    int known = 0;
    pthread_mutex_lock(&dh__reg_lock);
    for (int i = 0; i < e->npremul && !known; i++)
        known = e->premul[i] == (int)op;
    pthread_mutex_unlock(&dh__reg_lock);
    return known;
}

void dh_nccl_reg_fail(dh_nccl_comm_t *e, ncclResult_t r)
{
    int expect = ncclSuccess;
    if (e != NULL && r != ncclSuccess)
        atomic_compare_exchange_strong(&e->async_err, &expect, (int)r);
}

/* ---- report ---- */

size_t dh_nccl_reg_stats(dh_nccl_comm_stats_t **out)
{
    *out = NULL;
    pthread_mutex_lock(&dh__reg_lock);
    size_t n = 0;
    for (dh_nccl_comm_t *e = dh__reg_head; e; e = e->next)
        n++;
    dh_nccl_comm_stats_t *s = n ? calloc(n, sizeof *s) : NULL;
    size_t i = 0;
    for (dh_nccl_comm_t *e = dh__reg_head; e && s; e = e->next, i++) {
        s[i].order = e->order;
        snprintf(s[i].name, sizeof s[i].name, "%s", e->name[0] ? e->name : "-");
        dh_role_name(e->role, s[i].role, sizeof s[i].role);
        s[i].origin = dh__origin_names[e->origin];
        s[i].nranks = e->nranks;
        s[i].rank = e->rank;
        s[i].device = e->device;
        s[i].live = e->live;
        s[i].enabled = atomic_load(&e->enabled);
        s[i].ops = atomic_load(&e->ops);
        s[i].bytes = atomic_load(&e->bytes);
        s[i].deferred = atomic_load(&e->deferred);
        s[i].interleaved = atomic_load(&e->interleaved);
        s[i].pinned = atomic_load(&e->pinned);
        s[i].errors = atomic_load(&e->errors);
    }
    pthread_mutex_unlock(&dh__reg_lock);
    *out = s;
    return s ? n : 0;
}
