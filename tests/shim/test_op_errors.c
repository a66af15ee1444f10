/*
 * test_op_errors.c: how a replay failure is typed for the program (scheduler/ops/op.h
 * dh_op_status_to_cuda, dh_cuda_to_cu) and that a pending error is kept until taken.
 * Runs on the vgpu (the cuBLAS case reads the CUDA error the library left).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "op.h"
#include "scheduler.h"

static dh_op_t *op_of(dh_op_kind_t k)
{
    dh_op_t *op = dh_op_alloc(k, NULL, 0, 0);
    assert_non_null(op);
    return op;
}

/* Runtime statuses stay; driver ones become the runtime error of the same meaning or
 * cudaErrorUnknown; a cuBLAS failure is the CUDA error the library left, else Unknown. */
static void test_status_to_cuda(void **state)
{
    (void)state;
    dh_op_t *k = op_of(DH_OP_KERNEL), *ck = op_of(DH_OP_CU_KERNEL), *g = op_of(DH_OP_GEMM);
    assert_int_equal(dh_op_status_to_cuda(k, 0), 0);
    assert_int_equal(dh_op_status_to_cuda(k, cudaErrorInvalidConfiguration),
                     cudaErrorInvalidConfiguration);
    assert_int_equal(dh_op_status_to_cuda(ck, CUDA_ERROR_INVALID_HANDLE),
                     cudaErrorInvalidResourceHandle);
    assert_int_equal(dh_op_status_to_cuda(ck, CUDA_ERROR_ILLEGAL_ADDRESS), cudaErrorIllegalAddress);
    assert_int_equal(dh_op_status_to_cuda(ck, CUDA_ERROR_NOT_PERMITTED), cudaErrorUnknown);
    /* A cuBLAS status never leaks out as a CUDA error number. */
    (void)cudaGetLastError();
    assert_int_equal(dh_op_status_to_cuda(g, CUBLAS_STATUS_INVALID_VALUE), cudaErrorUnknown);
    assert_int_equal(dh_op_status_to_cuda(g, CUBLAS_STATUS_NOT_SUPPORTED), cudaErrorUnknown);
    /* ... but the launch failure the library left on the thread does. */
    assert_int_not_equal(cudaSetDevice(1 << 20), cudaSuccess);
    assert_int_equal(dh_op_status_to_cuda(g, CUBLAS_STATUS_EXECUTION_FAILED), cudaErrorInvalidDevice);
    dh_op_free(k);
    dh_op_free(ck);
    dh_op_free(g);
}

static void test_cuda_to_cu(void **state)
{
    (void)state;
    assert_int_equal(dh_cuda_to_cu(0), CUDA_SUCCESS);
    assert_int_equal(dh_cuda_to_cu(cudaErrorIllegalAddress), CUDA_ERROR_ILLEGAL_ADDRESS);
    assert_int_equal(dh_cuda_to_cu(cudaErrorInvalidValue), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(dh_cuda_to_cu(cudaErrorInvalidConfiguration), CUDA_ERROR_UNKNOWN);
}

static void test_sticky_codes(void **state)
{
    (void)state;
    assert_true(dh_sched_sticky_error(cudaErrorIllegalAddress));
    assert_true(dh_sched_sticky_error(cudaErrorLaunchFailure));
    assert_false(dh_sched_sticky_error(cudaErrorInvalidValue));
    assert_false(dh_sched_sticky_error(cudaErrorInvalidConfiguration));
    assert_false(dh_sched_sticky_error(0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_to_cuda),
        cmocka_unit_test(test_cuda_to_cu),
        cmocka_unit_test(test_sticky_codes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
