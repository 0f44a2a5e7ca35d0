/* Numerics of lassieSimulate()'s implicit (BDF) steps shared by the CPU
 * engine (lassie_cpu.c) and the GPU engine (lassie_gpu_bdf.cu): the
 * right-hand side with its roundoff scale, the Jacobian's factor, the
 * sparse LU of I - gamma J on a pattern computed once, its substitution,
 * the BDF coefficients and the error estimates of the order selection.
 *
 * Each function runs on a team: one CPU thread (LASSIE_TEAM_HOST) or the
 * lanes of a warp (or of a part of one) working on one simulation.  Lanes
 * split the loops whose elements are independent; every sum keeps the
 * CPU's order (a lane owns an element and adds its terms in order, or lane
 * 0 adds serially), and the GPU build contracts no multiply-add
 * (--fmad=false), so both engines get the same bits. */
#ifndef SBG_LASSIE_BDF_H
#define SBG_LASSIE_BDF_H

#include <float.h>
#include <math.h>
#include "lassie.h"
#include "lassie_common.h"
#include "portable_math.h"

/* LASSIE_RO: a load of the model's read-only data (the plan's, the
 * network's, the rate constants), on the device through the read-only
 * path, which lets the compiler issue it ahead of the stores around it.
 * LASSIE_UNROLL: a loop over a batch held in registers, unrolled on the
 * device (so that the batch stays in registers). */
#ifdef __CUDA_ARCH__
#define LASSIE_RO(p) __ldg(p)
#define LASSIE_UNROLL _Pragma("unroll")
#else
#define LASSIE_RO(p) (*(p))
#define LASSIE_UNROLL
#endif

/* BDF: highest order, and the past states kept (order q needs q + 1 for
 * its predictor, the estimate for order q + 1 one more) */
#define LASSIE_BDF_MAXORD 5
#define LASSIE_BDF_HIST (LASSIE_BDF_MAXORD + 2)

typedef struct lassie_team {
  int lane, size;   /* this lane, lanes per simulation (a power of 2 <= 32) */
  unsigned mask;    /* the team's lanes in its warp */
} lassie_team;

static LASSIE_HD inline lassie_team lassie_team_host(void) {
  lassie_team t = {0, 1, 1u};
  return t;
}

/* The team's lanes wait for each other (their writes become visible). */
static LASSIE_HD inline void lassie_team_sync(const lassie_team *tm) {
#ifdef __CUDA_ARCH__
  __syncwarp(tm->mask);
#else
  (void)tm;
#endif
}

/* Lane j's value v, on every lane (a double or an int). */
#ifdef __CUDA_ARCH__
#define LASSIE_TEAM_SHFL(tm, v, j) ((tm)->size > 1 ? __shfl_sync((tm)->mask, (v), (j), (tm)->size) : (v))
#else
#define LASSIE_TEAM_SHFL(tm, v, j) ((void)(tm), (void)(j), (v))
#endif
static LASSIE_HD inline double lassie_team_shfl(const lassie_team *tm, double v, int j) {
  return LASSIE_TEAM_SHFL(tm, v, j);
}
static LASSIE_HD inline int lassie_team_shfl_int(const lassie_team *tm, int v, int j) {
  return LASSIE_TEAM_SHFL(tm, v, j);
}

/* Lane 0's value, on every lane. */
static LASSIE_HD inline double lassie_team_bcast(const lassie_team *tm, double v) {
  return lassie_team_shfl(tm, v, 0);
}

/* Asks the device's L2 for the lines of a[0..n) (the team's lanes share
 * them) and to keep them: a simulation's factors and vectors do not stay
 * in L2 between its own uses while a thousand others run, and their loads
 * are on the substitutions' and the elimination's chains of dependent
 * loads.  No-op on the CPU. */
static LASSIE_HD inline void lassie_team_prefetch(const lassie_team *tm, const double *a, int n) {
#ifdef __CUDA_ARCH__
  if (!__isGlobal(a)) return;   /* a vector in shared memory */
  const char *p = (const char *)((size_t)a & ~(size_t)127), *e = (const char *)(a + n);
  for (p += (size_t)tm->lane * 128; p < e; p += (size_t)tm->size * 128)
    asm volatile("prefetch.global.L2::evict_last [%0];" ::"l"(p));
#else
  (void)tm; (void)a; (void)n;
#endif
}

/* The largest of the lanes' values, NaN winning (lassie_maxnan does not
 * depend on the order, so this is the serial maximum). */
static LASSIE_HD inline double lassie_team_max(const lassie_team *tm, double v) {
#ifdef __CUDA_ARCH__
  for (int o = tm->size / 2; o > 0; o >>= 1)
    v = lassie_maxnan(v, __shfl_xor_sync(tm->mask, v, o, tm->size));
#else
  (void)tm;
#endif
  return v;
}

/* The symbolic part of the sparse LU, shared by all simulations of a
 * model: pos[species] = its row (fill-reducing order), ipos the inverse;
 * the factors' pattern row by row (L columns ascending, the diagonal at
 * diag[i], then U's columns).  The rest is the plan of the numeric phases
 * (sbg_lassie_lu_plan(), one int array that lassie_lu_plan_view() points
 * into):
 * - wlog: per row, log2 of the partial sums its substitution sum is split
 *   into (forward rows, then backward rows; lassie_lu_tree_sum());
 * - the level schedule of the substitutions as warp passes: rows of a level
 *   depend only on rows of earlier levels; a pass gives each of a warp's 32
 *   lanes one partial sum of one row of the level, rows' lanes W-aligned
 *   (LASSIE_LU_ENTRY ints a lane: the partial's first slot in pass order
 *   (below) and its number of terms, the row, v << 8 | log2 W for partial
 *   v of W; a lane without a row: no terms, v = 1); partial v of W sums
 *   the row's terms v, v + W, ... in order (lassie_lu_tree_sum());
 *   lev_pass: the first pass of each forward level (n_fwd + 1), then of
 *   each backward one (n_bwd + 1); pass_w: the largest log2 W of each pass
 *   (LASSIE_LU_TREE bits), LASSIE_LU_SYNC on a level's last;
 * - the pass order of the factors' nnz entries: the passes in turn, their
 *   lanes in turn, each lane's terms in its order, a backward row's
 *   reciprocal pivot in the slot before its lane v = 0's terms; perm[p]
 *   the slot of position p, pcol[slot] its column (nnz + LASSIE_LU_PAD,
 *   the pad 0).  The factorisation also writes its values in this order,
 *   so that a lane reads its terms from consecutive slots (the device's
 *   passes: one load a term, no address work);
 * - the assembly of I - gamma J at the factors' positions: position p's
 *   terms asm_ptr[p] .. asm_ptr[p + 1] in the order of the CPU's serial
 *   scatter, each H's entry asm_q (-1: the identity's 1) times D's entry
 *   asm_e; asm_ent the positions with the most terms first (p, its first
 *   and end term, its slot in pass order: LASSIE_LU_ENTRY ints each), the order the lanes
 *   take them in (a warp waits for the longest position of each 32: Chen
 *   2009's 6,325 positions cost 1,156 terms in turn in their own order);
 * - elim: the rows with an L part, ascending, then N (n_elim + 1): the
 *   factorisation's rows in turn (the others depend on no row). */
typedef struct lassie_lu {
  const int *pos, *ipos, *ptr, *col, *diag;
  const int *pass, *asm_ent, *wlog, *lev_pass, *pass_w, *asm_ptr, *asm_q, *asm_e, *elim;
  const int *perm, *pcol;
  int n_fwd, n_bwd, n_pass, n_terms, n_elim;
} lassie_lu;

/* lanes of a warp: the passes' width; ints of a lane's entry (an int4,
 * so the plan starts with the passes) */
#define LASSIE_LU_WARP 32
#define LASSIE_LU_ENTRY 4
/* a pass's pass_w: its tree's log2 width, and the flag of a level's end */
#define LASSIE_LU_TREE 255
#define LASSIE_LU_SYNC 256
/* slots after the pass order's last (pcol 0, values 0): a pass's loads of
 * a lane's first terms run past its own without a bound */
#define LASSIE_LU_PAD 8

#ifdef __cplusplus
extern "C" {
#endif
/* Fill-reducing order and LU pattern of I - gamma J (lassie_cpu.c): pos and
 * ipos of N given; *ptr, *col, *diag malloc'ed (free them); *nnz the
 * factors' entries.  Returns 0, or -1 without memory. */
int sbg_lassie_lu_pattern(const sbg_lassie_model *m, int *pos, int *ipos, int **ptr,
                          int **col, int **diag, size_t *nnz);
/* The warp's plan of the Newton residual (lassie_newton_residual()).
 * The rates: *rate_ent (malloc'ed) holds per reaction LASSIE_LU_ENTRY ints,
 * its first two reactants and their orders (reactant -1: none), the
 * second order negated when more reactants follow (from the model's
 * arrays).  *g_order (malloc'ed, N): the species by their terms in the
 * Gershgorin bound (lassie_gershgorin()), most first.  The species sums:
 * each species' parts (lassie_sum_parts()) dealt to LASSIE_SUM_STREAMS
 * streams, longest part first, each to the stream with the fewest terms
 * so far; a lane runs two streams side by side.  *ent (malloc'ed) holds
 * *len rows of LASSIE_SUM_STREAMS entries of LASSIE_LU_ENTRY ints (row r:
 * the streams' r-th terms): the term's
 * reaction, the slot of the part it ends (else -1) and its coefficient's
 * two halves; a stream past its end has reaction 0, slot -1 and
 * coefficient 0.  *slot_ptr (malloc'ed, N + 1): species j's parts are the
 * slots slot_ptr[j] .. slot_ptr[j + 1], *n_slots in all.  Chen 2009's
 * species (0-126 terms, 3,815 in all) take 64 rows, where two species a
 * lane in turn took 486 terms in turn (167 sorted by their terms).
 * Returns 0, or -1 without memory. */
int sbg_lassie_res_plan(const sbg_lassie_model *m, int **rate_ent, int **ent, int *len,
                        int **slot_ptr, int *n_slots, int **g_order);
/* The plan of lu (pos, ipos, ptr, col, diag set) for model m: *plan
 * malloc'ed (lassie_lu_plan_len() ints), lu's counts set and its plan
 * pointers into *plan.  Returns 0, or -1 without memory. */
int sbg_lassie_lu_plan(const sbg_lassie_model *m, lassie_lu *lu, int **plan);
#ifdef __cplusplus
}
#endif

/* Length of the plan of lu's counts (N rows, nnz entries). */
static inline size_t lassie_lu_plan_len(const lassie_lu *lu, int N, size_t nnz) {
  return (size_t)lu->n_pass * (LASSIE_LU_WARP * LASSIE_LU_ENTRY + 1) + LASSIE_LU_ENTRY * nnz +
         2 * (size_t)N + (size_t)lu->n_fwd + (size_t)lu->n_bwd + 2 + nnz + 1 +
         2 * (size_t)lu->n_terms + (size_t)lu->n_elim + 1 + 2 * nnz + LASSIE_LU_PAD;
}

/* Points lu's plan arrays into plan (its counts set; 16-byte aligned): the
 * host's copy or the device's. */
static inline void lassie_lu_plan_view(lassie_lu *lu, const int *plan, int N, size_t nnz) {
  lu->pass = plan;
  lu->asm_ent = lu->pass + (size_t)lu->n_pass * LASSIE_LU_WARP * LASSIE_LU_ENTRY;
  lu->wlog = lu->asm_ent + LASSIE_LU_ENTRY * nnz;
  lu->lev_pass = lu->wlog + 2 * (size_t)N;
  lu->pass_w = lu->lev_pass + lu->n_fwd + lu->n_bwd + 2;
  lu->asm_ptr = lu->pass_w + lu->n_pass;
  lu->asm_q = lu->asm_ptr + nnz + 1;
  lu->asm_e = lu->asm_q + lu->n_terms;
  lu->elim = lu->asm_e + lu->n_terms;
  lu->perm = lu->elim + lu->n_elim + 1;
  lu->pcol = lu->perm + nnz;
}

/* species a lane takes together in the predictor and the order
 * estimates (their loads of the history issued together) */
#define LASSIE_SPECIES_BATCH 4

/* reactions a lane evaluates together */
#define LASSIE_RATE_BATCH 4

/* species a lane updates together (the Newton update; the Newton
 * residual's rows), and squares a lane loads together */
#define LASSIE_UPDATE_BATCH 4
#define LASSIE_ROW_BATCH 2
#define LASSIE_SUM_BATCH 8

/* The rates v at x, lassie_rate()'s products: a lane takes
 * LASSIE_RATE_BATCH reactions at a time, reactant by reactant, so that
 * their loads (the reactants, then the amounts) are issued together
 * rather than one reaction's chain of dependent loads after another's. */
static LASSIE_HD inline void lassie_rates_team(const lassie_team *tm, const sbg_lassie_model *m,
                                               const double *k, const double *x, double *v) {
  const int M = m->n_reactions, T = tm->size;
  const int *r_ptr = m->r_ptr, *r_sp = m->r_sp, *r_ord = m->r_ord;
  if (m->law) {
    /* kinetic laws: a lane per reaction (the device's k_bdf<false> sees
     * law NULL and compiles this away) */
    for (int i = tm->lane; i < M; i += T) v[i] = lassie_law_rate(m, k, x, i);
    return;
  }
  for (int i0 = tm->lane; i0 < M; i0 += LASSIE_RATE_BATCH * T) {
    int b[LASSIE_RATE_BATCH], c[LASSIE_RATE_BATCH];
    double r[LASSIE_RATE_BATCH];
    for (int j = 0; j < LASSIE_RATE_BATCH; j++) {
      const int i = i0 + j * T;
      b[j] = i < M ? LASSIE_RO(r_ptr + i) : 0;
      c[j] = i < M ? LASSIE_RO(r_ptr + i + 1) : 0;
      r[j] = i < M ? LASSIE_RO(k + i) : 0;
    }
    /* the first two reactants (mass action rarely has more), then the rest */
    for (int j = 0; j < LASSIE_RATE_BATCH; j++)
      if (b[j] < c[j]) r[j] *= lassie_ipow(x[LASSIE_RO(r_sp + b[j])], LASSIE_RO(r_ord + b[j]));
    for (int j = 0; j < LASSIE_RATE_BATCH; j++)
      if (b[j] + 1 < c[j]) r[j] *= lassie_ipow(x[LASSIE_RO(r_sp + b[j] + 1)], LASSIE_RO(r_ord + b[j] + 1));
    for (int j = 0; j < LASSIE_RATE_BATCH; j++)
      for (int e = b[j] + 2; e < c[j]; e++) r[j] *= lassie_ipow(x[LASSIE_RO(r_sp + e)], LASSIE_RO(r_ord + e));
    for (int j = 0; j < LASSIE_RATE_BATCH; j++)
      if (i0 + j * T < M) v[i0 + j * T] = r[j];
  }
}

/* dX/dt = H v into f at x (v: the rates, scratch M). */
static LASSIE_HD inline void lassie_rhs_team(const lassie_team *tm, const sbg_lassie_model *m,
                                             const double *k, const double *x, double *v,
                                             double *f) {
  lassie_team_prefetch(tm, k, m->n_reactions);
  lassie_team_prefetch(tm, x, m->n_species);
  lassie_rates_team(tm, m, k, x, v);
  lassie_team_sync(tm);
  for (int l = tm->lane; l < m->n_species; l += tm->size) {
    double s = 0;
    for (int q = m->h_ptr[l]; q < m->h_ptr[l + 1]; q++) s += m->h_val[q] * v[m->h_rx[q]];
    f[l] = s;
  }
  lassie_team_sync(tm);
}

/* Species j's part of lassie_newton_residual() from its values yj, xj,
 * cj and its sums s (f_j) and a (of |terms|): its weight *wt and -G_j *b. */
static LASSIE_HD inline void lassie_newton_row_v(double yj, double xj, double cj, double s, double a,
                                                 double gamma, double rtol, double atol,
                                                 double *wt, double *b) {
  double floor_ = LASSIE_ROUNDOFF * DBL_EPSILON * (fabs(yj) + fabs(cj) + gamma * a);
  double wj = atol + rtol * fabs(xj);
  *wt = wj > floor_ ? wj : floor_;
  *b = -(yj - cj - gamma * s);
}
static LASSIE_HD inline void lassie_newton_row(int j, double s, double a, const double *y,
                                               const double *x, const double *c, double gamma,
                                               double rtol, double atol, const int *pos,
                                               double *wt, double *b) {
  lassie_newton_row_v(y[j], x[j], c[j], s, a, gamma, rtol, atol, wt + j, b + LASSIE_RO(pos + j));
}

/* A species' sum of H v in the Newton residual is split into parts of at
 * most LASSIE_SUM_PART terms, as even as can be, each summed from 0 and
 * then added in turn: a warp deals the parts to its streams
 * (sbg_lassie_res_plan()), so its longest sum is a part, not a species.
 * A species of at most LASSIE_SUM_PART terms is one part, a plain sum. */
#define LASSIE_SUM_PART 64
#define LASSIE_SUM_STREAMS 64
static LASSIE_HD inline int lassie_sum_parts(int n) {
  return (n + LASSIE_SUM_PART - 1) / LASSIE_SUM_PART;
}
static LASSIE_HD inline int lassie_sum_part_len(int n) {
  const int P = lassie_sum_parts(n);
  return P > 0 ? (n + P - 1) / P : 0;
}

/* The device's plan of the Newton residual (sbg_lassie_res_plan()). */
typedef struct lassie_res_plan {
  const int *rate_ent, *ent, *slot_ptr, *g_order;
  int len, n_slots;
} lassie_res_plan;

#ifdef __CUDA_ARCH__
/* The rates v at x as lassie_rates_team() computes them, each reaction's
 * first two reactants from one 16-byte entry of the plan (the lanes'
 * entries loaded together) rather than through its reactant pointers. */
static __device__ inline void lassie_rates_planned(const lassie_team *tm, const sbg_lassie_model *m,
                                                   const int *rate_ent, const double *k,
                                                   const double *x, double *v) {
  const int M = m->n_reactions, T = tm->size;
  for (int i0 = tm->lane; i0 < M; i0 += LASSIE_RATE_BATCH * T) {
    int4 e[LASSIE_RATE_BATCH];
    double r[LASSIE_RATE_BATCH];
    LASSIE_UNROLL
    for (int j = 0; j < LASSIE_RATE_BATCH; j++) {
      const int i = i0 + j * T;
      e[j] = i < M ? __ldg((const int4 *)rate_ent + i) : make_int4(-1, 0, -1, 0);
      r[j] = i < M ? __ldg(k + i) : 0;
    }
    LASSIE_UNROLL
    for (int j = 0; j < LASSIE_RATE_BATCH; j++) {
      if (e[j].x >= 0) r[j] *= lassie_ipow(x[e[j].x], e[j].y);
      if (e[j].z >= 0) r[j] *= lassie_ipow(x[e[j].z], e[j].w < 0 ? -e[j].w : e[j].w);
    }
    LASSIE_UNROLL
    for (int j = 0; j < LASSIE_RATE_BATCH; j++) {
      const int i = i0 + j * T;
      if (e[j].w < 0)
        for (int q = __ldg(m->r_ptr + i) + 2; q < __ldg(m->r_ptr + i + 1); q++)
          r[j] *= lassie_ipow(x[__ldg(m->r_sp + q)], __ldg(m->r_ord + q));
      if (i < M) v[i] = r[j];
    }
  }
}
#endif

/* The modified Newton iteration's residual at y for the BDF formula
 * y - c - gamma f(y) = 0 (x the step's start): the rates (v, scratch M),
 * then per species its sum of H v (f, by parts: LASSIE_SUM_PART) and the
 * sum of |terms| (the scale of its roundoff), the weight of the Newton
 * and error tests into wt (the tolerance, but never below the roundoff of
 * the residual: atol = 1e-12 next to amounts of 1e6 would otherwise ask
 * for the impossible) and -G(y) into b at the species' row of the LU
 * (pos).  A warp with a plan sp runs the plan's streams, the parts' sums
 * into ps and pa (sp->n_slots each), then adds each species' parts; the
 * CPU and a lane (sp NULL) take the species in turn: the same sums. */
static LASSIE_HD inline void lassie_newton_residual(const lassie_team *tm, const sbg_lassie_model *m,
                                                    const double *k, const double *y,
                                                    const double *x, const double *c,
                                                    double gamma, double rtol, double atol,
                                                    const int *pos, const lassie_res_plan *sp,
                                                    double *v, double *wt, double *b, double *ps,
                                                    double *pa) {
  const int N = m->n_species, T = tm->size, L = tm->lane;
  const int *h_ptr = m->h_ptr, *h_rx = m->h_rx;
  const double *h_val = m->h_val;
  lassie_team_prefetch(tm, k, m->n_reactions);
  lassie_team_prefetch(tm, y, N);
#ifdef __CUDA_ARCH__
  /* (the plan's entries are mass action's) */
  if (sp && !m->law) lassie_rates_planned(tm, m, sp->rate_ent, k, y, v);
  else
#endif
    lassie_rates_team(tm, m, k, y, v);
  lassie_team_sync(tm);
#ifdef __CUDA_ARCH__
  if (sp && 2 * T == LASSIE_SUM_STREAMS) {
    /* streams L and L + T side by side, each row's entries loaded a row
     * ahead (16 bytes a lane, the warp's together) */
    const int4 *e = (const int4 *)sp->ent + L;
    const int n = sp->len;
    int4 na = make_int4(0, -1, 0, 0), nb = na;
    if (n > 0) { na = __ldg(e); nb = __ldg(e + T); }
    double s1 = 0, a1 = 0, s2 = 0, a2 = 0;
    for (int r = 0; r < n; r++) {
      const int4 ea = na, eb = nb;
      if (r + 1 < n) {
        na = __ldg(e + (size_t)(r + 1) * LASSIE_SUM_STREAMS);
        nb = __ldg(e + (size_t)(r + 1) * LASSIE_SUM_STREAMS + T);
      }
      const double t1 = __hiloint2double(ea.w, ea.z) * v[ea.x];
      const double t2 = __hiloint2double(eb.w, eb.z) * v[eb.x];
      s1 += t1; a1 += fabs(t1); s2 += t2; a2 += fabs(t2);
      if (ea.y >= 0) { ps[ea.y] = s1; pa[ea.y] = a1; s1 = 0; a1 = 0; }
      if (eb.y >= 0) { ps[eb.y] = s2; pa[eb.y] = a2; s2 = 0; a2 = 0; }
    }
    lassie_team_sync(tm);
    /* LASSIE_ROW_BATCH species a lane at a time, their loads first */
    for (int j0 = L; j0 < N; j0 += LASSIE_ROW_BATCH * T) {
      int p0[LASSIE_ROW_BATCH], p1[LASSIE_ROW_BATCH], pj[LASSIE_ROW_BATCH];
      double s[LASSIE_ROW_BATCH], a[LASSIE_ROW_BATCH], yj[LASSIE_ROW_BATCH],
             xj[LASSIE_ROW_BATCH], cj[LASSIE_ROW_BATCH];
      LASSIE_UNROLL
      for (int u = 0; u < LASSIE_ROW_BATCH; u++) {
        const int j = j0 + u * T;
        p0[u] = j < N ? LASSIE_RO(sp->slot_ptr + j) : 0;
        p1[u] = j < N ? LASSIE_RO(sp->slot_ptr + j + 1) : 0;
        pj[u] = j < N ? LASSIE_RO(pos + j) : 0;
        yj[u] = j < N ? y[j] : 0;
        xj[u] = j < N ? x[j] : 0;
        cj[u] = j < N ? c[j] : 0;
      }
      LASSIE_UNROLL
      for (int u = 0; u < LASSIE_ROW_BATCH; u++) {
        s[u] = p0[u] < p1[u] ? ps[p0[u]] : 0;
        a[u] = p0[u] < p1[u] ? pa[p0[u]] : 0;
      }
      LASSIE_UNROLL
      for (int u = 0; u < LASSIE_ROW_BATCH; u++) {
        const int j = j0 + u * T;
        if (j >= N) break;
        for (int p = p0[u] + 1; p < p1[u]; p++) { s[u] += ps[p]; a[u] += pa[p]; }
        lassie_newton_row_v(yj[u], xj[u], cj[u], s[u], a[u], gamma, rtol, atol, wt + j, b + pj[u]);
      }
    }
    lassie_team_sync(tm);
    return;
  }
#endif
  (void)sp; (void)ps; (void)pa;
  for (int j = L; j < N; j += T) {
    const int q0 = LASSIE_RO(h_ptr + j), q1 = LASSIE_RO(h_ptr + j + 1);
    const int len = lassie_sum_part_len(q1 - q0);
    double s = 0, a = 0;
    for (int b0 = q0; b0 < q1; b0 += len) {
      const int b1 = b0 + len < q1 ? b0 + len : q1;
      double ts = 0, ta = 0;
      for (int q = b0; q < b1; q++) {
        const double t = LASSIE_RO(h_val + q) * v[LASSIE_RO(h_rx + q)];
        ts += t; ta += fabs(t);
      }
      if (b0 == q0) { s = ts; a = ta; }
      else { s += ts; a += ta; }
    }
    lassie_newton_row(j, s, a, y, x, c, gamma, rtol, atol, pos, wt, b);
  }
  lassie_team_sync(tm);
}

/* The Newton update y += d (d = scale times the solution ys, in the LU's
 * row order pos) and the squares of d / wt into r, species
 * LASSIE_UPDATE_BATCH a lane at a time (their loads issued together). */
static LASSIE_HD inline void lassie_newton_update(const lassie_team *tm, int N, double scale,
                                                  const int *pos, const double *ys,
                                                  const double *wt, double *y, double *r) {
  for (int j0 = tm->lane; j0 < N; j0 += LASSIE_UPDATE_BATCH * tm->size) {
    double d[LASSIE_UPDATE_BATCH], w[LASSIE_UPDATE_BATCH], yj[LASSIE_UPDATE_BATCH];
    LASSIE_UNROLL
    for (int u = 0; u < LASSIE_UPDATE_BATCH; u++) {
      const int j = j0 + u * tm->size;
      d[u] = j < N ? ys[LASSIE_RO(pos + j)] : 0;
      w[u] = j < N ? wt[j] : 1;
      yj[u] = j < N ? y[j] : 0;
    }
    LASSIE_UNROLL
    for (int u = 0; u < LASSIE_UPDATE_BATCH; u++) {
      const int j = j0 + u * tm->size;
      if (j >= N) break;
      const double dj = scale * d[u];
      y[j] = yj[u] + dj;
      const double q = dj / w[u];
      r[j] = q * q;
    }
  }
}

/* a[0] + a[1] + ... + a[n - 1] in this order, on one lane, its loads
 * LASSIE_SUM_BATCH at a time (the adds' chain no longer waits for each):
 * the Newton norm's sum of squares */
static LASSIE_HD inline double lassie_serial_sum(const double *a, int n) {
  double s = 0;
  int j = 0;
  for (; j + LASSIE_SUM_BATCH <= n; j += LASSIE_SUM_BATCH) {
    double t[LASSIE_SUM_BATCH];
    LASSIE_UNROLL
    for (int u = 0; u < LASSIE_SUM_BATCH; u++) t[u] = a[j + u];
    LASSIE_UNROLL
    for (int u = 0; u < LASSIE_SUM_BATCH; u++) s += t[u];
  }
  for (; j < n; j++) s += a[j];
  return s;
}

/* dv_i/dx_j for every reactant entry e of reaction i: the sparse factor D
 * of the Jacobian J = H D. */
static LASSIE_HD inline void lassie_dvdx_team(const lassie_team *tm, const sbg_lassie_model *m,
                                              const double *k, const double *x, double *dv) {
  for (int i = tm->lane; i < m->n_reactions; i += tm->size) {
    /* a kinetic law's entries: finite differences */
    if (m->law && m->law[i] >= 0) { lassie_law_dvdx(m, k, x, i, dv); continue; }
    int b = m->r_ptr[i], c = m->r_ptr[i + 1];
    for (int e = b; e < c; e++) {
      int a = m->r_ord[e];
      double d = k[i] * a * (a > 1 ? lassie_ipow(x[m->r_sp[e]], a - 1) : 1.0);
      for (int e2 = b; e2 < c; e2++)
        if (e2 != e) d *= lassie_ipow(x[m->r_sp[e2]], m->r_ord[e2]);
      dv[e] = d;
    }
  }
  lassie_team_sync(tm);
}

/* Gershgorin bound on the spectral radius of J: the test for leaving the
 * implicit mode (an explicit step of that size would be stable).  The
 * lanes take the species in the order `order` (NULL: 0, 1, ...; a warp
 * waits for the longest sum of each 32, so the plan puts the species with
 * the most terms first: Chen 2009's rounds cost 313 terms in turn rather
 * than 821); the largest sum does not depend on it. */
static LASSIE_HD inline double lassie_gershgorin(const lassie_team *tm, const sbg_lassie_model *m,
                                                 const double *dv, const int *order) {
  double rho = 0;
  for (int i0 = tm->lane; i0 < m->n_species; i0 += tm->size) {
    const int l = order ? LASSIE_RO(order + i0) : i0;
    double s = 0;
    for (int q = m->h_ptr[l]; q < m->h_ptr[l + 1]; q++) {
      int i = m->h_rx[q];
      for (int e = m->r_ptr[i]; e < m->r_ptr[i + 1]; e++) s += fabs(m->h_val[q] * dv[e]);
    }
    if (s > rho) rho = s;
  }
  return lassie_team_max(tm, rho);
}

/* Entry j (< nj) of a row's T entries held by lane j (column kl, U's row
 * bounds dl, el, reciprocal pivot rl) on every lane, and this lane's first
 * entry of that U row (column *cu, value *uu): lassie_lu_factor() takes
 * them two entries ahead of their use. */
static LASSIE_HD inline void lassie_lu_entry_ahead(const lassie_team *tm, const int *col,
                                                   const double *val, int kl, int dl, int el,
                                                   double rl, int j, int nj, int *k, int *dk,
                                                   int *ek, double *rk, int *cu, double *uu) {
  if (j >= nj) return;
  *k = lassie_team_shfl_int(tm, kl, j); *dk = lassie_team_shfl_int(tm, dl, j);
  *ek = lassie_team_shfl_int(tm, el, j); *rk = lassie_team_shfl(tm, rl, j);
  const int p = *dk + 1 + tm->lane;
  if (p < *ek) { *cu = col[p]; *uu = val[p]; }
}

/* Entry i of the assembly's order: the position p, its terms t0 .. t1
 * and its slot in pass order (on the device one 16-byte load). */
static LASSIE_HD inline void lassie_lu_asm_entry(const lassie_lu *lu, int i, int *p, int *t0,
                                                 int *t1, int *slot) {
#ifdef __CUDA_ARCH__
  const int4 e = __ldg((const int4 *)lu->asm_ent + i);
  *p = e.x; *t0 = e.y; *t1 = e.z; *slot = e.w;
#else
  const int *e = lu->asm_ent + (size_t)LASSIE_LU_ENTRY * i;
  *p = e[0]; *t0 = e[1]; *t1 = e[2]; *slot = e[3];
#endif
}

/* The first part of the numeric LU of P = I - gamma J (J = H D, D in dv)
 * on the pattern lu: the lanes assemble P's entries at their positions in
 * val in parallel (each entry's terms in the order of lu's plan), and
 * finish the rows without an L part; pval (unless NULL) gets the same
 * values in the plan's pass order.  lassie_lu_factor() eliminates the
 * other rows on a team, lu_eliminate_rows() (lassie_cpu.c) on one host
 * thread.  Returns -1 when a pivot fails (below). */
static LASSIE_HD inline int lassie_lu_assemble(const lassie_team *tm, const sbg_lassie_model *m,
                                               const lassie_lu *lu, double gamma,
                                               const double *dv, double *val, double *pval) {
  const int N = m->n_species, L = tm->lane, T = tm->size;
  const int *ptr = lu->ptr, *diag = lu->diag;
  lassie_team_prefetch(tm, dv, m->r_ptr[m->n_reactions]);
  for (int i = L; i < ptr[N]; i += T) {
    int p, t0, t1, slot;
    lassie_lu_asm_entry(lu, i, &p, &t0, &t1, &slot);
    double a = 0;
    for (int t = t0; t < t1; t++) {
      const int q = lu->asm_q[t];
      if (q < 0) a += 1.0;
      else a -= gamma * m->h_val[q] * dv[lu->asm_e[t]];
    }
    val[p] = a;
    if (pval) pval[slot] = a;
  }
  lassie_team_sync(tm);
  /* A row without an L part is P's own row with its pivot's reciprocal,
   * and no row before it changes it: the lanes take all such rows at
   * once (half of Chen 2009's), the test on the pivot as below (no
   * partial sums but the pivot itself). */
  double bad = 0;
  for (int i = L; i < N; i += T)
    if (ptr[i] == diag[i]) {
      const double d = val[diag[i]];
      if (!isfinite(d) || !(fabs(d) > 1e-10 * fabs(d))) bad = 1;
      val[diag[i]] = 1.0 / d;
      if (pval) pval[lu->perm[diag[i]]] = 1.0 / d;
    }
  if (lassie_team_max(tm, bad) != 0) return -1;
  lassie_team_sync(tm);
  return 0;
}

/* Numeric LU of P = I - gamma J (J = H D, D in dv) on the pattern lu,
 * pivots on the diagonal (the fill-reducing order stays; I - gamma J of a
 * reaction network has a diagonal >= 1 wherever a species is only
 * consumed, as in KPP's static sparse LU for chemistry); val the factors,
 * with each pivot's reciprocal on the diagonal (a multiplication, not a
 * division, per eliminated entry and per row of the substitutions); pval
 * (unless NULL) the same values in the plan's pass order, for the warp's
 * substitutions (lassie_lu_passes()); x a zeroed scratch of N (left
 * zeroed).  After the assembly (lassie_lu_assemble()) the lanes go row
 * by row: they scatter the row, share each update with a row of U
 * (distinct columns), and gather it.  Returns -1 when a pivot is not
 * finite or lost its digits to cancellation (the CPU then takes a dense
 * LU with pivoting). */
static LASSIE_HD inline int lassie_lu_factor(const lassie_team *tm, const sbg_lassie_model *m,
                                             const lassie_lu *lu, double gamma,
                                             const double *dv, double *val, double *pval,
                                             double *x) {
  if (lassie_lu_assemble(tm, m, lu, gamma, dv, val, pval) != 0) return -1;
  const int N = m->n_species, L = tm->lane, T = tm->size;
  const int *ptr = lu->ptr, *col = lu->col, *diag = lu->diag;
  const lassie_team tm_one = {0, 1, 0u};   /* a lane prefetching alone */
  /* The rows with an L part in turn (lu->elim).  Each lane's first entry
   * of row i is loaded while the row before is eliminated (rows after the
   * current one do not change until their turn): its column and value
   * and, for an L entry, the bounds of U's row k it eliminates with and
   * k's reciprocal pivot (final unless k is the row being eliminated,
   * whose pivot is taken as it is computed). */
  int pc = 0, pd = 0, pe = 0, prev = -1;
  double pv = 0, pr = 0, recip = 0;
  {
    const int i1 = lu->elim[0];
    if (i1 < N && ptr[i1] + L < ptr[i1 + 1]) {
      const int p = ptr[i1] + L;
      pc = col[p]; pv = val[p];
      if (p < diag[i1]) { pd = diag[pc]; pe = ptr[pc + 1]; pr = val[pd]; }
    }
  }
  for (int ei = 0; ei < lu->n_elim; ei++) {
    const int i = lu->elim[ei], inext = lu->elim[ei + 1];
    const int rb = ptr[i], di = diag[i], re = ptr[i + 1];
    const int c0 = pc, d0 = pd, e0 = pe;
    const double v0 = pv, r0 = rb + L < di && c0 == prev ? recip : pr;
    if (inext < N && ptr[inext] + L < ptr[inext + 1]) {
      const int p = ptr[inext] + L;
      pc = col[p]; pv = val[p];
      if (p < diag[inext]) { pd = diag[pc]; pe = ptr[pc + 1]; pr = pc != i ? val[pd] : 0; }
    }
    prev = i;
    /* dterm: the largest partial sum the pivot went through (at least
     * half the largest term it is made of): each lane tracks the values
     * of x[i] it writes (the scattered diagonal, then updates), and the
     * lanes' maxima are taken at the end */
    double dterm = 0;
    if (rb + L < re) { x[c0] = v0; if (c0 == i) dterm = fabs(v0); }
    for (int p = rb + L + T; p < re; p += T) {
      x[col[p]] = val[p];
      if (col[p] == i) dterm = fabs(val[p]);
    }
    lassie_team_sync(tm);
    /* row i's L entries, T at a time: lane j holds entry j's column k,
     * the bounds of U's row k and k's reciprocal pivot for the serial
     * elimination, which takes them by shuffles; each lane's first entry
     * of U's row k is loaded two entries ahead, off the chain of dependent
     * updates.  Entry j's multiplier goes to x[k] after the T entries (no
     * later entry of the row reads or updates x[k]: U's rows only have
     * columns after their diagonal). */
    for (int p0 = rb; p0 < di; p0 += T) {
      int kl = 0, dl = 0, el = 0;
      double rl = 0, lmine = 0;
      if (p0 + L < di) {
        if (p0 == rb) { kl = c0; dl = d0; el = e0; rl = r0; }
        else { kl = col[p0 + L]; dl = diag[kl]; el = ptr[kl + 1]; rl = val[dl]; }
        lassie_team_prefetch(&tm_one, val + dl + 1, el - dl - 1);
      }
      const int nj = di - p0 < T ? di - p0 : T;
      int k = 0, dk = 0, ek = 0, cu = 0, kn = 0, dkn = 0, ekn = 0, cn = 0;
      double rk = 0, uu = 0, rn = 0, un = 0;
      lassie_lu_entry_ahead(tm, col, val, kl, dl, el, rl, 0, nj, &k, &dk, &ek, &rk, &cu, &uu);
      lassie_lu_entry_ahead(tm, col, val, kl, dl, el, rl, 1, nj, &kn, &dkn, &ekn, &rn, &cn, &un);
      for (int j = 0; j < nj; j++) {
        int k2 = 0, dk2 = 0, ek2 = 0, c2 = 0;
        double r2 = 0, u2 = 0;
        lassie_lu_entry_ahead(tm, col, val, kl, dl, el, rl, j + 2, nj, &k2, &dk2, &ek2, &r2, &c2, &u2);
        const double lk = x[k] * rk;
        if (L == j) lmine = lk;
        if (lk != 0) {
          if (dk + 1 + L < ek) {
            const double nv = x[cu] - lk * uu;
            x[cu] = nv;
            if (cu == i && fabs(nv) > dterm) dterm = fabs(nv);
          }
          for (int p2 = dk + 1 + L + T; p2 < ek; p2 += T) {
            const int cc = col[p2];
            const double nv = x[cc] - lk * val[p2];
            x[cc] = nv;
            if (cc == i && fabs(nv) > dterm) dterm = fabs(nv);
          }
          lassie_team_sync(tm);   /* the updates before the next entry's reads */
        }
        k = kn; dk = dkn; ek = ekn; rk = rn; cu = cn; uu = un;
        kn = k2; dkn = dk2; ekn = ek2; rn = r2; cn = c2; un = u2;
      }
      lassie_team_sync(tm);   /* all lanes read the entries' x[k] before they are replaced */
      if (p0 + L < di) x[kl] = lmine;
    }
    lassie_team_sync(tm);
    const double d = x[i];
    dterm = lassie_team_max(tm, dterm);
    lassie_team_sync(tm);   /* all lanes read the pivot before it is cleared */
    recip = 1.0 / d;
    if (rb + L < re) {
      const double u = rb + L == di ? recip : x[c0];
      val[rb + L] = u;
      if (pval) pval[lu->perm[rb + L]] = u;
      x[c0] = 0;
    }
    for (int p = rb + L + T; p < re; p += T) {
      const double u = p == di ? recip : x[col[p]];
      val[p] = u;
      if (pval) pval[lu->perm[p]] = u;
      x[col[p]] = 0;
    }
    lassie_team_sync(tm);
    /* The test is on cancellation, not on the pivot's size next to its
     * row: rows of species with large amounts carry large off-diagonal
     * entries (Chen's ligand: 1e11 next to a diagonal of 1), which a row
     * scaling would remove and which do not harm the elimination, while
     * the diagonal of I - gamma J is >= 1 before elimination (a species'
     * own consumption), so a small pivot can only come from cancellation:
     * it fails when it lost 10 digits to the terms it is made of. */
    if (!isfinite(d) || !(fabs(d) > 1e-10 * dterm)) return -1;
  }
  return 0;
}

/* Forward and back substitution with unit-lower / upper factors stored
 * row by row (ptr, col, val; diag: each row's diagonal entry), for the
 * CPU's compressed dense LU.  Serial. */
static LASSIE_HD inline void lassie_lu_substitute(int n, const int *ptr, const int *col,
                                                  const int *diag, const double *val, double *b) {
  for (int i = 1; i < n; i++) {
    double s = b[i];
    for (int q = ptr[i]; q < diag[i]; q++) s -= val[q] * b[col[q]];
    b[i] = s;
  }
  for (int k = n - 1; k >= 0; k--) {
    double s = b[k];
    for (int q = diag[k] + 1; q < ptr[k + 1]; q++) s -= val[q] * b[col[q]];
    b[k] = s / val[diag[k]];
  }
}

/* A substitution row's sum_{q0 <= q < q1} val[q] b[col[q]] as 2^w partial
 * sums (partial v: terms v, v + 2^w, ..., in order, from 0) added by a
 * fixed pairwise tree: the order a warp's pass computes it in (a lane per
 * partial, the tree by shuffles), here in turn on one thread. */
static LASSIE_HD inline double lassie_lu_tree_sum(const double *val, const double *b,
                                                  const int *col, int q0, int q1, int w) {
  if (w == 0) {
    double p = 0;
    for (int q = q0; q < q1; q++) p += val[q] * b[col[q]];
    return p;
  }
  const int W = 1 << w;
  double t[LASSIE_LU_WARP];
  for (int v = 0; v < W; v++) {
    double p = 0;
    for (int q = q0 + v; q < q1; q += W) p += val[q] * b[col[q]];
    t[v] = p;
  }
  for (int o = W / 2; o > 0; o >>= 1)
    for (int v = 0; v < o; v++) t[v] = t[v] + t[v + o];
  return t[0];
}

/* terms of a lane's partial sum loaded a pass ahead (the plan keeps most
 * passes' lanes to at most these; the rest are loaded in the pass) */
#define LASSIE_LU_AHEAD 6

#ifdef __CUDA_ARCH__

/* A lane's share of a pass, loaded before the pass is due: its entry,
 * its first terms' columns and factors, the row's reciprocal pivot
 * (backward rows) and the pass's widest tree. */
struct lassie_lu_pre {
  int4 e;
  int c[LASSIE_LU_AHEAD], tree;
  double v[LASSIE_LU_AHEAD], piv;
};

/* lane's entry of pass s (a lane without a row when s is past the end) */
static __device__ inline int4 lassie_lu_entry(const lassie_lu *lu, int s, int lane) {
  if (s >= lu->n_pass) return make_int4(0, 0, 0, 1 << 8);
  return __ldg((const int4 *)lu->pass + (size_t)s * LASSIE_LU_WARP + lane);
}

/* The loads of pass s (entry e) that do not depend on the vector: the
 * plan and the factors (pval: in pass order) are read-only during a
 * solve.  A lane's terms are consecutive slots; the loads run past a
 * lane's last term into the next lane's or the pad, unused. */
static __device__ inline void lassie_lu_preload(const lassie_lu *lu, int s, int4 e, int back,
                                                const double *pval, struct lassie_lu_pre *r) {
  r->e = e;
  r->tree = s < lu->n_pass ? __ldg(lu->pass_w + s) : 0;
  const int *pc = lu->pcol + e.x;
  const double *pv = pval + e.x;
#pragma unroll
  for (int i = 0; i < LASSIE_LU_AHEAD; i++) {
    r->c[i] = __ldg(pc + i);
    r->v[i] = pv[i];
  }
  r->piv = back && (e.w >> 8) == 0 ? pv[-1] : 0;
}

/* Pass r on a warp: each lane sums its partial (its terms in order), the
 * row's lanes add them by the tree of lassie_lu_tree_sum() (lane v adds
 * lane v + o's), and the row's lane 0 updates the row. */
static __device__ inline void lassie_lu_pass(const lassie_team *tm, const lassie_lu *lu,
                                             const struct lassie_lu_pre *r, int back,
                                             const double *pval, double *b) {
  const int4 e = r->e;
  const int W = 1 << (e.w & 31);
  double p = 0;
#pragma unroll
  for (int i = 0; i < LASSIE_LU_AHEAD; i++)
    if (i < e.y) p += r->v[i] * b[r->c[i]];
#pragma unroll 1
  for (int i = LASSIE_LU_AHEAD; i < e.y; i++) p += pval[e.x + i] * b[__ldg(lu->pcol + e.x + i)];
  for (int o = (1 << (r->tree & LASSIE_LU_TREE)) >> 1; o > 0; o >>= 1) {
    double t = __shfl_xor_sync(tm->mask, p, o);
    if (o < W) p = p + t;
  }
  if ((e.w >> 8) == 0) b[e.z] = back ? (b[e.z] - p) * r->piv : b[e.z] - p;
}

/* All passes in turn, the forward levels' then the backward ones', with a
 * sync after each level (a level's rows only read earlier levels' rows).
 * Pass s + 1's loads are issued before pass s runs, and pass s + 2's
 * entry before that: the substitutions' chain of dependent steps is then
 * the vector's loads, the sums and the trees, not the plan's and the
 * factors' loads. */
static __device__ inline void lassie_lu_passes(const lassie_team *tm, const lassie_lu *lu,
                                               const double *pval, double *b) {
  const int fe = lu->lev_pass[lu->n_fwd], L = tm->lane;
  struct lassie_lu_pre cur, nxt;
  lassie_lu_preload(lu, 0, lassie_lu_entry(lu, 0, L), 0 >= fe, pval, &cur);
  int4 e1 = lassie_lu_entry(lu, 1, L);
  for (int s = 0; s < lu->n_pass; s++) {
    const int4 e2 = lassie_lu_entry(lu, s + 2, L);
    lassie_lu_preload(lu, s + 1, e1, s + 1 >= fe, pval, &nxt);
    lassie_lu_pass(tm, lu, &cur, s >= fe, pval, b);
    if (cur.tree & LASSIE_LU_SYNC) __syncwarp(tm->mask);
    cur = nxt;
    e1 = e2;
  }
}
#endif

/* Solves L U z = b in place (the factors of lassie_lu_factor: val row by
 * row, pval in pass order), each row's sum by lassie_lu_tree_sum() with its
 * plan's split: a warp by the plan's passes from pval, level by level; the
 * CPU and smaller teams row by row from val, in order, on one lane, with
 * the same bits. */
static LASSIE_HD inline void lassie_lu_solve_levels(const lassie_team *tm, const lassie_lu *lu,
                                                    int N, const double *val, const double *pval,
                                                    double *b) {
#ifdef __CUDA_ARCH__
  if (tm->size == LASSIE_LU_WARP) {
    lassie_team_prefetch(tm, pval, lu->ptr[N]);
    lassie_lu_passes(tm, lu, pval, b);
    __syncwarp(tm->mask);
    return;
  }
#endif
  (void)pval;
  const int *ptr = lu->ptr, *col = lu->col, *diag = lu->diag;
  if (tm->lane == 0) {
    for (int i = 0; i < N; i++)
      if (ptr[i] < diag[i]) b[i] = b[i] - lassie_lu_tree_sum(val, b, col, ptr[i], diag[i], lu->wlog[i]);
    for (int k = N - 1; k >= 0; k--)
      b[k] = (b[k] - lassie_lu_tree_sum(val, b, col, diag[k] + 1, ptr[k + 1], lu->wlog[N + k])) *
             val[diag[k]];
  }
  lassie_team_sync(tm);
}

/* Variable-coefficient BDF of order q on the nodes tau[0] = t_{n+1} (the new
 * point) and tau[1..q] (past points): gamma = 1 / l_0'(tau0) and the
 * weights dl[j] = l_j'(tau0) of the Lagrange basis, so that the formula is
 * y - gamma f(y) = -gamma sum_{j>=1} dl[j] y_j. */
static LASSIE_HD inline double lassie_bdf_coefs(const double *tau, int q, double *dl) {
  double s = 0;
  for (int j = 1; j <= q; j++) s += 1.0 / (tau[0] - tau[j]);
  for (int j = 1; j <= q; j++) {
    double num = 1, den = 1;
    for (int mm = 1; mm <= q; mm++) if (mm != j) num *= tau[0] - tau[mm];
    for (int mm = 0; mm <= q; mm++) if (mm != j) den *= tau[j] - tau[mm];
    dl[j] = num / den;
  }
  return 1.0 / s;
}

/* Scaled local error that BDF of order kk would make on the step just
 * accepted, gamma_k prod_{j=1..k}(tau0 - tau_j) |y[tau0..tau_{k+1}]|
 * (the divided difference of order k + 1 estimates y^(k+1) / (k+1)!),
 * max over species with weights wt; hist[0] is the new point. */
static LASSIE_HD inline double lassie_bdf_err_order(const lassie_team *tm, double *const *hist,
                                                    const double *tau, int kk, const double *wt,
                                                    int N) {
  double c[LASSIE_BDF_HIST];
  double s = 0, p1 = 1;
  for (int j = 1; j <= kk; j++) { s += 1.0 / (tau[0] - tau[j]); p1 *= tau[0] - tau[j]; }
  double gp = p1 / s;
  for (int i = 0; i <= kk + 1; i++) {
    double den = 1;
    for (int j = 0; j <= kk + 1; j++) if (j != i) den *= tau[i] - tau[j];
    c[i] = gp / den;
  }
  double e = 0;
  /* LASSIE_SPECIES_BATCH species a lane at a time (their loads together;
   * past the end, the batch's first again) */
  for (int l0 = tm->lane; l0 < N; l0 += LASSIE_SPECIES_BATCH * tm->size) {
    int ls[LASSIE_SPECIES_BATCH];
    double d[LASSIE_SPECIES_BATCH];
    LASSIE_UNROLL
    for (int u = 0; u < LASSIE_SPECIES_BATCH; u++) {
      ls[u] = l0 + u * tm->size < N ? l0 + u * tm->size : l0;
      d[u] = 0;
    }
    for (int i = 0; i <= kk + 1; i++) {
      LASSIE_UNROLL
      for (int u = 0; u < LASSIE_SPECIES_BATCH; u++) d[u] += c[i] * hist[i][ls[u]];
    }
    LASSIE_UNROLL
    for (int u = 0; u < LASSIE_SPECIES_BATCH; u++) e = lassie_maxnan(e, fabs(d[u]) / wt[ls[u]]);
  }
  return lassie_team_max(tm, e);
}

/* Implicit steps grow at most twice the last one (the interpolation of the
 * output rows and the predictor stay on a history of similar steps): the
 * attempt's size hs, capped; a capped attempt no longer lands on the
 * target. */
static LASSIE_HD inline double lassie_bdf_cap(double hs, const double *ht, int nh, int *hits) {
  if (nh >= 2 && hs > 2 * (ht[0] - ht[1])) { *hits = 0; return 2 * (ht[0] - ht[1]); }
  return hs;
}

/* The scalars of the BDF formula of order qq (1 <= qq <= nh - 1) for the
 * new point tnew after the history's times ht: the weights dl of
 * lassie_bdf_coefs(), the predictor's weights lp[1..qq+1] (the polynomial
 * through the qq + 1 last states, at tnew), *errc, the constant of the
 * local error errc |y - ypred|; returns gamma. */
static LASSIE_HD inline double lassie_bdf_formula(double tnew, const double *ht, int nh, int qq,
                                                  double *dl, double *lp, double *errc) {
  double tau[LASSIE_BDF_HIST + 1];
  tau[0] = tnew;
  for (int j = 1; j <= qq + 1 && j <= nh; j++) tau[j] = ht[j - 1];
  double gamma = lassie_bdf_coefs(tau, qq, dl);
  double p1 = 1, p2 = 1;
  for (int j = 1; j <= qq; j++) p1 *= tau[0] - tau[j];
  for (int j = 1; j <= qq + 1; j++) {
    double lj = 1;
    for (int mm = 1; mm <= qq + 1; mm++) if (mm != j) lj *= (tau[0] - tau[mm]) / (tau[j] - tau[mm]);
    lp[j] = lj;
    p2 *= tau[0] - tau[j];
  }
  /* y - ypred = y[tau0..tau_{qq+1}] p2, local error = gamma p1 times it */
  *errc = gamma * p1 / fabs(p2 - gamma * p1);
  return gamma;
}

/* Per species over the team: the predictor ypred and the constant part c
 * of y - c - gamma f(y) = 0 of that formula (hist[i] i steps back). */
static LASSIE_HD inline void lassie_bdf_predict(const lassie_team *tm, double *const *hist,
                                                const double *lp, const double *dl, int qq,
                                                double gamma, int N, double *ypred, double *c) {
  /* LASSIE_SPECIES_BATCH species a lane at a time (their loads together;
   * past the end, the batch's first again) */
  for (int j0 = tm->lane; j0 < N; j0 += LASSIE_SPECIES_BATCH * tm->size) {
    int js[LASSIE_SPECIES_BATCH];
    double pr[LASSIE_SPECIES_BATCH], cc[LASSIE_SPECIES_BATCH];
    LASSIE_UNROLL
    for (int u = 0; u < LASSIE_SPECIES_BATCH; u++) {
      js[u] = j0 + u * tm->size < N ? j0 + u * tm->size : j0;
      pr[u] = 0;
      cc[u] = 0;
    }
    for (int i = 1; i <= qq + 1; i++) {
      LASSIE_UNROLL
      for (int u = 0; u < LASSIE_SPECIES_BATCH; u++) pr[u] += lp[i] * hist[i - 1][js[u]];
    }
    for (int i = 1; i <= qq; i++) {
      LASSIE_UNROLL
      for (int u = 0; u < LASSIE_SPECIES_BATCH; u++) cc[u] += dl[i] * hist[i - 1][js[u]];
    }
    LASSIE_UNROLL
    for (int u = 0; u < LASSIE_SPECIES_BATCH; u++) {
      ypred[js[u]] = pr[u];
      c[js[u]] = -gamma * cc[u];
    }
  }
}

/* A species' weight in the error test of a step from x to y: the
 * tolerance at the larger of the two, never below w (the Newton test's). */
static LASSIE_HD inline double lassie_err_weight(double x, double y, double w, double rtol,
                                                 double atol) {
  double wj = atol + rtol * fmax(fabs(x), fabs(y));
  return wj < w ? w : wj;
}

/* The scaled error errc |y - ypred| of the step from x to y, max over
 * species (NaN winning), in weights that are the Newton test's wt or the
 * tolerance at the larger of x and y; the weights are left in wt for the
 * order selection. */
static LASSIE_HD inline double lassie_bdf_error(const lassie_team *tm, const double *x,
                                                const double *y, const double *ypred, double *wt,
                                                double errc, double rtol, double atol, int N) {
  double err = 0;
  /* two species a lane at a time (their loads before their stores) */
  for (int j = tm->lane; j < N; j += 2 * tm->size) {
    const int j2 = j + tm->size < N ? j + tm->size : j;
    const double wj = lassie_err_weight(x[j], y[j], wt[j], rtol, atol);
    const double wj2 = lassie_err_weight(x[j2], y[j2], wt[j2], rtol, atol);
    const double d1 = fabs(y[j] - ypred[j]), d2 = fabs(y[j2] - ypred[j2]);
    wt[j] = wj;
    wt[j2] = wj2;
    err = lassie_maxnan(err, errc * d1 / wj);
    err = lassie_maxnan(err, errc * d2 / wj2);
  }
  return lassie_team_max(tm, err);
}

/* After an accepted step of order *q (hist[0] the new state, nh states,
 * wt the error test's weights): the step factor of the order whose
 * estimated error allows the largest next step (biased towards keeping
 * the order, as CVODE), checked after q + 1 steps at an order; fac is the
 * current order's, 0.9 err^(-1/(q+1)).  A new order goes to *q (its
 * steps *q_steps restart). */
static LASSIE_HD inline double lassie_bdf_order(const lassie_team *tm, double *const *hist,
                                                const double *ht, int nh, int *q, int *q_steps,
                                                const double *wt, int N, double fac) {
  const int qc = *q;
  if (!(*q_steps > qc && nh >= qc + 2)) return fac;
  double best = fac;
  int qn = qc;
  if (qc > 1) {
    double e = lassie_bdf_err_order(tm, hist, ht, qc - 1, wt, N);
    double f = e > 0 ? 1.0 / (1.3 * sbg_pow(e, 1.0 / qc)) : 2.0;
    if (f > best) { best = f; qn = qc - 1; }
  }
  if (qc < LASSIE_BDF_MAXORD && nh >= qc + 3) {
    double e = lassie_bdf_err_order(tm, hist, ht, qc + 1, wt, N);
    double f = e > 0 ? 1.0 / (1.4 * sbg_pow(e, 1.0 / (qc + 2))) : 2.0;
    if (f > best) { best = f; qn = qc + 1; }
  }
  if (qn != qc) { *q = qn; *q_steps = 0; return best; }
  return fac;
}

/* The next step's factor after an accepted implicit step of order qq with
 * scaled error err (history nh states, order and its steps in *q and
 * *q_steps, updated by lassie_bdf_order()). */
static LASSIE_HD inline double lassie_bdf_accept_factor(const lassie_team *tm, double *const *hist,
                                                        const double *ht, int nh, int *q,
                                                        int *q_steps, const double *wt, int N,
                                                        double err, int qq) {
  double fac = lassie_bdf_order(tm, hist, ht, nh, q, q_steps, wt, N,
                                err > 0 ? 0.9 * sbg_pow(err, -1.0 / (qq + 1)) : 2.0);
  if (fac > 2.0) fac = 2.0;
  if (fac < 0.2) fac = 0.2;
  /* keep the step (and so gamma and the factorisation) unless it can
   * grow by half: small changes cost a factorisation for nothing */
  if (fac >= 1.0 && fac < 1.5) fac = 1.0;
  return fac;
}

/* The step factor after a rejected implicit step of order qq. */
static LASSIE_HD inline double lassie_bdf_reject_factor(double err, int qq) {
  double fac = isfinite(err) ? 0.9 * sbg_pow(err, -1.0 / (qq + 1)) : 0.1;
  if (fac < 0.1) fac = 0.1;
  if (fac > 0.9) fac = 0.9;
  return fac;
}

/* Output rows inside an implicit step: the weights L[0..npts) at tout of
 * the polynomial through the last npts states of the history (times ht),
 * the one whose derivative the step's formula matched ... */
static LASSIE_HD inline void lassie_bdf_interp_weights(double tout, const double *ht, int npts,
                                                       double *L) {
  for (int a = 0; a < npts; a++) {
    double l = 1;
    for (int b = 0; b < npts; b++) if (b != a) l *= (tout - ht[b]) / (ht[a] - ht[b]);
    L[a] = l;
  }
}

/* ... and its value for species j. */
static LASSIE_HD inline double lassie_bdf_interp(const double *L, double *const *hist, int npts,
                                                 int j) {
  double s = 0;
  for (int a = 0; a < npts; a++) s += L[a] * hist[a][j];
  return s;
}

/* Points of that polynomial after a step of order qq: qq + 1, as many as
 * the history has. */
static LASSIE_HD inline int lassie_bdf_interp_points(int qq, int nh) {
  return qq + 1 < nh ? qq + 1 : nh;
}

#endif /* SBG_LASSIE_BDF_H */
