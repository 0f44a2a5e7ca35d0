/* GPU engine of grnEvolve(backend = "gpu"): whole generations run on the
 * device (breeding, evaluation, per-island sort, migration, stop test) with
 * no host round trip; the host polls once per chunk of generations.  The
 * operators are grn_model.h's, as on the CPU, so runs are identical. */
#include <cub/cub.cuh>

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda_check.cuh"
#include "grn.h"
#include "grn_model.h"

static double wall_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* Device state of one run.  The stop flag is set on the device when the
 * best score reaches the target; every kernel of later generations then
 * returns at once, so the device stops at the same generation as the CPU
 * even inside a chunk launched ahead. */
typedef struct grn_dev {
  int *stop;
  int64_t *gens_done;
} grn_dev;

/* Generation 0 of individuals koff .. koff + pop.count - 1 of `total`. */
static __global__ void init_kernel(sbg_grn_problem pb, grn_pop pop, uint64_t seed, int64_t total,
                                   int64_t koff) {
  int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= pop.count) return;
  grn_init_individual(&pb, grn_view_at(&pop, pb.n, pb.w, k), seed, grn_stream(0, total, koff + k));
}

/* score and sort key (score * size + slot: distinct, so the sorted order,
 * ties by slot, does not depend on the sort) of every individual. */
/* The sort of a generation orders each island by score, ties by index
 * (the CPU's order).  Narrow (gpu_block's narrow_shift > 0, when island
 * and score fit in 31 bits): one stable radix sort of all the block's
 * 32-bit keys, island above score, carrying each individual's index
 * (stability orders ties by index), three digit passes for the mouse eye;
 * else a segmented sort of 64-bit keys score * size + index in island.
 * The segmented sort's block per island took 140 us a generation on one
 * GPU and as long on each of two. */
static __device__ __forceinline__ void put_key(uint64_t *keys, int64_t s, int64_t k, int size,
                                               int narrow_shift) {
  if (narrow_shift) ((uint32_t *)keys)[k] = (uint32_t)(((k / size) << narrow_shift) | s);
  else keys[k] = (uint64_t)s * (uint64_t)size + (uint64_t)(k % size);
}

/* The best score of island isl from the sorted keys. */
static __device__ __forceinline__ uint64_t best_of(const uint64_t *sorted, int isl, int size, int narrow_shift) {
  if (narrow_shift) return ((const uint32_t *)sorted)[(int64_t)isl * size] & ((1u << narrow_shift) - 1u);
  return sorted[(int64_t)isl * size] / (uint64_t)size;
}

static __global__ void eval_kernel(sbg_grn_problem pb, grn_pop pop, int size, int narrow_shift,
                                   int64_t *score, uint64_t *keys, const int *stop) {
  if (stop && *stop) return;
  int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= pop.count) return;
  int64_t s = grn_evaluate(&pb, grn_view_at(&pop, pb.n, pb.w, k), NULL, NULL);
  score[k] = s;
  if (keys) put_key(keys, s, k, size, narrow_shift);
}

/* The segmented sort's keys -> global indices, best first per island. */
static __global__ void order_kernel(const uint64_t *sorted, int64_t pop, int size, int32_t *ord,
                                    const int *stop) {
  if (*stop) return;
  int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= pop) return;
  ord[p] = (int32_t)((p / size) * size + (int64_t)(sorted[p] % (uint64_t)size));
}

/* The end of a generation as island_sort_kernel takes it (history NULL:
 * the sort alone); finish_kernel's work. */
typedef struct grn_finish {
  int64_t gen, row0, rows, target;
  double *history;
  int64_t *gens_done;
  unsigned long long *best; /* the islands' least score so far (all ones between generations) */
  unsigned *done;           /* islands done (0 between generations) */
} grn_finish;

/* The narrow sort of islands of 256 to 16,384 individuals, at most
 * THREADS x ITEMS: a block an island, its keys and indices sorted in shared
 * memory by the score bits alone (an island's keys share their island
 * bits), 5 bits a pass.  The same order as the sort of the whole array
 * (both stable: ties keep the index order), in one launch instead of the
 * device-wide radix sort's five, which took 65-77 us a generation on an
 * H200 for 2^19 or 2^20 individuals: mostly a fixed cost, which a second
 * GPU did not shorten.  With it the mouse eye's 2^20 individuals (64
 * islands) ran 1,000 generations about 0.03 s faster on one H200 and on
 * two.  Smaller islands keep the device-wide sort: a block each would sort
 * mostly padding.  Padding keys (all ones) follow the island's own, whose
 * top bit is 0 (narrow keys have at most 31 bits).  With fin.history, the
 * generation's end too (finish_kernel's work, see gpu_block_sort). */
template <int THREADS, int ITEMS>
static __global__ void __launch_bounds__(THREADS) island_sort_kernel(const uint32_t *keys, uint32_t *sorted,
                                                                     int32_t *ord, int size, int score_bits,
                                                                     int *stop, grn_finish fin) {
  typedef cub::BlockLoad<uint32_t, THREADS, ITEMS, cub::BLOCK_LOAD_TRANSPOSE> LoadK;
  typedef cub::BlockRadixSort<uint32_t, THREADS, ITEMS, int32_t, 5> Sort;
  extern __shared__ __align__(16) unsigned char island_smem[];
  if (stop && *stop) return;
  typename LoadK::TempStorage &lt = *reinterpret_cast<typename LoadK::TempStorage *>(island_smem);
  typename Sort::TempStorage &st = *reinterpret_cast<typename Sort::TempStorage *>(island_smem);
  const int64_t base = (int64_t)blockIdx.x * size;
  uint32_t k[ITEMS];
  int32_t v[ITEMS];
  LoadK(lt).Load(keys + base, k, size, ~0u);
  for (int j = 0; j < ITEMS; j++) v[j] = (int32_t)(base + threadIdx.x * ITEMS + j);
  __syncthreads();
  Sort(st).SortBlockedToStriped(k, v, 0, score_bits);
  for (int j = 0; j < ITEMS; j++) {
    int i = j * THREADS + threadIdx.x;
    if (i < size) {
      sorted[base + i] = k[j];
      ord[base + i] = v[j];
    }
  }
  if (threadIdx.x != 0 || !fin.history) return;
  const unsigned long long s = k[0] & ((1u << score_bits) - 1u);
  fin.history[(int64_t)blockIdx.x * fin.rows + fin.gen - fin.row0] = (double)s;
  atomicMin(fin.best, s);
  __threadfence();
  if (atomicAdd(fin.done, 1u) != gridDim.x - 1) return;
  __threadfence();
  const unsigned long long best = atomicExch(fin.best, ~0ull);
  *fin.done = 0;
  *fin.gens_done = fin.gen;
  if (fin.target >= 0 && best <= (unsigned long long)fin.target) *stop = 1;
}

template <int THREADS, int ITEMS>
static size_t island_sort_smem() {
  typedef cub::BlockLoad<uint32_t, THREADS, ITEMS, cub::BLOCK_LOAD_TRANSPOSE> LoadK;
  typedef cub::BlockRadixSort<uint32_t, THREADS, ITEMS, int32_t, 5> Sort;
  return sizeof(typename Sort::TempStorage) > sizeof(typename LoadK::TempStorage) ? sizeof(typename Sort::TempStorage)
                                                                                   : sizeof(typename LoadK::TempStorage);
}

/* 0, 1, ..., n - 1: the indices the narrow sort carries. */
static __global__ void iota_kernel(int32_t *x, int64_t n) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = (int32_t)i;
}

/* End of generation `gen` (history row gen - row0): history, generations
 * done, stop on target (the block's own best).  One warp, islands spread
 * over its lanes: a lone thread's loop of dependent loads took 35 us a
 * generation, which a second GPU did not shorten. */
static __global__ void finish_kernel(const uint64_t *sorted, int islands, int size, int narrow_shift,
                                     int64_t gen, int64_t row0, int64_t rows, int64_t target,
                                     double *history, int *stop, int64_t *gens_done) {
  if (*stop) return;
  uint64_t best = ~(uint64_t)0;
  for (int isl = threadIdx.x; isl < islands; isl += 32) {
    uint64_t s = best_of(sorted, isl, size, narrow_shift);
    history[(int64_t)isl * rows + gen - row0] = (double)s;
    if (s < best) best = s;
  }
  for (int off = 16; off > 0; off >>= 1) {
    uint64_t o = __shfl_down_sync(0xffffffffu, best, off);
    if (o < best) best = o;
  }
  if (threadIdx.x != 0) return;
  *gens_done = gen;
  if (target >= 0 && best <= (uint64_t)target) *stop = 1;
}

/* Element e of an individual, copied by one thread: e < n w a word of
 * act and of rep, then the n rule bytes.  The migration and transfer
 * kernels below run a thread per (individual, element): a thread per
 * individual made each copy a chain of strided loads (the device layout
 * interleaves individuals), 40-60 us a kernel whatever the islands.
 * Element-major: neighbouring threads take neighbouring individuals, whose
 * words are neighbours in the device layout. */
static __device__ __forceinline__ void copy_element(const sbg_grn_problem *pb, grn_view dst, grn_view src,
                                                    int e) {
  const int nw = pb->n * pb->w;
  if (e < nw) {
    GRN_ACT(dst, e) = GRN_ACT(src, e);
    GRN_REP(dst, e) = GRN_REP(src, e);
  } else {
    GRN_RULE(dst, e - nw) = GRN_RULE(src, e - nw);
  }
}
static __host__ __device__ int elements_of(const sbg_grn_problem *pb) { return pb->n * pb->w + pb->n; }

/* Ring migration in two passes through a snapshot, so that every island
 * sends what it had before any island received. */
static __global__ void migrate_gather(sbg_grn_problem pb, grn_pop pop, grn_pop mig,
                                      const int64_t *score, int64_t *mig_score,
                                      const int32_t *ord, int islands, int size, int migrants,
                                      const int *stop) {
  if (*stop) return;
  const int E = elements_of(&pb);
  int64_t te = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (te >= (int64_t)islands * migrants * E) return;
  int t = (int)(te % (islands * migrants)), e = (int)(te / (islands * migrants));
  int isl = t / migrants, r = t % migrants;
  int64_t src = ord[(int64_t)isl * size + r];
  copy_element(&pb, grn_view_at(&mig, pb.n, pb.w, t), grn_view_at(&pop, pb.n, pb.w, src), e);
  if (e == 0) mig_score[t] = score[src];
}

static __global__ void migrate_scatter(sbg_grn_problem pb, grn_pop pop, grn_pop mig,
                                       int64_t *score, const int64_t *mig_score,
                                       const int32_t *ord, uint64_t *keys, int islands,
                                       int size, int narrow_shift, int migrants, const int *stop) {
  if (*stop) return;
  const int E = elements_of(&pb);
  int64_t te = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (te >= (int64_t)islands * migrants * E) return;
  int t = (int)(te % (islands * migrants)), e = (int)(te / (islands * migrants));
  int isl = t / migrants, r = t % migrants, to = (isl + 1) % islands;
  int64_t dst = ord[(int64_t)to * size + size - 1 - r];
  copy_element(&pb, grn_view_at(&pop, pb.n, pb.w, dst), grn_view_at(&mig, pb.n, pb.w, t), e);
  if (e != 0) return;
  score[dst] = mig_score[t];
  put_key(keys, mig_score[t], dst, size, narrow_shift);
}

/* Cumulative roulette weights of each island in sorted order: one block
 * per island; integer sums, so the result is that of the CPU's loop. */
#define GRN_SCAN_THREADS 256
static __global__ void roulette_kernel(const int64_t *score, const int32_t *ord, int size,
                                       uint64_t *cum, const int *stop) {
  if (*stop) return;
  typedef cub::BlockScan<unsigned long long, GRN_SCAN_THREADS> scan_t;
  __shared__ typename scan_t::TempStorage tmp;
  __shared__ unsigned long long carry;
  int64_t base = (int64_t)blockIdx.x * size;
  if (threadIdx.x == 0) carry = 0;
  __syncthreads();
  for (int t0 = 0; t0 < size; t0 += GRN_SCAN_THREADS) {
    int r = t0 + threadIdx.x;
    unsigned long long wgt = r < size ? grn_weight(score[ord[base + r]]) : 0ull, incl, total;
    scan_t(tmp).InclusiveSum(wgt, incl, total);
    if (r < size) cum[base + r] = carry + incl;
    __syncthreads();
    if (threadIdx.x == 0) carry += total;
    __syncthreads();
  }
}

/* The block's pairs (src.count / 2); koff its first individual's global
 * index.  Eight blocks an SM (64 registers, some spilled) rather than the five
 * that 96 registers allowed: the breeding gathers its parents' words from
 * memory, and more warps hide those loads (the mouse eye's 2^20
 * individuals: 1,000 generations in 1.17 s instead of 1.34 s on one H200,
 * the planted 256-gene network's unchanged).  The launch is 128 threads. */
static __global__ void __launch_bounds__(128, 8) breed_kernel(sbg_grn_problem pb, sbg_grn_params gp, grn_pop src,
                                    grn_pop dst, const int32_t *ord, const uint64_t *cum,
                                    int64_t gen, int64_t koff, const int *stop) {
  if (*stop) return;
  int64_t q = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  int half = (int)(gp.pop / gp.islands) / 2;
  if (q >= src.count / 2) return;
  grn_breed_pair(&pb, &gp, &src, &dst, ord, cum, (int)(q / half), (int)(q % half), gen, koff);
}

/* Individuals slot0 .. slot0 + cnt - 1 of a device population to the CPU
 * layout (individual i contiguous), with their scores (score[slot]); one
 * thread per individual (migrants and BPPARAM states only). */
static __global__ void pack_kernel(sbg_grn_problem pb, grn_pop pop, int64_t slot0, int64_t cnt,
                                   const int64_t *score, uint32_t *act, uint32_t *rep,
                                   uint8_t *rule, int64_t *score_out) {
  const int E = elements_of(&pb);
  int64_t ie = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (ie >= cnt * E) return;
  int64_t i = ie % cnt;
  int e = (int)(ie / cnt);
  grn_view v = grn_view_at(&pop, pb.n, pb.w, slot0 + i);
  int64_t nw = (int64_t)pb.n * pb.w;
  if (e < nw) {
    act[i * nw + e] = GRN_ACT(v, e);
    rep[i * nw + e] = GRN_REP(v, e);
  } else {
    rule[i * pb.n + e - nw] = GRN_RULE(v, e - nw);
  }
  if (e == 0 && score && score_out) score_out[i] = score[slot0 + i];
}

/* The reverse: CPU layout into slots slot0 .. of a device population (and
 * the scores, where given). */
static __global__ void unpack_kernel(sbg_grn_problem pb, grn_pop pop, int64_t slot0, int64_t cnt,
                                     const uint32_t *act, const uint32_t *rep, const uint8_t *rule,
                                     const int64_t *score_in, int64_t *score) {
  const int E = elements_of(&pb);
  int64_t ie = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (ie >= cnt * E) return;
  int64_t i = ie % cnt;
  int e = (int)(ie / cnt);
  grn_view v = grn_view_at(&pop, pb.n, pb.w, slot0 + i);
  int64_t nw = (int64_t)pb.n * pb.w;
  if (e < nw) {
    GRN_ACT(v, e) = act[i * nw + e];
    GRN_REP(v, e) = rep[i * nw + e];
  } else {
    GRN_RULE(v, e - nw) = rule[i * pb.n + e - nw];
  }
  if (e == 0 && score_in && score) score[slot0 + i] = score_in[i];
}

/* One individual of a device population into a contiguous host layout. */
static __global__ void gather_kernel(sbg_grn_problem pb, grn_pop pop, int64_t k, uint32_t *act,
                                     uint32_t *rep, uint8_t *rule) {
  grn_view v = grn_view_at(&pop, pb.n, pb.w, k);
  int nw = pb.n * pb.w;
  for (int e = threadIdx.x; e < nw; e += blockDim.x) {
    act[e] = GRN_ACT(v, e);
    rep[e] = GRN_REP(v, e);
  }
  for (int i = threadIdx.x; i < pb.n; i += blockDim.x) rule[i] = GRN_RULE(v, i);
}

static unsigned blocks_for(int64_t n, int threads) {
  return (unsigned)((n + threads - 1) / threads);
}

/* A population on the device, interleaved (soa = 1). */
static sbg_status pop_device_alloc(grn_pop *p, int64_t count, int n, int w, const char *what,
                                   sbg_ctx *ctx) {
  sbg_status st;
  size_t words = (size_t)count * n * w;
  p->count = count;
  p->soa = 1;
  st = sbg_device_alloc((void **)&p->act, words * sizeof(uint32_t), what, ctx);
  if (st == SBG_OK) st = sbg_device_alloc((void **)&p->rep, words * sizeof(uint32_t), what, ctx);
  if (st == SBG_OK) st = sbg_device_alloc((void **)&p->rule, (size_t)count * n, what, ctx);
  return st;
}

static void pop_device_free(grn_pop *p) {
  cudaFree(p->act);
  cudaFree(p->rep);
  cudaFree(p->rule);
  p->act = p->rep = NULL;
  p->rule = NULL;
}

/* The problem's arrays on the device; `d` gets the same fields with device
 * pointers, for passing to kernels by value. */
static sbg_status problem_to_device(const sbg_grn_problem *pb, sbg_grn_problem *d,
                                    uint32_t **buf, cudaStream_t stream, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  size_t nw = (size_t)pb->n * pb->w;
  size_t words = 2 * nw + 2 * (size_t)pb->w;
  *d = *pb;
  d->lut = NULL; /* the GPU computes the rules */
  SBG_TRY(sbg_device_alloc((void **)buf, words * sizeof(uint32_t), "the reference network", ctx));
  SBG_CUDA_CHECK(cudaMemcpyAsync(*buf, pb->ref_act, nw * 4, cudaMemcpyHostToDevice, stream));
  SBG_CUDA_CHECK(cudaMemcpyAsync(*buf + nw, pb->ref_rep, nw * 4, cudaMemcpyHostToDevice, stream));
  SBG_CUDA_CHECK(cudaMemcpyAsync(*buf + 2 * nw, pb->from, pb->w * 4, cudaMemcpyHostToDevice, stream));
  SBG_CUDA_CHECK(cudaMemcpyAsync(*buf + 2 * nw + pb->w, pb->to, pb->w * 4, cudaMemcpyHostToDevice, stream));
  d->ref_act = *buf;
  d->ref_rep = *buf + nw;
  d->from = *buf + 2 * nw;
  d->to = *buf + 2 * nw + pb->w;
done:
  return st;
}

static int bits_for(uint64_t x) {
  int b = 0;
  while (b < 64 && (x >> b) != 0) b++;
  return b < 1 ? 1 : b;
}

/* A block of islands [first, first + count) on one device: the state of a
 * run (or of a BPPARAM round) kept on the device.  Streams use global
 * indices (koff), so that any split of the islands gives the single run.
 * The stop flag is the block's own: set when its best <= the target. */
typedef struct gpu_block {
  /* narrow_shift: the score's bits when the narrow sort is used, else 0
   * (see put_key) */
  int dev, first, count, size, K, end_bit, narrow_shift;
  int64_t np, koff, rows, row0;
  cudaStream_t stream;
  sbg_grn_problem dpb;
  uint32_t *d_prob;
  grn_pop buf[2], mig;
  int64_t *d_score, *d_mig_score, *d_gens;
  uint64_t *d_keys, *d_sorted, *d_cum;
  int32_t *d_ord, *d_offsets, *d_idx;
  int *d_stop;
  unsigned long long *d_fin_best; /* grn_finish's best, then its count of islands done */
  double *d_hist;
  void *d_temp;
  size_t temp_bytes;
  uint32_t *d_xfer;     /* K migrants in the CPU layout (see xfer_*) */
  uint32_t *h_xfer[2];  /* pinned host copies, by parity of the migration's
                           number (xfer_buf): the host reads one while the
                           next device may still copy from the other */
  int64_t *h_flags;     /* pinned: [0] the stop flag (an int), [1] gens done */
  cudaEvent_t ev_out[2]; /* by parity: h_xfer[par] written (this block's copy out) */
  cudaEvent_t ev_in[2];  /* by parity: the previous block's h_xfer[par] read */
  int stop;             /* host copies of the flag and generations done */
  int64_t gens_done;
} gpu_block;

/* The migrants' transfer buffer: act (K n w words), rep, scores (K int64),
 * rules (K n bytes). */
static size_t xfer_words(int K, int n, int w) {
  return 2 * (size_t)K * n * w + 2 * (size_t)K + ((size_t)K * n + 3) / 4 + 1;
}
static int xfer_buf(int64_t g, int interval) { return (int)((g / interval) & 1); }
#define XFER_ACT(b, K, nw) (b)
#define XFER_REP(b, K, nw) ((b) + (size_t)(K) * (nw))
#define XFER_SCORE(b, K, nw) ((int64_t *)((b) + 2 * (size_t)(K) * (nw)))
#define XFER_RULE(b, K, nw) ((uint8_t *)((b) + 2 * (size_t)(K) * (nw) + 2 * (size_t)(K)))

static void gpu_block_free(gpu_block *b) {
  if (!b->stream && !b->d_prob) return;
  cudaSetDevice(b->dev);
  if (b->stream) cudaStreamSynchronize(b->stream);
  cudaFree(b->d_prob);
  pop_device_free(&b->buf[0]);
  pop_device_free(&b->buf[1]);
  pop_device_free(&b->mig);
  cudaFree(b->d_score); cudaFree(b->d_mig_score); cudaFree(b->d_gens);
  cudaFree(b->d_keys); cudaFree(b->d_sorted); cudaFree(b->d_cum);
  cudaFree(b->d_ord); cudaFree(b->d_offsets); cudaFree(b->d_idx); cudaFree(b->d_stop);
  cudaFree(b->d_hist); cudaFree(b->d_temp); cudaFree(b->d_xfer); cudaFree(b->d_fin_best);
  cudaFreeHost(b->h_xfer[0]);
  cudaFreeHost(b->h_xfer[1]);
  for (int par = 0; par < 2; par++) {
    if (b->ev_out[par]) cudaEventDestroy(b->ev_out[par]);
    if (b->ev_in[par]) cudaEventDestroy(b->ev_in[par]);
  }
  cudaFreeHost(b->h_flags);
  if (b->stream) cudaStreamDestroy(b->stream);
  memset(b, 0, sizeof(*b));
}

/* The narrow sort's key bits: the score's and the island's. */
static int narrow_bits(const gpu_block *b) {
  return b->narrow_shift + (b->count > 1 ? bits_for((uint64_t)b->count - 1) : 0);
}

/* Whether a block's islands are sorted a CUDA block each
 * (island_sort_kernel): narrow keys, 256 to 16,384 individuals. */
static int island_sorted(const gpu_block *b) { return b->narrow_shift && b->size >= 256 && b->size <= 16384; }

/* island_sort_kernel in one shape: with `setup` (once, on the block's
 * device) it is allowed the shape's shared memory; otherwise launched. */
template <int THREADS, int ITEMS>
static cudaError_t island_sort_shape(const gpu_block *b, int setup, const grn_finish *fin) {
  const size_t smem = island_sort_smem<THREADS, ITEMS>();
  if (setup)
    return cudaFuncSetAttribute(island_sort_kernel<THREADS, ITEMS>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                (int)smem);
  island_sort_kernel<THREADS, ITEMS><<<b->count, THREADS, smem, b->stream>>>(
      (const uint32_t *)b->d_keys, (uint32_t *)b->d_sorted, b->d_ord, b->size, b->narrow_shift, b->d_stop, *fin);
  return cudaGetLastError();
}

/* The shape for the block's island size: 128 x 8 up to 1,024 individuals,
 * 256 x 16 up to 4,096, 512 x 32 up to 16,384 (1,024 x 16 spilled more
 * registers and took 37 us a generation against 29 us for the mouse eye's
 * islands of 16,384 on an H200). */
static cudaError_t island_sort(const gpu_block *b, int setup, const grn_finish *fin) {
  if (b->size <= 1024) return island_sort_shape<128, 8>(b, setup, fin);
  if (b->size <= 4096) return island_sort_shape<256, 16>(b, setup, fin);
  return island_sort_shape<512, 32>(b, setup, fin);
}

/* Device `dev` gets islands [first, first + count) and a history of `rows`
 * rows from generation row0. */
static sbg_status gpu_block_alloc(gpu_block *b, const sbg_grn_problem *pb,
                                  const sbg_grn_params *gp, int dev, int first, int count,
                                  int64_t row0, int64_t rows, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  const int n = pb->n, w = pb->w;
  int32_t *h_off = NULL;
  memset(b, 0, sizeof(*b));
  b->dev = dev;
  b->first = first;
  b->count = count;
  b->size = (int)(gp->pop / gp->islands);
  b->K = gp->islands > 1 ? gp->migrants : 0;
  b->np = (int64_t)count * b->size;
  b->koff = (int64_t)first * b->size;
  b->row0 = row0;
  b->rows = rows;
  const uint64_t max_score = (uint64_t)pb->wn * n + (uint64_t)pb->wl * n * n;
  b->end_bit = bits_for(max_score * (uint64_t)b->size + (uint64_t)b->size);
  {
    const int score_bits = bits_for(max_score);
    b->narrow_shift = score_bits + (count > 1 ? bits_for((uint64_t)count - 1) : 0) <= 31 ? score_bits : 0;
  }
  const size_t np = (size_t)b->np, nk = (size_t)count * b->K + 1;
  SBG_TRY(sbg_device_select(dev, ctx));
  SBG_CUDA_CHECK(cudaStreamCreateWithFlags(&b->stream, cudaStreamNonBlocking));
  for (int par = 0; par < 2; par++) {
    SBG_CUDA_CHECK(cudaEventCreateWithFlags(&b->ev_out[par], cudaEventDisableTiming));
    SBG_CUDA_CHECK(cudaEventCreateWithFlags(&b->ev_in[par], cudaEventDisableTiming));
  }
  SBG_TRY(problem_to_device(pb, &b->dpb, &b->d_prob, b->stream, ctx));
  SBG_TRY(pop_device_alloc(&b->buf[0], b->np, n, w, "the population", ctx));
  SBG_TRY(pop_device_alloc(&b->buf[1], b->np, n, w, "the population", ctx));
  SBG_TRY(pop_device_alloc(&b->mig, (int64_t)nk, n, w, "the migrants", ctx));
  SBG_TRY(sbg_device_alloc((void **)&b->d_score, np * sizeof(int64_t), "the scores", ctx));
  SBG_TRY(sbg_device_alloc((void **)&b->d_mig_score, nk * sizeof(int64_t), "the migrants", ctx));
  SBG_TRY(sbg_device_alloc((void **)&b->d_keys, np * sizeof(uint64_t), "the sort keys", ctx));
  SBG_TRY(sbg_device_alloc((void **)&b->d_sorted, np * sizeof(uint64_t), "the sort keys", ctx));
  SBG_TRY(sbg_device_alloc((void **)&b->d_cum, np * sizeof(uint64_t), "the roulette", ctx));
  SBG_TRY(sbg_device_alloc((void **)&b->d_ord, np * sizeof(int32_t), "the order", ctx));
  SBG_TRY(sbg_device_alloc((void **)&b->d_offsets, (count + 1) * sizeof(int32_t), "the islands", ctx));
  SBG_TRY(sbg_device_alloc((void **)&b->d_stop, sizeof(int), "the stop flag", ctx));
  SBG_TRY(sbg_device_alloc((void **)&b->d_gens, sizeof(int64_t), "the stop flag", ctx));
  SBG_TRY(sbg_device_alloc((void **)&b->d_hist, (size_t)rows * count * sizeof(double), "the fitness history", ctx));
  SBG_TRY(sbg_device_alloc((void **)&b->d_xfer, xfer_words(b->K, n, w) * sizeof(uint32_t), "the migrants", ctx));
  SBG_CUDA_CHECK(cudaMallocHost((void **)&b->h_xfer[0], xfer_words(b->K, n, w) * sizeof(uint32_t)));
  SBG_CUDA_CHECK(cudaMallocHost((void **)&b->h_xfer[1], xfer_words(b->K, n, w) * sizeof(uint32_t)));
  SBG_CUDA_CHECK(cudaMallocHost((void **)&b->h_flags, 2 * sizeof(int64_t)));
  memset(b->h_flags, 0, 2 * sizeof(int64_t));
  SBG_CUDA_CHECK(cudaMallocHost((void **)&h_off, (count + 1) * sizeof(int32_t)));
  for (int i = 0; i <= count; i++) h_off[i] = (int32_t)((int64_t)i * b->size);
  SBG_CUDA_CHECK(cudaMemcpyAsync(b->d_offsets, h_off, (count + 1) * sizeof(int32_t), cudaMemcpyHostToDevice, b->stream));
  SBG_CUDA_CHECK(cudaMemsetAsync(b->d_stop, 0, sizeof(int), b->stream));
  SBG_CUDA_CHECK(cudaMemsetAsync(b->d_gens, 0, sizeof(int64_t), b->stream));
  if (b->narrow_shift) {
    SBG_TRY(sbg_device_alloc((void **)&b->d_idx, np * sizeof(int32_t), "the sort's indices", ctx));
    iota_kernel<<<blocks_for(b->np, 256), 256, 0, b->stream>>>(b->d_idx, b->np);
    SBG_CUDA_CHECK(cudaGetLastError());
    SBG_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(NULL, b->temp_bytes, (uint32_t *)b->d_keys,
                                                  (uint32_t *)b->d_sorted, b->d_idx, b->d_ord, (int)b->np, 0,
                                                  narrow_bits(b), b->stream));
  } else {
    SBG_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortKeys(NULL, b->temp_bytes, b->d_keys, b->d_sorted,
                                                          (int)b->np, count, b->d_offsets,
                                                          b->d_offsets + 1, 0, b->end_bit, b->stream));
  }
  SBG_TRY(sbg_device_alloc(&b->d_temp, b->temp_bytes + 1, "the sort's scratch space", ctx));
  SBG_TRY(sbg_device_alloc((void **)&b->d_fin_best, sizeof(unsigned long long) + sizeof(unsigned), "the stop flag", ctx));
  SBG_CUDA_CHECK(cudaMemsetAsync(b->d_fin_best, 0xff, sizeof(unsigned long long), b->stream));
  SBG_CUDA_CHECK(cudaMemsetAsync(b->d_fin_best + 1, 0, sizeof(unsigned), b->stream));
  if (island_sorted(b)) {
    grn_finish none;
    memset(&none, 0, sizeof none);
    SBG_CUDA_CHECK(island_sort(b, 1, &none));
  }
  SBG_CUDA_CHECK(cudaStreamSynchronize(b->stream));
done:
  if (h_off) cudaFreeHost(h_off);
  return st;
}

/* The sort of each island; with `finish`, then generation `gen`'s end
 * (history, the block's stop test).  The sort of islands a block each ends
 * the generation itself (its last block to finish takes the stop test)
 * instead of finish_kernel: a launch less a generation, the mouse eye's
 * 1,000 generations 2-3 ms faster on one H200 at 2^18-2^20 individuals. */
static sbg_status gpu_block_sort(gpu_block *b, int finish, int64_t gen, int64_t target, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  const int T = 128;
  if (island_sorted(b)) {
    grn_finish fin;
    memset(&fin, 0, sizeof fin);
    if (finish) {
      fin.gen = gen; fin.row0 = b->row0; fin.rows = b->rows; fin.target = target;
      fin.history = b->d_hist; fin.gens_done = b->d_gens;
      fin.best = b->d_fin_best; fin.done = (unsigned *)(b->d_fin_best + 1);
    }
    SBG_CUDA_CHECK(island_sort(b, 0, &fin));
    return st;
  } else if (b->narrow_shift) {
    /* (a stopped block's keys no longer change: the same order again) */
    SBG_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(b->d_temp, b->temp_bytes, (uint32_t *)b->d_keys,
                                                  (uint32_t *)b->d_sorted, b->d_idx, b->d_ord, (int)b->np, 0,
                                                  narrow_bits(b), b->stream));
  } else {
    SBG_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortKeys(b->d_temp, b->temp_bytes, b->d_keys,
                                                          b->d_sorted, (int)b->np, b->count,
                                                          b->d_offsets, b->d_offsets + 1, 0,
                                                          b->end_bit, b->stream));
    order_kernel<<<blocks_for(b->np, T), T, 0, b->stream>>>(b->d_sorted, b->np, b->size, b->d_ord, b->d_stop);
    SBG_CUDA_CHECK(cudaGetLastError());
  }
  if (finish) {
    finish_kernel<<<1, 32, 0, b->stream>>>(b->d_sorted, b->count, b->size, b->narrow_shift, gen, b->row0, b->rows,
                                           target, b->d_hist, b->d_stop, b->d_gens);
    SBG_CUDA_CHECK(cudaGetLastError());
  }
done:
  return st;
}

/* Generation 0 from the global streams (pop in buf[0]). */
static sbg_status gpu_block_init(gpu_block *b, const sbg_grn_params *gp, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  const int T = 128;
  init_kernel<<<blocks_for(b->np, T), T, 0, b->stream>>>(b->dpb, b->buf[0], gp->seed, gp->pop, b->koff);
  SBG_CUDA_CHECK(cudaGetLastError());
  eval_kernel<<<blocks_for(b->np, T), T, 0, b->stream>>>(b->dpb, b->buf[0], b->size, b->narrow_shift, b->d_score, b->d_keys, b->d_stop);
  SBG_CUDA_CHECK(cudaGetLastError());
  SBG_TRY(gpu_block_sort(b, 1, 0, gp->target, ctx));
done:
  return st;
}

/* Migration at generation g, first half: the snapshot of every island's K
 * best; with `out`, the last island's go to the pinned buffer h_xfer[par]
 * (for the next block), with the stop flag and generations done. */
static sbg_status gpu_block_migrate_out(gpu_block *b, int64_t g, int out, int interval,
                                        sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  const int T = 128, n = b->dpb.n, K = b->K;
  const int64_t nw = (int64_t)n * b->dpb.w;
  grn_pop src = b->buf[(g - 1) & 1];
  migrate_gather<<<blocks_for((int64_t)b->count * K * elements_of(&b->dpb), T), T, 0, b->stream>>>(
      b->dpb, src, b->mig, b->d_score, b->d_mig_score, b->d_ord, b->count, b->size, K, b->d_stop);
  SBG_CUDA_CHECK(cudaGetLastError());
  if (out) {
    uint32_t *x = b->d_xfer;
    pack_kernel<<<blocks_for((int64_t)K * elements_of(&b->dpb), T), T, 0, b->stream>>>(
        b->dpb, b->mig, (int64_t)(b->count - 1) * K, K, b->d_mig_score, XFER_ACT(x, K, nw),
        XFER_REP(x, K, nw), XFER_RULE(x, K, nw), XFER_SCORE(x, K, nw));
    SBG_CUDA_CHECK(cudaGetLastError());
    SBG_CUDA_CHECK(cudaMemcpyAsync(b->h_xfer[xfer_buf(g, interval)], b->d_xfer, xfer_words(K, n, b->dpb.w) * sizeof(uint32_t),
                                   cudaMemcpyDeviceToHost, b->stream));
    SBG_CUDA_CHECK(cudaMemcpyAsync(b->h_flags, b->d_stop, sizeof(int), cudaMemcpyDeviceToHost, b->stream));
  }
done:
  return st;
}

/* Second half: `in` (the previous block's h_xfer, or NULL: the block's own
 * last island, a ring of its own) replaces the last island's snapshot,
 * which goes to the first island; then every island's K to the next. */
static sbg_status gpu_block_migrate_in(gpu_block *b, int64_t g, const uint32_t *in, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  const int T = 128, n = b->dpb.n, K = b->K;
  const int64_t nw = (int64_t)n * b->dpb.w;
  grn_pop src = b->buf[(g - 1) & 1];
  if (in) {
    uint32_t *x = b->d_xfer;
    SBG_CUDA_CHECK(cudaMemcpyAsync(x, in, xfer_words(K, n, b->dpb.w) * sizeof(uint32_t),
                                   cudaMemcpyHostToDevice, b->stream));
    unpack_kernel<<<blocks_for((int64_t)K * elements_of(&b->dpb), T), T, 0, b->stream>>>(
        b->dpb, b->mig, (int64_t)(b->count - 1) * K, K, XFER_ACT(x, K, nw), XFER_REP(x, K, nw),
        XFER_RULE(x, K, nw), XFER_SCORE(x, K, nw), b->d_mig_score);
    SBG_CUDA_CHECK(cudaGetLastError());
  }
  migrate_scatter<<<blocks_for((int64_t)b->count * K * elements_of(&b->dpb), T), T, 0, b->stream>>>(
      b->dpb, src, b->mig, b->d_score, b->d_mig_score, b->d_ord, b->d_keys, b->count, b->size, b->narrow_shift, K,
      b->d_stop);
  SBG_CUDA_CHECK(cudaGetLastError());
  SBG_TRY(gpu_block_sort(b, 0, 0, 0, ctx));
done:
  return st;
}

/* Breeding, evaluation, sort and end of generation g. */
static sbg_status gpu_block_breed(gpu_block *b, const sbg_grn_params *gp, int64_t g, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  const int T = 128;
  grn_pop src = b->buf[(g - 1) & 1], dst = b->buf[g & 1];
  if (gp->roulette) {
    roulette_kernel<<<b->count, GRN_SCAN_THREADS, 0, b->stream>>>(b->d_score, b->d_ord, b->size, b->d_cum, b->d_stop);
    SBG_CUDA_CHECK(cudaGetLastError());
  }
  breed_kernel<<<blocks_for(b->np / 2, T), T, 0, b->stream>>>(b->dpb, *gp, src, dst, b->d_ord, b->d_cum, g,
                                                              b->koff, b->d_stop);
  SBG_CUDA_CHECK(cudaGetLastError());
  eval_kernel<<<blocks_for(b->np, T), T, 0, b->stream>>>(b->dpb, dst, b->size, b->narrow_shift, b->d_score, b->d_keys, b->d_stop);
  SBG_CUDA_CHECK(cudaGetLastError());
  SBG_TRY(gpu_block_sort(b, 1, g, gp->target, ctx));
done:
  return st;
}

/* The block's best at the end (population buf[gen & 1]): its local index
 * and score, ties by lowest island. */
static sbg_status gpu_block_best(gpu_block *b, int64_t *kb, int64_t *sb, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  int32_t *h_ord = (int32_t *)malloc(b->count * sizeof(int32_t));
  int64_t *h_s = (int64_t *)malloc(b->count * sizeof(int64_t));
  if (!h_ord || !h_s) { st = sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate host buffers"); goto done; }
  for (int isl = 0; isl < b->count; isl++)
    SBG_CUDA_CHECK(cudaMemcpyAsync(h_ord + isl, b->d_ord + (int64_t)isl * b->size, sizeof(int32_t),
                                   cudaMemcpyDeviceToHost, b->stream));
  SBG_CUDA_CHECK(cudaStreamSynchronize(b->stream));
  for (int isl = 0; isl < b->count; isl++)
    SBG_CUDA_CHECK(cudaMemcpyAsync(h_s + isl, b->d_score + h_ord[isl], sizeof(int64_t),
                                   cudaMemcpyDeviceToHost, b->stream));
  SBG_CUDA_CHECK(cudaStreamSynchronize(b->stream));
  *kb = h_ord[0];
  *sb = h_s[0];
  for (int isl = 1; isl < b->count; isl++)
    if (h_s[isl] < *sb) { *sb = h_s[isl]; *kb = h_ord[isl]; }
done:
  free(h_ord);
  free(h_s);
  return st;
}

/* The whole run on one or several devices: one block of contiguous islands
 * per device (as even as possible), all driven from this thread (launches
 * are asynchronous, so the devices work together).  One device: migration
 * on the device, no host round trip, the host polls per chunk of
 * generations.  Several: at each migration generation every device sends
 * its last island's K best through pinned host memory to the next device,
 * ordered by events (the host waits only at its polls); the stop test is
 * each device's own, and the run's stop is the earliest (see the end). */
extern "C" sbg_status sbg_grn_evolve_gpu(const sbg_grn_problem *pb, const sbg_grn_params *gp, sbg_grn_result *out,
                                         sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  const int n = pb->n, w = pb->w, I = gp->islands;
  const int64_t G = gp->generations, rows = G + 1;
  const int ND = sbg_ctx_n_devices(ctx) > I ? I : sbg_ctx_n_devices(ctx);
  gpu_block *bl = (gpu_block *)calloc((size_t)ND, sizeof(gpu_block));
  uint32_t *d_best = NULL, *h_best = NULL;
  int64_t g = 0, g_stop = -1;
  double t0 = wall_seconds();
  const int cross = ND > 1 && I > 1 && gp->migrants > 0;

  if (!bl) { st = sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate host buffers"); goto done; }
  for (int d = 0; d < ND; d++) {
    int first = (int)((int64_t)I * d / ND), last = (int)((int64_t)I * (d + 1) / ND);
    int dev = sbg_ctx_device_at(ctx, d);
    SBG_TRY(gpu_block_alloc(&bl[d], pb, gp, dev, first, last - first, 0, rows, ctx));
  }
  for (int d = 0; d < ND; d++) {
    SBG_CUDA_CHECK(cudaSetDevice(bl[d].dev));
    SBG_TRY(gpu_block_init(&bl[d], gp, ctx));
  }

  out->stop_reason = SBG_GRN_STOP_GENERATIONS;
  {
    int64_t chunk = 4;
    int any_stop = 0;
    while (g < G && !any_stop) {
      double tc = wall_seconds();
      int64_t g_end = g + chunk < G ? g + chunk : G;
      while (g < g_end && !any_stop) {
        g++;
        int mig = I > 1 && gp->migrants > 0 && g % gp->migration_interval == 0;
        if (mig && cross) {
          /* Device to device through pinned host buffers, ordered by
           * events, the host never waiting: a block writes h_xfer[par] once
           * the next block has read what it wrote there two migrations
           * ago, and reads the previous block's once it is written.  A
           * block that has stopped sends a stale snapshot: only to
           * generations after the run's stop, which are cut (below). */
          const int par = xfer_buf(g, gp->migration_interval);
          for (int d = 0; d < ND; d++) {
            SBG_CUDA_CHECK(cudaSetDevice(bl[d].dev));
            SBG_CUDA_CHECK(cudaStreamWaitEvent(bl[d].stream, bl[(d + 1) % ND].ev_in[par], 0));
            SBG_TRY(gpu_block_migrate_out(&bl[d], g, 1, gp->migration_interval, ctx));
            SBG_CUDA_CHECK(cudaEventRecord(bl[d].ev_out[par], bl[d].stream));
          }
          for (int d = 0; d < ND; d++) {
            const int prev = (d + ND - 1) % ND;
            SBG_CUDA_CHECK(cudaSetDevice(bl[d].dev));
            SBG_CUDA_CHECK(cudaStreamWaitEvent(bl[d].stream, bl[prev].ev_out[par], 0));
            SBG_TRY(gpu_block_migrate_in(&bl[d], g, bl[prev].h_xfer[par], ctx));
            SBG_CUDA_CHECK(cudaEventRecord(bl[d].ev_in[par], bl[d].stream));
          }
        }
        for (int d = 0; d < ND; d++) {
          SBG_CUDA_CHECK(cudaSetDevice(bl[d].dev));
          if (mig && !cross) {
            SBG_TRY(gpu_block_migrate_out(&bl[d], g, 0, gp->migration_interval, ctx));
            SBG_TRY(gpu_block_migrate_in(&bl[d], g, NULL, ctx));
          }
          SBG_TRY(gpu_block_breed(&bl[d], gp, g, ctx));
        }
      }
      for (int d = 0; d < ND; d++) {
        SBG_CUDA_CHECK(cudaSetDevice(bl[d].dev));
        SBG_CUDA_CHECK(cudaMemcpyAsync(bl[d].h_flags, bl[d].d_stop, sizeof(int), cudaMemcpyDeviceToHost, bl[d].stream));
      }
      for (int d = 0; d < ND; d++) {
        SBG_CUDA_CHECK(cudaSetDevice(bl[d].dev));
        SBG_CUDA_CHECK(cudaStreamSynchronize(bl[d].stream));
        any_stop |= *(int *)bl[d].h_flags;
      }
      if (any_stop) break;
      double t = wall_seconds();
      if (gp->time_limit > 0 && t - t0 >= gp->time_limit) { out->stop_reason = SBG_GRN_STOP_TIME; break; }
      double frac = (double)g / (double)G;
      if (gp->time_limit > 0 && (t - t0) / gp->time_limit > frac) frac = (t - t0) / gp->time_limit;
      SBG_TRY(sbg_poll(ctx, frac));
      /* chunks of about 0.1 s between polls */
      if (t - tc < 0.05 && chunk < (1 << 20)) chunk *= 2;
    }
  }
  for (int d = 0; d < ND; d++) {
    SBG_CUDA_CHECK(cudaSetDevice(bl[d].dev));
    SBG_CUDA_CHECK(cudaMemcpyAsync(&bl[d].gens_done, bl[d].d_gens, sizeof(int64_t), cudaMemcpyDeviceToHost, bl[d].stream));
    SBG_CUDA_CHECK(cudaMemcpyAsync(&bl[d].stop, bl[d].d_stop, sizeof(int), cudaMemcpyDeviceToHost, bl[d].stream));
    SBG_CUDA_CHECK(cudaStreamSynchronize(bl[d].stream));
  }
  /* The single run stops at the first generation where any island reaches
   * the target: the earliest of the blocks' own stops.  Blocks that ran
   * past it are cut there (their earlier history rows hold), and the best
   * lies in a block that stopped there (the others' are above the target). */
  for (int d = 0; d < ND; d++)
    if (bl[d].stop && (g_stop < 0 || bl[d].gens_done < g_stop)) g_stop = bl[d].gens_done;
  if (g_stop >= 0) {
    out->stop_reason = SBG_GRN_STOP_TARGET;
  } else {
    g_stop = bl[0].gens_done;
  }
  out->generations_run = g_stop;
  for (int d = 0; d < ND; d++) {
    SBG_CUDA_CHECK(cudaSetDevice(bl[d].dev));
    for (int isl = 0; isl < bl[d].count; isl++)
      SBG_CUDA_CHECK(cudaMemcpyAsync(out->history + (int64_t)(bl[d].first + isl) * rows,
                                     bl[d].d_hist + (int64_t)isl * rows, (g_stop + 1) * sizeof(double),
                                     cudaMemcpyDeviceToHost, bl[d].stream));
    SBG_CUDA_CHECK(cudaStreamSynchronize(bl[d].stream));
  }
  {
    /* the best of all islands, ties by index, among the blocks at g_stop */
    int db = -1;
    int64_t kb = 0, sb = 0;
    for (int d = 0; d < ND; d++) {
      if (bl[d].gens_done != g_stop) continue;
      int64_t k = 0, s = 0;
      SBG_CUDA_CHECK(cudaSetDevice(bl[d].dev));
      SBG_TRY(gpu_block_best(&bl[d], &k, &s, ctx));
      if (db < 0 || s < sb) { db = d; kb = k; sb = s; }
    }
    if (db < 0) { st = sbg_fail(ctx, SBG_ERR_INTERNAL, "no device at the last generation"); goto done; }
    gpu_block *b = &bl[db];
    size_t nw = (size_t)n * w;
    SBG_CUDA_CHECK(cudaSetDevice(b->dev));
    SBG_TRY(sbg_device_alloc((void **)&d_best, (2 * nw + n + 4) * sizeof(uint32_t), "the best network", ctx));
    h_best = (uint32_t *)malloc((2 * nw + n + 4) * sizeof(uint32_t));
    if (!h_best) { st = sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate host buffers"); goto done; }
    gather_kernel<<<1, 256, 0, b->stream>>>(b->dpb, b->buf[g_stop & 1], kb, d_best, d_best + nw,
                                            (uint8_t *)(d_best + 2 * nw));
    SBG_CUDA_CHECK(cudaGetLastError());
    SBG_CUDA_CHECK(cudaMemcpyAsync(h_best, d_best, (2 * nw + n + 4) * sizeof(uint32_t), cudaMemcpyDeviceToHost, b->stream));
    SBG_CUDA_CHECK(cudaStreamSynchronize(b->stream));
    grn_view v = {h_best, h_best + nw, (uint8_t *)(h_best + 2 * nw), 1};
    out->best_score = grn_evaluate(pb, v, &out->best_dn, &out->best_dl);
    for (int i = 0; i < n; i++) {
      for (int j = 0; j < n; j++) out->best_links[i + (int64_t)j * n] = grn_link_get(pb, v, i, j);
      out->best_rules[i] = GRN_RULE(v, i);
    }
  }
done:
  if (d_best) cudaFree(d_best); /* on the device current when it was allocated */
  if (bl)
    for (int d = 0; d < ND; d++) gpu_block_free(&bl[d]);
  free(bl);
  free(h_best);
  return st;
}

/* One BPPARAM worker's round on ctx->device (see sbg_grn_round in grn.h):
 * the state goes up in the CPU layout and is evaluated again (the scores
 * are a function of the individual), the generations run as on the whole
 * run's device, and the state comes back. */
extern "C" sbg_status sbg_grn_round_gpu(const sbg_grn_problem *pb, const sbg_grn_params *gp,
                                        sbg_grn_round *rd, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  const int n = pb->n, w = pb->w, T = 128;
  const int64_t nw = (int64_t)n * w, rows = rd->g_to - rd->g_from + 1;
  gpu_block b;
  uint32_t *d_state = NULL;
  int64_t *h_score = NULL, g = rd->g_from;
  int32_t *h_ord = NULL;
  const int64_t np = (int64_t)rd->count * (gp->pop / gp->islands);
  const int64_t K = gp->islands > 1 ? gp->migrants : 0;
  /* the state in the CPU layout: act, rep, scores (int64), rules */
  const size_t words = 2 * (size_t)np * nw + 2 * (size_t)np + ((size_t)np * n + 3) / 4 + 1;
  memset(&b, 0, sizeof(b));
  SBG_TRY(gpu_block_alloc(&b, pb, gp, ctx->device, rd->first, rd->count, rd->g_from, rows, ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_state, words * sizeof(uint32_t), "the population", ctx));
  h_score = (int64_t *)malloc(((size_t)np + 1) * sizeof(int64_t));
  h_ord = (int32_t *)malloc(((size_t)K + 1) * sizeof(int32_t));
  if (!h_score || !h_ord) { st = sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate host buffers"); goto done; }
  for (int64_t e = 0; e < rows * rd->count; e++) rd->history[e] = NAN;
  {
    uint32_t *s_act = d_state, *s_rep = d_state + np * nw;
    int64_t *s_score = (int64_t *)(d_state + 2 * np * nw);
    uint8_t *s_rule = (uint8_t *)(d_state + 2 * np * nw + 2 * np);
    if (rd->init) {
      SBG_TRY(gpu_block_init(&b, gp, ctx));
    } else {
      SBG_CUDA_CHECK(cudaMemcpyAsync(s_act, rd->state.act, np * nw * 4, cudaMemcpyHostToDevice, b.stream));
      SBG_CUDA_CHECK(cudaMemcpyAsync(s_rep, rd->state.rep, np * nw * 4, cudaMemcpyHostToDevice, b.stream));
      SBG_CUDA_CHECK(cudaMemcpyAsync(s_rule, rd->state.rule, np * n, cudaMemcpyHostToDevice, b.stream));
      grn_pop p0 = b.buf[g & 1];
      unpack_kernel<<<blocks_for((int64_t)np * elements_of(&b.dpb), T), T, 0, b.stream>>>(b.dpb, p0, 0, np, s_act, s_rep, s_rule, NULL, NULL);
      SBG_CUDA_CHECK(cudaGetLastError());
      eval_kernel<<<blocks_for(np, T), T, 0, b.stream>>>(b.dpb, p0, b.size, b.narrow_shift, b.d_score, b.d_keys, b.d_stop);
      SBG_CUDA_CHECK(cudaGetLastError());
      SBG_TRY(gpu_block_sort(&b, 1, g, gp->target, ctx));
    }
    if (rd->incoming && K > 0) {
      uint32_t *x = b.h_xfer[0];
      memcpy(XFER_ACT(x, K, nw), rd->incoming->act, K * nw * 4);
      memcpy(XFER_REP(x, K, nw), rd->incoming->rep, K * nw * 4);
      memcpy(XFER_RULE(x, K, nw), rd->incoming->rule, K * n);
      for (int r = 0; r < K; r++) XFER_SCORE(x, K, nw)[r] = (int64_t)rd->incoming->score[r];
    }
    double t_poll = wall_seconds();
    int stop = 0;
    SBG_CUDA_CHECK(cudaMemcpyAsync(&stop, b.d_stop, sizeof(int), cudaMemcpyDeviceToHost, b.stream));
    SBG_CUDA_CHECK(cudaStreamSynchronize(b.stream));
    while (g < rd->g_to && !stop) {
      g++;
      if (gp->islands > 1 && K > 0 && g % gp->migration_interval == 0) {
        int in = g == rd->g_from + 1 && rd->incoming;
        SBG_TRY(gpu_block_migrate_out(&b, g, 0, gp->migration_interval, ctx));
        SBG_TRY(gpu_block_migrate_in(&b, g, in ? b.h_xfer[0] : NULL, ctx));
      }
      SBG_TRY(gpu_block_breed(&b, gp, g, ctx));
      double t = wall_seconds();
      if (t - t_poll > 0.1 || g == rd->g_to) {
        SBG_CUDA_CHECK(cudaMemcpyAsync(&stop, b.d_stop, sizeof(int), cudaMemcpyDeviceToHost, b.stream));
        SBG_CUDA_CHECK(cudaStreamSynchronize(b.stream));
        SBG_TRY(sbg_poll(ctx, (double)(g - rd->g_from) / (double)(rd->g_to - rd->g_from)));
        t_poll = t;
      }
    }
    SBG_CUDA_CHECK(cudaMemcpyAsync(&b.gens_done, b.d_gens, sizeof(int64_t), cudaMemcpyDeviceToHost, b.stream));
    SBG_CUDA_CHECK(cudaMemcpyAsync(&stop, b.d_stop, sizeof(int), cudaMemcpyDeviceToHost, b.stream));
    SBG_CUDA_CHECK(cudaStreamSynchronize(b.stream));
    rd->stopped = stop;
    rd->g_done = stop ? b.gens_done : g;
    int64_t gd = rd->g_done;
    for (int isl = 0; isl < rd->count; isl++)
      SBG_CUDA_CHECK(cudaMemcpyAsync(rd->history + isl * rows, b.d_hist + isl * rows,
                                     (gd - rd->g_from + 1) * sizeof(double), cudaMemcpyDeviceToHost, b.stream));
    pack_kernel<<<blocks_for((int64_t)np * elements_of(&b.dpb), T), T, 0, b.stream>>>(b.dpb, b.buf[gd & 1], 0, np, b.d_score, s_act, s_rep,
                                                        s_rule, s_score);
    SBG_CUDA_CHECK(cudaGetLastError());
    SBG_CUDA_CHECK(cudaMemcpyAsync(rd->state.act, s_act, np * nw * 4, cudaMemcpyDeviceToHost, b.stream));
    SBG_CUDA_CHECK(cudaMemcpyAsync(rd->state.rep, s_rep, np * nw * 4, cudaMemcpyDeviceToHost, b.stream));
    SBG_CUDA_CHECK(cudaMemcpyAsync(rd->state.rule, s_rule, np * n, cudaMemcpyDeviceToHost, b.stream));
    SBG_CUDA_CHECK(cudaMemcpyAsync(h_score, s_score, np * sizeof(int64_t), cudaMemcpyDeviceToHost, b.stream));
    if (K > 0)
      SBG_CUDA_CHECK(cudaMemcpyAsync(h_ord, b.d_ord + (int64_t)(rd->count - 1) * b.size, K * sizeof(int32_t),
                                     cudaMemcpyDeviceToHost, b.stream));
    SBG_CUDA_CHECK(cudaStreamSynchronize(b.stream));
  }
  /* the best: the lowest score, first index (islands are contiguous and
   * sorted ties go by slot, so this is ties by lowest island) */
  rd->best_index = 0;
  for (int64_t k = 0; k < np; k++) {
    rd->state.score[k] = (double)h_score[k];
    if (h_score[k] < h_score[rd->best_index]) rd->best_index = k;
  }
  rd->best_score = h_score[rd->best_index];
  for (int r = 0; r < K; r++) {
    int64_t src = h_ord[r];
    memcpy(rd->outgoing.act + r * nw, rd->state.act + src * nw, nw * 4);
    memcpy(rd->outgoing.rep + r * nw, rd->state.rep + src * nw, nw * 4);
    memcpy(rd->outgoing.rule + (int64_t)r * n, rd->state.rule + src * n, n);
    rd->outgoing.score[r] = (double)h_score[src];
  }
done:
  if (d_state) { cudaSetDevice(b.dev); cudaFree(d_state); }
  gpu_block_free(&b);
  free(h_score);
  free(h_ord);
  return st;
}

extern "C" sbg_status sbg_grn_bench_gpu(const sbg_grn_problem *pb, int64_t pop, int reps,
                                        uint64_t seed, double *seconds, double *checksum,
                                        sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  cudaStream_t stream = NULL;
  cudaEvent_t e0 = NULL, e1 = NULL;
  sbg_grn_problem dpb;
  uint32_t *d_prob = NULL;
  grn_pop p = {0};
  int64_t *d_score = NULL, *h_score = NULL;
  const int T = 128;
  *seconds = 0;
  *checksum = 0;

  SBG_TRY(sbg_device_select(ctx->device, ctx));
  SBG_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  SBG_CUDA_CHECK(cudaEventCreate(&e0));
  SBG_CUDA_CHECK(cudaEventCreate(&e1));
  SBG_TRY(problem_to_device(pb, &dpb, &d_prob, stream, ctx));
  SBG_TRY(pop_device_alloc(&p, pop, pb->n, pb->w, "the population", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_score, pop * sizeof(int64_t), "the scores", ctx));
  h_score = (int64_t *)malloc(pop * sizeof(int64_t) + 1);
  if (!h_score) { st = sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the scores"); goto done; }
  init_kernel<<<blocks_for(pop, T), T, 0, stream>>>(dpb, p, seed, pop, 0);
  SBG_CUDA_CHECK(cudaGetLastError());
  /* one warm-up pass, then the timed ones */
  eval_kernel<<<blocks_for(pop, T), T, 0, stream>>>(dpb, p, 1, 0, d_score, NULL, NULL);
  SBG_CUDA_CHECK(cudaGetLastError());
  for (int r = 0; r < reps; r++) {
    float ms = 0;
    SBG_CUDA_CHECK(cudaEventRecord(e0, stream));
    eval_kernel<<<blocks_for(pop, T), T, 0, stream>>>(dpb, p, 1, 0, d_score, NULL, NULL);
    SBG_CUDA_CHECK(cudaGetLastError());
    SBG_CUDA_CHECK(cudaEventRecord(e1, stream));
    SBG_CUDA_CHECK(cudaEventSynchronize(e1));
    SBG_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    *seconds += ms / 1000.0;
    SBG_TRY(sbg_poll(ctx, (r + 1.0) / reps));
  }
  SBG_CUDA_CHECK(cudaMemcpyAsync(h_score, d_score, pop * sizeof(int64_t), cudaMemcpyDeviceToHost, stream));
  SBG_CUDA_CHECK(cudaStreamSynchronize(stream));
  for (int64_t k = 0; k < pop; k++) *checksum += (double)h_score[k];
done:
  if (stream) cudaStreamSynchronize(stream);
  cudaFree(d_prob);
  pop_device_free(&p);
  cudaFree(d_score);
  free(h_score);
  if (e0) cudaEventDestroy(e0);
  if (e1) cudaEventDestroy(e1);
  if (stream) cudaStreamDestroy(stream);
  return st;
}
