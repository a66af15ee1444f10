/*
 * orphan.c: a program that loads no CUDA library, yet finds cudaMalloc, cublasSgemm_v2,
 * cuStreamSynchronize and ncclAllReduce through the preloaded shim (dlsym(RTLD_DEFAULT)).
 * Their wrappers have no next definition to forward to: they must return the API's "not
 * initialised" error, without crashing, and log one error per entry point however often
 * they are called. Prints "<name>=<rc1>,<rc2>" per entry point, or "<name>=absent".
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

#include <cublas_api.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

/* The driver and NCCL: one entry point of each, called twice. */
static void other_libraries(void)
{
    __typeof__(&cuStreamSynchronize) d =
        (__typeof__(&cuStreamSynchronize))dlsym(RTLD_DEFAULT, "cuStreamSynchronize");
    __typeof__(&ncclAllReduce) n =
        (__typeof__(&ncclAllReduce))dlsym(RTLD_DEFAULT, "ncclAllReduce");
    float f = 0;
    if (d == NULL)
        printf("cuStreamSynchronize=absent\n");
    else
        printf("cuStreamSynchronize=%d,%d\n", (int)d(NULL), (int)d(NULL));
    if (n == NULL) {
        printf("ncclAllReduce=absent\n");
        return;
    }
    int r1 = (int)n(&f, &f, 0, ncclFloat, ncclSum, NULL, 0);
    int r2 = (int)n(&f, &f, 0, ncclFloat, ncclSum, NULL, 0);
    printf("ncclAllReduce=%d,%d\n", r1, r2);
}

int main(void)
{
    __typeof__(&cudaMalloc) m = (__typeof__(&cudaMalloc))dlsym(RTLD_DEFAULT, "cudaMalloc");
    __typeof__(&cublasSgemm_v2) g =
        (__typeof__(&cublasSgemm_v2))dlsym(RTLD_DEFAULT, "cublasSgemm_v2");
    void *p = NULL;
    float f = 0;
    if (m == NULL)
        printf("cudaMalloc=absent\n");
    else
        printf("cudaMalloc=%d,%d\n", (int)m(&p, 16), (int)m(&p, 16));
    if (g == NULL) {
        printf("cublasSgemm_v2=absent\n");
    } else {
        int r1 = (int)g(NULL, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &f, NULL, 1, NULL, 1, &f,
                        NULL, 1);
        int r2 = (int)g(NULL, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &f, NULL, 1, NULL, 1, &f,
                        NULL, 1);
        printf("cublasSgemm_v2=%d,%d\n", r1, r2);
    }
    other_libraries();
    return 0;
}
