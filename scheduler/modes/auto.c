/*
 * auto.c: DHELIX_MODE=auto (see auto.h): profile, plan in the process, agree, switch.
 *
 * Why the switch is safe: until it, every rank runs in program order (profile mode issues
 * each op at once). The switch round is decided from what every rank says at the same
 * boundary of its own program order, so every rank attaches the plan before the same
 * iteration; from there on the tracker's own agreement (tracker.c) holds, with each rank's
 * pair bits sent to the hub as it attaches (all bits until then: no round is decided
 * without a rank that has not attached yet). A rank that holds no plan says "not ready"
 * without waiting; only ready ranks wait, and every rank votes at every boundary, so no
 * wait is for a vote that never comes while the ranks are in lockstep (and every wait is
 * bounded by DHELIX_AGREE_TIMEOUT_MS when they are not).
 *
 * Why going passthrough is safe: profile mode and passthrough both issue in program order,
 * so a rank may leave one for the other at any op on its own, once what is queued has
 * been issued (sched.c dh__sched_passthrough). What must not happen is a rank that stops
 * voting while another waits for its vote: a rank that will hold no plan votes "never"
 * (agree.h), which decides every switch round of every rank from then on, and the others
 * go passthrough at their next boundary too. Leaving plan mode is a decision about order,
 * so it is taken by the ranks together: once, at the boundary measure_iters + 1 after the
 * switch (the same on every rank), on rank 0's measurement (dh_agree_switch_back); a rank
 * whose channel broke runs program order already and may leave on its own.
 *
 * What is measured (rank 0): the device time from one iteration boundary to the next, an
 * event recorded on the stream of the boundary's first op (the queue is empty there: the
 * program has just synchronised) and waited for at once (the device is idle there too),
 * as the workload's own per-iteration events would see it. Program order: the last
 * measure_iters iterations before the switch (iteration 0, the warm-up, left out; the
 * tracker's checking iteration at the switch only when there is no other); Strand
 * Interleaving: the measure_iters iterations after the checking iteration.
 */
#define _GNU_SOURCE
#include "auto.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agree.h"
#include "common/config.h"
#include "common/log.h"
#include "common/membound.h"
#include "common/status.h"
#include "plan.h"
#include "planner.h"
#include "policy.h"
#include "profile_rec.h"
#include "real.h"
#include "registry.h"
#include "roles.h"
#include "sched_int.h"
#include "tracker.h"

#define DH__START_SLACK 4 /* as tracker.c's: ops after a synchronisation an iteration may
                             start at */
#define DH__POLL_MS 20 /* how often a wait for the plan looks for another rank's "never" */
#define DH__RING 64 /* program-order iteration times kept (DHELIX_AUTO_MEASURE_ITERS at most) */

static struct {
    int on;                       /* constant after dh_auto_init */
    _Atomic int switched;         /* plan mode attached (set under dh__s.lock) */
    _Atomic int ready;            /* plan holds a checked plan for this rank */
    _Atomic int no_plan;          /* the planning thread: no plan will come to this rank */
    _Atomic int done;             /* nothing more to do at any op: passthrough, or the
                                     measurement after the switch is over */
    /* guarded by dh__s.lock: */
    int first, synced, started;
    int since, taken;             /* ops since the last synchronisation; a boundary was
                                     found since it */
    uint64_t prev_sig, before_sync; /* the last op's signature; the one before the last
                                     synchronisation */
    uint64_t next_k;              /* the next boundary's number once recording stopped, 0
                                     before */
    /* The voting thread's (agree.h: one framework thread at a boundary at a time): */
    int measure;                  /* this rank measures (rank 0, DHELIX_AUTO_MEASURE_ITERS) */
    uint64_t sw, back_at;         /* the switch boundary; the switch-back round's, 0 none */
    int64_t due;                  /* the boundary this rank switches at ("the switch
                                     boundary" below), -1 not known yet */
    int waited;                   /* it waited for the plan there (once) */
    struct {
        cudaEvent_t ev[2];
        int64_t ev_k[2];          /* the boundary each event marks, -1 none */
        int dev, failed;
        double base[DH__RING];    /* program-order iteration times (ms), a ring */
        uint64_t nbase;
        double probe, si;         /* the checking iteration's time; the sum of SI's */
        int nsi, has_probe;
    } m;
    /* guarded by lock: */
    pthread_mutex_t lock;
    pthread_cond_t cv;            /* ready or no_plan was set */
    dh_plan_t *plan;
    char plan_name[600];
    char what[16], why[400];      /* "no plan" or "not used", and why (no_plan) */
    dh_auto_stats_t st;
    uint64_t deferred_at;         /* ops deferred when passthrough started */
    double t_stop;                /* when the planning thread started (s, monotonic) */
    /* The planning thread's use of the device (the profile's events) vs exit: */
    pthread_mutex_t dev_lock;
    int exiting;                  /* guarded by dev_lock */
} dh__a = {.first = 1, .due = -1, .m = {.ev_k = {-1, -1}, .dev = -1},
           .lock = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER,
           .dev_lock = PTHREAD_MUTEX_INITIALIZER};

static double dh__mono(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void dh__status(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void dh__status(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&dh__a.lock);
    vsnprintf(dh__a.st.status, sizeof dh__a.st.status, fmt, ap);
    pthread_mutex_unlock(&dh__a.lock);
    va_end(ap);
}

int dh_auto_on(void) { return dh__a.on; }

int dh_auto_init(void)
{
    dh__a.on = 1;
    dh__a.st.on = 1;
    dh__a.st.switch_iteration = dh__a.st.passthrough_iteration = dh__a.st.switch_due = -1;
    dh__a.st.planning_ms = dh__a.st.ready_ms = -1;
    dh__a.measure = dh_agree_rank() == 0 && dh_config()->auto_measure_iters > 0;
    snprintf(dh__a.st.status, sizeof dh__a.st.status, "profiling");
    /* Until a plan is attached, no round of the tracker is decided without this rank. */
    dh_agree_set_mask(UINT64_MAX);
    return DH_MODE_PROFILE;
}

/* ---- checks of a plan for this rank (what dh_tracker_attach checks, before voting) ---- */

static int dh__launcher_size(void)
{
    static const char *n[] = {"OMPI_COMM_WORLD_SIZE", "WORLD_SIZE", "SLURM_NTASKS"};
    for (int i = 0; i < 3; i++)
        if (getenv(n[i]) && atoi(getenv(n[i])) > 0)
            return atoi(getenv(n[i]));
    return 1;
}

static double dh__predicted(const dh_plan_t *p)
{
    double b = 0, s = 0;
    for (int i = 0; i < p->nsections; i++) {
        b += p->sections[i].baseline_us;
        s += p->sections[i].si_us;
    }
    return s > 0 ? b / s : 0;
}

static int dh__usable(const dh_plan_t *p, char *why, size_t n)
{
    int world = dh__launcher_size(), rank = dh_agree_rank();
    const dh_plan_section_t *s = NULL;
    if (p->world > 0 && p->world != world)
        snprintf(why, n, "the plan is for %d ranks and this job has %d", p->world, world);
    else if (p->layout[0] && strcmp(p->layout, dh_config()->layout) != 0)
        snprintf(why, n, "the plan is for layout %.60s, DHELIX_LAYOUT is %.60s", p->layout,
                 dh_config()->layout);
    else if (!(s = dh_plan_section_for(p, rank)) || s->nops == 0 || s->ngroups == 0)
        snprintf(why, n, "no section of the plan is for rank %d", rank);
    else
        return 1;
    return 0;
}

/* ---- the cache ---- */

static uint64_t dh__fnv(uint64_t h, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return (h ^ 0xff) * 1099511628211ull; /* a separator */
}

/* The cache file of this program, world, layout and device; 0, or -1 without a cache. */
static int dh__cache_path(char *path, size_t n)
{
    const dh_config_t *cfg = dh_config();
    if (!cfg->plan_cache[0])
        return -1;
    uint64_t h = 1469598103934665603ull;
    char buf[4096];
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    ssize_t k = fd >= 0 ? read(fd, buf, sizeof buf) : -1;
    if (fd >= 0)
        close(fd);
    h = dh__fnv(h, buf, k > 0 ? (size_t)k : 0);
    char world[16];
    snprintf(world, sizeof world, "%d", dh__launcher_size());
    const char *dev = getenv("VGPU_DEVICE"), *mc = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
    const char *parts[] = {world, cfg->layout, dev ? dev : "cuda", mc ? mc : "", cfg->groups,
                           dh_version()};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        h = dh__fnv(h, parts[i], strlen(parts[i]));
    snprintf(path, n, "%.500s/dhelix-plan-%016llx.json", cfg->plan_cache, (unsigned long long)h);
    return 0;
}

static void dh__cache_write(const char *json, size_t len)
{
    char path[600], tmp[640];
    struct stat sb;
    if (dh__cache_path(path, sizeof path) < 0 || stat(path, &sb) == 0)
        return;
    mkdir(dh_config()->plan_cache, 0755);
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    int ok = f && fwrite(json, 1, len, f) == len;
    if (f && fclose(f) != 0)
        ok = 0;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        DH_WARN(PLAN, "auto: cannot write the plan cache %s: %s", path, strerror(errno));
        return;
    }
    if (dh_agree_rank() == 0)
        DH_INFO(PLAN, "auto: plan cached in %s", path);
}

/* Takes p as the plan to switch to (checked for this rank). */
static void dh__set_ready(dh_plan_t *p, const char *name)
{
    pthread_mutex_lock(&dh__a.lock);
    if (atomic_load(&dh__a.done)) { /* this rank gave up meanwhile (another had no plan) */
        pthread_mutex_unlock(&dh__a.lock);
        dh_plan_free(p);
        return;
    }
    dh__a.plan = p;
    snprintf(dh__a.plan_name, sizeof dh__a.plan_name, "%s", name);
    snprintf(dh__a.st.status, sizeof dh__a.st.status, "plan ready, waiting for the switch");
    dh__a.st.plan_ready = 1;
    dh__a.st.predicted = dh__predicted(p);
    if (dh__a.st.planning_ms < 0)
        dh__a.st.planning_ms = p->planning_s * 1000.0;
    atomic_store(&dh__a.ready, 1);
    pthread_cond_broadcast(&dh__a.cv);
    pthread_mutex_unlock(&dh__a.lock);
}

void dh_auto_first_call(void)
{
    char path[600], err[400], why[200];
    if (!dh__a.on || dh__cache_path(path, sizeof path) < 0)
        return;
    dh_plan_t *p = NULL;
    if (access(path, R_OK) != 0) {
        DH_INFO(PLAN, "auto: no cached plan (%s): profiling", path);
        return;
    }
    if (dh_plan_load(path, &p, err, sizeof err) != DH_OK) {
        DH_WARN(PLAN, "auto: the cached plan cannot be used (%s): profiling", err);
        return;
    }
    if (!dh__usable(p, why, sizeof why)) {
        DH_WARN(PLAN, "auto: the cached plan %s cannot be used (%s): profiling", path, why);
        dh_plan_free(p);
        return;
    }
    pthread_mutex_lock(&dh__a.lock);
    dh__a.st.cache_hit = 1;
    pthread_mutex_unlock(&dh__a.lock);
    dh__set_ready(p, path);
}

/* ---- planning (its own thread) ---- */

static int dh__on_pinned(void *ctx, const dh_prof_comm_t *c)
{
    const dh_policy_t *pol = ctx;
    unsigned role = dh_role_parse(c->role);
    if (role == 0)
        role = dh_role_from_name(c->name);
    int term;
    return !dh_policy_decide(pol, c->name, role, c->nranks, &term);
}

static void dh__on_warn(void *ctx, const char *msg)
{
    (void)ctx;
    DH_INFO(PLAN, "auto: planner: %s", msg);
}

/* The plan's memory bound, as `dhelix plan` takes it: DHELIX_MAX_EXTRA_MEM when set (a
 * percentage is of the profiles' peak, read before trimming), else the planner's default;
 * the planner lowers it further to what the devices had free (planner.c). A value that
 * does not parse is the runtime's to report (memacct.c): the default here. */
static void dh__auto_bound(dh_plan_opts_t *o, double peak)
{
    dh_membound_t b;
    const char *v = dh_config()->max_extra_mem;
    if (v[0] && dh_mem_bound_parse(v, &b) == 0)
        o->max_extra_mem_bytes = dh_mem_bound_bytes(&b, peak);
}

/* The most stream-ordered memory p's program held at once (its ops' mem summed from its
 * first op): what a percentage bound is of. Read before trimming. */
static double dh__auto_peak(const dh_profile_t *p)
{
    double at = 0, peak = 0;
    for (size_t i = 0; i < p->nops; i++) {
        at += (double)p->ops[i].mem;
        peak = at > peak ? at : peak;
    }
    return peak;
}

/* Rank 0's answer (dh_agree_answer_fn): "P" + the plan's JSON, or "N" + why not. */
static int dh__answer(void *ctx, const char *const *in, const size_t *inlen, int n, char **out,
                      size_t *outlen)
{
    (void)ctx;
    char err[600] = "", msg[700];
    double t0 = dh__mono();
    dh_profile_t **prof = calloc((size_t)n, sizeof *prof);
    dh_plan_t *plan = NULL;
    dh_policy_t pol;
    int ok = prof != NULL;
    char names[8][32];
    const char *nm[8];
    double peak = 0;
    for (int r = 0; ok && r < n; r++) {
        char name[32], ignored[8];
        snprintf(name, sizeof name, "profile of rank %d", r);
        if (inlen[r] == 0) { /* that rank could not read its profile (dh__plan_main) */
            snprintf(err, sizeof err, "rank %d has no profile to give", r);
            ok = 0;
            break;
        }
        ok = dh_profile_parse(in[r], inlen[r], name, &prof[r], err, sizeof err) == DH_OK;
        if (ok) {
            double pk = dh__auto_peak(prof[r]);
            peak = pk > peak ? pk : peak;
            dh_profile_trim(prof[r], 2, name, ignored, sizeof ignored);
        }
    }
    for (int r = 0; r < 8; r++) {
        snprintf(names[r], sizeof names[r], "profile of rank %d", r);
        nm[r] = names[r];
    }
    if (ok)
        ok = dh_policy_parse(dh_config()->groups, &pol, err, sizeof err) == DH_OK;
    if (ok) {
        dh_plan_opts_t o;
        dh_plan_opts_init(&o);
        dh__auto_bound(&o, peak);
        o.names = n <= 8 ? nm : NULL;
        o.policy = dh_config()->groups;
        o.pinned = dh__on_pinned;
        o.warn = dh__on_warn;
        o.ctx = &pol;
        ok = dh_plan_build((const dh_profile_t *const *)prof, n, &o, &plan, err, sizeof err) ==
             DH_OK;
    }
    double ms = (dh__mono() - t0) * 1000.0;
    pthread_mutex_lock(&dh__a.lock);
    dh__a.st.planning_ms = ms;
    pthread_mutex_unlock(&dh__a.lock);
    double gain = 1.0 + dh_config()->auto_min_gain / 100.0, sp = ok ? dh__predicted(plan) : 0;
    char *json = NULL;
    size_t jlen = 0;
    /* "N<predicted speedup> <why>": no plan for anyone. */
    if (!ok)
        snprintf(msg, sizeof msg, "N0 the planner found no plan (%.500s)", err);
    else if (sp <= gain)
        snprintf(msg, sizeof msg, "N%.6f the plan predicts a speedup of %.3fx, not above %.3fx "
                 "(DHELIX_AUTO_MIN_GAIN=%lld%%)", sp, sp, gain,
                 (long long)dh_config()->auto_min_gain);
    else {
        plan->planning_s = ms / 1000.0;
        ok = dh_plan_render(plan, &json, &jlen) == DH_OK;
        if (!ok)
            snprintf(msg, sizeof msg, "N0 out of memory");
    }
    if (ok && json) {
        *out = malloc(jlen + 2);
        if (*out) {
            (*out)[0] = 'P';
            memcpy(*out + 1, json, jlen + 1);
            *outlen = jlen + 1;
        }
    } else {
        *outlen = strlen(msg);
        *out = strdup(msg);
    }
    free(json);
    dh_plan_free(plan);
    for (int r = 0; prof && r < n; r++)
        dh_profile_free(prof[r]);
    free(prof);
    return *out ? 0 : -1;
}

/* No plan will be used on this rank: the framework thread goes passthrough at its next
 * boundary (dh__give_up), and says why then. */
static void dh__no_plan(const char *what, const char *why)
{
    pthread_mutex_lock(&dh__a.lock);
    snprintf(dh__a.what, sizeof dh__a.what, "%s", what);
    snprintf(dh__a.why, sizeof dh__a.why, "%s", why);
    if (!atomic_load(&dh__a.done)) /* else this rank went passthrough already, and said why */
        snprintf(dh__a.st.status, sizeof dh__a.st.status, "%s: %.180s", what, why);
    atomic_store(&dh__a.no_plan, 1);
    pthread_cond_broadcast(&dh__a.cv);
    pthread_mutex_unlock(&dh__a.lock);
}

static void *dh__plan_main(void *arg)
{
    (void)arg;
    char err[400] = "", why[400] = "";
    char *buf = NULL, *reply = NULL;
    size_t len = 0, rlen = 0, nops = 0;
    double t0 = dh__mono();
    pthread_mutex_lock(&dh__a.dev_lock);
    int exiting = dh__a.exiting;
    int rc = exiting ? -1 : dh_prof_take(&buf, &len, &nops, err, sizeof err);
    pthread_mutex_unlock(&dh__a.dev_lock);
    pthread_mutex_lock(&dh__a.lock);
    dh__a.st.profile_ops = nops;
    pthread_mutex_unlock(&dh__a.lock);
    if (rc < 0) {
        snprintf(why, sizeof why, "the profile could not be read (%.300s)", err);
        free(buf);
        buf = NULL;
        len = 0;
    }
    /* Every rank takes part, with or without a profile: an empty one tells rank 0 to give
     * up at once rather than at the timeout. */
    char xwhy[400] = "";
    int x = exiting ? -1 : dh_agree_exchange(buf, len, dh__answer, NULL, &reply, &rlen, xwhy,
                                             sizeof xwhy);
    free(buf);
    if (x < 0) {
        if (rc == 0)
            snprintf(why, sizeof why, "%s", xwhy);
        dh__no_plan("no plan", why);
    } else if (rlen > 0 && reply[0] == 'N') {
        char *end = NULL;
        double sp = strtod(reply + 1, &end);
        pthread_mutex_lock(&dh__a.lock);
        dh__a.st.predicted = sp;
        pthread_mutex_unlock(&dh__a.lock);
        dh__no_plan(sp > 0 ? "not used" : "no plan", end && *end == ' ' ? end + 1 : reply + 1);
    } else {
        dh_plan_t *p = NULL;
        char name[64];
        snprintf(name, sizeof name, "the plan from rank 0");
        if (rlen == 0 || dh_plan_parse(reply + 1, rlen - 1, name, &p, err, sizeof err) != DH_OK) {
            dh__no_plan("no plan", rlen ? err : "an empty answer from rank 0");
        } else if (!dh__usable(p, err, sizeof err)) {
            dh__no_plan("no plan", err);
            dh_plan_free(p);
        } else {
            dh__cache_write(reply + 1, rlen - 1);
            pthread_mutex_lock(&dh__a.lock);
            dh__a.st.ready_ms = (dh__mono() - t0) * 1000.0;
            pthread_mutex_unlock(&dh__a.lock);
            dh__set_ready(p, name);
        }
    }
    free(reply);
    return NULL;
}

/* Starts the planning thread once recording stopped; every recorded op must have been
 * replayed (dh_prof_take): wait 1 waits for the queue to empty first, else the caller has
 * just drained. */
static void dh__start_planning(int wait)
{
    pthread_mutex_lock(&dh__s.lock);
    int go = !dh__a.started && !atomic_load(&dh__a.ready) && dh__s.mode == DH_MODE_PROFILE &&
             dh_prof_stopped();
    if (go)
        dh__a.started = 1;
    /* Profile mode lets every op out as it comes: the dispatcher only has to catch up. */
    while (go && wait && dh__s.started && dh__s.low_water < dh__s.next_seq) {
        pthread_cond_signal(&dh__s.work);
        pthread_cond_wait(&dh__s.done, &dh__s.lock);
    }
    pthread_mutex_unlock(&dh__s.lock);
    if (!go)
        return;
    dh__a.t_stop = dh__mono();
    dh__status("planning: recording stopped, no answer from rank 0 yet");
    pthread_t t;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &at, dh__plan_main, NULL) != 0)
        dh__no_plan("no plan", "the planning thread could not start");
    pthread_attr_destroy(&at);
}

void dh_auto_drained(void)
{
    if (!dh__a.on || atomic_load(&dh__a.switched))
        return;
    dh__start_planning(0);
}

/* ---- passthrough ---- */

static void dh__m_free(void);

/* Framework thread, lock not held: no plan will be used on this rank from boundary k on
 * (why: what every rank logs; mine, rank 0's own line where it differs). Drains, goes
 * passthrough and says so in one line. */
static void dh__passthrough(uint64_t k, const char *what, const char *why, const char *mine)
{
    if (atomic_exchange(&dh__a.done, 1))
        return;
    uint64_t deferred = dh__sched_passthrough();
    dh__m_free();
    char line[900];
    snprintf(line, sizeof line, "auto: %.700s: running passthrough from iteration %llu, "
             "nothing deferred from here on", mine && dh_agree_rank() == 0 ? mine : why,
             (unsigned long long)k);
    pthread_mutex_lock(&dh__a.lock);
    /* The op being submitted (dh_auto_submit's) was captured before: it goes through the
     * queue, at once, and is the last op counted as deferred. */
    dh__a.deferred_at = deferred + 1;
    dh__a.st.passthrough_iteration = (int64_t)k;
    snprintf(dh__a.st.status, sizeof dh__a.st.status, "%s: %.150s; passthrough from iteration "
             "%llu", what, why, (unsigned long long)k);
    dh_plan_free(dh__a.plan);
    dh__a.plan = NULL;
    pthread_mutex_unlock(&dh__a.lock);
    /* One line per rank, rank 0's whatever the level (as its switch line). */
    if (dh_agree_rank() == 0)
        dh_log_line(line);
    else
        DH_WARN(PLAN, "%s", line);
}

/* Before the switch, this rank holds no plan and never will: it votes "never" (nobody is
 * to wait for its votes) and goes passthrough. A rank told "never" by another does too. */
static void dh__give_up(uint64_t k, int mine)
{
    char what[16], why[400];
    pthread_mutex_lock(&dh__a.lock);
    snprintf(what, sizeof what, "%s", dh__a.what);
    snprintf(why, sizeof why, "%s", dh__a.why);
    pthread_mutex_unlock(&dh__a.lock);
    if (mine) {
        dh__passthrough(k, what, why, NULL);
        return;
    }
    dh_agree_stats_t a;
    dh_agree_stats(&a);
    dh__passthrough(k, "no plan", a.broken ? "the agreement between ranks broke before the "
                    "switch" : "another rank will hold no plan", NULL);
}

/* ---- measurement (rank 0, the voting thread) ---- */

static void dh__m_note(uint64_t i, double ms)
{
    if (!atomic_load(&dh__a.switched) || i < dh__a.sw) {
        dh__a.m.base[dh__a.m.nbase++ % DH__RING] = ms;
    } else if (i == dh__a.sw) {
        dh__a.m.probe = ms;
        dh__a.m.has_probe = 1;
    } else if (i < dh__a.back_at) {
        dh__a.m.si += ms;
        dh__a.m.nsi++;
    }
}

/* Boundary k: marks it on op's stream and notes the iteration that ended here. idle: the
 * queue is empty (every op before was replayed). */
static void dh__mark(const dh_op_t *op, uint64_t k, int idle)
{
    const dh_real_t *R = dh_real();
    int slot = (int)(k & 1), dev = -1;
    if (k == 0 || dh__a.m.failed)
        return; /* iteration 0 (the warm-up) is not timed */
    if (!idle || R->cudaGetDevice(&dev) != cudaSuccess || dev != op->device ||
        (dh__a.m.dev >= 0 && dev != dh__a.m.dev)) {
        dh__a.m.failed = 1; /* another thread's op queued, or another device: not timed */
        return;
    }
    dh__a.m.dev = dev;
    cudaEvent_t *e = &dh__a.m.ev[slot];
    if ((!*e && R->cudaEventCreateWithFlags(e, cudaEventDefault) != cudaSuccess) ||
        R->cudaEventRecord(*e, op->stream) != cudaSuccess ||
        R->cudaEventSynchronize(*e) != cudaSuccess) {
        dh__a.m.failed = 1;
        return;
    }
    float ms = 0;
    if (dh__a.m.ev_k[!slot] == (int64_t)k - 1 &&
        R->cudaEventElapsedTime(&ms, dh__a.m.ev[!slot], *e) == cudaSuccess) {
        DH_DEBUG(PLAN, "auto: iteration %llu took %.4f ms (device time between boundaries)",
                 (unsigned long long)k - 1, (double)ms);
        dh__m_note(k - 1, ms);
    }
    dh__a.m.ev_k[slot] = (int64_t)k;
}

/* The measurement is over (the voting thread). */
static void dh__m_free(void)
{
    for (int i = 0; i < 2; i++)
        if (dh__a.m.ev[i])
            dh_real()->cudaEventDestroy(dh__a.m.ev[i]);
    dh__a.m.ev[0] = dh__a.m.ev[1] = NULL;
    dh__a.measure = 0;
}

/* Rank 0 at the switch-back round: 1 when Strand Interleaving did not gain
 * DHELIX_AUTO_MIN_GAIN percent over program order (line: why, for the log). */
static int dh__verdict(char *line, size_t n)
{
    int want = (int)dh_config()->auto_measure_iters;
    uint64_t nb = dh__a.m.nbase < (uint64_t)want ? dh__a.m.nbase : (uint64_t)want;
    double base = 0, si = dh__a.m.nsi ? dh__a.m.si / dh__a.m.nsi : 0;
    for (uint64_t j = 0; j < nb; j++)
        base += dh__a.m.base[(dh__a.m.nbase - 1 - j) % DH__RING];
    base = nb ? base / (double)nb : dh__a.m.has_probe ? dh__a.m.probe : 0;
    double gain = 1.0 + (double)dh_config()->auto_min_gain / 100.0, sp = si > 0 ? base / si : 0;
    pthread_mutex_lock(&dh__a.lock);
    dh__a.st.measured_base_ms = base;
    dh__a.st.measured_si_ms = si;
    dh__a.st.measured = sp;
    pthread_mutex_unlock(&dh__a.lock);
    if (dh__a.m.failed || dh__a.m.nsi < want || base <= 0 || si <= 0) {
        snprintf(line, n, "Strand Interleaving kept, not measured (%s)",
                 dh__a.m.failed ? "the iterations could not be timed"
                                : "no program-order iteration to compare with");
        return 0;
    }
    snprintf(line, n, "Strand Interleaving measured a speedup of %.3fx over program order "
             "(iterations %llu-%llu: %.3f ms, program order %.3f ms per iteration), %s %.3fx "
             "(DHELIX_AUTO_MIN_GAIN=%lld%%)", sp, (unsigned long long)dh__a.sw + 1,
             (unsigned long long)dh__a.back_at - 1, si, base, sp > gain ? "above" : "not above",
             gain, (long long)dh_config()->auto_min_gain);
    return sp <= gain;
}

/* At the boundaries after the switch, until the switch-back round. */
static void dh__after_switch(uint64_t k)
{
    dh_agree_stats_t a;
    if (k < dh__a.back_at) {
        dh_agree_stats(&a);
        if (a.broken)
            dh__passthrough(k, "switched back", "the agreement between ranks broke: program "
                            "order", NULL);
        return;
    }
    char line[600] = "";
    int yes = dh__a.measure ? dh__verdict(line, sizeof line) : 1;
    if (dh_agree_switch_back(dh__a.back_at, yes)) {
        dh__passthrough(k, "switched back", "rank 0 measured no gain from Strand "
                        "Interleaving", line);
        return;
    }
    dh_agree_stats(&a);
    if (a.broken) {
        dh__passthrough(k, "switched back", "the agreement between ranks broke: program order",
                        NULL);
        return;
    }
    atomic_store(&dh__a.done, 1);
    pthread_mutex_lock(&dh__a.lock);
    size_t at = strlen(dh__a.st.status);
    if (!dh__a.measure)
        snprintf(dh__a.st.status + at, sizeof dh__a.st.status - at, "; kept on rank 0's "
                 "measurement");
    else if (dh__a.st.measured > 0)
        snprintf(dh__a.st.status + at, sizeof dh__a.st.status - at, "; kept: measured "
                 "speedup %.3fx", dh__a.st.measured);
    else
        snprintf(dh__a.st.status + at, sizeof dh__a.st.status - at, "; kept, not measured");
    pthread_mutex_unlock(&dh__a.lock);
    if (dh__a.measure)
        DH_INFO(PLAN, "auto: %s%s", line, strstr(line, "kept") ? "" : ": kept");
    dh__m_free();
}

/* ---- the switch ---- */

void dh_auto_synced(void) { dh__a.synced = 1; }

/* The switch boundary (the voting thread): a rank says "ready" only from the boundary after
 * the one where its recording stopped (dh__a.due) on, and there it first waits for the
 * planning thread's outcome (a plan, or none), once, bounded by DHELIX_AUTO_SWITCH_WAIT_MS.
 * Before, a rank was ready at the first boundary at which its plan happened to have
 * arrived, so the switch iteration depended on how fast the host planned against how fast
 * the program ran: on a loaded 2-core machine si.auto_pp_tp switched at iteration 6 of 8
 * instead of 5, too late for rank 0's measurement (issue 27). Now, when every rank's
 * recording stops at the same boundary s (the same program on every rank), every rank is
 * ready at s + 1 whatever the hosts' speed, and all switch there; ranks whose recordings
 * stop one boundary apart switch at the later one's s + 1.
 * Why the wait cannot hang: at s + 1 every rank whose recording stopped by then has sent
 * its profile without needing anything more from this rank (it stopped at a host
 * synchronisation before its boundary s + 1, and this rank has issued everything before
 * its own), so rank 0 plans and answers. A rank whose recording stops later (it diverged
 * while profiling: two repetitions of its iteration must follow the divergence) may need
 * this rank's next iteration to get there (auto_moe_ep_dyn, whose ranks' iterations differ
 * with their data: one rank's recording stopped two iterations after the other's); the
 * bound, shorter than the agreement's timeout since it stalls the job, ends that wait, and
 * this rank is then ready at the first boundary at which it holds the plan, as before (the
 * switch follows the plan's arrival there; every rank still switches at one boundary). */
static int dh__ready_at(uint64_t k, int ready)
{
    if (dh__a.st.cache_hit)
        return ready; /* ready from the program's first boundary on, on every rank */
    if (dh__a.due < 0 || k < (uint64_t)dh__a.due)
        return 0;
    if (ready || atomic_load(&dh__a.no_plan) || dh__a.waited ||
        dh_config()->auto_switch_wait_ms == 0)
        return ready;
    dh__a.waited = 1;
    /* Recording may have stopped at an op after a synchronisation with no drain since
     * (auto_moe_ep_dyn's rank 1): the planning thread starts at the next drain, which
     * this wait would keep from coming. */
    dh__start_planning(1);
    double t0 = dh__mono(), limit = (double)dh_config()->auto_switch_wait_ms / 1000.0;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)(limit);
    until.tv_nsec += (long)((limit - (double)(time_t)limit) * 1e9);
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    /* A rank that will hold no plan votes "never" without waiting for its planning
     * thread (auto_busy: rank 0 cannot listen, rank 1's exchange waits for a listener
     * that never answers): the wait also ends on that, looked for every DH__POLL_MS. */
    pthread_mutex_lock(&dh__a.lock);
    int rc = 0, never = 0;
    while (!atomic_load(&dh__a.ready) && !atomic_load(&dh__a.no_plan) && !never) {
        struct timespec step;
        clock_gettime(CLOCK_REALTIME, &step);
        step.tv_nsec += DH__POLL_MS * 1000000L;
        if (step.tv_nsec >= 1000000000L) {
            step.tv_sec++;
            step.tv_nsec -= 1000000000L;
        }
        int last = step.tv_sec > until.tv_sec ||
                   (step.tv_sec == until.tv_sec && step.tv_nsec >= until.tv_nsec);
        rc = pthread_cond_timedwait(&dh__a.cv, &dh__a.lock, last ? &until : &step);
        if (rc == ETIMEDOUT && last)
            break;
        if (rc == ETIMEDOUT) {
            pthread_mutex_unlock(&dh__a.lock);
            never = dh_agree_switch_never();
            pthread_mutex_lock(&dh__a.lock);
        }
    }
    ready = atomic_load(&dh__a.ready);
    int came = ready || never || atomic_load(&dh__a.no_plan);
    dh__a.st.switch_wait_ms = (dh__mono() - t0) * 1000.0;
    pthread_mutex_unlock(&dh__a.lock);
    if (!came)
        DH_INFO(PLAN, "auto: no plan within %lld ms at iteration %llu, the switch boundary (a "
                "rank whose recording stops later, one that diverged while profiling?): "
                "switching at the first boundary at which every rank holds it",
                (long long)dh_config()->auto_switch_wait_ms, (unsigned long long)k);
    return ready;
}

/* Boundary k before the switch: the switch round. */
static void dh__switch_round(uint64_t k)
{
    int no = atomic_load(&dh__a.no_plan);
    int ready = no ? 0 : dh__ready_at(k, atomic_load(&dh__a.ready));
    no = atomic_load(&dh__a.no_plan);
    int r = dh_agree_switch(k, no ? 2 : ready);
    DH_DEBUG(PLAN, "auto: switch round %llu: voted %d, decided %d", (unsigned long long)k,
             no ? 2 : ready, r);
    if (r < 0 || no) {
        dh__give_up(k, no);
        return;
    }
    if (r == 0)
        return;
    pthread_mutex_lock(&dh__s.lock);
    pthread_mutex_lock(&dh__a.lock);
    dh_plan_t *p = dh__a.plan;
    dh__a.plan = NULL;
    char name[600];
    snprintf(name, sizeof name, "%s", dh__a.plan_name);
    pthread_mutex_unlock(&dh__a.lock);
    int rc = dh_tracker_attach(p, name);
    if (rc == 0) {
        dh__s.mode = DH_MODE_PLAN;
        atomic_store(&dh__a.switched, 1);
    }
    pthread_mutex_unlock(&dh__s.lock);
    if (rc != 0) {
        /* The others attached it: they wait for this rank's votes in vain, once (bounded),
         * and run program order, as this rank does from here. */
        dh__passthrough(k, "no plan", "the plan could not be attached", NULL);
        return;
    }
    /* The measurement's round, at the same boundary on every rank; none after a switch at
     * the first boundary (a cached plan: no program-order iteration to compare with). */
    dh__a.sw = k;
    if (dh_config()->auto_measure_iters > 0 && k > 0) {
        dh__a.back_at = k + (uint64_t)dh_config()->auto_measure_iters + 1;
    } else {
        atomic_store(&dh__a.done, 1);
        dh__m_free();
    }
    pthread_mutex_lock(&dh__a.lock);
    dh__a.st.switched = 1;
    dh__a.st.switch_iteration = (int64_t)k;
    snprintf(dh__a.st.status, sizeof dh__a.st.status, "switched at iteration %llu%s",
             (unsigned long long)k, dh__a.st.cache_hit ? " (plan from the cache)" : "");
    dh_auto_stats_t st = dh__a.st;
    pthread_mutex_unlock(&dh__a.lock);
    if (dh_agree_rank() == 0) {
        char line[1024];
        if (st.cache_hit)
            snprintf(line, sizeof line, "auto: switched to Strand Interleaving at iteration "
                     "%llu with the cached plan %.600s (no profiling; predicted speedup %.3fx)",
                     (unsigned long long)k, name, st.predicted);
        else
            snprintf(line, sizeof line, "auto: switched to Strand Interleaving at iteration "
                     "%llu (profile of %llu ops; planning %.1f ms on rank 0, plan ready %.0f "
                     "ms after recording stopped; predicted speedup %.3fx)",
                     (unsigned long long)k, (unsigned long long)st.profile_ops, st.planning_ms,
                     st.ready_ms, st.predicted);
        dh_log_line(line);
    }
}

void dh_auto_submit(const dh_op_t *op, const dh_op_desc_t *d)
{
    if (!dh__a.on || atomic_load_explicit(&dh__a.done, memory_order_relaxed))
        return;
    pthread_mutex_lock(&dh__s.lock);
    int boundary = 0;
    uint64_t k = 0;
    /* Iteration 0 starts at the first op; the others, once recording stopped, where the
     * recorded iteration's first op comes among the first DH__START_SLACK ops after a
     * synchronisation that came right after its last op (tracker.c's rule for where an
     * iteration starts, and for the same reasons): the same iterations on every rank whose
     * program is the same, whatever a rank adds of its own (a logging rank's host
     * synchronisation inside an iteration, ops before the first). Counting segments
     * instead (iteration k at segment next + (k - it) p) put a rank that synchronised once
     * more a boundary ahead of its peers from then on: its switch-back round came an
     * iteration early and its peers' waited for it until the timeout. */
    uint64_t first_sig = 0, last_sig = 0;
    int edges = dh_prof_period_edges(&first_sig, &last_sig);
    if (dh__a.synced) {
        dh__a.since = 0;
        dh__a.before_sync = dh__a.prev_sig;
        dh__a.taken = 0;
    }
    if (dh_prof_stopped() && !dh__a.next_k) {
        /* Recording stopped at this window's synchronisation: iteration it starts here
         * (at this op when it is the window's first: boundary it, from which rank 0 times
         * the program-order iteration before the switch), and the next boundary is it + 1. */
        size_t p = 0, next = 0;
        uint64_t it = 0;
        dh_prof_period(&p, &next, &it);
        if (dh__a.since == 0 && !dh__a.first) {
            boundary = 1;
            k = it;
        }
        dh__a.next_k = it + 1;
        dh__a.taken = 1;
        dh__a.due = (int64_t)it + 1;
        pthread_mutex_lock(&dh__a.lock);
        dh__a.st.switch_due = dh__a.due;
        pthread_mutex_unlock(&dh__a.lock);
    }
    if (dh__a.first) {
        boundary = 1;
    } else if (edges && !dh__a.taken && dh__a.since < DH__START_SLACK &&
               dh__a.before_sync == last_sig && d->sig == first_sig) {
        boundary = 1;
        k = dh__a.next_k++;
        dh__a.taken = 1;
    }
    if (dh__a.since < DH__START_SLACK)
        dh__a.since++;
    dh__a.prev_sig = d->sig;
    dh__a.first = dh__a.synced = 0;
    int idle = dh__s.low_water >= dh__s.next_seq;
    pthread_mutex_unlock(&dh__s.lock);
    if (!boundary)
        return;
    DH_DEBUG(PLAN, "auto: boundary %llu at op sig %016llx (since sync %d, due %lld)",
             (unsigned long long)k, (unsigned long long)d->sig, dh__a.since,
             (long long)dh__a.due);
    if (dh__a.measure)
        dh__mark(op, k, idle);
    if (atomic_load(&dh__a.switched))
        dh__after_switch(k);
    else
        dh__switch_round(k);
}

void dh_auto_fini(void)
{
    if (!dh__a.on)
        return;
    pthread_mutex_lock(&dh__a.dev_lock);
    dh__a.exiting = 1;
    pthread_mutex_unlock(&dh__a.dev_lock);
    pthread_mutex_lock(&dh__a.lock);
    if (!dh__a.st.switched && !dh__a.st.plan_ready && !dh__a.started &&
        strcmp(dh__a.st.status, "profiling") == 0)
        snprintf(dh__a.st.status, sizeof dh__a.st.status,
                 "no plan: the job ended before an iteration repeated");
    /* No boundary came after the planning thread gave up: the line is said here. */
    int unsaid = atomic_load(&dh__a.no_plan) && !atomic_load(&dh__a.done);
    char why[400];
    snprintf(why, sizeof why, "%s", dh__a.why);
    pthread_mutex_unlock(&dh__a.lock);
    if (unsaid)
        DH_WARN(PLAN, "auto: %s; the job ended in program order before the next iteration",
                why);
}

void dh_auto_stats(dh_auto_stats_t *out)
{
    dh_sched_stats_t s;
    dh_sched_stats(&s);
    uint64_t n = 0;
    for (int k = 0; k < DH_OP_KIND_COUNT; k++)
        n += s.ops[k];
    pthread_mutex_lock(&dh__a.lock);
    *out = dh__a.st;
    out->deferred_after = out->passthrough_iteration >= 0 ? n - dh__a.deferred_at : 0;
    pthread_mutex_unlock(&dh__a.lock);
}
