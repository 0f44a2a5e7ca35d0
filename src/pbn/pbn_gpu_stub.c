/* Stand-in for pbn_gpu.cu in a build without CUDA: the GPU entry points of
 * pbnSteadyState() (both methods) and pbnSimulate() report SBG_ERR_NO_CUDA. */
#include "pbn.h"
#include "pbn_bits.h"

sbg_status sbg_pbn_steady_gpu(const sbg_pbn_net *net, const sbg_pbn_sets *sets,
                              const sbg_pbn_params *p, sbg_pbn_result *out, sbg_ctx *ctx) {
  (void)net; (void)sets; (void)p; (void)out;
  return sbg_fail(ctx, SBG_ERR_NO_CUDA, "sysbioGPU was built without CUDA");
}

sbg_status sbg_pbn_simulate_gpu(const sbg_pbn_net *net, uint64_t seed, int64_t n_chains,
                                int64_t steps, const uint64_t *from, uint64_t *out, sbg_ctx *ctx) {
  (void)net; (void)seed; (void)n_chains; (void)steps; (void)from; (void)out;
  return sbg_fail(ctx, SBG_ERR_NO_CUDA, "sysbioGPU was built without CUDA");
}

sbg_status sbg_pbn_exact_gpu(const sbg_pbn_net *net, const double *fun_prob, double p,
                             double tol, int64_t max_iter,
                             double *pi, double *iterations, double *delta, sbg_ctx *ctx) {
  (void)net; (void)fun_prob; (void)p; (void)tol; (void)max_iter; (void)pi; (void)iterations; (void)delta;
  return sbg_fail(ctx, SBG_ERR_NO_CUDA, "sysbioGPU was built without CUDA");
}

sbg_status sbg_pbn_block_gpu(const sbg_pbn_net *net, const sbg_pbn_sets *sets, const sbg_pbn_params *p,
                             int64_t c0, int64_t c1, const unsigned char *state_in, int64_t steps,
                             int count, uint64_t *sums, unsigned char *state_out, sbg_ctx *ctx) {
  (void)net; (void)sets; (void)p; (void)c0; (void)c1; (void)state_in; (void)steps; (void)count;
  (void)sums; (void)state_out;
  return sbg_fail(ctx, SBG_ERR_NO_CUDA, "sysbioGPU was built without CUDA");
}

sbg_status sbg_pbn_bits_simulate_gpu(const sbg_pbn_net *net, uint64_t seed, int64_t n_chains, int64_t steps,
                                     const uint64_t *from, uint64_t *out, sbg_ctx *ctx) {
  (void)net; (void)seed; (void)n_chains; (void)steps; (void)from; (void)out;
  return sbg_fail(ctx, SBG_ERR_NO_CUDA, "sysbioGPU was built without CUDA");
}
