/* pairing.c: the record of what held pairing back (see pairing.h). */
#define _GNU_SOURCE
#include "pairing.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "common/log.h"
#include "sched_int.h"

static const char *const dh__unpaired_keys[] = {
#define DH__UNPAIRED_KEY(id, key, d) #key,
    DH_UNPAIRED_REASONS(DH__UNPAIRED_KEY)
#undef DH__UNPAIRED_KEY
};
static const char *const dh__unpaired_texts[] = {
#define DH__UNPAIRED_TEXT(id, key, d) d,
    DH_UNPAIRED_REASONS(DH__UNPAIRED_TEXT)
#undef DH__UNPAIRED_TEXT
};

/* guarded by dh__s.lock */
static dh_pairing_stats_t dh__p;
static struct timespec dh__p_t0;
static int dh__p_started;

const char *dh_unpaired_key(dh_unpaired_t r) { return dh__unpaired_keys[r]; }
const char *dh_unpaired_text(dh_unpaired_t r) { return dh__unpaired_texts[r]; }

void dh_pairing_planned(uint64_t groups)
{
    dh__p.planned_per_iter = groups;
    dh__p.attached = 1;
    if (!dh__p_started) {
        clock_gettime(CLOCK_MONOTONIC, &dh__p_t0);
        dh__p_started = 1;
    }
}

void dh_pairing_iteration(int paired, dh_unpaired_t why)
{
    if (paired)
        dh__p.iterations_paired++;
    else
        dh__p.unpaired[why]++;
}

void dh_pairing_drain(dh_drain_reason_t why)
{
    if (dh__p.drains[why]++ == 0)
        dh__call_site(dh__p.drain_site[why], sizeof dh__p.drain_site[why]);
}

void dh_pairing_desync(const char *what, const char *site)
{
    if (!dh__p.desync[0])
        snprintf(dh__p.desync, sizeof dh__p.desync, "%.400s, called from %.180s", what, site);
}

void dh_pairing_stats(dh_pairing_stats_t *out)
{
    pthread_mutex_lock(&dh__s.lock);
    *out = dh__p;
    if (dh__p_started) {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        out->followed_s = (double)(now.tv_sec - dh__p_t0.tv_sec) +
                          (double)(now.tv_nsec - dh__p_t0.tv_nsec) / 1e9;
    }
    pthread_mutex_unlock(&dh__s.lock);
}

void dh__call_site(char *buf, size_t len)
{
    snprintf(buf, len, "unknown");
    Dl_info self;
    if (!dladdr((void *)dh__call_site, &self))
        return;
    unw_context_t ctx;
    unw_cursor_t cur;
    if (unw_getcontext(&ctx) || unw_init_local(&cur, &ctx))
        return;
    for (int depth = 0; depth < 64 && unw_step(&cur) > 0; depth++) {
        unw_word_t ip = 0;
        unw_get_reg(&cur, UNW_REG_IP, &ip);
        Dl_info di;
        if (!ip || !dladdr((void *)ip, &di) || !di.dli_fname)
            continue;
        if (di.dli_fbase == self.dli_fbase)
            continue;
        const char *base = strrchr(di.dli_fname, '/');
        base = base ? base + 1 : di.dli_fname;
        static const char *const libs[] = {"libcudart", "libcuda.", "libcublas", "libnccl",
                                           "libvgpu"};
        int lib = 0;
        for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++)
            lib |= strncmp(base, libs[i], strlen(libs[i])) == 0;
        if (lib)
            continue;
        char sym[128] = "";
        unw_word_t off = 0;
        if (unw_get_proc_name(&cur, sym, sizeof sym, &off) == 0)
            snprintf(buf, len, "%s+0x%lx (%s)", sym, (unsigned long)off, base);
        else
            snprintf(buf, len, "%s+0x%lx", base,
                     (unsigned long)(ip - (unw_word_t)(uintptr_t)di.dli_fbase));
        return;
    }
}

void dh_pairing_finish(void)
{
    pthread_mutex_lock(&dh__s.lock);
    dh_pairing_stats_t p = dh__p;
    uint64_t formed = dh__s.stats.paired_groups;
    pthread_mutex_unlock(&dh__s.lock);
    uint64_t iters = p.iterations_paired, most = 0;
    int why = -1;
    for (int r = 0; r < DH_UNPAIRED_COUNT; r++) {
        iters += p.unpaired[r];
        /* The probe is by design: name it only when nothing else held pairing back. */
        if (p.unpaired[r] > most || (why == DH_UNPAIRED_PROBE && p.unpaired[r] == most)) {
            most = p.unpaired[r];
            why = r;
        }
    }
    uint64_t planned = p.planned_per_iter * iters;
    if (planned == 0 || iters < 2 || formed * 2 >= planned)
        return;
    DH_WARN(PLAN, "pairing was held back: %llu of %llu planned two-strand groups formed "
            "(%.0f%%), %llu of %llu iterations unpaired, most because %s; DHELIX_STATS=1 "
            "says why, with call sites",
            (unsigned long long)formed, (unsigned long long)planned,
            100.0 * (double)formed / (double)planned,
            (unsigned long long)(iters - p.iterations_paired), (unsigned long long)iters,
            why >= 0 && most ? dh_unpaired_text(why) : "of drains mid-iteration");
}
