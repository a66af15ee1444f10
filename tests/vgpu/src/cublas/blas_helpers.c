/*
 * blas_helpers.c: cuBLAS's data movement helpers (libcublas.so.13): cublasSetVector,
 * cublasGetVector, cublasSetMatrix, cublasGetMatrix, their Async forms and the _64 variants.
 *
 * Each is one strided copy through the core's vg_memcpy2d: a vector of n elements of
 * elemSize bytes with strides incx, incy is n rows of elemSize bytes with pitches
 * incx * elemSize and incy * elemSize (one contiguous copy when both strides are 1); a
 * matrix is cols rows of rows * elemSize bytes with pitches lda * elemSize, ldb * elemSize.
 * The synchronous forms return when the copy is done (legacy default stream); the Async
 * forms enqueue on the given stream, like cudaMemcpy2DAsync.
 *
 * Call-time checks (the shim mirrors them), from the "Return Value" tables of the cuBLAS
 * documentation, section "Helper Function Reference" (cublasSetVector() ...
 * cublasGetMatrixAsync()):
 *   vectors: incx <= 0, incy <= 0 or elemSize <= 0          -> CUBLAS_STATUS_INVALID_VALUE
 *            n < 0                                          -> CUBLAS_STATUS_INVALID_VALUE
 *              (not in the table; the vgpu's choice, unverified on a GPU)
 *            n == 0                                         -> CUBLAS_STATUS_SUCCESS, no copy
 *   matrices: rows < 0, cols < 0, or elemSize, lda, ldb <= 0 -> CUBLAS_STATUS_INVALID_VALUE
 *            lda < rows or ldb < rows                       -> CUBLAS_STATUS_INVALID_VALUE
 *              (not in the table, which lists only <= 0: the copy would overlap its own
 *              columns; the vgpu's choice, unverified on a GPU)
 *            rows == 0 or cols == 0                         -> CUBLAS_STATUS_SUCCESS, no copy
 *   both:    the device side is not inside one live device allocation, or the stream is
 *            not a live stream                              -> CUBLAS_STATUS_MAPPING_ERROR
 *              ("there was an error accessing GPU memory", the same tables)
 * None of them takes a handle, so none returns CUBLAS_STATUS_NOT_INITIALIZED.
 */
#include <cublas_v2.h>

#include "blas.h"

/* One strided copy; its cudaError_t becomes MAPPING_ERROR. */
static cublasStatus_t copy_rows(const char *api, void *dst, int64_t dpitch, const void *src,
                                int64_t spitch, int64_t width, int64_t height,
                                enum cudaMemcpyKind kind, cudaStream_t s, int blocking)
{
    cudaError_t e = vg_memcpy2d(dst, (size_t)dpitch, src, (size_t)spitch, (size_t)width,
                                (size_t)height, kind, s, blocking, api);
    if (e != cudaSuccess) {
        vg_msg("%s: the copy failed (cudaError_t %d)", api, (int)e);
        return CUBLAS_STATUS_MAPPING_ERROR;
    }
    return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t vector(const char *api, int64_t n, int64_t esz, const void *x,
                             int64_t incx, void *y, int64_t incy, enum cudaMemcpyKind kind,
                             cudaStream_t s, int blocking)
{
    vg_init();
    if (n < 0 || esz <= 0 || incx <= 0 || incy <= 0) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (n == 0) {
        return CUBLAS_STATUS_SUCCESS;
    }
    if (incx == 1 && incy == 1) {
        return copy_rows(api, y, n * esz, x, n * esz, n * esz, 1, kind, s, blocking);
    }
    return copy_rows(api, y, incy * esz, x, incx * esz, esz, n, kind, s, blocking);
}

static cublasStatus_t matrix(const char *api, int64_t rows, int64_t cols, int64_t esz,
                             const void *a, int64_t lda, void *b, int64_t ldb,
                             enum cudaMemcpyKind kind, cudaStream_t s, int blocking)
{
    vg_init();
    if (rows < 0 || cols < 0 || esz <= 0 || lda <= 0 || ldb <= 0 || lda < rows || ldb < rows) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (rows == 0 || cols == 0) {
        return CUBLAS_STATUS_SUCCESS;
    }
    return copy_rows(api, b, ldb * esz, a, lda * esz, rows * esz, cols, kind, s, blocking);
}

VG_API cublasStatus_t cublasSetVector_64(int64_t n, int64_t elemSize, const void *x,
                                         int64_t incx, void *devicePtr, int64_t incy)
{
    return vector("cublasSetVector", n, elemSize, x, incx, devicePtr, incy,
                  cudaMemcpyHostToDevice, NULL, 1);
}

VG_API cublasStatus_t cublasSetVector(int n, int elemSize, const void *x, int incx,
                                      void *devicePtr, int incy)
{
    return cublasSetVector_64(n, elemSize, x, incx, devicePtr, incy);
}

VG_API cublasStatus_t cublasGetVector_64(int64_t n, int64_t elemSize, const void *x,
                                         int64_t incx, void *y, int64_t incy)
{
    return vector("cublasGetVector", n, elemSize, x, incx, y, incy, cudaMemcpyDeviceToHost,
                  NULL, 1);
}

VG_API cublasStatus_t cublasGetVector(int n, int elemSize, const void *x, int incx, void *y,
                                      int incy)
{
    return cublasGetVector_64(n, elemSize, x, incx, y, incy);
}

VG_API cublasStatus_t cublasSetMatrix_64(int64_t rows, int64_t cols, int64_t elemSize,
                                         const void *A, int64_t lda, void *B, int64_t ldb)
{
    return matrix("cublasSetMatrix", rows, cols, elemSize, A, lda, B, ldb,
                  cudaMemcpyHostToDevice, NULL, 1);
}

VG_API cublasStatus_t cublasSetMatrix(int rows, int cols, int elemSize, const void *A, int lda,
                                      void *B, int ldb)
{
    return cublasSetMatrix_64(rows, cols, elemSize, A, lda, B, ldb);
}

VG_API cublasStatus_t cublasGetMatrix_64(int64_t rows, int64_t cols, int64_t elemSize,
                                         const void *A, int64_t lda, void *B, int64_t ldb)
{
    return matrix("cublasGetMatrix", rows, cols, elemSize, A, lda, B, ldb,
                  cudaMemcpyDeviceToHost, NULL, 1);
}

VG_API cublasStatus_t cublasGetMatrix(int rows, int cols, int elemSize, const void *A, int lda,
                                      void *B, int ldb)
{
    return cublasGetMatrix_64(rows, cols, elemSize, A, lda, B, ldb);
}

VG_API cublasStatus_t cublasSetVectorAsync_64(int64_t n, int64_t elemSize, const void *hostPtr,
                                              int64_t incx, void *devicePtr, int64_t incy,
                                              cudaStream_t stream)
{
    return vector("cublasSetVectorAsync", n, elemSize, hostPtr, incx, devicePtr, incy,
                  cudaMemcpyHostToDevice, stream, 0);
}

VG_API cublasStatus_t cublasSetVectorAsync(int n, int elemSize, const void *hostPtr, int incx,
                                           void *devicePtr, int incy, cudaStream_t stream)
{
    return cublasSetVectorAsync_64(n, elemSize, hostPtr, incx, devicePtr, incy, stream);
}

VG_API cublasStatus_t cublasGetVectorAsync_64(int64_t n, int64_t elemSize, const void *devicePtr,
                                              int64_t incx, void *hostPtr, int64_t incy,
                                              cudaStream_t stream)
{
    return vector("cublasGetVectorAsync", n, elemSize, devicePtr, incx, hostPtr, incy,
                  cudaMemcpyDeviceToHost, stream, 0);
}

VG_API cublasStatus_t cublasGetVectorAsync(int n, int elemSize, const void *devicePtr, int incx,
                                           void *hostPtr, int incy, cudaStream_t stream)
{
    return cublasGetVectorAsync_64(n, elemSize, devicePtr, incx, hostPtr, incy, stream);
}

VG_API cublasStatus_t cublasSetMatrixAsync_64(int64_t rows, int64_t cols, int64_t elemSize,
                                              const void *A, int64_t lda, void *B, int64_t ldb,
                                              cudaStream_t stream)
{
    return matrix("cublasSetMatrixAsync", rows, cols, elemSize, A, lda, B, ldb,
                  cudaMemcpyHostToDevice, stream, 0);
}

VG_API cublasStatus_t cublasSetMatrixAsync(int rows, int cols, int elemSize, const void *A,
                                           int lda, void *B, int ldb, cudaStream_t stream)
{
    return cublasSetMatrixAsync_64(rows, cols, elemSize, A, lda, B, ldb, stream);
}

VG_API cublasStatus_t cublasGetMatrixAsync_64(int64_t rows, int64_t cols, int64_t elemSize,
                                              const void *A, int64_t lda, void *B, int64_t ldb,
                                              cudaStream_t stream)
{
    return matrix("cublasGetMatrixAsync", rows, cols, elemSize, A, lda, B, ldb,
                  cudaMemcpyDeviceToHost, stream, 0);
}

VG_API cublasStatus_t cublasGetMatrixAsync(int rows, int cols, int elemSize, const void *A,
                                           int lda, void *B, int ldb, cudaStream_t stream)
{
    return cublasGetMatrixAsync_64(rows, cols, elemSize, A, lda, B, ldb, stream);
}
