# Developer entry points. `make test` is what CI runs (.ci/run).
#   make test     the policy check (make policy), then install missing Debian
#                 packages, build the tarball, R CMD check it (fails on any
#                 ERROR or WARNING), then run the tests again on a CPU-only
#                 build (SYSBIOGPU_CUDA=no)
#   make policy   tools/check-policy.R: no work history, tracker issue numbers,
#                 dates, machine names or outside paths in what ships (and its
#                 self-test)
#   make install  build the tarball (vignettes included) and install it into .lib
#   make demo     install the package and render the demonstration report
#                 into demo-report/sysbioGPU-demo.html
#   make docs     regenerate man/ and NAMESPACE with roxygen2
#   make valgrind run the test suite under valgrind (CPU paths), after make install
#   make fuzz     mutate the shipped files and run every reader and its method on
#                 each mutant in child processes (tools/fuzz.R), after make install;
#                 FUZZ_N mutants per reader (default 2000), FUZZ_SEED, FUZZ_JOBS;
#                 report in check/fuzz-out/ (fails on a crash or a hang)
#   make gpu-pack build for the GPU machine (see tools/gpu-check.sh)
#   make mutants  one-line mutations of the engines (tools/mutants.txt), each
#                 built CPU-only and run against its tests; prints the kill rate
#   make mutants-gpu  one-line mutations of the CUDA engines (tools/mutants-gpu.txt),
#                 each built with CUDA into .device/mutants/ after make gpu-pack;
#                 `bash tools/mutants-gpu.sh run` on the GPU machine runs them
#   make test-cluster  a one-node SLURM on this machine (root; Debian's slurm
#                 packages), each method through BatchtoolsParam against one
#                 process, bit for bit, and a cancelled job (tools/test-cluster.sh);
#                 skips with a message where the daemons cannot start
#   make mutants-auto  mutants made by a program (tools/mutants-auto.R): every
#                 operator and numeric constant of the engines and R readers is a
#                 site; MUT_N (300) drawn with MUT_SEED (1), MUT_JOBS workers;
#                 tables in check/mutants-auto/ (long: not part of make test)
#   make pbn-coverage  pbnSteadyState's accuracy promise over COV_SEEDS seeds
#                 (default 400) on three networks and two p (tools/pbn-coverage.R),
#                 after make install; fails when a coverage is significantly below s
#   make sbml-suite SUITE=<cases/semantic of the SBML Test Suite>  every
#                 time-course case through readSBML() and lassieSimulate() on the
#                 CPU, each in a forked child with a time limit (tools/sbml-suite.R),
#                 after make install; SBML_JOBS (default 2), SBML_TIMEOUT (default
#                 60 s); table in check/sbml-suite-out/ (fails on a silently wrong
#                 answer, an unclassed error, a crash or a hang)
R ?= R
RSCRIPT ?= Rscript
PKG := sysbioGPU
VERSION := $(shell sed -n 's/^Version: *//p' DESCRIPTION)
TARBALL := $(PKG)_$(VERSION).tar.gz
LIB := $(CURDIR)/.lib
CHECKDIR := $(CURDIR)/check

.PHONY: all deps build check policy test test-nocuda test-cluster install demo docs valgrind fuzz gpu-pack mutants mutants-gpu mutants-auto pbn-coverage sbml-suite clean

all: test

deps:
	@sh tools/install-deps.sh

$(TARBALL): deps
	$(R) CMD build .

build: $(TARBALL)

check: build
	rm -rf $(CHECKDIR) && mkdir -p $(CHECKDIR)
	_R_CHECK_FORCE_SUGGESTS_=false $(R) CMD check --no-manual -o $(CHECKDIR) $(TARBALL)
	@status=$$(grep '^Status:' $(CHECKDIR)/$(PKG).Rcheck/00check.log); echo "R CMD check $$status"; \
	  case "$$status" in *ERROR*|*WARNING*) echo "make check: R CMD check has an ERROR or a WARNING" >&2; exit 1;; esac

# The same tests on a build without CUDA.
test-nocuda: build
	rm -rf $(CHECKDIR)/lib-nocuda && mkdir -p $(CHECKDIR)/lib-nocuda
	SYSBIOGPU_CUDA=no $(R) CMD INSTALL --no-docs -l $(CHECKDIR)/lib-nocuda $(TARBALL)
	R_LIBS=$(CHECKDIR)/lib-nocuda $(RSCRIPT) -e 'stopifnot(!attr(sysbioGPU::gpuInfo(), "cuda"))' \
	  -e 'testthat::test_dir("tests/testthat", package = "$(PKG)", load_package = "installed", stop_on_failure = TRUE)'

policy: deps
	$(RSCRIPT) tools/check-policy.R --self-test
	$(RSCRIPT) tools/check-policy.R

test: policy check test-nocuda

test-cluster:
	R="$(R)" RSCRIPT="$(RSCRIPT)" bash tools/test-cluster.sh

# From the built tarball, so that the vignettes are installed too
# (vignette(package = "sysbioGPU") finds them).
install: build
	mkdir -p $(LIB)
	$(R) CMD INSTALL -l $(LIB) $(TARBALL)

demo: install
	R_LIBS=$(LIB) $(RSCRIPT) -e 'sysbioGPU::demoReport("demo-report")'

valgrind: install
	R_LIBS=$(LIB) $(R) -d "valgrind --leak-check=full --errors-for-leak-kinds=definite,possible --error-exitcode=1 --suppressions=tools/valgrind.supp" \
	  --vanilla -e 'testthat::test_dir("tests/testthat", package = "$(PKG)", load_package = "installed", stop_on_failure = TRUE)'

FUZZ_N ?= 2000
FUZZ_SEED ?= 1
FUZZ_JOBS ?= 1
fuzz: install
	R_LIBS=$(LIB) $(RSCRIPT) tools/fuzz.R --n=$(FUZZ_N) --seed=$(FUZZ_SEED) --jobs=$(FUZZ_JOBS) --out=$(CHECKDIR)/fuzz-out

COV_SEEDS ?= 400
pbn-coverage: install
	mkdir -p $(CHECKDIR)
	R_LIBS=$(LIB) $(RSCRIPT) tools/pbn-coverage.R --seeds=$(COV_SEEDS) --out=$(CHECKDIR)/pbn-coverage.csv

SBML_JOBS ?= 2
SBML_TIMEOUT ?= 60
sbml-suite: install
	@test -n "$(SUITE)" || { echo "make sbml-suite: set SUITE to the SBML Test Suite's cases/semantic folder" >&2; exit 2; }
	R_LIBS=$(LIB) $(RSCRIPT) tools/sbml-suite.R "$(SUITE)" $(CHECKDIR)/sbml-suite-out $(SBML_JOBS) $(SBML_TIMEOUT)

docs:
	$(RSCRIPT) -e 'roxygen2::roxygenise()'

gpu-pack:
	bash tools/gpu-check.sh pack

mutants: deps
	bash tools/mutants.sh

mutants-gpu:
	bash tools/mutants-gpu.sh build

MUT_N ?= 300
MUT_SEED ?= 1
MUT_JOBS ?= 1
mutants-auto:
	MUT_N=$(MUT_N) MUT_SEED=$(MUT_SEED) MUT_JOBS=$(MUT_JOBS) $(RSCRIPT) tools/mutants-auto.R run

clean:
	sh cleanup
	rm -rf $(CHECKDIR) $(LIB) $(PKG)_*.tar.gz demo-report
