/*
 * kernels.cu: the workload's kernels for a real GPU (sm_90), one __global__ per entry of
 * WL_KERNELS (src/kargs.h), each taking the same argument block as its host
 * implementation. They are written for clarity, not speed: grid-stride loops, one thread
 * per element or per row. Every result is bitwise repeatable: a value that many rows feed
 * (a norm's dgamma, attention's dk and dv) is summed by one thread in a fixed order, never
 * with floating-point atomics, so that two runs (a baseline and the same run through the
 * shim) can be compared bit for bit. The workload loads this library
 * (libwl_kernels_gpu.so) only when no vgpu is present, and takes the kernels from
 * wl_gpu_kernel_table in the list's order; wl_emu_comm is in emucomm.cu.
 */
#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>

extern "C" {
#include "kargs.h"
}

#define LOOP(i, n) \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (int64_t)(n); i += (int64_t)blockDim.x * gridDim.x)
#define FIRST_THREAD (blockIdx.x == 0 && threadIdx.x == 0)
#define MAX_D 256 /* head dimension bound for the per-thread attention rows */

__device__ static float ld(const void *p, int64_t i, int dt)
{
    return dt == WL_DT_F32 ? ((const float *)p)[i] : __bfloat162float(((const __nv_bfloat16 *)p)[i]);
}

__device__ static void st(void *p, int64_t i, float v, int dt)
{
    if (dt == WL_DT_F32) ((float *)p)[i] = v;
    else ((__nv_bfloat16 *)p)[i] = __float2bfloat16(v);
}

__device__ static int64_t pos_of(const wl_chunks_t &c, int64_t si)
{
    return si < c.clen ? c.c0 * c.clen + si : c.c1 * c.clen + (si - c.clen);
}

/* ---- embedding and positions ---- */

__global__ void wl_k_EMBED_FWD(wl_embed_args_t a)
{
    LOOP(i, a.T * a.h) {
        int64_t t = i / a.h, j = i % a.h, tok = a.tokens[t];
        int in = tok >= a.vstart && tok < a.vend;
        st(a.out, i, in ? ld(a.table, (tok - a.vstart) * a.h + j, a.dt) : 0.0f, a.dt);
    }
}

__global__ void wl_k_EMBED_BWD(wl_embed_args_t a)
{
    LOOP(j, a.h) {
        for (int64_t t = 0; t < a.T; t++) {
            int64_t tok = a.tokens[t];
            if (tok >= a.vstart && tok < a.vend) a.grad[(tok - a.vstart) * a.h + j] += ld(a.dout, t * a.h + j, a.dt);
        }
    }
}

__global__ void wl_k_POS_FWD(wl_pos_args_t a)
{
    LOOP(i, a.rows * a.h) {
        int64_t t = a.row0 + i / a.h, j = i % a.h, p = pos_of(a.ch, t / a.b);
        st(a.out, i, ld(a.in, t * a.h + j, a.dt) + ld(a.table, p * a.h + j, a.dt), a.dt);
    }
}

__global__ void wl_k_POS_BWD(wl_pos_args_t a)
{
    LOOP(j, a.h) {
        for (int64_t t = 0; t < a.rows; t++) a.grad[pos_of(a.ch, t / a.b) * a.h + j] += ld(a.in, t * a.h + j, a.dt);
    }
}

/* ---- norms ---- */

__global__ void wl_k_NORM_FWD(wl_norm_args_t a)
{
    LOOP(t, a.T) {
        const int64_t o = t * a.h;
        float mean = 0, var = 0;
        if (!a.rms) {
            for (int64_t j = 0; j < a.h; j++) mean += ld(a.x, o + j, a.dt);
            mean /= (float)a.h;
        }
        for (int64_t j = 0; j < a.h; j++) {
            float d = ld(a.x, o + j, a.dt) - mean;
            var += d * d;
        }
        float rstd = rsqrtf(var / (float)a.h + a.eps);
        for (int64_t j = 0; j < a.h; j++) {
            float y = (ld(a.x, o + j, a.dt) - mean) * rstd * ld(a.gamma, j, a.dt);
            st(a.y, o + j, a.beta ? y + ld(a.beta, j, a.dt) : y, a.dt);
        }
        if (a.mean) a.mean[t] = mean;
        a.rstd[t] = rstd;
    }
}

__global__ void wl_k_NORM_BWD(wl_norm_args_t a)
{
    LOOP(t, a.T) {
        const int64_t o = t * a.h;
        float mean = a.mean ? a.mean[t] : 0.0f, rstd = a.rstd[t], s1 = 0, s2 = 0;
        for (int64_t j = 0; j < a.h; j++) {
            float xh = (ld(a.x, o + j, a.dt) - mean) * rstd, dxh = ld(a.dy, o + j, a.dt) * ld(a.gamma, j, a.dt);
            s1 += dxh;
            s2 += dxh * xh;
        }
        float m1 = a.rms ? 0.0f : s1 / (float)a.h, m2 = s2 / (float)a.h;
        for (int64_t j = 0; j < a.h; j++) {
            float dy = ld(a.dy, o + j, a.dt), xh = (ld(a.x, o + j, a.dt) - mean) * rstd;
            float dx = rstd * (dy * ld(a.gamma, j, a.dt) - m1 - xh * m2);
            if (a.dres) dx += ld(a.dres, o + j, a.dt);
            st(a.dx, o + j, dx, a.dt);
        }
    }
    /* dgamma, dbeta: one thread per column, rows in order. */
    LOOP(j, a.h) {
        float sg = 0, sb = 0;
        for (int64_t t = 0; t < a.T; t++) {
            float dy = ld(a.dy, t * a.h + j, a.dt), mean = a.mean ? a.mean[t] : 0.0f;
            sg += dy * (ld(a.x, t * a.h + j, a.dt) - mean) * a.rstd[t];
            sb += dy;
        }
        a.dgamma[j] += sg;
        if (a.dbeta) a.dbeta[j] += sb;
    }
}

/* ---- rotary embedding and attention ---- */

__global__ void wl_k_ROPE(wl_rope_args_t a)
{
    int half = a.d / 2;
    LOOP(i, a.T * a.nheads) {
        int64_t t = i / a.nheads, o = t * a.ld + (i % a.nheads) * a.d;
        float pos = (float)pos_of(a.ch, t / a.b);
        for (int k = 0; k < half; k++) {
            float ang = pos * powf(a.base, -2.0f * (float)k / (float)a.d), c = cosf(ang);
            float s = a.inverse ? -sinf(ang) : sinf(ang);
            float x1 = ld(a.x, o + k, a.dt), x2 = ld(a.x, o + k + half, a.dt);
            st(a.x, o + k, x1 * c - x2 * s, a.dt);
            st(a.x, o + k + half, x2 * c + x1 * s, a.dt);
        }
    }
}

/* Row index i -> (bi, head j, query si). */
__device__ static void attn_row(const wl_attn_args_t &a, int64_t i, int64_t *bi, int *j, int64_t *si)
{
    *si = i % a.sq;
    *j = (int)((i / a.sq) % a.nq);
    *bi = i / (a.sq * a.nq);
}

__device__ static float dot_qk(const wl_attn_args_t &a, int64_t qo, int64_t ko)
{
    float s = 0;
    for (int c = 0; c < a.d; c++) s += ld(a.q, qo + c, a.dt) * ld(a.k, ko + c, a.dt);
    return s * a.scale;
}

__global__ void wl_k_ATTN_FWD(wl_attn_args_t a)
{
    LOOP(i, a.b * a.nq * a.sq) {
        int64_t bi, si;
        int j;
        attn_row(a, i, &bi, &j, &si);
        int g = j / (a.nq / a.nkv);
        int64_t qrow = si * a.b + bi, qpos = pos_of(a.qch, si), qo = qrow * a.ldq + (int64_t)j * a.d;
        float m = -INFINITY, sum = 0, o[MAX_D];
        for (int c = 0; c < a.d; c++) o[c] = 0;
        for (int64_t ki = 0; ki < a.sk; ki++)
            if (pos_of(a.kch, ki) <= qpos) m = fmaxf(m, dot_qk(a, qo, (ki * a.b + bi) * a.ldk + (int64_t)g * a.d));
        for (int64_t ki = 0; ki < a.sk && m > -INFINITY; ki++) {
            if (pos_of(a.kch, ki) > qpos) continue;
            int64_t ko = (ki * a.b + bi) * a.ldk + (int64_t)g * a.d;
            float p = expf(dot_qk(a, qo, ko) - m);
            sum += p;
            for (int c = 0; c < a.d; c++) o[c] += p * ld(a.v, ko + c, a.dt);
        }
        float lb = m > -INFINITY ? m + logf(sum) : -INFINITY;
        int64_t li = (bi * a.nq + j) * a.sq + si;
        float la = a.first ? -INFINITY : a.lse[li], ln = fmaxf(la, lb);
        if (ln > -INFINITY) ln += logf(expf(la - ln) + expf(lb - ln));
        float wa = la > -INFINITY ? expf(la - ln) : 0.0f, wb = lb > -INFINITY ? expf(lb - ln) / sum : 0.0f;
        float *acc = a.acc + qrow * (int64_t)a.nq * a.d + (int64_t)j * a.d;
        for (int c = 0; c < a.d; c++) {
            acc[c] = (a.first ? 0.0f : acc[c] * wa) + o[c] * wb;
            if (a.last) st(a.o_out, qrow * a.ldo + (int64_t)j * a.d + c, acc[c], a.dt);
        }
        a.lse[li] = ln;
    }
}

/* One (query row, key row) pair of the backward: p and ds = p (dp - di). */
__device__ static void attn_pair(const wl_attn_args_t &a, int64_t qo, int64_t oo, int64_t ko, float lse,
                                 float di, float *p, float *ds)
{
    float dp = 0;
    for (int c = 0; c < a.d; c++) dp += ld(a.dout, oo + c, a.dt) * ld(a.v, ko + c, a.dt);
    *p = expf(dot_qk(a, qo, ko) - lse);
    *ds = *p * (dp - di);
}

/* Two independent passes in one launch, each summing in a fixed order: dq by query row
 * (keys in order), then dk and dv by key row (the group's query heads, then queries, in
 * order), recomputing p and ds for each pair rather than adding into dk, dv with atomics. */
__global__ void wl_k_ATTN_BWD(wl_attn_args_t a)
{
    LOOP(i, a.b * a.nq * a.sq) {
        int64_t bi, si;
        int j;
        attn_row(a, i, &bi, &j, &si);
        int g = j / (a.nq / a.nkv);
        int64_t qrow = si * a.b + bi, qpos = pos_of(a.qch, si);
        int64_t qo = qrow * a.ldq + (int64_t)j * a.d, oo = qrow * a.ldo + (int64_t)j * a.d;
        float lse = a.lse[(bi * a.nq + j) * a.sq + si], di = 0;
        for (int c = 0; c < a.d; c++) di += ld(a.dout, oo + c, a.dt) * ld(a.o, oo + c, a.dt);
        float *dq = a.dq + qrow * (int64_t)a.nq * a.d + (int64_t)j * a.d;
        for (int64_t ki = 0; ki < a.sk; ki++) {
            if (pos_of(a.kch, ki) > qpos) continue;
            int64_t ko = (ki * a.b + bi) * a.ldk + (int64_t)g * a.d;
            float p, ds;
            attn_pair(a, qo, oo, ko, lse, di, &p, &ds);
            for (int c = 0; c < a.d; c++) dq[c] += a.scale * ds * ld(a.k, ko + c, a.dt);
        }
    }
    const int per = a.nq / a.nkv;
    LOOP(i, a.b * a.nkv * a.sk) {
        int64_t ki = i % a.sk, bi = i / (a.sk * a.nkv);
        int g = (int)((i / a.sk) % a.nkv);
        int64_t krow = ki * a.b + bi, ko = krow * a.ldk + (int64_t)g * a.d, kpos = pos_of(a.kch, ki);
        float *dk = a.dk + krow * (int64_t)a.nkv * a.d + (int64_t)g * a.d;
        float *dv = a.dv + krow * (int64_t)a.nkv * a.d + (int64_t)g * a.d;
        float sk[MAX_D], sv[MAX_D];
        for (int c = 0; c < a.d; c++) sk[c] = dk[c], sv[c] = dv[c];
        for (int j = g * per; j < (g + 1) * per; j++) {
            for (int64_t si = 0; si < a.sq; si++) {
                if (kpos > pos_of(a.qch, si)) continue;
                int64_t qrow = si * a.b + bi;
                int64_t qo = qrow * a.ldq + (int64_t)j * a.d, oo = qrow * a.ldo + (int64_t)j * a.d;
                float lse = a.lse[(bi * a.nq + j) * a.sq + si], di = 0, p, ds;
                for (int c = 0; c < a.d; c++) di += ld(a.dout, oo + c, a.dt) * ld(a.o, oo + c, a.dt);
                attn_pair(a, qo, oo, ko, lse, di, &p, &ds);
                for (int c = 0; c < a.d; c++) {
                    sk[c] += a.scale * ds * ld(a.q, qo + c, a.dt);
                    sv[c] += p * ld(a.dout, oo + c, a.dt);
                }
            }
        }
        for (int c = 0; c < a.d; c++) dk[c] = sk[c], dv[c] = sv[c];
    }
}

/* ---- element-wise ---- */

__global__ void wl_k_COPY(wl_copy_args_t a)
{
    LOOP(i, a.rows * a.cols) {
        int64_t r = i / a.cols, c = i % a.cols;
        float v = ld(a.src, r * a.ld_src + c, a.src_dt);
        if (a.accumulate) v += ld(a.dst, r * a.ld_dst + c, a.dst_dt);
        st(a.dst, r * a.ld_dst + c, v, a.dst_dt);
    }
}

__global__ void wl_k_SWIGLU_FWD(wl_swiglu_args_t a)
{
    LOOP(i, a.T * a.f) {
        int64_t t = i / a.f, j = i % a.f;
        float g = ld(a.gu, t * 2 * a.f + j, a.dt), u = ld(a.gu, t * 2 * a.f + a.f + j, a.dt);
        st(a.out, i, g / (1.0f + expf(-g)) * u, a.dt);
    }
}

__global__ void wl_k_SWIGLU_BWD(wl_swiglu_args_t a)
{
    LOOP(i, a.T * a.f) {
        int64_t t = i / a.f, gi = t * 2 * a.f + i % a.f;
        float g = ld(a.gu, gi, a.dt), u = ld(a.gu, gi + a.f, a.dt), d = ld(a.dout, i, a.dt);
        float sg = 1.0f / (1.0f + expf(-g));
        st(a.dgu, gi, d * u * sg * (1.0f + g * (1.0f - sg)), a.dt);
        st(a.dgu, gi + a.f, d * g * sg, a.dt);
    }
}

__global__ void wl_k_GELU_BWD(wl_gelu_args_t a)
{
    const float k = 0.7978845608028654f, c = 0.044715f;
    LOOP(i, a.rows * a.cols) {
        float x = ld(a.pre, (i / a.cols) * a.ld_pre + i % a.cols, a.dt);
        float th = tanhf(k * (x + c * x * x * x));
        float g = 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * k * (1.0f + 3.0f * c * x * x);
        st(a.dpre, i, ld(a.dact, i, a.dt) * g, a.dt);
    }
}

__global__ void wl_k_BIAS_GRAD(wl_bias_args_t a)
{
    LOOP(j, a.n) {
        float s = 0;
        for (int64_t t = 0; t < a.T; t++) s += ld(a.dy, t * a.ld + j, a.dt);
        a.grad[j] += s;
    }
}

__global__ void wl_k_ADD(wl_add_args_t a)
{
    LOOP(i, a.T * a.h) {
        float v = ld(a.a, i, a.dt) + ld(a.b, i, a.dt);
        st(a.out, i, a.bias ? v + ld(a.bias, i % a.h, a.dt) : v, a.dt);
    }
}

/* ---- cross entropy ---- */

__global__ void wl_k_CE_MAX(wl_ce_args_t a)
{
    LOOP(t, a.T) {
        float m = -INFINITY;
        for (int64_t j = 0; j < a.V; j++) m = fmaxf(m, ld(a.logits, t * a.ld + j, a.dt));
        a.max[t] = m;
    }
}

__global__ void wl_k_CE_STATS(wl_ce_args_t a)
{
    LOOP(t, a.T) {
        float s = 0;
        for (int64_t j = 0; j < a.V; j++) s += expf(ld(a.logits, t * a.ld + j, a.dt) - a.max[t]);
        int64_t k = a.targets[t] - a.vstart;
        a.sumexp[t] = s;
        a.pred[t] = k >= 0 && k < a.V ? ld(a.logits, t * a.ld + k, a.dt) - a.max[t] : 0.0f;
    }
}

__global__ void wl_k_CE_LOSS(wl_ce_args_t a)
{
    if (!FIRST_THREAD) return;
    if (a.iter_loss) {
        a.iter_loss[0] += a.acc[0] / a.acc[1];
        return;
    }
    float s = 0;
    for (int64_t t = 0; t < a.T; t++) s += logf(a.sumexp[t]) - a.pred[t];
    a.acc[0] = s;
    a.acc[1] = (float)a.T;
}

__global__ void wl_k_CE_BWD(wl_ce_args_t a)
{
    LOOP(i, a.T * a.V) {
        int64_t t = i / a.V, j = i % a.V;
        float p = expf(ld(a.logits, t * a.ld + j, a.dt) - a.max[t]) / a.sumexp[t];
        float onehot = j == a.targets[t] - a.vstart ? 1.0f : 0.0f;
        st(a.dlogits, t * a.ld + j, (p - onehot) * a.mult / a.acc[1], a.dt);
    }
}

/* ---- optimizer ---- */

__global__ void wl_k_SCALE(wl_scale_args_t a)
{
    LOOP(i, a.n) a.x[i] *= a.s;
}

__global__ void wl_k_ADAM(wl_adam_args_t a)
{
    LOOP(i, a.n) {
        float g = a.g[i];
        a.m[i] = a.b1 * a.m[i] + (1.0f - a.b1) * g;
        a.v[i] = a.b2 * a.v[i] + (1.0f - a.b2) * g * g;
        a.p[i] -= a.lr * (a.m[i] * a.c1) / (sqrtf(a.v[i] * a.c2) + a.eps);
        if (a.pm) st(a.pm, i, a.p[i], a.dt);
    }
}

/* ---- MoE ---- */

__global__ void wl_k_TOPK_FWD(wl_topk_args_t a)
{
    LOOP(t, a.T) {
        const float *lg = a.logits + t * a.E;
        int32_t *idx = a.idx + t * a.k;
        float *w = a.w + t * a.k, m = -INFINITY, sum = 0;
        for (int j = 0; j < a.k; j++) {
            int best = -1;
            for (int e = 0; e < a.E; e++) {
                int taken = 0;
                for (int i2 = 0; i2 < j; i2++) taken |= idx[i2] == e;
                if (!taken && (best < 0 || lg[e] > lg[best])) best = e;
            }
            idx[j] = best;
            atomicAdd(&a.counts[best], 1);
            m = fmaxf(m, lg[best]);
        }
        for (int j = 0; j < a.k; j++) sum += (w[j] = expf(lg[idx[j]] - m));
        for (int j = 0; j < a.k; j++) w[j] /= sum;
    }
}

__global__ void wl_k_TOPK_BWD(wl_topk_args_t a)
{
    LOOP(t, a.T) {
        const float *w = a.w + t * a.k, *dw = a.dw + t * a.k;
        float dot = 0;
        for (int e = 0; e < a.E; e++) a.dlogits[t * a.E + e] = 0;
        for (int j = 0; j < a.k; j++) dot += w[j] * dw[j];
        for (int j = 0; j < a.k; j++) a.dlogits[t * a.E + a.idx[t * a.k + j]] = w[j] * (dw[j] - dot);
    }
}

/* Sequential by design: assignments keep token order within each expert. */
__global__ void wl_k_PERM_ROWS(wl_perm_args_t a)
{
    if (!FIRST_THREAD) return;
    int32_t off[256], run = 0;
    for (int e = 0; e < a.E && e < 256; e++) {
        off[e] = run;
        run += a.counts[e];
    }
    for (int64_t i = 0; i < a.T * a.k; i++) a.rowof[i] = off[a.idx[i]]++;
}

__global__ void wl_k_PERMUTE(wl_perm_args_t a)
{
    LOOP(i, a.T * a.k * a.h) {
        int64_t r = i / a.h, c = i % a.h;
        st(a.out, a.rowof[r] * a.h + c, ld(a.x, (r / a.k) * a.h + c, a.dt), a.dt);
    }
}

__global__ void wl_k_PERMUTE_BWD(wl_perm_args_t a)
{
    LOOP(i, a.T * a.h) {
        int64_t t = i / a.h, c = i % a.h;
        float s = a.accumulate ? ld(a.out, i, a.dt) : 0.0f;
        for (int j = 0; j < a.k; j++) s += ld(a.x, a.rowof[t * a.k + j] * a.h + c, a.dt);
        st(a.out, i, s, a.dt);
    }
}

__global__ void wl_k_UNPERMUTE(wl_perm_args_t a)
{
    LOOP(i, a.T * a.h) {
        int64_t t = i / a.h, c = i % a.h;
        float s = 0;
        for (int j = 0; j < a.k; j++) s += a.w[t * a.k + j] * ld(a.x, a.rowof[t * a.k + j] * a.h + c, a.dt);
        st(a.out, i, s, a.dt);
    }
}

__global__ void wl_k_UNPERMUTE_BWD(wl_perm_args_t a)
{
    LOOP(i, a.T * a.k) {
        int64_t t = i / a.k, row = a.rowof[i];
        float dot = 0;
        for (int64_t c = 0; c < a.h; c++) {
            float dy = ld(a.x, t * a.h + c, a.dt);
            dot += dy * ld(a.aux, row * a.h + c, a.dt);
            st(a.out, row * a.h + c, a.w[i] * dy, a.dt);
        }
        a.dw[i] = dot;
    }
}

/* ---- the table ---- */

extern "C" __global__ void wl_emu_comm(wl_emu_args_t a); /* emucomm.cu */
#define wl_k_EMU_COMM wl_emu_comm

static const void *const table[] = {
#define WL_GPU_PTR(e, n, t) (const void *)wl_k_##e,
    WL_KERNELS(WL_GPU_PTR)
#undef WL_GPU_PTR
};

extern "C" __attribute__((visibility("default"))) const void *const *wl_gpu_kernel_table(int *n)
{
    *n = (int)(sizeof table / sizeof table[0]);
    return table;
}
