/*
 * op_break.h: the deep copies of the operation records that a test may disable.
 *
 * Issue 3 asks that every deep copy be shown load-bearing: with the copy disabled, at
 * least one exactness test must fail. With a bit set, the capture keeps the framework's
 * pointer instead of an owned copy, so a replay reads whatever the framework has since
 * changed or freed. Nothing else changes.
 *
 * The mask starts from DHELIX_TEST_BREAK (breaks.h: kernel_args, gemm_scalars, lt_desc,
 * pageable_h2d), read on the first capture; unit tests that link dh_sched set it directly
 * with dh_op_set_test_break(), which replaces it. Production runs set neither.
 *
 * Thread-safety: the mask is a relaxed atomic read once per capture; set it before the
 * captures it should affect.
 */
#ifndef DH_OP_BREAK_H
#define DH_OP_BREAK_H

enum {
    DH_OP_BREAK_KERNEL_ARGS = 1u << 0,  /* kernel arguments, cuLaunchKernel's extra buffer */
    DH_OP_BREAK_LAUNCH_ATTRS = 1u << 1, /* launch attribute arrays of the Ex launches */
    DH_OP_BREAK_H2D_SOURCE = 1u << 2,   /* pageable sources of host-to-device copies */
    DH_OP_BREAK_ALPHA_BETA = 1u << 3,   /* host alpha/beta of cuBLAS and cuBLASLt */
    DH_OP_BREAK_LT_DESC = 1u << 4,      /* cuBLASLt descriptor, layouts and algo */
};

/* Replaces the mask of disabled copies (DH_OP_BREAK_* bits; 0 = none). */
void dh_op_set_test_break(unsigned mask);
/* The mask in effect (reading DHELIX_TEST_BREAK first if nothing has yet). */
unsigned dh_op_test_break(void);

#endif
