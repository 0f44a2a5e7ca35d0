/* Glue of readSBML(): reads an SBML file with libSBML's C API and hands its
 * compartments, species, parameters, reactions, rules, initial assignments
 * and events to R, which decides what it can simulate (R/lassie-io.R).
 * Every piece of math is handed over as an R call built from libSBML's
 * AST (not as infix text: SBML's csymbols time, avogadro, delay and rateOf
 * have no reserved names in text, and a local parameter may be called
 * `avogadro`).  A model of the comp package is flattened first by libSBML's
 * own converter, and function definitions are expanded in place.
 * Built against libSBML only when configure found it (SBG_HAVE_SBML). */
#include <stdlib.h>
#include <string.h>

#include <R.h>
#include <Rinternals.h>

#ifdef SBG_HAVE_SBML
#include <sbml/SBMLTypes.h>
#include <sbml/math/L3FormulaFormatter.h>
#include <sbml/conversion/ConversionProperties.h>
#include <sbml/conversion/ConversionOption.h>
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


/* The R call of an AST node.  Operators keep R's names (+ - * / ^); the
 * other functions SBML's names ("piecewise", "eq", "and", "log_base",
 * "root", ...), which R/lassie-io.R evaluates; csymbols are calls
 * csymbol_time(), csymbol_avogadro(), delay(x, d), rateOf(x); a user
 * function left unexpanded is call `function_call`("name", args...) and
 * any other node `unsupported_math`("description"), so that R refuses it
 * by name.  The result is not protected. */
static SEXP ast_to_r(const ASTNode_t *a, int depth);

static SEXP call_n(const char *fun, const ASTNode_t *a, unsigned from, int depth) {
  unsigned n = ASTNode_getNumChildren(a);
  SEXP args = PROTECT(R_NilValue);
  for (unsigned i = n; i > from; i--) {
    SEXP c = PROTECT(ast_to_r(ASTNode_getChild(a, i - 1), depth + 1));
    args = Rf_cons(c, args);
    UNPROTECT(2);
    PROTECT(args);
  }
  SEXP r = Rf_lcons(Rf_install(fun), args);
  UNPROTECT(1);
  return r;
}

/* n-ary + and * as one call of all their operands, evaluated left to
 * right (R/lassie-io.R); with one operand that operand, with none their
 * identity.  A first operand that is itself the same operation, as in
 * ((a + b) + c) + d, gives its operands to the call too: the order of
 * evaluation is the same, and a long sum written so, or folded into nested
 * calls, would be as deep as it is long, which R's recursion over the call
 * does not survive past a few hundred terms. */
static SEXP fold(const char *op, const ASTNode_t *a, double identity, int depth) {
  const ASTNodeType_t t = ASTNode_getType(a);
  unsigned n = ASTNode_getNumChildren(a);
  if (n == 0) return Rf_ScalarReal(identity);
  if (n == 1) return ast_to_r(ASTNode_getChild(a, 0), depth + 1);
  /* the left spine: a, then each first operand of the same operation
   * with at least two operands of its own */
  int levels = 1;
  for (const ASTNode_t *c = a; ; levels++) {
    c = ASTNode_getChild(c, 0);
    if (ASTNode_getType(c) != t || ASTNode_getNumChildren(c) < 2) break;
  }
  const ASTNode_t **spine = (const ASTNode_t **)R_alloc((size_t)levels, sizeof(*spine));
  spine[0] = a;
  for (int l = 1; l < levels; l++) spine[l] = ASTNode_getChild(spine[l - 1], 0);
  /* operands from the last: the top's later ones, ..., the bottom's all */
  PROTECT_INDEX ix;
  SEXP args = R_NilValue;
  PROTECT_WITH_INDEX(args, &ix);
  for (int l = 0; l < levels; l++) {
    unsigned m = ASTNode_getNumChildren(spine[l]), first = l == levels - 1 ? 0 : 1;
    for (unsigned i = m; i > first; i--) {
      SEXP c = PROTECT(ast_to_r(ASTNode_getChild(spine[l], i - 1), depth + 1));
      REPROTECT(args = Rf_cons(c, args), ix);
      UNPROTECT(1);
    }
  }
  SEXP r = Rf_lcons(Rf_install(op), args);
  UNPROTECT(1);
  return r;
}

static SEXP unsupported(const char *what) {
  SEXP fn = Rf_install("unsupported_math"), w = PROTECT(Rf_mkString(what));
  SEXP r = Rf_lang2(fn, w);
  UNPROTECT(1);
  return r;
}

static const char *fun_name(ASTNodeType_t t) {
  switch (t) {
  case AST_FUNCTION_ABS: return "abs";
  case AST_FUNCTION_ARCCOS: return "arccos";
  case AST_FUNCTION_ARCCOSH: return "arccosh";
  case AST_FUNCTION_ARCCOT: return "arccot";
  case AST_FUNCTION_ARCCOTH: return "arccoth";
  case AST_FUNCTION_ARCCSC: return "arccsc";
  case AST_FUNCTION_ARCCSCH: return "arccsch";
  case AST_FUNCTION_ARCSEC: return "arcsec";
  case AST_FUNCTION_ARCSECH: return "arcsech";
  case AST_FUNCTION_ARCSIN: return "arcsin";
  case AST_FUNCTION_ARCSINH: return "arcsinh";
  case AST_FUNCTION_ARCTAN: return "arctan";
  case AST_FUNCTION_ARCTANH: return "arctanh";
  case AST_FUNCTION_CEILING: return "ceiling";
  case AST_FUNCTION_COS: return "cos";
  case AST_FUNCTION_COSH: return "cosh";
  case AST_FUNCTION_COT: return "cot";
  case AST_FUNCTION_COTH: return "coth";
  case AST_FUNCTION_CSC: return "csc";
  case AST_FUNCTION_CSCH: return "csch";
  case AST_FUNCTION_DELAY: return "delay";
  case AST_FUNCTION_EXP: return "exp";
  case AST_FUNCTION_FACTORIAL: return "factorial";
  case AST_FUNCTION_FLOOR: return "floor";
  case AST_FUNCTION_LN: return "ln";
  case AST_FUNCTION_PIECEWISE: return "piecewise";
  case AST_FUNCTION_SEC: return "sec";
  case AST_FUNCTION_SECH: return "sech";
  case AST_FUNCTION_SIN: return "sin";
  case AST_FUNCTION_SINH: return "sinh";
  case AST_FUNCTION_TAN: return "tan";
  case AST_FUNCTION_TANH: return "tanh";
  case AST_LOGICAL_AND: return "and";
  case AST_LOGICAL_NOT: return "not";
  case AST_LOGICAL_OR: return "or";
  case AST_LOGICAL_XOR: return "xor";
  case AST_LOGICAL_IMPLIES: return "implies";
  case AST_RELATIONAL_EQ: return "eq";
  case AST_RELATIONAL_GEQ: return "geq";
  case AST_RELATIONAL_GT: return "gt";
  case AST_RELATIONAL_LEQ: return "leq";
  case AST_RELATIONAL_LT: return "lt";
  case AST_RELATIONAL_NEQ: return "neq";
  case AST_FUNCTION_MAX: return "max";
  case AST_FUNCTION_MIN: return "min";
  case AST_FUNCTION_QUOTIENT: return "quotient";
  case AST_FUNCTION_RATE_OF: return "rateOf";
  case AST_FUNCTION_REM: return "rem";
  default: return NULL;
  }
}

static SEXP ast_to_r(const ASTNode_t *a, int depth) {
  if (!a) return unsupported("empty math");
  if (depth > 2000) return unsupported("math nested too deeply");
  ASTNodeType_t t = ASTNode_getType(a);
  unsigned n = ASTNode_getNumChildren(a);
  switch (t) {
  case AST_INTEGER: return Rf_ScalarReal((double)ASTNode_getInteger(a));
  case AST_REAL: case AST_REAL_E: case AST_RATIONAL: return Rf_ScalarReal(ASTNode_getReal(a));
  case AST_CONSTANT_E: return Rf_ScalarReal(2.718281828459045235360287);
  case AST_CONSTANT_PI: return Rf_ScalarReal(3.141592653589793238462643);
  case AST_CONSTANT_TRUE: return Rf_ScalarReal(1);
  case AST_CONSTANT_FALSE: return Rf_ScalarReal(0);
  case AST_NAME: {
    /* an empty name (<ci> </ci>) would make Rf_install() raise R's own
     * error from inside the reader */
    const char *nm = ASTNode_getName(a);
    return nm && *nm ? Rf_install(nm) : unsupported("a name without a name");
  }
  case AST_NAME_TIME: return Rf_lang1(Rf_install("csymbol_time"));
  case AST_NAME_AVOGADRO: return Rf_lang1(Rf_install("csymbol_avogadro"));
  case AST_PLUS: return fold("+", a, 0, depth);
  case AST_TIMES: return fold("*", a, 1, depth);
  case AST_MINUS: case AST_DIVIDE: case AST_POWER: case AST_FUNCTION_POWER: {
    const char *op = t == AST_MINUS ? "-" : t == AST_DIVIDE ? "/" : "^";
    if (n == 1 && t == AST_MINUS) return call_n("-", a, 0, depth);
    if (n != 2) return unsupported(t == AST_MINUS ? "minus with more than two operands" : "a binary operator without two operands");
    return call_n(op, a, 0, depth);
  }
  case AST_FUNCTION_LOG:
    /* log with a base child (libSBML makes the default base 10 explicit) */
    if (n == 2) return call_n("log_base", a, 0, depth);
    return call_n("log10", a, 0, depth);
  case AST_FUNCTION_ROOT:
    if (n == 2) return call_n("root", a, 0, depth);
    return call_n("sqrt", a, 0, depth);
  case AST_FUNCTION: {
    const char *nm = ASTNode_getName(a);
    SEXP fn = Rf_install("function_call");
    SEXP r = PROTECT(call_n("function_call", a, 0, depth));
    SEXP name = PROTECT(Rf_mkString(nm ? nm : ""));
    SEXP args = PROTECT(Rf_cons(name, CDR(r)));
    r = Rf_lcons(fn, args);
    UNPROTECT(3);
    return r;
  }
  default: {
    const char *fn = fun_name(t);
    if (fn) return call_n(fn, a, 0, depth);
    char buf[80];
    snprintf(buf, sizeof buf, "math element of libSBML type %d", (int)t);
    return unsupported(buf);
  }
  }
}

/* math as an R call (or NULL when absent); protected by the caller */
static SEXP math_or_null(const ASTNode_t *a) { return a ? ast_to_r(a, 0) : R_NilValue; }

/* species, stoichiometries, species-reference ids (L3: rules and initial
 * assignments may set a stoichiometry through its id) and
 * stoichiometryMath (L2) of one side of a reaction */
static SEXP side(Reaction_t *r, int products) {
  unsigned n = products ? Reaction_getNumProducts(r) : Reaction_getNumReactants(r);
  SEXP sp = PROTECT(Rf_allocVector(STRSXP, n)), st = PROTECT(Rf_allocVector(REALSXP, n)),
       id = PROTECT(Rf_allocVector(STRSXP, n)), sm = PROTECT(Rf_allocVector(VECSXP, n));
  for (unsigned i = 0; i < n; i++) {
    SpeciesReference_t *s = products ? Reaction_getProduct(r, i) : Reaction_getReactant(r, i);
    SET_STRING_ELT(sp, i, mkstr(SpeciesReference_getSpecies(s)));
    SET_STRING_ELT(id, i, mkstr(SpeciesReference_getId(s)));
    double v = SpeciesReference_getStoichiometry(s);
    if (SpeciesReference_isSetStoichiometryMath(s)) {
      StoichiometryMath_t *m = SpeciesReference_getStoichiometryMath(s);
      SET_VECTOR_ELT(sm, i, math_or_null(m ? StoichiometryMath_getMath(m) : NULL));
      v = NA_REAL;
    }
    REAL(st)[i] = v;
  }
  const char *nm[] = {"species", "stoichiometry", "id", "math"};
  SEXP val[] = {sp, st, id, sm};
  SEXP l = named_list(4, nm, val);
  UNPROTECT(4);
  return l;
}

static SEXP str_or_empty(const char *s) { return Rf_ScalarString(mkstr(s)); }

/* flatten a comp model with libSBML's converter: "" when done, else why */
static const char *flatten_comp(SBMLDocument_t *d, char *buf, size_t len) {
  ConversionProperties_t *props = ConversionProperties_create();
  ConversionOption_t *opt = ConversionOption_create("flatten comp");
  ConversionOption_setBoolValue(opt, 1);
  ConversionProperties_addOption(props, opt);
  int rc = SBMLDocument_convert(d, props);
  ConversionOption_free(opt);
  ConversionProperties_free(props);
  if (rc == LIBSBML_OPERATION_SUCCESS) return "";
  snprintf(buf, len, "libSBML's comp flattening failed (code %d)", rc);
  unsigned ne = SBMLDocument_getNumErrors(d);
  for (unsigned i = 0; i < ne; i++) {
    const XMLError_t *e = (const XMLError_t *)SBMLDocument_getError(d, i);
    if (XMLError_isError(e) || XMLError_isFatal(e)) {
      snprintf(buf, len, "libSBML's comp flattening failed: %s", XMLError_getMessage(e));
      break;
    }
  }
  return buf;
}

static SEXP read_compartments(Model_t *m) {
  unsigned nc = Model_getNumCompartments(m);
  SEXP id = PROTECT(Rf_allocVector(STRSXP, nc)), size = PROTECT(Rf_allocVector(REALSXP, nc)),
       dims = PROTECT(Rf_allocVector(REALSXP, nc)), cst = PROTECT(Rf_allocVector(LGLSXP, nc));
  for (unsigned i = 0; i < nc; i++) {
    Compartment_t *c = Model_getCompartment(m, i);
    SET_STRING_ELT(id, i, mkstr(Compartment_getId(c)));
    /* (isSetVolume: Level 1's volume defaults to 1, Level 2's and 3's
     * size has no default, and libSBML's getSize() gives the default) */
    REAL(size)[i] = Compartment_isSetVolume(c) ? Compartment_getSize(c) : NA_REAL;
    REAL(dims)[i] = Compartment_getSpatialDimensionsAsDouble(c);
    LOGICAL(cst)[i] = Compartment_getConstant(c) != 0;
  }
  const char *nm[] = {"id", "size", "spatialDimensions", "constant"};
  SEXP val[] = {id, size, dims, cst};
  SEXP l = named_list(4, nm, val);
  UNPROTECT(4);
  return l;
}

static SEXP read_species(Model_t *m) {
  unsigned ns = Model_getNumSpecies(m);
  SEXP s_id = PROTECT(Rf_allocVector(STRSXP, ns)), s_name = PROTECT(Rf_allocVector(STRSXP, ns)),
       s_comp = PROTECT(Rf_allocVector(STRSXP, ns)), s_amount = PROTECT(Rf_allocVector(REALSXP, ns)),
       s_conc = PROTECT(Rf_allocVector(REALSXP, ns)), s_only = PROTECT(Rf_allocVector(LGLSXP, ns)),
       s_bound = PROTECT(Rf_allocVector(LGLSXP, ns)), s_const = PROTECT(Rf_allocVector(LGLSXP, ns)),
       s_cf = PROTECT(Rf_allocVector(STRSXP, ns));
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
    SET_STRING_ELT(s_cf, i, mkstr(Species_getConversionFactor(s)));
  }
  const char *nm[] = {"id", "name", "compartment", "initialAmount", "initialConcentration",
                      "hasOnlySubstanceUnits", "boundaryCondition", "constant", "conversionFactor"};
  SEXP val[] = {s_id, s_name, s_comp, s_amount, s_conc, s_only, s_bound, s_const, s_cf};
  SEXP l = named_list(9, nm, val);
  UNPROTECT(9);
  return l;
}

static SEXP read_parameters(Model_t *m) {
  unsigned npar = Model_getNumParameters(m);
  SEXP id = PROTECT(Rf_allocVector(STRSXP, npar)), val_ = PROTECT(Rf_allocVector(REALSXP, npar)),
       cst = PROTECT(Rf_allocVector(LGLSXP, npar));
  for (unsigned i = 0; i < npar; i++) {
    Parameter_t *p = Model_getParameter(m, i);
    SET_STRING_ELT(id, i, mkstr(Parameter_getId(p)));
    REAL(val_)[i] = Parameter_isSetValue(p) ? Parameter_getValue(p) : NA_REAL;
    LOGICAL(cst)[i] = Parameter_getConstant(p) != 0;
  }
  const char *nm[] = {"id", "value", "constant"};
  SEXP val[] = {id, val_, cst};
  SEXP l = named_list(3, nm, val);
  UNPROTECT(3);
  return l;
}

static SEXP read_reaction(Reaction_t *r) {
  SEXP id = PROTECT(str_or_empty(Reaction_getId(r)));
  SEXP name = PROTECT(str_or_empty(Reaction_isSetName(r) ? Reaction_getName(r) : ""));
  SEXP rev = PROTECT(Rf_ScalarLogical(Reaction_getReversible(r) != 0));
  SEXP fast = PROTECT(Rf_ScalarLogical(Reaction_isSetFast(r) && Reaction_getFast(r)));
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
  SEXP math = PROTECT(R_NilValue);
  if (kl) {
    const ASTNode_t *a = KineticLaw_getMath(kl);
    if (a) {
      char *txt = SBML_formulaToL3String(a);
      if (txt) { SET_STRING_ELT(law, 0, Rf_mkChar(txt)); free(txt); }
      UNPROTECT(1);
      math = PROTECT(math_or_null(a));
    }
    for (unsigned j = 0; j < nl; j++) {
      Parameter_t *p = KineticLaw_getParameter(kl, j);
      SET_STRING_ELT(lp_id, j, mkstr(Parameter_getId(p)));
      REAL(lp_val)[j] = Parameter_isSetValue(p) ? Parameter_getValue(p) : NA_REAL;
    }
  }
  const char *nm[] = {"id", "name", "reversible", "fast", "reactants", "products", "modifiers",
                      "law", "local_id", "local_value", "math"};
  SEXP val[] = {id, name, rev, fast, re, pr, mods, law, lp_id, lp_val, math};
  SEXP l = named_list(11, nm, val);
  UNPROTECT(11);
  return l;
}

/* rules: type ("assignment", "rate", "algebraic"), variable, math */
static SEXP read_rules(Model_t *m) {
  unsigned n = Model_getNumRules(m);
  SEXP type = PROTECT(Rf_allocVector(STRSXP, n)), var = PROTECT(Rf_allocVector(STRSXP, n)),
       math = PROTECT(Rf_allocVector(VECSXP, n));
  for (unsigned i = 0; i < n; i++) {
    Rule_t *r = Model_getRule(m, i);
    SET_STRING_ELT(type, i, Rf_mkChar(Rule_isAlgebraic(r) ? "algebraic" : Rule_isRate(r) ? "rate" : "assignment"));
    SET_STRING_ELT(var, i, mkstr(Rule_isAlgebraic(r) ? "" : Rule_getVariable(r)));
    SET_VECTOR_ELT(math, i, math_or_null(Rule_getMath(r)));
  }
  const char *nm[] = {"type", "variable", "math"};
  SEXP val[] = {type, var, math};
  SEXP l = named_list(3, nm, val);
  UNPROTECT(3);
  return l;
}

static SEXP read_initial_assignments(Model_t *m) {
  unsigned n = Model_getNumInitialAssignments(m);
  SEXP sym = PROTECT(Rf_allocVector(STRSXP, n)), math = PROTECT(Rf_allocVector(VECSXP, n));
  for (unsigned i = 0; i < n; i++) {
    InitialAssignment_t *a = Model_getInitialAssignment(m, i);
    SET_STRING_ELT(sym, i, mkstr(InitialAssignment_getSymbol(a)));
    SET_VECTOR_ELT(math, i, math_or_null(InitialAssignment_getMath(a)));
  }
  const char *nm[] = {"symbol", "math"};
  SEXP val[] = {sym, math};
  SEXP l = named_list(2, nm, val);
  UNPROTECT(2);
  return l;
}

/* events: per event a list of id, trigger (math), initialValue,
 * persistent, delay and priority (math or NULL), useValuesFromTriggerTime,
 * and its assignments' variables and math.  Level 2 has neither
 * initialValue nor persistent: its semantics are those of both TRUE (a
 * trigger true at the start does not fire; a trigger that turns false
 * during a delay does not cancel the event), which libSBML's defaults are
 * too, set here explicitly; useValuesFromTriggerTime before Level 2
 * Version 4 is TRUE, libSBML's default. */
static SEXP read_event(Event_t *e, int level) {
  Trigger_t *tr = Event_getTrigger(e);
  SEXP id = PROTECT(str_or_empty(Event_getId(e)));
  SEXP trig = PROTECT(math_or_null(tr ? Trigger_getMath(tr) : NULL));
  SEXP init = PROTECT(Rf_ScalarLogical(level < 3 || !tr || Trigger_getInitialValue(tr) != 0));
  SEXP pers = PROTECT(Rf_ScalarLogical(level < 3 || !tr || Trigger_getPersistent(tr) != 0));
  Delay_t *dl = Event_isSetDelay(e) ? Event_getDelay(e) : NULL;
  SEXP delay = PROTECT(math_or_null(dl ? Delay_getMath(dl) : NULL));
  Priority_t *pr = Event_isSetPriority(e) ? Event_getPriority(e) : NULL;
  SEXP prio = PROTECT(math_or_null(pr ? Priority_getMath(pr) : NULL));
  SEXP uv = PROTECT(Rf_ScalarLogical(Event_getUseValuesFromTriggerTime(e) != 0));
  unsigned na = Event_getNumEventAssignments(e);
  SEXP var = PROTECT(Rf_allocVector(STRSXP, na)), math = PROTECT(Rf_allocVector(VECSXP, na));
  for (unsigned i = 0; i < na; i++) {
    EventAssignment_t *a = Event_getEventAssignment(e, i);
    SET_STRING_ELT(var, i, mkstr(EventAssignment_getVariable(a)));
    SET_VECTOR_ELT(math, i, math_or_null(EventAssignment_getMath(a)));
  }
  /* (a delay or priority element without math is none: delay, priority NULL) */
  const char *nm[] = {"id", "trigger", "initialValue", "persistent", "delay", "priority",
                      "useValuesFromTriggerTime", "variable", "math"};
  SEXP val[] = {id, trig, init, pers, delay, prio, uv, var, math};
  SEXP l = named_list(9, nm, val);
  UNPROTECT(9);
  return l;
}
#endif

#ifdef SBG_HAVE_SBML
/* Whether math names `nm`. */
static int names_symbol(const ASTNode_t *a, const char *nm, int depth) {
  if (!a || depth > 1000) return 0;
  if (ASTNode_getType(a) == AST_NAME && ASTNode_getName(a) && !strcmp(ASTNode_getName(a), nm)) return 1;
  for (unsigned i = 0; i < ASTNode_getNumChildren(a); i++)
    if (names_symbol(ASTNode_getChild(a, i), nm, depth + 1)) return 1;
  return 0;
}

/* libSBML expands a call of a function definition by replacing its
 * arguments' names one after the other in the body, so that an argument
 * whose math names another argument of that function (f(1, x) of
 * f(x, y), or f(g(y), 2)) has that name replaced again: the expansion is
 * wrong.  Returns the id of a function so called in `a` (NULL: none). */
static const char *expansion_clash(const ASTNode_t *a, Model_t *m, int depth) {
  if (!a || depth > 1000) return NULL;
  if (ASTNode_getType(a) == AST_FUNCTION && ASTNode_getName(a)) {
    FunctionDefinition_t *fd = Model_getFunctionDefinitionById(m, ASTNode_getName(a));
    unsigned nb = fd ? FunctionDefinition_getNumArguments(fd) : 0;
    for (unsigned i = 0; i < ASTNode_getNumChildren(a); i++)
      for (unsigned j = 0; j < nb; j++) {
        const ASTNode_t *bv = FunctionDefinition_getArgument(fd, j);
        if (j != i && bv && ASTNode_getName(bv) &&
            names_symbol(ASTNode_getChild(a, i), ASTNode_getName(bv), 0))
          return FunctionDefinition_getId(fd);
      }
  }
  for (unsigned i = 0; i < ASTNode_getNumChildren(a); i++) {
    const char *f = expansion_clash(ASTNode_getChild(a, i), m, depth + 1);
    if (f) return f;
  }
  return NULL;
}

/* The first function called so in the model's math (NULL: none). */
static const char *model_expansion_clash(Model_t *m) {
  const char *f = NULL;
  for (unsigned i = 0; !f && i < Model_getNumFunctionDefinitions(m); i++)
    f = expansion_clash(FunctionDefinition_getBody(Model_getFunctionDefinition(m, i)), m, 0);
  for (unsigned i = 0; !f && i < Model_getNumReactions(m); i++) {
    Reaction_t *r = Model_getReaction(m, i);
    KineticLaw_t *kl = Reaction_getKineticLaw(r);
    if (kl) f = expansion_clash(KineticLaw_getMath(kl), m, 0);
    for (int p = 0; p < 2 && !f; p++) {
      unsigned n = p ? Reaction_getNumProducts(r) : Reaction_getNumReactants(r);
      for (unsigned k = 0; !f && k < n; k++) {
        SpeciesReference_t *sr = p ? Reaction_getProduct(r, k) : Reaction_getReactant(r, k);
        if (SpeciesReference_isSetStoichiometryMath(sr))
          f = expansion_clash(StoichiometryMath_getMath(SpeciesReference_getStoichiometryMath(sr)), m, 0);
      }
    }
  }
  for (unsigned i = 0; !f && i < Model_getNumRules(m); i++) f = expansion_clash(Rule_getMath(Model_getRule(m, i)), m, 0);
  for (unsigned i = 0; !f && i < Model_getNumInitialAssignments(m); i++)
    f = expansion_clash(InitialAssignment_getMath(Model_getInitialAssignment(m, i)), m, 0);
  return f;
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
  if (nerr > 0 || !SBMLDocument_getModel(d)) {
    const char *nm[] = {"errors"};
    SEXP val[] = {errs};
    SEXP res = named_list(1, nm, val);
    SBMLDocument_free(d);
    UNPROTECT(np);
    return res;
  }
  /* what the reading itself refuses (named by R): a comp model that does
   * not flatten, other required packages */
  char why[700] = "";
  int comp = SBase_getPlugin((SBase_t *)d, "comp") != NULL;
  if (comp) {
    char buf[600];
    snprintf(why, sizeof why, "%s", flatten_comp(d, buf, sizeof buf));
  }
  const char *pkgs[] = {"arrays", "distrib", "dyn", "multi", "qual", "spatial", "req"};
  for (int i = 0; i < 7 && !why[0]; i++)
    if (SBMLDocument_getPackageRequired(d, pkgs[i]))
      snprintf(why, sizeof why, "it requires the SBML package `%s`", pkgs[i]);
  const char *clash = why[0] ? NULL : model_expansion_clash(SBMLDocument_getModel(d));
  if (clash)
    snprintf(why, sizeof why, "a call of function definition %s whose arguments name the function's own "
             "arguments (libSBML's expansion would replace them again)", clash);
  if (!why[0]) SBMLDocument_expandFunctionDefintions(d);
  SEXP refusal = PROTECT(Rf_mkString(why)); np++;
  Model_t *m = SBMLDocument_getModel(d);

  SEXP comps = PROTECT(read_compartments(m)); np++;
  SEXP species = PROTECT(read_species(m)); np++;
  SEXP pars = PROTECT(read_parameters(m)); np++;
  unsigned nr = Model_getNumReactions(m);
  SEXP rx = PROTECT(Rf_allocVector(VECSXP, nr)); np++;
  for (unsigned i = 0; i < nr; i++) SET_VECTOR_ELT(rx, i, read_reaction(Model_getReaction(m, i)));
  SEXP rules = PROTECT(read_rules(m)); np++;
  SEXP ias = PROTECT(read_initial_assignments(m)); np++;
  unsigned nev = Model_getNumEvents(m);
  SEXP events = PROTECT(Rf_allocVector(VECSXP, nev)); np++;
  for (unsigned i = 0; i < nev; i++)
    SET_VECTOR_ELT(events, i, read_event(Model_getEvent(m, i), (int)SBMLDocument_getLevel(d)));
  /* counted: function definitions left after expansion, constraints (they
   * do not change a trajectory) */
  SEXP other = PROTECT(Rf_allocVector(INTSXP, 2)); np++;
  INTEGER(other)[0] = (int)Model_getNumFunctionDefinitions(m);
  INTEGER(other)[1] = (int)Model_getNumConstraints(m);
  SEXP onames = PROTECT(Rf_allocVector(STRSXP, 2)); np++;
  SET_STRING_ELT(onames, 0, Rf_mkChar("function definitions"));
  SET_STRING_ELT(onames, 1, Rf_mkChar("constraints"));
  Rf_setAttrib(other, R_NamesSymbol, onames);
  SEXP level = PROTECT(Rf_ScalarInteger((int)SBMLDocument_getLevel(d))); np++;
  SEXP model_id = PROTECT(str_or_empty(Model_isSetName(m) ? Model_getName(m) : Model_getId(m))); np++;
  SEXP mcf = PROTECT(str_or_empty(Model_getConversionFactor(m))); np++;
  SEXP flat = PROTECT(Rf_ScalarLogical(comp)); np++;

  const char *nm[] = {"errors", "level", "model", "compartments", "species", "parameters",
                      "reactions", "rules", "initialAssignments", "events", "conversionFactor",
                      "unsupported", "refusal", "compFlattened"};
  SEXP val[] = {errs, level, model_id, comps, species, pars, rx, rules, ias, events, mcf,
                other, refusal, flat};
  SEXP res = named_list(14, nm, val);
  SBMLDocument_free(d);
  UNPROTECT(np);
  return res;
#endif
}
