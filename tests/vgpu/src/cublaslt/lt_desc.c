/*
 * lt_desc.c: cuBLASLt matmul descriptors, matrix layouts and preferences.
 *
 * Attributes go through one table per descriptor kind: attribute, field offset, field size.
 * The size is the one cublasLt.h documents for the attribute, and Set/Get demand exactly
 * that size, as cuBLASLt does; an attribute not in the table is CUBLAS_STATUS_INVALID_VALUE.
 * Values are checked where they are used (cublasLtMatmul, the heuristic), because cuBLASLt
 * accepts any value of the right size here.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "lt.h"

typedef struct slot {
    int attr;
    size_t off;
    size_t size;
} slot_t;

#define SLOT(a, T, f) {(int)(a), offsetof(T, f), sizeof(((T *)0)->f)}

static const slot_t desc_slots[] = {
    SLOT(CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, lt_desc_t, compute_type),
    SLOT(CUBLASLT_MATMUL_DESC_SCALE_TYPE, lt_desc_t, scale_type),
    SLOT(CUBLASLT_MATMUL_DESC_POINTER_MODE, lt_desc_t, pointer_mode),
    SLOT(CUBLASLT_MATMUL_DESC_TRANSA, lt_desc_t, transa),
    SLOT(CUBLASLT_MATMUL_DESC_TRANSB, lt_desc_t, transb),
    SLOT(CUBLASLT_MATMUL_DESC_TRANSC, lt_desc_t, transc),
    SLOT(CUBLASLT_MATMUL_DESC_FILL_MODE, lt_desc_t, fill_mode),
    SLOT(CUBLASLT_MATMUL_DESC_EPILOGUE, lt_desc_t, epilogue),
    SLOT(CUBLASLT_MATMUL_DESC_BIAS_POINTER, lt_desc_t, bias),
    SLOT(CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, lt_desc_t, bias_batch_stride),
    SLOT(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, lt_desc_t, aux),
    SLOT(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, lt_desc_t, aux_ld),
    SLOT(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, lt_desc_t, aux_batch_stride),
    SLOT(CUBLASLT_MATMUL_DESC_ALPHA_VECTOR_BATCH_STRIDE, lt_desc_t, alpha_vector_batch_stride),
    SLOT(CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, lt_desc_t, sm_count_target),
    SLOT(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, lt_desc_t, scale_ptrs[0]),
    SLOT(CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, lt_desc_t, scale_ptrs[1]),
    SLOT(CUBLASLT_MATMUL_DESC_C_SCALE_POINTER, lt_desc_t, scale_ptrs[2]),
    SLOT(CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, lt_desc_t, scale_ptrs[3]),
    SLOT(CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, lt_desc_t, scale_ptrs[4]),
    SLOT(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, lt_desc_t, aux_type),
    SLOT(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_POINTER, lt_desc_t, scale_ptrs[5]),
    SLOT(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_AMAX_POINTER, lt_desc_t, scale_ptrs[6]),
    SLOT(CUBLASLT_MATMUL_DESC_FAST_ACCUM, lt_desc_t, fast_accum),
    SLOT(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, lt_desc_t, bias_type),
    SLOT(CUBLASLT_MATMUL_DESC_A_SCALE_MODE, lt_desc_t, scale_modes[0]),
    SLOT(CUBLASLT_MATMUL_DESC_B_SCALE_MODE, lt_desc_t, scale_modes[1]),
    SLOT(CUBLASLT_MATMUL_DESC_C_SCALE_MODE, lt_desc_t, scale_modes[2]),
    SLOT(CUBLASLT_MATMUL_DESC_D_SCALE_MODE, lt_desc_t, scale_modes[3]),
    SLOT(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_MODE, lt_desc_t, scale_modes[4]),
    SLOT(CUBLASLT_MATMUL_DESC_D_OUT_SCALE_POINTER, lt_desc_t, scale_ptrs[7]),
    SLOT(CUBLASLT_MATMUL_DESC_D_OUT_SCALE_MODE, lt_desc_t, scale_modes[5]),
    SLOT(CUBLASLT_MATMUL_DESC_EMULATION_DESCRIPTOR, lt_desc_t, emulation_desc),
};

static const slot_t layout_slots[] = {
    SLOT(CUBLASLT_MATRIX_LAYOUT_TYPE, lt_layout_t, type),
    SLOT(CUBLASLT_MATRIX_LAYOUT_ORDER, lt_layout_t, order),
    SLOT(CUBLASLT_MATRIX_LAYOUT_ROWS, lt_layout_t, rows),
    SLOT(CUBLASLT_MATRIX_LAYOUT_COLS, lt_layout_t, cols),
    SLOT(CUBLASLT_MATRIX_LAYOUT_LD, lt_layout_t, ld),
    SLOT(CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, lt_layout_t, batch_count),
    SLOT(CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, lt_layout_t, batch_stride),
    SLOT(CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET, lt_layout_t, plane_offset),
    SLOT(CUBLASLT_MATRIX_LAYOUT_BATCH_MODE, lt_layout_t, batch_mode),
};

static const slot_t pref_slots[] = {
    SLOT(CUBLASLT_MATMUL_PREF_SEARCH_MODE, lt_pref_t, search_mode),
    SLOT(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, lt_pref_t, max_ws),
    SLOT(CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, lt_pref_t, reduction_mask),
    SLOT(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, lt_pref_t, min_align[0]),
    SLOT(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, lt_pref_t, min_align[1]),
    SLOT(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, lt_pref_t, min_align[2]),
    SLOT(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, lt_pref_t, min_align[3]),
    SLOT(CUBLASLT_MATMUL_PREF_MAX_WAVES_COUNT, lt_pref_t, max_waves),
    SLOT(CUBLASLT_MATMUL_PREF_IMPL_MASK, lt_pref_t, impl_mask),
};

#define NSLOTS(t) (sizeof(t) / sizeof((t)[0]))

static const slot_t *find_slot(const slot_t *tab, size_t n, int attr)
{
    for (size_t i = 0; i < n; i++) {
        if (tab[i].attr == attr) {
            return &tab[i];
        }
    }
    return NULL;
}

static cublasStatus_t slot_set(void *obj, const slot_t *tab, size_t n, int attr, const void *buf,
                               size_t size)
{
    const slot_t *s = find_slot(tab, n, attr);
    if (!obj || !s || !buf || size != s->size) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    memcpy((char *)obj + s->off, buf, s->size);
    return CUBLAS_STATUS_SUCCESS;
}

/* sizeInBytes == 0 asks for the size (needs sizeWritten); otherwise it must be exact. */
static cublasStatus_t slot_get(const void *obj, const slot_t *tab, size_t n, int attr, void *buf,
                               size_t size, size_t *written)
{
    const slot_t *s = find_slot(tab, n, attr);
    if (!obj || !s) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (size == 0) {
        if (!written) {
            return CUBLAS_STATUS_INVALID_VALUE;
        }
        *written = s->size;
        return CUBLAS_STATUS_SUCCESS;
    }
    if (!buf || size != s->size) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    memcpy(buf, (const char *)obj + s->off, s->size);
    if (written) {
        *written = s->size;
    }
    return CUBLAS_STATUS_SUCCESS;
}

/* ---- matmul descriptor ---- */

const lt_desc_t *vg__lt_desc(cublasLtMatmulDesc_t d)
{
    const lt_desc_t *x = (const lt_desc_t *)d;
    return x && x->magic == LT_DESC_MAGIC ? x : NULL;
}

VG_API cublasStatus_t cublasLtMatmulDescInit_internal(cublasLtMatmulDesc_t matmulDesc,
                                                      size_t size,
                                                      cublasComputeType_t computeType,
                                                      cudaDataType_t scaleType)
{
    if (!matmulDesc || size < sizeof(lt_desc_t)) {
        return CUBLAS_STATUS_ALLOC_FAILED;
    }
    lt_desc_t *d = (lt_desc_t *)matmulDesc;
    memset(d, 0, sizeof *d);
    d->compute_type = computeType;
    d->scale_type = scaleType;
    d->pointer_mode = CUBLASLT_POINTER_MODE_HOST;
    d->transa = d->transb = d->transc = CUBLAS_OP_N;
    d->fill_mode = CUBLAS_FILL_MODE_FULL;
    d->epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    d->aux_type = -1;
    d->bias_type = -1;
    d->magic = LT_DESC_MAGIC;
    return CUBLAS_STATUS_SUCCESS;
}

VG_API cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *matmulDesc,
                                               cublasComputeType_t computeType,
                                               cudaDataType_t scaleType)
{
    if (!matmulDesc) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    cublasLtMatmulDesc_t d = malloc(sizeof *d);
    if (!d) {
        return CUBLAS_STATUS_ALLOC_FAILED;
    }
    cublasLtMatmulDescInit_internal(d, sizeof *d, computeType, scaleType);
    *matmulDesc = d;
    return CUBLAS_STATUS_SUCCESS;
}

VG_API cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc)
{
    if (matmulDesc) {
        ((lt_desc_t *)matmulDesc)->magic = 0;
        free(matmulDesc);
    }
    return CUBLAS_STATUS_SUCCESS;
}

VG_API cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                                     cublasLtMatmulDescAttributes_t attr,
                                                     const void *buf, size_t sizeInBytes)
{
    return slot_set((void *)vg__lt_desc(matmulDesc), desc_slots, NSLOTS(desc_slots), attr, buf,
                    sizeInBytes);
}

VG_API cublasStatus_t cublasLtMatmulDescGetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                                     cublasLtMatmulDescAttributes_t attr,
                                                     void *buf, size_t sizeInBytes,
                                                     size_t *sizeWritten)
{
    return slot_get(vg__lt_desc(matmulDesc), desc_slots, NSLOTS(desc_slots), attr, buf,
                    sizeInBytes, sizeWritten);
}

/* ---- matrix layout ---- */

const lt_layout_t *vg__lt_layout(cublasLtMatrixLayout_t l)
{
    const lt_layout_t *x = (const lt_layout_t *)l;
    return x && x->magic == LT_LAYOUT_MAGIC ? x : NULL;
}

VG_API cublasStatus_t cublasLtMatrixLayoutInit_internal(cublasLtMatrixLayout_t matLayout,
                                                        size_t size, cudaDataType type,
                                                        uint64_t rows, uint64_t cols, int64_t ld)
{
    if (!matLayout || size < sizeof(lt_layout_t)) {
        return CUBLAS_STATUS_ALLOC_FAILED;
    }
    lt_layout_t *l = (lt_layout_t *)matLayout;
    memset(l, 0, sizeof *l);
    l->type = (uint32_t)type;
    l->order = CUBLASLT_ORDER_COL;
    l->rows = rows;
    l->cols = cols;
    l->ld = ld;
    l->batch_count = 1;
    l->batch_mode = CUBLASLT_BATCH_MODE_STRIDED;
    l->magic = LT_LAYOUT_MAGIC;
    return CUBLAS_STATUS_SUCCESS;
}

VG_API cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *matLayout,
                                                 cudaDataType type, uint64_t rows, uint64_t cols,
                                                 int64_t ld)
{
    if (!matLayout) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    cublasLtMatrixLayout_t l = malloc(sizeof *l);
    if (!l) {
        return CUBLAS_STATUS_ALLOC_FAILED;
    }
    cublasLtMatrixLayoutInit_internal(l, sizeof *l, type, rows, cols, ld);
    *matLayout = l;
    return CUBLAS_STATUS_SUCCESS;
}

VG_API cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout)
{
    if (matLayout) {
        ((lt_layout_t *)matLayout)->magic = 0;
        free(matLayout);
    }
    return CUBLAS_STATUS_SUCCESS;
}

VG_API cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t matLayout,
                                                       cublasLtMatrixLayoutAttribute_t attr,
                                                       const void *buf, size_t sizeInBytes)
{
    return slot_set((void *)vg__lt_layout(matLayout), layout_slots, NSLOTS(layout_slots), attr,
                    buf, sizeInBytes);
}

VG_API cublasStatus_t cublasLtMatrixLayoutGetAttribute(cublasLtMatrixLayout_t matLayout,
                                                       cublasLtMatrixLayoutAttribute_t attr,
                                                       void *buf, size_t sizeInBytes,
                                                       size_t *sizeWritten)
{
    return slot_get(vg__lt_layout(matLayout), layout_slots, NSLOTS(layout_slots), attr, buf,
                    sizeInBytes, sizeWritten);
}

/* ---- preference ---- */

const lt_pref_t *vg__lt_pref(cublasLtMatmulPreference_t p)
{
    const lt_pref_t *x = (const lt_pref_t *)p;
    return x && x->magic == LT_PREF_MAGIC ? x : NULL;
}

VG_API cublasStatus_t cublasLtMatmulPreferenceInit_internal(cublasLtMatmulPreference_t pref,
                                                            size_t size)
{
    if (!pref || size < sizeof(lt_pref_t)) {
        return CUBLAS_STATUS_ALLOC_FAILED;
    }
    lt_pref_t *p = (lt_pref_t *)pref;
    memset(p, 0, sizeof *p);
    p->search_mode = CUBLASLT_SEARCH_BEST_FIT;
    p->max_ws = 0;
    p->reduction_mask = CUBLASLT_REDUCTION_SCHEME_MASK;
    for (int i = 0; i < 4; i++) {
        p->min_align[i] = 256;
    }
    p->impl_mask = UINT64_MAX;
    p->magic = LT_PREF_MAGIC;
    return CUBLAS_STATUS_SUCCESS;
}

VG_API cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref)
{
    if (!pref) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    cublasLtMatmulPreference_t p = malloc(sizeof *p);
    if (!p) {
        return CUBLAS_STATUS_ALLOC_FAILED;
    }
    cublasLtMatmulPreferenceInit_internal(p, sizeof *p);
    *pref = p;
    return CUBLAS_STATUS_SUCCESS;
}

VG_API cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref)
{
    if (pref) {
        ((lt_pref_t *)pref)->magic = 0;
        free(pref);
    }
    return CUBLAS_STATUS_SUCCESS;
}

VG_API cublasStatus_t cublasLtMatmulPreferenceSetAttribute(
    cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const void *buf,
    size_t sizeInBytes)
{
    return slot_set((void *)vg__lt_pref(pref), pref_slots, NSLOTS(pref_slots), attr, buf,
                    sizeInBytes);
}

VG_API cublasStatus_t cublasLtMatmulPreferenceGetAttribute(
    cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, void *buf,
    size_t sizeInBytes, size_t *sizeWritten)
{
    return slot_get(vg__lt_pref(pref), pref_slots, NSLOTS(pref_slots), attr, buf, sizeInBytes,
                    sizeWritten);
}
