/*
 * lt_matmul.c: cuBLASLt handles, the algorithm heuristic and cublasLtMatmul.
 *
 * The vgpu has one algorithm per problem. Its workspace need is shape-dependent
 * (LT_SPLITK_WS for K >= LT_SPLITK_MIN_K, else none), capped by what the caller allows; the
 * heuristic reports it in the algo (cublasLtMatmulAlgo_t.data[1]) and cublasLtMatmul insists
 * on getting at least that much, as a GPU's split-K kernel would. The workspace bytes it
 * uses are declared written, so two matmuls sharing one workspace concurrently (Transformer
 * Engine keeps one per device) are hazards.
 *
 * cublasLtMatmul copies everything out of the descriptors before it returns: PyTorch
 * destroys them right after the call, long before the operation runs.
 *
 * Call-time checks of cublasLtMatmul and cublasLtMatmulAlgoGetHeuristic, in this order (the
 * shim mirrors this list). Sources: the \retval lists of both in cublasLt.h (CUDA 13):
 * INVALID_VALUE "if parameters are in conflict or in an impossible configuration",
 * NOT_SUPPORTED "if current implementation on selected device doesn't support configured
 * operation" / "if no heuristic function available for current configuration".
 *   1. handle neither a live cuBLASLt nor a live cuBLAS handle  -> NOT_INITIALIZED
 *   2. heuristic: requestedAlgoCount <= 0, results or count NULL, preference not live
 *                                                                -> INVALID_VALUE
 *   3. descriptor or a layout not live; transa/transb not N, T, C -> INVALID_VALUE
 *   4. a layout not column-major, with a plane offset or pointer-array batch mode
 *                                                                -> NOT_SUPPORTED (vgpu)
 *      ld < max(1, rows) of any layout, batch count < 1 or unequal -> INVALID_VALUE
 *   5. transc not N, fill mode not FULL, unknown pointer mode    -> NOT_SUPPORTED (vgpu)
 *      A or B fp8/fp4 (with or without scale pointers)           -> NOT_SUPPORTED
 *      an fp8 scale pointer with other types                     -> INVALID_VALUE (cuBLASLt
 *        docs of CUBLASLT_MATMUL_DESC_A_SCALE_POINTER)
 *      types outside cuBLAS's table (vg_gemm_set_types), D type not C's, scale type not the
 *      compute type's                                            -> NOT_SUPPORTED
 *   6. op(A), op(B), C and D dimensions inconsistent             -> INVALID_VALUE
 *   7. an epilogue the vgpu lacks, any epilogue on fp64, a bias/aux type it lacks
 *                                                                -> NOT_SUPPORTED (vgpu)
 *      aux ld < m or not a multiple of 8                         -> INVALID_VALUE
 *   matmul only:
 *   8. alpha or beta NULL; C NULL with beta != 0; bias or aux pointer missing for the
 *      epilogue                                                  -> INVALID_VALUE
 *   9. algo not made by the heuristic or cublasLtMatmulAlgoInit; workspace smaller than the
 *      algo needs, or NULL while it needs some                   -> INVALID_VALUE
 *  10. m, n or batch 0                                           -> SUCCESS, nothing runs
 *      stream of a device other than the calling thread's        -> EXECUTION_FAILED
 *      vgpu only: an operand, scalar or workspace not inside one live device allocation
 *                                                                -> INVALID_VALUE
 * "(vgpu)" marks configurations cuBLASLt may run but the vgpu does not implement.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "lt.h"

struct cublasLtContext {
    vg_blas_hdr_t hdr;
    struct cublasLtContext *next;  /* every handle ever made; guarded by list_lock */
};

static pthread_mutex_t list_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cublasLtContext *all_handles; /* guarded by list_lock */

/* The device of a live cuBLASLt handle or of a live cuBLAS handle used as one; -1 if h is
 * neither. */
static int handle_dev(cublasLtHandle_t h)
{
    const vg_blas_hdr_t *hdr = (const vg_blas_hdr_t *)h;
    if (!hdr || (hdr->magic != VG_BLASLT_MAGIC && hdr->magic != VG_BLAS_MAGIC)) {
        return -1;
    }
    return hdr->dev;
}

VG_API cublasStatus_t cublasLtCreate(cublasLtHandle_t *lightHandle)
{
    if (!lightHandle) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    vg_init();
    struct cublasLtContext *h = NULL;
    pthread_mutex_lock(&list_lock);
    for (struct cublasLtContext *it = all_handles; it; it = it->next) {
        if (it->hdr.magic == VG_BLAS_DEAD) {
            h = it;
            break;
        }
    }
    if (!h && (h = calloc(1, sizeof *h)) != NULL) {
        h->next = all_handles;
        all_handles = h;
    }
    if (h) {
        h->hdr.dev = vg_current_device();
        h->hdr.magic = VG_BLASLT_MAGIC;
    }
    pthread_mutex_unlock(&list_lock);
    if (!h) {
        return CUBLAS_STATUS_ALLOC_FAILED;
    }
    *lightHandle = h;
    return CUBLAS_STATUS_SUCCESS;
}

VG_API cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle)
{
    if (!lightHandle || lightHandle->hdr.magic != VG_BLASLT_MAGIC) {
        return CUBLAS_STATUS_NOT_INITIALIZED;
    }
    pthread_mutex_lock(&list_lock);
    lightHandle->hdr.magic = VG_BLAS_DEAD;
    pthread_mutex_unlock(&list_lock);
    return CUBLAS_STATUS_SUCCESS;
}

VG_API const char *cublasLtGetStatusName(cublasStatus_t status)
{
    return vg_gemm_status_name(status);
}

VG_API const char *cublasLtGetStatusString(cublasStatus_t status)
{
    return vg_gemm_status_string(status);
}

VG_API size_t cublasLtGetVersion(void) { return CUBLAS_VERSION; }

VG_API size_t cublasLtGetCudartVersion(void) { return CUDART_VERSION; }

VG_API cublasStatus_t cublasLtGetProperty(libraryPropertyType type, int *value)
{
    if (!value) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    switch (type) {
    case MAJOR_VERSION: *value = CUBLAS_VER_MAJOR; return CUBLAS_STATUS_SUCCESS;
    case MINOR_VERSION: *value = CUBLAS_VER_MINOR; return CUBLAS_STATUS_SUCCESS;
    case PATCH_LEVEL: *value = CUBLAS_VER_PATCH; return CUBLAS_STATUS_SUCCESS;
    }
    return CUBLAS_STATUS_INVALID_VALUE;
}

/* ---- problem description ---- */

static int valid_op(int32_t op)
{
    return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C;
}

static unsigned epilogue_flags(uint32_t e, int *ok)
{
    *ok = 1;
    switch (e) {
    case CUBLASLT_EPILOGUE_DEFAULT: return 0;
    case CUBLASLT_EPILOGUE_RELU: return VG_GEMM_EPI_RELU;
    case CUBLASLT_EPILOGUE_BIAS: return VG_GEMM_EPI_BIAS;
    case CUBLASLT_EPILOGUE_RELU_BIAS: return VG_GEMM_EPI_RELU | VG_GEMM_EPI_BIAS;
    case CUBLASLT_EPILOGUE_GELU: return VG_GEMM_EPI_GELU;
    case CUBLASLT_EPILOGUE_GELU_BIAS: return VG_GEMM_EPI_GELU | VG_GEMM_EPI_BIAS;
    case CUBLASLT_EPILOGUE_GELU_AUX: return VG_GEMM_EPI_GELU | VG_GEMM_EPI_AUX;
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS:
        return VG_GEMM_EPI_GELU | VG_GEMM_EPI_AUX | VG_GEMM_EPI_BIAS;
    default: *ok = 0; return 0;
    }
}

/* Maps the type of an epilogue vector: -1 (unset) means D's type; fp32 is always allowed;
 * a 16-bit type must be D's. Returns 0 for anything else. */
static int side_type(int32_t t, vg_gemm_type_t d_type, vg_gemm_type_t *out)
{
    switch (t) {
    case -1: *out = d_type; return 1;
    case CUDA_R_32F: *out = VG_GEMM_F32; return 1;
    case CUDA_R_16F: *out = VG_GEMM_F16; return d_type == VG_GEMM_F16;
    case CUDA_R_16BF: *out = VG_GEMM_BF16; return d_type == VG_GEMM_BF16;
    default: return 0;
    }
}

static int ld_ok(const lt_layout_t *l)
{
    return l->ld >= 1 && (uint64_t)l->ld >= l->rows;
}

/* The four layouts: column-major, strided, sane leading dimensions, one batch count. */
static cublasStatus_t check_layouts(const lt_layout_t *const all[4])
{
    for (int i = 0; i < 4; i++) {
        if (all[i]->order != CUBLASLT_ORDER_COL || all[i]->plane_offset != 0 ||
            all[i]->batch_mode != CUBLASLT_BATCH_MODE_STRIDED) {
            return CUBLAS_STATUS_NOT_SUPPORTED;
        }
        if (!ld_ok(all[i]) || all[i]->batch_count < 1 ||
            all[i]->batch_count != all[3]->batch_count) {
            return CUBLAS_STATUS_INVALID_VALUE;
        }
    }
    return CUBLAS_STATUS_SUCCESS;
}

/* The 8- and 4-bit floating-point types (fp8 E4M3/E5M2, the UE8M0 block scale,
 * fp4 E2M1; UE4M3 is E4M3 by value): cuBLASLt-only inputs the vgpu does not compute. */
static int is_narrow_float(uint32_t t)
{
    switch (t) {
    case CUDA_R_8F_E4M3:
    case CUDA_R_8F_E5M2:
    case CUDA_R_8F_UE8M0:
    case CUDA_R_4F_E2M1:
        return 1;
    default:
        return 0;
    }
}

cublasStatus_t vg__lt_check_types(vg_gemm_call_t *call, int32_t compute, int32_t scale,
                                  uint32_t at, uint32_t bt, uint32_t ct, uint32_t dt)
{
    if (is_narrow_float(at) || is_narrow_float(bt)) {
        /* cuBLASLt computes these on sm_89 and later; with no algorithm for them the
         * heuristic and cublasLtMatmul answer NOT_SUPPORTED, as cuBLASLt does for a
         * configuration it has no kernel for. */
        vg_msg("cublasLt: vgpu does not implement fp8/fp4 inputs (A type %u, B type %u)", at,
               bt);
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    cublasStatus_t st = vg_gemm_set_types(call, at, bt, ct, compute, 0);
    if (st != CUBLAS_STATUS_SUCCESS || dt != ct) {
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    cudaDataType_t want_scale = call->scalar_type == VG_GEMM_F16   ? CUDA_R_16F
                                : call->scalar_type == VG_GEMM_F64 ? CUDA_R_64F
                                                                   : CUDA_R_32F;
    return scale == (int32_t)want_scale ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_SUPPORTED;
}

/* Operation settings the vgpu cannot honour, and types (into call). */
static cublasStatus_t check_desc(const lt_desc_t *d, const lt_layout_t *a, const lt_layout_t *b,
                                 const lt_layout_t *c, const lt_layout_t *o, vg_gemm_call_t *call)
{
    if (d->transc != CUBLAS_OP_N || d->fill_mode != CUBLAS_FILL_MODE_FULL ||
        (d->pointer_mode != CUBLASLT_POINTER_MODE_HOST &&
         d->pointer_mode != CUBLASLT_POINTER_MODE_DEVICE)) {
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    if (is_narrow_float(a->type) || is_narrow_float(b->type)) {
        return vg__lt_check_types(call, d->compute_type, d->scale_type, a->type, b->type,
                                  c->type, o->type);
    }
    for (int i = 0; i < 8; i++) {
        if (d->scale_ptrs[i]) {
            /* "If set for an unsupported matrix data, scale, and compute type combination,
             * calling cublasLtMatmul() will return CUBLAS_INVALID_VALUE" (cuBLASLt docs,
             * CUBLASLT_MATMUL_DESC_A_SCALE_POINTER). */
            return CUBLAS_STATUS_INVALID_VALUE;
        }
    }
    return vg__lt_check_types(call, d->compute_type, d->scale_type, a->type, b->type, c->type,
                              o->type);
}

/* Dimensions from the layouts (m, n from D; k from op(A)), which must agree. */
static cublasStatus_t set_dims(const lt_desc_t *d, const lt_layout_t *a, const lt_layout_t *b,
                               const lt_layout_t *c, const lt_layout_t *o, vg_gemm_desc_t *g)
{
    g->trans_a = d->transa != CUBLAS_OP_N;
    g->trans_b = d->transb != CUBLAS_OP_N;
    g->m = (int64_t)o->rows;
    g->n = (int64_t)o->cols;
    g->k = (int64_t)(g->trans_a ? a->rows : a->cols);
    uint64_t a_m = g->trans_a ? a->cols : a->rows;
    uint64_t b_k = g->trans_b ? b->cols : b->rows, b_n = g->trans_b ? b->rows : b->cols;
    if (a_m != o->rows || b_k != (uint64_t)g->k || b_n != o->cols || c->rows != o->rows ||
        c->cols != o->cols) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    g->batch = o->batch_count;
    g->lda = a->ld;
    g->stride_a = a->batch_stride;
    g->ldb = b->ld;
    g->stride_b = b->batch_stride;
    g->ldc = c->ld;
    g->stride_c = c->batch_stride;
    g->ldd = o->ld;
    g->stride_d = o->batch_stride;
    return CUBLAS_STATUS_SUCCESS;
}

/* The epilogue and the types, leading dimension and strides of its vectors. */
static cublasStatus_t set_epilogue(const lt_desc_t *d, vg_gemm_desc_t *g)
{
    int ok;
    g->epilogue = epilogue_flags(d->epilogue, &ok);
    if (!ok) {
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    if (g->epilogue && g->d_type == VG_GEMM_F64) {
        vg_msg("cublasLtMatmul: vgpu does not implement epilogues on fp64 matmuls");
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    if (g->epilogue & VG_GEMM_EPI_BIAS) {
        if (!side_type(d->bias_type, g->d_type, &g->bias_type)) {
            return CUBLAS_STATUS_NOT_SUPPORTED;
        }
        g->stride_bias = d->bias_batch_stride;
    }
    if (g->epilogue & VG_GEMM_EPI_AUX) {
        if (!side_type(d->aux_type, g->d_type, &g->aux_type) || g->aux_type != g->d_type) {
            return CUBLAS_STATUS_NOT_SUPPORTED;
        }
        if (d->aux_ld < g->m || d->aux_ld % 8 != 0) {
            return CUBLAS_STATUS_INVALID_VALUE;
        }
        g->ld_aux = d->aux_ld;
        g->stride_aux = d->aux_batch_stride;
    }
    return CUBLAS_STATUS_SUCCESS;
}

/* Fills call (everything but data pointers and scalars) from the handle and descriptors,
 * with the statuses cuBLASLt documents: NOT_INITIALIZED for a bad handle, INVALID_VALUE for
 * inconsistent or missing arguments, NOT_SUPPORTED for valid configurations the vgpu does
 * not implement. A NULL Ddesc is refused: cuBLASLt 13 returned CUBLAS_STATUS_INVALID_VALUE
 * for it on an H100 (2026-11-26; the vgpu took it for "like C" until then). */
static cublasStatus_t describe(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                               cublasLtMatrixLayout_t ad, cublasLtMatrixLayout_t bd,
                               cublasLtMatrixLayout_t cd, cublasLtMatrixLayout_t dd,
                               vg_gemm_call_t *call, const lt_desc_t **descp)
{
    int dev = handle_dev(handle);
    if (dev < 0) {
        return CUBLAS_STATUS_NOT_INITIALIZED;
    }
    const lt_desc_t *d = vg__lt_desc(desc);
    const lt_layout_t *a = vg__lt_layout(ad), *b = vg__lt_layout(bd), *c = vg__lt_layout(cd);
    const lt_layout_t *o = dd ? vg__lt_layout(dd) : NULL;
    if (!d || !a || !b || !c || !o || !valid_op(d->transa) || !valid_op(d->transb)) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    const lt_layout_t *const all[4] = {a, b, c, o};
    call->api = "cublasLtMatmul";
    cublasStatus_t st;
    if ((st = check_layouts(all)) != CUBLAS_STATUS_SUCCESS ||
        (st = check_desc(d, a, b, c, o, call)) != CUBLAS_STATUS_SUCCESS ||
        (st = set_dims(d, a, b, c, o, &call->g)) != CUBLAS_STATUS_SUCCESS ||
        (st = set_epilogue(d, &call->g)) != CUBLAS_STATUS_SUCCESS) {
        return st;
    }
    call->dev = dev;
    *descp = d;
    return CUBLAS_STATUS_SUCCESS;
}

static size_t ws_need(const vg_gemm_desc_t *g)
{
    return g->k >= LT_SPLITK_MIN_K ? LT_SPLITK_WS : 0;
}

/* ---- heuristic ---- */

VG_API cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc, cublasLtMatrixLayout_t Adesc,
    cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
    cublasLtMatmulPreference_t preference, int requestedAlgoCount,
    cublasLtMatmulHeuristicResult_t heuristicResultsArray[], int *returnAlgoCount)
{
    if (handle_dev(lightHandle) < 0) {
        return CUBLAS_STATUS_NOT_INITIALIZED;
    }
    if (requestedAlgoCount <= 0 || !heuristicResultsArray || !returnAlgoCount) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    const lt_pref_t *p = preference ? vg__lt_pref(preference) : NULL;
    if (preference && !p) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    vg_gemm_call_t call = {0};
    const lt_desc_t *d;
    cublasStatus_t st = describe(lightHandle, operationDesc, Adesc, Bdesc, Cdesc, Ddesc, &call, &d);
    if (st != CUBLAS_STATUS_SUCCESS) {
        *returnAlgoCount = 0;
        return st;
    }
    size_t max_ws = p ? (size_t)p->max_ws : 0;
    size_t need = ws_need(&call.g);
    cublasLtMatmulHeuristicResult_t *r = &heuristicResultsArray[0];
    memset(r, 0, sizeof *r);
    vg__lt_algo_fill(&r->algo, need < max_ws ? need : max_ws);
    r->workspaceSize = (size_t)r->algo.data[1];
    r->state = CUBLAS_STATUS_SUCCESS;
    r->wavesCount = 1.0f;
    *returnAlgoCount = 1;
    return CUBLAS_STATUS_SUCCESS;
}

/* ---- matmul ---- */

VG_API cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc,
                                     const void *alpha, const void *A, cublasLtMatrixLayout_t Adesc,
                                     const void *B, cublasLtMatrixLayout_t Bdesc,
                                     const void *beta, const void *C,
                                     cublasLtMatrixLayout_t Cdesc, void *D,
                                     cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t *algo,
                                     void *workspace, size_t workspaceSizeInBytes,
                                     cudaStream_t stream)
{
    vg_gemm_call_t call = {0};
    const lt_desc_t *d;
    cublasStatus_t st = describe(lightHandle, computeDesc, Adesc, Bdesc, Cdesc, Ddesc, &call, &d);
    if (st != CUBLAS_STATUS_SUCCESS) {
        return st;
    }
    if (!alpha || !beta) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    vg_gemm_desc_t *g = &call.g;
    if (d->pointer_mode == CUBLASLT_POINTER_MODE_DEVICE) {
        call.alpha_dev = alpha;
        call.beta_dev = beta;
    } else {
        g->alpha = vg_gemm_read_scalar(alpha, call.scalar_type);
        g->beta = vg_gemm_read_scalar(beta, call.scalar_type);
        call.beta_is_zero = g->beta == 0.0;
    }
    if (!C && !call.beta_is_zero) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    g->a = A;
    g->b = B;
    g->c = C ? C : D;
    g->d = D;
    if (!C) {
        /* Nothing is read from C: describe it as D so it is not declared separately. */
        g->ldc = g->ldd;
        g->stride_c = g->stride_d;
    }
    if (g->epilogue & VG_GEMM_EPI_BIAS) {
        if (!d->bias) {
            return CUBLAS_STATUS_INVALID_VALUE;
        }
        g->bias = d->bias;
    }
    if (g->epilogue & VG_GEMM_EPI_AUX) {
        if (!d->aux) {
            return CUBLAS_STATUS_INVALID_VALUE;
        }
        g->aux = d->aux;
    }
    /* The algorithm's workspace: the heuristic's when an algo is given, else what this
     * call's own heuristic would pick with the workspace offered. */
    size_t need = ws_need(g);
    if (algo) {
        const lt_algo_t *al = vg__lt_algo(algo);
        if (!al) {
            vg_msg("cublasLtMatmul: algo was not made by cublasLtMatmulAlgoGetHeuristic or "
                   "cublasLtMatmulAlgoInit");
            return CUBLAS_STATUS_INVALID_VALUE;
        }
        need = (size_t)al->ws;
        if (workspaceSizeInBytes < need) {
            vg_msg("cublasLtMatmul: the algo needs %zu bytes of workspace, %zu given", need,
                   workspaceSizeInBytes);
            return CUBLAS_STATUS_INVALID_VALUE;
        }
    } else if (need > workspaceSizeInBytes) {
        need = workspaceSizeInBytes;
    }
    if (need > 0) {
        call.ws = workspace;
        call.ws_bytes = need;
        if (!workspace) {
            vg_msg("cublasLtMatmul: workspace is NULL, the algo needs %zu bytes", need);
            return CUBLAS_STATUS_INVALID_VALUE;
        }
    }
    return vg_gemm_submit(&call, stream);
}
