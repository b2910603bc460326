# One command runs what CI runs: `make test` (environment + `make check`).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP_RUN := $(VENV)/.installed-run
STAMP_DEV := $(VENV)/.installed-dev

.PHONY: demo test check lint types contract pytest bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP_RUN): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(STAMP_DEV): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev,server,spark]'
	touch $@ $(STAMP_RUN)

STAMP_SERVER := $(VENV)/.installed-server

$(STAMP_SERVER): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[server]'
	touch $@ $(STAMP_RUN)

## demo: set up the environment and start the gateway and web console on the synthetic census
## (the guided walk-through in the terminal is `.venv/bin/dalenius demo`)
demo: $(STAMP_SERVER)
	$(BIN)/dalenius serve --demo dalenius-demo

## test: set up the environment with the dev extras and run everything CI runs
test: $(STAMP_DEV)
	$(MAKE) check

check: lint types contract pytest

lint:
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

types:
	$(BIN)/mypy

contract:
	$(BIN)/lint-imports

pytest:
	$(BIN)/pytest -q

bench: $(STAMP_DEV)
	$(BIN)/python bench/noise.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build src/*.egg-info
