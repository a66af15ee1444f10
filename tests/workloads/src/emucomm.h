/*
 * emucomm.h: emulated communication (--emulate-comm), for running a multi-GPU configuration
 * on ONE device.
 *
 * A job that runs fewer processes than its configuration has ranks (the representative
 * layout of parallel.h: one process per pipeline stage x context-parallel rank x
 * expert-parallel rank) has groups whose other members do not exist (tensor, data,
 * data-with-context and expert-data parallel). With --emulate-comm each collective on such
 * a group is replaced, on the same stream and inside the same ProcessGroupNCCL event
 * protocol (comm.c), by:
 *
 *   SMS:US[:GBPS]  one launch of the kernel wl_emu_comm (kargs.h) with SMS blocks, which
 *                  moves the collective's bytes through device memory in chunks, as an NCCL
 *                  ring kernel does, and holds its SMs for at least
 *                      US + bytes x factor / GBPS   (ns when bytes / (GB/s))
 *                  where factor is NCCL's bus factor (all-reduce 2(n-1)/n, all-gather and
 *                  reduce-scatter (n-1)/n of the full buffer, broadcast and send/recv 1) and
 *                  GBPS the bus bandwidth being emulated (0 or absent: US alone). On the
 *                  vgpu the same kernel is a registered host kernel whose cost is
 *                  max(that time, 2 x bytes at HBM bandwidth) on SMS / sm_count of the
 *                  device.
 *   nccl           the real collective on a one-rank NCCL communicator per group (named
 *                  like the group), so that the NCCL path (and a shim's interception of it)
 *                  runs with real NCCL on one device.
 *
 * What the outputs hold (both forms, so that a run is deterministic and finite): the other
 * members are taken to contribute zeros and to hold zeros. All-reduce and broadcast leave
 * the buffer as it is; reduce-scatter writes this rank's chunk of the input; all-gather
 * writes this rank's input at its offset and zeros elsewhere; a received buffer of a
 * point-to-point batch is zeroed. Losses therefore differ from a real multi-GPU run; the
 * exactness check that matters is a run against the same run through the shim, both with
 * the same flag.
 *
 * At exit process 0 prints one line on stderr:
 *   workload: emulated communication {"mode": "kernel", "sms": 16, "us": 20, "gbps": 100,
 *     "collectives": N, "bytes": B, "target_us": T, "device_us": D, "measured": M}
 * target_us sums the times asked for; device_us sums the kernels' own device time (a GPU's
 * %globaltimer, from first block start to last block end; the modelled solo time on the
 * vgpu) over the first M collectives (-1 in nccl mode).
 *
 * Thread-safety: wl_emu_parse before any thread; the rest from the threads that issue
 * collectives, which never do so at the same time (comm.h).
 */
#ifndef WL_EMUCOMM_H
#define WL_EMUCOMM_H

#include "comm.h"

/* Parses the --emulate-comm argument (see above); returns 0, or -1 with a message in err. */
int wl_emu_parse(const char *spec, char *err, size_t errlen);

/* Nonzero when g's collectives are emulated: emulation is on, g has several members and
 * some of them are not processes of this job. */
int wl_emu_group(const wl_group_t *g);

/* Makes what g needs (nccl mode: its one-rank communicator in g->comm). Call where
 * wl_group_connect would create g's communicator. */
void wl_emu_connect(wl_group_t *g);

/* The emulated collectives, on stream s, with comm.h's arguments. */
typedef enum { WL_EMU_ALLREDUCE, WL_EMU_ALLGATHER, WL_EMU_REDUCE_SCATTER, WL_EMU_BROADCAST } wl_emu_coll_t;
void wl_emu_collective(wl_group_t *g, wl_emu_coll_t kind, const void *in, void *out, size_t n,
                       ncclDataType_t t, ncclRedOp_t op, cudaStream_t s);
void wl_emu_p2p(wl_group_t *g, const wl_p2p_t *ops, int nops, ncclDataType_t t, cudaStream_t s);

/* After the device is idle: prints the summary line (process 0) and frees what emulation
 * allocated. Does nothing when emulation is off. */
void wl_emu_fini(void);

#endif
