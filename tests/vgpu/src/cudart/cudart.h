/* cudart.h: shared by the files of the vgpu's libcudart.so.13. */
#ifndef VG_CUDART_H
#define VG_CUDART_H

#include "vg.h"

/* Every runtime entry point returns through RET so cudaGetLastError sees its failures. */
#define RET(e) return vg_record_error(e)

/* cudaStream_t as the _ptsz entry points mean it: NULL is the per-thread stream. */
static inline cudaStream_t vg_ptsz(cudaStream_t s) { return s ? s : cudaStreamPerThread; }

/* A driver entry point as the runtime fetches it (cudart_dev.c: cuGetProcAddress_v2 from a
 * libcuda.so.1 handle, through whatever dlsym the process has); NULL when none. */
void *vg_driver_entry(const char *sym);

#endif
