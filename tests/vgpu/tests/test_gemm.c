/*
 * test_gemm.c (vgpu.gemm): the reference math of libvgpu (core/gemm.h), called directly
 * on host memory: type conversions against independent references, GELU, and the GEMM
 * against float64 for every type, transpose, leading dimension, batch stride, alpha/beta
 * case and epilogue, plus bit-reproducibility independent of blocking.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/gemm.h"
#include "gemm_common.h"

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float ffrom(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Both NaN with the same sign and quiet, or the same bits. */
static int same_float(float got, float want)
{
    if (isnan(want)) {
        return isnan(got) && signbit(got) == signbit(want) && (fbits(got) & 0x400000u);
    }
    return fbits(got) == fbits(want);
}

static int same_half(uint16_t got, uint16_t want, int bf16)
{
    uint16_t exp_mask = bf16 ? 0x7f80u : 0x7c00u, man_mask = bf16 ? 0x7fu : 0x3ffu;
    uint16_t quiet = bf16 ? 0x40u : 0x200u;
    if ((want & exp_mask) == exp_mask && (want & man_mask)) {
        return (got & exp_mask) == exp_mask && (got & quiet) && (got & 0x8000u) == (want & 0x8000u);
    }
    return got == want;
}

/* ---- conversions ---- */

static void test_f16_widen_exhaustive(void **state)
{
    for (uint32_t u = 0; u < 0x10000u; u++) {
        float got = vg_gemm_f16_to_f32((uint16_t)u), want = gt_f16_to_float((uint16_t)u);
        if (!same_float(got, want)) {
            fail_msg("f16 0x%04x: got %a (0x%08x), want %a (0x%08x)", u, got, fbits(got), want,
                     fbits(want));
        }
    }
}

/* Floats to try when narrowing to a 16-bit type: a sweep over
 * the whole float range, and for every pair of neighbouring 16-bit values the exact
 * midpoint (a tie) and the floats just around it. */
static void check_narrow(int bf16)
{
    uint16_t (*lib)(float) = bf16 ? vg_gemm_f32_to_bf16 : vg_gemm_f32_to_f16;
    uint16_t (*ref)(float) = bf16 ? gt_bf16_from_float : gt_f16_from_float;
    float (*widen)(uint16_t) = bf16 ? gt_bf16_to_float : gt_f16_to_float;
    size_t tried = 0;
    for (uint64_t u = 0; u < 0x100000000ull; u += 65521) {
        float f = ffrom((uint32_t)u);
        uint16_t got = lib(f), want = ref(f);
        tried++;
        if (!same_half(got, want, bf16)) {
            fail_msg("%s(%a = 0x%08x): got 0x%04x, want 0x%04x", bf16 ? "bf16" : "f16", f,
                     (uint32_t)u, got, want);
        }
    }
    for (uint32_t h = 0; h < 0x10000u; h++) {
        float lo = widen((uint16_t)h), hi = widen((uint16_t)(h + 1));
        if (!isfinite(lo) || !isfinite(hi) || (h & 0x7fffu) == 0x7fffu) {
            continue;
        }
        double mid = ((double)lo + (double)hi) / 2;  /* exact in double */
        float fm = (float)mid;
        if ((double)fm != mid) {
            continue;   /* midpoints of f16 subnormals far below float's range do not occur */
        }
        float cand[3] = {fm, nextafterf(fm, -INFINITY), nextafterf(fm, INFINITY)};
        for (int c = 0; c < 3; c++) {
            uint16_t got = lib(cand[c]), want = ref(cand[c]);
            tried++;
            if (!same_half(got, want, bf16)) {
                fail_msg("%s(%a): got 0x%04x, want 0x%04x (between 0x%04x and 0x%04x)",
                         bf16 ? "bf16" : "f16", cand[c], got, want, h, h + 1);
            }
        }
    }
    assert_true(tried > 100000);
}

static void test_f16_narrow(void **state) { check_narrow(0); }

static void test_bf16_widen_exhaustive(void **state)
{
    for (uint32_t u = 0; u < 0x10000u; u++) {
        float got = vg_gemm_bf16_to_f32((uint16_t)u), want = gt_bf16_to_float((uint16_t)u);
        if (fbits(got) != fbits(want)) {
            fail_msg("bf16 0x%04x: got %a (0x%08x), want %a (0x%08x)", u, got, fbits(got), want,
                     fbits(want));
        }
    }
}

static void test_bf16_narrow(void **state) { check_narrow(1); }

static void test_special_values(void **state)
{
    /* Values whose rounding cuBLAS users depend on, spelled out. */
    assert_int_equal(vg_gemm_f32_to_f16(65504.0f), 0x7bff);
    assert_int_equal(vg_gemm_f32_to_f16(65519.99f), 0x7bff);
    assert_int_equal(vg_gemm_f32_to_f16(65520.0f), 0x7c00);      /* tie goes to even: inf */
    assert_int_equal(vg_gemm_f32_to_f16(-INFINITY), 0xfc00);
    assert_int_equal(vg_gemm_f32_to_f16(-0.0f), 0x8000);
    assert_int_equal(vg_gemm_f32_to_f16(0x1p-24f), 0x0001);      /* smallest subnormal */
    assert_int_equal(vg_gemm_f32_to_f16(0x1p-25f), 0x0000);      /* tie to even zero */
    assert_int_equal(vg_gemm_f32_to_f16(0x1.8p-24f), 0x0002);    /* tie 1.5 -> 2 */
    assert_int_equal(vg_gemm_f32_to_f16(0x1.ffcp-15f), 0x0400);  /* rounds up to normal */
    assert_int_equal(vg_gemm_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);        /* tie to even */
    assert_int_equal(vg_gemm_f32_to_f16(1.0f + 0x1.8p-10f), 0x3c02);      /* tie to even */
    assert_int_equal(vg_gemm_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);
    assert_int_equal(vg_gemm_f32_to_bf16(1.0f + 0x1.8p-7f), 0x3f82);
    assert_int_equal(vg_gemm_f32_to_bf16(0x1.ffp127f), 0x7f80);     /* last tie: to inf */
    assert_int_equal(vg_gemm_f32_to_bf16(-NAN) & 0xffc0, 0xffc0);
    assert_int_equal(vg_gemm_f32_to_f16(NAN) & 0x7e00, 0x7e00);
    assert_true(isnan(vg_gemm_f16_to_f32(0x7c01)));
    assert_int_equal(fbits(vg_gemm_f16_to_f32(0x0001)), fbits(0x1p-24f));
}

static void test_gelu(void **state)
{
    for (int i = -2000; i <= 2000; i++) {
        double x = i / 200.0;
        float got = vg_gemm_gelu((float)x);
        double xf = (float)x;
        double want = 0.5 * xf * (1.0 + tanh(0.7978845608028654 * (xf + 0.044715 * xf * xf * xf)));
        /* A dozen fp32 roundings plus tanhf's error, relative to |x|. */
        double bound = 0x1p-20 * fabs(xf) + 0x1p-126;
        if (!(fabs(got - want) <= bound)) {
            fail_msg("gelu(%g): got %.9g, want %.9g, bound %.3g", xf, got, want, bound);
        }
    }
}

/* ---- the GEMM ---- */

static vg_gemm_type_t vt(cudaDataType_t t)
{
    return t == CUDA_R_16F ? VG_GEMM_F16 : t == CUDA_R_16BF ? VG_GEMM_BF16 : VG_GEMM_F32;
}

static unsigned vepi(unsigned e)
{
    return ((e & GT_EPI_BIAS) ? VG_GEMM_EPI_BIAS : 0) | ((e & GT_EPI_RELU) ? VG_GEMM_EPI_RELU : 0) |
           ((e & GT_EPI_GELU) ? VG_GEMM_EPI_GELU : 0);
}

static vg_gemm_desc_t desc_of(const gt_gemm_t *g, void *out)
{
    vg_gemm_desc_t d = {0};
    d.m = g->m;
    d.n = g->n;
    d.k = g->k;
    d.batch = g->batch;
    d.trans_a = g->ta;
    d.trans_b = g->tb;
    d.a_type = d.b_type = vt(g->ab_type);
    d.c_type = d.d_type = vt(g->c_type);
    d.a = g->a;
    d.lda = g->lda;
    d.stride_a = g->sa;
    d.b = g->b;
    d.ldb = g->ldb;
    d.stride_b = g->sb;
    d.c = out;
    d.ldc = g->ldc;
    d.stride_c = g->sc;
    d.d = out;
    d.ldd = g->ldc;
    d.stride_d = g->sc;
    d.alpha = (float)g->alpha;
    d.beta = (float)g->beta;
    d.epilogue = vepi(g->epi);
    d.bias = g->bias;
    d.bias_type = vt(g->bias_type);
    return d;
}

/* Runs g in place on a copy of its C and returns the copy (caller frees). */
static void *run(const gt_gemm_t *g)
{
    size_t bytes = g->nc * gt_type_size(g->c_type);
    void *out = malloc(bytes);
    assert_non_null(out);
    memcpy(out, g->c, bytes);
    vg_gemm_desc_t d = desc_of(g, out);
    assert_int_equal(vg_gemm_run(&d), 0);
    return out;
}

static const cudaDataType_t types[3] = {CUDA_R_32F, CUDA_R_16F, CUDA_R_16BF};

static void test_types_and_transposes(void **state)
{
    gt_seed(1);
    for (int t = 0; t < 3; t++) {
        for (int out32 = 0; out32 < 2; out32++) {
            for (int ta = 0; ta < 2; ta++) {
                for (int tb = 0; tb < 2; tb++) {
                    gt_gemm_t g = {.ta = ta, .tb = tb, .m = 37, .n = 29, .k = 45,
                                   .ab_type = types[t],
                                   .c_type = out32 ? CUDA_R_32F : types[t],
                                   .lda = (ta ? 45 : 37) + 3, .ldb = (tb ? 29 : 45) + 2,
                                   .ldc = 37 + 5, .alpha = 0.75, .beta = -0.5};
                    gt_gemm_init(&g);
                    void *out = run(&g);
                    char what[64];
                    snprintf(what, sizeof what, "type %d out32 %d %c%c", (int)types[t], out32,
                             ta ? 'T' : 'N', tb ? 'T' : 'N');
                    gt_gemm_check(&g, out, what);
                    free(out);
                    gt_gemm_free(&g);
                }
            }
        }
    }
}

/* Dimensions that cross every block edge (MC 128, NC 192, KC 384, MR 8, NR 6). The same
 * elements computed by a call on a sub-block (different blocking, different panel starts)
 * must be bit-identical: the summation order is per element, not per block. */
static void test_blocking_and_reproducibility(void **state)
{
    gt_seed(2);
    for (int t = 0; t < 3; t++) {
        gt_gemm_t g = {.ta = 1, .tb = 0, .m = 301, .n = 250, .k = 700, .ab_type = types[t],
                       .c_type = CUDA_R_32F, .alpha = 1.0, .beta = 1.0};
        gt_gemm_init(&g);
        void *out = run(&g);
        gt_gemm_check(&g, out, "large");
        void *again = run(&g);
        assert_memory_equal(out, again, g.nc * sizeof(float));
        /* Rows 61..61+150, columns 37..37+101, as their own GEMM. */
        int64_t i0 = 61, j0 = 37;
        size_t asz = gt_type_size(g.ab_type);
        float *sub = malloc(g.nc * sizeof(float));
        assert_non_null(sub);
        memcpy(sub, g.c, g.nc * sizeof(float));
        vg_gemm_desc_t d = desc_of(&g, sub);
        d.m = 150;
        d.n = 101;
        d.a = (const char *)g.a + (size_t)(i0 * g.lda) * asz;   /* A is k x m (T) */
        d.b = (const char *)g.b + (size_t)(j0 * g.ldb) * asz;   /* B is k x n (N) */
        d.c = d.d = sub + i0 + j0 * g.ldc;
        assert_int_equal(vg_gemm_run(&d), 0);
        for (int64_t j = j0; j < j0 + 101; j++) {
            for (int64_t i = i0; i < i0 + 150; i++) {
                float x = ((float *)out)[i + j * g.ldc], y = sub[i + j * g.ldc];
                if (fbits(x) != fbits(y)) {
                    fail_msg("type %d element (%lld, %lld): full %a, sub-block %a", (int)types[t],
                             (long long)i, (long long)j, x, y);
                }
            }
        }
        free(sub);
        free(again);
        free(out);
        gt_gemm_free(&g);
    }
}

static void test_strided_batched(void **state)
{
    gt_seed(3);
    for (int t = 0; t < 3; t++) {
        gt_gemm_t g = {.ta = 0, .tb = 1, .m = 20, .n = 17, .k = 33, .batch = 3,
                       .ab_type = types[t], .c_type = types[t], .lda = 21, .ldb = 19,
                       .ldc = 23, .sa = 21 * 33 + 5, .sb = 19 * 33 + 3, .sc = 23 * 17 + 11,
                       .alpha = 1.5, .beta = 0.25};
        gt_gemm_init(&g);
        void *out = run(&g);
        gt_gemm_check(&g, out, "strided batched");
        free(out);
        gt_gemm_free(&g);
    }
}

/* beta == 0 must not read C: NaN garbage there must not reach D. */
static void test_beta_zero_ignores_c(void **state)
{
    gt_seed(4);
    for (int t = 0; t < 3; t++) {
        gt_gemm_t g = {.m = 16, .n = 9, .k = 12, .ab_type = types[t], .c_type = types[t],
                       .alpha = 1.0, .beta = 0.0, .c_nan = 1};
        gt_gemm_init(&g);
        void *out = run(&g);
        gt_gemm_check(&g, out, "beta 0 over NaN");
        free(out);
        gt_gemm_free(&g);
    }
}

/* alpha == 0 or k == 0: D = beta*C without touching A or B (NULL here). */
static void test_alpha_zero_and_k_zero(void **state)
{
    gt_seed(5);
    for (int kz = 0; kz < 2; kz++) {
        gt_gemm_t g = {.m = 10, .n = 7, .k = kz ? 0 : 5, .ab_type = CUDA_R_16BF,
                       .c_type = CUDA_R_32F, .alpha = kz ? 2.0 : 0.0, .beta = -2.0};
        gt_gemm_init(&g);
        size_t bytes = g.nc * sizeof(float);
        float *out = malloc(bytes);
        assert_non_null(out);
        memcpy(out, g.c, bytes);
        vg_gemm_desc_t d = desc_of(&g, out);
        d.a = d.b = NULL;
        assert_int_equal(vg_gemm_run(&d), 0);
        for (size_t i = 0; i < g.nc; i++) {
            float want = -2.0f * ((float *)g.c)[i];
            if (fbits(out[i]) != fbits(want)) {
                fail_msg("k %lld element %zu: got %.9g, want %.9g", (long long)g.k, i, out[i],
                         want);
            }
        }
        free(out);
        gt_gemm_free(&g);
    }
}

static void test_epilogues(void **state)
{
    gt_seed(6);
    const unsigned epis[] = {GT_EPI_BIAS, GT_EPI_RELU, GT_EPI_GELU, GT_EPI_GELU | GT_EPI_BIAS,
                             GT_EPI_RELU | GT_EPI_BIAS};
    for (int t = 0; t < 3; t++) {
        for (size_t e = 0; e < sizeof epis / sizeof epis[0]; e++) {
            for (int bias32 = 0; bias32 < 2; bias32++) {
                gt_gemm_t g = {.ta = 1, .tb = 1, .m = 24, .n = 13, .k = 40, .ab_type = types[t],
                               .c_type = types[t], .bias_type = bias32 ? CUDA_R_32F : types[t],
                               .alpha = 1.0, .beta = 0.5, .epi = epis[e]};
                gt_gemm_init(&g);
                size_t bytes = g.nc * gt_type_size(g.c_type);
                void *out = malloc(bytes), *aux = malloc(bytes);
                assert_true(out && aux);
                memcpy(out, g.c, bytes);
                vg_gemm_desc_t d = desc_of(&g, out);
                d.epilogue |= VG_GEMM_EPI_AUX;
                d.aux = aux;
                d.aux_type = vt(g.c_type);
                d.ld_aux = g.ldc;
                assert_int_equal(vg_gemm_run(&d), 0);
                char what[64];
                snprintf(what, sizeof what, "type %d epilogue %u bias32 %d", (int)types[t],
                         epis[e], bias32);
                gt_gemm_check(&g, out, what);
                gt_gemm_check_aux(&g, aux, g.ldc, g.sc, what);
                free(out);
                free(aux);
                gt_gemm_free(&g);
            }
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f16_widen_exhaustive),
        cmocka_unit_test(test_f16_narrow),
        cmocka_unit_test(test_bf16_widen_exhaustive),
        cmocka_unit_test(test_bf16_narrow),
        cmocka_unit_test(test_special_values),
        cmocka_unit_test(test_gelu),
        cmocka_unit_test(test_types_and_transposes),
        cmocka_unit_test(test_blocking_and_reproducibility),
        cmocka_unit_test(test_strided_batched),
        cmocka_unit_test(test_beta_zero_ignores_c),
        cmocka_unit_test(test_alpha_zero_and_k_zero),
        cmocka_unit_test(test_epilogues),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
