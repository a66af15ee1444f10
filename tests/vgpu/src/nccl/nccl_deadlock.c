/*
 * nccl_deadlock.c: a deadlock of communication ops reported as such, within seconds,
 * instead of as a communication timeout (VGPU_COMM_TIMEOUT) a minute later.
 *
 * Why it can happen: a hardware queue runs its ops in issue order and a communication op
 * that waits for its peers at the queue's head holds every op behind it (sim.c). Two ranks
 * that issue two communicators' ops in opposite orders on one queue each wait, at their
 * heads, for an op the other has queued behind its own head: nothing can move again.
 *
 * How it is seen: every rank of the job publishes, in one shared segment named after the
 * launcher's job ("/vgn-dl-<hash>"), what its waiting heads are (device, queue; each
 * waiting item's communicator, op and sequence number, and the global rank it waits for),
 * the communication ops queued behind each head, a progress count (ops issued plus ops
 * completed) and since when that count has not moved. A wait of rank A's head for rank B
 * is an edge to B's head when the op A waits for is queued behind that head, or when B has
 * one queue, held by a waiting head, and has not issued the op yet (it can only queue
 * behind the head). Such an edge is a certainty: that op of B cannot start before B's head
 * does. A cycle of such edges among ranks whose progress has not moved for VGPU_DEADLOCK_S
 * seconds (default 2; 0 turns the detector off) and whose state is fresh is a deadlock:
 * every op on it waits for the next, and none can start first. The check runs in the
 * rendezvous poll of a waiting op (at most every 100 ms per op, publishing at most every 50
 * ms per process); each rank of the cycle finds it from its own head, prints the cycle
 * (ranks, devices, queues, ops) and fails its head op (ncclSystemError, as a timeout
 * would), so that the job ends with the reason instead of hanging.
 *
 * What it does not claim: a wait for a rank that is busy elsewhere, dead or blocked outside
 * the device is left to VGPU_COMM_TIMEOUT; so is a rank with several queues whose op is
 * not queued yet (it may yet go to a free queue). No cycle, no report.
 *
 * Locking: everything runs in the rendezvous poll, with the core's device lock held (one
 * thread of this process at a time). A slot is written only by its rank, under a sequence
 * counter (odd while written); readers copy it and retry when it changed.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nccl_int.h"

#define DL_HEADS 8   /* waiting heads a rank publishes */
#define DL_WAITS 8   /* waits per head */
#define DL_BEHIND 16 /* op items queued behind a head */

typedef struct dl_id {
    uint64_t key, seq;
    int32_t kind; /* vgn_kind_t */
    int32_t peer; /* send/recv: the other side's rank in the communicator; -1 collectives */
} dl_id_t;

typedef struct dl_wait {
    dl_id_t id;
    int32_t me;   /* this rank's rank in the communicator */
    int32_t who;  /* the global rank it waits for */
    char comm[64];
} dl_wait_t;

typedef struct dl_head {
    int32_t dev, queue, nwait, nbehind;
    dl_wait_t wait[DL_WAITS];
    dl_id_t behind[DL_BEHIND];
} dl_head_t;

typedef struct dl_slot {
    uint64_t version;            /* odd while its rank writes it (atomic) */
    int32_t pid, nheads, one_queue, pad;
    uint64_t progress;
    double since;                /* wall clock when progress last moved */
    double published;            /* wall clock of this state; 0: nothing waits */
    dl_head_t head[DL_HEADS];
} dl_slot_t;

/* An op a detector found on a cycle, for its rank to fail: the rank that found the cycle
 * may not be the only one to see it, but once it fails its own op the cycle is gone for
 * the others (its queue moves on), so it tells them. */
#define DL_DOOM 4
typedef struct dl_doom {
    uint64_t set; /* atomic: 0 free, else the report it belongs to */
    dl_id_t id;
} dl_doom_t;

typedef struct dl_hdr {
    uint32_t size;
    uint32_t attached;           /* atomic: processes that mapped it */
    uint32_t lock;               /* atomic spin lock over report and every doom entry */
    uint32_t pad;
    uint64_t report_gen;         /* guarded by lock */
    char report[4096];           /* the newest cycle, as printed; guarded by lock */
} dl_hdr_t;

static struct {
    int state;                   /* 0 not tried, 1 attached, -1 off or unavailable */
    int size, me;
    double limit_s;              /* VGPU_DEADLOCK_S */
    char name[64];
    void *base;
    size_t len;
    dl_hdr_t *hdr;
    dl_doom_t *doom;             /* [size][DL_DOOM] in the segment */
    dl_slot_t *slot;             /* [size] in the segment */
    dl_slot_t *copy;             /* [size] this process's snapshot */
    uint64_t progress;
    double since, last_pub;
    uint64_t printed;            /* the newest report this process printed */
} g_dl;

static int env_int(const char *const *names, int n, int def)
{
    for (int i = 0; i < n; i++) {
        const char *v = getenv(names[i]);
        if (v && *v)
            return atoi(v);
    }
    return def;
}

/* The job's name: every process launched together computes the same. */
static uint64_t job_hash(void)
{
    static const char *ids[] = {"VGPU_JOB", "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE",
                                "SLURM_JOB_ID", "SLURM_STEP_ID", "TORCHELASTIC_RUN_ID"};
    uint64_t h = 1469598103934665603ull ^ (uint64_t)geteuid();
    int any = 0;
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
        for (const char *v = getenv(ids[i]); v && *v; v++, any = 1)
            h = (h ^ (unsigned char)*v) * 1099511628211ull;
    if (!any) /* no launcher that says: the ranks are children of one process */
        h = (h ^ (uint64_t)getppid()) * 1099511628211ull;
    return h;
}

static void dl_detach(void)
{
    if (g_dl.state != 1)
        return;
    dl_slot_t *s = &g_dl.slot[g_dl.me];
    __atomic_add_fetch(&s->version, 1, __ATOMIC_ACQ_REL);
    s->nheads = 0;
    s->published = 0;
    __atomic_add_fetch(&s->version, 1, __ATOMIC_RELEASE);
    dl_hdr_t *h = g_dl.base;
    if (__atomic_sub_fetch(&h->attached, 1, __ATOMIC_ACQ_REL) == 0)
        shm_unlink(g_dl.name);
    munmap(g_dl.base, g_dl.len);
    free(g_dl.copy);
    g_dl.state = -1;
}

/* Maps the job's segment the first time an op waits; -1 when there is no job to look at. */
static int dl_attach(void)
{
    if (g_dl.state)
        return g_dl.state;
    g_dl.state = -1;
    const char *lim = getenv("VGPU_DEADLOCK_S");
    g_dl.limit_s = lim && *lim ? atof(lim) : 2.0;
    static const char *sizes[] = {"OMPI_COMM_WORLD_SIZE", "WORLD_SIZE", "PMI_SIZE",
                                  "SLURM_NTASKS"};
    g_dl.size = env_int(sizes, 4, 1);
    g_dl.me = vg_global_rank();
    if (g_dl.limit_s <= 0 || g_dl.size < 2 || g_dl.size > 65536 || g_dl.me < 0 ||
        g_dl.me >= g_dl.size)
        return -1;
    snprintf(g_dl.name, sizeof g_dl.name, "/vgn-dl-%016llx", (unsigned long long)job_hash());
    g_dl.len = sizeof(dl_hdr_t) + (size_t)g_dl.size * (DL_DOOM * sizeof(dl_doom_t) + sizeof(dl_slot_t));
    int fd = shm_open(g_dl.name, O_RDWR | O_CREAT, 0600);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || ((size_t)st.st_size < g_dl.len && ftruncate(fd, (off_t)g_dl.len) < 0)) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    g_dl.base = mmap(NULL, g_dl.len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    g_dl.copy = calloc((size_t)g_dl.size, sizeof *g_dl.copy);
    if (g_dl.base == MAP_FAILED || !g_dl.copy) {
        if (g_dl.base != MAP_FAILED)
            munmap(g_dl.base, g_dl.len);
        free(g_dl.copy);
        return -1;
    }
    dl_hdr_t *h = g_dl.base;
    uint32_t zero = 0;
    __atomic_compare_exchange_n(&h->size, &zero, (uint32_t)g_dl.size, 0, __ATOMIC_ACQ_REL,
                                __ATOMIC_ACQUIRE);
    if (h->size != (uint32_t)g_dl.size) { /* another job's, or another size: not ours */
        munmap(g_dl.base, g_dl.len);
        free(g_dl.copy);
        return -1;
    }
    /* The last rank to come unlinks the name (everyone has it mapped), so that a job whose
     * ranks end without their exit handlers (_exit, a signal) leaves nothing behind; else
     * the last to leave does. */
    if (__atomic_add_fetch(&h->attached, 1, __ATOMIC_ACQ_REL) == (uint32_t)g_dl.size)
        shm_unlink(g_dl.name);
    g_dl.hdr = h;
    g_dl.doom = (dl_doom_t *)((char *)g_dl.base + sizeof(dl_hdr_t));
    g_dl.slot = (dl_slot_t *)(g_dl.doom + (size_t)g_dl.size * DL_DOOM);
    g_dl.state = 1;
    atexit(dl_detach);
    return 1;
}

static dl_id_t item_id(const vgn_item_t *it)
{
    return (dl_id_t){it->comm->key, it->seq, (int32_t)it->kind,
                     it->kind >= VGN_SEND ? it->root : -1};
}

static void fill_head(dl_head_t *d, const vg_rdv_head_t *h)
{
    const vgn_batch_t *b = h->op->payload;
    d->dev = h->dev;
    d->queue = h->queue;
    d->nwait = d->nbehind = 0;
    for (int i = 0; i < b->nitems; i++) {
        int who[DL_WAITS];
        int n = vgn_item_waits(&b->items[i], who, DL_WAITS);
        for (int k = 0; k < n && d->nwait < DL_WAITS; k++) {
            dl_wait_t *w = &d->wait[d->nwait++];
            w->id = item_id(&b->items[i]);
            w->me = b->items[i].comm->rank;
            w->who = who[k];
            snprintf(w->comm, sizeof w->comm, "%s", b->items[i].comm->name);
        }
    }
    for (int j = 0; j < h->nbehind; j++) {
        if (h->behind[j]->rdv != &vgn_rdv_ops)
            continue;
        const vgn_batch_t *bb = h->behind[j]->payload;
        for (int i = 0; i < bb->nitems && d->nbehind < DL_BEHIND; i++)
            d->behind[d->nbehind++] = item_id(&bb->items[i]);
    }
}

/* Publishes this process's waiting heads (at most every 50 ms). */
static void dl_publish(double now)
{
    uint64_t p = vg_progress_count();
    if (p != g_dl.progress || g_dl.since == 0) {
        g_dl.progress = p;
        g_dl.since = now;
    }
    if (now - g_dl.last_pub < 0.05)
        return;
    g_dl.last_pub = now;
    vg_rdv_head_t h[DL_HEADS];
    int every, n = vg_rdv_heads(h, DL_HEADS, &every);
    dl_slot_t *s = &g_dl.slot[g_dl.me];
    __atomic_add_fetch(&s->version, 1, __ATOMIC_ACQ_REL);
    s->pid = (int32_t)getpid();
    s->nheads = 0;
    for (int i = 0; i < n; i++)
        if (h[i].op->rdv == &vgn_rdv_ops)
            fill_head(&s->head[s->nheads++], &h[i]);
    s->one_queue = every && n == 1 && vg_config()->max_connections == 1;
    s->progress = g_dl.progress;
    s->since = g_dl.since;
    s->published = now;
    __atomic_add_fetch(&s->version, 1, __ATOMIC_RELEASE);
}

/* A consistent copy of rank r's slot, or 0 when its owner was writing. */
static int dl_read(int r, dl_slot_t *out)
{
    const dl_slot_t *s = &g_dl.slot[r];
    for (int tries = 0; tries < 4; tries++) {
        uint64_t v = __atomic_load_n(&s->version, __ATOMIC_ACQUIRE);
        if (v & 1)
            continue;
        memcpy(out, s, sizeof *out);
#ifdef __SANITIZE_THREAD__
        /* GCC's ThreadSanitizer refuses fences (-Wtsan), and cannot see the other process
         * that writes the slot anyway; the TSan builds are x86, whose loads stay in order,
         * so keeping the compiler from moving them is enough there. */
        __asm__ __volatile__("" ::: "memory");
#else
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
#endif
        if (__atomic_load_n(&s->version, __ATOMIC_RELAXED) == v)
            return 1;
    }
    return 0;
}

/* Whether x, an op of the rank w waits for, is the op that w's item needs there. */
static int dl_matches(const dl_wait_t *w, const dl_id_t *x)
{
    if (x->key != w->id.key || x->seq != w->id.seq)
        return 0;
    if (w->id.kind < VGN_SEND)
        return x->kind < VGN_SEND;
    int want = w->id.kind == VGN_SEND ? VGN_RECV : VGN_SEND;
    return x->kind == want && x->peer == w->me;
}

/* The head of rank w->who that the op w waits for cannot start before, or -1. */
static int dl_edge(const dl_wait_t *w, const uint8_t *stuck)
{
    int b = w->who;
    if (b < 0 || b >= g_dl.size || !stuck[b])
        return -1;
    const dl_slot_t *s = &g_dl.copy[b];
    for (int h = 0; h < s->nheads; h++)
        for (int j = 0; j < s->head[h].nbehind; j++)
            if (dl_matches(w, &s->head[h].behind[j]))
                return b * DL_HEADS + h;
    return s->one_queue ? b * DL_HEADS : -1;
}

static const char *kind_name(int k)
{
    return vgn_kind_name((vgn_kind_t)k);
}

static void dl_lock(void)
{
    while (__atomic_exchange_n(&g_dl.hdr->lock, 1u, __ATOMIC_ACQUIRE))
        usleep(100);
}

static void dl_unlock(void)
{
    __atomic_store_n(&g_dl.hdr->lock, 0u, __ATOMIC_RELEASE);
}

/* The cycle as people read it, into the shared report; and a doom entry for every op on
 * it (this rank's too), published before this rank fails its own. */
static void dl_condemn(const int *path, const int *via, int n, double idle)
{
    dl_lock();
    dl_hdr_t *hd = g_dl.hdr;
    uint64_t gen = ++hd->report_gen;
    size_t len = sizeof hd->report, o = 0;
    o += (size_t)snprintf(hd->report, len, "deadlock (found by rank %d): no communication op "
                          "of these ranks can make progress (none moved for %.1f s); each "
                          "waits at the head of its hardware queue for an op its peer has "
                          "queued behind its own waiting head:", g_dl.me, idle);
    for (int i = 0; i < n && o < len; i++) {
        int r = path[i] / DL_HEADS, next = path[(i + 1) % n] / DL_HEADS;
        const dl_head_t *h = &g_dl.copy[r].head[path[i] % DL_HEADS];
        const dl_head_t *nh = &g_dl.copy[next].head[path[(i + 1) % n] % DL_HEADS];
        const dl_wait_t *w = &h->wait[via[i]];
        char peer[32] = "";
        if (w->id.kind >= VGN_SEND)
            snprintf(peer, sizeof peer, " %s rank %d", w->id.kind == VGN_SEND ? "to" : "from",
                     w->id.peer);
        o += (size_t)snprintf(hd->report + o, len - o, "\n  rank %d (device %d, queue %d): %s "
                              "#%llu%s on communicator %s waits for rank %d, whose queue %d is "
                              "held by its own waiting head", r, h->dev, h->queue,
                              kind_name(w->id.kind), (unsigned long long)w->id.seq, peer,
                              w->comm, w->who, nh->queue);
        /* The op this wait belongs to fails with the cycle (the whole group, if it is one). */
        dl_doom_t *d = &g_dl.doom[(size_t)r * DL_DOOM];
        for (int k = 0; k < DL_DOOM; k++)
            if (!__atomic_load_n(&d[k].set, __ATOMIC_ACQUIRE) || k == DL_DOOM - 1) {
                d[k].id = w->id;
                __atomic_store_n(&d[k].set, gen, __ATOMIC_RELEASE);
                break;
            }
    }
    dl_unlock();
}

/* Whether an item of op is on a cycle some rank found; prints the cycle and sets the last
 * error when it is, and forgets the entry. */
static int dl_doomed(vg_op_t *op)
{
    const vgn_batch_t *b = op->payload;
    dl_doom_t *d = &g_dl.doom[(size_t)g_dl.me * DL_DOOM];
    for (int k = 0; k < DL_DOOM; k++) {
        if (!__atomic_load_n(&d[k].set, __ATOMIC_ACQUIRE))
            continue;
        for (int i = 0; i < b->nitems; i++) {
            const vgn_item_t *it = &b->items[i];
            dl_id_t x = item_id(it);
            if (x.key != d[k].id.key || x.seq != d[k].id.seq || x.kind != d[k].id.kind ||
                x.peer != d[k].id.peer)
                continue;
            char report[sizeof g_dl.hdr->report];
            dl_lock();
            uint64_t gen = d[k].set;
            memcpy(report, g_dl.hdr->report, sizeof report);
            __atomic_store_n(&d[k].set, 0, __ATOMIC_RELEASE);
            dl_unlock();
            if (gen != g_dl.printed) /* once per cycle, however many of its ops are here */
                vg_msg("%s", report);
            g_dl.printed = gen;
            vgn_error("nccl: deadlock (the cycle is printed above): rank %d fails its waiting "
                      "%s #%llu on communicator %s", g_dl.me, vgn_kind_name(it->kind),
                      (unsigned long long)it->seq, it->comm->name);
            return 1;
        }
    }
    return 0;
}

/* Searches a cycle of certain waits through this rank's head h; fills path/via (node and
 * the wait taken from it) and returns its length, or 0. */
static int dl_cycle(int start, const uint8_t *stuck, int *path, int *via)
{
    int nodes = g_dl.size * DL_HEADS;
    int *from = malloc((size_t)nodes * sizeof *from), *take = malloc((size_t)nodes * sizeof *take);
    int *queue = malloc((size_t)nodes * sizeof *queue);
    int found = 0, len = 0;
    if (!from || !take || !queue)
        goto out;
    for (int i = 0; i < nodes; i++)
        from[i] = -1;
    int qh = 0, qt = 0;
    queue[qt++] = start;
    from[start] = start;
    while (qh < qt && !found) {
        int u = queue[qh++];
        const dl_head_t *h = &g_dl.copy[u / DL_HEADS].head[u % DL_HEADS];
        for (int k = 0; k < h->nwait && !found; k++) {
            int v = dl_edge(&h->wait[k], stuck);
            if (v < 0)
                continue;
            if (v == start) {
                take[start] = k;
                from[start] = u; /* closes the cycle */
                found = 1;
            } else if (from[v] < 0) {
                from[v] = u;
                take[v] = k;
                queue[qt++] = v;
            }
        }
    }
    if (found) {
        /* Walk back from start (its predecessor is the cycle's last node). */
        int rev[DL_HEADS * 64], rk[DL_HEADS * 64], m = 0;
        int v = start;
        do {
            int u = from[v];
            rev[m] = u;
            rk[m++] = take[v];
            v = u;
        } while (v != start && m < DL_HEADS * 64);
        for (int i = 0; i < m; i++) {
            path[i] = rev[m - 1 - i];
            via[i] = rk[m - 1 - i];
        }
        len = v == start ? m : 0;
    }
out:
    free(from);
    free(take);
    free(queue);
    return len;
}

/* Looks for a cycle through op's head; condemns it when there is one. */
static void dl_search(vg_op_t *op, double now)
{
    uint8_t *stuck = calloc((size_t)g_dl.size, 1);
    if (!stuck)
        return;
    for (int r = 0; r < g_dl.size; r++) {
        dl_slot_t *s = &g_dl.copy[r];
        stuck[r] = dl_read(r, s) && s->published > 0 && now - s->published < 1.0 &&
                   now - s->since >= g_dl.limit_s && s->nheads > 0;
    }
    int at = -1;
    const dl_slot_t *mine = &g_dl.copy[g_dl.me];
    vg_rdv_head_t h[DL_HEADS];
    int every, n = vg_rdv_heads(h, DL_HEADS, &every);
    for (int i = 0; i < n; i++)
        if (h[i].op == op)
            for (int k = 0; k < mine->nheads; k++)
                if (mine->head[k].dev == h[i].dev && mine->head[k].queue == h[i].queue)
                    at = k;
    if (stuck[g_dl.me] && at >= 0) {
        int path[DL_HEADS * 64], via[DL_HEADS * 64];
        int len = dl_cycle(g_dl.me * DL_HEADS + at, stuck, path, via);
        if (len > 0)
            dl_condemn(path, via, len, now - g_dl.since);
    }
    free(stuck);
}

int vgn_deadlock(vg_op_t *op, int waiting, double *checked)
{
    if (g_dl.state == 1 && dl_doomed(op))
        return 1;
    double now = vgn_wall();
    if (!waiting || now - *checked < 0.1 || dl_attach() < 0)
        return 0;
    *checked = now;
    dl_publish(now);
    if (now - g_dl.since < g_dl.limit_s)
        return 0;
    dl_search(op, now);
    return dl_doomed(op);
}
