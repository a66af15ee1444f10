/*
 * nccl_dev.h: the two host functions of NCCL's device API that the shim wraps,
 * ncclDevCommCreate and ncclDevCommDestroy. NCCL 2.28 declares them in nccl_device/core.h,
 * a header only CUDA C++ compiles, as NCCL_EXTERN_C __host__ (NVIDIA/nccl
 * src/include/nccl_device/core.h): C linkage, and every parameter a communicator or a
 * pointer to a struct, so these C prototypes, with the structs left incomplete, have the
 * same ABI. libnccl exports them, with their pncclX twins, like every API function.
 */
#ifndef DH_NCCL_DEV_H
#define DH_NCCL_DEV_H

#include <nccl.h>

struct ncclDevCommRequirements;
struct ncclDevComm;

/* Creates the device communicator of comm (collective over comm's ranks, like
 * ncclCommRegister: it registers memory and may allocate). */
ncclResult_t ncclDevCommCreate(ncclComm_t comm, const struct ncclDevCommRequirements *reqs,
                               struct ncclDevComm *outDevComm);
/* Destroys it; queued work may still use its resources, so the wrapper drains first. */
ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const struct ncclDevComm *devComm);

#endif
