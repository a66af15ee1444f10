/*
 * nccl_shm.c: where a communicator's members meet.
 *
 * Communicator segment "/vgn-<key>" (POSIX shm, key = 16 hex digits from the unique id or
 * derived by ncclCommSplit). Every member opens it with O_CREAT and sizes it for nranks;
 * a fresh segment is all zeros and all zeros is the valid empty state, so no member has to
 * initialise it and there is no creator to wait for. Layout, each array 64-byte aligned:
 *
 *   vgn_shm_hdr_t       nranks (set once), njoined
 *   vgn_member_t[n]     published by each member when it joins
 *   vgn_split_ent_t[2][n]  colour/key of the split in progress (epoch % 2; a member can be
 *                       one split ahead of a slower one, never two)
 *   vgn_cslot_t[n][64]  each rank's ring of posted collectives (seq % 64)
 *   vgn_pslot_t[n*n][8] each ordered pair's ring of send/recv meetings
 *
 * The member that completes the join unlinks the name: from then on the segment lives as
 * long as some member maps it, and nothing is left in /dev/shm.
 *
 * Data segments "/vgn-<key>-c<rank>-<seq>" and "/vgn-<key>-p<src>-<dst>-<k>" hold one
 * posted input each (only when data moves: never in timing-only or representative mode),
 * after a header counting the readers that have not released it; the last reader unlinks
 * it, so memory is bounded by the operations in flight. Slots and data are released
 * separately: a slot as soon as every counterpart has read it (in poll), the data when
 * each reader's op has executed, so a group of any number of calls never waits for its
 * own slots. What a failure leaves unread (a peer failed before reading) is unlinked by
 * its poster when its own communicator failed or was aborted, and by the last member to
 * destroy the communicator in any case (vgn_shm_leave; it looks at the slots still in the
 * rings, which is where unread data can be).
 *
 * Synchronisation: fields marked atomic are accessed with __atomic builtins on memory
 * shared between processes (lock-free on every target we build for); a writer fills the
 * plain fields first and publishes them with a release store of the tag, a reader loads
 * the tag with acquire before it reads them.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "nccl_int.h"

#define ALIGN64(x) (((x) + 63) & ~(size_t)63)

double vgn_wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void comm_seg_name(char *buf, size_t len, uint64_t key)
{
    snprintf(buf, len, "/vgn-%016llx", (unsigned long long)key);
}

void vgn_data_name(char *buf, size_t len, uint64_t key, int p2p, int a, int b, uint64_t seq)
{
    if (p2p)
        snprintf(buf, len, "/vgn-%016llx-p%d-%d-%llu", (unsigned long long)key, a, b,
                 (unsigned long long)seq);
    else
        snprintf(buf, len, "/vgn-%016llx-c%d-%llu", (unsigned long long)key, a,
                 (unsigned long long)seq);
}

/* Places the arrays of a segment for n members at base (NULL: only computes the size). */
static size_t layout(vgn_shm_t *s, void *base, int n)
{
    size_t off = ALIGN64(sizeof(vgn_shm_hdr_t));
    size_t members = off;
    off = ALIGN64(off + (size_t)n * sizeof(vgn_member_t));
    size_t split = off;
    off = ALIGN64(off + 2 * (size_t)n * sizeof(vgn_split_ent_t));
    size_t coll = off;
    off = ALIGN64(off + (size_t)n * VGN_COLL_SLOTS * sizeof(vgn_cslot_t));
    size_t p2p = off;
    off = ALIGN64(off + (size_t)n * n * VGN_P2P_SLOTS * sizeof(vgn_pslot_t));
    if (base) {
        char *b = base;
        s->base = base;
        s->size = off;
        s->n = n;
        s->hdr = (vgn_shm_hdr_t *)b;
        s->members = (vgn_member_t *)(b + members);
        s->split = (vgn_split_ent_t *)(b + split);
        s->coll = (vgn_cslot_t *)(b + coll);
        s->p2p = (vgn_pslot_t *)(b + p2p);
    }
    return off;
}

ncclResult_t vgn_shm_join(ncclComm_t c)
{
    char name[64];
    int n = c->nranks;
    size_t need = layout(NULL, NULL, n);
    comm_seg_name(name, sizeof(name), c->key);
    c->t_init_wall = vgn_wall();
    int fd = shm_open(name, O_CREAT | O_RDWR, 0600);
    if (fd < 0) {
        vgn_error("nccl: shm_open(%s) failed: %s", name, strerror(errno));
        return ncclSystemError;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || (st.st_size < (off_t)need && ftruncate(fd, (off_t)need) != 0)) {
        vgn_error("nccl: sizing %s to %zu bytes failed: %s", name, need, strerror(errno));
        close(fd);
        return ncclSystemError;
    }
    if (st.st_size > (off_t)need) {
        /* Another member sized it for more ranks; shrinking it would fault that member. */
        vgn_error("nccl: communicator %s: rank %d says nranks=%d but another member created "
                  "it for more ranks", c->name, c->rank, n);
        close(fd);
        return ncclInvalidUsage;
    }
    void *base = mmap(NULL, need, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (base == MAP_FAILED) {
        vgn_error("nccl: mmap of %s failed: %s", name, strerror(errno));
        return ncclSystemError;
    }
    layout(&c->shm, base, n);
    uint32_t expect = 0;
    if (!__atomic_compare_exchange_n(&c->shm.hdr->nranks, &expect, (uint32_t)n, 0,
                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) && expect != (uint32_t)n) {
        vgn_error("nccl: communicator %s: rank %d says nranks=%d, another member says %u",
                  c->name, c->rank, n, expect);
        vgn_shm_unmap(&c->shm);
        return ncclInvalidUsage;
    }
    vgn_member_t *m = &c->shm.members[c->rank];
    uint32_t free_mark = 0;
    if (!__atomic_compare_exchange_n(&m->joined, &free_mark, 2u, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE)) {
        vgn_error("nccl: communicator %s: rank %d of %d joined twice (two callers passed the "
                  "same rank)", c->name, c->rank, n);
        vgn_shm_unmap(&c->shm);
        return ncclInvalidUsage;
    }
    m->grank = vg_global_rank();
    m->pid = (int32_t)getpid();
    m->dev = c->dev;
    __atomic_store_n(&m->joined, 1u, __ATOMIC_RELEASE);
    if (__atomic_add_fetch(&c->shm.hdr->njoined, 1u, __ATOMIC_ACQ_REL) == (uint32_t)n)
        shm_unlink(name); /* everyone has it mapped: nothing needs the name any more */
    return ncclSuccess;
}

static void sleep_backoff(int *us)
{
    struct timespec ts = {0, (long)*us * 1000};
    nanosleep(&ts, NULL);
    if (*us < 2000)
        *us *= 2;
}

ncclResult_t vgn_shm_wait(ncclComm_t c)
{
    int n = c->nranks, us = 20;
    double deadline = c->t_init_wall + vgn_timeout_s();
    while (__atomic_load_n(&c->shm.hdr->njoined, __ATOMIC_ACQUIRE) < (uint32_t)n) {
        if (vgn_wall() > deadline) {
            char missing[256] = "";
            size_t len = 0;
            for (int i = 0; i < n && len + 16 < sizeof(missing); i++)
                if (__atomic_load_n(&c->shm.members[i].joined, __ATOMIC_ACQUIRE) != 1)
                    len += (size_t)snprintf(missing + len, sizeof(missing) - len, "%s%d",
                                            len ? ", " : "", i);
            vgn_error("nccl: ncclCommInitRank on communicator %s timed out after %.1f s "
                      "(VGPU_COMM_TIMEOUT): rank %d of %d is waiting for rank(s) %s",
                      c->name, vgn_timeout_s(), c->rank, n, missing);
            char name[64];
            comm_seg_name(name, sizeof(name), c->key);
            shm_unlink(name); /* a late member starts afresh and reports its own timeout */
            return ncclSystemError;
        }
        sleep_backoff(&us);
    }
    for (int i = 0; i < n; i++)
        c->granks[i] = c->shm.members[i].grank;
    vgn_comm_place(c, vg_profile(c->dev)->gpus_per_node);
    return ncclSuccess;
}

void vgn_shm_unmap(vgn_shm_t *s)
{
    if (s->base)
        munmap(s->base, s->size);
    memset(s, 0, sizeof(*s));
}

int vgn_data_put(const char *name, const void *src, size_t len, uint32_t readers,
                 void **map_out)
{
    size_t total = len + VGN_DATA_HDR;
    int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0 && errno == EEXIST) { /* left by a failed communicator with this key */
        shm_unlink(name);
        fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    }
    if (fd < 0) {
        vg_msg("nccl: shm_open(%s) failed: %s", name, strerror(errno));
        return -1;
    }
    /* Reserve the pages now: a full /dev/shm must be an error here, not SIGBUS later. */
    int rc = posix_fallocate(fd, 0, (off_t)total);
    char *map = rc == 0 ? mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
    close(fd);
    if (map == MAP_FAILED) {
        vg_msg("nccl: cannot allocate %zu bytes in /dev/shm for %s: %s", total, name,
               strerror(rc ? rc : errno));
        shm_unlink(name);
        return -1;
    }
    memcpy(map + VGN_DATA_HDR, src, len);
    __atomic_store_n((uint32_t *)map, readers, __ATOMIC_RELEASE);
    if (map_out)
        *map_out = map;
    else
        munmap(map, total);
    return 0;
}

void *vgn_data_map(const char *name, size_t len)
{
    int fd = shm_open(name, O_RDWR, 0);
    if (fd < 0) {
        vg_msg("nccl: data segment %s is gone: %s", name, strerror(errno));
        return NULL;
    }
    void *map = mmap(NULL, len + VGN_DATA_HDR, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
        vg_msg("nccl: mmap of %s failed: %s", name, strerror(errno));
        return NULL;
    }
    return map;
}

void vgn_data_release(const char *name, void *map, size_t len)
{
    void *m = map ? map : vgn_data_map(name, len);
    if (!m)
        return;
    if (__atomic_sub_fetch((uint32_t *)m, 1u, __ATOMIC_ACQ_REL) == 0)
        shm_unlink(name);
    munmap(m, len + VGN_DATA_HDR);
}

/* Unlinks the data segments rank r's rings still name (ENOENT for the consumed ones). */
static void sweep_rank(ncclComm_t c, int r)
{
    int n = c->nranks;
    char name[96];
    for (int i = 0; i < VGN_COLL_SLOTS; i++) {
        vgn_cslot_t *s = &c->shm.coll[(size_t)r * VGN_COLL_SLOTS + i];
        uint64_t tag = __atomic_load_n(&s->tag, __ATOMIC_ACQUIRE);
        if (tag && s->has_data) {
            vgn_data_name(name, sizeof(name), c->key, 0, r, 0, tag - 1);
            shm_unlink(name);
        }
    }
    for (int dst = 0; dst < n; dst++)
        for (int i = 0; i < VGN_P2P_SLOTS; i++) {
            vgn_pslot_t *s = &c->shm.p2p[((size_t)r * n + dst) * VGN_P2P_SLOTS + i];
            uint64_t tag = __atomic_load_n(&s->send_tag, __ATOMIC_ACQUIRE);
            if (tag && s->has_data) {
                vgn_data_name(name, sizeof(name), c->key, 1, r, dst, tag - 1);
                shm_unlink(name);
            }
        }
}

void vgn_shm_leave(ncclComm_t c, int failed)
{
    if (!c->shm.base || !c->ready)
        return;
    /* A slower peer may still have to read what this member posted, so a healthy member
     * leaves it; once every member has left, nobody will. */
    if (__atomic_add_fetch(&c->shm.hdr->nleft, 1u, __ATOMIC_ACQ_REL) == (uint32_t)c->nranks) {
        for (int r = 0; r < c->nranks; r++)
            sweep_rank(c, r);
    } else if (failed) {
        sweep_rank(c, c->rank);
    }
}
