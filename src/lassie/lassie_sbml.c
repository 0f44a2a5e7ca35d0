/* Glue of readSBML(): reads an SBML file with libSBML's C API and hands its
 * compartments, species, parameters and reactions (kinetic laws as infix
 * text) to R, which checks that they are mass action (R/lassie-io.R).
 * Built against libSBML only when configure found it (SBG_HAVE_SBML). */
#include <stdlib.h>
#include <string.h>

#include <R.h>
#include <Rinternals.h>

#ifdef SBG_HAVE_SBML
#include <sbml/SBMLTypes.h>
#include <sbml/math/L3FormulaFormatter.h>
#endif

SEXP ffi_lassie_sbml_available(void) {
#ifdef SBG_HAVE_SBML
  return Rf_ScalarLogical(1);
#else
  return Rf_ScalarLogical(0);
#endif
}

#ifdef SBG_HAVE_SBML
static SEXP mkstr(const char *s) { return Rf_mkChar(s ? s : ""); }

/* named list from parallel arrays of names and SEXPs (PROTECTed by caller) */
static SEXP named_list(int n, const char **nm, SEXP *val) {
  SEXP l = PROTECT(Rf_allocVector(VECSXP, n)), names = PROTECT(Rf_allocVector(STRSXP, n));
  for (int i = 0; i < n; i++) { SET_VECTOR_ELT(l, i, val[i]); SET_STRING_ELT(names, i, Rf_mkChar(nm[i])); }
  Rf_setAttrib(l, R_NamesSymbol, names);
  UNPROTECT(2);
  return l;
}

/* species and stoichiometries of one side of a reaction; NA stoichiometry
 * when it is given by math (not supported, R says so) */
static SEXP side(Reaction_t *r, int products) {
  unsigned n = products ? Reaction_getNumProducts(r) : Reaction_getNumReactants(r);
  SEXP sp = PROTECT(Rf_allocVector(STRSXP, n)), st = PROTECT(Rf_allocVector(REALSXP, n));
  for (unsigned i = 0; i < n; i++) {
    SpeciesReference_t *s = products ? Reaction_getProduct(r, i) : Reaction_getReactant(r, i);
    SET_STRING_ELT(sp, i, mkstr(SpeciesReference_getSpecies(s)));
    double v = SpeciesReference_getStoichiometry(s);
    if (SpeciesReference_isSetStoichiometryMath(s)) v = NA_REAL;
    REAL(st)[i] = v;
  }
  const char *nm[] = {"species", "stoichiometry"};
  SEXP val[] = {sp, st};
  SEXP l = named_list(2, nm, val);
  UNPROTECT(2);
  return l;
}
#endif

SEXP ffi_lassie_read_sbml(SEXP path) {
#ifndef SBG_HAVE_SBML
  (void)path;
  Rf_error("readSBML() is not available: libSBML was not found when sysbioGPU was built "
           "(install libSBML, e.g. Debian's libsbml5-dev, and reinstall sysbioGPU)");
  return R_NilValue;
#else
  if (!Rf_isString(path) || Rf_length(path) != 1) Rf_error("`file` must be one path");
  SBMLDocument_t *d = readSBMLFromFile(CHAR(STRING_ELT(path, 0)));
  if (!d) Rf_error("libSBML could not read the file");
  int np = 0;
  /* errors (severity error or fatal): "line: message" */
  unsigned ne = SBMLDocument_getNumErrors(d), nerr = 0;
  for (unsigned i = 0; i < ne; i++) {
    /* an SBMLError is an XMLError (C++ subclass): libSBML's C API asks for the cast */
    const XMLError_t *e = (const XMLError_t *)SBMLDocument_getError(d, i);
    if (XMLError_isError(e) || XMLError_isFatal(e)) nerr++;
  }
  SEXP errs = PROTECT(Rf_allocVector(STRSXP, nerr)); np++;
  for (unsigned i = 0, k = 0; i < ne; i++) {
    const XMLError_t *e = (const XMLError_t *)SBMLDocument_getError(d, i);
    if (!(XMLError_isError(e) || XMLError_isFatal(e))) continue;
    char buf[600];
    snprintf(buf, sizeof buf, "line %u: %s", XMLError_getLine(e), XMLError_getMessage(e));
    SET_STRING_ELT(errs, k++, Rf_mkChar(buf));
  }
  Model_t *m = SBMLDocument_getModel(d);
  if (nerr > 0 || !m) {
    const char *nm[] = {"errors"};
    SEXP val[] = {errs};
    SEXP res = named_list(1, nm, val);
    SBMLDocument_free(d);
    UNPROTECT(np);
    return res;
  }

  /* compartments */
  unsigned nc = Model_getNumCompartments(m);
  SEXP c_id = PROTECT(Rf_allocVector(STRSXP, nc)), c_size = PROTECT(Rf_allocVector(REALSXP, nc)); np += 2;
  for (unsigned i = 0; i < nc; i++) {
    Compartment_t *c = Model_getCompartment(m, i);
    SET_STRING_ELT(c_id, i, mkstr(Compartment_getId(c)));
    REAL(c_size)[i] = Compartment_isSetSize(c) ? Compartment_getSize(c) : NA_REAL;
  }
  /* species */
  unsigned ns = Model_getNumSpecies(m);
  SEXP s_id = PROTECT(Rf_allocVector(STRSXP, ns)), s_name = PROTECT(Rf_allocVector(STRSXP, ns)),
       s_comp = PROTECT(Rf_allocVector(STRSXP, ns)), s_amount = PROTECT(Rf_allocVector(REALSXP, ns)),
       s_conc = PROTECT(Rf_allocVector(REALSXP, ns)), s_only = PROTECT(Rf_allocVector(LGLSXP, ns)),
       s_bound = PROTECT(Rf_allocVector(LGLSXP, ns)), s_const = PROTECT(Rf_allocVector(LGLSXP, ns));
  np += 8;
  for (unsigned i = 0; i < ns; i++) {
    Species_t *s = Model_getSpecies(m, i);
    SET_STRING_ELT(s_id, i, mkstr(Species_getId(s)));
    SET_STRING_ELT(s_name, i, mkstr(Species_isSetName(s) ? Species_getName(s) : Species_getId(s)));
    SET_STRING_ELT(s_comp, i, mkstr(Species_getCompartment(s)));
    REAL(s_amount)[i] = Species_isSetInitialAmount(s) ? Species_getInitialAmount(s) : NA_REAL;
    REAL(s_conc)[i] = Species_isSetInitialConcentration(s) ? Species_getInitialConcentration(s) : NA_REAL;
    LOGICAL(s_only)[i] = Species_getHasOnlySubstanceUnits(s) != 0;
    LOGICAL(s_bound)[i] = Species_getBoundaryCondition(s) != 0;
    LOGICAL(s_const)[i] = Species_getConstant(s) != 0;
  }
  /* global parameters */
  unsigned npar = Model_getNumParameters(m);
  SEXP p_id = PROTECT(Rf_allocVector(STRSXP, npar)), p_val = PROTECT(Rf_allocVector(REALSXP, npar)); np += 2;
  for (unsigned i = 0; i < npar; i++) {
    Parameter_t *p = Model_getParameter(m, i);
    SET_STRING_ELT(p_id, i, mkstr(Parameter_getId(p)));
    REAL(p_val)[i] = Parameter_isSetValue(p) ? Parameter_getValue(p) : NA_REAL;
  }
  /* reactions */
  unsigned nr = Model_getNumReactions(m);
  SEXP rx = PROTECT(Rf_allocVector(VECSXP, nr)); np++;
  for (unsigned i = 0; i < nr; i++) {
    Reaction_t *r = Model_getReaction(m, i);
    SEXP id = PROTECT(Rf_ScalarString(mkstr(Reaction_getId(r))));
    SEXP name = PROTECT(Rf_ScalarString(mkstr(Reaction_isSetName(r) ? Reaction_getName(r) : "")));
    SEXP rev = PROTECT(Rf_ScalarLogical(Reaction_getReversible(r) != 0));
    SEXP re = PROTECT(side(r, 0)), pr = PROTECT(side(r, 1));
    unsigned nmod = Reaction_getNumModifiers(r);
    SEXP mods = PROTECT(Rf_allocVector(STRSXP, nmod));
    for (unsigned j = 0; j < nmod; j++)
      SET_STRING_ELT(mods, j, mkstr(SpeciesReference_getSpecies(Reaction_getModifier(r, j))));
    KineticLaw_t *kl = Reaction_getKineticLaw(r);
    SEXP law = PROTECT(Rf_allocVector(STRSXP, 1));
    SET_STRING_ELT(law, 0, NA_STRING);
    unsigned nl = kl ? KineticLaw_getNumParameters(kl) : 0;
    SEXP lp_id = PROTECT(Rf_allocVector(STRSXP, nl)), lp_val = PROTECT(Rf_allocVector(REALSXP, nl));
    if (kl) {
      const ASTNode_t *math = KineticLaw_getMath(kl);
      if (math) {
        char *txt = SBML_formulaToL3String(math);
        if (txt) { SET_STRING_ELT(law, 0, Rf_mkChar(txt)); free(txt); }
      }
      for (unsigned j = 0; j < nl; j++) {
        Parameter_t *p = KineticLaw_getParameter(kl, j);
        SET_STRING_ELT(lp_id, j, mkstr(Parameter_getId(p)));
        REAL(lp_val)[j] = Parameter_isSetValue(p) ? Parameter_getValue(p) : NA_REAL;
      }
    }
    const char *nm[] = {"id", "name", "reversible", "reactants", "products", "modifiers",
                        "law", "local_id", "local_value"};
    SEXP val[] = {id, name, rev, re, pr, mods, law, lp_id, lp_val};
    SET_VECTOR_ELT(rx, i, named_list(9, nm, val));
    UNPROTECT(9);
  }
  /* what mass-action reading cannot represent: counted, R names them */
  SEXP other = PROTECT(Rf_allocVector(INTSXP, 5)); np++;
  INTEGER(other)[0] = (int)Model_getNumRules(m);
  INTEGER(other)[1] = (int)Model_getNumEvents(m);
  INTEGER(other)[2] = (int)Model_getNumFunctionDefinitions(m);
  INTEGER(other)[3] = (int)Model_getNumInitialAssignments(m);
  INTEGER(other)[4] = (int)Model_getNumConstraints(m);
  SEXP onames = PROTECT(Rf_allocVector(STRSXP, 5)); np++;
  const char *on[] = {"rules", "events", "function definitions", "initial assignments", "constraints"};
  for (int i = 0; i < 5; i++) SET_STRING_ELT(onames, i, Rf_mkChar(on[i]));
  Rf_setAttrib(other, R_NamesSymbol, onames);
  SEXP level = PROTECT(Rf_ScalarInteger((int)SBMLDocument_getLevel(d))); np++;
  SEXP model_id = PROTECT(Rf_ScalarString(mkstr(Model_isSetName(m) ? Model_getName(m) : Model_getId(m)))); np++;

  SEXP comps, species, pars;
  {
    const char *nm[] = {"id", "size"};
    SEXP val[] = {c_id, c_size};
    comps = PROTECT(named_list(2, nm, val)); np++;
  }
  {
    const char *nm[] = {"id", "name", "compartment", "initialAmount", "initialConcentration",
                        "hasOnlySubstanceUnits", "boundaryCondition", "constant"};
    SEXP val[] = {s_id, s_name, s_comp, s_amount, s_conc, s_only, s_bound, s_const};
    species = PROTECT(named_list(8, nm, val)); np++;
  }
  {
    const char *nm[] = {"id", "value"};
    SEXP val[] = {p_id, p_val};
    pars = PROTECT(named_list(2, nm, val)); np++;
  }
  const char *nm[] = {"errors", "level", "model", "compartments", "species", "parameters",
                      "reactions", "unsupported"};
  SEXP val[] = {errs, level, model_id, comps, species, pars, rx, other};
  SEXP res = named_list(8, nm, val);
  SBMLDocument_free(d);
  UNPROTECT(np);
  return res;
#endif
}
