/*
 * mpi.h (tests/mpistub): a one-process stand-in for the part of MPI that the project's test
 * programs use, for builds on a machine without MPI (a GPU image: cmake/Dependencies.cmake
 * picks it when find_package(MPI) fails). The world is one process, rank 0 of 1: a
 * collective copies its input to its output, a barrier returns, a split gives a
 * communicator of that one process (or MPI_COMM_NULL for MPI_UNDEFINED). Point-to-point
 * calls have no peer in such a world and end the program with a message. Every function
 * returns MPI_SUCCESS unless it says otherwise; none is thread-safe beyond what a
 * one-process world needs (they keep no state but whether MPI_Init has run).
 */
#ifndef DH_MPISTUB_MPI_H
#define DH_MPISTUB_MPI_H

#ifdef __cplusplus
extern "C" {
#endif

#define DH_MPISTUB 1

typedef int MPI_Comm;
typedef int MPI_Datatype;
typedef int MPI_Op;
typedef struct MPI_Status {
    int MPI_SOURCE, MPI_TAG, MPI_ERROR;
} MPI_Status;

#define MPI_SUCCESS 0
#define MPI_ERR_OTHER 15
#define MPI_UNDEFINED (-32766)

#define MPI_COMM_NULL ((MPI_Comm)0)
#define MPI_COMM_WORLD ((MPI_Comm)1)
#define MPI_COMM_SELF ((MPI_Comm)2)

/* Datatypes: the value indexes dh__mpistub_size (mpistub.c). */
#define MPI_BYTE ((MPI_Datatype)1)
#define MPI_CHAR ((MPI_Datatype)2)
#define MPI_INT ((MPI_Datatype)3)
#define MPI_UNSIGNED ((MPI_Datatype)4)
#define MPI_LONG ((MPI_Datatype)5)
#define MPI_UNSIGNED_LONG ((MPI_Datatype)6)
#define MPI_LONG_LONG ((MPI_Datatype)7)
#define MPI_UNSIGNED_LONG_LONG ((MPI_Datatype)8)
#define MPI_FLOAT ((MPI_Datatype)9)
#define MPI_DOUBLE ((MPI_Datatype)10)

#define MPI_SUM ((MPI_Op)1)
#define MPI_MAX ((MPI_Op)2)
#define MPI_MIN ((MPI_Op)3)
#define MPI_PROD ((MPI_Op)4)
#define MPI_LAND ((MPI_Op)5)
#define MPI_LOR ((MPI_Op)6)

#define MPI_THREAD_SINGLE 0
#define MPI_THREAD_FUNNELED 1
#define MPI_THREAD_SERIALIZED 2
#define MPI_THREAD_MULTIPLE 3

#define MPI_IN_PLACE ((void *)1)
#define MPI_STATUS_IGNORE ((MPI_Status *)0)

/* Setup and teardown. MPI_Init_thread grants the level asked for (one process, no
 * progress thread). MPI_Abort flushes stdio and exits with errorcode. */
int MPI_Init(int *argc, char ***argv);
int MPI_Init_thread(int *argc, char ***argv, int required, int *provided);
int MPI_Initialized(int *flag);
int MPI_Finalize(void);
int MPI_Abort(MPI_Comm comm, int errorcode) __attribute__((noreturn));

/* Communicators: every one but MPI_COMM_NULL is the one process, rank 0 of size 1. */
int MPI_Comm_rank(MPI_Comm comm, int *rank);
int MPI_Comm_size(MPI_Comm comm, int *size);
int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm);
int MPI_Comm_free(MPI_Comm *comm);

/* Collectives over one process: recvbuf = sendbuf (nothing when MPI_IN_PLACE). */
int MPI_Barrier(MPI_Comm comm);
int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm);
int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm);
int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op,
               int root, MPI_Comm comm);

/* Point to point: no peer exists; both end the program (status 1) with a message. */
int MPI_Send(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm);
int MPI_Recv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
             MPI_Status *status);

double MPI_Wtime(void);

#ifdef __cplusplus
}
#endif
#endif
