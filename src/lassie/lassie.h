/* Engine interface of lassieSimulate(): deterministic simulation of
 * mass-action reaction networks (RKF45 with a switch to BDF on stiffness),
 * shared by the CPU engine (lassie_cpu.c) and the GPU engine (lassie_gpu.cu).
 * Reached from R through ffi_lassie_simulate() in lassie_call.c. */
#ifndef SBG_LASSIE_H
#define SBG_LASSIE_H

#include <stdint.h>
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The network.  Species and reactions are 0-based.  Reactants are stored
 * per reaction (CSR, each species once with its order a_ij >= 1); the net
 * stoichiometry H = (products - reactants)^T per species (CSR), with the
 * rows of fixed (clamped) species left empty, so they never change. */
typedef struct sbg_lassie_model {
  int n_species, n_reactions;
  const int *r_ptr;     /* n_reactions + 1 */
  const int *r_sp;      /* r_ptr[M]: reactant species */
  const int *r_ord;     /* r_ptr[M]: its order (stoichiometric coefficient) */
  const int *h_ptr;     /* n_species + 1 */
  const int *h_rx;      /* h_ptr[N]: reaction */
  const double *h_val;  /* h_ptr[N]: net coefficient */
  /* General kinetic laws (NULL: every reaction is mass action, and both
   * engines run exactly the mass-action code).  Reaction i
   * with law[i] >= 0 has rate k_i * (the program at code + law[i]), and its
   * "reactant" entries (r_ptr/r_sp) are the species the program reads: the
   * pattern of its column of the Jacobian, whose values are then finite
   * differences (r_ord unused).  law[i] < 0: mass action as above. */
  const int *law;       /* n_reactions, or NULL */
  const int *code;      /* the programs (LASSIE_OP_*), each ending in RET */
  const double *cval;   /* the constants the programs push */
  int n_code, n_cval;   /* their lengths (the GPU engine copies them) */
} sbg_lassie_model;

/* The stack machine of kinetic laws.  CONST, SPEC and SPEC_POS take one
 * operand (the index of the constant, of the species); the others pop their
 * arguments and push the result.  Relations and logic give 1 or 0; SELECT
 * pops c, a, b (pushed in that order) and pushes c != 0 ? a : b. */
enum {
  LASSIE_OP_RET = 0, LASSIE_OP_CONST, LASSIE_OP_SPEC,
  LASSIE_OP_ADD, LASSIE_OP_SUB, LASSIE_OP_MUL, LASSIE_OP_DIV, LASSIE_OP_POW,
  LASSIE_OP_MIN, LASSIE_OP_MAX,
  LASSIE_OP_LT, LASSIE_OP_LE, LASSIE_OP_GT, LASSIE_OP_GE, LASSIE_OP_EQ, LASSIE_OP_NE,
  LASSIE_OP_AND, LASSIE_OP_OR, LASSIE_OP_XOR,      /* last binary operator */
  LASSIE_OP_NEG, LASSIE_OP_NOT, LASSIE_OP_EXP, LASSIE_OP_LN, LASSIE_OP_LOG10,
  LASSIE_OP_SQRT, LASSIE_OP_ABS, LASSIE_OP_FLOOR, LASSIE_OP_CEIL,
  LASSIE_OP_SIN, LASSIE_OP_COS, LASSIE_OP_TAN, LASSIE_OP_SINH, LASSIE_OP_COSH,
  LASSIE_OP_TANH, LASSIE_OP_ASIN, LASSIE_OP_ACOS, LASSIE_OP_ATAN,
  LASSIE_OP_ASINH, LASSIE_OP_ACOSH, LASSIE_OP_ATANH,   /* last unary operator */
  LASSIE_OP_SELECT,
  LASSIE_OP_SPEC_POS,   /* operand: a species; pushes x > 0 ? x : 0 */
  LASSIE_N_OPS
};
/* deepest stack a program may use (the glue checks every program) */
#define LASSIE_LAW_STACK 64

/* AUTO: DOPRI5, BDF on stiffness; RKF45: explicit only, stepping onto each
 * output time (LASSIE's scheme); BDF: implicit only; DOPRI5: explicit only.
 * All but RKF45 step by accuracy and interpolate the output times. */
enum { SBG_LASSIE_AUTO = 0, SBG_LASSIE_RKF45 = 1, SBG_LASSIE_BDF = 2, SBG_LASSIE_DOPRI5 = 3 };

/* Solver statistics, per simulation, in this order (lassieSimulate()
 * returns them as the "stats" attribute). */
enum {
  SBG_LASSIE_ST_STEPS = 0,    /* accepted steps (explicit + implicit) */
  SBG_LASSIE_ST_REJECTED,     /* rejected steps (error test or Newton) */
  SBG_LASSIE_ST_SWITCHES,     /* switches between RKF45 and BDF */
  SBG_LASSIE_ST_IMPLICIT,     /* accepted BDF steps */
  SBG_LASSIE_ST_NEWTON,       /* Newton iterations */
  SBG_LASSIE_ST_FACTOR,       /* LU factorisations of I - gamma J */
  SBG_LASSIE_ST_JAC,          /* Jacobian evaluations */
  SBG_LASSIE_ST_RHS,          /* right-hand-side evaluations */
  SBG_LASSIE_N_STATS
};

typedef struct sbg_lassie_params {
  int n_sims;             /* simulations in the batch, >= 1 */
  int rates_per_sim;      /* 1: rates is M x n_sims; 0: one column shared */
  int initial_per_sim;    /* 1: initial is N x n_sims; 0: one column shared */
  const double *rates;    /* rate constants, >= 0 */
  const double *initial;  /* initial amounts */
  int n_times;            /* >= 2; times[0] is the start */
  const double *times;    /* strictly increasing */
  double rtol, atol;      /* error test |err_j| <= atol + rtol |x_j| */
  int method;             /* SBG_LASSIE_AUTO / _RKF45 / _BDF */
  double max_steps;       /* attempted steps per simulation */
  double h_init;          /* first step; <= 0: chosen from the problem */
  /* NULL, or per simulation the attempts it made before this run (a run
   * that continues it after an event), counted against max_steps */
  const double *attempts0;
  /* NULL, or per simulation the times it runs from and to (2 x n_sims,
   * within times[0] .. times[n_times - 1]; with a watch, not RKF45):
   * lassieSimulate()'s rounds between events, each simulation from its
   * last stop to its next.  The output rows strictly inside are
   * interpolated, a row at the end is the state there, the others are
   * left as they are.  NULL: every simulation from the first time to the
   * last, its row 0 its initial state. */
  const double *window;
  /* GPU: the devices sharing the batch, each a contiguous block of
   * simulations (n_devices <= 0: ctx->device alone) */
  const int *devices;
  int n_devices;
  /* messages: this batch is simulations sim_base + 1 .. of sim_total (an
   * R worker's block of a larger batch); 0 and n_sims otherwise */
  int sim_base, sim_total;
  /* The GPU engine's settings (R options, ?`sysbioGPU-options`), each -1
   * for the engine's own choice.  device_bdf: 0 the implicit steps on the
   * host, 1 on the device whatever the batch's size; bdf_team: lanes per
   * simulation of the device's implicit steps (1, 2, 4, 8, 16 or 32);
   * bdf_smem: at most this many of a warp's workspace vectors in shared
   * memory (0 to 4); fused: 0 the explicit steps by kernels per stage, 1
   * by k_explicit whenever a simulation's block fits. */
  int device_bdf, bdf_team, bdf_smem, fused;
} sbg_lassie_params;

/* Per simulation: 0, or why it stopped (its rows from there on are NaN) */
enum { SBG_LASSIE_FAIL_MAXSTEPS = 1, SBG_LASSIE_FAIL_HMIN = 2, SBG_LASSIE_FAIL_NEWTON = 3,
       SBG_LASSIE_FAIL_TOO_LARGE = 4 };
#define SBG_LASSIE_MSG 192

/* Conditions watched along each simulation of a batch (both engines; the
 * SBML events of lassieSimulate(), R/lassie-events.R): programs of the
 * kinetic laws' stack machine over the state, their own code and
 * constants, evaluated at the start and after every accepted step, at its
 * end and at 15 points inside it.  When one changes from zero to nonzero or
 * back within a step, the time of the change is found by bisection on the
 * step's interpolant (DP5's continuous extension, the BDF history) to the
 * last bit of the time, and the simulation stops there: the output rows
 * before that time are written, the others are not, and the stop is
 * reported below.  Not for method RKF45 (its steps have no interpolant). */
typedef struct sbg_lassie_watch {
  int n_conds;
  const int *start;       /* n_conds: each program's offset in code */
  const int *code;
  const double *cval;
  int n_code, n_cval;     /* their lengths (the GPU engine copies them) */
  /* what the run reports, per simulation of the batch */
  int *stopped;           /* 1: a condition changed at t; 0: the run reached the last time */
  int *next;              /* output rows written (0-based index of the first one not written) */
  double *t;              /* the time of the change (of the stop), else the last time */
  double *x;              /* n_species each: the state at t (interpolated within the step) */
  double *values;         /* n_conds each: the conditions' values at t (at the start when not stopped) */
} sbg_lassie_watch;

typedef struct sbg_lassie_result {
  double *out;            /* n_sims blocks of n_times x N, column-major */
  /* When out is NULL the engine makes it by make_out(make_data, &out)
   * (SBG_OK, or SBG_ERR_ALLOC when it cannot be made, SBG_ERR_INTERRUPTED
   * when the user interrupted meanwhile), once, on the calling thread,
   * before it writes any of it: the GPU engine does so while its device
   * works, so that the time the caller takes (R's allocator collecting
   * garbage: 0.1-0.2 s for 246 MB) is not added to the run's
   * (lassie_out_ready()). */
  sbg_status (*make_out)(void *make_data, double **out);
  void *make_data;
  double *stats;          /* SBG_LASSIE_N_STATS x n_sims */
  /* A simulation that fails does not stop the others: its status
   * (SBG_LASSIE_FAIL_*, 0 when it succeeded) and message (SBG_LASSIE_MSG
   * characters per simulation) are here, and the run returns SBG_OK.
   * Errors of the run (memory, device, interrupt) are its status. */
  int *status;
  char *messages;
  /* NULL, or the conditions watched along each simulation */
  sbg_lassie_watch *watch;
} sbg_lassie_result;

sbg_status sbg_lassie_cpu(const sbg_lassie_model *m, const sbg_lassie_params *p,
                          sbg_lassie_result *r, sbg_ctx *ctx);
sbg_status sbg_lassie_gpu(const sbg_lassie_model *m, const sbg_lassie_params *p,
                          sbg_lassie_result *r, sbg_ctx *ctx);

/* Reaction rates v (length M) at state x with constants k. */
/* dX/dt = H v(x) into f (n_species), with the rates v (n_reactions) as scratch. */
void sbg_lassie_rhs(const sbg_lassie_model *m, const double *k, const double *x,
                    double *v, double *f);
void sbg_lassie_rates(const sbg_lassie_model *m, const double *k,
                      const double *x, double *v);
/* The value of the program at `code` at state x, with species `oj`
 * (-1: none) read as `ov` instead of x[oj]. */
double sbg_lassie_law_eval(const int *code, const double *cval, const double *x, int oj, double ov);
/* Rates of a model with kinetic laws (m->law not NULL). */
void sbg_lassie_law_rates(const sbg_lassie_model *m, const double *k, const double *x, double *v);
/* dv_i/dx_j for every reactant entry e of reaction i (length r_ptr[M]):
 * the sparse factor D of the Jacobian J = H D. */
void sbg_lassie_dvdx(const sbg_lassie_model *m, const double *k,
                     const double *x, double *dv);
/* (I - gamma J(x)) z = b by the implicit steps' sparse LU (b becomes z,
 * species order; by_passes: the device's factorisation and warp passes,
 * emulated), gamma the last of n_gamma values factorised in turn with the
 * same scratch, as the steps reuse it; with factors, *factors gets the
 * factors' values (*n_factors of them, in the pattern's order; the caller
 * frees them).  Returns 0, -1 when the last factorisation's pivot fails,
 * -2 without memory. */
int sbg_lassie_lu_solve_once(const sbg_lassie_model *m, const double *k, const double *x,
                             const double *gamma, int n_gamma, double *b, int by_passes,
                             double **factors, size_t *n_factors);
/* Whether the GPU engine should take the implicit steps of a batch of
 * n_sims simulations of a model of n_species on the device rather than on
 * the host's `threads` (1 or 0; lassie_cpu.c says why). */
int sbg_lassie_device_bdf_pays(int n_species, int n_sims, int threads);

#ifdef __cplusplus
}
#endif

#endif /* SBG_LASSIE_H */
