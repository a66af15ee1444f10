/*
 * lt.h: cuBLASLt descriptors of the vgpu (libcublasLt.so.13), internal to the library.
 *
 * Each descriptor lives in the opaque storage the header gives it (so that the inline
 * cublasLt*Init functions work on caller-provided memory) and starts with a magic that
 * tells a live descriptor of the right kind from anything else. Attributes are stored with
 * exactly the size cublasLt.h documents; lt_desc.c maps each attribute to its field.
 * A descriptor is not thread-safe: cuBLASLt leaves concurrent use to the caller.
 */
#ifndef VG_LT_H
#define VG_LT_H

#include <stdint.h>

#include <cublasLt.h>

#include "cublas/blas.h"

#define LT_DESC_MAGIC 0x764c7444u   /* "vLtD" */
#define LT_LAYOUT_MAGIC 0x764c744cu /* "vLtL" */
#define LT_PREF_MAGIC 0x764c7450u   /* "vLtP" */
#define LT_ALGO_MAGIC 0x766c74616c676fULL /* "vltalgo": cublasLtMatmulAlgo_t.data[0] */

/* Workspace the vgpu's algorithm uses: K at least LT_SPLITK_MIN_K is split (as cuBLASLt
 * does for long reductions) and needs LT_SPLITK_WS bytes; shorter K needs none. */
#define LT_SPLITK_MIN_K 1024
#define LT_SPLITK_WS ((size_t)1 << 20)

typedef struct lt_desc {
    uint32_t magic;
    int32_t compute_type;
    int32_t scale_type;
    int32_t pointer_mode;
    int32_t transa, transb, transc;
    int32_t fill_mode;
    uint32_t epilogue;
    int32_t sm_count_target;
    int32_t aux_type;                  /* -1: D's type */
    int32_t bias_type;                 /* -1: D's type */
    int8_t fast_accum;
    int32_t scale_modes[6];            /* A, B, C, D, aux, D out: recorded, unused */
    const void *bias;
    int64_t bias_batch_stride;
    void *aux;
    int64_t aux_ld, aux_batch_stride;
    int64_t alpha_vector_batch_stride;
    const void *scale_ptrs[8];         /* A, B, C, D, amax D, aux scale, aux amax, D out:
                                          fp8 scaling, which the vgpu does not support */
    void *emulation_desc;
} lt_desc_t;

typedef struct lt_layout {
    uint32_t magic;
    uint32_t type;                     /* cudaDataType */
    int32_t order;
    int32_t batch_count;
    uint64_t rows, cols;
    int64_t ld;
    int64_t batch_stride;
    int64_t plane_offset;
    uint32_t batch_mode;
} lt_layout_t;

typedef struct lt_pref {
    uint32_t magic;
    uint32_t search_mode;
    uint64_t max_ws;
    uint32_t reduction_mask;
    uint32_t min_align[4];             /* A, B, C, D */
    float max_waves;
    uint64_t impl_mask;
} lt_pref_t;

/* A cublasLtMatmulAlgo_t as the vgpu fills it (cublasLtMatmulAlgoInit, the heuristic). The
 * vgpu has one algorithm, LT_ALGO_ID; its workspace need follows its split-K configuration
 * (lt_algo.c). Config fields have the types cublasLt.h documents for
 * cublasLtMatmulAlgoConfigAttributes_t. */
#define LT_ALGO_ID 0
#define LT_SPLITK_NUM 4             /* the heuristic's split when it splits K */
typedef struct lt_algo {
    uint64_t magic;                 /* LT_ALGO_MAGIC (data[0]) */
    uint64_t ws;                    /* workspace bytes the algo needs (data[1]) */
    int32_t id;                     /* CUBLASLT_ALGO_CONFIG_ID (read-only) */
    uint32_t tile_id;
    int32_t splitk_num;
    uint32_t reduction_scheme;
    uint32_t cta_swizzling;
    uint32_t custom_option;
    uint32_t stages_id;
    uint16_t inner_shape_id;
    uint16_t cluster_shape_id;
} lt_algo_t;

_Static_assert(sizeof(lt_algo_t) <= sizeof(cublasLtMatmulAlgo_t), "algo too large");
_Static_assert(sizeof(lt_desc_t) <= sizeof(cublasLtMatmulDescOpaque_t), "desc too large");
_Static_assert(sizeof(lt_layout_t) <= sizeof(cublasLtMatrixLayoutOpaque_t), "layout too large");
_Static_assert(sizeof(lt_pref_t) <= sizeof(cublasLtMatmulPreferenceOpaque_t), "pref too large");

/* The live descriptor behind an API handle, or NULL (NULL, destroyed or wrong kind). */
const lt_desc_t *vg__lt_desc(cublasLtMatmulDesc_t d);
const lt_layout_t *vg__lt_layout(cublasLtMatrixLayout_t l);
const lt_pref_t *vg__lt_pref(cublasLtMatmulPreference_t p);

/* Checks the types of a matmul (compute, scale, A, B, C, D) as cuBLASLt would for the
 * vgpu's one algorithm and fills call's types: NOT_SUPPORTED for fp8/fp4 inputs (with a
 * "vgpu does not implement" line), combinations outside cuBLAS's type table, D of another
 * type than C, or a scale type other than the compute type's. */
cublasStatus_t vg__lt_check_types(vg_gemm_call_t *call, int32_t compute, int32_t scale,
                                  uint32_t at, uint32_t bt, uint32_t ct, uint32_t dt);

/* The algo the vgpu's heuristic picks: LT_ALGO_ID, splitting K (LT_SPLITK_NUM parts, partial
 * sums in the compute type) when the problem's K needs it and ws > 0 bytes are allowed. */
void vg__lt_algo_fill(cublasLtMatmulAlgo_t *algo, size_t ws);

/* The vgpu's view of algo, or NULL when algo was not filled by the vgpu. */
const lt_algo_t *vg__lt_algo(const cublasLtMatmulAlgo_t *algo);

#endif
