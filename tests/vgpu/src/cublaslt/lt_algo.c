/*
 * lt_algo.c: cuBLASLt's lower-level algorithm API on the vgpu: cublasLtMatmulAlgoGetIds,
 * cublasLtMatmulAlgoInit, cublasLtMatmulAlgoConfigSetAttribute and
 * cublasLtMatmulAlgoConfigGetAttribute.
 *
 * The vgpu has one algorithm (LT_ALGO_ID) for every type combination it computes. Its only
 * configuration that matters is split-K: with CUBLASLT_ALGO_CONFIG_SPLITK_NUM > 1 and a
 * reduction scheme that keeps partial sums apart (COMPUTE_TYPE or OUTPUT_TYPE) it needs
 * LT_SPLITK_WS bytes of workspace, otherwise none; cublasLtMatmul insists on that much, the
 * same rule the heuristic's algos follow (lt_matmul.c). The other fields are stored and read
 * back, as cuBLASLt stores them, and change nothing.
 *
 * Statuses, from the contracts in cublasLt.h (CUDA 13):
 *   GetIds: bad handle -> NOT_INITIALIZED; requestedAlgoCount <= 0, NULL array or count ->
 *           INVALID_VALUE; a type combination without algorithms -> SUCCESS with
 *           *returnAlgoCount = 0 ("inspect returnAlgoCount to get actual number of IDs").
 *   Init:   bad handle -> NOT_INITIALIZED; algo NULL or algoId < 0 -> INVALID_VALUE; an id
 *           other than LT_ALGO_ID, or types without it -> NOT_SUPPORTED.
 *   Config Set/Get: NULL algo, unknown attribute, NULL buf or a size other than the
 *           attribute's -> INVALID_VALUE; Get with sizeInBytes 0 reports the size in
 *           *sizeWritten (INVALID_VALUE if that is NULL). CUBLASLT_ALGO_CONFIG_ID is
 *           read-only ("set by cublasLtMatmulAlgoInit()"): setting it is INVALID_VALUE (the
 *           header does not say which status; the vgpu's choice). An algo the vgpu did not
 *           fill is INVALID_VALUE with a message (the real library cannot tell).
 */
#include <stddef.h>
#include <string.h>

#include "lt.h"

static int live_handle(cublasLtHandle_t h)
{
    const vg_blas_hdr_t *hdr = (const vg_blas_hdr_t *)h;
    return hdr && (hdr->magic == VG_BLASLT_MAGIC || hdr->magic == VG_BLAS_MAGIC);
}

const lt_algo_t *vg__lt_algo(const cublasLtMatmulAlgo_t *algo)
{
    const lt_algo_t *a = (const lt_algo_t *)algo;
    return a && a->magic == LT_ALGO_MAGIC ? a : NULL;
}

/* The workspace the configuration needs. */
static uint64_t config_ws(const lt_algo_t *a)
{
    uint32_t r = a->reduction_scheme;
    int apart = r == CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE ||
                r == CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE;
    return a->splitk_num > 1 && apart ? LT_SPLITK_WS : 0;
}

static void init_algo(cublasLtMatmulAlgo_t *algo)
{
    memset(algo, 0, sizeof *algo);
    lt_algo_t *a = (lt_algo_t *)algo;
    a->magic = LT_ALGO_MAGIC;
    a->id = LT_ALGO_ID;
    a->tile_id = CUBLASLT_MATMUL_TILE_UNDEFINED;
    a->splitk_num = 1;
    a->reduction_scheme = CUBLASLT_REDUCTION_SCHEME_NONE;
    a->stages_id = CUBLASLT_MATMUL_STAGES_UNDEFINED;
}

void vg__lt_algo_fill(cublasLtMatmulAlgo_t *algo, size_t ws)
{
    init_algo(algo);
    lt_algo_t *a = (lt_algo_t *)algo;
    if (ws > 0) {
        a->splitk_num = LT_SPLITK_NUM;
        a->reduction_scheme = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    }
    /* The heuristic may cap the workspace below the split's full need (lt_matmul.c). */
    a->ws = ws;
}

VG_API cublasStatus_t cublasLtMatmulAlgoGetIds(cublasLtHandle_t lightHandle,
                                               cublasComputeType_t computeType,
                                               cudaDataType_t scaleType, cudaDataType_t Atype,
                                               cudaDataType_t Btype, cudaDataType_t Ctype,
                                               cudaDataType_t Dtype, int requestedAlgoCount,
                                               int algoIdsArray[], int *returnAlgoCount)
{
    if (!live_handle(lightHandle)) {
        return CUBLAS_STATUS_NOT_INITIALIZED;
    }
    if (requestedAlgoCount <= 0 || !algoIdsArray || !returnAlgoCount) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    vg_gemm_call_t call = {0};
    call.api = "cublasLtMatmulAlgoGetIds";
    *returnAlgoCount = 0;
    if (vg__lt_check_types(&call, computeType, scaleType, Atype, Btype, Ctype, Dtype) ==
        CUBLAS_STATUS_SUCCESS) {
        algoIdsArray[0] = LT_ALGO_ID;
        *returnAlgoCount = 1;
    }
    return CUBLAS_STATUS_SUCCESS;
}

VG_API cublasStatus_t cublasLtMatmulAlgoInit(cublasLtHandle_t lightHandle,
                                             cublasComputeType_t computeType,
                                             cudaDataType_t scaleType, cudaDataType_t Atype,
                                             cudaDataType_t Btype, cudaDataType_t Ctype,
                                             cudaDataType_t Dtype, int algoId,
                                             cublasLtMatmulAlgo_t *algo)
{
    if (!live_handle(lightHandle)) {
        return CUBLAS_STATUS_NOT_INITIALIZED;
    }
    if (!algo || algoId < 0) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    vg_gemm_call_t call = {0};
    call.api = "cublasLtMatmulAlgoInit";
    if (algoId != LT_ALGO_ID ||
        vg__lt_check_types(&call, computeType, scaleType, Atype, Btype, Ctype, Dtype) !=
            CUBLAS_STATUS_SUCCESS) {
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    init_algo(algo);
    return CUBLAS_STATUS_SUCCESS;
}

typedef struct algo_slot {
    int attr;
    size_t off, size;
} algo_slot_t;

#define ALGO_SLOT(a, f) {(int)(a), offsetof(lt_algo_t, f), sizeof(((lt_algo_t *)0)->f)}

static const algo_slot_t algo_slots[] = {
    ALGO_SLOT(CUBLASLT_ALGO_CONFIG_ID, id),
    ALGO_SLOT(CUBLASLT_ALGO_CONFIG_TILE_ID, tile_id),
    ALGO_SLOT(CUBLASLT_ALGO_CONFIG_SPLITK_NUM, splitk_num),
    ALGO_SLOT(CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, reduction_scheme),
    ALGO_SLOT(CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, cta_swizzling),
    ALGO_SLOT(CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, custom_option),
    ALGO_SLOT(CUBLASLT_ALGO_CONFIG_STAGES_ID, stages_id),
    ALGO_SLOT(CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID, inner_shape_id),
    ALGO_SLOT(CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, cluster_shape_id),
};

static const algo_slot_t *find_algo_slot(int attr)
{
    for (size_t i = 0; i < sizeof algo_slots / sizeof algo_slots[0]; i++) {
        if (algo_slots[i].attr == attr) {
            return &algo_slots[i];
        }
    }
    return NULL;
}

/* The algo's slot for attr, or NULL (with a message for an algo the vgpu did not fill). */
static const algo_slot_t *algo_slot(const cublasLtMatmulAlgo_t *algo, int attr, const char *api)
{
    if (!algo) {
        return NULL;
    }
    if (!vg__lt_algo(algo)) {
        vg_msg("%s: algo was not made by cublasLtMatmulAlgoInit or the heuristic", api);
        return NULL;
    }
    return find_algo_slot(attr);
}

VG_API cublasStatus_t cublasLtMatmulAlgoConfigSetAttribute(
    cublasLtMatmulAlgo_t *algo, cublasLtMatmulAlgoConfigAttributes_t attr, const void *buf,
    size_t sizeInBytes)
{
    const algo_slot_t *s = algo_slot(algo, attr, "cublasLtMatmulAlgoConfigSetAttribute");
    if (!s || !buf || sizeInBytes != s->size || attr == CUBLASLT_ALGO_CONFIG_ID) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    lt_algo_t *a = (lt_algo_t *)algo;
    memcpy((char *)a + s->off, buf, s->size);
    if (attr == CUBLASLT_ALGO_CONFIG_SPLITK_NUM ||
        attr == CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME) {
        a->ws = config_ws(a);
    }
    return CUBLAS_STATUS_SUCCESS;
}

VG_API cublasStatus_t cublasLtMatmulAlgoConfigGetAttribute(
    const cublasLtMatmulAlgo_t *algo, cublasLtMatmulAlgoConfigAttributes_t attr, void *buf,
    size_t sizeInBytes, size_t *sizeWritten)
{
    const algo_slot_t *s = algo_slot(algo, attr, "cublasLtMatmulAlgoConfigGetAttribute");
    if (!s) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (sizeInBytes == 0) {
        if (!sizeWritten) {
            return CUBLAS_STATUS_INVALID_VALUE;
        }
        *sizeWritten = s->size;
        return CUBLAS_STATUS_SUCCESS;
    }
    if (!buf || sizeInBytes != s->size) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    memcpy(buf, (const char *)algo + s->off, s->size);
    if (sizeWritten) {
        *sizeWritten = s->size;
    }
    return CUBLAS_STATUS_SUCCESS;
}
