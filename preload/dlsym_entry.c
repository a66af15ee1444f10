/*
 * dlsym_entry.c: the shim's dlsym, built without sanitizer instrumentation because the
 * sanitizer runtimes call dlsym while they initialise, before instrumented code may run.
 *
 * glibc resolves RTLD_NEXT relative to the object that called dlsym, found from the
 * return address. An interposer that called the real dlsym would make every RTLD_NEXT
 * lookup relative to the shim. So for RTLD_NEXT the entry point below does not call: it
 * jumps into glibc's dlsym, leaving the original return address in place, and the lookup
 * means what the caller meant. Every other handle (a libcuda handle from dlopen, as
 * PyTorch and Triton use, or RTLD_DEFAULT) is looked up normally and the result passes
 * through the wrapper substitution of wrap_cuda.c once the shim is initialised.
 *
 * x86-64 only (the jump is written in assembly); elsewhere the shim does not interpose
 * dlsym and the runtime-fetched driver entry points are caught through cuGetProcAddress
 * alone.
 */
#define _GNU_SOURCE
#include <dlfcn.h>

#include "hooks.h"

int dh__dlsym_ready; /* atomic: set by the shim's constructor */
void *dh__dlsym_substitute(const char *name, void *p);

static void *(*dh__libc_dlsym)(void *, const char *);

/* glibc's dlsym under either symbol version it has used (GLIBC_2.34 after libdl moved
 * into libc, GLIBC_2.2.5 before). A benign race: every thread finds the same pointer. */
__attribute__((used)) static void *dh__dlsym_resolve(void)
{
    void *(*p)(void *, const char *) = __atomic_load_n(&dh__libc_dlsym, __ATOMIC_ACQUIRE);
    if (!p) {
        p = (void *(*)(void *, const char *))dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
        if (!p)
            p = (void *(*)(void *, const char *))dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
        __atomic_store_n(&dh__libc_dlsym, p, __ATOMIC_RELEASE);
    }
    return (void *)p;
}

dh_dlsym_fn dh_real_dlsym(void) { return (dh_dlsym_fn)dh__dlsym_resolve(); }

__attribute__((used)) static void *dh__dlsym_other(void *handle, const char *name)
{
    void *p = ((dh_dlsym_fn)dh__dlsym_resolve())(handle, name);
    if (__atomic_load_n(&dh__dlsym_ready, __ATOMIC_ACQUIRE))
        p = dh__dlsym_substitute(name, p);
    return p;
}

#if defined(__x86_64__)
/* void *dlsym(void *handle, const char *name): handle in %rdi, name in %rsi. */
__asm__(".text\n"
        ".globl dlsym\n"
        ".type dlsym, @function\n"
        "dlsym:\n"
        "    cmpq $-1, %rdi\n"            /* RTLD_NEXT? */
        "    jne dh__dlsym_other\n"
        "    pushq %rdi\n"
        "    pushq %rsi\n"
        "    subq $8, %rsp\n"             /* keep the call 16-byte aligned */
        "    call dh__dlsym_resolve\n"
        "    addq $8, %rsp\n"
        "    popq %rsi\n"
        "    popq %rdi\n"
        "    jmp *%rax\n"                 /* glibc sees the original caller */
        ".size dlsym, .-dlsym\n");
#endif
