# One obvious way to run everything. See README.md.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export KUBECONFIG := $(CURDIR)/.testenv/kubeconfig

.PHONY: all venv binaries chromium sshd peers bundle crd-schema cluster cluster-down lint typecheck unit integration faults fuzz mutation test test-sharded demo run bench soak image clean

all: test

# every package at the version of the locks: the runtime dependencies as the image installs
# them, the tools as the code was checked with (a release upstream made after the locks
# must not change what a fresh machine runs)
$(STAMP): pyproject.toml requirements.lock requirements-dev.lock
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --constraint requirements.lock \
		--constraint requirements-dev.lock -e '.[test,lint,bench]'
	touch $@

venv: $(STAMP)

# the drift page's browser test drives Debian's Chromium (Playwright's own download is not used)
# (root installs it directly; anyone else through sudo, as on a CI runner)
chromium:
	@test -x /usr/bin/chromium || { SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
		$$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core; }

# the SSH transport tests run Debian's OpenSSH sshd on loopback, as a child of the test
sshd:
	@test -x /usr/sbin/sshd || { SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
		$$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -qq --no-install-recommends openssh-server; }

binaries: $(STAMP)
	$(PY) -m testenv.build

# helm, actionlint, the OLM bundle checker, OLM's olm-operator and olmsteps, built from
# testenv/peers/ like the control plane
peers: $(STAMP)
	$(PY) -m testenv.peers

# gitsync's image from the Dockerfile, with buildah (no Docker engine) over a Debian
# stand-in for its Python base; reused while its inputs are unchanged (testenv/image.py)
image: $(STAMP)
	$(PY) -m testenv.image

# bundle/ (the OLM bundle) generated from deploy/ and crds/
bundle: $(STAMP)
	$(PY) -m release.bundle

# gitsync/model/crd_schema.py, the CRD's schema as the checker reads it, generated from crds/
crd-schema: $(STAMP)
	$(PY) -m release.crd_schema

cluster: $(STAMP)
	$(PY) -m testenv.cluster up

cluster-down: $(STAMP)
	$(PY) -m testenv.cluster down

lint: $(STAMP)
	$(VENV)/bin/ruff check gitsync tests testenv bench release
	$(VENV)/bin/ruff format --check gitsync tests testenv bench release
	$(VENV)/bin/lint-imports

typecheck: $(STAMP)
	$(VENV)/bin/mypy

unit: $(STAMP)
	$(PY) -m pytest -m 'not integration' tests

integration: cluster chromium sshd image
	$(PY) -m pytest -m integration tests

# crashes and outages at full counts (5 API server kills, 20 daemon kills, ...) against a
# private control plane of their own; `make test` runs a short version of each
faults: $(STAMP)
	GITSYNC_FAULTS=long $(PY) -m pytest -m faults -s tests/faults

# the property tests (tests/fuzz) with a long budget: random, GITSYNC_FUZZ_EXAMPLES per
# property (3000 by default, about 12 minutes); `make test` runs 150 each, derandomized
fuzz: $(STAMP)
	GITSYNC_FUZZ=long $(PY) -m pytest -p no:cacheprovider --hypothesis-show-statistics tests/fuzz

# mutation testing of the pure core (engine/, model/, reconcile/workqueue.py,
# gitops/increment.py, source/sparse.py): each module's one-keystroke mutants
# against its unit and fuzz tests, scores and survivors to stdout and
# .mutation/; long, so not part of `make test`. One module: MODULES=gitsync/engine/prune.py
MODULES ?=
mutation: $(STAMP)
	$(PY) -m testenv.mutation $(MODULES)

# ruff, mypy, then every test; the control plane and the packaging tools are built or reused
# first; then the daemons' own tests again, each daemon the one member of a sharded instance
test: lint typecheck cluster peers chromium sshd image
	$(PY) -m pytest tests
	GITSYNC_TEST_SHARDING=1 $(PY) -m pytest -m integration $(SHARDED_TESTS)

# the integration tests of the daemon that `make test` runs twice: as is, and sharded
SHARDED_TESTS := $(addprefix tests/integration/,test_failures.py test_sync.py test_verify.py \
	test_pin.py test_ui.py test_ha.py test_notify.py)

# every integration test with every daemon sharded (one member: it must behave as one leader)
test-sharded: cluster peers chromium sshd
	GITSYNC_TEST_SHARDING=1 $(PY) -m pytest -m integration tests/integration

demo: $(STAMP)
	$(PY) -m examples.demo

run: cluster
	$(PY) -m examples.run

# gitsync next to kubectl and Flux (built by peers); see bench/run.py for the knobs
bench: cluster peers
	$(PY) -m bench.run

# an hour of churn on a private control plane, sampled each minute (not in `make test`);
# GITSYNC_SOAK_MINUTES and GITSYNC_SOAK_APPS set its length and size; see bench/soak.py
soak: binaries
	$(PY) -m bench.soak

clean: cluster-down
	rm -rf $(VENV) .testenv .mypy_cache .ruff_cache .pytest_cache .import_linter_cache
