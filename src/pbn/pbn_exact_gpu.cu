/* pbnSteadyState(method = "exact", backend = "gpu"): the power iteration of
 * pbn_exact.c on the GPU.  The function-update transitions are built on the
 * host (sbg_pbn_exact_structure, as the CPU does) and transposed so that
 * each target state gathers its inflow (no atomics: a deterministic order);
 * perturbations are 2x2 butterflies per bit, the low bits fused in shared
 * memory.  Sums are fixed-order tree reductions. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_check.cuh"
#include "pbn.h"

#define PBN_EX_BLOCK 256
#define PBN_EX_TILE_BITS 10 /* butterflies of bits below this run in shared memory */

/* Butterflies of the perturbable bits below PBN_EX_TILE_BITS (bitmask
 * `low`) on tiles of 2^tile_bits consecutive states. */
static __global__ void pbn_ex_pert_low(double *x, int64_t ns, int tile_bits, uint32_t low, double p) {
  __shared__ double t[1 << PBN_EX_TILE_BITS];
  const int tile = 1 << tile_bits;
  const int64_t base = (int64_t)blockIdx.x * tile;
  for (int i = threadIdx.x; i < tile; i += blockDim.x) t[i] = x[base + i];
  __syncthreads();
  for (int b = 0; b < tile_bits; b++) {
    if (!((low >> b) & 1u)) continue;
    const int bit = 1 << b;
    for (int h = threadIdx.x; h < tile / 2; h += blockDim.x) {
      int s = ((h >> b) << (b + 1)) | (h & (bit - 1));  /* h with a 0 inserted at bit b */
      double u = t[s], v = t[s | bit];
      t[s] = (1 - p) * u + p * v;
      t[s | bit] = p * u + (1 - p) * v;
    }
    __syncthreads();
  }
  for (int i = threadIdx.x; i < tile; i += blockDim.x) x[base + i] = t[i];
  (void)ns;
}

/* One butterfly pass of a high bit b over all pairs. */
static __global__ void pbn_ex_pert_bit(double *x, int64_t half, int b, double p) {
  const int64_t h = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (h >= half) return;
  const int64_t bit = (int64_t)1 << b;
  int64_t s = ((h >> b) << (b + 1)) | (h & (bit - 1));
  double u = x[s], v = x[s | bit];
  x[s] = (1 - p) * u + p * v;
  x[s | bit] = p * u + (1 - p) * v;
}

/* next[t] = (pi[t] + next[t] - q0 pi[t]) / 2 + q0 / 2 * sum over s -> t of
 * val pi[s]; block partial sums of next into part. */
static __global__ void pbn_ex_update(const double *pi, double *next, const int64_t *trow,
                                     const uint32_t *tsrc, const double *tval, int64_t ns, double q0,
                                     double *part) {
  __shared__ double red[PBN_EX_BLOCK];
  const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  double v = 0;
  if (t < ns) {
    double acc = 0;
    for (int64_t e = trow[t]; e < trow[t + 1]; e++) acc += tval[e] * pi[tsrc[e]];
    v = 0.5 * (pi[t] + next[t] - q0 * pi[t]) + 0.5 * q0 * acc;
    next[t] = v;
  }
  red[threadIdx.x] = v;
  __syncthreads();
  for (int h = blockDim.x / 2; h > 0; h >>= 1) {
    if ((int)threadIdx.x < h) red[threadIdx.x] += red[threadIdx.x + h];
    __syncthreads();
  }
  if (threadIdx.x == 0) part[blockIdx.x] = red[0];
}

/* One block: out[0] = sum of part[0..m-1] in a fixed order. */
static __global__ void pbn_ex_sum(const double *part, int64_t m, double *out) {
  __shared__ double red[PBN_EX_BLOCK];
  double v = 0;
  for (int64_t i = threadIdx.x; i < m; i += blockDim.x) v += part[i];
  red[threadIdx.x] = v;
  __syncthreads();
  for (int h = blockDim.x / 2; h > 0; h >>= 1) {
    if ((int)threadIdx.x < h) red[threadIdx.x] += red[threadIdx.x + h];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[0] = red[0];
}

/* pi = next / tot; block partial sums of |change| into part. */
static __global__ void pbn_ex_normalize(double *pi, const double *next, int64_t ns, const double *tot,
                                        double *part) {
  __shared__ double red[PBN_EX_BLOCK];
  const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  double d = 0;
  if (t < ns) {
    double v = next[t] / tot[0];
    d = fabs(v - pi[t]);
    pi[t] = v;
  }
  red[threadIdx.x] = d;
  __syncthreads();
  for (int h = blockDim.x / 2; h > 0; h >>= 1) {
    if ((int)threadIdx.x < h) red[threadIdx.x] += red[threadIdx.x + h];
    __syncthreads();
  }
  if (threadIdx.x == 0) part[blockIdx.x] = red[0];
}

extern "C" sbg_status sbg_pbn_exact_gpu(const sbg_pbn_net *net, const double *fun_prob, double p,
                                        double tol, int64_t max_iter,
                                        double *pi, double *iterations, double *delta, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  cudaStream_t stream = NULL;
  int64_t *row = NULL, *trow = NULL, *d_trow = NULL;
  uint32_t *col = NULL, *tsrc = NULL, *d_tsrc = NULL;
  double *val = NULL, *tval = NULL, *d_tval = NULL, *d_pi = NULL, *d_next = NULL, *d_part = NULL,
         *d_scal = NULL;
  const int32_t n = net->n;
  const int64_t NS = (int64_t)1 << n;
  const int64_t blocks = (NS + PBN_EX_BLOCK - 1) / PBN_EX_BLOCK;
  const int tile_bits = n < PBN_EX_TILE_BITS ? n : PBN_EX_TILE_BITS;
  uint32_t low = 0;
  uint64_t high = 0;
  int64_t nnz = 0;

  SBG_TRY(sbg_pbn_exact_structure(net, fun_prob, &row, &col, &val, ctx));
  nnz = row[NS];
  /* transpose (counting sort by target; sources stay ascending per target) */
  trow = (int64_t *)calloc((size_t)NS + 1, sizeof(int64_t));
  tsrc = (uint32_t *)malloc(sizeof(uint32_t) * (size_t)(nnz > 0 ? nnz : 1));
  tval = (double *)malloc(sizeof(double) * (size_t)(nnz > 0 ? nnz : 1));
  if (!trow || !tsrc || !tval) { st = sbg_fail(ctx, SBG_ERR_ALLOC, "exact method: out of memory"); goto done; }
  for (int64_t e = 0; e < nnz; e++) trow[col[e] + 1]++;
  for (int64_t s = 0; s < NS; s++) trow[s + 1] += trow[s];
  {
    int64_t *fill = (int64_t *)malloc(sizeof(int64_t) * (size_t)NS);
    if (!fill) { st = sbg_fail(ctx, SBG_ERR_ALLOC, "exact method: out of memory"); goto done; }
    memcpy(fill, trow, sizeof(int64_t) * (size_t)NS);
    for (int64_t s = 0; s < NS; s++)
      for (int64_t e = row[s]; e < row[s + 1]; e++) {
        int64_t at = fill[col[e]]++;
        tsrc[at] = (uint32_t)s;
        tval[at] = val[e];
      }
    free(fill);
  }
  if (p > 0)
    for (int32_t j = 0; j < net->n_pert_total; j++) {
      int32_t node = net->pert_node[j];
      if (node < 0) continue;
      if (node < tile_bits) low |= 1u << node;
      else high |= (uint64_t)1 << node;
    }

  SBG_TRY(sbg_device_select(ctx->device, ctx));
  SBG_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  SBG_TRY(sbg_device_alloc((void **)&d_trow, sizeof(int64_t) * (size_t)(NS + 1), "the transitions", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_tsrc, sizeof(uint32_t) * (size_t)(nnz > 0 ? nnz : 1), "the transitions", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_tval, sizeof(double) * (size_t)(nnz > 0 ? nnz : 1), "the transitions", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_pi, sizeof(double) * (size_t)NS, "the distribution", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_next, sizeof(double) * (size_t)NS, "the distribution", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_part, sizeof(double) * (size_t)blocks, "the partial sums", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_scal, sizeof(double) * 2, "the sums", ctx));
  SBG_CUDA_CHECK(cudaMemcpyAsync(d_trow, trow, sizeof(int64_t) * (size_t)(NS + 1), cudaMemcpyHostToDevice, stream));
  if (nnz > 0) {
    SBG_CUDA_CHECK(cudaMemcpyAsync(d_tsrc, tsrc, sizeof(uint32_t) * (size_t)nnz, cudaMemcpyHostToDevice, stream));
    SBG_CUDA_CHECK(cudaMemcpyAsync(d_tval, tval, sizeof(double) * (size_t)nnz, cudaMemcpyHostToDevice, stream));
  }
  for (int64_t s = 0; s < NS; s++) pi[s] = 1.0 / (double)NS;
  SBG_CUDA_CHECK(cudaMemcpyAsync(d_pi, pi, sizeof(double) * (size_t)NS, cudaMemcpyHostToDevice, stream));

  {
    const double q0 = pow(1.0 - p, (double)net->n_pert_total);
    const int64_t tiles = NS >> tile_bits;
    const int64_t half = NS / 2;
    const unsigned hblocks = (unsigned)((half + PBN_EX_BLOCK - 1) / PBN_EX_BLOCK);
    int64_t it = 0;
    double d = INFINITY;
    while (it < max_iter) {
      SBG_CUDA_CHECK(cudaMemcpyAsync(d_next, d_pi, sizeof(double) * (size_t)NS, cudaMemcpyDeviceToDevice, stream));
      if (low) {
        pbn_ex_pert_low<<<(unsigned)tiles, PBN_EX_BLOCK, 0, stream>>>(d_next, NS, tile_bits, low, p);
        SBG_CUDA_CHECK(cudaGetLastError());
      }
      for (int b = tile_bits; b < n; b++) {
        if (!((high >> b) & 1u)) continue;
        pbn_ex_pert_bit<<<hblocks, PBN_EX_BLOCK, 0, stream>>>(d_next, half, b, p);
        SBG_CUDA_CHECK(cudaGetLastError());
      }
      pbn_ex_update<<<(unsigned)blocks, PBN_EX_BLOCK, 0, stream>>>(d_pi, d_next, d_trow, d_tsrc, d_tval, NS,
                                                                   q0, d_part);
      SBG_CUDA_CHECK(cudaGetLastError());
      pbn_ex_sum<<<1, PBN_EX_BLOCK, 0, stream>>>(d_part, blocks, d_scal);
      SBG_CUDA_CHECK(cudaGetLastError());
      pbn_ex_normalize<<<(unsigned)blocks, PBN_EX_BLOCK, 0, stream>>>(d_pi, d_next, NS, d_scal, d_part);
      SBG_CUDA_CHECK(cudaGetLastError());
      pbn_ex_sum<<<1, PBN_EX_BLOCK, 0, stream>>>(d_part, blocks, d_scal + 1);
      SBG_CUDA_CHECK(cudaGetLastError());
      SBG_CUDA_CHECK(cudaMemcpyAsync(&d, d_scal + 1, sizeof(double), cudaMemcpyDeviceToHost, stream));
      SBG_CUDA_CHECK(cudaStreamSynchronize(stream));
      it++;
      if (d < tol) break;
      if ((it & 63) == 0) SBG_TRY(sbg_poll(ctx, (double)it / (double)max_iter));
    }
    *iterations = (double)it;
    *delta = d;
  }
  SBG_CUDA_CHECK(cudaMemcpyAsync(pi, d_pi, sizeof(double) * (size_t)NS, cudaMemcpyDeviceToHost, stream));
  SBG_CUDA_CHECK(cudaStreamSynchronize(stream));
done:
  free(row);
  free(col);
  free(val);
  free(trow);
  free(tsrc);
  free(tval);
  cudaFree(d_trow);
  cudaFree(d_tsrc);
  cudaFree(d_tval);
  cudaFree(d_pi);
  cudaFree(d_next);
  cudaFree(d_part);
  cudaFree(d_scal);
  if (stream) cudaStreamDestroy(stream);
  return st;
}
