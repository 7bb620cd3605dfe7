# Each target does its own setup in a local virtual environment (.venv), so a fresh clone needs only python3.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
LINT_STAMP := $(VENV)/.installed-lint

.PHONY: demo test lint clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

# Diagnose a bundled real-format multi-rank log (exit 1 = an error finding, as intended here).
demo: $(STAMP)
	-$(BIN)/offloaddoctor diagnose fixtures/oom-fragmentation-multirank/job.log

test: $(STAMP)
	$(BIN)/python -m pytest

# ruff (lint and format) and mypy at the versions pinned in pyproject.toml (the `lint` extra); configured there too.
$(LINT_STAMP): $(STAMP) pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[test,lint]'
	touch $(LINT_STAMP)

lint: $(LINT_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
