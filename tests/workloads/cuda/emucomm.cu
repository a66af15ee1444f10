/*
 * emucomm.cu: the device form of the emulated collective (wl_emu_comm, kargs.h; the host
 * form and what it stands for are in src/emucomm.c and src/emucomm.h).
 *
 * Each block works like one channel of an NCCL ring kernel: it takes chunks i, i + grid,
 * ... of every segment, reads a chunk into shared memory, writes it out, and raises its
 * flag (fenced) before the next, so the kernel moves its bytes through device memory and
 * holds its SMs the way a ring step does; the 32 KiB staging buffer keeps a large GEMM
 * block (which needs most of an SM's shared memory) off a busy SM, as NCCL's buffers do.
 * A block that is done before target_ns have passed since it started polls %globaltimer
 * until they have, as a ring kernel polls for its peer. Extern "C", so that tools and the
 * shim see the name wl_emu_comm unmangled.
 */
#include <stdint.h>

extern "C" {
#include "kargs.h"
}

#define EMU_CHUNK 32768

__device__ static unsigned long long emu_now_ns(void)
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* One chunk of len bytes from src (NULL: zeros) to dst through the staging buffer. */
__device__ static void emu_chunk(const unsigned char *src, unsigned char *dst, int64_t len, uint4 *stage)
{
    unsigned char *bytes = (unsigned char *)stage;
    const int vec = ((((uintptr_t)src) | ((uintptr_t)dst)) & 15) == 0;
    const int64_t nv = vec ? len / 16 : 0;
    for (int64_t i = threadIdx.x; i < nv; i += blockDim.x)
        stage[i] = src ? ((const uint4 *)src)[i] : make_uint4(0, 0, 0, 0);
    for (int64_t i = nv * 16 + threadIdx.x; i < len; i += blockDim.x) bytes[i] = src ? src[i] : 0;
    __syncthreads();
    for (int64_t i = threadIdx.x; i < nv; i += blockDim.x) ((uint4 *)dst)[i] = stage[i];
    for (int64_t i = nv * 16 + threadIdx.x; i < len; i += blockDim.x) dst[i] = bytes[i];
    __syncthreads();
}

extern "C" __global__ void wl_emu_comm(wl_emu_args_t a)
{
    __shared__ uint4 stage[EMU_CHUNK / 16];
    __shared__ unsigned long long t0;
    if (threadIdx.x == 0) {
        t0 = emu_now_ns();
        if (a.t_start) atomicMin(a.t_start, t0);
    }
    __syncthreads();
    unsigned long long step = 0;
    for (int s = 0; s < a.nseg && s < WL_EMU_SEGS; s++) {
        const wl_emu_seg_t g = a.seg[s];
        const int64_t chunks = (g.bytes + EMU_CHUNK - 1) / EMU_CHUNK;
        for (int64_t c = blockIdx.x; c < chunks; c += gridDim.x) {
            const int64_t off = c * EMU_CHUNK;
            const int64_t len = g.bytes - off < EMU_CHUNK ? g.bytes - off : EMU_CHUNK;
            emu_chunk(g.src ? (const unsigned char *)g.src + off : NULL, (unsigned char *)g.dst + off, len, stage);
            if (threadIdx.x == 0 && a.flags) {
                __threadfence();
                atomicExch(&a.flags[blockIdx.x], ++step);
            }
        }
    }
    if (threadIdx.x == 0) {
        while (emu_now_ns() - t0 < (unsigned long long)a.target_ns) {
        }
        if (a.t_end) atomicMax(a.t_end, emu_now_ns());
    }
    __syncthreads();
}
