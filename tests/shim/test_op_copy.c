/*
 * shim.op_copy: copies, memsets, host functions, event records/waits and stream-ordered
 * frees captured into operation records (scheduler/ops/op_copy.c, op.c) and replayed on the
 * test's own stream.
 *
 * A host-to-device copy from pageable memory owns the source bytes: the framework
 * overwrites its buffer as soon as the call returns, and the replay must still deliver
 * the old bytes (and must not with the copy disabled). Copies that CUDA performs
 * synchronously (device to pageable host, host to host) are refused; cudaMemcpyDefault is
 * classified by the pointers; pinned memory and device memory are kept as pointers.
 * Event replays record both the shim's instance and the framework's event, and a replayed
 * wait orders a second stream after the first (checked by the data and by the vgpu's
 * hazard detector, VGPU_HAZARD=abort). No capture leaves an error in the thread's
 * last-error slot, and a pending one survives.
 */
#include "op_common.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define BYTES ((size_t)256 << 10)

static dh_replay_ctx_t ctx;
static cudaStream_t fw_stream;

static int setup(void **state)
{
    opt_ctx_init(&ctx, 0);
    OPT_OK(cudaStreamCreate(&fw_stream));
    return 0;
}

static int teardown(void **state)
{
    OPT_OK(cudaStreamDestroy(fw_stream));
    opt_ctx_fini(&ctx);
    return 0;
}

static void fill_pattern(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)((i * 131u + seed * 7u) >> 3);
}

/* Captures an H2D copy from a pageable buffer, overwrites the buffer, replays; 1 when
 * the device received the bytes the buffer had at the call. */
static int pageable_h2d_roundtrip(enum cudaMemcpyKind kind, size_t *payload)
{
    unsigned char *src = malloc(BYTES), *want = malloc(BYTES), *got = malloc(BYTES);
    fill_pattern(src, BYTES, 1);
    memcpy(want, src, BYTES);
    void *d = opt_dev_alloc(BYTES);
    OPT_OK(cudaMemset(d, 0, BYTES));
    dh_op_t *op = NULL;
    OPT_DH_OK(dh_op_capture_memcpy(&op, d, src, BYTES, kind, fw_stream));
    assert_int_equal(op->kind, DH_OP_MEMCPY);
    *payload = dh_op_bytes(op);
    memset(src, 0xcd, BYTES); /* the framework reuses its staging buffer */
    int rc = opt_replay_sync(op, &ctx);
    opt_download(got, d, BYTES);
    int same = rc == 0 && opt_same(got, want, BYTES, NULL);
    OPT_OK(cudaFree(d));
    free(src);
    free(want);
    free(got);
    return same;
}

static void test_pageable_h2d_source_owned(void **state)
{
    size_t payload = 0;
    assert_true(pageable_h2d_roundtrip(cudaMemcpyHostToDevice, &payload));
    assert_true(payload >= BYTES);
    assert_true(pageable_h2d_roundtrip(cudaMemcpyDefault, &payload));
    assert_true(payload >= BYTES);
}

static void test_break_h2d_source_is_detected(void **state)
{
    size_t payload = 0;
    dh_op_set_test_break(DH_OP_BREAK_H2D_SOURCE);
    int same = pageable_h2d_roundtrip(cudaMemcpyHostToDevice, &payload);
    dh_op_set_test_break(0);
    assert_false(same);
}

/* Synchronous in CUDA, so never deferred. */
static void test_synchronous_copies_refused(void **state)
{
    unsigned char *host = malloc(BYTES), *host2 = malloc(BYTES);
    void *d = opt_dev_alloc(BYTES), *pinned = NULL;
    OPT_OK(cudaMallocHost(&pinned, BYTES));
    dh_op_t *op = (dh_op_t *)&op;
    OPT_DH_IS(dh_op_capture_memcpy(&op, host, d, BYTES, cudaMemcpyDeviceToHost, fw_stream),
              DH_ERR_UNSUPPORTED);
    assert_null(op);
    OPT_DH_IS(dh_op_capture_memcpy(&op, host, d, BYTES, cudaMemcpyDefault, fw_stream),
              DH_ERR_UNSUPPORTED);
    OPT_DH_IS(dh_op_capture_memcpy(&op, host, host2, BYTES, cudaMemcpyHostToHost, fw_stream),
              DH_ERR_UNSUPPORTED);
    OPT_DH_IS(dh_op_capture_memcpy(&op, pinned, host2, BYTES, cudaMemcpyDefault, fw_stream),
              DH_ERR_UNSUPPORTED);
    /* A kind that contradicts the pointers: the real call decides, at once. */
    OPT_DH_IS(dh_op_capture_memcpy(&op, d, host, BYTES, cudaMemcpyDeviceToDevice, fw_stream),
              DH_ERR_UNSUPPORTED);
    assert_null(op);
    assert_int_equal(cudaGetLastError(), cudaSuccess);
    OPT_OK(cudaFreeHost(pinned));
    OPT_OK(cudaFree(d));
    free(host);
    free(host2);
}

/* Pinned memory and device memory are ordered by streams: pointers, not bytes. */
static void test_pinned_and_device_copies_keep_pointers(void **state)
{
    unsigned char *pin_src = NULL, *pin_dst = NULL;
    OPT_OK(cudaMallocHost((void **)&pin_src, BYTES));
    OPT_OK(cudaMallocHost((void **)&pin_dst, BYTES));
    fill_pattern(pin_src, BYTES, 3);
    void *d1 = opt_dev_alloc(BYTES), *d2 = opt_dev_alloc(BYTES);
    dh_op_t *ops[3] = {NULL, NULL, NULL};
    OPT_DH_OK(dh_op_capture_memcpy(&ops[0], d1, pin_src, BYTES, cudaMemcpyHostToDevice,
                                   fw_stream));
    OPT_DH_OK(dh_op_capture_memcpy(&ops[1], d2, d1, BYTES, cudaMemcpyDefault, fw_stream));
    OPT_DH_OK(dh_op_capture_memcpy(&ops[2], pin_dst, d2, BYTES, cudaMemcpyDeviceToHost,
                                   fw_stream));
    for (int i = 0; i < 3; i++) {
        assert_true(dh_op_bytes(ops[i]) < 256);
        assert_int_equal(dh_op_replay(ops[i], &ctx), cudaSuccess);
        dh_op_free(ops[i]);
    }
    OPT_OK(cudaStreamSynchronize(ctx.stream));
    assert_true(opt_same(pin_dst, pin_src, BYTES, NULL));
    OPT_OK(cudaFree(d1));
    OPT_OK(cudaFree(d2));
    OPT_OK(cudaFreeHost(pin_src));
    OPT_OK(cudaFreeHost(pin_dst));
}

static void test_memset(void **state)
{
    unsigned char *got = malloc(BYTES), want[BYTES / 64];
    void *d = opt_dev_alloc(BYTES);
    OPT_OK(cudaMemset(d, 0, BYTES));
    dh_op_t *op = NULL;
    OPT_DH_OK(dh_op_capture_memset(&op, (char *)d + 64, 0xab, BYTES / 64, fw_stream));
    assert_int_equal(op->kind, DH_OP_MEMSET);
    assert_int_equal(opt_replay_sync(op, &ctx), cudaSuccess);
    opt_download(got, d, BYTES);
    memset(want, 0xab, sizeof want);
    assert_true(opt_same(got + 64, want, sizeof want, NULL));
    assert_int_equal(got[63], 0);
    assert_int_equal(got[64 + sizeof want], 0);
    OPT_OK(cudaFree(d));
    free(got);
}

static _Atomic int host_calls;

static void host_fn(void *data)
{
    if (data == &host_calls)
        atomic_fetch_add(&host_calls, 1);
}

static void test_host_func(void **state)
{
    dh_op_t *op = NULL;
    OPT_DH_OK(dh_op_capture_host_func(&op, fw_stream, host_fn, &host_calls));
    assert_int_equal(op->kind, DH_OP_HOST_FUNC);
    assert_int_equal(atomic_load(&host_calls), 0);
    assert_int_equal(opt_replay_sync(op, &ctx), cudaSuccess);
    assert_int_equal(atomic_load(&host_calls), 1);
}

/* Stream 1 fills a buffer and records; stream 2 waits on the record and copies the
 * buffer: the data is right only if the wait orders the copy after the fill (the vgpu
 * also reports a hazard otherwise). The framework's events see their records too. */
static void test_event_record_and_wait(void **state)
{
    /* Large enough that the fill is still running, in virtual time, when stream 2 is
     * given its copy a few calls later. */
    const size_t big = (size_t)32 << 20;
    unsigned char *src = malloc(big), *got = malloc(big);
    fill_pattern(src, big, 9);
    void *pin = NULL;
    OPT_OK(cudaMallocHost(&pin, big));
    memcpy(pin, src, big);
    void *d1 = opt_dev_alloc(big), *d2 = opt_dev_alloc(big);
    cudaEvent_t e0, e1;
    OPT_OK(cudaEventCreate(&e0));
    OPT_OK(cudaEventCreate(&e1));
    dh_replay_ctx_t other;
    opt_ctx_init(&other, 0);

    dh_op_t *op = NULL;
    OPT_DH_OK(dh_op_capture_event_record(&op, e0, fw_stream, 0));
    assert_int_equal(op->kind, DH_OP_EVENT_RECORD);
    assert_ptr_equal(op->event, e0);
    assert_int_equal(dh_op_replay(op, &ctx), cudaSuccess);
    dh_op_free(op);
    OPT_DH_OK(dh_op_capture_memcpy(&op, d1, pin, big, cudaMemcpyHostToDevice, fw_stream));
    assert_int_equal(dh_op_replay(op, &ctx), cudaSuccess);
    dh_op_free(op);
    OPT_DH_OK(dh_op_capture_event_record(&op, e1, fw_stream, 0));
    assert_int_equal(dh_op_replay(op, &ctx), cudaSuccess);
    dh_op_free(op);

    OPT_DH_OK(dh_op_capture_event_wait(&op, NULL, e1, 0));
    assert_int_equal(op->kind, DH_OP_EVENT_WAIT);
    dh_replay_ctx_t wait_ctx = other;
    wait_ctx.wait_event = ctx.record_event; /* the shim's instance recorded above */
    assert_int_equal(dh_op_replay(op, &wait_ctx), cudaSuccess);
    dh_op_free(op);
    OPT_DH_OK(dh_op_capture_memcpy(&op, d2, d1, big, cudaMemcpyDeviceToDevice, NULL));
    assert_int_equal(dh_op_replay(op, &other), cudaSuccess);
    dh_op_free(op);

    OPT_OK(cudaStreamSynchronize(other.stream));
    opt_download(got, d2, big);
    assert_true(opt_same(got, src, big, NULL));
    /* The framework's own events were recorded: queries, elapsed time work. */
    OPT_OK(cudaEventSynchronize(e1));
    assert_int_equal(cudaEventQuery(e0), cudaSuccess);
    float ms = -1.0f;
    OPT_OK(cudaEventElapsedTime(&ms, e0, e1));
    assert_true(ms > 0.0f);

    opt_ctx_fini(&other);
    OPT_OK(cudaEventDestroy(e0));
    OPT_OK(cudaEventDestroy(e1));
    OPT_OK(cudaFree(d1));
    OPT_OK(cudaFree(d2));
    OPT_OK(cudaFreeHost(pin));
    free(src);
    free(got);
}

static void test_free_async(void **state)
{
    void *p = NULL;
    OPT_OK(cudaMallocAsync(&p, BYTES, fw_stream));
    OPT_OK(cudaStreamSynchronize(fw_stream));
    dh_op_t *op = NULL;
    OPT_DH_OK(dh_op_capture_free_async(&op, p, fw_stream));
    assert_int_equal(op->kind, DH_OP_FREE_ASYNC);
    assert_int_equal(opt_replay_sync(op, &ctx), cudaSuccess);
    struct cudaPointerAttributes a;
    OPT_OK(cudaPointerGetAttributes(&a, p));
    assert_int_not_equal(a.type, cudaMemoryTypeDevice);
}

/* Pointer classification queries the runtime; with an error pending the capture steps
 * aside (the wrapper forwards) and the error is still there for the framework. */
static void test_pending_error_preserved(void **state)
{
    void *d = opt_dev_alloc(64);
    char host[64] = {0};
    assert_int_not_equal(cudaSetDevice(1 << 20), cudaSuccess);
    cudaError_t pending = cudaPeekAtLastError();
    dh_op_t *op = NULL;
    OPT_DH_IS(dh_op_capture_memcpy(&op, d, host, sizeof host, cudaMemcpyHostToDevice,
                                   fw_stream),
              DH_ERR_STATE);
    assert_null(op);
    assert_int_equal(cudaGetLastError(), pending);
    OPT_OK(cudaFree(d));
}

static void test_kind_names(void **state)
{
    assert_string_equal(dh_op_kind_name(DH_OP_KERNEL), "KERNEL");
    assert_string_equal(dh_op_kind_name(DH_OP_LT_MATMUL), "LT_MATMUL");
    assert_string_equal(dh_op_kind_name(DH_OP_FREE_ASYNC), "FREE_ASYNC");
    assert_string_equal(dh_op_kind_name(DH_OP_KIND_COUNT), "?");
    assert_int_equal(dh_op_bytes(NULL), 0);
    dh_op_free(NULL);
}

static int fake_replay(dh_op_t *op, const dh_replay_ctx_t *rc)
{
    (void)op;
    (void)rc;
    return 42;
}

/* Every kind defined in scheduler/ has a whole table named as the kind; the NCCL kinds get
 * theirs by registration, which takes one table per kind and refuses a second. */
static void test_kind_tables(void **state)
{
    (void)state;
    for (int k = 0; k < DH_OP_KIND_COUNT; k++) {
        const dh_op_kind_ops_t *t = dh_op_kind_ops((dh_op_kind_t)k);
        if (k == DH_OP_NCCL || k == DH_OP_NCCL_GROUP) {
            assert_null(t); /* no NCCL op was made in this process */
            continue;
        }
        assert_non_null(t);
        assert_string_equal(t->name, dh_op_kind_name((dh_op_kind_t)k));
        assert_non_null(t->replay);
        assert_non_null(t->describe);
    }
    assert_null(dh_op_kind_ops(DH_OP_KIND_COUNT));

    static const dh_op_kind_ops_t fake = {.name = "NCCL", .replay = fake_replay};
    static const dh_op_kind_ops_t other = {.name = "NCCL", .replay = fake_replay};
    OPT_DH_IS(dh_op_kind_register(DH_OP_KIND_COUNT, &fake), DH_ERR_INVALID);
    OPT_DH_IS(dh_op_kind_register(DH_OP_NCCL, NULL), DH_ERR_INVALID);
    OPT_DH_IS(dh_op_kind_register(DH_OP_KERNEL, &fake), DH_ERR_INVALID);
    OPT_DH_IS(dh_op_kind_register(DH_OP_NCCL, &fake), DH_OK);
    OPT_DH_IS(dh_op_kind_register(DH_OP_NCCL, &fake), DH_OK);
    OPT_DH_IS(dh_op_kind_register(DH_OP_NCCL, &other), DH_ERR_INVALID);
    assert_ptr_equal(dh_op_kind_ops(DH_OP_NCCL), &fake);

    /* An op of a registered kind goes through its table; one of a kind without a table is
     * described by its name, may touch anything and is not replayed. */
    dh_replay_ctx_t rctx = {0};
    dh_op_t *op = dh_op_alloc(DH_OP_NCCL, fw_stream, 0, 0);
    assert_non_null(op);
    assert_int_equal(dh_op_replay(op, &rctx), 42);
    dh_op_free(op);
    op = dh_op_alloc(DH_OP_NCCL_GROUP, fw_stream, 0, 0);
    assert_non_null(op);
    dh_op_desc_t d;
    dh_op_describe(op, &d);
    assert_string_equal(d.name, "NCCL_GROUP");
    dh_op_access_t acc[4];
    assert_int_equal(dh_op_footprint(op, acc, 4), -1);
    assert_int_equal(dh_op_replay(op, &rctx), cudaErrorInvalidValue);
    assert_int_equal(dh_op_validate(op), 0);
    dh_op_free(op);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pageable_h2d_source_owned),
        cmocka_unit_test(test_break_h2d_source_is_detected),
        cmocka_unit_test(test_synchronous_copies_refused),
        cmocka_unit_test(test_pinned_and_device_copies_keep_pointers),
        cmocka_unit_test(test_memset),
        cmocka_unit_test(test_host_func),
        cmocka_unit_test(test_event_record_and_wait),
        cmocka_unit_test(test_free_async),
        cmocka_unit_test(test_pending_error_preserved),
        cmocka_unit_test(test_kind_names),
        cmocka_unit_test(test_kind_tables),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
