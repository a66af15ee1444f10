/*
 * fakedrv.c: libdh_fakedrv.so, a stand-in for libcuda.so.1 and libnccl.so.2 where the
 * driver and NCCL are not installed (shim.preload runs on machines with neither). It
 * defines every driver and NCCL entry point the shim wraps (generated from hook_list.h, so
 * a new entry point is defined here as soon as it is wrapped) and each answers what the
 * real library answers without a device: CUDA_ERROR_STUB_LIBRARY, as the toolkit's stub
 * libcuda does, and ncclInvalidArgument, as NCCL does for a NULL communicator (the two
 * entry points that return text answer "fake NCCL"). Linked into
 * shim_child_nodrv, it gives the shim's driver and NCCL wrappers a next definition to
 * forward to, so that a call through them is counted (a wrapper with none is not) and
 * test_preload.c's "every wrapped entry point once" covers these libraries too.
 *
 * Its soname is its own, not libcuda.so.1: the CUDA runtime, which dlopens libcuda.so.1
 * by that name, never takes it for a driver.
 */
#include <cuda.h>
#include <nccl.h>

/* The legacy 4-argument entry point (the header maps the name to cuGetProcAddress_v2) and
 * the _ptsz variants the header declares only under per-thread compilation. */
#undef cuGetProcAddress
CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);
#include "ptsz.h"

#include "hook_list.h"
#include "nccl_dev.h"

#define FAKE_CUDA(lib, ret, name, params, args) \
    __attribute__((visibility("default"))) ret name params { return CUDA_ERROR_STUB_LIBRARY; }
DH_HOOKS_CUDA(FAKE_CUDA)
#undef FAKE_CUDA

/* nccl.h declares these without a prototype. */
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);

#define FAKE_NCCL(lib, ret, name, params, args) \
    __attribute__((visibility("default"))) ret name params { return ncclInvalidArgument; }
DH_HOOKS_NCCL_RESULT(FAKE_NCCL)
#undef FAKE_NCCL

#define FAKE_NCCL_STRING(lib, ret, name, params, args) \
    __attribute__((visibility("default"))) ret name params { return "fake NCCL"; }
DH_HOOKS_NCCL_STRING(FAKE_NCCL_STRING)
#undef FAKE_NCCL_STRING
