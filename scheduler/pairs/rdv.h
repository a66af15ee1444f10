/*
 * rdv.h: who this process is among the ranks of the run, and the exchange of the NCCL
 * unique id without an MPI library: rank 0 writes it into a file of a directory every rank
 * can see (atomic rename), the others poll for it. The file carries the launcher's job id
 * when there is one, so that a file left by an earlier run is never taken for this run's,
 * and a tag of what rank 0 will measure, so that ranks that disagree stop before any
 * collective call.
 */
#ifndef DH_OVL_RDV_H
#define DH_OVL_RDV_H

#include <stddef.h>
#include <stdint.h>

#include <nccl.h>

typedef struct dh_ovl_world {
    int rank, size;             /* OMPI_COMM_WORLD_*, PMI_*, RANK/WORLD_SIZE; else 0 of 1 */
    int local_rank;             /* for the device choice: *_LOCAL_RANK, else rank */
    char token[128];            /* the launcher's job id, "" when none is known */
} dh_ovl_world_t;

/* Reads the launcher's environment. Never fails; malformed values count as absent. */
void dh_ovl_world_get(dh_ovl_world_t *w);

/* The default rendezvous directory: /tmp/dhelix-pairs-<uid>-<ppid> (the ranks of one
 * mpirun or torchrun share their parent). */
void dh_ovl_rdv_default_dir(char *out, size_t len);

/* Rank 0: writes id and tag into dir (created when missing). Others: wait up to timeout_s
 * seconds for rank 0's file, read id from it, and fail when its tag is not theirs (the
 * ranks must agree on what they measure before they make collective calls). Returns 0, or
 * -1 with one line in err. */
int dh_ovl_rdv_exchange(const dh_ovl_world_t *w, const char *dir, ncclUniqueId *id,
                        uint64_t tag, double timeout_s, char *err, size_t errlen);

/* Rank 0, once every rank has joined the communicator: removes the file (and the
 * directory when it is empty). */
void dh_ovl_rdv_cleanup(const dh_ovl_world_t *w, const char *dir);

#endif
