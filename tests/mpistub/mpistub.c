/*
 * mpistub.c: the one-process MPI of include/mpi.h (why and what: that header).
 */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int initialized;

/* Bytes per element of each datatype, indexed by its value; 0: not a datatype. */
static size_t dh__mpistub_size(MPI_Datatype t)
{
    static const size_t sizes[] = {0, 1, sizeof(char), sizeof(int), sizeof(unsigned),
                                   sizeof(long), sizeof(unsigned long), sizeof(long long),
                                   sizeof(unsigned long long), sizeof(float), sizeof(double)};
    return t > 0 && (size_t)t < sizeof sizes / sizeof sizes[0] ? sizes[t] : 0;
}

static int dh__mpistub_copy(const void *in, void *out, int count, MPI_Datatype t)
{
    size_t size = dh__mpistub_size(t);
    if (size == 0 || count < 0) {
        fprintf(stderr, "mpistub: datatype %d (count %d) is not one this stand-in knows\n", t,
                count);
        return MPI_ERR_OTHER;
    }
    if (in != MPI_IN_PLACE && in != out && count > 0)
        memcpy(out, in, size * (size_t)count);
    return MPI_SUCCESS;
}

int MPI_Init(int *argc, char ***argv)
{
    initialized = 1;
    return MPI_SUCCESS;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    initialized = 1;
    *provided = required;
    return MPI_SUCCESS;
}

int MPI_Initialized(int *flag)
{
    *flag = initialized;
    return MPI_SUCCESS;
}

int MPI_Finalize(void)
{
    return MPI_SUCCESS;
}

int MPI_Abort(MPI_Comm comm, int errorcode)
{
    fflush(NULL);
    exit(errorcode);
}

int MPI_Comm_rank(MPI_Comm comm, int *rank)
{
    *rank = 0;
    return comm == MPI_COMM_NULL ? MPI_ERR_OTHER : MPI_SUCCESS;
}

int MPI_Comm_size(MPI_Comm comm, int *size)
{
    *size = 1;
    return comm == MPI_COMM_NULL ? MPI_ERR_OTHER : MPI_SUCCESS;
}

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm)
{
    *newcomm = color == MPI_UNDEFINED ? MPI_COMM_NULL : MPI_COMM_SELF;
    return MPI_SUCCESS;
}

int MPI_Comm_free(MPI_Comm *comm)
{
    *comm = MPI_COMM_NULL;
    return MPI_SUCCESS;
}

int MPI_Barrier(MPI_Comm comm)
{
    return MPI_SUCCESS;
}

int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm)
{
    return MPI_SUCCESS;
}

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm)
{
    return dh__mpistub_copy(sendbuf, recvbuf, count, type);
}

int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op,
               int root, MPI_Comm comm)
{
    return dh__mpistub_copy(sendbuf, recvbuf, count, type);
}

static void dh__mpistub_no_peer(const char *call, int peer)
{
    fprintf(stderr, "mpistub: %s with rank %d: this build has no MPI (tests/mpistub), its world "
                    "is one process\n", call, peer);
    fflush(NULL);
    exit(1);
}

int MPI_Send(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    dh__mpistub_no_peer("MPI_Send", dest);
    return MPI_ERR_OTHER;
}

int MPI_Recv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
             MPI_Status *status)
{
    dh__mpistub_no_peer("MPI_Recv", source);
    return MPI_ERR_OTHER;
}

double MPI_Wtime(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
