/* Registration of the .Call entry points; nothing else lives here. */
#define R_NO_REMAP
#include <R.h>
#include <Rinternals.h>
#include <R_ext/Rdynload.h>

SEXP ffi_gpu_info(SEXP);
SEXP ffi_threads_info(void);
SEXP ffi_philox_block(SEXP, SEXP);
SEXP ffi_rng_fill(SEXP, SEXP, SEXP, SEXP, SEXP, SEXP, SEXP, SEXP, SEXP, SEXP);
SEXP ffi_busy(SEXP, SEXP, SEXP, SEXP, SEXP, SEXP);

/* lassieSimulate */
SEXP ffi_lassie_simulate(SEXP, SEXP, SEXP, SEXP, SEXP, SEXP, SEXP, SEXP, SEXP, SEXP,
                         SEXP, SEXP, SEXP, SEXP, SEXP, SEXP, SEXP, SEXP);
SEXP ffi_lassie_rhs(SEXP, SEXP, SEXP, SEXP, SEXP, SEXP, SEXP, SEXP);
SEXP ffi_lassie_jacobian(SEXP, SEXP, SEXP, SEXP, SEXP, SEXP, SEXP, SEXP);

#define CALLDEF(name, n) {#name, (DL_FUNC)&name, n}

static const R_CallMethodDef call_methods[] = {
    CALLDEF(ffi_gpu_info, 1),
    CALLDEF(ffi_threads_info, 0),
    CALLDEF(ffi_philox_block, 2),
    CALLDEF(ffi_rng_fill, 10),
    CALLDEF(ffi_busy, 6),
    /* lassieSimulate */
    CALLDEF(ffi_lassie_simulate, 18),
    CALLDEF(ffi_lassie_rhs, 8),
    CALLDEF(ffi_lassie_jacobian, 8),
    {NULL, NULL, 0}};

void R_init_sysbioGPU(DllInfo *dll) {
  R_registerRoutines(dll, NULL, call_methods, NULL, NULL);
  R_useDynamicSymbols(dll, FALSE);
  R_forceSymbols(dll, TRUE);
}
