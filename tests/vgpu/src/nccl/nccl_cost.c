/*
 * nccl_cost.c: the alpha-beta cost model of the vgpu's collectives, and where a
 * communicator's members sit (the link class and the sharing of a node's NIC).
 *
 * Placement. Global rank g sits on node g / gpus_per_node. A communicator's link class is
 * intra-node (0) when all its members sit on one node, else inter-node (1). For an
 * inter-node communicator, m is the number of its members on each node: the minimum over
 * the nodes it touches when the counts differ (the node with the fewest members has the
 * smallest share of its NIC, and a ring runs at the pace of its slowest link), and 1 when
 * the placement is unknown. A representative communicator has the placement its base and
 * stride give (vgpu_nccl_represent), so one process models the same sharing as a full job.
 *
 * Bandwidth. The profile's inter_gbps is the node's NIC bandwidth divided by gpus_per_node:
 * each GPU's fair share when every GPU of the node talks across nodes at once. A ring over
 * an inter-node communicator enters and leaves each node once, however many members it has
 * there, so on each node its traffic is one flow through the NIC. The node's other GPUs
 * belong to the gpus_per_node / m sibling communicators of the same layout, which run the
 * same collective at the same time (e.g. data-parallel gradient reduction: every
 * tensor-parallel rank drives its own DP ring), so the NIC is split gpus_per_node / m ways
 * and each ring gets NIC / (gpus_per_node / m) = m * inter_gbps. Example: the DP group with
 * TP = 4 on 8-GPU nodes has m = 2; four rings share the NIC and each runs at 2 * inter_gbps.
 * With m = 1 (one member per node) every GPU of the node runs its own ring: inter_gbps.
 * Point-to-point traffic between two nodes is one flow per GPU pair, and every GPU of the
 * node may be sending at once (pipeline stages, context-parallel rings): m = 1. The same
 * holds for all-to-all, gather and scatter, which NCCL runs as point-to-point exchanges:
 * each member's own bytes cross the NIC, not one ring's. A send or receive between two
 * GPUs of one node uses the intra-node link whatever the communicator.
 *
 * For a link, alpha is the per-step latency (intra_lat_us or inter_lat_us, in ns) and B the
 * bus bandwidth per flow times link_eff: intra_gbps, or inter_gbps * m; 1 GB/s is 1 byte/ns,
 * so S / B is in ns. n is the number of ranks. The formulas follow the NCCL ring/tree
 * algorithms:
 *
 *   all-reduce      min(ring, tree)
 *                   ring = 2(n-1) alpha + 2(n-1)/n * S / B   (reduce-scatter + all-gather)
 *                   tree = 2 ceil(log2 n) alpha + 2 S / B    (reduce up, broadcast down)
 *   all-gather,     (n-1) alpha + (n-1)/n * S_total / B      S_total = n * per-rank bytes
 *   reduce-scatter
 *   gather, scatter same as all-gather (the root's link carries (n-1)/n of S_total), m = 1
 *   broadcast,      (n-1) alpha + S / B                      pipelined ring
 *   reduce
 *   all-to-all      (n-1) alpha + (n-1)/n * S / B            S = per-rank send bytes, m = 1
 *   send/recv       alpha + S / B                            m = 1; link of the pair
 *   n == 1          a local copy: vg_cost_mem(2 S) (read and write)
 *
 * Concurrent communication of this GPU on one link class shares bandwidth in the core
 * (op->link); m above stands for the other GPUs of the node, which the core does not see.
 *
 * The functions carry VG_API so that they can serve other parts of the vgpu, but
 * libnccl.so.2's version script exports only NCCL's own names: to call them from outside
 * this library, this file would move into libvgpu.
 */
#include <math.h>

#include "nccl_int.h"

/* The node of global rank g. */
static int node_of(int g, int gpn)
{
    return g / gpn;
}

void vgn_comm_place(ncclComm_t c, int gpus_per_node)
{
    int gpn = gpus_per_node < 1 ? 1 : gpus_per_node, n = c->nranks;
    c->link = 0;
    c->per_node = 1;
    for (int i = 1; i < n; i++)
        if (node_of(c->granks[i], gpn) != node_of(c->granks[0], gpn))
            c->link = 1;
    if (!c->link)
        return;
    /* Members per node, counted at each node's first member (quadratic, but it runs once per
     * communicator and n is at most the job's size). */
    int m = n;
    for (int i = 0; i < n; i++) {
        int node = node_of(c->granks[i], gpn), seen = 0, count = 0;
        for (int j = 0; j < i && !seen; j++)
            seen = node_of(c->granks[j], gpn) == node;
        if (seen)
            continue;
        for (int j = i; j < n; j++)
            count += node_of(c->granks[j], gpn) == node;
        if (count < m)
            m = count;
    }
    c->per_node = m < 1 ? 1 : m;
}

int vgn_pair_link(ncclComm_t c, int peer, int gpus_per_node)
{
    int gpn = gpus_per_node < 1 ? 1 : gpus_per_node;
    if (!c->link || peer < 0 || peer >= c->nranks)
        return c->link;
    return node_of(c->granks[peer], gpn) != node_of(c->granks[c->rank], gpn);
}

/* alpha (ns) and B (bytes/ns) of one flow on link class link; per_node is m (header). */
static void link_params(const vgpu_profile_t *p, int link, int per_node, double *alpha_ns,
                        double *bw)
{
    double gbps = link ? p->inter_gbps * (per_node > 1 ? per_node : 1) : p->intra_gbps;
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
                                int per_node, double bytes)
{
    if (n <= 1)
        return vg_cost_mem(p, 2 * bytes);
    /* m counts for the collectives that run as rings, pipelines or trees; NCCL runs
     * all-to-all, gather and scatter as point-to-point exchanges with every peer, one flow
     * per member through the NIC, so for them m = 1 (header). */
    int ring_like = k == VGN_ALLREDUCE || k == VGN_ALLGATHER || k == VGN_REDUCESCATTER ||
                    k == VGN_BROADCAST || k == VGN_REDUCE;
    double a, bw;
    link_params(p, link, ring_like ? per_node : 1, &a, &bw);
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
    link_params(p, link, 1, &a, &bw); /* one flow per GPU pair: m = 1 */
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
