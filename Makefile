# One command runs what CI runs: `make test` (environment + `make check`).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP_RUN := $(VENV)/.installed-run
STAMP_DEV := $(VENV)/.installed-dev

.PHONY: demo test check check-fast lint types contract pytest pytest-fast browser clients bench clean package docs

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP_RUN): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(STAMP_DEV): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev,server,spark]'
	touch $@ $(STAMP_RUN)

# pyCANON, the test oracle of the anonymity checkers (tests/anonymity/test_pycanon.py). It pins
# exact versions of numpy, pandas, scipy and six more packages that conflict with ours; the module
# the tests use (pycanon.anonymity) imports only numpy and pandas and runs with our versions, so it
# is installed without its dependencies (pip may later list the unmet pins; they are expected).
PYCANON := pycanon==1.3.6
STAMP_ORACLES := $(VENV)/.installed-oracles

$(STAMP_ORACLES): $(STAMP_DEV)
	$(BIN)/python -m pip install --quiet --no-deps $(PYCANON)
	touch $@

STAMP_SERVER := $(VENV)/.installed-server

$(STAMP_SERVER): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[server]'
	touch $@ $(STAMP_RUN)

## demo: set up the environment and start the gateway and web console on the synthetic census
## (the guided walk-through in the terminal is `.venv/bin/dalenius demo`)
# `make demo PORT=8080 PG_PORT=6543`: other ports (without PORT the demo takes 8000, or the next
# free one).
PORT ?=
PG_PORT ?= 5433

demo: $(STAMP_SERVER)
	$(BIN)/dalenius serve --demo dalenius-demo $(if $(PORT),--port $(PORT)) --pg-port $(PG_PORT)

## test: set up the environment with the dev extras, the test oracles (and the browser the console
## test drives) and run everything CI runs; oracle tests fail here, rather than skip, without them
test: $(STAMP_DEV) $(STAMP_ORACLES) browser clients
	DALENIUS_REQUIRE_ORACLES=1 $(MAKE) check

check: lint types contract docs pytest

## check-fast: the edit-test loop: lint, types, contracts and the tests that need no PostgreSQL,
## no Spark and no long run (everything else still runs in `make check`)
check-fast: lint types contract pytest-fast

## browser: Debian's Chromium for the console's end-to-end test, installed once with apt
browser:
	@test -x /usr/bin/chromium || { \
	  echo "installing Chromium from Debian's packages (the console test drives it)"; \
	  apt-get update -qq && apt-get install -y -qq chromium >/dev/null; }

## clients: the PostgreSQL clients the wire listener's tests drive — psql and the JDBC driver
## from Debian's packages (Java 17 runs it), node-postgres from npm (pinned by its lock file)
CLIENTS := tests/server/clients
clients: $(CLIENTS)/node_modules/.package-lock.json
	@{ command -v psql >/dev/null && test -f /usr/share/java/postgresql.jar; } || { \
	  echo "installing psql and the PostgreSQL JDBC driver from Debian's packages"; \
	  apt-get update -qq && apt-get install -y -qq postgresql-client libpostgresql-jdbc-java >/dev/null; }

$(CLIENTS)/node_modules/.package-lock.json: $(CLIENTS)/package.json $(CLIENTS)/package-lock.json
	npm ci --prefix $(CLIENTS) --no-audit --no-fund --silent

lint:
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

types:
	$(BIN)/mypy

contract:
	$(BIN)/lint-imports

# The tests run in two worker processes (pytest-xdist): much of the suite waits on a browser, a
# JVM, PostgreSQL or a gateway's subprocess, and a second worker fills those waits, so the whole
# suite takes about three quarters of one process's time on 2 cores (18 min against 24 min, the
# same 4,060 tests, the machine otherwise idle). Each test stays independent of
# the others (PostgreSQL schemas, ports and files are per process); `PYTEST_WORKERS=0` runs them
# in this process, for a debugger. The Spark tests form one group (`--dist loadgroup`, marked in
# tests/conftest.py) that one worker runs: one JVM's start-up and warm-up instead of two, while
# the other worker runs the rest.
PYTEST_WORKERS ?= 2

pytest:
	$(BIN)/pytest -q -n $(PYTEST_WORKERS) --dist loadgroup --durations=15

pytest-fast:
	$(BIN)/pytest -q -m "not spark and not postgres and not slow and not browser"

bench: $(STAMP_DEV)
	$(BIN)/python bench/noise.py

## package: build the wheel and sdist (python -m build), install the wheel with its base
## dependencies into a fresh virtualenv (pip's cache reused) and run the README's quick-start with it
PKG_VENV := build/wheel-venv
package: $(STAMP_DEV)
	rm -rf dist $(PKG_VENV)
	$(BIN)/python -m build --outdir dist . >/dev/null
	$(PYTHON) -m venv $(PKG_VENV)
	$(PKG_VENV)/bin/python -m pip install --quiet dist/*.whl
	$(PKG_VENV)/bin/python .ci/quickstart.py . dist/*.whl

## docs: the documentation site from docs/ (MkDocs Material, API reference from the docstrings)
## in strict mode: a broken link or anchor fails; the site is written to build/site
docs: $(STAMP_DEV)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir build/site

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build src/*.egg-info
