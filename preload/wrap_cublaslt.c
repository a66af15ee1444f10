/* wrap_cublaslt.c: cublasLtMatmul, captured when the mode defers (the descriptors, layouts
 * and algo are cloned at the call: PyTorch destroys them right after it). */
#include <cublasLt.h>

#include "wrap.h"

DH_WRAP_CAPTURE(CUBLASLT, cublasStatus_t, cublasLtMatmul,
                (cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc,
                 const void *alpha, const void *A, cublasLtMatrixLayout_t Adesc, const void *B,
                 cublasLtMatrixLayout_t Bdesc, const void *beta, const void *C,
                 cublasLtMatrixLayout_t Cdesc, void *D, cublasLtMatrixLayout_t Ddesc,
                 const cublasLtMatmulAlgo_t *algo, void *workspace, size_t workspaceSizeInBytes,
                 cudaStream_t stream),
                (lightHandle, computeDesc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc,
                 algo, workspace, workspaceSizeInBytes, stream),
                dh_op_capture_lt_matmul(&op_, lightHandle, computeDesc, alpha, A, Adesc, B,
                                        Bdesc, beta, C, Cdesc, D, Ddesc, algo, workspace,
                                        workspaceSizeInBytes, stream),
                CUBLAS_STATUS_SUCCESS)
