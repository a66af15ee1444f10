/*
 * gemm_op.c: one cuBLAS / cuBLASLt GEMM call as one vgpu operation (contract in gemm.h).
 *
 * The API libraries validate their own arguments (handles, dimensions, leading dimensions,
 * descriptors) and describe the call in a vg_gemm_call_t; everything they have in common
 * lives here so that cuBLAS and cuBLASLt GEMMs are named, timed, checked and computed the
 * same way. The operation owns a copy of the call: nothing the caller passed by pointer
 * (descriptors, host scalars) is looked at again after the API call returns.
 */
#include <stdio.h>
#include <string.h>

#include "gemm.h"

/* cuBLAS's table of type combinations (NVIDIA cuBLAS documentation, cublasGemmEx(): compute
 * type, scale type, Atype/Btype, Ctype), as (compute family, A=B type, C type):
 *   16F[_PEDANTIC]: 16F, 16F
 *   32I[_PEDANTIC]: 8I, 32I                                       (not computed by the vgpu)
 *   32F[_PEDANTIC]: 16BF, 16BF | 16F, 16F | 8I, 32F | 16BF, 32F | 16F, 32F | 32F, 32F
 *                   C_8I, C_32F | C_32F, C_32F                    (8I and complex: not computed)
 *   32F_FAST_16F / _FAST_16BF / _FAST_TF32 / _EMULATED_16BFX9: 32F, 32F | C_32F, C_32F
 *   64F[_PEDANTIC] / 64F_EMULATED_FIXEDPOINT: 64F, 64F | C_64F, C_64F
 * Anything else is CUBLAS_STATUS_NOT_SUPPORTED, as in cuBLAS. A combination cuBLAS computes
 * but the vgpu does not is NOT_SUPPORTED too, with one "vgpu does not implement" line so
 * that a test can tell the two apart. */
enum { ROW_NONE, ROW_VGPU, ROW_CUBLAS_ONLY };

static int table_row(cudaDataType_t ab, cudaDataType_t c, cublasComputeType_t compute)
{
    switch (compute) {
    case CUBLAS_COMPUTE_16F:
    case CUBLAS_COMPUTE_16F_PEDANTIC:
        return ab == CUDA_R_16F && c == CUDA_R_16F ? ROW_VGPU : ROW_NONE;
    case CUBLAS_COMPUTE_32I:
    case CUBLAS_COMPUTE_32I_PEDANTIC:
        return ab == CUDA_R_8I && c == CUDA_R_32I ? ROW_CUBLAS_ONLY : ROW_NONE;
    case CUBLAS_COMPUTE_32F:
    case CUBLAS_COMPUTE_32F_PEDANTIC:
        if ((ab == CUDA_R_16BF || ab == CUDA_R_16F) && (c == ab || c == CUDA_R_32F)) {
            return ROW_VGPU;
        }
        if (ab == CUDA_R_32F && c == CUDA_R_32F) {
            return ROW_VGPU;
        }
        if ((ab == CUDA_R_8I && c == CUDA_R_32F) || (ab == CUDA_C_8I && c == CUDA_C_32F) ||
            (ab == CUDA_C_32F && c == CUDA_C_32F)) {
            return ROW_CUBLAS_ONLY;
        }
        return ROW_NONE;
    case CUBLAS_COMPUTE_32F_FAST_16F:
    case CUBLAS_COMPUTE_32F_FAST_16BF:
    case CUBLAS_COMPUTE_32F_FAST_TF32:
    case CUBLAS_COMPUTE_32F_EMULATED_16BFX9:
        if (ab == CUDA_R_32F && c == CUDA_R_32F) {
            return ROW_VGPU;
        }
        return ab == CUDA_C_32F && c == CUDA_C_32F ? ROW_CUBLAS_ONLY : ROW_NONE;
    case CUBLAS_COMPUTE_64F:
    case CUBLAS_COMPUTE_64F_PEDANTIC:
    case CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT:
        if (ab == CUDA_R_64F && c == CUDA_R_64F) {
            return ROW_VGPU;
        }
        return ab == CUDA_C_64F && c == CUDA_C_64F ? ROW_CUBLAS_ONLY : ROW_NONE;
    default:
        return ROW_NONE;
    }
}

static vg_gemm_type_t storage_type(cudaDataType_t t)
{
    switch (t) {
    case CUDA_R_16F: return VG_GEMM_F16;
    case CUDA_R_16BF: return VG_GEMM_BF16;
    case CUDA_R_64F: return VG_GEMM_F64;
    default: return VG_GEMM_F32;
    }
}

VG_API cublasStatus_t vg_gemm_set_types(vg_gemm_call_t *call, cudaDataType_t at,
                                        cudaDataType_t bt, cudaDataType_t ct,
                                        cublasComputeType_t compute, int tf32_math)
{
    vg_gemm_desc_t *g = &call->g;
    int row = at == bt ? table_row(at, ct, compute) : ROW_NONE;
    if (row == ROW_CUBLAS_ONLY) {
        vg_msg("%s: vgpu does not implement A/B type %d, C type %d with compute type %d "
               "(cuBLAS does)", call->api ? call->api : "GEMM", (int)at, (int)ct, (int)compute);
    }
    if (row != ROW_VGPU) {
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    g->a_type = g->b_type = storage_type(at);
    g->c_type = g->d_type = storage_type(ct);
    call->scalar_type = VG_GEMM_F32;
    switch (compute) {
    case CUBLAS_COMPUTE_16F:
    case CUBLAS_COMPUTE_16F_PEDANTIC:
        /* Computed with an fp32 accumulator: more accurate than a GPU's fp16 one. */
        call->scalar_type = VG_GEMM_F16;
        call->dtype_bits = 16;
        break;
    case CUBLAS_COMPUTE_32F_FAST_16F: call->dtype_bits = 16; break;
    case CUBLAS_COMPUTE_32F_FAST_16BF: call->dtype_bits = 17; break;
    case CUBLAS_COMPUTE_32F_FAST_TF32: call->dtype_bits = 19; break;
    case CUBLAS_COMPUTE_64F:
    case CUBLAS_COMPUTE_64F_PEDANTIC:
    case CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT:
        call->scalar_type = VG_GEMM_F64;
        call->dtype_bits = 64;
        break;
    default:   /* 32F, 32F_PEDANTIC, 32F_EMULATED_16BFX9: full fp32 on the vgpu */
        switch (g->a_type) {
        case VG_GEMM_F16: call->dtype_bits = 16; break;
        case VG_GEMM_BF16: call->dtype_bits = 17; break;
        default:
            /* The handle's TF32 math mode applies to the default (not pedantic) type. */
            call->dtype_bits = tf32_math && compute == CUBLAS_COMPUTE_32F ? 19 : 32;
            break;
        }
        break;
    }
    return CUBLAS_STATUS_SUCCESS;
}

/* Bytes from the first to one past the last element of a strided batch of rows x cols
 * column-major matrices; *lo (elements, <= 0) is where the span starts relative to the
 * pointer, which matters only for a negative batch stride. rows, cols, batch >= 1. */
static size_t span_bytes(int64_t rows, int64_t cols, int64_t ld, int64_t stride, int64_t batch,
                         size_t esz, int64_t *lo)
{
    int64_t one = (cols - 1) * ld + rows;
    int64_t first = 0, last = one;
    if (batch > 1) {
        if (stride >= 0) {
            last = (batch - 1) * stride + one;
        } else {
            first = (batch - 1) * stride;
        }
    }
    *lo = first;
    return (size_t)(last - first) * esz;
}

/* Declares [p, p+len) on op after checking it lies in one live device-visible allocation;
 * otherwise prints which argument is wrong and returns CUBLAS_STATUS_INVALID_VALUE. */
static cublasStatus_t add_checked(vg_op_t *op, const char *api, const char *arg, const void *p,
                                  size_t len, int write)
{
    vg_alloc_info_t info;
    memset(&info, 0, sizeof info);
    int r = p ? vg_mem_find(p, len, &info) : 0;
    if (r == 1) {
        vg_op_add_range(op, p, len, write);
        return CUBLAS_STATUS_SUCCESS;
    }
    if (!p) {
        vg_msg("%s: %s is NULL", api, arg);
    } else if (r < 0) {
        vg_msg("%s: %s=%p (%zu bytes) lies in freed allocation #%llu (base %p, %zu bytes): "
               "use after free", api, arg, p, len, (unsigned long long)info.serial,
               (void *)info.base, info.size);
    } else {
        vg_msg("%s: %s=%p (%zu bytes) is not inside one live device allocation", api, arg, p,
               len);
    }
    return CUBLAS_STATUS_INVALID_VALUE;
}

static cublasStatus_t add_matrix(vg_op_t *op, const char *api, const char *arg, const void *p,
                                 vg_gemm_type_t t, int64_t rows, int64_t cols, int64_t ld,
                                 int64_t stride, int64_t batch, int write)
{
    int64_t lo;
    size_t esz = vg_gemm_type_size(t);
    size_t len = span_bytes(rows, cols, ld, stride, batch, esz, &lo);
    const void *start = p ? (const char *)p + lo * (int64_t)esz : NULL;
    return add_checked(op, api, arg, start, len, write);
}

#define ADD(expr)                                                                              \
    do {                                                                                       \
        if ((st = (expr)) != CUBLAS_STATUS_SUCCESS) {                                          \
            return st;                                                                         \
        }                                                                                      \
    } while (0)

/* Declares A, B, C and D of g (a whole strided batch, or one entry of a pointer-array
 * batch); product: op(A)*op(B) contributes, so A and B are read. */
static cublasStatus_t add_operands(vg_op_t *op, const vg_gemm_call_t *call,
                                   const vg_gemm_desc_t *g, int product)
{
    const char *api = call->api;
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    if (product) {
        ADD(add_matrix(op, api, "A", g->a, g->a_type, g->trans_a ? g->k : g->m,
                       g->trans_a ? g->m : g->k, g->lda, g->stride_a, g->batch, 0));
        ADD(add_matrix(op, api, "B", g->b, g->b_type, g->trans_b ? g->n : g->k,
                       g->trans_b ? g->k : g->n, g->ldb, g->stride_b, g->batch, 0));
    }
    int c_separate = g->c != g->d || g->ldc != g->ldd || g->stride_c != g->stride_d ||
                     g->c_type != g->d_type;
    if (!call->beta_is_zero && c_separate) {
        ADD(add_matrix(op, api, "C", g->c, g->c_type, g->m, g->n, g->ldc, g->stride_c, g->batch,
                       0));
    }
    /* D is written; when it is C, the write covers the read of beta*C. */
    ADD(add_matrix(op, api, c_separate ? "D" : "C", g->d, g->d_type, g->m, g->n, g->ldd,
                   g->stride_d, g->batch, 1));
    return st;
}

/* Entry e of a pointer-array batch: g with the pointers the arrays hold now. */
static vg_gemm_desc_t array_entry(const vg_gemm_call_t *call, int64_t e)
{
    vg_gemm_desc_t x = call->g;
    x.batch = 1;
    x.stride_a = x.stride_b = x.stride_c = x.stride_d = 0;
    memcpy(&x.a, &call->a_array[e], sizeof x.a);
    memcpy(&x.b, &call->b_array[e], sizeof x.b);
    memcpy(&x.c, &call->c_array[e], sizeof x.c);
    x.d = (void *)x.c;
    return x;
}

/* The three pointer arrays, read when the GEMM runs. Their entries are not read at the
 * call: as on a GPU, a program may fill the arrays with an asynchronous copy on the same
 * stream just before the call (NVIDIA's gemmBatched sample does); the entries' matrices are
 * declared when the op starts (resolve_arrays). */
static cublasStatus_t add_arrays(vg_op_t *op, const vg_gemm_call_t *call)
{
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    size_t bytes = (size_t)call->g.batch * sizeof(void *);
    ADD(add_checked(op, call->api, "Aarray", call->a_array, bytes, 0));
    ADD(add_checked(op, call->api, "Barray", call->b_array, bytes, 0));
    ADD(add_checked(op, call->api, "Carray", call->c_array, bytes, 0));
    return st;
}

/* Declares every range of the call; stops at the first bad one. */
static cublasStatus_t add_ranges(vg_op_t *op, const vg_gemm_call_t *call)
{
    const vg_gemm_desc_t *g = &call->g;
    const char *api = call->api;
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    size_t ssz = vg_gemm_type_size(call->scalar_type);
    int product = g->k > 0 && (call->alpha_dev || g->alpha != 0.0);
    if (call->alpha_dev) {
        ADD(add_checked(op, api, "alpha (device pointer mode)", call->alpha_dev, ssz, 0));
    }
    if (call->beta_dev) {
        ADD(add_checked(op, api, "beta (device pointer mode)", call->beta_dev, ssz, 0));
    }
    ADD(call->a_array ? add_arrays(op, call) : add_operands(op, call, g, product));
    if (g->epilogue & VG_GEMM_EPI_BIAS) {
        ADD(add_matrix(op, api, "bias", g->bias, g->bias_type, g->m, 1, g->m, g->stride_bias,
                       g->batch, 0));
    }
    if (g->epilogue & VG_GEMM_EPI_AUX) {
        ADD(add_matrix(op, api, "epilogue aux", g->aux, g->aux_type, g->m, g->n, g->ld_aux,
                       g->stride_aux, g->batch, 1));
    }
    if (call->ws && call->ws_bytes > 0) {
        ADD(add_checked(op, api, "workspace", call->ws, call->ws_bytes, 1));
    }
    return st;
}
#undef ADD

/* Bytes of one column-major matrix. */
static size_t span_len(vg_gemm_type_t t, int64_t rows, int64_t cols, int64_t ld)
{
    int64_t lo;
    return span_bytes(rows, cols, ld, 0, 1, vg_gemm_type_size(t), &lo);
}

/* Whether one matrix of a pointer-array entry lies in live device memory when the GEMM
 * runs (the arrays may have been rewritten since the call). */
static int matrix_live(const void *p, vg_gemm_type_t t, int64_t rows, int64_t cols, int64_t ld)
{
    int64_t lo;
    size_t len = span_bytes(rows, cols, ld, 0, 1, vg_gemm_type_size(t), &lo);
    return p && vg_mem_find(p, len, NULL) == 1;
}

/* At start: every entry's matrices as the arrays hold them now, for the hazard detector.
 * An entry outside live device memory declares nothing (run_arrays reports and skips it). */
static void resolve_arrays(vg_op_t *op)
{
    const vg_gemm_call_t *call = op->payload;
    for (int64_t e = 0; e < call->g.batch; e++) {
        vg_gemm_desc_t x = array_entry(call, e);
        int product = x.k > 0 && (call->alpha_dev || x.alpha != 0.0);
        if ((product && (!matrix_live(x.a, x.a_type, x.trans_a ? x.k : x.m,
                                      x.trans_a ? x.m : x.k, x.lda) ||
                         !matrix_live(x.b, x.b_type, x.trans_b ? x.n : x.k,
                                      x.trans_b ? x.k : x.n, x.ldb))) ||
            !matrix_live(x.c, x.c_type, x.m, x.n, x.ldc))
            continue;
        if (product) {
            vg_op_add_range(op, x.a, span_len(x.a_type, x.trans_a ? x.k : x.m,
                                              x.trans_a ? x.m : x.k, x.lda), 0);
            vg_op_add_range(op, x.b, span_len(x.b_type, x.trans_b ? x.n : x.k,
                                              x.trans_b ? x.k : x.n, x.ldb), 0);
        }
        vg_op_add_range(op, x.c, span_len(x.c_type, x.m, x.n, x.ldc), 1);
    }
}

/* Runs a pointer-array batch entry by entry with the pointers the arrays hold now; an entry
 * whose matrices are not live device memory is skipped with a message. */
static void run_arrays(const vg_op_t *op, const vg_gemm_call_t *call, double alpha,
                       double beta)
{
    for (int64_t e = 0; e < call->g.batch; e++) {
        vg_gemm_desc_t x = array_entry(call, e);
        x.alpha = alpha;
        x.beta = beta;
        int product = x.k > 0 && alpha != 0.0;
        if ((product && (!matrix_live(x.a, x.a_type, x.trans_a ? x.k : x.m,
                                      x.trans_a ? x.m : x.k, x.lda) ||
                         !matrix_live(x.b, x.b_type, x.trans_b ? x.n : x.k,
                                      x.trans_b ? x.k : x.n, x.ldb))) ||
            !matrix_live(x.c, x.c_type, x.m, x.n, x.ldc)) {
            vg_msg("%s: %s: batch entry %lld points outside live device memory when it runs; "
                   "entry skipped", op->api, op->name, (long long)e);
            continue;
        }
        if (vg_gemm_run(&x) != 0) {
            vg_msg("%s: %s: out of host memory, output left unchanged", op->api, op->name);
        }
    }
}

VG_API double vg_gemm_read_scalar(const void *p, vg_gemm_type_t t)
{
    uint16_t h;
    float f;
    double d;
    switch (t) {
    case VG_GEMM_F16:
        memcpy(&h, p, sizeof h);
        return vg_gemm_f16_to_f32(h);
    case VG_GEMM_F64:
        memcpy(&d, p, sizeof d);
        return d;
    default:
        memcpy(&f, p, sizeof f);
        return f;
    }
}

/* Runs at the op's start in virtual time, with the device lock held: device scalars are
 * read now, as a GPU kernel reads them when it runs. */
static void gemm_exec(vg_op_t *op)
{
    const vg_gemm_call_t *call = op->payload;
    vg_gemm_desc_t g = call->g;
    if (call->alpha_dev) {
        g.alpha = vg_gemm_read_scalar(call->alpha_dev, call->scalar_type);
    }
    if (call->beta_dev) {
        g.beta = vg_gemm_read_scalar(call->beta_dev, call->scalar_type);
    }
    if (call->a_array) {
        run_arrays(op, call, g.alpha, g.beta);
        return;
    }
    if (vg_gemm_run(&g) != 0) {
        vg_msg("%s: %s: out of host memory, output left unchanged", op->api, op->name);
    }
}

static void name_op(vg_op_t *op, const vg_gemm_call_t *call)
{
    const vg_gemm_desc_t *g = &call->g;
    char types[16], batch[24] = "", epi[24] = "";
    if (g->d_type != g->a_type) {
        snprintf(types, sizeof types, "%s_%s", vg_gemm_type_name(g->a_type),
                 vg_gemm_type_name(g->d_type));
    } else {
        snprintf(types, sizeof types, "%s", vg_gemm_type_name(g->a_type));
    }
    if (g->batch > 1) {
        snprintf(batch, sizeof batch, "_b%lld", (long long)g->batch);
    }
    if (g->epilogue) {
        snprintf(epi, sizeof epi, "%s%s%s", (g->epilogue & VG_GEMM_EPI_BIAS) ? "_bias" : "",
                 (g->epilogue & VG_GEMM_EPI_RELU) ? "_relu" : "",
                 (g->epilogue & VG_GEMM_EPI_GELU) ? "_gelu" : "");
    }
    /* Composed at full length, then cut to the op's name field (huge dimensions only). */
    char full[160];
    snprintf(full, sizeof full, "gemm_%s_%c%c_m%lldn%lldk%lld%s%s", types,
             g->trans_a ? 'T' : 'N', g->trans_b ? 'T' : 'N', (long long)g->m, (long long)g->n,
             (long long)g->k, batch, epi);
    size_t len = strnlen(full, sizeof op->name - 1);
    memcpy(op->name, full, len);
    op->name[len] = '\0';
    snprintf(op->trace_args, sizeof op->trace_args,
             "\"m\":%lld,\"n\":%lld,\"k\":%lld,\"batch\":%lld,\"ws\":%zu", (long long)g->m,
             (long long)g->n, (long long)g->k, (long long)g->batch,
             call->ws ? call->ws_bytes : (size_t)0);
}

static double solo_ns(const vg_gemm_call_t *call)
{
    const vg_gemm_desc_t *g = &call->g;
    const vgpu_profile_t *p = vg_profile(call->dev);
    if (g->k == 0 || (!call->alpha_dev && g->alpha == 0.0f)) {
        /* Only beta*C: a memory-bound pass over C and D. */
        double elems = (double)g->m * (double)g->n * (double)g->batch;
        return vg_cost_mem(p, elems * (double)(vg_gemm_type_size(g->c_type) +
                                               vg_gemm_type_size(g->d_type)));
    }
    return vg_cost_gemm(p, (double)g->m, (double)g->n, (double)g->k, (double)g->batch,
                        call->dtype_bits);
}

VG_API cublasStatus_t vg_gemm_submit(const vg_gemm_call_t *call, cudaStream_t s)
{
    const vg_gemm_desc_t *g = &call->g;
    if (g->m == 0 || g->n == 0 || g->batch == 0) {
        return CUBLAS_STATUS_SUCCESS;
    }
    /* The GEMM's kernel is launched through the runtime on the calling thread's current
     * device; a stream of another device fails that launch (vg_stream_check_current), which
     * cuBLAS reports as CUBLAS_STATUS_EXECUTION_FAILED ("the GPU program failed to execute.
     * This is often caused by a launch failure of the kernel on the GPU", cuBLAS docs,
     * cublasStatus_t). Whether cuBLAS consumes the runtime's error with cudaGetLastError is
     * not documented; the vgpu leaves it as the thread's last error, as the failed runtime
     * launch itself would. */
    cudaError_t se = vg_stream_check_current(s, call->api);
    if (se != cudaSuccess) {
        vg_record_error(se);
        return CUBLAS_STATUS_EXECUTION_FAILED;
    }
    /* Otherwise the op belongs to the handle's device, whatever device is current. */
    int prev = vg_current_device();
    int switched = prev != call->dev && vg_set_device(call->dev) == cudaSuccess;
    vg_op_t *op = vg_op_new(call->api, VG_COMPUTE);
    cublasStatus_t st = add_ranges(op, call);
    if (st != CUBLAS_STATUS_SUCCESS) {
        vg_op_discard(op);
    } else {
        vg_gemm_call_t *copy = vg_op_payload(op, sizeof *copy);
        *copy = *call;
        name_op(op, call);
        op->solo_ns = solo_ns(call);
        op->exec = gemm_exec;
        op->resolve = call->a_array ? resolve_arrays : NULL;
        if (vg_submit_unchecked(s, op) != cudaSuccess) {
            st = CUBLAS_STATUS_EXECUTION_FAILED;
        }
    }
    if (switched) {
        vg_set_device(prev);
    }
    return st;
}

VG_API const char *vg_gemm_status_name(cublasStatus_t st)
{
    switch (st) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    }
    return "CUBLAS_STATUS_UNKNOWN";
}

VG_API const char *vg_gemm_status_string(cublasStatus_t st)
{
    switch (st) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid value was used as an argument";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "the device lacks a required architectural feature";
    case CUBLAS_STATUS_MAPPING_ERROR: return "an access to GPU memory space failed";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    case CUBLAS_STATUS_LICENSE_ERROR: return "a license check failed";
    }
    return "unknown cuBLAS status";
}
