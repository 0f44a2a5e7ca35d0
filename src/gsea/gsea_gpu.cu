/* GPU engine of rapidGSEA(): for a batch of permutations, the permuted
 * labels (Philox, as on the CPU), every gene's metric, the ranking (CUB
 * segmented radix sort, stable, so ties keep gene order), the members of
 * every set sorted by rank (one CUB radix sort of (permutation, set, rank)
 * keys) and the hits-only ES; the driver in gsea_cpu.c does the rest.
 * Reached from rapidGSEA(backend = "gpu") through sbg_gsea_run(). */
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_segmented_radix_sort.cuh>

#include "cuda_check.cuh"
#include "gsea.h"
#include "gsea_math.h"
#include "philox.h"

struct sbg_gsea_gpu {
  cudaStream_t stream;
  int32_t G, P, S, n_small, small_label, n_a, n_b, rbits, metric, gene_perm;
  int64_t M, B;
  int kbits;              /* bits of the (permutation, set, rank) keys */
  double weight;
  uint64_t seed;
  double *d_xc, *d_mu, *d_t1, *d_t2, *d_metric0;
  int32_t *d_labels, *d_set_start, *d_set_genes, *d_member_set;
  int32_t *d_lab, *d_small, *d_perm, *d_ord0, *d_ord1, *d_rank, *d_seg;
  double *d_m, *d_es;
  uint64_t *d_key0, *d_key1, *d_hk0, *d_hk1;
  void *d_temp;
  size_t temp_bytes;
};

/* ---------------------------------------------------------------------- */
/* kernels */

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

/* One thread per (gene, permutation): the class sums over the smaller
 * class in sample order (the CPU's order), then the metric and sort key.
 * The data are sample-major, so a warp reads consecutive genes. */
static __global__ void k_metric(const sbg_gsea_gpu h, int64_t n) {
  int32_t g = blockIdx.x * blockDim.x + threadIdx.x;
  int64_t b = blockIdx.y;
  if (g >= h.G || b >= n) return;
  double m;
  if (h.gene_perm) {
    m = h.d_metric0[h.d_perm[b * h.G + g]];
  } else {
    const int32_t *sm = h.d_small + b * h.n_small;
    double s = 0, ss = 0;
    for (int32_t t = 0; t < h.n_small; t++) {
      double x = h.d_xc[(size_t)sm[t] * h.G + g];
      s = G_ADD(s, x);
      ss = G_ADD(ss, G_MUL(x, x));
    }
    double so = G_SUB(h.d_t1[g], s), sso = G_SUB(h.d_t2[g], ss);
    int small_is_b = h.small_label == 1;
    double sa = small_is_b ? so : s, ssa = small_is_b ? sso : ss;
    double sb = small_is_b ? s : so, ssb = small_is_b ? ss : sso;
    m = gsea_metric(h.metric, sa, ssa, sb, ssb, (double)h.n_a, (double)h.n_b, h.d_mu[g]);
  }
  size_t at = (size_t)b * h.G + g;
  h.d_m[at] = m;
  h.d_key0[at] = gsea_sort_key(m);
  h.d_ord0[at] = g;
}

/* rank[b][gene] from the sorted order */
static __global__ void k_rank(const int32_t *ord, int32_t G, int64_t n, int32_t *rank) {
  int32_t r = blockIdx.x * blockDim.x + threadIdx.x;
  int64_t b = blockIdx.y;
  if (r >= G || b >= n) return;
  rank[b * G + ord[b * G + r]] = r;
}

/* One key per (membership, permutation): (b * S + set) above the rank, so
 * one radix sort puts every set's hits in rank order, in place. */
static __global__ void k_hitkeys(const sbg_gsea_gpu h, int64_t n) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  int64_t b = blockIdx.y;
  if (i >= h.M || b >= n) return;
  int32_t s = h.d_member_set[i], g = h.d_set_genes[i];
  uint64_t grp = (uint64_t)b * (uint64_t)h.S + (uint64_t)s;
  h.d_hk0[b * h.M + i] = (grp << h.rbits) | (uint64_t)h.d_rank[b * h.G + g];
}

/* One thread per (set, permutation): total hit weight in member order (as
 * the CPU), then the running sum over the hits in rank order. */
static __global__ void k_es(const sbg_gsea_gpu h, const uint64_t *hk, const int32_t *ord, int64_t n) {
  int32_t s = blockIdx.x * blockDim.x + threadIdx.x;
  int64_t b = blockIdx.y;
  if (s >= h.S || b >= n) return;
  const double *m = h.d_m + b * h.G;
  int32_t lo = h.d_set_start[s], hi = h.d_set_start[s + 1];
  double nr = 0;
  for (int32_t i = lo; i < hi; i++) nr = G_ADD(nr, gsea_weight(m[h.d_set_genes[i]], h.weight));
  int unit = nr == 0;
  if (unit) nr = (double)(hi - lo);
  /* the CPU's reciprocals, exactly: 1.0 / x rounded once */
  double inv_nr = G_DIV(1.0, nr);
  double inv_nmiss = G_DIV(1.0, G_SUB((double)h.G, (double)(hi - lo)));
  gsea_es_state st;
  gsea_es_init(&st);
  const uint64_t mask = (1ull << h.rbits) - 1ull;
  const uint64_t *k = hk + b * h.M;
  const int32_t *o = ord + b * h.G;
  for (int32_t i = lo; i < hi; i++) {
    int32_t r = (int32_t)(k[i] & mask);
    double w = unit ? 1.0 : gsea_weight(m[o[r]], h.weight);
    gsea_es_hit(&st, r, w, inv_nr, inv_nmiss);
  }
  h.d_es[b * h.S + s] = st.best;
}

static __global__ void k_seg(int32_t *seg, int32_t G, int64_t B) {
  int64_t b = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (b <= B) seg[b] = (int32_t)(b * G);
}

/* ---------------------------------------------------------------------- */

static int bits_for(uint64_t n) { /* bits to hold 0..n-1 */
  int b = 1;
  while (b < 63 && (1ull << b) < n) b++;
  return b;
}

extern "C" void sbg_gsea_gpu_close(sbg_gsea_gpu *h) {
  if (!h) return;
  cudaFree(h->d_xc); cudaFree(h->d_mu); cudaFree(h->d_t1); cudaFree(h->d_t2);
  cudaFree(h->d_metric0); cudaFree(h->d_labels); cudaFree(h->d_set_start);
  cudaFree(h->d_set_genes); cudaFree(h->d_member_set); cudaFree(h->d_lab);
  cudaFree(h->d_small); cudaFree(h->d_perm); cudaFree(h->d_ord0); cudaFree(h->d_ord1);
  cudaFree(h->d_rank); cudaFree(h->d_seg); cudaFree(h->d_m); cudaFree(h->d_es);
  cudaFree(h->d_key0); cudaFree(h->d_key1); cudaFree(h->d_hk0); cudaFree(h->d_hk1);
  cudaFree(h->d_temp);
  if (h->stream) cudaStreamDestroy(h->stream);
  free(h);
}

extern "C" int64_t sbg_gsea_gpu_max_batch(const sbg_gsea_gpu *h) { return h->B; }

#define ALLOC(ptr, count, what) \
  SBG_TRY(sbg_device_alloc((void **)&(ptr), (size_t)(count) * sizeof(*(ptr)), what, ctx))

extern "C" sbg_status sbg_gsea_gpu_open(const sbg_gsea_input *in, const sbg_gsea_params *p,
                                        const sbg_gsea_prep *prep, int64_t max_batch,
                                        sbg_gsea_gpu **out, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  sbg_gsea_gpu *h = (sbg_gsea_gpu *)calloc(1, sizeof(sbg_gsea_gpu));
  int32_t *member_set = NULL;
  int64_t B = 0, M = in->set_start[in->n_sets];
  int32_t G = in->n_genes, S = in->n_sets;
  *out = NULL;
  if (!h) return sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the GPU engine");
  h->G = in->n_genes;
  h->P = in->n_samples;
  h->S = in->n_sets;
  h->M = in->set_start[in->n_sets];
  h->metric = p->metric;
  h->gene_perm = p->gene_perm;
  h->weight = p->weight;
  h->seed = p->seed;
  h->n_a = prep->n_a;
  h->n_b = prep->n_b;
  h->small_label = prep->small_label;
  h->n_small = prep->small_label == 1 ? prep->n_b : prep->n_a;
  h->rbits = bits_for((uint64_t)h->G);
  SBG_TRY(sbg_device_select(ctx->device, ctx));
  SBG_CUDA_CHECK(cudaStreamCreateWithFlags(&h->stream, cudaStreamNonBlocking));
  {
    /* batch size from the free memory: what one permutation needs */
    size_t free_b = 0, total_b = 0;
    SBG_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    double per = (double)h->G * (8 + 16 + 12 + (h->gene_perm ? 4 : 0)) +
                 (double)h->M * 16 + (double)h->S * 8 + (double)h->P * 8 + 64;
    double fixed = (double)h->G * h->P * 8 + (double)h->M * 8 + (double)h->G * 40;
    B = (int64_t)((0.6 * (double)free_b - fixed) / (per * 1.1));
    if (B > max_batch) B = max_batch;
    /* CUB takes int item counts; keys need (B * S) above the rank bits */
    while (B > 64 && ((double)B * h->M > 2147483647.0 || (double)B * h->G > 2147483647.0 ||
                      bits_for((uint64_t)B * h->S) + h->rbits > 64))
      B /= 2;
    B = B / 64 * 64;
    if (B < 64) {
      st = sbg_fail(ctx, SBG_ERR_DEVICE_ALLOC, "the GPU has %.1f GiB free: too little for a batch of 64 permutations",
                    (double)free_b / 1073741824.0);
      goto done;
    }
    h->B = B;
    h->kbits = bits_for((uint64_t)B * h->S) + h->rbits;
  }
  /* inputs */
  ALLOC(h->d_set_start, S + 1, "the gene set offsets");
  ALLOC(h->d_set_genes, M, "the gene set members");
  ALLOC(h->d_member_set, M, "the gene set members");
  member_set = (int32_t *)malloc((size_t)M * sizeof(int32_t));
  if (!member_set) { st = sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the membership index"); goto done; }
  for (int32_t s = 0; s < S; s++)
    for (int32_t i = in->set_start[s]; i < in->set_start[s + 1]; i++) member_set[i] = s;
  SBG_CUDA_CHECK(cudaMemcpyAsync(h->d_set_start, in->set_start, (S + 1) * sizeof(int32_t), cudaMemcpyHostToDevice, h->stream));
  SBG_CUDA_CHECK(cudaMemcpyAsync(h->d_set_genes, in->set_genes, M * sizeof(int32_t), cudaMemcpyHostToDevice, h->stream));
  SBG_CUDA_CHECK(cudaMemcpyAsync(h->d_member_set, member_set, M * sizeof(int32_t), cudaMemcpyHostToDevice, h->stream));
  if (h->gene_perm) {
    ALLOC(h->d_metric0, G, "the observed metric");
    ALLOC(h->d_perm, B * G, "the gene permutations");
    SBG_CUDA_CHECK(cudaMemcpyAsync(h->d_metric0, prep->metric0, G * sizeof(double), cudaMemcpyHostToDevice, h->stream));
  } else {
    ALLOC(h->d_xc, (size_t)G * h->P, "the centred expression matrix");
    ALLOC(h->d_mu, G, "the gene means");
    ALLOC(h->d_t1, G, "the gene sums");
    ALLOC(h->d_t2, G, "the gene sums of squares");
    ALLOC(h->d_labels, h->P, "the labels");
    ALLOC(h->d_lab, B * h->P, "the permuted labels");
    ALLOC(h->d_small, B * (h->n_small > 0 ? h->n_small : 1), "the permuted classes");
    SBG_CUDA_CHECK(cudaMemcpyAsync(h->d_xc, prep->xc, (size_t)G * h->P * sizeof(double), cudaMemcpyHostToDevice, h->stream));
    SBG_CUDA_CHECK(cudaMemcpyAsync(h->d_mu, prep->mu, G * sizeof(double), cudaMemcpyHostToDevice, h->stream));
    SBG_CUDA_CHECK(cudaMemcpyAsync(h->d_t1, prep->t1, G * sizeof(double), cudaMemcpyHostToDevice, h->stream));
    SBG_CUDA_CHECK(cudaMemcpyAsync(h->d_t2, prep->t2, G * sizeof(double), cudaMemcpyHostToDevice, h->stream));
    SBG_CUDA_CHECK(cudaMemcpyAsync(h->d_labels, in->labels, h->P * sizeof(int32_t), cudaMemcpyHostToDevice, h->stream));
  }
  /* per batch */
  ALLOC(h->d_m, B * G, "the permuted metrics");
  ALLOC(h->d_key0, B * G, "the sort keys");
  ALLOC(h->d_key1, B * G, "the sort keys");
  ALLOC(h->d_ord0, B * G, "the rankings");
  ALLOC(h->d_ord1, B * G, "the rankings");
  ALLOC(h->d_rank, B * G, "the ranks");
  ALLOC(h->d_seg, B + 1, "the segment offsets");
  ALLOC(h->d_hk0, B * M, "the hit keys");
  ALLOC(h->d_hk1, B * M, "the hit keys");
  ALLOC(h->d_es, B * S, "the batch of ES");
  k_seg<<<(unsigned)((B + 256) / 256), 256, 0, h->stream>>>(h->d_seg, G, B);
  SBG_CUDA_CHECK(cudaGetLastError());
  {
    size_t t1 = 0, t2 = 0;
    cub::DoubleBuffer<uint64_t> k(h->d_key0, h->d_key1);
    cub::DoubleBuffer<int32_t> v(h->d_ord0, h->d_ord1);
    SBG_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairs(NULL, t1, k, v, (int)(B * G), (int)B,
                                                            h->d_seg, h->d_seg + 1, 0, 64, h->stream));
    cub::DoubleBuffer<uint64_t> hk(h->d_hk0, h->d_hk1);
    SBG_CUDA_CHECK(cub::DeviceRadixSort::SortKeys(NULL, t2, hk, (int)(B * M), 0, h->kbits, h->stream));
    h->temp_bytes = t1 > t2 ? t1 : t2;
    SBG_TRY(sbg_device_alloc(&h->d_temp, h->temp_bytes, "the sort work space", ctx));
  }
  SBG_CUDA_CHECK(cudaStreamSynchronize(h->stream));
done:
  free(member_set);
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
  int64_t M = h->M;
  if (n < 1 || n > h->B) return sbg_fail(ctx, SBG_ERR_INTERNAL, "GPU batch of %lld permutations", (long long)n);
  SBG_TRY(sbg_device_select(ctx->device, ctx));
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
    k_metric<<<gg, 256, 0, h->stream>>>(*h, n);
    SBG_CUDA_CHECK(cudaGetLastError());
    cub::DoubleBuffer<uint64_t> k(h->d_key0, h->d_key1);
    cub::DoubleBuffer<int32_t> v(h->d_ord0, h->d_ord1);
    size_t tb = h->temp_bytes;
    SBG_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairs(h->d_temp, tb, k, v, (int)(n * G), (int)n,
                                                            h->d_seg, h->d_seg + 1, 0, 64, h->stream));
    const int32_t *ord = v.Current();
    k_rank<<<gg, 256, 0, h->stream>>>(ord, G, n, h->d_rank);
    SBG_CUDA_CHECK(cudaGetLastError());
    dim3 gm((unsigned)((M + 255) / 256), (unsigned)n);
    k_hitkeys<<<gm, 256, 0, h->stream>>>(*h, n);
    SBG_CUDA_CHECK(cudaGetLastError());
    cub::DoubleBuffer<uint64_t> hk(h->d_hk0, h->d_hk1);
    tb = h->temp_bytes;
    SBG_CUDA_CHECK(cub::DeviceRadixSort::SortKeys(h->d_temp, tb, hk, (int)(n * M), 0,
                                                  bits_for((uint64_t)n * S) + h->rbits, h->stream));
    dim3 gs((unsigned)((S + 127) / 128), (unsigned)n);
    k_es<<<gs, 128, 0, h->stream>>>(*h, hk.Current(), ord, n);
    SBG_CUDA_CHECK(cudaGetLastError());
    SBG_CUDA_CHECK(cudaMemcpyAsync(es, h->d_es, (size_t)n * S * sizeof(double), cudaMemcpyDeviceToHost, h->stream));
    SBG_CUDA_CHECK(cudaStreamSynchronize(h->stream));
  }
done:
  return st;
}
