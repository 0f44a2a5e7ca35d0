# Developer entry points. `make test` is what CI runs (.ci/run).
#   make test     install missing Debian packages, build the tarball, R CMD check
#                 it (fails on any ERROR or WARNING), then run the tests again
#                 on a CPU-only build (SYSBIOGPU_CUDA=no)
#   make demo     install the package and render the demonstration report
#                 into demo-report/sysbioGPU-demo.html
#   make docs     regenerate man/ and NAMESPACE with roxygen2
#   make valgrind run the test suite under valgrind (CPU paths), after make install
#   make gpu-pack build for the GPU machine (see tools/gpu-check.sh)
#   make mutants  apply each one-line engine mutation of tools/mutants.txt, build
#                 CPU-only, run its test files; prints the kill rate (long)
R ?= R
RSCRIPT ?= Rscript
PKG := sysbioGPU
VERSION := $(shell sed -n 's/^Version: *//p' DESCRIPTION)
TARBALL := $(PKG)_$(VERSION).tar.gz
LIB := $(CURDIR)/.lib
CHECKDIR := $(CURDIR)/check

.PHONY: all deps build check test test-nocuda install demo docs valgrind gpu-pack mutants clean

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

test: check test-nocuda

install: deps
	mkdir -p $(LIB)
	$(R) CMD INSTALL --preclean -l $(LIB) .

demo: install
	R_LIBS=$(LIB) $(RSCRIPT) -e 'sysbioGPU::demoReport("demo-report")'

valgrind: install
	R_LIBS=$(LIB) $(R) -d "valgrind --leak-check=full --errors-for-leak-kinds=definite,possible --error-exitcode=1 --suppressions=tools/valgrind.supp" \
	  --vanilla -e 'testthat::test_dir("tests/testthat", package = "$(PKG)", load_package = "installed", stop_on_failure = TRUE)'

docs:
	$(RSCRIPT) -e 'roxygen2::roxygenise()'

mutants:
	bash tools/mutants.sh

gpu-pack:
	bash tools/gpu-check.sh pack

clean:
	sh cleanup
	rm -rf $(CHECKDIR) $(LIB) $(PKG)_*.tar.gz demo-report
