/*
 * nccl_cost.c: the alpha-beta cost model of the vgpu's collectives.
 *
 * A communicator's link class is intra-node (0) when all its members sit on one node
 * (global rank / gpus_per_node), else inter-node (1). For a class, alpha is the per-step
 * latency (intra_lat_us or inter_lat_us, in ns) and B the bus bandwidth per GPU
 * (intra_gbps or inter_gbps) times link_eff; 1 GB/s is 1 byte/ns, so S / B is in ns.
 * n is the number of ranks. The formulas follow the NCCL ring/tree algorithms:
 *
 *   all-reduce      min(ring, tree)
 *                   ring = 2(n-1) alpha + 2(n-1)/n * S / B   (reduce-scatter + all-gather)
 *                   tree = 2 ceil(log2 n) alpha + 2 S / B    (reduce up, broadcast down)
 *   all-gather,     (n-1) alpha + (n-1)/n * S_total / B      S_total = n * per-rank bytes
 *   reduce-scatter
 *   gather, scatter same as all-gather (the root's link carries (n-1)/n of S_total)
 *   broadcast,      (n-1) alpha + S / B                      pipelined ring
 *   reduce
 *   all-to-all      (n-1) alpha + (n-1)/n * S / B            S = per-rank send bytes
 *   send/recv       alpha + S / B
 *   n == 1          a local copy: vg_cost_mem(2 S) (read and write)
 *
 * Concurrent communication on one link class shares bandwidth in the core (op->link).
 *
 * The functions carry VG_API so that they can serve other parts of the vgpu, but
 * libnccl.so.2's version script exports only NCCL's own names: to call them from outside
 * this library, this file would move into libvgpu.
 */
#include <math.h>

#include "nccl_int.h"

static void link_params(const vgpu_profile_t *p, int link, double *alpha_ns, double *bw)
{
    double gbps = link ? p->inter_gbps : p->intra_gbps;
    double lat_us = link ? p->inter_lat_us : p->intra_lat_us;
    double eff = p->link_eff > 0 ? p->link_eff : 1.0;
    *alpha_ns = lat_us * 1e3;
    *bw = gbps * eff;
    if (*bw <= 0)
        *bw = 1e-9; /* a profile without the link: effectively unusable, never a division by 0 */
}

/* bytes: S for all-reduce, broadcast and reduce; S_total for all-gather, reduce-scatter,
 * gather and scatter; the per-rank send size for all-to-all (see the table above). */
VG_API double vg_nccl_cost_coll(const vgpu_profile_t *p, vgn_kind_t k, int n, int link,
                                double bytes)
{
    if (n <= 1)
        return vg_cost_mem(p, 2 * bytes);
    double a, bw;
    link_params(p, link, &a, &bw);
    double steps = n - 1, frac = (double)(n - 1) / n;
    switch (k) {
    case VGN_ALLREDUCE: {
        double ring = 2 * steps * a + 2 * frac * bytes / bw;
        double tree = 2 * ceil(log2((double)n)) * a + 2 * bytes / bw;
        return ring < tree ? ring : tree;
    }
    case VGN_ALLGATHER: case VGN_REDUCESCATTER: case VGN_GATHER: case VGN_SCATTER:
    case VGN_ALLTOALL:
        return steps * a + frac * bytes / bw;
    case VGN_BROADCAST: case VGN_REDUCE:
        return steps * a + bytes / bw;
    default:
        return vg_nccl_cost_p2p(p, link, bytes);
    }
}

VG_API double vg_nccl_cost_p2p(const vgpu_profile_t *p, int link, double bytes)
{
    double a, bw;
    link_params(p, link, &a, &bw);
    return a + bytes / bw;
}

/* Bytes this rank puts on the wire, for the counters: the ring algorithms above. */
VG_API double vg_nccl_cost_bytes_sent(vgn_kind_t k, int n, int rank, int root, double bytes)
{
    if (n <= 1)
        return 0;
    double frac = (double)(n - 1) / n;
    switch (k) {
    case VGN_ALLREDUCE: return 2 * frac * bytes;
    case VGN_ALLGATHER: case VGN_REDUCESCATTER: case VGN_ALLTOALL: return frac * bytes;
    case VGN_BROADCAST: return rank == (root + n - 1) % n ? 0 : bytes; /* last one stops */
    case VGN_REDUCE: return rank == root ? 0 : bytes;
    case VGN_GATHER: return rank == root ? 0 : bytes / n;
    case VGN_SCATTER: return rank == root ? frac * bytes : 0;
    case VGN_SEND: return bytes;
    default: return 0;
    }
}
