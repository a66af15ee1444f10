/* timesim.c: the replay of ops on the device model (timesim.h). */
#include "timesim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define DH__TS_LANES 64
#define DH__TS_QUEUED 0
#define DH__TS_RUNNING 1
#define DH__TS_DONE 2
#define DH__TS_ASIDE 3      /* a record waiting for its stream's running op */

typedef struct dh__ts_item {
    double rem;             /* time left at rate 1 */
    long dep;               /* the record a wait waits for, -1 none */
    long next;              /* next item of its lane in issue order (per-stream queues) */
    int lane;
    uint8_t cls, event, state;
} dh__ts_item_t;

typedef struct dh__ts_lane {
    uint32_t key;           /* stream * 2 + strand */
    long busy;              /* its running item, -1 none */
    long head, tail;        /* per-stream queues: its queued items */
    long last_record;       /* the last record issued on it, -1 none */
    long aside;             /* its records set aside */
} dh__ts_lane_t;

typedef struct dh__ts_work {
    dh__ts_item_t *items;
    long *running;
} dh__ts_work_t;

static int dh__ts_grow(dh_tsim_t *ts, size_t n)
{
    if (ts->work != NULL && ts->cap >= n)
        return 0;
    dh__ts_work_t *w = ts->work;
    if (w == NULL && (w = ts->work = calloc(1, sizeof(*w))) == NULL)
        return -1;
    size_t cap = ts->cap ? ts->cap : 256;
    while (cap < n)
        cap *= 2;
    dh__ts_item_t *items = realloc(w->items, cap * sizeof(*items));
    if (items == NULL)
        return -1;
    w->items = items;
    long *running = realloc(w->running, cap * sizeof(*running));
    if (running == NULL)
        return -1;
    w->running = running;
    ts->cap = cap;
    return 0;
}

static int dh__ts_lane(dh__ts_lane_t *lanes, int *nlanes, uint32_t key)
{
    for (int l = 0; l < *nlanes; l++)
        if (lanes[l].key == key)
            return l;
    if (*nlanes == DH__TS_LANES)
        return DH__TS_LANES - 1;    /* more streams than any framework uses: share the last */
    lanes[*nlanes] = (dh__ts_lane_t){key, -1, -1, -1, -1, 0};
    return (*nlanes)++;
}

/* The record a wait on lane `lane` of strand `strand` waits for: the last one its strand
 * issued on another stream. */
static long dh__ts_dep(const dh__ts_lane_t *lanes, int nlanes, int lane, unsigned strand)
{
    long best = -1;
    for (int l = 0; l < nlanes; l++)
        if (l != lane && (lanes[l].key & 1u) == strand && lanes[l].last_record > best)
            best = lanes[l].last_record;
    return best;
}

typedef struct dh__ts_state {
    dh__ts_item_t *it;
    dh__ts_lane_t *lanes;
    long *running;
    long nrun, ndone;
} dh__ts_state_t;

/* Completes the records set aside on lane l (its running op has just ended). */
static void dh__ts_lane_free(dh__ts_state_t *s, int l, long n)
{
    s->lanes[l].busy = -1;
    for (long k = 0; k < n && s->lanes[l].aside > 0; k++)
        if (s->it[k].state == DH__TS_ASIDE && s->it[k].lane == l) {
            s->it[k].state = DH__TS_DONE;
            s->ndone++;
            s->lanes[l].aside--;
        }
}

/* 1 when item k could start now. */
static int dh__ts_ready(const dh__ts_state_t *s, long k)
{
    const dh__ts_item_t *x = &s->it[k];
    return s->lanes[x->lane].busy < 0 && (x->dep < 0 || s->it[x->dep].state == DH__TS_DONE);
}

static void dh__ts_start(dh__ts_state_t *s, long k)
{
    dh__ts_item_t *x = &s->it[k];
    if (x->rem <= 0) {
        x->state = DH__TS_DONE;
        s->ndone++;
        return;
    }
    x->state = DH__TS_RUNNING;
    s->lanes[x->lane].busy = k;
    s->running[s->nrun++] = k;
}

/* Takes what may start off the head of one queue; returns 1 when something moved. A record
 * that must wait for its stream is set aside instead of holding the queue (as the vgpu
 * does: tests/vgpu/src/core/sim.c, dispatch). */
static int dh__ts_drain(dh__ts_state_t *s, long *head, long n, int per_lane)
{
    int moved = 0;
    while (*head >= 0 && *head < n) {
        long k = *head;
        dh__ts_item_t *x = &s->it[k];
        if (dh__ts_ready(s, k))
            dh__ts_start(s, k);
        else if (x->event == DH_TSIM_RECORD && s->lanes[x->lane].busy >= 0) {
            x->state = DH__TS_ASIDE;
            s->lanes[x->lane].aside++;
        }
        else
            break;
        *head = per_lane ? x->next : k + 1;
        moved = 1;
    }
    return moved;
}

/* Advances to the next completion; returns the time it took (INFINITY: nothing runs). */
static double dh__ts_advance(dh__ts_state_t *s, const dh_tsim_t *ts, long n)
{
    if (s->nrun == 0)
        return INFINITY;
    int ncomp = 0, ncomm = 0, ncopy = 0;
    for (long r = 0; r < s->nrun; r++) {
        uint8_t c = s->it[s->running[r]].cls;
        ncomp += c == DH_CLS_COMPUTE;
        ncomm += c == DH_CLS_COMM;
        ncopy += c == DH_CLS_COPY;
    }
    double rate[3] = {ncomp ? (1.0 / ncomp) * (ncomm ? 1 - ts->slow_compute : 1) : 1,
                      ncomm ? (1.0 / ncomm) * (ncomp ? 1 - ts->slow_comm : 1) : 1,
                      ncopy ? 1.0 / ncopy : 1};
    double dt = INFINITY;
    for (long r = 0; r < s->nrun; r++) {
        const dh__ts_item_t *x = &s->it[s->running[r]];
        double v = x->cls < 3 ? rate[x->cls] : 1;
        if (x->rem / v < dt)
            dt = x->rem / v;
    }
    long keep = 0;
    for (long r = 0; r < s->nrun; r++) {
        long k = s->running[r];
        dh__ts_item_t *x = &s->it[k];
        x->rem -= (x->cls < 3 ? rate[x->cls] : 1) * dt;
        if (x->rem <= 1e-9 * (1 + dt)) {
            x->state = DH__TS_DONE;
            s->ndone++;
            dh__ts_lane_free(s, x->lane, n);
        } else {
            s->running[keep++] = k;
        }
    }
    s->nrun = keep;
    return dt;
}

double dh_tsim_run(dh_tsim_t *ts, const size_t *idx, const uint8_t *strand, size_t n)
{
    if (n == 0)
        return 0;
    if (dh__ts_grow(ts, n) != 0)
        return -1;
    dh__ts_work_t *w = ts->work;
    dh__ts_lane_t lanes[DH__TS_LANES];
    int nlanes = 0;
    dh__ts_state_t s = {w->items, lanes, w->running, 0, 0};
    for (size_t k = 0; k < n; k++) {
        const dh_tsim_op_t *op = &ts->ops[idx[k]];
        unsigned st = strand != NULL ? strand[k] & 1u : 0;
        int l = dh__ts_lane(lanes, &nlanes, op->stream * 2u + st);
        dh__ts_item_t *x = &s.it[k];
        int timed = op->cls == DH_CLS_COMPUTE || op->cls == DH_CLS_COMM ||
                    op->cls == DH_CLS_COPY || op->cls == DH_CLS_HOST;
        *x = (dh__ts_item_t){timed && op->us > 0 ? op->us : 0, -1, -1, l, (uint8_t)op->cls,
                             op->event, DH__TS_QUEUED};
        if (op->event == DH_TSIM_WAIT)
            x->dep = dh__ts_dep(lanes, nlanes, l, st);
        if (op->event == DH_TSIM_RECORD)
            lanes[l].last_record = (long)k;
        if (lanes[l].tail >= 0)
            s.it[lanes[l].tail].next = (long)k;
        else
            lanes[l].head = (long)k;
        lanes[l].tail = (long)k;
    }
    double now = 0;
    long qhead = 0;
    while (s.ndone < (long)n) {
        int moved;
        do {
            moved = 0;
            if (ts->one_queue)
                moved = dh__ts_drain(&s, &qhead, (long)n, 0);
            else
                for (int l = 0; l < nlanes; l++)
                    moved |= dh__ts_drain(&s, &lanes[l].head, (long)n, 1);
        } while (moved);
        if (s.ndone >= (long)n)
            break;
        double dt = dh__ts_advance(&s, ts, (long)n);
        if (isinf(dt))
            break;  /* a wait whose record never comes: what ran is the time */
        now += dt;
    }
    return now;
}

double dh_tsim_group(dh_tsim_t *ts, const dh_plan_group_t *g)
{
    size_t n = g->a_n + g->b_n;
    size_t *idx = malloc((n ? n : 1) * sizeof(*idx));
    uint8_t *st = malloc(n ? n : 1);
    if (idx == NULL || st == NULL) {
        free(idx);
        free(st);
        return -1;
    }
    size_t pa = g->a_first, pb = g->b_first;
    for (size_t k = 0; k < n; k++) {
        int b = g->order[k] == 'b';
        idx[k] = b ? pb++ : pa++;
        st[k] = (uint8_t)b;
    }
    double t = dh_tsim_run(ts, idx, st, n);
    free(idx);
    free(st);
    return t;
}

double dh_tsim_serial(dh_tsim_t *ts, size_t first, size_t n)
{
    size_t *idx = malloc((n ? n : 1) * sizeof(*idx));
    if (idx == NULL)
        return -1;
    for (size_t k = 0; k < n; k++)
        idx[k] = first + k;
    double t = dh_tsim_run(ts, idx, NULL, n);
    free(idx);
    return t;
}

void dh_tsim_free(dh_tsim_t *ts)
{
    dh__ts_work_t *w = ts->work;
    if (w != NULL) {
        free(w->items);
        free(w->running);
        free(w);
    }
    ts->work = NULL;
    ts->cap = 0;
}
