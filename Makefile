# One obvious way to run everything. See README.md.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export KUBECONFIG := $(CURDIR)/.testenv/kubeconfig

.PHONY: all venv binaries cluster cluster-down lint typecheck unit integration test demo run bench clean

all: test

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,lint]'
	touch $@

venv: $(STAMP)

binaries: $(STAMP)
	$(PY) -m testenv.build

cluster: $(STAMP)
	$(PY) -m testenv.cluster up

cluster-down: $(STAMP)
	$(PY) -m testenv.cluster down

lint: $(STAMP)
	$(VENV)/bin/ruff check gitsync tests testenv bench
	$(VENV)/bin/ruff format --check gitsync tests testenv bench

typecheck: $(STAMP)
	$(VENV)/bin/mypy

unit: $(STAMP)
	$(PY) -m pytest -m 'not integration' tests

integration: cluster
	$(PY) -m pytest -m integration tests

# ruff, mypy, then every test; the control plane is built or reused first
test: lint typecheck cluster
	$(PY) -m pytest tests

demo: $(STAMP)
	$(PY) -m examples.demo

run: cluster
	$(PY) -m examples.run

bench: cluster
	$(PY) -m bench.run

clean: cluster-down
	rm -rf $(VENV) .testenv .mypy_cache .ruff_cache .pytest_cache
