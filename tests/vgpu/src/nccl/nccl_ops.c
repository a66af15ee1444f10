/*
 * nccl_ops.c: custom reduction ops (ncclRedOpCreatePreMulSum / ncclRedOpDestroy).
 *
 * A custom op belongs to one communicator and one data type; its handle is ncclNumOps plus
 * its index in the communicator's table, as in NCCL. A call that uses it captures what it
 * needs (the scalar's value, or its device address for ncclScalarDevice, read when the
 * collective starts), so the op may be destroyed as soon as the call returns. Across ranks
 * every custom op counts as the same reduction ("premulsum") when calls are matched.
 *
 * Thread-safety: like every call on a communicator, these must not run concurrently with
 * other calls on the same communicator.
 */
#include <stdlib.h>
#include <string.h>

#include "nccl_int.h"

#define VGN_ALIAS(name) \
    __typeof__(p##name) name __attribute__((weak, alias("p" #name), visibility("default")))

VG_API ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar,
                                              ncclDataType_t datatype,
                                              ncclScalarResidence_t residence, ncclComm_t comm)
{
    ncclResult_t r = vgn_comm_check(comm);
    if (r != ncclSuccess)
        return r;
    if (!op || !scalar || vgn_dtype_size(datatype) == 0 ||
        (residence != ncclScalarDevice && residence != ncclScalarHostImmediate)) {
        vgn_error("nccl: ncclRedOpCreatePreMulSum: NULL op or scalar, or invalid datatype %d "
                  "or residence %d", (int)datatype, (int)residence);
        return ncclInvalidArgument;
    }
    int slot = 0;
    while (slot < comm->npremul && comm->premul[slot].live)
        slot++;
    if (slot == comm->npremul) {
        vgn_premul_t *p = realloc(comm->premul, (size_t)(slot + 1) * sizeof(*p));
        if (!p)
            return ncclSystemError;
        comm->premul = p;
        comm->npremul = slot + 1;
    }
    vgn_premul_t *m = &comm->premul[slot];
    memset(m, 0, sizeof(*m));
    m->live = 1;
    m->dtype = datatype;
    m->on_device = residence == ncclScalarDevice;
    if (m->on_device)
        m->dev = scalar;
    else
        memcpy(m->value, scalar, vgn_dtype_size(datatype));
    *op = (ncclRedOp_t)(ncclNumOps + slot);
    return ncclSuccess;
}
VGN_ALIAS(ncclRedOpCreatePreMulSum);

VG_API ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm)
{
    ncclResult_t r = vgn_comm_check(comm);
    if (r != ncclSuccess)
        return r;
    int slot = (int)op - ncclNumOps;
    if (slot < 0 || slot >= comm->npremul || !comm->premul[slot].live) {
        vgn_error("nccl: ncclRedOpDestroy: op %d is not a live custom op of communicator %s",
                  (int)op, comm->name);
        return ncclInvalidArgument;
    }
    comm->premul[slot].live = 0;
    return ncclSuccess;
}
VGN_ALIAS(ncclRedOpDestroy);

ncclResult_t vgn_resolve_op(vgn_item_t *it, ncclRedOp_t op, const char *api)
{
    if ((int)op >= 0 && (int)op < ncclNumOps) {
        it->redop = op;
        return ncclSuccess;
    }
    int slot = (int)op - ncclNumOps;
    ncclComm_t c = it->comm;
    if (slot < 0 || slot >= c->npremul || !c->premul[slot].live) {
        vgn_error("nccl: %s: invalid reduction op %d", api, (int)op);
        return ncclInvalidArgument;
    }
    const vgn_premul_t *m = &c->premul[slot];
    if (m->dtype != it->dtype) {
        vgn_error("nccl: %s: reduction op %d was created for %s, the call is on %s", api,
                  (int)op, vgn_dtype_name(m->dtype), vgn_dtype_name(it->dtype));
        return ncclInvalidArgument;
    }
    it->redop = VGN_PREMUL;
    it->scalar_dev = m->on_device ? m->dev : NULL;
    memcpy(it->scalar, m->value, sizeof(it->scalar));
    return ncclSuccess;
}

void vgn_premul_free(ncclComm_t c)
{
    free(c->premul);
    c->premul = NULL;
    c->npremul = 0;
}
