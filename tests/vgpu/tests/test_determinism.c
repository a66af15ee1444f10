/*
 * vgpu.determinism: one multi-stream program run twice (as child processes) prints the
 * same virtual times and writes byte-identical Chrome traces (VGPU_TRACE). The trace has
 * one lane per stream and names ops by API and kernel.
 */
#include "rt_common.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N (1u << 16)

static void CUDART_CB bump(void *arg) { (*(int *)arg)++; }

static void print_elapsed(const char *what, cudaEvent_t a, cudaEvent_t b)
{
    float ms = -1;
    cudaError_t e = cudaEventElapsedTime(&ms, a, b);
    printf("%s=%a rc=%d\n", what, (double)ms, (int)e);
}

/* The program: a kernel alone, then three streams chained by events, with copies, a
 * memset, a stream-ordered allocation and a host function. Each stream runs one kind of
 * kernel so that the trace's lanes can be told apart. */
static int sc_program(void)
{
    vgt_register_kernels();
    if (cudaSetDevice(0) != cudaSuccess)
        return 3;
    const size_t bytes = N * sizeof(float);
    float *a, *b, *c, *d, *scratch, *h, *h2, *tmp;
    cudaMalloc((void **)&scratch, bytes);
    cudaMalloc((void **)&a, bytes);
    cudaMalloc((void **)&b, bytes);
    cudaMalloc((void **)&c, bytes);
    cudaMalloc((void **)&d, bytes);
    cudaMallocHost((void **)&h, bytes);
    cudaMallocHost((void **)&h2, bytes);
    for (size_t i = 0; i < N; i++)
        h[i] = (float)i;
    cudaStream_t s1, s2, s3;
    cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&s3, cudaStreamNonBlocking);
    cudaEvent_t t0, e1, e2, e3, t1, t2, t3;
    cudaEventCreate(&e3);
    cudaEventCreate(&t0);
    cudaEventCreate(&e1);
    cudaEventCreate(&e2);
    cudaEventCreate(&t1);
    cudaEventCreate(&t2);
    cudaEventCreate(&t3);

    vgt_spin(100000, 1.0, s1); /* alone on the device */
    cudaDeviceSynchronize();

    int calls = 0;
    cudaEventRecord(t0, s1);
    for (int it = 0; it < 3; it++) {
        cudaMemcpyAsync(a, h, bytes, cudaMemcpyHostToDevice, s1);
        vgt_fill(b, 1.0f + (float)it, N, 150000, s1);
        cudaLaunchHostFunc(s1, bump, &calls);
        cudaEventRecord(e1, s1);
        cudaStreamWaitEvent(s2, e1, 0);
        vgt_add(a, b, c, N, 220000, s2);
        cudaEventRecord(e2, s2);
        cudaStreamWaitEvent(s3, e2, 0);
        cudaMallocAsync((void **)&tmp, bytes, s3);
        vgt_copy(c, tmp, N, 90000, s3);
        vgt_copy(tmp, d, N, 90000, s3);
        cudaFreeAsync(tmp, s3);
        cudaMemsetAsync(c, 0, bytes, s3);
        cudaMemcpyAsync(h2, d, bytes, cudaMemcpyDeviceToHost, s3);
        cudaEventRecord(e3, s3);
        vgt_fill(scratch, 0.0f, N, 50000, s1); /* overlaps s2/s3 work of this iteration */
        cudaStreamWaitEvent(s1, e3, 0);        /* the next iteration reuses a, b, c */
    }
    cudaEventRecord(t1, s1);
    cudaEventRecord(t2, s2);
    cudaEventRecord(t3, s3);
    cudaDeviceSynchronize();
    print_elapsed("s1", t0, t1);
    print_elapsed("s2", t0, t2);
    print_elapsed("s3", t0, t3);
    print_elapsed("e1_e2", e1, e2);
    vgpu_counters_t cnt;
    vgpu_counters(&cnt);
    printf("host=%a\ndevice=%a\n", vgpu_host_time_ns(), vgpu_device_time_ns());
    printf("busy_compute=%a\nbusy_copy=%a\nops=%llu\nhazards=%llu\nbytes=%llu\n",
           cnt.busy_ns_compute, cnt.busy_ns_copy, (unsigned long long)cnt.ops_completed,
           (unsigned long long)cnt.hazards, (unsigned long long)cnt.bytes_copied);
    printf("h2[5]=%g calls=%d last=%d\n", (double)h2[5], calls, (int)cudaGetLastError());
    return 0;
}

static const vgt_scenario_t scenarios[] = {
    {"program", sc_program},
    {NULL, NULL},
};

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long l = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)(l > 0 ? l : 0) + 1);
    size_t got = buf ? fread(buf, 1, (size_t)(l > 0 ? l : 0), f) : 0;
    fclose(f);
    if (!buf)
        return NULL;
    buf[got] = '\0';
    *len = got;
    return buf;
}

static void trace_path(char *buf, size_t cap, int run)
{
    const char *dir = getenv("TMPDIR");
    snprintf(buf, cap, "%s/vgt-trace-%d-%d.json", dir && *dir ? dir : "/tmp", (int)getpid(),
             run);
}

static vgt_child_t run_program(const char *trace)
{
    char envv[4200];
    snprintf(envv, sizeof(envv), "VGPU_TRACE=%s", trace);
    const char *env[] = {envv, NULL};
    vgt_child_t c;
    unlink(trace);
    assert_int_equal(vgt_run_child("program", env, 90, &c), 0);
    if (!c.exited || c.code != 0) {
        VGT_CHILD_INFO(&c);
        fail_msg("the traced program failed");
    }
    return c;
}

static void test_same_times_and_traces(void **state)
{
    char p1[4096], p2[4096];
    trace_path(p1, sizeof(p1), 1);
    trace_path(p2, sizeof(p2), 2);
    vgt_child_t c1 = run_program(p1), c2 = run_program(p2);
    assert_non_null(c1.out);
    assert_non_null(c2.out);
    if (!strstr(c1.out, "hazards=0\n") || !strstr(c1.out, "calls=3 last=0")) {
        VGT_CHILD_INFO(&c1);
        fail_msg("the program should run without hazards or errors, its host function 3 times");
    }
    if (!strstr(c1.out, "h2[5]=8 ")) {
        VGT_CHILD_INFO(&c1);
        fail_msg("the program's result: expected h2[5]=8 (5 + 3 in the last iteration)");
    }
    if (strcmp(c1.out, c2.out) != 0) {
        print_message("--- run 1 ---\n%s--- run 2 ---\n%s", c1.out, c2.out);
        fail_msg("two runs of one program printed different virtual times");
    }
    size_t l1 = 0, l2 = 0;
    char *t1 = read_file(p1, &l1), *t2 = read_file(p2, &l2);
    if (!t1 || !t2 || l1 == 0)
        fail_msg("VGPU_TRACE did not produce the trace files %s (%p) and %s (%p)", p1,
                 (void *)t1, p2, (void *)t2);
    if (l1 != l2 || memcmp(t1, t2, l1) != 0) {
        size_t i = 0;
        while (i < l1 && i < l2 && t1[i] == t2[i])
            i++;
        fail_msg("traces differ (sizes %zu and %zu), first at byte %zu: \"%.60s\" vs \"%.60s\"",
                 l1, l2, i, t1 + (i > 20 ? i - 20 : 0), t2 + (i > 20 ? i - 20 : 0));
    }
    free(t1);
    free(t2);
    vgt_child_free(&c1);
    vgt_child_free(&c2);
    unlink(p2);
    /* p1 stays for the next test. */
}

/* "pid/tid" of a trace event: the lane it is drawn in. */
static void lane_of(json_t *ev, char *buf, size_t cap)
{
    char *pid = json_dumps(json_object_get(ev, "pid"), JSON_ENCODE_ANY);
    char *tid = json_dumps(json_object_get(ev, "tid"), JSON_ENCODE_ANY);
    snprintf(buf, cap, "%s/%s", pid ? pid : "-", tid ? tid : "-");
    free(pid);
    free(tid);
}

static void test_trace_content(void **state)
{
    char p1[4096];
    trace_path(p1, sizeof(p1), 3);
    vgt_child_t c = run_program(p1);
    vgt_child_free(&c);
    json_error_t err;
    json_t *root = json_load_file(p1, 0, &err);
    if (!root)
        fail_msg("trace %s is not JSON: %s at line %d", p1, err.text, err.line);
    json_t *events = json_is_array(root) ? root : json_object_get(root, "traceEvents");
    if (!json_is_array(events))
        fail_msg("trace %s has neither a top-level array nor traceEvents", p1);
    const char *kernels[] = {"vgt_spin", "vgt_fill", "vgt_add", "vgt_copy"};
    char lanes[4][128];
    int count[4] = {0, 0, 0, 0}, memcpy_events = 0, spin_ok = 0;
    double spin_dur = -1;
    size_t i;
    json_t *ev;
    json_array_foreach(events, i, ev)
    {
        const char *ph = json_string_value(json_object_get(ev, "ph"));
        const char *name = json_string_value(json_object_get(ev, "name"));
        if (!ph || strcmp(ph, "X") != 0 || !name)
            continue;
        /* A copy is named by its API, in the name or in args.api. */
        const char *api = json_string_value(json_object_get(json_object_get(ev, "args"), "api"));
        if (strstr(name, "cudaMemcpyAsync") || (api && strcmp(api, "cudaMemcpyAsync") == 0))
            memcpy_events++;
        for (int k = 0; k < 4; k++) {
            if (!strstr(name, kernels[k]))
                continue;
            char lane[128];
            lane_of(ev, lane, sizeof(lane));
            if (count[k]++ == 0)
                snprintf(lanes[k], sizeof(lanes[k]), "%s", lane);
            else if (strcmp(lanes[k], lane) != 0)
                fail_msg("%s ops (all on one stream) are drawn in two lanes: %s and %s",
                         kernels[k], lanes[k], lane);
            if (k == 0) {
                spin_dur = json_number_value(json_object_get(ev, "dur"));
                spin_ok = 1;
            }
        }
    }
    assert_int_equal(count[0], 1);
    assert_int_equal(count[1], 6);
    assert_int_equal(count[2], 3);
    assert_int_equal(count[3], 6);
    if (memcpy_events != 6)
        fail_msg("expected 6 complete events for cudaMemcpyAsync (by name or args.api), got %d",
                 memcpy_events);
    assert_true(spin_ok);
    VGT_NEAR("trace duration of the 100 us kernel that ran alone (us)", 100.0, spin_dur, 1e-3, 0);
    assert_string_equal(lanes[0], lanes[1]); /* spin and fill: stream s1 */
    if (!strcmp(lanes[1], lanes[2]) || !strcmp(lanes[1], lanes[3]) ||
        !strcmp(lanes[2], lanes[3]))
        fail_msg("three streams should have three lanes, got %s, %s, %s", lanes[1], lanes[2],
                 lanes[3]);
    json_decref(root);
    char p0[4096];
    trace_path(p0, sizeof(p0), 1);
    unlink(p0);
    unlink(p1);
}

int main(int argc, char **argv)
{
    int rc = vgt_scenario_dispatch(argc, argv, scenarios);
    if (rc >= 0)
        return rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_times_and_traces),
        cmocka_unit_test(test_trace_content),
    };
    return cmocka_run_group_tests_name("vgpu.determinism", tests, NULL, NULL);
}
