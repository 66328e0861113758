# The two commands: `make run` serves the portal, `make test` runs the whole suite.
# Debian's python3.11 where it can make a virtualenv: built with Debian's optimisations and
# linked statically, it runs the suite's Python 10-30% faster than a python3.11 built from
# source with a shared libpython (pyenv's, first on PATH on some machines). An existing
# .venv keeps the interpreter it was made with (remove it to change).
PYTHON ?= $(shell /usr/bin/python3.11 -c 'import ensurepip, venv' >/dev/null 2>&1 \
	&& echo /usr/bin/python3.11 || echo python3.11)
VENV := .venv
PY := $(VENV)/bin/python
PORT ?= 8000
# Python may keep the bytecode of what it compiles (git-ignored __pycache__): with
# PYTHONDONTWRITEBYTECODE set, every test process, server and worker the tests start compiled
# the project and rewrote the tests' assertions again (~10 s a test process).
unexport PYTHONDONTWRITEBYTECODE
# What is installed, one stamp per set, so nothing is reinstalled until pyproject.toml changes:
# serving needs the package alone; the tests, lint and benchmarks add the test extras.
SERVE_STAMP := $(VENV)/.installed-serve
TEST_STAMP := $(VENV)/.installed-test
SEMANTIC_STAMP := $(VENV)/.installed-semantic
LOAD_STAMP := $(VENV)/.installed-load

.PHONY: run serve test test-thorough shots install test-install lint bench bench-turns bench-maintenance bench-provenance bench-docs clean-db browser-deps \
	redis-deps test-external-db worker beat install-semantic test-semantic load

$(PY):
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "Python 3.11 is required ($(PYTHON) not found)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(SERVE_STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e .
	@touch $@

# The test extras come with the package itself, so they satisfy the serving stamp too; the
# Python client (clients/python) is installed beside it, so that its tests run in the suite.
$(TEST_STAMP): pyproject.toml clients/python/pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e ".[test]" -e ./clients/python
	@touch $(SERVE_STAMP) $@

install: $(SERVE_STAMP)

test-install: $(TEST_STAMP)

# Migrate, load the demo, print how to log in, serve until Ctrl-C (portal/management/commands/
# run_portal.py). `exec` so that the SIGTERM make passes on reaches the run, not a shell.
run: install
	DJANGO_DEBUG=true exec $(PY) manage.py run_portal --port $(PORT)

# Debian's headless Chromium for the browser tests (root installs it; others must have it).
browser-deps:
	@if ! command -v chromium >/dev/null 2>&1; then \
		if [ "$$(id -u)" = "0" ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
		else echo "Install Debian's chromium package to run the browser tests"; exit 1; fi; \
	fi

# Debian's redis-server for the worker tests (root installs it; others must have it).
redis-deps:
	@if ! command -v redis-server >/dev/null 2>&1; then \
		if [ "$$(id -u)" = "0" ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; \
		else echo "Install Debian's redis-server package to run the worker tests"; exit 1; fi; \
	fi

# The suite runs in TEST_WORKERS processes (pytest-xdist), each on its own throw-away
# database, with coverage; a worker that runs out of tests takes some of another's
# (worksteal: the last long tests do not leave one core idle). Three on two cores: the
# browser, Celery and server tests mostly wait on other processes, and a third worker keeps
# both cores busy meanwhile. The slowest tests, the count and the coverage are printed last.
TEST_WORKERS ?= 3
test: test-install browser-deps redis-deps
	$(PY) -m ruff check .
	$(PY) -m mypy
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist worksteal --durations=15 --cov --cov-report=
	@echo "Coverage: $$($(PY) -m coverage report --format=total --precision=2)% of the application's lines"

# The browser tests alone, each page they look at saved as tests/artifacts/<name>.png for a
# person to look at (make test takes none, but of a failed test).
shots: test-install browser-deps
	BROWSER_SHOTS=1 $(PY) -m pytest -q -n $(TEST_WORKERS) -m browser tests/browser
	@echo "Screenshots: tests/artifacts/"

# The suite with every property test's full count of examples (tests/properties.py) and every
# case of the API fuzz's coverage phase (tests/portal/test_api_fuzz.py): make test tries a
# third of each; run this before a release or after changing a domain rule or the API.
test-thorough:
	PROPERTY_EXAMPLES=full $(MAKE) test

# The production server: granian (portal/serve.py: SERVE_WORKERS workers, one request at a
# time each, keep-alive) with static files collected and served by WhiteNoise, DEBUG off, an
# access log without query strings; the embedded PostgreSQL unless DATABASE_URL is set. For a
# real deployment add DJANGO_PRODUCTION=true, DJANGO_SECRET_KEY and DJANGO_ALLOWED_HOSTS behind
# a TLS proxy (docs/deploy.md); SERVE_UDS=/path/web.sock serves on a Unix socket for that proxy
# instead of PORT. `make run` stays the zero-set-up demo.
SERVE_WORKERS ?= 2
SERVE_UDS ?=
serve: install
	$(PY) manage.py collectstatic --noinput --verbosity 0
	$(PY) manage.py migrate --noinput
	exec $(PY) -m portal.serve --workers $(SERVE_WORKERS) \
		$(if $(SERVE_UDS),--uds $(SERVE_UDS),--port $(PORT)) --access-log -

# Background tasks with a broker: CELERY_BROKER_URL=redis://127.0.0.1:6379/0 make worker
# (and make beat for the schedule). Without CELERY_BROKER_URL tasks run in the web process.
worker: install
	@test -n "$$CELERY_BROKER_URL" || { echo "Set CELERY_BROKER_URL=redis://host:6379/0"; exit 1; }
	$(PY) -m celery -A portal worker --loglevel INFO

beat: install
	@test -n "$$CELERY_BROKER_URL" || { echo "Set CELERY_BROKER_URL=redis://host:6379/0"; exit 1; }
	$(PY) -m celery -A portal beat --loglevel INFO --schedule .celerybeat-schedule

# The semantic embedder (RECALL_EMBEDDER=semantic): PyTorch's CPU build first (a plain
# `torch` would pull a CUDA build of several GB), then the extra.
$(SEMANTIC_STAMP): pyproject.toml | $(TEST_STAMP)
	$(PY) -m pip install --quiet "torch==2.13.0"
	$(PY) -m pip install --quiet -e ".[test,semantic]"
	@touch $@

install-semantic: $(SEMANTIC_STAMP)

test-semantic: install-semantic
	$(PY) -m pytest -q tests/recall/test_semantic.py
	$(PY) bench/embedder_quality.py

test-external-db: test-install
	$(PY) tests/run_against_second_server.py

# Benchmarks write their results to bench/results/latest/ (git-ignored). UPDATE_DOCS=1, or
# `make bench-docs` after a run, copies them to bench/results/ and rewrites the tables of
# docs/performance.md from there.
BENCH_SIZE ?= 100000
BENCH_LARGE ?= 20000
BENCH_LABEL ?= 100k
# The datasets' vectors: minilm-onnx (the portal's default embedder, ~4 ms a memory to
# generate) or cluster (bench/embedder.py, instant). A dataset keeps the embedder it was made
# with: generating one label with another is refused.
BENCH_EMBEDDER ?= minilm-onnx
BENCH_GENERATE = $(PY) bench/generate.py --memories $(BENCH_SIZE) --large-actor $(BENCH_LARGE) \
	--label $(BENCH_LABEL) --embedder $(BENCH_EMBEDDER)
UPDATE_DOCS ?=
bench: test-install
	$(BENCH_GENERATE)
	$(PY) bench/recall_bench.py --label $(BENCH_LABEL)
	$(if $(filter 1,$(UPDATE_DOCS)),$(PY) bench/update_docs.py recall-$(BENCH_LABEL).json)

# A session of 20 and of 200 turns on the benchmark dataset: each turn's context assembly
# against a recall of the same message in the same run, and the statements a turn runs.
BENCH_TURNS ?= 20 200
bench-turns: test-install
	$(BENCH_GENERATE)
	$(PY) bench/turns_bench.py --label $(BENCH_LABEL) --turns $(BENCH_TURNS)
	$(if $(filter 1,$(UPDATE_DOCS)),$(PY) bench/update_docs.py turns-$(BENCH_LABEL).json)

# Each sweep's preview and execute on the benchmark dataset (generated once, as for `make bench`).
bench-maintenance: test-install
	$(BENCH_GENERATE)
	$(PY) bench/maintenance_bench.py --label $(BENCH_LABEL)
	$(if $(filter 1,$(UPDATE_DOCS)),$(PY) bench/update_docs.py maintenance-$(BENCH_LABEL).json)

# The provenance readers (both directions) and the append at 1M assembled events, on a
# dataset of its own (bench/data/pg-provenance-1m, generated once in ~3-4 minutes).
PROVENANCE_EVENTS ?= 1000000
bench-provenance: test-install
	$(PY) bench/provenance_bench.py --events $(PROVENANCE_EVENTS)
	$(if $(filter 1,$(UPDATE_DOCS)),$(PY) bench/update_docs.py 'provenance-*.json')

# The load scenario (bench/load/): locust, headless, against granian as `make serve` runs it,
# on a throw-away embedded PostgreSQL with the demo loaded; never the demo's .pgdata. Writes
# bench/results/latest/load.json. locust comes with the `load` extra, not the test extras.
LOAD_USERS ?= 50
LOAD_DURATION ?= 2m
LOAD_SPAWN_RATE ?= 5
$(LOAD_STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e ".[load]"
	@touch $(SERVE_STAMP) $@

load: $(LOAD_STAMP)
	exec $(PY) bench/load/run_load.py --users $(LOAD_USERS) --duration $(LOAD_DURATION) \
		--spawn-rate $(LOAD_SPAWN_RATE) --workers $(SERVE_WORKERS)

bench-docs: | $(PY)
	$(PY) bench/update_docs.py

lint: test-install
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy

clean-db:
	rm -rf .pgdata
