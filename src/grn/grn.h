/* Engine interface of grnEvolve() and grnSimulate(): the problem (reference
 * network as bit masks, start and goal states), the genetic algorithm's
 * settings and its results.  Shared by grn_cpu.c, grn_gpu.cu and the glue
 * grn_call.c; no R here. */
#ifndef SBG_GRN_H
#define SBG_GRN_H

#include <stdint.h>

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest network: states and mask rows of at most 64 words of 32 bits. */
#define SBG_GRN_MAX_WORDS 64
#define SBG_GRN_MAX_GENES (32 * SBG_GRN_MAX_WORDS)

/* Rule codes, as in the paper: per gene, counting active sources only. */
enum { SBG_GRN_MOST = 0, SBG_GRN_ABS = 1, SBG_GRN_JACT = 2, SBG_GRN_JREP = 3 };

/* The model and the goal.  A network is two bit matrices, n rows of w
 * words: bit j of row i of `act` is set when source j activates target i,
 * of `rep` when it represses it (never both). */
typedef struct sbg_grn_problem {
  int n;                   /* genes */
  int w;                   /* words per row and per state: (n + 31) / 32 */
  int steps;               /* synchronous steps from `from`, >= 1 */
  const uint32_t *ref_act; /* n * w: the reference network */
  const uint32_t *ref_rep;
  const uint32_t *from;    /* w: start state, bit i = gene i */
  const uint32_t *to;      /* w: goal state */
  int n_ref_act;           /* links of the reference, by sign (the */
  int n_ref_rep;           /*   initial population keeps these counts) */
  int64_t wn, wl;          /* integer fitness: score = wn * dn + wl * dl */
  int max_in;              /* largest in-degree a network may have */
  int n_allowed;           /* rules a gene may take, 1..4 */
  uint8_t allowed[4];
  const uint8_t *lut;      /* CPU engine, w == 1 only: the rules' outcome
                              table (grn_fill_lut), or NULL; engines set it */
  int eval_path;           /* CPU engine: 0 the fastest evaluation the CPU
                              has, else the one to use (grn_simd.h; tests
                              and benchmarks compare them) */
} sbg_grn_problem;

typedef struct sbg_grn_params {
  int64_t pop;             /* individuals in all */
  int islands;             /* pop / islands per island, even, >= 4 */
  int migration_interval;  /* generations between migrations */
  int migrants;            /* individuals sent to the next island */
  int roulette;            /* 0 elitist pairs, 1 roulette selection */
  double p_link, p_rule;   /* mutation probabilities per individual */
  int64_t generations;     /* breeding generations at most */
  int64_t target;          /* stop once the best score <= target; -1: never */
  double time_limit;       /* seconds; <= 0 or infinite: none */
  uint64_t seed;
  int blocks;              /* CPU engine: the islands run as this many
                              contiguous blocks in lockstep (<= 1: one), as
                              over several devices or workers (tests) */
} sbg_grn_params;

/* Why a run stopped. */
enum { SBG_GRN_STOP_GENERATIONS = 0, SBG_GRN_STOP_TARGET = 1, SBG_GRN_STOP_TIME = 2 };

typedef struct sbg_grn_result {
  int *best_links;         /* n * n, column-major as an R matrix: [i + j n] is
                              the link from source j to target i (-1, 0, 1) */
  int *best_rules;         /* n rule codes */
  double *history;         /* (generations + 1) x islands, column-major: the
                              best score of each island after each generation
                              (row 0: the initial population) */
  int64_t generations_run;
  int64_t best_score;
  int best_dn, best_dl;
  int stop_reason;
} sbg_grn_result;

/* A population of `count` individuals in the CPU layout (individual k's
 * masks at act/rep + k n w, its rules at rule + k n) with their scores. */
typedef struct sbg_grn_state {
  uint32_t *act, *rep;
  uint8_t *rule;
  double *score;           /* exact: scores are below 2^53 */
} sbg_grn_state;

/* One round of a block of islands [first, first + count) for grnEvolve()
 * over R workers (BPPARAM): generations g_from + 1 .. g_to, or the initial
 * population first when `init`.  Streams use global indices, so a split
 * run is the single run.  The block stops early once its own best <= the
 * target (as the whole run does when any island reaches it). */
typedef struct sbg_grn_round {
  int first, count;        /* islands of the block */
  int64_t g_from, g_to;    /* generations run: g_from + 1 .. g_to */
  int init;                /* 1: g_from = 0 and the state is drawn first */
  sbg_grn_state state;     /* count * size individuals: in (unless init), out */
  const sbg_grn_state *incoming; /* migrants (K) into the first island at
                              g_from + 1 when that is a migration generation;
                              NULL: the block's own last island's (a ring of
                              its own) */
  sbg_grn_state outgoing;  /* out: the K best of the last island at the end */
  double *history;         /* (g_to - g_from + 1) x count, column-major: row r
                              = generation g_from + r; rows past g_done NaN */
  int64_t g_done;          /* out: last generation run */
  int stopped;             /* out: 1 when the block's best reached the target */
  int64_t best_index;      /* out: local index of the block's best, ties by
                              lowest island */
  int64_t best_score;
} sbg_grn_round;

sbg_status sbg_grn_round_cpu(const sbg_grn_problem *pb, const sbg_grn_params *gp,
                             sbg_grn_round *rd, sbg_ctx *ctx);
sbg_status sbg_grn_round_gpu(const sbg_grn_problem *pb, const sbg_grn_params *gp,
                             sbg_grn_round *rd, sbg_ctx *ctx);

/* The island genetic algorithm (grnEvolve()).  The GPU engine runs on the
 * run's devices (ctx: one block of islands each, migration crossing them
 * on the ring). */
sbg_status sbg_grn_evolve_cpu(const sbg_grn_problem *pb, const sbg_grn_params *gp,
                              sbg_grn_result *out, sbg_ctx *ctx);
sbg_status sbg_grn_evolve_gpu(const sbg_grn_problem *pb, const sbg_grn_params *gp,
                              sbg_grn_result *out, sbg_ctx *ctx);

/* Evaluation throughput (inst/bench/grn.R): a random population of `pop`
 * individuals from `seed` is evaluated `reps` times; `seconds` is the time
 * of the evaluations alone, `checksum` the sum of the scores of one pass
 * (equal on both engines).  The CPU's `cpu_seconds` is the process's CPU
 * time over the same evaluations: the rate per core on a loaded machine. */
sbg_status sbg_grn_bench_cpu(const sbg_grn_problem *pb, int64_t pop, int reps, uint64_t seed,
                             double *seconds, double *checksum, double *cpu_seconds,
                             sbg_ctx *ctx);
sbg_status sbg_grn_bench_gpu(const sbg_grn_problem *pb, int64_t pop, int reps, uint64_t seed,
                             double *seconds, double *checksum, sbg_ctx *ctx);

/* The CPU evaluation path (grn_simd.h) that pb->eval_path gives here. */
int sbg_grn_cpu_eval_path(const sbg_grn_problem *pb);

/* grnSimulate() and the tests' evaluator (CPU only, no randomness). */
/* Trajectory of one network: states[(t * n) + i] for t = 0..steps. */
void sbg_grn_simulate(const sbg_grn_problem *pb, const uint32_t *act, const uint32_t *rep,
                      const uint8_t *rules, int *states);
/* The links (n x n, as best_links) and rules of individual k of a state,
 * and its score, dn and dl. */
int64_t sbg_grn_decode(const sbg_grn_problem *pb, const sbg_grn_state *s, int64_t k, int *links,
                       int *rules, int *dn, int *dl);
/* dn and dl of `count` networks given as masks (n * w words each) and rules. */
void sbg_grn_evaluate(const sbg_grn_problem *pb, int64_t count, const uint32_t *act,
                      const uint32_t *rep, const uint8_t *rules, int *dn, int *dl,
                      int n_threads);

#ifdef __cplusplus
}
#endif

#endif /* SBG_GRN_H */
