/*
 * test_cublas_helpers.c (vgpu.cublas_helpers): cublasSetVector, cublasGetVector,
 * cublasSetMatrix, cublasGetMatrix and their Async and _64 forms through the real cuBLAS
 * API: strided vectors and sub-matrices land exactly where the strides say and nowhere
 * else, the Async forms are ordered on their stream, and every argument check of the
 * cuBLAS documentation (listed in blas_helpers.c) answers its status.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>

#include "gemm_common.h"
#include "rt_common.h"

static int setup(void **state)
{
    vgt_register_kernels();
    return 0;
}

/* Fails unless a[i] == b[i] for i < n, naming the first difference. */
static void expect_floats(const char *what, const float *want, const float *got, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (want[i] != got[i])
            fail_msg("%s: element %zu: expected %g, got %g", what, i, want[i], got[i]);
    }
}

/* Strided vectors both ways: x[0], x[3], ... to y[0], y[2], ...; the gaps of y keep their
 * old values; then back with other strides; then the contiguous case. */
static void test_vectors(void **state)
{
    enum { N = 7, LEN = 32 };
    float host[LEN], dev_init[LEN], back[LEN], want[LEN];
    for (int i = 0; i < LEN; i++) {
        host[i] = (float)(i + 1);
        dev_init[i] = -1.0f;
    }
    float *d;
    GT_RT_OK(cudaMalloc((void **)&d, sizeof dev_init));
    GT_RT_OK(cudaMemcpy(d, dev_init, sizeof dev_init, cudaMemcpyHostToDevice));
    GT_BLAS_OK(cublasSetVector(N, sizeof(float), host, 3, d, 2));
    GT_RT_OK(cudaMemcpy(back, d, sizeof back, cudaMemcpyDeviceToHost));
    memcpy(want, dev_init, sizeof want);
    for (int i = 0; i < N; i++) {
        want[2 * i] = host[3 * i];
    }
    expect_floats("SetVector incx 3 incy 2", want, back, LEN);

    float out[LEN];
    for (int i = 0; i < LEN; i++) {
        out[i] = 0.5f;
    }
    float want_out[LEN];
    memcpy(want_out, out, sizeof out);
    GT_BLAS_OK(cublasGetVector(N, sizeof(float), d, 2, out, 4));
    for (int i = 0; i < N; i++) {
        want_out[4 * i] = want[2 * i];
    }
    expect_floats("GetVector incx 2 incy 4", want_out, out, LEN);

    /* Contiguous, through the _64 entry point, with 8-byte elements. */
    double h64[4] = {1.5, 2.5, 3.5, 4.5}, b64[4] = {0, 0, 0, 0};
    GT_BLAS_OK(cublasSetVector_64(4, sizeof(double), h64, 1, d, 1));
    GT_BLAS_OK(cublasGetVector_64(4, sizeof(double), d, 1, b64, 1));
    for (int i = 0; i < 4; i++) {
        if (b64[i] != h64[i])
            fail_msg("SetVector_64/GetVector_64 element %d: expected %g, got %g", i, h64[i],
                     b64[i]);
    }
    GT_RT_OK(cudaFree(d));
}

/* A 5 x 3 sub-matrix of a host matrix with lda 9 into a device matrix with ldb 6 and back
 * into one with ldb 7; padding rows keep their values. */
static void test_matrices(void **state)
{
    enum { ROWS = 5, COLS = 3, LDA = 9, LDD = 6, LDB = 7 };
    float a[LDA * COLS], dinit[LDD * COLS], dback[LDD * COLS], dwant[LDD * COLS];
    for (int i = 0; i < LDA * COLS; i++) {
        a[i] = (float)(100 + i);
    }
    for (int i = 0; i < LDD * COLS; i++) {
        dinit[i] = -2.0f;
    }
    float *d;
    GT_RT_OK(cudaMalloc((void **)&d, sizeof dinit));
    GT_RT_OK(cudaMemcpy(d, dinit, sizeof dinit, cudaMemcpyHostToDevice));
    GT_BLAS_OK(cublasSetMatrix(ROWS, COLS, sizeof(float), a, LDA, d, LDD));
    GT_RT_OK(cudaMemcpy(dback, d, sizeof dback, cudaMemcpyDeviceToHost));
    memcpy(dwant, dinit, sizeof dwant);
    for (int j = 0; j < COLS; j++) {
        for (int i = 0; i < ROWS; i++) {
            dwant[i + j * LDD] = a[i + j * LDA];
        }
    }
    expect_floats("SetMatrix lda 9 ldb 6", dwant, dback, LDD * COLS);

    float b[LDB * COLS], bwant[LDB * COLS];
    for (int i = 0; i < LDB * COLS; i++) {
        b[i] = 7.0f;
    }
    memcpy(bwant, b, sizeof b);
    for (int j = 0; j < COLS; j++) {
        for (int i = 0; i < ROWS; i++) {
            bwant[i + j * LDB] = dwant[i + j * LDD];
        }
    }
    GT_BLAS_OK(cublasGetMatrix_64(ROWS, COLS, sizeof(float), d, LDD, b, LDB));
    expect_floats("GetMatrix_64 lda 6 ldb 7", bwant, b, LDB * COLS);
    GT_RT_OK(cudaFree(d));
}

/* The Async forms are ordered on their stream: with the stream held busy, a SetVectorAsync
 * queued after a fill kernel overwrites the fill, and GetMatrixAsync then reads the result
 * once the stream is synchronised. */
static void test_async_stream_order(void **state)
{
    enum { N = 64 };
    cudaStream_t s;
    GT_RT_OK(cudaStreamCreate(&s));
    float *d, *pinned;
    GT_RT_OK(cudaMalloc((void **)&d, N * sizeof(float)));
    GT_RT_OK(cudaMallocHost((void **)&pinned, 2 * N * sizeof(float)));
    for (int i = 0; i < N; i++) {
        pinned[i] = (float)i;
        pinned[N + i] = 0.0f;
    }
    GT_RT_OK(vgt_spin(1e6, 1.0, s));
    GT_RT_OK(vgt_fill(d, 3.0f, N, 1000, s));
    GT_BLAS_OK(cublasSetVectorAsync(N / 2, sizeof(float), pinned, 2, d, 2, s));
    GT_BLAS_OK(cublasGetMatrixAsync(8, 8, sizeof(float), d, 8, pinned + N, 8, s));
    GT_RT_OK(cudaStreamSynchronize(s));
    for (int i = 0; i < N; i++) {
        float want = i % 2 ? 3.0f : (float)i;
        if (pinned[N + i] != want)
            fail_msg("element %d after fill, SetVectorAsync and GetMatrixAsync: expected %g, "
                     "got %g", i, want, pinned[N + i]);
    }
    GT_BLAS_OK(cublasSetMatrixAsync(4, 2, sizeof(float), pinned, 4, d, 4, s));
    GT_BLAS_OK(cublasGetVectorAsync(8, sizeof(float), d, 1, pinned + N, 1, s));
    GT_RT_OK(cudaStreamSynchronize(s));
    expect_floats("SetMatrixAsync then GetVectorAsync", pinned, pinned + N, 8);
    GT_RT_OK(cudaFreeHost(pinned));
    GT_RT_OK(cudaFree(d));
    GT_RT_OK(cudaStreamDestroy(s));
}

/* Every documented check, and that a failed call copies nothing. */
static void test_argument_checks(void **state)
{
    float host[64], d_init[64];
    for (int i = 0; i < 64; i++) {
        host[i] = 1.0f;
        d_init[i] = 0.0f;
    }
    float *d;
    GT_RT_OK(cudaMalloc((void **)&d, sizeof d_init));
    GT_RT_OK(cudaMemcpy(d, d_init, sizeof d_init, cudaMemcpyHostToDevice));
    const cublasStatus_t INV = CUBLAS_STATUS_INVALID_VALUE;
    GT_EXPECT_BLAS(INV, cublasSetVector(4, 4, host, 0, d, 1));
    GT_EXPECT_BLAS(INV, cublasSetVector(4, 4, host, 1, d, 0));
    GT_EXPECT_BLAS(INV, cublasSetVector(4, 4, host, -1, d, 1));
    GT_EXPECT_BLAS(INV, cublasSetVector(4, 0, host, 1, d, 1));
    GT_EXPECT_BLAS(INV, cublasSetVector(-1, 4, host, 1, d, 1));
    GT_EXPECT_BLAS(INV, cublasGetVector(4, 4, d, 1, host, 0));
    GT_EXPECT_BLAS(INV, cublasGetVector(4, -4, d, 1, host, 1));
    GT_EXPECT_BLAS(INV, cublasSetVectorAsync(4, 4, host, 0, d, 1, NULL));
    GT_EXPECT_BLAS(INV, cublasGetVectorAsync_64(4, 4, d, 1, host, -2, NULL));
    GT_BLAS_OK(cublasSetVector(0, 4, host, 1, d, 1));
    GT_EXPECT_BLAS(INV, cublasSetMatrix(-1, 2, 4, host, 4, d, 4));
    GT_EXPECT_BLAS(INV, cublasSetMatrix(2, -1, 4, host, 4, d, 4));
    GT_EXPECT_BLAS(INV, cublasSetMatrix(2, 2, 0, host, 4, d, 4));
    GT_EXPECT_BLAS(INV, cublasSetMatrix(2, 2, 4, host, 0, d, 4));
    GT_EXPECT_BLAS(INV, cublasSetMatrix(2, 2, 4, host, 4, d, 0));
    GT_EXPECT_BLAS(INV, cublasSetMatrix(4, 2, 4, host, 3, d, 4));   /* lda < rows */
    GT_EXPECT_BLAS(INV, cublasGetMatrix(4, 2, 4, d, 4, host, 3));   /* ldb < rows */
    GT_EXPECT_BLAS(INV, cublasSetMatrixAsync(2, 2, 4, host, 4, d, -4, NULL));
    GT_EXPECT_BLAS(INV, cublasGetMatrixAsync_64(2, -2, 4, d, 4, host, 4, NULL));
    GT_BLAS_OK(cublasSetMatrix(0, 2, 4, host, 4, d, 4));
    GT_BLAS_OK(cublasSetMatrix(2, 0, 4, host, 4, d, 4));
    /* Device side outside device memory: the copy fails, MAPPING_ERROR. */
    float other[64];
    GT_EXPECT_BLAS(CUBLAS_STATUS_MAPPING_ERROR, cublasSetVector(4, 4, host, 1, other, 1));
    GT_EXPECT_BLAS(CUBLAS_STATUS_MAPPING_ERROR, cublasGetMatrix(2, 2, 4, other, 2, host, 2));
    GT_EXPECT_BLAS(CUBLAS_STATUS_MAPPING_ERROR, cublasSetVector(64, 4, host, 1, d, 2));
    float back[64];
    GT_RT_OK(cudaMemcpy(back, d, sizeof back, cudaMemcpyDeviceToHost));
    expect_floats("device memory after the failed calls", d_init, back, 64);
    GT_RT_OK(cudaFree(d));
    (void)cudaGetLastError();
}

/* cuBLAS levels 1 and 2 (blas_level12.c): gemv in both transposes, with a stride and
 * beta, and dot with a host and a device result, against sums done here in the same order. */
static void test_gemv_and_dot(void **state)
{
    (void)state;
    enum { M = 5, N = 3, LDA = 7 };
    float ha[LDA * N], hx[M], hy[M], want[M];
    for (int i = 0; i < LDA * N; i++)
        ha[i] = (float)(i % 11) * 0.25f - 1.0f;
    for (int i = 0; i < M; i++) {
        hx[i] = (float)i + 0.5f;
        hy[i] = 1.0f - (float)i;
    }
    float *a, *x, *y, *r;
    VGT_OK(cudaMalloc((void **)&a, sizeof ha));
    VGT_OK(cudaMalloc((void **)&x, sizeof hx));
    VGT_OK(cudaMalloc((void **)&y, sizeof hy));
    VGT_OK(cudaMalloc((void **)&r, sizeof(float)));
    VGT_OK(cudaMemcpy(a, ha, sizeof ha, cudaMemcpyHostToDevice));
    VGT_OK(cudaMemcpy(x, hx, sizeof hx, cudaMemcpyHostToDevice));
    VGT_OK(cudaMemcpy(y, hy, sizeof hy, cudaMemcpyHostToDevice));
    cublasHandle_t h;
    GT_BLAS_OK(cublasCreate(&h));
    float alpha = 2.0f, beta = 0.5f;
    /* y[0..M) = alpha * A * x[0..N) + beta * y */
    GT_BLAS_OK(cublasSgemv_v2(h, CUBLAS_OP_N, M, N, &alpha, a, LDA, x, 1, &beta, y, 1));
    for (int i = 0; i < M; i++) {
        float s = 0;
        for (int j = 0; j < N; j++)
            s += ha[j * LDA + i] * hx[j];
        want[i] = alpha * s + beta * hy[i];
    }
    float got[M];
    VGT_OK(cudaMemcpy(got, y, sizeof got, cudaMemcpyDeviceToHost));
    for (int i = 0; i < M; i++)
        if (got[i] != want[i])
            fail_msg("Sgemv N: y[%d] = %.9g, expected %.9g", i, (double)got[i], (double)want[i]);
    /* x[0..N) strided by 2 over y's first 2N-1 = A^T * y */
    GT_BLAS_OK(cublasSgemv_v2(h, CUBLAS_OP_T, M, N, &alpha, a, LDA, y, 1, &beta, x, 2));
    float gx[M];
    VGT_OK(cudaMemcpy(gx, x, sizeof gx, cudaMemcpyDeviceToHost));
    for (int j = 0; j < N; j++) {
        float s = 0;
        for (int i = 0; i < M; i++)
            s += ha[j * LDA + i] * want[i];
        float w = alpha * s + beta * hx[2 * j];
        if (gx[2 * j] != w)
            fail_msg("Sgemv T: x[%d] = %.9g, expected %.9g", 2 * j, (double)gx[2 * j], (double)w);
    }
    float d = -1, wd = 0;
    GT_BLAS_OK(cublasSdot_v2(h, M, x, 1, y, 1, &d)); /* host result: returns when written */
    for (int i = 0; i < M; i++)
        wd += gx[i] * want[i];
    if (d != wd)
        fail_msg("Sdot (host result) = %.9g, expected %.9g", (double)d, (double)wd);
    GT_BLAS_OK(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_DEVICE));
    GT_BLAS_OK(cublasSdot_v2(h, M, x, 1, y, 1, r));
    float dr = -1;
    VGT_OK(cudaMemcpy(&dr, r, sizeof dr, cudaMemcpyDeviceToHost));
    if (dr != wd)
        fail_msg("Sdot (device result) = %.9g, expected %.9g", (double)dr, (double)wd);
    GT_BLAS_OK(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST));
    /* Statuses: lda < m, a zero increment, a NULL result, a NULL handle. */
    if (cublasSgemv_v2(h, CUBLAS_OP_N, M, N, &alpha, a, M - 1, x, 1, &beta, y, 1) !=
            CUBLAS_STATUS_INVALID_VALUE ||
        cublasSgemv_v2(h, CUBLAS_OP_N, M, N, &alpha, a, LDA, x, 0, &beta, y, 1) !=
            CUBLAS_STATUS_INVALID_VALUE ||
        cublasSdot_v2(h, M, x, 1, y, 1, NULL) != CUBLAS_STATUS_INVALID_VALUE ||
        cublasSdot_v2(NULL, M, x, 1, y, 1, &d) != CUBLAS_STATUS_NOT_INITIALIZED)
        fail_msg("gemv/dot argument checks did not answer cuBLAS's statuses");
    GT_BLAS_OK(cublasDestroy(h));
    VGT_OK(cudaFree(a));
    VGT_OK(cudaFree(x));
    VGT_OK(cudaFree(y));
    VGT_OK(cudaFree(r));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vectors),
        cmocka_unit_test(test_matrices),
        cmocka_unit_test(test_async_stream_order),
        cmocka_unit_test(test_argument_checks),
        cmocka_unit_test(test_gemv_and_dot),
        cmocka_unit_test(vgt_test_no_hazards),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
