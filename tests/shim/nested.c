/*
 * nested.c: calls cublasSgemm_v2 of libdh_fakeblas.so (which calls cudaMalloc inside)
 * and then cudaMalloc itself, once each. Under the shim: cublasSgemm_v2 1 call,
 * cudaMalloc 1 call and 1 nested call. Prints the GEMM's status.
 */
#include <stdio.h>

#include <cublas_api.h>
#include <cuda_runtime_api.h>

int main(void)
{
    float f = 0;
    void *p = NULL;
    int st = (int)cublasSgemm_v2(NULL, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &f, NULL, 1, NULL, 1,
                                 &f, NULL, 1);
    (void)cudaMalloc(&p, 16);
    printf("cublasSgemm_v2=%d\n", st);
    return 0;
}
