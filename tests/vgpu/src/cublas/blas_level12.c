/*
 * blas_level12.c: cuBLAS levels 1 and 2 as PyTorch reaches them (torch.dot, torch.mv):
 * cublasSdot_v2, cublasDdot_v2, cublasSgemv_v2, cublasDgemv_v2 and their _64 forms.
 *
 * Each is one op on the handle's stream that reads its operands when it runs. Scalars
 * follow the handle's pointer mode: host alpha and beta are read at the call, device ones
 * when the op runs; a dot's host result makes the call return when the result is written
 * (cuBLAS documents dot with a host result as blocking), a device result is written by the
 * op. Results are computed in one fixed order (sequential sums in the element type), so
 * two runs of one program agree bit for bit; a GPU's order differs.
 *
 * Call-time checks, from the cuBLAS documentation (cublas<t>dot(), cublas<t>gemv(),
 * "Return Value" tables): a NULL or destroyed handle -> CUBLAS_STATUS_NOT_INITIALIZED;
 * gemv: m < 0, n < 0, lda < max(1, m), incx == 0 or incy == 0 -> CUBLAS_STATUS_INVALID_VALUE;
 * dot: result NULL -> CUBLAS_STATUS_INVALID_VALUE; n <= 0: the result is 0 (dot) or nothing
 * is done (gemv with m or n 0). An operand outside live device memory ->
 * CUBLAS_STATUS_INVALID_VALUE with a message (the vgpu's pointer check; a GPU would fault).
 */
#include <stdio.h>
#include <string.h>

#include <cublas_v2.h>

#include "blas.h"

typedef struct l12_payload {
    int dbl;                    /* double, else float */
    int trans;                  /* gemv: op(A) = A^T */
    int64_t m, n, lda, incx, incy;
    const void *a, *x;
    void *y;                    /* gemv: y; dot: the result (host or device) */
    const void *y_in;           /* dot: its second vector */
    double alpha, beta;         /* host-mode scalars */
    const void *alpha_dev, *beta_dev;
} l12_payload_t;

static double get(const void *p, int dbl, int64_t i)
{
    return dbl ? ((const double *)p)[i] : (double)((const float *)p)[i];
}

/* Element i of a vector of len elements with increment inc (cuBLAS: a negative increment
 * walks the vector from its end). */
static int64_t at(int64_t i, int64_t len, int64_t inc)
{
    return inc > 0 ? i * inc : (len - 1 - i) * -inc;
}

static void dot_exec(vg_op_t *op)
{
    const l12_payload_t *p = op->payload;
    if (p->dbl) {
        double s = 0;
        for (int64_t i = 0; i < p->n; i++)
            s += ((const double *)p->x)[at(i, p->n, p->incx)] *
                 ((const double *)p->y_in)[at(i, p->n, p->incy)];
        memcpy(p->y, &s, sizeof s);
    } else {
        float s = 0;
        for (int64_t i = 0; i < p->n; i++)
            s += ((const float *)p->x)[at(i, p->n, p->incx)] *
                 ((const float *)p->y_in)[at(i, p->n, p->incy)];
        memcpy(p->y, &s, sizeof s);
    }
}

static void gemv_exec(vg_op_t *op)
{
    const l12_payload_t *p = op->payload;
    double alpha = p->alpha_dev ? get(p->alpha_dev, p->dbl, 0) : p->alpha;
    double beta = p->beta_dev ? get(p->beta_dev, p->dbl, 0) : p->beta;
    int64_t rows = p->trans ? p->n : p->m, cols = p->trans ? p->m : p->n;
    for (int64_t r = 0; r < rows; r++) {
        int64_t yi = at(r, rows, p->incy);
        if (p->dbl) {
            double s = 0, *y = p->y;
            for (int64_t c = 0; c < cols; c++) {
                double a = p->trans ? ((const double *)p->a)[r * p->lda + c]
                                    : ((const double *)p->a)[c * p->lda + r];
                s += a * ((const double *)p->x)[at(c, cols, p->incx)];
            }
            y[yi] = alpha * s + (beta == 0.0 ? 0.0 : beta * y[yi]);
        } else {
            float s = 0, *y = p->y;
            for (int64_t c = 0; c < cols; c++) {
                float a = p->trans ? ((const float *)p->a)[r * p->lda + c]
                                   : ((const float *)p->a)[c * p->lda + r];
                s += a * ((const float *)p->x)[at(c, cols, p->incx)];
            }
            y[yi] = (float)alpha * s + (beta == 0.0 ? 0.0f : (float)beta * y[yi]);
        }
    }
}

/* Declares [p, p + span of len elements with increment inc) after checking it is live
 * device memory. */
static int add_vec(vg_op_t *op, const char *api, const char *arg, const void *p, int64_t len,
                   int64_t inc, size_t esz, int write)
{
    int64_t step = inc < 0 ? -inc : inc;
    size_t bytes = (size_t)((len - 1) * step + 1) * esz;
    if (!p || vg_mem_find(p, bytes, NULL) != 1) {
        vg_msg("%s: %s=%p (%zu bytes) is not inside one live device allocation", api, arg, p,
               bytes);
        return -1;
    }
    vg_op_add_range(op, p, bytes, write);
    return 0;
}

static cublasStatus_t submit(struct cublasContext *h, vg_op_t *op, const char *api,
                             int blocking)
{
    (void)api;
    cudaError_t e = vg_submit_unchecked(h->stream, op);
    if (e == cudaSuccess && blocking)
        e = vg_stream_sync(h->stream);
    return e == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

static cublasStatus_t dot(const char *api, cublasHandle_t handle, int dbl, int64_t n,
                          const void *x, int64_t incx, const void *y, int64_t incy,
                          void *result)
{
    vg_init();
    struct cublasContext *h = vg__blas(handle);
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!result)
        return CUBLAS_STATUS_INVALID_VALUE;
    size_t esz = dbl ? sizeof(double) : sizeof(float);
    int host = h->pointer_mode == CUBLAS_POINTER_MODE_HOST;
    if (n <= 0) {
        if (host) {
            memset(result, 0, esz);
            return CUBLAS_STATUS_SUCCESS;
        }
        n = 0;
    }
    vg_op_t *op = vg_op_new(api, VG_COMPUTE);
    if ((n > 0 && (add_vec(op, api, "x", x, n, incx, esz, 0) ||
                   add_vec(op, api, "y", y, n, incy, esz, 0))) ||
        (!host && add_vec(op, api, "result", result, 1, 1, esz, 1))) {
        vg_op_discard(op);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    l12_payload_t *p = vg_op_payload(op, sizeof *p);
    *p = (l12_payload_t){.dbl = dbl, .n = n, .incx = incx, .incy = incy, .x = x,
                         .y_in = y, .y = result};
    op->exec = dot_exec;
    op->solo_ns = vg_cost_mem(vg_profile(h->hdr.dev), (double)(2 * n) * (double)esz);
    snprintf(op->name, sizeof op->name, "%s n=%lld", api, (long long)n);
    return submit(h, op, api, host);
}

static cublasStatus_t gemv(const char *api, cublasHandle_t handle, int dbl,
                           cublasOperation_t trans, int64_t m, int64_t n, const void *alpha,
                           const void *a, int64_t lda, const void *x, int64_t incx,
                           const void *beta, void *y, int64_t incy)
{
    vg_init();
    struct cublasContext *h = vg__blas(handle);
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (m < 0 || n < 0 || lda < (m > 1 ? m : 1) || incx == 0 || incy == 0 ||
        (trans != CUBLAS_OP_N && trans != CUBLAS_OP_T && trans != CUBLAS_OP_C) || !alpha ||
        !beta)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (m == 0 || n == 0)
        return CUBLAS_STATUS_SUCCESS;
    size_t esz = dbl ? sizeof(double) : sizeof(float);
    int t = trans != CUBLAS_OP_N;
    int64_t xlen = t ? m : n, ylen = t ? n : m;
    int host = h->pointer_mode == CUBLAS_POINTER_MODE_HOST;
    vg_op_t *op = vg_op_new(api, VG_COMPUTE);
    size_t abytes = (size_t)((n - 1) * lda + m) * esz;
    if (!a || vg_mem_find(a, abytes, NULL) != 1) {
        vg_msg("%s: A=%p (%zu bytes) is not inside one live device allocation", api, a, abytes);
        vg_op_discard(op);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    vg_op_add_range(op, a, abytes, 0);
    if (add_vec(op, api, "x", x, xlen, incx, esz, 0) ||
        add_vec(op, api, "y", y, ylen, incy, esz, 1) ||
        (!host && (add_vec(op, api, "alpha", alpha, 1, 1, esz, 0) ||
                   add_vec(op, api, "beta", beta, 1, 1, esz, 0)))) {
        vg_op_discard(op);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    l12_payload_t *p = vg_op_payload(op, sizeof *p);
    *p = (l12_payload_t){.dbl = dbl, .trans = t, .m = m, .n = n, .lda = lda, .incx = incx,
                         .incy = incy, .a = a, .x = x, .y = y};
    if (host) {
        p->alpha = get(alpha, dbl, 0);
        p->beta = get(beta, dbl, 0);
    } else {
        p->alpha_dev = alpha;
        p->beta_dev = beta;
    }
    op->exec = gemv_exec;
    op->solo_ns = vg_cost_mem(vg_profile(h->hdr.dev),
                              (double)(m * n + xlen + 2 * ylen) * (double)esz);
    snprintf(op->name, sizeof op->name, "%s %c %lldx%lld", api, t ? 'T' : 'N', (long long)m,
             (long long)n);
    return submit(h, op, api, 0);
}

VG_API cublasStatus_t cublasSdot_v2_64(cublasHandle_t handle, int64_t n, const float *x,
                                       int64_t incx, const float *y, int64_t incy, float *result)
{
    return dot("cublasSdot", handle, 0, n, x, incx, y, incy, result);
}
VG_API cublasStatus_t cublasSdot_v2(cublasHandle_t handle, int n, const float *x, int incx,
                                    const float *y, int incy, float *result)
{
    return dot("cublasSdot", handle, 0, n, x, incx, y, incy, result);
}
VG_API cublasStatus_t cublasDdot_v2_64(cublasHandle_t handle, int64_t n, const double *x,
                                       int64_t incx, const double *y, int64_t incy,
                                       double *result)
{
    return dot("cublasDdot", handle, 1, n, x, incx, y, incy, result);
}
VG_API cublasStatus_t cublasDdot_v2(cublasHandle_t handle, int n, const double *x, int incx,
                                    const double *y, int incy, double *result)
{
    return dot("cublasDdot", handle, 1, n, x, incx, y, incy, result);
}

VG_API cublasStatus_t cublasSgemv_v2_64(cublasHandle_t handle, cublasOperation_t trans,
                                        int64_t m, int64_t n, const float *alpha,
                                        const float *A, int64_t lda, const float *x,
                                        int64_t incx, const float *beta, float *y,
                                        int64_t incy)
{
    return gemv("cublasSgemv", handle, 0, trans, m, n, alpha, A, lda, x, incx, beta, y, incy);
}
VG_API cublasStatus_t cublasSgemv_v2(cublasHandle_t handle, cublasOperation_t trans, int m,
                                     int n, const float *alpha, const float *A, int lda,
                                     const float *x, int incx, const float *beta, float *y,
                                     int incy)
{
    return gemv("cublasSgemv", handle, 0, trans, m, n, alpha, A, lda, x, incx, beta, y, incy);
}
VG_API cublasStatus_t cublasDgemv_v2_64(cublasHandle_t handle, cublasOperation_t trans,
                                        int64_t m, int64_t n, const double *alpha,
                                        const double *A, int64_t lda, const double *x,
                                        int64_t incx, const double *beta, double *y,
                                        int64_t incy)
{
    return gemv("cublasDgemv", handle, 1, trans, m, n, alpha, A, lda, x, incx, beta, y, incy);
}
VG_API cublasStatus_t cublasDgemv_v2(cublasHandle_t handle, cublasOperation_t trans, int m,
                                     int n, const double *alpha, const double *A, int lda,
                                     const double *x, int incx, const double *beta, double *y,
                                     int incy)
{
    return gemv("cublasDgemv", handle, 1, trans, m, n, alpha, A, lda, x, incx, beta, y, incy);
}
