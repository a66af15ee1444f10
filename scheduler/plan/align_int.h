/*
 * align_int.h: what align.c (the cost model, orders of collectives, units) hands to
 * align_dp.c (the DP). Not part of dh_plan's API. Pure functions: thread-safe.
 */
#ifndef DH_ALIGN_INT_H
#define DH_ALIGN_INT_H

#include <stddef.h>
#include <stdint.h>

#include "align.h"

#define DH__NCLS 3   /* compute, comm, copy: the classes with an efficiency */

/* What the DP needs of one segment. For a segment of A, v holds the class shares fA(x); for
 * one of B, v holds g(x) = sum_y fB(y) eff(x, y), so that e = sum_x fA(x) g(x). */
typedef struct dh__seg {
    double t;           /* sum of solo times */
    double v[DH__NCLS];
    double memmax;      /* max of the prefix sums over the states the segment spans */
    uint64_t comms;     /* communicators used (bit c & 63; comm -1 sets none) */
    int bad;            /* holds a host or pinned op */
    int commcopy;       /* holds a comm or copy op */
    int mclass;         /* A only: index of its comms among the distinct masks, -1 none */
} dh__seg_t;

/* Solo time as the model uses it: an unknown (negative) time counts as 0. */
double dh__align_us(const dh_align_op_t *op);
/* Sums of ops[first..first+n) into s (memmax and mclass 0); v holds class times. */
void dh__seg_sum(const dh_align_op_t *ops, size_t first, size_t n, dh__seg_t *s);
/* Adds the sums of s into acc (memmax: the larger). */
void dh__seg_add(dh__seg_t *acc, const dh__seg_t *s);
/* Class times to shares fX(c). */
void dh__seg_shares(dh__seg_t *s);
/* B's shares fB to g(x) = sum_y fB(y) eff(x, y). */
void dh__seg_g(dh__seg_t *s, const double eff[3][3]);
/* The model's table clamped to [-1, 1]. */
void dh__model_clamped(const dh_align_model_t *m, double eff[3][3]);
/* The measured efficiency of a beside b, or NAN when the pair was not measured. */
double dh__measured(const dh_align_model_t *m, uint64_t a, uint64_t b);
/* P for two segments with precomputed sums; INFINITY when illegal. measured is the
 * efficiency of a measured single-op pair or NAN. */
double dh__pair(const dh__seg_t *sa, const dh__seg_t *sb, double eff_cc, double measured);

/* One communicator's order as the DP checks it: cntA[i] and cntB[j] count its collectives
 * among A[0..i) and B[0..j) (op positions); with x of A's done, between ylo[x] and yhi[x]
 * of B's may be. */
typedef struct dh__ord {
    uint32_t *cntA, *cntB, *ylo, *yhi;
} dh__ord_t;

/* The params' orders as state checks (*out NULL when there are none). Errors:
 * DH_ERR_INVALID (an order does not list its communicator's collectives), DH_ERR_NOMEM. */
dh_status_t dh__ord_prep(const dh_align_params_t *p, const dh_align_op_t *a, size_t na,
                         const dh_align_op_t *b, size_t nb, dh__ord_t **out);
void dh__ord_free(dh__ord_t *o, int n);
/* 1 when the collectives done at op state (i, j) are a prefix of every order. */
int dh__ord_ok(const dh__ord_t *o, int n, size_t i, size_t j);

#endif
