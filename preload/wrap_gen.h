/*
 * wrap_gen.h: the generated drain-and-forward wrappers (scripts/gen-entries writes their
 * list, entry_list.h, from the toolkit's headers): every entry point of the runtime, the
 * driver, cuBLAS (legacy API and cublasXt included) and cuBLASLt that the shim neither
 * wraps by hand (hook_list.h) nor knows to touch no stream (preload/entries/host_only.txt).
 * When the mode defers, such a call issues everything the shim holds (a drain, reason
 * UNCAPTURABLE) and is then forwarded in program order, so that nothing the shim does not
 * understand runs ahead of deferred work; otherwise it is forwarded at once. A runtime or
 * driver call forwarded after a drain also reports a pending asynchronous error of a
 * deferred op (wrap.h dh__report). An entry point the next library does not define answers
 * the library's "not initialised" status (hooks.h), as if the library were absent.
 *
 * The two functions below are the halves of such a wrapper for a translation unit that
 * cannot include wrap.h: the legacy cuBLAS API (cublas.h may not meet cublas_v2.h, which
 * the scheduler's headers include). Both run on the calling thread; thread-safe.
 */
#ifndef DH_WRAP_GEN_H
#define DH_WRAP_GEN_H

/* After dh__hook_enter: drains when this call may defer (the program's own call in a
 * deferring mode); returns nonzero when it did. */
int dh__gen_drain(void);
/* After the forwarded call: marks it forwarded (later strand-1 work follows it) when
 * dh__gen_drain drained, and leaves the wrapper. */
void dh__gen_done(int drained);

/* The legacy TU's wrapper addresses, in DH_HOOKS_GEN_LEGACY order (wrap_gen_legacy.c). */
extern void *const dh__legacy_wrappers[];
/* The driver's old-ABI wrapper addresses, in DH_HOOKS_OLDABI order (wrap_gen_oldabi.c). */
extern void *const dh__oldabi_wrappers[];

#endif
