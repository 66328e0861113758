# The two commands: `make run` serves the portal, `make test` runs the whole suite.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
PORT ?= 8000
STAMP := $(VENV)/.installed

.PHONY: run test install test-install lint bench clean-db browser-deps test-external-db

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

test: install browser-deps
	$(PY) -m ruff check .
	$(PY) -m mypy
	$(PY) -m pytest -q

test-external-db: install
	$(PY) tests/run_against_second_server.py

BENCH_SIZE ?= 100000
BENCH_LARGE ?= 20000
BENCH_LABEL ?= 100k
bench: install
	$(PY) -m pip install --quiet -e ".[test,bench]"
	$(PY) bench/generate.py --memories $(BENCH_SIZE) --large-actor $(BENCH_LARGE) --label $(BENCH_LABEL)
	$(PY) bench/recall_bench.py --label $(BENCH_LABEL)
	$(PY) bench/update_readme.py

lint: install
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy

clean-db:
	rm -rf .pgdata
