/*
 * roles.h: what a communicator is for (tp, cp, dp, pp, ep), from the job's layout, the
 * global ranks of its members, its position or its name.
 *
 * Layout (DHELIX_LAYOUT=tp=8,cp=1,pp=2,dp=4[,ep=2]): Megatron's rank order (megatron/core/
 * parallel_state.py, RankGenerator with order "tp-cp-ep-dp-pp"): tensor-parallel rank
 * fastest, then context-parallel, then data-parallel, then pipeline stage:
 *     global = tp_i + tp * (cp_i + cp * (dp_i + dp * pp_i)).
 * Expert parallelism is carved out of the (cp, dp) index as Megatron's expert rank
 * generator does with an expert tensor-parallel size equal to tp: ep_i = (cp_i + cp * dp_i)
 * % ep. A size left out is 1, except dp, which is derived from the world size when that is
 * known.
 *
 * A role is a mask of the dimensions along which a communicator's members differ: a
 * tensor-parallel group is DH_ROLE_TP, Megatron's data-parallel group with context
 * parallelism is DH_ROLE_CP | DH_ROLE_DP, and an expert-parallel group is DH_ROLE_EP.
 * 0 means unknown.
 *
 * Everything here is a pure function of its arguments: thread-safe.
 */
#ifndef DH_NCCL_ROLES_H
#define DH_NCCL_ROLES_H

#include <stddef.h>

#include "common/status.h"

#define DH_ROLE_LIST(X) X(TP, "tp", 0) X(CP, "cp", 1) X(DP, "dp", 2) X(PP, "pp", 3) X(EP, "ep", 4)

enum {
#define DH__ROLE_BIT(id, name, bit) DH_ROLE_##id = 1u << (bit),
    DH_ROLE_LIST(DH__ROLE_BIT)
#undef DH__ROLE_BIT
};

typedef struct dh_layout {
    int set;                 /* a layout was given */
    int tp, cp, dp, pp, ep;  /* sizes, each >= 1 */
    int world;               /* tp * cp * dp * pp */
} dh_layout_t;

/* Parses a DHELIX_LAYOUT value. An empty text gives set = 0. world (> 0 when the job's
 * size is known from the launcher) fills a missing dp and is checked against the product.
 * Errors: DH_ERR_PARSE with a reason in err (a bad key or number, ep not dividing cp * dp,
 * a product that differs from world); *out is then unset (set = 0). */
dh_status_t dh_layout_parse(const char *text, int world, dh_layout_t *out, char *err,
                            size_t errlen);

/* The role of a communicator whose members have global ranks members[0..n) (in rank
 * order), or 0 when they are not one group of the layout (or the layout is not set, or a
 * rank is outside it). A one-member communicator has no role (0). */
unsigned dh_role_from_members(const dh_layout_t *l, const int *members, int n);

/* The role of a communicator of nranks members in which the process of global rank grank
 * has rank `rank`, when exactly one group of the layout fits (Megatron's groups order their
 * members by global rank); then members[0..nranks) receives its global ranks (members may be
 * NULL). 0 when none or several fit. */
unsigned dh_role_from_position(const dh_layout_t *l, int grank, int nranks, int rank,
                               int *members);

/* The role a commName announces: Megatron's group descriptions (TENSOR_MODEL_PARALLEL_GROUP,
 * DATA_PARALLEL_GROUP_WITH_CP, EXPERT_MODEL_PARALLEL_GROUP, ...) or a bare role expression
 * ("tp", "cp+dp"); 0 for anything else. Case-insensitive. */
unsigned dh_role_from_name(const char *name);

/* Parses a role expression: role names joined by '+' ("tp", "dp+cp"), case-insensitive.
 * Returns the mask, or 0 when text is not one. */
unsigned dh_role_parse(const char *text);

/* Writes the role as text: "tp", "cp+dp" (in the order tp, cp, dp, pp, ep) or "-" for 0. */
void dh_role_name(unsigned role, char *buf, size_t len);

#endif
