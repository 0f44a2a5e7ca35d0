/* GPU trajectory engine of pbnSteadyState() and pbnSimulate(): one thread
 * per trajectory, the step code of pbn_step.h (identical to the CPU's), the
 * network in shared memory where it fits; networks of at most 128 nodes keep
 * the state in registers (pbn_step2), larger ones in shared memory where it
 * fits; counters in shared memory; exact integer reductions per set. */
#include <stdlib.h>
#include <string.h>

#include "cuda_check.cuh"
#include "pbn.h"
#include "pbn_step.h"
#include "pbn_bits.h"

#define PBN_BLOCK 128
#define PBN_SMEM_BUDGET (48 * 1024)

/* The network as one blob of 8-byte aligned sections, so a kernel can copy
 * it into shared memory in one loop and rebuild the pointers. */
typedef struct pbn_layout {
  size_t fun_start, fun_thresh, fun_k, in_start, inputs, tab_start, tables, sel_rank,
      pert_node, gap_thresh, first_thresh, skip_thresh, node_of_full, set_start, word, pos, neg, frec, bytes;
} pbn_layout;

typedef struct pbn_dev_args {
  sbg_pbn_net net;     /* scalars; pointers are rebuilt from the blob */
  int32_t n_sets;
  pbn_layout lay;
  const uint64_t *blob;
  int blob_shared;     /* copy the blob into shared memory */
  int state_shared;    /* keep the chains' states in shared memory */
  int cnt_shared;      /* keep the counters in shared memory */
  int small;           /* <= 128 nodes: register states, compact functions (frec) */
  int64_t n_chains;    /* this device's chains ... */
  int64_t c_base;      /* ... the first of them in the run's numbering (its stream) */
  uint64_t *state;     /* W * n_chains, word w of chain c at w * n_chains + c */
  sbg_philox *rng;     /* n_chains */
  int32_t *gap;        /* n_chains: function steps before the next event (pbn_draw_gap) */
  uint32_t *cnt;       /* 3 * n_sets * n_chains: (3 s + j) * n_chains + c */
} pbn_dev_args;

static size_t lay_add(size_t *off, size_t bytes) {
  size_t at = *off;
  *off += (bytes + 7) & ~(size_t)7;
  return at;
}

static void pbn_make_layout(const sbg_pbn_net *net, const sbg_pbn_sets *sets, int small,
                            pbn_layout *L, int64_t *n_inputs, int64_t *n_tables) {
  int32_t nf = net->fun_start[net->n];
  int64_t ni = 0, nt = 0;
  for (int32_t f = 0; f < nf; f++) {
    int64_t e = net->in_start[f] + net->fun_k[f];
    if (e > ni) ni = e;
    int64_t t = net->tab_start[f] + ((((int64_t)1 << net->fun_k[f]) + 31) / 32);
    if (t > nt) nt = t;
  }
  *n_inputs = ni;
  *n_tables = nt;
  int32_t ne = sets ? sets->set_start[sets->n_sets] : 0;
  size_t off = 0;
  L->fun_start = lay_add(&off, 4 * (size_t)(net->n + 1));
  L->fun_thresh = lay_add(&off, 8 * (size_t)nf);
  L->fun_k = lay_add(&off, 4 * (size_t)nf);
  L->in_start = lay_add(&off, 4 * (size_t)nf);
  L->inputs = lay_add(&off, 4 * (size_t)ni);
  L->tab_start = lay_add(&off, 8 * (size_t)nf);
  L->tables = lay_add(&off, 4 * (size_t)nt);
  L->sel_rank = lay_add(&off, 4 * (size_t)net->n);
  L->pert_node = lay_add(&off, 4 * (size_t)net->n_pert_total);
  L->gap_thresh = lay_add(&off, 8 * (size_t)(net->n_pert_total + 1));
  L->first_thresh = lay_add(&off, 8 * (size_t)(net->n_pert_total + 1));
  L->skip_thresh = lay_add(&off, 8 * (size_t)(net->n_skip + 1));
  L->node_of_full = lay_add(&off, 4 * (size_t)net->n_total);
  L->set_start = lay_add(&off, 4 * (size_t)((sets ? sets->n_sets : 0) + 1));
  L->word = lay_add(&off, 4 * (size_t)ne);
  L->pos = lay_add(&off, 8 * (size_t)ne);
  L->neg = lay_add(&off, 8 * (size_t)ne);
  L->frec = lay_add(&off, small ? sizeof(sbg_pbn_frec) * (size_t)nf : 0);
  L->bytes = off;
}

static int pbn_fill_blob(const sbg_pbn_net *net, const sbg_pbn_sets *sets, const pbn_layout *L,
                         int64_t ni, int64_t nt, int small, unsigned char *b) {
  int32_t nf = net->fun_start[net->n];
  memcpy(b + L->fun_start, net->fun_start, 4 * (size_t)(net->n + 1));
  memcpy(b + L->fun_thresh, net->fun_thresh, 8 * (size_t)nf);
  memcpy(b + L->fun_k, net->fun_k, 4 * (size_t)nf);
  memcpy(b + L->in_start, net->in_start, 4 * (size_t)nf);
  memcpy(b + L->inputs, net->inputs, 4 * (size_t)ni);
  memcpy(b + L->tab_start, net->tab_start, 8 * (size_t)nf);
  memcpy(b + L->tables, net->tables, 4 * (size_t)nt);
  memcpy(b + L->sel_rank, net->sel_rank, 4 * (size_t)net->n);
  memcpy(b + L->pert_node, net->pert_node, 4 * (size_t)net->n_pert_total);
  memcpy(b + L->gap_thresh, net->gap_thresh, 8 * (size_t)(net->n_pert_total + 1));
  memcpy(b + L->first_thresh, net->first_thresh, 8 * (size_t)(net->n_pert_total + 1));
  memcpy(b + L->skip_thresh, net->skip_thresh, 8 * (size_t)(net->n_skip + 1));
  memcpy(b + L->node_of_full, net->node_of_full, 4 * (size_t)net->n_total);
  if (sets) {
    int32_t ne = sets->set_start[sets->n_sets];
    memcpy(b + L->set_start, sets->set_start, 4 * (size_t)(sets->n_sets + 1));
    memcpy(b + L->word, sets->word, 4 * (size_t)ne);
    memcpy(b + L->pos, sets->pos, 8 * (size_t)ne);
    memcpy(b + L->neg, sets->neg, 8 * (size_t)ne);
  } else {
    memset(b + L->set_start, 0, 4);
  }
  /* the GPU packs every function it can: its loops run exactly k */
  if (small) return sbg_pbn_frecs(net, (sbg_pbn_frec *)(b + L->frec), SBG_PBN_FREC_K) == 0;
  return 1;
}

static __device__ void pbn_bind(const pbn_dev_args &a, const unsigned char *b, sbg_pbn_net *net,
                                sbg_pbn_sets *sets) {
  *net = a.net;
  const pbn_layout &L = a.lay;
  net->fun_start = (const int32_t *)(b + L.fun_start);
  net->fun_thresh = (const uint64_t *)(b + L.fun_thresh);
  net->fun_k = (const int32_t *)(b + L.fun_k);
  net->in_start = (const int32_t *)(b + L.in_start);
  net->inputs = (const int32_t *)(b + L.inputs);
  net->tab_start = (const int64_t *)(b + L.tab_start);
  net->tables = (const uint32_t *)(b + L.tables);
  net->sel_rank = (const int32_t *)(b + L.sel_rank);
  net->pert_node = (const int32_t *)(b + L.pert_node);
  net->gap_thresh = (const uint64_t *)(b + L.gap_thresh);
  net->first_thresh = (const uint64_t *)(b + L.first_thresh);
  net->skip_thresh = (const uint64_t *)(b + L.skip_thresh);
  net->node_of_full = (const int32_t *)(b + L.node_of_full);
  sets->n_sets = a.n_sets;
  sets->set_start = (const int32_t *)(b + L.set_start);
  sets->word = (const int32_t *)(b + L.word);
  sets->pos = (const uint64_t *)(b + L.pos);
  sets->neg = (const uint64_t *)(b + L.neg);
}

/* The network blob, copied by the whole block into the front of shared
 * memory when it fits (every thread reaches this before any returns). */
static __device__ __forceinline__ const unsigned char *pbn_stage_blob(const pbn_dev_args &a, uint64_t *smem) {
  if (!a.blob_shared) return (const unsigned char *)a.blob;
  for (size_t i = threadIdx.x; i < a.lay.bytes / 8; i += blockDim.x) smem[i] = a.blob[i];
  __syncthreads();
  return (const unsigned char *)smem;
}

/* Shared memory of a block: [blob][states: 2 W x blockDim][counters: 3 S x blockDim]. */
static __global__ void pbn_advance_kernel(pbn_dev_args a, int64_t steps, int count) {
  extern __shared__ uint64_t smem[];
  const int tid = threadIdx.x;
  const int64_t c = (int64_t)blockIdx.x * blockDim.x + tid;
  const int32_t W = a.net.n_words, S = a.n_sets;
  size_t blob_words = a.blob_shared ? a.lay.bytes / 8 : 0;
  const unsigned char *bl = pbn_stage_blob(a, smem);
  if (c >= a.n_chains) return;
  sbg_pbn_net net;
  sbg_pbn_sets sets;
  pbn_bind(a, bl, &net, &sets);

  uint64_t *sa, *sb;
  int64_t sst;
  uint64_t *sh_state = smem + blob_words;
  if (a.state_shared) {
    sa = sh_state + tid;
    sb = sh_state + (size_t)W * blockDim.x + tid;
    sst = blockDim.x;
    for (int32_t w = 0; w < W; w++) sa[w * sst] = a.state[(int64_t)w * a.n_chains + c];
  } else {
    /* the second buffer is the upper half of the state array */
    sa = a.state + c;
    sb = a.state + (int64_t)W * a.n_chains + c;
    sst = a.n_chains;
  }
  uint32_t *k;
  int64_t kst;
  if (a.cnt_shared) {
    uint32_t *sh_cnt = (uint32_t *)(sh_state + (a.state_shared ? 2 * (size_t)W * blockDim.x : 0));
    k = sh_cnt + tid;
    kst = blockDim.x;
    for (int32_t j = 0; j < 3 * S; j++) k[j * kst] = a.cnt[(int64_t)j * a.n_chains + c];
  } else {
    k = a.cnt + c;
    kst = a.n_chains;
  }
  sbg_philox g = a.rng[c];
  int32_t gs = a.gap[c];
  for (int64_t t = 0; t < steps; t++) {
    const int fstep = gs != 0;
    pbn_step(&net, sa, sb, sst, &g, &gs);
    int32_t skipped = 0;
    if (net.det && fstep) {
      /* at a fixed point: the function steps up to the next event at once */
      int same = 1;
      for (int32_t w = 0; w < W; w++) same &= sa[w * sst] == sb[w * sst];
      if (same) skipped = pbn_skip_fixed(&net, &g, &gs, steps - 1 - t);
      t += skipped;
    }
    if (count) {
      for (int32_t s = 0; s < S; s++) {
        int x0 = pbn_in_set(&sets, s, sa, sst), x1 = pbn_in_set(&sets, s, sb, sst);
        k[(3 * s) * kst] += (uint32_t)x1 * (uint32_t)(1 + skipped);
        k[(3 * s + 1) * kst] += (uint32_t)(!x0 & x1);
        k[(3 * s + 2) * kst] += (uint32_t)(x0 & !x1);
      }
    }
    uint64_t *tmp = sa; sa = sb; sb = tmp;
  }
  a.rng[c] = g;
  a.gap[c] = gs;
  if (a.state_shared) {
    for (int32_t w = 0; w < W; w++) a.state[(int64_t)w * a.n_chains + c] = sa[w * sst];
  } else if (sa != a.state + c) {
    for (int32_t w = 0; w < W; w++) a.state[(int64_t)w * a.n_chains + c] = sa[w * sst];
  }
  if (a.cnt_shared)
    for (int32_t j = 0; j < 3 * S; j++) a.cnt[(int64_t)j * a.n_chains + c] = k[j * kst];
}

/* Networks of at most 128 simulated nodes: the state in registers (two
 * words; TWO = 0 for one), compact functions (pbn_step2).  Shared memory:
 * [blob][counters: 3 S x blockDim].  MINB: the blocks an SM must hold.
 * Two words fit 72 registers with 7 blocks; with 8 (64 registers, a few
 * spilled) a step is about 1% slower, but an H200 then holds 2^17 chains
 * at once instead of 118,272: a device with 2^17 chains (2^18 split over
 * two) ran them in 0.491 s instead of 0.519 s, one wave instead of a wave
 * and a tail (pbn_pick_wide). */
template <int TWO, int MINB>
static __global__ void __launch_bounds__(PBN_BLOCK, MINB) pbn_advance2_kernel(pbn_dev_args a, int64_t steps, int count) {
  extern __shared__ uint64_t smem[];
  const int tid = threadIdx.x;
  const int64_t c = (int64_t)blockIdx.x * blockDim.x + tid;
  const int32_t S = a.n_sets;
  size_t blob_words = a.blob_shared ? a.lay.bytes / 8 : 0;
  const unsigned char *bl = pbn_stage_blob(a, smem);
  if (c >= a.n_chains) return;
  sbg_pbn_net net;
  sbg_pbn_sets sets;
  pbn_bind(a, bl, &net, &sets);
  const sbg_pbn_frec *rec = (const sbg_pbn_frec *)(bl + a.lay.frec);
  uint32_t *k;
  int64_t kst;
  if (a.cnt_shared) {
    k = (uint32_t *)(smem + blob_words) + tid;
    kst = blockDim.x;
    for (int32_t j = 0; j < 3 * S; j++) k[j * kst] = a.cnt[(int64_t)j * a.n_chains + c];
  } else {
    k = a.cnt + c;
    kst = a.n_chains;
  }
  uint64_t x0 = a.state[c], x1 = TWO ? a.state[a.n_chains + c] : 0;
  sbg_philox g = a.rng[c];
  int32_t gs = a.gap[c];
  pbn_run2(&net, rec, 0, TWO, &sets, steps, count, &x0, &x1, &g, &gs, k, kst);
  a.rng[c] = g;
  a.gap[c] = gs;
  a.state[c] = x0;
  if (TWO) a.state[a.n_chains + c] = x1;
  if (a.cnt_shared)
    for (int32_t j = 0; j < 3 * S; j++) a.cnt[(int64_t)j * a.n_chains + c] = k[j * kst];
}

static __global__ void pbn_init_kernel(pbn_dev_args a, uint64_t seed) {
  const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= a.n_chains) return;
  sbg_philox g;
  sbg_philox_init(&g, seed, (uint64_t)(a.c_base + c), 0);
  sbg_pbn_net net;
  sbg_pbn_sets sets;
  pbn_bind(a, (const unsigned char *)a.blob, &net, &sets);
  pbn_random_state(&net, &g, a.state + c, a.n_chains);
  a.gap[c] = pbn_draw_gap(&net, &g);
  a.rng[c] = g;
}

/* One block per set: exact 64-bit sums over chains. */
static __global__ void pbn_reduce_kernel(const uint32_t *cnt, int64_t nc, uint64_t *sums) {
  __shared__ unsigned long long part[4][PBN_BLOCK];
  const int s = blockIdx.x;
  unsigned long long v0 = 0, v1 = 0, v2 = 0, v3 = 0;
  for (int64_t c = threadIdx.x; c < nc; c += blockDim.x) {
    uint64_t n1 = cnt[(int64_t)(3 * s) * nc + c];
    v0 += n1;
    v1 += cnt[(int64_t)(3 * s + 1) * nc + c];
    v2 += cnt[(int64_t)(3 * s + 2) * nc + c];
    v3 += n1 * n1;
  }
  part[0][threadIdx.x] = v0; part[1][threadIdx.x] = v1;
  part[2][threadIdx.x] = v2; part[3][threadIdx.x] = v3;
  __syncthreads();
  for (int h = blockDim.x / 2; h > 0; h >>= 1) {
    if ((int)threadIdx.x < h)
      for (int j = 0; j < 4; j++) part[j][threadIdx.x] += part[j][threadIdx.x + h];
    __syncthreads();
  }
  if (threadIdx.x == 0)
    for (int j = 0; j < 4; j++) sums[(int64_t)s * SBG_PBN_NSUM + j] = part[j][0];
}

/* Shared by the two engines' advance loops. */

/* What either engine holds on a device besides its network and states:
 * the stream, the launch timers, and for `lanes` chains their generators,
 * event counts and counters (3 per set), with the counters' sums. */
static sbg_status pbn_dev_open(int device, cudaStream_t *stream, cudaEvent_t *t0, cudaEvent_t *t1, int64_t lanes,
                               int32_t S, sbg_philox **rng, int32_t **gap, uint32_t **cnt, uint64_t **sums,
                               sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  const size_t s1 = (size_t)(S > 0 ? S : 1);
  SBG_TRY(sbg_device_select(device, ctx));
  SBG_CUDA_CHECK(cudaStreamCreateWithFlags(stream, cudaStreamNonBlocking));
  SBG_CUDA_CHECK(cudaEventCreate(t0));
  SBG_CUDA_CHECK(cudaEventCreate(t1));
  SBG_TRY(sbg_device_alloc((void **)rng, sizeof(sbg_philox) * (size_t)lanes, "the generators", ctx));
  SBG_TRY(sbg_device_alloc((void **)gap, sizeof(int32_t) * (size_t)lanes, "the event counts", ctx));
  SBG_TRY(sbg_device_alloc((void **)cnt, sizeof(uint32_t) * 3 * s1 * (size_t)lanes, "the counters", ctx));
  SBG_TRY(sbg_device_alloc((void **)sums, sizeof(uint64_t) * SBG_PBN_NSUM * s1, "the sums", ctx));
done:
  return st;
}

static void pbn_dev_close(int device, cudaStream_t stream, cudaEvent_t t0, cudaEvent_t t1, void *blob, void *states,
                          void *rng, void *gap, void *cnt, void *sums) {
  if (!stream) return;
  cudaSetDevice(device);
  cudaFree(blob);
  cudaFree(states);
  cudaFree(rng);
  cudaFree(gap);
  cudaFree(cnt);
  cudaFree(sums);
  if (t0) cudaEventDestroy(t0);
  if (t1) cudaEventDestroy(t1);
  cudaStreamDestroy(stream);
}

/* Steps for the next launch, from the last one's `chunk` steps taking `ms`:
 * aimed at ~100 ms per launch, so Ctrl-C is seen quickly, changed at most
 * 4-fold per launch.  A launch that ran fast (little work left in it) must
 * not let the next one grow without bound, hence the engine's `cap`. */
static double pbn_next_chunk(double chunk, float ms, double cap) {
  double f = ms > 0.01 ? 100.0 / ms : 4.0;
  if (f > 4) f = 4;
  if (f < 0.25) f = 0.25;
  chunk *= f;
  return chunk > cap ? cap : chunk;
}

/* The advance of either engine (Dev: pbn_gpu or pbnb_gpu, whose counters
 * hold pbn_lanes(d) chains): `steps` steps in launches of `*chunk` steps,
 * adapted; each round starts every device's launch (`launch(d, done, len,
 * count)`: len steps, `done` into this advance) and then waits for them, so
 * the devices run together.  With `count`, sums = the counters summed over
 * the devices (exact integers: the same sums as one device). */
template <typename Dev, typename Launch>
static sbg_status pbn_advance_devices(Dev *dev, int nd, double *chunk, double cap, int64_t steps, int count,
                                      int32_t S, uint64_t *part, uint64_t *sums, double lo, double hi,
                                      Launch launch, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  const size_t n_sums = SBG_PBN_NSUM * (size_t)S;
  for (int i = 0; i < nd && count && S > 0; i++) {
    Dev *d = &dev[i];
    SBG_TRY(sbg_device_select(d->device, ctx));
    SBG_CUDA_CHECK(cudaMemsetAsync(d->a.cnt, 0, sizeof(uint32_t) * 3 * (size_t)S * pbn_lanes(d), d->stream));
  }
  for (int64_t done = 0; done < steps;) {
    int64_t len = (int64_t)*chunk;
    if (len < 1) len = 1;
    if (len > steps - done) len = steps - done;
    for (int i = 0; i < nd; i++) {
      Dev *d = &dev[i];
      SBG_TRY(sbg_device_select(d->device, ctx));
      SBG_CUDA_CHECK(cudaEventRecord(d->t0, d->stream));
      launch(d, done, len, count);
      SBG_CUDA_CHECK(cudaGetLastError());
      SBG_CUDA_CHECK(cudaEventRecord(d->t1, d->stream));
    }
    float ms = 0;
    for (int i = 0; i < nd; i++) {
      Dev *d = &dev[i];
      float m = 0;
      SBG_TRY(sbg_device_select(d->device, ctx));
      SBG_CUDA_CHECK(cudaEventSynchronize(d->t1));
      SBG_CUDA_CHECK(cudaEventElapsedTime(&m, d->t0, d->t1));
      if (m > ms) ms = m;
    }
    *chunk = pbn_next_chunk(*chunk, ms, cap);
    done += len;
    SBG_TRY(sbg_poll(ctx, lo + (hi - lo) * (double)done / (double)steps));
  }
  if (count && S > 0) {
    memset(sums, 0, sizeof(uint64_t) * n_sums);
    for (int i = 0; i < nd; i++) {
      Dev *d = &dev[i];
      SBG_TRY(sbg_device_select(d->device, ctx));
      pbn_reduce_kernel<<<S, PBN_BLOCK, 0, d->stream>>>(d->a.cnt, pbn_lanes(d), d->d_sums);
      SBG_CUDA_CHECK(cudaGetLastError());
      SBG_CUDA_CHECK(cudaMemcpyAsync(part, d->d_sums, sizeof(uint64_t) * n_sums, cudaMemcpyDeviceToHost, d->stream));
      SBG_CUDA_CHECK(cudaStreamSynchronize(d->stream));
      for (size_t k = 0; k < n_sums; k++) sums[k] += part[k];
    }
  }
done:
  return st;
}

/* One device's share of the chains. */
typedef struct pbn_gpu {
  pbn_dev_args a;
  size_t smem;
  unsigned blocks;
  int wide;            /* two-word network: the 8-block kernel (pbn_pick_wide) */
  int device;
  cudaStream_t stream;
  cudaEvent_t t0, t1;
  uint64_t *d_blob, *d_sums;
} pbn_gpu;

static int64_t pbn_lanes(const pbn_gpu *d) { return d->a.n_chains; }

/* The engine the two-state driver sees: the chains split into contiguous
 * blocks over one or more devices, each block moved by its own stream; the
 * counts are exact integers, so the sums over the devices are the sums of
 * one device. */
typedef struct pbn_gpus {
  sbg_pbn_engine base;
  int nd;
  pbn_gpu dev[SBG_PBN_MAX_DEVICES];
  double chunk;        /* steps per launch, adapted to ~0.1 s */
  uint64_t *part;      /* host: one device's sums */
} pbn_gpus;

static void pbn_launch(pbn_gpu *d, int64_t len, int count) {
  if (!d->a.small)
    pbn_advance_kernel<<<d->blocks, PBN_BLOCK, d->smem, d->stream>>>(d->a, len, count);
  else if (d->a.net.n_words > 1 && d->wide)
    pbn_advance2_kernel<1, 8><<<d->blocks, PBN_BLOCK, d->smem, d->stream>>>(d->a, len, count);
  else if (d->a.net.n_words > 1)
    pbn_advance2_kernel<1, 7><<<d->blocks, PBN_BLOCK, d->smem, d->stream>>>(d->a, len, count);
  else
    pbn_advance2_kernel<0, 8><<<d->blocks, PBN_BLOCK, d->smem, d->stream>>>(d->a, len, count);
}

static sbg_status pbn_gpu_advance(sbg_pbn_engine *eng, int64_t steps, int count, uint64_t *sums,
                                  double lo, double hi, sbg_ctx *ctx) {
  pbn_gpus *e = (pbn_gpus *)eng;
  int64_t nc = 0;
  for (int i = 0; i < e->nd; i++) nc += e->dev[i].a.n_chains;
  /* at most ~4e9 chain-steps per device, well under a second */
  double cap = 4e9 * e->nd / (double)nc;
  return pbn_advance_devices(e->dev, e->nd, &e->chunk, cap < 1e9 ? cap : 1e9, steps, count, e->dev[0].a.n_sets,
                             e->part, sums, lo, hi,
                             [](pbn_gpu *d, int64_t, int64_t len, int cnt) { pbn_launch(d, len, cnt); }, ctx);
}

/* Two-word networks: the 8-block kernel when the device holds all its
 * blocks at once with it and not with the 7-block one.  Otherwise the
 * 7-block kernel (with several waves either way, their last partial wave
 * cost little: 2^18 and 2^20 chains ran as fast or faster with it). */
static sbg_status pbn_pick_wide(pbn_gpu *d, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  int sms = 0, b7 = 0, b8 = 0;
  d->wide = 0;
  if (!d->a.small || d->a.net.n_words < 2) return SBG_OK;
  SBG_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, d->device));
  SBG_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b7, pbn_advance2_kernel<1, 7>, PBN_BLOCK, d->smem));
  SBG_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b8, pbn_advance2_kernel<1, 8>, PBN_BLOCK, d->smem));
  d->wide = (int64_t)d->blocks > (int64_t)b7 * sms && (int64_t)d->blocks <= (int64_t)b8 * sms;
done:
  return st;
}

/* Device `device` with chains [c_base, c_base + nc): the network, states,
 * generators and counters, and the chains' start (not waited for). */
static sbg_status pbn_gpu_open(pbn_gpu *d, const sbg_pbn_net *net, const sbg_pbn_sets *sets,
                               const sbg_pbn_params *p, int device, int64_t c_base, int64_t nc,
                               sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  unsigned char *h_blob = NULL;
  const int32_t W = net->n_words, S = sets->n_sets;
  int64_t ni = 0, nt = 0;
  int optin = 0;
  size_t state_b, cnt_b, smem;
  d->device = device;
  SBG_TRY(pbn_dev_open(device, &d->stream, &d->t0, &d->t1, nc, S, &d->a.rng, &d->a.gap, &d->a.cnt, &d->d_sums, ctx));
  d->a.small = p->small && net->n <= SBG_PBN_SMALL_N;
  pbn_make_layout(net, sets, d->a.small, &d->a.lay, &ni, &nt);
  h_blob = (unsigned char *)calloc(d->a.lay.bytes > 0 ? d->a.lay.bytes : 8, 1);
  if (!h_blob) { st = sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the network blob"); goto done; }
  if (!pbn_fill_blob(net, sets, &d->a.lay, ni, nt, d->a.small, h_blob)) d->a.small = 0;
  SBG_TRY(sbg_device_alloc((void **)&d->d_blob, d->a.lay.bytes, "the network", ctx));
  SBG_CUDA_CHECK(cudaMemcpyAsync(d->d_blob, h_blob, d->a.lay.bytes, cudaMemcpyHostToDevice, d->stream));
  SBG_TRY(sbg_device_alloc((void **)&d->a.state, sizeof(uint64_t) * 2 * (size_t)W * nc, "the states", ctx));
  d->a.net = *net;
  d->a.n_sets = S;
  d->a.blob = d->d_blob;
  d->a.n_chains = nc;
  d->a.c_base = c_base;

  /* shared memory: states first (fastest win), then counters, then the
   * network, within a budget that keeps several blocks per SM */
  state_b = 2 * (size_t)W * PBN_BLOCK * 8;
  cnt_b = 3 * (size_t)S * PBN_BLOCK * 4;
  smem = 0;
  if (!d->a.small && state_b <= 16 * 1024) { d->a.state_shared = 1; smem += state_b; }
  if (smem + cnt_b <= 32 * 1024) { d->a.cnt_shared = 1; smem += cnt_b; }
  SBG_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (smem + d->a.lay.bytes <= PBN_SMEM_BUDGET) { d->a.blob_shared = 1; smem += d->a.lay.bytes; }
  if (smem > 48 * 1024) {
    if ((int)smem > optin) { d->a.blob_shared = 0; smem -= d->a.lay.bytes; }
    SBG_CUDA_CHECK(cudaFuncSetAttribute(pbn_advance_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    SBG_CUDA_CHECK(cudaFuncSetAttribute(pbn_advance2_kernel<0, 8>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    SBG_CUDA_CHECK(cudaFuncSetAttribute(pbn_advance2_kernel<1, 7>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    SBG_CUDA_CHECK(cudaFuncSetAttribute(pbn_advance2_kernel<1, 8>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  }
  d->smem = smem;
  d->blocks = (unsigned)((nc + PBN_BLOCK - 1) / PBN_BLOCK);
  SBG_TRY(pbn_pick_wide(d, ctx));
  pbn_init_kernel<<<d->blocks, PBN_BLOCK, 0, d->stream>>>(d->a, p->seed);
  SBG_CUDA_CHECK(cudaGetLastError());
  /* the host blob may go only after its copy */
  SBG_CUDA_CHECK(cudaStreamSynchronize(d->stream));
done:
  free(h_blob);
  return st;
}

static void pbn_gpu_close(pbn_gpu *d) {
  pbn_dev_close(d->device, d->stream, d->t0, d->t1, d->d_blob, d->a.state, d->a.rng, d->a.gap, d->a.cnt, d->d_sums);
}

/* ---- bit-sliced engine (engine = "bits", pbn_bits.h) ------------------
 * One warp per group of 32 chains: the group's two state copies (bit
 * planes, one word per node) in shared memory, each thread computing the
 * next planes of every 32nd node (nodes with several functions first, so
 * the costly ones are spread over the threads), then lane j moving chain
 * j's perturbation count and flips.  The network is read from global
 * memory (cached: all warps read the same words). */
#define PBNB_WARPS 4

typedef struct pbnb_dev_args {
  sbg_pbn_net net;      /* device pointers to the arrays the bit step reads */
  sbg_pbn_bnet b;
  const int32_t *order; /* nodes, several-function ones first */
  int32_t n_sets;
  int64_t n_groups;     /* this device's groups ... */
  int64_t g_base;       /* ... the first of them in the run's numbering */
  int64_t n_chains;     /* chains of the whole run (the last group's lanes past it are not counted) */
  uint32_t *planes;     /* n_groups * n */
  sbg_philox *rng;      /* n_groups * 32 */
  int32_t *gap;         /* n_groups * 32 */
  uint32_t *cnt;        /* 3 n_sets * 32 n_groups: (3 s + j) * 32 n_groups + lane index */
} pbnb_dev_args;

template <int KW>
static __global__ void __launch_bounds__(32 * PBNB_WARPS) pbnb_advance_kernel(pbnb_dev_args a, uint64_t t0,
                                                                               int64_t steps, int count) {
  extern __shared__ uint32_t bsm[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t gl = (int64_t)blockIdx.x * PBNB_WARPS + warp;
  if (gl >= a.n_groups) return;  /* the whole warp */
  const sbg_pbn_net net = a.net;
  const sbg_pbn_bnet b = a.b;
  const int32_t n = net.n, S = a.n_sets;
  uint32_t *cur = bsm + (size_t)warp * 2 * n, *nxt = cur + n;
  for (int32_t i = lane; i < n; i += 32) cur[i] = a.planes[gl * n + i];
  __syncwarp();
  const uint32_t G = (uint32_t)(a.g_base + gl);
  const int64_t cl = gl * 32 + lane;
  const int valid = (a.g_base + gl) * 32 + lane < a.n_chains;
  sbg_philox g = a.rng[cl];
  int32_t gs = a.gap[cl];
  const int64_t kst = a.n_groups * 32;
  uint32_t *k = a.cnt + cl;
  if (count && valid)
    for (int32_t s = 0; s < S; s++)
      if ((pbnb_in_set(&b, s, cur) >> lane) & 1u) k[(3 * s) * kst] += (uint32_t)steps;
  for (int64_t tt = 0; tt < steps; tt++) {
    const uint64_t t = t0 + (uint64_t)tt;
    const uint32_t P = __ballot_sync(0xffffffffu, gs == 0);
    for (int32_t r = lane; r < n; r += 32) {
      const int32_t i = a.order[r];
      const uint32_t v = P == ~0u ? 0u : pbnb_node(&net, &b, KW, i, cur, G, t);
      nxt[i] = (v & ~P) | (cur[i] & P);
    }
    __syncwarp();
    if (gs == 0) {
      pbnb_perturb(&net, &g, nxt, 1u << lane);
      gs = pbn_draw_gap(&net, &g);
    } else {
      gs = pbn_gap_advance(&net, &g, gs, 1);
    }
    __syncwarp();
    if (count)
      for (int32_t s = 0; s < S; s++) {
        const uint32_t m1 = pbnb_in_set(&b, s, nxt);
        if (valid && (((pbnb_in_set(&b, s, cur) ^ m1) >> lane) & 1u))
          pbnb_count_switch(k, kst, s, (int)((m1 >> lane) & 1u), (uint32_t)(steps - tt));
      }
    uint32_t *tmp = cur; cur = nxt; nxt = tmp;
    __syncwarp();
  }
  for (int32_t i = lane; i < n; i += 32) a.planes[gl * n + i] = cur[i];
  a.rng[cl] = g;
  a.gap[cl] = gs;
}

typedef struct pbnb_gpu {
  pbnb_dev_args a;
  int device;
  size_t smem;
  unsigned blocks;
  cudaStream_t stream;
  cudaEvent_t t0, t1;
  unsigned char *d_blob;
  uint64_t *d_sums;
} pbnb_gpu;

static int64_t pbn_lanes(const pbnb_gpu *d) { return 32 * d->a.n_groups; }

typedef struct pbnb_gpus {
  sbg_pbn_engine base;
  int nd;
  pbnb_gpu dev[SBG_PBN_MAX_DEVICES];
  int32_t kw;
  double chunk;   /* steps per launch, adapted to ~0.1 s */
  uint64_t t;     /* steps taken so far */
  uint64_t *part;
} pbnb_gpus;

static void pbnb_launch(pbnb_gpu *d, int32_t kw, uint64_t t0, int64_t len, int count) {
  switch (kw) {
    case 0: pbnb_advance_kernel<0><<<d->blocks, 32 * PBNB_WARPS, d->smem, d->stream>>>(d->a, t0, len, count); break;
    case 1: pbnb_advance_kernel<1><<<d->blocks, 32 * PBNB_WARPS, d->smem, d->stream>>>(d->a, t0, len, count); break;
    case 2: pbnb_advance_kernel<2><<<d->blocks, 32 * PBNB_WARPS, d->smem, d->stream>>>(d->a, t0, len, count); break;
    case 3: pbnb_advance_kernel<3><<<d->blocks, 32 * PBNB_WARPS, d->smem, d->stream>>>(d->a, t0, len, count); break;
    case 4: pbnb_advance_kernel<4><<<d->blocks, 32 * PBNB_WARPS, d->smem, d->stream>>>(d->a, t0, len, count); break;
    default: pbnb_advance_kernel<5><<<d->blocks, 32 * PBNB_WARPS, d->smem, d->stream>>>(d->a, t0, len, count); break;
  }
}

static cudaError_t pbnb_smem_optin(int32_t kw, int bytes) {
  switch (kw) {
    case 0: return cudaFuncSetAttribute(pbnb_advance_kernel<0>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    case 1: return cudaFuncSetAttribute(pbnb_advance_kernel<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    case 2: return cudaFuncSetAttribute(pbnb_advance_kernel<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    case 3: return cudaFuncSetAttribute(pbnb_advance_kernel<3>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    case 4: return cudaFuncSetAttribute(pbnb_advance_kernel<4>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    default: return cudaFuncSetAttribute(pbnb_advance_kernel<5>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  }
}

static sbg_status pbnb_gpu_advance(sbg_pbn_engine *eng, int64_t steps, int count, uint64_t *sums,
                                   double lo, double hi, sbg_ctx *ctx) {
  pbnb_gpus *e = (pbnb_gpus *)eng;
  int64_t ng = 0;
  for (int i = 0; i < e->nd; i++) ng += e->dev[i].a.n_groups;
  /* ~4e9 chain-steps per device; the steps are numbered from the run's
   * start (the generators' counters), whatever the launches */
  sbg_status st = pbn_advance_devices(
      e->dev, e->nd, &e->chunk, 1.3e8 * e->nd / (double)ng, steps, count, e->dev[0].a.n_sets, e->part, sums, lo, hi,
      [e](pbnb_gpu *d, int64_t done, int64_t len, int cnt) { pbnb_launch(d, e->kw, e->t + (uint64_t)done, len, cnt); },
      ctx);
  if (st == SBG_OK) e->t += (uint64_t)steps;
  return st;
}

/* An array into the host image of the device blob at an 8-byte aligned
 * offset; returns where it will be on the device. */
static const void *pbnb_put(unsigned char *h, const unsigned char *d, size_t *off, const void *src, size_t bytes) {
  size_t at = *off;
  if (h && bytes) memcpy(h + at, src, bytes);
  *off += (bytes + 7) & ~(size_t)7;
  return d + at;
}

/* The arrays the bit step reads into one blob (h NULL: size only); the
 * args' pointers set to their device places. */
static size_t pbnb_fill(const sbg_pbn_net *net, const sbg_pbn_bits_host *bh, int32_t n_sets, const int32_t *order,
                        unsigned char *h, const unsigned char *d, pbnb_dev_args *a) {
  const int32_t n = net->n, nf = net->fun_start[n], NP = net->n_pert_total;
  size_t off = 0;
  sbg_pbn_net dn;
  memset(&dn, 0, sizeof dn);
  dn.n = n;
  dn.n_words = net->n_words;
  dn.n_sel_total = net->n_sel_total;
  dn.n_pert_total = NP;
  dn.n_skip = net->n_skip;
  dn.n_total = net->n_total;
  dn.fun_start = (const int32_t *)pbnb_put(h, d, &off, net->fun_start, 4 * (size_t)(n + 1));
  dn.fun_thresh = (const uint64_t *)pbnb_put(h, d, &off, net->fun_thresh, 8 * (size_t)nf);
  dn.sel_rank = (const int32_t *)pbnb_put(h, d, &off, net->sel_rank, 4 * (size_t)n);
  dn.pert_node = (const int32_t *)pbnb_put(h, d, &off, net->pert_node, 4 * (size_t)NP);
  dn.gap_thresh = (const uint64_t *)pbnb_put(h, d, &off, net->gap_thresh, 8 * (size_t)(NP + 1));
  dn.first_thresh = (const uint64_t *)pbnb_put(h, d, &off, net->first_thresh, 8 * (size_t)(NP + 1));
  dn.skip_thresh = (const uint64_t *)pbnb_put(h, d, &off, net->skip_thresh, 8 * (size_t)(net->n_skip + 1));
  sbg_pbn_bnet db = bh->b;
  db.fun = (const sbg_pbn_bfun *)pbnb_put(h, d, &off, bh->fun, sizeof(sbg_pbn_bfun) * (size_t)nf);
  db.set_start = (const int32_t *)pbnb_put(h, d, &off, bh->set_start, 4 * (size_t)(n_sets + 1));
  db.set_lit = (const int32_t *)pbnb_put(h, d, &off, bh->set_lit, 4 * (size_t)bh->set_start[n_sets]);
  a->order = (const int32_t *)pbnb_put(h, d, &off, order, 4 * (size_t)n);
  a->net = dn;
  a->b = db;
  return off;
}

/* Device `device` with groups [g0, g0 + ng): the network, the groups'
 * start (computed on the host, as the CPU engine's), the counters. */
static sbg_status pbnb_gpu_open(pbnb_gpu *d, const sbg_pbn_net *net, const sbg_pbn_bits_host *bh, int32_t S,
                                const int32_t *order, const sbg_pbn_params *p, const uint64_t *from,
                                int device, int64_t g0, int64_t ng, int threads, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  const int32_t n = net->n;
  unsigned char *h_blob = NULL;
  uint32_t *h_planes = NULL;
  sbg_philox *h_rng = NULL;
  int32_t *h_gap = NULL;
  size_t bytes;
  d->device = device;
  SBG_TRY(pbn_dev_open(device, &d->stream, &d->t0, &d->t1, 32 * ng, S, &d->a.rng, &d->a.gap, &d->a.cnt, &d->d_sums,
                       ctx));
  bytes = pbnb_fill(net, bh, S, order, NULL, NULL, &d->a);
  h_blob = (unsigned char *)calloc(bytes, 1);
  h_planes = (uint32_t *)malloc(sizeof(uint32_t) * (size_t)ng * n);
  h_rng = (sbg_philox *)malloc(sizeof(sbg_philox) * 32 * (size_t)ng);
  h_gap = (int32_t *)malloc(sizeof(int32_t) * 32 * (size_t)ng);
  if (!h_blob || !h_planes || !h_rng || !h_gap) { st = sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the groups' start"); goto done; }
  SBG_TRY(sbg_device_alloc((void **)&d->d_blob, bytes, "the network", ctx));
  pbnb_fill(net, bh, S, order, h_blob, d->d_blob, &d->a);
  sbg_pbn_bits_start(net, p->seed, g0, g0 + ng, from, h_planes, h_rng, h_gap, threads);
  SBG_TRY(sbg_device_alloc((void **)&d->a.planes, sizeof(uint32_t) * (size_t)ng * n, "the states", ctx));
  SBG_CUDA_CHECK(cudaMemcpyAsync(d->d_blob, h_blob, bytes, cudaMemcpyHostToDevice, d->stream));
  SBG_CUDA_CHECK(cudaMemcpyAsync(d->a.planes, h_planes, sizeof(uint32_t) * (size_t)ng * n, cudaMemcpyHostToDevice, d->stream));
  SBG_CUDA_CHECK(cudaMemcpyAsync(d->a.rng, h_rng, sizeof(sbg_philox) * 32 * (size_t)ng, cudaMemcpyHostToDevice, d->stream));
  SBG_CUDA_CHECK(cudaMemcpyAsync(d->a.gap, h_gap, sizeof(int32_t) * 32 * (size_t)ng, cudaMemcpyHostToDevice, d->stream));
  d->a.n_sets = S;
  d->a.n_groups = ng;
  d->a.g_base = g0;
  d->a.n_chains = p->n_chains;
  d->smem = sizeof(uint32_t) * 2 * (size_t)n * PBNB_WARPS;
  if (d->smem > 48 * 1024) SBG_CUDA_CHECK(pbnb_smem_optin(bh->b.kw, (int)d->smem));
  d->blocks = (unsigned)((ng + PBNB_WARPS - 1) / PBNB_WARPS);
  /* the host copies may go only after the copies */
  SBG_CUDA_CHECK(cudaStreamSynchronize(d->stream));
done:
  free(h_blob);
  free(h_planes);
  free(h_rng);
  free(h_gap);
  return st;
}

static void pbnb_gpu_close(pbnb_gpu *d) {
  pbn_dev_close(d->device, d->stream, d->t0, d->t1, d->d_blob, d->a.planes, d->a.rng, d->a.gap, d->a.cnt, d->d_sums);
}

/* Nodes with more functions first: the threads of a warp share the costly ones. */
static void pbnb_order(const sbg_pbn_net *net, int32_t *order) {
  int32_t at = 0, most = 1;
  for (int32_t i = 0; i < net->n; i++) {
    int32_t nf = net->fun_start[i + 1] - net->fun_start[i];
    if (nf > most) most = nf;
  }
  for (int32_t m = most; m >= 1; m--)
    for (int32_t i = 0; i < net->n; i++) {
      int32_t nf = net->fun_start[i + 1] - net->fun_start[i];
      if (nf == m || (m == 1 && nf < 1)) order[at++] = i;
    }
}

static sbg_status pbnb_steady_gpu(const sbg_pbn_net *net, const sbg_pbn_sets *sets, const sbg_pbn_params *p,
                                  sbg_pbn_result *out, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  const int32_t S = sets->n_sets, n = net->n;
  const int64_t ng = (p->n_chains + 31) / 32;
  sbg_pbn_bits_host bh;
  int32_t *order = (int32_t *)malloc(sizeof(int32_t) * (size_t)(n > 0 ? n : 1));
  pbnb_gpus *e = (pbnb_gpus *)calloc(1, sizeof(pbnb_gpus));
  memset(&bh, 0, sizeof bh);
  if (!e || !order) { free(e); free(order); return sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the GPU engine"); }
  SBG_TRY(sbg_pbn_bits_build(net, sets, p->seed, &bh, ctx));
  pbnb_order(net, order);
  e->kw = bh.b.kw;
  e->nd = sbg_ctx_n_devices(ctx);
  if (e->nd > SBG_PBN_MAX_DEVICES) e->nd = SBG_PBN_MAX_DEVICES;
  if (e->nd > ng) e->nd = (int)ng;
  e->part = (uint64_t *)malloc(sizeof(uint64_t) * SBG_PBN_NSUM * (size_t)(S > 0 ? S : 1));
  if (!e->part) { st = sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the sums"); goto done; }
  for (int i = 0; i < e->nd; i++) {
    int64_t g0 = ng * i / e->nd, g1 = ng * (i + 1) / e->nd;
    SBG_TRY(pbnb_gpu_open(&e->dev[i], net, &bh, S, order, p, NULL, sbg_ctx_device_at(ctx, i), g0, g1 - g0,
                          ctx->n_threads, ctx));
  }
  e->chunk = 3e6 * e->nd / ((double)ng * ((double)n + 8.0));
  if (e->chunk < 1) e->chunk = 1;
  e->base.self = e;
  e->base.advance = pbnb_gpu_advance;
  SBG_TRY(sbg_pbn_two_state(&e->base, p, S, out, ctx));
done:
  for (int i = 0; i < e->nd; i++) pbnb_gpu_close(&e->dev[i]);
  sbg_pbn_bits_free(&bh);
  free(order);
  free(e->part);
  free(e);
  return st;
}

/* pbnSimulate(engine = "bits") on one device: a launch per step, each
 * step's planes unpacked on the host (the trajectories' output is the
 * bound, not the steps). */
extern "C" sbg_status sbg_pbn_bits_simulate_gpu(const sbg_pbn_net *net, uint64_t seed, int64_t n_chains,
                                                int64_t steps, const uint64_t *from, uint64_t *out,
                                                sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  const int32_t n = net->n, no_set_start = 0;
  const sbg_pbn_sets none = {0, &no_set_start, NULL, NULL, NULL};
  const int64_t ng = (n_chains + 31) / 32;
  sbg_pbn_bits_host bh;
  sbg_pbn_params p;
  pbnb_gpu d;
  memset(&bh, 0, sizeof bh);
  memset(&p, 0, sizeof p);
  memset(&d, 0, sizeof d);
  p.seed = seed;
  p.n_chains = n_chains;
  int32_t *order = (int32_t *)malloc(sizeof(int32_t) * (size_t)(n > 0 ? n : 1));
  uint32_t *h_planes = (uint32_t *)malloc(sizeof(uint32_t) * (size_t)ng * (n > 0 ? n : 1));
  if (!order || !h_planes) { st = sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the trajectories' planes"); goto done; }
  SBG_TRY(sbg_pbn_bits_build(net, &none, seed, &bh, ctx));
  pbnb_order(net, order);
  SBG_TRY(pbnb_gpu_open(&d, net, &bh, 0, order, &p, from, ctx->device, 0, ng, ctx->n_threads, ctx));
  for (int64_t t = 0; t <= steps; t++) {
    if (t > 0) {
      pbnb_launch(&d, bh.b.kw, (uint64_t)(t - 1), 1, 0);
      SBG_CUDA_CHECK(cudaGetLastError());
    }
    SBG_CUDA_CHECK(cudaMemcpyAsync(h_planes, d.a.planes, sizeof(uint32_t) * (size_t)ng * n, cudaMemcpyDeviceToHost,
                                   d.stream));
    SBG_CUDA_CHECK(cudaStreamSynchronize(d.stream));
    sbg_pbn_bits_unpack(net, 0, ng, h_planes, n_chains, steps, t, out);
    SBG_TRY(sbg_poll(ctx, steps > 0 ? (double)t / (double)steps : 1.0));
  }
done:
  pbnb_gpu_close(&d);
  sbg_pbn_bits_free(&bh);
  free(order);
  free(h_planes);
  return st;
}

extern "C" sbg_status sbg_pbn_steady_gpu(const sbg_pbn_net *net, const sbg_pbn_sets *sets,
                                         const sbg_pbn_params *p, sbg_pbn_result *out,
                                         sbg_ctx *ctx) {
  if (p->bits) return pbnb_steady_gpu(net, sets, p, out, ctx);
  sbg_status st = SBG_OK;
  pbn_gpus *e = (pbn_gpus *)calloc(1, sizeof(pbn_gpus));
  const int32_t S = sets->n_sets;
  const int64_t nc = p->n_chains;
  if (!e) return sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the GPU engine");
  e->nd = sbg_ctx_n_devices(ctx);
  if (e->nd > SBG_PBN_MAX_DEVICES) e->nd = SBG_PBN_MAX_DEVICES;
  if (e->nd > nc) e->nd = (int)nc;
  e->part = (uint64_t *)malloc(sizeof(uint64_t) * SBG_PBN_NSUM * (size_t)(S > 0 ? S : 1));
  if (!e->part) { st = sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the sums"); goto done; }
  for (int i = 0; i < e->nd; i++) {
    int64_t c0 = nc * i / e->nd, c1 = nc * (i + 1) / e->nd;
    SBG_TRY(pbn_gpu_open(&e->dev[i], net, sets, p, sbg_ctx_device_at(ctx, i), c0, c1 - c0, ctx));
  }
  e->chunk = 1e8 * e->nd / ((double)nc * ((double)net->n + 8.0));
  if (e->chunk < 1) e->chunk = 1;
  e->base.self = e;
  e->base.advance = pbn_gpu_advance;
  SBG_TRY(sbg_pbn_two_state(&e->base, p, S, out, ctx));
done:
  for (int i = 0; i < e->nd; i++) pbn_gpu_close(&e->dev[i]);
  free(e->part);
  free(e);
  return st;
}

/* Trajectories straight into the output: out[(c (steps+1) + t) W + w]. */
static __global__ void pbn_simulate_kernel(pbn_dev_args a, uint64_t seed, int64_t steps,
                                           const uint64_t *from, uint64_t *out) {
  const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= a.n_chains) return;
  sbg_pbn_net net;
  sbg_pbn_sets sets;
  pbn_bind(a, (const unsigned char *)a.blob, &net, &sets);
  const int32_t W = net.n_words;
  sbg_philox g;
  sbg_philox_init(&g, seed, (uint64_t)c, 0);
  uint64_t *o = out + c * (steps + 1) * W;
  if (from) for (int32_t w = 0; w < W; w++) o[w] = from[w];
  else pbn_random_state(&net, &g, o, 1);
  int32_t gs = pbn_draw_gap(&net, &g);
  for (int64_t t = 0; t < steps; t++) pbn_step(&net, o + t * W, o + (t + 1) * W, 1, &g, &gs);
}

extern "C" sbg_status sbg_pbn_simulate_gpu(const sbg_pbn_net *net, uint64_t seed, int64_t n_chains,
                                           int64_t steps, const uint64_t *from, uint64_t *out,
                                           sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  cudaStream_t stream = NULL;
  unsigned char *h_blob = NULL;
  uint64_t *d_blob = NULL, *d_out = NULL, *d_from = NULL;
  pbn_dev_args a;
  memset(&a, 0, sizeof a);
  int64_t ni = 0, nt = 0;
  const int32_t W = net->n_words;
  size_t out_b = sizeof(uint64_t) * (size_t)n_chains * (size_t)(steps + 1) * W;

  SBG_TRY(sbg_device_select(ctx->device, ctx));
  SBG_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  pbn_make_layout(net, NULL, 0, &a.lay, &ni, &nt);
  h_blob = (unsigned char *)calloc(a.lay.bytes, 1);
  if (!h_blob) { st = sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the network blob"); goto done; }
  pbn_fill_blob(net, NULL, &a.lay, ni, nt, 0, h_blob);
  SBG_TRY(sbg_device_alloc((void **)&d_blob, a.lay.bytes, "the network", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_out, out_b, "the trajectories", ctx));
  SBG_CUDA_CHECK(cudaMemcpyAsync(d_blob, h_blob, a.lay.bytes, cudaMemcpyHostToDevice, stream));
  if (from) {
    SBG_TRY(sbg_device_alloc((void **)&d_from, sizeof(uint64_t) * W, "the start state", ctx));
    SBG_CUDA_CHECK(cudaMemcpyAsync(d_from, from, sizeof(uint64_t) * W, cudaMemcpyHostToDevice, stream));
  }
  a.net = *net;
  a.blob = d_blob;
  a.n_chains = n_chains;
  pbn_simulate_kernel<<<(unsigned)((n_chains + PBN_BLOCK - 1) / PBN_BLOCK), PBN_BLOCK, 0, stream>>>(
      a, seed, steps, d_from, d_out);
  SBG_CUDA_CHECK(cudaGetLastError());
  SBG_CUDA_CHECK(cudaMemcpyAsync(out, d_out, out_b, cudaMemcpyDeviceToHost, stream));
  SBG_CUDA_CHECK(cudaStreamSynchronize(stream));
done:
  free(h_blob);
  cudaFree(d_blob);
  cudaFree(d_out);
  cudaFree(d_from);
  if (stream) cudaStreamDestroy(stream);
  return st;
}

/* One block of chains [c0, c1) for an R worker (pbnSteadyState(BPPARAM =)):
 * the engine above on one device, started from the seed or from a state
 * exported by this function; the state travels in the CPU engine's layout
 * (states chain-major, then generators, then gaps: pbn_cpu.c), so a round
 * trip through the host changes nothing. */
extern "C" sbg_status sbg_pbn_block_gpu(const sbg_pbn_net *net, const sbg_pbn_sets *sets,
                                        const sbg_pbn_params *p, int64_t c0, int64_t c1,
                                        const unsigned char *state_in, int64_t steps, int count,
                                        uint64_t *sums, unsigned char *state_out, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  const int32_t S = sets->n_sets, W = net->n_words;
  const int64_t nc = c1 - c0;
  const size_t sb = sizeof(uint64_t) * (size_t)nc * W, rb = sizeof(sbg_philox) * (size_t)nc,
               gb = sizeof(int32_t) * (size_t)nc;
  uint64_t *h_state = NULL;
  pbn_gpus *e = (pbn_gpus *)calloc(1, sizeof(pbn_gpus));
  if (!e) return sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the GPU engine");
  pbn_gpu *d = &e->dev[0];
  e->nd = 1;
  e->part = (uint64_t *)malloc(sizeof(uint64_t) * SBG_PBN_NSUM * (size_t)(S > 0 ? S : 1));
  h_state = (uint64_t *)malloc(sb > 0 ? sb : 8);
  if (!e->part || !h_state) { st = sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the block's state"); goto done; }
  SBG_TRY(pbn_gpu_open(d, net, sets, p, ctx->device, c0, nc, ctx));
  if (state_in) {
    /* chain-major on the host, word-major on the device */
    for (int64_t c = 0; c < nc; c++)
      for (int32_t w = 0; w < W; w++) {
        uint64_t v;
        memcpy(&v, state_in + 8 * ((size_t)c * W + w), 8);
        h_state[(size_t)w * nc + c] = v;
      }
    SBG_CUDA_CHECK(cudaMemcpyAsync(d->a.state, h_state, sb, cudaMemcpyHostToDevice, d->stream));
    SBG_CUDA_CHECK(cudaMemcpyAsync(d->a.rng, state_in + sb, rb, cudaMemcpyHostToDevice, d->stream));
    SBG_CUDA_CHECK(cudaMemcpyAsync(d->a.gap, state_in + sb + rb, gb, cudaMemcpyHostToDevice, d->stream));
    SBG_CUDA_CHECK(cudaStreamSynchronize(d->stream));
  }
  e->chunk = 1e8 / ((double)nc * ((double)net->n + 8.0));
  if (e->chunk < 1) e->chunk = 1;
  e->base.self = e;
  e->base.advance = pbn_gpu_advance;
  if (steps > 0) SBG_TRY(pbn_gpu_advance(&e->base, steps, count, sums, 0.0, 1.0, ctx));
  else if (count) memset(sums, 0, sizeof(uint64_t) * SBG_PBN_NSUM * (size_t)S);
  SBG_TRY(sbg_device_select(d->device, ctx));
  SBG_CUDA_CHECK(cudaMemcpyAsync(h_state, d->a.state, sb, cudaMemcpyDeviceToHost, d->stream));
  SBG_CUDA_CHECK(cudaMemcpyAsync(state_out + sb, d->a.rng, rb, cudaMemcpyDeviceToHost, d->stream));
  SBG_CUDA_CHECK(cudaMemcpyAsync(state_out + sb + rb, d->a.gap, gb, cudaMemcpyDeviceToHost, d->stream));
  SBG_CUDA_CHECK(cudaStreamSynchronize(d->stream));
  for (int64_t c = 0; c < nc; c++)
    for (int32_t w = 0; w < W; w++) memcpy(state_out + 8 * ((size_t)c * W + w), &h_state[(size_t)w * nc + c], 8);
done:
  pbn_gpu_close(d);
  free(h_state);
  free(e->part);
  free(e);
  return st;
}
