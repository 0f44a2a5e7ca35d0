/* COSNet engines (Frasca et al.; ParCOSNet, BMC Bioinformatics 2018): the
 * interface shared by the CPU (cosnet_cpu.c) and GPU (cosnet_gpu.cu) engines
 * behind parCosnet() and cvParCosnet().  Plain C, no R. */
#ifndef SBG_COSNET_H
#define SBG_COSNET_H

#include <stdint.h>
#include <string.h>

#include "philox.h" /* (SBG_HD: sbg_cosnet_order_key() on the device too) */
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A symmetric weighted graph in compressed rows.  64-bit row offsets, so
 * more than 2^32 stored entries work; entries of a row in a fixed order
 * (the order defines the summation order, see SBG_COSNET_LANES). */
typedef struct sbg_cosnet_graph {
  int32_t n;              /* nodes */
  const int64_t *v_rowptr;/* n + 1 offsets */
  const int32_t *v_col;   /* rowptr[n] column indices, 0-based */
  const double *v_w;      /* rowptr[n] weights > 0 */
} sbg_cosnet_graph;

/* Every weighted row sum of both engines is computed in one canonical
 * order, so that CPU and GPU agree to the last bit: entry k of a row goes to
 * partial sum k mod L (in row order), then the L partials are added by a
 * halving tree (offsets L/2, ..., 2, 1: partial l += partial l + off).
 * L = 32 (a warp, butterfly offsets 16..1) for rows of at most
 * SBG_COSNET_HUB_DEGREE entries, and L = 256 (a block of 8 warps: shared
 * memory for offsets 128, 64, 32, then the warp butterfly) for the hubs
 * above, which the GPU gives a block each.  Products and sums are rounded
 * separately (no fused multiply-add). */
#define SBG_COSNET_LANES 32
#define SBG_COSNET_HUB_LANES 256
#define SBG_COSNET_HUB_DEGREE 1024

/* The jobs of one call.  Labels are per class; a job is (class, fold).
 * fold 0: the unlabelled nodes of the class are predicted and reported.
 * fold f >= 1: nodes with folds == f lose their label and are predicted and
 * reported; unlabelled nodes join the dynamics but are not reported. */
typedef struct sbg_cosnet_input {
  sbg_cosnet_graph g;
  int32_t n_classes;
  const int8_t *v_labels;  /* n x n_classes: +1 positive, -1 negative, 0 unlabelled */
  const int32_t *v_folds;  /* n x n_classes fold ids 1..n_folds (0 = unlabelled), or NULL */
  int32_t n_folds;         /* 0 when v_folds is NULL */
} sbg_cosnet_input;

typedef struct sbg_cosnet_params {
  double cost;             /* COSNet's regularisation (beta); 0 = none */
  int32_t max_sweeps;      /* stop after this many sweeps, converged or not */
  uint64_t seed;           /* colouring priorities */
  int32_t max_batch;       /* GPU: most jobs per batch, 0 = as memory allows (tests) */
  double device_budget;    /* GPU: bytes of device memory to use, 0 = what is free; a
                            * network that does not fit is streamed in parts (a small
                            * budget forces that path in the tests) */
  double host_colour_max;  /* GPU: a resident network of at most this many entries is
                            * coloured on the host, a larger one on the device (< 0:
                            * the engine's default); the same colouring */
  /* GPU: the run's devices (ctx) share the jobs, batches from one queue,
   * two host threads a device when the jobs are many; identical results */
} sbg_cosnet_params;

/* Outputs, allocated by the caller.  n_jobs = n_classes * max(1, n_folds),
 * job j = class j / max(1, n_folds), fold 1 + j % n_folds (or 0). */
typedef struct sbg_cosnet_result {
  double *v_scores;        /* n x n_classes: final field of each reported node */
  int32_t *v_pred;         /* n x n_classes: 1 positive, 0 negative (reported nodes) */
  double *v_alpha;         /* n_jobs */
  double *v_c;             /* n_jobs */
  double *v_fscore;        /* n_jobs: training F of the learned line */
  int32_t *v_sweeps;       /* n_jobs: sweeps run (the last one changed nothing) */
  int32_t *v_converged;    /* n_jobs: 1 when a sweep changed nothing */
  int32_t *v_colour;       /* n: colour of each node, 0-based */
  int32_t n_colours;
  int32_t n_parts;         /* GPU: parts of the network streamed from the host per
                            * sweep; 0 when it stays on the device (and on the CPU) */
} sbg_cosnet_result;

sbg_status sbg_cosnet_cpu(const sbg_cosnet_input *in, const sbg_cosnet_params *p,
                          sbg_cosnet_result *out, sbg_ctx *ctx);
sbg_status sbg_cosnet_gpu(const sbg_cosnet_input *in, const sbg_cosnet_params *p,
                          sbg_cosnet_result *out, sbg_ctx *ctx);

/* ---- shared host pieces (cosnet_common.c) ---- */

/* The order-preserving 64-bit pattern of a double: a < b exactly when
 * key(a) < key(b), and key(a) == key(b) exactly when a == b (-0 taken as
 * +0, so that it ties with 0 as in a comparison).  Not for NaN. */
SBG_HD uint64_t sbg_cosnet_order_key(double v) {
  double d = v == 0 ? 0.0 : v;
  uint64_t b;
  memcpy(&b, &d, sizeof b);
  return (b >> 63) ? ~b : (b | 0x8000000000000000ull);
}

/* Entries of the ascending keys[0..n) below k (the first index with
 * keys[i] >= k), by a binary search without branches on the keys, which a
 * processor cannot predict. */
static inline int64_t sbg_cosnet_keys_below(const uint64_t *keys, int64_t n, uint64_t k) {
  if (n == 0) return 0;
  const uint64_t *b = keys;
  while (n > 1) {
    int64_t half = n / 2;
    b += b[half] < k ? half : 0;
    n -= half;
  }
  return (b - keys) + (*b < k);
}

/* COSNet's learning step on m labelled points (x = weight to positives,
 * y = weight to negatives, lab 1/0): angle sweep, intercept sweep, and the
 * "positives above the line" branch, with COSNet's tie handling.  Polls
 * ctx for interrupts (progress `done`) when ctx is not NULL: only from the
 * calling thread outside parallel regions.  SBG_ERR_INTERRUPTED then. */
sbg_status sbg_cosnet_learn(const double *x, const double *y, const int8_t *lab,
                            int64_t m, double *alpha, double *c, double *fscore, sbg_ctx *ctx,
                            double done);

/* ---- the learning step from the device's summaries (GPU engine) ----
 *
 * The GPU engine learns each job's line from what its device makes of the
 * job's labelled points, so that the points never cross to the host: for
 * each sweep of learn_step() (cosnet_common.c), the sorted keys of the
 * positives and the negatives counted between them, in one of five
 * kinds:
 *   RATIO  grouped, the ratios y / x of the points below the angle sweep's
 *          stop (ratio < sbg_cosnet_ratio_stop()); the host turns the
 *          ratios' groups into the angles' (atan is increasing) with glibc's
 *          atan, as the host's own step does;
 *   LINE   grouped, y - slope x of every point (slope: the job's param);
 *   AXIS   stable, y of the points with x == 0;
 *   SLOPE  stable, (y - y1) / x of the points with x != 0 and a value not
 *          above -1 (y1: the job's param);
 *   LINE_STABLE  stable, y - slope x of every point.
 * Grouped: n_keys groups of equal keys, key[g] ascending, pos[g] positives
 * and eq[g] negatives of that key, run[g] the negatives between keys g - 1
 * and g (run[n_keys] after the last), top[g] / bot[g] their largest /
 * smallest key (0 / ~0 for none).  Stable: n_keys positives in (value,
 * node) order, key[j] the bits of the value (a double), run[j] the
 * negatives between positives j - 1 and j in that order.  A job with more
 * positives than SBG_COSNET_LEARN_CAP has n_keys -1 (the host learns it;
 * the device stops counting there, so its other counts are partial).
 * Job b's arrays start at b * cap (key, pos, eq) and b * (cap + 1) (run,
 * top, bot). */
#define SBG_COSNET_LEARN_CAP 1024
enum { SBG_COSNET_SUM_RATIO, SBG_COSNET_SUM_LINE, SBG_COSNET_SUM_AXIS, SBG_COSNET_SUM_SLOPE,
       SBG_COSNET_SUM_LINE_STABLE };
typedef struct sbg_cosnet_sum {
  int32_t n_lab, n_pos, nz_pos; /* labelled points, positives, positives with x == 0 */
  int32_t kept;                 /* points of the sweep */
  int32_t n_keys;               /* groups or positives; -1: more than the cap */
  int32_t zero_at;              /* grouped: the first kept point (node) whose value is 0, or n */
  double zero;                  /* its value (-0 or +0) */
} sbg_cosnet_sum;
typedef struct sbg_cosnet_sums {
  sbg_cosnet_sum *sum;
  uint64_t *key, *top, *bot;
  int32_t *pos, *eq, *run;
} sbg_cosnet_sums;
/* Bytes of one job's summary of one kind, for a cap. */
size_t sbg_cosnet_sums_bytes(int32_t cap);
/* The arrays of nb jobs' summaries laid out from `base` (nb x that). */
sbg_cosnet_sums sbg_cosnet_sums_at(void *base, int32_t nb, int32_t cap);

/* The smallest ratio y / x whose angle (glibc's atan) reaches the angle
 * sweep's stop, 1.57: the RATIO kind keeps the points below it. */
double sbg_cosnet_ratio_stop(void);

/* A job's learning from summaries, round after round: round 1 reads its
 * RATIO and AXIS summaries and asks for LINE (param: the slope) and, in
 * COSNet's branch for positives above the line, SLOPE (param: y1); round
 * 2 reads those and asks for LINE_STABLE in that branch (param: the
 * slope); round 3 reads it.  need: what the next round asks for (bits
 * 1 << kind), 0 when the job's line is learnt; host = 1 when the host must
 * learn the job from its points (more positives than the cap, or a
 * negative whose angle rounds to a positive's though their ratios differ),
 * input = 1 when the job lacks positives or negatives. */
typedef struct sbg_cosnet_dlearn {
  int need, host, input, above;
  int64_t n_pos, n_lab, nz_pos, best_pos, best_rank;
  double theta, slope, y1;
} sbg_cosnet_dlearn;
/* One round for the nb jobs of a batch (OpenMP over jobs): in, in2 the
 * summaries that round reads (round 1: RATIO, AXIS; round 2: LINE,
 * SLOPE; round 3: LINE_STABLE, unused), st their states, line_param and
 * slope_param (nb) the params of the next round's LINE or LINE_STABLE and
 * of its SLOPE; the learnt lines into alpha, c, fscore. */
void sbg_cosnet_dlearn_round(int round, int32_t nb, int32_t cap, const sbg_cosnet_sums *in,
                             const sbg_cosnet_sums *in2, sbg_cosnet_dlearn *st, double *line_param,
                             double *slope_param, double *alpha, double *c, double *fscore,
                             int n_threads);

/* (Tests) The angle groups that round 1 makes of job 0's RATIO summary
 * (cap = its arrays' length): -1 when the host must learn the job, else
 * their count G, with the groups' angles (key, G), positives and negatives
 * (pos, eq), and the runs of negatives between them (run, G + 1) with
 * their largest angles (top; NaN for an empty run). */
int64_t sbg_cosnet_angle_groups(const sbg_cosnet_sums *R, int32_t cap, double *key, int64_t *pos, int64_t *eq,
                                int64_t *run, double *top);

/* Learning on the host for the jobs `which` (n_which of them) of a batch
 * (sbg_cosnet_learn_jobs for those jobs only; x, y, codes laid out as
 * there, read at those jobs only). */
sbg_status sbg_cosnet_learn_some(int32_t n_which, const int32_t *which, int32_t n, const int8_t *codes,
                                 const double *x, const double *y, double *alpha, double *c,
                                 double *fscore, int64_t *n_pos, int64_t *n_lab, int n_threads);

/* Colouring priority of a node: Philox(seed, subsequence = node), first two
 * words; ties (never in practice) go to the larger index. */
uint64_t sbg_cosnet_priority(uint64_t seed, int32_t node);

/* Regularisation constants of COSNet for the learned alpha, c. */
typedef struct sbg_cosnet_reg {
  int on;         /* cost > 0 and alpha > pi/4 */
  double theta_add; /* added to every threshold */
  double r;         /* subtracted from every off-diagonal weight of W_U */
} sbg_cosnet_reg;
sbg_cosnet_reg sbg_cosnet_regularisation(double cost, double alpha, int64_t n_pos_train,
                                         int64_t n_train, int64_t n_unlab);

/* Node codes of a job. */
enum { SBG_COSNET_POS = 1, SBG_COSNET_NEG = -1, SBG_COSNET_REPORT = 0, SBG_COSNET_QUIET = 2 };

/* jl[0..n-1]: the codes of job j: labelled +1 / -1, or unlabelled and
 * reported (0) or predicted but not reported (2). */
void sbg_cosnet_job_codes(const sbg_cosnet_input *in, int32_t j, int8_t *jl);

/* The colouring of cosnet_cpu.c (Jones-Plassmann = greedy in decreasing
 * Philox priority), also used by the GPU engine when the network does not
 * fit the device. */
sbg_status sbg_cosnet_colour_host(const sbg_cosnet_graph *g, uint64_t seed, int32_t *colour,
                                  int32_t *n_colours, sbg_ctx *ctx);

/* Copies the rows of nodes[t0..t1) (colour order) one after the other into
 * col, w (the GPU engine's parts); cro: the offsets of the rows in that
 * order (cro[t] - cro[t0] is where row nodes[t] goes). */
void sbg_cosnet_gather(const sbg_cosnet_graph *g, const int32_t *nodes, int64_t t0, int64_t t1,
                       const int64_t *cro, int32_t *col, double *w, int n_threads);

/* Nodes sorted by colour (by index within a colour) and the colour
 * offsets (n_colours + 1); both malloc'ed, caller frees (also on error). */
sbg_status sbg_cosnet_colour_order(const int32_t *colour, int32_t n, int32_t n_colours,
                                   int32_t **nodes, int64_t **cptr);

/* Learning for a batch of jobs on the host (OpenMP over jobs; with fewer
 * than half as many jobs as threads, one job at a time with its sorts of
 * 2^16 points or more on all threads): codes, x and y are n_jobs x n (x, y
 * read at labelled nodes).  The lines do not depend on the threads. */
sbg_status sbg_cosnet_learn_jobs(int32_t n_jobs, int32_t n, const int8_t *codes,
                                 const double *x, const double *y, double *alpha,
                                 double *c, double *fscore, int64_t *n_pos, int64_t *n_lab,
                                 int n_threads);

/* Host bookkeeping of a GPU batch of jobs j0 .. j0 + nb - 1 (OpenMP over
 * jobs).  codes: nb x n, the jobs' node codes. */
void sbg_cosnet_batch_codes(const sbg_cosnet_input *in, int32_t j0, int32_t nb, int8_t *codes,
                            int n_threads);

/* The batch's final fields and states (nb x n) of the reported nodes into
 * the scores and predictions (n x n_classes) of their class, job j being
 * class j / nf. */
void sbg_cosnet_batch_collect(const int8_t *codes, int32_t j0, int32_t nb, int32_t n, int32_t nf,
                              const double *field, const int8_t *state, double *scores,
                              int32_t *pred, int n_threads);

/* memcpy on n_threads threads (the GPU engine's staging of the network
 * into pinned buffers). */
void sbg_cosnet_copy(void *dst, const void *src, size_t bytes, int n_threads);

/* Checks the compressed columns of a dgCMatrix (n columns; cp already
 * checked: cp[0] = 0, non-decreasing) for parCosnet(): res = (code,
 * 1-based column); code 0 fine, 1 NA or infinite weight, 2 negative
 * weight, 3 non-zero diagonal, 4 not symmetric, 5 symmetric up to rounding
 * (|a - b| <= tol * max(|a|, |b|)), 6 stored zeros; a column with code 1-4
 * wins, else 5, else 6.  Code 7: row indices outside 0..n-1 or not
 * increasing within the column (not a valid dgCMatrix; nothing else is
 * checked then).  v_degree (n, or NULL): the sums of the columns, which
 * for code 0 are the weighted degrees, bit for bit Matrix::rowSums(). */
void sbg_cosnet_check(int32_t n, const int32_t *cp, const int32_t *ci, const double *cx,
                      double tol, int n_threads, int32_t *res, double *v_degree);

/* D^-1/2 W D^-1/2 for normalize = TRUE: v_out (nnz) the new entries,
 * x_rj * (s_r * s_j) with s = 1 / sqrt(degree) (0 for an isolated node);
 * v_scale (n) is workspace.  Returns 1 when a row index is outside
 * 0..n-1 (its entry is left unwritten), else 0. */
int sbg_cosnet_normalize(int32_t n, const int32_t *cp, const int32_t *ci, const double *cx,
                         const double *v_degree, double *v_scale, double *v_out, int n_threads);

/* ---- random networks for the benchmark (cosnet_gen.c) ---- */

/* Erdos-Renyi G(n, prob) with U(0,1) weights, straight into compressed
 * rows: init, count (rowptr, n + 1), fill (col, w of rowptr[n] entries),
 * free.  Rows are sorted; the graph depends on (n, prob, seed) only. */
typedef struct sbg_cosnet_er {
  int32_t n;
  uint64_t seed;
  double log_q;     /* log(1 - prob) */
  int n_chunks;     /* one per thread */
  int32_t *bounds;  /* n_chunks + 1 row bounds */
  int32_t *up;      /* n: upper degree of each row */
  int32_t *cnt;     /* n_chunks x n: lower entries of each row per chunk */
} sbg_cosnet_er;
sbg_status sbg_cosnet_er_init(sbg_cosnet_er *er, int32_t n, double prob, uint64_t seed,
                              int n_threads);
sbg_status sbg_cosnet_er_count(sbg_cosnet_er *er, int64_t *rowptr);
sbg_status sbg_cosnet_er_fill(sbg_cosnet_er *er, const int64_t *rowptr, int32_t *col,
                              double *w);
void sbg_cosnet_er_free(sbg_cosnet_er *er);

/* cvParCosnet()'s bookkeeping (cosnet_cv.c).  A label's code: 1 (1), -1
 * (0), 0 (NA or NaN), 2 (anything else: an error).  Folds: for each class
 * of lab (n x K codes, column-major), its positives shuffled on Philox
 * subsequence 2^40 + 2k and its negatives on the next one, dealt round
 * robin to folds 1..nfolds (the negatives continuing), 0 for the
 * unlabelled.  Metrics: out (K x 4, column-major) gets each class's mean
 * over its folds of precision, recall, F and AUPRC (NA ones left out).
 * Both return -1 when out of memory, else 0. */
int32_t sbg_cosnet_label_code(double v);
int sbg_cosnet_folds(const int32_t *lab, int32_t n, int32_t K, int32_t nfolds, uint64_t seed,
                     int32_t *folds, int n_threads);
int sbg_cosnet_cv_metrics(const int32_t *lab, const int32_t *folds, const int *pred,
                          const double *score, int32_t n, int32_t K, int32_t nfolds,
                          double *out, int n_threads);

#ifdef __cplusplus
}
#endif

#endif /* SBG_COSNET_H */
