/*
 * util.c: failure reporting, the current stream, stream-ordered tensors and small numeric
 * helpers shared by the workload (see wl.h).
 */
#include <mpi.h>
#include <stdarg.h>
#include <string.h>

#include "wl.h"

static int world_rank(void)
{
    int init = 0, r = -1;
    MPI_Initialized(&init);
    if (init) MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

void wl_die(const char *file, int line, const char *what, long code)
{
    fprintf(stderr, "workload[%d]: %s:%d: %s failed (%ld)\n", world_rank(), file, line, what, code);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    abort();
}

void wl_fatal(const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "workload[%d]: %s\n", world_rank(), buf);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 2);
    abort();
}

static __thread cudaStream_t cur_stream; /* NULL: the legacy default stream, PyTorch's default */

cudaStream_t wl_cur_stream(void) { return cur_stream; }
void wl_set_cur_stream(cudaStream_t s) { cur_stream = s; }

void *wl_alloc(size_t bytes)
{
    void *p = NULL;
    WL_CK(cudaMallocAsync(&p, bytes ? bytes : 256, cur_stream));
    return p;
}

void wl_free(void *p)
{
    if (p) WL_CK(cudaFreeAsync(p, cur_stream));
}

float wl_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t wl_f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* splitmix64 of (seed, index), top 24 bits to [-1, 1). */
float wl_hash_uniform(uint64_t seed, uint64_t index)
{
    uint64_t x = seed ^ (index + 0x9e3779b97f4a7c15ull) * 0xbf58476d1ce4e5b9ull;
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return (float)(x >> 40) / (float)(1u << 23) - 1.0f;
}

int wl_gcd(int a, int b)
{
    while (b) {
        int t = a % b;
        a = b;
        b = t;
    }
    return a;
}
