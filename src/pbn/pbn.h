/* Engine interface of pbnSteadyState() and pbnSimulate(): the flattened
 * probabilistic Boolean network, the sets of interest, the two-state
 * Markov chain driver (pbn_driver.c) and the CPU/GPU trajectory engines. */
#ifndef SBG_PBN_H
#define SBG_PBN_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A PBN as the engines see it (possibly reduced to the ancestors of the
 * nodes of interest).  Nodes are 0-based; a state is n_words 64-bit words,
 * node i in bit i%64 of word i/64. */
typedef struct sbg_pbn_net {
  int32_t n;               /* simulated nodes */
  int32_t n_words;         /* (n + 63) / 64 */
  const int32_t *fun_start;/* n+1: functions of node i are fun_start[i] .. fun_start[i+1]-1 */
  const uint64_t *fun_thresh; /* per function: cumulative selection threshold on a
                              32-bit draw u (function f is taken when u < thresh[f]
                              and no earlier one was); the last of a node is 2^32 */
  const int32_t *fun_k;    /* inputs per function, 0..24 */
  const int32_t *in_start; /* per function: first of its inputs in inputs[] */
  const int32_t *inputs;   /* input node indices; the first input is the most
                              significant bit of the truth table's row */
  const int64_t *tab_start;/* per function: first 32-bit word of its table */
  const uint32_t *tables;  /* truth tables, row j in bit j%32 of word j/32 */
  const int32_t *sel_rank; /* per node with several functions: which word of the
                              step's selection block it reads (its rank among such
                              nodes of the full network); -1 for one function */
  int32_t n_sel_total;     /* nodes with several functions in the full network:
                              the selection block's length */
  int32_t n_pert_total;    /* perturbable nodes of the full network */
  const int32_t *pert_node;/* per perturbable position: node index, -1 for a node
                              dropped by the reduction (its flip blocks the update
                              but changes nothing simulated) */
  const uint64_t *gap_thresh; /* n_pert_total+1: round(2^32 (1-p)^g), g = 0.. */
  const uint64_t *first_thresh; /* n_pert_total+1: the first flipped position of a
                              perturbation step (at least one flips): round(2^32 P(first
                              flip at a position >= g)), g = 0..; the last is 0 */
  const uint64_t *skip_thresh; /* n_skip+1: round(2^32 (1-q)^k), q = 1-(1-p)^n_pert_total
                              the chance that a step perturbs: P(at least k function steps
                              before the next perturbation step), k = 0..n_skip */
  int32_t n_skip;          /* 1..4096 */
  int32_t det;             /* synchronous and no simulated node has several functions:
                              a function step that keeps the state is at a fixed point, and
                              so are the function steps up to the next perturbation */
  int32_t n_total;         /* nodes of the full network (asynchronous choice) */
  const int32_t *node_of_full; /* n_total: simulated index of a full-network node, -1 dropped */
  int async;               /* 0 synchronous, 1 asynchronous */
} sbg_pbn_net;

/* A function of a network of at most 128 simulated nodes in the compact
 * form of pbn_step2() (pbn_step.h).  Packed (in_start < 0; k <= the
 * packing width, at most SBG_PBN_FREC_K): input j of the function's row
 * index (bit j; the last input is bit 0) is node (pos >> 7 j) & 127,
 * positions k.. are node 0, and tab is the truth table replicated to 64
 * rows.  Otherwise: inputs from net->inputs[in_start..], the table at
 * net->tables[tab..]. */
#define SBG_PBN_FREC_K 6
#define SBG_PBN_SMALL_N 128
typedef struct sbg_pbn_frec {
  uint64_t pos;
  uint64_t tab;
  int32_t k;
  int32_t in_start;
} sbg_pbn_frec;

/* Fills rec (one per function) for a network of at most SBG_PBN_SMALL_N
 * nodes, packing the functions of at most kp inputs; -1 when it cannot
 * (then the general step is used), else 0. */
int32_t sbg_pbn_frecs(const sbg_pbn_net *net, sbg_pbn_frec *rec, int32_t kp);
/* The CPU's packing width (packed functions all gather that many inputs:
 * no mispredicted loop exits; the rest take a branch), by a cost model. */
int32_t sbg_pbn_frec_width(const sbg_pbn_net *net);

/* Sets of interest (sub-cubes): set s holds the state when, for each of its
 * entries e in set_start[s] .. set_start[s+1]-1, (x[word[e]] & pos[e]) ==
 * pos[e] and (x[word[e]] & neg[e]) == 0. */
typedef struct sbg_pbn_sets {
  int32_t n_sets;
  const int32_t *set_start; /* n_sets + 1 */
  const int32_t *word;
  const uint64_t *pos;
  const uint64_t *neg;
} sbg_pbn_sets;

/* Per-set sums over chains of one advance with counting, each over the
 * samples x_1..x_L that follow the state at the start (x_0):
 * [0] n1 = #{x_t = 1}, [1] n01 = #{x_{t-1}=0, x_t=1}, [2] n10 = #{1 -> 0},
 * [3] sum over chains of (that chain's n1)^2 (Gelman-Rubin). */
#define SBG_PBN_NSUM 4
/* The sums over chains of each chain's per-set counters (cnt: 3 per chain
 * and set) into sums (n_sets * SBG_PBN_NSUM): integer, so exact, and the
 * order (and the backend) cannot matter.  pbn_cpu.c. */
void sbg_pbn_sum_counts(const uint32_t *cnt, int64_t n_chains, int32_t n_sets, uint64_t *sums);

/* Trajectory engine state, owned by a backend (CPU or GPU). */
typedef struct sbg_pbn_engine sbg_pbn_engine;
struct sbg_pbn_engine {
  void *self;
  /* Moves every chain `steps` steps on; with `count`, fills sums
   * (n_sets * SBG_PBN_NSUM).  steps < 2^31.  Polls ctx between chunks,
   * reporting progress in [prog_lo, prog_hi]. */
  sbg_status (*advance)(sbg_pbn_engine *e, int64_t steps, int count, uint64_t *sums,
                        double prog_lo, double prog_hi, sbg_ctx *ctx);
};

#define SBG_PBN_MAX_DEVICES 64

typedef struct sbg_pbn_params {
  uint64_t seed;
  int64_t n_chains;       /* trajectories; chain c draws from subsequence c */
  double r, z, epsilon;   /* accuracy, normal quantile (1+s)/2, burn-in precision */
  double t;               /* Student t quantile (1+s)/2 on n_chains - 1 degrees of freedom */
  int64_t psi0;           /* first Gelman-Rubin window */
  double rhat_max;        /* R-hat accepted below this */
  int64_t max_len;        /* steps per chain at most */
  int64_t min_switches;   /* transitions 0->1 and 1->0 needed before trusting alpha, beta */
  int small;              /* use the register step pbn_step2() for <= 128 nodes (1; 0 for
                             tests: the general step, which must give the same result) */
  int bits;               /* bit-sliced engine (pbn_bits.h): 32 chains per word */
  /* GPU: the run's devices (ctx) share the chains, contiguous blocks */
} sbg_pbn_params;

/* Results per set (arrays of n_sets), filled by the driver. */
typedef struct sbg_pbn_result {
  double *prob, *alpha, *beta, *rhat;
  double *n_req, *burnin_req;  /* N and M of the last estimate */
  double *samples;             /* pooled samples the estimate uses */
  double *se;                  /* standard error of prob, from the chains' spread */
  int *converged;
  double steps_per_chain;      /* total, burn-in included */
  double burnin;               /* steps per chain discarded */
  double psi;                  /* last Gelman-Rubin window */
} sbg_pbn_result;

/* The two-state Markov chain method over the chains of an engine
 * (pbn_driver.c); identical on both backends because the engine sums are
 * exact integers. */
sbg_status sbg_pbn_two_state(sbg_pbn_engine *e, const sbg_pbn_params *p, int32_t n_sets,
                             sbg_pbn_result *out, sbg_ctx *ctx);

/* Steady state by trajectories: builds the backend's engine and runs the
 * driver. */
sbg_status sbg_pbn_steady_cpu(const sbg_pbn_net *net, const sbg_pbn_sets *sets,
                              const sbg_pbn_params *p, sbg_pbn_result *out, sbg_ctx *ctx);
sbg_status sbg_pbn_steady_gpu(const sbg_pbn_net *net, const sbg_pbn_sets *sets,
                              const sbg_pbn_params *p, sbg_pbn_result *out, sbg_ctx *ctx);

/* A block of chains [c0, c1) of the whole set (chain c on subsequence c),
 * for R workers (BPPARAM): starts from the seed (state_in NULL) or from an
 * exported state, advances `steps` (with `count`, fills sums), exports its
 * state into state_out (sbg_pbn_block_state_bytes(): the raw engine state,
 * valid only for the same build, which every worker runs). */
size_t sbg_pbn_block_state_bytes(const sbg_pbn_net *net, int64_t n_chains);
sbg_status sbg_pbn_block_cpu(const sbg_pbn_net *net, const sbg_pbn_sets *sets, const sbg_pbn_params *p,
                             int64_t c0, int64_t c1, const unsigned char *state_in, int64_t steps,
                             int count, uint64_t *sums, unsigned char *state_out, sbg_ctx *ctx);
sbg_status sbg_pbn_block_gpu(const sbg_pbn_net *net, const sbg_pbn_sets *sets, const sbg_pbn_params *p,
                             int64_t c0, int64_t c1, const unsigned char *state_in, int64_t steps,
                             int count, uint64_t *sums, unsigned char *state_out, sbg_ctx *ctx);

/* Trajectories for pbnSimulate(): states (steps+1 per chain) into
 * out[(c * (steps+1) + t) * n_words + w].  `from` (n_words) or NULL for a
 * random start from the chain's own stream. */
sbg_status sbg_pbn_simulate_cpu(const sbg_pbn_net *net, uint64_t seed, int64_t n_chains,
                                int64_t steps, const uint64_t *from, uint64_t *out, sbg_ctx *ctx);
sbg_status sbg_pbn_simulate_gpu(const sbg_pbn_net *net, uint64_t seed, int64_t n_chains,
                                int64_t steps, const uint64_t *from, uint64_t *out, sbg_ctx *ctx);

/* Exact stationary distribution by power iteration of the lazy chain over
 * all 2^n states (pbn_exact.c), n <= SBG_PBN_EXACT_MAX_N. */
#define SBG_PBN_EXACT_MAX_N 20
#define SBG_PBN_EXACT_MAX_NNZ (1LL << 25)
sbg_status sbg_pbn_exact_cpu(const sbg_pbn_net *net, const double *fun_prob, double p,
                             double tol, int64_t max_iter,
                             double *pi, double *iterations, double *delta, sbg_ctx *ctx);
/* The same iteration on the GPU (pbn_exact_gpu.cu): same structure, same
 * stopping rule; equal to the CPU's up to rounding (sums in another order). */
sbg_status sbg_pbn_exact_gpu(const sbg_pbn_net *net, const double *fun_prob, double p,
                             double tol, int64_t max_iter,
                             double *pi, double *iterations, double *delta, sbg_ctx *ctx);
/* Direct solve for n <= SBG_PBN_DIRECT_MAX_N (2^n states, a dense matrix of
 * 2^2n doubles): Grassmann-Taksar-Heyman reduction on the CPU.  *solved = 0
 * (pi not set) when the chain has several closed classes. */
#define SBG_PBN_DIRECT_MAX_N 11
sbg_status sbg_pbn_exact_direct(const sbg_pbn_net *net, const double *fun_prob, double p, double *pi,
                                int *solved, sbg_ctx *ctx);
/* The function-update transitions by source state (CSR: row NS+1, col and
 * val of row[NS] entries; malloc'ed, the caller frees). */
sbg_status sbg_pbn_exact_structure(const sbg_pbn_net *net, const double *fun_prob, int64_t **row,
                                   uint32_t **col, double **val, sbg_ctx *ctx);

#ifdef __cplusplus
}
#endif

#endif /* SBG_PBN_H */
