/*
 * nccl_api.c: communicators of the vgpu's NCCL (ids, init, split, teardown, queries,
 * errors).
 *
 * Every API function is defined as pncclX (exported, strong) with ncclX a weak alias of
 * it, as the real library does, so that a profiler or wrapper can define ncclX and reach
 * the implementation through pncclX.
 *
 * Ranks are processes (one communicator per process, launched by mpirun) or devices of one
 * process (ncclCommInitAll, or ncclCommInitRank per device inside a group). Either way a
 * member joins the communicator's shared segment (nccl_shm.c) and ncclCommInitRank returns
 * once all have joined, or after VGPU_COMM_TIMEOUT seconds with a message naming the
 * missing ranks. Inside ncclGroupStart/End the wait moves to the outermost ncclGroupEnd, so
 * one thread can create the communicators of several devices.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "nccl_int.h"

#define VGN_ALIAS(name) \
    __typeof__(p##name) name __attribute__((weak, alias("p" #name), visibility("default")))

#define VGN_CONFIG_MAGIC 0xcafebeefu

static pthread_mutex_t g_last_lock = PTHREAD_MUTEX_INITIALIZER;
static char g_last[512]; /* guarded by g_last_lock */

void vgn_error(const char *fmt, ...)
{
    char buf[sizeof(g_last)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    vg_msg("%s", buf);
    pthread_mutex_lock(&g_last_lock);
    memcpy(g_last, buf, sizeof(g_last));
    pthread_mutex_unlock(&g_last_lock);
}

double vgn_timeout_s(void)
{
    double t = vg_config()->comm_timeout_s;
    return t > 0 ? t : 60.0;
}

/* ---- communicator lifetime ---- */

void vgn_comm_ref(ncclComm_t c)
{
    __atomic_add_fetch(&c->refs, 1, __ATOMIC_RELAXED);
}

void vgn_comm_unref(ncclComm_t c)
{
    if (__atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    vgn_shm_unmap(&c->shm);
    vgn_premul_free(c);
    free(c->granks);
    free(c->send_seq);
    free(c->recv_seq);
    c->magic = 0;
    free(c);
}

void vgn_set_async(ncclComm_t c, ncclResult_t r)
{
    int expect = ncclSuccess;
    __atomic_compare_exchange_n(&c->async_err, &expect, (int)r, 0, __ATOMIC_ACQ_REL,
                                __ATOMIC_ACQUIRE);
}

ncclResult_t vgn_comm_check(ncclComm_t c)
{
    if (!c || c->magic != VGN_COMM_MAGIC) {
        vgn_error("nccl: invalid communicator %p", (void *)c);
        return ncclInvalidArgument;
    }
    if (__atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE)) {
        vgn_error("nccl: communicator %s was aborted", c->name);
        return ncclInvalidUsage;
    }
    int e = __atomic_load_n(&c->async_err, __ATOMIC_ACQUIRE);
    if (e != ncclSuccess)
        return (ncclResult_t)e;
    if (!c->ready) {
        vgn_error("nccl: communicator %s is used before its initialisation completed "
                  "(ncclGroupEnd)", c->name);
        return ncclInvalidUsage;
    }
    return ncclSuccess;
}

/* Copies a commName so that it can go into a JSON string of the trace unescaped. */
static void set_name(ncclComm_t c, const char *name)
{
    if (!name || !*name) {
        snprintf(c->name, sizeof(c->name), "c%08llx", (unsigned long long)(c->key >> 32));
        return;
    }
    snprintf(c->name, sizeof(c->name), "%s", name);
    for (char *p = c->name; *p; p++)
        if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20)
            *p = '_';
}

static ncclComm_t comm_new(int nranks, int rank, uint64_t key, const char *name)
{
    ncclComm_t c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->granks = calloc((size_t)nranks, sizeof(int));
    c->send_seq = calloc((size_t)nranks, sizeof(uint64_t));
    c->recv_seq = calloc((size_t)nranks, sizeof(uint64_t));
    if (!c->granks || !c->send_seq || !c->recv_seq) {
        free(c->granks);
        free(c->send_seq);
        free(c->recv_seq);
        free(c);
        return NULL;
    }
    c->magic = VGN_COMM_MAGIC;
    c->key = key;
    c->rank = rank;
    c->nranks = nranks;
    c->dev = vg_current_device();
    c->refs = 1;
    c->blocking = 1;
    set_name(c, name);
    return c;
}

/* Reads the parts of a user's config the vgpu keeps; the size field tells how much of the
 * structure the caller's header version has. */
static ncclResult_t read_config(const ncclConfig_t *cfg, const char **name, int *blocking)
{
    if (!cfg)
        return ncclSuccess;
    if (cfg->magic != VGN_CONFIG_MAGIC || cfg->size < offsetof(ncclConfig_t, netName)) {
        vgn_error("nccl: ncclConfig_t not initialised with NCCL_CONFIG_INITIALIZER");
        return ncclInvalidArgument;
    }
    if (cfg->blocking != NCCL_CONFIG_UNDEF_INT)
        *blocking = cfg->blocking;
    if (cfg->size >= offsetof(ncclConfig_t, commName) + sizeof(char *) && cfg->commName)
        *name = cfg->commName;
    return ncclSuccess;
}

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Creates this rank's communicator with the given key and joins its members. The wait
 * for all members happens here, or at the outermost ncclGroupEnd inside a group. */
static ncclResult_t comm_create(ncclComm_t *out, int nranks, int rank, uint64_t key,
                                const vgn_id_t *rep, const char *name, int blocking)
{
    ncclComm_t c = comm_new(nranks, rank, key, name);
    if (!c)
        return ncclSystemError;
    c->blocking = blocking;
    if (rep) {
        /* The members the process stands for are placed as in the full job, so the link
         * class and the NIC sharing (per_node) are those of the real communicator. */
        c->represent = 1;
        for (int i = 0; i < nranks; i++)
            c->granks[i] = rep->rep_base + i * rep->rep_stride;
        vgn_comm_place(c, vg_profile(c->dev)->gpus_per_node);
        c->ready = 1;
        *out = c;
        return ncclSuccess;
    }
    ncclResult_t r = vgn_shm_join(c);
    if (r == ncclSuccess && vgn_in_group()) {
        *out = c;
        return vgn_group_defer_init(c);
    }
    if (r == ncclSuccess)
        r = vgn_shm_wait(c);
    if (r != ncclSuccess) {
        vgn_comm_unref(c);
        return r;
    }
    c->ready = 1;
    *out = c;
    return ncclSuccess;
}

static ncclResult_t init_rank(ncclComm_t *out, int nranks, const ncclUniqueId *uid, int rank,
                              ncclConfig_t *config)
{
    vg_init();
    const char *name = NULL;
    int blocking = 1;
    vgn_id_t id;
    memcpy(&id, uid, sizeof(id));
    if (!out) {
        vgn_error("nccl: ncclCommInitRank: comm is NULL");
        return ncclInvalidArgument;
    }
    *out = NULL;
    if (nranks < 1 || rank < 0 || rank >= nranks) {
        vgn_error("nccl: ncclCommInitRank: rank %d / nranks %d out of range", rank, nranks);
        return ncclInvalidArgument;
    }
    if (id.magic != VGN_ID_MAGIC) {
        vgn_error("nccl: ncclCommInitRank: the unique id was not made by the vgpu's "
                  "ncclGetUniqueId");
        return ncclInvalidArgument;
    }
    ncclResult_t r = read_config(config, &name, &blocking);
    if (r != ncclSuccess)
        return r;
    uint64_t key = mix64(id.key[0] ^ mix64(id.key[1]));
    return comm_create(out, nranks, rank, key, (id.flags & VGN_ID_REPRESENT) ? &id : NULL,
                       name, blocking);
}

/* ---- API: ids and init ---- */

VG_API ncclResult_t pncclGetVersion(int *version)
{
    if (!version)
        return ncclInvalidArgument;
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}
VGN_ALIAS(ncclGetVersion);

VG_API ncclResult_t pncclGetUniqueId(ncclUniqueId *uid)
{
    vg_init();
    if (!uid) {
        vgn_error("nccl: ncclGetUniqueId: uniqueId is NULL");
        return ncclInvalidArgument;
    }
    vgn_id_t id = {.magic = VGN_ID_MAGIC};
    if (getrandom(id.key, sizeof(id.key), 0) != (ssize_t)sizeof(id.key)) {
        struct timespec ts; /* no entropy source: time and pid still differ between jobs */
        clock_gettime(CLOCK_REALTIME, &ts);
        id.key[0] = mix64((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30));
        id.key[1] = mix64((uint64_t)getpid() ^ (uint64_t)(uintptr_t)uid);
    }
    memset(uid, 0, sizeof(*uid));
    memcpy(uid, &id, sizeof(id));
    return ncclSuccess;
}
VGN_ALIAS(ncclGetUniqueId);

/* Marks a vgpu unique id for representative mode (vgpu_nccl_represent in vgpu.h). */
static int represent_id(void *uid, int base, int stride)
{
    vgn_id_t id;
    if (!uid)
        return -1;
    memcpy(&id, uid, sizeof(id));
    if (id.magic != VGN_ID_MAGIC || base < 0 || stride < 1)
        return -1;
    id.flags |= VGN_ID_REPRESENT;
    id.rep_base = base;
    id.rep_stride = stride;
    memcpy(uid, &id, sizeof(id));
    return 0;
}

/* The core owns vgpu_nccl_represent (programs link libvgpu for vgpu.h) and forwards it to
 * the hook libnccl installs here; weak so that this library also loads with a core that
 * lacks the hook (representative mode is then unavailable). */
extern void vg_nccl_set_represent_hook(int (*fn)(void *, int, int)) __attribute__((weak));

__attribute__((constructor)) static void install_hooks(void)
{
    if (vg_nccl_set_represent_hook)
        vg_nccl_set_represent_hook(represent_id);
}

VG_API ncclResult_t pncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId,
                                      int rank)
{
    return init_rank(comm, nranks, &commId, rank, NULL);
}
VGN_ALIAS(ncclCommInitRank);

VG_API ncclResult_t pncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId,
                                            int rank, ncclConfig_t *config)
{
    return init_rank(comm, nranks, &commId, rank, config);
}
VGN_ALIAS(ncclCommInitRankConfig);

VG_API ncclResult_t pncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank,
                                              int nId, ncclUniqueId *commIds,
                                              ncclConfig_t *config)
{
    if (nId < 1 || !commIds) {
        vgn_error("nccl: ncclCommInitRankScalable: needs at least one unique id");
        return ncclInvalidArgument;
    }
    return init_rank(newcomm, nranks, &commIds[0], myrank, config); /* one id is enough */
}
VGN_ALIAS(ncclCommInitRankScalable);

VG_API ncclResult_t pncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist)
{
    vg_init();
    if (!comms || ndev < 1) {
        vgn_error("nccl: ncclCommInitAll: comms is NULL or ndev %d < 1", ndev);
        return ncclInvalidArgument;
    }
    ncclUniqueId id;
    ncclResult_t r = pncclGetUniqueId(&id), r2;
    if (r != ncclSuccess)
        return r;
    int saved = vg_current_device();
    pncclGroupStart();
    for (int i = 0; i < ndev && r == ncclSuccess; i++) {
        if (vg_set_device(devlist ? devlist[i] : i) != cudaSuccess) {
            vgn_error("nccl: ncclCommInitAll: invalid device %d", devlist ? devlist[i] : i);
            r = ncclInvalidArgument;
            break;
        }
        r = pncclCommInitRank(&comms[i], ndev, id, i);
    }
    r2 = pncclGroupEnd();
    vg_set_device(saved);
    return r != ncclSuccess ? r : r2;
}
VGN_ALIAS(ncclCommInitAll);

/* ---- split ---- */

static int cmp_member(const void *a, const void *b)
{
    const int *x = a, *y = b; /* {key, parent rank} */
    if (x[0] != y[0])
        return x[0] < y[0] ? -1 : 1;
    return x[1] < y[1] ? -1 : x[1] > y[1];
}

/* Publishes (color, key) for split number epoch and waits for every member's. */
static ncclResult_t split_exchange(ncclComm_t c, uint64_t epoch, int color, int key,
                                   int *colors, int *keys)
{
    int n = c->nranks, us = 20;
    vgn_split_ent_t *area = &c->shm.split[(epoch % 2) * (size_t)n];
    area[c->rank].color = color;
    area[c->rank].key = key;
    __atomic_store_n(&area[c->rank].epoch, epoch, __ATOMIC_RELEASE);
    double deadline = vgn_wall() + vgn_timeout_s();
    for (int i = 0; i < n; i++) {
        while (__atomic_load_n(&area[i].epoch, __ATOMIC_ACQUIRE) != epoch) {
            if (vgn_wall() > deadline) {
                vgn_error("nccl: ncclCommSplit #%llu on communicator %s timed out after "
                          "%.1f s (VGPU_COMM_TIMEOUT): rank %d waits for rank %d",
                          (unsigned long long)epoch, c->name, vgn_timeout_s(), c->rank, i);
                return ncclSystemError;
            }
            struct timespec ts = {0, (long)us * 1000};
            nanosleep(&ts, NULL);
            us = us < 2000 ? us * 2 : us;
        }
        colors[i] = area[i].color;
        keys[i] = area[i].key;
    }
    return ncclSuccess;
}

VG_API ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                                   ncclConfig_t *config)
{
    ncclResult_t r = vgn_comm_check(comm);
    if (r != ncclSuccess)
        return r;
    if (!newcomm || (color < 0 && color != NCCL_SPLIT_NOCOLOR)) {
        vgn_error("nccl: ncclCommSplit: newcomm is NULL or color %d is negative", color);
        return ncclInvalidArgument;
    }
    *newcomm = NULL;
    if (comm->represent) {
        vgn_error("nccl: ncclCommSplit of a representative communicator (%s) is not supported: "
                  "create the groups from their own unique ids", comm->name);
        return ncclInvalidUsage;
    }
    const char *name = NULL;
    int blocking = comm->blocking;
    if ((r = read_config(config, &name, &blocking)) != ncclSuccess)
        return r;
    int n = comm->nranks;
    int *colors = calloc((size_t)n, sizeof(int)), *keys = calloc((size_t)n, sizeof(int));
    int (*members)[2] = calloc((size_t)n, sizeof(*members));
    uint64_t epoch = ++comm->split_epoch;
    if (!colors || !keys || !members)
        r = ncclSystemError;
    else
        r = split_exchange(comm, epoch, color, key, colors, keys);
    if (r == ncclSuccess && color != NCCL_SPLIT_NOCOLOR) {
        int m = 0, me = 0;
        for (int i = 0; i < n; i++)
            if (colors[i] == color) {
                members[m][0] = keys[i];
                members[m][1] = i;
                m++;
            }
        qsort(members, (size_t)m, sizeof(*members), cmp_member);
        for (int i = 0; i < m; i++)
            if (members[i][1] == comm->rank)
                me = i;
        char derived[64];
        if (!name) { /* inherit the parent's name, made distinct per split and colour */
            snprintf(derived, sizeof(derived), "%.40s.s%llu.%d", comm->name,
                     (unsigned long long)epoch, color);
            name = derived;
        }
        uint64_t k = mix64(comm->key ^ mix64(epoch * 0x9e3779b97f4a7c15ull ^ (uint64_t)color));
        int saved = vg_current_device();
        vg_set_device(comm->dev);
        r = comm_create(newcomm, m, me, k, NULL, name, blocking);
        vg_set_device(saved);
    }
    free(colors);
    free(keys);
    free(members);
    if (r != ncclSuccess)
        vgn_set_async(comm, r);
    return r;
}
VGN_ALIAS(ncclCommSplit);

/* Only the ranks that stay call ncclCommShrink, so there is nothing to exchange: each
 * derives the new communicator (members in parent order, key from the parent's key, the
 * shrink's number and the excluded ranks) and joins it. */
VG_API ncclResult_t pncclCommShrink(ncclComm_t comm, int *excludeRanksList,
                                    int excludeRanksCount, ncclComm_t *newcomm,
                                    ncclConfig_t *config, int shrinkFlags)
{
    ncclResult_t r = vgn_comm_check(comm);
    if (r != ncclSuccess && !(r == ncclInvalidUsage && comm && comm->magic == VGN_COMM_MAGIC))
        return r; /* a failed or revoked parent may still be shrunk */
    /* NCCL 2.28 (NVIDIA/nccl src/init.cc, ncclCommInitChildComm): the list must be given
     * and exclude at least one rank; a shrink that excludes nothing is refused (seen on an
     * H100 with NCCL 2.28.3). */
    if (!newcomm || !excludeRanksList || excludeRanksCount <= 0) {
        vgn_error("nccl: ncclCommShrink: invalid arguments (excludeRanksList must name at least one rank)");
        return ncclInvalidArgument;
    }
    *newcomm = NULL;
    if (comm->represent) {
        vgn_error("nccl: ncclCommShrink of a representative communicator (%s) is not supported",
                  comm->name);
        return ncclInvalidUsage;
    }
    char *out = calloc((size_t)comm->nranks, 1);
    if (!out)
        return ncclSystemError;
    uint64_t mix = 0;
    for (int i = 0; i < excludeRanksCount; i++) {
        int x = excludeRanksList[i];
        if (x < 0 || x >= comm->nranks || x == comm->rank) {
            vgn_error("nccl: ncclCommShrink: excluded rank %d is out of range or this rank", x);
            free(out);
            return ncclInvalidArgument;
        }
        out[x] = 1;
    }
    int m = 0, me = 0;
    for (int i = 0; i < comm->nranks; i++) {
        if (out[i])
            continue;
        mix = mix64(mix ^ (uint64_t)i); /* order-independent of the caller's list */
        me = i == comm->rank ? m : me;
        m++;
    }
    free(out);
    if (shrinkFlags & NCCL_SHRINK_ABORT)
        __atomic_store_n(&comm->aborted, 1, __ATOMIC_RELEASE); /* the parent's ops end now */
    const char *name = NULL;
    int blocking = comm->blocking;
    if ((r = read_config(config, &name, &blocking)) != ncclSuccess)
        return r;
    uint64_t epoch = ++comm->shrink_epoch;
    char derived[64];
    if (!name) {
        snprintf(derived, sizeof(derived), "%.40s.shrink%llu", comm->name,
                 (unsigned long long)epoch);
        name = derived;
    }
    uint64_t k = mix64(comm->key ^ mix64(mix ^ (epoch << 32) ^ 0x5348524eull));
    int saved = vg_current_device();
    vg_set_device(comm->dev);
    r = comm_create(newcomm, m, me, k, NULL, name, blocking);
    vg_set_device(saved);
    return r;
}
VGN_ALIAS(ncclCommShrink);

VG_API ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags)
{
    (void)revokeFlags;
    vgn_error("nccl: ncclCommRevoke is not supported by the vgpu (communicator %s)",
              comm && comm->magic == VGN_COMM_MAGIC ? comm->name : "?");
    return ncclInvalidUsage;
}
VGN_ALIAS(ncclCommRevoke);

/* ---- teardown ---- */

VG_API ncclResult_t pncclCommFinalize(ncclComm_t comm)
{
    if (!comm || comm->magic != VGN_COMM_MAGIC)
        return ncclInvalidArgument;
    if (comm->finalized) {
        vgn_error("nccl: ncclCommFinalize called twice on %s", comm->name);
        return ncclInvalidUsage;
    }
    vg_sync_all(); /* flushes this communicator's ops with everything else */
    comm->finalized = 1;
    return ncclSuccess;
}
VGN_ALIAS(ncclCommFinalize);

VG_API ncclResult_t pncclCommDestroy(ncclComm_t comm)
{
    if (!comm)
        return ncclSuccess;
    if (comm->magic != VGN_COMM_MAGIC)
        return ncclInvalidArgument;
    if (!comm->finalized && comm->ready)
        vg_sync_all();
    int failed = __atomic_load_n(&comm->async_err, __ATOMIC_ACQUIRE) != ncclSuccess;
    vgn_shm_leave(comm, failed);
    comm->magic = VGN_COMM_MAGIC ^ 1; /* in-flight ops keep the memory; the handle is dead */
    vgn_comm_unref(comm);
    return ncclSuccess;
}
VGN_ALIAS(ncclCommDestroy);

/* Returns at once even when peers are gone: the ops still in flight fail at their next
 * poll and drop their references. */
VG_API ncclResult_t pncclCommAbort(ncclComm_t comm)
{
    if (!comm)
        return ncclSuccess;
    if (comm->magic != VGN_COMM_MAGIC)
        return ncclInvalidArgument;
    __atomic_store_n(&comm->aborted, 1, __ATOMIC_RELEASE);
    vgn_shm_leave(comm, 1);
    comm->magic = VGN_COMM_MAGIC ^ 1;
    vgn_comm_unref(comm);
    return ncclSuccess;
}
VGN_ALIAS(ncclCommAbort);

/* ---- queries and errors ---- */

static ncclResult_t query_check(const ncclComm_t comm, const void *out, const char *what)
{
    if (!comm || comm->magic != VGN_COMM_MAGIC || !out) {
        vgn_error("nccl: %s: invalid communicator or NULL output", what);
        return ncclInvalidArgument;
    }
    return ncclSuccess;
}

VG_API ncclResult_t pncclCommCount(const ncclComm_t comm, int *count)
{
    ncclResult_t r = query_check(comm, count, "ncclCommCount");
    if (r == ncclSuccess)
        *count = comm->nranks;
    return r;
}
VGN_ALIAS(ncclCommCount);

VG_API ncclResult_t pncclCommUserRank(const ncclComm_t comm, int *rank)
{
    ncclResult_t r = query_check(comm, rank, "ncclCommUserRank");
    if (r == ncclSuccess)
        *rank = comm->rank;
    return r;
}
VGN_ALIAS(ncclCommUserRank);

VG_API ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int *device)
{
    ncclResult_t r = query_check(comm, device, "ncclCommCuDevice");
    if (r == ncclSuccess)
        *device = comm->dev;
    return r;
}
VGN_ALIAS(ncclCommCuDevice);

VG_API ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
    ncclResult_t r = query_check(comm, asyncError, "ncclCommGetAsyncError");
    if (r == ncclSuccess)
        *asyncError = (ncclResult_t)__atomic_load_n(&comm->async_err, __ATOMIC_ACQUIRE);
    return r;
}
VGN_ALIAS(ncclCommGetAsyncError);

VG_API const char *pncclGetErrorString(ncclResult_t result)
{
    switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (see the vgpu: messages)";
    case ncclSystemError: return "unhandled system error (see the vgpu: messages)";
    case ncclInternalError: return "internal error (vgpu)";
    case ncclInvalidArgument: return "invalid argument (see the vgpu: messages)";
    case ncclInvalidUsage: return "invalid usage (see the vgpu: messages)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}
VGN_ALIAS(ncclGetErrorString);

/* The last error message of the process (any communicator), as the real library keeps it. */
VG_API const char *pncclGetLastError(ncclComm_t comm)
{
    static __thread char copy[sizeof(g_last)];
    (void)comm;
    pthread_mutex_lock(&g_last_lock);
    memcpy(copy, g_last, sizeof(copy));
    pthread_mutex_unlock(&g_last_lock);
    return copy;
}
VGN_ALIAS(ncclGetLastError);

/* ---- memory ---- */

VG_API ncclResult_t pncclMemAlloc(void **ptr, size_t size)
{
    vg_init();
    if (!ptr)
        return ncclInvalidArgument;
    if (vg_mem_alloc(ptr, size, VG_MEM_DEVICE, vg_current_device()) != cudaSuccess)
        return ncclUnhandledCudaError;
    return ncclSuccess;
}
VGN_ALIAS(ncclMemAlloc);

VG_API ncclResult_t pncclMemFree(void *ptr)
{
    if (!ptr)
        return ncclSuccess;
    return vg_mem_free(ptr, VG_MEM_DEVICE) == cudaSuccess ? ncclSuccess : ncclInvalidArgument;
}
VGN_ALIAS(ncclMemFree);

/* Registration only speeds up a real transport; the vgpu accepts and ignores it. */
VG_API ncclResult_t pncclCommRegister(const ncclComm_t comm, void *buff, size_t size,
                                      void **handle)
{
    (void)size;
    ncclResult_t r = query_check(comm, handle, "ncclCommRegister");
    if (r == ncclSuccess)
        *handle = buff ? buff : (void *)comm;
    return r;
}
VGN_ALIAS(ncclCommRegister);

VG_API ncclResult_t pncclCommDeregister(const ncclComm_t comm, void *handle)
{
    return query_check(comm, handle, "ncclCommDeregister");
}
VGN_ALIAS(ncclCommDeregister);

/* Windows only make a real transport faster: accepted and ignored. */
VG_API ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size,
                                            ncclWindow_t *win, int winFlags)
{
    (void)size;
    (void)winFlags;
    ncclResult_t r = query_check(comm, win, "ncclCommWindowRegister");
    if (r == ncclSuccess)
        *win = (ncclWindow_t)(buff ? buff : (void *)comm);
    return r;
}
VGN_ALIAS(ncclCommWindowRegister);

VG_API ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win)
{
    return query_check(comm, win, "ncclCommWindowDeregister");
}
VGN_ALIAS(ncclCommWindowDeregister);

/* The vgpu has no debug settings to reload. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
VG_API void pncclResetDebugInit(void)
{
}
VGN_ALIAS(ncclResetDebugInit);
#pragma GCC diagnostic pop
