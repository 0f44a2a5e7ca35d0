/* exp, log and pow computed with + - * / and exact scalings only, so the
 * CPU and the GPU (built with --fmad=false) get the same bits.  The C
 * library's pow and CUDA's pow differ in the last ulp; where such a value
 * steers a decision (an adaptive step accepted or rejected), that ulp would
 * make the two engines' runs diverge.  About 1e-15 relative accuracy. */
#ifndef SBG_PORTABLE_MATH_H
#define SBG_PORTABLE_MATH_H

#include <math.h>

#ifdef __CUDACC__
#define SBG_PM_HD __host__ __device__ __forceinline__
#else
#define SBG_PM_HD static inline
#endif

#define SBG_LN2 0.69314718055994530942

/* Natural log of x > 0 (NaN for x <= 0 or NaN, +Inf for +Inf). */
SBG_PM_HD double sbg_log(double x) {
  if (!(x > 0)) return x == 0 ? -HUGE_VAL : NAN;
  if (isinf(x)) return x;
  int e;
  double m = frexp(x, &e); /* x = m 2^e, m in [0.5, 1) */
  if (m < 0.70710678118654752440) { m *= 2; e--; }
  double s = (m - 1) / (m + 1), s2 = s * s; /* |s| <= 0.1716 */
  double term = s, sum = 0;
  for (int k = 1; k <= 41; k += 2) { /* s^41 < 1e-31 */
    sum = sum + term / k;
    term = term * s2;
  }
  return e * SBG_LN2 + 2 * sum;
}

/* e^y. */
SBG_PM_HD double sbg_exp(double y) {
  if (y != y) return y;
  if (y > 709.8) return HUGE_VAL;
  if (y < -745.2) return 0;
  double k = floor(y / SBG_LN2 + 0.5);
  double r = y - k * SBG_LN2; /* |r| <= 0.35 */
  double sum = 1, term = 1;
  for (int n = 1; n <= 18; n++) { /* 0.35^18/18! < 1e-24 */
    term = term * r / n;
    sum = sum + term;
  }
  return ldexp(sum, (int)k);
}

/* x^y for x > 0 (x = 0 gives 0 for y > 0, Inf for y < 0). */
SBG_PM_HD double sbg_pow(double x, double y) {
  if (x == 0) return y > 0 ? 0 : HUGE_VAL;
  return sbg_exp(y * sbg_log(x));
}

#endif /* SBG_PORTABLE_MATH_H */
