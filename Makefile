# Every target installs what it needs into .venv first, so a fresh clone works.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test test-fast bench lint clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

# NameServer (9876) + broker (10911) in one process, store in ./data/store; Ctrl-C stops it
# cleanly.
run: $(STAMP)
	$(BIN)/pocketmq serve --store ./data/store

test: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy
	$(BIN)/python -m pytest -q

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow and not crash"

# The client benchmark compares with Redis Streams: Debian's redis-server, installed when missing.
BENCH_STAMP := $(VENV)/.installed-bench
$(BENCH_STAMP): $(STAMP)
	$(BIN)/pip install --quiet -e '.[bench]'
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	command -v redis-server >/dev/null || { apt-get update -qq && apt-get install -y -qq redis-server; }
	$(BIN)/python bench/store_bench.py
	$(BIN)/python bench/client_bench.py
	$(BIN)/python bench/delay_bench.py

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy

clean:
	rm -rf $(VENV) build dist src/*.egg-info
