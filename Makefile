# The two commands: `make run` serves the portal, `make test` runs the whole suite.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
PORT ?= 8000
STAMP := $(VENV)/.installed

.PHONY: run test install test-install lint bench bench-maintenance clean-db browser-deps redis-deps test-external-db \
	worker beat install-semantic test-semantic

$(PY):
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "Python 3.11 is required ($(PYTHON) not found)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e ".[test]"
	@touch $(STAMP)

install: $(STAMP)

run: install
	$(PY) manage.py migrate --noinput
	$(PY) manage.py load_demo
	@TOKEN=$$($(PY) manage.py create_api_token --workspace acme --role editor --name make-run --replace 2>/dev/null | tail -n 1); \
	echo ""; \
	echo "  Portal:    http://127.0.0.1:$(PORT)/   log in as operator / acme-demo-pass"; \
	echo "             (also editor / acme-demo-pass and viewer / acme-demo-pass)"; \
	echo "  API docs:  http://127.0.0.1:$(PORT)/v1/docs/"; \
	echo "  API token (workspace acme, editor): $$TOKEN"; \
	echo "  Try:       curl -H \"Authorization: Bearer $$TOKEN\" http://127.0.0.1:$(PORT)/v1/workspaces/"; \
	echo ""
	DJANGO_DEBUG=true $(PY) manage.py runserver 127.0.0.1:$(PORT)

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

test: install browser-deps redis-deps
	$(PY) -m ruff check .
	$(PY) -m mypy
	$(PY) -m pytest -q

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
install-semantic: install
	$(PY) -m pip install --quiet "torch==2.13.0"
	$(PY) -m pip install --quiet -e ".[test,semantic]"

test-semantic: install-semantic
	$(PY) -m pytest -q tests/recall/test_semantic.py
	$(PY) bench/embedder_quality.py

test-external-db: install
	$(PY) tests/run_against_second_server.py

BENCH_SIZE ?= 100000
BENCH_LARGE ?= 20000
BENCH_LABEL ?= 100k
bench: install
	$(PY) -m pip install --quiet -e ".[test]"
	$(PY) bench/generate.py --memories $(BENCH_SIZE) --large-actor $(BENCH_LARGE) --label $(BENCH_LABEL)
	$(PY) bench/recall_bench.py --label $(BENCH_LABEL)
	$(PY) bench/update_readme.py

# Each sweep's preview and execute on the benchmark dataset (generated once, as for `make bench`).
bench-maintenance: install
	$(PY) -m pip install --quiet -e ".[test]"
	$(PY) bench/generate.py --memories $(BENCH_SIZE) --large-actor $(BENCH_LARGE) --label $(BENCH_LABEL)
	$(PY) bench/maintenance_bench.py --label $(BENCH_LABEL)

lint: install
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy

clean-db:
	rm -rf .pgdata
