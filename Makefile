# Two entry points for newcomers: `make demo` and `make test` (`make lint` runs ruff and mypy;
# `make test-benchmarks` tests the benchmark scripts).
# Both create .venv on first use (python3, 3.10-3.12) with the newest tested set of packages
# (requirements/newest.txt) and reuse it afterwards. `make test-oldest` runs the suite on the oldest
# tested set (requirements/oldest.txt: torch 2.2.1, numpy 1.26) in .venv-oldest, with Python 3.10
# where there is one; CI runs both.
PYTHON ?= python3
# The first Python 3.10 that runs (a pyenv shim may exist without an active 3.10), else $(PYTHON).
OLDEST_PYTHON ?= $(or $(shell for p in python3.10 $$HOME/.pyenv/versions/3.10*/bin/python3.10; do \
	"$$p" -c '' >/dev/null 2>&1 && echo "$$p" && break; done),$(PYTHON))
VENV ?= .venv
OLDEST_VENV ?= .venv-oldest
PIP_VERSION := "pip>=23.1,<25"
export DGLBACKEND := pytorch
export PYTHONUNBUFFERED := 1
# Test processes (pytest-xdist, whole files per process): one per CPU core this process may use, at
# most 4 (each imports torch); one core, or `make test TEST_WORKERS=0`, runs the tests in one process.
TEST_WORKERS ?= $(shell $(PYTHON) -c 'import os; n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1; print(min(n, 4) if n > 1 else 0)' 2>/dev/null || echo 0)
PYTEST := -m pytest -q -n $(TEST_WORKERS) --dist loadfile

.PHONY: demo test test-benchmarks test-oldest lint venv venv-oldest clean-venv

# $(call install,VENV,CONSTRAINTS,PYTHON): create VENV with PYTHON and install the package with its
# test extra under the exact pins of CONSTRAINTS.
define install
	@test -x $(1)/bin/python || $(3) -m venv $(1)
	$(1)/bin/python -m pip install --quiet --upgrade $(PIP_VERSION)
	$(1)/bin/python -m pip install --quiet -c $(2) -e ".[test]"
	$(1)/bin/python -m pip check
	@touch $(1)/.installed-stamp
endef

venv: $(VENV)/.installed-stamp
venv-oldest: $(OLDEST_VENV)/.installed-stamp

$(VENV)/.installed-stamp: setup.cfg setup.py dgl_graphtx-graphbolt.pth pyproject.toml requirements/newest.txt
	$(call install,$(VENV),requirements/newest.txt,$(PYTHON))

$(OLDEST_VENV)/.installed-stamp: setup.cfg setup.py dgl_graphtx-graphbolt.pth pyproject.toml requirements/oldest.txt
	$(call install,$(OLDEST_VENV),requirements/oldest.txt,$(OLDEST_PYTHON))

demo: venv
	$(VENV)/bin/dgl-graphtx demo

test: venv
	$(VENV)/bin/python $(PYTEST)

# The tests of the benchmark scripts (tests/benchmarks/, marker `benchmarks`): not part of `make test`,
# which is about the library; CI runs them on the newest set.
test-benchmarks: venv
	$(VENV)/bin/python $(PYTEST) -m benchmarks tests/benchmarks

# ruff and mypy as configured in pyproject.toml, installed into .venv on first use (the lint extra).
lint: $(VENV)/.lint-stamp
	$(VENV)/bin/ruff check dgl_graphtx tests benchmarks
	$(VENV)/bin/mypy

$(VENV)/.lint-stamp: $(VENV)/.installed-stamp
	$(VENV)/bin/python -m pip install --quiet -c requirements/newest.txt -e ".[lint]"
	@touch $@

test-oldest: venv-oldest
	$(OLDEST_VENV)/bin/python $(PYTEST)

clean-venv:
	rm -rf $(VENV) $(OLDEST_VENV)
