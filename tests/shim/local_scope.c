/*
 * local_scope.c: loads liblocal_user.so (argv[1]) with RTLD_LOCAL and runs it; links no
 * CUDA library itself, so every CUDA library comes in as a dependency of that library,
 * outside the global scope (tests/shim/local_scope.sh).
 */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s liblocal_user.so\n", argv[0]);
        return 2;
    }
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 1;
    }
    int (*run)(FILE *) = (int (*)(FILE *))dlsym(h, "local_user_run");
    if (run == NULL) {
        fprintf(stderr, "dlsym: %s\n", dlerror());
        return 1;
    }
    int rc = run(stdout);
    printf("end %d\n", rc);
    return rc;
}
