# Two entry points for newcomers: `make demo` and `make test`.
# Both create .venv on first use (Python 3.11) and reuse it afterwards.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
export DGLBACKEND := pytorch
export PYTHONUNBUFFERED := 1

.PHONY: demo test venv clean-venv

venv: $(STAMP)

$(STAMP): setup.cfg pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip>=23.1,<25"
	$(BIN)/python -m pip install --quiet -e ".[test]"
	$(BIN)/python -m pip check
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/dgl-graphtx demo

test: $(STAMP)
	$(BIN)/python -m pytest -q

clean-venv:
	rm -rf $(VENV)
