/* wrap_cublaslt.c: cublasLtMatmul, captured when the mode defers (the descriptors, layouts
 * and algo are cloned at the call: PyTorch destroys them right after it). */
#include <cublasLt.h>

#include "hooks.h"
#include "op.h"
#include "scheduler.h"

DH_HOOK_EXPORT cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle,
                                             cublasLtMatmulDesc_t computeDesc, const void *alpha,
                                             const void *A, cublasLtMatrixLayout_t Adesc,
                                             const void *B, cublasLtMatrixLayout_t Bdesc,
                                             const void *beta, const void *C,
                                             cublasLtMatrixLayout_t Cdesc, void *D,
                                             cublasLtMatrixLayout_t Ddesc,
                                             const cublasLtMatmulAlgo_t *algo, void *workspace,
                                             size_t workspaceSizeInBytes, cudaStream_t stream)
{
    __typeof__(&cublasLtMatmul) real_ =
        (__typeof__(&cublasLtMatmul))dh__hook_enter(DH_HOOK_cublasLtMatmul, DH_HOOK_LIB_CUBLASLT);
    if (real_ == NULL)
        return (cublasStatus_t)dh__hook_missing(DH_HOOK_cublasLtMatmul);
    if (dh__hook_depth == 1 && dh_sched_deferring()) {
        dh_op_t *op = NULL;
        if (dh_op_capture_lt_matmul(&op, lightHandle, computeDesc, alpha, A, Adesc, B, Bdesc,
                                    beta, C, Cdesc, D, Ddesc, algo, workspace,
                                    workspaceSizeInBytes, stream) == DH_OK) {
            dh_sched_submit(op);
            dh__hook_leave();
            return CUBLAS_STATUS_SUCCESS;
        }
        dh_sched_drain(DH_DRAIN_UNCAPTURABLE);
    }
    cublasStatus_t rc = real_(lightHandle, computeDesc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc,
                              D, Ddesc, algo, workspace, workspaceSizeInBytes, stream);
    dh__hook_leave();
    return rc;
}
