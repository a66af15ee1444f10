/*
 * plan.timesim: the planner's replay of ops on the device model (timesim.h), on runs whose
 * time is worked out by hand in each test's comment: a stream's order, two streams of one
 * strand co-running with interference in both directions, one hardware queue whose head
 * holds the rest (against one queue per stream), an event wait that holds its stream until
 * the record it waits for, events that stay inside their strand, and a paired group in its
 * order letters.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "timesim.h"

#define EPS 1e-6

#define C DH_CLS_COMPUTE
#define M DH_CLS_COMM
#define E DH_CLS_EVENT

static dh_tsim_t model(const dh_tsim_op_t *ops, size_t n, int one_queue)
{
    return (dh_tsim_t){.ops = ops, .nops = n, .one_queue = one_queue, .slow_compute = 0.1,
                       .slow_comm = 0.1};
}

static double serial(const dh_tsim_op_t *ops, size_t n, int one_queue)
{
    dh_tsim_t ts = model(ops, n, one_queue);
    double t = dh_tsim_serial(&ts, 0, n);
    dh_tsim_free(&ts);
    return t;
}

static void near(double got, double want)
{
    if (!(got > want - EPS && got < want + EPS))
        fail_msg("replayed %.6f us, expected %.6f us", got, want);
}

/* One stream runs its ops one after the other: 100 + 50. */
static void test_stream_order(void **state)
{
    (void)state;
    dh_tsim_op_t ops[] = {{100, C, 0, 0}, {50, C, 0, 0}};
    near(serial(ops, 2, 1), 150);
}

/* A GEMM on stream 0 and a collective on stream 1 run together, each at 0.9 of its rate:
 * both end at 100 / 0.9. */
static void test_interference(void **state)
{
    (void)state;
    dh_tsim_op_t ops[] = {{100, C, 0, 0}, {100, M, 0, 1}};
    near(serial(ops, 2, 1), 100 / 0.9);
}

/* Two GEMMs on stream 0, then a 150 us collective on stream 1. One queue: the second GEMM
 * waits at the head for the first, and holds the collective behind it; both start at 100,
 * run at 0.9 until the GEMM ends at 100 + 100 / 0.9 (the collective has done 100), then the
 * collective's last 50 alone: 100 + 111.11 + 50 = 261.11. One queue per stream: the
 * collective starts at 0 beside the first GEMM; at 111.11 that ends (the collective has
 * done 100), the second runs beside the collective's last 50 (55.56 at 0.9, the GEMM does
 * 50), then its last 50 alone: 111.11 + 55.56 + 50 = 216.67. */
static void test_one_queue_head(void **state)
{
    (void)state;
    dh_tsim_op_t ops[] = {{100, C, 0, 0}, {100, C, 0, 0}, {150, M, 0, 1}};
    near(serial(ops, 3, 1), 100 + 100 / 0.9 + 50);
    near(serial(ops, 3, 0), 100 / 0.9 + 50 / 0.9 + 50);
}

/* ProcessGroupNCCL's pattern: a GEMM on the current stream, an event recorded after it, the
 * collective's stream waits for it, then the collective: 100 + 50, nothing co-runs. The
 * record, which cannot complete while the GEMM runs, does not hold the queue; the wait does. */
static void test_event_wait(void **state)
{
    (void)state;
    dh_tsim_op_t ops[] = {{100, C, 0, 0}, {-1, E, DH_TSIM_RECORD, 0}, {-1, E, DH_TSIM_WAIT, 1},
                          {50, M, 0, 1}};
    near(serial(ops, 4, 1), 150);
}

/* A wait waits only for a record of its own strand: strand b's wait finds none and its
 * collective runs beside strand a's GEMM (55.56 at 0.9; the GEMM has done 50, its last 50
 * alone): 105.56. As one strand the same ops replay as in test_event_wait. */
static void test_events_per_strand(void **state)
{
    (void)state;
    dh_tsim_op_t ops[] = {{100, C, 0, 0}, {-1, E, DH_TSIM_RECORD, 0}, {-1, E, DH_TSIM_WAIT, 1},
                          {50, M, 0, 1}};
    dh_tsim_t ts = model(ops, 4, 1);
    size_t idx[] = {0, 1, 2, 3};
    uint8_t strand[] = {0, 0, 1, 1};
    near(dh_tsim_run(&ts, idx, strand, 4), 50 / 0.9 + 50);
    near(dh_tsim_run(&ts, idx, NULL, 4), 150);
    dh_tsim_free(&ts);
}

/* A paired group: strand a's collective and strand b's GEMM (both framework stream 0, two
 * physical streams) in the order "ab" co-run: 100 / 0.9. Issued as one strand they would
 * share a stream: 200. */
static void test_group(void **state)
{
    (void)state;
    dh_tsim_op_t ops[] = {{100, M, 0, 0}, {100, C, 0, 0}};
    dh_tsim_t ts = model(ops, 2, 1);
    char order[] = "ab";
    dh_plan_group_t g = {.a_first = 0, .a_n = 1, .b_first = 1, .b_n = 1, .order = order};
    near(dh_tsim_group(&ts, &g), 100 / 0.9);
    near(dh_tsim_serial(&ts, 0, 2), 200);
    dh_tsim_free(&ts);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stream_order),
        cmocka_unit_test(test_interference),
        cmocka_unit_test(test_one_queue_head),
        cmocka_unit_test(test_event_wait),
        cmocka_unit_test(test_events_per_strand),
        cmocka_unit_test(test_group),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
