/*
 * shim.deps: the set of older allocations a strand certainly wrote (scheduler/dispatch/deps.h,
 * dh_deps_taint_t), which orders the other strand's ops on such an allocation after all of
 * that strand's work: a gradient buffer a backward GEMM accumulates into is also written by
 * kernels the shim cannot see into, so a gradient reduction that reads it must wait for the
 * whole backward (si.rotated_plan runs the case end to end).
 *
 * Only a certain write taints, and only an allocation made before the set's stamp (a
 * kernel's pointer into weights is a "maybe" write that must not serialise every pair); an
 * allocation is its start and its stamp, so memory freed and reused is another one.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <setjmp.h>
#include <cmocka.h>

#include "deps.h"
#include "op.h"

#define SINCE 100u /* the pair began at stamp 100 */
#define GRAD 0x10000000u
#define WEIGHT 0x20000000u
#define ACT 0x30000000u

/* An op with n accesses (n < 0: it may touch anything), each given as (start of its
 * allocation, offset, length, write, born). */
static dh_op_t *op_with(int n, ...)
{
    dh_op_t *op = dh_op_alloc(DH_OP_MEMSET, NULL, 0, 0);
    assert_non_null(op);
    op->nacc = n;
    if (n <= 0)
        return op;
    op->acc = calloc((size_t)n, sizeof *op->acc);
    assert_non_null(op->acc);
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++) {
        uintptr_t base = va_arg(ap, uintptr_t);
        size_t off = va_arg(ap, size_t), len = va_arg(ap, size_t);
        int write = va_arg(ap, int);
        uint64_t born = va_arg(ap, uint64_t);
        op->acc[i] = (dh_op_access_t){base + off, len, write, born, 0, born ? base : 0};
    }
    va_end(ap);
    return op;
}

#define ACC(base, off, len, write, born) \
    (uintptr_t)(base), (size_t)(off), (size_t)(len), (int)(write), (uint64_t)(born)

static void test_a_certain_write_taints_the_whole_older_allocation(void **state)
{
    (void)state;
    dh_deps_taint_t t = {0};
    dh_deps_taint_reset(&t, SINCE);
    /* A weight-gradient GEMM of the backward: reads weights and activations, accumulates
     * into one slice of the gradient buffer. */
    dh_op_t *gemm = op_with(3, ACC(WEIGHT, 0, 4096, 0, 1), ACC(ACT, 0, 4096, 0, 150),
                            ACC(GRAD, 0x2cc00, 16384, 1, 1));
    dh_deps_taint_add(&t, gemm);
    /* The reduction of the whole buffer, and of a slice no GEMM wrote (a layer norm's
     * gradient, written by a kernel the shim cannot see into). */
    dh_op_t *allreduce = op_with(2, ACC(GRAD, 0, 364544, 0, 1), ACC(GRAD, 0, 364544, 1, 1));
    dh_op_t *slice = op_with(1, ACC(GRAD, 232448, 256, 0, 1));
    dh_op_t *scale = op_with(1, ACC(GRAD, 0, 364544, DH_ACCESS_MAYBE, 1));
    assert_int_equal(dh_deps_taint_hit(&t, allreduce), 0);
    assert_int_equal(dh_deps_taint_hit(&t, slice), 0);
    assert_int_equal(dh_deps_taint_hit(&t, scale), 0);
    /* The forward of the next micro-batch reads the weights: not tainted. */
    dh_op_t *fwd = op_with(2, ACC(ACT, 0, 4096, 1, 160), ACC(WEIGHT, 0, 4096, 0, 1));
    assert_int_equal(dh_deps_taint_hit(&t, fwd), -1);
    dh_op_free(gemm);
    dh_op_free(allreduce);
    dh_op_free(slice);
    dh_op_free(scale);
    dh_op_free(fwd);
    dh_deps_taint_free(&t);
}

static void test_reads_maybe_writes_and_young_memory_do_not_taint(void **state)
{
    (void)state;
    dh_deps_taint_t t = {0};
    dh_deps_taint_reset(&t, SINCE);
    /* A kernel's pointers into weights (maybe written), a copy reading them, and a GEMM
     * writing an activation made during the pair (the young-memory rule's business). */
    dh_op_t *kern = op_with(1, ACC(WEIGHT, 0, 1 << 20, DH_ACCESS_MAYBE, 1));
    dh_op_t *copy = op_with(1, ACC(WEIGHT, 0, 64, 0, 1));
    dh_op_t *young = op_with(1, ACC(ACT, 0, 4096, 1, SINCE));
    dh_deps_taint_add(&t, kern);
    dh_deps_taint_add(&t, copy);
    dh_deps_taint_add(&t, young);
    assert_int_equal(dh_deps_taint_hit(&t, kern), -1);
    assert_int_equal(dh_deps_taint_hit(&t, young), -1);
    /* Nothing in the set: not even an op that may touch anything waits. */
    dh_op_t *any = op_with(-1);
    assert_int_equal(dh_deps_taint_hit(&t, any), -1);
    dh_op_free(kern);
    dh_op_free(copy);
    dh_op_free(young);
    dh_op_free(any);
    dh_deps_taint_free(&t);
}

static void test_an_allocation_is_its_start_and_its_stamp(void **state)
{
    (void)state;
    dh_deps_taint_t t = {0};
    dh_deps_taint_reset(&t, SINCE);
    dh_op_t *w = op_with(1, ACC(GRAD, 0, 256, 1, 7));
    dh_deps_taint_add(&t, w);
    /* The same addresses after a free and a new allocation (another stamp), unknown memory
     * (stamp 0), and another allocation of the same stamp. */
    dh_op_t *reused = op_with(1, ACC(GRAD, 0, 256, 0, 8));
    dh_op_t *unknown = op_with(1, ACC(GRAD, 0, 256, 0, 0));
    dh_op_t *other = op_with(1, ACC(GRAD + 0x100000, 0, 256, 0, 7));
    assert_int_equal(dh_deps_taint_hit(&t, reused), -1);
    assert_int_equal(dh_deps_taint_hit(&t, unknown), -1);
    assert_int_equal(dh_deps_taint_hit(&t, other), -1);
    /* An op that may touch anything may touch it. */
    dh_op_t *any = op_with(-1);
    assert_int_equal(dh_deps_taint_hit(&t, any), 0);
    /* A new pair starts empty. */
    dh_deps_taint_reset(&t, SINCE + 50);
    assert_int_equal(dh_deps_taint_hit(&t, w), -1);
    dh_op_free(w);
    dh_op_free(reused);
    dh_op_free(unknown);
    dh_op_free(other);
    dh_op_free(any);
    dh_deps_taint_free(&t);
}

static void test_many_allocations(void **state)
{
    (void)state;
    /* PyTorch without a contiguous gradient buffer: one allocation per parameter. */
    enum { N = 5000 };
    dh_deps_taint_t t = {0};
    dh_deps_taint_reset(&t, SINCE);
    for (uintptr_t k = 0; k < N; k++) {
        dh_op_t *w = op_with(1, ACC(GRAD + k * 0x200, 0, 0x200, 1, 1 + k % 50));
        dh_deps_taint_add(&t, w);
        dh_op_free(w);
    }
    for (uintptr_t k = 0; k < N; k++) {
        dh_op_t *r = op_with(1, ACC(GRAD + k * 0x200, 16, 16, 0, 1 + k % 50));
        int hit = dh_deps_taint_hit(&t, r);
        if (hit != 0)
            fail_msg("allocation %lu written, yet no hit (%d)", (unsigned long)k, hit);
        dh_op_free(r);
    }
    dh_op_t *miss = op_with(1, ACC(GRAD + (uintptr_t)N * 0x200, 0, 16, 0, 1));
    assert_int_equal(dh_deps_taint_hit(&t, miss), -1);
    dh_op_free(miss);
    dh_deps_taint_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_certain_write_taints_the_whole_older_allocation),
        cmocka_unit_test(test_reads_maybe_writes_and_young_memory_do_not_taint),
        cmocka_unit_test(test_an_allocation_is_its_start_and_its_stamp),
        cmocka_unit_test(test_many_allocations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
