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

VG_API cublasStatus_t vg_gemm_set_types(vg_gemm_call_t *call, cudaDataType_t at,
                                        cudaDataType_t bt, cudaDataType_t ct,
                                        cublasComputeType_t compute, int tf32_math)
{
    vg_gemm_desc_t *g = &call->g;
    if (at != bt || at != ct) {
        /* The only mixed combinations: 16-bit inputs with an fp32 C under fp32 compute. */
        int mixed_ok = at == bt && ct == CUDA_R_32F && (at == CUDA_R_16F || at == CUDA_R_16BF) &&
                       (compute == CUBLAS_COMPUTE_32F || compute == CUBLAS_COMPUTE_32F_PEDANTIC);
        if (!mixed_ok) {
            return CUBLAS_STATUS_NOT_SUPPORTED;
        }
    }
    switch (at) {
    case CUDA_R_32F: g->a_type = VG_GEMM_F32; break;
    case CUDA_R_16F: g->a_type = VG_GEMM_F16; break;
    case CUDA_R_16BF: g->a_type = VG_GEMM_BF16; break;
    default: return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    g->b_type = g->a_type;
    g->c_type = ct == CUDA_R_32F ? VG_GEMM_F32 : g->a_type;
    g->d_type = g->c_type;
    call->scalar_type = VG_GEMM_F32;
    switch (compute) {
    case CUBLAS_COMPUTE_32F:
    case CUBLAS_COMPUTE_32F_PEDANTIC:
        switch (g->a_type) {
        case VG_GEMM_F32:
            /* The handle's TF32 math mode applies to the default (not pedantic) type. */
            call->dtype_bits = tf32_math && compute == CUBLAS_COMPUTE_32F ? 19 : 32;
            break;
        case VG_GEMM_F16: call->dtype_bits = 16; break;
        case VG_GEMM_BF16: call->dtype_bits = 17; break;
        }
        return CUBLAS_STATUS_SUCCESS;
    case CUBLAS_COMPUTE_32F_FAST_16F:
    case CUBLAS_COMPUTE_32F_FAST_16BF:
    case CUBLAS_COMPUTE_32F_FAST_TF32:
        if (g->a_type != VG_GEMM_F32) {
            return CUBLAS_STATUS_NOT_SUPPORTED;
        }
        call->dtype_bits = compute == CUBLAS_COMPUTE_32F_FAST_16F    ? 16
                           : compute == CUBLAS_COMPUTE_32F_FAST_16BF ? 17
                                                                     : 19;
        return CUBLAS_STATUS_SUCCESS;
    case CUBLAS_COMPUTE_16F:
    case CUBLAS_COMPUTE_16F_PEDANTIC:
        /* Computed with an fp32 accumulator: more accurate than a GPU's fp16 one. */
        if (g->a_type != VG_GEMM_F16 || g->c_type != VG_GEMM_F16) {
            return CUBLAS_STATUS_NOT_SUPPORTED;
        }
        call->scalar_type = VG_GEMM_F16;
        call->dtype_bits = 16;
        return CUBLAS_STATUS_SUCCESS;
    default:
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
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

/* Declares every range of the call; stops at the first bad one. */
static cublasStatus_t add_ranges(vg_op_t *op, const vg_gemm_call_t *call)
{
    const vg_gemm_desc_t *g = &call->g;
    const char *api = call->api;
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    size_t ssz = vg_gemm_type_size(call->scalar_type);
    int product = g->k > 0 && (call->alpha_dev || g->alpha != 0.0f);
#define ADD(expr)                                                                              \
    do {                                                                                       \
        if ((st = (expr)) != CUBLAS_STATUS_SUCCESS) {                                          \
            return st;                                                                         \
        }                                                                                      \
    } while (0)
    if (call->alpha_dev) {
        ADD(add_checked(op, api, "alpha (device pointer mode)", call->alpha_dev, ssz, 0));
    }
    if (call->beta_dev) {
        ADD(add_checked(op, api, "beta (device pointer mode)", call->beta_dev, ssz, 0));
    }
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
#undef ADD
    return st;
}

static float read_scalar(const void *p, vg_gemm_type_t t)
{
    uint16_t h;
    float f;
    if (t == VG_GEMM_F16) {
        memcpy(&h, p, sizeof h);
        return vg_gemm_f16_to_f32(h);
    }
    memcpy(&f, p, sizeof f);
    return f;
}

/* Runs at the op's start in virtual time, with the device lock held: device scalars are
 * read now, as a GPU kernel reads them when it runs. */
static void gemm_exec(vg_op_t *op)
{
    const vg_gemm_call_t *call = op->payload;
    vg_gemm_desc_t g = call->g;
    if (call->alpha_dev) {
        g.alpha = read_scalar(call->alpha_dev, call->scalar_type);
    }
    if (call->beta_dev) {
        g.beta = read_scalar(call->beta_dev, call->scalar_type);
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
