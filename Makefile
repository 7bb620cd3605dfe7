# Each target does its own setup in a local virtual environment (.venv), so a fresh clone needs only python3.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
APP_STAMP := $(VENV)/.installed-app
STAMP := $(VENV)/.installed
LINT_STAMP := $(VENV)/.installed-lint

.PHONY: install demo test lint clean

$(APP_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	touch $(APP_STAMP)

# offloaddoctor in .venv; `source .venv/bin/activate` puts it on PATH (make cannot change its caller's shell).
install: $(APP_STAMP)
	@echo "offloaddoctor is installed in $(VENV). Put it on PATH in this shell with:"
	@echo "    source $(BIN)/activate"

# Diagnose a bundled real-format multi-rank log. Its OOM is an error finding, so offloaddoctor exits 1 here, as
# intended: that one exit code is reported and turned into success; any other failure still fails.
demo: $(APP_STAMP)
	@$(BIN)/offloaddoctor diagnose fixtures/oom-fragmentation-multirank/job.log; code=$$?; \
	if [ $$code -eq 1 ]; then echo; echo "exit 1: an error finding, as expected"; exit 0; fi; exit $$code

# The installed packages' bytecode, where `test` looks for it (PYTHONPYCACHEPREFIX hides what pip compiled beside
# them): compiled once here, as pip does at install, not again by each worker of each first run.
$(STAMP): $(APP_STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test]'
	PYTHONPYCACHEPREFIX=$(CURDIR)/build/pycache $(BIN)/python -m compileall -qq -j 0 $(VENV)/lib || true
	touch $(STAMP)

# On every core (pytest-xdist): about half the time on two cores. `pytest -p no:xdist` runs it in one process.
# Bytecode is cached under build/pycache for this run even where PYTHONDONTWRITEBYTECODE is set: each worker,
# and each interpreter a test starts, would otherwise compile every module it imports again (~12 % of the CPU).
# --dist loadgroup: tests marked xdist_group share one worker, and so what they compute once a process.
test: $(STAMP)
	PYTHONDONTWRITEBYTECODE= PYTHONPYCACHEPREFIX=$(CURDIR)/build/pycache $(BIN)/python -m pytest -n auto --dist loadgroup

# ruff (lint and format) and mypy at the versions pinned in pyproject.toml (the `lint` extra); configured there too.
$(LINT_STAMP): $(STAMP) pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[test,lint]'
	touch $(LINT_STAMP)

lint: $(LINT_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis build/pycache
