/* GPU engine of rapidGSEA(): for a batch of permutations, the permuted
 * labels (Philox, as on the CPU), every gene's metric and weight, the
 * ranking (a radix sort of float keys, stable, exact ties put
 * right afterwards), then each set's ES with the CPU's arithmetic (its
 * running sum in runs: gsea_math.h; the same bits).  Where a
 * permutation's ranks and weights fit a block's shared memory (23,244
 * genes on an H100 or H200), a block a permutation scores the sets of up
 * to 128 members, a lane a set (k_es_perm), and the larger ones walk
 * each permutation's ranking, 32 sets a warp (k_es_walk).  Elsewhere, per
 * tile of gene sets and pair of permutations one thread block sorts the
 * hits by (permutation, set, rank) in shared memory and scores each set
 * (k_es_tile: a thread a small set, a warp a large one).  The streaming
 * statistics of both passes run on the device too, so the sets x
 * permutations table never crosses to the host.  Reached from
 * rapidGSEA(backend = "gpu") through sbg_gsea_run() (gsea_cpu.c). */
#include <cub/block/block_radix_sort.cuh>
#include <cub/device/device_segmented_radix_sort.cuh>

#include <algorithm>
#include <cstdio>
#include <type_traits>
#include <vector>

#include "cuda_check.cuh"
#include "gsea.h"
#include "gsea_gpu_host.cuh"
#include "gsea_math.h"
#include "gsea_pass2.cuh"
#include "philox.h"

/* A tile: consecutive sets (in tile order, sets sorted by size) whose hits
 * fit one block's sort: 2,048 members of two permutations (4,096 hits)
 * with 256 threads, or for large sets 8,192 members of one permutation
 * with 512.  Sort keys: (permutation within block, set within tile, rank)
 * in the low bits, the hit's position above them.  With up to 65,536
 * genes the key is 32 bits (position = member index within its set, tiles
 * cut so that it fits), which halves the sort's shared-memory traffic;
 * otherwise 64 bits (position = hit index within the block, in the upper
 * half). */
#define TILE_RADIX_BITS 5
#define STATS_THREADS 256
/* Sets of more than ES_SPLIT members take a warp each in k_es_tile, the
 * smaller ones a thread (cheaper for them: a tile of small sets has more
 * sets than its block has warps).  k_es_tile took 257.0 ms a batch of
 * 32,768 C2 permutations on an H200 with the split at 256 members, 260.8
 * ms at 128. */
#ifndef ES_SPLIT
#define ES_SPLIT 256
#endif

/* Sets of at most LANE_MAX members take a lane each in k_es_perm, where
 * a permutation's ranks and weights fit a block's shared memory; larger
 * ones walk the ranking or take the tiles. */
#define LANE_MAX 128

/* What the hits of a set need of a gene in one permutation: one 16-byte
 * record, so one gather serves both.  The records of permutations 2i and
 * 2i + 1 lie side by side, gene after gene (rec_at), so that a block that
 * scores both gathers one 32-byte memory sector a member, not two: the
 * gathers were about a fifth of pass 1 on an H200. */
struct gene_rec {
  double w;      /* running-sum weight |metric|^q */
  int32_t rank;  /* 0-based position in the ranking */
  int32_t pad;
};

__host__ __device__ static inline size_t rec_at(int64_t b, int32_t g, int32_t G) {
  return ((size_t)(b >> 1) * (size_t)G + (size_t)g) * 2 + (size_t)(b & 1);
}

struct sbg_gsea_gpu {
  cudaStream_t stream;
  int32_t G, P, S, n_small, small_label, n_a, n_b, rbits, metric, gene_perm;
  int64_t M, B;
  double weight;
  double tie;              /* GSEA_TIE, read by the kernels from their parameters (gsea_es_step_tie) */
  uint64_t seed;
  /* tiles */
  int perm;                /* 1: k_es_perm takes the sets of at most LANE_MAX members and prepares the walk */
  int32_t L;               /* its lanes' sets: slots 0 .. L - 1 */
  int32_t lane_groups, walk_groups; /* groups of 32 slots: the lanes', then the walked sets' */
  int32_t *d_grp_kmax;     /* each group's largest set */
  int32_t *d_grp_off;      /* where its members start in d_lgene */
  uint16_t *d_lgene;       /* the groups' members, 8 a lane in 16 bytes: members 8c .. 8c + 7 of the
                              group's slot j at d_grp_off + 8 (32 c + j), so that a warp's loads coalesce */
  int32_t T, big;          /* tiles of the other sets; 1: the 512-thread tiles */
  int32_t Wn, walk_min;    /* sets walked (the Wn largest, of more than walk_min members; 0: none) */
  int walk_wide;           /* 1: the walk's WALK_WIDE shape, 0: WALK_NARROW */
  uint32_t *d_wmask;       /* (Wn + 31) / 32 groups x G: bit j of gene g, g in the group's set j */
  double *d_wnr;           /* per batch: each walked set's total weight (B x Wn) */
  double *d_wsorted;       /* per batch: the weight at each rank (B x G) */
  size_t tile_smem;
  int32_t *d_tile_first;   /* T + 1 offsets into the tile-ordered sets */
  int32_t *d_tile_small;   /* T: sets of at most ES_SPLIT members in each tile (its first ones) */
  int32_t *d_tset;         /* S: set of each tile-ordered slot */
  int32_t *d_tmem;         /* S + 1: first member of each slot (tile order) */
  int32_t Ml, Mt;          /* the lanes' members, then the tiles' (d_tmem[L] = Ml, d_tmem[L + T's
                              slots] = Mt; the lanes read theirs from d_lgene) */
  int32_t *d_tgene;        /* Mt - Ml: the tiles' members, slot after slot, each set's own order */
  uint32_t *d_tkey;        /* Mt - Ml: slot within its tile << rbits, and with key32 the member
                              index within its set << (rbits + the tile's slot bits + 1) */
  int key32;
  /* inputs */
  double *d_xc, *d_mu, *d_t1, *d_t2, *d_metric0;
  int32_t *d_labels;
  /* per batch */
  int32_t *d_lab, *d_small, *d_perm, *d_ord0, *d_ord1, *d_seg;
  gene_rec *d_rec;
  double *d_es;              /* the current batch's ES: d_es_buf or a slice of d_cache */
  double *d_es_buf;          /* one batch of ES (S x B) */
  /* Pass 1's ES of the handle's first cache_cols permutations (from
   * cache_first, the first one it was asked for: each device has its own
   * range), kept for pass 2 so that it reads them instead of recomputing
   * them; as many batches as the free memory holds (all of them for C2 x
   * 2^20 on an 80 GB card). */
  double *d_cache;
  int64_t cache_cols, cache_done, cache_first;
  double *d_metric;          /* every gene's metric in every permutation (its exact sort key, for ties of
                                the float keys, and its weight) */
  uint32_t *d_key0, *d_key1; /* float sort keys */
  void *d_temp;
  size_t temp_bytes;
  /* statistics */
  double *d_es_obs;
  gsea_acc *d_sum_pos, *d_sum_neg;
  unsigned long long *d_n_pos, *d_n_neg, *d_n_ext;
  unsigned long long *d_sequential; /* (set, permutation) pairs whose ES the sequential rule settled */
  double *d_obs;                 /* mpos, mneg (S each), opos (kp), oneg (kn) */
  unsigned long long *d_hist;    /* hp (kp + 1), hn (kn + 1), valid_pos, valid_neg */
  double *d_pext;                /* per permutation max, min (2 x B) */
  int32_t kp, kn;
  int max_smem;
  int device;
};

/* ---------------------------------------------------------------------- */
/* kernels: permutation, metric, ranking */

/* One thread per permutation: shuffle the labels (Philox subsequence j,
 * exactly as the CPU), list the samples of the summed class in order. */
static __global__ void k_labels(const int32_t *labels, int32_t P, int32_t small_label,
                                int32_t n_small, uint64_t seed, int64_t first, int64_t n,
                                int32_t *lab, int32_t *small) {
  int64_t b = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (b >= n) return;
  int32_t *v = lab + b * P;
  for (int32_t i = 0; i < P; i++) v[i] = labels[i];
  sbg_philox r;
  sbg_philox_init(&r, seed, (uint64_t)(first + b), 0);
  sbg_philox_shuffle(&r, v, (uint32_t)P);
  int32_t t = 0;
  for (int32_t i = 0; i < P && t < n_small; i++)
    if (v[i] == small_label) small[b * n_small + t++] = i;
}

/* One thread per permutation: a shuffle of the genes. */
static __global__ void k_geneperm(int32_t G, uint64_t seed, int64_t first, int64_t n, int32_t *perm) {
  int64_t b = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (b >= n) return;
  int32_t *v = perm + b * G;
  for (int32_t g = 0; g < G; g++) v[g] = g;
  sbg_philox r;
  sbg_philox_init(&r, seed, (uint64_t)(first + b), 0);
  sbg_philox_shuffle(&r, v, (uint32_t)G);
}

/* Bits of the sort keys that k_rank_sort orders: the metric rounded to
 * float and ordered as gsea_sort_key, its lowest 2 bits (of 23 of the
 * mantissa) dropped.  A monotone map, so sorting these keys leaves only
 * genes whose keys are equal to be put in exact order (k_fix_ties).  A
 * batch of 32,768 C2 permutations on an H200, k_rank_sort + k_fix_ties:
 * 32 bits, 4 bits a radix pass (8 passes) 16.16 + 1.70 ms; 6 bits a pass
 * (6) 15.44 + 1.72; 30 bits (5 passes of 6) 13.55 + 1.77; 24 bits (4
 * passes of 6) 11.42 + 4.20, with many more ties to fix; 28 bits in
 * passes of 7, 25.67 + 2.20. */
#ifndef SORT_KEY_BITS
#define SORT_KEY_BITS 30
#endif
static __device__ __forceinline__ uint32_t float_sort_key(double m) {
  uint32_t u = (uint32_t)__float_as_uint(__double2float_rn(m));
  u = (u >> 31) ? ~u : (u | 0x80000000u);
  return SORT_KEY_BITS == 32 ? ~u : ~u >> (32 - SORT_KEY_BITS % 32);
}

/* Gene g's metric in permutation b from the sums s, ss of its centred
 * values over the smaller class, in sample order (the CPU's order); its
 * float sort key and, when ord0 is given (the segmented sort's input), the
 * gene's index (k_records derives the weight). */
static __device__ __forceinline__ void metric_out(const sbg_gsea_gpu &h, int32_t g, int64_t b, double s, double ss,
                                                  double t1, double t2, double mu, int32_t *ord0) {
  double so = G_SUB(t1, s), sso = G_SUB(t2, ss);
  int small_is_b = h.small_label == 1;
  double sa = small_is_b ? so : s, ssa = small_is_b ? sso : ss;
  double sb = small_is_b ? s : so, ssb = small_is_b ? ss : sso;
  double m = gsea_metric(h.metric, sa, ssa, sb, ssb, (double)h.n_a, (double)h.n_b, mu);
  size_t at = (size_t)b * h.G + g;
  h.d_metric[at] = m;
  h.d_key0[at] = float_sort_key(m);
  if (ord0) ord0[at] = g;
}

/* One thread per (gene, permutation): the class sums, read from global
 * memory (the data are sample-major, so a warp reads consecutive genes),
 * or with gene permutations the gene's own metric under its permutation.
 * k_metric_tile takes its place where a tile's samples fit. */
static __global__ void k_metric(const sbg_gsea_gpu h, int32_t *ord0, int64_t n) {
  int32_t g = blockIdx.x * blockDim.x + threadIdx.x;
  int64_t b = blockIdx.y;
  if (g >= h.G || b >= n) return;
  if (h.gene_perm) {
    double m = h.d_metric0[h.d_perm[b * h.G + g]];
    size_t at = (size_t)b * h.G + g;
    h.d_metric[at] = m;
    h.d_key0[at] = float_sort_key(m);
    if (ord0) ord0[at] = g;
    return;
  }
  const int32_t *sm = h.d_small + b * h.n_small;
  double s = 0, ss = 0;
  for (int32_t t = 0; t < h.n_small; t++) {
    double x = h.d_xc[(size_t)sm[t] * h.G + g];
    s = G_ADD(s, x);
    ss = G_ADD(ss, G_MUL(x, x));
  }
  metric_out(h, g, b, s, ss, h.d_t1[g], h.d_t2[g], h.d_mu[g], ord0);
}

/* k_metric_tile's block: the data of METRIC_GENES genes (every sample) in
 * shared memory, and METRIC_PERMS permutations, a warp's lanes the genes.
 * Reading each permutation's samples from global memory, k_metric moves
 * the smaller class's values of every gene through the L2 cache in each
 * permutation (92 GB a batch of 32,768 C2 permutations); a tile reads its
 * genes' data once for its permutations: 12.3 ms a batch on an H200,
 * k_metric 14.9 ms.  (An earlier staging, 64 samples for 64
 * permutations, took 23.7 to 26.6 ms.) */
#define METRIC_GENES 32
#define METRIC_PERMS 128
#define METRIC_THREADS 256
/* Up to 384 samples: two blocks an SM. */
#define METRIC_SMEM (96 * 1024)
static size_t metric_smem(int32_t P, int32_t n_small) {
  return (size_t)P * METRIC_GENES * sizeof(double) + (size_t)METRIC_PERMS * n_small * sizeof(int32_t);
}

static __global__ void __launch_bounds__(METRIC_THREADS) k_metric_tile(const sbg_gsea_gpu h, int32_t *ord0,
                                                                       int64_t n) {
  extern __shared__ __align__(16) double xs[]; /* sample s, gene g0 + l: xs[s * METRIC_GENES + l] */
  int32_t *sm = reinterpret_cast<int32_t *>(xs + (size_t)h.P * METRIC_GENES);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int32_t g0 = blockIdx.x * METRIC_GENES, g = g0 + lane;
  const int64_t b0 = (int64_t)blockIdx.y * METRIC_PERMS;
  const int nb = (int)(n - b0 < METRIC_PERMS ? n - b0 : METRIC_PERMS);
  for (int32_t i = threadIdx.x; i < h.P * METRIC_GENES; i += METRIC_THREADS) {
    const int32_t gi = g0 + (i & (METRIC_GENES - 1));
    xs[i] = gi < h.G ? h.d_xc[(size_t)(i / METRIC_GENES) * h.G + gi] : 0.0;
  }
  for (int32_t i = threadIdx.x; i < nb * h.n_small; i += METRIC_THREADS) sm[i] = h.d_small[b0 * h.n_small + i];
  __syncthreads();
  if (g >= h.G) return;
  const double t1 = h.d_t1[g], t2 = h.d_t2[g], mu = h.d_mu[g];
  for (int q = warp; q < nb; q += METRIC_THREADS / 32) {
    const int32_t *smq = sm + q * h.n_small;
    double s = 0, ss = 0;
    for (int32_t t = 0; t < h.n_small; t++) {
      double x = xs[smq[t] * METRIC_GENES + lane];
      s = G_ADD(s, x);
      ss = G_ADD(ss, G_MUL(x, x));
    }
    metric_out(h, g, b0 + q, s, ss, t1, t2, mu, ord0);
  }
}

/* One thread per run of equal sort keys in the sorted order: the run's
 * genes are in index order (stable sort); the CPU's ranking orders them
 * by exact key, then gene index.  A run of two (nearly all of them) swaps
 * its genes when the first's exact key is the larger, its two genes and
 * then their two metrics loaded side by side; a longer one is put in
 * order by insertion. */
static __global__ void k_fix_ties(const sbg_gsea_gpu h, const uint32_t *fk, int32_t *ord, int64_t n) {
  int32_t r = blockIdx.x * blockDim.x + threadIdx.x;
  int64_t b = blockIdx.y;
  if (r + 1 >= h.G || b >= n) return;
  size_t at = (size_t)b * h.G;
  fk += at;
  ord += at;
  if (fk[r + 1] != fk[r] || (r > 0 && fk[r - 1] == fk[r])) return; /* not a run's start */
  const double *m = h.d_metric + at;
  if (r + 2 == h.G || fk[r + 2] != fk[r]) {
    const int32_t g0 = ord[r], g1 = ord[r + 1];
    if (gsea_sort_key(m[g0]) > gsea_sort_key(m[g1])) {
      ord[r] = g1;
      ord[r + 1] = g0;
    }
    return;
  }
  int32_t end = r + 3;
  while (end < h.G && fk[end] == fk[r]) end++;
  for (int32_t i = r + 1; i < end; i++) {
    int32_t g = ord[i], j = i;
    uint64_t kg = gsea_sort_key(m[g]);
    while (j > r && (gsea_sort_key(m[ord[j - 1]]) > kg || (gsea_sort_key(m[ord[j - 1]]) == kg && ord[j - 1] > g))) {
      ord[j] = ord[j - 1];
      j--;
    }
    ord[j] = g;
  }
}

/* Each permutation's genes ordered by their float keys, a block a
 * permutation, in shared memory: a stable radix sort of the keys with the
 * genes' indices, up to RANK_GENES genes.  The device-wide segmented sort
 * (for more genes) reads and writes every key and index in each of its
 * passes: 34.6 ms a batch of 32,768 C2 permutations on an H200, this
 * kernel 16.2 ms with 32-bit keys and 4 bits a pass (768 x 27: 16.5,
 * 1024 x 21: 18.2); SORT_KEY_BITS gives the bits and passes now. */
#ifndef RANK_THREADS
#define RANK_THREADS 512
#endif
#ifndef RANK_ITEMS
#define RANK_ITEMS 41
#endif
#ifndef RANK_RADIX_BITS
#define RANK_RADIX_BITS 6
#endif
#define RANK_GENES (RANK_THREADS * RANK_ITEMS)
typedef cub::BlockRadixSort<uint32_t, RANK_THREADS, RANK_ITEMS, int32_t, RANK_RADIX_BITS> rank_sort;

static __global__ void __launch_bounds__(RANK_THREADS) k_rank_sort(const uint32_t *key, uint32_t *sorted,
                                                                   int32_t *ord, int32_t G) {
  extern __shared__ __align__(16) unsigned char rank_smem[];
  typename rank_sort::TempStorage &tmp = *reinterpret_cast<typename rank_sort::TempStorage *>(rank_smem);
  const size_t base = (size_t)blockIdx.x * G;
  uint32_t k[RANK_ITEMS];
  int32_t v[RANK_ITEMS];
  /* blocked: gene threadIdx.x * RANK_ITEMS + j, so the stable order is the
   * genes'; the padding (all ones) after them stays after any real key */
#pragma unroll
  for (int j = 0; j < RANK_ITEMS; j++) {
    const int32_t g = threadIdx.x * RANK_ITEMS + j;
    k[j] = g < G ? key[base + g] : ~0u;
    v[j] = g;
  }
  rank_sort(tmp).SortBlockedToStriped(k, v, 0, SORT_KEY_BITS);
#pragma unroll
  for (int j = 0; j < RANK_ITEMS; j++) {
    const int32_t r = j * RANK_THREADS + threadIdx.x;
    if (r < G) {
      sorted[base + r] = k[j];
      ord[base + r] = v[j];
    }
  }
}

/* k_records' block: a pair of permutations (records 2i and 2i + 1 of a
 * gene share a memory sector) over a chunk of at most RECORD_CHUNK genes,
 * whose ranks it gathers in shared memory. */
#define RECORD_CHUNK 12288
#define RECORD_THREADS 512

/* The genes of chunk blockIdx.x per block: as even as the chunks allow. */
static int32_t record_chunk(int32_t G) {
  int32_t chunks = (G + RECORD_CHUNK - 1) / RECORD_CHUNK;
  return (G + chunks - 1) / chunks;
}

/* Each gene's record (weight and rank) in both permutations of a pair,
 * from the metrics and the sorted order.  The ranks are scattered into
 * shared memory (every rank read, those of the chunk's genes kept), and
 * the records written whole, a memory sector a gene: scattering the ranks
 * straight into the records (and the weights in k_metric) wrote 4 or 8
 * bytes of a 32-byte sector at a time, 19.7 ms a batch of 32,768 C2
 * permutations on an H200 for the ranks alone. */
static __global__ void __launch_bounds__(RECORD_THREADS) k_records(const sbg_gsea_gpu h, const int32_t *ord,
                                                                   int32_t chunk, int64_t n) {
  extern __shared__ int32_t chunk_rank[]; /* 2 x chunk */
  const int32_t g0 = blockIdx.x * chunk, g1 = min(g0 + chunk, h.G);
  const int64_t b0 = 2 * (int64_t)blockIdx.y;
  const int nq = n - b0 < 2 ? 1 : 2;
  for (int q = 0; q < nq; q++) {
    const int32_t *o = ord + (size_t)(b0 + q) * h.G;
    for (int32_t r = threadIdx.x; r < h.G; r += RECORD_THREADS) {
      const int32_t g = o[r];
      if (g >= g0 && g < g1) chunk_rank[q * chunk + g - g0] = r;
    }
  }
  __syncthreads();
  for (int32_t g = g0 + threadIdx.x; g < g1; g += RECORD_THREADS) {
    for (int q = 0; q < nq; q++) {
      gene_rec r;
      r.w = gsea_weight(h.d_metric[(size_t)(b0 + q) * h.G + g], h.weight);
      r.rank = chunk_rank[q * chunk + g - g0];
      r.pad = 0;
      h.d_rec[rec_at(b0 + q, g, h.G)] = r;
    }
  }
}

static __global__ void k_seg(int32_t *seg, int32_t G, int64_t B) {
  int64_t b = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (b <= B) seg[b] = (int32_t)(b * G);
}

/* ---------------------------------------------------------------------- */
/* kernel: the ES of one tile of sets in one permutation */

/* Bits to tell apart the slots of a tile of `sets` sets, with the all-ones
 * key left to the padding (host and device agree on it). */
__host__ __device__ static inline int slot_bits(int32_t sets) {
  int b = 1;
  while ((1 << b) <= sets) b++;
  return b;
}

template <int THREADS, int IPT, int PERMS, typename KeyT>
struct tile_sort {
  typedef cub::BlockRadixSort<KeyT, THREADS, IPT, cub::NullType, TILE_RADIX_BITS> sort;
  /* ranks of up to 65,536 genes (32-bit keys) fit 16 bits */
  typedef typename std::conditional<sizeof(KeyT) == 4, uint16_t, uint32_t>::type rank_t;
  enum { HITS = THREADS * IPT, MEMBERS = HITS / PERMS };
  /* Blocks an SM keeps (the kernel's register budget): as many as fit
   * without spilling the keys to local memory.  The 256-thread tiles
   * spilled 132-148 bytes a thread at 4 blocks (64 registers); at 3 (32-bit
   * keys, 80 registers) or 2 (64-bit keys, 111) nothing spills: on an H200
   * pass 1 of C2 x 2^18 went from 3.81-3.84 to 3.60-3.63 s, and 70,000
   * genes were no slower. */
  enum { MIN_BLOCKS = THREADS > 256 ? 1 : (sizeof(KeyT) == 4 ? 3 : 2) };
  /* the sort's storage, later the hit list (rank, position); the weights */
  static size_t smem() {
    size_t a = sizeof(typename sort::TempStorage), b = (size_t)HITS * (sizeof(rank_t) + sizeof(uint16_t));
    a = a > b ? a : b;
    return (a + 15) / 16 * 16 + (size_t)HITS * sizeof(double);
  }
};

/* The largest of the warp's non-negative doubles (whose bits order as the
 * values), in every lane. */
static __device__ __forceinline__ double warp_max_nonneg(double v) {
  unsigned long long b = (unsigned long long)__double_as_longlong(v);
  unsigned hi = __reduce_max_sync(0xffffffffu, (unsigned)(b >> 32));
  unsigned lo = __reduce_max_sync(0xffffffffu, (unsigned)(b >> 32) == hi ? (unsigned)b : 0u);
  return __longlong_as_double((long long)(((unsigned long long)hi << 32) | lo));
}

/* The runs' totals x (lane j: run j) added in order from 0, in every lane
 * (gsea_runs_add's off after the last run, plus that run); *before: the
 * sum of the runs before this lane's, in the same order. */
static __device__ __forceinline__ double warp_runs_total(double x, double *before) {
  const int lane = threadIdx.x & 31;
  double acc = 0;
#pragma unroll 8
  for (int j = 0; j < 32; j++) {
    double y = __shfl_sync(0xffffffffu, x, j);
    if (j == lane) *before = acc;
    acc = G_ADD(acc, y);
  }
  return acc;
}

/* Built with SBG_GSEA_PHASES defined, k_es_tile adds up the cycles each
 * block spends in each phase (gather, sort, the sets scored a thread each,
 * those scored a warp each; thread 0's clock after a barrier that each
 * mark adds), by the tile's largest set (at most 64, 256, 512 members,
 * more), and sbg_gsea_gpu_close() prints the means per block.  With a few
 * blocks an SM, the blocks' latencies set the kernel's time, which Nsight
 * Compute's warp samples do not show. */
#ifdef SBG_GSEA_PHASES
enum { PHASES = 4, PHASE_CLASSES = 4 };
__device__ unsigned long long phase_cycles[PHASE_CLASSES][PHASES + 1]; /* and the blocks */
#define PHASE_START(largest)                                                                  \
  long long phase_t = clock64();                                                              \
  const int phase_class = (largest) <= 64 ? 0 : (largest) <= 256 ? 1 : (largest) <= 512 ? 2 : 3
#define PHASE_END(k)                                                                          \
  do {                                                                                        \
    __syncthreads();                                                                          \
    if (threadIdx.x == 0) {                                                                   \
      long long now = clock64();                                                              \
      atomicAdd(&phase_cycles[phase_class][k], (unsigned long long)(now - phase_t));          \
      phase_t = now;                                                                          \
      if ((k) == PHASES - 1) atomicAdd(&phase_cycles[phase_class][PHASES], 1ull);             \
    }                                                                                         \
  } while (0)
#else
#define PHASE_START(largest)
#define PHASE_END(k)
#endif

/* Block (tile, PERMS permutations).  Each member gathers its gene's
 * records (rank and weight) in the block's permutations; one block-wide
 * radix sort of (permutation, set within tile, rank) puts every set's hits
 * in rank order in shared memory; then each set's ES in each permutation,
 * with the CPU's arithmetic: its total weight in runs over its members,
 * then the rule over its hits in rank order with the running sum in runs
 * (gsea_math.h).  A set of at most ES_SPLIT members takes one thread,
 * which adds a hit at a time (gsea_es_hit_runs).  A larger one takes a
 * warp, a lane a run of hits: the runs' totals, then the largest |value|
 * m, and the first value that comes within the tie factor of m.  When that
 * one is m itself, nothing before it comes within the factor of m, so the
 * sequential rule takes it and keeps it: it is the ES.  Otherwise (near
 * ties, rare) the first lane runs the rule over all the set's hits. */
template <int THREADS, int IPT, int PERMS, typename KeyT>
static __global__ void __launch_bounds__(THREADS, (tile_sort<THREADS, IPT, PERMS, KeyT>::MIN_BLOCKS))
k_es_tile(const sbg_gsea_gpu h, int64_t n) {
  typedef tile_sort<THREADS, IPT, PERMS, KeyT> ts;
  typedef typename ts::sort sort_t;
  const bool key32 = sizeof(KeyT) == 4;
  extern __shared__ __align__(16) unsigned char smem[];
  typename sort_t::TempStorage &tmp = *reinterpret_cast<typename sort_t::TempStorage *>(smem);
  typedef typename ts::rank_t rank_t;
  rank_t *hit_rank = reinterpret_cast<rank_t *>(smem);
  uint16_t *hit_at = reinterpret_cast<uint16_t *>(hit_rank + ts::HITS);
  size_t off = sizeof(typename sort_t::TempStorage);
  size_t lists = (size_t)ts::HITS * (sizeof(rank_t) + sizeof(uint16_t));
  off = ((off > lists ? off : lists) + 15) / 16 * 16;
  double *wt = reinterpret_cast<double *>(smem + off);
  int32_t t = blockIdx.x;
  int64_t b0 = (int64_t)blockIdx.y * PERMS;
  if (b0 >= n) return;
  const int nq = n - b0 < PERMS ? (int)(n - b0) : PERMS; /* the block's permutations */
  int32_t u0 = h.d_tile_first[t], u1 = h.d_tile_first[t + 1];
  int32_t m0 = h.d_tmem[u0], cnt = h.d_tmem[u1] - m0;
  PHASE_START(h.d_tmem[u1] - h.d_tmem[u1 - 1]);
  const int set_bits = h.rbits + slot_bits(u1 - u0), sorted_bits = set_bits + 1;
  {
    KeyT keys[IPT];
#pragma unroll
    for (int j = 0; j < IPT / PERMS; j++) {
      int32_t p = j * THREADS + threadIdx.x; /* striped: coalesced reads */
      int32_t g = p < cnt ? h.d_tgene[m0 - h.Ml + p] : 0;
      uint32_t tk = p < cnt ? h.d_tkey[m0 - h.Ml + p] : 0u;
#pragma unroll
      for (int q = 0; q < PERMS; q++) {
        if (p < cnt && q < nq) {
          gene_rec r = h.d_rec[rec_at(b0 + q, g, h.G)];
          wt[q * cnt + p] = r.w;
          KeyT k = (KeyT)(tk | ((uint32_t)q << set_bits) | (uint32_t)r.rank);
          if (!key32) k |= (KeyT)(q * cnt + p) << 16 << 16; /* (two shifts: no warning when KeyT is 32 bits) */
          keys[j * PERMS + q] = k;
        } else {
          keys[j * PERMS + q] = ~(KeyT)0; /* no real key is all ones */
        }
      }
    }
    PHASE_END(0);
    sort_t(tmp).SortBlockedToStriped(keys, 0, sorted_bits);
    __syncthreads(); /* the sort's storage becomes the hit list */
    const uint32_t rmask = (1u << h.rbits) - 1u;
    const int at_shift = key32 ? sorted_bits : 32;
#pragma unroll
    for (int j = 0; j < IPT; j++) {
      int32_t p = j * THREADS + threadIdx.x;
      if (p < nq * cnt) {
        hit_rank[p] = (rank_t)((uint32_t)keys[j] & rmask);
        hit_at[p] = (uint16_t)(keys[j] >> at_shift);
      }
    }
  }
  __syncthreads();
  PHASE_END(1);
  /* the sets of at most ES_SPLIT members lead the tile (sizes ascend): a
   * thread a set and permutation, a set's two permutations on neighbouring
   * threads (the same length), the CPU's own steps */
  const int32_t nsets = u1 - u0, sb0 = h.d_tile_small[t];
  for (int32_t v = threadIdx.x; v < nq * sb0; v += THREADS) {
    int32_t u = u0 + v / nq, q = v % nq;
    int32_t lo = h.d_tmem[u] - m0, k = h.d_tmem[u + 1] - m0 - lo;
    int32_t start = q * cnt + lo;     /* the set's first member slot and first hit */
    int32_t base = key32 ? start : 0; /* member index or hit index */
    gsea_runs runs;
    gsea_runs_init(&runs, k);
    double nr = 0;
    /* (up to GSEA_RUNS hits the runs' sums are the plain ones, fewer steps) */
    if (k <= GSEA_RUNS)
      for (int32_t i = 0; i < k; i++) nr = G_ADD(nr, wt[start + i]);
    else
      for (int32_t i = 0; i < k; i++) nr = gsea_runs_add(&runs, wt[start + i]);
    int unit = nr == 0;
    /* the CPU's reciprocals, exactly: 1.0 / x rounded once */
    double inv_nr = G_DIV(1.0, unit ? (double)k : nr);
    double inv_nmiss = G_DIV(1.0, G_SUB((double)h.G, (double)k));
    gsea_es_state st;
    gsea_es_init(&st);
    gsea_runs_init(&runs, k);
    if (k <= GSEA_RUNS)
      for (int32_t i = start; i < start + k; i++)
        gsea_es_hit(&st, (int32_t)hit_rank[i], unit ? 1.0 : wt[base + hit_at[i]], inv_nr, inv_nmiss);
    else
      for (int32_t i = start; i < start + k; i++)
        gsea_es_hit_runs(&st, &runs, (int32_t)hit_rank[i], unit ? 1.0 : wt[base + hit_at[i]], inv_nr, inv_nmiss);
    h.d_es[(size_t)(b0 + q) * h.S + h.d_tset[u]] = st.best;
  }
  PHASE_END(2);
  /* the larger sets: a warp a set and permutation, a lane a run.  The
   * passes recompute the sums rather than store them: they only read
   * shared memory, so their loads run ahead. */
  const int lane = threadIdx.x & 31;
  const unsigned none = 0xffffffffu;
  for (int32_t v = threadIdx.x >> 5; v < nq * (nsets - sb0); v += THREADS / 32) {
    int32_t u = u0 + sb0 + v / nq, q = v % nq;
    int32_t lo = h.d_tmem[u] - m0, k = h.d_tmem[u + 1] - m0 - lo;
    int32_t start = q * cnt + lo;
    int32_t base = key32 ? start : 0;
    int32_t len = gsea_run_len(k), k0 = min(lane * len, k), k1 = min(k0 + len, k);
    double part = 0, before = 0;
    for (int32_t i = k0; i < k1; i++) part = G_ADD(part, wt[start + i]);
    double nr = warp_runs_total(part, &before);
    int unit = nr == 0;
    double inv_nr = G_DIV(1.0, unit ? (double)k : nr);
    double inv_nmiss = G_DIV(1.0, G_SUB((double)h.G, (double)k));
    auto w_at = [&](int32_t i) { return unit ? 1.0 : wt[base + hit_at[start + i]]; };
    /* the running sum at a hit: the runs before the lane's (before) plus
     * the lane's own so far; just before its first hit, `before` */
    part = 0;
    for (int32_t i = k0; i < k1; i++) part = G_ADD(part, w_at(i));
    warp_runs_total(part, &before);
    const double cur0 = G_MUL(before, inv_nr);
    double cur = cur0, loc = 0, mx = 0;
    for (int32_t i = k0; i < k1; i++) {
      loc = G_ADD(loc, w_at(i));
      double miss = G_MUL((double)((int32_t)hit_rank[start + i] - i), inv_nmiss);
      double bottom = G_SUB(cur, miss);
      cur = G_MUL(G_ADD(before, loc), inv_nr);
      mx = fmax(mx, fmax(fabs(bottom), fabs(G_SUB(cur, miss))));
    }
    const double m = warp_max_nonneg(mx);
    /* The first value within the tie factor of m lies in the first lane
     * whose largest is (ballot); that lane finds it (ff) and the first
     * value equal to m (fa), as 2 x hit + (0: just before it, 1: at it).
     * When the first value equal to m lies in a later lane, ff != fa. */
    const int lf = __ffs(__ballot_sync(0xffffffffu, G_MUL(mx, GSEA_TIE) >= m)) - 1;
    unsigned ff = none, fa = none;
    double vf = 0;
    if (lane == lf) {
      cur = cur0;
      loc = 0;
      for (int32_t i = k0; i < k1 && fa == none; i++) {
        loc = G_ADD(loc, w_at(i));
        double miss = G_MUL((double)((int32_t)hit_rank[start + i] - i), inv_nmiss);
        double vb = G_SUB(cur, miss);
        cur = G_MUL(G_ADD(before, loc), inv_nr);
        double vt = G_SUB(cur, miss);
        if (ff == none && G_MUL(fabs(vb), GSEA_TIE) >= m) {
          ff = 2u * (unsigned)i;
          vf = vb;
        } else if (ff == none && G_MUL(fabs(vt), GSEA_TIE) >= m) {
          ff = 2u * (unsigned)i + 1u;
          vf = vt;
        }
        if (fabs(vb) == m) fa = 2u * (unsigned)i;
        else if (fabs(vt) == m) fa = 2u * (unsigned)i + 1u;
      }
    }
    ff = __shfl_sync(0xffffffffu, ff, lf);
    fa = __shfl_sync(0xffffffffu, fa, lf);
    double best = __shfl_sync(0xffffffffu, vf, lf);
    if (lane != 0) continue;
    if (ff != fa) { /* the rule over all hits */
      atomicAdd(h.d_sequential, 1ull);
      gsea_es_state st;
      gsea_es_init(&st);
      gsea_runs runs;
      gsea_runs_init(&runs, k);
      for (int32_t i = 0; i < k; i++) gsea_es_hit_runs(&st, &runs, (int32_t)hit_rank[start + i], w_at(i), inv_nr, inv_nmiss);
      best = st.best;
    }
    h.d_es[(size_t)(b0 + q) * h.S + h.d_tset[u]] = best;
  }
  PHASE_END(3);
}

/* ---------------------------------------------------------------------- */
/* kernel: a permutation's small sets, and what its walk needs */

/* k_es_perm's block: a permutation, its genes' ranks (2 bytes a gene) and
 * its weights by rank (8 bytes) in shared memory, so that no set's hit
 * gathers from global memory.  Where that does not fit, the tiles take
 * the small sets and no set walks. */
#define PERM_THREADS 512
#define PERM_LOADS 8
__host__ __device__ static inline size_t perm_smem(int32_t G) {
  return (size_t)G * (sizeof(double) + sizeof(uint16_t));
}

/* Compare-exchange of the two 16-bit halves of a and b at once (one
 * instruction each way on sm_90). */
static __device__ __forceinline__ void lane_cswap(uint32_t &a, uint32_t &b) {
  const uint32_t x = __vminu2(a, b), y = __vmaxu2(a, b);
  a = x;
  b = y;
}

/* Batcher's odd-even merge of a[LO..LO + N) whose halves are sorted, the
 * elements R apart (R = 1: all of them). */
template <int LO, int N, int R, int K>
static __device__ __forceinline__ void lane_merge(uint32_t (&a)[K]) {
  if constexpr (2 * R < N) {
    lane_merge<LO, N, 2 * R>(a);
    lane_merge<LO + R, N, 2 * R>(a);
#pragma unroll
    for (int i = LO + R; i + R < LO + N; i += 2 * R) lane_cswap(a[i], a[i + R]);
  } else {
    lane_cswap(a[LO], a[LO + R]);
  }
}

/* Batcher's odd-even merge sort of a[LO..LO + N), N a power of two, each
 * half-word apart: a fixed network, so the keys stay in registers. */
template <int LO, int N, int K>
static __device__ __forceinline__ void lane_sort(uint32_t (&a)[K]) {
  if constexpr (N > 1) {
    lane_sort<LO, N / 2>(a);
    lane_sort<LO + N / 2, N / 2>(a);
    lane_merge<LO, N, 1>(a);
  }
}

/* Member j of a lane's 8 in q. */
static __device__ __forceinline__ uint32_t lane_member(const uint4 &q, int j) {
  const uint32_t w = j < 2 ? q.x : j < 4 ? q.y : j < 6 ? q.z : q.w;
  return j & 1 ? w >> 16 : w & 0xffffu;
}

/* One set of at most N members in permutation b, on one lane: its ES into
 * d_es.  Its members' ranks, 16-bit keys, fill the low halves of N / 2
 * registers (members 0 .. N / 2 - 1) and, complemented, the high halves
 * (the others); the total weight is added in the members' order, in the
 * CPU's runs.  One network sorts both halves at once, the high one thus
 * descending: a bitonic sequence, whose merge compares a register's two
 * halves, then registers' halves alike, so that rank position p < N / 2
 * ends in the low half of register p and N / 2 + p in its high half
 * (128 keys in 64 registers: a thread of PERM_THREADS has 128).  Then the
 * CPU's sequential rule over the hits in rank order, each hit's weight
 * from shared memory. */
template <int N>
static __device__ __forceinline__ void lane_es(const sbg_gsea_gpu &h, int64_t b, int32_t u, const uint4 *mg,
                                               const double *swr, const uint16_t *srank) {
  enum { H = N / 2 };
  const int32_t k = h.d_tmem[u + 1] - h.d_tmem[u];
  uint32_t key[H];
  gsea_runs runs;
  gsea_runs_init(&runs, k);
  double nr = 0;
  /* a lane's members 8 at a time (32 lanes' in 512 bytes), the next 8
   * loaded before these are added; their ranks into the thread's local
   * memory (a loop not unrolled, as the hits' below), 0xffff after the
   * last (after every rank: fewer than 2^16 - 1 genes) */
  uint4 ranks[N / 8]; /* member 8m + j's rank: half-word j of ranks[m] */
  uint4 next = mg[0];
#pragma unroll 1
  for (int m = 0; m < N / 8; m++) {
    const uint4 q = next;
    if (8 * m + 8 < k) next = mg[32 * (m + 1)];
    uint32_t w[4];
#pragma unroll
    for (int j = 0; j < 8; j++) {
      uint32_t r = 0xffffu;
      if (8 * m + j < k) {
        r = srank[lane_member(q, j)];
        nr = gsea_runs_add(&runs, swr[r]);
      }
      if (j & 1) w[j / 2] |= r << 16;
      else w[j / 2] = r;
    }
    ranks[m] = make_uint4(w[0], w[1], w[2], w[3]);
  }
  /* key p: member p's rank, member H + p's complemented above it */
#pragma unroll
  for (int m = 0; m < H / 8; m++) {
    const uint4 lo = ranks[m], hi = ranks[m + H / 8];
    const uint32_t l[4] = {lo.x, lo.y, lo.z, lo.w}, u[4] = {~hi.x, ~hi.y, ~hi.z, ~hi.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
      key[8 * m + 2 * i] = __byte_perm(l[i], u[i], 0x5410);
      key[8 * m + 2 * i + 1] = __byte_perm(l[i], u[i], 0x7632);
    }
  }
  lane_sort<0, H>(key);
#pragma unroll
  for (int p = 0; p < H; p++) {
    const uint32_t x = key[p] ^ 0xffff0000u, s = __byte_perm(x, 0, 0x1032);
    key[p] = __byte_perm(__vminu2(x, s), __vmaxu2(x, s), 0x7610);
  }
#pragma unroll
  for (int d = H / 2; d >= 1; d /= 2)
#pragma unroll
    for (int p = 0; p < H; p++)
      if (!(p & d)) lane_cswap(key[p], key[p + d]);
  const int unit = nr == 0;
  const double inv_nr = G_DIV(1.0, unit ? (double)k : nr);
  const double inv_nmiss = G_DIV(1.0, G_SUB((double)h.G, (double)k));
  gsea_es_state st;
  gsea_es_init(&st);
  gsea_runs_init(&runs, k);
  /* The hits in a loop that is not unrolled, the sorted keys read from
   * the thread's local memory (L1) four registers at a time: unrolled
   * over the registers, the four networks' code kept the warps waiting
   * for instructions (56.6 ms a batch of 32,768 C2 permutations on an
   * H200, against 47.3 ms).  Without the bound's test in the full groups
   * of four and with the unit weights added (w + 1 or w + 0), 2.6% fewer
   * instructions took the same 40.8 ms: the lanes wait on their chains. */
  uint4 sorted[H / 4];
#pragma unroll
  for (int m = 0; m < H / 4; m++) sorted[m] = make_uint4(key[4 * m], key[4 * m + 1], key[4 * m + 2], key[4 * m + 3]);
  for (int half = 0; half < 2; half++) { /* rank positions half x H + 4m + j: register 4m + j's halves */
#pragma unroll 1
    for (int m = 0; m < H / 4 && half * H + 4 * m < k; m++) {
      const uint4 q = sorted[m];
#pragma unroll
      for (int j = 0; j < 4; j++) {
        if (half * H + 4 * m + j < k) {
          const uint32_t x = j == 0 ? q.x : j == 1 ? q.y : j == 2 ? q.z : q.w;
          const int32_t r = (int32_t)((x >> (16 * half)) & 0xffffu);
          gsea_es_hit_runs_tie(&st, &runs, r, unit ? 1.0 : swr[r], inv_nr, inv_nmiss, h.tie);
        }
      }
    }
  }
  h.d_es[(size_t)b * h.S + h.d_tset[u]] = st.best;
}

/* Block: permutation blockIdx.x.  Its ranks by gene and weights by rank
 * into shared memory (with walked sets, the weights by rank also out to
 * d_wsorted); then the warps take groups of 32 sets from a queue, largest
 * first: a walked set's total weight on a lane (its members in order, the
 * CPU's runs, as k_es_walk needs it), a lane's set's ES (lane_es).  A
 * batch of 32,768 C2 permutations (3,864 sets of up to 128 members, 861
 * walked) on an H200: 42.2 ms (47.3 with the members' loop unrolled over
 * the keys' registers), where k_es_tile took 106.9 ms for the sets
 * of up to 192 members, k_walk_prep 20.2 ms for the walk's preparation
 * and k_records 8.2 ms for the tiles' records; a lane a set and 32
 * permutations a warp, gathering from global memory, took 67.4 ms for the
 * sets of up to 128 (the card's L2 throughput at 89-97% for the sets of
 * up to 64). */
static __global__ void __launch_bounds__(PERM_THREADS, 1) k_es_perm(const sbg_gsea_gpu h, const int32_t *ord) {
  extern __shared__ __align__(16) double swr[];
  __shared__ int32_t next_group;
  const int32_t G = h.G;
  uint16_t *srank = reinterpret_cast<uint16_t *>(swr + G);
  const int64_t b = blockIdx.x;
  const int32_t *o = ord + (size_t)b * G;
  /* PERM_LOADS loads a thread in flight: with one block an SM, nothing
   * else covers their latency */
  for (int32_t r0 = threadIdx.x; r0 < G; r0 += PERM_THREADS * PERM_LOADS) {
    int32_t g[PERM_LOADS];
#pragma unroll
    for (int j = 0; j < PERM_LOADS; j++) g[j] = r0 + j * PERM_THREADS < G ? o[r0 + j * PERM_THREADS] : -1;
#pragma unroll
    for (int j = 0; j < PERM_LOADS; j++)
      if (g[j] >= 0) srank[g[j]] = (uint16_t)(r0 + j * PERM_THREADS);
  }
  if (threadIdx.x == 0) next_group = 0;
  __syncthreads();
  const double *m = h.d_metric + (size_t)b * G;
  for (int32_t g0 = threadIdx.x; g0 < G; g0 += PERM_THREADS * PERM_LOADS) {
    double x[PERM_LOADS];
#pragma unroll
    for (int j = 0; j < PERM_LOADS; j++) x[j] = g0 + j * PERM_THREADS < G ? m[g0 + j * PERM_THREADS] : 0.0;
#pragma unroll
    for (int j = 0; j < PERM_LOADS; j++)
      if (g0 + j * PERM_THREADS < G) swr[srank[g0 + j * PERM_THREADS]] = gsea_weight(x[j], h.weight);
  }
  __syncthreads();
  const int lane = threadIdx.x & 31;
  if (h.Wn > 0) {
    double *ws = h.d_wsorted + (size_t)b * G;
    for (int32_t r = threadIdx.x; r < G; r += PERM_THREADS) ws[r] = swr[r];
  }
  const int32_t groups = h.walk_groups + h.lane_groups;
  for (;;) {
    int32_t j = 0;
    if (lane == 0) j = atomicAdd(&next_group, 1);
    j = __shfl_sync(0xffffffffu, j, 0);
    if (j >= groups) break;
    /* the walked sets' groups, then the lanes', each from the largest */
    const int32_t grp = groups - 1 - j;
    const int32_t kmax = h.d_grp_kmax[grp];
    const uint4 *mg = reinterpret_cast<const uint4 *>(h.d_lgene + h.d_grp_off[grp]) + lane;
    if (grp >= h.lane_groups) {
      /* a walked set's total weight, its members in order, the CPU's runs */
      const int32_t slot = (grp - h.lane_groups) * 32 + lane;
      if (slot >= h.Wn) continue;
      const int32_t u = h.S - h.Wn + slot, k = h.d_tmem[u + 1] - h.d_tmem[u];
      gsea_runs runs;
      gsea_runs_init(&runs, k);
      double nr = 0;
      uint4 next = mg[0];
      for (int32_t c = 0; c < k; c += 8) {
        const uint4 q = next;
        if (c + 8 < k) next = mg[4 * (c + 8)];
#pragma unroll
        for (int i = 0; i < 8; i++)
          if (c + i < k) nr = gsea_runs_add(&runs, swr[srank[lane_member(q, i)]]);
      }
      h.d_wnr[(size_t)b * h.Wn + slot] = nr;
      continue;
    }
    const int32_t u = grp * 32 + lane;
    if (u >= h.L) continue;
    if (kmax <= 16) lane_es<16>(h, b, u, mg, swr, srank);
    else if (kmax <= 32) lane_es<32>(h, b, u, mg, swr, srank);
    else if (kmax <= 64) lane_es<64>(h, b, u, mg, swr, srank);
    else lane_es<128>(h, b, u, mg, swr, srank);
  }
}

/* ---------------------------------------------------------------------- */
/* kernels: the largest sets' ES by a walk of the ranking */

/* k_es_walk's block: WARPS warps, a permutation each, which take the
 * ranks in windows of WIN x 32.  On an H200 (C2's 401 sets of more
 * than 256 members, a batch of 32,768 permutations) 16 warps of windows
 * of 128 ranks took 56.5 ms; 32 warps 56.9 (128 ranks), 65.8 (64), 58.3
 * (256) and 59.0 ms (512), 16 warps of 256 ranks 57.1 ms; windows of 32
 * ranks, a warp's steps the most hits any lane had in them, 62.6 ms; 16
 * warps of two permutations (32 ranks) 66.1 ms, the hits' weights passed
 * by shuffles rather than shared memory 68.1 and 70.2 ms, 8 warps of four
 * permutations 111.1 ms.  Walking the sets of more than 128 members, 16
 * warps of windows of 128, 256 and 512 ranks took 94.8, 95.9 and 141.1
 * ms; keeping two windows' hits, so that a lane with few in the older
 * window goes on into the newer, 93.9 ms against 94.9 (36% fewer steps,
 * 8% more instructions); the next window's genes and weights loaded
 * before the current one's hits, 96.6 ms against 94.6.  Scoring each of
 * those sets on a warp of k_es_perm instead (a bitmap of its ranks
 * counted into rank order, a lane a run), k_es_perm took 253.1 ms.  The
 * transpose's stages at three instructions (a rotation, a shuffle, a
 * select; seven before), the hits taken from the leading bit and the
 * runs' starts predicated (gsea_runs_add): 73.5 ms against 94.8 (61.0e9
 * instructions against 77.0e9); then windows of 256 ranks, 14 warps (so
 * that two blocks fit an SM's shared memory), 71.7 ms against 73.9 (12
 * warps: 75.8), the steps fewer by more than their shifts cost.  Those
 * windows take 256 ranks and 14 warps (WALK_WIDE) where two blocks fit an
 * SM's shared memory (up to 21,248 genes on an H100 or H200), else 128
 * ranks and 16 warps (WALK_NARROW): one block an SM would leave too few
 * warps to keep its schedulers busy. */
#define WALK_WIDE 14, 8
#define WALK_NARROW 16, 4
/* Sets of more than WALK_MIN members walk by default, the smaller ones
 * taking k_es_perm's lanes.  Kernel durations of a batch of 32,768 C2
 * permutations on an H200: 42.2 ms (k_es_perm) + 94.8 ms (k_es_walk);
 * walking from 192 members instead, the sets of 129-192 in tiles, 79.1 +
 * 70.5 + 27.7 (k_es_tile) + 8.2 ms (k_records), in a build whose
 * k_es_perm took 86.3 ms from 128. */
#define WALK_MIN 128
/* Sets walk where a group's membership bits (4 bytes a gene) fit
 * WALK_SMEM bytes of shared memory and k_es_perm runs (23,244 genes on an
 * H100 or H200), which prepares the walk. */
#define WALK_SMEM (110 * 1024)

/* k_es_walk's shared memory: the group's bits (walk_bits bytes), then each
 * warp's window of weights, then a window of ones (WARPS warps, windows of
 * WIN x 32 ranks). */
__host__ __device__ static inline size_t walk_bits(int32_t G) {
  return ((size_t)G * sizeof(uint32_t) + 15) / 16 * 16;
}
template <int WARPS, int WIN>
static size_t walk_smem(int32_t G) {
  return walk_bits(G) + (size_t)(WARPS + 1) * 32 * WIN * sizeof(double);
}

/* c's bits select a's bits where set, b's elsewhere: one instruction, which
 * the compiler does not split when c is a select of two constants. */
static __device__ __forceinline__ uint32_t bit_select(uint32_t c, uint32_t a, uint32_t b) {
  uint32_t r;
  asm("lop3.b32 %0, %1, %2, %3, 0xe4;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
  return r;
}

/* x, which the compiler may not recompute from what it was made of: a
 * value kept in a register across a loop rather than rebuilt each time. */
static __device__ __forceinline__ uint32_t opaque(uint32_t x) {
  asm volatile("" : "+r"(x));
  return x;
}

/* Block (group of 32 walked sets, WARPS permutations): the group's
 * membership bits of every gene in shared memory; a warp a permutation
 * walks its ranking a window of WIN x 32 ranks at a time: for each 32
 * ranks of the window lane l reads the bits of the gene at rank c + l and
 * that rank's weight, and a transpose of the warp's 32 x 32 bits gives
 * lane j the hits of set j among those ranks; then each lane runs the
 * CPU's sequential rule over its set's hits of the window in rank order
 * (no sort: the ranking orders the hits).  A warp takes as many steps as
 * the most hits a lane has in the window, fewer than the sum over its 32
 * ranks of the most hits a lane has there.  C2's sets of more than 256
 * members took 126.5 ms of k_es_tile's 257.0 ms a batch of 32,768
 * permutations on an H200; walked, 73.9 ms (k_es_walk 56.5, its
 * preparation 17.4). */
template <int WARPS, int WIN>
static __global__ void __launch_bounds__(WARPS * 32) k_es_walk(const sbg_gsea_gpu h, const int32_t *ord,
                                                                     int64_t n) {
  enum { NQ = WIN / 2 }; /* a window's hits of a lane's set: NQ 64-bit words */
  extern __shared__ __align__(16) unsigned char walk_bytes[];
  const int32_t grp = blockIdx.x, G = h.G;
  uint32_t *wmask = reinterpret_cast<uint32_t *>(walk_bytes);
  double *wrank = reinterpret_cast<double *>(walk_bytes + walk_bits(G));
  for (int32_t g = threadIdx.x; g < G; g += blockDim.x) wmask[g] = h.d_wmask[(size_t)grp * G + g];
  for (int32_t i = threadIdx.x; i < 32 * WIN; i += blockDim.x) wrank[WARPS * 32 * WIN + i] = 1.0;
  __syncthreads();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const unsigned all = 0xffffffffu;
  const int32_t slot = grp * 32 + lane;
  const bool valid = slot < h.Wn;
  const int32_t u = h.S - h.Wn + (valid ? slot : 0);
  const int32_t k = h.d_tmem[u + 1] - h.d_tmem[u];
  const double inv_nmiss = G_DIV(1.0, G_SUB((double)G, (double)k));
  const int64_t b = (int64_t)blockIdx.y * WARPS + warp;
  if (b >= n) return;
  const double nr = h.d_wnr[(size_t)b * h.Wn + (valid ? slot : 0)];
  const int unit = nr == 0;
  const double inv_nr = G_DIV(1.0, unit ? (double)k : nr);
  gsea_es_state st;
  gsea_es_init(&st);
  gsea_runs runs;
  gsea_runs_init(&runs, k);
  const int32_t *o = ord + (size_t)b * G;
  const double *ws = h.d_wsorted + (size_t)b * G;
  double *wr = wrank + warp * 32 * WIN;
  /* a lane's hit weights: the window's, or 1 for a set whose members all
   * weigh 0 (the ones after the warps' windows) */
  const double *wp = unit ? wrank + WARPS * 32 * WIN : wr;
  /* The transpose's stages, j = 16, 8, 4, 2, 1: a lane keeps the bits of
   * its word whose index has bit j as its lane has (keep) and takes the
   * others from lane l ^ j, which sends its word rotated by j towards
   * them (rot; the bits that wrap around fall outside the taker's part).
   * A rotation, a shuffle and one three-input logic operation a stage,
   * where shifting both ways and selecting took seven. */
  uint32_t rot[5], keep[5];
#pragma unroll
  for (int i = 0; i < 5; i++) {
    const int j = 16 >> i;
    const uint32_t m = i == 0 ? 0x0000ffffu : i == 1 ? 0x00ff00ffu : i == 2 ? 0x0f0f0f0fu : i == 3 ? 0x33333333u : 0x55555555u;
    rot[i] = opaque((lane & j) ? j : 32 - j);
    keep[i] = opaque((lane & j) ? ~m : m);
  }
  for (int32_t c0 = 0; c0 < G; c0 += 32 * WIN) {
    uint64_t q[NQ]; /* the window's ranks in the lane's set */
#pragma unroll
    for (int w = 0; w < WIN; w++) {
      const int32_t r = c0 + 32 * w + lane;
      uint32_t x = 0;
      double wv = 0;
      if (r < G) {
        x = wmask[o[r]];
        wv = ws[r];
      }
      /* transpose: lane l's bit j (rank c0 + 32 w + l in set j) to lane j's bit l */
#pragma unroll
      for (int i = 0; i < 5; i++) {
        const uint32_t y = __shfl_xor_sync(all, __funnelshift_l(x, x, rot[i]), 16 >> i);
        x = bit_select(keep[i], x, y);
      }
      wr[32 * w + lane] = wv;
      /* bit 63 - i of q[i / 64]: rank c0 + i (the next hit: the leading bit) */
      x = __brev(x);
      if (w & 1) q[w >> 1] |= x;
      else q[w >> 1] = (uint64_t)x << 32;
    }
    __syncwarp();
    if (valid) {
      /* the lane's hits in rank order: the leading bit of q[0], the words
       * shifted down as they empty */
      int32_t at = c0;       /* rank of q[0]'s bit 63 */
      const double *wq = wp; /* its weight */
      for (;;) {
        if (q[0] == 0) {
          uint64_t rest = 0;
#pragma unroll
          for (int i = 1; i < NQ; i++) rest |= q[i];
          if (rest == 0) break;
          do {
#pragma unroll
            for (int i = 0; i < NQ - 1; i++) q[i] = q[i + 1];
            q[NQ - 1] = 0;
            at += 64;
            wq += 64;
          } while (q[0] == 0);
        }
        const uint32_t hi = (uint32_t)(q[0] >> 32);
        const int i = hi ? __clz(hi) : 32 + __clz((uint32_t)q[0]);
        q[0] ^= 0x8000000000000000ull >> i;
        gsea_es_hit_runs_tie(&st, &runs, at + i, wq[i], inv_nr, inv_nmiss, h.tie);
      }
    }
    __syncwarp(); /* before the next window's weights replace these */
  }
  if (valid) h.d_es[(size_t)b * h.S + h.d_tset[u]] = st.best;
}

/* One launch of k_es_walk over the walked groups and n permutations. */
template <int WARPS, int WIN>
static void launch_es_walk(const sbg_gsea_gpu *h, const int32_t *ord, int64_t n) {
  dim3 grid((unsigned)((h->Wn + 31) / 32), (unsigned)((n + WARPS - 1) / WARPS));
  k_es_walk<WARPS, WIN><<<grid, WARPS * 32, walk_smem<WARPS, WIN>(h->G), h->stream>>>(*h, ord, n);
}

#define TILE_SMALL 256, 16, 2
#define TILE_BIG 512, 16, 1

/* One launch of k_es_tile over the handle's tiles and n permutations, the
 * grid's height from the configuration's permutations a block. */
template <int THREADS, int IPT, int PERMS, typename KeyT>
static void launch_es_tile(const sbg_gsea_gpu *h, int64_t n) {
  dim3 grid((unsigned)h->T, (unsigned)((n + PERMS - 1) / PERMS));
  k_es_tile<THREADS, IPT, PERMS, KeyT><<<grid, THREADS, h->tile_smem, h->stream>>>(*h, n);
}

/* ---------------------------------------------------------------------- */
/* kernels: statistics (the host passes' arithmetic, see gsea_cpu.c) */

/* Adds b to *a on the device, whatever other threads add to it meanwhile:
 * the low word's carry is the one of this addition (from the word it
 * replaced), so the 128-bit total is exact in any order. */
static __device__ void gsea_acc_atomic_merge(gsea_acc *a, gsea_acc b) {
  unsigned long long *lo = reinterpret_cast<unsigned long long *>(&a->lo);
  unsigned long long *hi = reinterpret_cast<unsigned long long *>(&a->hi);
  unsigned long long old = atomicAdd(lo, (unsigned long long)b.lo);
  unsigned long long carry = old + (unsigned long long)b.lo < old ? 1ull : 0ull;
  atomicAdd(hi, (unsigned long long)b.hi + carry);
}

/* Permutations per k_pass1 thread.  One thread per set over the whole
 * batch left C2's 4,725 sets about one warp per SM: 15.8 ms per batch of
 * 32,768 permutations on an H200. */
#define PASS1_CHUNK 512

/* One thread per set and chunk of PASS1_CHUNK permutations: the host's
 * exact sums and counts (gsea_acc_add), merged into the totals; integers,
 * so the chunks may finish in any order. */
static __global__ void k_pass1(const sbg_gsea_gpu h, int64_t n) {
  int32_t s = blockIdx.x * blockDim.x + threadIdx.x;
  int64_t b0 = (int64_t)blockIdx.y * PASS1_CHUNK, b1 = b0 + PASS1_CHUNK < n ? b0 + PASS1_CHUNK : n;
  if (s >= h.S) return;
  double e = h.d_es_obs[s];
  gsea_acc sp = {0, 0}, sn = {0, 0};
  unsigned long long np = 0, nn = 0, ne = 0;
  for (int64_t b = b0; b < b1; b++) {
    double v = h.d_es[(size_t)b * h.S + s];
    if (v >= 0) {
      gsea_acc_add(&sp, v);
      np++;
      if (e >= 0 && v > e) ne++;
    }
    if (v <= 0) {
      gsea_acc_add(&sn, v);
      nn++;
      if (e < 0 && v < e) ne++;
    }
  }
  gsea_acc_atomic_merge(&h.d_sum_pos[s], sp);
  gsea_acc_atomic_merge(&h.d_sum_neg[s], sn);
  atomicAdd(&h.d_n_pos[s], np);
  atomicAdd(&h.d_n_neg[s], nn);
  atomicAdd(&h.d_n_ext[s], ne);
}

/* Blocks over permutations: max/min null NES, same-sign counts, then each
 * null NES adds its permutation's integer weight to its bin, in shared
 * memory (integers: the order does not matter), flushed at the end. */
static __global__ void __launch_bounds__(STATS_THREADS)
k_pass2(const sbg_gsea_gpu h, int64_t n, int fbits) {
  gsea_pass2_block<STATS_THREADS>(h.d_es, n, h.S, NULL, h.d_obs, h.kp, h.kn, fbits, h.d_pext, h.B, h.d_hist);
}

/* ---------------------------------------------------------------------- */

static int bits_for(uint64_t n) { /* bits to hold 0..n-1 */
  int b = 1;
  while (b < 63 && (1ull << b) < n) b++;
  return b;
}

extern "C" void sbg_gsea_gpu_close(sbg_gsea_gpu *h) {
#ifdef SBG_GSEA_PHASES
  {
    static const char *cls[PHASE_CLASSES] = {"<= 64", "<= 256", "<= 512", "> 512"};
    unsigned long long c[PHASE_CLASSES][PHASES + 1] = {{0}};
    cudaMemcpyFromSymbol(c, phase_cycles, sizeof c);
    for (int k = 0; k < PHASE_CLASSES; k++) {
      double nb = c[k][PHASES] ? (double)c[k][PHASES] : 1.0;
      fprintf(stderr, "k_es_tile, tiles of sets %-6s: %llu blocks, cycles a block: gather %.0f, sort %.0f, sets a thread %.0f, sets a warp %.0f\n",
              cls[k], c[k][PHASES], c[k][0] / nb, c[k][1] / nb, c[k][2] / nb, c[k][3] / nb);
    }
  }
#endif
  if (!h) return;
  cudaSetDevice(h->device); /* its memory and stream */
  void *p[] = {h->d_tile_first, h->d_tile_small, h->d_tset, h->d_tmem, h->d_tgene, h->d_tkey, h->d_xc, h->d_mu,
               h->d_t1, h->d_t2, h->d_metric0, h->d_labels, h->d_lab, h->d_small, h->d_perm,
               h->d_ord0, h->d_ord1, h->d_rec, h->d_seg, h->d_metric, h->d_es_buf, h->d_cache, h->d_key0,
               h->d_key1, h->d_temp, h->d_es_obs, h->d_sum_pos, h->d_sum_neg, h->d_n_pos,
               h->d_n_neg, h->d_n_ext, h->d_sequential, h->d_obs, h->d_hist, h->d_pext, h->d_wmask,
               h->d_wnr, h->d_wsorted, h->d_grp_kmax, h->d_grp_off, h->d_lgene};
  for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) cudaFree(p[i]);
  if (h->stream) cudaStreamDestroy(h->stream);
  free(h);
}

extern "C" int64_t sbg_gsea_gpu_max_batch(const sbg_gsea_gpu *h) { return h->B; }

#define ALLOC(ptr, count, what) \
  SBG_TRY(sbg_device_alloc((void **)&(ptr), (size_t)(count) * sizeof(*(ptr)), what, ctx))
#define TO_DEVICE(dst, src, count) \
  SBG_CUDA_CHECK(cudaMemcpyAsync(dst, src, (size_t)(count) * sizeof(*(dst)), cudaMemcpyHostToDevice, h->stream))

/* Sets sorted by size, packed greedily into tiles of at most `cap`
 * members and fewer than 2^(31 - rbits) sets, so (permutation, set within
 * tile, rank) fits 32 bits, and with key32 so that the member index fits
 * above them; threads of a warp then run sets of similar length. */
static sbg_status build_tiles(sbg_gsea_gpu *h, const sbg_gsea_input *in, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  int32_t S = h->S;
  int64_t cap = h->big ? (int64_t)tile_sort<TILE_BIG, uint64_t>::MEMBERS : (int64_t)tile_sort<TILE_SMALL, uint64_t>::MEMBERS;
  int64_t max_sets = ((int64_t)1 << (31 - h->rbits < 20 ? 31 - h->rbits : 20)) - 1;
  std::vector<int32_t> order(S), first, tmem(S + 1), tgene((size_t)h->M), small;
  std::vector<uint32_t> tkey((size_t)h->M);
  for (int32_t s = 0; s < S; s++) order[s] = s;
  std::stable_sort(order.begin(), order.end(), [in](int32_t a, int32_t b) {
    return in->set_start[a + 1] - in->set_start[a] < in->set_start[b + 1] - in->set_start[b];
  });
  int64_t hits = 0;
  const int32_t St = S - h->Wn; /* the lanes' and tiles' slots; the walked sets follow them */
  /* the smallest sets take k_es_perm's lanes */
  int32_t L = 0;
  while (h->perm && L < St && in->set_start[order[L] + 1] - in->set_start[order[L]] <= LANE_MAX) L++;
  h->L = L;
  for (int32_t u = L; u < St; u++) {
    int32_t k = in->set_start[order[u] + 1] - in->set_start[order[u]];
    /* sizes ascend, so k is the tile's largest set once added */
    int fits_key = !h->key32 || h->rbits + slot_bits(u - (first.empty() ? u : first.back()) + 1) + 1 +
                                        (int)bits_for((uint64_t)k) <= 32;
    if (first.empty() || hits + k > cap || u - first.back() >= max_sets || !fits_key) {
      first.push_back(u);
      hits = 0;
    }
    hits += k;
  }
  first.push_back(St);
  size_t m = 0;
  for (int32_t u = 0; u < L; u++) {
    tmem[u] = (int32_t)m;
    m += in->set_start[order[u] + 1] - in->set_start[order[u]];
  }
  h->Ml = (int32_t)m;
  for (size_t t = 0; t + 1 < first.size(); t++) {
    int sb = slot_bits(first[t + 1] - first[t]);
    for (int32_t u = first[t]; u < first[t + 1]; u++) {
      int32_t s = order[u];
      tmem[u] = (int32_t)m;
      for (int32_t i = in->set_start[s]; i < in->set_start[s + 1]; i++, m++) {
        uint32_t member = (uint32_t)(i - in->set_start[s]);
        tgene[m - h->Ml] = in->set_genes[i];
        tkey[m - h->Ml] = ((uint32_t)(u - first[t]) << h->rbits) | (h->key32 ? member << (h->rbits + sb + 1) : 0u);
      }
    }
  }
  h->Mt = (int32_t)m;
  for (int32_t u = St; u < S; u++) {
    tmem[u] = (int32_t)m;
    m += in->set_start[order[u] + 1] - in->set_start[order[u]];
  }
  tmem[S] = (int32_t)h->M;
  h->T = (int32_t)first.size() - 1; /* 0: no set in tiles */
  h->lane_groups = (L + 31) / 32;
  h->walk_groups = (h->Wn + 31) / 32;
  if (h->lane_groups + h->walk_groups > 0) {
    /* k_es_perm's groups of 32 slots, members interleaved */
    const int32_t ng = h->lane_groups + h->walk_groups;
    std::vector<int32_t> kmax(ng), off(ng), grp_first(ng);
    size_t at = 0;
    for (int32_t j = 0; j < ng; j++) {
      int32_t u0 = j < h->lane_groups ? 32 * j : St + 32 * (j - h->lane_groups);
      int32_t u1 = std::min(j < h->lane_groups ? L : S, u0 + 32);
      grp_first[j] = u0;
      kmax[j] = in->set_start[order[u1 - 1] + 1] - in->set_start[order[u1 - 1]]; /* sizes ascend */
      off[j] = (int32_t)at;
      at += (size_t)(kmax[j] + 7) / 8 * 8 * 32;
    }
    std::vector<uint16_t> lgene(at, 0);
    for (int32_t j = 0; j < ng; j++) {
      int32_t u1 = std::min(j < h->lane_groups ? L : S, grp_first[j] + 32);
      for (int32_t u = grp_first[j]; u < u1; u++) {
        int32_t s = order[u], l = u - grp_first[j];
        for (int32_t i = 0; i < in->set_start[s + 1] - in->set_start[s]; i++)
          lgene[off[j] + (size_t)8 * (32 * (i / 8) + l) + i % 8] = (uint16_t)in->set_genes[in->set_start[s] + i];
      }
    }
    ALLOC(h->d_grp_kmax, ng, "the gene set groups");
    ALLOC(h->d_grp_off, ng, "the gene set groups");
    ALLOC(h->d_lgene, at, "the gene set groups");
    TO_DEVICE(h->d_grp_kmax, kmax.data(), ng);
    TO_DEVICE(h->d_grp_off, off.data(), ng);
    TO_DEVICE(h->d_lgene, lgene.data(), at);
    SBG_CUDA_CHECK(cudaStreamSynchronize(h->stream));
  }
  if (h->Wn > 0) {
    int32_t ng = (h->Wn + 31) / 32;
    std::vector<uint32_t> mask((size_t)ng * h->G, 0u);
    for (int32_t j = 0; j < h->Wn; j++) {
      int32_t s = order[St + j];
      for (int32_t i = in->set_start[s]; i < in->set_start[s + 1]; i++)
        mask[(size_t)(j / 32) * h->G + in->set_genes[i]] |= 1u << (j % 32);
    }
    ALLOC(h->d_wmask, (size_t)ng * h->G, "the walked gene sets");
    TO_DEVICE(h->d_wmask, mask.data(), (size_t)ng * h->G);
    SBG_CUDA_CHECK(cudaStreamSynchronize(h->stream));
  }
  /* each tile's sets of at most ES_SPLIT members, so that k_es_tile's
   * blocks need not search the sizes (a chain of dependent global loads
   * before every block's scoring; k_es_tile 0.4-1% faster on C2, H200) */
  small.resize((size_t)h->T + 1);
  for (int32_t t = 0; t < h->T; t++) {
    int32_t u = first[t];
    while (u < first[t + 1] && tmem[u + 1] - tmem[u] <= ES_SPLIT) u++;
    small[t] = u - first[t];
  }
  ALLOC(h->d_tile_small, h->T, "the gene set tiles");
  TO_DEVICE(h->d_tile_small, small.data(), h->T);
  ALLOC(h->d_tile_first, h->T + 1, "the gene set tiles");
  ALLOC(h->d_tset, S, "the gene set tiles");
  ALLOC(h->d_tmem, S + 1, "the gene set tiles");
  ALLOC(h->d_tgene, h->Mt - h->Ml, "the gene set members");
  ALLOC(h->d_tkey, h->Mt - h->Ml, "the gene set members");
  TO_DEVICE(h->d_tile_first, first.data(), h->T + 1);
  TO_DEVICE(h->d_tset, order.data(), S);
  TO_DEVICE(h->d_tmem, tmem.data(), S + 1);
  TO_DEVICE(h->d_tgene, tgene.data(), h->Mt - h->Ml);
  TO_DEVICE(h->d_tkey, tkey.data(), h->Mt - h->Ml);
  SBG_CUDA_CHECK(cudaStreamSynchronize(h->stream)); /* the vectors go out of scope */
done:
  return st;
}

extern "C" sbg_status sbg_gsea_gpu_open(const sbg_gsea_input *in, const sbg_gsea_params *p,
                                        const sbg_gsea_prep *prep, int device, int64_t max_batch,
                                        int64_t cache_perms, sbg_gsea_gpu **out, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  sbg_gsea_gpu *h = (sbg_gsea_gpu *)calloc(1, sizeof(sbg_gsea_gpu));
  int64_t B = 0, M = in->set_start[in->n_sets];
  int32_t G = in->n_genes, S = in->n_sets, kmax = 0;
  int tiles = 0; /* some set takes the tiles */
  *out = NULL;
  if (!h) return sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the GPU engine");
  h->device = device;
  h->G = in->n_genes;
  h->P = in->n_samples;
  h->S = in->n_sets;
  h->M = M;
  h->metric = p->metric;
  h->gene_perm = p->gene_perm;
  h->weight = p->weight;
  h->tie = GSEA_TIE;
  h->seed = p->seed;
  h->n_a = prep->n_a;
  h->n_b = prep->n_b;
  h->small_label = prep->small_label;
  h->n_small = prep->small_label == 1 ? prep->n_b : prep->n_a;
  h->rbits = bits_for((uint64_t)h->G);
  h->key32 = h->rbits <= 16;
  SBG_TRY(sbg_device_select(h->device, ctx));
  SBG_CUDA_CHECK(cudaStreamCreateWithFlags(&h->stream, cudaStreamNonBlocking));
  SBG_CUDA_CHECK(cudaDeviceGetAttribute(&h->max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, h->device));
  {
    /* k_es_perm where a permutation's ranks and weights fit the card's
     * shared memory; there the largest sets walk the ranking (k_es_walk)
     * where a group's bits fit WALK_SMEM */
    h->perm = perm_smem(h->G) <= (size_t)h->max_smem;
    const int32_t walk_genes = (int32_t)std::min<size_t>(WALK_SMEM / sizeof(uint32_t), (size_t)h->max_smem / perm_smem(1));
    h->walk_min = p->walk_min < 0 ? WALK_MIN : p->walk_min > 0 && p->walk_min < GSEA_RUNS ? GSEA_RUNS : (int32_t)p->walk_min;
    if (h->G > walk_genes) h->walk_min = 0;
    for (int32_t s = 0; s < S; s++) {
      int32_t k = in->set_start[s + 1] - in->set_start[s];
      if (h->walk_min > 0 && k > h->walk_min) h->Wn++;
      else if (k > kmax) kmax = k;
    }
    h->big = kmax > tile_sort<TILE_SMALL, uint64_t>::MEMBERS;
    tiles = !h->perm || kmax > LANE_MAX;
    if (kmax > tile_sort<TILE_BIG, uint64_t>::MEMBERS || h->rbits > 29) {
      st = sbg_fail(ctx, SBG_ERR_INPUT, "the GPU engine takes gene sets of up to %d genes (more where there are at "
                    "most %d genes on this GPU, unless option sysbioGPU.gseaWalk is 0) and fewer than 2^29 genes (the "
                    "largest set has %d): use backend = \"cpu\"", (int)tile_sort<TILE_BIG, uint64_t>::MEMBERS,
                    (int)walk_genes, (int)kmax);
      goto done;
    }
  }
  h->tile_smem = h->big ? (h->key32 ? tile_sort<TILE_BIG, uint32_t>::smem() : tile_sort<TILE_BIG, uint64_t>::smem())
                         : (h->key32 ? tile_sort<TILE_SMALL, uint32_t>::smem() : tile_sort<TILE_SMALL, uint64_t>::smem());
  if (h->tile_smem > (size_t)h->max_smem) {
    st = sbg_fail(ctx, SBG_ERR_CUDA, "the GPU has %d bytes of shared memory per block; the gene set tiles need %zu",
                  h->max_smem, h->tile_smem);
    goto done;
  }
  {
    const void *f = h->big ? (h->key32 ? (const void *)k_es_tile<TILE_BIG, uint32_t> : (const void *)k_es_tile<TILE_BIG, uint64_t>)
                           : (h->key32 ? (const void *)k_es_tile<TILE_SMALL, uint32_t> : (const void *)k_es_tile<TILE_SMALL, uint64_t>);
    SBG_CUDA_CHECK(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)h->tile_smem));
  }
  SBG_CUDA_CHECK(cudaFuncSetAttribute(k_pass2, cudaFuncAttributeMaxDynamicSharedMemorySize, h->max_smem - 1024));
  SBG_CUDA_CHECK(cudaFuncSetAttribute(k_records, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      (int)(2 * record_chunk(h->G) * sizeof(int32_t))));
  SBG_CUDA_CHECK(cudaFuncSetAttribute(k_rank_sort, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      (int)sizeof(rank_sort::TempStorage)));
  SBG_CUDA_CHECK(cudaFuncSetAttribute(k_metric_tile, cudaFuncAttributeMaxDynamicSharedMemorySize, METRIC_SMEM));
  {
    /* batch size from the free memory: what one permutation needs */
    size_t free_b = 0, total_b = 0;
    SBG_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    double per = (double)h->G * ((tiles ? 16 : 0) + 8 + 8 + 8 + (h->gene_perm ? 4 : 0) + (h->Wn ? 8 : 0)) + (double)h->S * 8 +
                 (double)h->Wn * 8 +
                 (double)h->P * 8 + 64;
    double fixed = (double)h->G * h->P * 8 + (double)h->M * 8 + (double)h->G * 40 + (double)h->S * 64;
    B = (int64_t)((0.6 * (double)free_b - fixed) / (per * 1.1));
    if (B > max_batch) B = max_batch;
    /* Room for the ES cache first (it saves pass 2's recomputation),
     * with batches of at least 4,096 permutations when they fit. */
    double cache_b = (double)h->S * sizeof(double) * (double)cache_perms;
    double batch_room = 0.85 * (double)free_b - fixed - cache_b;
    if (cache_perms > 0 && (double)B * per * 1.1 > batch_room) {
      int64_t Bc = batch_room > 0 ? (int64_t)(batch_room / (per * 1.1)) : 0, floor_b = B < 4096 ? B : 4096;
      B = Bc > floor_b ? (Bc < B ? Bc : B) : floor_b;
    }
    while (B > 64 && (double)B * h->G > 2147483647.0) B /= 2; /* CUB's int item counts */
    B = B / 64 * 64;
    if (B < 64) {
      st = sbg_fail(ctx, SBG_ERR_DEVICE_ALLOC, "the GPU has %.1f GiB free: too little for a batch of 64 permutations",
                    (double)free_b / 1073741824.0);
      goto done;
    }
    h->B = B;
  }
  SBG_TRY(build_tiles(h, in, ctx));
  if (h->gene_perm) {
    ALLOC(h->d_metric0, G, "the observed metric");
    ALLOC(h->d_perm, B * G, "the gene permutations");
    TO_DEVICE(h->d_metric0, prep->metric0, G);
  } else {
    ALLOC(h->d_xc, (size_t)G * h->P, "the centred expression matrix");
    ALLOC(h->d_mu, G, "the gene means");
    ALLOC(h->d_t1, G, "the gene sums");
    ALLOC(h->d_t2, G, "the gene sums of squares");
    ALLOC(h->d_labels, h->P, "the labels");
    ALLOC(h->d_lab, B * h->P, "the permuted labels");
    ALLOC(h->d_small, B * (h->n_small > 0 ? h->n_small : 1), "the permuted classes");
    TO_DEVICE(h->d_xc, prep->xc, (size_t)G * h->P);
    TO_DEVICE(h->d_mu, prep->mu, G);
    TO_DEVICE(h->d_t1, prep->t1, G);
    TO_DEVICE(h->d_t2, prep->t2, G);
    TO_DEVICE(h->d_labels, in->labels, h->P);
  }
  /* per batch */
  if (tiles) ALLOC(h->d_rec, B * G, "the permuted weights and ranks");
  ALLOC(h->d_metric, B * G, "the permuted metrics");
  ALLOC(h->d_key0, B * G, "the sort keys");
  ALLOC(h->d_key1, B * G, "the sort keys");
  ALLOC(h->d_ord0, B * G, "the rankings");
  ALLOC(h->d_ord1, B * G, "the rankings");
  ALLOC(h->d_seg, B + 1, "the segment offsets");
  ALLOC(h->d_es_buf, B * S, "the batch of ES");
  if (h->Wn > 0) {
    ALLOC(h->d_wnr, B * h->Wn, "the walked sets' weights");
    ALLOC(h->d_wsorted, B * G, "the weights by rank");
    int per_sm = 0;
    SBG_CUDA_CHECK(cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, h->device));
    /* (each block also takes 1 KB the system reserves) */
    h->walk_wide = 2 * (walk_smem<WALK_WIDE>(G) + 1024) <= (size_t)per_sm;
    if (h->walk_wide)
      SBG_CUDA_CHECK(cudaFuncSetAttribute(k_es_walk<WALK_WIDE>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          (int)walk_smem<WALK_WIDE>(G)));
    else
      SBG_CUDA_CHECK(cudaFuncSetAttribute(k_es_walk<WALK_NARROW>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          (int)walk_smem<WALK_NARROW>(G)));
  }
  if (h->perm)
    SBG_CUDA_CHECK(cudaFuncSetAttribute(k_es_perm, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)perm_smem(G)));
  h->d_es = h->d_es_buf;
  /* statistics */
  ALLOC(h->d_es_obs, S, "the statistics");
  ALLOC(h->d_sum_pos, S, "the statistics");
  ALLOC(h->d_sum_neg, S, "the statistics");
  ALLOC(h->d_n_pos, S, "the statistics");
  ALLOC(h->d_n_neg, S, "the statistics");
  ALLOC(h->d_n_ext, S, "the statistics");
  ALLOC(h->d_sequential, 1, "the statistics");
  ALLOC(h->d_obs, 4 * (size_t)S, "the statistics");
  ALLOC(h->d_hist, 2 * (size_t)S + 4, "the statistics");
  ALLOC(h->d_pext, 2 * B, "the statistics");
  SBG_CUDA_CHECK(cudaMemsetAsync(h->d_sum_pos, 0, S * sizeof(gsea_acc), h->stream));
  SBG_CUDA_CHECK(cudaMemsetAsync(h->d_sum_neg, 0, S * sizeof(gsea_acc), h->stream));
  SBG_CUDA_CHECK(cudaMemsetAsync(h->d_n_pos, 0, S * sizeof(unsigned long long), h->stream));
  SBG_CUDA_CHECK(cudaMemsetAsync(h->d_n_neg, 0, S * sizeof(unsigned long long), h->stream));
  SBG_CUDA_CHECK(cudaMemsetAsync(h->d_n_ext, 0, S * sizeof(unsigned long long), h->stream));
  SBG_CUDA_CHECK(cudaMemsetAsync(h->d_sequential, 0, sizeof(unsigned long long), h->stream));
  SBG_CUDA_CHECK(cudaMemsetAsync(h->d_hist, 0, (2 * (size_t)S + 4) * sizeof(unsigned long long), h->stream));
  h->kp = h->kn = -1;
  k_seg<<<(unsigned)((B + 256) / 256), 256, 0, h->stream>>>(h->d_seg, G, B);
  SBG_CUDA_CHECK(cudaGetLastError());
  {
    cub::DoubleBuffer<uint32_t> k(h->d_key0, h->d_key1);
    cub::DoubleBuffer<int32_t> v(h->d_ord0, h->d_ord1);
    SBG_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairs(NULL, h->temp_bytes, k, v, (int)(B * G), (int)B,
                                                            h->d_seg, h->d_seg + 1, 0, SORT_KEY_BITS, h->stream));
    SBG_TRY(sbg_device_alloc(&h->d_temp, h->temp_bytes, "the sort work space", ctx));
  }
  if (cache_perms > 0) {
    /* whole batches, what the free memory holds beside a margin; a
     * failed allocation only means less cache */
    size_t free_b = 0, total_b = 0;
    SBG_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    double margin = 0.03 * (double)total_b > 268435456.0 ? 0.03 * (double)total_b : 268435456.0;
    int64_t cols = (double)free_b > margin ? (int64_t)(((double)free_b - margin) / ((double)S * sizeof(double))) : 0;
    if (cols >= cache_perms) cols = cache_perms;
    else cols = cols / B * B;
    while (cols > 0 && cudaMalloc((void **)&h->d_cache, (size_t)cols * S * sizeof(double)) != cudaSuccess) {
      (void)cudaGetLastError();
      h->d_cache = NULL;
      cols = cols > B ? (cols - B) / B * B : 0;
    }
    h->cache_cols = cols;
  }
  SBG_CUDA_CHECK(cudaStreamSynchronize(h->stream));
done:
  if (st != SBG_OK) {
    sbg_gsea_gpu_close(h);
    return st;
  }
  *out = h;
  return st;
}

extern "C" sbg_status sbg_gsea_gpu_batch(sbg_gsea_gpu *h, int64_t first, int64_t n, double *es,
                                         sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  int32_t G = h->G, S = h->S;
  if (n < 1 || n > h->B) return sbg_fail(ctx, SBG_ERR_INTERNAL, "GPU batch of %lld permutations", (long long)n);
  SBG_TRY(sbg_device_select(h->device, ctx));
  {
    /* a batch inside the cache: computed into it once (pass 1), read from
     * it afterwards (pass 2); batches arrive in order, so the computed
     * part is a prefix */
    if (h->cache_first == 0) h->cache_first = first;
    int64_t at = first - h->cache_first, end = at + n;
    int cached = at >= 0 && end <= h->cache_cols;
    h->d_es = cached ? h->d_cache + (size_t)at * S : h->d_es_buf;
    if (cached && end <= h->cache_done) goto copy;
    if (cached && at == h->cache_done) h->cache_done = end;
  }
  {
    unsigned pb = (unsigned)((n + 127) / 128);
    if (h->gene_perm) {
      k_geneperm<<<pb, 128, 0, h->stream>>>(G, h->seed, first, n, h->d_perm);
    } else {
      k_labels<<<pb, 128, 0, h->stream>>>(h->d_labels, h->P, h->small_label, h->n_small, h->seed,
                                          first, n, h->d_lab, h->d_small);
    }
    SBG_CUDA_CHECK(cudaGetLastError());
    dim3 gg((unsigned)((G + 255) / 256), (unsigned)n);
    /* (k_rank_sort numbers the genes itself) */
    int32_t *ord0 = G <= RANK_GENES ? NULL : h->d_ord0;
    if (!h->gene_perm && metric_smem(h->P, h->n_small) <= METRIC_SMEM) {
      dim3 gt((unsigned)((G + METRIC_GENES - 1) / METRIC_GENES), (unsigned)((n + METRIC_PERMS - 1) / METRIC_PERMS));
      k_metric_tile<<<gt, METRIC_THREADS, metric_smem(h->P, h->n_small), h->stream>>>(*h, ord0, n);
    } else {
      k_metric<<<gg, 256, 0, h->stream>>>(*h, ord0, n);
    }
    SBG_CUDA_CHECK(cudaGetLastError());
    cub::DoubleBuffer<uint32_t> k(h->d_key0, h->d_key1);
    cub::DoubleBuffer<int32_t> v(h->d_ord0, h->d_ord1);
    if (G <= RANK_GENES) {
      k_rank_sort<<<(unsigned)n, RANK_THREADS, sizeof(rank_sort::TempStorage), h->stream>>>(h->d_key0, h->d_key1,
                                                                                            h->d_ord1, G);
      SBG_CUDA_CHECK(cudaGetLastError());
      k.selector = v.selector = 1;
    } else {
      size_t tb = h->temp_bytes;
      SBG_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairs(h->d_temp, tb, k, v, (int)(n * G), (int)n,
                                                              h->d_seg, h->d_seg + 1, 0, SORT_KEY_BITS,
                                                              h->stream));
    }
    k_fix_ties<<<gg, 256, 0, h->stream>>>(*h, k.Current(), v.Current(), n);
    SBG_CUDA_CHECK(cudaGetLastError());
    if (h->T > 0) {
      const int32_t chunk = record_chunk(G);
      dim3 gr((unsigned)((G + chunk - 1) / chunk), (unsigned)((n + 1) / 2));
      k_records<<<gr, RECORD_THREADS, 2 * chunk * sizeof(int32_t), h->stream>>>(*h, v.Current(), chunk, n);
      SBG_CUDA_CHECK(cudaGetLastError());
      if (h->big && h->key32) launch_es_tile<TILE_BIG, uint32_t>(h, n);
      else if (h->big) launch_es_tile<TILE_BIG, uint64_t>(h, n);
      else if (h->key32) launch_es_tile<TILE_SMALL, uint32_t>(h, n);
      else launch_es_tile<TILE_SMALL, uint64_t>(h, n);
      SBG_CUDA_CHECK(cudaGetLastError());
    }
    if (h->L > 0 || h->Wn > 0) {
      k_es_perm<<<(unsigned)n, PERM_THREADS, perm_smem(G), h->stream>>>(*h, v.Current());
      SBG_CUDA_CHECK(cudaGetLastError());
    }
    if (h->Wn > 0) {
      if (h->walk_wide) launch_es_walk<WALK_WIDE>(h, v.Current(), n);
      else launch_es_walk<WALK_NARROW>(h, v.Current(), n);
      SBG_CUDA_CHECK(cudaGetLastError());
    }
  }
copy:
  if (es) {
    SBG_CUDA_CHECK(cudaMemcpyAsync(es, h->d_es, (size_t)n * S * sizeof(double), cudaMemcpyDeviceToHost, h->stream));
    SBG_CUDA_CHECK(cudaStreamSynchronize(h->stream));
  }
done:
  return st;
}

extern "C" sbg_status sbg_gsea_gpu_pass1(sbg_gsea_gpu *h, const double *es_obs, int64_t n, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  SBG_TRY(sbg_device_select(h->device, ctx));
  TO_DEVICE(h->d_es_obs, es_obs, h->S);
  {
    dim3 grid((unsigned)((h->S + 127) / 128), (unsigned)((n + PASS1_CHUNK - 1) / PASS1_CHUNK));
    k_pass1<<<grid, 128, 0, h->stream>>>(*h, n);
    SBG_CUDA_CHECK(cudaGetLastError());
  }
  SBG_CUDA_CHECK(cudaStreamSynchronize(h->stream)); /* polls between batches */
done:
  return st;
}

extern "C" sbg_status sbg_gsea_gpu_sequential(sbg_gsea_gpu *h, int64_t *n, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  unsigned long long c = 0;
  SBG_TRY(sbg_device_select(h->device, ctx));
  SBG_CUDA_CHECK(cudaMemcpyAsync(&c, h->d_sequential, sizeof c, cudaMemcpyDeviceToHost, h->stream));
  SBG_CUDA_CHECK(cudaStreamSynchronize(h->stream));
  *n += (int64_t)c;
done:
  return st;
}

extern "C" sbg_status sbg_gsea_gpu_pass1_result(sbg_gsea_gpu *h, gsea_acc *sum_pos, gsea_acc *sum_neg,
                                                int64_t *n_pos, int64_t *n_neg, int64_t *n_ext,
                                                sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  int32_t S = h->S;
  gsea_acc *d = NULL;
  unsigned long long *c = NULL;
  SBG_TRY(sbg_device_select(h->device, ctx));
  d = (gsea_acc *)malloc(2 * (size_t)S * sizeof(gsea_acc));
  c = (unsigned long long *)malloc(3 * (size_t)S * sizeof(unsigned long long));
  if (!d || !c) { st = sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the statistics"); goto done; }
  SBG_CUDA_CHECK(cudaMemcpyAsync(d, h->d_sum_pos, S * sizeof(gsea_acc), cudaMemcpyDeviceToHost, h->stream));
  SBG_CUDA_CHECK(cudaMemcpyAsync(d + S, h->d_sum_neg, S * sizeof(gsea_acc), cudaMemcpyDeviceToHost, h->stream));
  SBG_CUDA_CHECK(cudaMemcpyAsync(c, h->d_n_pos, S * sizeof(*c), cudaMemcpyDeviceToHost, h->stream));
  SBG_CUDA_CHECK(cudaMemcpyAsync(c + S, h->d_n_neg, S * sizeof(*c), cudaMemcpyDeviceToHost, h->stream));
  SBG_CUDA_CHECK(cudaMemcpyAsync(c + 2 * S, h->d_n_ext, S * sizeof(*c), cudaMemcpyDeviceToHost, h->stream));
  SBG_CUDA_CHECK(cudaStreamSynchronize(h->stream));
  /* exact integers: the devices' parts add in any order */
  for (int32_t s = 0; s < S; s++) {
    gsea_acc_merge(&sum_pos[s], d[s]);
    gsea_acc_merge(&sum_neg[s], d[S + s]);
    n_pos[s] += (int64_t)c[s];
    n_neg[s] += (int64_t)c[S + s];
    n_ext[s] += (int64_t)c[2 * S + s];
  }
done:
  free(d);
  free(c);
  return st;
}

extern "C" int sbg_gsea_gpu_pass2_fits(const sbg_gsea_gpu *h, int32_t kp, int32_t kn) {
  return gsea_pass2_smem(kp, kn) + 1024 <= (size_t)h->max_smem;
}

extern "C" sbg_status sbg_gsea_gpu_pass2(sbg_gsea_gpu *h, int64_t first, int64_t n, const double *mpos,
                                         const double *mneg, const double *opos, int32_t kp,
                                         const double *oneg, int32_t kn, int fbits, double *pmax,
                                         double *pmin, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  int32_t S = h->S;
  int sms = 0;
  SBG_TRY(sbg_device_select(h->device, ctx));
  if (h->kp < 0) { /* the observed side, once */
    h->kp = kp;
    h->kn = kn;
    TO_DEVICE(h->d_obs, mpos, S);
    TO_DEVICE(h->d_obs + S, mneg, S);
    TO_DEVICE(h->d_obs + 2 * S, opos, kp);
    TO_DEVICE(h->d_obs + 2 * S + kp, oneg, kn);
  }
  SBG_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, h->device));
  {
    int64_t blocks = (int64_t)sms * 4 < n ? (int64_t)sms * 4 : n;
    k_pass2<<<(unsigned)blocks, STATS_THREADS, gsea_pass2_smem(kp, kn), h->stream>>>(*h, n, fbits);
    SBG_CUDA_CHECK(cudaGetLastError());
  }
  SBG_TRY(gsea_gpu_copy_extremes(h->d_pext, h->B, first, n, pmax, pmin, h->stream, ctx));
done:
  return st;
}

extern "C" sbg_status sbg_gsea_gpu_pass2_result(sbg_gsea_gpu *h, uint64_t *hp, uint64_t *hn,
                                                int64_t *valid_pos, int64_t *valid_neg, sbg_ctx *ctx) {
  return gsea_gpu_add_bins(h->device, h->d_hist, h->kp, h->kn, hp, hn, valid_pos, valid_neg, h->stream, ctx);
}
