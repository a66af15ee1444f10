/*
 * dhelix_nccl.h: what libdhelix_shim.so offers a program about its NCCL communicators.
 * Callable from C, or from Python through ctypes:
 *
 *     shim = ctypes.CDLL(None)        # the preloaded shim is in the global scope
 *     shim.dh_group_set_enabled(ctypes.c_void_p(comm_ptr), 0)
 */
#ifndef DHELIX_NCCL_H
#define DHELIX_NCCL_H

#include <nccl.h>

/* Whether comm's collectives and point-to-point calls may be interleaved with the other
 * strand's work (enabled != 0) or are pinned (kept in program order, never co-running with
 * the other strand), overriding DHELIX_GROUPS for that communicator. Operations the program
 * issues after the call follow the new setting; those already queued keep theirs. Logged
 * at info level (DHELIX_LOG=info, subsystem nccl).
 * Returns the previous setting (1 interleaved, 0 pinned), or -1 when comm is not a
 * communicator the library knows. Thread-safe. */
int dh_group_set_enabled(ncclComm_t comm, int enabled);

#endif
