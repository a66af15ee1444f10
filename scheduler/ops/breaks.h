/*
 * breaks.h: test-only switches that disable one deep copy or one drain rule each
 * (DHELIX_TEST_BREAK=name[,name...]). They exist so that tests can show every rule is
 * load-bearing: with a rule broken, some test run must produce a different result or a
 * hazard. Unknown names get one warning at load. Never set in production.
 */
#ifndef DH_BREAKS_H
#define DH_BREAKS_H

/* X(id, name, what breaks) */
#define DH_BREAK_LIST(X)                                                                    \
    X(KERNEL_ARGS, "kernel_args", "kernel arguments are referenced, not copied")            \
    X(GEMM_SCALARS, "gemm_scalars", "host alpha/beta are referenced, not copied")           \
    X(LT_DESC, "lt_desc", "cuBLASLt descriptors are referenced, not cloned")               \
    X(PAGEABLE_H2D, "pageable_h2d", "a pageable host source is referenced, not copied")   \
    X(LAUNCH_ATTRS, "launch_attrs", "launch attribute arrays are referenced, not copied")  \
    X(DRAIN_STREAM_SYNC, "drain_stream_sync", "cudaStreamSynchronize does not drain")     \
    X(DRAIN_EVENT_QUERY, "drain_event_query", "a query of a queued record answers done")  \
    X(DRAIN_MEMCPY, "drain_memcpy", "a blocking cudaMemcpy does not drain")                \
    X(DRAIN_GENERATED, "drain_generated", "the generated wrappers (wrap_gen.h) do not drain") \
    X(FREE_ORDER, "free_order", "a stream-ordered free is issued at once, ahead of the queued uses") \
    X(POOL_BARRIER, "pool_barrier", "the other strand reuses a parked block with no barrier after its free") \
    X(GRAPH_BARRIER, "graph_barrier", "a graph launch (GRAPH_LAUNCH) has an empty footprint: two-strand execution orders nothing around it") \
    X(NCCL_ORDER, "nccl_order", "NCCL ops of different streams are not chained: the dispatcher may issue them across communicators out of program order")

typedef enum dh_break_id {
#define DH__BREAK_ENUM(id, name, what) DH_BREAK_##id,
    DH_BREAK_LIST(DH__BREAK_ENUM)
#undef DH__BREAK_ENUM
    DH_BREAK_COUNT
} dh_break_id_t;

/* Nonzero when DHELIX_TEST_BREAK names id. One relaxed load after the first call.
 * Thread-safe. */
int dh_break(dh_break_id_t id);

#endif
