/*
 * gemm_f64.c: the fp64 GEMM of the CPU device (cublasDgemm*, cublasGemmEx with
 * CUBLAS_COMPUTE_64F, cuBLASLt with CUDA_R_64F); contract in gemm.h.
 *
 * fp64 GEMMs are rare in the programs the vgpu serves (tests, reference checks), so this is
 * the plain loop rather than gemm.c's packed kernel: every output element is one fp64
 * accumulator summed over k in increasing order, then alpha*acc + beta*C rounded in that
 * order, which makes results bit-reproducible and as accurate as a GPU's DGEMM without
 * split-K. The loop order keeps the innermost loop on contiguous memory for the
 * non-transposed operands without changing any element's order of summation.
 */
#include <stdlib.h>
#include <string.h>

#include "gemm.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O2", "fp-contract=off")
#endif

/* op(A)(i, p) and op(B)(p, j) of one batch entry. */
static inline double a_at(const vg_gemm_desc_t *g, const double *a, int64_t i, int64_t p)
{
    return g->trans_a ? a[p + i * g->lda] : a[i + p * g->lda];
}

static inline double b_at(const vg_gemm_desc_t *g, const double *b, int64_t p, int64_t j)
{
    return g->trans_b ? b[j + p * g->ldb] : b[p + j * g->ldb];
}

int vg__gemm_run_f64(const vg_gemm_desc_t *g)
{
    if (g->m <= 0 || g->n <= 0 || g->batch <= 0) {
        return 0;
    }
    double *acc = malloc(sizeof(double) * (size_t)g->m);
    if (!acc) {
        return -1;
    }
    int product = g->alpha != 0.0 && g->k > 0;
    for (int64_t bt = 0; bt < g->batch; bt++) {
        const double *a = (const double *)g->a + bt * g->stride_a;
        const double *b = (const double *)g->b + bt * g->stride_b;
        const double *c = (const double *)g->c + bt * g->stride_c;
        double *d = (double *)g->d + bt * g->stride_d;
        for (int64_t j = 0; j < g->n; j++) {
            memset(acc, 0, sizeof(double) * (size_t)g->m);
            if (product && !g->trans_a) {
                /* Column p of A scaled by B(p, j), added for p = 0, 1, ...: each acc[i]
                 * still sums its own products in increasing p. */
                for (int64_t p = 0; p < g->k; p++) {
                    double bv = b_at(g, b, p, j);
                    const double *ap = a + p * g->lda;
                    for (int64_t i = 0; i < g->m; i++) {
                        acc[i] += ap[i] * bv;
                    }
                }
            } else if (product) {
                for (int64_t i = 0; i < g->m; i++) {
                    double s = 0.0;
                    for (int64_t p = 0; p < g->k; p++) {
                        s += a_at(g, a, i, p) * b_at(g, b, p, j);
                    }
                    acc[i] = s;
                }
            }
            for (int64_t i = 0; i < g->m; i++) {
                /* beta == 0 never reads C (it may hold NaN garbage), as BLAS requires. */
                double t = g->beta != 0.0 ? g->beta * c[i + j * g->ldc] : 0.0;
                d[i + j * g->ldd] = product ? g->alpha * acc[i] + t : t;
            }
        }
    }
    free(acc);
    return 0;
}
