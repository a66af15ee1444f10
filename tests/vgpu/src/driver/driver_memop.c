/*
 * driver_memop.c: stream memory operations (libcuda.so.1): cuStreamWriteValue32/64 and
 * cuStreamWaitValue32/64 (the _v2 entry points cuda.h maps the names onto, and their _ptsz
 * forms), as communication libraries use them to signal between streams and devices.
 *
 * A write is one zero-duration op that stores the value when it runs. A wait is one op that
 * evaluates its condition (CU_STREAM_WAIT_VALUE_GEQ, EQ, AND, NOR; cuda.h) when it reaches
 * the head of its stream, after everything before it. The vgpu does not model a wait that
 * stalls until a later write from elsewhere: a condition that does not hold then is
 * reported (on a GPU the stream would stall, perhaps for ever) and the wait completes, so
 * a program that relies on it shows the message rather than a hang.
 */
#include <stdio.h>
#include <string.h>

#include <cuda.h>

#include "vg.h"

CUresult cuStreamWriteValue32_v2_ptsz(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
CUresult cuStreamWriteValue64_v2_ptsz(CUstream, CUdeviceptr, cuuint64_t, unsigned int);
CUresult cuStreamWaitValue32_v2_ptsz(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
CUresult cuStreamWaitValue64_v2_ptsz(CUstream, CUdeviceptr, cuuint64_t, unsigned int);

typedef struct memop {
    void *addr;
    uint64_t value;
    unsigned flags;
    int wide;   /* 64-bit */
    int wait;
} memop_t;

static void write_exec(vg_op_t *op)
{
    const memop_t *m = op->payload;
    if (m->wide) {
        memcpy(m->addr, &m->value, 8);
    } else {
        uint32_t v = (uint32_t)m->value;
        memcpy(m->addr, &v, 4);
    }
}

static void wait_exec(vg_op_t *op)
{
    const memop_t *m = op->payload;
    uint64_t now = 0;
    if (m->wide) {
        memcpy(&now, m->addr, 8);
    } else {
        uint32_t v;
        memcpy(&v, m->addr, 4);
        now = v;
    }
    uint64_t want = m->wide ? m->value : (uint32_t)m->value;
    int ok;
    switch (m->flags & 0x3u) {
    case CU_STREAM_WAIT_VALUE_GEQ:
        ok = m->wide ? (int64_t)(now - want) >= 0 : (int32_t)((uint32_t)now - (uint32_t)want) >= 0;
        break;
    case CU_STREAM_WAIT_VALUE_EQ: ok = now == want; break;
    case CU_STREAM_WAIT_VALUE_AND: ok = (now & want) != 0; break;
    default: ok = ~(now | want) != 0; break; /* NOR */
    }
    if (!ok) {
        vg_msg("%s: the condition (flags 0x%x, value %llu) does not hold when the wait runs "
               "(the word holds %llu): a GPU would stall this stream until another writes it, "
               "which the vgpu does not model; the device takes cudaErrorLaunchTimeout",
               op->api, m->flags, (unsigned long long)want, (unsigned long long)now);
        vg_op_fail(op, cudaErrorLaunchTimeout);
    }
}

static CUresult memop(const char *api, CUstream s, CUdeviceptr addr, uint64_t value,
                      unsigned flags, int wide, int wait)
{
    vg_init();
    size_t n = wide ? 8 : 4;
    unsigned known = wait ? 0x3u | CU_STREAM_WAIT_VALUE_FLUSH : CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER;
    if ((flags & ~known) || !addr || addr % n)
        return CUDA_ERROR_INVALID_VALUE;
    if (vg_mem_find((const void *)addr, n, NULL) != 1) {
        vg_msg("%s: address 0x%llx is not inside one live device allocation", api,
               (unsigned long long)addr);
        return CUDA_ERROR_INVALID_VALUE;
    }
    vg_op_t *op = vg_op_new(api, VG_MARKER);
    vg_op_add_range(op, (const void *)addr, n, !wait);
    memop_t *m = vg_op_payload(op, sizeof *m);
    *m = (memop_t){(void *)addr, value, flags, wide, wait};
    op->exec = wait ? wait_exec : write_exec;
    snprintf(op->name, sizeof op->name, "%s %llu", wait ? "wait" : "write",
             (unsigned long long)value);
    cudaError_t e = vg_submit_unchecked((cudaStream_t)s, op);
    return e == cudaSuccess ? CUDA_SUCCESS : (CUresult)e;
}

static CUstream ptsz(CUstream s) { return s ? s : (CUstream)cudaStreamPerThread; }

VG_API CUresult cuStreamWriteValue32_v2(CUstream s, CUdeviceptr a, cuuint32_t v, unsigned f)
{
    return memop("cuStreamWriteValue32", s, a, v, f, 0, 0);
}
VG_API CUresult cuStreamWriteValue64_v2(CUstream s, CUdeviceptr a, cuuint64_t v, unsigned f)
{
    return memop("cuStreamWriteValue64", s, a, v, f, 1, 0);
}
VG_API CUresult cuStreamWaitValue32_v2(CUstream s, CUdeviceptr a, cuuint32_t v, unsigned f)
{
    return memop("cuStreamWaitValue32", s, a, v, f, 0, 1);
}
VG_API CUresult cuStreamWaitValue64_v2(CUstream s, CUdeviceptr a, cuuint64_t v, unsigned f)
{
    return memop("cuStreamWaitValue64", s, a, v, f, 1, 1);
}
VG_API CUresult cuStreamWriteValue32_v2_ptsz(CUstream s, CUdeviceptr a, cuuint32_t v, unsigned f)
{
    return cuStreamWriteValue32_v2(ptsz(s), a, v, f);
}
VG_API CUresult cuStreamWriteValue64_v2_ptsz(CUstream s, CUdeviceptr a, cuuint64_t v, unsigned f)
{
    return cuStreamWriteValue64_v2(ptsz(s), a, v, f);
}
VG_API CUresult cuStreamWaitValue32_v2_ptsz(CUstream s, CUdeviceptr a, cuuint32_t v, unsigned f)
{
    return cuStreamWaitValue32_v2(ptsz(s), a, v, f);
}
VG_API CUresult cuStreamWaitValue64_v2_ptsz(CUstream s, CUdeviceptr a, cuuint64_t v, unsigned f)
{
    return cuStreamWaitValue64_v2(ptsz(s), a, v, f);
}

/* The ABI before CUDA 11.7 (cudaTypedefs.h: PFN_cuStreamWriteValue32_v8000,
 * PFN_cuStreamWaitValue32_v8000): the same arguments, still exported by libcuda under the
 * plain names for programs built against an older toolkit and handed out by
 * cuGetProcAddress for a version before 11070 (driver_exec.c). The real driver's v1 forms
 * differ only in which flags they accept; here they are the same operations. */
#undef cuStreamWriteValue32
#undef cuStreamWaitValue32
CUresult cuStreamWriteValue32(CUstream s, CUdeviceptr a, cuuint32_t v, unsigned f);
CUresult cuStreamWaitValue32(CUstream s, CUdeviceptr a, cuuint32_t v, unsigned f);
CUresult cuStreamWriteValue32_ptsz(CUstream s, CUdeviceptr a, cuuint32_t v, unsigned f);
CUresult cuStreamWaitValue32_ptsz(CUstream s, CUdeviceptr a, cuuint32_t v, unsigned f);
VG_API CUresult cuStreamWriteValue32(CUstream s, CUdeviceptr a, cuuint32_t v, unsigned f)
{
    return memop("cuStreamWriteValue32", s, a, v, f, 0, 0);
}
VG_API CUresult cuStreamWaitValue32(CUstream s, CUdeviceptr a, cuuint32_t v, unsigned f)
{
    return memop("cuStreamWaitValue32", s, a, v, f, 0, 1);
}
VG_API CUresult cuStreamWriteValue32_ptsz(CUstream s, CUdeviceptr a, cuuint32_t v, unsigned f)
{
    return cuStreamWriteValue32(ptsz(s), a, v, f);
}
VG_API CUresult cuStreamWaitValue32_ptsz(CUstream s, CUdeviceptr a, cuuint32_t v, unsigned f)
{
    return cuStreamWaitValue32(ptsz(s), a, v, f);
}
