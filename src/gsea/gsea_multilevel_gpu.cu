/* The members' moves of the multilevel p-values (gsea_multilevel.c) on a
 * GPU, for every ruler of a wave at once.  The host keeps the levels: it
 * draws each ruler's first sample, takes the median of the scores, gives
 * the sets their p and says which members are copied; the device holds the
 * samples and, per level, copies the members, makes the blocks, moves the
 * members and scores them.
 *
 * A warp moves one member, held in the warp's shared memory for a round:
 * lane 0 draws from the member's Philox stream and tests the swap
 * (gsea_multilevel_core.h, the CPU's arithmetic); the lanes find the new
 * member's place and shift the members around it.  Rounds of k / 10
 * proposals per member end with the ruler's count of kept swaps, as on the
 * CPU, so a member makes the same proposals in the same order and the
 * samples, and the p-values, are the CPU's bits.  (Such a chain of
 * dependent steps runs about ten times slower on a GPU thread than on a CPU
 * core; the device wins by moving the members of all rulers at once.)
 *
 * The plain random sets of every size can be drawn here too (k_plain, a
 * thread per size, the CPU's ml_plain_sets). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_check.cuh"
#include "gsea_multilevel.h"
#include "gsea_multilevel_core.h"
#include "philox.h"

#define ML_WARPS 4         /* members per block of the moves */
#define ML_PREP_THREADS 128
#define ML_ROUNDS 16       /* rounds launched between looks at the host */
#define FULL 0xffffffffu

/* One ruler of the wave on the device (the host's copy is uploaded at each
 * level; the rounds update the counts on the device). */
typedef struct ml_dev_ruler {
  int32_t k, nb, dir, mixing, has_map, per;
  int32_t *pop, *src;   /* members (n x k) and, when has_map, the buffer they are copied from */
  int32_t *cnt, *cand, *cand_h, *kept, *bnd;
  double *bsum, *nr, *cand_c;
  sbg_philox *rng;
  double level, q1;
  int64_t kept_all, tried, target, cap;
} ml_dev_ruler;

struct sbg_gsea_ml_gpu {
  int device;
  cudaStream_t stream;
  int32_t G, n, moves;
  double *d_w;             /* G x 2: the list's weights, then the reversed list's */
  void *d_arena;           /* the wave's samples */
  int32_t R;               /* rulers in the wave */
  ml_dev_ruler *host;      /* R: the host's copy */
  ml_dev_ruler *d_desc;    /* R, uploaded per level in the order of the active rulers */
  ml_dev_ruler *h_desc;    /* page-locked staging of it */
  int32_t *d_map, *h_map;  /* A x n copies */
  double *d_score, *h_score;
  int32_t *d_mixing, *h_mixing;
  size_t max_smem;         /* shared memory a block may opt in to */
};

/* ---------------------------------------------------------------------- */
/* Kernels */

/* pos[j] = pos[j + 1] for j in [lo, hi), by the lanes of a warp in
 * ascending chunks (a chunk reads before it writes, and reads nothing the
 * chunks before it wrote). */
__device__ __forceinline__ void warp_shift_down(int32_t *pos, int32_t lo, int32_t hi, int lane) {
  for (int32_t base = lo; base < hi; base += 32) {
    int32_t j = base + lane, v = 0;
    if (j < hi) v = pos[j + 1];
    __syncwarp();
    if (j < hi) pos[j] = v;
    __syncwarp();
  }
}

/* pos[j + 1] = pos[j] for j in [lo, hi), in descending chunks. */
__device__ __forceinline__ void warp_shift_up(int32_t *pos, int32_t lo, int32_t hi, int lane) {
  for (int32_t top = hi - 1; top >= lo; top -= 32) {
    int32_t j = top - lane, v = 0;
    if (j >= lo) v = pos[j];
    __syncwarp();
    if (j >= lo) pos[j + 1] = v;
    __syncwarp();
  }
}

/* Members of pos[0..k) (ascending) below b, by the lanes of a warp: the
 * chunk whose first member is the last below b, then within it (two
 * ballots where k <= 1024, a count otherwise). */
__device__ __forceinline__ int32_t warp_count_below(const int32_t *pos, int32_t k, int32_t b, int lane) {
  int32_t c = (k + 31) / 32;
  if (c <= 32) {
    int32_t s = lane * c;
    int32_t P = __popc(__ballot_sync(FULL, s < k && pos[s] < b));
    if (P == 0) return 0;
    int32_t q = (P - 1) * c, j = q + lane;
    return q + __popc(__ballot_sync(FULL, lane < c && j < k && pos[j] < b));
  }
  int32_t below = 0;
  for (int32_t j = lane; j < k; j += 32) below += pos[j] < b;
  for (int o = 16; o > 0; o >>= 1) below += __shfl_xor_sync(FULL, below, o);
  return below;
}

/* Bytes of shared memory a warp's member takes in k_moves (ml_stage). */
__host__ __device__ __forceinline__ size_t ml_stage_bytes(int32_t k) {
  int32_t nb = ml_n_blocks(k);
  return ((size_t)(nb + 2) * 8 + (size_t)(k + nb + 2) * 4 + 15) & ~(size_t)15;
}

__device__ __forceinline__ ml_member dev_member(const ml_dev_ruler *R, int32_t e) {
  ml_member m = {R->pop + (size_t)e * R->k, R->cnt + (size_t)e * R->nb, R->bsum + (size_t)e * R->nb, R->nr + e,
                 R->cand + e, R->cand_h + e, R->cand_c + e};
  return m;
}

/* Copies the members the host asked for: a warp per member. */
static __global__ void k_copy(ml_dev_ruler *desc, int32_t A, int32_t n, const int32_t *map) {
  int lane = threadIdx.x & 31;
  int64_t wid = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  if (wid >= (int64_t)A * n) return;
  int32_t a = (int32_t)(wid / n), e = (int32_t)(wid % n);
  const ml_dev_ruler *R = &desc[a];
  if (!R->has_map) return;
  const int32_t *from = R->src + (size_t)map[(size_t)a * n + e] * R->k;
  int32_t *to = R->pop + (size_t)e * R->k;
  for (int32_t j = lane; j < R->k; j += 32) to[j] = from[j];
}

/* The blocks of a ruler (block per ruler): the ends are the sample's
 * medians of every (k / nb)-th member (the (n / 2)-th smallest, as the
 * CPU's sort gives), made non-decreasing; then each member's counts and
 * weights per block. */
static __global__ void k_blocks(ml_dev_ruler *desc, int32_t n, int32_t G, const double *w2) {
  extern __shared__ int32_t col[]; /* a column of the sample per warp */
  ml_dev_ruler *R = &desc[blockIdx.x];
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  int32_t k = R->k, nb = R->nb, half = n / 2;
  int32_t *c = col + (size_t)warp * n;
  for (int32_t j = warp; j + 1 < nb; j += nw) {
    int32_t idx = (int32_t)((int64_t)(j + 1) * k / nb);
    for (int32_t e = lane; e < n; e += 32) c[e] = R->pop[(size_t)e * k + idx];
    __syncwarp();
    for (int32_t e = lane; e < n; e += 32) {
      int32_t v = c[e], lt = 0, le = 0;
      for (int32_t u = 0; u < n; u++) {
        lt += c[u] < v;
        le += c[u] <= v;
      }
      if (lt <= half && half < le) R->bnd[j] = v; /* lanes that find it write the same value */
    }
    __syncwarp();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int32_t j = 1; j + 1 < nb; j++)
      if (R->bnd[j] < R->bnd[j - 1]) R->bnd[j] = R->bnd[j - 1];
    R->bnd[nb - 1] = G;
  }
  __syncthreads();
  ml_frame f = {k, nb, G, R->bnd, w2 + (size_t)R->dir * G, R->q1, R->level};
  for (int32_t e = threadIdx.x; e < n; e += blockDim.x) ml_member_blocks(&f, dev_member(R, e));
}

/* A member's state in the warp's shared memory (stride bytes per warp,
 * 0: none, the member stays in global memory): the swaps of a round read
 * and shift its positions dozens of times each. */
__device__ __forceinline__ ml_member ml_stage(ml_member g, int32_t k, int32_t nb, unsigned char *base, int lane) {
  double *d = (double *)base;
  int32_t *i = (int32_t *)(base + (size_t)(nb + 2) * 8);
  ml_member m = {i, i + k, d, d + nb, i + k + nb, i + k + nb + 1, d + nb + 1};
  for (int32_t j = lane; j < k; j += 32) m.pos[j] = g.pos[j];
  for (int32_t j = lane; j < nb; j += 32) {
    m.cnt[j] = g.cnt[j];
    m.bsum[j] = g.bsum[j];
  }
  if (lane == 0) {
    *m.nr = *g.nr;
    *m.cand = *g.cand;
    *m.cand_h = *g.cand_h;
    *m.cand_c = *g.cand_c;
  }
  __syncwarp();
  return m;
}

__device__ __forceinline__ void ml_unstage(ml_member g, ml_member m, int32_t k, int32_t nb, int lane) {
  __syncwarp();
  for (int32_t j = lane; j < k; j += 32) g.pos[j] = m.pos[j];
  for (int32_t j = lane; j < nb; j += 32) {
    g.cnt[j] = m.cnt[j];
    g.bsum[j] = m.bsum[j];
  }
  if (lane == 0) {
    *g.nr = *m.nr;
    *g.cand = *m.cand;
    *g.cand_h = *m.cand_h;
    *g.cand_c = *m.cand_c;
  }
}

/* One round of a level: `per` proposals per member, a warp per member. */
static __global__ void k_moves(ml_dev_ruler *desc, int32_t A, int32_t n, int32_t G, const double *w2,
                               size_t stride) {
  extern __shared__ __align__(16) unsigned char stage[];
  int lane = threadIdx.x & 31;
  int64_t wid = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  if (wid >= (int64_t)A * n) return;
  int32_t ai = (int32_t)(wid / n), e = (int32_t)(wid % n);
  ml_dev_ruler *R = &desc[ai];
  if (!R->mixing) return;
  int32_t k = R->k;
  ml_frame f = {k, R->nb, G, R->bnd, w2 + (size_t)R->dir * G, R->q1, R->level};
  ml_member g = dev_member(R, e), m = g;
  if (stride) m = ml_stage(g, k, R->nb, stage + (threadIdx.x >> 5) * stride, lane);
  int32_t *pos = m.pos;
  sbg_philox rng;
  if (lane == 0) rng = R->rng[e];
  int32_t kept = 0;
  for (int32_t r = 0; r < R->per; r++) {
    int32_t i = 0, b = 0;
    if (lane == 0) {
      i = (int32_t)sbg_philox_below(&rng, (uint32_t)k);
      b = (int32_t)sbg_philox_below(&rng, (uint32_t)G);
    }
    i = __shfl_sync(FULL, i, 0);
    b = __shfl_sync(FULL, b, 0);
    int32_t a = pos[i], ib = warp_count_below(pos, k, b, lane);
    if (ib < k && pos[ib] == b) continue; /* b is a member already */
    __syncwarp();
    if (ib > i) warp_shift_down(pos, i, ib - 1, lane);
    else warp_shift_up(pos, ib, i, lane);
    if (lane == 0) pos[ib > i ? ib - 1 : ib] = b;
    __syncwarp();
    int ok = 0;
    if (lane == 0) ok = ml_accept(&f, m, a, b);
    ok = __shfl_sync(FULL, ok, 0);
    if (ok) {
      kept++;
      continue;
    }
    if (ib > i) warp_shift_up(pos, i, ib - 1, lane);
    else warp_shift_down(pos, ib, i, lane);
    if (lane == 0) pos[i] = a;
    __syncwarp();
  }
  if (stride) ml_unstage(g, m, k, R->nb, lane);
  if (lane == 0) {
    R->rng[e] = rng;
    R->kept[e] = kept;
  }
}

/* End of a round: the ruler's kept swaps and proposals, and whether it
 * moves on (the CPU's loop condition). */
static __global__ void k_round_end(ml_dev_ruler *desc, int32_t A, int32_t n, int32_t *mixing) {
  int32_t a = blockIdx.x * blockDim.x + threadIdx.x;
  if (a >= A) return;
  ml_dev_ruler *R = &desc[a];
  if (R->mixing) {
    for (int32_t e = 0; e < n; e++) R->kept_all += R->kept[e];
    R->tried += (int64_t)n * R->per;
    R->mixing = R->kept_all < R->target && R->tried < R->cap;
  }
  mixing[a] = R->mixing;
}

static __global__ void k_score(const ml_dev_ruler *desc, int32_t A, int32_t n, int32_t G, const double *w2,
                               double *score) {
  int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= (int64_t)A * n) return;
  int32_t a = (int32_t)(t / n), e = (int32_t)(t % n);
  const ml_dev_ruler *R = &desc[a];
  score[t] = ml_es_plus(R->pop + (size_t)e * R->k, R->k, w2 + (size_t)R->dir * G, G);
}

/* The plain random sets of a size per thread (ml_plain_sets, the CPU's
 * code): each size's N sets come from one stream, one after the other. */
static __global__ void k_plain(int32_t n_size, const int32_t *k, const int64_t *koff, sbg_philox *stream,
                               const int32_t *want, int32_t G, int32_t N, const double *w2, uint64_t *bits,
                               int32_t *buf, double *plain, int32_t *m) {
  int32_t s = blockIdx.x * blockDim.x + threadIdx.x;
  if (s >= n_size) return;
  double *pl[2] = {want[2 * s] ? plain + (size_t)(2 * s) * N : NULL,
                   want[2 * s + 1] ? plain + (size_t)(2 * s + 1) * N : NULL};
  sbg_philox r = stream[s];
  ml_plain_sets(&r, G, k[s], N, w2, w2 + G, bits + (size_t)s * ((G + 63) / 64), buf + 2 * koff[s],
                buf + 2 * koff[s] + k[s], pl, m + 2 * s);
}

/* ---------------------------------------------------------------------- */
/* Host side */

extern "C" sbg_status sbg_gsea_ml_gpu_plain(int device, int32_t G, const double *w0, const double *w1, int32_t N,
                                            int32_t n_size, const int32_t *k, const sbg_philox *stream,
                                            double *const *plain, int32_t *m, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  cudaStream_t cs = NULL;
  int32_t *d_k = NULL, *d_want = NULL, *d_buf = NULL, *d_m = NULL, *want = NULL;
  int64_t *koff = NULL, *d_koff = NULL, total = 0;
  sbg_philox *d_stream = NULL;
  double *d_w = NULL, *d_plain = NULL, *h_plain = NULL;
  uint64_t *d_bits = NULL;
  size_t words = (size_t)(G + 63) / 64;
  want = (int32_t *)malloc((size_t)n_size * 2 * sizeof(int32_t));
  koff = (int64_t *)malloc((size_t)n_size * sizeof(int64_t));
  h_plain = (double *)malloc((size_t)n_size * 2 * N * sizeof(double));
  if (!want || !koff || !h_plain) {
    st = sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the multilevel plain sets");
    goto done;
  }
  for (int32_t s = 0; s < n_size; s++) {
    koff[s] = total;
    total += k[s];
    want[2 * s] = plain[2 * s] != NULL;
    want[2 * s + 1] = plain[2 * s + 1] != NULL;
  }
  SBG_TRY(sbg_device_select(device, ctx));
  SBG_CUDA_CHECK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
  SBG_TRY(sbg_device_alloc((void **)&d_w, 2 * (size_t)G * sizeof(double), "the multilevel plain sets", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_k, (size_t)n_size * sizeof(int32_t), "the multilevel plain sets", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_koff, (size_t)n_size * sizeof(int64_t), "the multilevel plain sets", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_want, (size_t)n_size * 2 * sizeof(int32_t), "the multilevel plain sets", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_stream, (size_t)n_size * sizeof(sbg_philox), "the multilevel plain sets", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_bits, (size_t)n_size * words * sizeof(uint64_t), "the multilevel plain sets", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_buf, (size_t)(2 * total) * sizeof(int32_t), "the multilevel plain sets", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_plain, (size_t)n_size * 2 * N * sizeof(double), "the multilevel plain sets", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_m, (size_t)n_size * 2 * sizeof(int32_t), "the multilevel plain sets", ctx));
  SBG_CUDA_CHECK(cudaMemcpyAsync(d_w, w0, (size_t)G * sizeof(double), cudaMemcpyHostToDevice, cs));
  SBG_CUDA_CHECK(cudaMemcpyAsync(d_w + G, w1, (size_t)G * sizeof(double), cudaMemcpyHostToDevice, cs));
  SBG_CUDA_CHECK(cudaMemcpyAsync(d_k, k, (size_t)n_size * sizeof(int32_t), cudaMemcpyHostToDevice, cs));
  SBG_CUDA_CHECK(cudaMemcpyAsync(d_koff, koff, (size_t)n_size * sizeof(int64_t), cudaMemcpyHostToDevice, cs));
  SBG_CUDA_CHECK(cudaMemcpyAsync(d_want, want, (size_t)n_size * 2 * sizeof(int32_t), cudaMemcpyHostToDevice, cs));
  SBG_CUDA_CHECK(cudaMemcpyAsync(d_stream, stream, (size_t)n_size * sizeof(sbg_philox), cudaMemcpyHostToDevice, cs));
  SBG_CUDA_CHECK(cudaMemsetAsync(d_bits, 0, (size_t)n_size * words * sizeof(uint64_t), cs));
  k_plain<<<(unsigned)((n_size + 31) / 32), 32, 0, cs>>>(n_size, d_k, d_koff, d_stream, d_want, G, N, d_w, d_bits,
                                                         d_buf, d_plain, d_m);
  SBG_CUDA_CHECK(cudaGetLastError());
  SBG_CUDA_CHECK(cudaMemcpyAsync(h_plain, d_plain, (size_t)n_size * 2 * N * sizeof(double), cudaMemcpyDeviceToHost, cs));
  SBG_CUDA_CHECK(cudaMemcpyAsync(m, d_m, (size_t)n_size * 2 * sizeof(int32_t), cudaMemcpyDeviceToHost, cs));
  SBG_CUDA_CHECK(cudaStreamSynchronize(cs));
  for (int32_t s = 0; s < 2 * n_size; s++)
    if (plain[s]) memcpy(plain[s], h_plain + (size_t)s * N, (size_t)N * sizeof(double));
done:
  if (cs) cudaStreamSynchronize(cs);
  cudaFree(d_w); cudaFree(d_k); cudaFree(d_koff); cudaFree(d_want); cudaFree(d_stream); cudaFree(d_bits);
  cudaFree(d_buf); cudaFree(d_plain); cudaFree(d_m);
  if (cs) cudaStreamDestroy(cs);
  free(want); free(koff); free(h_plain);
  return st;
}

static size_t align_up(size_t x) { return (x + 255) & ~(size_t)255; }

/* Device bytes of one ruler's sample (laid out as in ml_layout). */
static size_t ml_layout(ml_dev_ruler *R, char *base, int32_t n, int32_t k) {
  int32_t nb = ml_n_blocks(k);
  size_t off = 0, nk = (size_t)n * k, nnb = (size_t)n * nb;
#define ML_PLACE(field, type, count)                                \
  do {                                                              \
    if (R) R->field = (type *)(base + off);                         \
    off = align_up(off + (size_t)(count) * sizeof(type));           \
  } while (0)
  ML_PLACE(pop, int32_t, nk);
  ML_PLACE(src, int32_t, nk);
  ML_PLACE(cnt, int32_t, nnb);
  ML_PLACE(cand, int32_t, n);
  ML_PLACE(cand_h, int32_t, n);
  ML_PLACE(kept, int32_t, n);
  ML_PLACE(bnd, int32_t, nb);
  ML_PLACE(bsum, double, nnb);
  ML_PLACE(nr, double, n);
  ML_PLACE(cand_c, double, n);
  ML_PLACE(rng, sbg_philox, n);
#undef ML_PLACE
  return off;
}

extern "C" size_t sbg_gsea_ml_gpu_ruler_bytes(int32_t n, int32_t k) { return ml_layout(NULL, NULL, n, k); }

static void ml_free_wave(sbg_gsea_ml_gpu *h) {
  cudaFree(h->d_arena); cudaFree(h->d_desc); cudaFree(h->d_map); cudaFree(h->d_score); cudaFree(h->d_mixing);
  cudaFreeHost(h->h_desc); cudaFreeHost(h->h_map); cudaFreeHost(h->h_score); cudaFreeHost(h->h_mixing);
  free(h->host);
  h->d_arena = NULL; h->d_desc = NULL; h->d_map = NULL; h->d_score = NULL; h->d_mixing = NULL;
  h->h_desc = NULL; h->h_map = NULL; h->h_score = NULL; h->h_mixing = NULL; h->host = NULL;
  h->R = 0;
}

extern "C" void sbg_gsea_ml_gpu_close(sbg_gsea_ml_gpu *h) {
  if (!h) return;
  cudaSetDevice(h->device);
  if (h->stream) cudaStreamSynchronize(h->stream);
  ml_free_wave(h);
  cudaFree(h->d_w);
  if (h->stream) cudaStreamDestroy(h->stream);
  free(h);
}

extern "C" sbg_status sbg_gsea_ml_gpu_open(int device, int32_t G, const double *wf, const double *wb, int32_t n,
                                           int32_t moves, size_t *free_bytes, sbg_gsea_ml_gpu **out,
                                           sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  size_t fr = 0, tot = 0;
  sbg_gsea_ml_gpu *h = (sbg_gsea_ml_gpu *)calloc(1, sizeof *h);
  *out = NULL;
  if (!h) return sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the multilevel GPU engine");
  h->device = device;
  h->G = G;
  h->n = n;
  h->moves = moves;
  SBG_TRY(sbg_device_select(device, ctx));
  SBG_CUDA_CHECK(cudaStreamCreateWithFlags(&h->stream, cudaStreamNonBlocking));
  SBG_TRY(sbg_device_alloc((void **)&h->d_w, 2 * (size_t)G * sizeof(double), "the multilevel weights", ctx));
  SBG_CUDA_CHECK(cudaMemcpyAsync(h->d_w, wf, (size_t)G * sizeof(double), cudaMemcpyHostToDevice, h->stream));
  SBG_CUDA_CHECK(cudaMemcpyAsync(h->d_w + G, wb, (size_t)G * sizeof(double), cudaMemcpyHostToDevice, h->stream));
  SBG_CUDA_CHECK(cudaStreamSynchronize(h->stream));
  {
    int v = 0;
    SBG_CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    h->max_smem = (size_t)v;
  }
  SBG_CUDA_CHECK(cudaMemGetInfo(&fr, &tot));
  *free_bytes = fr;
  *out = h;
  return SBG_OK;
done:
  sbg_gsea_ml_gpu_close(h);
  return st;
}

extern "C" sbg_status sbg_gsea_ml_gpu_load(sbg_gsea_ml_gpu *h, int32_t R, const int32_t *k, const int32_t *dir,
                                           int32_t *const *pop, const sbg_philox *const *rng, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  int32_t n = h->n;
  size_t total = 0;
  SBG_TRY(sbg_device_select(h->device, ctx));
  SBG_CUDA_CHECK(cudaStreamSynchronize(h->stream));
  ml_free_wave(h);
  for (int32_t r = 0; r < R; r++) total += sbg_gsea_ml_gpu_ruler_bytes(n, k[r]);
  h->host = (ml_dev_ruler *)calloc((size_t)R, sizeof(ml_dev_ruler));
  if (!h->host) return sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the multilevel GPU engine");
  h->R = R;
  SBG_TRY(sbg_device_alloc(&h->d_arena, total, "the multilevel samples", ctx));
  SBG_TRY(sbg_device_alloc((void **)&h->d_desc, (size_t)R * sizeof(ml_dev_ruler), "the multilevel samples", ctx));
  SBG_TRY(sbg_device_alloc((void **)&h->d_map, (size_t)R * n * sizeof(int32_t), "the multilevel samples", ctx));
  SBG_TRY(sbg_device_alloc((void **)&h->d_score, (size_t)R * n * sizeof(double), "the multilevel samples", ctx));
  SBG_TRY(sbg_device_alloc((void **)&h->d_mixing, (size_t)R * sizeof(int32_t), "the multilevel samples", ctx));
  SBG_CUDA_CHECK(cudaMallocHost((void **)&h->h_desc, (size_t)R * sizeof(ml_dev_ruler)));
  SBG_CUDA_CHECK(cudaMallocHost((void **)&h->h_map, (size_t)R * n * sizeof(int32_t)));
  SBG_CUDA_CHECK(cudaMallocHost((void **)&h->h_score, (size_t)R * n * sizeof(double)));
  SBG_CUDA_CHECK(cudaMallocHost((void **)&h->h_mixing, (size_t)R * sizeof(int32_t)));
  {
    char *base = (char *)h->d_arena;
    for (int32_t r = 0; r < R; r++) {
      ml_dev_ruler *d = &h->host[r];
      size_t bytes = ml_layout(d, base, n, k[r]);
      d->k = k[r];
      d->nb = ml_n_blocks(k[r]);
      d->dir = dir[r];
      d->q1 = 1.0 / ((double)h->G - (double)k[r]); /* as the CPU's frame_of */
      ml_budget(k[r], n, h->moves, &d->target, &d->cap, &d->per);
      SBG_CUDA_CHECK(cudaMemcpyAsync(d->pop, pop[r], (size_t)n * k[r] * sizeof(int32_t), cudaMemcpyHostToDevice,
                                     h->stream));
      SBG_CUDA_CHECK(cudaMemcpyAsync(d->rng, rng[r], (size_t)n * sizeof(sbg_philox), cudaMemcpyHostToDevice,
                                     h->stream));
      base += bytes;
    }
  }
  SBG_CUDA_CHECK(cudaStreamSynchronize(h->stream)); /* the host's buffers may go */
done:
  return st;
}

/* One level of A active rulers (act: their indices in the wave): the
 * copies the host asked for (map[a], NULL: none), the blocks, the rounds
 * of moves until each ruler has its swaps, then the scores into score[a].
 * Polls between batches of rounds. */
extern "C" sbg_status sbg_gsea_ml_gpu_level(sbg_gsea_ml_gpu *h, int32_t A, const int32_t *act,
                                            const double *level, const int32_t *const *map, double *const *score,
                                            double done_frac, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  int32_t n = h->n, G = h->G;
  unsigned warp_blocks = (unsigned)(((int64_t)A * n + ML_WARPS - 1) / ML_WARPS);
  unsigned thread_blocks = (unsigned)(((int64_t)A * n + 127) / 128);
  size_t smem = (size_t)(ML_PREP_THREADS / 32) * n * sizeof(int32_t), stride = 0;
  int32_t kmax = 0;
  SBG_TRY(sbg_device_select(h->device, ctx));
  for (int32_t a = 0; a < A; a++) {
    ml_dev_ruler *d = &h->host[act[a]];
    if (map[a]) { /* the members now live in the other buffer: copy into it from the current one */
      int32_t *t = d->pop; d->pop = d->src; d->src = t;
      memcpy(h->h_map + (size_t)a * n, map[a], (size_t)n * sizeof(int32_t));
    }
    d->has_map = map[a] != NULL;
    d->level = level[a];
    d->mixing = 1;
    d->kept_all = 0;
    d->tried = 0;
    h->h_desc[a] = *d;
    if (d->k > kmax) kmax = d->k;
  }
  /* members in shared memory where the largest fits (k up to about 13,000) */
  stride = ml_stage_bytes(kmax);
  if (stride * ML_WARPS > h->max_smem) stride = 0;
  if (stride * ML_WARPS > 48 * 1024)
    SBG_CUDA_CHECK(cudaFuncSetAttribute(k_moves, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        (int)(stride * ML_WARPS)));
  SBG_CUDA_CHECK(cudaMemcpyAsync(h->d_desc, h->h_desc, (size_t)A * sizeof(ml_dev_ruler), cudaMemcpyHostToDevice,
                                 h->stream));
  SBG_CUDA_CHECK(cudaMemcpyAsync(h->d_map, h->h_map, (size_t)A * n * sizeof(int32_t), cudaMemcpyHostToDevice,
                                 h->stream));
  k_copy<<<warp_blocks, ML_WARPS * 32, 0, h->stream>>>(h->d_desc, A, n, h->d_map);
  /* smem: 16 n bytes, within the default 48 KB for n <= SBG_GSEA_ML_GPU_MAX_SAMPLE */
  k_blocks<<<(unsigned)A, ML_PREP_THREADS, smem, h->stream>>>(h->d_desc, n, G, h->d_w);
  SBG_CUDA_CHECK(cudaGetLastError());
  for (;;) {
    for (int r = 0; r < ML_ROUNDS; r++) {
      k_moves<<<warp_blocks, ML_WARPS * 32, stride * ML_WARPS, h->stream>>>(h->d_desc, A, n, G, h->d_w, stride);
      k_round_end<<<(unsigned)((A + 127) / 128), 128, 0, h->stream>>>(h->d_desc, A, n, h->d_mixing);
    }
    SBG_CUDA_CHECK(cudaGetLastError());
    SBG_CUDA_CHECK(cudaMemcpyAsync(h->h_mixing, h->d_mixing, (size_t)A * sizeof(int32_t), cudaMemcpyDeviceToHost,
                                   h->stream));
    SBG_CUDA_CHECK(cudaStreamSynchronize(h->stream));
    SBG_TRY(sbg_poll(ctx, done_frac));
    int32_t any = 0;
    for (int32_t a = 0; a < A; a++) any |= h->h_mixing[a];
    if (!any) break;
  }
  k_score<<<thread_blocks, 128, 0, h->stream>>>(h->d_desc, A, n, G, h->d_w, h->d_score);
  SBG_CUDA_CHECK(cudaGetLastError());
  SBG_CUDA_CHECK(cudaMemcpyAsync(h->h_score, h->d_score, (size_t)A * n * sizeof(double), cudaMemcpyDeviceToHost,
                                 h->stream));
  SBG_CUDA_CHECK(cudaStreamSynchronize(h->stream));
  for (int32_t a = 0; a < A; a++) memcpy(score[a], h->h_score + (size_t)a * n, (size_t)n * sizeof(double));
done:
  return st;
}
